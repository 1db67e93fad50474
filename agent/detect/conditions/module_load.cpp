// module_load: {while: [gpu_process, flagged_lineage, miner_on_host, any],
// driver_modules, driver_loaders} — the process loaded a kernel module
// within the rule's window, in one of the contexts listed, as the host was
// at the load (EvidenceBook::record_module_load). The GPU driver's own
// modules loaded by its own loaders count only with a flagged process
// behind them. One piece of evidence per load.
#include <algorithm>

#include <fnmatch.h>

#include "condition.h"

namespace gpuguard::agent {
namespace {

bool any_glob(const std::vector<std::string>& globs, const std::string& text) {
    return std::any_of(globs.begin(), globs.end(), [&](const std::string& glob) {
        return fnmatch(glob.c_str(), text.c_str(), 0) == 0;
    });
}

std::string describe_module(const ModuleLoad& module) {
    const std::string taints = module_taint_letters(module.taints);
    return "kernel module " + module.name + (taints.empty() ? " (untainted)" : " taints " + taints);
}

class ModuleLoaded final : public Condition {
  public:
    ModuleLoaded(rules::ModuleLoadCondition condition, std::chrono::seconds window)
        : condition_(std::move(condition)), window_(window) {}
    std::string_view name() const override { return "module_load"; }
    uint32_t needs() const override { return kFactModuleLoads; }
    bool holds(const ConditionContext& context, RuleInputs& in) const override {
        using rules::ModuleLoadContext;
        const ProcessInfo& info = context.info;
        const uint64_t window_ns = static_cast<uint64_t>(window_.count()) * 1'000'000'000ull;
        const auto wants = [&](ModuleLoadContext wanted) {
            return std::find(condition_.when.begin(), condition_.when.end(), wanted) !=
                   condition_.when.end();
        };
        const size_t before = in.extra.size();
        for (const ModuleSeen& seen : context.evidence.modules) {
            if (seen.ts_ns + window_ns < context.ts_ns) continue;
            // The GPU driver's own load counts only with a flagged process behind it.
            const bool driver = !condition_.driver_modules.empty() &&
                                any_glob(condition_.driver_modules, seen.module.name) &&
                                any_glob(condition_.driver_loaders, info.comm);
            // What the load saw of the host, as far as the condition asks.
            const auto shown = [&](ModuleLoadContext wanted) {
                return wants(wanted) || wants(ModuleLoadContext::kAny);
            };
            std::vector<std::string> facts;
            bool counts = false;
            if (!seen.flagged.empty() && shown(ModuleLoadContext::kFlaggedLineage)) {
                facts.push_back(seen.flagged);
                counts = counts || wants(ModuleLoadContext::kFlaggedLineage);
            }
            if (!seen.miners.empty() && shown(ModuleLoadContext::kMinerOnHost)) {
                facts.push_back(seen.miners);
                counts = counts || (wants(ModuleLoadContext::kMinerOnHost) && !driver);
            }
            if (!seen.gpu_processes.empty() && shown(ModuleLoadContext::kGpuProcess)) {
                facts.push_back("GPU processes running: " + list_of(seen.gpu_processes));
                counts = counts || (wants(ModuleLoadContext::kGpuProcess) && !driver);
            }
            if (wants(ModuleLoadContext::kAny) && !driver) {
                counts = true;
                if (facts.empty()) facts.push_back("no GPU process running, nothing flagged");
            }
            if (!counts) continue;
            in.extra.push_back(Evidence{seen.ts_ns, "event", "module_load", "", "module",
                                        describe_module(seen.module) + " loaded by " +
                                            std::to_string(info.pid) + " (" + info.comm + "); " +
                                            join(facts, "; ")});
        }
        return in.extra.size() > before;
    }

  private:
    rules::ModuleLoadCondition condition_;
    std::chrono::seconds window_;  // the rule's
};

}  // namespace

std::unique_ptr<const Condition> conditions::module_load(const rules::CorrelationRule& rule) {
    if (!rule.module_load) return nullptr;
    return std::make_unique<ModuleLoaded>(*rule.module_load, rule.window);
}

}  // namespace gpuguard::agent
