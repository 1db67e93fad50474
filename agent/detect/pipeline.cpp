#include "gpuguard/detect/pipeline.h"

#include <algorithm>
#include <utility>

namespace gpuguard::agent {
namespace {

// A GPU open or ioctl of a process the table does not know as a GPU holder yet.
bool becomes_gpu_holder(const ProcessTable& table, const Event& event) {
    const auto* open = std::get_if<GpuOpen>(&event.data);
    if (!(open && open->succeeded()) && !std::holds_alternative<GpuIoctl>(event.data)) {
        return false;
    }
    const ProcessInfo* info = table.find(event.task.pid);
    return !info || info->exited || !info->holds_gpu();
}

// An exec of a process that holds a GPU (its fd survives exec, or it
// inherited one): the new image has an environment of its own.
bool gpu_holder_execs(const ProcessTable& table, const Event& event) {
    if (!std::holds_alternative<Exec>(event.data)) return false;
    const ProcessInfo* info = table.find(event.task.pid);
    return info && !info->exited && info->holds_gpu();
}

bool same_stratum(const Event& a, const Event& b) {
    const auto* left = std::get_if<Stratum>(&a.data);
    const auto* right = std::get_if<Stratum>(&b.data);
    return left && right && a.ts_ns == b.ts_ns && a.task.pid == b.task.pid && *left == *right;
}

}  // namespace

Pipeline::Pipeline(PipelineStages stages, PipelineHooks hooks)
    : stages_(stages), hooks_(std::move(hooks)) {}

void Pipeline::set_realtime_offset(int64_t offset_ns) {
    realtime_offset_ns_ = offset_ns;
    if (stages_.correlator) stages_.correlator->set_realtime_offset(offset_ns);
}

void Pipeline::feed(const Event& event) { feed_event(event, /*judge_it=*/true); }
void Pipeline::learn(const Event& event) { feed_event(event, /*judge_it=*/false); }

void Pipeline::feed_event(const Event& event, bool judge_it) {
    NetIntel* intel = stages_.net_intel;
    const bool net = std::holds_alternative<NetPayload>(event.data) ||
                     std::holds_alternative<Connect>(event.data) ||
                     std::holds_alternative<Exit>(event.data) ||
                     std::holds_alternative<Stratum>(event.data);
    if (!intel || !net) {
        recently_derived_.clear();
        HostReads* host = stages_.host;
        const bool completed_live = std::holds_alternative<FileChange>(event.data) ||
                                    std::holds_alternative<Exec>(event.data);
        if (!host || !completed_live) return pass(event, judge_it);
        Event completed = event;
        host->complete(completed);
        if (std::holds_alternative<Exec>(completed.data)) {
            if (auto container = host->container_of_new_cgroup(completed)) {
                pass(*container, judge_it);
            }
        }
        pass(completed, judge_it);
        // A command line the kernel cut short, read whole from /proc after
        // the exec it completes (the table has the new image by then).
        if (auto full = host->full_cmdline_of(completed)) pass(*full, judge_it);
        // A change of the agent's own files: who wrote it, after the change.
        if (auto trusted = host->trusted_write_of(completed)) pass(*trusted, judge_it);
        return;
    }
    if (!note_derived(event)) return;
    if (const auto* connect = std::get_if<Connect>(&event.data)) {
        // Named from the DNS answers seen so far: the only event it changes.
        if (auto name = intel->name_of(*connect, event.ts_ns)) {
            Event named = event;
            std::get<Connect>(named.data).domain = std::move(*name);
            pass(named, judge_it);
            return;
        }
    }
    pass(event, judge_it);
    for (const auto& stratum : derived_) pass(stratum, judge_it);
}

void Pipeline::judge_only(const Event& event) { judge(event); }

bool Pipeline::note_derived(const Event& event) {
    derived_.clear();
    if (std::holds_alternative<Stratum>(event.data)) {
        // A recorded stream carries the stratum events live derived right
        // after the payload they came from; this pipeline derived them again.
        const auto match = std::find_if(recently_derived_.begin(), recently_derived_.end(),
                                        [&](const Event& e) { return same_stratum(e, event); });
        if (match != recently_derived_.end()) {
            recently_derived_.erase(match);
            ++stats_.rederived;
            return false;
        }
        return true;  // hand-made, or from a payload this stream does not carry
    }
    recently_derived_.clear();
    stages_.net_intel->observe(event, derived_);
    stats_.derived += derived_.size();
    recently_derived_ = derived_;
    return true;
}

void Pipeline::pass(const Event& event, bool judge_it) {
    ProcessTable& table = *stages_.table;
    HostReads* host = stages_.host;
    const bool new_holder = host && becomes_gpu_holder(table, event);
    if (new_holder && host->snapshots_new_gpu_holders()) {
        const ProcessInfo holder = table.enriched(event.task);
        // Its container's identity first: the snapshot that follows names it.
        if (auto container = container_event(holder, event.ts_ns)) pass(*container, judge_it);
        pass(snapshot_event(holder, event.ts_ns), judge_it);
    }
    // Its environment, judged with the event that follows: at its first GPU
    // use, and again at each exec while it holds one (an environ read while
    // the process was exec'ing is empty; its exec event comes next).
    if (host && (new_holder || gpu_holder_execs(table, event))) {
        pass(host->environment_of(event), judge_it);
    }
    // Its Slurm job or pod and the GPUs it was given, read once at its
    // first GPU use (a job's allocation holds for its life).
    if (new_holder) {
        if (auto workload = host->workload_of(event)) pass(*workload, judge_it);
    }
    // The GPU software it runs on, read once at its first GPU use (its
    // framework and runtime are mapped by the time the driver opens the GPU).
    if (new_holder) pass(host->gpu_libraries_of(event), judge_it);
    // And the connections it made before (to its pool, for a miner that
    // connects first and sets up its GPU kernels on the first job).
    if (new_holder) {
        for (const Event& connect : host->established_connects_of(event)) pass(connect, judge_it);
    }
    ++stats_.events;
    if (stages_.journal) stages_.journal->append(event, realtime_offset_ns_);  // never blocks
    table.apply(event);
    if (!judge_it) return;
    if (hooks_.on_applied) hooks_.on_applied(event);
    judge(event);
    if (hooks_.on_judged) hooks_.on_judged(event);
}

void Pipeline::judge(const Event& event) {
    if (!stages_.correlator) return;
    raised_.clear();
    stages_.correlator->observe(event, raised_);
    if (!hooks_.emit) return;
    for (const Detection* detection : raised_) hooks_.emit(*detection);
}

}  // namespace gpuguard::agent
