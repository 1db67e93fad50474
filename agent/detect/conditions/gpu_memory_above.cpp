// gpu_memory_above: SIZE — a guard policy's limit: the process's latest GPU
// memory reading exceeds it. Over time (each sample is judged).
#include "condition.h"

namespace gpuguard::agent {
namespace {

class GpuMemoryAbove final : public Condition {
  public:
    explicit GpuMemoryAbove(uint64_t limit) : limit_(limit) {}
    std::string_view name() const override { return "gpu_memory_above"; }
    bool time_dependent() const override { return true; }
    bool holds(const ConditionContext& context, RuleInputs& in) const override {
        const auto& usage = context.evidence.usage;
        const UsageSample latest = usage.empty() ? UsageSample{} : usage.back();
        if (!latest.memory_bytes || *latest.memory_bytes <= limit_) return false;
        in.extra.push_back(
            Evidence{latest.ts_ns, "policy", "telemetry", "", "memory",
                     "GPU memory " + gib(*latest.memory_bytes) + " over the limit " + gib(limit_)});
        return true;
    }

  private:
    uint64_t limit_;
};

}  // namespace

std::unique_ptr<const Condition> conditions::gpu_memory_above(const rules::CorrelationRule& rule) {
    if (!rule.gpu_memory_above) return nullptr;
    return std::make_unique<GpuMemoryAbove>(*rule.gpu_memory_above);
}

}  // namespace gpuguard::agent
