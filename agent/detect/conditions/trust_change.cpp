// trust_change: {changes: [allowlist_added, action_lowered, rule_disabled,
// any], writers: [package_manager, systemctl, other, unknown],
// flagged_writer} — the process changed what the agent trusts (its
// configuration, rule files, unit files, executable: trust_change events)
// within the rule's window, in a way listed, as a writer listed; with
// flagged_writer, only while it or an ancestor was flagged by another rule
// when it wrote. One piece of evidence per change.
#include <algorithm>

#include "condition.h"

namespace gpuguard::agent {
namespace {

bool listed(const std::vector<std::string>& list, const std::string& value) {
    return std::find(list.begin(), list.end(), value) != list.end();
}

class TrustChanged final : public Condition {
  public:
    TrustChanged(rules::TrustChangeCondition condition, std::chrono::seconds window)
        : condition_(std::move(condition)), window_(window) {}
    std::string_view name() const override { return "trust_change"; }
    uint32_t needs() const override { return kFactTrustChanges; }
    bool holds(const ConditionContext& context, RuleInputs& in) const override {
        const uint64_t window_ns = static_cast<uint64_t>(window_.count()) * 1'000'000'000ull;
        const auto& changes = condition_.changes;
        const size_t before = in.extra.size();
        for (const TrustRecord& record : context.evidence.trust_changes) {
            if (record.ts_ns + window_ns < context.ts_ns) continue;
            if (!condition_.writers.empty() && !listed(condition_.writers, record.writer)) {
                continue;
            }
            if (condition_.flagged_writer && record.flagged.empty()) continue;
            const bool did = listed(changes, "any") ||
                             (record.allowlist_added && listed(changes, "allowlist_added")) ||
                             (record.action_lowered && listed(changes, "action_lowered")) ||
                             (record.rule_disabled && listed(changes, "rule_disabled"));
            if (!did) continue;
            std::string detail = record.detail;
            if (condition_.flagged_writer) detail += "; " + record.flagged;
            in.extra.push_back(
                Evidence{record.ts_ns, "event", "trust_change", "", record.stage, detail});
        }
        return in.extra.size() > before;
    }

  private:
    rules::TrustChangeCondition condition_;
    std::chrono::seconds window_;  // the rule's
};

}  // namespace

std::unique_ptr<const Condition> conditions::trust_change(const rules::CorrelationRule& rule) {
    if (!rule.trust_change) return nullptr;
    return std::make_unique<TrustChanged>(*rule.trust_change, rule.window);
}

}  // namespace gpuguard::agent
