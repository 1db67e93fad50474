// A correlation rule's `when:` conditions read from YAML, one function per
// condition kind (RuleReader, rules/correlation_reader.h; those over a window
// of readings in correlation_window_conditions.cpp), with every problem
// reported as "file:line:col: message".
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include <date/tz.h>

#include "gpuguard/common/text.h"
#include "gpuguard/rules/correlation.h"
#include "rules/correlation_reader.h"

namespace gpuguard::rules {
namespace {

bool time_zone_known(const std::string& name) {
    try {
        return date::locate_zone(name) != nullptr;
    } catch (const std::exception&) {
        return false;
    }
}

}  // namespace

// "HH:MM" -> minutes after midnight ("24:00" allowed as an end).
std::optional<int> RuleReader::clock_minutes(const YAML::Node& node, const std::string& path) {
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

TimeWindowCondition RuleReader::read_time_window(const YAML::Node& node, const std::string& where) {
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
    if (node["from"]) window.from_minute = clock_minutes(node["from"], where + ".from").value_or(0);
    if (node["to"]) window.to_minute = clock_minutes(node["to"], where + ".to").value_or(24 * 60);
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
void RuleReader::size(const YAML::Node& node, const char* key, const std::string& where,
                      uint64_t& bytes) {
    if (!node[key]) return;
    const std::string field = where + "." + key;
    auto text = diag_.scalar(node[key], field);
    auto parsed = text ? parse_bytes(*text) : std::nullopt;
    if (text && !parsed) {
        diag_.error(node[key], field + ": must be a size like 20GB or 512MiB, got '" + *text + "'");
    }
    if (parsed) bytes = *parsed;
}

int RuleReader::read_conditions(const YAML::Node& when, const std::string& path,
                                CorrelationRule& rule) {
    if (!diag_.check_keys(when, path, kConditionKeys)) {
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
        read_names(node, path + ".exe_location", "location", kLocationNames, rule.exe_location);
        ++conditions;
    }
    if (const YAML::Node node = when["disguised"]) {
        rule.disguised = boolean(node, path + ".disguised").value_or(false);
        ++conditions;
    }
    if (const YAML::Node node = when["known_bad_executable"]) {
        rule.known_bad_executable = boolean(node, path + ".known_bad_executable").value_or(false);
        ++conditions;
    }
    if (const YAML::Node node = when["hash_rate_above_threshold"]) {
        rule.hash_rate_above_threshold =
            boolean(node, path + ".hash_rate_above_threshold").value_or(false);
        ++conditions;
    }
    if (const YAML::Node node = when["opaque_peer"]) {
        rule.opaque_peer = boolean(node, path + ".opaque_peer").value_or(false);
        ++conditions;
    }
    if (const YAML::Node node = when["mining_flow"]) {
        const std::string where = path + ".mining_flow";
        if (!node.IsMap()) {
            if (boolean(node, where).value_or(false)) rule.mining_flow.emplace();
        } else if (diag_.check_keys(node, where,
                                    {"min_age", "min_pushes", "max_bytes_per_minute"})) {
            MiningFlowCondition& shape = rule.mining_flow.emplace();
            if (node["min_age"]) {
                if (auto value = duration(node["min_age"], where + ".min_age")) {
                    shape.min_age = *value;
                }
            }
            if (node["min_pushes"]) {
                if (auto value = number(node["min_pushes"], where + ".min_pushes", 1, 1e6)) {
                    shape.min_pushes = static_cast<uint32_t>(*value);
                }
            }
            size(node, "max_bytes_per_minute", where, shape.max_bytes_per_minute);
        }
        ++conditions;
    }
    if (const YAML::Node node = when["pool_answered"]) {
        rule.pool_answered = boolean(node, path + ".pool_answered").value_or(false);
        ++conditions;
    }
    if (const YAML::Node node = when["hidden_from_proc"]) {
        rule.hidden_from_proc = boolean(node, path + ".hidden_from_proc").value_or(false);
        ++conditions;
    }
    if (const YAML::Node node = when["module_load"]) {
        rule.module_load = read_module_load(node, path + ".module_load");
        ++conditions;
    }
    if (const YAML::Node node = when["file_changed"]) {
        static constexpr std::string_view kKinds[] = {"preload",      "cron",     "systemd",
                                                      "shell_rc",     "ssh_keys", "agent_pins",
                                                      "agent_config", "other"};
        for (auto& [text, item] : diag_.scalar_list(node, path + ".file_changed")) {
            if (std::find(std::begin(kKinds), std::end(kKinds), text) == std::end(kKinds)) {
                diag_.error(item, path + ".file_changed: unknown kind '" + text +
                                      "' (preload, cron, systemd, shell_rc, ssh_keys, "
                                      "agent_pins, agent_config, other)");
            } else {
                rule.file_changed.push_back(text);
            }
        }
        ++conditions;
    }
    if (const YAML::Node node = when["library_injection"]) {
        // true, or the signs of which the library shows at least one.
        if (node.IsSequence()) {
            rule.library_injection = true;
            const size_t errors_before = diag_.count();
            read_names(node, path + ".library_injection", "sign", kLibrarySignNames,
                       rule.library_signs);
            if (rule.library_signs.empty() && diag_.count() == errors_before) {
                diag_.error(node, path + ".library_injection: name at least one sign, or say true");
            }
        } else {
            rule.library_injection = boolean(node, path + ".library_injection").value_or(false);
        }
        ++conditions;
    }
    if (const YAML::Node node = when["persistence_after_detection"]) {
        rule.persistence_after_detection =
            boolean(node, path + ".persistence_after_detection").value_or(false);
        ++conditions;
    }
    if (const YAML::Node node = when["agent_tamper"]) {
        read_agent_tamper(node, path + ".agent_tamper", rule.agent_tamper);
        ++conditions;
    }
    if (const YAML::Node node = when["trust_change"]) {
        rule.trust_change = read_trust_change(node, path + ".trust_change");
        ++conditions;
    }
    if (const YAML::Node node = when["memory_growth"]) {
        rule.memory_growth = read_memory_growth(node, path + ".memory_growth");
        ++conditions;
    }
    if (const YAML::Node node = when["sustained_utilization"]) {
        rule.sustained_utilization =
            read_sustained_utilization(node, path + ".sustained_utilization");
        ++conditions;
    }
    if (const YAML::Node node = when["sustained_cpu"]) {
        rule.sustained_cpu = read_sustained_cpu(node, path + ".sustained_cpu");
        ++conditions;
    }
    if (const YAML::Node node = when["gpu_stack"]) {
        static constexpr const char* kStacks[] = {"ml_framework", "graphics", "runtime_only",
                                                  "driver_only", "none"};
        for (auto& [text, item] : diag_.scalar_list(node, path + ".gpu_stack")) {
            if (std::find_if(std::begin(kStacks), std::end(kStacks), [&text = text](const char* s) {
                    return text == s;
                }) == std::end(kStacks)) {
                diag_.error(item,
                            path + ".gpu_stack: unknown stack '" + text +
                                "' (ml_framework, graphics, runtime_only, driver_only, none)");
            } else {
                rule.gpu_stack.push_back(text);
            }
        }
        if (rule.gpu_stack.empty()) diag_.error(node, path + ".gpu_stack: name at least one stack");
        ++conditions;
    }
    if (const YAML::Node node = when["unreadable"]) {
        for (auto& [text, item] : diag_.scalar_list(node, path + ".unreadable")) {
            if (text != "executable" && text != "config") {
                diag_.error(item,
                            path + ".unreadable: unknown kind '" + text + "' (executable, config)");
            } else {
                rule.unreadable.push_back(text);
            }
        }
        if (rule.unreadable.empty()) {
            diag_.error(node, path + ".unreadable: name executable, config or both");
        }
        ++conditions;
    }
    if (const YAML::Node node = when["unexplained_gpu_load"]) {
        rule.unexplained_gpu_load = read_unexplained_gpu_load(node, path + ".unexplained_gpu_load");
        ++conditions;
    }
    if (const YAML::Node node = when["gpu_unseen"]) {
        if (diag_.check_keys(node, path + ".gpu_unseen", {"for"}) && node["for"]) {
            rule.gpu_unseen = duration(node["for"], path + ".gpu_unseen.for");
        } else if (!node["for"]) {
            diag_.error(node, path + ".gpu_unseen: needs for: (how long the GPU has listed it)");
        }
        ++conditions;
    }
    if (const YAML::Node node = when["quiet_io"]) {
        rule.quiet_io = read_quiet_io(node, path + ".quiet_io");
        ++conditions;
    }
    if (const YAML::Node node = when["gpu_pipe_mix"]) {
        rule.gpu_pipe_mix = read_gpu_pipe_mix(node, path + ".gpu_pipe_mix");
        ++conditions;
    }
    if (const YAML::Node node = when["gpu_memory_above"]) {
        rule.gpu_memory_above = read_gpu_memory_above(node, path + ".gpu_memory_above");
        ++conditions;
    }
    if (const YAML::Node node = when["gpu_index_not_in"]) {
        read_gpu_index_not_in(node, path + ".gpu_index_not_in", rule.gpu_index_not_in);
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
    // A count: a whole number from 1 to a million.
    const auto count = [&](const char* key, std::optional<uint32_t>& into) {
        const YAML::Node node = when[key];
        if (!node) return;
        const std::string where = path + "." + key;
        if (auto value = number(node, where, 1, 1e6)) {
            if (*value != std::floor(*value)) diag_.error(node, where + ": must be a whole number");
            into = static_cast<uint32_t>(*value);
        }
        ++conditions;
    };
    count("max_gpu_processes", rule.max_gpu_processes);
    count("gpu_xid", rule.gpu_xid);
    if (const YAML::Node node = when["gpu_outside_allocation"]) {
        if (auto text = diag_.scalar(node, path + ".gpu_outside_allocation")) {
            if (*text != "outside" && *text != "none_given") {
                diag_.error(node, path + ".gpu_outside_allocation: unknown value '" + *text +
                                      "' (outside, none_given)");
            } else {
                rule.gpu_outside_allocation = *text;
            }
        }
        ++conditions;
    }
    if (const YAML::Node node = when["scope"]) {
        rule.scope = read_scope(node, path + ".scope");
        // A scope narrows other conditions; it is not evidence by itself.
    }
    // A GPU has no user, name or connections to judge.
    if (rule.unexplained_gpu_load && (rule.scope || conditions > (rule.time_window ? 2 : 1))) {
        diag_.error(when["unexplained_gpu_load"],
                    path +
                        ".unexplained_gpu_load: judges a GPU, not a process: only time_window "
                        "goes with it");
    }
    return conditions;
}

void RuleReader::read_agent_tamper(const YAML::Node& node, const std::string& where,
                                   std::vector<std::string>& kinds) {
    for (auto& [text, item] : diag_.scalar_list(node, where)) {
        const auto known = std::find_if(std::begin(kAgentTamperKinds), std::end(kAgentTamperKinds),
                                        [&text = text](const char* kind) { return text == kind; });
        if (known == std::end(kAgentTamperKinds)) {
            diag_.error(item, where + ": unknown kind '" + text +
                                  "' (stop, signal, bpf_command, pin_removed, down)");
        } else {
            kinds.push_back(text);
        }
    }
    if (kinds.empty()) diag_.error(node, where + ": name at least one kind");
}

TrustChangeCondition RuleReader::read_trust_change(const YAML::Node& node,
                                                   const std::string& where) {
    TrustChangeCondition condition;
    if (!diag_.check_keys(node, where, {"changes", "writers", "flagged_writer"})) return condition;
    static constexpr std::string_view kChanges[] = {"allowlist_added", "action_lowered",
                                                    "rule_disabled", "any"};
    static constexpr std::string_view kWriters[] = {"package_manager", "systemctl", "other",
                                                    "unknown"};
    const auto read_list = [&](const char* key, const auto& known, const char* names,
                               std::vector<std::string>& out) {
        if (!node[key]) return;
        for (auto& [text, item] : diag_.scalar_list(node[key], where + "." + key)) {
            if (std::find(std::begin(known), std::end(known), text) == std::end(known)) {
                diag_.error(item,
                            where + "." + key + ": unknown value '" + text + "' (" + names + ")");
            } else {
                out.push_back(text);
            }
        }
    };
    read_list("changes", kChanges, "allowlist_added, action_lowered, rule_disabled, any",
              condition.changes);
    read_list("writers", kWriters, "package_manager, systemctl, other, unknown", condition.writers);
    if (node["flagged_writer"]) {
        condition.flagged_writer =
            boolean(node["flagged_writer"], where + ".flagged_writer").value_or(false);
    }
    if (condition.changes.empty()) {
        diag_.error(node, where +
                              ": needs changes: (allowlist_added, action_lowered, "
                              "rule_disabled, any)");
    }
    return condition;
}

ModuleLoadCondition RuleReader::read_module_load(const YAML::Node& node, const std::string& where) {
    ModuleLoadCondition condition;
    if (!diag_.check_keys(node, where, {"while", "driver_modules", "driver_loaders"})) {
        return condition;
    }
    static constexpr ModuleLoadContext kContexts[] = {
        ModuleLoadContext::kGpuProcess, ModuleLoadContext::kFlaggedLineage,
        ModuleLoadContext::kMinerOnHost, ModuleLoadContext::kAny};
    if (!node["while"]) {
        diag_.error(node,
                    where + ": needs while: (gpu_process, flagged_lineage, miner_on_host, any)");
    } else {
        for (auto& [text, item] : diag_.scalar_list(node["while"], where + ".while")) {
            const auto found =
                std::find_if(std::begin(kContexts), std::end(kContexts),
                             [&text = text](auto context) { return text == to_string(context); });
            if (found == std::end(kContexts)) {
                diag_.error(item, where + ".while: unknown context '" + text +
                                      "' (gpu_process, flagged_lineage, miner_on_host, any)");
            } else {
                condition.when.push_back(*found);
            }
        }
    }
    if (node["driver_modules"]) {
        condition.driver_modules = globs(node["driver_modules"], where + ".driver_modules");
    }
    if (node["driver_loaders"]) {
        condition.driver_loaders = globs(node["driver_loaders"], where + ".driver_loaders");
    }
    if (condition.driver_modules.empty() != condition.driver_loaders.empty()) {
        diag_.error(node, where + ": driver_modules and driver_loaders go together");
    }
    return condition;
}

std::optional<uint64_t> RuleReader::read_gpu_memory_above(const YAML::Node& node,
                                                          const std::string& where) {
    auto text = diag_.scalar(node, where);
    auto bytes = text ? parse_bytes(*text) : std::nullopt;
    if (text && !bytes) {
        diag_.error(node, where + ": must be a size like 40GiB, got '" + *text + "'");
    }
    return bytes;
}

void RuleReader::read_gpu_index_not_in(const YAML::Node& node, const std::string& where,
                                       std::vector<uint32_t>& indexes) {
    for (auto& [text, item] : diag_.scalar_list(node, where)) {
        auto index = parse_number(text);
        if (!index || *index < 0 || *index != std::floor(*index)) {
            diag_.error(item, where + ": not a GPU index: '" + text + "'");
        } else {
            indexes.push_back(static_cast<uint32_t>(*index));
        }
    }
}

ScopeCondition RuleReader::read_scope(const YAML::Node& node, const std::string& where) {
    ScopeCondition scope;
    static const std::vector<const char*> keys = [] {
        std::vector<const char*> all;
        for (const ScopeList& list : kScopeLists) all.push_back(list.key);
        all.push_back("containers");
        return all;
    }();
    if (!diag_.check_keys(node, where, keys)) return scope;
    // Each list under its key, its entries checked by `valid` (what an entry
    // must be, for the error) where one is given.
    const auto read_list = [&](std::string_view key, std::vector<std::string>& out,
                               bool (*valid)(std::string_view), const char* what) {
        const YAML::Node items = node[std::string(key)];
        if (!items) return;
        const std::string path = where + "." + std::string(key);
        size_t index = 0;
        for (auto& [text, item] : diag_.scalar_list(items, path)) {
            if (valid && !valid(text)) {
                diag_.error(
                    item, path + "[" + std::to_string(index) + "]: '" + text + "' is not " + what);
            } else {
                out.push_back(text);
            }
            ++index;
        }
    };
    const auto absolute = [](std::string_view glob) { return glob.starts_with('/'); };
    for (const ScopeList& list : kScopeLists) {
        const std::string_view key = list.key;
        if (key.ends_with("pod_namespaces")) {
            read_list(key, scope.*list.member, namespace_glob, "a namespace or a glob of one");
        } else if (key.ends_with("exe_paths")) {
            read_list(key, scope.*list.member, absolute, "an absolute path or a glob of one");
        } else {
            read_list(key, scope.*list.member, nullptr, "");
        }
    }
    if (auto text = string(node, "containers", where, false)) {
        if (*text == "any") {
            scope.containers = ContainerScope::kAny;
        } else if (*text == "host") {
            scope.containers = ContainerScope::kHost;
        } else if (*text == "container") {
            scope.containers = ContainerScope::kContainer;
        } else {
            diag_.error(node["containers"],
                        where + ".containers: must be any, host or container, got '" + *text + "'");
        }
    }
    return scope;
}

SignatureCondition RuleReader::read_signature(const YAML::Node& node, const std::string& path) {
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

}  // namespace gpuguard::rules
