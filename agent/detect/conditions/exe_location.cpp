// exe_location: [tmp, var_tmp, dev_shm, deleted, memfd, appimage,
// extracted_runtime, package_replaced] — where the executable lives, by its
// path with the spelling undone (rules::exe_locations); any of those listed.
// A look-alike (appimage, extracted_runtime) whose claim the agent refused
// (ExeScan::location_check) is the temporary location it is.
#include <algorithm>

#include "condition.h"

namespace gpuguard::agent {
namespace {

class ExeLocationCondition final : public Condition {
  public:
    explicit ExeLocationCondition(std::vector<rules::ExeLocation> locations)
        : locations_(std::move(locations)) {}
    std::string_view name() const override { return "exe_location"; }
    bool holds(const ConditionContext& context, RuleInputs& in) const override {
        if (!in.locations_known) {
            in.locations =
                rules::exe_locations(context.info.exe, context.info.exe_package, refused(context));
            in.locations_known = true;
        }
        const bool inside = std::any_of(locations_.begin(), locations_.end(), [&](auto where) {
            return std::find(in.locations.begin(), in.locations.end(), where) != in.locations.end();
        });
        if (!inside) return false;
        std::string detail = "executable " + context.info.exe;
        if (refused(context)) detail += " (" + context.evidence.location_check + ")";
        in.extra.push_back(Evidence{context.ts_ns, "event", "exec", "", "process", detail});
        return true;
    }

  private:
    // The agent found the look-alike location's claim untrue.
    static bool refused(const ConditionContext& context) {
        return context.evidence.location_check.starts_with("refused");
    }

    std::vector<rules::ExeLocation> locations_;
};

}  // namespace

std::unique_ptr<const Condition> conditions::exe_location(const rules::CorrelationRule& rule) {
    if (rule.exe_location.empty()) return nullptr;
    return std::make_unique<ExeLocationCondition>(rule.exe_location);
}

}  // namespace gpuguard::agent
