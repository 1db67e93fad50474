// Sensor: owns the BPF skeleton, its links and the ring buffer, and turns
// records into Events. With the probe, the pins and the kernel enforcer of this
// room, the only libbpf user;
// nothing of libbpf leaks through this header.
//
// Lifecycle: open() = check BTF and privileges -> open skeleton -> set
// rodata and ring size -> probe optional hooks (autoload off) -> load ->
// attach. Destroying the Sensor detaches and unloads everything.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuguard/common/result.h"
#include "gpuguard/events/event.h"
#include "gpuguard/events/file_watch.h"
#include "gpuguard/events/gpu_devices.h"
#include "gpuguard/sensor/watch_list.h"

namespace gpuguard::agent {

// Kernel-side and delivery counters. Kernel counters are summed over CPUs.
struct SensorStats {
    struct PerType {
        std::string type;      // "gpu_open"
        uint64_t emitted = 0;  // records the kernel submitted
        uint64_t dropped = 0;  // ring buffer full: reserve failed
    };
    std::vector<PerType> kernel;
    uint64_t delivered = 0;      // records decoded and handed to the handler
    uint64_t decode_errors = 0;  // records that failed to decode (counted, skipped)

    uint64_t total_dropped() const;
};

// The kernel watch lists (docs/network.md): processes that matched a miner
// signature, addresses resolved from pool domains.
struct WatchStats {
    WatchListCounts processes;
    WatchListCounts addresses;
};

// How the open, ioctl, connect (and payload fallback) programs attach
// (bpf/syscalls.bpf.c, docs/configuration.md#sensorattach). The events are
// the same in every mode; the cost per syscall is not.
enum class AttachMode {
    kAuto,                // the first of the three below this kernel allows
    kKernelFunctions,     // fentry/fexit on the syscalls' functions: others pay nothing
    kRawSyscalls,         // one program each at raw sys_enter/sys_exit, dispatching by number
    kSyscallTracepoints,  // one syscalls/sys_* tracepoint per call: the last resort
};
// Inline: the config reader uses them without the sensor's library.
constexpr std::string_view attach_mode_name(AttachMode mode) {
    switch (mode) {
        case AttachMode::kKernelFunctions:
            return "kernel_functions";
        case AttachMode::kRawSyscalls:
            return "raw_syscalls";
        case AttachMode::kSyscallTracepoints:
            return "syscall_tracepoints";
        case AttachMode::kAuto:
            break;
    }
    return "auto";
}
constexpr std::optional<AttachMode> parse_attach_mode(std::string_view name) {
    for (AttachMode mode : {AttachMode::kAuto, AttachMode::kKernelFunctions,
                            AttachMode::kRawSyscalls, AttachMode::kSyscallTracepoints}) {
        if (attach_mode_name(mode) == name) return mode;
    }
    return std::nullopt;
}

// The sensor's part of the agent config (docs/configuration.md).
struct SensorConfig {
    AttachMode attach = AttachMode::kAuto;
    std::string btf_path;  // empty: /sys/kernel/btf/vmlinux
    uint32_t ring_buffer_kb = 4096;
    bool report_failed_opens = true;
    bool mount_tracefs = true;
    std::vector<GpuDeviceNumber> extra_gpu_devices;
    bool connect_all = false;       // report every INET connect
    bool connect_loopback = false;  // include loopback destinations
    // Destination ports reported from any process (stratum ports pools commonly use).
    std::vector<uint16_t> watched_ports = {3333, 3334, 4444, 5555, 7777, 14433, 14444, 45700};
    uint32_t argv_max_bytes = 1024;  // argv bytes copied per exec (max 4095)
    // Watch lists fed by the agent: connects and first payloads of these
    // processes, and to these addresses, are captured on any port.
    uint32_t watch_processes_max = 4096;
    uint32_t watch_addresses_max = 4096;
    uint32_t watch_address_min_ttl_s = 600;  // an address stays at least this long after its answer
    // Socket payload sampling (docs/network.md): Stratum and DNS observation.
    bool payload_capture = true;    // attach the payload programs
    bool payload_all = false;       // sample every process, not only watched ones
    bool payload_dns = true;        // DNS answers of any process
    uint32_t payload_messages = 4;  // messages sampled per connection and direction (1-64)
    // Count the shape of watched processes' TCP flows (flow_shapes,
    // bpf/payload.h); the agent sets it from process_table.flow_interval_ms.
    bool flow_shapes = true;
    // Refuse to start outside the host's pid namespace (the agent would see
    // its container only); false: start, and say so at critical.
    bool require_host_pid_namespace = true;
    bool payload_syscall_hooks = false;  // use the syscall tracepoints even where sock_* exist
    // Changes of watched files (bpf/files.bpf.c, docs/configuration.md):
    // entries as gpuguard/events/file_watch.h reads them; empty: the hooks
    // stay off.
    std::vector<std::string> watch_files = default_watch_files();
};

class PinDirectory;
struct AttachDecision;

struct SensorOptions {
    SensorConfig config;
    // Where kill_now's maps and hooks are pinned to outlive the agent
    // (gpuguard/sensor/bpf_pins.h); null = they end with it.
    std::shared_ptr<PinDirectory> pins;
    std::string tracefs_dir = "/sys/kernel/tracing";
    // A process whose GPU opens the kernel neither reports nor marks as a
    // GPU holder: the agent's own pid (NVML's opens of /dev/nvidia*, made
    // on every telemetry sample). 0 = none; tests open nodes themselves.
    uint32_t ignore_tgid = 0;
    std::string kernel_btf_path = "/sys/kernel/btf/vmlinux";  // tests point it elsewhere
    // raw_syscalls through plain raw tracepoints even where the BTF-typed
    // ones work: the fallback's own tests and benchmarks.
    bool raw_syscalls_untyped = false;
    // The agent's own trusted files (its configuration, rule files, unit
    // files, executable): watched as file changes of kind "agent_config",
    // whatever sensor.watch_files says. An entry ending in '/' is a
    // directory (every path under it), others exact paths; absolute only.
    std::vector<std::string> trusted_paths;
};

// Who killed an earlier agent (Sensor::agent_killer).
struct AgentKiller {
    TaskInfo task;
    int32_t signal = 0;
};

class Sensor {
  public:
    using EventHandler = std::function<void(const Event&)>;

    // Loads and attaches the programs. `handler` is called from poll() for
    // every decoded event. Failures, one line each, saying what to do:
    //   kNotFound    kernel BTF or the configured BTF file is missing
    //   kParse       the configured BTF file is not BTF
    //   kPermission  not root / lacking CAP_BPF+CAP_PERFMON
    //   kUnsupported ABI mismatch, tracefs unavailable, load refused
    static Result<Sensor> open(const SensorOptions& options, EventHandler handler);

    Sensor(Sensor&&) noexcept;
    Sensor& operator=(Sensor&&) noexcept;
    Sensor(const Sensor&) = delete;
    Sensor& operator=(const Sensor&) = delete;
    ~Sensor();

    // Registers a device number (or a whole major) as a GPU in the kernel map.
    Status add_gpu_device(const GpuDeviceNumber& device);
    Status remove_gpu_device(const GpuDeviceNumber& device);

    // Waits up to `timeout` for records and handles all that are ready.
    // Returns the number handled; EINTR counts as 0, not as an error.
    Result<int> poll(std::chrono::milliseconds timeout);

    // Waits up to `timeout` until records are ready, without consuming them
    // (so a caller can wait unlocked and poll(0) under its lock).
    Status wait(std::chrono::milliseconds timeout);

    // Replaces the set of destination ports whose connects are reported from any process.
    Status set_watched_ports(const std::vector<uint16_t>& ports);
    // Replaces the file-change watch list (bpf/files.bpf.c): exact paths and
    // prefixes in the kernel's LPM trie, file names in its name map. kIo when
    // the kernel refuses an entry (more than 256 paths or 64 names).
    Status set_watched_files(const std::vector<WatchPattern>& patterns);
    // The list as last set (user space names the kind of paths it resolved).
    const std::vector<WatchPattern>& watched_files() const;

    // Watch lists (bpf/connect.bpf.c): a watched process's connects are
    // reported on any port, and so are connects to a watched address; both
    // have their first payloads sampled. When a list is full its oldest entry
    // goes (counted in watch_stats()). kIo when the kernel refuses the entry;
    // kInvalidArgument for text that is not an address.
    Status watch_process(uint32_t pid);
    void unwatch_process(uint32_t pid);
    Status watch_address(const std::string& address, uint64_t expires_ns);
    // Addresses whose time is over at `now_ns` leave the list; returns how many.
    size_t expire_watched_addresses(uint64_t now_ns);
    bool process_watched(uint32_t pid) const;
    WatchStats watch_stats() const;

    // Marks a process found holding a GPU fd by the /proc bootstrap, so its
    // ioctls and connects are traced although its open happened earlier.
    Status mark_gpu_process(uint32_t pid);

    // Snapshot of the in-kernel ioctl aggregates of every GPU process.
    Result<std::vector<IoctlAggregate>> read_ioctl_stats() const;

    // Its sends on INET sockets; nullopt when the process is not a GPU
    // process in the kernel map or the payload programs are off.
    std::optional<NetSends> net_sends(uint32_t pid) const;

    // The shapes of the TCP flows of GPU holders and watched processes
    // (bpf/payload.h, flow_shapes); empty when the payload programs are off.
    std::vector<FlowReading> read_flow_shapes() const;

    // Drops the kernel state of an exited process (its ioctl aggregates, its
    // place in the watch list).
    Status forget_process(uint32_t pid);

    // kill_now: executables (by inode, s_dev in kernel encoding) and task
    // names the kernel SIGKILLs at exec, at a GPU open and at the first GPU
    // ioctl. `rule_id` is echoed in the kill_now event. kIo when the map is
    // full (GG_MAX_KNOWN_BAD); removing an absent entry is not an error.
    Status add_known_bad_file(uint64_t dev, uint64_t ino, uint32_t rule_id);
    Status remove_known_bad_file(uint64_t dev, uint64_t ino);
    Status add_known_bad_name(const std::string& comm, uint32_t rule_id);
    Status remove_known_bad_name(const std::string& comm);
    // The names in the map with their rule tags: with pinning, also those an
    // earlier agent registered.
    std::vector<std::pair<std::string, uint32_t>> known_bad_names() const;
    // The process that last SIGKILLed the agent with that pid, as the kernel
    // saw it; kept across agents only with pins (a map under the pin path).
    std::optional<AgentKiller> agent_killer(uint32_t agent_pid) const;
    // Tells the kernel's tamper hook which links and programs are the
    // agent's (every one whose fd this process holds: the sensor's, the
    // enforcer's): a bpf(2) detach of those is reported, of others not.
    // Again after links change; returns how many are listed.
    Result<size_t> protect_own_bpf_objects();

    SensorStats stats() const;

    // Kernel ids of the loaded programs (bpftool prog show id N).
    std::vector<uint32_t> program_ids() const;

    // Names of hooks that were attached ("tp_btf/sys_exit", "syscalls/sys_exit_openat", ...).
    std::vector<std::string> attached_hooks() const;
    // The mode in use (never kAuto), and why it was chosen.
    AttachMode attach_mode() const;
    const std::string& attach_reason() const;
    // How payloads are sampled: "socket_layer", "syscalls" (the mode's own
    // syscall hooks), or "off" (sensor.payload_capture).
    std::string_view payload_hooks() const;

  private:
    struct Impl;
    explicit Sensor(std::unique_ptr<Impl> impl);
    static Result<Sensor> open_in_mode(const SensorOptions& options, const EventHandler& handler,
                                       const AttachDecision& decision);
    std::unique_ptr<Impl> impl_;
};

}  // namespace gpuguard::agent
