#include "tests/support/child_process.h"

#include <cstdint>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/io_worker.h"

namespace gpuguard::testing {

void end_with_parent(pid_t parent, int signo) {
    prctl(PR_SET_PDEATHSIG, signo, 0, 0, 0);
    if (getppid() != parent) _exit(125);
}

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

bool drop_dac_capabilities_in_this_thread() {
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct data[2]{};
    if (syscall(SYS_capget, &header, data) != 0) return false;
    for (int cap : {CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH}) data[0].effective &= ~(1u << cap);
    return syscall(SYS_capset, &header, data) == 0;
}

pid_t spawn_process(const std::string& exe, const std::vector<std::string>& argv,
                    const std::string& cwd, const std::vector<std::string>& env) {
    // Everything the child needs is made before fork().
    std::vector<char*> args, envp;
    for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    for (const auto& entry : env) envp.push_back(const_cast<char*>(entry.c_str()));
    envp.push_back(nullptr);
    int status_pipe[2];
    if (pipe2(status_pipe, O_CLOEXEC) != 0) return -1;
    const pid_t parent = getpid();
    const pid_t child = fork();
    if (child < 0) return -1;
    if (child == 0) {
        close(status_pipe[0]);
        end_with_parent(parent, SIGKILL);
        int error = 0;
        if (chdir(cwd.c_str()) != 0) {
            error = errno;
        } else {
            execve(exe.c_str(), args.data(), envp.data());
            error = errno;
        }
        (void)!write(status_pipe[1], &error, sizeof(error));
        _exit(127);
    }
    close(status_pipe[1]);
    int error = 0;
    ssize_t n;
    while ((n = read(status_pipe[0], &error, sizeof(error))) < 0 && errno == EINTR) {
    }
    close(status_pipe[0]);
    if (n > 0) {  // the exec failed: the pipe carried its errno
        int status = 0;
        waitpid(child, &status, 0);
        errno = error;
        return -1;
    }
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

RequestChild::RequestChild(const std::string& program, const std::string& comm,
                           const std::vector<std::string>& args) {
    // Its comm is the name it is exec'd by: a link named `comm` to `program`,
    // made for the exec and removed once the program answers.
    const auto links = std::filesystem::path(program).parent_path() /
                       ("gg-worker-names-" + std::to_string(getpid()));
    const auto link = links / comm;
    std::error_code ec;
    std::filesystem::create_directories(links, ec);
    std::filesystem::remove(link, ec);
    std::filesystem::create_symlink(program, link, ec);
    if (ec) throw std::runtime_error("cannot link " + link.string() + ": " + ec.message());
    const std::string path = link.string();
    std::vector<char*> argv{const_cast<char*>(comm.c_str())};
    for (const auto& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    if (pipe(requests_) != 0 || pipe(answers_) != 0) return;
    const pid_t parent = getpid();
    pid_ = fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
        end_with_parent(parent, SIGKILL);
        if (dup2(requests_[0], kIoWorkerRequestFd) < 0 ||
            dup2(answers_[1], kIoWorkerAnswerFd) < 0) {
            _exit(126);
        }
        for (int fd : {requests_[0], requests_[1], answers_[0], answers_[1]}) {
            if (fd != kIoWorkerRequestFd && fd != kIoWorkerAnswerFd) close(fd);
        }
        execv(path.c_str(), argv.data());
        _exit(127);
    }
    close(requests_[0]);
    close(answers_[1]);
    int ready = -1;
    (void)!read(answers_[0], &ready, sizeof(ready));
    std::filesystem::remove_all(links, ec);
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
    // 0 and -1 would name a process group or every process: a spawn that failed.
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
}

std::unique_ptr<RequestChild> start_io_worker(const IoWorkerOptions& options) {
    if (!options.program.empty()) {
        return std::make_unique<RequestChild>(options.program, options.comm,
                                              io_worker_args(options));
    }
    return std::make_unique<RequestChild>(
        [options](char request) { return io_worker_request(options, request); },
        [comm = options.comm] {
            prctl(PR_SET_NAME, comm.c_str(), 0, 0, 0);
            // A test that dies must not leave its workers holding its sockets.
            prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        });
}

}  // namespace gpuguard::testing
