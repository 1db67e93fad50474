#include "tests/support/run_command.h"

#include <chrono>
#include <stdexcept>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace gpuguard::testing {
namespace {

pid_t spawn(const std::vector<std::string>& argv, int run_as_uid, int* out_fd, int* err_fd) {
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork");
    if (pid == 0) {
        dup2(out[1], STDOUT_FILENO);
        dup2(err[1], STDERR_FILENO);
        if (run_as_uid >= 0 && (setgid(run_as_uid) != 0 || setuid(run_as_uid) != 0)) _exit(126);
        std::vector<char*> args;
        for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
        args.push_back(nullptr);
        execv(args[0], args.data());
        _exit(127);
    }
    close(out[1]);
    close(err[1]);
    *out_fd = out[0];
    *err_fd = err[0];
    return pid;
}

int decode_status(int status) {
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Appends what `fd` has to `sink`; returns false at EOF.
bool drain(int fd, std::string& sink) {
    char buffer[4096];
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n > 0) sink.append(buffer, static_cast<size_t>(n));
    return n > 0 || (n < 0 && errno == EINTR);
}

}  // namespace

CommandResult run_command(const std::vector<std::string>& argv, std::chrono::milliseconds timeout,
                          int run_as_uid) {
    Subprocess process(argv, run_as_uid);
    CommandResult result;
    std::string line;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (auto next =
               process.read_stdout_line(std::chrono::duration_cast<std::chrono::milliseconds>(
                   deadline - std::chrono::steady_clock::now()))) {
        result.stdout_text += *next + "\n";
        if (std::chrono::steady_clock::now() >= deadline) break;
    }
    const auto code = process.stop(0, std::chrono::duration_cast<std::chrono::milliseconds>(
                                          deadline - std::chrono::steady_clock::now()));
    result.exit_code = code.value_or(-1);
    result.stderr_text = process.stderr_text();
    return result;
}

Subprocess::Subprocess(const std::vector<std::string>& argv, int run_as_uid) {
    pid_ = spawn(argv, run_as_uid, &stdout_fd_, &stderr_fd_);
}

Subprocess::~Subprocess() {
    if (!exited_ && pid_ > 0) {
        // SIGTERM first: an agent left running by a failed test then exits
        // cleanly (detaches, removes its pins) instead of leaving pinned
        // programs on the host; SIGKILL if it does not within 5 s.
        kill(pid_, SIGTERM);
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
        while (waitpid(pid_, nullptr, WNOHANG) == 0) {
            if (std::chrono::steady_clock::now() >= deadline) {
                kill(pid_, SIGKILL);
                waitpid(pid_, nullptr, 0);
                break;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
    }
    if (stdout_fd_ >= 0) close(stdout_fd_);
    if (stderr_fd_ >= 0) close(stderr_fd_);
}

void Subprocess::pump(std::chrono::milliseconds timeout) {
    pollfd fds[2] = {{stdout_fd_, POLLIN, 0}, {stderr_fd_, POLLIN, 0}};
    if (poll(fds, 2, static_cast<int>(std::max<int64_t>(0, timeout.count()))) <= 0) return;
    if (stdout_fd_ >= 0 && (fds[0].revents & (POLLIN | POLLHUP)) &&
        !drain(stdout_fd_, stdout_buffer_)) {
        close(stdout_fd_);
        stdout_fd_ = -1;
    }
    if (stderr_fd_ >= 0 && (fds[1].revents & (POLLIN | POLLHUP)) &&
        !drain(stderr_fd_, stderr_all_)) {
        close(stderr_fd_);
        stderr_fd_ = -1;
    }
}

std::optional<std::string> Subprocess::read_stdout_line(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
        const auto newline = stdout_buffer_.find('\n');
        if (newline != std::string::npos) {
            std::string line = stdout_buffer_.substr(0, newline);
            stdout_buffer_.erase(0, newline + 1);
            return line;
        }
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0 || (stdout_fd_ < 0 && stderr_fd_ < 0)) return std::nullopt;
        if (stdout_fd_ < 0) return std::nullopt;
        pump(std::min(left, std::chrono::milliseconds(100)));
    }
}

bool Subprocess::wait_for_stderr(const std::string& text, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (stderr_all_.find(text) == std::string::npos) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0 || stderr_fd_ < 0) return false;
        pump(std::min(left, std::chrono::milliseconds(100)));
    }
    return true;
}

std::optional<int> Subprocess::stop(int signo, std::chrono::milliseconds timeout) {
    if (exited_) return std::nullopt;
    if (signo != 0) kill(pid_, signo);
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    while (true) {
        const pid_t reaped = waitpid(pid_, &status, WNOHANG);
        if (reaped == pid_) {
            exited_ = true;
            // Collect the rest of the output.
            while (stdout_fd_ >= 0 || stderr_fd_ >= 0) pump(std::chrono::milliseconds(100));
            return decode_status(status);
        }
        if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
        pump(std::chrono::milliseconds(20));
    }
}

}  // namespace gpuguard::testing
