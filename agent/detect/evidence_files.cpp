// Watched files in the evidence book: the files a process changed
// (file_changed) and persistence written by a flagged process or its kin
// (persistence_after_detection), kept for the look-back window so that a
// process flagged later still gets what it wrote just before.
#include <algorithm>

#include "evidence_book.h"

namespace gpuguard::agent {
namespace {

constexpr size_t kMaxFileRecords = 32;
constexpr size_t kMaxRecentPersistence = 256;
constexpr size_t kMaxAncestry = 64;

bool persistence_kind(std::string_view kind) {
    return kind == "cron" || kind == "systemd" || kind == "shell_rc" || kind == "ssh_keys";
}

}  // namespace

std::vector<uint32_t> EvidenceBook::ancestry(uint32_t pid) const {
    std::vector<uint32_t> chain{pid};
    uint32_t current = pid;
    while (chain.size() < kMaxAncestry) {
        const ProcessInfo* info = table_.find(current);
        if (!info || info->ppid <= 1) break;
        current = info->ppid;
        if (std::find(chain.begin(), chain.end(), current) != chain.end()) break;
        chain.push_back(current);
    }
    return chain;
}

bool EvidenceBook::related(uint32_t pid, const PersistenceWrite& write) const {
    // It, or a descendant of it, wrote; or an ancestor of it did.
    if (std::find(write.chain.begin(), write.chain.end(), pid) != write.chain.end()) return true;
    const auto chain = ancestry(pid);
    return std::find(chain.begin(), chain.end(), write.writer) != chain.end();
}

bool EvidenceBook::record_file_change(const Event& event, const FileChange& change) {
    ProcessEvidence& writer = processes_[event.task.pid];
    writer.files.push_back(
        FileRecord{event.ts_ns, change.operation, change.kind, change.path, change.libraries});
    if (writer.files.size() > kMaxFileRecords) writer.files.erase(writer.files.begin());
    writer.dirty = true;
    return persistence_kind(change.kind) && change.operation != "unlink";
}

std::vector<uint32_t> EvidenceBook::record_persistence(const Event& event,
                                                       const FileChange& change) {
    const uint32_t pid = event.task.pid;
    PersistenceWrite write{event.ts_ns, pid,         event.task.comm, change.operation,
                           change.kind, change.path, ancestry(pid)};
    if (write.chain.size() == 1 && event.task.ppid > 1) write.chain.push_back(event.task.ppid);
    while (!recent_persistence_.empty() &&
           (recent_persistence_.size() >= kMaxRecentPersistence ||
            recent_persistence_.front().ts_ns + options_.persistence_lookback_ns < event.ts_ns)) {
        recent_persistence_.pop_front();
    }
    recent_persistence_.push_back(write);
    std::vector<uint32_t> owners;
    for (const auto& [other_pid, other] : processes_) {
        if (other.flagged && related(other_pid, write)) owners.push_back(other_pid);
    }
    for (uint32_t owner : owners) {
        ProcessEvidence& evidence = processes_[owner];
        evidence.persistence.push_back(write);
        if (evidence.persistence.size() > kMaxFileRecords) {
            evidence.persistence.erase(evidence.persistence.begin());
        }
        evidence.dirty = true;
    }
    return owners;
}

bool EvidenceBook::attribute_recent_persistence(uint32_t pid, uint64_t ts_ns) {
    ProcessEvidence& evidence = processes_[pid];
    bool added = false;
    for (const PersistenceWrite& write : recent_persistence_) {
        if (write.ts_ns + options_.persistence_lookback_ns < ts_ns || !related(pid, write)) {
            continue;
        }
        evidence.persistence.push_back(write);
        added = true;
    }
    return added;
}

}  // namespace gpuguard::agent
