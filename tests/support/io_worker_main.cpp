// gg_test_io_worker: start_io_worker's worker as a program of its own
// (IoWorkerOptions::program). Arguments: io_worker_args(); one byte a
// request on fd 3, each answer (an int) on fd 4, the first one (0) once it
// runs.
#include <string>
#include <vector>

#include <unistd.h>

#include "tests/support/io_worker.h"

int main(int argc, char** argv) {
    using namespace gpuguard::testing;
    const auto options = io_worker_options(std::vector<std::string>(argv + 1, argv + argc));
    if (!options) return 2;
    int result = 0;
    if (write(kIoWorkerAnswerFd, &result, sizeof(result)) != sizeof(result)) return 3;  // ready
    char request = 0;
    while (read(kIoWorkerRequestFd, &request, 1) == 1) {
        result = io_worker_request(*options, request);
        if (write(kIoWorkerAnswerFd, &result, sizeof(result)) != sizeof(result)) return 3;
    }
    return 0;
}
