// sustained_utilization: {above_percent, for, max_connects, min_connects}
// — every reading of the process's compute over `for`
// is above `above_percent` while it made few new connections (a miner
// keeps one pool connection). Over time.
#include <algorithm>
#include <cstdio>

#include "condition.h"

namespace gpuguard::agent {
namespace {

class SustainedUtilization final : public Condition {
  public:
    explicit SustainedUtilization(rules::SustainedUtilizationCondition condition)
        : condition_(condition) {}
    std::string_view name() const override { return "sustained_utilization"; }
    bool time_dependent() const override { return true; }
    bool holds(const ConditionContext& context, RuleInputs& in) const override {
        const ProcessEvidence& evidence = context.evidence;
        const uint64_t duration_ns = condition_.duration.count() * 1'000'000'000ull;
        if (context.ts_ns < duration_ns || evidence.usage.empty()) return false;
        const uint64_t since = context.ts_ns - duration_ns;
        // Every reading of the window must be above the threshold, and the
        // samples must cover the whole window. A sample may lack the process's
        // reading: NVML leaves a busy process out of an interval now and then
        // (on an H200 shared by two CUDA processes, one 500 ms interval in five).
        // Such samples are passed over, but at least half must carry a reading.
        if (evidence.usage.front().ts_ns > since) return false;
        double lowest = 100;
        size_t samples = 0, readings = 0;
        for (auto sample = evidence.usage.rbegin(); sample != evidence.usage.rend(); ++sample) {
            ++samples;
            if (sample->compute_percent) {
                if (*sample->compute_percent <= condition_.above_percent) return false;
                lowest = std::min(lowest, *sample->compute_percent);
                ++readings;
            }
            if (sample->ts_ns <= since) break;
        }
        if (readings * 2 < samples) return false;
        const auto connects = std::count_if(evidence.connect_ts.begin(), evidence.connect_ts.end(),
                                            [&](uint64_t ts) { return ts >= since; });
        if (connects > static_cast<long>(condition_.max_connects) ||
            evidence.connect_ts.size() < condition_.min_connects) {
            return false;
        }
        char text[200];
        int length = snprintf(
            text, sizeof(text),
            "compute above %.0f%% (lowest %.0f%%) for %llds with %ld new connections",
            condition_.above_percent, lowest, static_cast<long long>(condition_.duration.count()),
            static_cast<long>(connects));
        if (readings < samples && length > 0 && static_cast<size_t>(length) < sizeof(text)) {
            snprintf(text + length, sizeof(text) - length, "; %zu of %zu samples without a reading",
                     samples - readings, samples);
        }
        in.extra.push_back(
            Evidence{context.ts_ns, "telemetry", "telemetry", "", "utilization", text});
        return true;
    }

  private:
    rules::SustainedUtilizationCondition condition_;
};

}  // namespace

std::unique_ptr<const Condition> conditions::sustained_utilization(
    const rules::CorrelationRule& rule) {
    if (!rule.sustained_utilization) return nullptr;
    return std::make_unique<SustainedUtilization>(*rule.sustained_utilization);
}

}  // namespace gpuguard::agent
