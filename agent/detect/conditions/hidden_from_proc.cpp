// hidden_from_proc: true — libc's readdir of /proc does not list the live
// process while the kernel does (a hidden_process event: a preloaded
// library hooking readdir hides it from ps and top).
#include "condition.h"

namespace gpuguard::agent {
namespace {

class HiddenFromProc final : public Condition {
  public:
    std::string_view name() const override { return "hidden_from_proc"; }
    uint32_t needs() const override { return kFactHidden; }
    bool holds(const ConditionContext& context, RuleInputs& in) const override {
        const ProcessEvidence& evidence = context.evidence;
        if (evidence.hidden_ns == 0) return false;
        in.extra.push_back(
            Evidence{evidence.hidden_ns, "event", "hidden_process", "", "hidden", evidence.hidden});
        return true;
    }
};

}  // namespace

std::unique_ptr<const Condition> conditions::hidden_from_proc(const rules::CorrelationRule& rule) {
    if (!rule.hidden_from_proc) return nullptr;
    return std::make_unique<HiddenFromProc>();
}

}  // namespace gpuguard::agent
