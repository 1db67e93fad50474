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
#include "gpuguard/events/event_gpu.h"
#include "gpuguard/events/event_net.h"

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

// A successful execve(2).
struct Exec {
    std::string filename;  // as the process passed it
    std::vector<std::string> argv;
    bool argv_truncated = false;
    bool filename_truncated = false;
    uint32_t old_tid = 0;  // thread that called execve
    // The file the kernel ran when `filename` does not name it (an fd path
    // such as /proc/self/fd/3 of a memfd, or a relative path): what
    // /proc/PID/exe said right after the exec ("/memfd:x (deleted)"); ""
    // when `filename` is the executable's path.
    std::string exe{};
};

// A new process (threads are not reported); the event's task is the parent.
struct Fork {
    uint32_t child_pid = 0;
    bool inherited_gpu = false;  // the parent held a GPU fd
    // The child's start time, ns of CLOCK_BOOTTIME (task->start_boottime,
    // what /proc/PID/stat's starttime counts in clock ticks); 0 unknown.
    uint64_t child_start_ns = 0;
};

// A process ended.
struct Exit {
    uint32_t status = 0;    // wait(2) status word
    bool held_gpu = false;  // it was known to hold a GPU fd

    int exit_code() const { return static_cast<int>((status >> 8) & 0xff); }
    int signal() const { return static_cast<int>(status & 0x7f); }  // 0: exited normally
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
    // "dpkg:PACKAGE" when exe is "PATH (deleted)" and the process's package
    // database owns PATH (a package upgrade replaced it), else "".
    std::string exe_package{};
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
    // "" for the executable; else the library the process's environment
    // preloads (its real path in the process's root) that was scanned
    // instead, reported only when a rule hit (path is the same).
    std::string library{};
    // The package database of the process's root on the executable:
    // its owner ("dpkg:curl", "" none) and "intact", "modified",
    // "unowned", "unverified" (gpuguard/state/package_owner.h), "agent"
    // (the agent's own executable) or "" (no database, not checked).
    std::string package{};
    std::string package_check{};
    // What a look-alike location's name claims (an AppImage's mount, a
    // self-extracting runtime's unpack directory), checked on the host:
    // "" (not in one, or not checked), "verified: RUNTIME: HOW" or
    // "refused: RUNTIME: WHY" (detect/location_check.h).
    std::string location_check{};
    // With an error, what kind of failure it was: "gone" (the process
    // exited, or a kernel thread has no executable), "permission" (EACCES or
    // EPERM for root: a FUSE mount without allow_other, an LSM),
    // "size_limit" (over rules.yara_max_file_mb), "io" (EIO, ENOTCONN: a
    // FUSE or network filesystem failing the read), "not_regular", or
    // "scan_failed" (YARA's own error or timeout). "" without an error, and
    // in records older than the field.
    std::string error_kind{};
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
    // Why the file could not be read ("" when it was): reported for a
    // candidate the command line names that root was refused or could not
    // read, and for any candidate whose read failed with an I/O error
    // (config_scanner.h); its lines are then empty.
    std::string error{};
    bool operator==(const ConfigFile&) const = default;
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
    // Bytes and receive calls (that returned data) on INET sockets, counted
    // the same way (a miner's jobs trickle in; a download pours).
    std::optional<uint64_t> net_recv_bytes{};
    std::optional<uint64_t> net_recvs{};
    bool operator==(const ProcessIo&) const = default;
};

// A live process that libc's readdir of /proc does not list while the
// kernel does (getdents64, the process table): hidden from ps, top and
// every libc program by a preloaded library hooking readdir
// (gpuguard/state/proc_listing.h). Made by the agent's periodic comparison,
// not from the ring buffer. The task is the hidden process.
struct HiddenProcess {
    // What still shows it: "getdents64" (the kernel's own /proc listing) or
    // "process_table" (kernel events only).
    std::string seen_by;
    std::vector<std::string> libraries;   // hiding libraries found, each once
    std::vector<std::string> mechanisms;  // how each was found, one line each
    bool operator==(const HiddenProcess&) const = default;
};

// A kernel module was loaded (tracepoint module:module_load, fired in
// load_module() of the init_module(2)/finit_module(2) caller): the task is
// the loader (modprobe, insmod, or a rootkit's own loader).
struct ModuleLoad {
    std::string name;     // the module's name as the kernel knows it ("dummy", "nvidia_uvm")
    uint32_t taints = 0;  // the module's taint bits (kernel TAINT_*), see module_taint_letters()
    bool operator==(const ModuleLoad&) const = default;
};

// The kernel's letters for taint bits, in bit order, as /proc/modules and
// `lsmod` show them: 1 << 12 (out-of-tree) is "O", 1 << 13 (unsigned) "E",
// both "OE"; 1 << 0 (proprietary licence) "P". A bit the kernel has no
// letter for is "?".
std::string module_taint_letters(uint32_t taints);
// The inverse, for hand-written events; nullopt naming nothing when a
// letter is unknown (the caller reports it).
std::optional<uint32_t> module_taint_bits(std::string_view letters);

// A successful change of a watched file (bpf/files.bpf.c, sensor.watch_files):
// an open for writing, a rename onto the path, or an unlink. Reported when the
// path is on the watch list (`kind` says which entry's kind), or whatever
// the path when a watched (flagged) process made it (`kind` ""). The agent
// makes a relative path absolute (through /proc/PID/cwd or the dirfd) and,
// for ld.so.preload, reads the libraries the file names after the change,
// before the event is journaled: replay judges what live judged. The task is
// the writer.
struct FileChange {
    std::string operation;  // "write", "rename" (onto path) or "unlink"
    std::string syscall;    // "openat", "openat2", "open", "creat", "rename", "renameat",
                            // "renameat2", "unlink", "unlinkat"
    // "preload", "cron", "systemd", "shell_rc", "ssh_keys", "agent_pins",
    // "agent_config" (the agent's own trusted files), "other" (a configured
    // entry of no known kind), "" (not on the list)
    std::string kind;
    std::string path;        // absolute when known (see resolved_from)
    std::string raw_path{};  // as the process passed it, when the agent resolved it
    int32_t result = 0;      // the fd of an open, else 0
    int32_t dirfd = -100;    // AT_FDCWD for absolute and cwd-relative paths
    uint64_t flags = 0;      // open flags, renameat2 or unlinkat flags
    bool path_truncated = false;
    bool watched_process = false;  // reported because the writer is in the kernel watch list
    // kind "preload": the libraries the file names after the change, as the
    // agent read it (empty when unlinked, empty or unreadable)
    std::vector<std::string> libraries{};
    bool operator==(const FileChange&) const = default;
};

// The library-loading variables of a process's environment, read by the
// agent from /proc/PID/environ at its first GPU use (before the GPU open is
// judged) and at each exec while it holds a GPU (before the exec is judged),
// and journaled, so replay judges the same. The task is the process.
//
// Each library LD_PRELOAD names by path and each LD_LIBRARY_PATH directory
// comes with what the agent found on disk when it read the environment (the
// process's own root: a container's files, not the host's), so that replay
// judges what live judged without the files (docs/events.md, "process_env").
struct LoaderPath {
    std::string variable;    // "LD_PRELOAD" or "LD_LIBRARY_PATH"
    std::string path;        // the entry as written
    std::string resolved{};  // its real path in the process's root; "" when it does not exist
    // What vouches for it by content, "" nothing: "dpkg:PACKAGE" (a dpkg file
    // list names it), "conda:PREFIX" (PREFIX holds conda-meta/),
    // "virtualenv:PREFIX" (PREFIX holds pyvenv.cfg), "python:DIR" (a
    // site-packages or dist-packages DIR holding installed distributions).
    std::string vouched_by{};
    // Seconds from its newest change (the file; a directory and the shared
    // libraries in it) to the read; -1 when it does not exist.
    int64_t age_s = -1;
    // The file, its directory or the directory itself can be written by
    // users other than root and its owner (o+w without the sticky bit).
    bool others_can_write = false;
    bool operator==(const LoaderPath&) const = default;
};

struct ProcessEnv {
    std::optional<std::string> ld_preload;       // unset: nullopt
    std::optional<std::string> ld_library_path;  // unset: nullopt
    std::string error;                           // why environ could not be read; "" when it was
    // One per LD_PRELOAD entry with a '/' and per non-empty LD_LIBRARY_PATH
    // entry, in order; empty in records from before the agent read them.
    std::vector<LoaderPath> loader_paths{};
    bool operator==(const ProcessEnv&) const = default;
};

// Something done to the agent itself (docs/events.md, "agent_tamper"). The
// task is the process that did it when known, else the agent. Kinds:
//   "stop"         SIGTERM or SIGINT the agent caught (its siginfo names the
//                  sender); the agent then stops
//   "signal"       any signal sent to the agent, as the kernel saw it sent
//                  (signal:signal_generate), SIGKILL and SIGSTOP included
//   "bpf_command"  a bpf(2) command that detaches or replaces programs, by
//                  another process
//   "pin_removed"  one of the agent's pins under enforcement.pin_path is gone
//   "down"         found at start: the previous run ended uncleanly; the gap
//                  is down_from..down_to, the killer (a signal the pinned map
//                  kept) the task when known
struct AgentTamper {
    std::string kind;
    int32_t signal = 0;      // stop, signal; down: the killing signal when known
    int32_t result = 0;      // signal: the kernel's delivery result (0 delivered)
    uint32_t command = 0;    // bpf_command: the bpf(2) command number
    uint32_t agent_pid = 0;  // the agent it was done to (down: the previous run)
    std::string exe;         // of the task, read when it happened; "" unknown
    std::vector<std::string> cmdline;
    std::string detail;             // the pin ("pin_removed"), how it was found
    int64_t down_from_unix_ns = 0;  // down: last journal record of the previous run
    int64_t down_to_unix_ns = 0;    // down: this start
    bool operator==(const AgentTamper&) const = default;
};

// A change to what the agent trusts (docs/events.md, "trust_change"): its
// configuration, rule files, unit files or executable (the kernel's
// file_change of kind agent_config). The task is the writer when known,
// else the agent. Stages:
//   "write"   the kernel saw the write, rename or unlink (one per change):
//             who did it, read from /proc at once
//   "reload"  the agent took the changed files in: what the change did
//             to its rules or configuration, and the last writer seen
struct TrustChange {
    std::string stage;               // "write", "reload"
    std::string what;                // reload: "rules", "correlation", "config"
    std::vector<std::string> paths;  // the files changed
    std::string operation;           // of the writer's change: write, rename, unlink
    // "package_manager" (dpkg, apt, rpm, dnf, yum, zypper, apk, or a process
    // under one), "systemctl", "other", "unknown" (no write seen)
    std::string writer;
    std::string writer_detail;  // why so ("under /usr/bin/dpkg (pid 812, dpkg:dpkg)")
    std::string exe;            // the writer's, read when it wrote; "" unknown
    std::vector<std::string> cmdline;
    // reload: what the change did, one line each
    std::vector<std::string> allowlist_added;  // allowlist or scope exemptions added
    std::vector<std::string> actions_lowered;  // kill -> alert, dry run on, severity lowered
    std::vector<std::string> rules_disabled;   // signatures or rules disabled or removed
    std::vector<std::string> other_changes;    // anything else that changed
    bool operator==(const TrustChange&) const = default;
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

// The CPU time a busy process used over the agent's last sampling interval
// (all its threads: utime + stime of /proc/PID/stat), read by the agent (not
// from the ring buffer) for every live process and emitted when it used at
// least process_table.busy_cpu_percent of a core, and once more for the
// first interval it drops below: a quiet process costs no event, and a window
// sees a busy process stop. The task is the process.
struct CpuUsage {
    uint64_t cpu_ns = 0;       // CPU time used over the interval, all threads together
    uint64_t interval_ns = 0;  // the interval, ending at the event's ts_ns
    uint32_t threads = 0;      // its threads at the end of the interval
    bool operator==(const CpuUsage&) const = default;
    // Cores' worth used over the interval (1.0: one core all the time).
    double cores() const {
        return interval_ns ? static_cast<double>(cpu_ns) / static_cast<double>(interval_ns) : 0;
    }
};

// The GPU libraries a process had mapped at its first GPU use (read by the
// agent from /proc/PID/maps and put into the stream before that event, so
// replay judges the same), and the software stack they make: an ML
// framework's libraries (PyTorch, cuDNN, NCCL, ROCm's MIOpen, ...), a
// graphics API, or only the driver and a runtime compiler, which is what a
// miner's kernels need. The task is the process.
struct GpuLibraries {
    std::vector<std::string> libraries;   // the GPU-related files mapped, by path, in map order
    std::string stack;                    // "ml_framework", "graphics", "runtime_only",
                                          // "driver_only" or "none"
    std::vector<std::string> frameworks;  // what made it ml_framework ("PyTorch", "cuBLAS")
    std::string error;                    // why the maps could not be read; "" when they were
    bool operator==(const GpuLibraries&) const = default;
};

// A command line the exec record cut short (sensor.argv_max_bytes), read
// again from /proc/PID/cmdline by the agent right after the exec and put
// into the stream after it, so the journal keeps the whole of it and
// replay judges the same (none when the process was already gone). The
// task is the process.
struct ProcessCmdline {
    std::vector<std::string> argv;  // as read, split at NUL bytes
    // Longer than the agent reads (kMaxCmdlineBytes, 64 KiB): argv is its start.
    bool truncated = false;
    // The read starts with the bytes the exec record copied: the same image's
    // command line, which the process table and the signatures then take.
    // False when the process rewrote its argv since, or exec'd again.
    bool extends_exec = false;
    bool operator==(const ProcessCmdline&) const = default;
};

// What the agent read of the workload a process runs in, at its first GPU
// use (docs/events.md, "workload"): the Slurm job (its cgroup path and
// environment) and the GPUs the job, the pod or the process's own
// environment allocated to it, turned into device numbers then, so that
// replay names the job and judges the allocation as live did. Put into the
// stream only when there is a job or an allocation to tell. The task is the
// process.
struct Workload {
    // "slurm" (a Slurm job's process) or "kubernetes" (a pod's container).
    std::string scheduler;
    SlurmJob slurm;  // flattened: "job_id", "step_id", ...; empty outside a job
    // Where the allocation was read: "kubelet" (its PodResources API),
    // "SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES",
    // "NVIDIA_VISIBLE_DEVICES"; "" none found.
    std::string allocation_source;
    std::string allocation;  // its value as written ("0,2", "GPU-8f3c...", "all")
    // The device numbers allocated ("195:0"): GRES indices through
    // gres.conf's File= lines, other indices as /dev/nvidiaN.
    std::vector<std::string> allocated;
    // The node's GPU devices the allocation is taken from (gres.conf's
    // File= lines); empty: every NVIDIA GPU node (195:0 to 195:253).
    std::vector<std::string> node_gpus;
    // Why the allocation could not be turned into device numbers (a GPU
    // UUID, a MIG instance, "all"): it is then not judged; "" when it was.
    std::string unresolved;
    // A pod's identity (scheduler "kubernetes"): the UID from its cgroup,
    // namespace and name from the container's labels or the kubelet's pod
    // directory, the container's name as the kubelet knows it; "" unknown.
    std::string pod_namespace;
    std::string pod_name;
    std::string pod_uid;
    std::string container;
    bool operator==(const Workload&) const = default;
};

using EventData =
    std::variant<GpuOpen, GpuIoctl, Connect, Exec, Fork, Exit, Telemetry, ProcessSnapshot, KillNow,
                 ExeScan, NetPayload, Stratum, ProcessIo, ConfigFile, HiddenProcess, ModuleLoad,
                 FileChange, ProcessEnv, AgentTamper, Container, CpuUsage, GpuLibraries,
                 LoopbackPeer, ProcessCmdline, Flow, TrustChange, PoolProbe, Workload, GpuFault>;

struct Event {
    uint64_t ts_ns = 0;  // CLOCK_MONOTONIC nanoseconds
    TaskInfo task;
    EventData data;
};

// Name of an event's type as used in JSON ("gpu_open", "gpu_ioctl", "connect",
// "exec", "fork", "exit", "telemetry", "process_snapshot", "kill_now",
// "exe_scan", "net_payload", "stratum", "process_io", "config_file",
// "hidden_process", "module_load", "file_change", "process_env", "agent_tamper",
// "container", "cpu_usage", "gpu_libraries", "loopback_peer", "cmdline",
// "flow", "trust_change", "pool_probe", "workload", "gpu_fault").
const char* event_type_name(const Event& event);

// Every type's name, in EventData's order: what --event-types, `journal
// export --type` and the JSON reader accept and list in their errors.
const std::vector<std::string>& event_type_names();

// "a\0b\0c\0" -> {"a", "b", "c"}, as in /proc/PID/cmdline and exec argv; a
// final part without its NUL is kept.
std::vector<std::string> split_nul_separated(std::string_view bytes);

// An address as the kernel records it (16 bytes, IPv4 in the first 4;
// family AF_INET or AF_INET6) as text; a v4-mapped IPv6 one as the IPv4 one.
std::string kernel_address_text(uint16_t family, const uint8_t* addr);

// Decodes one ring-buffer record (bpf/events.h). Fails with kParse on a
// short, oversized, unknown-type or wrong-ABI record; never reads past
// `record`.
Result<Event> decode_record(std::span<const std::byte> record);

// The name of a ring-buffer record type (GG_EVENT_*) in the sensor's
// per-type counters, from the list decode_record dispatches on; nullptr for
// a number no program emits.
const char* record_type_name(uint32_t type);

// The operation and syscall names of a gg_file_change_event's syscall, and
// the kind name of its category (bpf/events.h); nullptr when unknown.
const char* file_change_operation(uint16_t syscall);
const char* file_change_syscall(uint16_t syscall);
const char* file_change_kind(uint32_t category);
// The category of a kind name ("preload" -> GG_FILE_CAT_PRELOAD), 0 when unknown.
uint32_t file_change_category(std::string_view kind);

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
    uint64_t received_bytes = 0;  // and what it received
    uint64_t receives = 0;
};

}  // namespace gpuguard::agent
