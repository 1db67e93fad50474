// hash_rate_above_threshold: true — a mining session of the process (a
// Stratum event) reported a hash rate at or above miner-rules.yaml's
// hash_rate_threshold. Never holds when no rule file sets one.
#include <cstdio>

#include "condition.h"

namespace gpuguard::agent {
namespace {

class HashRateAboveThreshold final : public Condition {
  public:
    std::string_view name() const override { return "hash_rate_above_threshold"; }
    bool holds(const ConditionContext& context, RuleInputs& in) const override {
        const auto threshold = context.rule_set.hash_rate_threshold();
        const ProcessEvidence& evidence = context.evidence;
        if (!threshold || !evidence.hash_rate || *evidence.hash_rate < *threshold) return false;
        char detail[160];
        snprintf(detail, sizeof(detail), "hash rate %.4g H/s%s above hash_rate_threshold %.4g H/s",
                 *evidence.hash_rate,
                 hash_rate_interval(evidence.hash_rate_low, evidence.hash_rate_high).c_str(),
                 *threshold);
        in.extra.push_back(
            Evidence{evidence.hash_rate_ns, "event", "stratum", "", "hash_rate", detail});
        return true;
    }
};

}  // namespace

std::unique_ptr<const Condition> conditions::hash_rate_above_threshold(
    const rules::CorrelationRule& rule) {
    if (!rule.hash_rate_above_threshold) return nullptr;
    return std::make_unique<HashRateAboveThreshold>();
}

}  // namespace gpuguard::agent
