// Kernel module loads and the flags detections leave on processes: what a
// load saw of the host when it happened (GPU processes running, a flagged
// process in the loader's parent chain, miners flagged elsewhere). The
// host's state is taken at the load, from the events before it, so replay
// sees what live saw. The module_load condition judges it
// (conditions/module_load.cpp).
#include <algorithm>

#include "evidence_book.h"
#include "gpuguard/events/agent_tamper.h"

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
    flag.beyond_trust = flag.beyond_trust || !rule.trust_change;
}

std::string EvidenceBook::flagged_lineage(uint32_t pid, bool beyond_trust) const {
    for (int depth = 0; depth < kMaxLineageDepth && pid > 1; ++depth) {
        const ProcessInfo* info = table_.find(pid);
        if (const Flag* flag = flagged_.find(pid);
            flag && !(info && info->exited) && (!beyond_trust || flag->beyond_trust)) {
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

void EvidenceBook::record_trust_change(const Event& event, const TrustChange& change) {
    constexpr size_t kMaxTrustChanges = 16;
    ProcessEvidence& evidence = processes_[event.task.pid];
    if (evidence.trust_changes.size() >= kMaxTrustChanges) {
        evidence.trust_changes.erase(evidence.trust_changes.begin());
    }
    // The flag as it stands at the change, from the events before it: live
    // and replay see the same.
    evidence.trust_changes.push_back(TrustRecord{
        event.ts_ns, change.stage, change.writer, !change.allowlist_added.empty(),
        !change.actions_lowered.empty(), !change.rules_disabled.empty(),
        change.writer == "unknown" ? "" : flagged_lineage(event.task.pid, /*beyond_trust=*/true),
        describe_trust_change(event.task, change)});
    evidence.dirty = true;
}

}  // namespace gpuguard::agent
