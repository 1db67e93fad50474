// The TCP connections a process already has: the rows of its network
// namespace's /proc/PID/net/tcp and tcp6 in state ESTABLISHED whose socket
// inode one of its fds holds (/proc/PID/fd links "socket:[INODE]"), as ss -p
// finds them. Read when a busy process joins the watch list: a miner
// connects to its pool before it starts hashing, so before anyone watched.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuguard/events/event.h"

namespace gpuguard::agent {

// One row of /proc/net/tcp or tcp6.
struct TcpRow {
    int ip_version = 4;          // 4, or 6 (a v4-mapped IPv6 address is given as 4)
    bool v4_mapped = false;      // a tcp6 row with a ::ffff:a.b.c.d address
    std::string remote_address;  // "10.0.0.1", "2001:db8::1"
    uint16_t remote_port = 0;
    uint16_t local_port = 0;
    uint8_t state = 0;  // 1: ESTABLISHED
    uint64_t inode = 0;
    bool operator==(const TcpRow&) const = default;
};

// The rows of a /proc/net/tcp (`v6` false) or tcp6 file's contents; the
// header and any row that does not parse are skipped. Pure: fuzzed alone.
std::vector<TcpRow> parse_proc_net_tcp(std::string_view text, bool v6);

// Connect events (result 0, reasons watched_process and established; fd
// the one holding the socket) for each established, non-loopback TCP
// connection `pid` made: one whose local port a listening socket of the
// same table holds was accepted, not made (a server's client), and is left
// out. Empty when it is gone or nothing can be read. `gpu_holder`: the
// reasons are gpu_holder and established (a GPU process's connections).
std::vector<Connect> established_connects(const std::filesystem::path& proc_root, uint32_t pid,
                                          bool gpu_holder = false);

// The same for its established connections to loopback addresses (a proxy
// or forwarder on this host), `loopback` set.
std::vector<Connect> established_loopback_connects(const std::filesystem::path& proc_root,
                                                   uint32_t pid);

// The process at the other end of `pid`'s loopback connection to TCP
// `port`: the one holding the socket that accepted it (a forking
// forwarder's child), else the one holding the socket that listens on the
// port, found by the socket's inode among the fds of every process in the
// same network namespace, as ss -p does. Nullopt when none is found.
std::optional<uint32_t> server_of(const std::filesystem::path& proc_root, uint32_t pid,
                                  uint16_t port);

}  // namespace gpuguard::agent
