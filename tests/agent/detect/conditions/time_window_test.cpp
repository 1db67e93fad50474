// time_window (agent/detect/conditions/time_window.cpp): only at these
// wall-clock times — on `days`, from `from` (inclusive) to `to` (exclusive)
// in `time_zone`; a window whose `to` is not after `from` runs past midnight
// and belongs to the day it starts on. The wall clock is the event's time
// plus the realtime offset, so the condition depends on time.
#include "condition_fixture.h"

namespace gpuguard::agent::condition_testing {
namespace {

class TimeWindowTest : public ConditionTest {
  protected:
    static constexpr uint32_t kPid = 100;
    static constexpr uint64_t kNow = 5 * kSecond;  // the events' clock
    static constexpr int64_t kMinute = 60;
    static constexpr int64_t kHour = 60 * kMinute;
    static constexpr int64_t kDay = 24 * kHour;
    static constexpr int64_t kMonday = 1'705'276'800;        // 2024-01-15 00:00 UTC, a Monday (CET)
    static constexpr int64_t kSummerMonday = 1'721'001'600;  // 2024-07-15 00:00 UTC (CEST)

    void SetUp() override { exec(kPid, "/opt/app/trainer"); }
    // Whether `rule`'s time_window holds when the wall clock says `unix_s`.
    bool at(const rules::CorrelationRule& rule, int64_t unix_s) {
        realtime_offset_ns_ = unix_s * static_cast<int64_t>(kSecond) - static_cast<int64_t>(kNow);
        return holds(rule, "time_window", kPid, kNow);
    }
};

TEST_F(TimeWindowTest, holds_from_from_up_to_but_not_at_to_every_day) {
    const rules::CorrelationRule rule = rule_when("{time_window: {from: '09:00', to: '17:00'}}");
    ASSERT_TRUE(at(rule, kMonday + 9 * kHour));
    ASSERT_EQ(in_.extra.size(), 1u);
    EXPECT_EQ(in_.extra[0].ts_ns, kNow);  // the events' clock, not the wall's
    EXPECT_EQ(in_.extra[0].kind, "policy");
    EXPECT_EQ(in_.extra[0].event_type, "");
    EXPECT_EQ(in_.extra[0].field, "time");
    EXPECT_EQ(details(), std::vector<std::string>{"inside the policy's time window (UTC)"});
    EXPECT_TRUE(at(rule, kMonday + 17 * kHour - kMinute));
    EXPECT_TRUE(at(rule, kMonday + 5 * kDay + 12 * kHour));  // Saturday: no days, every day

    EXPECT_FALSE(at(rule, kMonday + 17 * kHour));
    EXPECT_TRUE(in_.extra.empty());
    EXPECT_FALSE(at(rule, kMonday + 9 * kHour - 1));
    EXPECT_TRUE(find("time_window")->time_dependent());
}

TEST_F(TimeWindowTest, holds_only_on_the_days_listed) {
    const rules::CorrelationRule rule =
        rule_when("{time_window: {days: [mon, tue], from: '09:00', to: '17:00'}}");
    EXPECT_TRUE(at(rule, kMonday + 10 * kHour));
    EXPECT_TRUE(at(rule, kMonday + kDay + 10 * kHour));       // Tuesday
    EXPECT_FALSE(at(rule, kMonday - kDay + 10 * kHour));      // Sunday
    EXPECT_FALSE(at(rule, kMonday + 2 * kDay + 10 * kHour));  // Wednesday
    EXPECT_FALSE(at(rule, kMonday + 20 * kHour));             // Monday, after hours
}

TEST_F(TimeWindowTest, a_window_past_midnight_belongs_to_the_day_it_starts_on) {
    const rules::CorrelationRule rule =
        rule_when("{time_window: {days: [fri], from: '22:00', to: '06:00'}}");
    const int64_t friday = kMonday + 4 * kDay;
    EXPECT_TRUE(at(rule, friday + 22 * kHour));
    EXPECT_TRUE(at(rule, friday + 23 * kHour + 59 * kMinute));
    EXPECT_TRUE(at(rule, friday + kDay + 3 * kHour));  // Saturday morning: Friday's night
    EXPECT_FALSE(at(rule, friday + kDay + 6 * kHour));
    EXPECT_FALSE(at(rule, friday + 3 * kHour));  // Friday morning: Thursday's night
    EXPECT_FALSE(at(rule, friday + 22 * kHour - kMinute));
    EXPECT_FALSE(at(rule, friday + kDay + 23 * kHour));  // Saturday's own night
}

TEST_F(TimeWindowTest, the_hours_and_the_days_are_the_time_zones) {
    const rules::CorrelationRule berlin =
        rule_when("{time_window: {from: '09:00', to: '17:00', time_zone: Europe/Berlin}}");
    const rules::CorrelationRule utc = rule_when("{time_window: {from: '09:00', to: '17:00'}}");
    // 08:30 UTC in winter is 09:30 in Berlin, 16:30 UTC 17:30.
    ASSERT_TRUE(at(berlin, kMonday + 8 * kHour + 30 * kMinute));
    EXPECT_EQ(details(),
              std::vector<std::string>{"inside the policy's time window (Europe/Berlin)"});
    EXPECT_FALSE(at(utc, kMonday + 8 * kHour + 30 * kMinute));
    EXPECT_FALSE(at(berlin, kMonday + 16 * kHour + 30 * kMinute));
    EXPECT_TRUE(at(utc, kMonday + 16 * kHour + 30 * kMinute));
    // Summer time: 07:30 UTC is 09:30 in Berlin.
    EXPECT_TRUE(at(berlin, kSummerMonday + 7 * kHour + 30 * kMinute));
    EXPECT_FALSE(at(berlin, kSummerMonday + 6 * kHour + 30 * kMinute));
    // Monday 23:30 UTC is already Tuesday in Berlin.
    const std::string tuesday_night = "{days: [tue], from: '00:00', to: '01:00'";
    EXPECT_TRUE(at(rule_when("{time_window: " + tuesday_night + ", time_zone: Europe/Berlin}}"),
                   kMonday + 23 * kHour + 30 * kMinute));
    EXPECT_FALSE(at(rule_when("{time_window: " + tuesday_night + "}}"),
                    kMonday + 23 * kHour + 30 * kMinute));
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
