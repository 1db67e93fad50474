// Enforcer: turns a Detection's action into effect and reports every
// decision as an EnforcementOutcome (taken, withheld, failed, dry run).
//
// Actions: kill (SIGTERM, grace period, SIGKILL, through a pidfd checked
// against the process start time), kill_now (register the executable for
// the in-kernel kill, SIGKILL the running process), block_ip (nftables or
// the cgroup/connect fallback), deny_gpu (cgroup/dev or BPF LSM), pause and
// resume (SIGSTOP/SIGCONT). "alert" and "" are not actions: no outcome.
//
// Safety, checked before anything is signalled: never pid 1, kernel
// threads, the agent itself or its parent chain, nor a process the
// allowlist names (user, executable glob, cgroup glob); global dry_run; a
// rate limit on actions per minute. Each refusal is an outcome "withheld"
// with its reason.
//
// Threading: enforce() blocks up to the grace period (plus the SIGKILL
// confirmation); call it from a worker, not from the event loop.
// EnforcerWorker is such a worker. One Enforcer is not for concurrent use.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gpuguard/common/detection.h"
#include "gpuguard/common/result.h"
#include "gpuguard/common/sha256.h"

namespace gpuguard::agent {

// The enforcer's part of the agent config (docs/enforcement.md, docs/configuration.md).
struct EnforcementAllowlistConfig {
    std::vector<std::string> users;        // names or numeric uids
    std::vector<std::string> executables;  // fnmatch globs on the exe path
    std::vector<std::string> cgroups;      // fnmatch globs on the cgroup v2 path
};

struct EnforcementConfig {
    bool dry_run = false;                  // decide and report, never act
    uint32_t grace_period_ms = 5000;       // SIGTERM -> SIGKILL
    uint32_t max_actions_per_minute = 30;  // 0 = unlimited
    std::string kill_scope = "process";    // process, process_group, cgroup
    EnforcementAllowlistConfig allowlist;
    uint32_t block_ttl_s = 3600;          // nftables element timeout; 0 = no timeout
    std::string connect_fallback_cgroup;  // cgroup v2 path for cgroup/connect4/6; "" = off
    // bpffs directory where in-kernel enforcement is pinned so it outlives
    // the agent (a crash, SIGKILL); "" = never pinned (docs/enforcement.md).
    std::string pin_path = "/sys/fs/bpf/gpuguard";
    bool keep_pinned_on_exit = false;  // a clean stop leaves the pins (and enforcement) too
};

// An executable's inode as the kernel numbers it (s_dev in kernel encoding).
struct FileIdentity {
    uint64_t dev = 0;
    uint64_t ino = 0;
    bool operator==(const FileIdentity&) const = default;
};

// Where block_ip goes: NftBlocker, or the cgroup/connect fallback.
class AddressBlocker {
  public:
    virtual ~AddressBlocker() = default;
    // Blocks `ip` for `ttl` (0 = the blocker's default). Idempotent.
    virtual Status block(const std::string& ip, std::chrono::seconds ttl) = 0;
    virtual std::string name() const = 0;  // "nftables", "cgroup_connect"
};

// The kernel's kill_now maps (Sensor implements it through an adapter).
class KnownBadRegistry {
  public:
    virtual ~KnownBadRegistry() = default;
    virtual Status add_known_bad_file(const FileIdentity& file, uint32_t rule_id) = 0;
    virtual Status add_known_bad_name(const std::string& comm, uint32_t rule_id) = 0;
};

// deny_gpu: cgroup/dev on a cgroup, or the LSM program for a process.
class GpuDenier {
  public:
    virtual ~GpuDenier() = default;
    // Denies every GPU device to the cgroup v2 path (relative to the mount, "/x/y").
    virtual Status deny_cgroup(const std::string& cgroup_path) = 0;
    // Denies GPU opens to one process wherever it runs (BPF LSM). kUnsupported
    // where the denier cannot (the default): deny_gpu then relies on the cgroup.
    virtual Status deny_process(uint32_t /*pid*/) {
        return fail(ErrorCode::kUnsupported, name() + " cannot deny a single process");
    }
    virtual std::string name() const = 0;  // "cgroup_device", "bpf_lsm"
};

struct EnforcerDependencies {
    AddressBlocker* blocker = nullptr;      // block_ip fails ("no blocker") without one
    KnownBadRegistry* known_bad = nullptr;  // kill_now without it: user-space SIGKILL only
    GpuDenier* gpu_denier = nullptr;        // deny_gpu fails without one
    std::function<void(const EnforcementOutcome&)> on_outcome;  // every outcome (journal, SIEM)
    std::function<uint64_t()> monotonic_ns;  // CLOCK_MONOTONIC by default; tests inject
    std::function<int64_t()> unix_ns;        // CLOCK_REALTIME by default
    std::string proc_root = "/proc";
    std::string cgroup2_root;  // "" = found in /proc/mounts
    uint32_t self_pid = 0;     // 0 = getpid(); the agent, protected with its parent chain
    std::string host_name;     // "" = gethostname(); part of every outcome id
};

enum class KillScope { kProcess, kProcessGroup, kCgroup };

// Parses "process", "process_group", "cgroup".
std::optional<KillScope> parse_kill_scope(const std::string& text);

struct KillOptions {
    std::optional<std::chrono::milliseconds> grace;  // nullopt = enforcement.grace_period_ms
    bool force = false;                              // SIGKILL at once, no SIGTERM
    std::optional<KillScope> scope;                  // nullopt = enforcement.kill_scope
    std::chrono::milliseconds confirm{5000};         // wait for death after SIGKILL
    bool count_toward_rate_limit = true;             // false for admin commands
};

class Enforcer {
  public:
    Enforcer(EnforcementConfig config, EnforcerDependencies dependencies = {});
    Enforcer(const Enforcer&) = delete;
    Enforcer& operator=(const Enforcer&) = delete;

    // Carries out detection.action ("kill", "kill_now", "block_ip", "deny_gpu",
    // "pause", "resume"); nullopt for "alert", "" and "none". An unknown
    // action is an outcome "failure". detection.dry_run forces a dry run.
    std::optional<EnforcementOutcome> enforce(const Detection& detection);

    // The low-level calls behind enforce(), for the CLI and the agent. The
    // Detection only supplies ids, rule and severity for the outcome; it may
    // be default-constructed.
    EnforcementOutcome kill(const DetectionProcess& target, const KillOptions& options,
                            const Detection& why = {});
    EnforcementOutcome kill_now(const DetectionProcess& target, const Detection& why = {});
    EnforcementOutcome pause(const DetectionProcess& target, const Detection& why = {});
    EnforcementOutcome resume(const DetectionProcess& target, const Detection& why = {});
    EnforcementOutcome block_ip(const DetectionPeer& peer, const DetectionProcess& process,
                                const Detection& why = {});
    EnforcementOutcome deny_gpu(const DetectionProcess& target, const Detection& why = {});

    // Why `pid` must never be acted on ("pid 1", "kernel thread", "the agent",
    // "allowlisted user root", ...), or "" when it may be. Reads /proc.
    std::string protected_reason(uint32_t pid) const;

    // An in-kernel kill_now the sensor reported afterwards (the kernel already
    // sent SIGKILL): outcome "success" (or "failure" when bpf_send_signal
    // failed, `signal_result` < 0) with `how` as the reason, reported through
    // on_outcome like every other outcome. `tag` is the registration's rule
    // tag: one this Enforcer made (kill_now()) names its detection's rule;
    // otherwise `rule_id` is used. Safe to call while another thread is in
    // enforce().
    EnforcementOutcome kernel_kill(const DetectionProcess& target, uint32_t tag,
                                   int32_t signal_result, const std::string& how,
                                   const std::string& rule_id = "");

    // "enf-<host>-<pid>-<start ns>": unique per agent instance, across hosts
    // and agents started in the same second; outcome ids append "-<n>".
    const std::string& id_prefix() const { return id_prefix_; }

    const EnforcementConfig& config() const { return config_; }
    void set_dry_run(bool dry_run) { config_.dry_run = dry_run; }

  private:
    struct Plan;
    EnforcementOutcome begin(const std::string& action, const DetectionProcess& target,
                             const Detection& why) const;
    EnforcementOutcome finish(EnforcementOutcome outcome, const Detection& why);
    // "" when the rate limit allows one more action now (and records it).
    std::string take_rate_token();
    std::string allowlist_reason(uint32_t uid, const std::string& exe,
                                 const std::string& cgroup) const;
    std::string cgroup_dir(const std::string& cgroup_path) const;
    EnforcementOutcome kill_group(EnforcementOutcome outcome, const std::vector<uint32_t>& pids,
                                  const std::string& cgroup_dir, const KillOptions& options,
                                  std::chrono::milliseconds grace, const Detection& why);
    EnforcementOutcome signal_stop(const std::string& action, int signo,
                                   const DetectionProcess& target, const Detection& why);

    EnforcementConfig config_;
    EnforcerDependencies deps_;
    KillScope default_scope_ = KillScope::kProcess;
    std::map<uint32_t, uint64_t> protected_chain_;  // pid -> start time (ns), the agent upwards
    std::set<uint32_t> allowed_uids_;
    std::deque<uint64_t> recent_actions_ns_;  // rate limit window
    std::atomic<uint64_t> sequence_{0};
    std::string id_prefix_;
    uint32_t next_rule_tag_ = 1;
    // kill_now registrations this Enforcer made: tag -> the detection behind
    // it, for kernel_kill() (another thread).
    std::mutex kill_now_mutex_;
    std::map<uint32_t, Detection> kill_now_registrations_;
    // Processes this Enforcer's kills ended, newest last (bounded): a second
    // detection's kill of one is already_exited, linked to the first.
    struct Ended {
        uint32_t pid = 0;
        uint64_t start_time_ns = 0;
        std::string detection_id;
    };
    mutable std::mutex ended_mutex_;  // finish() runs on kernel_kill()'s thread too
    std::deque<Ended> ended_;
    void remember_ended(const DetectionProcess& process, const std::string& detection_id);
    // The detection whose kill ended `target` (start time 0: the latest of its pid).
    std::optional<std::string> ended_by(const DetectionProcess& target) const;
    // An already_exited outcome for a process that is gone.
    EnforcementOutcome already_exited(EnforcementOutcome outcome, const Detection& why);
};

// Runs enforce() on its own thread, in submission order; outcomes go to
// EnforcerDependencies::on_outcome. Destroying it finishes the queue first.
class EnforcerWorker {
  public:
    explicit EnforcerWorker(Enforcer& enforcer);
    ~EnforcerWorker();
    EnforcerWorker(const EnforcerWorker&) = delete;
    EnforcerWorker& operator=(const EnforcerWorker&) = delete;

    void submit(Detection detection);
    // Blocks until every submitted detection was handled (tests, shutdown).
    void drain();

  private:
    void run();
    Enforcer& enforcer_;
    std::mutex mutex_;
    std::condition_variable wake_;
    std::condition_variable idle_;
    std::deque<Detection> queue_;
    bool busy_ = false;
    bool stopping_ = false;
    std::thread thread_;
};

// (dev, ino) of a file in the kernel's encoding (s_dev = major << 20 | minor).
Result<FileIdentity> file_identity(const std::string& path);

// Lowercase hex sha256 of a file's contents, streamed. kIo when unreadable:
// the one in common, named here too.
using gpuguard::sha256_file;

// The files among `candidates` whose sha256 is in `hashes` (lowercase hex),
// with their identities: how sha256 registrations become kill_now inode keys.
// Unreadable candidates are skipped.
std::vector<std::pair<std::string, FileIdentity>> resolve_sha256(
    const std::set<std::string>& hashes, const std::vector<std::string>& candidates);

}  // namespace gpuguard::agent
