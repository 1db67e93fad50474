// Busy processes: every process_table.cpu_interval_ms the CPU time of every
// live process is read; one that used at least busy_cpu_percent of a core
// is busy. Its cpu_usage readings are judged like any event (journaled, so
// replay judges them too: sustained_cpu, GG-CORR-0023); while it is busy it
// is in the kernel watch list, so its connects are reported on any port and
// its first payloads sampled (a CPU miner on port 443 is seen), and its
// write and send counters are read as a GPU process's are (quiet_io).
// Their TCP flows, and GPU holders', are read by their shape every
// process_table.flow_interval_ms (flow events).
// And GPU processes only the GPU's telemetry reports (gpu_unseen,
// GG-CORR-0025): marked in the kernel as GPU processes.
#include <algorithm>

#include <unistd.h>

#include "agent_impl.h"
#include "gpuguard/state/proc_sockets.h"

namespace gpuguard::agent {
namespace {

// How long a process stays watched after its last busy interval: a miner
// that pauses (duty cycles, a throttle) keeps its counters and its flows.
constexpr uint64_t kBusyWatchHoldNs = 300'000'000'000ull;

}  // namespace

void Agent::Impl::sample_cpu(uint64_t now_ns) {
    const auto log = logger("agent");
    static const uint32_t own_pid = static_cast<uint32_t>(::getpid());
    for (const auto& [pid, usage] : process_cpu->sample(table->live_pids(), now_ns)) {
        const ProcessInfo* info = table->find(pid);
        if (!info || info->exited) continue;
        Event event;
        event.ts_ns = now_ns;
        event.task = task_of(*info);
        event.data = usage;
        on_event(event);
    }
    if (!sensor) return;
    // The watch list follows the busy set; what a miner signature put there stays.
    for (const uint32_t pid : process_cpu->busy_pids()) {
        if (auto known = busy_watched.find(pid); known != busy_watched.end()) {
            known->second = now_ns;
            continue;
        }
        if (pid == own_pid) continue;
        const ProcessInfo* info = table->find(pid);
        if (!info || info->exited || info->holds_gpu()) {
            continue;  // a GPU holder is watched already
        }
        // One a miner signature put in the watch list is there already; its
        // counters and established flows are read all the same.
        if (!signature_watched.contains(pid)) {
            if (auto watched = sensor->watch_process(pid); !watched) {
                log->warn("watch list: {}", watched.error().message);
                continue;
            }
        }
        busy_watched.emplace(pid, now_ns);
        log->debug("watch list: pid {} ({}) watched on any port while busy", pid, info->comm);
        // What it connected before it was busy: a miner's pool connection.
        for (Connect& connect : established_connects(options.proc_root, pid)) {
            Event event;
            event.ts_ns = now_ns;
            event.task = task_of(*info);
            event.data = std::move(connect);
            on_event(event);
            info = table->find(pid);  // the event may have moved the table's entries
            if (!info) break;
        }
        // Its connections to a proxy or forwarder on this host: who serves them.
        for (const Connect& connect : established_loopback_connects(options.proc_root, pid)) {
            link_loopback_peer(pid, connect.port, true, now_ns);
        }
    }
    for (auto it = busy_watched.begin(); it != busy_watched.end();) {
        if (now_ns - it->second < kBusyWatchHoldNs) {
            ++it;
            continue;
        }
        if (!signature_watched.contains(it->first)) sensor->unwatch_process(it->first);
        it = busy_watched.erase(it);
    }
    // Writes and sends of the busy processes (a GPU holder's come with telemetry).
    std::vector<ProcessInfo> busy;
    for (const auto& [pid, last_busy_ns] : busy_watched) {
        if (const ProcessInfo* info = table->find(pid); info && !info->exited)
            busy.push_back(*info);
    }
    for (const auto& event : busy_io->sample(busy, now_ns)) on_event(event);
}

void Agent::Impl::sample_flows(uint64_t now_ns) {
    std::vector<ProcessInfo> sampled = table->gpu_processes();
    const auto add = [&](uint32_t pid) {
        if (const ProcessInfo* info = table->find(pid); info && !info->exited && !info->holds_gpu())
            sampled.push_back(*info);
    };
    for (const auto& [pid, last_busy_ns] : busy_watched) add(pid);
    for (const uint32_t pid : signature_watched) {
        if (!busy_watched.contains(pid)) add(pid);
    }
    for (const auto& event : flows->sample(sampled, now_ns)) on_event(event);
}

void Agent::Impl::mark_unseen_gpu_processes(const Telemetry& telemetry) {
    if (!sensor) return;
    for (const auto& usage : telemetry.processes) {
        const ProcessInfo* info = table->find(usage.pid);
        if (!info || info->exited || unseen_gpu_marked.contains(usage.pid)) continue;
        const bool reported_only =
            std::any_of(info->gpus.begin(), info->gpus.end(),
                        [](const GpuHandle& gpu) { return gpu.reported_only; });
        if (!reported_only) continue;
        unseen_gpu_marked.insert(usage.pid);
        if (auto marked = sensor->mark_gpu_process(usage.pid); !marked) {
            logger("agent")->warn("GPU process map: {}", marked.error().message);
        }
    }
}

}  // namespace gpuguard::agent
