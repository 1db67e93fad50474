// signature: signature hits of the process by field, id glob, exclusion and
// confidence. The hits it names are the detection's signature evidence.
// Each hit remembers, per rule, whether the rule's condition matched it
// (Verdict): a host sees the same few hits judged by the same rules.
#include "condition.h"

namespace gpuguard::agent {
namespace {

class Signature final : public Condition {
  public:
    explicit Signature(rules::SignatureCondition condition) : condition_(std::move(condition)) {}
    std::string_view name() const override { return "signature"; }
    uint32_t needs() const override { return kFactHits; }
    bool holds(const ConditionContext& context, RuleInputs& in) const override {
        for (const Hit& hit : context.evidence.hits) {
            if (matches(context.rule_index, hit)) in.hits.push_back(&hit);
        }
        return !in.hits.empty();
    }

  private:
    bool matches(size_t rule_index, const Hit& hit) const {
        if (rule_index >= 64 || !hit.verdict) {
            return condition_.matches(hit.field, hit.id, hit.confidence);
        }
        Verdict& verdict = *hit.verdict;
        const uint64_t bit = uint64_t{1} << rule_index;
        if (!(verdict.judged & bit)) {
            verdict.judged |= bit;
            if (condition_.matches(hit.field, hit.id, hit.confidence)) verdict.matches |= bit;
        }
        return (verdict.matches & bit) != 0;
    }

    rules::SignatureCondition condition_;
};

}  // namespace

std::unique_ptr<const Condition> conditions::signature(const rules::CorrelationRule& rule) {
    if (!rule.signature) return nullptr;
    return std::make_unique<Signature>(*rule.signature);
}

}  // namespace gpuguard::agent
