#include "gpuguard/rules/trust_diff.h"

#include <algorithm>
#include <map>
#include <string_view>

namespace gpuguard::rules {
namespace {

// Entries of `after` not in `before` ("+ x"), and those gone ("- x").
void list_diff(const std::string& what, const std::vector<std::string>& before,
               const std::vector<std::string>& after, std::vector<std::string>& added,
               std::vector<std::string>& removed) {
    for (const auto& entry : after) {
        if (std::find(before.begin(), before.end(), entry) == before.end()) {
            added.push_back(what + " + " + entry);
        }
    }
    for (const auto& entry : before) {
        if (std::find(after.begin(), after.end(), entry) == after.end()) {
            removed.push_back(what + " - " + entry);
        }
    }
}

std::string origin_of(const EffectiveSignature& signature) {
    return signature.origin.empty() ? "" : " (" + signature.origin + ")";
}

void diff_scope(const CorrelationRule& before, const CorrelationRule& after, TrustDiff& diff) {
    const ScopeCondition none;
    const ScopeCondition& was = before.scope ? *before.scope : none;
    const ScopeCondition& now = after.scope ? *after.scope : none;
    const std::string id = after.id + " scope.";
    for (const ScopeList& list : kScopeLists) {
        if (!std::string_view(list.key).starts_with("not_")) continue;  // narrowing, not widening
        list_diff(id + list.key, was.*list.member, now.*list.member, diff.allowlist_added,
                  diff.other_changes);
    }
}

}  // namespace

int action_strength(Action action) {
    switch (action) {
        case Action::kAlert:
            return 0;
        case Action::kBlockIp:
            return 1;
        case Action::kDenyGpu:
            return 2;
        case Action::kKill:
            return 3;
        case Action::kKillNow:
            return 4;
    }
    return 0;
}

int action_strength(const std::string& action) {
    static constexpr std::string_view kOrder[] = {
        "alert", "pause", "block_ip", "deny_gpu", "from_signatures", "kill", "kill_now"};
    const auto at = std::find(std::begin(kOrder), std::end(kOrder), action);
    return at == std::end(kOrder) ? 0 : static_cast<int>(at - std::begin(kOrder));
}

TrustDiff diff_rule_sets(const RuleSet& before, const RuleSet& after) {
    TrustDiff diff;
    const Allowlist& was = before.allowlist();
    const Allowlist& now = after.allowlist();
    list_diff("allowlist.users", was.users, now.users, diff.allowlist_added, diff.other_changes);
    list_diff("allowlist.exe_paths", was.exe_paths, now.exe_paths, diff.allowlist_added,
              diff.other_changes);
    list_diff("allowlist.sha256", was.sha256, now.sha256, diff.allowlist_added, diff.other_changes);
    list_diff("allowlist.containers", was.containers, now.containers, diff.allowlist_added,
              diff.other_changes);
    std::map<std::string_view, const EffectiveSignature*> later;
    for (const auto& signature : after.effective())
        later.emplace(signature.signature.id, &signature);
    for (const auto& old : before.effective()) {
        const std::string& id = old.signature.id;
        const auto found = later.find(id);
        if (found == later.end()) {
            diff.rules_disabled.push_back(
                id + (after.disabled().contains(id) ? " disabled" : " removed") + " (was " +
                to_string(old.action) + ")");
            continue;
        }
        const EffectiveSignature& now_signature = *found->second;
        later.erase(found);
        const int from = action_strength(old.action);
        const int to = action_strength(now_signature.action);
        if (from != to) {
            (to < from ? diff.actions_lowered : diff.other_changes)
                .push_back(id + " action " + to_string(old.action) + " -> " +
                           to_string(now_signature.action) + origin_of(now_signature));
        }
        // Severities run most severe first: a larger value is a lower one.
        if (old.signature.severity != now_signature.signature.severity) {
            (now_signature.signature.severity > old.signature.severity ? diff.actions_lowered
                                                                       : diff.other_changes)
                .push_back(id + " severity " + to_string(old.signature.severity) + " -> " +
                           to_string(now_signature.signature.severity) + origin_of(now_signature));
        }
    }
    for (const auto& signature : after.effective()) {
        if (later.contains(signature.signature.id)) {
            diff.other_changes.push_back(signature.signature.id + " added (" +
                                         to_string(signature.action) + ")" + origin_of(signature));
        }
    }
    for (const auto& sha : before.known_bad_sha256()) {
        if (!after.known_bad_sha256().contains(sha)) {
            diff.rules_disabled.push_back("known_bad.sha256 - " + sha);
        }
    }
    for (const auto& sha : after.known_bad_sha256()) {
        if (!before.known_bad_sha256().contains(sha)) {
            diff.other_changes.push_back("known_bad.sha256 + " + sha);
        }
    }
    const auto threshold = [](const RuleSet& set) {
        return set.hash_rate_threshold() ? std::to_string(*set.hash_rate_threshold()) + " H/s"
                                         : std::string("unset");
    };
    if (before.hash_rate_threshold() != after.hash_rate_threshold()) {
        const bool raised = !after.hash_rate_threshold() ||
                            (before.hash_rate_threshold() &&
                             *after.hash_rate_threshold() > *before.hash_rate_threshold());
        (raised ? diff.actions_lowered : diff.other_changes)
            .push_back("hash_rate_threshold " + threshold(before) + " -> " + threshold(after));
    }
    return diff;
}

TrustDiff diff_correlation_rules(const std::vector<CorrelationRule>& before,
                                 const std::vector<CorrelationRule>& after) {
    TrustDiff diff;
    std::map<std::string_view, const CorrelationRule*> later;
    for (const auto& rule : after) later.emplace(rule.id, &rule);
    for (const auto& old : before) {
        if (!old.enabled) continue;
        const auto found = later.find(old.id);
        if (found == later.end() || !found->second->enabled) {
            diff.rules_disabled.push_back(
                old.id + (found == later.end() ? " removed" : " disabled") + " (" + old.name + ")");
            if (found != later.end()) later.erase(found);
            continue;
        }
        const CorrelationRule& now = *found->second;
        later.erase(found);
        const std::string where = now.source.empty() ? "" : " (" + now.source + ")";
        if (action_strength(old.action) != action_strength(now.action)) {
            (action_strength(now.action) < action_strength(old.action) ? diff.actions_lowered
                                                                       : diff.other_changes)
                .push_back(old.id + " action " + old.action + " -> " + now.action + where);
        }
        if (!old.dry_run && now.dry_run) {
            diff.actions_lowered.push_back(old.id + " dry_run false -> true" + where);
        } else if (old.dry_run && !now.dry_run) {
            diff.other_changes.push_back(old.id + " dry_run true -> false" + where);
        }
        if (old.severity != now.severity) {
            (now.severity > old.severity ? diff.actions_lowered : diff.other_changes)
                .push_back(old.id + " severity " + to_string(old.severity) + " -> " +
                           to_string(now.severity) + where);
        }
        diff_scope(old, now, diff);
    }
    for (const auto& rule : after) {
        if (rule.enabled && later.contains(rule.id)) {
            diff.other_changes.push_back(rule.id + " added (" + rule.name + ")");
        }
    }
    return diff;
}

}  // namespace gpuguard::rules
