// ECS and OCSF JSON: built with nlohmann::ordered_json so that the key order
// is the insertion order written here, and dumped with invalid UTF-8
// replaced, so identical records give byte-identical lines.
#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gpuguard/siem/siem.h"
#include "siem/format_util.h"

namespace gpuguard::siem {
namespace {

using Json = nlohmann::ordered_json;

constexpr const char* kEcsVersion = "8.11.0";
constexpr const char* kOcsfVersion = "1.1.0";

std::string dump(const Json& json) {
    return json.dump(-1, ' ', false, Json::error_handler_t::replace);
}

void put_if(Json& json, const char* key, const std::string& value) {
    if (!value.empty()) json[key] = value;
}

// A double as JSON, null when not finite (JSON has no NaN).
Json number(double value) { return std::isfinite(value) ? Json(value) : Json(nullptr); }

Json ecs_process(const DetectionProcess& process) {
    Json json;
    json["pid"] = process.pid;
    if (process.ppid != 0) json["parent"] = {{"pid", process.ppid}};
    put_if(json, "name", process.comm);
    put_if(json, "executable", process.executable);
    if (!process.argv.empty()) {
        json["args"] = process.argv;
        json["args_count"] = process.argv.size();
    }
    put_if(json, "command_line", process.command_line);
    if (!process.sha256.empty()) json["hash"] = {{"sha256", process.sha256}};
    Json user;
    user["id"] = std::to_string(process.uid);
    put_if(user, "name", process.user);
    json["user"] = std::move(user);
    json["group"] = {{"id", std::to_string(process.gid)}};
    return json;
}

void ecs_common_tail(Json& json, const DetectionProcess& process,
                     const std::optional<DetectionPeer>& peer, const HostInfo& host) {
    if (process.pid != 0 || !process.executable.empty()) {
        json["process"] = ecs_process(process);
        Json user;
        user["id"] = std::to_string(process.uid);
        put_if(user, "name", process.user);
        json["user"] = std::move(user);
    }
    if (peer) {
        Json destination;
        put_if(destination, "ip", peer->ip);
        if (peer->port != 0) destination["port"] = peer->port;
        put_if(destination, "domain", peer->domain);
        json["destination"] = std::move(destination);
        Json network;
        network["transport"] = "tcp";
        put_if(network, "protocol", peer->protocol);
        json["network"] = std::move(network);
    }
    Json host_json;
    put_if(host_json, "hostname", host.hostname);
    put_if(host_json, "name", host.hostname);
    if (!host.boot_id.empty()) host_json["boot"] = {{"id", host.boot_id}};
    Json os;
    os["type"] = "linux";
    put_if(os, "kernel", host.kernel);
    host_json["os"] = std::move(os);
    json["host"] = std::move(host_json);
    Json agent;
    agent["type"] = "gpuguard";
    put_if(agent, "version", host.agent_version);
    json["agent"] = std::move(agent);
    if (!process.container_id.empty()) {
        Json container;
        container["id"] = process.container_id;
        put_if(container, "runtime", process.container_runtime);
        json["container"] = std::move(container);
    }
}

Json gpuguard_process(const DetectionProcess& process) {
    Json json;
    put_if(json, "comm", process.comm);
    put_if(json, "cgroup_path", process.cgroup_path);
    if (process.start_time_ns != 0) json["start_time_ns"] = process.start_time_ns;
    return json;
}

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

Json severity_log(Severity severity) {
    return {{"level", to_string(severity)},
            {"syslog",
             {{"severity", {{"code", syslog_level(severity)}, {"name", to_string(severity)}}}}}};
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
    if (!process.container_id.empty()) {
        Json container;
        container["uid"] = process.container_id;
        put_if(container, "runtime", process.container_runtime);
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
    Json json;
    if (d.time_unix_ns != 0) json["@timestamp"] = rfc3339_utc(d.time_unix_ns);
    json["ecs"] = {{"version", kEcsVersion}};
    Json event;
    event["kind"] = "alert";
    event["id"] = alert_id(d);
    Json category = Json::array({"intrusion_detection"});
    if (d.process.pid != 0) category.push_back("process");
    if (d.peer) category.push_back("network");
    event["category"] = std::move(category);
    event["type"] = Json::array({"info"});
    put_if(event, "action", d.action);
    event["outcome"] = "unknown";
    event["severity"] = syslog_level(d.severity);
    event["risk_score"] = risk_score(d.severity);
    put_if(event, "reason", d.description);
    event["module"] = "gpuguard";
    event["dataset"] = "gpuguard.detection";
    if (d.time_unix_ns != 0) event["created"] = rfc3339_utc(d.time_unix_ns);
    json["event"] = std::move(event);
    json["log"] = severity_log(d.severity);
    Json rule;
    rule["id"] = d.rule_id;
    rule["name"] = d.rule_name;
    put_if(rule, "ruleset", d.ruleset);
    put_if(rule, "description", d.description);
    json["rule"] = std::move(rule);
    if (!d.mitre_technique_id.empty()) {
        Json threat;
        threat["framework"] = "MITRE ATT&CK";
        Json technique;
        technique["id"] = Json::array({d.mitre_technique_id});
        if (!d.mitre_technique_name.empty()) {
            technique["name"] = Json::array({d.mitre_technique_name});
        }
        technique["reference"] = Json::array(
            {fmt::format("https://attack.mitre.org/techniques/{}/", d.mitre_technique_id)});
        threat["technique"] = std::move(technique);
        if (!d.mitre_tactic.empty()) {
            threat["tactic"] = {{"name", Json::array({d.mitre_tactic})}};
        }
        json["threat"] = std::move(threat);
    }
    ecs_common_tail(json, d.process, d.peer, host);

    Json detection;
    detection["id"] = d.id;
    detection["update"] = d.update;
    detection["confidence"] = number(d.confidence);
    detection["first_seen_ns"] = d.first_seen_ns;
    detection["last_seen_ns"] = d.last_seen_ns;
    detection["dry_run"] = d.dry_run;
    detection["signature_ids"] = d.signature_ids;
    Json evidence = Json::array();
    for (const auto& item : d.evidence) evidence.push_back(evidence_json(item));
    detection["evidence"] = std::move(evidence);
    Json gpuguard;
    gpuguard["record"] = "detection";
    gpuguard["detection"] = std::move(detection);
    gpuguard["process"] = gpuguard_process(d.process);
    Json gpus = Json::array();
    for (const auto& gpu : d.gpus) gpus.push_back(gpu_json(gpu));
    gpuguard["gpus"] = std::move(gpus);
    if (d.peer && !d.peer->protocol.empty()) gpuguard["peer_protocol"] = d.peer->protocol;
    json["gpuguard"] = std::move(gpuguard);
    return dump(json);
}

std::string format_ecs_json(const EnforcementOutcome& o, const HostInfo& host) {
    Json json;
    if (o.time_unix_ns != 0) json["@timestamp"] = rfc3339_utc(o.time_unix_ns);
    json["ecs"] = {{"version", kEcsVersion}};
    Json event;
    event["kind"] = "event";
    event["id"] = alert_id(o);
    Json category = Json::array({"intrusion_detection"});
    if (o.process.pid != 0) category.push_back("process");
    if (o.peer) category.push_back("network");
    event["category"] = std::move(category);
    event["type"] = Json::array({o.outcome == "success" ? "denied" : "info"});
    event["action"] = o.action;
    event["outcome"] = ecs_outcome(o.outcome);
    event["severity"] = syslog_level(o.severity);
    event["risk_score"] = risk_score(o.severity);
    put_if(event, "reason", o.reason);
    event["module"] = "gpuguard";
    event["dataset"] = "gpuguard.enforcement";
    if (o.time_unix_ns != 0) event["created"] = rfc3339_utc(o.time_unix_ns);
    if (o.latency_ns != 0) event["duration"] = o.latency_ns;
    json["event"] = std::move(event);
    json["log"] = severity_log(o.severity);
    json["rule"] = {{"id", o.rule_id}};
    ecs_common_tail(json, o.process, o.peer, host);

    Json enforcement;
    enforcement["id"] = o.id;
    enforcement["detection_id"] = o.detection_id;
    enforcement["action"] = o.action;
    enforcement["outcome"] = o.outcome;
    put_if(enforcement, "reason", o.reason);
    enforcement["ts_ns"] = o.ts_ns;
    enforcement["latency_ns"] = o.latency_ns;
    Json gpuguard;
    gpuguard["record"] = "enforcement";
    gpuguard["enforcement"] = std::move(enforcement);
    gpuguard["process"] = gpuguard_process(o.process);
    json["gpuguard"] = std::move(gpuguard);
    return dump(json);
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
    json["unmapped"] = {{"gpuguard", unmapped}};
    return dump(json);
}

}  // namespace gpuguard::siem
