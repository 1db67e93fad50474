// agent_tamper (agent/detect/conditions/agent_tamper.cpp): the process did
// one of the listed kinds of thing to the agent itself (agent_tamper
// events: stop, signal, bpf_command, pin_removed, down); each such event is
// a piece of evidence, oldest first, and the kinds not listed are not.
#include "condition_fixture.h"

namespace gpuguard::agent::condition_testing {
namespace {

class AgentTamperTest : public ConditionTest {
  protected:
    void SetUp() override { exec(kPid, "/usr/bin/bash"); }
    void tamper(uint64_t ts_ns, std::string kind, std::string detail) {
        evidence(kPid).tampers.push_back(Tamper{ts_ns, std::move(kind), std::move(detail)});
    }

    static constexpr uint32_t kPid = 800;
};

TEST_F(AgentTamperTest, each_tamper_of_a_listed_kind_is_one_piece_of_evidence) {
    tamper(2 * kSecond, "signal", "sent SIGKILL to the agent (pid 42)");
    tamper(3 * kSecond, "bpf_command", "BPF_LINK_DETACH on the agent's link 7");
    tamper(4 * kSecond, "signal", "sent SIGSTOP to the agent (pid 42)");
    const auto rule = rule_when("{agent_tamper: [signal, stop]}");
    ASSERT_TRUE(holds(rule, "agent_tamper", kPid, 9 * kSecond));
    EXPECT_EQ(details(), (std::vector<std::string>{"sent SIGKILL to the agent (pid 42)",
                                                   "sent SIGSTOP to the agent (pid 42)"}));
    ASSERT_EQ(in_.extra.size(), 2u);
    EXPECT_EQ(in_.extra[0].ts_ns, 2 * kSecond);
    EXPECT_EQ(in_.extra[1].ts_ns, 4 * kSecond);
    for (const Evidence& item : in_.extra) {
        EXPECT_EQ(item.kind, "event");
        EXPECT_EQ(item.event_type, "agent_tamper");
        EXPECT_EQ(item.field, "signal");  // the kind
    }

    ASSERT_TRUE(
        holds(rule_when("{agent_tamper: [bpf_command]}"), "agent_tamper", kPid, 9 * kSecond));
    EXPECT_EQ(details(), std::vector<std::string>{"BPF_LINK_DETACH on the agent's link 7"});
    EXPECT_EQ(in_.extra[0].field, "bpf_command");
}

TEST_F(AgentTamperTest, a_tamper_of_a_kind_not_listed_does_not_hold) {
    tamper(2 * kSecond, "pin_removed", "unlinked /sys/fs/bpf/gpuguard/maps/known_bad_names");
    tamper(3 * kSecond, "down", "the agent went down");
    EXPECT_FALSE(holds(rule_when("{agent_tamper: [stop, signal, bpf_command]}"), "agent_tamper",
                       kPid, 9 * kSecond));
    EXPECT_TRUE(in_.extra.empty());
    ASSERT_TRUE(
        holds(rule_when("{agent_tamper: [pin_removed]}"), "agent_tamper", kPid, 9 * kSecond));
    EXPECT_EQ(in_.extra.size(), 1u);
}

TEST_F(AgentTamperTest, no_tamper_no_hold_and_it_does_not_depend_on_time) {
    EXPECT_FALSE(holds(rule_when("{agent_tamper: [stop, signal, bpf_command, pin_removed, down]}"),
                       "agent_tamper", kPid, 9 * kSecond));
    EXPECT_TRUE(in_.extra.empty());
    EXPECT_FALSE(find("agent_tamper")->time_dependent());
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
