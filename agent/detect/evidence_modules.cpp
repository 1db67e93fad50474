// Kernel module loads and the flags detections leave on processes: what a
// load saw of the host when it happened (GPU processes running, a flagged
// process in the loader's parent chain, miners flagged elsewhere). The
// host's state is taken at the load, from the events before it, so replay
// sees what live saw. The module_load condition judges it
// (conditions/module_load.cpp).
#include <algorithm>

#include "evidence_book.h"

namespace gpuguard::agent {
namespace {

constexpr size_t kMaxModulesPerProcess = 16;
constexpr int kMaxLineageDepth = 32;  // pid 1 is reached long before on any real host

}  // namespace

void EvidenceBook::flag(const rules::CorrelationRule& rule, const ProcessInfo& info,
                        Severity severity) {
    if (severity > Severity::kWarning) return;  // notices and below flag nobody
    Flag& flag = flagged_[info.pid];
    if (std::find(flag.rules.begin(), flag.rules.end(), rule.id) != flag.rules.end()) return;
    flag.comm = info.comm;
    flag.rules.push_back(rule.id);
    flag.miner = flag.miner || rule.mitre_id.starts_with("T1496");
}

std::string EvidenceBook::flagged_lineage(uint32_t pid) const {
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

void EvidenceBook::record_module_load(uint32_t pid, uint64_t ts_ns, const ModuleLoad& module) {
    ModuleSeen seen{ts_ns, module, {}, flagged_lineage(pid), miners_on_host(pid)};
    for (const auto& [other_pid, other] : processes_) {
        const ProcessInfo* other_info = table_.find(other_pid);
        if (!other_info || other_info->exited || !other_info->holds_gpu()) continue;
        seen.gpu_processes.push_back(std::to_string(other_pid) + " (" + other_info->comm + ")");
    }
    std::sort(seen.gpu_processes.begin(), seen.gpu_processes.end());
    ProcessEvidence& evidence = processes_[pid];
    evidence.modules.push_back(std::move(seen));
    if (evidence.modules.size() > kMaxModulesPerProcess) {
        evidence.modules.erase(evidence.modules.begin());
    }
    evidence.dirty = true;
}

std::string EvidenceBook::miners_on_host(uint32_t pid) const {
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
