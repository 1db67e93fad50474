// Pure parsers of /proc/PID files (status, cgroup): what a process can
// shape (its name, its cgroup path) read without touching the filesystem,
// so they can be tested and fuzzed alone (tests/fuzz/proc_fuzz.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace gpuguard::agent {

// A container runtime's id found in a cgroup path.
struct ContainerInfo {
    std::string runtime;  // "docker", "containerd", "cri-o", "podman"
    std::string id;       // 64 hex digits
    bool operator==(const ContainerInfo&) const = default;
};

// Parses the container id out of a cgroup v2 path (or a v1 one), for the
// systemd and cgroupfs drivers of docker, containerd (also under kubepods),
// cri-o and podman. nullopt for host processes.
std::optional<ContainerInfo> container_from_cgroup(std::string_view cgroup_path);

// The cgroup v2 path of a /proc/PID/cgroup file's contents (the "0::" line),
// else the name=systemd v1 line's path, else "".
std::string cgroup_path_from_proc(std::string_view proc_pid_cgroup);

// A decimal number that is all of `text` (pids, fds, uids); nullopt otherwise.
std::optional<uint32_t> parse_decimal_u32(std::string_view text);

// First field of "Key:\t..." in /proc/PID/status as a number ("Uid" gives
// the real uid); nullopt when the key is missing or its value is not one.
std::optional<uint32_t> proc_status_field(std::string_view status, std::string_view key);

// A "key: N" line of /proc/PID/io ("write_bytes" gives the bytes the
// process caused to be written to storage); nullopt when missing or not a number.
std::optional<uint64_t> proc_io_field(std::string_view io, std::string_view key);

// The CPU fields of a /proc/PID/stat line, in clock ticks (sysconf(_SC_CLK_TCK)).
struct ProcStatCpu {
    uint64_t utime = 0;       // field 14: user time, all threads
    uint64_t stime = 0;       // field 15: system time, all threads
    uint32_t threads = 0;     // field 20: num_threads
    uint64_t start_time = 0;  // field 22: start time after boot (a recycled pid differs)
    bool operator==(const ProcStatCpu&) const = default;
};

// Those fields of /proc/PID/stat, counted after the last ')' (the command
// name in parentheses may hold blanks and parentheses); nullopt when a
// field is missing or not a number.
std::optional<ProcStatCpu> parse_proc_stat_cpu(std::string_view stat);

// The "Name:" value of /proc/PID/status (leading blanks cut), "" when missing.
std::string proc_status_name(std::string_view status);

}  // namespace gpuguard::agent
