// Enforcer: the safety checks every action passes (pid 1, kernel threads,
// the agent and its parent chain, the allowlist, dry run, the rate limit)
// and enforce(), which turns a Detection's action into one and kills;
// the other actions are enforcer_actions.cpp.
#include "gpuguard/enforce/enforcer.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <arpa/inet.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "gpuguard/common/clock.h"
#include "gpuguard/common/logging.h"
#include "gpuguard/state/proc_listing.h"
#include "gpuguard/state/process_handle.h"

namespace gpuguard::agent {
namespace {

using std::chrono::milliseconds;

std::string seconds_text(milliseconds duration) {
    if (duration.count() % 1000 == 0) return std::to_string(duration.count() / 1000) + " s";
    return std::to_string(duration.count()) + " ms";
}

// Pids whose process group is `pgrp`, from one /proc sweep.
std::vector<uint32_t> process_group_members(int32_t pgrp, const std::string& proc_root) {
    std::vector<uint32_t> pids;
    // getdents64: a member a preloaded library hides from readdir is still killed.
    auto listed = list_proc_pids(proc_root);
    if (!listed) return pids;
    for (const uint32_t pid : *listed) {
        auto stat = read_proc_stat(pid, proc_root);
        if (stat && stat->pgrp == pgrp) pids.push_back(pid);
    }
    return pids;
}

}  // namespace

std::optional<KillScope> parse_kill_scope(const std::string& text) {
    if (text == "process") return KillScope::kProcess;
    if (text == "process_group") return KillScope::kProcessGroup;
    if (text == "cgroup") return KillScope::kCgroup;
    return std::nullopt;
}

Enforcer::Enforcer(EnforcementConfig config, EnforcerDependencies dependencies)
    : config_(std::move(config)), deps_(std::move(dependencies)) {
    if (!deps_.monotonic_ns) deps_.monotonic_ns = &gpuguard::monotonic_ns;
    if (!deps_.unix_ns) deps_.unix_ns = &gpuguard::unix_now_ns;
    if (deps_.self_pid == 0) deps_.self_pid = static_cast<uint32_t>(getpid());
    if (deps_.cgroup2_root.empty()) deps_.cgroup2_root = find_cgroup2_mount();
    default_scope_ = parse_kill_scope(config_.kill_scope).value_or(KillScope::kProcess);
    if (deps_.host_name.empty()) {
        char host[256] = {};
        gethostname(host, sizeof(host) - 1);
        deps_.host_name = host[0] ? host : "localhost";
    }
    // Host, pid and start time in ns: agents on cloned hosts, or restarted
    // within the same second, never hand out the same id.
    id_prefix_ = "enf-" + deps_.host_name + "-" + std::to_string(deps_.self_pid) + "-" +
                 std::to_string(deps_.unix_ns());
    // The agent and every ancestor up to (not including) pid 1, which is protected anyway.
    for (uint32_t pid = deps_.self_pid; pid > 1 && protected_chain_.size() < 64;) {
        auto stat = read_proc_stat(pid, deps_.proc_root);
        if (!stat) break;
        protected_chain_[pid] = stat->start_time_ns;
        pid = stat->ppid;
    }
    for (const auto& user : config_.allowlist.users) {
        char* end = nullptr;
        const unsigned long uid = std::strtoul(user.c_str(), &end, 10);
        if (!user.empty() && end && *end == '\0') {
            allowed_uids_.insert(static_cast<uint32_t>(uid));
        } else if (const passwd* entry = getpwnam(user.c_str())) {
            allowed_uids_.insert(entry->pw_uid);
        } else {
            logger("enforcer")
                ->warn("enforcement.allowlist.users: no user '{}' on this host", user);
        }
    }
}

EnforcementOutcome Enforcer::begin(const std::string& action, const DetectionProcess& target,
                                   const Detection& why) const {
    EnforcementOutcome outcome;
    outcome.detection_id = why.id;
    outcome.rule_id = why.rule_id;
    outcome.action = action;
    outcome.severity = why.rule_id.empty() ? Severity::kNotice : why.severity;
    outcome.process = target;
    if (outcome.process.comm.empty() && target.pid != 0) {
        if (auto stat = read_proc_stat(target.pid, deps_.proc_root)) {
            outcome.process.comm = stat->comm;
        }
    }
    return outcome;
}

void Enforcer::remember_ended(const DetectionProcess& process, const std::string& detection_id) {
    std::lock_guard lock(ended_mutex_);
    ended_.push_back(Ended{process.pid, process.start_time_ns, detection_id});
    if (ended_.size() > 1024) ended_.pop_front();
}

std::optional<std::string> Enforcer::ended_by(const DetectionProcess& target) const {
    std::lock_guard lock(ended_mutex_);
    for (auto it = ended_.rbegin(); it != ended_.rend(); ++it) {
        if (it->pid != target.pid) continue;
        if (target.start_time_ns != 0 && it->start_time_ns != 0 &&
            it->start_time_ns != target.start_time_ns) {
            continue;
        }
        return it->detection_id;
    }
    return std::nullopt;
}

EnforcementOutcome Enforcer::already_exited(EnforcementOutcome outcome, const Detection& why) {
    outcome.outcome = "already_exited";
    if (auto first = ended_by(outcome.process)) {
        outcome.linked_detection_id = *first;
        outcome.reason = "ended by the kill of detection " + *first;
    } else {
        outcome.reason = "the process had exited";
    }
    return finish(std::move(outcome), why);
}

EnforcementOutcome Enforcer::finish(EnforcementOutcome outcome, const Detection& why) {
    outcome.id = id_prefix_ + "-" + std::to_string(++sequence_);
    outcome.ts_ns = deps_.monotonic_ns();
    outcome.time_unix_ns = deps_.unix_ns();
    if (outcome.outcome == "success" && why.last_seen_ns != 0 &&
        why.last_seen_ns <= outcome.ts_ns) {
        outcome.latency_ns = outcome.ts_ns - why.last_seen_ns;
    }
    if (outcome.outcome == "success" &&
        (outcome.action == "kill" || outcome.action == "kill_now") && outcome.process.pid != 0) {
        remember_ended(outcome.process, why.id);
    }
    const auto log = logger("enforcer");
    const auto level = outcome.outcome == "failure"    ? spdlog::level::err
                       : outcome.outcome == "withheld" ? spdlog::level::warn
                                                       : spdlog::level::info;
    log->log(level, "{} pid {} ({}): {}: {}", outcome.action, outcome.process.pid,
             outcome.process.comm, outcome.outcome, outcome.reason);
    if (deps_.on_outcome) deps_.on_outcome(outcome);
    return outcome;
}

std::string Enforcer::take_rate_token() {
    if (config_.max_actions_per_minute == 0) return "";
    const uint64_t now = deps_.monotonic_ns();
    constexpr uint64_t kMinute = 60'000'000'000ull;
    while (!recent_actions_ns_.empty() && now - recent_actions_ns_.front() >= kMinute) {
        recent_actions_ns_.pop_front();
    }
    if (recent_actions_ns_.size() >= config_.max_actions_per_minute) {
        return "rate limit: " + std::to_string(config_.max_actions_per_minute) +
               " actions per minute reached (enforcement.max_actions_per_minute)";
    }
    recent_actions_ns_.push_back(now);
    return "";
}

std::string Enforcer::allowlist_reason(uint32_t uid, const std::string& exe,
                                       const std::string& cgroup) const {
    if (allowed_uids_.contains(uid)) return "allowlisted user (uid " + std::to_string(uid) + ")";
    for (const auto& glob : config_.allowlist.executables) {
        if (!exe.empty() && fnmatch(glob.c_str(), exe.c_str(), FNM_PATHNAME) == 0) {
            return "allowlisted executable " + exe + " (" + glob + ")";
        }
    }
    for (const auto& glob : config_.allowlist.cgroups) {
        if (!cgroup.empty() && fnmatch(glob.c_str(), cgroup.c_str(), 0) == 0) {
            return "allowlisted cgroup " + cgroup + " (" + glob + ")";
        }
    }
    return "";
}

std::string Enforcer::protected_reason(uint32_t pid) const {
    if (pid == 0) return "pid 0 is not a process";
    if (pid == 1) return "pid 1 (init) is never acted on";
    auto facts = read_proc_facts(pid, deps_.proc_root);
    if (!facts) return "";  // gone: nothing to protect; the caller finds out
    if (facts->stat.kernel_thread() || (facts->empty_cmdline && facts->stat.ppid == 2)) {
        return "kernel thread " + facts->stat.comm + " is never acted on";
    }
    if (pid == deps_.self_pid) return "the agent itself is never acted on";
    if (const auto it = protected_chain_.find(pid);
        it != protected_chain_.end() && it->second == facts->stat.start_time_ns) {
        return "an ancestor of the agent is never acted on";
    }
    return allowlist_reason(facts->uid, facts->executable, facts->cgroup_path);
}

std::string Enforcer::cgroup_dir(const std::string& cgroup_path) const {
    if (deps_.cgroup2_root.empty() || cgroup_path.empty()) return "";
    return deps_.cgroup2_root + (cgroup_path.front() == '/' ? "" : "/") + cgroup_path;
}

std::optional<EnforcementOutcome> Enforcer::enforce(const Detection& detection) {
    const std::string& action = detection.action;
    if (action.empty() || action == "alert" || action == "none") return std::nullopt;
    const bool saved_dry_run = config_.dry_run;
    if (detection.dry_run) config_.dry_run = true;
    std::optional<EnforcementOutcome> outcome;
    if (action == "kill") {
        outcome = kill(detection.process, KillOptions{}, detection);
    } else if (action == "kill_now") {
        outcome = kill_now(detection.process, detection);
    } else if (action == "pause") {
        outcome = pause(detection.process, detection);
    } else if (action == "resume") {
        outcome = resume(detection.process, detection);
    } else if (action == "block_ip") {
        outcome = block_ip(detection.peer.value_or(DetectionPeer{}), detection.process, detection);
    } else if (action == "deny_gpu") {
        outcome = deny_gpu(detection.process, detection);
    } else {
        auto failed = begin(action, detection.process, detection);
        failed.outcome = "failure";
        failed.reason = "unknown action '" + action + "'";
        outcome = finish(std::move(failed), detection);
    }
    config_.dry_run = saved_dry_run;
    return outcome;
}

EnforcementOutcome Enforcer::kill(const DetectionProcess& target, const KillOptions& options,
                                  const Detection& why) {
    auto outcome = begin("kill", target, why);
    const milliseconds grace = options.grace.value_or(milliseconds(config_.grace_period_ms));
    const KillScope scope = options.scope.value_or(default_scope_);
    const auto withhold = [&](std::string reason) {
        outcome.outcome = "withheld";
        outcome.reason = std::move(reason);
        return finish(std::move(outcome), why);
    };
    const auto failed = [&](std::string reason) {
        outcome.outcome = "failure";
        outcome.reason = std::move(reason);
        return finish(std::move(outcome), why);
    };

    if (const auto reason = protected_reason(target.pid); !reason.empty()) return withhold(reason);
    if (target.start_time_ns != 0 && ended_by(target)) return already_exited(outcome, why);
    auto handle = ProcessHandle::open(target.pid, target.start_time_ns, deps_.proc_root);
    if (!handle) {
        if (handle.error().code == ErrorCode::kNotFound) return already_exited(outcome, why);
        // A recycled pid is a safety refusal, not an error: the named process is gone.
        if (handle.error().code == ErrorCode::kInvalidArgument) {
            if (ended_by(target)) return already_exited(outcome, why);
            return withhold(handle.error().message + ": not signalled");
        }
        return failed(handle.error().message);
    }
    if (outcome.process.comm.empty()) outcome.process.comm = handle->stat().comm;
    if (outcome.process.start_time_ns == 0) {
        outcome.process.start_time_ns = handle->stat().start_time_ns;
    }

    std::vector<uint32_t> group;
    std::string group_dir;
    if (scope == KillScope::kProcessGroup) {
        const int32_t pgrp = handle->stat().pgrp;
        auto self = read_proc_stat(deps_.self_pid, deps_.proc_root);
        if (pgrp <= 1 || (self && self->pgrp == pgrp)) {
            return withhold("process group " + std::to_string(pgrp) + " holds the agent or init");
        }
        group = process_group_members(pgrp, deps_.proc_root);
    } else if (scope == KillScope::kCgroup) {
        auto facts = read_proc_facts(target.pid, deps_.proc_root);
        const std::string path = facts ? facts->cgroup_path : target.cgroup_path;
        if (path.empty() || path == "/") {
            return withhold("the root cgroup is never acted on as a whole");
        }
        group_dir = cgroup_dir(path);
        if (group_dir.empty()) return failed("no cgroup v2 mount: cannot take cgroup " + path);
        auto members = read_cgroup_procs(group_dir);
        if (!members) return failed(members.error().message);
        group = std::move(*members);
    }
    for (uint32_t member : group) {
        if (member == target.pid) continue;
        if (const auto reason = protected_reason(member); !reason.empty()) {
            return withhold("group member " + std::to_string(member) + ": " + reason);
        }
    }

    if (config_.dry_run) {
        outcome.outcome = "dry_run";
        outcome.reason =
            options.force ? "would SIGKILL" : "would SIGTERM, SIGKILL after " + seconds_text(grace);
        if (!group.empty()) outcome.reason += " (" + std::to_string(group.size()) + " processes)";
        return finish(std::move(outcome), why);
    }
    if (options.count_toward_rate_limit) {
        if (const auto reason = take_rate_token(); !reason.empty()) return withhold(reason);
    }
    if (!group.empty()) {
        return kill_group(std::move(outcome), group, group_dir, options, grace, why);
    }

    if (!options.force) {
        if (auto sent = handle->signal(SIGTERM); !sent) {
            if (sent.error().code == ErrorCode::kNotFound) return already_exited(outcome, why);
            return failed(sent.error().message);
        }
        if (handle->wait_exit(grace)) {
            outcome.outcome = "success";
            outcome.reason = "exited on SIGTERM";
            return finish(std::move(outcome), why);
        }
    }
    if (auto sent = handle->signal(SIGKILL); !sent && sent.error().code != ErrorCode::kNotFound) {
        return failed(sent.error().message);
    }
    if (!handle->wait_exit(options.confirm)) {
        return failed("still alive " + seconds_text(options.confirm) +
                      " after SIGKILL (uninterruptible sleep?)");
    }
    outcome.outcome = "success";
    outcome.reason = options.force ? "SIGKILL" : "SIGKILL after " + seconds_text(grace);
    return finish(std::move(outcome), why);
}

EnforcementOutcome Enforcer::kill_group(EnforcementOutcome outcome,
                                        const std::vector<uint32_t>& pids,
                                        const std::string& group_dir, const KillOptions& options,
                                        milliseconds grace, const Detection& why) {
    std::vector<ProcessHandle> handles;
    for (uint32_t pid : pids) {
        auto handle = ProcessHandle::open(pid, 0, deps_.proc_root);
        if (handle) handles.push_back(std::move(*handle));
    }
    const auto all_exited = [&](milliseconds timeout) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        for (const auto& handle : handles) {
            const auto left = std::chrono::duration_cast<milliseconds>(
                deadline - std::chrono::steady_clock::now());
            if (!handle.wait_exit(std::max(left, milliseconds(0)))) return false;
        }
        return true;
    };
    const std::string what = std::to_string(handles.size()) + " processes of " +
                             (group_dir.empty() ? "the process group" : "cgroup " + group_dir);
    if (!options.force) {
        for (const auto& handle : handles) (void)handle.signal(SIGTERM);
        if (all_exited(grace)) {
            outcome.outcome = "success";
            outcome.reason = what + " exited on SIGTERM";
            return finish(std::move(outcome), why);
        }
    }
    bool used_cgroup_kill = false;
    if (!group_dir.empty()) {
        // cgroup.kill (5.14+) also catches processes forked since the listing.
        std::ofstream kill_file(group_dir + "/cgroup.kill");
        if (kill_file) {
            kill_file << "1";
            kill_file.flush();
            used_cgroup_kill = kill_file.good();
        }
    }
    if (!used_cgroup_kill) {
        for (const auto& handle : handles) (void)handle.signal(SIGKILL);
    }
    if (!all_exited(options.confirm)) {
        outcome.outcome = "failure";
        outcome.reason = what + ": some still alive after SIGKILL";
        return finish(std::move(outcome), why);
    }
    outcome.outcome = "success";
    outcome.reason = what + ": " + (used_cgroup_kill ? "cgroup.kill" : "SIGKILL") +
                     (options.force ? "" : " after " + seconds_text(grace));
    return finish(std::move(outcome), why);
}

}  // namespace gpuguard::agent
