// libFuzzer target for the SIEM formats (siem/format_*.cpp): a detection or
// enforcement outcome whose strings the fuzzer controls (as a monitored
// process controls comm, argv, paths and DNS names) must give one valid
// record in every format and framing:
//   - no line break or other control byte anywhere (LEEF: tab only as the
//     attribute separator), and valid UTF-8;
//   - CEF: "CEF:0" and six more header fields split by unescaped '|', a
//     severity 0..10, then key=value pairs where an unescaped '=' only ends
//     a key; the message value unescapes to the description;
//   - LEEF 2.0: six header fields, then tab-separated key=value pairs;
//   - ECS and OCSF: one JSON object;
//   - RFC 5424: PRI, version 1, five header fields of printable ASCII, one
//     structured-data element whose values escape '"', '\' and ']', then the
//     body unchanged; RFC 3164: PRI, timestamp, tag, then the body.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <fuzzer/FuzzedDataProvider.h>
#include <nlohmann/json.hpp>

#include "gpuguard/siem/siem.h"
#include "siem/format_util.h"

namespace siem = gpuguard::siem;

namespace {

[[noreturn]] void fail(const char* what, std::string_view line) {
    std::fprintf(stderr, "%s:\n%.*s\n", what, static_cast<int>(line.size()), line.data());
    std::abort();
}

bool is_key(std::string_view key) {
    if (key.empty()) return false;
    for (const char c : key) {
        if (!std::isalnum(static_cast<unsigned char>(c))) return false;
    }
    return true;
}

// JSON may carry DEL raw (only bytes below 0x20 must be escaped); CEF and
// LEEF replace it.
void check_single_line(std::string_view line, bool tabs_allowed, bool del_allowed = false) {
    for (const char c : line) {
        const auto byte = static_cast<unsigned char>(c);
        if ((byte < 0x20 && !(tabs_allowed && c == '\t')) || (byte == 0x7f && !del_allowed)) {
            fail("control byte in a single-line record", line);
        }
    }
    if (siem::sanitize_utf8(line) != line) fail("invalid UTF-8 in a record", line);
}

// Splits off `count` header fields separated by unescaped '|'; returns the rest.
std::string_view header_fields(std::string_view line, size_t count,
                               std::vector<std::string>& fields) {
    std::string field;
    size_t at = 0;
    while (fields.size() < count) {
        if (at >= line.size()) fail("header ends early", line);
        const char c = line[at++];
        if (c == '\\' && at < line.size()) {
            field.push_back(line[at++]);
        } else if (c == '|') {
            fields.push_back(field);
            field.clear();
        } else {
            field.push_back(c);
        }
    }
    return line.substr(at);
}

// What cef_value_escape should have made of a value, unescaped again.
std::string cef_expected(std::string_view raw) {
    std::string out;
    for (const char c : siem::sanitize_utf8(raw)) {
        const auto byte = static_cast<unsigned char>(c);
        out.push_back((byte < 0x20 && c != '\n' && c != '\r') || byte == 0x7f ? ' ' : c);
    }
    return out;
}

void check_cef(std::string_view line, const gpuguard::Detection* detection) {
    check_single_line(line, false);
    std::vector<std::string> fields;
    const std::string_view extension = header_fields(line, 7, fields);
    if (fields[0] != "CEF:0") fail("CEF version", line);
    if (fields[6].empty() || fields[6].size() > 2 ||
        fields[6].find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(fields[6]) > 10) {
        fail("CEF severity", line);
    }
    // key=value pairs; an unescaped '=' must end a key that follows a space.
    std::map<std::string, std::string> values;
    std::string key, value;
    size_t at = 0;
    const size_t first_eq = extension.find('=');
    if (extension.empty()) return;
    if (first_eq == std::string_view::npos || !is_key(extension.substr(0, first_eq))) {
        fail("CEF extension does not start with a key", line);
    }
    key = std::string(extension.substr(0, first_eq));
    at = first_eq + 1;
    while (at < extension.size()) {
        const char c = extension[at++];
        if (c == '\\') {
            if (at >= extension.size()) fail("CEF dangling escape", line);
            const char e = extension[at++];
            if (e == 'n') {
                value.push_back('\n');
            } else if (e == 'r') {
                value.push_back('\r');
            } else if (e == '\\' || e == '=') {
                value.push_back(e);
            } else {
                fail("CEF unknown escape", line);
            }
        } else if (c == '=') {
            const size_t space = value.rfind(' ');
            if (space == std::string::npos || !is_key(std::string_view(value).substr(space + 1))) {
                fail("CEF unescaped '=' inside a value", line);
            }
            values[key] = value.substr(0, space);
            key = value.substr(space + 1);
            value.clear();
        } else {
            value.push_back(c);
        }
    }
    values[key] = value;
    if (detection && !detection->description.empty() &&
        values["msg"] != cef_expected(detection->description)) {
        fail("CEF msg does not unescape to the description", line);
    }
}

void check_leef(std::string_view line) {
    check_single_line(line, true);
    std::vector<std::string> fields;
    const std::string_view attributes = header_fields(line, 6, fields);
    if (fields[0] != "LEEF:2.0" || fields[5] != "x09") fail("LEEF header", line);
    size_t start = 0;
    while (start <= attributes.size() && !attributes.empty()) {
        size_t end = attributes.find('\t', start);
        if (end == std::string_view::npos) end = attributes.size();
        const std::string_view attribute = attributes.substr(start, end - start);
        const size_t eq = attribute.find('=');
        if (eq == std::string_view::npos || !is_key(attribute.substr(0, eq))) {
            fail("LEEF attribute without a key", line);
        }
        start = end + 1;
    }
}

void check_json(std::string_view line) {
    check_single_line(line, false, true);
    if (!nlohmann::json::accept(line)) fail("not one JSON document", line);
    if (!nlohmann::json::parse(line).is_object()) fail("not a JSON object", line);
}

void check_body(siem::Format format, std::string_view line, const gpuguard::Detection* detection) {
    switch (format) {
        case siem::Format::kCef:
            return check_cef(line, detection);
        case siem::Format::kLeef:
            return check_leef(line);
        case siem::Format::kEcsJson:
        case siem::Format::kOcsf:
            return check_json(line);
    }
}

bool printable_ascii(std::string_view field) {
    if (field.empty()) return false;
    for (const char c : field) {
        if (c < 33 || c > 126) return false;
    }
    return true;
}

void check_rfc5424(std::string_view line, std::string_view body) {
    check_single_line(line, body.find('\t') != std::string_view::npos,
                      body.find('\x7f') != std::string_view::npos);
    if (line.size() < 3 || line[0] != '<') fail("RFC 5424 PRI", line);
    size_t at = line.find('>');
    if (at == std::string_view::npos || at < 2 || at > 4) fail("RFC 5424 PRI", line);
    std::string_view rest = line.substr(at + 1);
    if (!rest.starts_with("1 ")) fail("RFC 5424 version", line);
    rest.remove_prefix(2);
    for (int field = 0; field < 5; ++field) {  // TIMESTAMP HOSTNAME APP-NAME PROCID MSGID
        const size_t space = rest.find(' ');
        if (space == std::string_view::npos || !printable_ascii(rest.substr(0, space))) {
            fail("RFC 5424 header field", line);
        }
        rest.remove_prefix(space + 1);
    }
    if (!rest.starts_with("[gpuguard@32473 ")) fail("RFC 5424 SD-ID", line);
    // PARAM-VALUEs: inside quotes, '"', '\' and ']' only escaped.
    bool quoted = false;
    size_t i = 1;
    for (; i < rest.size(); ++i) {
        const char c = rest[i];
        if (quoted) {
            if (c == '\\') {
                if (i + 1 >= rest.size()) fail("RFC 5424 dangling escape", line);
                const char e = rest[++i];
                if (e != '"' && e != '\\' && e != ']') fail("RFC 5424 bad escape", line);
            } else if (c == '"') {
                quoted = false;
            } else if (c == ']') {
                fail("RFC 5424 unescaped ']' in a value", line);
            }
        } else if (c == '"') {
            quoted = true;
        } else if (c == ']') {
            break;
        }
    }
    if (i >= rest.size() || rest.substr(i, 2) != "] ") fail("RFC 5424 SD not closed", line);
    if (rest.substr(i + 2) != body) fail("RFC 5424 body changed", line);
}

void check_rfc3164(std::string_view line, std::string_view body) {
    check_single_line(line, body.find('\t') != std::string_view::npos,
                      body.find('\x7f') != std::string_view::npos);
    if (line.empty() || line[0] != '<' || line.find('>') == std::string_view::npos ||
        line.find('>') > 4) {
        fail("RFC 3164 PRI", line);
    }
    if (!line.ends_with(body)) fail("RFC 3164 body changed", line);
    const std::string_view head = line.substr(0, line.size() - body.size());
    if (!head.ends_with(": ")) fail("RFC 3164 tag", line);
}

// Every format, bare and in both syslog envelopes.
template <typename Record>
void check_record(const Record& record, const gpuguard::Detection* detection,
                  const gpuguard::HostInfo& host, const siem::SyslogOptions& options,
                  int64_t fallback_ns) {
    for (const auto format :
         {siem::Format::kCef, siem::Format::kLeef, siem::Format::kEcsJson, siem::Format::kOcsf}) {
        const std::string body = siem::format(format, record, host);
        check_body(format, body, detection);
        check_rfc5424(siem::format_syslog(siem::Framing::kRfc5424, format, record, host, options,
                                          fallback_ns),
                      body);
        check_rfc3164(siem::format_syslog(siem::Framing::kRfc3164, format, record, host, options,
                                          fallback_ns),
                      body);
    }
}

std::string text(FuzzedDataProvider& in) { return in.ConsumeRandomLengthString(96); }

gpuguard::DetectionProcess process(FuzzedDataProvider& in) {
    gpuguard::DetectionProcess p;
    p.pid = in.ConsumeIntegral<uint32_t>();
    p.ppid = in.ConsumeIntegral<uint32_t>();
    p.uid = in.ConsumeIntegral<uint32_t>();
    p.comm = text(in);
    p.executable = text(in);
    p.argv = {text(in), text(in)};
    p.command_line = p.argv[0] + " " + p.argv[1];
    p.user = text(in);
    p.cgroup_path = text(in);
    p.container_id = text(in);
    p.container_runtime = text(in);
    p.sha256 = text(in);
    return p;
}

std::optional<gpuguard::DetectionPeer> peer(FuzzedDataProvider& in) {
    if (!in.ConsumeBool()) return std::nullopt;
    gpuguard::DetectionPeer p;
    p.ip = text(in);
    p.port = in.ConsumeIntegral<uint16_t>();
    p.domain = text(in);
    p.protocol = text(in);
    return p;
}

gpuguard::Severity severity(FuzzedDataProvider& in) {
    return gpuguard::kAllSeverities[in.ConsumeIntegralInRange<size_t>(0, 7)];
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    FuzzedDataProvider in(data, size);
    gpuguard::HostInfo host{text(in), text(in), text(in), text(in)};
    siem::SyslogOptions options;
    options.facility = in.ConsumeIntegralInRange(0, 23);
    options.app_name = text(in);
    options.procid = text(in);
    options.rfc3164_hostname = in.ConsumeBool();
    const int64_t fallback_ns = in.ConsumeIntegral<int64_t>();

    gpuguard::Detection d;
    gpuguard::EnforcementOutcome o;
    const bool is_detection = in.ConsumeBool();
    if (is_detection) {
        d.id = text(in);
        d.rule_id = text(in);
        d.rule_name = text(in);
        d.ruleset = text(in);
        d.description = text(in);
        d.severity = severity(in);
        d.confidence = in.ConsumeFloatingPoint<double>();
        d.mitre_technique_id = text(in);
        d.mitre_technique_name = text(in);
        d.mitre_tactic = text(in);
        d.first_seen_ns = in.ConsumeIntegral<uint64_t>();
        d.last_seen_ns = in.ConsumeIntegral<uint64_t>();
        d.time_unix_ns = in.ConsumeIntegral<int64_t>();
        d.update = in.ConsumeIntegral<uint32_t>();
        d.process = process(in);
        if (in.ConsumeBool()) {
            gpuguard::DetectionGpu gpu;
            gpu.major = in.ConsumeIntegral<uint32_t>();
            gpu.minor = in.ConsumeIntegral<uint32_t>();
            gpu.device = text(in);
            gpu.vendor = text(in);
            gpu.index = in.ConsumeIntegral<int>();
            if (in.ConsumeBool()) gpu.utilization_percent = in.ConsumeFloatingPoint<double>();
            if (in.ConsumeBool()) gpu.memory_used_bytes = in.ConsumeIntegral<uint64_t>();
            d.gpus.push_back(gpu);
        }
        d.peer = peer(in);
        d.signature_ids = {text(in), text(in)};
        gpuguard::Evidence evidence;
        evidence.kind = text(in);
        evidence.event_type = text(in);
        evidence.signature_id = text(in);
        evidence.field = text(in);
        evidence.detail = text(in);
        d.evidence.push_back(evidence);
        d.action = text(in);
        d.dry_run = in.ConsumeBool();
    } else {
        o.id = text(in);
        o.detection_id = text(in);
        o.rule_id = text(in);
        o.action = text(in);
        o.outcome = text(in);
        o.reason = text(in);
        o.severity = severity(in);
        o.ts_ns = in.ConsumeIntegral<uint64_t>();
        o.time_unix_ns = in.ConsumeIntegral<int64_t>();
        o.process = process(in);
        o.peer = peer(in);
        o.latency_ns = in.ConsumeIntegral<uint64_t>();
    }

    if (is_detection) {
        check_record(d, &d, host, options, fallback_ns);
    } else {
        check_record(o, nullptr, host, options, fallback_ns);
    }
    return 0;
}
