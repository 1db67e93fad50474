// sustained_utilization: {above_percent, by, for, max_connects,
// min_connects, min_power_percent} — the process's compute readings over
// `for` (every one, or their mean or a percentile: `by: every | mean | p10`)
// stay above `above_percent` while it made few new connections (a miner
// keeps one pool connection), and the GPU's power (where read) by the same
// statistic stays at min_power_percent of its limit or above. Over time.
#include <algorithm>
#include <cmath>
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
        // The samples must cover the whole window. A sample may lack the
        // process's reading: NVML leaves a busy process out of an interval
        // now and then (on an H200 shared by two CUDA processes, one 500 ms
        // interval in five). Such samples are passed over, but at least half
        // must carry a reading.
        if (evidence.usage.front().ts_ns > since) return false;
        const bool every = condition_.by == rules::UtilizationStatistic::kEvery;
        const bool percentile = condition_.by == rules::UtilizationStatistic::kPercentile;
        double lowest = 100, sum = 0;
        size_t samples = 0, readings = 0;
        std::vector<double> kept;   // the readings, for a percentile only
        std::vector<double> power;  // the GPU's power in percent of its limit, where read
        for (auto sample = evidence.usage.rbegin(); sample != evidence.usage.rend(); ++sample) {
            ++samples;
            if (sample->compute_percent) {
                // Every reading must be above the threshold: the first one
                // that is not ends it.
                if (every && *sample->compute_percent <= condition_.above_percent) return false;
                lowest = std::min(lowest, *sample->compute_percent);
                sum += *sample->compute_percent;
                ++readings;
                if (percentile) kept.push_back(*sample->compute_percent);
            }
            if (sample->gpu_power_percent) power.push_back(*sample->gpu_power_percent);
            if (sample->ts_ns <= since) break;
        }
        if (readings == 0 || readings * 2 < samples) return false;
        std::string summary;
        if (!every) {
            const double mean = sum / static_cast<double>(readings);
            const double value = percentile ? nearest_rank(kept, condition_.percentile) : mean;
            if (value <= condition_.above_percent) return false;
            char text[120];
            if (percentile) {
                snprintf(text, sizeof(text),
                         "compute p%d %.0f%% (mean %.0f%%, lowest %.0f%%) above %.0f%%",
                         condition_.percentile, value, mean, lowest, condition_.above_percent);
            } else {
                snprintf(text, sizeof(text), "compute mean %.0f%% (lowest %.0f%%) above %.0f%%",
                         mean, lowest, condition_.above_percent);
            }
            summary = text;
        }
        // The GPU's power over the same window, by the same statistic.
        std::string power_text;
        if (!power.empty()) {
            double power_value = *std::min_element(power.begin(), power.end());
            if (percentile) {
                power_value = nearest_rank(power, condition_.percentile);
            } else if (!every) {
                double total = 0;
                for (const double each : power) total += each;
                power_value = total / static_cast<double>(power.size());
            }
            if (condition_.min_power_percent && power_value < *condition_.min_power_percent) {
                return false;
            }
            const std::string by = every        ? "lowest"
                                   : percentile ? "p" + std::to_string(condition_.percentile)
                                                : "mean";
            char text[96];
            snprintf(text, sizeof(text), "; GPU power %s %.0f%% of its limit", by.c_str(),
                     power_value);
            power_text = text;
        }
        const auto connects = std::count_if(evidence.connect_ts.begin(), evidence.connect_ts.end(),
                                            [&](uint64_t ts) { return ts >= since; });
        // A connection found open (made before the GPU was opened, or
        // before the agent ran) is a connection of its own too.
        const size_t found_open = std::count_if(evidence.peers.begin(), evidence.peers.end(),
                                                [](const Peer& peer) { return peer.established; });
        if (connects > static_cast<long>(condition_.max_connects) ||
            evidence.connect_ts.size() + found_open < condition_.min_connects) {
            return false;
        }
        char text[240];
        int length =
            every ? snprintf(
                        text, sizeof(text),
                        "compute above %.0f%% (lowest %.0f%%) for %llds with %ld new connections",
                        condition_.above_percent, lowest,
                        static_cast<long long>(condition_.duration.count()),
                        static_cast<long>(connects))
                  : snprintf(text, sizeof(text), "%s for %llds with %ld new connections",
                             summary.c_str(), static_cast<long long>(condition_.duration.count()),
                             static_cast<long>(connects));
        if (readings < samples && length > 0 && static_cast<size_t>(length) < sizeof(text)) {
            snprintf(text + length, sizeof(text) - length, "; %zu of %zu samples without a reading",
                     samples - readings, samples);
        }
        in.extra.push_back(Evidence{context.ts_ns, "telemetry", "telemetry", "", "utilization",
                                    std::string(text) + power_text});
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
