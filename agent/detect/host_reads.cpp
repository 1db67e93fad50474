#include "gpuguard/detect/host_reads.h"

#include "gpuguard/state/command_line.h"
#include "gpuguard/state/file_context.h"
#include "gpuguard/state/gpu_libraries.h"
#include "gpuguard/state/proc_sockets.h"
#include "gpuguard/state/workload.h"
#include "gpuguard/state/writer_origin.h"

namespace gpuguard::agent {

HostReads::HostReads(ProcessTable& table, HostReadOptions options)
    : table_(table), options_(std::move(options)) {}

void HostReads::complete(Event& event) const {
    if (auto* change = std::get_if<FileChange>(&event.data)) {
        static const std::vector<WatchPattern> kNone;
        complete_file_change(event.task.pid, *change,
                             options_.watch_files ? *options_.watch_files : kNone,
                             options_.proc_root);
    } else if (auto* exec = std::get_if<Exec>(&event.data)) {
        complete_exec(event.task.pid, *exec, options_.proc_root);
    }
}

Event HostReads::environment_of(const Event& event) const {
    return Event{event.ts_ns, event.task, read_process_env(event.task.pid, options_.proc_root)};
}

std::optional<Workload> HostReads::read_workload_of(uint32_t pid) const {
    WorkloadReadOptions workload_options = host_workload_options(options_.proc_root);
    workload_options.kubelet = options_.kubelet;
    const ProcessInfo* info = table_.find(pid);
    return read_workload(pid, workload_options,
                         info ? info->container_details : ContainerDetails{});
}

std::optional<Event> HostReads::workload_of(const Event& event) {
    // Counted before the lookup: the refresh a lookup that misses asks for
    // can answer before a count read after it, which would then take that
    // answer (naming the pod) for one that did not, and wait a whole poll.
    const KubeletAnswers& answers = options_.kubelet.answers;
    const uint64_t answered = answers ? answers() : 0;
    auto workload = read_workload_of(event.task.pid);
    if (!workload) return std::nullopt;
    // The kubelet answers, but not yet for this pod (started since its last
    // answer; the lookup asked it again): judged once it has answered.
    constexpr size_t kMaxWaitingPods = 1024;
    // (A pod not named, a host-network one without labels, the kubelet cannot place.)
    if (answered > 0 && workload->scheduler == "kubernetes" && !workload->pod_name.empty() &&
        workload->allocation_source != "kubelet" &&
        workload->allocation_source != kGpuInfrastructureSource &&
        waiting_pods_.size() < kMaxWaitingPods) {
        waiting_pods_.push_back(WaitingPod{event.task, answered});
        workload->unresolved = "the kubelet has not named its pod yet (asked again)";
    }
    return Event{event.ts_ns, event.task, std::move(*workload)};
}

std::vector<Event> HostReads::workloads_after_refresh(uint64_t now_ns) {
    std::vector<Event> out;
    if (waiting_pods_.empty() || !options_.kubelet.answers) return out;
    const uint64_t answered = options_.kubelet.answers();
    std::vector<WaitingPod> still;
    for (WaitingPod& waiting : waiting_pods_) {
        if (waiting.answers >= answered) {
            still.push_back(std::move(waiting));
            continue;
        }
        const ProcessInfo* info = table_.find(waiting.task.pid);
        if (!info || info->exited) continue;
        // Named by the kubelet now, or never: then its environment's word.
        if (auto workload = read_workload_of(waiting.task.pid)) {
            out.push_back(Event{now_ns, waiting.task, std::move(*workload)});
        }
    }
    waiting_pods_ = std::move(still);
    return out;
}

Event HostReads::gpu_libraries_of(const Event& event) const {
    return Event{event.ts_ns, event.task, read_gpu_libraries(event.task.pid, options_.proc_root)};
}

std::vector<Event> HostReads::established_connects_of(const Event& event) const {
    std::vector<Event> out;
    for (Connect& connect :
         established_connects(options_.proc_root, event.task.pid, /*gpu_holder=*/true)) {
        out.push_back(Event{event.ts_ns, event.task, std::move(connect)});
    }
    return out;
}

std::optional<Event> HostReads::full_cmdline_of(const Event& exec) const {
    // An exec that copied nothing (sensor.argv_max_bytes: 0) asked for no argv.
    const auto* data = std::get_if<Exec>(&exec.data);
    if (!data || !data->argv_truncated || data->argv.empty()) return std::nullopt;
    auto read = read_full_cmdline(exec.task.pid, data->argv, options_.proc_root);
    if (!read) return std::nullopt;  // gone already: nothing to judge
    return Event{exec.ts_ns, exec.task, std::move(*read)};
}

std::optional<Event> HostReads::trusted_write_of(const Event& change) const {
    const auto* data = std::get_if<FileChange>(&change.data);
    if (!data || data->kind != "agent_config") return std::nullopt;
    WriterOrigin origin = writer_origin(change.task.pid, options_.proc_root);
    if (origin.exe.empty()) {
        // Gone already (`echo ... > file` ends at once): what the table kept
        // of its exec and of its parents', looked up on the host's root.
        std::vector<Ancestor> chain;
        for (uint32_t pid = change.task.pid; pid > 1 && chain.size() <= 16;) {
            const ProcessInfo* info = table_.find(pid);
            if (!info) break;
            chain.push_back(Ancestor{pid, info->exe, info->comm});
            if (chain.size() == 1) {
                origin.exe = info->exe;
                origin.cmdline = info->cmdline;
            }
            if (info->ppid == pid) break;
            pid = info->ppid;
        }
        WriterOrigin kept = classify_writer(chain, [&](const Ancestor& process) {
            return vouch_for_tool(options_.proc_root + "/1/root", process.exe);
        });
        origin.kind = std::move(kept.kind);
        origin.detail = std::move(kept.detail);
    } else if (origin.cmdline.empty()) {
        // It ended between the reads of its executable and its command line
        // (a zombie's is empty): the command line its exec gave the table.
        if (const ProcessInfo* info = table_.find(change.task.pid)) origin.cmdline = info->cmdline;
    }
    TrustChange trust;
    trust.stage = "write";
    trust.paths = {data->path};
    trust.operation = data->operation;
    trust.writer = std::move(origin.kind);
    trust.writer_detail = std::move(origin.detail);
    trust.exe = std::move(origin.exe);
    trust.cmdline = std::move(origin.cmdline);
    return Event{change.ts_ns, change.task, std::move(trust)};
}

std::optional<Event> HostReads::container_of_new_cgroup(const Event& exec) {
    constexpr size_t kMaxCgroupsSeen = 4096;  // the table keeps more: see remember_cgroup_container
    const uint64_t cgroup = exec.task.cgroup_id;
    if (cgroup == 0 || cgroups_seen_.contains(cgroup)) return std::nullopt;
    const ProcessInfo info = table_.enriched(exec.task);
    if (info.cgroup_path.empty()) return std::nullopt;  // gone already: the next exec asks again
    if (cgroups_seen_.size() >= kMaxCgroupsSeen) cgroups_seen_.clear();
    cgroups_seen_.insert(cgroup);
    return container_event(info, exec.ts_ns);
}

}  // namespace gpuguard::agent
