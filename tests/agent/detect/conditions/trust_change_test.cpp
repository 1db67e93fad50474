// trust_change (agent/detect/conditions/trust_change.cpp): the process
// changed the agent's trusted files in a way listed (allowlist added, action
// lowered, rule disabled, or any), as a writer listed, within the rule's
// window; with flagged_writer only while it or an ancestor was flagged by
// another rule when it wrote. One piece of evidence per change.
#include "condition_fixture.h"

namespace gpuguard::agent::condition_testing {
namespace {

class TrustChangeTest : public ConditionTest {
  protected:
    void SetUp() override { exec(kPid, "/usr/bin/bash"); }
    TrustRecord& change(uint64_t ts_ns, std::string stage, std::string writer, std::string detail) {
        auto& changes = evidence(kPid).trust_changes;
        changes.push_back(TrustRecord{ts_ns, std::move(stage), std::move(writer), false, false,
                                      false, "", std::move(detail)});
        return changes.back();
    }

    static constexpr uint32_t kPid = 900;
};

TEST_F(TrustChangeTest, a_widening_reload_by_a_listed_writer_is_evidence_and_others_are_not) {
    change(2 * kSecond, "write", "other", "wrote rules.d/50-allow.yaml");
    change(3 * kSecond, "reload", "other", "rules reloaded: allowlist added").allowlist_added =
        true;
    change(4 * kSecond, "reload", "other", "rules reloaded: a rule added");
    change(5 * kSecond, "reload", "package_manager", "by dpkg: kill -> alert").action_lowered =
        true;
    const auto rule = rule_when(
        "{trust_change: {changes: [allowlist_added, action_lowered, rule_disabled], writers: "
        "[other, unknown]}}");
    ASSERT_TRUE(holds(rule, "trust_change", kPid, 9 * kSecond));
    EXPECT_EQ(details(), std::vector<std::string>{"rules reloaded: allowlist added"});
    EXPECT_EQ(in_.extra[0].event_type, "trust_change");
    EXPECT_EQ(in_.extra[0].field, "reload");

    // The package manager's change, only where its writer is listed.
    ASSERT_TRUE(
        holds(rule_when("{trust_change: {changes: [action_lowered], writers: [package_manager]}}"),
              "trust_change", kPid, 9 * kSecond));
    EXPECT_EQ(details(), std::vector<std::string>{"by dpkg: kill -> alert"});
    EXPECT_FALSE(holds(rule_when("{trust_change: {changes: [rule_disabled]}}"), "trust_change",
                       kPid, 9 * kSecond));
}

TEST_F(TrustChangeTest, a_flagged_writer_holds_for_any_change_an_unflagged_one_does_not) {
    change(2 * kSecond, "write", "other", "wrote rules.d/50-allow.yaml");
    const auto rule = rule_when("{trust_change: {changes: [any], flagged_writer: true}}");
    EXPECT_FALSE(holds(rule, "trust_change", kPid, 9 * kSecond));
    change(3 * kSecond, "write", "package_manager", "wrote /usr/sbin/gpuguard").flagged =
        "the loader 900 (xmrig) was flagged by GG-CORR-0012";
    ASSERT_TRUE(holds(rule, "trust_change", kPid, 9 * kSecond));
    EXPECT_EQ(details(), std::vector<std::string>{
                             "wrote /usr/sbin/gpuguard; the loader 900 (xmrig) was flagged by "
                             "GG-CORR-0012"});
    // "any" without the flag: every change.
    ASSERT_TRUE(
        holds(rule_when("{trust_change: {changes: [any]}}"), "trust_change", kPid, 9 * kSecond));
    EXPECT_EQ(in_.extra.size(), 2u);
}

TEST_F(TrustChangeTest, changes_older_than_the_window_do_not_count) {
    change(2 * kSecond, "reload", "other", "rules reloaded: allowlist added").allowlist_added =
        true;
    const auto rule = rule_when("{trust_change: {changes: [allowlist_added]}}", "window: 10s");
    EXPECT_TRUE(holds(rule, "trust_change", kPid, 9 * kSecond));
    EXPECT_FALSE(holds(rule, "trust_change", kPid, 20 * kSecond));
    EXPECT_FALSE(find("trust_change")->time_dependent());
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
