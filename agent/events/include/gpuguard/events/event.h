// Event: the one decoded form of everything the kernel reports. The sensor
// builds it from ring-buffer records; the JSON Lines form (docs/events.md) is
// its serialisation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "gpuguard/common/detection.h"
#include "gpuguard/common/result.h"
#include "gpuguard/common/text.h"

namespace gpuguard::agent {

// Identity of the task that caused an event, as seen in the kernel.
struct TaskInfo {
    uint32_t pid = 0;   // process id (kernel tgid)
    uint32_t tid = 0;   // thread id (kernel pid)
    uint32_t ppid = 0;  // parent's process id
    uint32_t uid = 0;
    uint32_t gid = 0;
    uint64_t cgroup_id = 0;  // cgroup v2 inode id, 0 if none
    std::string comm;
};

enum class OpenSyscall { kOpenat, kOpenat2, kOpen, kCreat };

const char* to_string(OpenSyscall syscall);  // "openat", "openat2", "open", "creat"

// openat(2)/openat2(2)/open(2)/creat(2) of a GPU device node, successful or
// not (a failed one is reported when its path names a GPU node).
struct GpuOpen {
    uint32_t major = 0;  // 0 when the open failed
    uint32_t minor = 0;
    int32_t result = 0;  // fd, or -errno
    int32_t dirfd = 0;   // AT_FDCWD (-100) for cwd-relative and absolute paths
    uint64_t open_flags = 0;
    OpenSyscall syscall = OpenSyscall::kOpenat;
    bool path_truncated = false;
    std::string path;  // as the process passed it (may be relative to dirfd)

    bool succeeded() const { return result >= 0; }
};

// First ioctl(2) of a process on a GPU fd (later ones are aggregated in the
// kernel and read with Sensor::read_ioctl_stats()).
struct GpuIoctl {
    uint32_t major = 0;
    uint32_t minor = 0;
    int32_t fd = -1;
    uint32_t cmd = 0;  // full request number
    uint64_t arg = 0;
};

// connect(2) of an AF_INET/AF_INET6 socket.
struct Connect {
    int32_t fd = -1;
    int32_t result = 0;   // 0, -EINPROGRESS, or -errno
    int ip_version = 4;   // 4, or 6 (a v4-mapped IPv6 address is reported as 4)
    std::string address;  // "10.0.0.1", "2001:db8::1"
    uint16_t port = 0;
    bool gpu_holder = false;    // reported because the process holds a GPU fd
    bool watched_port = false;  // ... because the port is watched
    bool all = false;           // ... because sensor.connect_all is on
    bool v4_mapped = false;     // the socket was AF_INET6 with a ::ffff:a.b.c.d address
    bool loopback = false;
    std::string domain{};       // name an observed DNS answer gave `address` (net_intel.h), or ""
    bool watched_tgid = false;  // reported because the process is in the kernel watch list
    bool watched_addr = false;  // ... because the address is (resolved from a pool domain)
};

// A successful execve(2).
struct Exec {
    std::string filename;
    std::vector<std::string> argv;
    bool argv_truncated = false;
    bool filename_truncated = false;
    uint32_t old_tid = 0;  // thread that called execve
};

// A new process (threads are not reported); the event's task is the parent.
struct Fork {
    uint32_t child_pid = 0;
    bool inherited_gpu = false;  // the parent held a GPU fd
};

// A process ended.
struct Exit {
    uint32_t status = 0;    // wait(2) status word
    bool held_gpu = false;  // it was known to hold a GPU fd

    int exit_code() const { return static_cast<int>((status >> 8) & 0xff); }
    int signal() const { return static_cast<int>(status & 0x7f); }  // 0: exited normally
};

// What one process holds on the GPU of a Telemetry event.
struct ProcessGpuUsage {
    uint32_t pid = 0;
    std::optional<uint64_t> memory_bytes;   // device memory
    std::optional<double> compute_percent;  // busiest engine / SM over the last interval
    bool operator==(const ProcessGpuUsage&) const = default;
};

// One telemetry reading of one GPU by the agent's backends (not from the
// kernel: the event's task is all zero).
struct Telemetry {
    uint32_t gpu_index = 0;  // the sampler's GPU index
    std::string vendor;      // "nvidia", "amd", "intel", ...
    std::string model;
    std::vector<std::string> devices;  // device numbers of its nodes, "195:0"
    std::optional<double> utilization_percent;
    std::optional<uint64_t> memory_used_bytes;
    std::optional<uint64_t> memory_total_bytes;
    std::vector<ProcessGpuUsage> processes;
};

// A GPU fd a process holds, in a ProcessSnapshot.
struct SnapshotGpu {
    uint32_t major = 0;
    uint32_t minor = 0;
    int32_t fd = -1;
    bool operator==(const SnapshotGpu&) const = default;
};

// What the agent knows about a process that was running before it could see
// its exec (found by the /proc bootstrap, or written at the start of a
// journal segment), so replay starts from the same state as the live agent.
struct ProcessSnapshot {
    std::string exe;
    std::vector<std::string> argv;
    std::string user;
    std::string cgroup_path;
    std::string container_id;  // "" on the host
    std::string container_runtime;
    std::vector<SnapshotGpu> gpus;
};

// The kernel SIGKILLed a known-bad process (kill_now): its executable's
// inode or its name is registered (Sensor::add_known_bad_*). The process dies
// on its way back to user space; its exit event follows.
struct KillNow {
    std::string trigger;  // "exec", "gpu_open", "gpu_ioctl"
    std::string match;    // "file" (dev, ino) or "name" (comm)
    uint64_t dev = 0;     // executable's s_dev, kernel encoding (major << 20 | minor)
    uint64_t ino = 0;
    uint32_t rule_id = 0;       // tag given at registration
    int32_t signal_result = 0;  // bpf_send_signal(): 0 or -errno
    uint32_t major = 0;         // GPU device for the GPU triggers, else 0
    uint32_t minor = 0;
};

// The agent's YARA scan of a process's executable, which the correlator asks
// for at the process's first GPU use or first signature hit. An event (not a
// side effect) so the journal keeps the verdict and replay reproduces it
// without the file. The task is the scanned process.
struct ExeScan {
    std::string path;    // what /proc/PID/exe named
    std::string sha256;  // "" when not scanned
    uint64_t size = 0;
    std::vector<std::string> rules;          // YARA rules that hit, sorted
    std::vector<std::string> signature_ids;  // pack signatures naming those rules
    std::string error;                       // why it was not scanned; "" when it was
};

// One line (or a few adjacent lines) of a configuration file that matched a
// config signature when the agent read it.
struct ConfigLine {
    uint32_t line = 0;  // 1-based number of its first line in the file
    std::string text;   // as read, lines joined by '\n'; bounded
    bool operator==(const ConfigLine&) const = default;
};

// A configuration file a process names (-c FILE, --config=FILE, ...) or its
// miner family reads by default (config.json beside the executable, ...),
// read by the agent through the process's root when the correlator asks
// (gpuguard/state/config_files.h). Only files with a line matching a config
// signature are reported; the lines are what the correlator judges, live
// and in replay. The task is the process.
struct ConfigFile {
    std::string path;        // inside the process's root and mount namespace
    std::string reason;      // "argument" (named on the command line) or "default"
    uint64_t size = 0;       // of the file (st_size)
    std::string sha256;      // of the bytes read (the first max_bytes when truncated)
    bool truncated = false;  // larger than the agent reads: only its start was read
    std::vector<ConfigLine> lines;
    bool operator==(const ConfigFile&) const = default;
};

// The first bytes of one message on an INET socket (bpf/payload.h): the
// first few of each connection of a watched process, all of a JSON-RPC flow,
// and DNS answers of any process. Input of gpuguard/netintel/net_intel.h.
struct NetPayload {
    enum class Direction { kOut, kIn };
    int32_t fd = -1;
    Direction direction = Direction::kOut;
    std::string syscall;  // "write", "sendto", "sendmsg", "read", "recvfrom", "recvmsg"
    uint32_t length = 0;  // bytes the call moved
    uint32_t seq = 0;     // number of this message in its flow and direction, from 0
    uint64_t flow = 0;    // connection identity (kernel socket address)
    bool stream = true;   // SOCK_STREAM, else SOCK_DGRAM
    bool truncated = false;
    bool dns = false;           // reported as a DNS answer (peer port 53)
    bool followed = false;      // JSON-RPC flow sampled past the first messages
    std::string local_address;  // "10.0.0.1", "2001:db8::1"
    uint16_t local_port = 0;
    std::string remote_address;
    uint16_t remote_port = 0;
    std::string data;  // the captured bytes (binary)
};

// A mining session recognised on a connection (gpuguard/netintel/stratum.h), reported
// when recognised and then as it progresses. Derived by the agent from
// NetPayload events and journaled, so replay judges what live judged.
struct Stratum {
    uint64_t flow = 0;
    std::string protocol;  // "stratum1", "ethereumstratum", "ethproxy", "cryptonote", "stratum2"
    std::string pool_address;  // peer, "1.2.3.4"
    uint16_t pool_port = 0;
    std::string pool_domain;            // observed DNS name of the pool, or ""
    std::string login;                  // worker/login, wallet part cut to a prefix
    std::string agent;                  // user agent the miner announced, or ""
    std::vector<std::string> methods;   // method names seen so far, in order of appearance
    std::vector<std::string> messages;  // lines that showed a method first (for payload signatures)
    uint64_t shares_submitted = 0;
    uint64_t shares_accepted = 0;
    uint64_t shares_rejected = 0;
    double share_hashes = 0;  // hashes one share stands for at the current difficulty
    uint64_t difficulty_updates = 0;
    std::optional<double> hash_rate;           // estimated from shares, H/s
    std::optional<double> reported_hash_rate;  // what the miner told the pool, H/s
    bool operator==(const Stratum&) const = default;
};

// What a GPU process has written so far, sampled by the agent with each
// telemetry reading (not from the ring buffer) and emitted when a process
// is first sampled and whenever a counter moved: the correlator judges a
// process's writes over a window from these cumulative counters. The task
// is the process. A counter that could not be read is absent.
struct ProcessIo {
    // Bytes it caused to be written to storage (write_bytes of /proc/PID/io,
    // counted when the page cache is dirtied: tmpfs writes do not count).
    std::optional<uint64_t> file_write_bytes;
    // Bytes and send calls on INET sockets since it became a GPU process
    // (the payload programs' count in its gpu_tgids entry).
    std::optional<uint64_t> net_send_bytes;
    std::optional<uint64_t> net_sends;
    bool operator==(const ProcessIo&) const = default;
};

// What a container runtime's state says about a container (not from the
// kernel: the agent reads it when a process in that container first becomes
// known, and journals it before the process_snapshot naming the container,
// so replay knows the container as live did). The task is the process whose
// snapshot follows.
struct Container {
    std::string id;       // as in the cgroup path: 64 hex digits
    std::string runtime;  // "podman", "docker", "containerd", "cri-o"
    ContainerDetails details;
    bool operator==(const Container&) const = default;
};

using EventData =
    std::variant<GpuOpen, GpuIoctl, Connect, Exec, Fork, Exit, Telemetry, ProcessSnapshot, KillNow,
                 ExeScan, NetPayload, Stratum, ProcessIo, ConfigFile, Container>;

struct Event {
    uint64_t ts_ns = 0;  // CLOCK_MONOTONIC nanoseconds
    TaskInfo task;
    EventData data;
};

// Name of an event's type as used in JSON ("gpu_open", "gpu_ioctl", "connect",
// "exec", "fork", "exit", "telemetry", "process_snapshot", "kill_now",
// "exe_scan", "net_payload", "stratum", "process_io", "config_file",
// "container").
const char* event_type_name(const Event& event);

// Every type's name, in EventData's order: what --event-types, `journal
// export --type` and the JSON reader accept and list in their errors.
const std::vector<std::string>& event_type_names();

// "a\0b\0c\0" -> {"a", "b", "c"}, as in /proc/PID/cmdline and exec argv; a
// final part without its NUL is kept.
std::vector<std::string> split_nul_separated(std::string_view bytes);

// Decodes one ring-buffer record (bpf/events.h). Fails with kParse on a
// short, oversized, unknown-type or wrong-ABI record; never reads past
// `record`.
Result<Event> decode_record(std::span<const std::byte> record);

// In-kernel count of one (process, GPU device, ioctl request) triple.
struct IoctlAggregate {
    uint32_t pid = 0;
    uint32_t major = 0;
    uint32_t minor = 0;
    uint32_t cmd = 0;
    uint64_t count = 0;
    uint64_t first_ns = 0;  // CLOCK_MONOTONIC
    uint64_t last_ns = 0;
};

// Sends of a GPU process on INET sockets since it was marked as one,
// counted by the payload programs in its gpu_tgids entry.
struct NetSends {
    uint64_t bytes = 0;
    uint64_t calls = 0;
};

}  // namespace gpuguard::agent
