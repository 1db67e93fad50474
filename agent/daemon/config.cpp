#include "gpuguard/daemon/config.h"

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <set>
#include <string_view>
#include <type_traits>

#include <yaml-cpp/yaml.h>

#include "config_reader.h"
#include "gpuguard/common/trusted_file.h"

namespace gpuguard::agent {
namespace {

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
    reader.check_keys(
        node, "process_table",
        {"max_entries", "exit_grace_s", "ioctl_interval_ms", "hidden_check_interval_s",
         "cpu_interval_ms", "busy_cpu_percent", "flow_interval_ms", "flow_min_age_ms"});
    read_bounded(reader, node, "process_table",
                 {{"max_entries", &table.max_entries, 100, 10'000'000},
                  {"exit_grace_s", &table.exit_grace_s, 0, 86'400},
                  {"ioctl_interval_ms", &table.ioctl_interval_ms, 100, 60'000},
                  {"hidden_check_interval_s", &table.hidden_check_interval_s, 0, 86'400},
                  {"cpu_interval_ms", &table.cpu_interval_ms, 0, 60'000},
                  {"busy_cpu_percent", &table.busy_cpu_percent, 1, 100'000},
                  {"flow_interval_ms", &table.flow_interval_ms, 0, 600'000},
                  {"flow_min_age_ms", &table.flow_min_age_ms, 0, 3'600'000}});
}

void read_verify(const ConfigReader& reader, const YAML::Node& node, VerifyConfig& verify) {
    reader.check_keys(
        node, "verify",
        {"active", "max_per_hour", "peer_interval_s", "timeout_ms", "tls", "answer_max_bytes"});
    if (const auto flag = node["active"]) {
        verify.active = reader.scalar<bool>(flag, "verify.active", "true or false");
    }
    if (const auto tls = node["tls"]) {
        verify.tls = reader.scalar<std::string>(tls, "verify.tls", "a string");
        if (verify.tls != "auto" && verify.tls != "always" && verify.tls != "never") {
            reader.fail_at(tls, "verify.tls",
                           "'" + verify.tls + "' is not one of auto, always, never");
        }
    }
    read_bounded(reader, node, "verify",
                 {{"max_per_hour", &verify.max_per_hour, 1, 3600},
                  {"peer_interval_s", &verify.peer_interval_s, 60, 604'800},
                  {"timeout_ms", &verify.timeout_ms, 100, 30'000},
                  {"answer_max_bytes", &verify.answer_max_bytes, 64, 4096}});
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
    read_bounded(reader, node, "journal",
                 {{"segment_max_mb", &journal.segment_max_mb, 1, 4096},
                  {"segment_max_age_s", &journal.segment_max_age_s, 0, 7 * 86'400},
                  {"retention_max_mb", &journal.retention_max_mb, 0, 16 * 1024 * 1024},
                  {"retention_max_age_h", &journal.retention_max_age_h, 0, 24 * 3650},
                  {"fsync_interval_ms", &journal.fsync_interval_ms, 0, 3'600'000},
                  {"lookback_s", &journal.lookback_s, 0, 3600},
                  {"incident_after_s", &journal.incident_after_s, 0, 3600},
                  {"lookback_max_mb", &journal.lookback_max_mb, 1, 16 * 1024},
                  {"queue_events", &journal.queue_events, 1024, 16 * 1024 * 1024}});
    if (journal.retention_max_mb != 0 && journal.retention_max_mb < journal.segment_max_mb) {
        reader.fail_at(
            node["retention_max_mb"] ? node["retention_max_mb"] : node, "journal.retention_max_mb",
            std::to_string(journal.retention_max_mb) + " is smaller than journal.segment_max_mb (" +
                std::to_string(journal.segment_max_mb) + ")");
    }
}

void read_rules(const ConfigReader& reader, const YAML::Node& node, RulesConfig& rules) {
    reader.check_keys(node, "rules",
                      {"main_file", "drop_in_dir", "correlation_files", "yara_scan",
                       "yara_scan_every_exec", "yara_max_file_mb", "config_scan", "config_max_kb"});
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
    if (const auto value = node["yara_scan_every_exec"]) {
        rules.yara_scan_every_exec =
            reader.scalar<bool>(value, "rules.yara_scan_every_exec", "true or false");
    }
    if (const auto value = node["yara_max_file_mb"]) {
        rules.yara_max_file_mb =
            reader.scalar<uint64_t>(value, "rules.yara_max_file_mb", "a size in MiB");
        if (rules.yara_max_file_mb == 0 || rules.yara_max_file_mb > 4096) {
            reader.fail_at(value, "rules.yara_max_file_mb", "must be between 1 and 4096");
        }
    }
    if (const auto value = node["config_scan"]) {
        rules.config_scan = reader.scalar<bool>(value, "rules.config_scan", "true or false");
    }
    if (const auto value = node["config_max_kb"]) {
        rules.config_max_kb =
            reader.scalar<uint64_t>(value, "rules.config_max_kb", "a size in KiB");
        if (rules.config_max_kb == 0 || rules.config_max_kb > 65536) {
            reader.fail_at(value, "rules.config_max_kb", "must be between 1 and 65536");
        }
    }
}

// Why an extra HTTP header line is not "Name: value" (a token name, no line
// breaks, which would inject headers), or "" when it is.
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
                           "journal", "enforcement", "rules", "outputs", "verify", "kubelet"});
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
        if (const auto verify = root["verify"]) read_verify(reader, verify, config.verify);
        if (const auto kubelet = root["kubelet"]) read_kubelet(reader, kubelet, config.kubelet);
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
    auto text = read_trusted_file(path);
    if (!text) {
        const int err = text.error().sys_errno;
        if (err == 0) return Unexpected{text.error()};  // refused: writable by others than root
        return fail(ErrorCode::kIo,
                    "cannot read config " + path.string() + ": " + std::strerror(err), err);
    }
    return load_config_text(*text, path.string());
}

}  // namespace gpuguard::agent
