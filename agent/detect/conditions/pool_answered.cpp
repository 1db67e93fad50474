// pool_answered: true — the agent's own probe of one of the process's peers
// (verify.active; a pool_probe event, docs/detections.md "Active
// verification") was answered in a mining pool's form. The evidence quotes
// the answer. Replay judges the journaled probe; it never probes.
#include "condition.h"
#include "gpuguard/common/ip_address.h"

namespace gpuguard::agent {
namespace {

class PoolAnswered final : public Condition {
  public:
    std::string_view name() const override { return "pool_answered"; }
    uint32_t needs() const override { return kFactProbes; }
    bool holds(const ConditionContext& context, RuleInputs& in) const override {
        for (const ProbeSeen& seen : context.evidence.probes) {
            const PoolProbe& probe = seen.probe;
            if (!probe.pool) continue;
            std::string detail = endpoint_text(probe.address, probe.port) + " answered " +
                                 (probe.tls ? "over TLS" : "over plain TCP");
            if (!probe.server_name.empty()) detail += " (server name " + probe.server_name + ")";
            detail += " the agent's " + probe.protocol + " probe: " + probe.verdict;
            if (!probe.answer.empty()) detail += "; answer: " + probe.answer;
            in.extra.push_back(Evidence{seen.ts_ns, "event", "pool_probe", "", "probe", detail});
            return true;
        }
        return false;
    }
};

}  // namespace

std::unique_ptr<const Condition> conditions::pool_answered(const rules::CorrelationRule& rule) {
    if (!rule.pool_answered) return nullptr;
    return std::make_unique<PoolAnswered>();
}

}  // namespace gpuguard::agent
