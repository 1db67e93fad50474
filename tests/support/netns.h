// Network and cgroup sandboxes for the enforcement tests: every nftables
// change happens in a network namespace the test created, every cgroup
// program attaches to a cgroup the test created, and both are gone when the
// objects die.
#pragma once

#include <string>
#include <vector>

#include <sys/types.h>

namespace gpuguard::testing {

// Moves the calling thread into a fresh network namespace (loopback up) and
// back into the original one on destruction. Commands forked meanwhile
// (run_command) run inside it.
class NetnsScope {
  public:
    NetnsScope();
    ~NetnsScope();
    NetnsScope(const NetnsScope&) = delete;
    NetnsScope& operator=(const NetnsScope&) = delete;

    const std::string& error() const { return error_; }  // "" when inside the new namespace

  private:
    int original_fd_ = -1;
    std::string error_;
};

// A second namespace, held by a forked child that listens on TCP `port` on
// every address (closing each connection it accepts, or with
// `hold_connections` keeping it open and never answering), joined to the
// caller's (current) namespace by a veth pair:
//   caller: gg-a 10.67.0.1/24, fd00:67::1/64
//   peer:   gg-b 10.67.0.2/24 and 10.67.0.3/24, fd00:67::2/64 and fd00:67::3/64
class VethPeer {
  public:
    explicit VethPeer(int port, bool hold_connections = false);
    ~VethPeer();
    VethPeer(const VethPeer&) = delete;
    VethPeer& operator=(const VethPeer&) = delete;

    const std::string& error() const { return error_; }
    pid_t pid() const { return pid_; }

  private:
    pid_t pid_ = -1;
    std::string error_;
};

// TCP connect with a timeout: 0 when it connected, else the errno
// (ETIMEDOUT when nothing answered in time).
int tcp_connect(const std::string& ip, int port, int timeout_ms);

// The ruleset text without the `table inet gpuguard { ... }` block.
std::string without_gpuguard_table(const std::string& ruleset);

// A cgroup v2 directory the test creates under the v2 mount found in
// /proc/mounts; removed (after its processes are SIGKILLed) on destruction.
class TestCgroup {
  public:
    explicit TestCgroup(const std::string& name_prefix = "gpuguard-test");
    ~TestCgroup();
    TestCgroup(const TestCgroup&) = delete;
    TestCgroup& operator=(const TestCgroup&) = delete;

    const std::string& error() const { return error_; }
    const std::string& dir() const { return dir_; }  // absolute directory
    const std::string& path() const {
        return path_;
    }  // relative to the v2 mount, "/gpuguard-test-..."
    // Moves `pid` into the cgroup. False on failure.
    bool add(pid_t pid) const;

  private:
    std::string dir_;
    std::string path_;
    std::string error_;
};

}  // namespace gpuguard::testing
