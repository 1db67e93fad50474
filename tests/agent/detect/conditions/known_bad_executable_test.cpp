// known_bad_executable (agent/detect/conditions/known_bad_executable.cpp):
// the executable's sha256, from its exe_scan, is in miner-rules.yaml's
// known_bad.sha256; the scan is the evidence.
#include "condition_fixture.h"

namespace gpuguard::agent::condition_testing {
namespace {

class KnownBadExecutableTest : public ConditionTest {
  protected:
    void SetUp() override {
        exec(kPid, "/opt/tools/updater");
        rule_set_ = rule_set_of("known_bad:\n  sha256: [" + bad_ + ", " + other_bad_ + "]\n");
    }
    bool scanned(const std::string& sha256) {
        evidence(kPid).sha256 = sha256;
        evidence(kPid).scanned_ns = 3 * kSecond;
        return holds(rule_, "known_bad_executable", kPid, 8 * kSecond);
    }

    const rules::CorrelationRule rule_ = rule_when("{known_bad_executable: true}");
    static constexpr uint32_t kPid = 700;
    const std::string bad_ = "5d41402abc4b2a76b9719d911017c592aabbccddeeff00112233445566778899";
    const std::string other_bad_ =
        "0000000000000000000000000000000000000000000000000000000000000001";
};

TEST_F(KnownBadExecutableTest, a_listed_sha256_holds_with_the_scan_as_evidence) {
    ASSERT_TRUE(scanned(bad_));
    EXPECT_EQ(details(), std::vector<std::string>{"/opt/tools/updater sha256:" + bad_ +
                                                  " is in known_bad.sha256"});
    ASSERT_EQ(in_.extra.size(), 1u);
    EXPECT_EQ(in_.extra[0].ts_ns, 3 * kSecond);  // when the scan came
    EXPECT_EQ(in_.extra[0].kind, "event");
    EXPECT_EQ(in_.extra[0].event_type, "exe_scan");
    EXPECT_EQ(in_.extra[0].field, "sha256");

    EXPECT_TRUE(scanned(other_bad_));  // the other list entry
}

TEST_F(KnownBadExecutableTest, a_sha256_one_digit_off_or_no_scan_does_not_hold) {
    std::string off = bad_;
    off.back() = '8';
    EXPECT_FALSE(scanned(off));
    EXPECT_TRUE(in_.extra.empty());
    EXPECT_FALSE(scanned(other_bad_.substr(0, 63) + "2"));
    EXPECT_FALSE(scanned(""));  // not scanned yet
    EXPECT_TRUE(in_.extra.empty());
}

TEST_F(KnownBadExecutableTest, without_a_known_bad_list_nothing_holds) {
    rule_set_ = rule_set_of();
    EXPECT_FALSE(scanned(bad_));
    EXPECT_TRUE(in_.extra.empty());
    EXPECT_FALSE(find("known_bad_executable")->time_dependent());
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
