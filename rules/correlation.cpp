// Loading correlation rules (include/gpuguard/rules/correlation.h) from YAML,
// with every problem reported as "file:line:col: message".
#include "gpuguard/rules/correlation.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <sstream>

#include <date/tz.h>

#include "gpuguard/common/read_file.h"
#include "rules/glob.h"
#include "rules/yaml_diagnostics.h"

namespace gpuguard::rules {
namespace {

constexpr std::pair<EvidenceField, const char*> kFieldNames[] = {
    {EvidenceField::kProcess, "process"}, {EvidenceField::kCmdline, "cmdline"},
    {EvidenceField::kConfig, "config"},   {EvidenceField::kDomain, "domain"},
    {EvidenceField::kPayload, "payload"}, {EvidenceField::kPort, "port"},
    {EvidenceField::kYara, "yara"}};

constexpr std::pair<ExeLocation, const char*> kLocationNames[] = {
    {ExeLocation::kTmp, "tmp"},
    {ExeLocation::kVarTmp, "var_tmp"},
    {ExeLocation::kDevShm, "dev_shm"},
    {ExeLocation::kDeleted, "deleted"},
    {ExeLocation::kMemfd, "memfd"}};

const char* const kActions[] = {"alert",    "kill",  "kill_now",       "block_ip",
                                "deny_gpu", "pause", "from_signatures"};

bool time_zone_known(const std::string& name) {
    try {
        return date::locate_zone(name) != nullptr;
    } catch (const std::exception&) {
        return false;
    }
}

std::optional<double> parse_number(const std::string& text) {
    double value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(value)) {
        return std::nullopt;
    }
    return value;
}

class RuleReader {
  public:
    explicit RuleReader(const std::string& source) : diag_(source), source_(source) {}

    std::vector<CorrelationRule> read(const YAML::Node& root) {
        std::vector<CorrelationRule> rules;
        if (!diag_.check_keys(root, "", {"rules", "priority_guard"})) return rules;
        const YAML::Node list = root["rules"];
        if (!list) {
            // A guard policy file may hold priorities only.
            if (root["priority_guard"]) return rules;
            diag_.error(root, "rules: missing");
            return rules;
        }
        if (!list.IsSequence()) {
            diag_.error(list, "rules: must be a list");
            return rules;
        }
        std::map<std::string, std::string> seen;
        for (size_t i = 0; i < list.size(); ++i) {
            CorrelationRule rule = read_rule(list[i], "rules[" + std::to_string(i) + "]");
            if (rule.id.empty()) continue;
            if (auto [it, fresh] = seen.emplace(rule.id, rule.source); !fresh) {
                diag_.error(list[i]["id"],
                            "duplicate rule id '" + rule.id + "' (first at " + it->second + ")");
                continue;
            }
            rules.push_back(std::move(rule));
        }
        return rules;
    }

    std::vector<std::string> errors() const { return diag_.sorted_errors(); }

    std::optional<PriorityPolicy> read_priority(const YAML::Node& root) {
        if (!root.IsMap()) return std::nullopt;  // read() reports it
        const YAML::Node node = root["priority_guard"];
        if (!node) return std::nullopt;
        const std::string path = "priority_guard";
        PriorityPolicy policy;
        for (const auto& entry : root) {  // the key's line, where a reader looks
            if (entry.first.Scalar() == "priority_guard")
                policy.source = diag_.line_of(entry.first);
        }
        if (!diag_.check_keys(node, path,
                              {"pause_above_percent", "resume_below_percent", "max_pause",
                               "cooldown", "default_priority", "dry_run", "processes"})) {
            return policy;
        }
        if (node["pause_above_percent"]) {
            if (auto value =
                    number(node["pause_above_percent"], path + ".pause_above_percent", 1, 100)) {
                policy.pause_above_percent = *value;
            }
        }
        bool resume_given = false;
        if (node["resume_below_percent"]) {
            if (auto value =
                    number(node["resume_below_percent"], path + ".resume_below_percent", 0, 100)) {
                policy.resume_below_percent = *value;
                resume_given = true;
            }
        }
        if (!resume_given) {
            // Default hysteresis: 20 points below the pause threshold.
            policy.resume_below_percent = std::max(0.0, policy.pause_above_percent - 20.0);
        }
        if (policy.resume_below_percent >= policy.pause_above_percent) {
            diag_.error(node, path + ": resume_below_percent (" +
                                  fmt_number(policy.resume_below_percent) +
                                  ") must be below pause_above_percent (" +
                                  fmt_number(policy.pause_above_percent) + ")");
        }
        if (node["max_pause"]) {
            if (auto value = duration(node["max_pause"], path + ".max_pause")) {
                policy.max_pause = *value;
            }
        }
        if (node["cooldown"]) {
            if (auto value = duration(node["cooldown"], path + ".cooldown"))
                policy.cooldown = *value;
        }
        if (node["default_priority"]) {
            if (auto value = whole(node["default_priority"], path + ".default_priority")) {
                policy.default_priority = *value;
            }
        }
        if (node["dry_run"]) {
            if (auto value = boolean(node["dry_run"], path + ".dry_run")) policy.dry_run = *value;
        }
        const YAML::Node list = node["processes"];
        if (!list) {
            diag_.error(node, path + ": processes: missing (patterns with their priorities)");
            return policy;
        }
        if (!list.IsSequence()) {
            diag_.error(list, path + ".processes: must be a list");
            return policy;
        }
        for (size_t i = 0; i < list.size(); ++i) {
            const std::string where = path + ".processes[" + std::to_string(i) + "]";
            const YAML::Node item = list[i];
            PriorityPattern pattern;
            pattern.source = diag_.line_of(item);
            if (!diag_.check_keys(item, where, {"comm", "exe", "cmdline", "users", "priority"})) {
                continue;
            }
            if (item["comm"]) pattern.comm = globs(item["comm"], where + ".comm");
            if (item["exe"]) pattern.exe = globs(item["exe"], where + ".exe");
            if (item["cmdline"]) pattern.cmdline = globs(item["cmdline"], where + ".cmdline");
            if (item["users"]) pattern.users = globs(item["users"], where + ".users");
            if (pattern.comm.empty() && pattern.exe.empty() && pattern.cmdline.empty() &&
                pattern.users.empty()) {
                diag_.error(item, where + ": needs comm, exe, cmdline or users");
            }
            if (!item["priority"]) {
                diag_.error(item, where + ": priority: missing");
            } else if (auto value = whole(item["priority"], where + ".priority")) {
                pattern.priority = *value;
            }
            policy.processes.push_back(std::move(pattern));
        }
        return policy;
    }

  private:
    std::optional<std::string> string(const YAML::Node& map, const char* key,
                                      const std::string& path, bool required) {
        const YAML::Node node = map[key];
        if (!node) {
            if (required) diag_.error(map, path + ": " + key + ": missing");
            return std::nullopt;
        }
        return diag_.scalar(node, path + "." + key);
    }

    std::optional<double> number(const YAML::Node& node, const std::string& path, double lo,
                                 double hi) {
        auto text = diag_.scalar(node, path, "a number");
        if (!text) return std::nullopt;
        auto value = parse_number(*text);
        if (!value || *value < lo || *value > hi) {
            diag_.error(node, path + ": must be a number from " + fmt_number(lo) + " to " +
                                  fmt_number(hi) + ", got '" + *text + "'");
            return std::nullopt;
        }
        return value;
    }

    static std::string fmt_number(double value) {
        std::ostringstream out;
        out << value;
        return out.str();
    }

    std::optional<std::chrono::seconds> duration(const YAML::Node& node, const std::string& path) {
        auto text = diag_.scalar(node, path, "a duration");
        if (!text) return std::nullopt;
        auto value = parse_duration(*text);
        if (!value || value->count() <= 0) {
            diag_.error(node,
                        path + ": must be a duration like 90s, 5m, 2h or 1d, got '" + *text + "'");
            return std::nullopt;
        }
        return value;
    }

    std::optional<int> whole(const YAML::Node& node, const std::string& path) {
        auto value = number(node, path, -1e6, 1e6);
        if (!value) return std::nullopt;
        if (*value != std::floor(*value)) {
            diag_.error(node, path + ": must be a whole number");
            return std::nullopt;
        }
        return static_cast<int>(*value);
    }

    std::optional<bool> boolean(const YAML::Node& node, const std::string& path) {
        auto text = diag_.scalar(node, path, "true or false");
        if (!text) return std::nullopt;
        if (*text == "true") return true;
        if (*text == "false") return false;
        diag_.error(node, path + ": must be true or false, got '" + *text + "'");
        return std::nullopt;
    }

    std::vector<std::string> globs(const YAML::Node& node, const std::string& path) {
        std::vector<std::string> out;
        for (auto& [text, item] : diag_.scalar_list(node, path)) out.push_back(text);
        return out;
    }

    CorrelationRule read_rule(const YAML::Node& node, const std::string& path) {
        CorrelationRule rule;
        rule.source = diag_.line_of(node);
        if (!diag_.check_keys(node, path,
                              {"id", "name", "description", "severity", "mitre", "action", "window",
                               "enabled", "dry_run", "when", "confidence"})) {
            return rule;
        }
        const auto id = string(node, "id", path, true);
        const std::string where = id ? path + " (" + *id + ")" : path;
        if (auto name = string(node, "name", where, true)) rule.name = *name;
        if (auto description = string(node, "description", where, false)) {
            rule.description = *description;
            while (!rule.description.empty() && rule.description.back() == '\n') {
                rule.description.pop_back();
            }
        }
        if (auto severity = string(node, "severity", where, true)) {
            if (auto parsed = parse_severity(*severity)) {
                rule.severity = *parsed;
            } else {
                diag_.error(node["severity"],
                            where + ".severity: unknown severity '" + *severity +
                                "' (emergency, alert, critical, error, warning, notice, info, "
                                "debug)");
            }
        }
        if (const YAML::Node mitre = node["mitre"]) {
            if (diag_.check_keys(mitre, where + ".mitre", {"id", "name", "tactic"})) {
                if (auto value = string(mitre, "id", where + ".mitre", true))
                    rule.mitre_id = *value;
                if (auto value = string(mitre, "name", where + ".mitre", false)) {
                    rule.mitre_name = *value;
                }
                if (auto value = string(mitre, "tactic", where + ".mitre", false)) {
                    rule.mitre_tactic = *value;
                }
            }
        }
        if (auto action = string(node, "action", where, false)) {
            if (std::find_if(std::begin(kActions), std::end(kActions), [&](const char* name) {
                    return *action == name;
                }) == std::end(kActions)) {
                diag_.error(node["action"],
                            where + ".action: unknown action '" + *action +
                                "' (alert, kill, kill_now, block_ip, deny_gpu, pause, "
                                "from_signatures)");
            } else {
                rule.action = *action;
            }
        }
        if (const YAML::Node window = node["window"]) {
            if (auto value = duration(window, where + ".window")) rule.window = *value;
        }
        if (const YAML::Node enabled = node["enabled"]) {
            if (auto value = boolean(enabled, where + ".enabled")) rule.enabled = *value;
        }
        if (const YAML::Node dry_run = node["dry_run"]) {
            if (auto value = boolean(dry_run, where + ".dry_run")) rule.dry_run = *value;
        }
        if (const YAML::Node confidence = node["confidence"]) {
            read_confidence(confidence, where + ".confidence", rule);
        }
        const YAML::Node when = node["when"];
        if (!when) {
            diag_.error(node, where + ": when: missing (a rule needs at least one condition)");
        } else if (read_conditions(when, where + ".when", rule) == 0) {
            diag_.error(when, where + ".when: needs at least one condition");
        }
        if (id) rule.id = *id;
        return rule;
    }

    void read_confidence(const YAML::Node& node, const std::string& path, CorrelationRule& rule) {
        if (!diag_.check_keys(node, path, {"base", "combine", "min"})) return;
        if (node["base"]) {
            if (auto value = number(node["base"], path + ".base", 0, 1)) {
                rule.base_confidence = *value;
            }
        }
        if (node["min"]) {
            if (auto value = number(node["min"], path + ".min", 0, 1)) rule.min_confidence = *value;
        }
        if (auto combine = string(node, "combine", path, false)) {
            if (*combine == "max") {
                rule.combine = Combine::kMax;
            } else if (*combine == "noisy_or") {
                rule.combine = Combine::kNoisyOr;
            } else {
                diag_.error(node["combine"],
                            path + ".combine: must be max or noisy_or, got '" + *combine + "'");
            }
        }
    }

    // "HH:MM" -> minutes after midnight ("24:00" allowed as an end).
    std::optional<int> clock_minutes(const YAML::Node& node, const std::string& path) {
        auto text = diag_.scalar(node, path);
        if (!text) return std::nullopt;
        int hours = -1, minutes = -1;
        char extra = 0;
        if (std::sscanf(text->c_str(), "%d:%d%c", &hours, &minutes, &extra) != 2 || hours < 0 ||
            minutes < 0 || minutes > 59 || hours * 60 + minutes > 24 * 60) {
            diag_.error(node, path + ": must be a time like 09:00 or 18:30, got '" + *text + "'");
            return std::nullopt;
        }
        return hours * 60 + minutes;
    }

    TimeWindowCondition read_time_window(const YAML::Node& node, const std::string& where) {
        TimeWindowCondition window;
        if (!diag_.check_keys(node, where, {"days", "from", "to", "time_zone"})) return window;
        static constexpr const char* kDays[] = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"};
        if (node["days"]) {
            for (auto& [text, item] : diag_.scalar_list(node["days"], where + ".days")) {
                std::string lower;
                for (char c : text) lower += static_cast<char>(std::tolower(c));
                const auto found = std::find_if(std::begin(kDays), std::end(kDays),
                                                [&](const char* day) { return lower == day; });
                if (found == std::end(kDays)) {
                    diag_.error(item, where + ".days: unknown day '" + text +
                                          "' (mon, tue, wed, thu, fri, sat, sun)");
                } else {
                    window.days.push_back(static_cast<int>(found - std::begin(kDays)));
                }
            }
        }
        if (node["from"])
            window.from_minute = clock_minutes(node["from"], where + ".from").value_or(0);
        if (node["to"])
            window.to_minute = clock_minutes(node["to"], where + ".to").value_or(24 * 60);
        if (auto zone = string(node, "time_zone", where, false)) {
            window.time_zone = *zone;
            if (!time_zone_known(*zone)) {
                diag_.error(node["time_zone"], where + ".time_zone: unknown time zone '" + *zone +
                                                   "' (an IANA name such as Europe/Berlin)");
            }
        }
        return window;
    }

    // A size like 20GB, 512MiB or 0 under `key` of `node` into `bytes`, when present.
    void size(const YAML::Node& node, const char* key, const std::string& where, uint64_t& bytes) {
        if (!node[key]) return;
        const std::string field = where + "." + key;
        auto text = diag_.scalar(node[key], field);
        auto parsed = text ? parse_bytes(*text) : std::nullopt;
        if (text && !parsed) {
            diag_.error(node[key],
                        field + ": must be a size like 20GB or 512MiB, got '" + *text + "'");
        }
        if (parsed) bytes = *parsed;
    }

    int read_conditions(const YAML::Node& when, const std::string& path, CorrelationRule& rule) {
        if (!diag_.check_keys(
                when, path,
                {"gpu_held", "signature", "exe_location", "disguised", "known_bad_executable",
                 "memory_growth", "sustained_utilization", "scope", "gpu_memory_above",
                 "gpu_index_not_in", "gpu_vendor_not_in", "time_window", "max_gpu_processes",
                 "hash_rate_above_threshold", "quiet_io"})) {
            return -1;  // reported already
        }
        int conditions = 0;
        if (when["gpu_held"]) {
            rule.gpu_held = boolean(when["gpu_held"], path + ".gpu_held");
            ++conditions;
        }
        if (const YAML::Node node = when["signature"]) {
            rule.signature = read_signature(node, path + ".signature");
            ++conditions;
        }
        if (const YAML::Node node = when["exe_location"]) {
            for (auto& [text, item] : diag_.scalar_list(node, path + ".exe_location")) {
                auto found = std::find_if(
                    std::begin(kLocationNames), std::end(kLocationNames),
                    [&text = text](const auto& entry) { return text == entry.second; });
                if (found == std::end(kLocationNames)) {
                    diag_.error(item, path + ".exe_location: unknown location '" + text +
                                          "' (tmp, var_tmp, dev_shm, deleted, memfd)");
                } else {
                    rule.exe_location.push_back(found->first);
                }
            }
            ++conditions;
        }
        if (const YAML::Node node = when["disguised"]) {
            rule.disguised = boolean(node, path + ".disguised").value_or(false);
            ++conditions;
        }
        if (const YAML::Node node = when["known_bad_executable"]) {
            rule.known_bad_executable =
                boolean(node, path + ".known_bad_executable").value_or(false);
            ++conditions;
        }
        if (const YAML::Node node = when["hash_rate_above_threshold"]) {
            rule.hash_rate_above_threshold =
                boolean(node, path + ".hash_rate_above_threshold").value_or(false);
            ++conditions;
        }
        if (const YAML::Node node = when["memory_growth"]) {
            const std::string where = path + ".memory_growth";
            MemoryGrowthCondition condition;
            if (diag_.check_keys(node, where, {"bytes", "within", "max_utilization_percent"})) {
                size(node, "bytes", where, condition.bytes);
                if (node["within"]) {
                    if (auto value = duration(node["within"], where + ".within")) {
                        condition.within = *value;
                    }
                }
                if (node["max_utilization_percent"]) {
                    if (auto value = number(node["max_utilization_percent"],
                                            where + ".max_utilization_percent", 0, 100)) {
                        condition.max_utilization_percent = *value;
                    }
                }
            }
            rule.memory_growth = condition;
            ++conditions;
        }
        if (const YAML::Node node = when["sustained_utilization"]) {
            const std::string where = path + ".sustained_utilization";
            SustainedUtilizationCondition condition;
            if (diag_.check_keys(node, where,
                                 {"above_percent", "for", "max_connects", "min_connects"})) {
                if (node["above_percent"]) {
                    if (auto value =
                            number(node["above_percent"], where + ".above_percent", 0, 100)) {
                        condition.above_percent = *value;
                    }
                }
                if (node["for"]) {
                    if (auto value = duration(node["for"], where + ".for")) {
                        condition.duration = *value;
                    }
                }
                if (node["max_connects"]) {
                    if (auto value =
                            number(node["max_connects"], where + ".max_connects", 0, 1e6)) {
                        condition.max_connects = static_cast<uint32_t>(*value);
                    }
                }
                if (node["min_connects"]) {
                    if (auto value =
                            number(node["min_connects"], where + ".min_connects", 0, 1e6)) {
                        condition.min_connects = static_cast<uint32_t>(*value);
                    }
                }
            }
            rule.sustained_utilization = condition;
            ++conditions;
        }
        if (const YAML::Node node = when["quiet_io"]) {
            const std::string where = path + ".quiet_io";
            QuietIoCondition condition;
            if (diag_.check_keys(node, where,
                                 {"for", "max_file_write_bytes", "max_net_send_bytes",
                                  "max_bytes_per_send", "max_send_gap"})) {
                if (node["for"]) {
                    if (auto value = duration(node["for"], where + ".for")) {
                        condition.duration = *value;
                    }
                }
                size(node, "max_file_write_bytes", where, condition.max_file_write_bytes);
                size(node, "max_net_send_bytes", where, condition.max_net_send_bytes);
                size(node, "max_bytes_per_send", where, condition.max_bytes_per_send);
                if (node["max_send_gap"]) {
                    if (auto value = duration(node["max_send_gap"], where + ".max_send_gap")) {
                        condition.max_send_gap = *value;
                    }
                }
            }
            rule.quiet_io = condition;
            ++conditions;
        }
        if (const YAML::Node node = when["gpu_memory_above"]) {
            auto text = diag_.scalar(node, path + ".gpu_memory_above");
            auto bytes = text ? parse_bytes(*text) : std::nullopt;
            if (text && !bytes) {
                diag_.error(node, path + ".gpu_memory_above: must be a size like 40GiB, got '" +
                                      *text + "'");
            }
            rule.gpu_memory_above = bytes;
            ++conditions;
        }
        if (const YAML::Node node = when["gpu_index_not_in"]) {
            for (auto& [text, item] : diag_.scalar_list(node, path + ".gpu_index_not_in")) {
                auto index = parse_number(text);
                if (!index || *index < 0 || *index != std::floor(*index)) {
                    diag_.error(item, path + ".gpu_index_not_in: not a GPU index: '" + text + "'");
                } else {
                    rule.gpu_index_not_in.push_back(static_cast<uint32_t>(*index));
                }
            }
            ++conditions;
        }
        if (const YAML::Node node = when["gpu_vendor_not_in"]) {
            for (auto& [text, item] : diag_.scalar_list(node, path + ".gpu_vendor_not_in")) {
                rule.gpu_vendor_not_in.push_back(text);
            }
            ++conditions;
        }
        if (const YAML::Node node = when["time_window"]) {
            rule.time_window = read_time_window(node, path + ".time_window");
            ++conditions;
        }
        if (const YAML::Node node = when["max_gpu_processes"]) {
            if (auto value = number(node, path + ".max_gpu_processes", 1, 1e6)) {
                if (*value != std::floor(*value)) {
                    diag_.error(node, path + ".max_gpu_processes: must be a whole number");
                }
                rule.max_gpu_processes = static_cast<uint32_t>(*value);
            }
            ++conditions;
        }
        if (const YAML::Node node = when["scope"]) {
            const std::string where = path + ".scope";
            ScopeCondition scope;
            if (diag_.check_keys(
                    node, where,
                    {"users", "not_users", "groups", "not_groups", "containers", "container_ids",
                     "not_container_ids", "container_names", "not_container_names"})) {
                if (node["users"]) scope.users = globs(node["users"], where + ".users");
                if (node["not_users"]) {
                    scope.not_users = globs(node["not_users"], where + ".not_users");
                }
                if (node["groups"]) scope.groups = globs(node["groups"], where + ".groups");
                if (node["not_groups"]) {
                    scope.not_groups = globs(node["not_groups"], where + ".not_groups");
                }
                if (node["container_ids"]) {
                    scope.container_ids = globs(node["container_ids"], where + ".container_ids");
                }
                if (node["container_names"]) {
                    scope.container_names =
                        globs(node["container_names"], where + ".container_names");
                }
                if (node["not_container_names"]) {
                    scope.not_container_names =
                        globs(node["not_container_names"], where + ".not_container_names");
                }
                if (node["not_container_ids"]) {
                    scope.not_container_ids =
                        globs(node["not_container_ids"], where + ".not_container_ids");
                }
                if (auto text = string(node, "containers", where, false)) {
                    if (*text == "any") {
                        scope.containers = ContainerScope::kAny;
                    } else if (*text == "host") {
                        scope.containers = ContainerScope::kHost;
                    } else if (*text == "container") {
                        scope.containers = ContainerScope::kContainer;
                    } else {
                        diag_.error(node["containers"], where +
                                                            ".containers: must be any, host or "
                                                            "container, got '" +
                                                            *text + "'");
                    }
                }
            }
            rule.scope = scope;
            // A scope narrows other conditions; it is not evidence by itself.
        }
        return conditions;
    }

    SignatureCondition read_signature(const YAML::Node& node, const std::string& path) {
        SignatureCondition condition;
        if (!diag_.check_keys(node, path, {"fields", "ids", "exclude", "min_confidence"})) {
            return condition;
        }
        if (node["fields"]) {
            for (auto& [text, item] : diag_.scalar_list(node["fields"], path + ".fields")) {
                if (auto field = parse_evidence_field(text)) {
                    condition.fields.push_back(*field);
                } else {
                    diag_.error(item, path + ".fields: unknown field '" + text +
                                          "' (process, cmdline, config, domain, payload, port, "
                                          "yara)");
                }
            }
        }
        if (node["ids"]) condition.ids = globs(node["ids"], path + ".ids");
        if (node["exclude"]) condition.exclude = globs(node["exclude"], path + ".exclude");
        if (node["min_confidence"]) {
            if (auto value = number(node["min_confidence"], path + ".min_confidence", 0, 1)) {
                condition.min_confidence = *value;
            }
        }
        return condition;
    }

    Diagnostics diag_;
    std::string source_;
};

// The rule file's text; its error says "PATH: cannot open: STRERROR".
Result<std::string> read_rule_file(const std::string& path) {
    auto text = read_file(path);
    if (text) return text;
    const int err = text.error().sys_errno;
    return fail(err == EACCES ? ErrorCode::kPermission : ErrorCode::kNotFound,
                path + ": cannot open: " + std::strerror(err), err);
}

// `read` (a RuleReader call) over the YAML text: its result, or every
// problem, one per line, as one kParse error.
template <typename T, typename Read>
Result<T> read_yaml(std::string_view yaml, const std::string& source, Read read) {
    RuleReader reader(source);
    T value;
    try {
        value = read(reader, YAML::Load(std::string(yaml)));
    } catch (const YAML::Exception& error) {
        return fail(ErrorCode::kParse, source + ":" + std::to_string(error.mark.line + 1) + ":" +
                                           std::to_string(error.mark.column + 1) + ": " +
                                           error.msg);
    }
    const auto errors = reader.errors();
    if (!errors.empty()) {
        std::string message;
        for (const auto& line : errors) message += (message.empty() ? "" : "\n") + line;
        return fail(ErrorCode::kParse, message);
    }
    return value;
}

// Parses every file in order with `parse` and hands each result to `take`;
// returns every file's problems, one per line ("" when there were none).
template <typename Parse, typename Take>
std::string for_each_file(const std::vector<std::string>& files, Parse parse, Take take) {
    std::string problems;
    for (const auto& path : files) {
        auto text = read_rule_file(path);
        if (!text) {
            problems += (problems.empty() ? "" : "\n") + text.error().message;
            continue;
        }
        auto parsed = parse(*text, path);
        if (!parsed) {
            problems += (problems.empty() ? "" : "\n") + parsed.error().message;
            continue;
        }
        take(std::move(*parsed));
    }
    return problems;
}

}  // namespace

bool TimeWindowCondition::contains(int64_t unix_ns) const {
    using namespace std::chrono;
    const date::time_zone* zone = nullptr;
    try {
        zone = date::locate_zone(time_zone);
    } catch (const std::exception&) {
        return false;  // checked at load; a tz database that lost it matches nothing
    }
    const auto local = zone->to_local(sys_time<nanoseconds>(nanoseconds(unix_ns)));
    const auto day_start = floor<std::chrono::days>(local);
    const int minute = static_cast<int>(duration_cast<minutes>(local - day_start).count());
    const int weekday = static_cast<int>(date::weekday(day_start).c_encoding());
    const auto on = [&](int day) {
        return days.empty() || std::find(days.begin(), days.end(), day) != days.end();
    };
    if (from_minute < to_minute) return on(weekday) && minute >= from_minute && minute < to_minute;
    // Past midnight: the evening part is today's window, the morning part yesterday's.
    if (minute >= from_minute) return on(weekday);
    return minute < to_minute && on((weekday + 6) % 7);
}

const char* to_string(EvidenceField field) {
    for (const auto& [value, name] : kFieldNames) {
        if (value == field) return name;
    }
    return "unknown";
}

std::optional<EvidenceField> parse_evidence_field(std::string_view name) {
    for (const auto& [value, text] : kFieldNames) {
        if (name == text) return value;
    }
    return std::nullopt;
}

const char* to_string(ExeLocation location) {
    for (const auto& [value, name] : kLocationNames) {
        if (value == location) return name;
    }
    return "unknown";
}

std::vector<ExeLocation> exe_locations(std::string_view exe) {
    std::vector<ExeLocation> out;
    if (exe.starts_with("/tmp/")) out.push_back(ExeLocation::kTmp);
    if (exe.starts_with("/var/tmp/")) out.push_back(ExeLocation::kVarTmp);
    if (exe.starts_with("/dev/shm/")) out.push_back(ExeLocation::kDevShm);
    if (exe.starts_with("/memfd:")) out.push_back(ExeLocation::kMemfd);
    if (exe.ends_with(" (deleted)") && !exe.starts_with("/memfd:")) {
        out.push_back(ExeLocation::kDeleted);
    }
    return out;
}

bool SignatureCondition::matches(EvidenceField field, std::string_view id,
                                 double confidence) const {
    if (confidence < min_confidence) return false;
    if (!fields.empty() && std::find(fields.begin(), fields.end(), field) == fields.end()) {
        return false;
    }
    if (!ids.empty() && std::none_of(ids.begin(), ids.end(),
                                     [&](const auto& glob) { return glob_matches(glob, id); })) {
        return false;
    }
    return std::none_of(exclude.begin(), exclude.end(),
                        [&](const auto& glob) { return glob_matches(glob, id); });
}

bool PriorityPattern::matches(std::string_view comm_value, std::string_view exe_value,
                              std::string_view cmdline_value, uint32_t uid,
                              std::string_view user) const {
    const auto any = [](const std::vector<std::string>& patterns, std::string_view text) {
        return patterns.empty() ||
               std::any_of(patterns.begin(), patterns.end(),
                           [&](const std::string& glob) { return glob_matches(glob, text); });
    };
    if (!any(comm, comm_value) || !any(exe, exe_value) || !any(cmdline, cmdline_value)) {
        return false;
    }
    if (users.empty()) return true;
    const std::string id = std::to_string(uid);
    return std::any_of(users.begin(), users.end(), [&](const std::string& name) {
        return name == id || (!user.empty() && name == user);
    });
}

int PriorityPolicy::priority_of(std::string_view comm, std::string_view exe,
                                std::string_view cmdline, uint32_t uid,
                                std::string_view user) const {
    for (const auto& pattern : processes) {
        if (pattern.matches(comm, exe, cmdline, uid, user)) return pattern.priority;
    }
    return default_priority;
}

std::optional<std::chrono::seconds> parse_duration(std::string_view text) {
    if (text.empty()) return std::nullopt;
    uint64_t value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || ptr == text.data()) return std::nullopt;
    const std::string_view unit(ptr, text.data() + text.size() - ptr);
    uint64_t scale = 0;
    if (unit == "s" || unit.empty()) {
        scale = 1;
    } else if (unit == "m") {
        scale = 60;
    } else if (unit == "h") {
        scale = 3600;
    } else if (unit == "d") {
        scale = 86400;
    } else {
        return std::nullopt;
    }
    if (value > (uint64_t{1} << 40)) return std::nullopt;
    return std::chrono::seconds(value * scale);
}

std::optional<uint64_t> parse_bytes(std::string_view text) {
    double value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || ptr == text.data() || value < 0 || !std::isfinite(value)) {
        return std::nullopt;
    }
    std::string_view unit(ptr, text.data() + text.size() - ptr);
    while (unit.starts_with(' ')) unit.remove_prefix(1);
    static constexpr std::pair<std::string_view, double> kUnits[] = {{"", 1},
                                                                     {"B", 1},
                                                                     {"kB", 1e3},
                                                                     {"KB", 1e3},
                                                                     {"MB", 1e6},
                                                                     {"GB", 1e9},
                                                                     {"TB", 1e12},
                                                                     {"KiB", 1024.0},
                                                                     {"MiB", 1048576.0},
                                                                     {"GiB", 1073741824.0},
                                                                     {"TiB", 1099511627776.0}};
    for (const auto& [name, scale] : kUnits) {
        if (unit == name) {
            const double bytes = value * scale;
            if (bytes > 1.8e19) return std::nullopt;
            return static_cast<uint64_t>(std::llround(bytes));
        }
    }
    return std::nullopt;
}

Result<std::vector<CorrelationRule>> parse_correlation_rules(std::string_view yaml,
                                                             const std::string& source) {
    return read_yaml<std::vector<CorrelationRule>>(
        yaml, source, [](RuleReader& reader, const YAML::Node& root) { return reader.read(root); });
}

Result<std::optional<PriorityPolicy>> parse_priority_policy(std::string_view yaml,
                                                            const std::string& source) {
    return read_yaml<std::optional<PriorityPolicy>>(
        yaml, source,
        [](RuleReader& reader, const YAML::Node& root) { return reader.read_priority(root); });
}

Result<std::optional<PriorityPolicy>> load_priority_policy(const std::vector<std::string>& files) {
    std::optional<PriorityPolicy> policy;
    const std::string problems =
        for_each_file(files, parse_priority_policy, [&](std::optional<PriorityPolicy> parsed) {
            if (parsed) policy = std::move(parsed);
        });
    if (!problems.empty()) return fail(ErrorCode::kParse, problems);
    return policy;
}

Result<GuardPolicies> load_guard_policies(const std::vector<std::string>& files) {
    auto rules = load_correlation_rules(files);
    if (!rules) return Unexpected{rules.error()};
    auto priority = load_priority_policy(files);
    if (!priority) return Unexpected{priority.error()};
    return GuardPolicies{std::move(*rules), std::move(*priority)};
}

Result<std::vector<CorrelationRule>> builtin_correlation_rules() {
    return parse_correlation_rules(builtin_correlation_rules_yaml(),
                                   "builtin:correlation-rules.yaml");
}

Result<std::vector<CorrelationRule>> load_correlation_rules(const std::vector<std::string>& files) {
    auto rules = builtin_correlation_rules();
    if (!rules) return rules;
    const std::string problems =
        for_each_file(files, parse_correlation_rules, [&](std::vector<CorrelationRule> parsed) {
            for (auto& rule : parsed) {
                auto existing = std::find_if(rules->begin(), rules->end(), [&](const auto& known) {
                    return known.id == rule.id;
                });
                if (existing != rules->end()) {
                    *existing = std::move(rule);
                } else {
                    rules->push_back(std::move(rule));
                }
            }
        });
    if (!problems.empty()) return fail(ErrorCode::kParse, problems);
    return rules;
}

}  // namespace gpuguard::rules
