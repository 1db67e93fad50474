// The correlator and configuration files: when to ask for a process's
// (ConfigRequest), and what a config_file event's lines add. The lines are
// matched here, from the event, so live and replay judge the same text.
#include "correlator_support.h"
#include "gpuguard/detect/config_scanner.h"

namespace gpuguard::agent {

void CorrelatorImpl::request_configs(uint32_t pid, const ProcessInfo& info,
                                     ProcessEvidence& evidence, uint64_t ts_ns) {
    // At the first GPU use again: a miner may have written its file since.
    const char* reason = evidence.held_gpu ? "gpu_open" : nullptr;
    if (!reason && evidence.config_asked) return;
    if (!reason && !evidence.hits.empty()) reason = "signature";
    if (!reason && !rules::exe_locations(info.exe, info.exe_package).empty())
        reason = "exe_location";
    // A busy process (cpu_usage readings come for busy ones only) is judged
    // by its behaviour: what its files say, or that they cannot be read.
    if (!reason && !evidence.cpu.empty()) reason = "busy_cpu";
    if (!reason) return;
    evidence.config_asked = true;
    evidence.config_asked_gpu = evidence.held_gpu;
    config_requests_.push_back(ConfigRequest{pid, ts_ns, reason});
}

void CorrelatorImpl::record_config_file(uint32_t pid, uint64_t ts_ns, const ConfigFile& file) {
    // Lines that arrive after the exit have nobody to judge.
    const ProcessInfo* info = table_.find(pid);
    if (!info || info->exited) return;
    ProcessEvidence& evidence = book_.of(pid);
    if (!file.error.empty()) {
        constexpr size_t kMaxUnread = 8;
        std::string detail = file.path + " (" + file.reason + ") not read: " + file.error;
        auto& unread = evidence.configs_unread;
        const bool known = std::any_of(unread.begin(), unread.end(),
                                       [&](const auto& seen) { return seen.second == detail; });
        if (!known && unread.size() < kMaxUnread) {
            unread.emplace_back(ts_ns, std::move(detail));
            evidence.dirty = true;
        }
        return;
    }
    for (const ConfigLine& line : file.lines) {
        const auto& ids = match_cached(signatures::Field::kConfig, line.text);
        if (ids.empty()) continue;
        // Signatures see the raw line; the evidence a wallet cut to a prefix.
        add_hits(
            evidence, EvidenceField::kConfig, ids, ts_ns,
            file.path + ":" + std::to_string(line.line) + ": " + redact_config_line(line.text));
    }
}

}  // namespace gpuguard::agent
