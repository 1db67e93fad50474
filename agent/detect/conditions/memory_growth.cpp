// memory_growth: {bytes, within, max_utilization_percent} — the process's
// GPU memory grew by more than `bytes` within `within` while its compute
// stayed at or below the limit (a GPU used as a memory store). Over time.
#include <algorithm>
#include <cstdio>

#include "condition.h"

namespace gpuguard::agent {
namespace {

class MemoryGrowth final : public Condition {
  public:
    explicit MemoryGrowth(rules::MemoryGrowthCondition condition) : condition_(condition) {}
    std::string_view name() const override { return "memory_growth"; }
    bool time_dependent() const override { return true; }
    bool holds(const ConditionContext& context, RuleInputs& in) const override {
        const auto& usage = context.evidence.usage;
        if (usage.empty() || !usage.back().memory_bytes) return false;
        const auto& latest = usage.back();
        const uint64_t within_ns = static_cast<uint64_t>(condition_.within.count()) * 1'000'000'000;
        const uint64_t since = context.ts_ns > within_ns ? context.ts_ns - within_ns : 0;
        std::optional<uint64_t> lowest;
        double busiest = 0;
        for (const auto& sample : usage) {
            if (sample.ts_ns < since) continue;
            if (sample.memory_bytes && (!lowest || *sample.memory_bytes < *lowest)) {
                lowest = sample.memory_bytes;
            }
            if (sample.compute_percent) busiest = std::max(busiest, *sample.compute_percent);
        }
        if (!lowest || *latest.memory_bytes < *lowest ||
            *latest.memory_bytes - *lowest <= condition_.bytes) {
            return false;
        }
        if (busiest > condition_.max_utilization_percent) return false;
        char text[160];
        snprintf(text, sizeof(text),
                 "GPU memory grew from %s to %s within %llds, compute at most %.0f%%",
                 gib(*lowest).c_str(), gib(*latest.memory_bytes).c_str(),
                 static_cast<long long>(condition_.within.count()), busiest);
        in.extra.push_back(Evidence{context.ts_ns, "telemetry", "telemetry", "", "memory", text});
        return true;
    }

  private:
    rules::MemoryGrowthCondition condition_;
};

}  // namespace

std::unique_ptr<const Condition> conditions::memory_growth(const rules::CorrelationRule& rule) {
    if (!rule.memory_growth) return nullptr;
    return std::make_unique<MemoryGrowth>(*rule.memory_growth);
}

}  // namespace gpuguard::agent
