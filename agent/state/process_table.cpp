#include "gpuguard/state/process_table.h"

#include <algorithm>
#include <functional>
#include <optional>
#include <utility>

#include <unistd.h>

#include "gpuguard/events/gpu_devices.h"
#include "gpuguard/state/process_handle.h"
#include "process_info_edits.h"

namespace gpuguard::agent {

TaskInfo task_of(const ProcessInfo& info) {
    return TaskInfo{info.pid, info.pid, info.ppid, info.uid, info.gid, info.cgroup_id, info.comm};
}

uint64_t ProcessInfo::ioctl_total() const {
    uint64_t total = 0;
    for (const auto& counter : ioctls) total += counter.count;
    return total;
}

ProcessTable::ProcessTable(ProcessTableOptions options, IsGpuDevice is_gpu)
    : options_(std::move(options)),
      is_gpu_(std::move(is_gpu)),
      container_names_(options_.runtime_root, options_.read_host) {
    // Slots for the bound up front (up to 2 MiB of them): growing re-slots
    // every entry.
    processes_.reserve(std::min<size_t>(options_.max_entries, 1 << 16));
}

ProcessInfo& ProcessTable::entry(uint32_t pid) {
    const auto [entry, created] = processes_.try_emplace(pid);
    if (!created) return *entry;
    ProcessInfo& info = *entry;
    info.pid = pid;
    load_from_proc(info);  // a process we have not seen exec (started before us, or evicted)
    note_idle(pid);
    return info;
}

void ProcessTable::apply(const Event& event) {
    const TaskInfo& task = event.task;
    struct Visitor {
        ProcessTable& table;
        const Event& event;
        const TaskInfo& task;

        ProcessInfo& identified() {
            ProcessInfo& info = table.entry(task.pid);
            take_identity(info, task);
            return info;
        }

        void operator()(const GpuOpen& open) {
            if (!open.succeeded()) return;
            ProcessInfo& info = identified();
            const bool first = !info.holds_gpu();
            add_gpu(info, GpuHandle{open.major, open.minor, open.result, event.ts_ns, false});
            if (first) table.enrich_from_proc(info);
        }
        void operator()(const GpuIoctl& ioctl) {
            ProcessInfo& info = identified();
            const bool first = !info.holds_gpu();
            add_gpu(info, GpuHandle{ioctl.major, ioctl.minor, ioctl.fd, event.ts_ns, false});
            if (first) table.enrich_from_proc(info);
        }
        void operator()(const Connect& connect) {
            ProcessInfo& info = identified();
            info.connects.push_back(
                ConnectRecord{event.ts_ns, connect.address, connect.port, connect.result});
            if (info.connects.size() > table.options_.max_connects) {
                info.connects.erase(
                    info.connects.begin(),
                    info.connects.end() - static_cast<std::ptrdiff_t>(table.options_.max_connects));
            }
        }
        void operator()(const Exec& exec) {
            table.apply_exec(task, exec.exe.empty() ? exec.filename : exec.exe, exec.argv,
                             exec.argv_truncated);
        }
        void operator()(const Fork& fork) {
            ProcessInfo child;
            if (const ProcessInfo* parent = table.processes_.find(task.pid)) {
                child = *parent;  // same image, same user, same cgroup
                child.connects.clear();
                child.ioctls.clear();
                child.exited = false;
                child.exit_code.reset();
                child.exit_signal.reset();
                for (auto& gpu : child.gpus) gpu.inherited = true;
                if (!fork.inherited_gpu) child.gpus.clear();
            } else {
                child.comm = task.comm;
                child.uid = task.uid;
                child.gid = task.gid;
                child.cgroup_id = task.cgroup_id;
            }
            child.pid = fork.child_pid;
            child.ppid = task.pid;
            child.start_time_ns = fork.child_start_ns ? proc_start_time_ns(fork.child_start_ns) : 0;
            table.processes_[fork.child_pid] = std::move(child);
            table.note_idle(fork.child_pid);
        }
        void operator()(const Exit& exit) {
            ProcessInfo* found = table.processes_.find(task.pid);
            if (!found) return;  // never knew it: nothing to keep
            ProcessInfo& info = *found;
            info.exited = true;
            info.exit_ns = event.ts_ns;
            table.exited_candidates_.push(info.exit_ns, task.pid);
            if (exit.signal() != 0) {
                info.exit_signal = exit.signal();
            } else {
                info.exit_code = exit.exit_code();
            }
        }
        // Per-GPU data: the correlator keeps it. A live process the GPU lists
        // that holds no GPU the sensor saw is a GPU holder all the same, on
        // the GPU's word only (GpuHandle::reported_only, gpu_unseen).
        void operator()(const Telemetry& telemetry) {
            if (telemetry.processes.empty()) return;
            std::optional<std::pair<uint32_t, uint32_t>> device;
            for (const auto& number : telemetry.devices) {
                if ((device = parse_device_number(number))) break;
            }
            if (!device) return;
            for (const auto& usage : telemetry.processes) {
                ProcessInfo* info = table.processes_.find(usage.pid);
                if (!info || info->exited || info->holds_gpu()) continue;
                GpuHandle handle{device->first, device->second, -1, event.ts_ns, false};
                handle.reported_only = true;
                add_gpu(*info, handle);
            }
        }
        void operator()(const KillNow&) {}  // the exit event that follows updates the entry
        void operator()(const ExeScan&) {}  // a verdict: the correlator keeps it
        void operator()(const NetPayload&) {
        }  // raw samples: gpuguard/netintel/net_intel.h reads them
        void operator()(const ProcessIo&) {}     // write counters: the correlator keeps them
        void operator()(const CpuUsage&) {}      // CPU readings: the correlator keeps them
        void operator()(const GpuLibraries&) {}  // its GPU stack: the correlator keeps it
        void operator()(const LoopbackPeer&) {}  // who serves its loopback flow: the correlator
        void operator()(const Flow&) {}          // a flow's shape: the correlator keeps it
        void operator()(const PoolProbe&) {}     // the agent's probe of its peer: the correlator
        void operator()(const GpuFault&) {}      // a GPU's Xid or ECC error: the correlator
        // The whole command line of the image the exec record cut short.
        void operator()(const ProcessCmdline& read) {
            ProcessInfo* info = table.processes_.find(task.pid);
            if (!info || info->exited || !read.extends_exec || read.argv.empty()) return;
            info->cmdline = read.argv;
            info->cmdline_truncated = read.truncated;
        }
        void operator()(const ConfigFile&) {}    // matched config lines: the correlator keeps them
        void operator()(const HiddenProcess&) {  // the correlator judges it
            ProcessInfo& info = table.entry(task.pid);
            if (!task.comm.empty()) take_identity(info, task);
            if (info.exe.empty()) table.enrich_from_proc(info);
        }
        void operator()(const ModuleLoad&) {  // the loader: the correlator judges it
            ProcessInfo& info = identified();
            if (info.exe.empty()) table.enrich_from_proc(info);
        }
        void operator()(const FileChange&) {}  // persistence and preload: the correlator judges
        void operator()(const ProcessEnv&) {}  // its library variables: the correlator judges
        // Its Slurm job names it from here on; the allocation: the correlator.
        // Its pod too, where the runtime's labels did not name it (the
        // kubelet's pod directory did): every alert of it names the pod.
        void operator()(const Workload& workload) {
            ProcessInfo* info = table.processes_.find(task.pid);
            if (!info || info->exited) return;
            info->slurm = workload.slurm;
            ContainerDetails& pod = info->container_details;
            if (!pod.in_pod() && !workload.pod_name.empty()) {
                pod.pod_name = workload.pod_name;
                pod.pod_namespace = workload.pod_namespace;
                pod.pod_uid = workload.pod_uid;
                pod.kube_container = workload.container;
            }
        }
        // Whoever did something to the agent, or changed its trusted files:
        // known from here on, with the executable and command line read
        // when it happened (it may be gone, or the pid another's by now).
        void reported(const std::string& exe, const std::vector<std::string>& cmdline) {
            ProcessInfo& info = identified();
            if (exe.empty()) {
                if (info.exe.empty()) table.enrich_from_proc(info);
                return;
            }
            info.exe = exe;
            info.cmdline = cmdline;
        }
        void operator()(const AgentTamper& tamper) { reported(tamper.exe, tamper.cmdline); }
        void operator()(const TrustChange& change) { reported(change.exe, change.cmdline); }
        void operator()(const Container& container) {  // a snapshot or an exec follows
            table.container_names_.remember(container);
            table.remember_cgroup_container(task.cgroup_id,
                                            ContainerInfo{container.runtime, container.id});
        }
        void operator()(const Stratum&) {  // a mining session: the correlator judges it
            ProcessInfo& info = identified();
            if (info.exe.empty()) table.enrich_from_proc(info);
        }
        void operator()(const ProcessSnapshot& snapshot) {
            ProcessInfo& info = table.processes_[task.pid];
            take_identity(info, task);
            info.exe = snapshot.exe;
            info.exe_package = snapshot.exe_package;
            info.cmdline = snapshot.argv;
            info.user = snapshot.user;
            info.cgroup_path = snapshot.cgroup_path;
            info.container.reset();
            if (!snapshot.container_id.empty()) {
                info.container = ContainerInfo{snapshot.container_runtime, snapshot.container_id};
            }
            info.container_details = info.container
                                         ? table.container_names_.details_of(*info.container)
                                         : ContainerDetails{};
            info.gpus.clear();
            for (const auto& gpu : snapshot.gpus) {
                info.gpus.push_back(GpuHandle{gpu.major, gpu.minor, gpu.fd, 0, false});
            }
            info.exited = false;
            table.note_idle(task.pid);
        }
    };
    Visitor visitor{*this, event, task};
    std::visit(visitor, event.data);
    enforce_bound();
}

void ProcessTable::apply_exec(const TaskInfo& task, std::string filename,
                              std::vector<std::string> argv, bool argv_truncated) {
    // Everything is in the event: no /proc read for the host's every exec.
    ProcessInfo& info = processes_[task.pid];
    if (info.exited) info = ProcessInfo{};  // a reused pid: nothing carries over
    take_identity(info, task);
    info.exe = std::move(filename);
    info.exe_package.clear();
    info.cmdline = std::move(argv);
    info.cmdline_truncated = argv_truncated;
    info.exited = false;
    // A container announced for this cgroup names the process from its first
    // exec, GPU or not: an exec-time detection carries it.
    if (const auto known = cgroup_containers_.find(task.cgroup_id);
        task.cgroup_id != 0 && known != cgroup_containers_.end()) {
        info.container = known->second;
        info.container_details = container_names_.details_of(known->second);
    }
    note_idle(task.pid);
    if (info.holds_gpu()) enrich_from_proc(info);  // a GPU fd survived exec
}

void ProcessTable::remember_cgroup_container(uint64_t cgroup_id, ContainerInfo container) {
    if (cgroup_id == 0) return;
    // Bounded: a host runs far fewer containers; past it, the next exec in a
    // forgotten one is named again once the agent announces it again.
    if (cgroup_containers_.size() >= kMaxCgroupContainers &&
        !cgroup_containers_.contains(cgroup_id)) {
        cgroup_containers_.clear();
    }
    cgroup_containers_[cgroup_id] = std::move(container);
}

void ProcessTable::apply_ioctl_stats(const std::vector<IoctlAggregate>& stats, uint64_t now_ns) {
    const double seconds = last_ioctl_read_ns_ && now_ns > last_ioctl_read_ns_
                               ? static_cast<double>(now_ns - last_ioctl_read_ns_) / 1e9
                               : 0.0;
    for (const auto& aggregate : stats) {
        ProcessInfo* found = processes_.find(aggregate.pid);
        if (!found) continue;  // evicted or never seen open: the kernel will forget it
        ProcessInfo& info = *found;
        auto counter = std::find_if(info.ioctls.begin(), info.ioctls.end(), [&](const auto& c) {
            return c.major == aggregate.major && c.minor == aggregate.minor &&
                   c.cmd == aggregate.cmd;
        });
        if (counter == info.ioctls.end()) {
            info.ioctls.push_back(IoctlCounter{aggregate.major, aggregate.minor, aggregate.cmd});
            counter = info.ioctls.end() - 1;
        }
        const uint64_t delta =
            aggregate.count >= counter->count ? aggregate.count - counter->count : 0;
        counter->rate_per_s = seconds > 0 ? static_cast<double>(delta) / seconds : 0.0;
        counter->count = aggregate.count;
        counter->first_ns = aggregate.first_ns;
        counter->last_ns = aggregate.last_ns;
    }
    last_ioctl_read_ns_ = now_ns;
}

std::vector<uint32_t> ProcessTable::evict(uint64_t now_ns) {
    std::vector<uint32_t> gpu_pids;
    const uint64_t grace_ns =
        static_cast<uint64_t>(std::chrono::nanoseconds(options_.exit_grace).count());
    auto& exited = exited_candidates_;
    while (!exited.empty() && now_ns >= exited.front().first + grace_ns) {
        const auto [exit_ns, pid] = exited.front();
        exited.pop();
        const ProcessInfo* found = processes_.find(pid);
        if (!found || !found->exited || found->exit_ns != exit_ns) {
            continue;  // gone, running again, or exited again later
        }
        if (found->holds_gpu()) gpu_pids.push_back(pid);
        processes_.erase(pid);
    }
    enforce_bound();
    return gpu_pids;
}

void ProcessTable::note_idle(uint32_t pid) {
    idle_candidates_.push_back(pid);
    std::push_heap(idle_candidates_.begin(), idle_candidates_.end(), std::greater<>{});
}

void ExitQueue::push(uint64_t exit_ns, uint32_t pid) {
    if (in_order_.empty() || exit_ns >= in_order_.back().first) {
        in_order_.emplace_back(exit_ns, pid);
        return;
    }
    late_.emplace_back(exit_ns, pid);
    std::push_heap(late_.begin(), late_.end(), std::greater<>{});
}

void ExitQueue::pop() {
    if (from_late()) {
        std::pop_heap(late_.begin(), late_.end(), std::greater<>{});
        late_.pop_back();
    } else {
        in_order_.pop_front();
    }
}

void ProcessTable::rebuild_candidates() {
    exited_candidates_.clear();
    idle_candidates_.clear();
    std::vector<ExitQueue::Entry> exited;
    for (const auto& [pid, info] : processes_) {
        if (info.exited) {
            exited.emplace_back(info.exit_ns, pid);
        } else if (!info.holds_gpu()) {
            idle_candidates_.push_back(pid);
        }
    }
    std::sort(exited.begin(), exited.end());
    for (const auto& [exit_ns, pid] : exited) exited_candidates_.push(exit_ns, pid);
    std::make_heap(idle_candidates_.begin(), idle_candidates_.end(), std::greater<>{});
}

void ProcessTable::enforce_bound() {
    // Stale candidates pile up while the table stays below its bound.
    if (exited_candidates_.size() + idle_candidates_.size() > 4 * processes_.size() + 4096) {
        rebuild_candidates();
    }
    if (processes_.size() <= options_.max_entries) return;
    // Down to the bound, one victim per new entry once it is reached: the
    // heaps make each pick cheap, and the memory one frees is what the next
    // new entry takes (cutting to 90 % at once freed thousands of entries
    // for the allocator to sort through).
    const size_t target = options_.max_entries;
    // Victims in order: exited first (oldest exit), then live processes that
    // hold no GPU (lowest pid first as a stand-in for age). GPU holders stay.
    size_t excess = processes_.size() - target;
    auto& exited = exited_candidates_;
    while (excess > 0 && !exited.empty()) {
        const auto [exit_ns, pid] = exited.front();
        exited.pop();
        const ProcessInfo* found = processes_.find(pid);
        if (!found || !found->exited || found->exit_ns != exit_ns) continue;
        processes_.erase(pid);
        --excess;
    }
    auto& idle = idle_candidates_;
    while (excess > 0 && !idle.empty()) {
        std::pop_heap(idle.begin(), idle.end(), std::greater<>{});
        const uint32_t pid = idle.back();
        idle.pop_back();
        const ProcessInfo* found = processes_.find(pid);
        if (!found || found->exited || found->holds_gpu()) {
            continue;  // its next change into an idle entry pushes it again
        }
        processes_.erase(pid);
        ++evicted_live_;
        --excess;
    }
}

std::optional<ProcessInfo> ProcessTable::get(uint32_t pid) const {
    const ProcessInfo* found = processes_.find(pid);
    if (!found) return std::nullopt;
    return *found;
}

const ProcessInfo* ProcessTable::find(uint32_t pid) const { return processes_.find(pid); }

std::vector<ProcessInfo> ProcessTable::processes_where(
    const std::function<bool(const ProcessInfo&)>& keep) const {
    std::vector<ProcessInfo> out;
    for (const auto& [pid, info] : processes_) {
        if (keep(info)) out.push_back(info);
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.pid < b.pid; });
    return out;
}

std::vector<ProcessInfo> ProcessTable::gpu_processes() const {
    return processes_where([](const ProcessInfo& info) { return info.holds_gpu(); });
}

std::vector<ProcessInfo> ProcessTable::live_processes() const {
    return processes_where([](const ProcessInfo& info) { return !info.exited; });
}

std::vector<uint32_t> ProcessTable::live_pids() const {
    std::vector<uint32_t> out;
    for (const auto& [pid, info] : processes_) {
        if (!info.exited) out.push_back(pid);
    }
    std::sort(out.begin(), out.end());
    return out;
}

Event snapshot_event(const ProcessInfo& info, uint64_t ts_ns) {
    Event event;
    event.ts_ns = ts_ns;
    event.task = task_of(info);
    ProcessSnapshot snapshot;
    snapshot.exe = info.exe;
    snapshot.exe_package = info.exe_package;
    snapshot.argv = info.cmdline;
    snapshot.user = info.user;
    snapshot.cgroup_path = info.cgroup_path;
    if (info.container) {
        snapshot.container_id = info.container->id;
        snapshot.container_runtime = info.container->runtime;
    }
    for (const auto& gpu : info.gpus) {
        snapshot.gpus.push_back(SnapshotGpu{gpu.major, gpu.minor, gpu.fd});
    }
    event.data = std::move(snapshot);
    return event;
}

std::optional<Event> container_event(const ProcessInfo& info, uint64_t ts_ns) {
    if (!info.container) return std::nullopt;
    Event event;
    event.ts_ns = ts_ns;
    event.task = task_of(info);
    event.data = Container{info.container->id, info.container->runtime, info.container_details};
    return event;
}

DetectionProcess describe_process(const ProcessInfo& info) {
    DetectionProcess process;
    process.pid = info.pid;
    process.ppid = info.ppid;
    process.uid = info.uid;
    process.gid = info.gid;
    process.comm = info.comm;
    process.executable = info.exe;
    process.start_time_ns = info.start_time_ns;
    process.argv = info.cmdline;
    process.command_line = join(info.cmdline, " ");
    process.user = info.user;
    process.cgroup_path = info.cgroup_path;
    if (info.container) {
        process.container_id = info.container->id;
        process.container_runtime = info.container->runtime;
        process.container = info.container_details;
    }
    process.slurm = info.slurm;
    return process;
}

}  // namespace gpuguard::agent
