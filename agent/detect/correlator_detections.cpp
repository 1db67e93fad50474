// Detections from rules that hold: their supporting signals, raising one (allowlist, dry run,
// action) and refreshing it with new evidence.
#include "correlator_support.h"
#include "flow_shape.h"

namespace gpuguard::agent {

void CorrelatorImpl::refresh(Detection& detection, const ProcessInfo& info,
                             const ProcessEvidence& evidence, const std::vector<const Hit*>& hits,
                             uint64_t ts_ns) const {
    for (const Hit* hit : hits) detection.signature_ids.push_back(hit->id);
    std::sort(detection.signature_ids.begin(), detection.signature_ids.end());
    detection.signature_ids.erase(
        std::unique(detection.signature_ids.begin(), detection.signature_ids.end()),
        detection.signature_ids.end());
    detection.last_seen_ns = ts_ns;
    detection.time_unix_ns =
        realtime_offset_ns_ ? static_cast<int64_t>(ts_ns) + realtime_offset_ns_ : 0;
    detection.process = describe_process(info);
    detection.gpus = book_.gpus_of(info);
    if (evidence.peer) detection.peer = evidence.peer;
}

uint32_t CorrelatorImpl::add_signals(const std::vector<CorrelationRule>& signals,
                                     const std::vector<Conditions>& judged,
                                     const std::string& label, const ConditionContext& rule_context,
                                     RuleInputs& in) const {
    uint32_t held = 0;
    RuleInputs signal_inputs;
    for (size_t i = 0; i < judged.size(); ++i) {
        const CorrelationRule& signal = signals[i];
        const ConditionContext signal_context{signal,
                                              kSupportingSignal,
                                              rule_context.pid,
                                              rule_context.info,
                                              rule_context.evidence,
                                              rule_context.book,
                                              rule_context.rule_set,
                                              rule_context.ts_ns,
                                              rule_context.realtime_offset_ns};
        signal_inputs.locations_known = false;
        if (!holds(judged[i], signal_context, signal_inputs)) continue;
        ++held;
        for (const Hit* hit : signal_inputs.hits) {
            if (std::find(in.hits.begin(), in.hits.end(), hit) == in.hits.end()) {
                in.hits.push_back(hit);
            }
        }
        for (Evidence& item : signal_inputs.extra) {
            item.detail = label + signal.name + ": " + item.detail;
            in.extra.push_back(std::move(item));
        }
        if (signal_inputs.hits.empty() && signal_inputs.extra.empty()) {
            in.extra.push_back(Evidence{rule_context.ts_ns,
                                        label.empty() ? "supporting" : "counter", "", "", "signal",
                                        label + signal.name});
        }
    }
    return held;
}

bool CorrelatorImpl::adds_evidence(const Detection& detection, const std::vector<const Hit*>& hits,
                                   const std::vector<Evidence>& extra) const {
    // The test raise() applies to each item; an item it would take is one
    // that no evidence of the open detection already covers.
    if (detection.evidence.size() >= options_.max_evidence) return false;
    const auto known = [&](std::string_view kind, std::string_view event_type,
                           std::string_view signature_id, std::string_view field,
                           std::string_view detail) {
        const bool by_value = evidence_by_value(kind, event_type, field);
        return std::any_of(detection.evidence.begin(), detection.evidence.end(),
                           [&](const Evidence& seen) {
                               return seen.kind == kind && seen.signature_id == signature_id &&
                                      seen.field == field && (!by_value || seen.detail == detail);
                           });
    };
    for (const Hit* hit : hits) {
        if (!known(hit->field == EvidenceField::kYara ? "yara" : "signature", "", hit->id,
                   rules::to_string(hit->field), hit->detail)) {
            return true;
        }
    }
    return std::any_of(extra.begin(), extra.end(), [&](const Evidence& item) {
        return !known(item.kind, item.event_type, item.signature_id, item.field, item.detail);
    });
}

void CorrelatorImpl::raise(const CorrelationRule& rule, const ProcessInfo& info,
                           const ProcessEvidence& process, const std::vector<const Hit*>& hits,
                           std::vector<Evidence>& extra, uint32_t supported, uint32_t countered,
                           uint64_t ts_ns, std::vector<const Detection*>& out,
                           std::optional<bool>& allowlisted, std::string_view gpu) {
    double confidence = rule.base_confidence;
    Severity severity = rule.severity;
    // Each counter-signal that holds (what benign work shows) cancels one
    // supporting signal; with none left it lowers the rule's own severity.
    const uint32_t cancelled = std::min(supported, countered);
    supported -= cancelled;
    countered -= cancelled;
    if (supported > 0) {
        const rules::SupportingSignals& support = *rule.supporting;
        for (uint32_t i = 0; i < supported; ++i) {
            confidence = 1.0 - (1.0 - confidence) * (1.0 - support.weight);
        }
        // Lower is more severe; support never lowers a rule's own severity.
        if (support.severity && supported >= support.min && *support.severity < severity) {
            severity = *support.severity;
        }
    } else if (countered > 0 || cancelled > 0) {
        severity = std::max(severity, *rule.counter->severity);
        confidence *= 1.0 - rule.counter->weight;
    }
    std::string action = rule.action == "from_signatures" ? "alert" : rule.action;
    for (const Hit* hit : hits) {
        confidence = rule.combine == rules::Combine::kMax
                         ? std::max(confidence, hit->confidence)
                         : 1.0 - (1.0 - confidence) * (1.0 - hit->confidence);
        if (rule.action == "from_signatures" && action_rank(hit->action) > action_rank(action)) {
            action = hit->action;
        }
    }
    confidence = std::round(std::min(confidence, 1.0) * 1000) / 1000;  // stable in JSON
    if (confidence < rule.min_confidence) return;

    // A change to the agent's own trust is judged whatever the allowlist
    // says: a drop-in that allowlists its own writer must not hide itself.
    if (!allowlisted && !rule.trust_change) {
        // The sha256 is known once the executable's exe_scan came back.
        rules::ProcessIdentity identity{info.user,
                                        static_cast<int64_t>(info.uid),
                                        info.exe,
                                        process.sha256,
                                        info.container ? info.container->id : "",
                                        info.container ? info.container_details.name : ""};
        allowlisted = rule_set_->allowlisted(identity);
    }
    if (!rule.trust_change && *allowlisted) {
        ++stats_.allowlisted;
        return;
    }
    // A GPU's detection: one per GPU and rule, nobody flagged.
    const std::string rule_key = gpu.empty() ? rule.id : rule.id + "@" + std::string(gpu);
    if (gpu.empty()) book_.flag(rule, info, severity);
    const auto key = std::make_pair(info.pid, rule_key);
    auto found = open_.find(key);
    const bool open = found != open_.end() && ts_ns < found->second.window_end_ns;
    // Most reports of an open detection bring nothing new: say so before
    // building its evidence.
    if (open && !adds_evidence(found->second.detection, hits, extra)) return;

    std::vector<Evidence> evidence;
    evidence.reserve(hits.size() + extra.size());
    for (const Hit* hit : hits) {
        const char* event_type = hit->field == EvidenceField::kPort      ? "connect"
                                 : hit->field == EvidenceField::kDomain  ? "connect"
                                 : hit->field == EvidenceField::kPayload ? "stratum"
                                 : hit->field == EvidenceField::kProcess ? "exec"
                                 : hit->field == EvidenceField::kCmdline ? "exec"
                                 : hit->field == EvidenceField::kYara    ? "exe_scan"
                                 : hit->field == EvidenceField::kConfig  ? "config_file"
                                                                         : "";
        evidence.push_back(
            Evidence{hit->ts_ns, hit->field == EvidenceField::kYara ? "yara" : "signature",
                     event_type, hit->id, rules::to_string(hit->field), hit->detail});
    }
    for (auto& item : extra) evidence.push_back(std::move(item));
    // Oldest first, equal times in the order above: an insertion sort, which
    // for a detection's few items costs less than stable_sort's buffer.
    for (size_t i = 1; i < evidence.size(); ++i) {
        for (size_t j = i; j > 0 && evidence[j].ts_ns < evidence[j - 1].ts_ns; --j) {
            std::swap(evidence[j], evidence[j - 1]);
        }
    }

    if (open) {
        // Within the window: update when something new arrived.
        Detection& detection = found->second.detection;
        bool changed = false;
        for (auto& item : evidence) {
            // Signature evidence is new when its value is; an event or a
            // telemetry condition once per field (its numbers change every sample).
            const bool by_value = evidence_by_value(item.kind, item.event_type, item.field);
            const bool known = std::any_of(
                detection.evidence.begin(), detection.evidence.end(), [&](const Evidence& seen) {
                    return seen.kind == item.kind && seen.signature_id == item.signature_id &&
                           seen.field == item.field && (!by_value || seen.detail == item.detail);
                });
            if (known || detection.evidence.size() >= options_.max_evidence) continue;
            detection.evidence.push_back(std::move(item));
            changed = true;
        }
        if (!changed) return;
        detection.confidence = std::max(detection.confidence, confidence);
        detection.severity = std::min(detection.severity, severity);
        if (action_rank(action) > action_rank(detection.action)) detection.action = action;
        refresh(detection, info, process, hits, ts_ns);
        ++detection.update;
        ++stats_.updates;
        report(detection, out);
        return;
    }

    // Built where it stays open (a window that ended is replaced).
    ++stats_.detections;
    Open& stored = found != open_.end() ? found->second : open_.try_emplace(key).first->second;
    stored.window_end_ns = ts_ns + static_cast<uint64_t>(rule.window.count()) * 1'000'000'000ull;
    Detection& detection = stored.detection;
    detection = Detection{};
    detection.first_seen_ns = evidence.empty() ? ts_ns : std::min(ts_ns, evidence.front().ts_ns);
    detection.id = detection_id(rule_key, info.pid, ts_ns);
    detection.rule_id = rule.id;
    detection.rule_name = rule.name;
    detection.ruleset = "gpuguard-correlation";
    detection.description = rule.description;
    detection.severity = severity;
    detection.confidence = confidence;
    detection.mitre_technique_id = rule.mitre_id;
    detection.mitre_technique_name = rule.mitre_name;
    detection.mitre_tactic = rule.mitre_tactic;
    refresh(detection, info, process, hits, ts_ns);
    if (evidence.size() > options_.max_evidence) evidence.resize(options_.max_evidence);
    detection.evidence = std::move(evidence);
    detection.action = std::move(action);
    detection.dry_run = options_.dry_run || rule.dry_run;
    report(detection, out);
    if (gpu.empty() && rule.opaque_peer && options_.request_probes) {
        request_probes(rule, info.pid, ts_ns);
    }
}

void CorrelatorImpl::request_probes(const rules::CorrelationRule& rule, uint32_t pid,
                                    uint64_t ts_ns) {
    ProcessEvidence& evidence = book_.of(pid);
    for (const Peer& peer : evidence.peers) {
        if (evidence.probes_asked.size() >= kMaxProbesPerProcess) return;
        if (!unvouched(evidence, peer)) continue;
        std::string key = endpoint_text(peer.address, peer.port);
        if (std::find(evidence.probes_asked.begin(), evidence.probes_asked.end(), key) !=
            evidence.probes_asked.end()) {
            continue;
        }
        evidence.probes_asked.push_back(std::move(key));
        probe_requests_.push_back(ProbeRequest{pid, ts_ns, peer.address, peer.port,
                                               peer.protocol == "tls", peer.server_name, rule.id});
    }
}

}  // namespace gpuguard::agent
