#include "tests/ops/service_support.h"

#include <cstring>
#include <fstream>
#include <stdexcept>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "tests/support/agent_config.h"
#include "tests/support/child_process.h"

namespace gpuguard::testing {

std::multimap<std::string, std::string> read_unit_directives(const std::filesystem::path& unit) {
    std::ifstream in(unit);
    if (!in) throw std::runtime_error("cannot read " + unit.string());
    std::multimap<std::string, std::string> directives;
    for (std::string line; std::getline(in, line);) {
        if (line.empty() || line[0] == '#' || line[0] == ';' || line[0] == '[') continue;
        const auto equals = line.find('=');
        if (equals == std::string::npos) continue;
        directives.emplace(line.substr(0, equals), line.substr(equals + 1));
    }
    return directives;
}

std::string unit_value(const std::multimap<std::string, std::string>& directives,
                       const std::string& key) {
    const auto found = directives.find(key);
    return found == directives.end() ? "" : found->second;
}

NotifySocket::NotifySocket(std::filesystem::path path) : path_(std::move(path)) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd_ < 0) throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    if (path_.string().size() >= sizeof(address.sun_path)) {
        throw std::runtime_error("notify socket path too long: " + path_.string());
    }
    std::strncpy(address.sun_path, path_.c_str(), sizeof(address.sun_path) - 1);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
        throw std::runtime_error("bind " + path_.string() + ": " + std::strerror(errno));
    }
}

NotifySocket::~NotifySocket() {
    if (fd_ >= 0) close(fd_);
    std::error_code ec;
    std::filesystem::remove(path_, ec);
}

std::optional<std::string> NotifySocket::receive(std::chrono::milliseconds timeout) {
    pollfd ready{fd_, POLLIN, 0};
    if (poll(&ready, 1, static_cast<int>(timeout.count())) <= 0) return std::nullopt;
    char buffer[4096];
    const ssize_t length = recv(fd_, buffer, sizeof buffer, 0);
    if (length < 0) return std::nullopt;
    return std::string(buffer, static_cast<size_t>(length));
}

std::optional<std::string> NotifySocket::wait_for(const std::string& text,
                                                  std::chrono::milliseconds timeout,
                                                  std::vector<std::string>* seen) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return std::nullopt;
        auto message = receive(left);
        if (!message) return std::nullopt;
        if (seen) seen->push_back(*message);
        if (message->find(text) != std::string::npos) return message;
    }
}

std::string scratch_agent_config(const std::filesystem::path& dir, const std::string& device,
                                 const std::string& extra) {
    return "sensor:\n  extra_gpu_devices: [\"" + device + "\"]\n" +
           "control:\n  socket: " + (dir / "control.sock").string() + "\n" +
           scratch_paths_config(dir) + "enforcement:\n  dry_run: true\n" + extra;
}

RefusedPort::RefusedPort() : fd_(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    if (fd_ >= 0 && bind(fd_, reinterpret_cast<sockaddr*>(&address), length) == 0 &&
        getsockname(fd_, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
        port_ = ntohs(address.sin_port);
    }
}

RefusedPort::~RefusedPort() {
    if (fd_ >= 0) close(fd_);
}

uint16_t free_loopback_port() {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    uint16_t port = 0;
    if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
        port = ntohs(address.sin_port);
    }
    close(fd);
    return port;
}

pid_t start_gpu_holder(const std::string& comm, const std::string& node) {
    const pid_t test = getpid();
    const pid_t pid = fork();
    if (pid == 0) {
        end_with_parent(test, SIGKILL);
        prctl(PR_SET_NAME, comm.c_str());
        if (open(node.c_str(), O_RDWR) < 0) _exit(1);
        for (int i = 0; i < 60; ++i) sleep(1);
        _exit(0);
    }
    return pid;
}

void write_miner_rule(const std::filesystem::path& dir, const std::string& comm) {
    std::string rule = R"(rules:
  - id: local-COMM
    name: Test miner on the fake GPU
    severity: critical
    confidence: 0.9
    process_name: ["COMM"]
    tests:
      match: ["COMM"]
      no_match: ["gg-benign"]
)";
    for (size_t at; (at = rule.find("COMM")) != std::string::npos;) rule.replace(at, 4, comm);
    std::ofstream(dir / "miner-rules.yaml") << rule;
}

}  // namespace gpuguard::testing
