// sustained_cpu (agent/detect/conditions/sustained_cpu.cpp): the process's
// cpu_usage readings over `for` (every one, their mean or a percentile) stay
// above `above_cores`; an interval with no reading is idle (the agent reports
// a process only while it is busy); the readings must reach back to the
// window's start; with `max_connects`, few new connections in the window.
#include "condition_fixture.h"

namespace gpuguard::agent::condition_testing {
namespace {

class SustainedCpuTest : public ConditionTest {
  protected:
    // A reading every 2 s from 1000 s (covering 998-1000 s) to 1180 s, at
    // `cores` each; the window of a 3-minute rule at 1180 s is [1000, 1180].
    void busy(double cores, uint64_t from_s = 1000, uint64_t to_s = 1180) {
        for (uint64_t ts_s = from_s; ts_s <= to_s; ts_s += 2) read_at(ts_s, cores);
    }
    void read_at(uint64_t ts_s, double cores, uint32_t threads = 4) {
        evidence(kPid).cpu.push_back(CpuSample{ts_s * kSecond, 2 * kSecond, cores, threads});
    }
    // The reading at `ts_s` reads `cores`.
    void set(uint64_t ts_s, double cores) {
        for (CpuSample& sample : evidence(kPid).cpu) {
            if (sample.ts_ns == ts_s * kSecond) sample.cores = cores;
        }
    }
    void drop(uint64_t from_s, uint64_t to_s) {
        std::erase_if(evidence(kPid).cpu, [&](const CpuSample& sample) {
            return sample.ts_ns >= from_s * kSecond && sample.ts_ns <= to_s * kSecond;
        });
    }
    static constexpr uint32_t kPid = 500;
    static constexpr uint64_t kNow = 1180 * kSecond;
};

TEST_F(SustainedCpuTest, a_miner_on_two_cores_for_the_whole_window_holds_by_its_mean) {
    const auto rule = rule_when("{sustained_cpu: {above_cores: 1.5, for: 3m}}");
    exec(kPid, "/tmp/.x/kworkerd");
    busy(1.98);
    set(1100, 1.6);
    ASSERT_TRUE(holds(rule, "sustained_cpu", kPid, kNow));
    ASSERT_EQ(in_.extra.size(), 1u);
    EXPECT_EQ(in_.extra[0].ts_ns, kNow);
    EXPECT_EQ(in_.extra[0].kind, "telemetry");
    EXPECT_EQ(in_.extra[0].event_type, "cpu_usage");
    EXPECT_EQ(in_.extra[0].field, "cpu");
    EXPECT_EQ(in_.extra[0].detail,
              "CPU mean 1.98 cores (lowest 1.60) above 1.50 for 180s, 4 threads");
    // Below the threshold on average: no.
    EXPECT_FALSE(holds(rule_when("{sustained_cpu: {above_cores: 1.98, for: 3m}}"), "sustained_cpu",
                       kPid, kNow));
    EXPECT_TRUE(in_.extra.empty());
}

TEST_F(SustainedCpuTest, every_reading_must_be_above_with_by_every) {
    const auto rule = rule_when("{sustained_cpu: {above_cores: 0.8, by: every, for: 3m}}");
    exec(kPid, "/usr/bin/kdevtmpfsi");
    busy(1.0);
    EXPECT_TRUE(holds(rule, "sustained_cpu", kPid, kNow));
    EXPECT_EQ(details(),
              std::vector<std::string>{"CPU above 0.80 cores (lowest 1.00) for 180s, 4 threads"});
    set(1002, 0.8);  // the reading covering the window's start, at the threshold
    EXPECT_FALSE(holds(rule, "sustained_cpu", kPid, kNow));
    set(1002, 1.0);
    drop(1090, 1090);  // one interval with no reading: idle
    EXPECT_FALSE(holds(rule, "sustained_cpu", kPid, kNow));
}

TEST_F(SustainedCpuTest, a_duty_cycled_miner_holds_by_a_percentile_and_its_pauses_count_as_idle) {
    // Mining 50 s, pausing 10 s (no readings then: the agent reports only busy processes).
    const auto rule = rule_when("{sustained_cpu: {above_cores: 0.8, by: p20, for: 3m}}");
    exec(kPid, "/usr/sbin/syslogd");
    busy(1.0);
    for (uint64_t pause_s : {1050, 1110, 1170}) drop(pause_s + 2, pause_s + 10);
    ASSERT_TRUE(holds(rule, "sustained_cpu", kPid, kNow));
    // 90 intervals: 75 readings and 15 idle ones; p20 is the 18th lowest, a reading.
    EXPECT_EQ(details(), std::vector<std::string>{
                             "CPU p20 1.00 cores (mean 0.83, lowest 0.00) above 0.80 for 180s, 4 "
                             "threads; 15 idle interval(s)"});
    // Pausing 30 s in every minute: half the intervals idle, p20 is idle.
    evidence(kPid).cpu.clear();
    busy(1.0);
    for (uint64_t pause_s : {1000, 1060, 1120}) drop(pause_s + 2, pause_s + 30);
    EXPECT_FALSE(holds(rule, "sustained_cpu", kPid, kNow));
    // ... and so is the mean, below 0.8 cores.
    EXPECT_FALSE(holds(rule_when("{sustained_cpu: {above_cores: 0.8, for: 3m}}"), "sustained_cpu",
                       kPid, kNow));
}

TEST_F(SustainedCpuTest, a_process_that_stopped_being_busy_does_not_hold_later) {
    const auto rule = rule_when("{sustained_cpu: {above_cores: 0.8, by: p20, for: 3m}}");
    exec(kPid, "/usr/bin/make");
    busy(3.5);
    read_at(1182, 0.1);  // the reading when it stopped being busy
    EXPECT_TRUE(holds(rule, "sustained_cpu", kPid, 1182 * kSecond));
    // A minute later nothing came: idle since; then two minutes later, all idle.
    EXPECT_FALSE(holds(rule, "sustained_cpu", kPid, 1240 * kSecond));
    EXPECT_FALSE(holds(rule, "sustained_cpu", kPid, 1400 * kSecond));
    // A reading the events' clock has not reached yet is not counted.
    EXPECT_FALSE(holds(rule, "sustained_cpu", kPid, 1100 * kSecond));
}

TEST_F(SustainedCpuTest, readings_that_start_inside_the_window_do_not_hold) {
    const auto rule = rule_when("{sustained_cpu: {above_cores: 0.8, for: 3m}}");
    exec(kPid, "/opt/app/worker");
    busy(2.0, 1004);  // its first reading covers 1002-1004 s: 1000-1002 s unknown
    EXPECT_FALSE(holds(rule, "sustained_cpu", kPid, kNow));
    read_at(1002, 2.0);
    evidence(kPid).cpu.insert(evidence(kPid).cpu.begin(), evidence(kPid).cpu.back());
    evidence(kPid).cpu.pop_back();
    EXPECT_TRUE(holds(rule, "sustained_cpu", kPid, kNow));
    // Nothing at all, or before the window's length has passed since boot.
    evidence(kPid).cpu.clear();
    EXPECT_FALSE(holds(rule, "sustained_cpu", kPid, kNow));
    read_at(100, 2.0);
    EXPECT_FALSE(holds(rule, "sustained_cpu", kPid, 100 * kSecond));
}

TEST_F(SustainedCpuTest, an_earlier_busy_spell_counts_the_gap_since_as_idle) {
    const auto rule = rule_when("{sustained_cpu: {above_cores: 0.5, for: 3m}}");
    exec(kPid, "/opt/app/worker");
    busy(2.0, 900, 960);    // busy long before the window, then idle
    busy(2.0, 1120, 1180);  // busy again for the last minute
    // 31 readings of 2.0 and 59 idle intervals (1000-1118 s): mean 0.69 cores.
    ASSERT_TRUE(holds(rule, "sustained_cpu", kPid, kNow));
    EXPECT_EQ(details(),
              std::vector<std::string>{"CPU mean 0.69 cores (lowest 0.00) above 0.50 for 180s, 4 "
                                       "threads; 59 idle interval(s)"});
    EXPECT_FALSE(holds(rule_when("{sustained_cpu: {above_cores: 0.7, for: 3m}}"), "sustained_cpu",
                       kPid, kNow));
}

TEST_F(SustainedCpuTest, many_new_connections_in_the_window_do_not_hold_with_max_connects) {
    const auto rule = rule_when("{sustained_cpu: {above_cores: 0.8, for: 3m, max_connects: 2}}");
    exec(kPid, "/usr/bin/crawler");
    busy(1.5);
    evidence(kPid).connect_ts = {500 * kSecond, 1010 * kSecond, 1100 * kSecond};
    ASSERT_TRUE(holds(rule, "sustained_cpu", kPid, kNow));
    EXPECT_EQ(details(), std::vector<std::string>{"CPU mean 1.50 cores (lowest 1.50) above 0.80 "
                                                  "for 180s, 4 threads; 2 new connection(s)"});
    evidence(kPid).connect_ts.push_back(1170 * kSecond);
    EXPECT_FALSE(holds(rule, "sustained_cpu", kPid, kNow));
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
