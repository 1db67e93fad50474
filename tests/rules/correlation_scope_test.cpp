// What a site's correlation rule file says of who a rule applies to: its
// scope's keys read and checked, each problem with its file, line and key.
#include <gtest/gtest.h>

#include "gpuguard/rules/correlation.h"

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

}  // namespace
}  // namespace gpuguard::rules
