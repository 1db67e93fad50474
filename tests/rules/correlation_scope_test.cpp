// What a site's correlation rule file says of who a rule applies to: its
// scope's keys read and checked, each problem with its file, line and key;
// and overrides, which tune a rule known before the file without copying it.
#include <algorithm>
#include <fstream>

#include <gtest/gtest.h>

#include "gpuguard/rules/correlation.h"
#include "gpuguard/rules/trust_diff.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::rules {
namespace {

TEST(CorrelationRules, ScopesByGroupAndContainerAndDryRunPerRule) {
    auto parsed = parse_correlation_rules(R"(rules:
  - id: SITE-G
    name: Students over 8 GiB, on trial
    severity: warning
    action: kill
    dry_run: true
    when:
      gpu_held: true
      scope: {groups: ["2000", students], not_groups: [staff],
              container_ids: ["c0ffee*"], not_container_ids: ["docker://c0ffee00*"],
              container_names: [batch-*], not_container_names: [batch-test]}
      gpu_memory_above: 8GiB
  - id: SITE-H
    name: enforced
    severity: warning
    action: kill
    when: {gpu_held: true}
)",
                                          "site.yaml");
    ASSERT_TRUE(parsed) << parsed.error().message;
    ASSERT_EQ(parsed->size(), 2u);
    const CorrelationRule& rule = (*parsed)[0];
    EXPECT_TRUE(rule.dry_run);
    EXPECT_FALSE((*parsed)[1].dry_run) << "dry_run is off unless a rule says so";
    ASSERT_TRUE(rule.scope);
    EXPECT_EQ(rule.scope->groups, (std::vector<std::string>{"2000", "students"}));
    EXPECT_EQ(rule.scope->not_groups, std::vector<std::string>{"staff"});
    EXPECT_EQ(rule.scope->container_ids, std::vector<std::string>{"c0ffee*"});
    EXPECT_EQ(rule.scope->not_container_ids, std::vector<std::string>{"docker://c0ffee00*"});
    EXPECT_EQ(rule.scope->container_names, std::vector<std::string>{"batch-*"});
    EXPECT_EQ(rule.scope->not_container_names, std::vector<std::string>{"batch-test"});

    auto bad = parse_correlation_rules(R"(rules:
  - id: SITE-B
    name: bad
    severity: warning
    dry_run: sometimes
    when:
      gpu_held: true
      scope: {group: [x]}
)",
                                       "bad.yaml");
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find(
                  "bad.yaml:5:14: rules[0] (SITE-B).dry_run: must be true or false, got "
                  "'sometimes'"),
              std::string::npos)
        << bad.error().message;
    EXPECT_NE(bad.error().message.find("bad.yaml:8:15: rules[0] (SITE-B).when.scope: unknown key "
                                       "'group'"),
              std::string::npos)
        << bad.error().message;
}

TEST(CorrelationRules, ScopesByImagePodNamespaceAndExecutablePath) {
    auto parsed = parse_correlation_rules(R"(rules:
  - id: SITE-S
    name: quiet miners, but not the serving namespace's Triton
    severity: warning
    when:
      gpu_held: true
      scope: {container_images: ["nvcr.io/nvidia/*"], not_container_images: ["*:debug"],
              pod_namespaces: [team-*, serving], not_pod_namespaces: [team-ops],
              exe_paths: ["/opt/*/bin/*"], not_exe_paths: [/opt/triton/bin/tritonserver]}
)",
                                          "site.yaml");
    ASSERT_TRUE(parsed) << parsed.error().message;
    const ScopeCondition& scope = *(*parsed)[0].scope;
    EXPECT_EQ(scope.container_images, std::vector<std::string>{"nvcr.io/nvidia/*"});
    EXPECT_EQ(scope.not_container_images, std::vector<std::string>{"*:debug"});
    EXPECT_EQ(scope.pod_namespaces, (std::vector<std::string>{"team-*", "serving"}));
    EXPECT_EQ(scope.not_pod_namespaces, std::vector<std::string>{"team-ops"});
    EXPECT_EQ(scope.exe_paths, std::vector<std::string>{"/opt/*/bin/*"});
    EXPECT_EQ(scope.not_exe_paths, std::vector<std::string>{"/opt/triton/bin/tritonserver"});

    auto bad = parse_correlation_rules(R"(rules:
  - id: SITE-B
    name: bad
    severity: warning
    when:
      gpu_held: true
      scope: {pod_namespaces: [serving, Team_A], not_exe_paths: [tritonserver],
              not_pod_namespaces: [""], container_images: {a: b}}
)",
                                       "bad.yaml");
    ASSERT_FALSE(bad);
    const std::string& message = bad.error().message;
    for (const char* expected :
         {"bad.yaml:7:41: rules[0] (SITE-B).when.scope.pod_namespaces[1]: 'Team_A' is not a "
          "namespace or a glob of one",
          "bad.yaml:7:66: rules[0] (SITE-B).when.scope.not_exe_paths[0]: 'tritonserver' is not "
          "an absolute path or a glob of one",
          "bad.yaml:8:36: rules[0] (SITE-B).when.scope.not_pod_namespaces[0]: '' is not a "
          "namespace or a glob of one",
          "bad.yaml:8:59: rules[0] (SITE-B).when.scope.container_images: must be a list"}) {
        EXPECT_NE(message.find(expected), std::string::npos) << expected << "\n" << message;
    }
}

// The rules load_correlation_rules makes of these files' texts, in order.
Result<std::vector<CorrelationRule>> load_texts(const testing::TempDir& dir,
                                                const std::vector<std::string>& texts) {
    std::vector<std::string> paths;
    for (const std::string& text : texts) {
        paths.push_back((dir / ("site" + std::to_string(paths.size()) + ".yaml")).string());
        std::ofstream(paths.back()) << text;
    }
    return load_correlation_rules(paths);
}

const CorrelationRule& rule_of(const std::vector<CorrelationRule>& rules, const std::string& id) {
    const auto found = std::find_if(rules.begin(), rules.end(),
                                    [&](const CorrelationRule& rule) { return rule.id == id; });
    if (found == rules.end()) throw std::runtime_error("no rule " + id);
    return *found;
}

TEST(CorrelationOverrides, change_a_known_rule_in_place_and_add_to_its_scope) {
    testing::TempDir dir;
    auto builtin = builtin_correlation_rules();
    ASSERT_TRUE(builtin);
    const CorrelationRule& quiet = rule_of(*builtin, "GG-CORR-0013");
    ASSERT_FALSE(quiet.scope) << "the test assumes the built-in rule has no scope";
    const CorrelationRule& rdp = rule_of(*builtin, "GG-CORR-0001");

    auto rules = load_texts(dir, {R"(rules:
  - id: GG-CORR-0013
    override:
      scope: {not_pod_namespaces: [sd-queue], not_exe_paths: [/opt/celery/bin/python3]}
      severity: error
      dry_run: true
  - id: GG-CORR-0001
    override: {enabled: false}
  - id: SITE-0001
    name: site rule
    severity: warning
    when: {gpu_held: true, scope: {not_users: [root]}}
)",
                                  R"(rules:
  - id: GG-CORR-0013
    override: {scope: {not_pod_namespaces: [render-farm], containers: container}, window: 2h}
  - id: SITE-0001
    override: {action: kill, scope: {not_users: ["0"]}}
)"});
    ASSERT_TRUE(rules) << rules.error().message;
    EXPECT_EQ(rules->size(), builtin->size() + 1) << "an override adds no rule";

    const CorrelationRule& tuned = rule_of(*rules, "GG-CORR-0013");
    EXPECT_EQ(tuned.severity, Severity::kError);
    EXPECT_TRUE(tuned.dry_run);
    EXPECT_EQ(tuned.window, std::chrono::hours(2));
    EXPECT_EQ(tuned.action, quiet.action);  // what no override set stays the rule's own
    EXPECT_EQ(tuned.description, quiet.description);
    EXPECT_TRUE(tuned.opaque_peer);
    ASSERT_TRUE(tuned.scope);
    EXPECT_EQ(tuned.scope->not_pod_namespaces,
              (std::vector<std::string>{"sd-queue", "render-farm"}));
    EXPECT_EQ(tuned.scope->not_exe_paths, std::vector<std::string>{"/opt/celery/bin/python3"});
    EXPECT_EQ(tuned.scope->containers, ContainerScope::kContainer);
    EXPECT_FALSE(rule_of(*rules, "GG-CORR-0001").enabled);
    EXPECT_EQ(rule_of(*rules, "GG-CORR-0001").name, rdp.name);

    const CorrelationRule& site = rule_of(*rules, "SITE-0001");  // an earlier file's rule
    EXPECT_EQ(site.action, "kill");
    EXPECT_EQ(site.scope->not_users, (std::vector<std::string>{"root", "0"}));
    EXPECT_EQ(site.scope->containers, ContainerScope::kAny) << "containers not named: kept";
}

// What an override widens is a change to the agent's trust like an edited
// copy's: the reload's diff (GG-CORR-0030) names each exemption added, the
// action or severity lowered and the rule turned off.
TEST(CorrelationOverrides, what_an_override_widens_is_a_trust_change) {
    testing::TempDir dir;
    auto before = builtin_correlation_rules();
    ASSERT_TRUE(before);
    auto after = load_texts(dir, {R"(rules:
  - id: GG-CORR-0013
    override: {severity: notice, scope: {not_pod_namespaces: [sd-queue]}}
  - id: GG-CORR-0012
    override: {action: alert}
  - id: GG-CORR-0001
    override: {enabled: false}
)"});
    ASSERT_TRUE(after) << after.error().message;
    const TrustDiff diff = diff_correlation_rules(*before, *after);
    EXPECT_EQ(diff.allowlist_added,
              std::vector<std::string>{"GG-CORR-0013 scope.not_pod_namespaces + sd-queue"});
    EXPECT_EQ(diff.rules_disabled.size(), 1u);
    EXPECT_TRUE(diff.rules_disabled[0].starts_with("GG-CORR-0001 disabled"))
        << diff.rules_disabled[0];
    std::string lowered;
    for (const auto& line : diff.actions_lowered) lowered += line + "\n";
    EXPECT_NE(lowered.find("GG-CORR-0013 severity warning -> notice"), std::string::npos)
        << lowered;
    EXPECT_NE(lowered.find("GG-CORR-0012 action from_signatures -> alert"), std::string::npos)
        << lowered;
}

TEST(CorrelationOverrides, mistakes_are_named_by_file_line_and_key) {
    testing::TempDir dir;
    // An unknown id, a severity under the rule's counter (GG-CORR-0013's
    // counter lowers it to a notice), and a rule judged per GPU scoped.
    auto unknown = load_texts(dir, {R"(rules:
  - id: GG-CORR-9999
    override: {enabled: false}
  - id: GG-CORR-0013
    override: {severity: info}
  - id: GG-CORR-0026
    override: {scope: {not_users: [root]}}
)"});
    ASSERT_FALSE(unknown);
    const std::string& message = unknown.error().message;
    const std::string file = (dir / "site0.yaml").string();
    for (const std::string& expected :
         {file + ":2: GG-CORR-9999.override: no rule GG-CORR-9999 to override (none built in, "
                 "none in an earlier file)",
          file + ":4: GG-CORR-0013.override: severity info is below its counter's notice",
          file + ":6: GG-CORR-0026.override: a rule judged per GPU (unexplained_gpu_load) has "
                 "no process to scope"}) {
        EXPECT_NE(message.find(expected), std::string::npos) << expected << "\n" << message;
    }

    auto bad = parse_correlation_rules(R"(rules:
  - id: GG-CORR-0013
    name: copied
    override: {enabled: false}
  - id: GG-CORR-0005
    override: {}
  - id: GG-CORR-0009
    override: {action: stop, severity: loud, when: {gpu_held: true}}
  - id: GG-CORR-0012
    override: {scope: {pod_namespaces: [Prod]}, dry_run: maybe}
)",
                                       "site.yaml");
    ASSERT_FALSE(bad);
    for (const char* expected :
         {"site.yaml:3:5: rules[0] (GG-CORR-0013): unknown key 'name' (known: id, override)",
          "site.yaml:6:15: rules[1] (GG-CORR-0005).override: must set one or more of enabled, "
          "dry_run, severity, action, window, scope",
          "site.yaml:8:46: rules[2] (GG-CORR-0009).override: unknown key 'when'",
          "site.yaml:10:41: rules[3] (GG-CORR-0012).override.scope.pod_namespaces[0]: 'Prod' is "
          "not a namespace or a glob of one",
          "site.yaml:10:58: rules[3] (GG-CORR-0012).override.dry_run: must be true or false"}) {
        EXPECT_NE(bad.error().message.find(expected), std::string::npos) << expected << "\n"
                                                                         << bad.error().message;
    }
}

}  // namespace
}  // namespace gpuguard::rules
