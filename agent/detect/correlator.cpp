// Correlator: per-process state from events (observe) and the judgement of
// every correlation rule (evaluate, rule_holds). Signature matching of each
// process's image is correlator_signatures.cpp, conditions over time
// correlator_conditions.cpp, raising detections correlator_detections.cpp.
#include "correlator_support.h"

namespace gpuguard::agent {

Result<std::unique_ptr<Correlator>> Correlator::create(
    std::vector<rules::CorrelationRule> rules, std::shared_ptr<const rules::RuleSet> rule_set,
    const ProcessTable& table, CorrelatorOptions options) {
    auto scanner = rule_set->scanner();
    if (!scanner) return Unexpected{scanner.error()};
    return std::unique_ptr<Correlator>(
        new Correlator(std::move(rules), std::move(rule_set), std::move(*scanner), table, options));
}

Correlator::Correlator(std::vector<rules::CorrelationRule> rules,
                       std::shared_ptr<const rules::RuleSet> rule_set, rules::RuleScanner scanner,
                       const ProcessTable& table, CorrelatorOptions options)
    : rules_(std::move(rules)),
      rule_set_(std::move(rule_set)),
      scanner_(std::move(scanner)),
      table_(table),
      options_(options),
      has_time_rules_(time_dependent(rules_)) {
    reset_rule_set_caches();
}

void Correlator::reset_rule_set_caches() {
    signatures_.clear();
    for (const auto& entry : rule_set_->effective()) {
        signatures_.try_emplace(entry.signature.id, &entry);  // the first wins, as in find()
    }
    for (auto& cache : match_cache_) cache.clear();
    port_cache_.clear();
    verdicts_.clear();  // set_rule_set() drops every hit that points here
}

Status Correlator::set_rule_set(std::shared_ptr<const rules::RuleSet> rule_set) {
    auto scanner = rule_set->scanner();
    if (!scanner) return Unexpected{scanner.error()};
    scanner_ = std::move(*scanner);
    rule_set_ = std::move(rule_set);
    reset_rule_set_caches();
    // Signature evidence depends on the rules: match every image again.
    for (auto&& [pid, state] : states_) {
        state.matched = false;
        state.hits.clear();
        state.disguise_ids.clear();
        if (state.env) state.libraries = judge_libraries(*state.env);  // signature signs
        state.dirty = true;
    }
    return {};
}

bool Correlator::time_dependent(const std::vector<rules::CorrelationRule>& rules) {
    return std::any_of(rules.begin(), rules.end(), [](const auto& rule) {
        return rule.memory_growth || rule.sustained_utilization || rule.quiet_io ||
               rule.gpu_memory_above || rule.time_window || !rule.gpu_index_not_in.empty() ||
               !rule.gpu_vendor_not_in.empty();
    });
}

void Correlator::set_rules(std::vector<rules::CorrelationRule> rules) {
    rules_ = std::move(rules);
    has_time_rules_ = time_dependent(rules_);
    for (auto& [key, verdict] : verdicts_) verdict = Verdict{};
    for (auto&& [pid, state] : states_) {
        state.dirty = true;
    }
}

Correlator::ProcessState& Correlator::state(uint32_t pid) { return states_[pid]; }

void Correlator::observe(const Event& event, std::vector<Detection>& out) {
    std::vector<const Detection*> reported;
    observe(event, reported);
    for (const Detection* detection : reported) out.push_back(*detection);
}

void Correlator::report(const Detection& detection, std::vector<const Detection*>& out) {
    for (const Detection*& earlier : out) {
        if (earlier == &detection) {
            reported_twice_.push_back(detection);
            earlier = &reported_twice_.back();
        }
    }
    out.push_back(&detection);
}

void Correlator::observe(const Event& event, std::vector<const Detection*>& out) {
    reported_twice_.clear();
    ++stats_.events;
    const uint32_t pid = event.task.pid;
    struct Visitor {
        Correlator& self;
        const Event& event;
        uint32_t pid;
        std::vector<const Detection*>& out;

        void judge(uint32_t target) { self.evaluate(target, event.ts_ns, out); }

        void operator()(const Exec&) { reset_image(true); }
        // Found running (the /proc bootstrap, a journal segment's start):
        // judged like an exec, but not scanned for scan_every_exec (a host's
        // every process at once would swamp the scan queue at start).
        void operator()(const ProcessSnapshot&) { reset_image(false); }
        void reset_image(bool exec) {
            ProcessState& state = self.states_[pid];
            state.exec_seen = exec;
            state.matched = false;
            state.hits.erase(std::remove_if(state.hits.begin(), state.hits.end(),
                                            [](const Hit& hit) {
                                                // Network evidence outlives exec; the image's does
                                                // not.
                                                return hit.field != EvidenceField::kPort &&
                                                       hit.field != EvidenceField::kDomain &&
                                                       hit.field != EvidenceField::kPayload;
                                            }),
                             state.hits.end());
            state.dirty = true;
            state.scan_asked = false;
            state.config_asked = state.config_asked_gpu = false;
            state.sha256.clear();
            judge(pid);
        }
        void operator()(const ExeScan& scan) {
            // A verdict that arrives after the exit has nobody to judge.
            const ProcessInfo* info = self.table_.find(pid);
            if (!info || info->exited) return;
            if (!scan.library.empty()) {
                self.observe_library_scan(pid, event.ts_ns, scan);
                return judge(pid);
            }
            ProcessState& state = self.states_[pid];
            state.scan_asked = true;
            if (!scan.error.empty()) return;
            state.sha256 = scan.sha256;
            state.scanned_ns = event.ts_ns;
            std::vector<std::string_view> ids(scan.signature_ids.begin(), scan.signature_ids.end());
            std::string detail = scan.path + " sha256:" + scan.sha256;
            if (!scan.rules.empty()) detail += " yara:" + join(scan.rules, " ");
            self.add_hits(state, EvidenceField::kYara, ids, event.ts_ns, detail);
            state.dirty = true;  // the sha256 may allowlist it
            judge(pid);
        }
        void operator()(const GpuOpen& open) {
            if (open.succeeded()) judge(pid);
        }
        void operator()(const GpuIoctl&) { judge(pid); }
        void operator()(const Connect& connect) {
            ProcessState& state = self.states_[pid];
            state.connect_ts.push_back(event.ts_ns);
            if (state.connect_ts.size() > 64) state.connect_ts.erase(state.connect_ts.begin());
            if (connect.result == 0 || connect.result == -115 /* EINPROGRESS */) {
                const auto& ids = self.match_port_cached(connect.port);
                if (!connect.loopback) {
                    state.peers.push_back(Peer{event.ts_ns, connect.address, connect.port,
                                               !connect.domain.empty(), !ids.empty(), ""});
                    if (state.peers.size() > 16) state.peers.erase(state.peers.begin());
                    state.dirty = true;
                }
                if (!ids.empty()) {
                    const std::string peer =
                        connect.ip_version == 6
                            ? "[" + connect.address + "]:" + std::to_string(connect.port)
                            : connect.address + ":" + std::to_string(connect.port);
                    self.add_hits(state, EvidenceField::kPort, ids, event.ts_ns, peer);
                    state.peer = DetectionPeer{connect.address, connect.port, connect.domain, ""};
                }
                // The name an observed DNS answer gave the address (net_intel.h).
                if (!connect.domain.empty()) {
                    const auto& by_domain =
                        self.match_cached(signatures::Field::kDomain, connect.domain);
                    if (!by_domain.empty()) {
                        self.add_hits(state, EvidenceField::kDomain, by_domain, event.ts_ns,
                                      connect.domain);
                        state.peer =
                            DetectionPeer{connect.address, connect.port, connect.domain, ""};
                    }
                }
            }
            judge(pid);
        }
        void operator()(const ConfigFile& file) {
            self.observe_config_file(pid, event.ts_ns, file);
            judge(pid);
        }
        void operator()(const HiddenProcess& hidden) {
            Correlator::observe_hidden(self.states_[pid], event.ts_ns, hidden);
            judge(pid);
        }
        void operator()(const ModuleLoad& module) {
            self.observe_module_load(pid, event.ts_ns, module);
            judge(pid);
        }
        void operator()(const FileChange& change) { self.observe_file_change(event, change, out); }
        // Judged with the GPU event or exec that follows.
        void operator()(const ProcessEnv& env) { self.observe_env(pid, event.ts_ns, env); }
        void operator()(const Container&) {}  // the table keeps it; its snapshot follows
        // Raw samples: net_intel.h derives Stratum events from them; here only
        // what protocol a connection's first message speaks (opaque_peer).
        void operator()(const NetPayload& payload) {
            if (payload.direction != NetPayload::Direction::kOut || payload.seq != 0 ||
                payload.dns) {
                return;
            }
            ProcessState& state = self.states_[pid];
            for (Peer& peer : state.peers) {
                if (peer.protocol.empty() && peer.port == payload.remote_port &&
                    peer.address == payload.remote_address) {
                    peer.protocol = first_bytes_protocol(payload.data);
                    state.dirty = true;
                    judge(pid);
                    return;
                }
            }
        }
        void operator()(const Stratum& stratum) {
            ProcessState& state = self.states_[pid];
            for (const auto& message : stratum.messages) {
                // Signatures see the raw line; the evidence (alerts) a wallet cut to a prefix.
                const auto ids = self.scanner_.match(signatures::Field::kPayload, message);
                if (!ids.empty()) {
                    self.add_hits(state, EvidenceField::kPayload, ids, event.ts_ns,
                                  agent::stratum::redact_wallets(message));
                }
            }
            // hash_rate_threshold (miner-rules.yaml): a rate above it is one more
            // piece of evidence on the payload signatures that matched.
            const auto threshold = self.rule_set_->hash_rate_threshold();
            const auto flagged = [](const Hit& hit) {
                return hit.detail.starts_with("hash rate ");
            };
            if (stratum.hash_rate && threshold && *stratum.hash_rate >= *threshold &&
                std::none_of(state.hits.begin(), state.hits.end(), flagged)) {
                std::vector<std::string> ids;
                for (const Hit& hit : state.hits) {
                    if (hit.field == EvidenceField::kPayload) ids.push_back(hit.id);
                }
                char detail[128];
                snprintf(detail, sizeof(detail),
                         "hash rate %.4g H/s above hash_rate_threshold %.4g H/s",
                         *stratum.hash_rate, *threshold);
                self.add_hits(state, EvidenceField::kPayload,
                              std::vector<std::string_view>(ids.begin(), ids.end()), event.ts_ns,
                              detail);
            }
            state.peer = DetectionPeer{stratum.pool_address, stratum.pool_port, stratum.pool_domain,
                                       stratum.protocol};
            if (stratum.hash_rate && *stratum.hash_rate > state.hash_rate.value_or(0)) {
                state.hash_rate = stratum.hash_rate;  // the fastest session so far
                state.hash_rate_ns = event.ts_ns;
                state.dirty = true;
            }
            judge(pid);
        }
        void operator()(const ProcessIo& io) {
            ProcessState& state = self.states_[pid];
            state.io.push_back(IoSample{event.ts_ns, io});
            if (state.io.size() > self.options_.max_telemetry_samples) {
                state.io.erase(state.io.begin());
            }
            state.dirty = true;
            judge(pid);
        }
        void operator()(const AgentTamper& tamper) {
            note_tamper(self.states_[pid], event, tamper);
            judge(pid);
        }
        void operator()(const Fork&) {}
        void operator()(const KillNow&) {}  // already enforced in the kernel; exit follows
        void operator()(const Exit&) {
            self.states_.erase(pid);
            self.flagged_.erase(pid);
            auto first = self.open_.lower_bound({pid, std::string()});
            auto last = first;
            while (last != self.open_.end() && last->first.first == pid) ++last;
            self.open_.erase(first, last);
        }
        void operator()(const Telemetry& telemetry) {
            for (const auto& device : telemetry.devices) {
                GpuTelemetry& reading = self.gpu_by_device_[device];  // updated in place
                reading.index = telemetry.gpu_index;
                reading.vendor = telemetry.vendor;
                reading.utilization_percent = telemetry.utilization_percent;
                reading.processes.clear();
                for (const auto& usage : telemetry.processes) {
                    auto same = std::find_if(
                        reading.processes.begin(), reading.processes.end(),
                        [&](const ProcessGpuUsage& known) { return known.pid == usage.pid; });
                    if (same != reading.processes.end()) {
                        *same = usage;
                    } else {
                        reading.processes.push_back(usage);
                    }
                }
            }
            for (const auto& usage : telemetry.processes) {
                ProcessState& state = self.states_[usage.pid];
                state.usage.push_back(
                    UsageSample{event.ts_ns, usage.memory_bytes, usage.compute_percent});
                if (state.usage.size() > self.options_.max_telemetry_samples) {
                    state.usage.erase(state.usage.begin());
                }
                state.dirty = true;
                judge(usage.pid);
            }
        }
    };
    std::visit(Visitor{*this, event, pid, out}, event.data);
}

void Correlator::evaluate(uint32_t pid, uint64_t ts_ns, std::vector<const Detection*>& out,
                          bool persistence_only) {
    const ProcessInfo* info = table_.find(pid);
    if (!info) return;
    ProcessState& state = states_[pid];
    // Again when the process renamed itself since (PR_SET_NAME): a process
    // judged under its parent's name before its own events came is judged
    // under the name it took.
    if (!state.matched || state.matched_comm != info->comm) match_image(state, *info, ts_ns);
    if (info->holds_gpu() != state.held_gpu) {
        state.held_gpu = info->holds_gpu();
        if (state.held_gpu && state.first_gpu_ns == 0) state.first_gpu_ns = ts_ns;
        state.dirty = true;
    }
    // Known-bad hashes need every executable's hash; otherwise GPU users
    // and processes with a signature hit are worth the scan.
    const bool hash_all = !rule_set_->known_bad_sha256().empty();
    if (options_.request_scans && !state.scan_asked &&
        (state.held_gpu || !state.hits.empty() || hash_all ||
         (options_.scan_every_exec && state.exec_seen))) {
        state.scan_asked = true;
        scan_requests_.push_back(ScanRequest{pid, ts_ns, info->exe,
                                             state.held_gpu        ? "gpu_open"
                                             : !state.hits.empty() ? "signature"
                                             : hash_all            ? "known_bad"
                                                                   : "exec"});
    }
    if (options_.request_configs && !state.config_asked_gpu) {
        request_configs(pid, *info, state, ts_ns);
    }
    // A miner signature (ATT&CK T1496, as user rules are) on what the process
    // is, not on its traffic (that is captured already): watch it on any port.
    if (options_.request_watches && !state.watch_asked) {
        const auto miner = std::find_if(state.hits.begin(), state.hits.end(), [&](const Hit& hit) {
            const bool image =
                hit.field == EvidenceField::kProcess || hit.field == EvidenceField::kCmdline ||
                hit.field == EvidenceField::kConfig || hit.field == EvidenceField::kYara;
            const rules::EffectiveSignature* effective = image ? signature(hit.id) : nullptr;
            return effective && effective->signature.mitre.starts_with("T1496");
        });
        if (miner != state.hits.end()) {
            state.watch_asked = true;
            watch_requests_.push_back(WatchRequest{pid, ts_ns, miner->id, miner->detail});
        }
    }
    // Telemetry conditions depend on time passing; everything else only on
    // new evidence.
    if (!state.dirty && !(has_time_rules_ && (!state.usage.empty() || !state.io.empty()))) {
        return;
    }
    state.dirty = false;
    ++stats_.evaluations;

    std::optional<bool> allowlisted;
    RuleInputs inputs;
    for (size_t index = 0; index < rules_.size(); ++index) {
        const CorrelationRule& rule = rules_[index];
        if (persistence_only && !rule.persistence_after_detection) continue;
        if (!rule_holds(rule, index, pid, *info, state, ts_ns, inputs)) continue;
        const uint32_t supported =
            rule.supporting ? add_support(rule, pid, *info, state, ts_ns, inputs) : 0;
        raise(rule, *info, state, inputs.hits, inputs.extra, supported, ts_ns, out, allowlisted);
    }
    note_flagged(pid, state, ts_ns, out);
}

// Whether `rule` holds for the process now; its hits and the evidence
// beyond them are left in `in`. Each condition the rule sets must hold.
bool Correlator::rule_holds(const CorrelationRule& rule, size_t cache_index, uint32_t pid,
                            const ProcessInfo& info, const ProcessState& state, uint64_t ts_ns,
                            RuleInputs& in) {
    if (!rule.enabled) return false;
    if (rule.gpu_held && *rule.gpu_held != info.holds_gpu()) return false;
    if (rule.scope && !in_scope(*rule.scope, info)) return false;
    in.hits.clear();
    in.extra.clear();
    // The first piece of extra evidence, made once the rule holds.
    const bool gpu_evidence = rule.gpu_held.value_or(false) && !info.gpus.empty();
    if (rule.signature) {
        for (const Hit& hit : state.hits) {
            const bool matches = cache_index == kUncached
                                     ? rule.signature->matches(hit.field, hit.id, hit.confidence)
                                     : signature_matches(cache_index, hit);
            if (matches) in.hits.push_back(&hit);
        }
        if (in.hits.empty()) return false;
    }
    if (!rule.exe_location.empty()) {
        if (!in.locations_known) {
            in.locations = rules::exe_locations(info.exe, info.exe_package);
            in.locations_known = true;
        }
        const bool inside =
            std::any_of(rule.exe_location.begin(), rule.exe_location.end(), [&](auto where) {
                return std::find(in.locations.begin(), in.locations.end(), where) !=
                       in.locations.end();
            });
        if (!inside) return false;
        in.extra.push_back(
            Evidence{ts_ns, "event", "exec", "", "process", "executable " + info.exe});
    }
    if (rule.hash_rate_above_threshold) {
        const auto threshold = rule_set_->hash_rate_threshold();
        if (!threshold || !state.hash_rate || *state.hash_rate < *threshold) return false;
        char detail[128];
        snprintf(detail, sizeof(detail), "hash rate %.4g H/s above hash_rate_threshold %.4g H/s",
                 *state.hash_rate, *threshold);
        in.extra.push_back(
            Evidence{state.hash_rate_ns, "event", "stratum", "", "hash_rate", detail});
    }
    if (rule.known_bad_executable) {
        if (state.sha256.empty() || !rule_set_->known_bad_sha256().contains(state.sha256)) {
            return false;
        }
        in.extra.push_back(
            Evidence{state.scanned_ns, "event", "exe_scan", "", "sha256",
                     info.exe + " sha256:" + state.sha256 + " is in known_bad.sha256"});
    }
    if (!rule.agent_tamper.empty() && !tampered(rule, state, in.extra)) return false;
    if (rule.disguised) {
        // Only executables the rule's signature condition names count.
        const auto disguises = [&](const Hit& hit) {
            return hit.field == EvidenceField::kProcess && hit.detail == info.exe &&
                   std::find(state.disguise_ids.begin(), state.disguise_ids.end(), hit.id) !=
                       state.disguise_ids.end();
        };
        std::vector<const Hit*> disguise;
        for (const Hit* hit : in.hits) {
            if (disguises(*hit)) disguise.push_back(hit);
        }
        if (!rule.signature) {
            for (const Hit& hit : state.hits) {
                if (disguises(hit)) disguise.push_back(&hit);
            }
        }
        if (disguise.empty()) return false;
        in.hits = std::move(disguise);
        in.extra.push_back(Evidence{ts_ns, "event", "exec", "", "process",
                                    "comm '" + info.comm + "' hides executable " + info.exe});
    }
    if (rule.memory_growth) {
        std::string detail;
        if (!memory_growth(*rule.memory_growth, state, ts_ns, detail)) return false;
        in.extra.push_back(Evidence{ts_ns, "telemetry", "telemetry", "", "memory", detail});
    }
    if (rule.sustained_utilization) {
        std::string detail;
        if (!sustained(*rule.sustained_utilization, state, ts_ns, detail)) return false;
        in.extra.push_back(Evidence{ts_ns, "telemetry", "telemetry", "", "utilization", detail});
    }
    if (rule.quiet_io) {
        std::string detail;
        if (!quiet_io(*rule.quiet_io, state, ts_ns, detail)) return false;
        in.extra.push_back(Evidence{ts_ns, "telemetry", "process_io", "", "io", detail});
    }
    if (rule.gpu_memory_above) {
        const auto& latest = state.usage.empty() ? UsageSample{} : state.usage.back();
        if (!latest.memory_bytes || *latest.memory_bytes <= *rule.gpu_memory_above) return false;
        in.extra.push_back(Evidence{latest.ts_ns, "policy", "telemetry", "", "memory",
                                    "GPU memory " + gib(*latest.memory_bytes) + " over the limit " +
                                        gib(*rule.gpu_memory_above)});
    }
    if (!rule.gpu_index_not_in.empty() || !rule.gpu_vendor_not_in.empty()) {
        std::string outside;
        for (const auto& gpu : gpus_of(info)) {
            if (!rule.gpu_index_not_in.empty() && gpu.index >= 0 &&
                std::find(rule.gpu_index_not_in.begin(), rule.gpu_index_not_in.end(),
                          static_cast<uint32_t>(gpu.index)) == rule.gpu_index_not_in.end()) {
                outside = "GPU " + std::to_string(gpu.index) + " is not an allowed GPU";
            }
            if (!rule.gpu_vendor_not_in.empty() && !gpu.vendor.empty() &&
                std::find(rule.gpu_vendor_not_in.begin(), rule.gpu_vendor_not_in.end(),
                          gpu.vendor) == rule.gpu_vendor_not_in.end()) {
                outside = "GPU " + std::to_string(gpu.index) + " is " + gpu.vendor +
                          ", not an allowed vendor";
            }
        }
        if (outside.empty()) return false;
        in.extra.push_back(Evidence{ts_ns, "policy", "gpu_open", "", "gpu", outside});
    }
    if (rule.max_gpu_processes) {
        std::string detail;
        if (!over_process_limit(pid, info, *rule.max_gpu_processes, detail)) return false;
        in.extra.push_back(Evidence{ts_ns, "policy", "gpu_open", "", "processes", detail});
    }
    if (rule.opaque_peer) {
        std::string detail;
        if (!opaque_peer(state, detail)) return false;
        in.extra.push_back(Evidence{ts_ns, "event", "connect", "", "peer", detail});
    }
    if (rule.hidden_from_proc) {
        if (state.hidden_ns == 0) return false;
        in.extra.push_back(
            Evidence{state.hidden_ns, "event", "hidden_process", "", "hidden", state.hidden});
    }
    if (rule.module_load &&
        !module_load_holds(*rule.module_load, rule.window, info, state, ts_ns, in.extra)) {
        return false;
    }
    if (!file_conditions_hold(rule, state, ts_ns, cache_index != kUncached, in.extra)) {
        return false;
    }
    if (rule.time_window) {
        // Last: the window alone never makes a violation, it scopes one.
        const int64_t wall_ns = static_cast<int64_t>(ts_ns) + realtime_offset_ns_;
        if (!rule.time_window->contains(wall_ns)) return false;
        in.extra.push_back(
            Evidence{ts_ns, "policy", "", "", "time",
                     "inside the policy's time window (" + rule.time_window->time_zone + ")"});
    }
    if (gpu_evidence) {
        const GpuHandle& first = info.gpus.front();
        in.extra.insert(
            in.extra.begin(),
            Evidence{state.first_gpu_ns, "event", first.inherited ? "fork" : "gpu_open", "", "gpu",
                     "holds GPU device " + std::to_string(first.major) + ":" +
                         std::to_string(first.minor)});
    }
    return true;
}

}  // namespace gpuguard::agent
