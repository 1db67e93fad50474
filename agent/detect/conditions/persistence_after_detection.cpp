// persistence_after_detection: true — another rule flagged the process,
// and it, an ancestor or a descendant wrote persistence (cron, systemd,
// shell_rc, ssh_keys) after that or within the look-back before it
// (EvidenceBook::record_persistence). Also where a rule does not set it, a
// flagged process's persistence is evidence of each of its detections
// (not of supporting signals): every rule carries this condition, required
// only where it is set.
#include "condition.h"

namespace gpuguard::agent {
namespace {

class PersistenceAfterDetection final : public Condition {
  public:
    explicit PersistenceAfterDetection(bool required) : required_(required) {}
    std::string_view name() const override { return "persistence_after_detection"; }
    bool holds(const ConditionContext& context, RuleInputs& in) const override {
        const ProcessEvidence& evidence = context.evidence;
        if (required_ && (!evidence.flagged || evidence.persistence.empty())) return false;
        if (!required_ && context.rule_index == kSupportingSignal) return true;
        for (const PersistenceWrite& write : evidence.persistence) {
            in.extra.push_back(Evidence{write.ts_ns, "persistence", "file_change", "", write.kind,
                                        describe_file_change(write.operation, write.path, {}) +
                                            " by pid " + std::to_string(write.writer) + " (" +
                                            write.comm + ")"});
        }
        return true;
    }

  private:
    bool required_;
};

}  // namespace

std::unique_ptr<const Condition> conditions::persistence_after_detection(
    const rules::CorrelationRule& rule) {
    return std::make_unique<PersistenceAfterDetection>(rule.persistence_after_detection);
}

}  // namespace gpuguard::agent
