// Kernel module loads (ModuleLoad events) and the flags detections leave on
// processes: what a load saw of the host when it happened (GPU processes
// running, a flagged process in the loader's parent chain, miners flagged
// elsewhere), and the module_load condition over it. The host's state is
// taken at the load, from the events before it, so replay sees what live saw.
#include "correlator_support.h"

namespace gpuguard::agent {
namespace {

constexpr size_t kMaxModulesPerProcess = 16;
constexpr int kMaxLineageDepth = 32;  // pid 1 is reached long before on any real host

bool any_glob(const std::vector<std::string>& globs, const std::string& text) {
    return std::any_of(globs.begin(), globs.end(), [&](const std::string& glob) {
        return fnmatch(glob.c_str(), text.c_str(), 0) == 0;
    });
}

// "a, b, c", the first kMaxListed of a long list and how many more.
std::string list_of(const std::vector<std::string>& items) {
    constexpr size_t kMaxListed = 8;
    if (items.size() <= kMaxListed) return join(items, ", ");
    return join(std::vector<std::string>(items.begin(), items.begin() + kMaxListed), ", ") +
           " and " + std::to_string(items.size() - kMaxListed) + " more";
}

std::string describe_module(const ModuleLoad& module) {
    const std::string taints = module_taint_letters(module.taints);
    return "kernel module " + module.name + (taints.empty() ? " (untainted)" : " taints " + taints);
}

}  // namespace

void Correlator::note_flagged(const CorrelationRule& rule, const ProcessInfo& info,
                              Severity severity) {
    if (severity > Severity::kWarning) return;  // notices and below flag nobody
    Flag& flag = flagged_[info.pid];
    if (std::find(flag.rules.begin(), flag.rules.end(), rule.id) != flag.rules.end()) return;
    flag.comm = info.comm;
    flag.rules.push_back(rule.id);
    flag.miner = flag.miner || rule.mitre_id.starts_with("T1496");
}

std::string Correlator::flagged_lineage(uint32_t pid) const {
    for (int depth = 0; depth < kMaxLineageDepth && pid > 1; ++depth) {
        const ProcessInfo* info = table_.find(pid);
        if (const Flag* flag = flagged_.find(pid); flag && !(info && info->exited)) {
            return (depth == 0 ? "the loader " : "its ancestor ") + std::to_string(pid) + " (" +
                   flag->comm + ") was flagged by " + join(flag->rules, ", ");
        }
        if (!info || info->ppid == pid) break;
        pid = info->ppid;
    }
    return "";
}

void Correlator::observe_module_load(uint32_t pid, uint64_t ts_ns, const ModuleLoad& module) {
    ModuleSeen seen{ts_ns, module, {}, flagged_lineage(pid), miners_on_host(pid)};
    for (const auto& [other_pid, other] : states_) {
        const ProcessInfo* other_info = table_.find(other_pid);
        if (!other_info || other_info->exited || !other_info->holds_gpu()) continue;
        seen.gpu_processes.push_back(std::to_string(other_pid) + " (" + other_info->comm + ")");
    }
    std::sort(seen.gpu_processes.begin(), seen.gpu_processes.end());
    ProcessState& state = states_[pid];
    state.modules.push_back(std::move(seen));
    if (state.modules.size() > kMaxModulesPerProcess) state.modules.erase(state.modules.begin());
    state.dirty = true;
}

bool Correlator::module_load_holds(const rules::ModuleLoadCondition& condition,
                                   std::chrono::seconds window, const ProcessInfo& info,
                                   const ProcessState& state, uint64_t ts_ns,
                                   std::vector<Evidence>& extra) const {
    using rules::ModuleLoadContext;
    const uint64_t window_ns = static_cast<uint64_t>(window.count()) * 1'000'000'000ull;
    const auto wants = [&](ModuleLoadContext context) {
        return std::find(condition.when.begin(), condition.when.end(), context) !=
               condition.when.end();
    };
    const size_t before = extra.size();
    for (const ModuleSeen& seen : state.modules) {
        if (seen.ts_ns + window_ns < ts_ns) continue;
        // The GPU driver's own load counts only with a flagged process behind it.
        const bool driver = !condition.driver_modules.empty() &&
                            any_glob(condition.driver_modules, seen.module.name) &&
                            any_glob(condition.driver_loaders, info.comm);
        // What the load saw of the host, as far as the condition asks.
        const auto shown = [&](ModuleLoadContext context) {
            return wants(context) || wants(ModuleLoadContext::kAny);
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
        extra.push_back(Evidence{seen.ts_ns, "event", "module_load", "", "module",
                                 describe_module(seen.module) + " loaded by " +
                                     std::to_string(info.pid) + " (" + info.comm + "); " +
                                     join(facts, "; ")});
    }
    return extra.size() > before;
}

std::string Correlator::miners_on_host(uint32_t pid) const {
    std::vector<std::string> miners;
    for (const auto& [other_pid, flag] : flagged_) {
        if (other_pid == pid || !flag.miner) continue;
        const ProcessInfo* other = table_.find(other_pid);
        if (!other || other->exited) continue;
        miners.push_back(std::to_string(other_pid) + " (" + flag.comm + ") flagged by " +
                         join(flag.rules, ", "));
    }
    if (miners.empty()) return "";
    std::sort(miners.begin(), miners.end());
    return "miners running on the host: " + list_of(miners);
}

}  // namespace gpuguard::agent
