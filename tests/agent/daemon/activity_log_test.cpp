// ActivityLog's last hour (gpuguard status) on a virtual clock, and the
// rule-pack version that status and journal headers carry.
#include "gpuguard/daemon/activity_log.h"

#include <regex>

#include <gtest/gtest.h>

#include "gpuguard/detect/rule_pack_version.h"
#include "gpuguard/rules/correlation.h"
#include "gpuguard/rules/rules.h"

namespace gpuguard::agent {
namespace {

using namespace std::chrono_literals;

TEST(ActivityLog, last_hour_counts_detections_and_actions_by_outcome_and_forgets_older_ones) {
    auto now = std::chrono::steady_clock::time_point{} + 1000h;
    ActivityLog log(50, 1h, [&now] { return now; });
    Detection detection;
    detection.rule_id = "GG-CORR-0001";
    EnforcementOutcome outcome;
    outcome.rule_id = "GG-CORR-0001";
    outcome.action = "kill";

    log.record(detection);
    outcome.outcome = "success";
    log.record(outcome);
    now += 30min;
    log.record(detection);
    outcome.outcome = "withheld";
    log.record(outcome);
    outcome.outcome = "success";
    log.record(outcome);

    auto counts = log.last_hour();
    EXPECT_EQ(counts.detections, 2u);
    EXPECT_EQ(counts.actions, (std::map<std::string, uint64_t>{{"success", 2}, {"withheld", 1}}));

    now += 31min;  // the first minute's records are now over an hour old
    counts = log.last_hour();
    EXPECT_EQ(counts.detections, 1u);
    EXPECT_EQ(counts.actions, (std::map<std::string, uint64_t>{{"success", 1}, {"withheld", 1}}));

    now += 2h;
    counts = log.last_hour();
    EXPECT_EQ(counts.detections, 0u);
    EXPECT_TRUE(counts.actions.empty());
}

TEST(ActivityLog, a_storm_of_detections_keeps_at_most_an_hour_of_minutes) {
    auto now = std::chrono::steady_clock::time_point{} + 1000h;
    ActivityLog log(5, 1h, [&now] { return now; });
    Detection detection;
    for (int minute = 0; minute < 180; ++minute) {
        for (int i = 0; i < 100; ++i) log.record(detection);
        now += 1min;
    }
    EXPECT_EQ(log.last_hour().detections, 59u * 100u);  // the current minute is empty
}

std::shared_ptr<const signatures::Matcher> builtin_matcher() {
    static const auto compiled = [] {
        auto matcher = rules::compile_builtin_pack();
        EXPECT_TRUE(matcher.ok()) << matcher.error().message;
        return matcher.ok() ? matcher.value() : nullptr;
    }();
    return compiled;
}

std::string version_of(const std::vector<rules::RuleFile>& files) {
    auto set = rules::RuleSet::build(builtin_matcher(), files);
    EXPECT_TRUE(set.ok()) << (set.ok() ? "" : set.error().message);
    auto correlation = rules::builtin_correlation_rules();
    EXPECT_TRUE(correlation.ok());
    return set.ok() && correlation.ok() ? rule_pack_version(*set, *correlation) : "";
}

TEST(RulePackVersion, names_the_rules_in_force_and_changes_with_them) {
    const std::string builtin = version_of({});
    EXPECT_TRUE(std::regex_match(builtin, std::regex(R"(\d+s\d+c-[0-9a-f]{16})"))) << builtin;
    EXPECT_EQ(version_of({}), builtin) << "the same rules, the same version";
    // Disabling a signature, allowlisting a path or adding a rule each change it.
    const std::string disabled =
        version_of({{"a.yaml", "signatures:\n  disable: [GG-POOL-0001]\n"}});
    const std::string allowed =
        version_of({{"a.yaml", "allowlist:\n  exe_paths: [/opt/ok/bin/*]\n"}});
    const std::string added = version_of({{"a.yaml", R"(rules:
  - id: local-1
    name: Local
    severity: warning
    confidence: 0.5
    process_name: ["gg-local"]
)"}});
    for (const auto& other : {disabled, allowed, added}) EXPECT_NE(other, builtin);
    EXPECT_NE(disabled, allowed);
    EXPECT_NE(allowed, added);
}

}  // namespace
}  // namespace gpuguard::agent
