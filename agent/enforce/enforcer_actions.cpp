// The Enforcer's actions other than kill: kill_now (the in-kernel kill's
// registration and the user-space SIGKILL), pause and resume, block_ip,
// deny_gpu; the worker thread; executable identities for kill_now.
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
#include "gpuguard/enforce/enforcer.h"
#include "gpuguard/state/process_handle.h"

namespace gpuguard::agent {
namespace {

using std::chrono::milliseconds;

bool is_unsafe_address(const std::string& ip) {
    in_addr v4{};
    in6_addr v6{};
    if (inet_pton(AF_INET, ip.c_str(), &v4) == 1) {
        const uint32_t host = ntohl(v4.s_addr);
        return (host >> 24) == 127 || host == 0 || host == 0xffffffffu;
    }
    if (inet_pton(AF_INET6, ip.c_str(), &v6) == 1) {
        return IN6_IS_ADDR_LOOPBACK(&v6) || IN6_IS_ADDR_UNSPECIFIED(&v6);
    }
    return false;
}

}  // namespace

EnforcementOutcome Enforcer::kill_now(const DetectionProcess& target, const Detection& why) {
    auto outcome = begin("kill_now", target, why);
    if (const auto reason = protected_reason(target.pid); !reason.empty()) {
        outcome.outcome = "withheld";
        outcome.reason = reason;
        return finish(std::move(outcome), why);
    }
    if (target.start_time_ns != 0 && ended_by(target)) return already_exited(outcome, why);
    auto handle = ProcessHandle::open(target.pid, target.start_time_ns, deps_.proc_root);
    if (!handle) {
        if (handle.error().code == ErrorCode::kNotFound || ended_by(target)) {
            return already_exited(outcome, why);
        }
        outcome.outcome =
            handle.error().code == ErrorCode::kInvalidArgument ? "withheld" : "failure";
        outcome.reason = handle.error().message;
        return finish(std::move(outcome), why);
    }
    if (outcome.process.start_time_ns == 0) {
        outcome.process.start_time_ns = handle->stat().start_time_ns;
    }
    // /proc/PID/exe resolves to the very inode that runs, even when deleted or replaced.
    auto file = file_identity(deps_.proc_root + "/" + std::to_string(target.pid) + "/exe");
    if (config_.dry_run) {
        outcome.outcome = "dry_run";
        outcome.reason = "would register the executable for the in-kernel kill and SIGKILL";
        return finish(std::move(outcome), why);
    }
    if (const auto reason = take_rate_token(); !reason.empty()) {
        outcome.outcome = "withheld";
        outcome.reason = reason;
        return finish(std::move(outcome), why);
    }
    std::string registered;
    if (deps_.known_bad && file) {
        const uint32_t tag = next_rule_tag_++;
        {
            Detection registration;
            registration.id = why.id;
            registration.rule_id = why.rule_id;
            registration.severity = why.severity;
            std::lock_guard lock(kill_now_mutex_);
            kill_now_registrations_[tag] = std::move(registration);
        }
        if (auto added = deps_.known_bad->add_known_bad_file(*file, tag); added) {
            registered = "executable " + std::to_string(file->dev) + ":" +
                         std::to_string(file->ino) + " registered for the in-kernel kill; ";
        } else {
            registered = "registering the executable failed (" + added.error().message + "); ";
        }
    }
    if (auto sent = handle->signal(SIGKILL); !sent && sent.error().code != ErrorCode::kNotFound) {
        outcome.outcome = "failure";
        outcome.reason = registered + sent.error().message;
        return finish(std::move(outcome), why);
    }
    const bool dead = handle->wait_exit(milliseconds(5000));
    outcome.outcome = dead ? "success" : "failure";
    outcome.reason = registered + (dead ? "SIGKILL" : "still alive 5 s after SIGKILL");
    return finish(std::move(outcome), why);
}

EnforcementOutcome Enforcer::kernel_kill(const DetectionProcess& target, uint32_t tag,
                                         int32_t signal_result, const std::string& how,
                                         const std::string& rule_id) {
    Detection why;
    {
        std::lock_guard lock(kill_now_mutex_);
        if (const auto found = kill_now_registrations_.find(tag);
            found != kill_now_registrations_.end()) {
            why = found->second;
        }
    }
    if (why.rule_id.empty()) {
        why.rule_id = rule_id;
        why.severity = Severity::kCritical;
    }
    EnforcementOutcome outcome;
    outcome.detection_id = why.id;
    outcome.rule_id = why.rule_id;
    outcome.action = "kill_now";
    outcome.severity = why.rule_id.empty() ? Severity::kNotice : why.severity;
    outcome.process = target;
    outcome.outcome = signal_result == 0 ? "success" : "failure";
    outcome.reason = signal_result == 0
                         ? how
                         : how + ": bpf_send_signal failed: " + std::strerror(-signal_result);
    return finish(std::move(outcome), why);
}

EnforcementOutcome Enforcer::signal_stop(const std::string& action, int signo,
                                         const DetectionProcess& target, const Detection& why) {
    auto outcome = begin(action, target, why);
    const auto done = [&](const char* result, std::string reason) {
        outcome.outcome = result;
        outcome.reason = std::move(reason);
        return finish(std::move(outcome), why);
    };
    if (const auto reason = protected_reason(target.pid); !reason.empty()) {
        return done("withheld", reason);
    }
    auto handle = ProcessHandle::open(target.pid, target.start_time_ns, deps_.proc_root);
    if (!handle) {
        return done(handle.error().code == ErrorCode::kInvalidArgument ? "withheld" : "failure",
                    handle.error().message);
    }
    const char* name = signo == SIGSTOP ? "SIGSTOP" : "SIGCONT";
    if (config_.dry_run) return done("dry_run", std::string("would send ") + name);
    // Resuming undoes an action: it is never rate limited.
    if (signo == SIGSTOP) {
        if (const auto reason = take_rate_token(); !reason.empty()) return done("withheld", reason);
    }
    if (auto sent = handle->signal(signo); !sent) return done("failure", sent.error().message);
    // Confirm through /proc: stopped is 'T', resumed anything else.
    for (int i = 0; i < 100; ++i) {
        auto stat = read_proc_stat(target.pid, deps_.proc_root);
        if (!stat) return done("failure", "process exited");
        const bool stopped = stat->state == 'T';
        if (stopped == (signo == SIGSTOP)) return done("success", name);
        usleep(2000);
    }
    return done("failure", std::string(name) + " sent but the state did not change");
}

EnforcementOutcome Enforcer::pause(const DetectionProcess& target, const Detection& why) {
    return signal_stop("pause", SIGSTOP, target, why);
}

EnforcementOutcome Enforcer::resume(const DetectionProcess& target, const Detection& why) {
    return signal_stop("resume", SIGCONT, target, why);
}

EnforcementOutcome Enforcer::block_ip(const DetectionPeer& peer, const DetectionProcess& process,
                                      const Detection& why) {
    auto outcome = begin("block_ip", process, why);
    outcome.peer = peer;
    const auto done = [&](const char* result, std::string reason) {
        outcome.outcome = result;
        outcome.reason = std::move(reason);
        return finish(std::move(outcome), why);
    };
    in6_addr parsed{};
    if (peer.ip.empty() || (inet_pton(AF_INET, peer.ip.c_str(), &parsed) != 1 &&
                            inet_pton(AF_INET6, peer.ip.c_str(), &parsed) != 1)) {
        return done("failure", "no IP address to block ('" + peer.ip + "')");
    }
    if (is_unsafe_address(peer.ip)) {
        return done("withheld", peer.ip + " is a loopback/unspecified/broadcast address");
    }
    if (process.pid != 0) {
        if (auto facts = read_proc_facts(process.pid, deps_.proc_root); facts) {
            if (auto reason = allowlist_reason(facts->uid, facts->executable, facts->cgroup_path);
                !reason.empty()) {
                return done("withheld", reason);
            }
        }
    }
    const std::string via = deps_.blocker ? deps_.blocker->name() : "no blocker";
    if (config_.dry_run) return done("dry_run", "would block " + peer.ip + " (" + via + ")");
    if (!deps_.blocker) return done("failure", "no address blocker configured");
    if (const auto reason = take_rate_token(); !reason.empty()) return done("withheld", reason);
    const auto ttl = std::chrono::seconds(config_.block_ttl_s);
    if (auto blocked = deps_.blocker->block(peer.ip, ttl); !blocked) {
        return done("failure", blocked.error().message);
    }
    return done("success", "blocked " + peer.ip + " via " + via +
                               (ttl.count() ? " for " + std::to_string(ttl.count()) + " s" : ""));
}

EnforcementOutcome Enforcer::deny_gpu(const DetectionProcess& target, const Detection& why) {
    auto outcome = begin("deny_gpu", target, why);
    const auto done = [&](const char* result, std::string reason) {
        outcome.outcome = result;
        outcome.reason = std::move(reason);
        return finish(std::move(outcome), why);
    };
    if (const auto reason = protected_reason(target.pid); !reason.empty()) {
        return done("withheld", reason);
    }
    auto facts = read_proc_facts(target.pid, deps_.proc_root);
    const std::string path = facts ? facts->cgroup_path : target.cgroup_path;
    if (path.empty() || path == "/") {
        return done("withheld",
                    "the process is in the root cgroup: denying it would deny the host");
    }
    if (auto self = read_proc_facts(deps_.self_pid, deps_.proc_root);
        self && self->cgroup_path == path) {
        return done("withheld", "cgroup " + path + " holds the agent");
    }
    if (auto init = read_proc_facts(1, deps_.proc_root); init && init->cgroup_path == path) {
        return done("withheld", "cgroup " + path + " holds pid 1");
    }
    outcome.process.cgroup_path = path;
    const std::string via = deps_.gpu_denier ? deps_.gpu_denier->name() : "no denier";
    if (config_.dry_run) return done("dry_run", "would deny GPUs to cgroup " + path);
    if (!deps_.gpu_denier) return done("failure", "no GPU denier (cgroup/dev) available");
    if (const auto reason = take_rate_token(); !reason.empty()) return done("withheld", reason);
    if (auto denied = deps_.gpu_denier->deny_cgroup(path); !denied) {
        return done("failure", denied.error().message);
    }
    std::string reason = "GPU devices denied to cgroup " + path + " via " + via;
    // Where the denier can (BPF LSM), the process itself too: it stays
    // denied if it moves to another cgroup.
    if (auto process = deps_.gpu_denier->deny_process(target.pid); process) {
        reason += "; pid " + std::to_string(target.pid) + " denied in the LSM";
    } else if (process.error().code != ErrorCode::kUnsupported) {
        reason += "; per-process deny failed: " + process.error().message;
    }
    return done("success", reason);
}

EnforcerWorker::EnforcerWorker(Enforcer& enforcer)
    : enforcer_(enforcer), thread_([this] { run(); }) {}

EnforcerWorker::~EnforcerWorker() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
}

void EnforcerWorker::submit(Detection detection) {
    {
        std::lock_guard lock(mutex_);
        queue_.push_back(std::move(detection));
    }
    wake_.notify_one();
}

void EnforcerWorker::drain() {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [this] { return queue_.empty() && !busy_; });
}

void EnforcerWorker::run() {
    std::unique_lock lock(mutex_);
    for (;;) {
        wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, and the queue is done
        Detection detection = std::move(queue_.front());
        queue_.pop_front();
        busy_ = true;
        lock.unlock();
        (void)enforcer_.enforce(detection);
        lock.lock();
        busy_ = false;
        if (queue_.empty()) idle_.notify_all();
    }
}

Result<FileIdentity> file_identity(const std::string& path) {
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) {
        const int err = errno;
        return fail(err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo,
                    "stat " + path + ": " + std::strerror(err), err);
    }
    // The kernel's s_dev: MAJOR << 20 | MINOR (user space packs them differently).
    const uint64_t dev = (static_cast<uint64_t>(major(st.st_dev)) << 20) | minor(st.st_dev);
    return FileIdentity{dev, static_cast<uint64_t>(st.st_ino)};
}

std::vector<std::pair<std::string, FileIdentity>> resolve_sha256(
    const std::set<std::string>& hashes, const std::vector<std::string>& candidates) {
    std::vector<std::pair<std::string, FileIdentity>> found;
    for (const auto& path : candidates) {
        auto identity = file_identity(path);
        if (!identity) continue;
        auto hash = sha256_file(path);
        if (hash && hashes.contains(*hash)) found.emplace_back(path, *identity);
    }
    return found;
}

}  // namespace gpuguard::agent
