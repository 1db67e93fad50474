// PriorityGuard: guard mode's GPU priorities (a `priority_guard:` section of
// a guard policy file, include/gpuguard/rules/correlation.h). Fed each GPU's
// telemetry reading, it decides which processes on that GPU to pause
// (SIGSTOP) and when to resume them (SIGCONT); the agent hands its decisions
// to the Enforcer's pause/resume actions, which apply the safety rules again
// (pidfd, pid 1, kernel threads, the agent, the allowlist, dry run).
//
// Per GPU, with hysteresis: the GPU is "under pressure" once its utilisation
// exceeds pause_above_percent and stays so until it falls below
// resume_below_percent. Under pressure, every process on the GPU whose
// priority is below the highest priority running there is paused. A paused
// process is resumed when the pressure ends, when no process of a higher
// priority runs on its GPU any more (it exited or left the GPU), or after
// max_pause; after that cap it is not paused again for `cooldown`. Paused
// processes that exit are forgotten.
//
// Time comes from the injected clock (CLOCK_MONOTONIC live, virtual in
// tests). Not thread-safe: the agent calls it under its state mutex.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gpuguard/events/event.h"
#include "gpuguard/state/process_table.h"
#include "gpuguard/common/detection.h"
#include "gpuguard/rules/correlation.h"

namespace gpuguard::agent {

// One decision: the Enforcer's "pause" or "resume" for `process`.
struct PriorityAction {
    std::string action;  // "pause" or "resume"
    DetectionProcess process;
    uint32_t gpu_index = 0;
    int priority = 0;      // the process's
    std::string reason;    // why, for the outcome and the log
    bool dry_run = false;  // the policy's dry_run
};

class PriorityGuard {
  public:
    using Clock = std::function<uint64_t()>;  // nanoseconds, monotonic
    // Why a pid must never be paused ("" when it may be): the Enforcer's
    // protected_reason. Such processes are left out of every decision.
    using Protection = std::function<std::string(uint32_t pid)>;
    // A process's start time (ns) for the pidfd check, 0 when unknown.
    using StartTime = std::function<uint64_t(uint32_t pid)>;

    // `policy` nullopt: off until set_policy() gives one.
    PriorityGuard(std::optional<rules::PriorityPolicy> policy, Clock clock,
                  Protection protection = {}, StartTime start_time = {});
    PriorityGuard(const PriorityGuard&) = delete;
    PriorityGuard& operator=(const PriorityGuard&) = delete;

    // Hot reload: the new thresholds and priorities judge the next reading.
    // Turning the guard off (nullopt) resumes every process it paused.
    std::vector<PriorityAction> set_policy(std::optional<rules::PriorityPolicy> policy);

    // One telemetry reading of one GPU; `table` names its processes.
    // Returns the decisions it leads to (after those of tick()).
    std::vector<PriorityAction> observe(const Telemetry& reading, const ProcessTable& table);

    // Time alone: resumes processes paused for max_pause, forgets exited
    // ones and expired cool-downs. observe() calls it first.
    std::vector<PriorityAction> tick(const ProcessTable& table);

    // Resumes everything it paused (the agent stopping).
    std::vector<PriorityAction> release_all();

    bool enabled() const { return policy_.has_value(); }
    size_t paused() const { return paused_.size(); }
    bool is_paused(uint32_t pid) const { return paused_.contains(pid); }
    const std::optional<rules::PriorityPolicy>& policy() const { return policy_; }

  private:
    struct Paused {
        uint32_t gpu_index = 0;
        uint64_t since_ns = 0;
        int priority = 0;
        bool dry_run = false;  // the policy's when it paused
        DetectionProcess process;
    };
    struct Member {
        const ProcessInfo* info = nullptr;
        int priority = 0;
    };

    int priority_of(const ProcessInfo& info) const;
    static PriorityAction resume(const Paused& paused, std::string reason);

    std::optional<rules::PriorityPolicy> policy_;
    Clock clock_;
    Protection protection_;
    StartTime start_time_;
    std::map<uint32_t, Paused> paused_;     // by pid
    std::map<uint32_t, uint64_t> cooling_;  // pid -> not paused again before this time
    std::map<uint32_t, bool> pressure_;     // GPU index -> under pressure
};

}  // namespace gpuguard::agent
