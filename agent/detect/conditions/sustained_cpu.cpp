// sustained_cpu: {above_cores, by, for, max_connects} — the process's CPU
// readings over `for` (every one, their mean or a percentile) stay above
// `above_cores` cores' worth. The agent reports a process only while it is
// busy (and once when it stops), so an interval without a reading is idle;
// the readings must reach back to the window's start. Over time.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "condition.h"

namespace gpuguard::agent {
namespace {

// Idle intervals counted in one window at most (a day of 2 s readings).
constexpr uint64_t kMaxIdleReadings = 43'200;

class SustainedCpu final : public Condition {
  public:
    explicit SustainedCpu(rules::SustainedCpuCondition condition) : condition_(condition) {}
    std::string_view name() const override { return "sustained_cpu"; }
    bool time_dependent() const override { return true; }
    bool holds(const ConditionContext& context, RuleInputs& in) const override {
        const auto& cpu = context.evidence.cpu;
        const uint64_t duration_ns = condition_.duration.count() * 1'000'000'000ull;
        if (context.ts_ns < duration_ns || cpu.empty()) return false;
        const uint64_t since = context.ts_ns - duration_ns;
        const bool every = condition_.by == rules::UtilizationStatistic::kEvery;
        const bool percentile = condition_.by == rules::UtilizationStatistic::kPercentile;
        double sum = 0, lowest = 1e9;
        uint64_t readings = 0, idle = 0;
        uint32_t threads = 0;
        std::vector<double> kept;  // for a percentile only
        // Newest first. `covered` is where the readings after this one start:
        // the time between a reading and `covered` had none, so it was idle.
        uint64_t covered = context.ts_ns;
        bool reached_start = false;
        const auto count_idle = [&](uint64_t from, uint64_t to, uint64_t interval_ns) {
            if (to <= from || interval_ns == 0) return;
            const uint64_t gap = to - from;
            if (gap * 2 < interval_ns) return;  // the sampler's own jitter
            idle += std::min<uint64_t>((gap + interval_ns / 2) / interval_ns, kMaxIdleReadings);
        };
        for (auto sample = cpu.rbegin(); sample != cpu.rend(); ++sample) {
            if (sample->ts_ns > context.ts_ns) continue;  // not yet, by the events' clock
            if (sample->ts_ns <= since) {
                count_idle(std::max(sample->ts_ns, since), covered, sample->interval_ns);
                reached_start = true;
                break;
            }
            count_idle(sample->ts_ns, covered, sample->interval_ns);
            if (threads == 0) threads = sample->threads;
            ++readings;
            sum += sample->cores;
            lowest = std::min(lowest, sample->cores);
            if (every && sample->cores <= condition_.above_cores) return false;
            if (percentile) kept.push_back(sample->cores);
            covered =
                sample->ts_ns >= sample->interval_ns ? sample->ts_ns - sample->interval_ns : 0;
            if (covered <= since) {
                reached_start = true;
                break;
            }
        }
        // Readings that start inside the window: what came before is unknown.
        if (!reached_start || readings == 0) return false;
        if (idle > 0) {
            if (every) return false;
            lowest = 0;
            if (percentile) kept.insert(kept.end(), static_cast<size_t>(idle), 0.0);
        }
        const double mean = sum / static_cast<double>(readings + idle);
        const double value = every        ? lowest
                             : percentile ? nearest_rank(kept, condition_.percentile)
                                          : mean;
        if (value <= condition_.above_cores) return false;
        const auto connects =
            std::count_if(context.evidence.connect_ts.begin(), context.evidence.connect_ts.end(),
                          [&](uint64_t ts) { return ts >= since; });
        if (condition_.max_connects && connects > static_cast<long>(*condition_.max_connects)) {
            return false;
        }
        char text[240];
        const long long seconds = static_cast<long long>(condition_.duration.count());
        if (every) {
            snprintf(text, sizeof(text), "CPU above %.2f cores (lowest %.2f) for %llds, %u threads",
                     condition_.above_cores, lowest, seconds, threads);
        } else if (percentile) {
            snprintf(text, sizeof(text),
                     "CPU p%d %.2f cores (mean %.2f, lowest %.2f) above %.2f for %llds, %u threads",
                     condition_.percentile, value, mean, lowest, condition_.above_cores, seconds,
                     threads);
        } else {
            snprintf(text, sizeof(text),
                     "CPU mean %.2f cores (lowest %.2f) above %.2f for %llds, %u threads", mean,
                     lowest, condition_.above_cores, seconds, threads);
        }
        std::string detail = text;
        if (idle > 0) detail += "; " + std::to_string(idle) + " idle interval(s)";
        if (condition_.max_connects) {
            detail += "; " + std::to_string(connects) + " new connection(s)";
        }
        in.extra.push_back(Evidence{context.ts_ns, "telemetry", "cpu_usage", "", "cpu", detail});
        return true;
    }

  private:
    rules::SustainedCpuCondition condition_;
};

}  // namespace

std::unique_ptr<const Condition> conditions::sustained_cpu(const rules::CorrelationRule& rule) {
    if (!rule.sustained_cpu) return nullptr;
    return std::make_unique<SustainedCpu>(*rule.sustained_cpu);
}

}  // namespace gpuguard::agent
