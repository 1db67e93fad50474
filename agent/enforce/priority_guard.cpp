// PriorityGuard (agent/priority_guard.h): per-GPU pressure with hysteresis,
// pause below the highest running priority, resume on relief, cap and
// cool-down.
#include "gpuguard/enforce/priority_guard.h"

#include <algorithm>
#include <cstdio>

#include "gpuguard/common/logging.h"
#include "gpuguard/common/text.h"

namespace gpuguard::agent {
namespace {

std::string percent(double value) {
    char text[32];
    std::snprintf(text, sizeof(text), "%.0f %%", value);
    return text;
}

uint64_t seconds_ns(std::chrono::seconds value) {
    return static_cast<uint64_t>(value.count()) * 1'000'000'000ull;
}

}  // namespace

PriorityGuard::PriorityGuard(std::optional<rules::PriorityPolicy> policy, Clock clock,
                             Protection protection, StartTime start_time)
    : policy_(std::move(policy)),
      clock_(std::move(clock)),
      protection_(std::move(protection)),
      start_time_(std::move(start_time)) {}

int PriorityGuard::priority_of(const ProcessInfo& info) const {
    return policy_->priority_of(info.comm, info.exe, join(info.cmdline, " "), info.uid, info.user);
}

PriorityAction PriorityGuard::resume(const Paused& paused, std::string reason) {
    PriorityAction action;
    action.action = "resume";
    action.process = paused.process;
    action.gpu_index = paused.gpu_index;
    action.priority = paused.priority;
    action.reason = std::move(reason);
    action.dry_run = paused.dry_run;
    return action;
}

std::vector<PriorityAction> PriorityGuard::set_policy(std::optional<rules::PriorityPolicy> policy) {
    std::vector<PriorityAction> out;
    if (!policy) {
        for (const auto& [pid, paused] : paused_) {
            out.push_back(resume(paused, "GPU priorities turned off"));
        }
        paused_.clear();
        cooling_.clear();
        pressure_.clear();
    }
    policy_ = std::move(policy);
    return out;
}

std::vector<PriorityAction> PriorityGuard::release_all() {
    std::vector<PriorityAction> out;
    for (const auto& [pid, paused] : paused_) {
        out.push_back(resume(paused, "the agent is stopping"));
    }
    paused_.clear();
    return out;
}

std::vector<PriorityAction> PriorityGuard::tick(const ProcessTable& table) {
    std::vector<PriorityAction> out;
    if (paused_.empty() && cooling_.empty()) return out;
    const uint64_t now = clock_();
    for (auto it = paused_.begin(); it != paused_.end();) {
        const ProcessInfo* info = table.find(it->first);
        if (!info || info->exited) {
            cooling_.erase(it->first);
            it = paused_.erase(it);
            continue;
        }
        if (policy_ && now - it->second.since_ns >= seconds_ns(policy_->max_pause)) {
            out.push_back(resume(it->second, "paused for the maximum of " +
                                                 std::to_string(policy_->max_pause.count()) +
                                                 " s; not paused again for " +
                                                 std::to_string(policy_->cooldown.count()) + " s"));
            cooling_[it->first] = now + seconds_ns(policy_->cooldown);
            it = paused_.erase(it);
            continue;
        }
        ++it;
    }
    for (auto it = cooling_.begin(); it != cooling_.end();) {
        const ProcessInfo* info = table.find(it->first);
        if (it->second <= now || !info || info->exited) {
            it = cooling_.erase(it);
        } else {
            ++it;
        }
    }
    return out;
}

std::vector<PriorityAction> PriorityGuard::observe(const Telemetry& reading,
                                                   const ProcessTable& table) {
    std::vector<PriorityAction> out = tick(table);
    if (!policy_) return out;
    const rules::PriorityPolicy& policy = *policy_;
    const uint64_t now = clock_();
    const uint32_t gpu = reading.gpu_index;
    bool& pressure = pressure_[gpu];
    if (reading.utilization_percent) {
        const double load = *reading.utilization_percent;
        if (load > policy.pause_above_percent) {
            pressure = true;
        } else if (load < policy.resume_below_percent) {
            pressure = false;
        }  // between the thresholds: as it was (hysteresis)
    }
    const std::string load_text =
        reading.utilization_percent ? percent(*reading.utilization_percent) : "unknown load";

    // The live processes on this GPU, with their priorities.
    std::map<uint32_t, Member> members;
    for (const auto& usage : reading.processes) {
        const ProcessInfo* info = table.find(usage.pid);
        if (!info || info->exited) continue;
        members.emplace(usage.pid, Member{info, priority_of(*info)});
    }
    // The highest priority running (not paused) here, and who holds it.
    const auto top = [&]() -> std::optional<std::pair<int, uint32_t>> {
        std::optional<std::pair<int, uint32_t>> best;
        for (const auto& [pid, member] : members) {
            if (paused_.contains(pid)) continue;
            if (!best || member.priority > best->first) best = {member.priority, pid};
        }
        return best;
    };

    // Resumes first: relief, or nobody of a higher priority left to yield to.
    // Highest priority first, so a process that resumes counts as running
    // for those below it (they stay paused instead of resuming and pausing
    // again in the same reading).
    std::vector<uint32_t> here;
    for (auto& [pid, paused] : paused_) {
        if (paused.gpu_index != gpu) continue;
        // Priorities as the current policy says (a reload may have changed them).
        if (const auto member = members.find(pid); member != members.end()) {
            paused.priority = member->second.priority;
        }
        here.push_back(pid);
    }
    std::stable_sort(here.begin(), here.end(), [&](uint32_t a, uint32_t b) {
        return paused_.at(a).priority > paused_.at(b).priority;
    });
    std::optional<int> running;
    if (const auto highest = top()) running = highest->first;
    for (uint32_t pid : here) {
        const Paused& paused = paused_.at(pid);
        std::string reason;
        if (!pressure) {
            reason = "GPU " + std::to_string(gpu) + " at " + load_text + " (below " +
                     percent(policy.resume_below_percent) + ")";
        } else if (!running || *running <= paused.priority) {
            reason = "no process of a higher priority than " + std::to_string(paused.priority) +
                     " runs on GPU " + std::to_string(gpu) + " any more";
            if (members.contains(pid))
                running = std::max(running.value_or(paused.priority), paused.priority);
        }
        if (reason.empty()) continue;
        out.push_back(resume(paused, std::move(reason)));
        paused_.erase(pid);
    }
    if (!pressure) return out;

    // Under pressure: everything below the highest running priority yields.
    const auto winner = top();
    if (!winner) return out;
    for (const auto& [pid, member] : members) {
        if (member.priority >= winner->first || paused_.contains(pid)) continue;
        if (const auto cool = cooling_.find(pid); cool != cooling_.end() && cool->second > now) {
            continue;
        }
        if (protection_) {
            if (const auto why = protection_(pid); !why.empty()) {
                logger("enforcer")->debug("GPU priority: not pausing pid {}: {}", pid, why);
                continue;
            }
        }
        const ProcessInfo& holder = *members.at(winner->second).info;
        Paused paused;
        paused.gpu_index = gpu;
        paused.since_ns = now;
        paused.priority = member.priority;
        paused.dry_run = policy.dry_run;
        paused.process = describe_process(*member.info);
        if (start_time_) paused.process.start_time_ns = start_time_(pid);
        PriorityAction action;
        action.action = "pause";
        action.process = paused.process;
        action.gpu_index = gpu;
        action.priority = member.priority;
        action.dry_run = policy.dry_run;
        action.reason = "GPU " + std::to_string(gpu) + " at " + load_text + " (above " +
                        percent(policy.pause_above_percent) + "): priority " +
                        std::to_string(member.priority) + " yields to priority " +
                        std::to_string(winner->first) + " (" + holder.comm + ", pid " +
                        std::to_string(holder.pid) + ")";
        out.push_back(std::move(action));
        paused_.emplace(pid, std::move(paused));
    }
    return out;
}

}  // namespace gpuguard::agent
