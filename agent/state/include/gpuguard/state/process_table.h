// ProcessTable: what the agent knows about every process, kept from sensor
// events and bootstrapped from /proc at start. GPU-holding processes are
// enriched from /proc (exe, cgroup, container, user); the table is bounded
// and forgets exited processes after a grace period.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <sys/types.h>

#include "gpuguard/common/detection.h"
#include "gpuguard/common/result.h"
#include "gpuguard/events/event.h"
#include "gpuguard/state/container_names.h"
#include "gpuguard/state/pid_map.h"
#include "gpuguard/state/proc_parse.h"

namespace gpuguard::agent {

struct GpuHandle {
    uint32_t major = 0;
    uint32_t minor = 0;
    int32_t fd = -1;         // -1 when known only by inheritance
    uint64_t since_ns = 0;   // CLOCK_MONOTONIC; 0 when found by the /proc bootstrap
    bool inherited = false;  // through fork
    // Known only because the GPU's own telemetry (NVML) lists the process:
    // the sensor never saw it open a GPU (an io_uring open, an fd passed
    // over a UNIX socket, a full gpu_tgids map). Cleared by any open seen.
    bool reported_only = false;
    bool operator==(const GpuHandle&) const = default;
};

struct ConnectRecord {
    uint64_t ts_ns = 0;
    std::string address;
    uint16_t port = 0;
    int32_t result = 0;
};

struct IoctlCounter {
    uint32_t major = 0;
    uint32_t minor = 0;
    uint32_t cmd = 0;
    uint64_t count = 0;     // since the first call
    double rate_per_s = 0;  // over the last aggregation interval
    uint64_t first_ns = 0;
    uint64_t last_ns = 0;
};

struct ProcessInfo {
    uint32_t pid = 0;
    uint32_t ppid = 0;
    uint32_t uid = 0;
    uint32_t gid = 0;
    // First, next to the table's key: eviction reads these of many entries
    // and would miss the cache on each if they sat behind the strings.
    bool exited = false;
    uint64_t exit_ns = 0;
    std::vector<GpuHandle> gpus;
    std::string comm;
    std::string exe;  // resolved /proc/PID/exe, or the exec filename until enriched
    // The package owning exe's path when exe is "PATH (deleted)" (a package
    // upgrade replaced it), "dpkg:NAME"; "" otherwise.
    std::string exe_package;
    // Start time in ProcStat::start_time_ns's units, from the fork the
    // kernel reported or /proc at bootstrap; 0 unknown. A kill checks the
    // pid's process against it (gpuguard/state/process_handle.h).
    uint64_t start_time_ns = 0;
    std::vector<std::string> cmdline;
    bool cmdline_truncated = false;
    std::string user;   // name of uid, "" when unknown
    std::string group;  // name of gid read from the host, "" when unknown (replay: always)
    // The container's name, image and pod from its runtime's state
    // (gpuguard/state/container_names.h; replay: from journaled container
    // events); empty on the host or when unknown.
    ContainerDetails container_details;
    // The Slurm job it runs in (a workload event at its first GPU use);
    // empty outside one.
    SlurmJob slurm;
    uint64_t cgroup_id = 0;
    std::string cgroup_path;
    std::optional<ContainerInfo> container;
    std::vector<IoctlCounter> ioctls;
    std::vector<ConnectRecord> connects;  // newest last, bounded (a deque allocates when made)
    std::optional<int> exit_code;
    std::optional<int> exit_signal;

    bool holds_gpu() const { return !gpus.empty(); }
    uint64_t ioctl_total() const;
};

// The identity of an event about `info`'s process made by the agent (a
// process_snapshot, a process_io reading): its main thread as the task.
TaskInfo task_of(const ProcessInfo& info);
// A ProcessSnapshot event for what the table knows about `info`: the
// identity a journal segment, a replay window or a first GPU use starts from.
Event snapshot_event(const ProcessInfo& info, uint64_t ts_ns);
// A Container event for `info`'s container, journaled before its snapshot;
// nullopt on the host.
std::optional<Event> container_event(const ProcessInfo& info, uint64_t ts_ns);
// A detection's (or an enforcement outcome's) view of a table entry.
DetectionProcess describe_process(const ProcessInfo& info);

struct ProcessTableOptions {
    std::filesystem::path proc_root = "/proc";
    size_t max_entries = 32768;  // bound on memory; exited, then idle non-GPU entries go first
    std::chrono::seconds exit_grace{30};  // how long exited processes stay visible
    size_t max_connects = 16;             // per process
    // Read /proc and the user database to fill in what events lack. Off for
    // replay, where only the events (and process_snapshot events) count.
    bool read_host = true;
    // A pid whose GPU fds the /proc bootstrap does not count: the agent's
    // own (NVML's fds on /dev/nvidia*), as the sensor ignores its opens.
    uint32_t ignore_pid = 0;
    std::filesystem::path runtime_root = "/";  // where container runtimes keep their state
};

struct BootstrapReport {
    size_t processes = 0;      // entries created
    size_t gpu_processes = 0;  // of which hold a GPU fd
    size_t unreadable = 0;     // pids that vanished or could not be read
};

// Exited pids, oldest exit first: a queue of the exits reported in time
// order (nearly all of them) and a heap of the few reported late (another
// CPU's ring buffer). One heap of everything, 100 000 exits on a busy host,
// missed the cache at every level of every pop.
class ExitQueue {
  public:
    using Entry = std::pair<uint64_t, uint32_t>;  // exit_ns, pid

    void push(uint64_t exit_ns, uint32_t pid);
    bool empty() const { return in_order_.empty() && late_.empty(); }
    size_t size() const { return in_order_.size() + late_.size(); }
    // The oldest exit; not empty().
    const Entry& front() const { return from_late() ? late_.front() : in_order_.front(); }
    void pop();
    void clear() {
        in_order_.clear();
        late_.clear();
    }

  private:
    bool from_late() const {
        return !late_.empty() && (in_order_.empty() || late_.front() < in_order_.front());
    }
    std::deque<Entry> in_order_;  // exit times never decrease
    std::vector<Entry> late_;     // a min-heap
};

class ProcessTable {
  public:
    using IsGpuDevice = std::function<bool(uint32_t major, uint32_t minor)>;

    ProcessTable(ProcessTableOptions options, IsGpuDevice is_gpu);
    ProcessTable(const ProcessTable&) = delete;
    ProcessTable& operator=(const ProcessTable&) = delete;

    // Reads every /proc/PID once: identity, cmdline, and each fd's device
    // number (stat once, at start only) to find processes already holding a
    // GPU. Fails only when proc_root itself cannot be listed.
    Result<BootstrapReport> bootstrap();

    // Applies one sensor event.
    void apply(const Event& event);

    // Folds in the kernel's ioctl aggregates read at `now_ns`; rates are per
    // second over the time since the previous call.
    void apply_ioctl_stats(const std::vector<IoctlAggregate>& stats, uint64_t now_ns);

    // Removes processes that exited more than exit_grace before `now_ns`, and
    // enforces max_entries. Returns the pids removed that had held a GPU.
    std::vector<uint32_t> evict(uint64_t now_ns);

    std::optional<ProcessInfo> get(uint32_t pid) const;
    // What the table would know about `task`'s process after reading /proc
    // for it now (exe, cgroup, container, user), without changing the table:
    // the agent journals it as a process_snapshot before the event that makes
    // the process a GPU holder, so replay sees the same identity.
    ProcessInfo enriched(const TaskInfo& task);
    // The entry itself, valid until the next apply()/evict(); nullptr if unknown.
    const ProcessInfo* find(uint32_t pid) const;
    std::vector<ProcessInfo> gpu_processes() const;   // sorted by pid
    std::vector<ProcessInfo> live_processes() const;  // not exited, sorted by pid
    std::vector<uint32_t> live_pids() const;          // the same, pids only
    size_t size() const { return processes_.size(); }
    uint64_t evicted_live() const { return evicted_live_; }  // bound hit: live entries dropped

  private:
    void apply_exec(const TaskInfo& task, std::string filename, std::vector<std::string> argv,
                    bool argv_truncated);
    void remember_cgroup_container(uint64_t cgroup_id, ContainerInfo container);
    std::vector<ProcessInfo> processes_where(
        const std::function<bool(const ProcessInfo&)>& keep) const;  // sorted by pid
    ProcessInfo& entry(uint32_t pid);          // find or create (from /proc when it can)
    void load_from_proc(ProcessInfo& info);    // identity + cmdline
    void enrich_from_proc(ProcessInfo& info);  // exe, cgroup, container, user
    std::string user_name(uint32_t uid);
    std::string group_name(uint32_t gid);
    void enforce_bound();
    // Eviction candidates, so that neither evict() nor enforce_bound() walks
    // every entry: min-heaps of (exit_ns, pid), pushed at each exit, and of
    // pids, pushed wherever an entry may become live without a GPU. An entry
    // may have changed since its push: each candidate is checked when used.
    void note_idle(uint32_t pid);
    void rebuild_candidates();

    ProcessTableOptions options_;
    IsGpuDevice is_gpu_;
    PidMap<ProcessInfo> processes_;
    std::map<uint32_t, std::string> user_names_;
    std::map<uint32_t, std::string> group_names_;
    ContainerNames container_names_;
    // Containers by cgroup id, from container events: what names a process
    // at its exec, before (or without) a snapshot of it.
    static constexpr size_t kMaxCgroupContainers = 16384;
    std::unordered_map<uint64_t, ContainerInfo> cgroup_containers_;
    uint64_t last_ioctl_read_ns_ = 0;
    uint64_t evicted_live_ = 0;
    ExitQueue exited_candidates_;
    std::vector<uint32_t> idle_candidates_;
};

}  // namespace gpuguard::agent
