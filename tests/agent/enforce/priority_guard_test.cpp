// PriorityGuard: guard mode's GPU priorities on a virtual clock with
// synthetic telemetry readings: lower priorities paused over the threshold,
// hysteresis, the cap and its cool-down, resume when the load drops or the
// higher-priority process exits, protection, dry run and hot reload.
#include "gpuguard/enforce/priority_guard.h"

#include <gtest/gtest.h>

namespace gpuguard::agent {
namespace {

constexpr uint64_t kSecond = 1'000'000'000ull;

rules::PriorityPolicy policy() {
    rules::PriorityPolicy p;
    p.pause_above_percent = 80;
    p.resume_below_percent = 50;
    p.max_pause = std::chrono::seconds(60);
    p.cooldown = std::chrono::seconds(30);
    p.default_priority = 0;
    rules::PriorityPattern train;
    train.comm = {"train"};
    train.priority = 100;
    rules::PriorityPattern render;
    render.exe = {"/usr/bin/render*"};
    render.priority = 50;
    p.processes = {train, render};
    return p;
}

class PriorityGuardTest : public ::testing::Test {
  protected:
    void SetUp() override {
        ProcessTableOptions options;
        options.read_host = false;
        table_ = std::make_unique<ProcessTable>(options, [](uint32_t, uint32_t) { return true; });
        make(policy());
        start(101, "train", "/usr/bin/python3");
        start(102, "render", "/usr/bin/render-farm");
        start(103, "batch", "/usr/bin/batch");
    }

    void make(std::optional<rules::PriorityPolicy> p) {
        guard_ = std::make_unique<PriorityGuard>(
            std::move(p), [this] { return now_; },
            [this](uint32_t pid) { return pid == protected_pid_ ? "allowlisted" : std::string(); },
            [](uint32_t pid) { return uint64_t{pid} * 7; });
    }

    void start(uint32_t pid, const std::string& comm, const std::string& exe) {
        Event event;
        event.ts_ns = now_;
        event.task = TaskInfo{pid, pid, 1, 1000, 1000, 1, comm};
        event.data = Exec{exe, {exe, "--job"}, false, false, pid};
        table_->apply(event);
    }

    void exit(uint32_t pid) {
        Event event;
        event.ts_ns = now_;
        event.task = TaskInfo{pid, pid, 1, 1000, 1000, 1, "x"};
        event.data = Exit{0, true};
        table_->apply(event);
    }

    std::vector<PriorityAction> reading(double load, std::vector<uint32_t> pids, uint32_t gpu = 0) {
        Telemetry telemetry;
        telemetry.gpu_index = gpu;
        telemetry.vendor = "nvidia";
        telemetry.devices = {"195:" + std::to_string(gpu)};
        telemetry.utilization_percent = load;
        for (uint32_t pid : pids)
            telemetry.processes.push_back(ProcessGpuUsage{pid, 1ull << 30, 30});
        return guard_->observe(telemetry, *table_);
    }

    // "pause 102", "resume 103", ... in decision order.
    static std::vector<std::string> summary(const std::vector<PriorityAction>& actions) {
        std::vector<std::string> out;
        for (const auto& action : actions) {
            out.push_back(action.action + " " + std::to_string(action.process.pid));
        }
        return out;
    }
    using Names = std::vector<std::string>;

    uint64_t now_ = 1000 * kSecond;
    uint32_t protected_pid_ = 0;
    std::unique_ptr<ProcessTable> table_;
    std::unique_ptr<PriorityGuard> guard_;
};

TEST_F(PriorityGuardTest, pauses_lower_priorities_only_while_the_gpu_is_over_the_threshold) {
    EXPECT_TRUE(reading(80, {101, 102, 103}).empty()) << "80 % is not above 80 %";
    auto actions = reading(95, {101, 102, 103});
    ASSERT_EQ(summary(actions), (Names{"pause 102", "pause 103"}));
    EXPECT_EQ(actions[0].priority, 50);
    EXPECT_EQ(actions[1].priority, 0) << "no pattern: the default priority";
    EXPECT_EQ(actions[0].reason,
              "GPU 0 at 95 % (above 80 %): priority 50 yields to priority 100 (train, pid 101)");
    EXPECT_EQ(actions[0].process.executable, "/usr/bin/render-farm");
    EXPECT_EQ(actions[0].process.start_time_ns, 102u * 7) << "for the enforcer's pidfd check";
    EXPECT_FALSE(actions[0].dry_run);
    EXPECT_TRUE(guard_->is_paused(102));
    EXPECT_FALSE(guard_->is_paused(101));
    EXPECT_TRUE(reading(97, {101, 102, 103}).empty()) << "paused once, not again";
    // Another GPU is judged by its own load and processes.
    start(104, "batch", "/usr/bin/batch");
    EXPECT_TRUE(reading(99, {104}, 1).empty()) << "alone on GPU 1: nobody to yield to";
    EXPECT_TRUE(reading(30, {104}, 1).empty());
    EXPECT_EQ(guard_->paused(), 2u) << "GPU 1's reading does not resume GPU 0's processes";
}

TEST_F(PriorityGuardTest, resumes_below_the_lower_threshold_with_hysteresis) {
    ASSERT_EQ(summary(reading(95, {101, 102, 103})), (Names{"pause 102", "pause 103"}));
    EXPECT_TRUE(reading(65, {101, 102, 103}).empty()) << "between the thresholds: stay paused";
    auto resumed = reading(45, {101, 102, 103});
    ASSERT_EQ(summary(resumed), (Names{"resume 102", "resume 103"}));
    EXPECT_EQ(resumed[0].reason, "GPU 0 at 45 % (below 50 %)");
    EXPECT_EQ(resumed[0].process.start_time_ns, 102u * 7) << "the process it paused";
    EXPECT_EQ(guard_->paused(), 0u);
    EXPECT_TRUE(reading(75, {101, 102, 103}).empty()) << "rising again below 80 %: no pause";
    EXPECT_EQ(summary(reading(81, {101, 102, 103})), (Names{"pause 102", "pause 103"}));
}

TEST_F(PriorityGuardTest, caps_a_pause_and_cools_down_before_pausing_again) {
    ASSERT_EQ(summary(reading(95, {101, 103})), Names{"pause 103"});
    now_ += 59 * kSecond;
    EXPECT_TRUE(reading(95, {101, 103}).empty());
    now_ += 1 * kSecond;
    auto capped = guard_->tick(*table_);  // time alone, no reading needed
    ASSERT_EQ(summary(capped), Names{"resume 103"});
    EXPECT_EQ(capped[0].reason, "paused for the maximum of 60 s; not paused again for 30 s");
    for (int i = 0; i < 29; ++i) {
        now_ += kSecond;
        EXPECT_TRUE(reading(95, {101, 103}).empty()) << "cooling down, second " << i + 1;
    }
    now_ += kSecond;
    EXPECT_EQ(summary(reading(95, {101, 103})), Names{"pause 103"}) << "cool-down over";
}

TEST_F(PriorityGuardTest, resumes_when_the_higher_priority_process_exits_and_forgets_exited_ones) {
    ASSERT_EQ(summary(reading(95, {101, 102, 103})), (Names{"pause 102", "pause 103"}));
    exit(101);
    // Still loaded (the reading lags), but nobody of a higher priority runs:
    // 102 resumes; 103 now yields to 102 and stays paused.
    auto actions = reading(95, {101, 102, 103});
    ASSERT_EQ(summary(actions), Names{"resume 102"});
    EXPECT_EQ(actions[0].reason, "no process of a higher priority than 50 runs on GPU 0 any more");
    EXPECT_TRUE(guard_->is_paused(103));
    // A paused process that exits is forgotten, never resumed.
    exit(103);
    EXPECT_TRUE(guard_->tick(*table_).empty());
    EXPECT_EQ(guard_->paused(), 0u);
}

TEST_F(PriorityGuardTest, equal_priorities_and_protected_processes_are_never_paused) {
    start(105, "train", "/opt/other");
    EXPECT_TRUE(reading(99, {101, 105}).empty()) << "equal priorities: nobody yields";
    protected_pid_ = 103;
    EXPECT_EQ(summary(reading(99, {101, 102, 103})), Names{"pause 102"})
        << "the enforcer's protection (pid 1, kernel threads, the agent, allowlist) applies";
}

TEST_F(PriorityGuardTest, dry_run_policy_marks_every_decision_and_reload_changes_priorities) {
    auto trial = policy();
    trial.dry_run = true;
    make(trial);
    auto actions = reading(95, {101, 102, 103});
    ASSERT_EQ(summary(actions), (Names{"pause 102", "pause 103"}));
    EXPECT_TRUE(actions[0].dry_run && actions[1].dry_run);
    // Hot reload: the render farm now outranks training.
    auto reloaded = policy();
    reloaded.processes[1].priority = 200;
    EXPECT_TRUE(guard_->set_policy(reloaded).empty()) << "a reload alone signals nothing";
    actions = reading(95, {101, 102, 103});
    ASSERT_EQ(summary(actions), (Names{"resume 102", "pause 101"}));
    EXPECT_TRUE(actions[0].dry_run) << "resumed as it was paused: in dry run";
    EXPECT_FALSE(actions[1].dry_run);
    EXPECT_NE(actions[1].reason.find("yields to priority 200 (render, pid 102)"), std::string::npos)
        << actions[1].reason;
    // Turning the guard off resumes everything it paused.
    auto off = guard_->set_policy(std::nullopt);
    EXPECT_EQ(summary(off), (Names{"resume 101", "resume 103"}));
    EXPECT_EQ(off[0].reason, "GPU priorities turned off");
    EXPECT_FALSE(guard_->enabled());
    EXPECT_TRUE(reading(99, {101, 102, 103}).empty());
}

TEST_F(PriorityGuardTest, release_all_resumes_what_it_paused_when_the_agent_stops) {
    ASSERT_EQ(summary(reading(95, {101, 102})), Names{"pause 102"});
    auto released = guard_->release_all();
    ASSERT_EQ(summary(released), Names{"resume 102"});
    EXPECT_EQ(released[0].reason, "the agent is stopping");
    EXPECT_EQ(guard_->paused(), 0u);
}

}  // namespace
}  // namespace gpuguard::agent
