// hash_rate_above_threshold (agent/detect/conditions/hash_rate_above_threshold.cpp):
// a mining session of the process (a Stratum event) was estimated at or
// above miner-rules.yaml's hash_rate_threshold; the estimate is the
// evidence. Never holds when no rule file sets a threshold.
#include "condition_fixture.h"

namespace gpuguard::agent::condition_testing {
namespace {

class HashRateAboveThresholdTest : public ConditionTest {
  protected:
    void SetUp() override { exec(kPid, "/usr/bin/worker"); }
    bool rated(double hash_rate) {
        evidence(kPid).hash_rate = hash_rate;
        evidence(kPid).hash_rate_ns = 4 * kSecond;
        return holds(rule_, "hash_rate_above_threshold", kPid, 9 * kSecond);
    }

    const rules::CorrelationRule rule_ = rule_when("{hash_rate_above_threshold: true}");
    static constexpr uint32_t kPid = 600;
};

TEST_F(HashRateAboveThresholdTest,
       a_rate_at_or_above_the_threshold_holds_with_the_rate_as_evidence) {
    rule_set_ = rule_set_of("hash_rate_threshold: 1 GH/s\n");
    ASSERT_TRUE(rated(4.295e9));
    EXPECT_EQ(details(), std::vector<std::string>{
                             "hash rate 4.295e+09 H/s above hash_rate_threshold 1e+09 H/s"});
    ASSERT_EQ(in_.extra.size(), 1u);
    EXPECT_EQ(in_.extra[0].ts_ns, 4 * kSecond);  // when the rate was reported
    EXPECT_EQ(in_.extra[0].kind, "event");
    EXPECT_EQ(in_.extra[0].event_type, "stratum");
    EXPECT_EQ(in_.extra[0].field, "hash_rate");

    ASSERT_TRUE(rated(1e9));  // at it
    EXPECT_EQ(details(),
              std::vector<std::string>{"hash rate 1e+09 H/s above hash_rate_threshold 1e+09 H/s"});
}

TEST_F(HashRateAboveThresholdTest, a_rate_one_hash_a_second_below_the_threshold_does_not_hold) {
    rule_set_ = rule_set_of("hash_rate_threshold: 250 MH/s\n");
    EXPECT_FALSE(rated(250e6 - 1));
    EXPECT_TRUE(in_.extra.empty());
    EXPECT_TRUE(rated(250e6));

    evidence(kPid).hash_rate.reset();  // no mining session estimated
    EXPECT_FALSE(holds(rule_, "hash_rate_above_threshold", kPid, 9 * kSecond));
    EXPECT_TRUE(in_.extra.empty());
}

TEST_F(HashRateAboveThresholdTest, without_a_threshold_no_rate_holds) {
    EXPECT_FALSE(rated(1e15));  // the fixture's rule set: no miner-rules file
    EXPECT_TRUE(in_.extra.empty());
    rule_set_ = rule_set_of("default_action: alert\n");  // a file that sets none
    EXPECT_FALSE(rated(1e15));
    EXPECT_TRUE(in_.extra.empty());
}

TEST_F(HashRateAboveThresholdTest, does_not_depend_on_time) {
    EXPECT_FALSE(holds(rule_, "hash_rate_above_threshold", kPid, kSecond));
    EXPECT_FALSE(find("hash_rate_above_threshold")->time_dependent());
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
