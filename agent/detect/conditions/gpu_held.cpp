// gpu_held: true|false — whether the process holds a GPU now. When it must
// and does, the GPU it holds is the detection's first piece of evidence
// (added once the whole rule holds).
#include "condition.h"

namespace gpuguard::agent {
namespace {

class GpuHeld final : public Condition {
  public:
    explicit GpuHeld(bool held) : held_(held) {}
    std::string_view name() const override { return "gpu_held"; }
    uint32_t needs() const override { return held_ ? kFactHoldsGpu : kFactHoldsNoGpu; }
    bool holds(const ConditionContext& context, RuleInputs&) const override {
        return held_ == context.info.holds_gpu();
    }
    // The GPU it holds leads the detection's evidence.
    void held(const ConditionContext& context, RuleInputs& in) const override {
        if (!held_ || context.info.gpus.empty()) return;
        const GpuHandle& first = context.info.gpus.front();
        in.extra.insert(in.extra.begin(),
                        Evidence{context.evidence.first_gpu_ns, "event",
                                 first.inherited ? "fork" : "gpu_open", "", "gpu",
                                 "holds GPU device " + std::to_string(first.major) + ":" +
                                     std::to_string(first.minor)});
    }

  private:
    bool held_;
};

}  // namespace

std::unique_ptr<const Condition> conditions::gpu_held(const rules::CorrelationRule& rule) {
    if (!rule.gpu_held) return nullptr;
    return std::make_unique<GpuHeld>(*rule.gpu_held);
}

}  // namespace gpuguard::agent
