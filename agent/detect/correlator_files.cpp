// File changes: the watched files a process changed (file_changed) and
// persistence written by a flagged process or its kin
// (persistence_after_detection). Library-loading environments are
// correlator_libraries.cpp's.
#include "correlator_support.h"

namespace gpuguard::agent {
namespace {

constexpr size_t kMaxFileRecords = 32;
constexpr size_t kMaxRecentPersistence = 256;
constexpr size_t kMaxAncestry = 64;

bool persistence_kind(std::string_view kind) {
    return kind == "cron" || kind == "systemd" || kind == "shell_rc" || kind == "ssh_keys";
}

std::string describe(const std::string& operation, const std::string& path,
                     const std::vector<std::string>& libraries) {
    std::string text = (operation == "write"    ? "wrote "
                        : operation == "rename" ? "renamed onto "
                                                : "unlinked ") +
                       path;
    if (!libraries.empty()) text += " (libraries: " + join(libraries, ", ") + ")";
    return text;
}

}  // namespace

std::vector<uint32_t> Correlator::ancestry(uint32_t pid) const {
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

bool Correlator::related(uint32_t pid, const PersistenceWrite& write) const {
    // It, or a descendant of it, wrote; or an ancestor of it did.
    if (std::find(write.chain.begin(), write.chain.end(), pid) != write.chain.end()) return true;
    const auto chain = ancestry(pid);
    return std::find(chain.begin(), chain.end(), write.writer) != chain.end();
}

void Correlator::observe_file_change(const Event& event, const FileChange& change,
                                     std::vector<const Detection*>& out) {
    // A watched process's writes elsewhere are journaled, not judged.
    if (change.kind.empty()) return;
    const uint32_t pid = event.task.pid;
    ProcessState& writer = states_[pid];
    writer.files.push_back(
        FileRecord{event.ts_ns, change.operation, change.kind, change.path, change.libraries});
    if (writer.files.size() > kMaxFileRecords) writer.files.erase(writer.files.begin());
    writer.dirty = true;
    evaluate(pid, event.ts_ns, out);
    if (!persistence_kind(change.kind) || change.operation == "unlink") return;

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
    for (const auto& [other_pid, other] : states_) {
        if (other.flagged && related(other_pid, write)) owners.push_back(other_pid);
    }
    for (uint32_t owner : owners) {
        ProcessState& state = states_[owner];
        state.persistence.push_back(write);
        if (state.persistence.size() > kMaxFileRecords) {
            state.persistence.erase(state.persistence.begin());
        }
        state.dirty = true;
        evaluate(owner, event.ts_ns, out);
    }
}

bool Correlator::attribute_recent_persistence(uint32_t pid, ProcessState& state, uint64_t ts_ns) {
    bool added = false;
    for (const PersistenceWrite& write : recent_persistence_) {
        if (write.ts_ns + options_.persistence_lookback_ns < ts_ns || !related(pid, write)) {
            continue;
        }
        state.persistence.push_back(write);
        added = true;
    }
    return added;
}

void Correlator::note_flagged(uint32_t pid, ProcessState& state, uint64_t ts_ns,
                              std::vector<const Detection*>& out) {
    if (state.flagged) return;
    const auto first = open_.lower_bound({pid, std::string()});
    if (first == open_.end() || first->first.first != pid) return;
    state.flagged = true;
    if (attribute_recent_persistence(pid, state, ts_ns)) {
        state.dirty = true;
        evaluate(pid, ts_ns, out, /*persistence_only=*/true);
    }
}

bool Correlator::file_conditions_hold(const CorrelationRule& rule, const ProcessState& state,
                                      uint64_t ts_ns, bool with_persistence,
                                      std::vector<Evidence>& extra) const {
    if (!rule.file_changed.empty()) {
        const uint64_t window_ns = static_cast<uint64_t>(rule.window.count()) * 1'000'000'000ull;
        bool any = false;
        for (const FileRecord& file : state.files) {
            if (file.operation == "unlink" || file.ts_ns + window_ns < ts_ns ||
                std::find(rule.file_changed.begin(), rule.file_changed.end(), file.kind) ==
                    rule.file_changed.end()) {
                continue;
            }
            any = true;
            extra.push_back(Evidence{file.ts_ns, "event", "file_change", "", file.kind,
                                     describe(file.operation, file.path, file.libraries)});
        }
        if (!any) return false;
    }
    if (rule.library_injection && !library_condition_holds(rule, state, extra)) return false;
    if (rule.persistence_after_detection && (!state.flagged || state.persistence.empty())) {
        return false;
    }
    if (with_persistence || rule.persistence_after_detection) {
        for (const PersistenceWrite& write : state.persistence) {
            extra.push_back(Evidence{write.ts_ns, "persistence", "file_change", "", write.kind,
                                     describe(write.operation, write.path, {}) + " by pid " +
                                         std::to_string(write.writer) + " (" + write.comm + ")"});
        }
    }
    return true;
}

}  // namespace gpuguard::agent
