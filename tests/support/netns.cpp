#include "tests/support/netns.h"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpuguard/state/process_handle.h"
#include "tests/support/run_command.h"

namespace gpuguard::testing {
namespace {

std::string run_checked(const std::vector<std::string>& argv) {
    const auto result = run_command(argv, std::chrono::seconds(10));
    if (result.exit_code == 0) return "";
    std::string line;
    for (const auto& part : argv) line += part + " ";
    return line + "failed: " + result.stderr_text;
}

}  // namespace

NetnsScope::NetnsScope() {
    original_fd_ = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (original_fd_ < 0) {
        error_ = std::string("open /proc/thread-self/ns/net: ") + strerror(errno);
        return;
    }
    if (unshare(CLONE_NEWNET) != 0) {
        error_ = std::string("unshare(CLONE_NEWNET): ") + strerror(errno);
        close(original_fd_);
        original_fd_ = -1;
        return;
    }
    error_ = run_checked({"/usr/sbin/ip", "link", "set", "lo", "up"});
}

NetnsScope::~NetnsScope() {
    if (original_fd_ < 0) return;
    if (setns(original_fd_, CLONE_NEWNET) != 0)
        std::abort();  // never keep testing in the wrong netns
    close(original_fd_);
}

VethPeer::VethPeer(int port, bool hold_connections) {
    int ready[2];
    if (pipe(ready) != 0) {
        error_ = "pipe";
        return;
    }
    pid_ = fork();
    if (pid_ < 0) {
        error_ = "fork";
        return;
    }
    if (pid_ == 0) {
        close(ready[0]);
        if (unshare(CLONE_NEWNET) != 0) _exit(1);
        const int listener = socket(AF_INET6, SOCK_STREAM, 0);
        const int off = 0, on = 1;
        setsockopt(listener, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
        sockaddr_in6 any{};
        any.sin6_family = AF_INET6;
        any.sin6_port = htons(static_cast<uint16_t>(port));
        any.sin6_addr = in6addr_any;
        if (bind(listener, reinterpret_cast<sockaddr*>(&any), sizeof(any)) != 0) _exit(2);
        if (listen(listener, 64) != 0) _exit(3);
        const char byte = 1;
        (void)!write(ready[1], &byte, 1);
        close(ready[1]);
        for (;;) {
            const int client = accept(listener, nullptr, nullptr);
            // Held open (a pool that never answers) or closed at once.
            if (client >= 0 && !hold_connections) close(client);
        }
    }
    close(ready[1]);
    char byte = 0;
    const bool started = read(ready[0], &byte, 1) == 1;
    close(ready[0]);
    if (!started) {
        error_ = "peer namespace child failed to start";
        return;
    }
    const std::string peer_ns = "/proc/" + std::to_string(pid_) + "/ns/net";
    const std::vector<std::vector<std::string>> commands = {
        {"/usr/sbin/ip", "link", "add", "gg-a", "type", "veth", "peer", "name", "gg-b", "netns",
         std::to_string(pid_)},
        {"/usr/sbin/ip", "addr", "add", "10.67.0.1/24", "dev", "gg-a"},
        {"/usr/sbin/ip", "addr", "add", "fd00:67::1/64", "dev", "gg-a", "nodad"},
        {"/usr/sbin/ip", "link", "set", "gg-a", "up"},
        {"/usr/bin/nsenter", "--net=" + peer_ns, "/usr/sbin/ip", "addr", "add", "10.67.0.2/24",
         "dev", "gg-b"},
        {"/usr/bin/nsenter", "--net=" + peer_ns, "/usr/sbin/ip", "addr", "add", "10.67.0.3/24",
         "dev", "gg-b"},
        {"/usr/bin/nsenter", "--net=" + peer_ns, "/usr/sbin/ip", "addr", "add", "fd00:67::2/64",
         "dev", "gg-b", "nodad"},
        {"/usr/bin/nsenter", "--net=" + peer_ns, "/usr/sbin/ip", "addr", "add", "fd00:67::3/64",
         "dev", "gg-b", "nodad"},
        {"/usr/bin/nsenter", "--net=" + peer_ns, "/usr/sbin/ip", "link", "set", "lo", "up"},
        {"/usr/bin/nsenter", "--net=" + peer_ns, "/usr/sbin/ip", "link", "set", "gg-b", "up"},
    };
    for (const auto& command : commands) {
        error_ = run_checked(command);
        if (!error_.empty()) return;
    }
    // Wait until the link is up end to end (IPv6 routes appear with carrier).
    for (const char* address : {"10.67.0.3", "fd00:67::3"}) {
        for (int i = 0; i < 50 && tcp_connect(address, port, 100) != 0; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
}

VethPeer::~VethPeer() {
    if (pid_ > 0) {
        kill(pid_, SIGKILL);  // its namespace, and the veth pair with it, go away
        waitpid(pid_, nullptr, 0);
    }
}

int tcp_connect(const std::string& ip, int port, int timeout_ms) {
    sockaddr_storage address{};
    socklen_t length = 0;
    auto* v4 = reinterpret_cast<sockaddr_in*>(&address);
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&address);
    if (inet_pton(AF_INET, ip.c_str(), &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(static_cast<uint16_t>(port));
        length = sizeof(*v4);
    } else if (inet_pton(AF_INET6, ip.c_str(), &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(static_cast<uint16_t>(port));
        length = sizeof(*v6);
    } else {
        return EINVAL;
    }
    const int fd = socket(address.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return errno;
    int result = 0;
    if (connect(fd, reinterpret_cast<sockaddr*>(&address), length) != 0) {
        result = errno;
        if (result == EINPROGRESS) {
            pollfd pfd{fd, POLLOUT, 0};
            if (poll(&pfd, 1, timeout_ms) == 1) {
                socklen_t size = sizeof(result);
                getsockopt(fd, SOL_SOCKET, SO_ERROR, &result, &size);
            } else {
                result = ETIMEDOUT;
            }
        }
    }
    close(fd);
    return result;
}

std::string without_gpuguard_table(const std::string& ruleset) {
    std::string out;
    bool skipping = false;
    size_t start = 0;
    while (start < ruleset.size()) {
        size_t end = ruleset.find('\n', start);
        if (end == std::string::npos) end = ruleset.size();
        const std::string line = ruleset.substr(start, end - start);
        start = end + 1;
        if (!skipping && line.rfind("table inet gpuguard {", 0) == 0) {
            skipping = true;
            continue;
        }
        if (skipping) {
            if (line == "}") skipping = false;
            continue;
        }
        out += line + "\n";
    }
    // A blank separator line may remain where the table was: ignore blank lines.
    std::string compact;
    start = 0;
    while (start < out.size()) {
        size_t end = out.find('\n', start);
        const std::string line = out.substr(start, end - start);
        start = end + 1;
        if (!line.empty()) compact += line + "\n";
    }
    return compact;
}

TestCgroup::TestCgroup(const std::string& name_prefix) {
    const std::string root = gpuguard::find_cgroup2_mount();
    if (root.empty()) {
        error_ = "no cgroup v2 mount in /proc/mounts";
        return;
    }
    path_ = "/" + name_prefix + "-" + std::to_string(getpid()) + "-" +
            std::to_string(std::chrono::steady_clock::now().time_since_epoch().count() % 1000000);
    dir_ = root + path_;
    std::error_code ec;
    if (!std::filesystem::create_directory(dir_, ec)) {
        error_ = "mkdir " + dir_ + ": " + ec.message();
        dir_.clear();
    }
}

TestCgroup::~TestCgroup() {
    if (dir_.empty()) return;
    // Only processes the test moved here: SIGKILL them, then remove the directory.
    for (int attempt = 0; attempt < 100; ++attempt) {
        auto pids = agent::read_cgroup_procs(dir_);
        if (!pids || pids->empty()) break;
        for (uint32_t pid : *pids) kill(static_cast<pid_t>(pid), SIGKILL);
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    for (int attempt = 0; attempt < 100 && rmdir(dir_.c_str()) != 0; ++attempt) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

bool TestCgroup::add(pid_t pid) const {
    std::ofstream procs(dir_ + "/cgroup.procs");
    procs << pid;
    procs.flush();
    return procs.good();
}

}  // namespace gpuguard::testing
