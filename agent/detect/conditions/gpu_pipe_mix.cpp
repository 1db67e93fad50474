// gpu_pipe_mix: {for, integer_or_dram_above_percent, tensor_below_percent,
// fp_below_percent, tensor_above_percent} — what the GPU's pipes did (NVML
// GPM, each pipe's mean over the window) while the process was the only one
// NVML listed on it: a hash kernel keeps the integer pipe or DRAM busy with
// the tensor and floating-point pipes idle; training, inference and
// simulation keep the tensor or FP pipes busy. GPM measures the whole GPU,
// so one sample with another process listed ends it. Over time.
#include <cstdio>

#include "condition.h"

namespace gpuguard::agent {
namespace {

// A pipe's mean over the samples that read it.
struct PipeMean {
    double sum = 0;
    size_t readings = 0;
    void add(float percent) {
        if (percent < 0) return;
        sum += percent;
        ++readings;
    }
    bool read() const { return readings > 0; }
    double mean() const { return sum / static_cast<double>(readings); }
};

class GpuPipeMix final : public Condition {
  public:
    explicit GpuPipeMix(rules::GpuPipeMixCondition condition) : condition_(condition) {}
    std::string_view name() const override { return "gpu_pipe_mix"; }
    bool time_dependent() const override { return true; }
    uint32_t needs() const override { return kFactHoldsGpu; }
    bool holds(const ConditionContext& context, RuleInputs& in) const override {
        const ProcessEvidence& evidence = context.evidence;
        const uint64_t duration_ns = condition_.duration.count() * 1'000'000'000ull;
        if (context.ts_ns < duration_ns || evidence.usage.empty()) return false;
        const uint64_t since = context.ts_ns - duration_ns;
        if (evidence.usage.front().ts_ns > since) return false;  // not seen for the whole window
        PipeMean integer, dram, tensor, fp;
        size_t samples = 0, read = 0;
        for (auto sample = evidence.usage.rbegin(); sample != evidence.usage.rend(); ++sample) {
            ++samples;
            // Another process on the GPU: its pipes are not this one's.
            if (sample->gpu_processes != 1) return false;
            if (sample->gpu_pipes.any()) {
                ++read;
                integer.add(sample->gpu_pipes.integer);
                dram.add(sample->gpu_pipes.dram);
                tensor.add(sample->gpu_pipes.tensor);
                fp.add(sample->gpu_pipes.fp);
            }
            if (sample->ts_ns <= since) break;
        }
        if (read == 0 || read * 2 < samples) return false;
        if (condition_.integer_or_dram_above_percent) {
            const double bound = *condition_.integer_or_dram_above_percent;
            const bool busy =
                (integer.read() && integer.mean() > bound) || (dram.read() && dram.mean() > bound);
            if (!busy) return false;
        }
        if (condition_.tensor_below_percent &&
            (!tensor.read() || tensor.mean() >= *condition_.tensor_below_percent)) {
            return false;
        }
        if (condition_.fp_below_percent &&
            (!fp.read() || fp.mean() >= *condition_.fp_below_percent)) {
            return false;
        }
        if (condition_.tensor_above_percent &&
            (!tensor.read() || tensor.mean() <= *condition_.tensor_above_percent)) {
            return false;
        }
        std::string text = "the GPU's pipes over " + std::to_string(condition_.duration.count()) +
                           "s while it was alone on it, by their mean:";
        const auto say = [&text](const char* pipe, const PipeMean& mean) {
            if (!mean.read()) return;
            char part[48];
            snprintf(part, sizeof(part), " %s %.0f%%", pipe, mean.mean());
            text += part;
        };
        say("integer", integer);
        say("DRAM", dram);
        say("tensor", tensor);
        say("FP (busiest)", fp);
        if (read < samples) {
            text += "; " + std::to_string(samples - read) + " of " + std::to_string(samples) +
                    " samples without GPM";
        }
        in.extra.push_back(Evidence{context.ts_ns, "telemetry", "telemetry", "", "pipes", text});
        return true;
    }

  private:
    rules::GpuPipeMixCondition condition_;
};

}  // namespace

std::unique_ptr<const Condition> conditions::gpu_pipe_mix(const rules::CorrelationRule& rule) {
    if (!rule.gpu_pipe_mix) return nullptr;
    return std::make_unique<GpuPipeMix>(*rule.gpu_pipe_mix);
}

}  // namespace gpuguard::agent
