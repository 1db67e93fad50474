#include "tests/support/run_command.h"

#include <cerrno>
#include <chrono>
#include <stdexcept>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/child_process.h"

namespace gpuguard::testing {
namespace {

pid_t spawn(const std::vector<std::string>& argv, int run_as_uid, int* out_fd, int* err_fd) {
    int out[2], err[2];
    if (pipe2(out, O_CLOEXEC) != 0 || pipe2(err, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid < 0) throw std::runtime_error("fork");
    if (pid == 0) {
        dup2(out[1], STDOUT_FILENO);
        dup2(err[1], STDERR_FILENO);
        if (run_as_uid >= 0 && (setgid(run_as_uid) != 0 || setuid(run_as_uid) != 0)) _exit(126);
        // A test killed by CTest's timeout takes its agents with it (SIGTERM:
        // they detach their programs), instead of leaving them loaded for
        // the next tests. Set after setuid, which would clear it.
        end_with_parent(parent, SIGTERM);
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

}  // namespace

pid_t spawn_with_output(const std::vector<std::string>& argv, int out_fd, int err_fd) {
    std::vector<char*> args;
    for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    const pid_t parent = getpid();
    const pid_t pid = fork();
    if (pid == 0) {
        end_with_parent(parent, SIGTERM);
        dup2(out_fd, STDOUT_FILENO);
        dup2(err_fd, STDERR_FILENO);
        execv(args[0], args.data());
        _exit(127);
    }
    return pid;
}

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
    if (pipe2(wake_fds_, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
    pid_ = spawn(argv, run_as_uid, &stdout_fd_, &stderr_fd_);
    reader_ = std::thread([this] { read_output(); });
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
    stop_reader(/*drain=*/false);
    close(wake_fds_[0]);
    close(wake_fds_[1]);
}

void Subprocess::read_output() {
    char buffer[65536];
    while (true) {
        pollfd fds[3] = {
            {stdout_fd_, POLLIN, 0}, {stderr_fd_, POLLIN, 0}, {wake_fds_[0], POLLIN, 0}};
        if (stdout_fd_ < 0 && stderr_fd_ < 0) return;
        if (poll(fds, 3, -1) < 0) {
            if (errno == EINTR) continue;
            return;
        }
        if (fds[2].revents) return;
        for (int i = 0; i < 2; ++i) {
            int& fd = i == 0 ? stdout_fd_ : stderr_fd_;
            if (fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            const ssize_t n = read(fd, buffer, sizeof(buffer));
            if (n < 0 && errno == EINTR) continue;
            std::lock_guard lock(mutex_);
            if (n > 0) {
                (i == 0 ? stdout_buffer_ : stderr_all_).append(buffer, static_cast<size_t>(n));
            } else {  // EOF (or an error, which ends the output as well)
                close(fd);
                fd = -1;
                (i == 0 ? stdout_open_ : stderr_open_) = false;
            }
            changed_.notify_all();
        }
    }
}

void Subprocess::stop_reader(bool drain) {
    if (!reader_.joinable()) return;
    if (drain) {
        // A grandchild that inherited the pipes could hold them open: wait
        // for EOF a bounded time only.
        std::unique_lock lock(mutex_);
        changed_.wait_for(lock, std::chrono::seconds(5),
                          [&] { return !stdout_open_ && !stderr_open_; });
    }
    const char byte = 0;
    if (write(wake_fds_[1], &byte, 1) < 0) {
        // The pipe is ours and empty: a failed write leaves the reader to
        // end at EOF instead.
    }
    reader_.join();
    if (stdout_fd_ >= 0) close(stdout_fd_);
    if (stderr_fd_ >= 0) close(stderr_fd_);
    stdout_fd_ = stderr_fd_ = -1;
    std::lock_guard lock(mutex_);
    stdout_open_ = stderr_open_ = false;
    changed_.notify_all();
}

std::optional<std::string> Subprocess::read_stdout_line(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    changed_.wait_for(lock, timeout, [&] {
        return stdout_buffer_.find('\n') != std::string::npos || !stdout_open_;
    });
    const auto newline = stdout_buffer_.find('\n');
    if (newline == std::string::npos) return std::nullopt;
    std::string line = stdout_buffer_.substr(0, newline);
    stdout_buffer_.erase(0, newline + 1);
    return line;
}

bool Subprocess::wait_for_stderr(const std::string& text, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] {
        return stderr_all_.find(text) != std::string::npos || !stderr_open_;
    }) && stderr_all_.find(text) != std::string::npos;
}

std::string Subprocess::stderr_text() const {
    std::lock_guard lock(mutex_);
    return stderr_all_;
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
            stop_reader(/*drain=*/true);  // collect the rest of the output
            return decode_status(status);
        }
        if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

}  // namespace gpuguard::testing
