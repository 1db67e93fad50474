// exe_location: [tmp, var_tmp, dev_shm, deleted, memfd, appimage,
// extracted_runtime, package_replaced] — where the executable lives, by its
// path with the spelling undone (rules::exe_locations); any of those listed.
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
            in.locations = rules::exe_locations(context.info.exe, context.info.exe_package);
            in.locations_known = true;
        }
        const bool inside = std::any_of(locations_.begin(), locations_.end(), [&](auto where) {
            return std::find(in.locations.begin(), in.locations.end(), where) != in.locations.end();
        });
        if (!inside) return false;
        in.extra.push_back(Evidence{context.ts_ns, "event", "exec", "", "process",
                                    "executable " + context.info.exe});
        return true;
    }

  private:
    std::vector<rules::ExeLocation> locations_;
};

}  // namespace

std::unique_ptr<const Condition> conditions::exe_location(const rules::CorrelationRule& rule) {
    if (rule.exe_location.empty()) return nullptr;
    return std::make_unique<ExeLocationCondition>(rule.exe_location);
}

}  // namespace gpuguard::agent
