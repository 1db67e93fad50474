// ECS and OCSF JSON. ECS, the record every output writes, goes straight to
// text through siem/json_writer.h; OCSF is built with nlohmann::ordered_json
// (key order is insertion order) and dumped with invalid UTF-8 replaced. Both
// give byte-identical lines for identical records.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpuguard/siem/siem.h"
#include "siem/format_container.h"
#include "siem/format_util.h"
#include "siem/json_writer.h"

namespace gpuguard::siem {
namespace {

using Json = nlohmann::ordered_json;

constexpr const char* kEcsVersion = "8.11.0";
constexpr const char* kOcsfVersion = "1.1.0";

std::string dump(const Json& json) {
    return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

// A double as JSON, null when not finite (JSON has no NaN).
Json number(double value) { return std::isfinite(value) ? Json(value) : Json(nullptr); }

Json gpu_json(const DetectionGpu& gpu) {
    Json json;
    json["major"] = gpu.major;
    json["minor"] = gpu.minor;
    put_if(json, "device", gpu.device);
    if (gpu.index >= 0) json["index"] = gpu.index;
    put_if(json, "vendor", gpu.vendor);
    if (gpu.utilization_percent) json["utilization_percent"] = number(*gpu.utilization_percent);
    if (gpu.memory_used_bytes) json["memory_used_bytes"] = *gpu.memory_used_bytes;
    if (gpu.process_utilization_percent) {
        json["process_utilization_percent"] = number(*gpu.process_utilization_percent);
    }
    if (gpu.mig_gpu_instance) json["mig_gpu_instance"] = *gpu.mig_gpu_instance;
    return json;
}

Json evidence_json(const Evidence& evidence) {
    Json json;
    json["ts_ns"] = evidence.ts_ns;
    json["kind"] = evidence.kind;
    put_if(json, "event_type", evidence.event_type);
    put_if(json, "signature_id", evidence.signature_id);
    put_if(json, "field", evidence.field);
    put_if(json, "detail", evidence.detail);
    return json;
}

// The ECS records are written straight to text (siem/json_writer.h); the
// shape below is what the nlohmann DOM dump gave, nulls included: an object
// the DOM built with no member came out as null.

// "name":[item]
void one_item_list(JsonWriter& out, std::string_view name, std::string_view item) {
    out.key(name);
    out.begin_array();
    out.value(item);
    out.end_array();
}

// "name":{"key":value}
template <typename T>
void one_member_object(JsonWriter& out, std::string_view name, std::string_view key,
                       const T& value) {
    out.key(name);
    out.begin_object();
    out.member(key, value);
    out.end_object();
}

void ecs_severity_log(JsonWriter& out, Severity severity) {
    out.key("log");
    out.begin_object();
    out.member("level", to_string(severity));
    out.key("syslog");
    out.begin_object();
    out.key("severity");
    out.begin_object();
    out.member("code", syslog_level(severity));
    out.member("name", to_string(severity));
    out.end_object();
    out.end_object();
    out.end_object();
}

void ecs_user(JsonWriter& out, const DetectionProcess& process) {
    out.key("user");
    out.begin_object();
    out.member("id", std::to_string(process.uid));
    out.member_if("name", process.user);
    out.end_object();
}

void ecs_process(JsonWriter& out, const DetectionProcess& process) {
    out.key("process");
    out.begin_object();
    out.member("pid", process.pid);
    if (process.ppid != 0) {
        one_member_object(out, "parent", "pid", process.ppid);
    }
    out.member_if("name", process.comm);
    out.member_if("executable", process.executable);
    if (!process.argv.empty()) {
        out.key("args");
        out.begin_array();
        for (const auto& arg : process.argv) out.value(arg);
        out.end_array();
        out.member("args_count", process.argv.size());
    }
    out.member_if("command_line", process.command_line);
    if (!process.sha256.empty()) {
        one_member_object(out, "hash", "sha256", process.sha256);
    }
    ecs_user(out, process);
    one_member_object(out, "group", "id", std::to_string(process.gid));
    out.end_object();
}

void ecs_common_tail(JsonWriter& out, const DetectionProcess& process,
                     const std::optional<DetectionPeer>& peer, const HostInfo& host) {
    if (process.pid != 0 || !process.executable.empty()) {
        ecs_process(out, process);
        ecs_user(out, process);
    }
    if (peer) {
        out.key("destination");
        if (peer->ip.empty() && peer->port == 0 && peer->domain.empty()) {
            out.value(nullptr);
        } else {
            out.begin_object();
            out.member_if("ip", peer->ip);
            if (peer->port != 0) out.member("port", peer->port);
            out.member_if("domain", peer->domain);
            out.end_object();
        }
        out.key("network");
        out.begin_object();
        out.member("transport", "tcp");
        out.member_if("protocol", peer->protocol);
        out.end_object();
    }
    out.key("host");
    out.begin_object();
    out.member_if("hostname", host.hostname);
    out.member_if("name", host.hostname);
    if (!host.boot_id.empty()) {
        one_member_object(out, "boot", "id", host.boot_id);
    }
    out.key("os");
    out.begin_object();
    out.member("type", "linux");
    out.member_if("kernel", host.kernel);
    out.end_object();
    out.end_object();
    out.key("agent");
    out.begin_object();
    out.member("type", "gpuguard");
    out.member_if("version", host.agent_version);
    out.end_object();
    ecs_container(out, process);
}

void gpuguard_process(JsonWriter& out, const DetectionProcess& process) {
    out.key("process");
    if (process.comm.empty() && process.cgroup_path.empty() && process.start_time_ns == 0) {
        out.value(nullptr);
        return;
    }
    out.begin_object();
    out.member_if("comm", process.comm);
    out.member_if("cgroup_path", process.cgroup_path);
    if (process.start_time_ns != 0) out.member("start_time_ns", process.start_time_ns);
    out.end_object();
}

void ecs_gpu(JsonWriter& out, const DetectionGpu& gpu) {
    out.begin_object();
    out.member("major", gpu.major);
    out.member("minor", gpu.minor);
    out.member_if("device", gpu.device);
    if (gpu.index >= 0) out.member("index", gpu.index);
    out.member_if("vendor", gpu.vendor);
    if (gpu.utilization_percent) out.member("utilization_percent", *gpu.utilization_percent);
    if (gpu.memory_used_bytes) out.member("memory_used_bytes", *gpu.memory_used_bytes);
    if (gpu.process_utilization_percent) {
        out.member("process_utilization_percent", *gpu.process_utilization_percent);
    }
    if (gpu.mig_gpu_instance) out.member("mig_gpu_instance", *gpu.mig_gpu_instance);
    out.end_object();
}

void ecs_evidence(JsonWriter& out, const Evidence& evidence) {
    out.begin_object();
    out.member("ts_ns", evidence.ts_ns);
    out.member("kind", evidence.kind);
    out.member_if("event_type", evidence.event_type);
    out.member_if("signature_id", evidence.signature_id);
    out.member_if("field", evidence.field);
    out.member_if("detail", evidence.detail);
    out.end_object();
}

// The members every ECS record starts with, up to event.category (open).
void ecs_head(JsonWriter& out, int64_t time_unix_ns, const char* kind, const std::string& id,
              const DetectionProcess& process, const std::optional<DetectionPeer>& peer) {
    if (time_unix_ns != 0) out.member("@timestamp", rfc3339_utc(time_unix_ns));
    one_member_object(out, "ecs", "version", kEcsVersion);
    out.key("event");
    out.begin_object();
    out.member("kind", kind);
    out.member("id", id);
    out.key("category");
    out.begin_array();
    out.value("intrusion_detection");
    if (process.pid != 0) out.value("process");
    if (peer) out.value("network");
    out.end_array();
}

// event's members from severity to created.
void ecs_event_rest(JsonWriter& out, Severity severity, const std::string& reason,
                    const char* dataset, int64_t time_unix_ns) {
    out.member("severity", syslog_level(severity));
    out.member("risk_score", risk_score(severity));
    out.member_if("reason", reason);
    out.member("module", "gpuguard");
    out.member("dataset", dataset);
    if (time_unix_ns != 0) out.member("created", rfc3339_utc(time_unix_ns));
}

// ECS event.outcome allows success, failure, unknown only.
const char* ecs_outcome(const std::string& outcome) {
    if (outcome == "success") return "success";
    if (outcome == "failure") return "failure";
    return "unknown";
}

Json ocsf_process(const DetectionProcess& process) {
    Json json;
    json["pid"] = process.pid;
    put_if(json, "name", process.comm);
    put_if(json, "cmd_line", process.command_line);
    if (!process.executable.empty()) {
        Json file;
        file["path"] = process.executable;
        const auto slash = process.executable.rfind('/');
        file["name"] =
            slash == std::string::npos ? process.executable : process.executable.substr(slash + 1);
        file["type_id"] = 1;  // Regular File
        if (!process.sha256.empty()) {
            file["hashes"] = Json::array(
                {{{"algorithm_id", 3}, {"algorithm", "SHA-256"}, {"value", process.sha256}}});
        }
        json["file"] = std::move(file);
    }
    Json user;
    user["uid"] = std::to_string(process.uid);
    put_if(user, "name", process.user);
    json["user"] = std::move(user);
    if (process.ppid != 0) json["parent_process"] = {{"pid", process.ppid}};
    if (auto container = ocsf_container(process); !container.is_null()) {
        json["container"] = std::move(container);
    }
    return json;
}

Json ocsf_endpoint(const DetectionPeer& peer) {
    Json json;
    put_if(json, "ip", peer.ip);
    if (peer.port != 0) json["port"] = peer.port;
    put_if(json, "hostname", peer.domain);
    return json;
}

Json ocsf_header(int activity_id, const char* activity_name, Severity severity, int64_t unix_ns) {
    Json json;
    json["class_uid"] = 2004;
    json["class_name"] = "Detection Finding";
    json["category_uid"] = 2;
    json["category_name"] = "Findings";
    json["activity_id"] = activity_id;
    json["activity_name"] = activity_name;
    json["type_uid"] = 200400 + activity_id;
    json["type_name"] = fmt::format("Detection Finding: {}", activity_name);
    if (unix_ns != 0) json["time"] = unix_ms(unix_ns);
    json["severity_id"] = ocsf_severity_id(severity);
    json["severity"] = ocsf_severity_name(severity);
    return json;
}

Json ocsf_metadata(const HostInfo& host, const std::string& uid, const char* log_name) {
    Json product;
    product["name"] = "gpuguard";
    product["vendor_name"] = "gpuguard";
    put_if(product, "version", host.agent_version);
    Json json;
    json["version"] = kOcsfVersion;
    json["product"] = std::move(product);
    json["uid"] = uid;
    json["log_name"] = log_name;
    return json;
}

Json ocsf_device(const HostInfo& host) {
    Json json;
    put_if(json, "hostname", host.hostname);
    json["type_id"] = 1;  // Server
    json["type"] = "Server";
    Json os;
    os["name"] = "Linux";
    os["type_id"] = 200;
    os["type"] = "Linux";
    put_if(os, "kernel_release", host.kernel);
    json["os"] = std::move(os);
    if (!host.boot_id.empty()) json["boot_uid"] = host.boot_id;
    return json;
}

}  // namespace

std::string alert_id(const Detection& detection) {
    return fmt::format("{}.{}", detection.id, detection.update);
}

std::string alert_id(const EnforcementOutcome& outcome) { return outcome.id; }

std::string format_ecs_json(const Detection& d, const HostInfo& host) {
    std::string text;
    text.reserve(2048);
    JsonWriter out(text);
    out.begin_object();
    ecs_head(out, d.time_unix_ns, "alert", alert_id(d), d.process, d.peer);
    one_item_list(out, "type", "info");
    out.member_if("action", d.action);
    out.member("outcome", "unknown");
    ecs_event_rest(out, d.severity, d.description, "gpuguard.detection", d.time_unix_ns);
    out.end_object();  // event
    ecs_severity_log(out, d.severity);
    out.key("rule");
    out.begin_object();
    out.member("id", d.rule_id);
    out.member("name", d.rule_name);
    out.member_if("ruleset", d.ruleset);
    out.member_if("description", d.description);
    out.end_object();
    if (!d.mitre_technique_id.empty()) {
        out.key("threat");
        out.begin_object();
        out.member("framework", "MITRE ATT&CK");
        out.key("technique");
        out.begin_object();
        one_item_list(out, "id", d.mitre_technique_id);
        if (!d.mitre_technique_name.empty()) {
            one_item_list(out, "name", d.mitre_technique_name);
        }
        one_item_list(out, "reference",
                      fmt::format("https://attack.mitre.org/techniques/{}/", d.mitre_technique_id));
        out.end_object();  // technique
        if (!d.mitre_tactic.empty()) {
            out.key("tactic");
            out.begin_object();
            one_item_list(out, "name", d.mitre_tactic);
            out.end_object();
        }
        out.end_object();  // threat
    }
    ecs_common_tail(out, d.process, d.peer, host);

    out.key("gpuguard");
    out.begin_object();
    out.member("record", "detection");
    out.key("detection");
    out.begin_object();
    out.member("id", d.id);
    out.member("update", d.update);
    out.member("confidence", d.confidence);
    out.member("first_seen_ns", d.first_seen_ns);
    out.member("last_seen_ns", d.last_seen_ns);
    out.member("dry_run", d.dry_run);
    out.key("signature_ids");
    out.begin_array();
    for (const auto& id : d.signature_ids) out.value(id);
    out.end_array();
    out.key("evidence");
    out.begin_array();
    for (const auto& item : d.evidence) ecs_evidence(out, item);
    out.end_array();
    out.end_object();  // detection
    gpuguard_process(out, d.process);
    ecs_slurm(out, d.process.slurm);
    out.key("gpus");
    out.begin_array();
    for (const auto& gpu : d.gpus) ecs_gpu(out, gpu);
    out.end_array();
    if (d.peer && !d.peer->protocol.empty()) out.member("peer_protocol", d.peer->protocol);
    out.end_object();  // gpuguard
    out.end_object();
    return text;
}

std::string format_ecs_json(const EnforcementOutcome& o, const HostInfo& host) {
    std::string text;
    text.reserve(1536);
    JsonWriter out(text);
    out.begin_object();
    ecs_head(out, o.time_unix_ns, "event", alert_id(o), o.process, o.peer);
    one_item_list(out, "type", o.outcome == "success" ? "denied" : "info");
    out.member("action", o.action);
    out.member("outcome", ecs_outcome(o.outcome));
    ecs_event_rest(out, o.severity, o.reason, "gpuguard.enforcement", o.time_unix_ns);
    if (o.latency_ns != 0) out.member("duration", o.latency_ns);
    out.end_object();  // event
    ecs_severity_log(out, o.severity);
    one_member_object(out, "rule", "id", o.rule_id);
    ecs_common_tail(out, o.process, o.peer, host);

    out.key("gpuguard");
    out.begin_object();
    out.member("record", "enforcement");
    out.key("enforcement");
    out.begin_object();
    out.member("id", o.id);
    out.member("detection_id", o.detection_id);
    out.member("action", o.action);
    out.member("outcome", o.outcome);
    out.member_if("reason", o.reason);
    out.member("ts_ns", o.ts_ns);
    out.member("latency_ns", o.latency_ns);
    out.member_if("linked_detection_id", o.linked_detection_id);
    out.end_object();  // enforcement
    gpuguard_process(out, o.process);
    ecs_slurm(out, o.process.slurm);
    out.end_object();  // gpuguard
    out.end_object();
    return text;
}

std::string format_ocsf(const Detection& d, const HostInfo& host) {
    const bool update = d.update != 0;
    Json json =
        ocsf_header(update ? 2 : 1, update ? "Update" : "Create", d.severity, d.time_unix_ns);
    json["status_id"] = 1;
    json["status"] = "New";
    json["is_alert"] = true;
    json["confidence_score"] = static_cast<int>(std::lround(
        std::clamp(std::isfinite(d.confidence) ? d.confidence : 0.0, 0.0, 1.0) * 100.0));
    put_if(json, "message", d.description);
    json["metadata"] = ocsf_metadata(host, alert_id(d), "detection");
    json["metadata"]["correlation_uid"] = d.id;
    Json finding;
    finding["uid"] = alert_id(d);
    finding["title"] = d.rule_name;
    put_if(finding, "desc", d.description);
    Json analytic;
    analytic["uid"] = d.rule_id;
    analytic["name"] = d.rule_name;
    analytic["type_id"] = 1;
    analytic["type"] = "Rule";
    put_if(analytic, "category", d.ruleset);
    finding["analytic"] = std::move(analytic);
    if (!d.mitre_technique_id.empty()) {
        Json attack;
        Json technique;
        technique["uid"] = d.mitre_technique_id;
        put_if(technique, "name", d.mitre_technique_name);
        attack["technique"] = std::move(technique);
        if (!d.mitre_tactic.empty()) attack["tactic"] = {{"name", d.mitre_tactic}};
        finding["attacks"] = Json::array({attack});
    }
    if (!d.signature_ids.empty()) finding["related_analytics"] = Json::array();
    for (const auto& id : d.signature_ids) {
        finding["related_analytics"].push_back(
            {{"uid", id}, {"type_id", 3}, {"type", "Signature"}});
    }
    json["finding_info"] = std::move(finding);
    Json evidence;
    evidence["process"] = ocsf_process(d.process);
    if (d.peer) evidence["dst_endpoint"] = ocsf_endpoint(*d.peer);
    json["evidences"] = Json::array({evidence});
    json["device"] = ocsf_device(host);
    Json unmapped;
    unmapped["action"] = d.action;
    unmapped["dry_run"] = d.dry_run;
    unmapped["first_seen_ns"] = d.first_seen_ns;
    unmapped["last_seen_ns"] = d.last_seen_ns;
    Json gpus = Json::array();
    for (const auto& gpu : d.gpus) gpus.push_back(gpu_json(gpu));
    unmapped["gpus"] = std::move(gpus);
    Json evidence_list = Json::array();
    for (const auto& item : d.evidence) evidence_list.push_back(evidence_json(item));
    unmapped["evidence"] = std::move(evidence_list);
    json["unmapped"] = {{"gpuguard", unmapped}};
    if (auto pod = ocsf_kubernetes(d.process); !pod.is_null()) {
        json["unmapped"]["kubernetes"] = std::move(pod);
    }
    if (auto job = ocsf_slurm(d.process.slurm); !job.is_null()) {
        json["unmapped"]["slurm"] = std::move(job);
    }
    return dump(json);
}

std::string format_ocsf(const EnforcementOutcome& o, const HostInfo& host) {
    Json json = ocsf_header(2, "Update", o.severity, o.time_unix_ns);
    json["status_id"] = 1;
    json["status"] = "New";
    json["is_alert"] = false;
    // Security Control profile: what was done about the finding.
    const bool success = o.outcome == "success";
    int action_id = 3, disposition_id = 16;  // Observed, No Action
    const char* action = "Observed";
    const char* disposition = "No Action";
    if (o.outcome == "failure") {
        disposition_id = 27;
        disposition = "Error";
    } else if (success && o.action == "pause") {
        action_id = 4, action = "Modified", disposition_id = 14, disposition = "Delayed";
    } else if (success && o.action == "resume") {
        action_id = 1, action = "Allowed", disposition_id = 9, disposition = "Restored";
    } else if (success) {
        action_id = 2, action = "Denied", disposition_id = 2, disposition = "Blocked";
    }
    json["action_id"] = action_id;
    json["action"] = action;
    json["disposition_id"] = disposition_id;
    json["disposition"] = disposition;
    put_if(json, "message", o.reason);
    json["metadata"] = ocsf_metadata(host, alert_id(o), "enforcement");
    json["metadata"]["correlation_uid"] = o.detection_id;
    Json finding;
    finding["uid"] = o.detection_id;
    finding["title"] = fmt::format("{} {}", o.action, o.outcome);
    finding["analytic"] = {{"uid", o.rule_id}, {"type_id", 1}, {"type", "Rule"}};
    json["finding_info"] = std::move(finding);
    Json evidence;
    if (o.process.pid != 0) evidence["process"] = ocsf_process(o.process);
    if (o.peer) evidence["dst_endpoint"] = ocsf_endpoint(*o.peer);
    json["evidences"] = Json::array({evidence});
    json["device"] = ocsf_device(host);
    Json unmapped;
    unmapped["enforcement_id"] = o.id;
    unmapped["action"] = o.action;
    unmapped["outcome"] = o.outcome;
    unmapped["ts_ns"] = o.ts_ns;
    unmapped["latency_ns"] = o.latency_ns;
    if (!o.linked_detection_id.empty()) unmapped["linked_detection_id"] = o.linked_detection_id;
    json["unmapped"] = {{"gpuguard", unmapped}};
    if (auto pod = ocsf_kubernetes(o.process); !pod.is_null()) {
        json["unmapped"]["kubernetes"] = std::move(pod);
    }
    if (auto job = ocsf_slurm(o.process.slurm); !job.is_null()) {
        json["unmapped"]["slurm"] = std::move(job);
    }
    return dump(json);
}

}  // namespace gpuguard::siem
