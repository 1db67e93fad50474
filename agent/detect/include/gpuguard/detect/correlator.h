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
#include <memory>
#include <string>
#include <vector>

#include "gpuguard/common/detection.h"
#include "gpuguard/common/result.h"
#include "gpuguard/events/event.h"
#include "gpuguard/rules/correlation.h"
#include "gpuguard/rules/rules.h"
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
    // Collect ProbeRequests (take_probe_requests()). Live only, and only
    // with verify.active: in replay the journal's pool_probe events carry
    // the answers, and nothing is probed.
    bool request_probes = false;
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
// location, the process turning busy on the CPU) and at its first GPU use,
// at most once each. The answer comes back as ConfigFile events.
struct ConfigRequest {
    uint32_t pid = 0;
    uint64_t ts_ns = 0;
    std::string reason;  // "gpu_open", "signature", "exe_location" or "busy_cpu"
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

// The correlator wants a suspected pool verified (verify.active,
// docs/detections.md "Active verification"): a detection was raised by a
// rule whose `when` has opaque_peer, and this is one of the process's
// peers nothing vouches for. Once per process and peer, at most two peers
// per process. The answer comes back as a PoolProbe event.
struct ProbeRequest {
    uint32_t pid = 0;
    uint64_t ts_ns = 0;
    std::string address;
    uint16_t port = 0;
    bool tls = false;         // the process's first bytes to it were TLS
    std::string server_name;  // the SNI of its ClientHello, "" none
    std::string rule;         // the rule that raised the detection
};

struct CorrelatorStats {
    uint64_t events = 0;
    uint64_t evaluations = 0;  // rule passes over a process
    uint64_t detections = 0;   // new detections
    uint64_t updates = 0;      // updates of open detections
    uint64_t allowlisted = 0;  // detections withheld because the process is allowlisted
};

// The correlator's interface; its implementation (correlator_impl.h) keeps
// the evidence book (evidence_book.h) and judges each rule's conditions
// (conditions/condition.h).
class Correlator {
  public:
    // Fails when the rule set's scanner cannot be made (Hyperscan scratch).
    static Result<std::unique_ptr<Correlator>> create(
        std::vector<rules::CorrelationRule> rules, std::shared_ptr<const rules::RuleSet> rule_set,
        const ProcessTable& table, CorrelatorOptions options = {});
    virtual ~Correlator() = default;

    // Judges `event` (already applied to the table) and appends new or
    // updated detections to `out`.
    virtual void observe(const Event& event, std::vector<Detection>& out) = 0;
    // The same without copying them: each points at the detection as it was
    // reported, valid until the next observe(), set_rule_set() or
    // set_rules() (most reports are read once and dropped: a copy of every
    // one cost replay as much as judging them).
    virtual void observe(const Event& event, std::vector<const Detection*>& out) = 0;

    // Hot reload: later events are judged by the new rules; open detections
    // stay open.
    virtual Status set_rule_set(std::shared_ptr<const rules::RuleSet> rule_set) = 0;
    virtual void set_rules(std::vector<rules::CorrelationRule> rules) = 0;

    // Added to ts_ns for Detection::time_unix_ns (0: leave it 0). Live: the
    // monotonic-to-realtime offset; replay: from the events' "time".
    virtual void set_realtime_offset(int64_t offset_ns) = 0;

    // Scan requests since the last call (empty unless options.request_scans).
    virtual std::vector<ScanRequest> take_scan_requests() = 0;
    // Config file requests since the last call (empty unless options.request_configs).
    virtual std::vector<ConfigRequest> take_config_requests() = 0;
    // Watch requests since the last call (empty unless options.request_watches).
    virtual std::vector<WatchRequest> take_watch_requests() = 0;
    // Probe requests since the last call (empty unless options.request_probes).
    virtual std::vector<ProbeRequest> take_probe_requests() = 0;
    // Whether `domain` is a pool domain: a signature of the rule set matches it
    // as a DNS name (signatures::Field::kDomain).
    virtual bool pool_domain(const std::string& domain) = 0;

    virtual const CorrelatorStats& stats() const = 0;
    virtual const std::vector<rules::CorrelationRule>& rules() const = 0;
};

}  // namespace gpuguard::agent
