// sustained_utilization (agent/detect/conditions/sustained_utilization.cpp):
// every reading of the process's compute over `for` is above
// `above_percent`, the samples cover the whole window and at least half of
// them carry a reading, while it made at most `max_connects` new
// connections in the window and at least `min_connects` in its life (a
// miner keeps one pool connection). Over time.
#include "condition_fixture.h"

namespace gpuguard::agent::condition_testing {
namespace {

class SustainedUtilizationTest : public ConditionTest {
  protected:
    const rules::CorrelationRule rule_ = rule_when(
        "{sustained_utilization: {above_percent: 90, for: 10m, max_connects: 2, min_connects: "
        "1}}");

    // A sample each minute from 1000 s to 1600 s, eleven in all (the one at
    // 1000 s covers the window's start), compute 97 % but 93 % at 1300 s.
    void busy_minutes() {
        for (uint64_t ts_s = 1000; ts_s <= 1600; ts_s += 60) {
            evidence(kPid).usage.push_back(
                UsageSample{ts_s * kSecond, 4ull << 30, ts_s == 1300 ? 93.0 : 97.0});
        }
    }
    // Sample `index` (0: the one at 1000 s) reads `percent`, or nothing.
    void reading(size_t index, std::optional<double> percent) {
        evidence(kPid).usage.at(index).compute_percent = percent;
    }
    static constexpr uint32_t kPid = 400;
    static constexpr uint64_t kNow = 1600 * kSecond;  // the window is [1000 s, 1600 s]
};

TEST_F(SustainedUtilizationTest, a_miner_above_the_threshold_over_the_whole_window_holds) {
    exec(kPid, "/opt/miner/worker");
    busy_minutes();
    evidence(kPid).connect_ts = {1100 * kSecond};  // its pool
    ASSERT_TRUE(holds(rule_, "sustained_utilization", kPid, kNow));
    ASSERT_EQ(in_.extra.size(), 1u);
    EXPECT_EQ(in_.extra[0].ts_ns, kNow);
    EXPECT_EQ(in_.extra[0].kind, "telemetry");
    EXPECT_EQ(in_.extra[0].event_type, "telemetry");
    EXPECT_EQ(in_.extra[0].field, "utilization");
    EXPECT_EQ(in_.extra[0].detail,
              "compute above 90% (lowest 93%) for 600s with 1 new connections");

    // NVML left it out of five of the eleven samples: passed over, and said.
    for (size_t index : {1, 2, 3, 7, 9}) reading(index, std::nullopt);
    ASSERT_TRUE(holds(rule_, "sustained_utilization", kPid, kNow));
    EXPECT_EQ(details(), std::vector<std::string>{
                             "compute above 90% (lowest 93%) for 600s with 1 new connections; 5 "
                             "of 11 samples without a reading"});
}

TEST_F(SustainedUtilizationTest, the_gpus_power_is_said_and_judged_by_the_same_statistic) {
    exec(kPid, "/opt/miner/worker");
    busy_minutes();
    evidence(kPid).connect_ts = {1100 * kSecond};
    // A spin-waiting kernel: the GPU busy all the time, drawing 20-30 % of its limit;
    // one sample without a power reading (passed over).
    for (size_t i = 0; i < evidence(kPid).usage.size(); ++i) {
        if (i != 5) evidence(kPid).usage[i].gpu_power_percent = i == 3 ? 20.0 : 30.0;
    }
    ASSERT_TRUE(holds(rule_, "sustained_utilization", kPid, kNow)) << "no power asked for";
    EXPECT_EQ(details(), std::vector<std::string>{
                             "compute above 90% (lowest 93%) for 600s with 1 new connections; "
                             "GPU power lowest 20% of its limit"});
    const auto powered = rule_when(
        "{sustained_utilization: {above_percent: 90, by: p20, for: 10m, min_power_percent: 60}}");
    EXPECT_FALSE(holds(powered, "sustained_utilization", kPid, kNow)) << "p20 of the power: 30 %";
    for (auto& sample : evidence(kPid).usage) {
        if (sample.gpu_power_percent) *sample.gpu_power_percent += 50;  // a miner draws
    }
    ASSERT_TRUE(holds(powered, "sustained_utilization", kPid, kNow));
    EXPECT_NE(details()[0].find("; GPU power p20 80% of its limit"), std::string::npos)
        << details()[0];
    // No power read at all: not judged by power.
    for (auto& sample : evidence(kPid).usage) sample.gpu_power_percent.reset();
    ASSERT_TRUE(holds(powered, "sustained_utilization", kPid, kNow));
    EXPECT_EQ(details()[0].find("GPU power"), std::string::npos) << details()[0];
}

TEST_F(SustainedUtilizationTest, a_training_job_dipping_to_the_threshold_once_does_not_hold) {
    exec(kPid, "/usr/bin/python3");
    busy_minutes();
    evidence(kPid).connect_ts = {1100 * kSecond};
    reading(4, 90);  // at the threshold, not above it
    EXPECT_FALSE(holds(rule_, "sustained_utilization", kPid, kNow));
    EXPECT_TRUE(in_.extra.empty());
    reading(4, 90.5);
    EXPECT_TRUE(holds(rule_, "sustained_utilization", kPid, kNow));
    // The dip at the window's start counts too (the sample covering it).
    reading(0, 90);
    EXPECT_FALSE(holds(rule_, "sustained_utilization", kPid, kNow));
    reading(0, 97);

    // Six of eleven samples without a reading: too few to say.
    for (size_t index : {1, 2, 3, 5, 7, 9}) reading(index, std::nullopt);
    EXPECT_FALSE(holds(rule_, "sustained_utilization", kPid, kNow));
}

TEST_F(SustainedUtilizationTest, samples_that_do_not_cover_the_window_do_not_hold) {
    exec(kPid, "/opt/miner/worker");
    busy_minutes();
    evidence(kPid).connect_ts = {1100 * kSecond};
    // The first sample a second after the window's start: not watched throughout.
    evidence(kPid).usage.front().ts_ns = 1001 * kSecond;
    EXPECT_FALSE(holds(rule_, "sustained_utilization", kPid, kNow));
    EXPECT_TRUE(in_.extra.empty());
    evidence(kPid).usage.front().ts_ns = 1000 * kSecond;
    EXPECT_TRUE(holds(rule_, "sustained_utilization", kPid, kNow));
    // Earlier than the window's length after boot.
    evidence(kPid).usage = {UsageSample{0, 4ull << 30, 97.0},
                            UsageSample{300 * kSecond, 4ull << 30, 97.0}};
    EXPECT_FALSE(holds(rule_, "sustained_utilization", kPid, 300 * kSecond));
    EXPECT_TRUE(find("sustained_utilization")->time_dependent());
}

TEST_F(SustainedUtilizationTest, many_new_connections_or_none_in_its_life_do_not_hold) {
    exec(kPid, "/usr/bin/python3");
    busy_minutes();
    // A job streaming its data: three new connections in the window.
    evidence(kPid).connect_ts = {1100 * kSecond, 1200 * kSecond, 1300 * kSecond};
    EXPECT_FALSE(holds(rule_, "sustained_utilization", kPid, kNow));
    evidence(kPid).connect_ts = {900 * kSecond, 1200 * kSecond, 1300 * kSecond};
    EXPECT_TRUE(holds(rule_, "sustained_utilization", kPid, kNow));  // two in the window

    // A render on local data: no connection ever.
    evidence(kPid).connect_ts.clear();
    EXPECT_FALSE(holds(rule_, "sustained_utilization", kPid, kNow));
    // The pool connection made before the window counts as one in its life.
    evidence(kPid).connect_ts = {10 * kSecond};
    ASSERT_TRUE(holds(rule_, "sustained_utilization", kPid, kNow));
    EXPECT_EQ(details(), std::vector<std::string>{
                             "compute above 90% (lowest 93%) for 600s with 0 new connections"});
}

TEST_F(SustainedUtilizationTest, by_a_percentile_or_the_mean_a_throttled_or_pausing_miner_holds) {
    exec(kPid, "/opt/miner/worker");
    evidence(kPid).connect_ts = {1100 * kSecond};
    // Throttled to 55-70 %, and pausing (3 %) in one sample of eleven.
    const double percents[] = {60, 55, 70, 65, 3, 62, 58, 66, 61, 57, 69};
    for (size_t i = 0; i < std::size(percents); ++i) {
        evidence(kPid).usage.push_back(
            UsageSample{(1000 + 60 * i) * kSecond, 4ull << 30, percents[i]});
    }
    const auto by = [](const std::string& statistic, int above) {
        return rule_when("{sustained_utilization: {above_percent: " + std::to_string(above) +
                         ", by: " + statistic + ", for: 10m, max_connects: 2}}");
    };
    // Every reading: the pause ends it, and 90 % is far anyway.
    EXPECT_FALSE(holds(by("every", 50), "sustained_utilization", kPid, kNow));
    // p10 of eleven readings is the second lowest (nearest rank 2): 55 %.
    ASSERT_TRUE(holds(by("p10", 50), "sustained_utilization", kPid, kNow));
    EXPECT_EQ(details(), std::vector<std::string>{"compute p10 55% (mean 57%, lowest 3%) above "
                                                  "50% for 600s with 1 new connections"});
    EXPECT_FALSE(holds(by("p10", 55), "sustained_utilization", kPid, kNow)) << "at, not above";
    EXPECT_FALSE(holds(by("p5", 50), "sustained_utilization", kPid, kNow)) << "p5: the pause";
    // The mean: 626 / 11, 57 %.
    ASSERT_TRUE(holds(by("mean", 50), "sustained_utilization", kPid, kNow));
    EXPECT_EQ(details(), std::vector<std::string>{"compute mean 57% (lowest 3%) above 50% for "
                                                  "600s with 1 new connections"});
    EXPECT_FALSE(holds(by("mean", 60), "sustained_utilization", kPid, kNow));
    // A window not covered holds by no statistic.
    evidence(kPid).usage.erase(evidence(kPid).usage.begin());
    EXPECT_FALSE(holds(by("mean", 10), "sustained_utilization", kPid, kNow));
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
