#include "tests/support/child_process.h"

#include <cstdint>
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

namespace {

// RFC 1928 CONNECT without authentication on the connected `fd`: 0 when
// the proxy granted it, else an errno (ECONNREFUSED when it refused).
// Reads one line (up to 1 KiB, ending in '\n') from `fd`: 0, or the errno
// (ECONNRESET at end of stream, EMSGSIZE for a longer line).
int read_line(int fd) {
    char line[1024];
    size_t got = 0;
    while (got < sizeof(line)) {
        const ssize_t n = read(fd, line + got, sizeof(line) - got);
        if (n <= 0) return n == 0 ? ECONNRESET : errno;
        got += static_cast<size_t>(n);
        if (line[got - 1] == '\n') return 0;
    }
    return EMSGSIZE;
}

int socks5_connect(int fd, const std::string& target, uint16_t port) {
    const auto exchange = [fd](const std::string& out, size_t answer) -> int {
        if (write(fd, out.data(), out.size()) != static_cast<ssize_t>(out.size())) return errno;
        char in[64];
        size_t got = 0;
        while (got < answer) {
            const ssize_t n = read(fd, in + got, answer - got);
            if (n <= 0) return n == 0 ? ECONNRESET : errno;
            got += static_cast<size_t>(n);
        }
        return in[1] == 0 ? 0 : ECONNREFUSED;
    };
    if (const int refused = exchange(std::string("\x05\x01\x00", 3), 2)) return refused;
    std::string request("\x05\x01\x00", 3);
    in_addr address{};
    if (inet_pton(AF_INET, target.c_str(), &address) == 1) {
        request += '\x01';
        request.append(reinterpret_cast<const char*>(&address), 4);
    } else {
        request += '\x03';
        request += static_cast<char>(target.size());
        request += target;
    }
    request += static_cast<char>(port >> 8);
    request += static_cast<char>(port & 0xff);
    return exchange(request, 10);  // the reply with an IPv4 bound address
}

}  // namespace

std::unique_ptr<RequestChild> start_io_worker(const IoWorkerOptions& options) {
    return std::make_unique<RequestChild>(
        [options](char request) -> int {
            // The child's own state (it runs one worker).
            static int tcp = -1, udp = -1;
            static char block[kIoFileBytes];
            sockaddr_in to{};
            to.sin_family = AF_INET;
            to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            switch (request) {
                case 'g':
                    return open(options.gpu_node.c_str(), O_RDWR | O_CLOEXEC) >= 0 ? 0 : errno;
                case 'c':
                    tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
                    udp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
                    to.sin_port = htons(options.tcp_port);
                    if (inet_pton(AF_INET, options.tcp_address.c_str(), &to.sin_addr) != 1) {
                        return EINVAL;
                    }
                    return connect(tcp, reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0 ? 0
                                                                                           : errno;
                case 's':
                    return write(tcp, block, kIoMessageBytes) == kIoMessageBytes ? 0 : errno;
                case 'p':
                    return socks5_connect(tcp, options.socks_target, options.socks_port);
                case 'h': {
                    // A handshake record (22), TLS 1.0 on the wire, a ClientHello's start.
                    const char hello[] = {0x16, 0x03, 0x01, 0x00, 0x2f, 0x01, 0x00, 0x00, 0x2b,
                                          0x03, 0x03, 0x5a, 0x3c, 0x11, 0x7e, 0x42, 0x09};
                    return write(tcp, hello, sizeof(hello)) == sizeof(hello) ? 0 : errno;
                }
                case 'q': {
                    // A line out, then the peer's one-line answer read in full.
                    if (write(tcp, "ping\n", 5) != 5) return errno;
                    return read_line(tcp);
                }
                case 'r': {
                    // One line the peer sends on its own, waited for at most 10 s.
                    const timeval wait{10, 0};
                    setsockopt(tcp, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
                    return read_line(tcp);
                }
                case 'x':
                    close(tcp);
                    tcp = -1;
                    return 0;
                case 't': {
                    // Type 23 (application data), TLS 1.2 on the wire, then the ciphertext.
                    char record[kIoMessageBytes] = {0x17, 0x03, 0x03, 0x00,
                                                    static_cast<char>(kIoMessageBytes - 5)};
                    for (size_t i = 5; i < sizeof(record); ++i)
                        record[i] = static_cast<char>(i * 37);
                    return write(tcp, record, sizeof(record)) == sizeof(record) ? 0 : errno;
                }
                case 'b':
                    std::thread([] {
                        volatile uint64_t spins = 0;
                        for (;;) spins = spins + 1;  // ends with the process
                    }).detach();
                    return 0;
                case 'u':
                    to.sin_port = htons(options.udp_port);
                    return sendto(udp, block, kIoDatagramBytes, 0, reinterpret_cast<sockaddr*>(&to),
                                  sizeof(to)) == kIoDatagramBytes
                               ? 0
                               : errno;
                case 'f': {
                    const int fd =
                        open(options.file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
                    if (fd < 0) return errno;
                    const bool whole = write(fd, block, sizeof(block)) == sizeof(block);
                    close(fd);
                    return whole ? 0 : EIO;
                }
            }
            return EINVAL;
        },
        [comm = options.comm] {
            prctl(PR_SET_NAME, comm.c_str(), 0, 0, 0);
            // A test that dies must not leave its workers holding its sockets.
            prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
        });
}

}  // namespace gpuguard::testing
