// max_gpu_processes (agent/detect/conditions/max_gpu_processes.cpp): a guard
// policy's limit — the process's user runs more than N live GPU processes
// and this one is beyond the first N, in order of first GPU use (pid breaks
// ties).
#include "condition_fixture.h"

namespace gpuguard::agent::condition_testing {
namespace {

class MaxGpuProcessesTest : public ConditionTest {
  protected:
    const rules::CorrelationRule rule_ = rule_when("{max_gpu_processes: 2}");

    // A process of `uid` whose first GPU use is at `first_gpu_s`.
    void gpu_process(uint32_t pid, uint32_t uid, uint64_t first_gpu_s) {
        exec(pid, "/usr/bin/python3", {}, uid);
        open_gpu(pid, first_gpu_s * kSecond);
    }
    bool beyond(uint32_t pid, const rules::CorrelationRule& rule) {
        return holds(rule, "max_gpu_processes", pid, kNow);
    }
    static constexpr uint64_t kNow = 100 * kSecond;
};

TEST_F(MaxGpuProcessesTest, the_users_processes_beyond_the_limit_hold_in_order_of_first_gpu_use) {
    gpu_process(803, 1000, 10);  // first, though its pid is the highest
    gpu_process(801, 1000, 20);
    EXPECT_FALSE(beyond(801, rule_));  // two: within the limit
    EXPECT_TRUE(in_.extra.empty());

    gpu_process(802, 1000, 30);
    EXPECT_FALSE(beyond(803, rule_));
    EXPECT_FALSE(beyond(801, rule_));
    ASSERT_TRUE(beyond(802, rule_));
    ASSERT_EQ(in_.extra.size(), 1u);
    EXPECT_EQ(in_.extra[0].ts_ns, kNow);
    EXPECT_EQ(in_.extra[0].kind, "policy");
    EXPECT_EQ(in_.extra[0].event_type, "gpu_open");
    EXPECT_EQ(in_.extra[0].field, "processes");
    EXPECT_EQ(in_.extra[0].detail, "user 1000 runs 3 GPU processes, limit 2");

    // The user's process that holds no GPU is not one of them.
    exec(804, "/usr/bin/bash", {}, 1000);
    EXPECT_FALSE(beyond(804, rule_));
}

TEST_F(MaxGpuProcessesTest, another_users_processes_and_exited_ones_do_not_count) {
    gpu_process(811, 1000, 10);
    gpu_process(901, 2000, 15);  // another user's, between them
    gpu_process(812, 1000, 20);
    gpu_process(902, 2000, 25);
    EXPECT_FALSE(beyond(812, rule_));
    EXPECT_FALSE(beyond(902, rule_));

    gpu_process(813, 1000, 30);
    ASSERT_TRUE(beyond(813, rule_));
    EXPECT_EQ(details(), std::vector<std::string>{"user 1000 runs 3 GPU processes, limit 2"});

    // The first one exits: the third is within the limit again.
    apply(40 * kSecond, 811, "python3", Exit{0, true}, 1000);
    EXPECT_FALSE(beyond(813, rule_));
    EXPECT_TRUE(in_.extra.empty());
}

// The book's index of GPU holders follows each process: one the correlator
// found without a GPU any more, or forgot, is not counted.
TEST_F(MaxGpuProcessesTest, a_process_that_let_its_gpu_go_or_was_forgotten_does_not_count) {
    gpu_process(821, 1000, 10);
    gpu_process(822, 1000, 20);
    gpu_process(823, 1000, 30);
    ASSERT_TRUE(beyond(823, rule_));
    EXPECT_EQ(book_.gpu_holders(), (std::set<uint32_t>{821, 822, 823}));

    book_.set_held_gpu(821, false);
    EXPECT_FALSE(beyond(823, rule_));
    EXPECT_EQ(book_.gpu_holders(), (std::set<uint32_t>{822, 823}));

    gpu_process(824, 1000, 40);
    ASSERT_TRUE(beyond(824, rule_));
    book_.forget(822);
    EXPECT_FALSE(beyond(824, rule_));
    EXPECT_EQ(book_.gpu_holders(), (std::set<uint32_t>{823, 824}));
}

TEST_F(MaxGpuProcessesTest, the_same_first_use_is_ordered_by_pid_and_it_does_not_depend_on_time) {
    const auto rule = rule_when("{max_gpu_processes: 1}");
    gpu_process(822, 1000, 10);
    gpu_process(821, 1000, 10);
    EXPECT_FALSE(beyond(821, rule));
    EXPECT_TRUE(beyond(822, rule));
    EXPECT_FALSE(find("max_gpu_processes")->time_dependent());
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
