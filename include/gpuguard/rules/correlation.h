// Correlation rules: the data the correlator (gpuguard/detect/correlator.h) judges a
// process by. Each rule names conditions over one process's evidence —
// signature matches by field, whether it holds a GPU, where its executable
// lives, whether its name disguises it, GPU telemetry over a window, who runs
// it — and how the evidence's confidences combine. All conditions of a rule
// must hold. The built-in rules (rules/correlation-rules.yaml) are embedded;
// files given with --rules or `correlation.files` replace or extend them by
// id. Format and examples: docs/rules.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuguard/common/result.h"
#include "gpuguard/common/severity.h"
#include "gpuguard/rules/window_conditions.h"

namespace gpuguard::rules {

// Where a piece of signature evidence came from.
enum class EvidenceField {
    kProcess,  // comm or executable path
    kCmdline,
    kConfig,   // content of a file the process uses
    kDomain,   // a DNS name it resolved or connected to
    kPayload,  // bytes it sent or received (stratum)
    kPort,     // a destination port it connected to
    kYara,     // a YARA rule on its executable
};
const char* to_string(EvidenceField field);
std::optional<EvidenceField> parse_evidence_field(std::string_view name);

// Where an executable lives, for `exe_location`. The last three are the
// legitimate look-alikes of a temporary or deleted executable, recognised by
// path so that live and replay agree (docs/detections.md):
//   kAppImage          an AppImage's own mount, /tmp/.mount_NAME*/...
//   kExtractedRuntime  a runner a self-extracting runtime unpacked into a
//                      temporary directory: PyInstaller (_MEI*), Nuitka
//                      (onefile_*), staticx (staticx-*), Ollama's runners
//                      (ollama*/runners/...)
//   kPackageReplaced   "PATH (deleted)" where the process's package
//                      database owns PATH (`exe_package`, read by the agent
//                      from dpkg's lists when it saw the deletion): an
//                      upgrade replaced the file under a running daemon.
//                      /usr/local and /opt by themselves vouch for nothing.
// An executable in one of these is not also reported as kTmp or kDeleted.
// Locations are judged on the path with its spelling undone (normal_path:
// "//", "..", /proc/self/root); the agent records the resolved path of a
// symlinked exec in the event, so live and replay judge the same.
enum class ExeLocation {
    kTmp,
    kVarTmp,
    kDevShm,
    kDeleted,
    kMemfd,
    kAppImage,
    kExtractedRuntime,
    kPackageReplaced
};
const char* to_string(ExeLocation location);

// What makes a library the loader is told to take worse than unvouched,
// for `library_injection: [SIGN, ...]`:
//   kTemporary       it resolves into /tmp, /var/tmp or /dev/shm
//   kRecent          it (a directory: it or a shared library in it) changed
//                    at most 10 minutes before the environment was read
//   kOthersCanWrite  users other than root and its owner can write it or
//                    the directory holding it
//   kMinerSignature  its path matches a miner's process signature
enum class LibrarySign { kTemporary, kRecent, kOthersCanWrite, kMinerSignature };
const char* to_string(LibrarySign sign);

// The kinds of agent_tamper events a rule's `agent_tamper:` may name.
inline constexpr const char* kAgentTamperKinds[] = {"stop",        "signal", "bpf_command",
                                                    "pin_removed", "down",   "preloaded"};
// Which of the locations `exe` (a resolved /proc/PID/exe or exec filename) is
// in; `exe_package` is what owns a deleted exe's path ("" nothing).
// `look_alike_refused`: the agent checked what a look-alike location's name
// claims and found it untrue (ExeScan::location_check), so the path counts
// as the temporary (or deleted) one it is.
std::vector<ExeLocation> exe_locations(std::string_view exe, std::string_view exe_package = {},
                                       bool look_alike_refused = false);

// What a look-alike location's name claims, for the agent to check on the
// host before the name exempts anything: an AppImage's FUSE mount, or the
// unpack directory of a PyInstaller, Nuitka or staticx program or of an
// Ollama server's runners.
enum class LookAlike { kAppImage, kPyInstaller, kNuitka, kStaticx, kOllama };
const char* to_string(LookAlike kind);
struct LookAlikeClaim {
    LookAlike kind;
    std::string dir;  // the mount or unpack directory itself: "/tmp/_MEI1234"
};
// The claim `exe`'s path makes; none when it is in no look-alike location.
std::optional<LookAlikeClaim> look_alike_claim(std::string_view exe);

// Whether the absolute `path` (spelling undone) is in a temporary
// directory: /tmp, /var/tmp or /dev/shm, or below one.
bool temporary_path(std::string_view path);
// Whether it is below a legitimate look-alike of a temporary location: an
// AppImage's mount or what a self-extracting runtime unpacked (kAppImage,
// kExtractedRuntime). Their programs put these on LD_LIBRARY_PATH.
bool temporary_look_alike(std::string_view path);

struct SignatureCondition {
    std::vector<EvidenceField> fields;  // any of these; empty: any field
    std::vector<std::string> ids;       // globs over signature ids; empty: any
    std::vector<std::string> exclude;   // globs over signature ids
    double min_confidence = 0.0;        // of the signature
    bool matches(EvidenceField field, std::string_view id, double confidence) const;
};

enum class ContainerScope { kAny, kHost, kContainer };

struct ScopeCondition {
    std::vector<std::string> users;       // names or uids; empty: anyone
    std::vector<std::string> not_users;   // names or uids exempt
    std::vector<std::string> groups;      // primary group: names or gids; empty: any
    std::vector<std::string> not_groups;  // names or gids exempt
    ContainerScope containers = ContainerScope::kAny;
    // Globs over the container's id (and its "runtime://id" form): only
    // processes in a matching container are in scope. Empty: no filter.
    std::vector<std::string> container_ids;
    std::vector<std::string> not_container_ids;  // containers exempt (host processes never are)
    // Globs over the container's name where its runtime keeps one (docker,
    // podman, CRI-O; read on the live host, unknown in replay).
    std::vector<std::string> container_names;
    std::vector<std::string> not_container_names;
    // Globs over the container's image as its runtime names it
    // ("nvcr.io/nvidia/tritonserver:*"); host processes and containers
    // whose image is unknown match none.
    std::vector<std::string> container_images;
    std::vector<std::string> not_container_images;
    // Globs over the namespace of the pod the process runs in (from the
    // runtime's labels or the kubelet's pod directory); a process in no pod
    // matches none.
    std::vector<std::string> pod_namespaces;
    std::vector<std::string> not_pod_namespaces;
    // Globs over the executable's path, '*' not crossing '/'. An exempt path
    // exempts only while no YARA rule hits the executable.
    std::vector<std::string> exe_paths;
    std::vector<std::string> not_exe_paths;
    // Globs over the process name (comm) exempt: tools that only mention a
    // miner's options or URL (grep, an editor) are not running one.
    std::vector<std::string> not_comm;
};

// Every list key of a rule's `scope:` and the member it fills, in the order
// rule files write them: the reader, an override's additions, `gpuguard
// rules list` and the trust diff (the not_ lists) all walk this one table.
struct ScopeList {
    const char* key;
    std::vector<std::string> ScopeCondition::*member;
};
inline constexpr ScopeList kScopeLists[] = {
    {"users", &ScopeCondition::users},
    {"not_users", &ScopeCondition::not_users},
    {"groups", &ScopeCondition::groups},
    {"not_groups", &ScopeCondition::not_groups},
    {"container_ids", &ScopeCondition::container_ids},
    {"not_container_ids", &ScopeCondition::not_container_ids},
    {"container_names", &ScopeCondition::container_names},
    {"not_container_names", &ScopeCondition::not_container_names},
    {"container_images", &ScopeCondition::container_images},
    {"not_container_images", &ScopeCondition::not_container_images},
    {"pod_namespaces", &ScopeCondition::pod_namespaces},
    {"not_pod_namespaces", &ScopeCondition::not_pod_namespaces},
    {"exe_paths", &ScopeCondition::exe_paths},
    {"not_exe_paths", &ScopeCondition::not_exe_paths},
    {"not_comm", &ScopeCondition::not_comm}};

// Wall-clock window in a time zone: the condition holds while the event's
// time falls on one of `days` between `from` and `to` (local time). A window
// whose `to` is not after `from` runs past midnight: it belongs to the day it
// starts on.
struct TimeWindowCondition {
    std::vector<int> days;  // 0 = Sunday ... 6 = Saturday; empty: every day
    int from_minute = 0;    // minutes after local midnight
    int to_minute = 24 * 60;
    std::string time_zone = "UTC";  // IANA name, checked when the rule is loaded

    bool contains(int64_t unix_ns) const;
};

// When a kernel module load (a module_load event) counts, for `module_load`.
enum class ModuleLoadContext {
    kGpuProcess,      // a process holding a GPU was running on the host at the load
    kFlaggedLineage,  // the loader or one of its ancestors had a detection at warning or above
    kMinerOnHost,     // another process flagged by a rule of ATT&CK T1496 (a miner) was running
    kAny,             // every load
};
const char* to_string(ModuleLoadContext context);

// The process loaded a kernel module within the rule's window, in one of
// the contexts `when` lists. A load of one of `driver_modules` (globs over
// the module name) by one of `driver_loaders` (globs over the loader's
// comm) counts only under kFlaggedLineage: the GPU driver's own modules,
// which modprobe and udev load at boot and nvidia-modprobe when the first
// CUDA program starts (docs/detections.md).
struct ModuleLoadCondition {
    std::vector<ModuleLoadContext> when;
    std::vector<std::string> driver_modules;
    std::vector<std::string> driver_loaders;
};

// A change to the agent's trusted files (trust_change events) within the
// rule's window (docs/rules.md, `trust_change`).
struct TrustChangeCondition {
    // What the change did, any of: "allowlist_added", "action_lowered",
    // "rule_disabled"; "any": any write or reload, whatever it did.
    std::vector<std::string> changes;
    // Who made it, any of: "package_manager", "systemctl", "other",
    // "unknown" (no write seen); empty: anyone.
    std::vector<std::string> writers;
    // The writer, or a process of its parent chain, was flagged by a rule
    // other than a trust_change rule (at warning or above) when it wrote.
    bool flagged_writer = false;
};

enum class Combine { kMax, kNoisyOr };

struct CorrelationRule;

// Signals that need not hold but strengthen a detection when they do (a
// rule's `supporting:`). Each signal is a set of conditions as under
// `when:`; every signal that holds adds its evidence and `weight` to the
// detection's confidence (noisy-or), and once at least `min` hold the
// detection takes `severity` (when set). A rule's own conditions decide
// whether it fires; its supporting signals only how loudly.
struct SupportingSignals {
    std::vector<CorrelationRule> signals;  // conditions only; `name` names the signal
    double weight = 0.2;
    std::optional<Severity> severity;
    uint32_t min = 1;
};

// The keys a rule's `when:` (and each supporting signal) may set, one per
// condition. The detect room judges each with a class of its own
// (agent/detect/conditions/); a test holds the two lists together.
inline constexpr const char* kConditionKeys[] = {"gpu_held",
                                                 "signature",
                                                 "exe_location",
                                                 "disguised",
                                                 "known_bad_executable",
                                                 "memory_growth",
                                                 "sustained_utilization",
                                                 "sustained_cpu",
                                                 "gpu_unseen",
                                                 "unexplained_gpu_load",
                                                 "gpu_stack",
                                                 "unreadable",
                                                 "scope",
                                                 "gpu_memory_above",
                                                 "gpu_index_not_in",
                                                 "gpu_vendor_not_in",
                                                 "time_window",
                                                 "max_gpu_processes",
                                                 "gpu_outside_allocation",
                                                 "gpu_xid",
                                                 "gpu_pipe_mix",
                                                 "hash_rate_above_threshold",
                                                 "quiet_io",
                                                 "opaque_peer",
                                                 "mining_flow",
                                                 "pool_answered",
                                                 "hidden_from_proc",
                                                 "module_load",
                                                 "file_changed",
                                                 "library_injection",
                                                 "persistence_after_detection",
                                                 "agent_tamper",
                                                 "trust_change"};

// A site file's change to a rule known before it (built-in, or an earlier
// file's), so that a site does not copy a rule to tune it: what is set
// replaces the rule's own, and the scope's lists are added to its scope's
// (`containers` replaces). A rule file entry `{id, override: {...}}`.
struct RuleOverride {
    std::optional<bool> enabled;
    std::optional<bool> dry_run;
    std::optional<Severity> severity;
    std::optional<std::string> action;
    std::optional<std::chrono::seconds> window;
    std::optional<ScopeCondition> scope;
    bool scope_sets_containers = false;  // the override's scope names `containers`
};

struct CorrelationRule {
    std::string id;  // GG-CORR-NNNN for the built-in rules
    std::string name;
    std::string description;
    Severity severity = Severity::kWarning;
    std::string mitre_id;    // "T1496"
    std::string mitre_name;  // "Resource Hijacking"
    std::string mitre_tactic;
    // "alert", "kill", "kill_now", "block_ip", "deny_gpu", "pause", or
    // "from_signatures": the strongest action miner-rules.yaml sets on the
    // signatures that matched (alert when none).
    std::string action = "alert";
    std::chrono::seconds window{600};  // one detection per (process, rule) per window
    bool enabled = true;
    // The action is reported as a dry run (what it would do), whatever the
    // agent's enforcement.dry_run says.
    bool dry_run = false;

    // Conditions (all that are set must hold).
    std::optional<bool> gpu_held;
    std::optional<SignatureCondition> signature;
    std::vector<ExeLocation> exe_location;  // any of these
    bool disguised = false;  // comm names a benign program, the executable is a known one
    // The executable's sha256 (from its exe_scan) is in miner-rules.yaml's
    // known_bad.sha256.
    bool known_bad_executable = false;
    // A mining session of the process (a Stratum event) has an estimated hash
    // rate at or above miner-rules.yaml's hash_rate_threshold; never holds
    // when no file sets one.
    bool hash_rate_above_threshold = false;
    std::optional<MemoryGrowthCondition> memory_growth;
    std::optional<SustainedUtilizationCondition> sustained_utilization;
    std::optional<SustainedCpuCondition> sustained_cpu;
    // The GPU's own telemetry (NVML) has listed the process on a GPU for at
    // least this long while the sensor never saw it open one.
    std::optional<std::chrono::seconds> gpu_unseen;
    // The GPU's load that no known holder explains (judged per GPU).
    std::optional<UnexplainedGpuLoadCondition> unexplained_gpu_load;
    // The GPU software stack read at its first GPU use (gpu_libraries) is
    // one of these: "ml_framework", "graphics", "runtime_only",
    // "driver_only", "none".
    std::vector<std::string> gpu_stack;
    // The agent could not read what the process runs: "executable" (its
    // exe_scan failed for a reason other than the process being gone:
    // permission, the YARA size limit, an I/O error), "config" (a
    // configuration file it names that root was refused, or any whose read
    // failed). Any of those listed.
    std::vector<std::string> unreadable;
    std::optional<QuietIoCondition> quiet_io;
    std::optional<ScopeCondition> scope;
    // Guard policies: limits on what a (scoped) process may use.
    std::optional<uint64_t> gpu_memory_above;        // its GPU memory exceeds this many bytes
    std::vector<uint32_t> gpu_index_not_in;          // it holds a GPU whose index is not listed
    std::vector<std::string> gpu_vendor_not_in;      // it holds a GPU of a vendor not listed
    std::optional<TimeWindowCondition> time_window;  // only at these times
    // Its user runs more than this many GPU processes at once, and it is one
    // of those beyond the limit (counted in order of first GPU use).
    std::optional<uint32_t> max_gpu_processes;
    // Its Slurm job or pod was allocated GPUs and it holds one it was not
    // given ("outside"), or it is a pod's process given no GPU at all that
    // holds one ("none_given"); "" unset (docs/detections.md, "A GPU used
    // outside its allocation").
    std::string gpu_outside_allocation;
    // Its own GPU work raised at least this many NVIDIA Xids that NVIDIA's
    // catalogue puts down to the application (13, 31, 43: an engine
    // exception, a memory page fault, a stopped channel) within the rule's
    // window (gpu_fault events; docs/detections.md, "GPU faults").
    std::optional<uint32_t> gpu_xid;
    // The GPU's pipes over a window while it was the process's alone
    // (GpuPipeMixCondition; docs/detections.md, "The GPU's pipes").
    std::optional<GpuPipeMixCondition> gpu_pipe_mix;
    // It has an outbound connection nothing vouches for: to an address no
    // observed DNS answer named, whose first bytes sent were a TLS record or
    // no protocol gpuguard recognises (not HTTP, SSH or JSON-RPC); or to a
    // port a port signature lists (a miner's port), unless what it sent there
    // was a recognised protocol.
    bool opaque_peer = false;
    // One of its outbound connections has a mining session's shape (flow
    // events: long-lived, the peer pushing small messages unprompted every
    // few seconds to minutes, a few KB a minute), whatever it carries.
    std::optional<MiningFlowCondition> mining_flow;
    // The agent's own probe of one of its peers (verify.active; a
    // pool_probe event) was answered in a mining pool's form.
    bool pool_answered = false;
    // libc's readdir of /proc does not list the live process while the
    // kernel does (a hidden_process event: a preloaded library hooking
    // readdir hides it from ps and top).
    bool hidden_from_proc = false;
    // It loaded a kernel module (ModuleLoadCondition).
    std::optional<ModuleLoadCondition> module_load;
    // It wrote or renamed onto a watched file of one of these kinds
    // ("preload", "cron", "systemd", "shell_rc", "ssh_keys", "agent_pins",
    // "agent_config", "other"; file_change events) within the rule's window.
    std::vector<std::string> file_changed;
    // It holds a GPU and its environment at its first GPU use (a process_env
    // event) has an LD_PRELOAD library or LD_LIBRARY_PATH directory that
    // nothing vouches for (docs/detections.md, "Library injection"); with
    // `library_signs`, one that also shows any of these signs.
    bool library_injection = false;
    std::vector<LibrarySign> library_signs;
    // Another rule flagged it, and it, an ancestor or a descendant wrote
    // persistence (cron, systemd, shell_rc, ssh_keys file changes) after
    // that or within persistence_lookback before it.
    bool persistence_after_detection = false;
    // The process did one of these to the agent itself (agent_tamper events:
    // "stop", "signal", "bpf_command", "pin_removed", "down"); any when
    // several are listed.
    std::vector<std::string> agent_tamper;
    // It changed what the agent trusts (TrustChangeCondition).
    std::optional<TrustChangeCondition> trust_change;

    // Optional signals that raise confidence and severity.
    std::shared_ptr<const SupportingSignals> supporting;
    // Counter-signals (`counter:`, the same shape): what benign work shows
    // (an ML framework mapped). Each that holds cancels one supporting
    // signal that holds; with none left the detection takes `severity` (a
    // lower one, required) and its confidence loses `weight`; the evidence
    // names it ("counter: NAME").
    // A counter never stops a rule from firing: what an attacker can fake
    // (mapping a framework's library) lowers it to a notice at most.
    std::shared_ptr<const SupportingSignals> counter;

    // Confidence of a detection: `base` combined with the confidence of every
    // matching signature (kNoisyOr: 1 - (1-base) * prod(1-c); kMax: the
    // largest). Below `min_confidence` the rule does not fire.
    double base_confidence = 0.5;
    Combine combine = Combine::kNoisyOr;
    double min_confidence = 0.0;

    std::string source;  // "file:line"
    // "file:line" of each override applied to it, in order.
    std::vector<std::string> overridden_at;
    // Set for an override entry: no rule of its own, a change to the rule
    // of its id that load_correlation_rules applies.
    std::shared_ptr<const RuleOverride> override_of;
};

// `override` applied to `rule` (its id's rule); "" when it applied, else
// why not ("severity info is below its counter's notice").
std::string apply_override(const RuleOverride& override, CorrelationRule& rule);

// Guard mode's priorities (a `priority_guard:` section of a guard policy
// file): when a GPU's utilisation exceeds `pause_above_percent`, the
// processes on it with a lower priority than the highest one there are
// paused (SIGSTOP), and resumed (SIGCONT) once it falls below
// `resume_below_percent`, once no higher-priority process remains on it, or
// after `max_pause` (then not paused again for `cooldown`).
struct PriorityPattern {
    // Globs; every list that is set must match (any of its globs).
    std::vector<std::string> comm;
    std::vector<std::string> exe;
    std::vector<std::string> cmdline;  // over the command line joined by spaces
    std::vector<std::string> users;    // names or uids
    int priority = 0;
    std::string source;  // "file:line"

    bool matches(std::string_view comm_value, std::string_view exe_value,
                 std::string_view cmdline_value, uint32_t uid, std::string_view user) const;
};

struct PriorityPolicy {
    double pause_above_percent = 80.0;
    double resume_below_percent = 60.0;  // below pause_above_percent (hysteresis)
    std::chrono::seconds max_pause{600};
    std::chrono::seconds cooldown{300};
    int default_priority = 0;                // of processes no pattern matches
    bool dry_run = false;                    // report what it would do, send no signal
    std::vector<PriorityPattern> processes;  // first match wins
    std::string source;                      // "file:line" of the section

    // The first matching pattern's priority, else default_priority.
    int priority_of(std::string_view comm, std::string_view exe, std::string_view cmdline,
                    uint32_t uid, std::string_view user) const;
};

// Parses the `priority_guard:` section of one guard policy file (nullopt
// when it has none). Problems as parse_correlation_rules reports them.
Result<std::optional<PriorityPolicy>> parse_priority_policy(std::string_view yaml,
                                                            const std::string& source);

// The priority policy of the files, in order: a later file's section
// replaces an earlier one. nullopt when none has one (guard priorities off).
Result<std::optional<PriorityPolicy>> load_priority_policy(const std::vector<std::string>& files);

// Correlation rules and the priority policy of the same files, read once:
// what a hot reload of `rules.correlation_files` applies.
struct GuardPolicies {
    std::vector<CorrelationRule> rules;
    std::optional<PriorityPolicy> priority;
};
Result<GuardPolicies> load_guard_policies(const std::vector<std::string>& files);

// `rules.correlation_files` at start: a start never fails open on them
// (issue 39). After a good load a checksummed copy of the files is kept in
// `last_good_dir` (as the rule files' are, rules/last_good.h); files that do
// not load start on that copy, or on the built-in rules alone when there is
// none or it was tampered with: `rejected` then says why (file:line:col)
// and `running_on` what the agent runs on instead. Fails, as
// load_guard_policies(), only when `last_good_dir` is "".
struct GuardPoliciesAtStart {
    GuardPolicies policies;
    std::optional<Error> rejected;
    std::string running_on;
};
Result<GuardPoliciesAtStart> load_guard_policies_at_start(
    const std::vector<std::string>& files, const std::filesystem::path& last_good_dir);

// Watches `rules.correlation_files` (inotify on their directories, so an
// editor's write-and-rename is seen) and reloads them after a short quiet
// time. A good reload goes to on_reload; a rejected one is logged (logger
// "rules") and passed to on_error, and the caller keeps the last good
// policies. Callbacks run on the watcher's own thread.
class GuardPolicyWatcher {
  public:
    struct Callbacks {
        std::function<void(GuardPolicies)> on_reload;
        std::function<void(const Error&)> on_error;
    };

    // Starts watching (nothing to watch when `files` is empty: no thread).
    // Fails when inotify is unavailable or a file's directory is missing.
    static Result<std::unique_ptr<GuardPolicyWatcher>> start(
        std::vector<std::string> files, Callbacks callbacks,
        std::chrono::milliseconds debounce = std::chrono::milliseconds(100));

    ~GuardPolicyWatcher();  // stops and joins the thread
    GuardPolicyWatcher(const GuardPolicyWatcher&) = delete;
    GuardPolicyWatcher& operator=(const GuardPolicyWatcher&) = delete;

    uint64_t reloads() const;   // good reloads since start
    uint64_t rejected() const;  // rejected reloads since start

    struct Impl;

  private:
    explicit GuardPolicyWatcher(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// Parses one correlation rule file. Every problem is reported, one per line,
// as "file:line:col: message" (kParse).
Result<std::vector<CorrelationRule>> parse_correlation_rules(std::string_view yaml,
                                                             const std::string& source);

// The built-in rules (embedded rules/correlation-rules.yaml).
Result<std::vector<CorrelationRule>> builtin_correlation_rules();
std::string_view builtin_correlation_rules_yaml();

// Built-in rules, then each file in order: a rule with a known id replaces
// it, a new id is appended, `enabled: false` turns one off, an override
// changes the rule of its id known so far (an unknown id is an error).
Result<std::vector<CorrelationRule>> load_correlation_rules(const std::vector<std::string>& files);

// "90s", "5m", "2h", "1d" -> seconds.
std::optional<std::chrono::seconds> parse_duration(std::string_view text);
// "20GiB", "512MiB", "20GB", "1024" -> bytes (binary and decimal units).
std::optional<uint64_t> parse_bytes(std::string_view text);

}  // namespace gpuguard::rules
