// The check every live detection test ends on (DetectionLedger::expect_exactly)
// against hand-written agent lines: it must fail on each way a fake or
// over-eager detection would show, or the live tests built on it prove nothing.
#include "tests/support/detection_ledger.h"

#include <gtest/gtest.h>

namespace gpuguard::testing {
namespace {

std::string detection_line(const std::string& rule, pid_t pid, const std::string& level) {
    return nlohmann::json{
        {"rule", {{"id", rule}}}, {"log", {{"level", level}}}, {"process", {{"pid", pid}}}}
        .dump();
}

// A failure whose message names `problem` ("missing: ..." or "extra: ...").
::testing::AssertionResult names(const ::testing::AssertionResult& result,
                                 const std::string& problem) {
    if (std::string(result.message()).find(problem) != std::string::npos) {
        return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << "no \"" << problem << "\" in: " << result.message();
}

constexpr pid_t miner = 4101;
constexpr pid_t benign = 4102;
constexpr pid_t stranger = 4103;  // a pid the test did not start

TEST(DetectionLedgerTest, passes_on_exactly_the_expected_set) {
    DetectionLedger ledger;
    ledger.add(detection_line("GG-CORR-0013", miner, "error"));
    EXPECT_TRUE(ledger.expect_exactly({{"GG-CORR-0013", miner, "error"}}, {miner, benign}));
}

TEST(DetectionLedgerTest, fails_on_a_missing_expected_detection) {
    DetectionLedger ledger;
    ledger.add(detection_line("GG-CORR-0001", miner, "warning"));
    const auto result = ledger.expect_exactly(
        {{"GG-CORR-0001", miner, "warning"}, {"GG-CORR-0013", miner, "error"}}, {miner});
    ASSERT_FALSE(result);
    EXPECT_TRUE(names(result, "missing: GG-CORR-0013 pid 4101 at error"));
}

TEST(DetectionLedgerTest, fails_on_an_extra_warning_for_a_started_pid) {
    DetectionLedger ledger;
    ledger.add(detection_line("GG-CORR-0013", miner, "error"));
    ledger.add(detection_line("GG-CORR-0005", benign, "warning"));
    const auto result = ledger.expect_exactly({{"GG-CORR-0013", miner, "error"}}, {miner, benign});
    ASSERT_FALSE(result);
    EXPECT_TRUE(names(result, "extra: GG-CORR-0005 pid 4102 at warning"));
}

TEST(DetectionLedgerTest, fails_on_the_expected_rule_at_a_wrong_severity) {
    DetectionLedger ledger;
    ledger.add(detection_line("GG-CORR-0013", miner, "warning"));
    const auto result = ledger.expect_exactly({{"GG-CORR-0013", miner, "error"}}, {miner});
    ASSERT_FALSE(result);
    EXPECT_TRUE(names(result, "missing: GG-CORR-0013 pid 4101 at error"));
    EXPECT_TRUE(names(result, "extra: GG-CORR-0013 pid 4101 at warning"));
}

TEST(DetectionLedgerTest, fails_on_an_expected_rule_at_another_started_pid_even_as_a_notice) {
    DetectionLedger ledger;
    ledger.add(detection_line("GG-CORR-0013", miner, "error"));
    ledger.add(detection_line("GG-CORR-0013", benign, "notice"));
    EXPECT_FALSE(ledger.expect_exactly({{"GG-CORR-0013", miner, "error"}}, {miner, benign}));
}

TEST(DetectionLedgerTest, allows_a_notice_of_an_unnamed_rule_for_a_started_pid) {
    DetectionLedger ledger;
    ledger.add(detection_line("GG-CORR-0013", miner, "error"));
    ledger.add(detection_line("GG-CORR-0008", benign, "notice"));
    EXPECT_TRUE(ledger.expect_exactly({{"GG-CORR-0013", miner, "error"}}, {miner, benign}));
}

TEST(DetectionLedgerTest, ignores_pids_the_test_did_not_start) {
    DetectionLedger ledger;
    ledger.add(detection_line("GG-CORR-0013", miner, "error"));
    ledger.add(detection_line("GG-CORR-0005", stranger, "critical"));
    EXPECT_TRUE(ledger.expect_exactly({{"GG-CORR-0013", miner, "error"}}, {miner}));
}

TEST(DetectionLedgerTest, an_optional_detection_may_be_absent_or_present) {
    const ExpectedDetection raised{"GG-CORR-0013", miner, "error"};
    const ExpectedDetection early{"GG-CORR-0013", miner, "notice", true};
    DetectionLedger without_notice;
    without_notice.add(detection_line("GG-CORR-0013", miner, "error"));
    EXPECT_TRUE(without_notice.expect_exactly({raised, early}, {miner}));
    DetectionLedger with_notice;
    with_notice.add(detection_line("GG-CORR-0013", miner, "notice"));
    with_notice.add(detection_line("GG-CORR-0013", miner, "error"));
    EXPECT_TRUE(with_notice.expect_exactly({raised, early}, {miner}));
}

TEST(DetectionLedgerTest, keeps_only_detection_lines) {
    DetectionLedger ledger;
    ledger.add("not json");
    ledger.add(R"({"event":{"action":"kill"},"process":{"pid":4101}})");  // an enforcement outcome
    ledger.add(detection_line("GG-CORR-0013", miner, "error"));
    EXPECT_EQ(ledger.of(miner).size(), 1u);
    EXPECT_TRUE(ledger.of(benign).empty());
}

}  // namespace
}  // namespace gpuguard::testing
