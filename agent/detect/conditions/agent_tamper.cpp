// agent_tamper: [stop, signal, bpf_command, pin_removed, down] — the
// process did one of these to the agent itself (agent_tamper events); each
// such event is a piece of evidence.
#include <algorithm>

#include "condition.h"

namespace gpuguard::agent {
namespace {

class AgentTamperCondition final : public Condition {
  public:
    explicit AgentTamperCondition(std::vector<std::string> kinds) : kinds_(std::move(kinds)) {}
    std::string_view name() const override { return "agent_tamper"; }
    uint32_t needs() const override { return kFactTampers; }
    bool holds(const ConditionContext& context, RuleInputs& in) const override {
        bool any = false;
        for (const Tamper& tamper : context.evidence.tampers) {
            if (std::find(kinds_.begin(), kinds_.end(), tamper.kind) == kinds_.end()) continue;
            in.extra.push_back(
                Evidence{tamper.ts_ns, "event", "agent_tamper", "", tamper.kind, tamper.detail});
            any = true;
        }
        return any;
    }

  private:
    std::vector<std::string> kinds_;
};

}  // namespace

std::unique_ptr<const Condition> conditions::agent_tamper(const rules::CorrelationRule& rule) {
    if (rule.agent_tamper.empty()) return nullptr;
    return std::make_unique<AgentTamperCondition>(rule.agent_tamper);
}

}  // namespace gpuguard::agent
