// What a reload of the rule files did to the agent's trust
// (gpuguard/rules/trust_diff.h): allowlist entries and scope exemptions
// added, actions lowered, signatures and rules disabled or removed, each one
// line; raising an action or adding a rule is another change, not a widening.
#include "gpuguard/rules/trust_diff.h"

#include <gtest/gtest.h>

#include "tests/rules/builtin_pack.h"

namespace gpuguard::rules {
namespace {

RuleSet rules_of(const std::string& yaml) {
    std::vector<RuleFile> files;
    if (!yaml.empty()) files.push_back({"rules.d/50-test.yaml", yaml});
    auto built = RuleSet::build(builtin(), files);
    EXPECT_TRUE(built) << built.error().message;
    return std::move(built).value();
}

std::vector<CorrelationRule> correlation_of(const std::string& yaml) {
    auto parsed = parse_correlation_rules(yaml, "site.yaml");
    EXPECT_TRUE(parsed) << parsed.error().message;
    return parsed ? std::move(parsed).value() : std::vector<CorrelationRule>{};
}

TEST(TrustDiff, an_allowlist_entry_added_widens_and_one_removed_does_not) {
    const RuleSet before = rules_of("allowlist:\n  users: [alice]\n");
    const RuleSet after = rules_of("allowlist:\n  exe_paths: [\"/opt/evil/*\"]\n");
    const TrustDiff diff = diff_rule_sets(before, after);
    EXPECT_EQ(diff.allowlist_added, std::vector<std::string>{"allowlist.exe_paths + /opt/evil/*"});
    EXPECT_EQ(diff.other_changes, std::vector<std::string>{"allowlist.users - alice"});
    EXPECT_TRUE(diff.actions_lowered.empty());
    EXPECT_TRUE(diff.widens());
    EXPECT_FALSE(diff_rule_sets(after, before).allowlist_added.empty());  // alice
    EXPECT_TRUE(diff_rule_sets(after, after).empty());
}

TEST(TrustDiff, kill_lowered_to_alert_and_a_disabled_signature_are_named) {
    const RuleSet before =
        rules_of("signatures:\n  override:\n    - id: GG-PORT-0001\n      action: kill\n");
    const RuleSet after = rules_of(
        "signatures:\n  disable: [GG-XMRIG-0001]\n  override:\n    - id: GG-PORT-0001\n"
        "      action: alert\n");
    const TrustDiff diff = diff_rule_sets(before, after);
    ASSERT_EQ(diff.actions_lowered.size(), 1u);
    EXPECT_TRUE(diff.actions_lowered[0].starts_with("GG-PORT-0001 action kill -> alert"))
        << diff.actions_lowered[0];
    ASSERT_EQ(diff.rules_disabled.size(), 1u);
    EXPECT_TRUE(diff.rules_disabled[0].starts_with("GG-XMRIG-0001 disabled"))
        << diff.rules_disabled[0];
    EXPECT_TRUE(diff.allowlist_added.empty());
    // The other way round raises the action: a change, not a widening.
    const TrustDiff back = diff_rule_sets(after, before);
    EXPECT_FALSE(back.widens()) << back.other_changes.size();
    EXPECT_FALSE(back.other_changes.empty());
}

TEST(TrustDiff, correlation_rules_disabled_lowered_put_in_dry_run_or_scoped_out) {
    const auto before = correlation_of(
        "rules:\n  - id: SITE-0001\n    name: site rule\n    severity: critical\n"
        "    action: kill\n    when: {gpu_held: true}\n"
        "  - id: SITE-0002\n    name: other\n    severity: warning\n"
        "    when: {gpu_held: true}\n");
    const auto after = correlation_of(
        "rules:\n  - id: SITE-0001\n    name: site rule\n    severity: notice\n"
        "    action: alert\n    dry_run: true\n"
        "    when: {gpu_held: true, scope: {not_comm: [xmrig], not_pod_namespaces: [serving],\n"
        "           not_container_images: ['nvcr.io/*'], not_exe_paths: ['/opt/*']}}\n"
        "  - id: SITE-0002\n    name: other\n    severity: warning\n    enabled: false\n"
        "    when: {gpu_held: true}\n");
    const TrustDiff diff = diff_correlation_rules(before, after);
    ASSERT_EQ(diff.actions_lowered.size(), 3u);
    EXPECT_TRUE(diff.actions_lowered[0].starts_with("SITE-0001 action kill -> alert"));
    EXPECT_TRUE(diff.actions_lowered[1].starts_with("SITE-0001 dry_run false -> true"));
    EXPECT_TRUE(diff.actions_lowered[2].starts_with("SITE-0001 severity critical -> notice"));
    EXPECT_EQ(diff.allowlist_added,
              (std::vector<std::string>{"SITE-0001 scope.not_container_images + nvcr.io/*",
                                        "SITE-0001 scope.not_pod_namespaces + serving",
                                        "SITE-0001 scope.not_exe_paths + /opt/*",
                                        "SITE-0001 scope.not_comm + xmrig"}));
    EXPECT_EQ(diff.rules_disabled, std::vector<std::string>{"SITE-0002 disabled (other)"});
    EXPECT_TRUE(diff_correlation_rules(after, before).rules_disabled.empty());
}

TEST(TrustDiff, action_strength_orders_alert_below_kill) {
    EXPECT_LT(action_strength(Action::kAlert), action_strength(Action::kKill));
    EXPECT_LT(action_strength(Action::kKill), action_strength(Action::kKillNow));
    EXPECT_LT(action_strength(std::string("alert")), action_strength(std::string("kill")));
    EXPECT_LT(action_strength(std::string("from_signatures")),
              action_strength(std::string("kill")));
}

}  // namespace
}  // namespace gpuguard::rules
