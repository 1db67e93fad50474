#include "tests/support/child_process.h"

#include <stdexcept>

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace gpuguard::testing {

pid_t run_in_child(const std::string& comm, const std::function<int()>& body, int* exit_code) {
    const pid_t child = fork();
    if (child < 0) throw std::runtime_error("fork failed");
    if (child == 0) {
        prctl(PR_SET_NAME, comm.c_str(), 0, 0, 0);
        _exit(body());
    }
    int status = 0;
    while (waitpid(child, &status, 0) < 0) {
    }
    if (exit_code) *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return child;
}

RequestChild::RequestChild(std::function<int(char)> handler, std::function<void()> setup) {
    if (pipe(requests_) != 0 || pipe(answers_) != 0) return;
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
        close(requests_[1]);
        close(answers_[0]);
        if (setup) setup();
        int result = 0;
        (void)!write(answers_[1], &result, sizeof(result));  // ready
        char request = 0;
        while (read(requests_[0], &request, 1) == 1) {
            result = handler(request);
            (void)!write(answers_[1], &result, sizeof(result));
        }
        _exit(0);
    }
    close(requests_[0]);
    close(answers_[1]);
    int ready = -1;
    (void)!read(answers_[0], &ready, sizeof(ready));
}

RequestChild::~RequestChild() {
    close(requests_[1]);
    close(answers_[0]);
    if (pid_ <= 0 || reaped_) return;
    kill(pid_, SIGKILL);  // our own child
    waitpid(pid_, nullptr, 0);
}

int RequestChild::ask(char request) {
    int result = -1;
    if (write(requests_[1], &request, 1) != 1) return -1;
    if (read(answers_[0], &result, sizeof(result)) != sizeof(result)) return -1;
    return result;
}

std::optional<int> RequestChild::try_reap() {
    if (!reaped_ && waitpid(pid_, &status_, WNOHANG) == pid_) reaped_ = true;
    if (!reaped_) return std::nullopt;
    return status_;
}

ChildReaper::~ChildReaper() {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
}

}  // namespace gpuguard::testing
