// mining_flow: true, or {min_age, min_pushes, max_bytes_per_minute} — one of the process's outbound
// connections has a mining session's shape (flow_shape.h): long-lived, the peer pushing small
// messages unprompted every few seconds to minutes, a few KB a minute both ways. Read from the
// kernel's counts (flow events), whatever the connection carries: TLS, a private protocol, a
// tunnel.
#include "condition.h"
#include "flow_shape.h"

namespace gpuguard::agent {
namespace {

class MiningFlow final : public Condition {
  public:
    explicit MiningFlow(const rules::MiningFlowCondition& shape) {
        limits_.min_age_ns = static_cast<uint64_t>(shape.min_age.count()) * 1'000'000'000;
        limits_.min_pushes = shape.min_pushes;
        limits_.max_bytes_per_minute = shape.max_bytes_per_minute;
    }
    std::string_view name() const override { return "mining_flow"; }
    bool holds(const ConditionContext& context, RuleInputs& in) const override {
        for (const Peer& peer : context.evidence.peers) {
            const Flow* flow = flow_of(context.evidence, peer);
            if (!flow) continue;
            if (const auto shape = mining_shape(*flow, limits_)) {
                in.extra.push_back(Evidence{context.ts_ns, "event", "flow", "", "flow_shape",
                                            *shape + " (" + describe_flow(*flow) + ")"});
                return true;
            }
        }
        return false;
    }

  private:
    FlowShapeLimits limits_;
};

}  // namespace

std::unique_ptr<const Condition> conditions::mining_flow(const rules::CorrelationRule& rule) {
    if (!rule.mining_flow) return nullptr;
    return std::make_unique<MiningFlow>(*rule.mining_flow);
}

}  // namespace gpuguard::agent
