// gpu_stack: [STACK, ...] — the GPU software the process had mapped at its
// first GPU use (a gpu_libraries event) makes one of these stacks: a
// miner's kernels need the driver and perhaps a runtime compiler
// ("runtime_only", "driver_only"); training and inference map an ML stack
// ("ml_framework"). Never holds before that event came.
#include "condition.h"

namespace gpuguard::agent {
namespace {

class GpuStack final : public Condition {
  public:
    explicit GpuStack(std::vector<std::string> stacks) : stacks_(std::move(stacks)) {}
    std::string_view name() const override { return "gpu_stack"; }
    bool holds(const ConditionContext& context, RuleInputs& in) const override {
        const auto& found = context.evidence.gpu_stack;
        if (!found || !found->error.empty() ||
            std::find(stacks_.begin(), stacks_.end(), found->stack) == stacks_.end()) {
            return false;
        }
        std::vector<std::string> names;
        for (const std::string& path : found->libraries) {
            names.push_back(path.substr(path.rfind('/') + 1));
        }
        std::string detail = "GPU stack " + found->stack;
        if (!found->frameworks.empty()) detail += " (" + join(found->frameworks, ", ") + ")";
        detail += names.empty() ? ": no GPU library mapped" : ": " + join(names, ", ");
        if (found->stack != "ml_framework") detail += "; no ML framework mapped";
        in.extra.push_back(
            Evidence{context.ts_ns, "event", "gpu_libraries", "", "gpu_stack", detail});
        return true;
    }

  private:
    std::vector<std::string> stacks_;
};

}  // namespace

std::unique_ptr<const Condition> conditions::gpu_stack(const rules::CorrelationRule& rule) {
    if (rule.gpu_stack.empty()) return nullptr;
    return std::make_unique<GpuStack>(rule.gpu_stack);
}

}  // namespace gpuguard::agent
