// A site file's override of a rule known before it: `{id, override: {...}}`
// read here (RuleReader::read_override) and applied by
// load_correlation_rules (apply_override), so a site tunes a built-in rule
// (scopes a workload out, trials it in dry run, raises its action) without
// copying it and falling behind its next release.
#include <string>
#include <vector>

#include "gpuguard/rules/correlation.h"
#include "rules/correlation_reader.h"

namespace gpuguard::rules {
namespace {

void append(std::vector<std::string>& to, const std::vector<std::string>& more) {
    to.insert(to.end(), more.begin(), more.end());
}

void widen(ScopeCondition& scope, const ScopeCondition& more, bool sets_containers) {
    for (const ScopeList& list : kScopeLists) append(scope.*list.member, more.*list.member);
    if (sets_containers) scope.containers = more.containers;
}

}  // namespace

CorrelationRule RuleReader::read_override(const YAML::Node& node, const std::string& path) {
    CorrelationRule entry;
    entry.source = diag_.line_of(node);
    const auto id = string(node, "id", path, true);
    const std::string named = id ? path + " (" + *id + ")" : path;
    if (!diag_.check_keys(node, named, {"id", "override"})) return entry;  // nothing else
    const std::string where = named + ".override";
    const YAML::Node body = node["override"];
    if (!body.IsMap() || body.size() == 0) {
        diag_.error(body, where +
                              ": must set one or more of enabled, dry_run, severity, action, "
                              "window, scope");
        return entry;
    }
    if (!diag_.check_keys(body, where,
                          {"enabled", "dry_run", "severity", "action", "window", "scope"})) {
        return entry;
    }
    auto change = std::make_shared<RuleOverride>();
    if (body["enabled"]) change->enabled = boolean(body["enabled"], where + ".enabled");
    if (body["dry_run"]) change->dry_run = boolean(body["dry_run"], where + ".dry_run");
    change->severity = severity(body, where, false);
    change->action = action(body, where);
    if (body["window"]) change->window = duration(body["window"], where + ".window");
    if (const YAML::Node scope = body["scope"]) {
        if (!scope.IsMap()) {
            diag_.error(scope, where + ".scope: must be a map");
        } else {
            change->scope = read_scope(scope, where + ".scope");
            change->scope_sets_containers = static_cast<bool>(scope["containers"]);
        }
    }
    if (id) entry.id = *id;
    entry.override_of = std::move(change);
    return entry;
}

std::string apply_override(const RuleOverride& change, CorrelationRule& rule) {
    if (change.severity && rule.counter && rule.counter->severity &&
        *rule.counter->severity < *change.severity) {
        return "severity " + std::string(to_string(*change.severity)) + " is below its counter's " +
               to_string(*rule.counter->severity) + " (a counter only lowers a detection)";
    }
    if (change.scope && rule.unexplained_gpu_load) {
        return "a rule judged per GPU (unexplained_gpu_load) has no process to scope";
    }
    if (change.enabled) rule.enabled = *change.enabled;
    if (change.dry_run) rule.dry_run = *change.dry_run;
    if (change.severity) rule.severity = *change.severity;
    if (change.action) rule.action = *change.action;
    if (change.window) rule.window = *change.window;
    if (change.scope) {
        ScopeCondition scope = rule.scope ? *rule.scope : ScopeCondition{};
        widen(scope, *change.scope, change.scope_sets_containers);
        rule.scope = std::move(scope);
    }
    return "";
}

}  // namespace gpuguard::rules
