// Every condition of the rule language, in the order a rule's evidence is
// reported (and its conditions judged: the cheap ones and those that choose
// the hits first, the wall-clock window last).
#include <algorithm>

#include "condition.h"

namespace gpuguard::agent {
namespace {

using Factory = std::unique_ptr<const Condition> (*)(const rules::CorrelationRule&);

constexpr Factory kFactories[] = {
    conditions::gpu_held,
    conditions::scope,
    conditions::signature,
    conditions::exe_location,
    conditions::hash_rate_above_threshold,
    conditions::known_bad_executable,
    conditions::agent_tamper,
    conditions::trust_change,
    conditions::disguised,  // after signature: it narrows the hits
    conditions::memory_growth,
    conditions::sustained_utilization,
    conditions::sustained_cpu,
    conditions::gpu_unseen,
    conditions::unexplained_gpu_load,
    conditions::gpu_stack,
    conditions::unreadable,
    conditions::quiet_io,
    conditions::gpu_pipe_mix,
    conditions::gpu_memory_above,
    conditions::gpu_not_allowed,
    conditions::max_gpu_processes,
    conditions::gpu_outside_allocation,
    conditions::gpu_xid,
    conditions::opaque_peer,
    conditions::mining_flow,
    conditions::pool_answered,  // after opaque_peer: the suspicion, then what made it certain
    conditions::hidden_from_proc,
    conditions::module_load,
    conditions::file_changed,
    conditions::library_injection,
    conditions::persistence_after_detection,
    conditions::time_window,
};

}  // namespace

Conditions conditions_of(const rules::CorrelationRule& rule) {
    Conditions made;
    for (Factory factory : kFactories) {
        if (auto condition = factory(rule)) made.push_back(std::move(condition));
    }
    return made;
}

bool time_dependent(const Conditions& conditions) {
    return std::any_of(conditions.begin(), conditions.end(),
                       [](const auto& condition) { return condition->time_dependent(); });
}

}  // namespace gpuguard::agent
