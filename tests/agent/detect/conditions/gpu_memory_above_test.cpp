// gpu_memory_above (agent/detect/conditions/gpu_memory_above.cpp): a guard
// policy's limit — the process's latest GPU memory reading exceeds SIZE.
// Over time (each sample is judged).
#include "condition_fixture.h"

namespace gpuguard::agent::condition_testing {
namespace {

class GpuMemoryAboveTest : public ConditionTest {
  protected:
    const rules::CorrelationRule rule_ = rule_when("{gpu_memory_above: 8GiB}");

    void sample(uint64_t ts_s, std::optional<uint64_t> memory_bytes) {
        evidence(kPid).usage.push_back(UsageSample{ts_s * kSecond, memory_bytes, 50.0});
    }
    static constexpr uint32_t kPid = 600;
    static constexpr uint64_t kGiB = 1ull << 30;
};

TEST_F(GpuMemoryAboveTest, the_latest_reading_over_the_limit_holds) {
    exec(kPid, "/usr/bin/python3");
    sample(20, 4 * kGiB);
    sample(30, 9 * kGiB + kGiB / 2);
    ASSERT_TRUE(holds(rule_, "gpu_memory_above", kPid, 35 * kSecond));
    ASSERT_EQ(in_.extra.size(), 1u);
    EXPECT_EQ(in_.extra[0].ts_ns, 30 * kSecond);  // the reading's time, not now
    EXPECT_EQ(in_.extra[0].kind, "policy");
    EXPECT_EQ(in_.extra[0].event_type, "telemetry");
    EXPECT_EQ(in_.extra[0].field, "memory");
    EXPECT_EQ(in_.extra[0].detail, "GPU memory 9.5 GiB over the limit 8.0 GiB");

    sample(40, 8 * kGiB + 1);  // one byte over
    ASSERT_TRUE(holds(rule_, "gpu_memory_above", kPid, 45 * kSecond));
    EXPECT_EQ(details(), std::vector<std::string>{"GPU memory 8.0 GiB over the limit 8.0 GiB"});
}

TEST_F(GpuMemoryAboveTest, at_the_limit_or_over_it_only_earlier_does_not_hold) {
    exec(kPid, "/usr/bin/python3");
    sample(20, 12 * kGiB);  // over it once, then released
    sample(30, 8 * kGiB);   // at the limit
    EXPECT_FALSE(holds(rule_, "gpu_memory_above", kPid, 35 * kSecond));
    EXPECT_TRUE(in_.extra.empty());
    sample(40, std::nullopt);  // the latest sample has no memory reading
    evidence(kPid).usage[1].memory_bytes = 12 * kGiB;
    EXPECT_FALSE(holds(rule_, "gpu_memory_above", kPid, 45 * kSecond));
    evidence(kPid).usage.clear();  // no telemetry at all
    EXPECT_FALSE(holds(rule_, "gpu_memory_above", kPid, 45 * kSecond));
}

TEST_F(GpuMemoryAboveTest, depends_on_time) {
    exec(kPid, "/usr/bin/python3");
    EXPECT_FALSE(holds(rule_, "gpu_memory_above", kPid, kSecond));
    EXPECT_TRUE(find("gpu_memory_above")->time_dependent());
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
