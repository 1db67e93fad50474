// Correlator: which events go into the evidence book and when a process is
// judged (evaluate): each rule's conditions in turn (conditions/), then its
// supporting signals, then raising (correlator_detections.cpp). Signature
// matching of each process's image is correlator_signatures.cpp.
#include "correlator_support.h"
#include "gpuguard/common/ip_address.h"

namespace gpuguard::agent {

Result<std::unique_ptr<Correlator>> Correlator::create(
    std::vector<rules::CorrelationRule> rules, std::shared_ptr<const rules::RuleSet> rule_set,
    const ProcessTable& table, CorrelatorOptions options) {
    auto scanner = rule_set->scanner();
    if (!scanner) return Unexpected{scanner.error()};
    return std::unique_ptr<Correlator>(new CorrelatorImpl(std::move(rules), std::move(rule_set),
                                                          std::move(*scanner), table, options));
}

CorrelatorImpl::CorrelatorImpl(std::vector<rules::CorrelationRule> rules,
                               std::shared_ptr<const rules::RuleSet> rule_set,
                               rules::RuleScanner scanner, const ProcessTable& table,
                               CorrelatorOptions options)
    : rules_(std::move(rules)),
      rule_set_(std::move(rule_set)),
      scanner_(std::move(scanner)),
      table_(table),
      options_(options),
      book_(table,
            EvidenceBookOptions{options.max_telemetry_samples, options.persistence_lookback_ns}) {
    compile_rules();
    reset_rule_set_caches();
}

void CorrelatorImpl::compile_rules() {
    judged_.clear();
    has_time_rules_ = has_gpu_rules_ = false;
    for (const CorrelationRule& rule : rules_) {
        JudgedRule& judged = judged_.emplace_back();
        judged.conditions = conditions_of(rule);
        has_time_rules_ = has_time_rules_ || time_dependent(judged.conditions);
        judged.per_gpu = std::any_of(judged.conditions.begin(), judged.conditions.end(),
                                     [](const auto& condition) { return condition->judges_gpu(); });
        has_gpu_rules_ = has_gpu_rules_ || (judged.per_gpu && rule.enabled);
        for (const auto& condition : judged.conditions) judged.needs |= condition->needs();
        for (const auto& [signals, into] : {std::pair{rule.supporting.get(), &judged.signals},
                                            std::pair{rule.counter.get(), &judged.counters}}) {
            if (!signals) continue;
            for (const CorrelationRule& signal : signals->signals) {
                into->push_back(conditions_of(signal));
                has_time_rules_ = has_time_rules_ || time_dependent(into->back());
            }
        }
    }
}

Status CorrelatorImpl::set_rule_set(std::shared_ptr<const rules::RuleSet> rule_set) {
    auto scanner = rule_set->scanner();
    if (!scanner) return Unexpected{scanner.error()};
    scanner_ = std::move(*scanner);
    rule_set_ = std::move(rule_set);
    reset_rule_set_caches();
    // Signature evidence depends on the rules: match every image again.
    for (auto&& [pid, evidence] : book_.processes()) {
        evidence.matched = false;
        evidence.hits.clear();
        evidence.disguise_ids.clear();
        if (evidence.env) evidence.libraries = judge_libraries(*evidence.env);  // signature signs
        evidence.dirty = true;
    }
    return {};
}

void CorrelatorImpl::set_rules(std::vector<rules::CorrelationRule> rules) {
    rules_ = std::move(rules);
    compile_rules();
    for (auto& [key, verdict] : verdicts_) verdict = Verdict{};
    for (auto&& [pid, evidence] : book_.processes()) evidence.dirty = true;
}

void CorrelatorImpl::observe(const Event& event, std::vector<Detection>& out) {
    std::vector<const Detection*> reported;
    observe(event, reported);
    for (const Detection* detection : reported) out.push_back(*detection);
}

void CorrelatorImpl::report(const Detection& detection, std::vector<const Detection*>& out) {
    for (const Detection*& earlier : out) {
        if (earlier == &detection) {
            reported_twice_.push_back(detection);
            earlier = &reported_twice_.back();
        }
    }
    out.push_back(&detection);
}

void CorrelatorImpl::observe(const Event& event, std::vector<const Detection*>& out) {
    reported_twice_.clear();
    ++stats_.events;
    record(event, out);
}

void CorrelatorImpl::record(const Event& event, std::vector<const Detection*>& out) {
    const uint32_t pid = event.task.pid;
    const uint64_t ts_ns = event.ts_ns;
    const auto judge = [&](uint32_t target) { evaluate(target, ts_ns, out); };
    std::visit(
        [&](const auto& data) {
            using T = std::decay_t<decltype(data)>;
            if constexpr (std::is_same_v<T, Exec>) {
                reset_image(pid, true);
                judge(pid);
            } else if constexpr (std::is_same_v<T, ProcessSnapshot>) {
                // Found running (the /proc bootstrap, a journal segment's
                // start): judged like an exec, but not scanned for
                // scan_every_exec (a host's every process at once would swamp
                // the scan queue at start).
                reset_image(pid, false);
                judge(pid);
            } else if constexpr (std::is_same_v<T, ExeScan>) {
                // A verdict that arrives after the exit has nobody to judge.
                const ProcessInfo* info = table_.find(pid);
                if (!info || info->exited) return;
                record_exe_scan(pid, ts_ns, data);
                judge(pid);
            } else if constexpr (std::is_same_v<T, GpuOpen>) {
                if (!data.succeeded()) return;
                // Each GPU a job's or pod's process takes is judged against
                // its allocation, not only its first.
                if (ProcessEvidence& evidence = book_.of(pid); evidence.workload) {
                    evidence.dirty = true;
                }
                judge(pid);
            } else if constexpr (std::is_same_v<T, GpuIoctl>) {
                judge(pid);
            } else if constexpr (std::is_same_v<T, Connect>) {
                record_connect(pid, ts_ns, data);
                judge(pid);
            } else if constexpr (std::is_same_v<T, ConfigFile>) {
                record_config_file(pid, ts_ns, data);
                judge(pid);
            } else if constexpr (std::is_same_v<T, HiddenProcess>) {
                book_.record_hidden(pid, ts_ns, data);
                judge(pid);
            } else if constexpr (std::is_same_v<T, ModuleLoad>) {
                book_.record_module_load(pid, ts_ns, data);
                judge(pid);
            } else if constexpr (std::is_same_v<T, FileChange>) {
                record_file_change(event, data, out);
            } else if constexpr (std::is_same_v<T, ProcessEnv>) {
                record_env(pid, ts_ns, data);  // judged with the GPU event or exec that follows
            } else if constexpr (std::is_same_v<T, GpuFault>) {
                // An Xid is kept for the process that was on the GPU; ECC
                // errors and clock changes are the GPU's health, nobody's doing.
                if (pid == 0 || data.kind != "xid") return;
                const ProcessInfo* info = table_.find(pid);
                if (!info || info->exited) return;
                ProcessEvidence& evidence = book_.of(pid);
                evidence.gpu_faults.push_back(FaultSeen{ts_ns, data});
                if (evidence.gpu_faults.size() > kMaxGpuFaultsPerProcess) {
                    evidence.gpu_faults.erase(evidence.gpu_faults.begin());
                }
                evidence.dirty = true;
                judge(pid);
            } else if constexpr (std::is_same_v<T, Workload>) {
                // Judged with the GPU event that follows, or now for a
                // holder found running at the agent's start.
                book_.of(pid).workload = data;
                book_.of(pid).dirty = true;
                if (const ProcessInfo* info = table_.find(pid); info && info->holds_gpu()) {
                    judge(pid);
                }
            } else if constexpr (std::is_same_v<T, NetPayload>) {
                // Raw samples: net_intel.h derives Stratum events from them;
                // here only what protocol a connection's first message
                // speaks, and where a proxy on this host was asked to go.
                if (book_.loopback_send(data)) {
                    bool created = false;
                    if (Peer* peer = book_.record_proxied_send(pid, ts_ns, data, created)) {
                        record_proxied_peer(pid, ts_ns, *peer, created);
                        judge(pid);
                    }
                } else if (book_.record_first_bytes(pid, data)) {
                    record_server_name(pid, ts_ns, data);
                    judge(pid);
                }
            } else if constexpr (std::is_same_v<T, Stratum>) {
                record_stratum(pid, ts_ns, data);
                judge(pid);
            } else if constexpr (std::is_same_v<T, ProcessIo>) {
                book_.record_io(pid, ts_ns, data);
                judge(pid);
            } else if constexpr (std::is_same_v<T, GpuLibraries>) {
                book_.of(pid).gpu_stack = data;  // judged with the GPU event that follows
                book_.of(pid).dirty = true;
            } else if constexpr (std::is_same_v<T, ProcessCmdline>) {
                // The table took the whole command line: matched again, in
                // place of the cut one's hits.
                if (!data.extends_exec || data.argv.empty()) return;
                ProcessEvidence& evidence = book_.of(pid);
                std::erase_if(evidence.hits,
                              [](const Hit& hit) { return hit.field == EvidenceField::kCmdline; });
                evidence.matched = false;
                judge(pid);
            } else if constexpr (std::is_same_v<T, CpuUsage>) {
                book_.record_cpu(pid, ts_ns, data);
                judge(pid);
            } else if constexpr (std::is_same_v<T, Flow>) {
                book_.record_flow(pid, data);
                judge(pid);
            } else if constexpr (std::is_same_v<T, LoopbackPeer>) {
                const size_t added = book_.record_loopback_peer(pid, ts_ns, data);
                auto& peers = book_.of(pid).peers;
                for (size_t i = peers.size() - added; i < peers.size(); ++i) {
                    record_proxied_peer(pid, ts_ns, peers[i], true);
                }
                if (added) judge(pid);
            } else if constexpr (std::is_same_v<T, PoolProbe>) {
                // The agent's probe of a peer (live), or its record (replay):
                // judged alike, never probed again here.
                auto& probes = book_.of(pid).probes;
                if (probes.size() == kMaxProbesKept) probes.erase(probes.begin());
                probes.push_back(ProbeSeen{ts_ns, data});
                book_.of(pid).dirty = true;
                judge(pid);
            } else if constexpr (std::is_same_v<T, AgentTamper>) {
                book_.record_tamper(event, data);
                judge(pid);
            } else if constexpr (std::is_same_v<T, TrustChange>) {
                book_.record_trust_change(event, data);
                judge(pid);
            } else if constexpr (std::is_same_v<T, Exit>) {
                forget(pid);
            } else if constexpr (std::is_same_v<T, Telemetry>) {
                book_.record_telemetry(ts_ns, data,
                                       [this](uint32_t pid) { return table_.find(pid); });
                for (const auto& usage : data.processes) judge(usage.pid);
                // The GPU itself, after its processes (their GPU holds known).
                if (has_gpu_rules_) evaluate_gpu(book_.record_gpu_load(ts_ns, data), ts_ns, out);
            } else {
                // Container: the table keeps it, its snapshot follows. Fork,
                // KillNow (enforced in the kernel; the exit follows): nothing.
                static_assert(std::is_same_v<T, Container> || std::is_same_v<T, Fork> ||
                                  std::is_same_v<T, KillNow>,
                              "an event type the correlator does not handle");
            }
        },
        event.data);
}

void CorrelatorImpl::reset_image(uint32_t pid, bool exec) {
    ProcessEvidence& evidence = book_.of(pid);
    evidence.exec_seen = exec;
    evidence.matched = false;
    // Network evidence outlives exec; the image's does not.
    std::erase_if(evidence.hits, [](const Hit& hit) {
        return hit.field != EvidenceField::kPort && hit.field != EvidenceField::kDomain &&
               hit.field != EvidenceField::kPayload;
    });
    evidence.dirty = true;
    evidence.scan_asked = false;
    evidence.config_asked = evidence.config_asked_gpu = false;
    evidence.sha256.clear();
    evidence.scanned_ns = 0;
    evidence.exe_path.clear();
    evidence.exe_yara_hit = false;
    evidence.package_check.clear();
    evidence.package.clear();
    evidence.location_check.clear();
    evidence.exe_unread.clear();
    evidence.configs_unread.clear();
}

void CorrelatorImpl::record_exe_scan(uint32_t pid, uint64_t ts_ns, const ExeScan& scan) {
    if (!scan.library.empty()) return record_library_scan(pid, ts_ns, scan);
    ProcessEvidence& evidence = book_.of(pid);
    evidence.scan_asked = true;
    if (evidence.location_check != scan.location_check) {
        evidence.location_check = scan.location_check;
        evidence.dirty = true;
    }
    if (!scan.error.empty()) {
        // Not scanned: a process that is gone says nothing; one whose
        // executable root could not read, or that is too large to scan,
        // hides what it is (`unreadable`).
        if (scan.error_kind.empty() || scan.error_kind == "gone") return;
        evidence.exe_unread = scan.path + " not scanned (" + scan.error_kind + "): " + scan.error;
        evidence.exe_unread_ns = ts_ns;
        evidence.dirty = true;
        return;
    }
    evidence.sha256 = scan.sha256;
    evidence.scanned_ns = ts_ns;
    evidence.exe_path = scan.path;
    evidence.exe_yara_hit = !scan.rules.empty();
    evidence.package_check = scan.package_check;
    evidence.package = scan.package;
    std::vector<std::string_view> ids(scan.signature_ids.begin(), scan.signature_ids.end());
    std::string detail = scan.path + " sha256:" + scan.sha256;
    if (!scan.rules.empty()) detail += " yara:" + join(scan.rules, " ");
    add_hits(evidence, EvidenceField::kYara, ids, ts_ns, detail);
    evidence.dirty = true;  // the sha256 may allowlist it
}

void CorrelatorImpl::record_connect(uint32_t pid, uint64_t ts_ns, const Connect& connect) {
    const bool reached = connect.result == 0 || connect.result == -115 /* EINPROGRESS */;
    static const std::vector<std::string_view> kNone;
    const auto& ids = reached ? match_port_cached(connect.port) : kNone;
    book_.record_connect(pid, ts_ns, connect, !ids.empty());
    if (!reached) return;
    ProcessEvidence& evidence = book_.of(pid);
    if (!ids.empty()) {
        const std::string peer = connect.ip_version == 6
                                     ? "[" + connect.address + "]:" + std::to_string(connect.port)
                                     : connect.address + ":" + std::to_string(connect.port);
        add_hits(evidence, EvidenceField::kPort, ids, ts_ns, peer);
        evidence.peer = DetectionPeer{connect.address, connect.port, connect.domain, ""};
    }
    // The name an observed DNS answer gave the address (net_intel.h).
    if (!connect.domain.empty()) {
        const auto& by_domain = match_cached(signatures::Field::kDomain, connect.domain);
        if (!by_domain.empty()) {
            add_hits(evidence, EvidenceField::kDomain, by_domain, ts_ns, connect.domain);
            evidence.peer = DetectionPeer{connect.address, connect.port, connect.domain, ""};
        }
    }
}

void CorrelatorImpl::record_server_name(uint32_t pid, uint64_t ts_ns, const NetPayload& payload) {
    ProcessEvidence& evidence = book_.of(pid);
    for (const Peer& peer : evidence.peers) {
        if (peer.port != payload.remote_port || peer.address != payload.remote_address ||
            peer.server_name.empty()) {
            continue;
        }
        const auto& ids = match_cached(signatures::Field::kDomain, peer.server_name);
        if (ids.empty()) return;
        add_hits(evidence, EvidenceField::kDomain, ids, ts_ns,
                 peer.server_name + " (TLS server name)");
        evidence.peer = DetectionPeer{peer.address, peer.port, peer.server_name, ""};
        return;
    }
}

void CorrelatorImpl::record_proxied_peer(uint32_t pid, uint64_t ts_ns, Peer& peer, bool created) {
    ProcessEvidence& evidence = book_.of(pid);
    const std::string through = " (through " + peer.via + ")";
    const std::string target = endpoint_text(peer.address, peer.port);
    if (created) {
        if (const auto& ids = match_port_cached(peer.port); !ids.empty()) {
            add_hits(evidence, EvidenceField::kPort, ids, ts_ns, target + through);
            peer.pool_port = true;
            evidence.peer = DetectionPeer{peer.address, peer.port, "", ""};
        }
        if (peer.named) {
            if (const auto& ids = match_cached(signatures::Field::kDomain, peer.address);
                !ids.empty()) {
                add_hits(evidence, EvidenceField::kDomain, ids, ts_ns, peer.address + through);
                evidence.peer = DetectionPeer{"", peer.port, peer.address, ""};
            }
        }
    }
    if (!peer.server_name.empty()) {
        if (const auto& ids = match_cached(signatures::Field::kDomain, peer.server_name);
            !ids.empty()) {
            add_hits(evidence, EvidenceField::kDomain, ids, ts_ns,
                     peer.server_name + " (TLS server name" + through.substr(1));
            evidence.peer =
                DetectionPeer{peer.named ? "" : peer.address, peer.port, peer.server_name, ""};
        }
    }
}

void CorrelatorImpl::record_stratum(uint32_t pid, uint64_t ts_ns, const Stratum& stratum) {
    ProcessEvidence& evidence = book_.of(pid);
    for (const auto& message : stratum.messages) {
        // Signatures see the raw line; the evidence (alerts) a wallet cut to a prefix.
        const auto ids = scanner_.match(signatures::Field::kPayload, message);
        if (!ids.empty()) {
            add_hits(evidence, EvidenceField::kPayload, ids, ts_ns,
                     agent::stratum::redact_wallets(message));
        }
    }
    // hash_rate_threshold (miner-rules.yaml): a rate above it is one more
    // piece of evidence on the payload signatures that matched.
    const auto threshold = rule_set_->hash_rate_threshold();
    const auto flagged = [](const Hit& hit) { return hit.detail.starts_with("hash rate "); };
    if (stratum.hash_rate && threshold && *stratum.hash_rate >= *threshold &&
        std::none_of(evidence.hits.begin(), evidence.hits.end(), flagged)) {
        std::vector<std::string> ids;
        for (const Hit& hit : evidence.hits) {
            if (hit.field == EvidenceField::kPayload) ids.push_back(hit.id);
        }
        char detail[160];
        snprintf(detail, sizeof(detail), "hash rate %.4g H/s%s above hash_rate_threshold %.4g H/s",
                 *stratum.hash_rate,
                 hash_rate_interval(stratum.hash_rate_low, stratum.hash_rate_high).c_str(),
                 *threshold);
        add_hits(evidence, EvidenceField::kPayload,
                 std::vector<std::string_view>(ids.begin(), ids.end()), ts_ns, detail);
    }
    evidence.peer = DetectionPeer{stratum.pool_address, stratum.pool_port, stratum.pool_domain,
                                  stratum.protocol};
    if (stratum.hash_rate && *stratum.hash_rate > evidence.hash_rate.value_or(0)) {
        evidence.hash_rate = stratum.hash_rate;  // the fastest session so far
        evidence.hash_rate_low = stratum.hash_rate_low;
        evidence.hash_rate_high = stratum.hash_rate_high;
        evidence.hash_rate_ns = ts_ns;
        evidence.dirty = true;
    }
}

void CorrelatorImpl::record_file_change(const Event& event, const FileChange& change,
                                        std::vector<const Detection*>& out) {
    // A watched process's writes elsewhere are journaled, not judged.
    if (change.kind.empty()) return;
    const bool persistence = book_.record_file_change(event, change);
    evaluate(event.task.pid, event.ts_ns, out);
    if (!persistence) return;
    for (uint32_t owner : book_.record_persistence(event, change)) {
        evaluate(owner, event.ts_ns, out);
    }
}

void CorrelatorImpl::forget(uint32_t pid) {
    book_.forget(pid);
    auto first = open_.lower_bound({pid, std::string()});
    auto last = first;
    while (last != open_.end() && last->first.first == pid) ++last;
    open_.erase(first, last);
}

void CorrelatorImpl::request(uint32_t pid, const ProcessInfo& info, ProcessEvidence& evidence,
                             uint64_t ts_ns) {
    // Known-bad hashes need every executable's hash; otherwise GPU users
    // and processes with a signature hit are worth the scan.
    const bool hash_all = !rule_set_->known_bad_sha256().empty();
    if (options_.request_scans && !evidence.scan_asked &&
        (evidence.held_gpu || !evidence.hits.empty() || hash_all || !evidence.cpu.empty() ||
         (options_.scan_every_exec && evidence.exec_seen))) {
        evidence.scan_asked = true;
        // A busy process (cpu_usage readings come for busy ones only) is
        // judged by its behaviour: its executable's verdict, package and
        // location check are part of it.
        scan_requests_.push_back(ScanRequest{pid, ts_ns, info.exe,
                                             evidence.held_gpu        ? "gpu_open"
                                             : !evidence.hits.empty() ? "signature"
                                             : hash_all               ? "known_bad"
                                             : !evidence.cpu.empty()  ? "busy_cpu"
                                                                      : "exec"});
    }
    if (options_.request_configs && !evidence.config_asked_gpu) {
        request_configs(pid, info, evidence, ts_ns);
    }
    // A miner signature (ATT&CK T1496, as user rules are) on what the process
    // is, not on its traffic (that is captured already): watch it on any port.
    if (options_.request_watches && !evidence.watch_asked) {
        const auto miner =
            std::find_if(evidence.hits.begin(), evidence.hits.end(), [&](const Hit& hit) {
                const bool image =
                    hit.field == EvidenceField::kProcess || hit.field == EvidenceField::kCmdline ||
                    hit.field == EvidenceField::kConfig || hit.field == EvidenceField::kYara;
                const rules::EffectiveSignature* effective = image ? signature(hit.id) : nullptr;
                return effective && effective->signature.mitre.starts_with("T1496");
            });
        if (miner != evidence.hits.end()) {
            evidence.watch_asked = true;
            watch_requests_.push_back(WatchRequest{pid, ts_ns, miner->id, miner->detail});
        }
    }
}

void CorrelatorImpl::evaluate(uint32_t pid, uint64_t ts_ns, std::vector<const Detection*>& out,
                              bool persistence_only) {
    const ProcessInfo* info = table_.find(pid);
    if (!info) return;
    ProcessEvidence& evidence = book_.of(pid);
    // Again when the process renamed itself since (PR_SET_NAME): a process
    // judged under its parent's name before its own events came is judged
    // under the name it took.
    if (!evidence.matched || evidence.matched_comm != info->comm) {
        match_image(evidence, *info, ts_ns);
    }
    if (info->holds_gpu() != evidence.held_gpu) {
        book_.set_held_gpu(pid, info->holds_gpu());
        if (evidence.held_gpu && evidence.first_gpu_ns == 0) evidence.first_gpu_ns = ts_ns;
        evidence.dirty = true;
    }
    request(pid, *info, evidence, ts_ns);
    // Conditions over time change as time passes; everything else only with
    // new evidence.
    if (!evidence.dirty && !(has_time_rules_ && (!evidence.usage.empty() || !evidence.io.empty() ||
                                                 !evidence.cpu.empty()))) {
        return;
    }
    evidence.dirty = false;
    ++stats_.evaluations;

    std::optional<bool> allowlisted;
    RuleInputs inputs;
    const uint32_t facts = facts_of(*info, evidence);
    for (size_t index = 0; index < rules_.size(); ++index) {
        const CorrelationRule& rule = rules_[index];
        if (!rule.enabled || judged_[index].per_gpu || (judged_[index].needs & ~facts) != 0 ||
            (persistence_only && !rule.persistence_after_detection)) {
            continue;
        }
        const ConditionContext context{
            rule, index, pid, *info, evidence, book_, *rule_set_, ts_ns, realtime_offset_ns_};
        if (!holds(judged_[index].conditions, context, inputs)) continue;
        const JudgedRule& judged = judged_[index];
        const uint32_t supported =
            rule.supporting
                ? add_signals(rule.supporting->signals, judged.signals, "", context, inputs)
                : 0;
        const uint32_t countered =
            rule.counter
                ? add_signals(rule.counter->signals, judged.counters, "counter: ", context, inputs)
                : 0;
        raise(rule, *info, evidence, inputs.hits, inputs.extra, supported, countered, ts_ns, out,
              allowlisted);
    }
    note_flagged(pid, evidence, ts_ns, out);
}

bool CorrelatorImpl::holds(const Conditions& conditions, const ConditionContext& context,
                           RuleInputs& in) const {
    in.hits.clear();
    in.extra.clear();
    for (const auto& condition : conditions) {
        if (!condition->holds(context, in)) return false;
    }
    for (const auto& condition : conditions) condition->held(context, in);
    return true;
}

void CorrelatorImpl::note_flagged(uint32_t pid, ProcessEvidence& evidence, uint64_t ts_ns,
                                  std::vector<const Detection*>& out) {
    if (evidence.flagged) return;
    const auto first = open_.lower_bound({pid, std::string()});
    if (first == open_.end() || first->first.first != pid) return;
    evidence.flagged = true;
    if (book_.attribute_recent_persistence(pid, ts_ns)) {
        evidence.dirty = true;
        evaluate(pid, ts_ns, out, /*persistence_only=*/true);
    }
}

}  // namespace gpuguard::agent
