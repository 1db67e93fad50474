// Hidden processes in the live agent: when to compare libc's listing of
// /proc with the kernel's (gpuguard/state/proc_listing.h), and the
// hidden_process events that come of it. Replay judges the journaled
// events; only the live agent lists /proc.
#include "agent_impl.h"

namespace gpuguard::agent {

void Agent::Impl::check_hidden_soon(uint64_t now_ns) {
    if (!hidden_check) return;
    const uint64_t soon = now_ns + 1'000'000'000ull;
    if (soon < next_hidden_check_ns.load()) next_hidden_check_ns.store(soon);
}

void Agent::Impl::check_hidden_processes(uint64_t now_ns) {
    if (!hidden_check || now_ns < next_hidden_check_ns) return;
    const uint64_t interval_ns =
        uint64_t{options.config.process_table.hidden_check_interval_s} * 1'000'000'000ull;
    next_hidden_check_ns = now_ns + interval_ns;
    std::vector<uint32_t> known;
    {
        std::lock_guard lock(mutex);
        known = table->live_pids();
    }
    // The listings run without the lock: the control socket stays responsive.
    auto hidden = hidden_check->run(known);
    std::lock_guard lock(mutex);
    ++hidden_checks;
    if (!hidden) {
        logger("agent")->warn("hidden process check: {}", hidden.error().message);
        return;
    }
    std::set<uint32_t> now_hidden;
    for (auto& [pid, found] : *hidden) {
        now_hidden.insert(pid);
        if (hidden_pids.contains(pid)) continue;  // reported at an earlier check
        logger("agent")->warn("process {} is hidden from libc's readdir of /proc{}", pid,
                              found.libraries.empty() ? "" : " by " + join(found.libraries, ", "));
        Event event;
        event.ts_ns = monotonic_ns();
        if (const ProcessInfo* info = table->find(pid)) {
            event.task = task_of(*info);
        } else {
            event.task.pid = event.task.tid = pid;
        }
        event.data = std::move(found);
        on_event(event);
    }
    hidden_pids = std::move(now_hidden);
}

}  // namespace gpuguard::agent
