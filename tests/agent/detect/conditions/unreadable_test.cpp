// unreadable (agent/detect/conditions/unreadable.cpp): the executable the
// agent could not scan and the configuration files it could not read, each
// kind only where the rule lists it, each its own evidence.
#include "condition_fixture.h"

namespace gpuguard::agent::condition_testing {
namespace {

class UnreadableTest : public ConditionTest {
  protected:
    static constexpr uint32_t kPid = 710;
};

TEST_F(UnreadableTest, each_kind_holds_where_the_rule_lists_it) {
    exec(kPid, "/mnt/fuse/worker");
    const auto both = rule_when("{unreadable: [executable, config]}");
    EXPECT_FALSE(holds(both, "unreadable", kPid, 5 * kSecond)) << "all read";
    evidence(kPid).configs_unread.emplace_back(3 * kSecond,
                                               "/mnt/fuse/c.json (argument) not read: EACCES");
    EXPECT_FALSE(holds(rule_when("{unreadable: [executable]}"), "unreadable", kPid, 5 * kSecond));
    ASSERT_TRUE(holds(rule_when("{unreadable: [config]}"), "unreadable", kPid, 5 * kSecond));
    EXPECT_EQ(details(), std::vector<std::string>{
                             "configuration file /mnt/fuse/c.json (argument) not read: EACCES"});
    EXPECT_EQ(in_.extra[0].ts_ns, 3 * kSecond);
    evidence(kPid).exe_unread = "/mnt/fuse/worker not scanned (permission): EACCES";
    evidence(kPid).exe_unread_ns = 2 * kSecond;
    ASSERT_TRUE(holds(both, "unreadable", kPid, 5 * kSecond));
    EXPECT_EQ(details(), (std::vector<std::string>{
                             "executable /mnt/fuse/worker not scanned (permission): EACCES",
                             "configuration file /mnt/fuse/c.json (argument) not read: EACCES"}));
    EXPECT_FALSE(find("unreadable")->time_dependent());
}

TEST(UnreadableRule, unknown_kinds_and_an_empty_list_are_refused) {
    const auto parse = [](const std::string& when) {
        return rules::parse_correlation_rules(
            "rules:\n  - id: T\n    name: t\n    severity: warning\n    when: " + when + "\n",
            "t.yaml");
    };
    const auto good = parse("{unreadable: [executable, config]}");
    ASSERT_TRUE(good) << good.error().message;
    EXPECT_EQ(good->front().unreadable, (std::vector<std::string>{"executable", "config"}));
    const auto unknown = parse("{unreadable: [library]}");
    ASSERT_FALSE(unknown);
    EXPECT_NE(unknown.error().message.find("unknown kind 'library' (executable, config)"),
              std::string::npos)
        << unknown.error().message;
    EXPECT_FALSE(parse("{unreadable: []}"));
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
