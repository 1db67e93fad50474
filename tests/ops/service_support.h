// What the operations tests share: the systemd unit's directives, a
// NOTIFY_SOCKET of the test's own, and an agent configuration that keeps
// everything (journal, rules, control socket) inside a scratch directory.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <sys/types.h>

namespace gpuguard::testing {

// The [Service] and [Unit] directives of a unit file, in file order per key
// ("ExecStartPre" may appear several times). Keys of every section are merged.
std::multimap<std::string, std::string> read_unit_directives(const std::filesystem::path& unit);

// The value of a directive that must appear once; "" when absent.
std::string unit_value(const std::multimap<std::string, std::string>& directives,
                       const std::string& key);

// A unix datagram socket bound at `path`, as systemd's $NOTIFY_SOCKET.
class NotifySocket {
  public:
    explicit NotifySocket(std::filesystem::path path);
    ~NotifySocket();
    NotifySocket(const NotifySocket&) = delete;
    NotifySocket& operator=(const NotifySocket&) = delete;

    const std::filesystem::path& path() const { return path_; }
    // The next datagram within `timeout`.
    std::optional<std::string> receive(std::chrono::milliseconds timeout);
    // Datagrams until one contains `text` (returned) or `timeout` passes;
    // every one read is appended to `seen` when given.
    std::optional<std::string> wait_for(const std::string& text, std::chrono::milliseconds timeout,
                                        std::vector<std::string>* seen = nullptr);

  private:
    std::filesystem::path path_;
    int fd_ = -1;
};

// A config for a test agent: fake GPU `device`, journal, rules and control
// socket under `dir`, enforcement in dry run; `extra` is appended (top-level
// YAML sections not already used: log, metrics, backends, outputs). Tests
// give "1:7" (/dev/full), which no process holds by chance: every process
// whose stdin is /dev/null (the whole test run, in CI) would hold a "1:3".
std::string scratch_agent_config(const std::filesystem::path& dir, const std::string& device,
                                 const std::string& extra = "");

// A loopback TCP port that refuses every connection (a collector that is
// down): bound, so nobody else gets it, but not listening.
class RefusedPort {
  public:
    RefusedPort();
    ~RefusedPort();
    RefusedPort(const RefusedPort&) = delete;
    RefusedPort& operator=(const RefusedPort&) = delete;

    uint16_t port() const { return port_; }
    std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

  private:
    int fd_ = -1;
    uint16_t port_ = 0;
};

// A loopback TCP port nothing listens on now (bound once, then released):
// for an agent's metrics server. 0 when none could be had.
uint16_t free_loopback_port();

// Forks a child named `comm` that opens the fake GPU `node` and stays (a
// minute at most); the caller kills and reaps it.
pid_t start_gpu_holder(const std::string& comm, const std::string& node);

// dir/miner-rules.yaml with one local rule naming `comm`: a process of that
// name holding the GPU raises GG-CORR-0001.
void write_miner_rule(const std::filesystem::path& dir, const std::string& comm);

}  // namespace gpuguard::testing
