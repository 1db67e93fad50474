// memory_growth (agent/detect/conditions/memory_growth.cpp): the process's
// latest GPU memory reading exceeds its lowest of the last `within` by more
// than `bytes` while no reading of its compute in that time is above
// `max_utilization_percent` — a GPU used as a memory store. Over time.
#include "condition_fixture.h"

namespace gpuguard::agent::condition_testing {
namespace {

class MemoryGrowthTest : public ConditionTest {
  protected:
    const rules::CorrelationRule rule_ =
        rule_when("{memory_growth: {bytes: 10GiB, within: 5m, max_utilization_percent: 20}}");

    void sample(uint64_t ts_s, uint64_t memory_bytes, std::optional<double> compute_percent) {
        evidence(kPid).usage.push_back(UsageSample{ts_s * kSecond, memory_bytes, compute_percent});
    }
    static constexpr uint32_t kPid = 300;
    static constexpr uint64_t kGiB = 1ull << 30;
    static constexpr uint64_t kNow = 390 * kSecond;  // the window is [90 s, 390 s]
};

TEST_F(MemoryGrowthTest, growth_above_bytes_within_the_window_at_low_compute_holds) {
    exec(kPid, "/usr/bin/hoarder");
    sample(100, 2 * kGiB, 5);
    sample(200, 8 * kGiB, 20);  // at the limit: still low
    sample(390, 12 * kGiB + kGiB / 2, 3);
    ASSERT_TRUE(holds(rule_, "memory_growth", kPid, kNow));
    ASSERT_EQ(in_.extra.size(), 1u);
    EXPECT_EQ(in_.extra[0].ts_ns, kNow);
    EXPECT_EQ(in_.extra[0].kind, "telemetry");
    EXPECT_EQ(in_.extra[0].event_type, "telemetry");
    EXPECT_EQ(in_.extra[0].field, "memory");
    EXPECT_EQ(in_.extra[0].detail,
              "GPU memory grew from 2.0 GiB to 12.5 GiB within 300s, compute at most 20%");
}

TEST_F(MemoryGrowthTest, growth_of_exactly_bytes_or_spread_over_longer_than_within_does_not_hold) {
    exec(kPid, "/usr/bin/hoarder");
    sample(100, 2 * kGiB, 5);
    sample(390, 12 * kGiB, 3);  // 10 GiB more: not more than bytes
    EXPECT_FALSE(holds(rule_, "memory_growth", kPid, kNow));
    EXPECT_TRUE(in_.extra.empty());
    evidence(kPid).usage.back().memory_bytes = 12 * kGiB + 1;
    EXPECT_TRUE(holds(rule_, "memory_growth", kPid, kNow));

    // The low reading one second before the window does not count; one at
    // its very start does.
    evidence(kPid).usage.clear();
    sample(89, 2 * kGiB, 5);
    sample(200, 5 * kGiB, 5);
    sample(390, 12 * kGiB + kGiB / 2, 3);
    EXPECT_FALSE(holds(rule_, "memory_growth", kPid, kNow));
    evidence(kPid).usage.front().ts_ns = 90 * kSecond;
    ASSERT_TRUE(holds(rule_, "memory_growth", kPid, kNow));
    EXPECT_EQ(details(), std::vector<std::string>{"GPU memory grew from 2.0 GiB to 12.5 GiB "
                                                  "within 300s, compute at most 5%"});
}

TEST_F(MemoryGrowthTest, compute_above_the_limit_in_the_window_does_not_hold) {
    exec(kPid, "/usr/bin/trainer");
    sample(100, 2 * kGiB, 5);
    sample(200, 8 * kGiB, 21);  // a training step
    sample(390, 12 * kGiB + kGiB / 2, 3);
    EXPECT_FALSE(holds(rule_, "memory_growth", kPid, kNow));
    EXPECT_TRUE(in_.extra.empty());

    // Busy before the window: only the window's readings count.
    evidence(kPid).usage.insert(evidence(kPid).usage.begin(),
                                UsageSample{50 * kSecond, 2 * kGiB, 95.0});
    evidence(kPid).usage[2].compute_percent = 20;
    EXPECT_TRUE(holds(rule_, "memory_growth", kPid, kNow));

    // The latest sample without a memory reading: nothing to judge.
    sample(391, 0, 3);
    evidence(kPid).usage.back().memory_bytes.reset();
    EXPECT_FALSE(holds(rule_, "memory_growth", kPid, kNow + kSecond));
}

TEST_F(MemoryGrowthTest, depends_on_time) {
    exec(kPid, "/usr/bin/hoarder");
    sample(100, 2 * kGiB, 5);
    sample(390, 12 * kGiB + kGiB / 2, 3);
    EXPECT_TRUE(holds(rule_, "memory_growth", kPid, kNow));
    // With no new sample, the low reading ages out of the window.
    EXPECT_FALSE(holds(rule_, "memory_growth", kPid, kNow + 11 * kSecond));
    EXPECT_TRUE(find("memory_growth")->time_dependent());
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
