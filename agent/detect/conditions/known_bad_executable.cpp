// known_bad_executable: true — the executable's sha256 (from its exe_scan)
// is in miner-rules.yaml's known_bad.sha256.
#include "condition.h"

namespace gpuguard::agent {
namespace {

class KnownBadExecutable final : public Condition {
  public:
    std::string_view name() const override { return "known_bad_executable"; }
    bool holds(const ConditionContext& context, RuleInputs& in) const override {
        const ProcessEvidence& evidence = context.evidence;
        if (evidence.sha256.empty() ||
            !context.rule_set.known_bad_sha256().contains(evidence.sha256)) {
            return false;
        }
        in.extra.push_back(
            Evidence{evidence.scanned_ns, "event", "exe_scan", "", "sha256",
                     context.info.exe + " sha256:" + evidence.sha256 + " is in known_bad.sha256"});
        return true;
    }
};

}  // namespace

std::unique_ptr<const Condition> conditions::known_bad_executable(
    const rules::CorrelationRule& rule) {
    if (!rule.known_bad_executable) return nullptr;
    return std::make_unique<KnownBadExecutable>();
}

}  // namespace gpuguard::agent
