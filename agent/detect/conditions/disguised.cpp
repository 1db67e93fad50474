// disguised: true — the process's name (comm) is not its executable's and
// only the executable is a known one (a process signature matches the exe,
// none the name). With a signature condition, only the executables it
// names count; the disguising hits replace the rule's hits.
#include <algorithm>

#include "condition.h"

namespace gpuguard::agent {
namespace {

class Disguised final : public Condition {
  public:
    explicit Disguised(bool with_signature) : with_signature_(with_signature) {}
    std::string_view name() const override { return "disguised"; }
    bool holds(const ConditionContext& context, RuleInputs& in) const override {
        const ProcessEvidence& evidence = context.evidence;
        const ProcessInfo& info = context.info;
        const auto disguises = [&](const Hit& hit) {
            return hit.field == rules::EvidenceField::kProcess && hit.detail == info.exe &&
                   std::find(evidence.disguise_ids.begin(), evidence.disguise_ids.end(), hit.id) !=
                       evidence.disguise_ids.end();
        };
        std::vector<const Hit*> disguise;
        for (const Hit* hit : in.hits) {
            if (disguises(*hit)) disguise.push_back(hit);
        }
        if (!with_signature_) {
            for (const Hit& hit : evidence.hits) {
                if (disguises(hit)) disguise.push_back(&hit);
            }
        }
        if (disguise.empty()) return false;
        in.hits = std::move(disguise);
        in.extra.push_back(Evidence{context.ts_ns, "event", "exec", "", "process",
                                    "comm '" + info.comm + "' hides executable " + info.exe});
        return true;
    }

  private:
    bool with_signature_;  // the rule's signature condition chose in.hits
};

}  // namespace

std::unique_ptr<const Condition> conditions::disguised(const rules::CorrelationRule& rule) {
    if (!rule.disguised) return nullptr;
    return std::make_unique<Disguised>(rule.signature.has_value());
}

}  // namespace gpuguard::agent
