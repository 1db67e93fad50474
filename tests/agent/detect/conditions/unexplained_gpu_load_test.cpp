// unexplained_gpu_load (agent/detect/conditions/unexplained_gpu_load.cpp)
// over the book's record of each GPU (EvidenceBook::record_gpu_load): the
// GPU's utilisation by a percentile over the window, against what the
// processes known to hold it explain by their own readings; a holder NVML
// leaves out of an interval counts with its last reading, samples that
// cannot say are passed over, and a backend that reads no load per process
// beside a holder the sensor saw says nothing. Judged per GPU. Over time.
#include "condition_fixture.h"

namespace gpuguard::agent::condition_testing {
namespace {

class UnexplainedGpuLoadTest : public ConditionTest {
  protected:
    const rules::CorrelationRule rule_ = rule_when(
        "{unexplained_gpu_load: {above_percent: 50, by: p20, for: 3m, max_explained_percent: "
        "25}}");

    // A sample of GPU 0 (195:0, nvidiactl 195:255) at `ts_s` seconds
    // reading `utilization`, listing `processes`.
    const GpuLoad& sample(uint64_t ts_s, std::optional<double> utilization,
                          std::vector<ProcessGpuUsage> processes = {},
                          std::vector<std::string> devices = {"195:0", "195:255"},
                          const std::string& vendor = "nvidia") {
        Telemetry telemetry;
        telemetry.gpu_index = 0;
        telemetry.vendor = vendor;
        telemetry.model = "H100";
        telemetry.devices = std::move(devices);
        telemetry.utilization_percent = utilization;
        telemetry.processes = std::move(processes);
        apply(ts_s * kSecond, 0, "", telemetry);  // the table first, as the pipeline does
        return book_.record_gpu_load(ts_s * kSecond, telemetry);
    }
    // Samples every 10 s from `first_s` to `last_s` (180 s apart cover 3
    // minutes), each made by `make(ts_s)`.
    template <typename Make>
    const GpuLoad* every_10s(uint64_t first_s, uint64_t last_s, Make make) {
        const GpuLoad* gpu = nullptr;
        for (uint64_t ts_s = first_s; ts_s <= last_s; ts_s += 10) gpu = &make(ts_s);
        return gpu;
    }
    // The condition judged for `gpu` at `ts_s`, as the correlator judges a
    // rule per GPU (pid 0, the GPU's subject).
    bool holds_for(const GpuLoad& gpu, uint64_t ts_s,
                   const rules::CorrelationRule* rule = nullptr) {
        const rules::CorrelationRule& judged = rule ? *rule : rule_;
        conditions_ = conditions_of(judged);
        const Condition* condition = find("unexplained_gpu_load");
        EXPECT_NE(condition, nullptr);
        if (!condition) return false;
        in_ = RuleInputs{};
        if (!rule_set_) rule_set_ = rule_set_of();
        const ConditionContext context{
            judged, 0, 0, gpu.subject, gpu.evidence, book_, *rule_set_, ts_s * kSecond, 0, &gpu};
        return condition->holds(context, in_);
    }
    static ProcessGpuUsage reading(uint32_t pid, std::optional<double> compute) {
        return ProcessGpuUsage{pid, 1ull << 30, compute};
    }
    static constexpr uint32_t kPid = 4242;
};

TEST_F(UnexplainedGpuLoadTest, load_no_process_is_known_to_make_holds_over_the_window) {
    const GpuLoad* gpu =
        every_10s(1000, 1180, [&](uint64_t s) -> const GpuLoad& { return sample(s, 97.0); });
    EXPECT_FALSE(holds_for(*gpu, 1179)) << "the samples do not cover 3 minutes before 1179 s";
    ASSERT_TRUE(holds_for(*gpu, 1180));
    EXPECT_TRUE(find("unexplained_gpu_load")->judges_gpu());
    EXPECT_TRUE(find("unexplained_gpu_load")->time_dependent());
    EXPECT_EQ(details(), std::vector<std::string>{
                             "GPU 0 (nvidia H100, 195:0): utilisation p20 97% (mean 97%) above "
                             "50% for 180s; the processes known to hold it explain 0% of it "
                             "(none: no process listed by its telemetry or seen opening it)"});
    EXPECT_EQ(gpu->subject.pid, 0u);
    ASSERT_EQ(gpu->subject.gpus.size(), 1u);
    EXPECT_EQ(gpu->subject.gpus[0].minor, 0u);
}

TEST_F(UnexplainedGpuLoadTest, a_holder_whose_readings_explain_the_load_does_not) {
    exec(kPid, "/usr/bin/python3");
    open_gpu(kPid);
    const GpuLoad* gpu = every_10s(1000, 1180, [&](uint64_t s) -> const GpuLoad& {
        return sample(s, 96.0, {reading(kPid, 91.0)});
    });
    EXPECT_FALSE(holds_for(*gpu, 1180));
    // Throttled to 60 % by a miner beside it: 35 of 96 points unexplained
    // is not "little of it" (the holder explains 63 %).
    const GpuLoad* shared = every_10s(1200, 1400, [&](uint64_t s) -> const GpuLoad& {
        return sample(s, 96.0, {reading(kPid, 61.0)});
    });
    EXPECT_FALSE(holds_for(*shared, 1400));
}

TEST_F(UnexplainedGpuLoadTest, a_holder_explaining_little_is_named_in_the_evidence) {
    exec(kPid, "/usr/bin/python3");
    open_gpu(kPid);
    const GpuLoad* gpu = every_10s(1000, 1180, [&](uint64_t s) -> const GpuLoad& {
        return sample(s, 95.0, {reading(kPid, 12.0)});
    });
    ASSERT_TRUE(holds_for(*gpu, 1180));
    EXPECT_EQ(details(), std::vector<std::string>{
                             "GPU 0 (nvidia H100, 195:0): utilisation p20 95% (mean 95%) above "
                             "50% for 180s; the processes known to hold it explain 13% of it "
                             "(now: 4242 (python3) 12%)"});
}

// NVML leaves a busy process out of an interval now and then, or lists it
// without a reading: its last reading stands in (for 30 s), so the load
// stays explained; without any reading to go on the sample cannot say.
TEST_F(UnexplainedGpuLoadTest, a_holder_nvml_leaves_out_now_and_then_still_explains_its_load) {
    exec(kPid, "/usr/bin/python3");
    open_gpu(kPid);
    // A reading one sample in five, left out of the others: the reading
    // stands in for 30 s. Counted as nothing, four samples in five would be
    // unexplained.
    const GpuLoad* gpu = every_10s(1000, 1180, [&](uint64_t s) -> const GpuLoad& {
        if (s % 50 == 0) return sample(s, 97.0, {reading(kPid, 95.0)});
        return sample(s, 97.0);
    });
    EXPECT_FALSE(holds_for(*gpu, 1180));
    // Listed without a reading past the 30 s: a sample that cannot say, not
    // an unexplained one.
    const GpuLoad* listed = every_10s(1200, 1380, [&](uint64_t s) -> const GpuLoad& {
        if (s % 50 == 0) return sample(s, 97.0, {reading(kPid, 95.0)});
        return sample(s, 97.0, {reading(kPid, std::nullopt)});
    });
    EXPECT_FALSE(holds_for(*listed, 1380));
    // Listed without a reading from its first sample on: nothing to go on.
    const uint32_t other = kPid + 1;
    exec(other, "/usr/bin/python3");
    open_gpu(other);
    book_.set_held_gpu(kPid, false);
    const GpuLoad* unread = every_10s(1400, 1600, [&](uint64_t s) -> const GpuLoad& {
        return sample(s, 97.0, {reading(other, std::nullopt)});
    });
    EXPECT_FALSE(holds_for(*unread, 1600)) << "samples that cannot say are not unexplained";
}

TEST_F(UnexplainedGpuLoadTest, a_holder_that_exited_explains_nothing_after) {
    exec(kPid, "/usr/bin/python3");
    open_gpu(kPid);
    sample(1000, 97.0, {reading(kPid, 95.0)});
    apply(1001 * kSecond, kPid, "python3", Exit{});
    const GpuLoad* gpu =
        every_10s(1010, 1190, [&](uint64_t s) -> const GpuLoad& { return sample(s, 97.0); });
    EXPECT_TRUE(holds_for(*gpu, 1190)) << "its last reading is not carried past its exit";
}

// A percentile: a miner pausing one sample in five is still busy; one
// idle half the time is not.
TEST_F(UnexplainedGpuLoadTest, a_duty_cycled_load_holds_by_its_percentile) {
    const GpuLoad* gpu = every_10s(1000, 1180, [&](uint64_t s) -> const GpuLoad& {
        return sample(s, s % 60 == 0 ? 5.0 : 90.0);
    });
    EXPECT_TRUE(holds_for(*gpu, 1180));
    const GpuLoad* idle = every_10s(1200, 1400, [&](uint64_t s) -> const GpuLoad& {
        return sample(s, s % 20 == 0 ? 5.0 : 90.0);
    });
    EXPECT_FALSE(holds_for(*idle, 1400));
    const auto every = rule_when("{unexplained_gpu_load: {above_percent: 50, by: every, for: 3m}}");
    EXPECT_FALSE(holds_for(*idle, 1400, &every));
}

// MIG: the whole GPU reads no utilisation; samples that cannot say are
// passed over, but at least half the window's must say.
TEST_F(UnexplainedGpuLoadTest, samples_without_a_reading_say_nothing) {
    const GpuLoad* gpu = every_10s(
        1000, 1180, [&](uint64_t s) -> const GpuLoad& { return sample(s, std::nullopt); });
    EXPECT_FALSE(holds_for(*gpu, 1180));
    const GpuLoad* gaps = every_10s(1200, 1400, [&](uint64_t s) -> const GpuLoad& {
        return sample(s, s % 30 == 0 ? std::nullopt : std::optional<double>(97.0));
    });
    ASSERT_TRUE(holds_for(*gaps, 1400));
    EXPECT_NE(details()[0].find("; 6 of 19 samples could not say"), std::string::npos)
        << details()[0];
}

// A backend that reads no load per process (amdgpu's sysfs): beside a
// holder the sensor saw, nobody can say whose the load is; with none, it
// is nobody's.
TEST_F(UnexplainedGpuLoadTest, a_backend_without_per_process_load_judges_only_a_gpu_nobody_holds) {
    const std::vector<std::string> card{"226:0", "226:128"};
    const GpuLoad* nobody = every_10s(
        1000, 1180, [&](uint64_t s) -> const GpuLoad& { return sample(s, 99.0, {}, card, "amd"); });
    EXPECT_TRUE(holds_for(*nobody, 1180));
    exec(kPid, "/usr/bin/python3");
    apply(1190 * kSecond, kPid, "python3",
          GpuOpen{226, 128, 3, -100, 2, OpenSyscall::kOpenat, false, "/dev/dri/renderD128"});
    book_.set_held_gpu(kPid, true);
    const GpuLoad* held = every_10s(
        1200, 1400, [&](uint64_t s) -> const GpuLoad& { return sample(s, 99.0, {}, card, "amd"); });
    EXPECT_FALSE(holds_for(*held, 1400));
}

TEST(UnexplainedGpuLoadRule, it_judges_a_gpu_alone) {
    const auto parse = [](const std::string& rule) {
        return rules::parse_correlation_rules(
            "rules:\n  - id: T\n    name: t\n    severity: warning\n" + rule, "t.yaml");
    };
    const auto alone = parse("    when: {unexplained_gpu_load: {for: 5m, by: mean}}\n");
    ASSERT_TRUE(alone) << alone.error().message;
    const auto& condition = *alone->front().unexplained_gpu_load;
    EXPECT_EQ(condition.duration, std::chrono::seconds(300));
    EXPECT_EQ(condition.by, rules::UtilizationStatistic::kMean);
    EXPECT_EQ(condition.above_percent, 50.0);
    EXPECT_EQ(condition.max_explained_percent, 25.0);
    EXPECT_TRUE(
        parse("    when: {unexplained_gpu_load: {}, time_window: {from: '18:00', to: "
              "'08:00'}}\n"));
    for (const std::string bad :
         {"    when: {unexplained_gpu_load: {}, gpu_held: true}\n",
          "    when: {unexplained_gpu_load: {}, scope: {users: [bob]}}\n",
          "    when: {unexplained_gpu_load: {max_explained_percent: 120}}\n",
          "    when: {unexplained_gpu_load: {}}\n    supporting: {signals: [{name: x, gpu_held: "
          "true}]}\n",
          "    when: {gpu_held: true}\n    supporting: {signals: [{name: x, "
          "unexplained_gpu_load: {}}]}\n"}) {
        const auto refused = parse(bad);
        EXPECT_FALSE(refused) << bad;
    }
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
