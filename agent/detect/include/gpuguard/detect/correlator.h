// Correlator: joins, per process, the sensor's events, GPU telemetry and
// signature matches into Detections, judged by the correlation rules
// (include/gpuguard/rules/correlation.h). The same code runs live and in
// `gpuguard replay`: time is the events' own ts_ns (a virtual clock), never
// the wall clock, so the same input gives the same detections.
//
// The caller applies each event to the ProcessTable first, then hands it to
// observe(). One detection per (process, rule) per the rule's window; new
// evidence within the window updates it (Detection::update counts up) rather
// than raising another.
#pragma once

#include <cstdint>
#include <deque>
#include <iterator>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "gpuguard/common/detection.h"
#include "gpuguard/common/result.h"
#include "gpuguard/events/event.h"
#include "gpuguard/rules/correlation.h"
#include "gpuguard/rules/rules.h"
#include "gpuguard/state/pid_map.h"
#include "gpuguard/state/process_table.h"

namespace gpuguard::agent {

struct CorrelatorOptions {
    size_t max_evidence = 32;             // per detection; the oldest are kept
    size_t max_telemetry_samples = 1024;  // per process
    bool dry_run = false;                 // copied into every Detection
    // Collect ScanRequests (take_scan_requests()). Live only: in replay the
    // journal's exe_scan events carry the verdicts.
    bool request_scans = false;
    // Ask for a scan of every process's executable at its exec (not of
    // processes found running), not only of GPU
    // holders and processes with a signature hit (reason "exec"): a CPU
    // miner under a harmless name has only its binary to show.
    bool scan_every_exec = false;
    // Collect ConfigRequests (take_config_requests()). Live only: in replay
    // the journal's config_file events carry the matched lines.
    bool request_configs = false;
    // Collect WatchRequests (take_watch_requests()). Live only.
    bool request_watches = false;
    // Persistence written this long before a process was flagged still
    // counts as its own (persistence_after_detection).
    uint64_t persistence_lookback_ns = 600'000'000'000ull;
};

// The correlator wants a YARA scan of a process's executable: at its first
// GPU use or its first signature hit, once per executable image. The answer
// comes back as an ExeScan event.
struct ScanRequest {
    uint32_t pid = 0;
    uint64_t ts_ns = 0;
    std::string exe;  // as the process table knows it
    // "gpu_open", "signature", "known_bad" (known_bad.sha256 is set),
    // "exec" (scan_every_exec: nothing else asked for it) or "library"
    std::string reason;
    // reason "library": an LD_PRELOAD library nothing vouches for, its real
    // path in the process's root, to scan instead of the executable
    std::string library{};
};

// The correlator wants a process's configuration files read
// (gpuguard/detect/config_scanner.h): at the first sign of mining of an
// executable image (a signature hit, a start from a temporary or fileless
// location) and at its first GPU use, at most once each. The answer comes
// back as ConfigFile events.
struct ConfigRequest {
    uint32_t pid = 0;
    uint64_t ts_ns = 0;
    std::string reason;  // "gpu_open", "signature" or "exe_location"
};

// The correlator wants a process's connects and first payloads captured on
// any port (the kernel watch list, docs/network.md): the first time it gets a
// miner signature hit (ATT&CK T1496: the miner packs, user rules; not the
// generic ones such as "executable in /tmp") on its name, executable, command
// line, a config file or a YARA scan of its executable. Once per process.
struct WatchRequest {
    uint32_t pid = 0;
    uint64_t ts_ns = 0;
    std::string signature_id;  // the first such hit
    std::string detail;        // what it matched
};

struct CorrelatorStats {
    uint64_t events = 0;
    uint64_t evaluations = 0;  // rule passes over a process
    uint64_t detections = 0;   // new detections
    uint64_t updates = 0;      // updates of open detections
    uint64_t allowlisted = 0;  // detections withheld because the process is allowlisted
};

class Correlator {
  public:
    // Fails when the rule set's scanner cannot be made (Hyperscan scratch).
    static Result<std::unique_ptr<Correlator>> create(
        std::vector<rules::CorrelationRule> rules, std::shared_ptr<const rules::RuleSet> rule_set,
        const ProcessTable& table, CorrelatorOptions options = {});

    // Judges `event` (already applied to the table) and appends new or
    // updated detections to `out`.
    void observe(const Event& event, std::vector<Detection>& out);
    // The same without copying them: each points at the detection as it was
    // reported, valid until the next observe(), set_rule_set() or
    // set_rules() (most reports are read once and dropped: a copy of every
    // one cost replay as much as judging them).
    void observe(const Event& event, std::vector<const Detection*>& out);

    // Hot reload: later events are judged by the new rules; open detections
    // stay open.
    Status set_rule_set(std::shared_ptr<const rules::RuleSet> rule_set);
    void set_rules(std::vector<rules::CorrelationRule> rules);

    // Added to ts_ns for Detection::time_unix_ns (0: leave it 0). Live: the
    // monotonic-to-realtime offset; replay: from the events' "time".
    void set_realtime_offset(int64_t offset_ns) { realtime_offset_ns_ = offset_ns; }

    // Scan requests since the last call (empty unless options.request_scans).
    std::vector<ScanRequest> take_scan_requests() { return std::exchange(scan_requests_, {}); }
    // Config file requests since the last call (empty unless options.request_configs).
    std::vector<ConfigRequest> take_config_requests() {
        return std::exchange(config_requests_, {});
    }
    // Watch requests since the last call (empty unless options.request_watches).
    std::vector<WatchRequest> take_watch_requests() { return std::exchange(watch_requests_, {}); }
    // Whether `domain` is a pool domain: a signature of the rule set matches it
    // as a DNS name (signatures::Field::kDomain).
    bool pool_domain(const std::string& domain) {
        return !match_cached(signatures::Field::kDomain, domain).empty();
    }

    const CorrelatorStats& stats() const { return stats_; }
    const std::vector<rules::CorrelationRule>& rules() const { return rules_; }

  private:
    // Signature conditions of rules_[i] (i < 64) a signature id meets in a
    // field: bit i of `matches` is known once bit i of `judged` is set. One
    // per (field, id), shared by every hit of it: a host sees the same few
    // again and again. set_rules() resets them, set_rule_set() drops them.
    struct Verdict {
        uint64_t judged = 0;
        uint64_t matches = 0;
    };
    struct Hit {
        rules::EvidenceField field;
        std::string id;
        double confidence = 0;
        std::string action;  // the signature's action in miner-rules.yaml
        uint64_t ts_ns = 0;
        std::string detail;          // the matched value
        Verdict* verdict = nullptr;  // in verdicts_
    };
    struct UsageSample {
        uint64_t ts_ns = 0;
        std::optional<uint64_t> memory_bytes;
        std::optional<double> compute_percent;
    };
    // A process_io reading: cumulative counters, recorded when one moved.
    struct IoSample {
        uint64_t ts_ns = 0;
        ProcessIo counters;
    };
    // An outbound connection and what was first sent on it (opaque_peer).
    struct Peer {
        uint64_t ts_ns = 0;
        std::string address;
        uint16_t port = 0;
        bool named = false;      // an observed DNS answer named the address
        bool pool_port = false;  // a port signature lists the port
        std::string protocol;    // of the first bytes sent: "tls", "http", "ssh", "json", "opaque";
                                 // "" none seen
    };
    // A kernel module the process loaded, with the host as it was at the load.
    struct ModuleSeen {
        uint64_t ts_ns = 0;
        ModuleLoad module;
        std::vector<std::string> gpu_processes;  // "PID COMM" of each GPU process running
        std::string flagged;  // the flagged process of its lineage and why; "" when none
        std::string miners;   // the other miners flagged on the host; "" when none
    };
    // A process with a detection at warning or above (module_load's
    // flagged_lineage, miner_on_host), until it exits.
    struct Flag {
        std::string comm;
        std::vector<std::string> rules;  // ids of the rules that flagged it, first first
        bool miner = false;              // a rule of ATT&CK T1496 (Resource Hijacking) flagged it
    };
    // A watched file the process changed (file_change events with a kind).
    struct FileRecord {
        uint64_t ts_ns = 0;
        std::string operation;
        std::string kind;
        std::string path;
        std::vector<std::string> libraries;
    };
    // Persistence written on the host (cron, systemd, shell_rc, ssh_keys),
    // with the writer's ancestry then: whose it is may be known only later.
    struct PersistenceWrite {
        uint64_t ts_ns = 0;
        uint32_t writer = 0;
        std::string comm;
        std::string operation;
        std::string kind;
        std::string path;
        std::vector<uint32_t> chain;  // writer, parent, ... up to (not including) pid 1
    };
    struct Tamper {
        uint64_t ts_ns = 0;
        std::string kind;    // AgentTamper::kind
        std::string detail;  // the evidence's words
    };
    // An LD_PRELOAD library or LD_LIBRARY_PATH directory that nothing
    // vouches for, and what makes it worse (library_injection).
    struct InjectedLibrary {
        std::string variable;  // LD_PRELOAD, LD_LIBRARY_PATH
        std::string path;      // as written
        std::string where;     // its real path, or the written one with its spelling undone
        std::vector<rules::LibrarySign> signs;
        std::string detail;           // for the evidence
        bool preloaded_file = false;  // an LD_PRELOAD library that exists: YARA scans it
    };
    struct ProcessState {
        bool matched = false;      // process and command line matched for the current image
        std::string matched_comm;  // the name they were matched with (prctl can change it)
        bool held_gpu = false;
        bool dirty = true;              // evidence changed since the last evaluation
        bool scan_asked = false;        // a YARA scan of the current image was requested or came
        bool exec_seen = false;         // the current image came with an exec (not a snapshot)
        bool config_asked = false;      // its config files were requested (current image)
        bool config_asked_gpu = false;  // ... since it holds a GPU
        bool watch_asked = false;       // a WatchRequest was made for it
        std::string sha256;             // of the executable, from its exe_scan
        uint64_t scanned_ns = 0;        // when that exe_scan came
        std::vector<Hit> hits;
        std::vector<std::string> disguise_ids;  // process signatures on the exe, none on comm
        std::vector<UsageSample> usage;         // newest last, bounded
        std::vector<uint64_t> connect_ts;       // newest last, bounded
        std::vector<IoSample> io;               // newest last, bounded
        std::optional<DetectionPeer> peer;      // last connect with port/domain evidence
        std::vector<Peer> peers;                // outbound, not loopback; newest last, bounded
        std::optional<double> hash_rate;        // fastest estimate of its mining sessions, H/s
        uint64_t hash_rate_ns = 0;              // when it was reported
        uint64_t first_gpu_ns = 0;
        // The latest hidden_process event: how it is hidden (hidden_from_proc).
        std::string hidden;
        uint64_t hidden_ns = 0;
        std::vector<ModuleSeen> modules;  // newest last, bounded
        std::vector<FileRecord> files;    // newest last, bounded
        std::optional<ProcessEnv> env;    // at its first GPU use, or its last exec since
        uint64_t env_ns = 0;
        std::vector<InjectedLibrary> libraries;     // of env: what nothing vouches for
        bool flagged = false;                       // a detection of it was raised
        std::vector<PersistenceWrite> persistence;  // attributed to it since (or just before)
        // What it did to the agent (agent_tamper events), oldest first, bounded.
        std::vector<Tamper> tampers;
    };
    struct Open {
        Detection detection;
        uint64_t window_end_ns = 0;
    };
    struct GpuTelemetry {
        uint32_t index = 0;
        std::string vendor;
        std::optional<double> utilization_percent;
        std::vector<ProcessGpuUsage> processes;  // one per pid, the last reading wins
    };

    Correlator(std::vector<rules::CorrelationRule> rules,
               std::shared_ptr<const rules::RuleSet> rule_set, rules::RuleScanner scanner,
               const ProcessTable& table, CorrelatorOptions options);

    ProcessState& state(uint32_t pid);
    // Signature ids matching `text` in `field`, remembered per rule set: the
    // host runs the same executables and command lines over and over.
    const std::vector<std::string_view>& match_cached(signatures::Field field,
                                                      const std::string& text);
    const std::vector<std::string_view>& match_port_cached(uint16_t port);
    // RuleSet::find through an index built once per rule set.
    const rules::EffectiveSignature* signature(std::string_view id) const;
    void reset_rule_set_caches();
    void match_image(ProcessState& state, const ProcessInfo& info, uint64_t ts_ns);
    void add_hits(ProcessState& state, rules::EvidenceField field,
                  const std::vector<std::string_view>& ids, uint64_t ts_ns,
                  const std::string& detail);
    // `persistence_only`: only the persistence_after_detection rules (a
    // process just flagged: its other detections were reported this very
    // evaluation and must reach the caller as they were).
    void evaluate(uint32_t pid, uint64_t ts_ns, std::vector<const Detection*>& out,
                  bool persistence_only = false);
    // Config files (correlator_config.cpp): the request at the image's first
    // sign of mining, and the matched lines of a config_file event as hits.
    void request_configs(uint32_t pid, const ProcessInfo& info, ProcessState& state,
                         uint64_t ts_ns);
    void observe_config_file(uint32_t pid, uint64_t ts_ns, const ConfigFile& file);
    // Kernel modules (correlator_modules.cpp): a load with the host's state at
    // that moment, the module_load condition, and the flags raise() leaves on
    // processes.
    void observe_module_load(uint32_t pid, uint64_t ts_ns, const ModuleLoad& module);
    // The flagged process nearest `pid` in its parent chain (itself first).
    std::string flagged_lineage(uint32_t pid) const;
    // Whether a load of the last `window` holds `condition`; one evidence item per load.
    bool module_load_holds(const rules::ModuleLoadCondition& condition, std::chrono::seconds window,
                           const ProcessInfo& info, const ProcessState& state, uint64_t ts_ns,
                           std::vector<Evidence>& extra) const;
    // The miners (Flag::miner) running on the host but `pid`; "" when none.
    std::string miners_on_host(uint32_t pid) const;
    // `rule` raised a detection of the process at `severity`: flags it at warning or above.
    void note_flagged(const rules::CorrelationRule& rule, const ProcessInfo& info,
                      Severity severity);
    // Library-loading environments (correlator_libraries.cpp): an
    // environment's entries that nothing vouches for, with their signs.
    void observe_env(uint32_t pid, uint64_t ts_ns, const ProcessEnv& env);
    std::vector<InjectedLibrary> judge_libraries(const ProcessEnv& env);
    std::string miner_signature_of(const std::string& path);  // "" when none
    void observe_library_scan(uint32_t pid, uint64_t ts_ns, const ExeScan& scan);
    bool library_condition_holds(const rules::CorrelationRule& rule, const ProcessState& state,
                                 std::vector<Evidence>& extra) const;
    // File changes (correlator_files.cpp).
    void observe_file_change(const Event& event, const FileChange& change,
                             std::vector<const Detection*>& out);
    std::vector<uint32_t> ancestry(uint32_t pid) const;
    bool related(uint32_t pid, const PersistenceWrite& write) const;
    // A newly flagged process takes the persistence written in the look-back window.
    bool attribute_recent_persistence(uint32_t pid, ProcessState& state, uint64_t ts_ns);
    // file_changed, library_injection, persistence_after_detection.
    // Once a detection of `pid` is open: flagged, and given recent persistence.
    void note_flagged(uint32_t pid, ProcessState& state, uint64_t ts_ns,
                      std::vector<const Detection*>& out);
    // file_changed, library_injection, persistence_after_detection; with
    // `with_persistence` a flagged process's persistence is evidence of any rule.
    bool file_conditions_hold(const rules::CorrelationRule& rule, const ProcessState& state,
                              uint64_t ts_ns, bool with_persistence,
                              std::vector<Evidence>& extra) const;
    // What one rule's judgement of a process gathers (reused across rules).
    struct RuleInputs {
        std::vector<rules::ExeLocation> locations;  // of the executable, read once
        bool locations_known = false;
        std::vector<const Hit*> hits;
        std::vector<Evidence> extra;
    };
    // `cache_index`: the rule's index in rules_ (verdicts cached per rule),
    // kUncached for a supporting signal.
    static constexpr size_t kUncached = SIZE_MAX;
    bool rule_holds(const rules::CorrelationRule& rule, size_t cache_index, uint32_t pid,
                    const ProcessInfo& info, const ProcessState& state, uint64_t ts_ns,
                    RuleInputs& in);
    // The supporting signals of `rule` that hold, their hits and evidence
    // added to `in`; how many held.
    uint32_t add_support(const rules::CorrelationRule& rule, uint32_t pid, const ProcessInfo& info,
                         const ProcessState& state, uint64_t ts_ns, RuleInputs& in);
    static bool opaque_peer(const ProcessState& state, std::string& detail);
    // Keeps a hidden_process event's evidence in `state`.
    static void observe_hidden(ProcessState& state, uint64_t ts_ns, const HiddenProcess& hidden);
    // correlator_tamper.cpp: an agent_tamper event kept as the process's
    // evidence, and the tampering a rule's `agent_tamper:` names.
    static void note_tamper(ProcessState& state, const Event& event, const AgentTamper& tamper);
    static bool tampered(const rules::CorrelationRule& rule, const ProcessState& state,
                         std::vector<Evidence>& evidence);
    // Appends `detection` to `out`; one reported twice by the same observe()
    // is kept as it was the first time (a copy in reported_twice_).
    void report(const Detection& detection, std::vector<const Detection*>& out);
    // rules_[index].signature->matches(hit), remembered in the hit.
    bool signature_matches(size_t index, const Hit& hit) const;
    // `allowlisted` caches the allowlist verdict over one evaluation.
    // `supported`: how many of the rule's supporting signals hold.
    void raise(const rules::CorrelationRule& rule, const ProcessInfo& info,
               const ProcessState& state, const std::vector<const Hit*>& hits,
               std::vector<Evidence>& extra, uint32_t supported, uint64_t ts_ns,
               std::vector<const Detection*>& out, std::optional<bool>& allowlisted);
    // Whether raising again would add evidence to an open `detection`.
    bool adds_evidence(const Detection& detection, const std::vector<const Hit*>& hits,
                       const std::vector<Evidence>& extra) const;
    // What every report of a detection carries fresh: signature ids (merged),
    // last seen, wall time, the process, its GPUs and peer as known now.
    void refresh(Detection& detection, const ProcessInfo& info, const ProcessState& state,
                 const std::vector<const Hit*>& hits, uint64_t ts_ns) const;
    static bool time_dependent(const std::vector<rules::CorrelationRule>& rules);
    std::vector<DetectionGpu> gpus_of(const ProcessInfo& info) const;
    bool over_process_limit(uint32_t pid, const ProcessInfo& info, uint32_t limit,
                            std::string& detail) const;
    bool memory_growth(const rules::MemoryGrowthCondition& condition, const ProcessState& state,
                       uint64_t ts_ns, std::string& detail) const;
    bool sustained(const rules::SustainedUtilizationCondition& condition, const ProcessState& state,
                   uint64_t ts_ns, std::string& detail) const;
    static bool quiet_io(const rules::QuietIoCondition& condition, const ProcessState& state,
                         uint64_t ts_ns, std::string& detail);

    std::vector<rules::CorrelationRule> rules_;
    std::shared_ptr<const rules::RuleSet> rule_set_;
    rules::RuleScanner scanner_;
    const ProcessTable& table_;
    CorrelatorOptions options_;
    bool has_time_rules_ = false;  // some rule looks at telemetry over time
    int64_t realtime_offset_ns_ = 0;
    PidMap<ProcessState> states_;
    PidMap<Flag> flagged_;
    std::map<std::pair<uint32_t, std::string>, Open> open_;
    std::map<std::string, GpuTelemetry, std::less<>> gpu_by_device_;  // "195:0" -> latest reading
    std::unordered_map<std::string_view, const rules::EffectiveSignature*> signatures_;
    std::unordered_map<std::string, std::vector<std::string_view>>
        match_cache_[std::size(signatures::kAllFields)];
    std::unordered_map<uint16_t, std::vector<std::string_view>> port_cache_;
    // Keyed by the rule set's own id strings (the map goes with the rule set).
    std::map<std::pair<rules::EvidenceField, std::string_view>, Verdict> verdicts_;
    std::vector<ScanRequest> scan_requests_;
    std::vector<ConfigRequest> config_requests_;
    std::vector<WatchRequest> watch_requests_;
    std::deque<Detection> reported_twice_;             // see report(); emptied by each observe()
    std::deque<PersistenceWrite> recent_persistence_;  // newest last, within the look-back
    CorrelatorStats stats_;
};

}  // namespace gpuguard::agent
