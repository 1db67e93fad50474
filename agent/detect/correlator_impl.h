// The correlator behind gpuguard/detect/correlator.h: which events go into
// the evidence book and when a process is judged (correlator.cpp), what the
// signature pack says of a process (correlator_signatures.cpp), its config
// files (correlator_config.cpp) and library-loading environment
// (correlator_libraries.cpp), and raising detections from the rules whose
// conditions hold (correlator_detections.cpp). Private to the detect room.
#pragma once

#include <algorithm>
#include <cstdio>
#include <deque>
#include <iterator>
#include <map>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "conditions/condition.h"
#include "evidence_book.h"
#include "gpuguard/detect/correlator.h"

namespace gpuguard::agent {

class CorrelatorImpl final : public Correlator {
  public:
    CorrelatorImpl(std::vector<rules::CorrelationRule> rules,
                   std::shared_ptr<const rules::RuleSet> rule_set, rules::RuleScanner scanner,
                   const ProcessTable& table, CorrelatorOptions options);

    void observe(const Event& event, std::vector<Detection>& out) override;
    void observe(const Event& event, std::vector<const Detection*>& out) override;
    Status set_rule_set(std::shared_ptr<const rules::RuleSet> rule_set) override;
    void set_rules(std::vector<rules::CorrelationRule> rules) override;
    void set_realtime_offset(int64_t offset_ns) override { realtime_offset_ns_ = offset_ns; }
    std::vector<ScanRequest> take_scan_requests() override {
        return std::exchange(scan_requests_, {});
    }
    std::vector<ConfigRequest> take_config_requests() override {
        return std::exchange(config_requests_, {});
    }
    std::vector<WatchRequest> take_watch_requests() override {
        return std::exchange(watch_requests_, {});
    }
    std::vector<ProbeRequest> take_probe_requests() override {
        return std::exchange(probe_requests_, {});
    }
    bool pool_domain(const std::string& domain) override {
        return !match_cached(signatures::Field::kDomain, domain).empty();
    }
    const CorrelatorStats& stats() const override { return stats_; }
    const std::vector<rules::CorrelationRule>& rules() const override { return rules_; }

  private:
    // A rule's conditions and its supporting signals', made once per rule list.
    struct JudgedRule {
        Conditions conditions;
        std::vector<Conditions> signals;   // one per rules::SupportingSignals::signals
        std::vector<Conditions> counters;  // one per counter signal
        bool per_gpu = false;              // judged per GPU (Condition::judges_gpu), not process
        uint32_t needs = 0;                // the facts its conditions need (Condition::needs)
    };
    struct Open {
        Detection detection;
        uint64_t window_end_ns = 0;
    };

    void compile_rules();
    // The event's evidence into the book, and the processes it concerns judged.
    void record(const Event& event, std::vector<const Detection*>& out);
    // The executable image changed (an exec, or a process found running):
    // what was known of the old one goes.
    void reset_image(uint32_t pid, bool exec);
    void record_exe_scan(uint32_t pid, uint64_t ts_ns, const ExeScan& scan);
    void record_connect(uint32_t pid, uint64_t ts_ns, const Connect& connect);
    void record_stratum(uint32_t pid, uint64_t ts_ns, const Stratum& stratum);
    // The server name of a TLS hello the connection's first bytes held, matched
    // as a pool domain: a miner's pool is named there even under TLS.
    void record_server_name(uint32_t pid, uint64_t ts_ns, const NetPayload& payload);
    // A peer reached through a loopback proxy (evidence_proxies.cpp): its
    // port and name against the signatures when `created`, its TLS server name.
    void record_proxied_peer(uint32_t pid, uint64_t ts_ns, Peer& peer, bool created);
    void record_file_change(const Event& event, const FileChange& change,
                            std::vector<const Detection*>& out);
    void forget(uint32_t pid);

    // Signatures (correlator_signatures.cpp): ids matching `text` in
    // `field`, remembered per rule set (the host runs the same executables
    // and command lines over and over).
    const std::vector<std::string_view>& match_cached(signatures::Field field,
                                                      const std::string& text);
    const std::vector<std::string_view>& match_port_cached(uint16_t port);
    // RuleSet::find through an index built once per rule set.
    const rules::EffectiveSignature* signature(std::string_view id) const;
    void reset_rule_set_caches();
    void match_image(ProcessEvidence& evidence, const ProcessInfo& info, uint64_t ts_ns);
    void add_hits(ProcessEvidence& evidence, rules::EvidenceField field,
                  const std::vector<std::string_view>& ids, uint64_t ts_ns,
                  const std::string& detail);

    // Config files (correlator_config.cpp): the request at the image's first
    // sign of mining, and the matched lines of a config_file event as hits.
    void request_configs(uint32_t pid, const ProcessInfo& info, ProcessEvidence& evidence,
                         uint64_t ts_ns);
    void record_config_file(uint32_t pid, uint64_t ts_ns, const ConfigFile& file);
    // Library-loading environments (correlator_libraries.cpp): an
    // environment's entries that nothing vouches for, with their signs.
    void record_env(uint32_t pid, uint64_t ts_ns, const ProcessEnv& env);
    std::vector<InjectedLibrary> judge_libraries(const ProcessEnv& env);
    std::string miner_signature_of(const std::string& path);  // "" when none
    void record_library_scan(uint32_t pid, uint64_t ts_ns, const ExeScan& scan);

    // Judging (correlator.cpp). `persistence_only`: only the
    // persistence_after_detection rules (a process just flagged: its other
    // detections were reported this very evaluation and must reach the
    // caller as they were).
    void evaluate(uint32_t pid, uint64_t ts_ns, std::vector<const Detection*>& out,
                  bool persistence_only = false);
    // The scans, config files and watches the process's evidence asks for.
    void request(uint32_t pid, const ProcessInfo& info, ProcessEvidence& evidence, uint64_t ts_ns);
    // Whether every condition holds; their hits and evidence are left in `in`.
    bool holds(const Conditions& conditions, const ConditionContext& context, RuleInputs& in) const;
    // Once a detection of `pid` is open: flagged, and given recent persistence.
    void note_flagged(uint32_t pid, ProcessEvidence& evidence, uint64_t ts_ns,
                      std::vector<const Detection*>& out);

    // Detections (correlator_detections.cpp). The supporting signals of
    // `rule` that hold, their hits and evidence added to `in`; how many held.
    // How many of `signals` (a rule's supporting or counter signals, judged
    // as `judged`) hold; their evidence into `in`, each named with `label`.
    uint32_t add_signals(const std::vector<rules::CorrelationRule>& signals,
                         const std::vector<Conditions>& judged, const std::string& label,
                         const ConditionContext& rule_context, RuleInputs& in) const;
    // Appends `detection` to `out`; one reported twice by the same observe()
    // is kept as it was the first time (a copy in reported_twice_).
    void report(const Detection& detection, std::vector<const Detection*>& out);
    // `allowlisted` caches the allowlist verdict over one evaluation.
    // `supported`, `countered`: how many of the rule's supporting and
    // counter signals hold.
    // `gpu`: the key of the GPU a rule judged per GPU names (info is its
    // subject, pid 0): its detections are the GPU's own, and nothing is
    // allowlisted or flagged.
    void raise(const rules::CorrelationRule& rule, const ProcessInfo& info,
               const ProcessEvidence& evidence, const std::vector<const Hit*>& hits,
               std::vector<Evidence>& extra, uint32_t supported, uint32_t countered, uint64_t ts_ns,
               std::vector<const Detection*>& out, std::optional<bool>& allowlisted,
               std::string_view gpu = {});
    // The rules judged per GPU, for the GPU a telemetry sample just recorded
    // (correlator_gpus.cpp).
    void evaluate_gpu(const GpuLoad& gpu, uint64_t ts_ns, std::vector<const Detection*>& out);
    // A new detection of `rule` (its `when` has opaque_peer): the process's
    // peers nothing vouches for, to be probed (options_.request_probes).
    void request_probes(const rules::CorrelationRule& rule, uint32_t pid, uint64_t ts_ns);
    // Whether raising again would add evidence to an open `detection`.
    bool adds_evidence(const Detection& detection, const std::vector<const Hit*>& hits,
                       const std::vector<Evidence>& extra) const;
    // What every report of a detection carries fresh: signature ids (merged),
    // last seen, wall time, the process, its GPUs and peer as known now.
    void refresh(Detection& detection, const ProcessInfo& info, const ProcessEvidence& evidence,
                 const std::vector<const Hit*>& hits, uint64_t ts_ns) const;

    std::vector<rules::CorrelationRule> rules_;
    std::vector<JudgedRule> judged_;  // one per rules_
    std::shared_ptr<const rules::RuleSet> rule_set_;
    rules::RuleScanner scanner_;
    const ProcessTable& table_;
    CorrelatorOptions options_;
    EvidenceBook book_;
    bool has_time_rules_ = false;  // some condition changes as time passes
    bool has_gpu_rules_ = false;   // some rule is judged per GPU
    int64_t realtime_offset_ns_ = 0;
    std::map<std::pair<uint32_t, std::string>, Open> open_;
    std::unordered_map<std::string_view, const rules::EffectiveSignature*> signatures_;
    std::unordered_map<std::string, std::vector<std::string_view>>
        match_cache_[std::size(signatures::kAllFields)];
    std::unordered_map<uint16_t, std::vector<std::string_view>> port_cache_;
    // Keyed by the rule set's own id strings (the map goes with the rule set).
    std::map<std::pair<rules::EvidenceField, std::string_view>, Verdict> verdicts_;
    std::vector<ScanRequest> scan_requests_;
    std::vector<ConfigRequest> config_requests_;
    std::vector<WatchRequest> watch_requests_;
    std::vector<ProbeRequest> probe_requests_;
    std::deque<Detection> reported_twice_;  // see report(); emptied by each observe()
    CorrelatorStats stats_;
};

}  // namespace gpuguard::agent
