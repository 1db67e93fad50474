// Starting gpuguard (or any command) from tests, with its output captured.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <sys/types.h>

namespace gpuguard::testing {

struct CommandResult {
    int exit_code = -1;  // 128 + signal when killed
    std::string stdout_text;
    std::string stderr_text;
};

// Runs `argv` to completion (at most `timeout`, then SIGKILL). With
// `run_as_uid` >= 0 the child drops to that uid/gid (and so every capability) first.
CommandResult run_command(const std::vector<std::string>& argv,
                          std::chrono::milliseconds timeout = std::chrono::seconds(60),
                          int run_as_uid = -1);

// Starts `argv` with stdout on `out_fd` and stderr on `err_fd`, for tests of
// output that nobody reads (Subprocess always reads both). The child gets
// SIGTERM if the test process dies; the caller reaps it. Its pid, or -1.
pid_t spawn_with_output(const std::vector<std::string>& argv, int out_fd, int err_fd);

// A started command whose output is read line by line while it runs. A
// thread reads both pipes from the start, whatever the test is doing: a
// child that writes more than a pipe holds (an agent printing detections
// while the test fetches its status page) never blocks on its output.
class Subprocess {
  public:
    explicit Subprocess(const std::vector<std::string>& argv, int run_as_uid = -1);
    ~Subprocess();  // SIGTERMs (then SIGKILLs) and reaps a child still running
    Subprocess(const Subprocess&) = delete;
    Subprocess& operator=(const Subprocess&) = delete;

    pid_t pid() const { return pid_; }

    // Next complete stdout line, waiting up to `timeout`.
    std::optional<std::string> read_stdout_line(std::chrono::milliseconds timeout);
    // Waits until a stderr line contains `text`; returns false on timeout or EOF.
    bool wait_for_stderr(const std::string& text, std::chrono::milliseconds timeout);
    // For `gpuguard run`: waits for its "[agent] ready" line, logged once every
    // part is started. A bare "ready" would already match the earlier
    // "... already holding a GPU" line and start a test while the agent is
    // still opening its journal.
    // GPUGUARD_TEST_START_TIMEOUT_S raises `timeout` where start-up is slow
    // but not what is measured (vmtests: the whole agent under TCG emulation
    // takes 30 s and more to load its programs and compile its rules).
    bool wait_for_agent_ready(std::chrono::milliseconds timeout) {
        if (const char* floor_s = std::getenv("GPUGUARD_TEST_START_TIMEOUT_S")) {
            timeout = std::max<std::chrono::milliseconds>(
                timeout, std::chrono::seconds(std::strtol(floor_s, nullptr, 10)));
        }
        return wait_for_stderr("[agent] ready", timeout);
    }

    // Sends `signo` and waits up to `timeout` for the exit; returns the exit
    // code. The output written before the exit is then all read.
    std::optional<int> stop(int signo, std::chrono::milliseconds timeout);

    // Everything the child wrote to stderr so far.
    std::string stderr_text() const;

  private:
    void read_output();            // the reader thread
    void stop_reader(bool drain);  // ends it (after EOF on both pipes when `drain`) and joins

    pid_t pid_ = -1;
    int stdout_fd_ = -1;
    int stderr_fd_ = -1;
    int wake_fds_[2] = {-1, -1};  // a byte on [1] ends the reader
    bool exited_ = false;
    mutable std::mutex mutex_;
    std::condition_variable changed_;  // more output, or a pipe closed
    std::string stdout_buffer_;        // not yet returned as lines
    std::string stderr_all_;
    bool stdout_open_ = true;
    bool stderr_open_ = true;
    std::thread reader_;
};

}  // namespace gpuguard::testing
