// What the signature pack says about a process: the pack's signatures by
// id, cached matches of a text or a port, a process's hits (each with its
// verdict, so a reload judges them again) and the matching of an
// executable image's names and command line.
#include "correlator_support.h"

namespace gpuguard::agent {

void CorrelatorImpl::reset_rule_set_caches() {
    signatures_.clear();
    for (const auto& entry : rule_set_->effective()) {
        signatures_.try_emplace(entry.signature.id, &entry);  // the first wins, as in find()
    }
    for (auto& cache : match_cache_) cache.clear();
    port_cache_.clear();
    verdicts_.clear();  // set_rule_set() drops every hit that points here
}

const rules::EffectiveSignature* CorrelatorImpl::signature(std::string_view id) const {
    const auto found = signatures_.find(id);
    return found == signatures_.end() ? nullptr : found->second;
}

const std::vector<std::string_view>& CorrelatorImpl::match_cached(signatures::Field field,
                                                                  const std::string& text) {
    auto& cache = match_cache_[static_cast<size_t>(field)];
    const auto found = cache.find(text);
    if (found != cache.end()) return found->second;
    // Bounded: start over rather than grow with every distinct command line.
    if (cache.size() >= 4096) cache.clear();
    return cache.emplace(text, scanner_.match(field, text)).first->second;
}

const std::vector<std::string_view>& CorrelatorImpl::match_port_cached(uint16_t port) {
    const auto found = port_cache_.find(port);
    if (found != port_cache_.end()) return found->second;
    return port_cache_.emplace(port, scanner_.match_port(port)).first->second;
}

void CorrelatorImpl::add_hits(ProcessEvidence& evidence, EvidenceField field,
                              const std::vector<std::string_view>& ids, uint64_t ts_ns,
                              const std::string& detail) {
    for (std::string_view id : ids) {
        const bool known =
            std::any_of(evidence.hits.begin(), evidence.hits.end(), [&](const Hit& hit) {
                return hit.field == field && hit.id == id && hit.detail == detail;
            });
        if (known) continue;
        const rules::EffectiveSignature* effective = signature(id);
        if (!effective) continue;  // disabled since the match
        Verdict* verdict = &verdicts_[{field, effective->signature.id}];
        evidence.hits.push_back(Hit{field, std::string(id), effective->signature.confidence,
                                    rules::to_string(effective->action), ts_ns, detail, verdict});
        evidence.dirty = true;
    }
}

void CorrelatorImpl::match_image(ProcessEvidence& evidence, const ProcessInfo& info,
                                 uint64_t ts_ns) {
    evidence.matched = true;
    evidence.matched_comm = info.comm;
    evidence.dirty = true;
    // "/memfd:NAME (deleted)" and "/path/NAME (deleted)" run as NAME.
    std::string exe_name = basename_of(info.exe);
    if (exe_name.ends_with(" (deleted)")) exe_name.resize(exe_name.size() - 10);
    if (exe_name.starts_with("memfd:")) exe_name.erase(0, 6);
    static const std::vector<std::string_view> kNone;
    // A copy (empty but for miners): looking up the exe may clear the cache.
    const std::vector<std::string_view> by_comm =
        match_cached(signatures::Field::kProcess, info.comm);
    const auto& by_exe =
        info.exe.empty() ? kNone : match_cached(signatures::Field::kProcess, info.exe);
    add_hits(evidence, EvidenceField::kProcess, by_comm, ts_ns, info.comm);
    add_hits(evidence, EvidenceField::kProcess, by_exe, ts_ns, info.exe);
    // Disguise: the name the process shows is not its executable's, and only
    // the executable is a known one.
    evidence.disguise_ids.clear();
    const bool renamed = !info.comm.empty() && !exe_name.empty() &&
                         exe_name.compare(0, info.comm.size(), info.comm) != 0;
    if (renamed && by_comm.empty()) {
        for (auto id : by_exe) evidence.disguise_ids.emplace_back(id);
    }
    if (!info.cmdline.empty()) {
        const std::string cmdline = join(info.cmdline, " ");
        add_hits(evidence, EvidenceField::kCmdline,
                 match_cached(signatures::Field::kCmdline, cmdline), ts_ns, cmdline);
    }
}

}  // namespace gpuguard::agent
