// Reading correlation rule files and guard policies (priority_guard) from
// YAML into include/gpuguard/rules/correlation.h's types, with every problem
// reported as "file:line:col: message"; loading and merging files. A rule's
// `when:` conditions: correlation_conditions.cpp.
#include "rules/correlation_reader.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <map>
#include <sstream>

#include "gpuguard/common/read_file.h"
#include "gpuguard/common/trusted_file.h"
#include "gpuguard/rules/correlation.h"

namespace gpuguard::rules {
namespace {

const char* const kActions[] = {"alert",    "kill",  "kill_now",       "block_ip",
                                "deny_gpu", "pause", "from_signatures"};

}  // namespace

std::optional<double> parse_number(const std::string& text) {
    double value = 0;
    auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(value)) {
        return std::nullopt;
    }
    return value;
}

RuleReader::RuleReader(const std::string& source) : diag_(source), source_(source) {}

std::vector<CorrelationRule> RuleReader::read(const YAML::Node& root) {
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

std::vector<std::string> RuleReader::errors() const { return diag_.sorted_errors(); }

std::optional<PriorityPolicy> RuleReader::read_priority(const YAML::Node& root) {
    if (!root.IsMap()) return std::nullopt;  // read() reports it
    const YAML::Node node = root["priority_guard"];
    if (!node) return std::nullopt;
    const std::string path = "priority_guard";
    PriorityPolicy policy;
    for (const auto& entry : root) {  // the key's line, where a reader looks
        if (entry.first.Scalar() == "priority_guard") policy.source = diag_.line_of(entry.first);
    }
    if (!diag_.check_keys(node, path,
                          {"pause_above_percent", "resume_below_percent", "max_pause", "cooldown",
                           "default_priority", "dry_run", "processes"})) {
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
        if (auto value = duration(node["cooldown"], path + ".cooldown")) policy.cooldown = *value;
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
        read_priority_pattern(list[i], where, policy);
    }
    return policy;
}

// One entry of priority_guard.processes, added to `policy` unless it is not a mapping.
void RuleReader::read_priority_pattern(const YAML::Node& item, const std::string& where,
                                       PriorityPolicy& policy) {
    PriorityPattern pattern;
    pattern.source = diag_.line_of(item);
    if (!diag_.check_keys(item, where, {"comm", "exe", "cmdline", "users", "priority"})) {
        return;
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

std::optional<std::string> RuleReader::string(const YAML::Node& map, const char* key,
                                              const std::string& path, bool required) {
    const YAML::Node node = map[key];
    if (!node) {
        if (required) diag_.error(map, path + ": " + key + ": missing");
        return std::nullopt;
    }
    return diag_.scalar(node, path + "." + key);
}

std::optional<double> RuleReader::number(const YAML::Node& node, const std::string& path, double lo,
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

std::string RuleReader::fmt_number(double value) {
    std::ostringstream out;
    out << value;
    return out.str();
}

std::optional<std::chrono::seconds> RuleReader::duration(const YAML::Node& node,
                                                         const std::string& path) {
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

std::optional<int> RuleReader::whole(const YAML::Node& node, const std::string& path) {
    auto value = number(node, path, -1e6, 1e6);
    if (!value) return std::nullopt;
    if (*value != std::floor(*value)) {
        diag_.error(node, path + ": must be a whole number");
        return std::nullopt;
    }
    return static_cast<int>(*value);
}

std::optional<bool> RuleReader::boolean(const YAML::Node& node, const std::string& path) {
    auto text = diag_.scalar(node, path, "true or false");
    if (!text) return std::nullopt;
    if (*text == "true") return true;
    if (*text == "false") return false;
    diag_.error(node, path + ": must be true or false, got '" + *text + "'");
    return std::nullopt;
}

std::vector<std::string> RuleReader::globs(const YAML::Node& node, const std::string& path) {
    std::vector<std::string> out;
    for (auto& [text, item] : diag_.scalar_list(node, path)) out.push_back(text);
    return out;
}

std::optional<Severity> RuleReader::severity(const YAML::Node& map, const std::string& where,
                                             bool required) {
    const auto text = string(map, "severity", where, required);
    if (!text) return std::nullopt;
    if (auto parsed = parse_severity(*text)) return parsed;
    diag_.error(map["severity"], where + ".severity: unknown severity '" + *text +
                                     "' (emergency, alert, critical, error, warning, notice, "
                                     "info, debug)");
    return std::nullopt;
}

std::optional<std::string> RuleReader::action(const YAML::Node& map, const std::string& where) {
    const auto text = string(map, "action", where, false);
    if (!text) return std::nullopt;
    if (std::find_if(std::begin(kActions), std::end(kActions),
                     [&](const char* name) { return *text == name; }) != std::end(kActions)) {
        return text;
    }
    diag_.error(map["action"], where + ".action: unknown action '" + *text +
                                   "' (alert, kill, kill_now, block_ip, deny_gpu, pause, "
                                   "from_signatures)");
    return std::nullopt;
}

CorrelationRule RuleReader::read_rule(const YAML::Node& node, const std::string& path) {
    if (node.IsMap() && node["override"]) return read_override(node, path);
    CorrelationRule rule;
    rule.source = diag_.line_of(node);
    if (!diag_.check_keys(node, path,
                          {"id", "name", "description", "severity", "mitre", "action", "window",
                           "enabled", "dry_run", "when", "confidence", "supporting", "counter"})) {
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
    if (auto value = severity(node, where, true)) rule.severity = *value;
    if (const YAML::Node mitre = node["mitre"]) {
        if (diag_.check_keys(mitre, where + ".mitre", {"id", "name", "tactic"})) {
            if (auto value = string(mitre, "id", where + ".mitre", true)) rule.mitre_id = *value;
            if (auto value = string(mitre, "name", where + ".mitre", false)) {
                rule.mitre_name = *value;
            }
            if (auto value = string(mitre, "tactic", where + ".mitre", false)) {
                rule.mitre_tactic = *value;
            }
        }
    }
    if (auto value = action(node, where)) rule.action = *value;
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
    if (const YAML::Node supporting = node["supporting"]) {
        rule.supporting = read_supporting(supporting, where + ".supporting");
    }
    if (const YAML::Node counter = node["counter"]) {
        rule.counter = read_supporting(counter, where + ".counter");
        if (rule.counter && !rule.counter->severity) {
            diag_.error(counter, where + ".counter.severity: required (the severity it lowers to)");
        } else if (rule.counter && *rule.counter->severity < rule.severity) {
            diag_.error(counter["severity"], where +
                                                 ".counter.severity: must not be above the "
                                                 "rule's own severity");
        }
    }
    if (rule.unexplained_gpu_load && (rule.supporting || rule.counter)) {
        diag_.error(node, where +
                              ": a rule judged per GPU (unexplained_gpu_load) takes no "
                              "supporting or counter signals");
    }
    if (id) rule.id = *id;
    return rule;
}

// `supporting:` {severity, min, weight, signals: [{name, <conditions>}]}.
std::shared_ptr<const SupportingSignals> RuleReader::read_supporting(const YAML::Node& node,
                                                                     const std::string& path) {
    auto supporting = std::make_shared<SupportingSignals>();
    if (!diag_.check_keys(node, path, {"severity", "min", "weight", "signals"})) return nullptr;
    if (auto severity = string(node, "severity", path, false)) {
        if (auto parsed = parse_severity(*severity)) {
            supporting->severity = *parsed;
        } else {
            diag_.error(node["severity"], path + ".severity: unknown severity '" + *severity + "'");
        }
    }
    if (node["min"]) {
        if (auto value = whole(node["min"], path + ".min"); value && *value >= 1) {
            supporting->min = static_cast<uint32_t>(*value);
        } else if (value) {
            diag_.error(node["min"], path + ".min: must be at least 1");
        }
    }
    if (node["weight"]) {
        if (auto value = number(node["weight"], path + ".weight", 0, 1))
            supporting->weight = *value;
    }
    const YAML::Node list = node["signals"];
    if (!list || !list.IsSequence() || list.size() == 0) {
        diag_.error(list ? list : node, path + ".signals: must be a list of conditions");
        return supporting;
    }
    for (size_t i = 0; i < list.size(); ++i) {
        const std::string where = path + ".signals[" + std::to_string(i) + "]";
        const YAML::Node item = list[i];
        if (!item.IsMap()) {
            diag_.error(item, where + ": must be a mapping of conditions");
            continue;
        }
        CorrelationRule signal;
        signal.source = diag_.line_of(item);
        // The signal's conditions are the mapping less its name.
        YAML::Node conditions(YAML::NodeType::Map);
        for (const auto& entry : item) {
            if (entry.first.Scalar() == "name") {
                if (auto name = diag_.scalar(entry.second, where + ".name")) signal.name = *name;
            } else {
                conditions[entry.first] = entry.second;
            }
        }
        if (signal.name.empty()) diag_.error(item, where + ": name: missing");
        if (read_conditions(conditions, where, signal) == 0) {
            diag_.error(item, where + ": needs at least one condition");
        }
        if (signal.supporting || signal.scope) {
            diag_.error(item, where + ": a signal cannot have a scope");
        }
        if (signal.unexplained_gpu_load) {
            diag_.error(item, where + ": unexplained_gpu_load judges a GPU: a rule of its own");
        }
        supporting->signals.push_back(std::move(signal));
    }
    return supporting;
}

void RuleReader::read_confidence(const YAML::Node& node, const std::string& path,
                                 CorrelationRule& rule) {
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

namespace {

// The rule file's text; its error says "PATH: cannot open: STRERROR".
Result<std::string> read_rule_file(const std::string& path) {
    auto text = read_trusted_file(path);
    if (text) return text;
    const int err = text.error().sys_errno;
    if (err == 0) return text;  // refused: writable by others than root
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
    std::string override_problems;
    std::string problems =
        for_each_file(files, parse_correlation_rules, [&](std::vector<CorrelationRule> parsed) {
            for (auto& rule : parsed) {
                auto existing = std::find_if(rules->begin(), rules->end(), [&](const auto& known) {
                    return known.id == rule.id;
                });
                if (rule.override_of) {
                    const std::string why = existing == rules->end()
                                                ? "no rule " + rule.id +
                                                      " to override (none built in, none " +
                                                      "in an earlier file)"
                                                : apply_override(*rule.override_of, *existing);
                    if (why.empty()) {
                        existing->overridden_at.push_back(rule.source);
                    } else {
                        override_problems += (override_problems.empty() ? "" : "\n") + rule.source +
                                             ": " + rule.id + ".override: " + why;
                    }
                    continue;
                }
                if (existing != rules->end()) {
                    *existing = std::move(rule);
                } else {
                    rules->push_back(std::move(rule));
                }
            }
        });
    if (!override_problems.empty()) {
        problems += (problems.empty() ? "" : "\n") + override_problems;
    }
    if (!problems.empty()) return fail(ErrorCode::kParse, problems);
    return rules;
}

}  // namespace gpuguard::rules
