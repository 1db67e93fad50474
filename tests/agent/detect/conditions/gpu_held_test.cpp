// gpu_held (agent/detect/conditions/gpu_held.cpp): whether the process holds
// a GPU now, as the rule says it must or must not; when it must and does,
// the GPU it holds (opened, or inherited through a fork) is the first piece
// of evidence.
#include "condition_fixture.h"

namespace gpuguard::agent::condition_testing {
namespace {

class GpuHeldTest : public ConditionTest {
  protected:
    const rules::CorrelationRule held_ = rule_when("{gpu_held: true}");
    const rules::CorrelationRule not_held_ = rule_when("{gpu_held: false}");
    static constexpr uint32_t kPid = 200;
};

TEST_F(GpuHeldTest, a_process_holding_a_gpu_holds_with_the_device_it_opened_as_evidence) {
    exec(kPid, "/usr/bin/trainer");
    open_gpu(kPid, 3 * kSecond);
    ASSERT_TRUE(holds(held_, "gpu_held", kPid, 9 * kSecond));
    EXPECT_EQ(details(), std::vector<std::string>{"holds GPU device 195:0"});
    ASSERT_EQ(in_.extra.size(), 1u);
    EXPECT_EQ(in_.extra[0].ts_ns, 3 * kSecond);  // the first GPU use, not now
    EXPECT_EQ(in_.extra[0].kind, "event");
    EXPECT_EQ(in_.extra[0].event_type, "gpu_open");
    EXPECT_EQ(in_.extra[0].field, "gpu");
    EXPECT_TRUE(in_.extra[0].signature_id.empty());
    EXPECT_TRUE(in_.hits.empty());

    // The process holding a GPU is what gpu_held: false excludes.
    EXPECT_FALSE(holds(not_held_, "gpu_held", kPid, 9 * kSecond));
    EXPECT_TRUE(in_.extra.empty());
}

TEST_F(GpuHeldTest, the_first_device_held_is_named_and_an_inherited_one_came_with_a_fork) {
    exec(kPid, "/usr/bin/trainer");
    open_gpu(kPid, 2 * kSecond, 1);
    open_gpu(kPid, 4 * kSecond, 0);
    ASSERT_TRUE(holds(held_, "gpu_held", kPid, 5 * kSecond));
    EXPECT_EQ(details(), std::vector<std::string>{"holds GPU device 195:1"});
    EXPECT_EQ(in_.extra[0].ts_ns, 2 * kSecond);

    // A child that inherited the parent's GPU fd holds it by the fork.
    constexpr uint32_t kChild = kPid + 1;
    apply(6 * kSecond, kPid, "trainer", Fork{kChild, true, 0});
    ASSERT_NE(table_.find(kChild), nullptr);
    book_.set_held_gpu(kChild, true);
    evidence(kChild).first_gpu_ns = 6 * kSecond;
    ASSERT_TRUE(holds(held_, "gpu_held", kChild, 7 * kSecond));
    ASSERT_EQ(in_.extra.size(), 1u);
    EXPECT_EQ(in_.extra[0].event_type, "fork");
    EXPECT_EQ(in_.extra[0].detail, "holds GPU device 195:1");
    EXPECT_EQ(in_.extra[0].ts_ns, 6 * kSecond);
}

TEST_F(GpuHeldTest, a_process_without_a_gpu_holds_only_gpu_held_false_and_leaves_no_evidence) {
    exec(kPid, "/usr/bin/trainer");
    EXPECT_FALSE(holds(held_, "gpu_held", kPid, 5 * kSecond));
    EXPECT_TRUE(in_.extra.empty());

    ASSERT_TRUE(holds(not_held_, "gpu_held", kPid, 5 * kSecond));
    EXPECT_TRUE(in_.extra.empty());
    EXPECT_TRUE(in_.hits.empty());

    // A child forked without the parent's GPU fds holds none either.
    open_gpu(kPid, 6 * kSecond);
    constexpr uint32_t kChild = kPid + 2;
    apply(7 * kSecond, kPid, "trainer", Fork{kChild, false, 0});
    EXPECT_FALSE(holds(held_, "gpu_held", kChild, 8 * kSecond));
    EXPECT_TRUE(holds(not_held_, "gpu_held", kChild, 8 * kSecond));
}

TEST_F(GpuHeldTest, does_not_depend_on_time) {
    exec(kPid, "/usr/bin/trainer");
    EXPECT_FALSE(holds(held_, "gpu_held", kPid, kSecond));
    EXPECT_FALSE(find("gpu_held")->time_dependent());
    EXPECT_TRUE(holds(not_held_, "gpu_held", kPid, kSecond));
    EXPECT_FALSE(find("gpu_held")->time_dependent());
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
