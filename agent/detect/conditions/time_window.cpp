// time_window: {days, from, to, time_zone} — only at these wall-clock
// times. Judged last: the window alone never makes a violation, it scopes
// one. Over time.
#include "condition.h"

namespace gpuguard::agent {
namespace {

class TimeWindow final : public Condition {
  public:
    explicit TimeWindow(rules::TimeWindowCondition window) : window_(std::move(window)) {}
    std::string_view name() const override { return "time_window"; }
    bool time_dependent() const override { return true; }
    bool holds(const ConditionContext& context, RuleInputs& in) const override {
        const int64_t wall_ns = static_cast<int64_t>(context.ts_ns) + context.realtime_offset_ns;
        if (!window_.contains(wall_ns)) return false;
        in.extra.push_back(Evidence{context.ts_ns, "policy", "", "", "time",
                                    "inside the policy's time window (" + window_.time_zone + ")"});
        return true;
    }

  private:
    rules::TimeWindowCondition window_;
};

}  // namespace

std::unique_ptr<const Condition> conditions::time_window(const rules::CorrelationRule& rule) {
    if (!rule.time_window) return nullptr;
    return std::make_unique<TimeWindow>(*rule.time_window);
}

}  // namespace gpuguard::agent
