// Syslog envelopes (RFC 5424, RFC 3164) around a formatted body, the name
// tables of the public enums, and format() dispatch.
#include <ctime>

#include <fmt/format.h>

#include "gpuguard/siem/siem.h"
#include "siem/format_util.h"

namespace gpuguard::siem {
namespace {

// The SD-ID of our structured data element. 32473 is the private enterprise
// number RFC 5612 reserves for documentation; receivers only need it stable.
constexpr const char* kSdId = "gpuguard@32473";

// RFC 5424 header fields are PRINTUSASCII (33..126), bounded, "-" when empty.
std::string header_field(std::string_view text, size_t max_length) {
    if (text.empty()) return "-";
    std::string out;
    for (char c : text.substr(0, max_length)) {
        out.push_back(c >= 33 && c <= 126 ? c : '_');
    }
    return out;
}

// SD-PARAM values escape `"`, `\` and `]`. The record is one line on every
// transport (files, TCP without octet counting), so control characters
// become spaces, as in the CEF header.
std::string sd_value(std::string_view raw) {
    const std::string text = sanitize_utf8(raw);
    std::string out;
    for (char c : text) {
        if (c == '"' || c == '\\' || c == ']') out.push_back('\\');
        out.push_back(static_cast<unsigned char>(c) < 0x20 || c == 0x7f ? ' ' : c);
    }
    return out;
}

struct Envelope {
    std::string id;
    std::string rule_id;
    uint32_t pid = 0;
    Severity severity = Severity::kWarning;
    int64_t time_unix_ns = 0;
    const char* msgid = "DETECTION";
};

std::string frame(Framing framing, const Envelope& e, const std::string& body, const HostInfo& host,
                  const SyslogOptions& options, int64_t fallback_unix_ns) {
    const int pri = options.facility * 8 + syslog_level(e.severity);
    switch (framing) {
        case Framing::kNone:
            return body;
        case Framing::kRfc5424: {
            const std::string timestamp =
                e.time_unix_ns != 0 ? rfc3339_utc(e.time_unix_ns) : std::string("-");
            return fmt::format(
                "<{}>1 {} {} {} {} {} [{} id=\"{}\" rule=\"{}\" pid=\"{}\" severity=\"{}\"] {}",
                pri, timestamp, header_field(host.hostname, 255),
                header_field(options.app_name, 48), header_field(options.procid, 128), e.msgid,
                kSdId, sd_value(e.id), sd_value(e.rule_id), e.pid, to_string(e.severity), body);
        }
        case Framing::kRfc3164: {
            static constexpr const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                                      "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
            const int64_t unix_ns = e.time_unix_ns != 0 ? e.time_unix_ns : fallback_unix_ns;
            const time_t t = static_cast<time_t>(unix_ns / 1000000000);
            struct tm tm {};
            gmtime_r(&t, &tm);
            std::string tag;
            for (char c : options.app_name.substr(0, 32)) {
                tag.push_back(
                    std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '_');
            }
            if (options.procid != "-" && !options.procid.empty()) {
                tag += fmt::format("[{}]", header_field(options.procid, 16));
            }
            const std::string hostname =
                options.rfc3164_hostname ? header_field(host.hostname, 255) + " " : "";
            return fmt::format("<{}>{} {:2} {:02}:{:02}:{:02} {}{}: {}", pri, kMonths[tm.tm_mon],
                               tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, hostname, tag, body);
        }
    }
    return body;
}

}  // namespace

std::string format(Format format, const Detection& detection, const HostInfo& host) {
    switch (format) {
        case Format::kEcsJson:
            return format_ecs_json(detection, host);
        case Format::kCef:
            return format_cef(detection, host);
        case Format::kLeef:
            return format_leef(detection, host);
        case Format::kOcsf:
            return format_ocsf(detection, host);
    }
    return format_ecs_json(detection, host);
}

std::string format(Format format, const EnforcementOutcome& outcome, const HostInfo& host) {
    switch (format) {
        case Format::kEcsJson:
            return format_ecs_json(outcome, host);
        case Format::kCef:
            return format_cef(outcome, host);
        case Format::kLeef:
            return format_leef(outcome, host);
        case Format::kOcsf:
            return format_ocsf(outcome, host);
    }
    return format_ecs_json(outcome, host);
}

std::string format_syslog(Framing framing, Format body, const Detection& d, const HostInfo& host,
                          const SyslogOptions& options, int64_t fallback_unix_ns) {
    Envelope envelope{alert_id(d), d.rule_id,      d.process.pid,
                      d.severity,  d.time_unix_ns, "DETECTION"};
    return frame(framing, envelope, format(body, d, host), host, options, fallback_unix_ns);
}

std::string format_syslog(Framing framing, Format body, const EnforcementOutcome& o,
                          const HostInfo& host, const SyslogOptions& options,
                          int64_t fallback_unix_ns) {
    Envelope envelope{alert_id(o), o.rule_id,      o.process.pid,
                      o.severity,  o.time_unix_ns, "ENFORCEMENT"};
    return frame(framing, envelope, format(body, o, host), host, options, fallback_unix_ns);
}

const char* to_string(Format format) {
    switch (format) {
        case Format::kEcsJson:
            return "ecs_json";
        case Format::kCef:
            return "cef";
        case Format::kLeef:
            return "leef";
        case Format::kOcsf:
            return "ocsf";
    }
    return "unknown";
}

std::optional<Format> parse_format(std::string_view name) {
    if (name == "ecs_json" || name == "json" || name == "ecs") return Format::kEcsJson;
    if (name == "cef") return Format::kCef;
    if (name == "leef") return Format::kLeef;
    if (name == "ocsf") return Format::kOcsf;
    return std::nullopt;
}

const char* to_string(Framing framing) {
    switch (framing) {
        case Framing::kNone:
            return "none";
        case Framing::kRfc5424:
            return "rfc5424";
        case Framing::kRfc3164:
            return "rfc3164";
    }
    return "unknown";
}

std::optional<Framing> parse_framing(std::string_view name) {
    if (name == "none") return Framing::kNone;
    if (name == "rfc5424") return Framing::kRfc5424;
    if (name == "rfc3164") return Framing::kRfc3164;
    return std::nullopt;
}

std::optional<int> parse_facility(std::string_view name) {
    static constexpr std::pair<const char*, int> kFacilities[] = {
        {"kern", 0},      {"user", 1},    {"mail", 2},    {"daemon", 3},    {"auth", 4},
        {"syslog", 5},    {"lpr", 6},     {"news", 7},    {"uucp", 8},      {"cron", 9},
        {"authpriv", 10}, {"ftp", 11},    {"ntp", 12},    {"security", 13}, {"console", 14},
        {"local0", 16},   {"local1", 17}, {"local2", 18}, {"local3", 19},   {"local4", 20},
        {"local5", 21},   {"local6", 22}, {"local7", 23}};
    for (const auto& [facility_name, code] : kFacilities) {
        if (name == facility_name) return code;
    }
    return std::nullopt;
}

const char* to_string(SinkType type) {
    switch (type) {
        case SinkType::kStdout:
            return "stdout";
        case SinkType::kFile:
            return "file";
        case SinkType::kLocalSyslog:
            return "syslog";
        case SinkType::kUdp:
            return "udp";
        case SinkType::kTcp:
            return "tcp";
        case SinkType::kTls:
            return "tls";
        case SinkType::kWebhook:
            return "webhook";
        case SinkType::kSplunkHec:
            return "splunk_hec";
        case SinkType::kElasticsearch:
            return "elasticsearch";
    }
    return "unknown";
}

std::optional<SinkType> parse_sink_type(std::string_view name) {
    for (SinkType type : {SinkType::kStdout, SinkType::kFile, SinkType::kLocalSyslog,
                          SinkType::kUdp, SinkType::kTcp, SinkType::kTls, SinkType::kWebhook,
                          SinkType::kSplunkHec, SinkType::kElasticsearch}) {
        if (name == to_string(type)) return type;
    }
    return std::nullopt;
}

const char* to_string(OverflowPolicy policy) {
    return policy == OverflowPolicy::kBlock ? "block" : "drop_oldest";
}

std::optional<OverflowPolicy> parse_overflow_policy(std::string_view name) {
    if (name == "drop_oldest") return OverflowPolicy::kDropOldest;
    if (name == "block") return OverflowPolicy::kBlock;
    return std::nullopt;
}

}  // namespace gpuguard::siem
