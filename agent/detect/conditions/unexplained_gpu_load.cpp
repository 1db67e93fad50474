// unexplained_gpu_load: {above_percent, by, for, max_explained_percent} —
// judged per GPU, not per process: the GPU's own utilisation over `for`
// (every reading, their mean or a percentile: `by: p20`) stays above
// `above_percent` while the processes known to hold it (its telemetry's
// process lists, the holders the sensor saw) account for at most
// `max_explained_percent` of that load by their own compute readings, or
// no process is known to hold it at all. Whoever uses it hides from both
// the sensor and the GPU's accounting (a process in another PID namespace
// the driver does not report, a GPU context outside any process the host
// sees). Samples that cannot say (no utilisation reading, as under MIG; a
// holder listed without any reading; a backend that reads no load per
// process while the sensor saw a holder) are passed over, but at least
// half the window's samples must say. Over time.
#include <algorithm>
#include <cstdio>
#include <vector>

#include "condition.h"

namespace gpuguard::agent {
namespace {

class UnexplainedGpuLoad final : public Condition {
  public:
    explicit UnexplainedGpuLoad(rules::UnexplainedGpuLoadCondition condition)
        : condition_(condition) {}
    std::string_view name() const override { return "unexplained_gpu_load"; }
    bool time_dependent() const override { return true; }
    bool judges_gpu() const override { return true; }
    bool holds(const ConditionContext& context, RuleInputs& in) const override {
        const GpuLoad* gpu = context.gpu;
        const uint64_t duration_ns = condition_.duration.count() * 1'000'000'000ull;
        if (!gpu || gpu->samples.empty() || context.ts_ns < duration_ns) return false;
        const uint64_t since = context.ts_ns - duration_ns;
        if (gpu->samples.front().ts_ns > since) return false;  // not the whole window yet
        std::vector<double> load;                              // the samples that say
        double load_sum = 0, explained_sum = 0;
        size_t samples = 0;
        for (auto sample = gpu->samples.rbegin(); sample != gpu->samples.rend(); ++sample) {
            ++samples;
            if (sample->utilization && sample->explained) {
                load.push_back(*sample->utilization);
                load_sum += *sample->utilization;
                // A holder's reading beyond the GPU's own explains it all, no more.
                explained_sum += std::min(*sample->explained, *sample->utilization);
            }
            if (sample->ts_ns <= since) break;
        }
        if (load.empty() || load.size() * 2 < samples) return false;
        const double mean = load_sum / static_cast<double>(load.size());
        const double lowest = *std::min_element(load.begin(), load.end());
        const auto by = condition_.by;
        const double value = by == rules::UtilizationStatistic::kEvery ? lowest
                             : by == rules::UtilizationStatistic::kMean
                                 ? mean
                                 : nearest_rank(load, condition_.percentile);
        if (value <= condition_.above_percent) return false;
        const double explained = load_sum > 0 ? explained_sum / load_sum * 100 : 0;
        if (explained > condition_.max_explained_percent) return false;

        char statistic[96];
        if (by == rules::UtilizationStatistic::kPercentile) {
            snprintf(statistic, sizeof(statistic), "p%d %.0f%% (mean %.0f%%)",
                     condition_.percentile, value, mean);
        } else if (by == rules::UtilizationStatistic::kMean) {
            snprintf(statistic, sizeof(statistic), "mean %.0f%% (lowest %.0f%%)", mean, lowest);
        } else {
            snprintf(statistic, sizeof(statistic), "lowest %.0f%% (mean %.0f%%)", lowest, mean);
        }
        char text[320];
        int length = snprintf(
            text, sizeof(text),
            "GPU %u (%s%s%s, %s): utilisation %s above %.0f%% for %llds; the processes known to "
            "hold it explain %.0f%% of it",
            gpu->index, gpu->vendor.c_str(), gpu->model.empty() ? "" : " ", gpu->model.c_str(),
            gpu->key.c_str(), statistic, condition_.above_percent,
            static_cast<long long>(condition_.duration.count()), explained);
        std::string detail = length > 0 ? text : "";
        detail += gpu->holders.empty()
                      ? " (none: no process listed by its telemetry or seen opening it)"
                      : " (now: " + join(gpu->holders, ", ") + ")";
        if (load.size() < samples) {
            detail += "; " + std::to_string(samples - load.size()) + " of " +
                      std::to_string(samples) + " samples could not say";
        }
        in.extra.push_back(
            Evidence{context.ts_ns, "telemetry", "telemetry", "", "utilization", detail});
        return true;
    }

  private:
    rules::UnexplainedGpuLoadCondition condition_;
};

}  // namespace

std::unique_ptr<const Condition> conditions::unexplained_gpu_load(
    const rules::CorrelationRule& rule) {
    if (!rule.unexplained_gpu_load) return nullptr;
    return std::make_unique<UnexplainedGpuLoad>(*rule.unexplained_gpu_load);
}

}  // namespace gpuguard::agent
