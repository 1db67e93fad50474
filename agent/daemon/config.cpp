#include "gpuguard/daemon/config.h"

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>
#include <type_traits>

#include <yaml-cpp/yaml.h>

namespace gpuguard::agent {
namespace {

// Thrown inside this file only; load_config_text turns it into an Error.
struct ConfigError {
    ErrorCode code;
    std::string message;
};

// Well-formed UTF-8 (RFC 3629: no overlong forms, surrogates or code points
// above U+10FFFF).
bool valid_utf8(std::string_view text) {
    size_t i = 0;
    while (i < text.size()) {
        const auto byte = static_cast<unsigned char>(text[i]);
        size_t length = 0;
        uint32_t code = 0;
        if (byte < 0x80) {
            ++i;
            continue;
        } else if ((byte & 0xe0) == 0xc0) {
            length = 2;
            code = byte & 0x1f;
        } else if ((byte & 0xf0) == 0xe0) {
            length = 3;
            code = byte & 0x0f;
        } else if ((byte & 0xf8) == 0xf0) {
            length = 4;
            code = byte & 0x07;
        } else {
            return false;
        }
        if (i + length > text.size()) return false;
        for (size_t k = 1; k < length; ++k) {
            const auto next = static_cast<unsigned char>(text[i + k]);
            if ((next & 0xc0) != 0x80) return false;
            code = code << 6 | (next & 0x3f);
        }
        static constexpr uint32_t kMinimum[] = {0, 0, 0x80, 0x800, 0x10000};
        if (code < kMinimum[length] || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) {
            return false;
        }
        i += length;
    }
    return true;
}

class ConfigReader {
  public:
    explicit ConfigReader(std::string source) : source_(std::move(source)) {}

    [[noreturn]] void fail_at(const YAML::Node& node, const std::string& key,
                              const std::string& what) const {
        const YAML::Mark mark = node.Mark();
        std::string where = source_;
        if (mark.line >= 0) {
            where += ":" + std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
        }
        throw ConfigError{ErrorCode::kInvalidArgument, where + ": " + key + ": " + what};
    }

    // Rejects keys of `map` not in `allowed`; `prefix` is the map's own key path.
    void check_keys(const YAML::Node& map, const std::string& prefix,
                    const std::set<std::string>& allowed) const {
        if (!map.IsMap())
            fail_at(map, prefix.empty() ? "(top level)" : prefix, "must be a mapping");
        for (const auto& entry : map) {
            const auto key = entry.first.as<std::string>();
            if (!allowed.contains(key)) {
                std::string known;
                for (const auto& name : allowed) known += (known.empty() ? "" : ", ") + name;
                fail_at(entry.first, join(prefix, key), "unknown key (known: " + known + ")");
            }
        }
    }

    template <typename T>
    T scalar(const YAML::Node& node, const std::string& key, const char* type_name) const {
        if (!node.IsScalar()) fail_at(node, key, std::string("must be ") + type_name);
        try {
            T value = node.as<T>();
            // YAML is Unicode text; yaml-cpp hands other bytes through, which
            // config_to_yaml could not write back as they were.
            if constexpr (std::is_same_v<T, std::string>) {
                if (!valid_utf8(value)) fail_at(node, key, "must be UTF-8 text");
            }
            return value;
        } catch (const YAML::Exception&) {
            fail_at(node, key, std::string("must be ") + type_name);
        }
    }

    // An integer in [min, max]; the error names the value's file:line.
    template <typename T>
    T bounded(const YAML::Node& node, const std::string& key, T min, T max) const {
        const auto value = scalar<T>(node, key, "a non-negative integer");
        if (value < min || value > max) {
            fail_at(node, key,
                    std::to_string(value) + " is not between " + std::to_string(min) + " and " +
                        std::to_string(max));
        }
        return value;
    }

    static std::string join(const std::string& prefix, const std::string& key) {
        return prefix.empty() ? key : prefix + "." + key;
    }

  private:
    std::string source_;
};

const std::set<std::string> kLogLevels = {"trace", "debug",    "info", "warn",
                                          "error", "critical", "off"};

void read_log(const ConfigReader& reader, const YAML::Node& node, LogConfig& log) {
    reader.check_keys(node, "log", {"level"});
    if (const auto level = node["level"]) {
        log.level = reader.scalar<std::string>(level, "log.level", "a string");
        if (!kLogLevels.contains(log.level)) {
            reader.fail_at(level, "log.level",
                           "'" + log.level +
                               "' is not one of trace, debug, info, warn, error, "
                               "critical, off");
        }
    }
}

void read_sensor(const ConfigReader& reader, const YAML::Node& node, SensorConfig& sensor) {
    reader.check_keys(
        node, "sensor",
        {"btf", "ring_buffer_kb", "report_failed_opens", "mount_tracefs", "extra_gpu_devices",
         "connect_all", "connect_loopback", "watched_ports", "argv_max_bytes", "payload_capture",
         "payload_all", "payload_dns", "payload_messages", "payload_syscall_hooks"});
    for (const auto& [key, flag] :
         {std::pair{"payload_capture", &sensor.payload_capture},
          std::pair{"payload_all", &sensor.payload_all},
          std::pair{"payload_dns", &sensor.payload_dns},
          std::pair{"payload_syscall_hooks", &sensor.payload_syscall_hooks}}) {
        if (const auto value = node[key]) {
            *flag = reader.scalar<bool>(value, std::string("sensor.") + key, "true or false");
        }
    }
    if (const auto count = node["payload_messages"]) {
        const auto messages =
            reader.scalar<uint32_t>(count, "sensor.payload_messages", "an integer 1-64");
        if (messages < 1 || messages > 64) {
            reader.fail_at(count, "sensor.payload_messages",
                           std::to_string(messages) + " is not 1-64");
        }
        sensor.payload_messages = messages;
    }
    if (const auto btf = node["btf"]) {
        sensor.btf_path = reader.scalar<std::string>(btf, "sensor.btf", "a path string");
    }
    if (const auto size = node["ring_buffer_kb"]) {
        const auto kb =
            reader.scalar<uint32_t>(size, "sensor.ring_buffer_kb", "a positive integer");
        if (kb < 4 || (kb & (kb - 1)) != 0 || kb > (1u << 20)) {
            reader.fail_at(size, "sensor.ring_buffer_kb",
                           std::to_string(kb) + " is not a power of two between 4 and 1048576");
        }
        sensor.ring_buffer_kb = kb;
    }
    if (const auto flag = node["report_failed_opens"]) {
        sensor.report_failed_opens =
            reader.scalar<bool>(flag, "sensor.report_failed_opens", "true or false");
    }
    if (const auto flag = node["mount_tracefs"]) {
        sensor.mount_tracefs = reader.scalar<bool>(flag, "sensor.mount_tracefs", "true or false");
    }
    if (const auto list = node["extra_gpu_devices"]) {
        if (!list.IsSequence()) {
            reader.fail_at(list, "sensor.extra_gpu_devices", "must be a list of \"MAJOR:MINOR\"");
        }
        sensor.extra_gpu_devices.clear();
        for (size_t i = 0; i < list.size(); ++i) {
            const std::string key = "sensor.extra_gpu_devices[" + std::to_string(i) + "]";
            const auto text = reader.scalar<std::string>(list[i], key, "a \"MAJOR:MINOR\" string");
            auto number = parse_gpu_device_number(text);
            if (!number) reader.fail_at(list[i], key, number.error().message);
            sensor.extra_gpu_devices.push_back(number.value());
        }
    }
    if (const auto flag = node["connect_all"]) {
        sensor.connect_all = reader.scalar<bool>(flag, "sensor.connect_all", "true or false");
    }
    if (const auto flag = node["connect_loopback"]) {
        sensor.connect_loopback =
            reader.scalar<bool>(flag, "sensor.connect_loopback", "true or false");
    }
    if (const auto list = node["watched_ports"]) {
        if (!list.IsSequence()) {
            reader.fail_at(list, "sensor.watched_ports", "must be a list of port numbers");
        }
        if (list.size() > 1024) {  // GG_MAX_WATCHED_PORTS, the kernel map's size
            reader.fail_at(list, "sensor.watched_ports",
                           std::to_string(list.size()) + " ports; at most 1024");
        }
        sensor.watched_ports.clear();
        for (size_t i = 0; i < list.size(); ++i) {
            const std::string key = "sensor.watched_ports[" + std::to_string(i) + "]";
            const auto port = reader.scalar<uint32_t>(list[i], key, "a port number (1-65535)");
            if (port == 0 || port > 65535) {
                reader.fail_at(list[i], key, std::to_string(port) + " is not a port (1-65535)");
            }
            sensor.watched_ports.push_back(static_cast<uint16_t>(port));
        }
    }
    if (const auto size = node["argv_max_bytes"]) {
        const auto bytes =
            reader.scalar<uint32_t>(size, "sensor.argv_max_bytes", "an integer 0-4095");
        if (bytes > 4095) {
            reader.fail_at(size, "sensor.argv_max_bytes",
                           std::to_string(bytes) + " is above the maximum of 4095");
        }
        sensor.argv_max_bytes = bytes;
    }
}

void read_backends(const ConfigReader& reader, const YAML::Node& node, BackendsConfig& backends) {
    reader.check_keys(node, "backends",
                      {"interval_ms", "nvidia", "amd", "intel", "drm_fdinfo", "nvml_library",
                       "sysfs_root", "proc_root"});
    if (const auto interval = node["interval_ms"]) {
        const auto ms =
            reader.scalar<uint32_t>(interval, "backends.interval_ms", "a positive integer");
        if (ms < 100 || ms > 3600000) {
            reader.fail_at(interval, "backends.interval_ms",
                           std::to_string(ms) + " is not between 100 and 3600000");
        }
        backends.interval_ms = ms;
    }
    for (const auto& [key, flag] : {std::pair<const char*, bool*>{"nvidia", &backends.nvidia},
                                    {"amd", &backends.amd},
                                    {"intel", &backends.intel},
                                    {"drm_fdinfo", &backends.drm_fdinfo}}) {
        if (const auto value = node[key]) {
            *flag = reader.scalar<bool>(value, std::string("backends.") + key, "true or false");
        }
    }
    if (const auto library = node["nvml_library"]) {
        backends.nvml_library =
            reader.scalar<std::string>(library, "backends.nvml_library", "a path string");
    }
    for (const auto& [key, root] :
         {std::pair<const char*, std::string*>{"sysfs_root", &backends.sysfs_root},
          {"proc_root", &backends.proc_root}}) {
        if (const auto value = node[key]) {
            const std::string name = std::string("backends.") + key;
            *root = reader.scalar<std::string>(value, name, "an absolute path");
            if (root->empty() || root->front() != '/') {
                reader.fail_at(value, name, "'" + *root + "' is not an absolute path");
            }
        }
    }
}

bool is_loopback(const std::string& address) {
    if (address == "::1" || address == "localhost") return true;
    unsigned a = 0, b = 0, c = 0, d = 0;
    char tail = 0;
    if (std::sscanf(address.c_str(), "%u.%u.%u.%u%c", &a, &b, &c, &d, &tail) != 4) return false;
    return a == 127 && b < 256 && c < 256 && d < 256;
}

void read_metrics(const ConfigReader& reader, const YAML::Node& node, MetricsConfig& metrics) {
    reader.check_keys(node, "metrics", {"enabled", "listen", "port", "status_page"});
    if (const auto flag = node["enabled"]) {
        metrics.enabled = reader.scalar<bool>(flag, "metrics.enabled", "true or false");
    }
    if (const auto flag = node["status_page"]) {
        metrics.status_page = reader.scalar<bool>(flag, "metrics.status_page", "true or false");
        if (metrics.status_page && !metrics.enabled) {
            reader.fail_at(flag, "metrics.status_page",
                           "needs metrics.enabled: true (the page is served with /metrics)");
        }
    }
    if (const auto listen = node["listen"]) {
        metrics.listen = reader.scalar<std::string>(listen, "metrics.listen", "an address");
        if (!is_loopback(metrics.listen)) {
            reader.fail_at(listen, "metrics.listen",
                           "'" + metrics.listen +
                               "' is not a loopback address (127.0.0.0/8, ::1): /metrics has no "
                               "authentication; put a TLS reverse proxy in front to export it");
        }
    }
    if (const auto port = node["port"]) {
        const auto number = reader.scalar<uint32_t>(port, "metrics.port", "a port number");
        if (number < 1 || number > 65535) {
            reader.fail_at(port, "metrics.port", std::to_string(number) + " is not 1-65535");
        }
        metrics.port = static_cast<uint16_t>(number);
    }
}

void read_control(const ConfigReader& reader, const YAML::Node& node, ControlConfig& control) {
    reader.check_keys(node, "control", {"socket"});
    if (const auto socket = node["socket"]) {
        control.socket = reader.scalar<std::string>(socket, "control.socket", "a path string");
        if (!control.socket.empty() && control.socket.front() != '/') {
            reader.fail_at(socket, "control.socket", "'" + control.socket + "' is not absolute");
        }
        if (control.socket.size() >= 108) {  // sizeof(sockaddr_un::sun_path)
            reader.fail_at(socket, "control.socket", "longer than 107 bytes");
        }
    }
}

void read_process_table(const ConfigReader& reader, const YAML::Node& node,
                        ProcessTableConfig& table) {
    reader.check_keys(node, "process_table", {"max_entries", "exit_grace_s", "ioctl_interval_ms"});
    const struct {
        const char* key;
        uint32_t* value;
        uint32_t min;
        uint32_t max;
    } fields[] = {{"max_entries", &table.max_entries, 100, 10'000'000},
                  {"exit_grace_s", &table.exit_grace_s, 0, 86'400},
                  {"ioctl_interval_ms", &table.ioctl_interval_ms, 100, 60'000}};
    for (const auto& field : fields) {
        if (const auto value = node[field.key]) {
            const std::string key = std::string("process_table.") + field.key;
            const auto number = reader.scalar<uint32_t>(value, key, "a non-negative integer");
            if (number < field.min || number > field.max) {
                reader.fail_at(value, key,
                               std::to_string(number) + " is not between " +
                                   std::to_string(field.min) + " and " + std::to_string(field.max));
            }
            *field.value = number;
        }
    }
}

void read_journal(const ConfigReader& reader, const YAML::Node& node, JournalConfig& journal) {
    reader.check_keys(node, "journal",
                      {"enabled", "dir", "segment_max_mb", "segment_max_age_s", "retention_max_mb",
                       "retention_max_age_h", "fsync_interval_ms", "compression", "lookback_s",
                       "incident_after_s", "lookback_max_mb", "queue_events"});
    if (const auto flag = node["enabled"]) {
        journal.enabled = reader.scalar<bool>(flag, "journal.enabled", "true or false");
    }
    if (const auto dir = node["dir"]) {
        journal.dir = reader.scalar<std::string>(dir, "journal.dir", "an absolute path");
        if (journal.dir.empty() || journal.dir.front() != '/') {
            reader.fail_at(dir, "journal.dir", "'" + journal.dir + "' is not an absolute path");
        }
    }
    if (const auto compression = node["compression"]) {
        journal.compression =
            reader.scalar<std::string>(compression, "journal.compression", "none or zstd");
        if (journal.compression != "none" && journal.compression != "zstd") {
            reader.fail_at(compression, "journal.compression",
                           "'" + journal.compression + "' is not one of none, zstd");
        }
    }
    const struct {
        const char* key;
        uint32_t* value;
        uint32_t min;
        uint32_t max;
    } fields[] = {{"segment_max_mb", &journal.segment_max_mb, 1, 4096},
                  {"segment_max_age_s", &journal.segment_max_age_s, 0, 7 * 86'400},
                  {"retention_max_mb", &journal.retention_max_mb, 0, 16 * 1024 * 1024},
                  {"retention_max_age_h", &journal.retention_max_age_h, 0, 24 * 3650},
                  {"fsync_interval_ms", &journal.fsync_interval_ms, 0, 3'600'000},
                  {"lookback_s", &journal.lookback_s, 0, 3600},
                  {"incident_after_s", &journal.incident_after_s, 0, 3600},
                  {"lookback_max_mb", &journal.lookback_max_mb, 1, 16 * 1024},
                  {"queue_events", &journal.queue_events, 1024, 16 * 1024 * 1024}};
    for (const auto& field : fields) {
        if (const auto value = node[field.key]) {
            *field.value = reader.bounded<uint32_t>(value, std::string("journal.") + field.key,
                                                    field.min, field.max);
        }
    }
    if (journal.retention_max_mb != 0 && journal.retention_max_mb < journal.segment_max_mb) {
        reader.fail_at(
            node["retention_max_mb"] ? node["retention_max_mb"] : node, "journal.retention_max_mb",
            std::to_string(journal.retention_max_mb) + " is smaller than journal.segment_max_mb (" +
                std::to_string(journal.segment_max_mb) + ")");
    }
}

void read_string_list(const ConfigReader& reader, const YAML::Node& list, const std::string& key,
                      std::vector<std::string>& out) {
    if (!list.IsSequence()) reader.fail_at(list, key, "must be a list of strings");
    out.clear();
    for (size_t i = 0; i < list.size(); ++i) {
        out.push_back(
            reader.scalar<std::string>(list[i], key + "[" + std::to_string(i) + "]", "a string"));
    }
}

void read_rules(const ConfigReader& reader, const YAML::Node& node, RulesConfig& rules) {
    reader.check_keys(
        node, "rules",
        {"main_file", "drop_in_dir", "correlation_files", "yara_scan", "yara_max_file_mb"});
    if (const auto value = node["main_file"]) {
        rules.main_file = reader.scalar<std::string>(value, "rules.main_file", "a path");
    }
    if (const auto value = node["drop_in_dir"]) {
        rules.drop_in_dir = reader.scalar<std::string>(value, "rules.drop_in_dir", "a path");
    }
    if (const auto value = node["correlation_files"]) {
        read_string_list(reader, value, "rules.correlation_files", rules.correlation_files);
    }
    if (const auto value = node["yara_scan"]) {
        rules.yara_scan = reader.scalar<bool>(value, "rules.yara_scan", "true or false");
    }
    if (const auto value = node["yara_max_file_mb"]) {
        rules.yara_max_file_mb =
            reader.scalar<uint64_t>(value, "rules.yara_max_file_mb", "a size in MiB");
        if (rules.yara_max_file_mb == 0 || rules.yara_max_file_mb > 4096) {
            reader.fail_at(value, "rules.yara_max_file_mb", "must be between 1 and 4096");
        }
    }
}

// Why an extra HTTP header line is not "Name: value" (a token name, no line
// breaks, which would inject headers), or "" when it is.
std::string header_line_problem(const std::string& line) {
    if (line.find_first_of("\r\n") != std::string::npos) return "contains a line break";
    const auto colon = line.find(':');
    bool token = colon != 0 && colon != std::string::npos;
    for (size_t i = 0; token && i < colon; ++i) {
        const auto c = static_cast<unsigned char>(line[i]);
        token = std::isalnum(c) ||
                std::string_view("!#$%&'*+-.^_`|~").find(line[i]) != std::string_view::npos;
    }
    return token ? "" : "'" + line + "' is not a \"Name: value\" header line";
}

// One sink of `outputs:`. Each key is checked where it stands (file:line of
// the value); siem::validate then checks the sink as a whole (address forms,
// readable TLS files).
siem::SinkConfig read_sink(const ConfigReader& reader, const YAML::Node& node,
                           const std::string& key) {
    reader.check_keys(node, key,
                      {"name",
                       "type",
                       "format",
                       "framing",
                       "min_severity",
                       "detections",
                       "enforcement",
                       "address",
                       "tls_ca_file",
                       "tls_cert_file",
                       "tls_key_file",
                       "tls_server_name",
                       "tls_verify",
                       "token",
                       "index",
                       "http_headers",
                       "facility",
                       "app_name",
                       "file_max_bytes",
                       "file_max_files",
                       "queue_dir",
                       "queue_max_mb",
                       "queue_fsync",
                       "overflow",
                       "block_timeout_ms",
                       "batch_max_records",
                       "retry_initial_ms",
                       "retry_max_ms",
                       "io_timeout_ms"});
    siem::SinkConfig sink;
    auto text = [&](const char* name) {
        return reader.scalar<std::string>(node[name], key + "." + name, "a string");
    };
    auto choice = [&](const char* name, auto parse, const char* known) {
        const std::string value = text(name);
        auto parsed = parse(value);
        if (!parsed)
            reader.fail_at(node[name], key + "." + name, "'" + value + "' is not one of " + known);
        return *parsed;
    };
    auto number = [&](const char* name, uint64_t min, uint64_t max) {
        return reader.bounded<uint64_t>(node[name], key + "." + name, min, max);
    };
    auto millis = [&](const char* name, uint64_t min, uint64_t max) {
        return std::chrono::milliseconds(number(name, min, max));
    };
    if (!node["name"]) reader.fail_at(node, key, "name: missing");
    sink.name = text("name");
    if (!node["type"]) reader.fail_at(node, key, "type: missing");
    sink.type = choice("type", siem::parse_sink_type,
                       "stdout, file, syslog, udp, tcp, tls, webhook, splunk_hec, elasticsearch");
    if (node["format"])
        sink.format = choice("format", siem::parse_format, "ecs_json, cef, leef, ocsf");
    if (node["framing"])
        sink.framing = choice("framing", siem::parse_framing, "none, rfc5424, rfc3164");
    if (node["min_severity"]) {
        sink.min_severity =
            choice("min_severity", parse_severity,
                   "emergency, alert, critical, error, warning, notice, info, debug");
    }
    if (node["overflow"])
        sink.overflow = choice("overflow", siem::parse_overflow_policy, "drop_oldest, block");
    for (auto [name, target] :
         {std::pair{"detections", &sink.detections}, std::pair{"enforcement", &sink.enforcement},
          std::pair{"tls_verify", &sink.tls_verify}, std::pair{"queue_fsync", &sink.queue_fsync}}) {
        if (node[name])
            *target = reader.scalar<bool>(node[name], key + "." + name, "true or false");
    }
    for (auto [name, target] :
         {std::pair{"address", &sink.address}, std::pair{"tls_ca_file", &sink.tls_ca_file},
          std::pair{"tls_cert_file", &sink.tls_cert_file},
          std::pair{"tls_key_file", &sink.tls_key_file},
          std::pair{"tls_server_name", &sink.tls_server_name}, std::pair{"token", &sink.token},
          std::pair{"index", &sink.index}, std::pair{"facility", &sink.facility},
          std::pair{"app_name", &sink.app_name}}) {
        if (node[name]) *target = text(name);
    }
    if (node["facility"] && !siem::parse_facility(sink.facility)) {
        reader.fail_at(node["facility"], key + ".facility",
                       "'" + sink.facility + "' is not a syslog facility (kern, user, daemon, " +
                           "auth, authpriv, local0 .. local7, ...)");
    }
    if (const auto headers = node["http_headers"]) {
        read_string_list(reader, headers, key + ".http_headers", sink.http_headers);
        for (size_t i = 0; i < sink.http_headers.size(); ++i) {
            if (auto problem = header_line_problem(sink.http_headers[i]); !problem.empty()) {
                reader.fail_at(headers[i], key + ".http_headers[" + std::to_string(i) + "]",
                               problem);
            }
        }
    }
    if (node["file_max_bytes"]) sink.file_max_bytes = number("file_max_bytes", 0, 1ull << 40);
    if (node["file_max_files"]) {
        sink.file_max_files = static_cast<uint32_t>(number("file_max_files", 0, 1000));
    }
    if (node["queue_dir"]) sink.queue_dir = text("queue_dir");
    if (node["queue_max_mb"]) sink.queue_max_bytes = number("queue_max_mb", 1, 1u << 20) << 20;
    if (node["block_timeout_ms"]) sink.block_timeout = millis("block_timeout_ms", 0, 600'000);
    if (node["batch_max_records"]) sink.batch_max_records = number("batch_max_records", 0, 100'000);
    if (node["retry_initial_ms"]) sink.retry_initial = millis("retry_initial_ms", 1, 3'600'000);
    if (node["retry_max_ms"]) sink.retry_max = millis("retry_max_ms", 1, 3'600'000);
    if (sink.retry_max < sink.retry_initial) {
        const char* at = node["retry_max_ms"] ? "retry_max_ms" : "retry_initial_ms";
        reader.fail_at(node[at], key + "." + at,
                       "retry_max_ms (" + std::to_string(sink.retry_max.count()) +
                           ") is smaller than retry_initial_ms (" +
                           std::to_string(sink.retry_initial.count()) + ")");
    }
    if (node["io_timeout_ms"]) sink.io_timeout = millis("io_timeout_ms", 1, 600'000);
    if (auto valid = siem::validate(sink); !valid) reader.fail_at(node, key, valid.error().message);
    return sink;
}

void read_outputs(const ConfigReader& reader, const YAML::Node& node,
                  std::vector<siem::SinkConfig>& outputs) {
    if (!node.IsSequence()) reader.fail_at(node, "outputs", "must be a list of sinks");
    outputs.clear();
    std::set<std::string> names;
    for (size_t i = 0; i < node.size(); ++i) {
        const std::string key = "outputs[" + std::to_string(i) + "]";
        outputs.push_back(read_sink(reader, node[i], key));
        if (!names.insert(outputs.back().name).second) {
            reader.fail_at(node[i]["name"], key + ".name",
                           "'" + outputs.back().name + "' is used by another sink");
        }
    }
}

void read_enforcement(const ConfigReader& reader, const YAML::Node& node,
                      EnforcementConfig& enforcement) {
    reader.check_keys(
        node, "enforcement",
        {"dry_run", "grace_period_ms", "max_actions_per_minute", "kill_scope", "allowlist",
         "block_ttl_s", "connect_fallback_cgroup", "pin_path", "keep_pinned_on_exit"});
    if (const auto flag = node["dry_run"]) {
        enforcement.dry_run = reader.scalar<bool>(flag, "enforcement.dry_run", "true or false");
    }
    const struct {
        const char* key;
        uint32_t* value;
        uint32_t max;
    } numbers[] = {{"grace_period_ms", &enforcement.grace_period_ms, 600'000},
                   {"max_actions_per_minute", &enforcement.max_actions_per_minute, 100'000},
                   {"block_ttl_s", &enforcement.block_ttl_s, 31'536'000}};
    for (const auto& field : numbers) {
        if (const auto value = node[field.key]) {
            const std::string key = std::string("enforcement.") + field.key;
            const auto number = reader.scalar<uint32_t>(value, key, "a non-negative integer");
            if (number > field.max) {
                reader.fail_at(value, key,
                               std::to_string(number) + " is above the maximum of " +
                                   std::to_string(field.max));
            }
            *field.value = number;
        }
    }
    if (const auto scope = node["kill_scope"]) {
        enforcement.kill_scope =
            reader.scalar<std::string>(scope, "enforcement.kill_scope", "a string");
        if (enforcement.kill_scope != "process" && enforcement.kill_scope != "process_group" &&
            enforcement.kill_scope != "cgroup") {
            reader.fail_at(
                scope, "enforcement.kill_scope",
                "'" + enforcement.kill_scope + "' is not one of process, process_group, cgroup");
        }
    }
    if (const auto allowlist = node["allowlist"]) {
        reader.check_keys(allowlist, "enforcement.allowlist", {"users", "executables", "cgroups"});
        if (const auto list = allowlist["users"]) {
            read_string_list(reader, list, "enforcement.allowlist.users",
                             enforcement.allowlist.users);
        }
        if (const auto list = allowlist["executables"]) {
            read_string_list(reader, list, "enforcement.allowlist.executables",
                             enforcement.allowlist.executables);
        }
        if (const auto list = allowlist["cgroups"]) {
            read_string_list(reader, list, "enforcement.allowlist.cgroups",
                             enforcement.allowlist.cgroups);
        }
    }
    if (const auto cgroup = node["connect_fallback_cgroup"]) {
        enforcement.connect_fallback_cgroup = reader.scalar<std::string>(
            cgroup, "enforcement.connect_fallback_cgroup", "a cgroup v2 path");
        if (!enforcement.connect_fallback_cgroup.empty() &&
            enforcement.connect_fallback_cgroup.front() != '/') {
            reader.fail_at(cgroup, "enforcement.connect_fallback_cgroup",
                           "'" + enforcement.connect_fallback_cgroup +
                               "' must start with / (relative to the cgroup v2 mount)");
        }
    }
    if (const auto pin = node["pin_path"]) {
        enforcement.pin_path =
            reader.scalar<std::string>(pin, "enforcement.pin_path", "a bpffs directory");
        if (!enforcement.pin_path.empty() &&
            (enforcement.pin_path.front() != '/' || enforcement.pin_path == "/")) {
            reader.fail_at(pin, "enforcement.pin_path",
                           "'" + enforcement.pin_path +
                               "' must be an absolute directory below a bpf filesystem, e.g. "
                               "/sys/fs/bpf/gpuguard (\"\" = no pinning)");
        }
    }
    if (const auto keep = node["keep_pinned_on_exit"]) {
        enforcement.keep_pinned_on_exit =
            reader.scalar<bool>(keep, "enforcement.keep_pinned_on_exit", "true or false");
    }
}

}  // namespace

std::string redacted_header(const std::string& header) {
    const auto colon = header.find(':');
    if (colon == std::string::npos) return header;
    std::string name = header.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    for (const char* secret : {"auth", "token", "key", "secret", "password", "cookie"}) {
        if (name.find(secret) != std::string::npos) return header.substr(0, colon) + ": <redacted>";
    }
    return header;
}

Result<Config> load_config_text(std::string_view yaml, const std::string& source) {
    Config config;
    try {
        const YAML::Node root = YAML::Load(std::string(yaml));
        if (root.IsNull()) return config;  // empty file: all defaults
        const ConfigReader reader(source);
        reader.check_keys(root, "",
                          {"log", "sensor", "backends", "metrics", "control", "process_table",
                           "journal", "enforcement", "rules", "outputs"});
        if (const auto log = root["log"]) read_log(reader, log, config.log);
        if (const auto rules = root["rules"]) read_rules(reader, rules, config.rules);
        if (const auto outputs = root["outputs"]) read_outputs(reader, outputs, config.outputs);
        if (const auto control = root["control"]) read_control(reader, control, config.control);
        if (const auto table = root["process_table"]) {
            read_process_table(reader, table, config.process_table);
        }
        if (const auto sensor = root["sensor"]) read_sensor(reader, sensor, config.sensor);
        if (const auto backends = root["backends"]) {
            read_backends(reader, backends, config.backends);
        }
        if (const auto metrics = root["metrics"]) read_metrics(reader, metrics, config.metrics);
        if (const auto journal = root["journal"]) read_journal(reader, journal, config.journal);
        if (const auto enforcement = root["enforcement"]) {
            read_enforcement(reader, enforcement, config.enforcement);
        }
    } catch (const ConfigError& error) {
        return fail(error.code, error.message);
    } catch (const YAML::ParserException& error) {
        return fail(ErrorCode::kParse, source + ":" + std::to_string(error.mark.line + 1) + ":" +
                                           std::to_string(error.mark.column + 1) +
                                           ": YAML syntax error: " + error.msg);
    } catch (const YAML::Exception& error) {
        return fail(ErrorCode::kParse, source + ": " + error.what());
    }
    return config;
}

Result<Config> load_config_file(const std::filesystem::path& path) {
    std::ifstream in(path);
    if (!in) {
        const int err = errno;
        return fail(ErrorCode::kIo,
                    "cannot read config " + path.string() + ": " + std::strerror(err), err);
    }
    std::stringstream text;
    text << in.rdbuf();
    return load_config_text(text.str(), path.string());
}

std::string config_to_yaml(const Config& config) {
    YAML::Emitter out;
    out << YAML::BeginMap;
    out << YAML::Key << "log" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "level" << YAML::Value << config.log.level;
    out << YAML::EndMap;
    out << YAML::Key << "rules" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "main_file" << YAML::Value << config.rules.main_file;
    out << YAML::Key << "drop_in_dir" << YAML::Value << config.rules.drop_in_dir;
    out << YAML::Key << "correlation_files" << YAML::Value << YAML::Flow
        << config.rules.correlation_files;
    out << YAML::Key << "yara_scan" << YAML::Value << config.rules.yara_scan;
    out << YAML::Key << "yara_max_file_mb" << YAML::Value << config.rules.yara_max_file_mb;
    out << YAML::EndMap;
    out << YAML::Key << "outputs" << YAML::Value << YAML::BeginSeq;
    for (const auto& sink : config.outputs) {
        out << YAML::BeginMap;
        out << YAML::Key << "name" << YAML::Value << sink.name;
        out << YAML::Key << "type" << YAML::Value << siem::to_string(sink.type);
        out << YAML::Key << "format" << YAML::Value << siem::to_string(sink.format);
        if (sink.framing) {
            out << YAML::Key << "framing" << YAML::Value << siem::to_string(*sink.framing);
        }
        out << YAML::Key << "min_severity" << YAML::Value << to_string(sink.min_severity);
        out << YAML::Key << "detections" << YAML::Value << sink.detections;
        out << YAML::Key << "enforcement" << YAML::Value << sink.enforcement;
        out << YAML::Key << "address" << YAML::Value << sink.address;
        out << YAML::Key << "tls_ca_file" << YAML::Value << sink.tls_ca_file;
        out << YAML::Key << "tls_cert_file" << YAML::Value << sink.tls_cert_file;
        out << YAML::Key << "tls_key_file" << YAML::Value << sink.tls_key_file;
        out << YAML::Key << "tls_server_name" << YAML::Value << sink.tls_server_name;
        out << YAML::Key << "tls_verify" << YAML::Value << sink.tls_verify;
        // A secret: shown as set or not, never printed.
        out << YAML::Key << "token" << YAML::Value << (sink.token.empty() ? "" : "<redacted>");
        out << YAML::Key << "index" << YAML::Value << sink.index;
        out << YAML::Key << "http_headers" << YAML::Value << YAML::Flow << YAML::BeginSeq;
        for (const auto& header : sink.http_headers) out << redacted_header(header);
        out << YAML::EndSeq;
        out << YAML::Key << "facility" << YAML::Value << sink.facility;
        out << YAML::Key << "app_name" << YAML::Value << sink.app_name;
        out << YAML::Key << "file_max_bytes" << YAML::Value << sink.file_max_bytes;
        out << YAML::Key << "file_max_files" << YAML::Value << sink.file_max_files;
        out << YAML::Key << "queue_dir" << YAML::Value << sink.queue_dir.string();
        out << YAML::Key << "queue_max_mb" << YAML::Value << (sink.queue_max_bytes >> 20);
        out << YAML::Key << "queue_fsync" << YAML::Value << sink.queue_fsync;
        out << YAML::Key << "overflow" << YAML::Value << siem::to_string(sink.overflow);
        out << YAML::Key << "block_timeout_ms" << YAML::Value << sink.block_timeout.count();
        out << YAML::Key << "batch_max_records" << YAML::Value << sink.batch_max_records;
        out << YAML::Key << "retry_initial_ms" << YAML::Value << sink.retry_initial.count();
        out << YAML::Key << "retry_max_ms" << YAML::Value << sink.retry_max.count();
        out << YAML::Key << "io_timeout_ms" << YAML::Value << sink.io_timeout.count();
        out << YAML::EndMap;
    }
    out << YAML::EndSeq;
    out << YAML::Key << "control" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "socket" << YAML::Value << YAML::DoubleQuoted << config.control.socket;
    out << YAML::EndMap;
    out << YAML::Key << "process_table" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "max_entries" << YAML::Value << config.process_table.max_entries;
    out << YAML::Key << "exit_grace_s" << YAML::Value << config.process_table.exit_grace_s;
    out << YAML::Key << "ioctl_interval_ms" << YAML::Value
        << config.process_table.ioctl_interval_ms;
    out << YAML::EndMap;
    out << YAML::Key << "sensor" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "btf" << YAML::Value << YAML::DoubleQuoted << config.sensor.btf_path;
    out << YAML::Key << "ring_buffer_kb" << YAML::Value << config.sensor.ring_buffer_kb;
    out << YAML::Key << "report_failed_opens" << YAML::Value << config.sensor.report_failed_opens;
    out << YAML::Key << "mount_tracefs" << YAML::Value << config.sensor.mount_tracefs;
    out << YAML::Key << "extra_gpu_devices" << YAML::Value << YAML::Flow << YAML::BeginSeq;
    for (const auto& device : config.sensor.extra_gpu_devices) {
        out << YAML::DoubleQuoted << device.to_string();
    }
    out << YAML::EndSeq;
    out << YAML::Key << "connect_all" << YAML::Value << config.sensor.connect_all;
    out << YAML::Key << "connect_loopback" << YAML::Value << config.sensor.connect_loopback;
    out << YAML::Key << "watched_ports" << YAML::Value << YAML::Flow << config.sensor.watched_ports;
    out << YAML::Key << "argv_max_bytes" << YAML::Value << config.sensor.argv_max_bytes;
    out << YAML::Key << "payload_capture" << YAML::Value << config.sensor.payload_capture;
    out << YAML::Key << "payload_all" << YAML::Value << config.sensor.payload_all;
    out << YAML::Key << "payload_dns" << YAML::Value << config.sensor.payload_dns;
    out << YAML::Key << "payload_messages" << YAML::Value << config.sensor.payload_messages;
    out << YAML::Key << "payload_syscall_hooks" << YAML::Value
        << config.sensor.payload_syscall_hooks;
    out << YAML::EndMap;
    const BackendsConfig& backends = config.backends;
    out << YAML::Key << "backends" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "interval_ms" << YAML::Value << backends.interval_ms;
    out << YAML::Key << "nvidia" << YAML::Value << backends.nvidia;
    out << YAML::Key << "amd" << YAML::Value << backends.amd;
    out << YAML::Key << "intel" << YAML::Value << backends.intel;
    out << YAML::Key << "drm_fdinfo" << YAML::Value << backends.drm_fdinfo;
    out << YAML::Key << "nvml_library" << YAML::Value << YAML::DoubleQuoted
        << backends.nvml_library;
    out << YAML::Key << "sysfs_root" << YAML::Value << backends.sysfs_root;
    out << YAML::Key << "proc_root" << YAML::Value << backends.proc_root;
    out << YAML::EndMap;
    out << YAML::Key << "metrics" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "enabled" << YAML::Value << config.metrics.enabled;
    out << YAML::Key << "listen" << YAML::Value << YAML::DoubleQuoted << config.metrics.listen;
    out << YAML::Key << "port" << YAML::Value << config.metrics.port;
    out << YAML::Key << "status_page" << YAML::Value << config.metrics.status_page;
    out << YAML::EndMap;
    const JournalConfig& journal = config.journal;
    out << YAML::Key << "journal" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "enabled" << YAML::Value << journal.enabled;
    out << YAML::Key << "dir" << YAML::Value << journal.dir;
    out << YAML::Key << "segment_max_mb" << YAML::Value << journal.segment_max_mb;
    out << YAML::Key << "segment_max_age_s" << YAML::Value << journal.segment_max_age_s;
    out << YAML::Key << "retention_max_mb" << YAML::Value << journal.retention_max_mb;
    out << YAML::Key << "retention_max_age_h" << YAML::Value << journal.retention_max_age_h;
    out << YAML::Key << "fsync_interval_ms" << YAML::Value << journal.fsync_interval_ms;
    out << YAML::Key << "compression" << YAML::Value << journal.compression;
    out << YAML::Key << "lookback_s" << YAML::Value << journal.lookback_s;
    out << YAML::Key << "incident_after_s" << YAML::Value << journal.incident_after_s;
    out << YAML::Key << "lookback_max_mb" << YAML::Value << journal.lookback_max_mb;
    out << YAML::Key << "queue_events" << YAML::Value << journal.queue_events;
    out << YAML::EndMap;
    const EnforcementConfig& enforcement = config.enforcement;
    out << YAML::Key << "enforcement" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "dry_run" << YAML::Value << enforcement.dry_run;
    out << YAML::Key << "grace_period_ms" << YAML::Value << enforcement.grace_period_ms;
    out << YAML::Key << "max_actions_per_minute" << YAML::Value
        << enforcement.max_actions_per_minute;
    out << YAML::Key << "kill_scope" << YAML::Value << enforcement.kill_scope;
    out << YAML::Key << "allowlist" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "users" << YAML::Value << YAML::Flow << enforcement.allowlist.users;
    out << YAML::Key << "executables" << YAML::Value << YAML::Flow
        << enforcement.allowlist.executables;
    out << YAML::Key << "cgroups" << YAML::Value << YAML::Flow << enforcement.allowlist.cgroups;
    out << YAML::EndMap;
    out << YAML::Key << "block_ttl_s" << YAML::Value << enforcement.block_ttl_s;
    out << YAML::Key << "connect_fallback_cgroup" << YAML::Value << YAML::DoubleQuoted
        << enforcement.connect_fallback_cgroup;
    out << YAML::Key << "pin_path" << YAML::Value << YAML::DoubleQuoted << enforcement.pin_path;
    out << YAML::Key << "keep_pinned_on_exit" << YAML::Value << enforcement.keep_pinned_on_exit;
    out << YAML::EndMap;
    out << YAML::EndMap;
    return std::string(out.c_str()) + "\n";
}

journal::JournalOptions journal_options(const JournalConfig& config) {
    journal::JournalOptions options;
    options.dir = config.dir;
    options.segment_max_bytes = uint64_t{config.segment_max_mb} << 20;
    options.segment_max_age_s = config.segment_max_age_s;
    options.retention_max_bytes = uint64_t{config.retention_max_mb} << 20;
    options.retention_max_age_s = uint64_t{config.retention_max_age_h} * 3600;
    options.fsync_interval_ms = config.fsync_interval_ms;
    options.compress = config.compression == "zstd";
    options.lookback_s = config.lookback_s;
    options.incident_after_s = config.incident_after_s;
    options.lookback_max_bytes = size_t{config.lookback_max_mb} << 20;
    options.queue_events = config.queue_events;
    return options;
}

}  // namespace gpuguard::agent
