// ArcSight CEF:0 and IBM QRadar LEEF:2.0: a pipe-separated header, then
// key=value attributes. Both are single lines, so every control character in
// a value is escaped or replaced, and invalid UTF-8 becomes U+FFFD.
#include <fmt/format.h>

#include "gpuguard/common/text.h"
#include "gpuguard/siem/siem.h"
#include "siem/format_util.h"

namespace gpuguard::siem {
namespace {

using Attributes = std::vector<std::pair<std::string, std::string>>;

// CEF header: `\` and `|` are escaped; a header has no line breaks, so CR, LF
// and other control characters become spaces.
std::string cef_header_escape(std::string_view raw) {
    const std::string text = sanitize_utf8(raw);
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        if (c == '\\' || c == '|') {
            out.push_back('\\');
            out.push_back(c);
        } else if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
            out.push_back(' ');
        } else {
            out.push_back(c);
        }
    }
    return out;
}

// CEF extension value: `\`, `=` escaped, CR and LF as \r and \n, other
// control characters as spaces. `|` needs no escape here.
std::string cef_value_escape(std::string_view raw) {
    const std::string text = sanitize_utf8(raw);
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        switch (c) {
            case '\\':
                out += "\\\\";
                break;
            case '=':
                out += "\\=";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            default:
                out.push_back(static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? ' ' : c);
        }
    }
    return out;
}

// LEEF header fields take CEF's header escape: `|` escaped, and `\` too,
// or a value ending in a backslash would escape the separator after it; no
// control characters.
std::string leef_header_escape(std::string_view raw) { return cef_header_escape(raw); }

// LEEF values are tab-delimited: tab, LF and CR are written as \t, \n, \r
// (two characters) so that a value can never split an attribute or the line.
std::string leef_value_escape(std::string_view raw) {
    const std::string text = sanitize_utf8(raw);
    std::string out;
    out.reserve(text.size());
    for (char c : text) {
        switch (c) {
            case '\t':
                out += "\\t";
                break;
            case '\n':
                out += "\\n";
                break;
            case '\r':
                out += "\\r";
                break;
            default:
                out.push_back(static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? ' ' : c);
        }
    }
    return out;
}

void add(Attributes& attributes, std::string key, std::string value) {
    if (!value.empty()) attributes.emplace_back(std::move(key), std::move(value));
}

// CEF custom fields come in label/value pairs: cs1Label=ruleId cs1=...
void add_custom(Attributes& attributes, const std::string& slot, const char* label,
                std::string value) {
    if (value.empty()) return;
    attributes.emplace_back(slot + "Label", label);
    attributes.emplace_back(slot, std::move(value));
}

std::string gpu_list(const std::vector<DetectionGpu>& gpus) {
    std::vector<std::string> names;
    for (const auto& gpu : gpus) {
        names.push_back(gpu.device.empty() ? fmt::format("{}:{}", gpu.major, gpu.minor)
                                           : gpu.device);
    }
    return join(names, ",");
}

std::string confidence_text(double confidence) { return fmt::format("{:.2f}", confidence); }

std::string render_cef(const std::string& signature_id, const std::string& name, Severity severity,
                       const HostInfo& host, const Attributes& attributes) {
    std::string out = fmt::format(
        "CEF:0|gpuguard|gpuguard|{}|{}|{}|{}|", cef_header_escape(host.agent_version),
        cef_header_escape(signature_id), cef_header_escape(name), cef_severity(severity));
    bool first = true;
    for (const auto& [key, value] : attributes) {
        if (!first) out.push_back(' ');
        first = false;
        out += key;
        out.push_back('=');
        out += cef_value_escape(value);
    }
    return out;
}

std::string render_leef(const std::string& event_id, const HostInfo& host,
                        const Attributes& attributes) {
    std::string out =
        fmt::format("LEEF:2.0|gpuguard|gpuguard|{}|{}|x09|", leef_header_escape(host.agent_version),
                    leef_header_escape(event_id));
    bool first = true;
    for (const auto& [key, value] : attributes) {
        if (!first) out.push_back('\t');
        first = false;
        out += key;
        out.push_back('=');
        out += leef_value_escape(value);
    }
    return out;
}

void cef_process(Attributes& a, const DetectionProcess& p) {
    if (p.pid != 0) add(a, "spid", std::to_string(p.pid));
    add(a, "sproc", p.comm);
    add(a, "suid", std::to_string(p.uid));
    add(a, "suser", p.user);
    add(a, "filePath", p.executable);
    add(a, "fileHash", p.sha256);
}

void cef_peer(Attributes& a, const std::optional<DetectionPeer>& peer) {
    if (!peer) return;
    add(a, "dst", peer->ip);
    if (peer->port != 0) add(a, "dpt", std::to_string(peer->port));
    add(a, "dhost", peer->domain);
    add(a, "app", peer->protocol);
    add(a, "proto", "TCP");
}

// The Slurm job and the container beyond its id (cs4 in CEF, containerId
// in LEEF): CEF's six custom string pairs are taken, so these are plain
// extension keys there too, named alike in both formats.
void workload_attributes(Attributes& a, const DetectionProcess& p) {
    add(a, "slurmJobId", p.slurm.job_id);
    add(a, "slurmStepId", p.slurm.step_id);
    add(a, "slurmUser", p.slurm.user);
    add(a, "slurmAccount", p.slurm.account);
    add(a, "slurmPartition", p.slurm.partition);
    add(a, "slurmGpus", p.slurm.gpus);
    if (p.container_id.empty()) return;
    add(a, "containerName", p.container.name);
    add(a, "containerImage", p.container.image);
    add(a, "containerRuntime", p.container_runtime);
    add(a, "podName", p.container.pod_name);
    add(a, "podNamespace", p.container.pod_namespace);
}

void leef_process(Attributes& a, const DetectionProcess& p) {
    if (p.pid != 0) add(a, "pid", std::to_string(p.pid));
    if (p.ppid != 0) add(a, "ppid", std::to_string(p.ppid));
    add(a, "procName", p.comm);
    add(a, "usrName", p.user);
    add(a, "uid", std::to_string(p.uid));
    add(a, "exe", p.executable);
    add(a, "sha256", p.sha256);
    add(a, "cmdLine", p.command_line);
    add(a, "containerId", p.container_id);
    workload_attributes(a, p);
}

void leef_peer(Attributes& a, const std::optional<DetectionPeer>& peer) {
    if (!peer) return;
    add(a, "dst", peer->ip);
    if (peer->port != 0) add(a, "dstPort", std::to_string(peer->port));
    add(a, "dstDomain", peer->domain);
    add(a, "proto", "TCP");
    add(a, "appProtocol", peer->protocol);
}

int leef_severity(Severity severity) { return std::max(1, cef_severity(severity)); }

}  // namespace

std::string format_cef(const Detection& d, const HostInfo& host) {
    Attributes a;
    add(a, "externalId", alert_id(d));
    if (d.time_unix_ns != 0) add(a, "rt", std::to_string(unix_ms(d.time_unix_ns)));
    add(a, "dvchost", host.hostname);
    add(a, "cat", d.ruleset);
    add(a, "act", d.action);
    add(a, "msg", d.description);
    cef_process(a, d.process);
    cef_peer(a, d.peer);
    add_custom(a, "cs1", "ruleId", d.rule_id);
    add_custom(a, "cs2", "mitreTechnique",
               d.mitre_technique_id.empty()
                   ? ""
                   : fmt::format("{} {}", d.mitre_technique_id, d.mitre_technique_name));
    add_custom(a, "cs3", "commandLine", d.process.command_line);
    add_custom(a, "cs4", "containerId", d.process.container_id);
    workload_attributes(a, d.process);
    add_custom(a, "cs5", "gpus", gpu_list(d.gpus));
    add_custom(a, "cs6", "signatureIds", join(d.signature_ids, ","));
    add_custom(a, "cfp1", "confidence", confidence_text(d.confidence));
    add_custom(a, "cn1", "update", std::to_string(d.update));
    if (d.process.ppid != 0) add_custom(a, "cn2", "parentPid", std::to_string(d.process.ppid));
    add_custom(a, "flexString1", "detectionId", d.id);
    if (d.dry_run) add_custom(a, "flexString2", "dryRun", "true");
    return render_cef(d.rule_id, d.rule_name, d.severity, host, a);
}

std::string format_cef(const EnforcementOutcome& o, const HostInfo& host) {
    Attributes a;
    add(a, "externalId", alert_id(o));
    if (o.time_unix_ns != 0) add(a, "rt", std::to_string(unix_ms(o.time_unix_ns)));
    add(a, "dvchost", host.hostname);
    add(a, "cat", "enforcement");
    add(a, "act", o.action);
    add(a, "outcome", o.outcome);
    add(a, "reason", o.reason);
    cef_process(a, o.process);
    cef_peer(a, o.peer);
    add_custom(a, "cs1", "ruleId", o.rule_id);
    add_custom(a, "cs3", "commandLine", o.process.command_line);
    add_custom(a, "cs4", "containerId", o.process.container_id);
    workload_attributes(a, o.process);
    if (o.latency_ns != 0) add_custom(a, "cn3", "latencyNs", std::to_string(o.latency_ns));
    add_custom(a, "flexString1", "detectionId", o.detection_id);
    return render_cef(fmt::format("enforcement:{}", o.action),
                      fmt::format("Enforcement {} {}", o.action, o.outcome), o.severity, host, a);
}

std::string format_leef(const Detection& d, const HostInfo& host) {
    Attributes a;
    if (d.time_unix_ns != 0) add(a, "devTime", std::to_string(unix_ms(d.time_unix_ns)));
    add(a, "sev", std::to_string(leef_severity(d.severity)));
    add(a, "cat", d.ruleset);
    add(a, "identHostName", host.hostname);
    add(a, "alertId", alert_id(d));
    add(a, "detectionId", d.id);
    add(a, "ruleId", d.rule_id);
    add(a, "ruleName", d.rule_name);
    add(a, "severity", to_string(d.severity));
    add(a, "mitreTechnique", d.mitre_technique_id);
    add(a, "mitreTechniqueName", d.mitre_technique_name);
    add(a, "mitreTactic", d.mitre_tactic);
    add(a, "confidence", confidence_text(d.confidence));
    add(a, "action", d.action);
    add(a, "update", std::to_string(d.update));
    add(a, "msg", d.description);
    leef_process(a, d.process);
    leef_peer(a, d.peer);
    add(a, "gpus", gpu_list(d.gpus));
    add(a, "signatureIds", join(d.signature_ids, ","));
    if (d.dry_run) add(a, "dryRun", "true");
    return render_leef(d.rule_id, host, a);
}

std::string format_leef(const EnforcementOutcome& o, const HostInfo& host) {
    Attributes a;
    if (o.time_unix_ns != 0) add(a, "devTime", std::to_string(unix_ms(o.time_unix_ns)));
    add(a, "sev", std::to_string(leef_severity(o.severity)));
    add(a, "cat", "enforcement");
    add(a, "identHostName", host.hostname);
    add(a, "alertId", alert_id(o));
    add(a, "detectionId", o.detection_id);
    add(a, "ruleId", o.rule_id);
    add(a, "severity", to_string(o.severity));
    add(a, "action", o.action);
    add(a, "outcome", o.outcome);
    add(a, "reason", o.reason);
    if (o.latency_ns != 0) add(a, "latencyNs", std::to_string(o.latency_ns));
    leef_process(a, o.process);
    leef_peer(a, o.peer);
    return render_leef(fmt::format("enforcement:{}", o.action), host, a);
}

}  // namespace gpuguard::siem
