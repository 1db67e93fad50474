// The I/O worker's requests (start_io_worker), shared by the worker forked
// from a test and gg_test_io_worker, the same worker as a program of its own:
// a benign process that is no fork of the test binary (whose miner strings
// YARA knows) and so is judged on what it does alone.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tests/support/child_process.h"

namespace gpuguard::testing {

// Carries out `request` (see IoWorkerOptions) in the worker process: 0 or
// an errno. Its sockets live in the calling process, one worker per process.
int io_worker_request(const IoWorkerOptions& options, char request);

// `options` as gg_test_io_worker's arguments (after argv[0]), and back;
// nullopt for arguments that are not eight.
std::vector<std::string> io_worker_args(const IoWorkerOptions& options);
std::optional<IoWorkerOptions> io_worker_options(const std::vector<std::string>& args);

// gg_test_io_worker's descriptors: requests in, answers out.
inline constexpr int kIoWorkerRequestFd = 3;
inline constexpr int kIoWorkerAnswerFd = 4;

}  // namespace gpuguard::testing
