// The agent's own trusted files (issue 39; docs/detections.md, "The agent's
// own trust"): which paths the kernel watches as kind agent_config (its
// configuration, rule files, correlation files, unit files, executable),
// who wrote them (the trust_change "write" events the pipeline passes after
// each such file_change), and what a reload of the rules, the correlation
// rules or the configuration did to the agent's trust: a trust_change
// "reload" event naming the last writer seen and the diff, journaled and
// judged like any event, and a log line saying who changed what.
#include <algorithm>
#include <filesystem>
#include <system_error>

#include <unistd.h>

#include "agent_impl.h"
#include "gpuguard/events/agent_tamper.h"

namespace gpuguard::agent {
namespace {

// Writes remembered for the reload that follows them.
constexpr size_t kMaxTrustWrites = 64;
constexpr uint64_t kTrustWriteMemoryNs = 600'000'000'000ull;

// Whether `path` is one of `domain`: an exact path, or under a directory
// entry ending in '/'.
bool in_domain(const std::string& path, const std::vector<std::string>& domain) {
    return std::any_of(domain.begin(), domain.end(), [&](const std::string& entry) {
        return entry.ends_with('/') ? path.starts_with(entry) : path == entry;
    });
}

std::string as_directory(const std::string& path) {
    return path.empty() || path.ends_with('/') ? path : path + "/";
}

}  // namespace

std::vector<std::string> Agent::Impl::trusted_paths(const std::string& what) const {
    const Config& config = options.config;
    std::vector<std::string> paths;
    if (what.empty() || what == "config") {
        if (!options.config_path.empty()) {
            std::error_code ec;
            paths.push_back(std::filesystem::absolute(options.config_path, ec).string());
        }
    }
    if (what.empty() || what == "rules") {
        paths.push_back(config.rules.main_file);
        paths.push_back(as_directory(config.rules.drop_in_dir));
    }
    if (what.empty() || what == "correlation") {
        for (const auto& file : config.rules.correlation_files) paths.push_back(file);
    }
    if (what.empty()) {
        // The unit (and its drop-ins) wherever systemd looks for it, and the
        // executable that runs.
        for (const char* dir :
             {"/etc/systemd/system/", "/lib/systemd/system/", "/usr/lib/systemd/system/"}) {
            paths.push_back(std::string(dir) + "gpuguard.service");
        }
        paths.push_back("/etc/systemd/system/gpuguard.service.d/");
        std::error_code ec;
        const auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
        if (!ec) paths.push_back(exe.string());
    }
    std::erase_if(paths, [](const std::string& path) { return path.empty() || path == "/"; });
    return paths;
}

void Agent::Impl::note_trust_write(const Event& event, const TrustChange& change) {
    if (change.stage != "write") return;
    logger("agent")->info("{}", describe_trust_change(event.task, change));
    trust_writes.push_back(Event{event.ts_ns, event.task, change});
    while (
        trust_writes.size() > kMaxTrustWrites ||
        (!trust_writes.empty() && trust_writes.front().ts_ns + kTrustWriteMemoryNs < event.ts_ns)) {
        trust_writes.pop_front();
    }
}

void Agent::Impl::report_trust_reload(const std::string& what, const rules::TrustDiff& diff) {
    // What the kernel saw already but the loop did not poll yet: the write
    // that made this reload, whose event may still wait in the ring buffer.
    if (sensor) (void)sensor->poll(std::chrono::milliseconds(0));
    const std::vector<std::string> domain = trusted_paths(what);
    TrustChange change;
    change.stage = "reload";
    change.what = what;
    const Event* last = nullptr;
    for (auto write = trust_writes.begin(); write != trust_writes.end();) {
        const auto& written = std::get<TrustChange>(write->data);
        if (written.paths.empty() || !in_domain(written.paths.front(), domain)) {
            ++write;
            continue;
        }
        if (std::find(change.paths.begin(), change.paths.end(), written.paths.front()) ==
            change.paths.end()) {
            change.paths.push_back(written.paths.front());
        }
        last_trust_writer = *write;
        last = &*last_trust_writer;
        write = trust_writes.erase(write);
    }
    if (!last && diff.empty()) return;  // nothing written, nothing changed
    Event event;
    event.ts_ns = monotonic_ns();
    if (last) {
        const auto& written = std::get<TrustChange>(last->data);
        event.task = last->task;
        change.operation = written.operation;
        change.writer = written.writer;
        change.writer_detail = written.writer_detail;
        change.exe = written.exe;
        change.cmdline = written.cmdline;
    } else {
        // Changed by a write the kernel did not see (a relative path, an
        // editor's rename from elsewhere, a change before the agent ran).
        event.task.pid = event.task.tid = static_cast<uint32_t>(getpid());
        event.task.comm = "gpuguard";
        change.paths = domain;
        change.writer = "unknown";
    }
    change.allowlist_added = diff.allowlist_added;
    change.actions_lowered = diff.actions_lowered;
    change.rules_disabled = diff.rules_disabled;
    change.other_changes = diff.other_changes;
    const std::string said = describe_trust_change(event.task, change);
    if (diff.widens()) {
        logger("agent")->warn("{}", said);
    } else {
        logger("agent")->info("{}", said);
    }
    event.data = std::move(change);
    on_event(event);
}

void Agent::config_reloaded(const std::vector<ConfigChange>& changes) {
    rules::TrustDiff diff;
    for (const auto& change : changes) {
        const std::string line = change.key + ": " + change.old_value + " -> " + change.new_value;
        // Dry run on: every action the agent would take is only reported.
        if (change.key == "enforcement.dry_run" && change.new_value == "true") {
            diff.actions_lowered.push_back(line);
        } else {
            diff.other_changes.push_back(line);
        }
    }
    std::lock_guard lock(impl_->mutex);
    impl_->report_trust_reload("config", diff);
}

}  // namespace gpuguard::agent
