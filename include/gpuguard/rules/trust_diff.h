// What a change to the rule files did to the agent's trust (issue 39,
// docs/detections.md "The agent's own trust"): allowlist entries and
// scope exemptions added, actions lowered (kill -> alert, a rule put in dry
// run, a severity lowered), signatures and rules disabled or removed; the
// rest that changed, one line each. Pure: the agent journals the result in
// a trust_change event and a rule judges it.
#pragma once

#include <string>
#include <vector>

#include "gpuguard/rules/correlation.h"
#include "gpuguard/rules/rules.h"

namespace gpuguard::rules {

struct TrustDiff {
    std::vector<std::string> allowlist_added;
    std::vector<std::string> actions_lowered;
    std::vector<std::string> rules_disabled;
    std::vector<std::string> other_changes;
    // Whether it widens what the agent lets through (any of the first three).
    bool widens() const {
        return !allowlist_added.empty() || !actions_lowered.empty() || !rules_disabled.empty();
    }
    bool empty() const { return !widens() && other_changes.empty(); }
};

// How strong an action is: alert 0 < block_ip < deny_gpu < kill < kill_now.
int action_strength(Action action);
// The same for a correlation rule's action: alert 0 < pause < block_ip <
// deny_gpu < from_signatures < kill < kill_now; unknown names 0.
int action_strength(const std::string& action);

// miner-rules.yaml and rules.d before and after a reload.
TrustDiff diff_rule_sets(const RuleSet& before, const RuleSet& after);

// The correlation rules before and after a reload (rules.correlation_files).
TrustDiff diff_correlation_rules(const std::vector<CorrelationRule>& before,
                                 const std::vector<CorrelationRule>& after);

}  // namespace gpuguard::rules
