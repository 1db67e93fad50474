// gpu_xid (agent/detect/conditions/gpu_xid.cpp): the Xids a process's own
// work raised (NVIDIA's application class: 13, 31, 43) within the rule's
// window, at least N of them; hardware Xids blame nobody.
#include "condition_fixture.h"
#include "gpuguard/events/gpu_fault.h"

namespace gpuguard::agent::condition_testing {
namespace {

class GpuXidTest : public ConditionTest {
  protected:
    static constexpr uint32_t kPid = 300;
    void xid(uint64_t code, uint64_t ts_ns, uint32_t holders = 1) {
        evidence(kPid).gpu_faults.push_back(
            FaultSeen{ts_ns, GpuFault{0, {"195:0"}, "xid", code, holders}});
    }
};

TEST_F(GpuXidTest, application_xids_within_the_window_count_and_each_is_named) {
    const auto rule = rule_when("{gpu_xid: 2}");
    exec(kPid, "/opt/app/bin/worker");
    xid(31, 10 * kSecond);
    EXPECT_FALSE(holds(rule, "gpu_xid", kPid, 11 * kSecond)) << "one of two";
    xid(13, 20 * kSecond);
    ASSERT_TRUE(holds(rule, "gpu_xid", kPid, 21 * kSecond));
    ASSERT_EQ(in_.extra.size(), 2u);
    EXPECT_EQ(in_.extra[0].event_type, "gpu_fault");
    EXPECT_EQ(in_.extra[0].ts_ns, 10 * kSecond);
    EXPECT_EQ(details(),
              (std::vector<std::string>{
                  "NVIDIA Xid 31 (GPU memory page fault, caused by the application) on GPU 0 "
                  "while 300 (worker) was on it",
                  "NVIDIA Xid 13 (graphics engine exception, caused by the application) on GPU 0 "
                  "while 300 (worker) was on it"}));
}

TEST_F(GpuXidTest, hardware_and_driver_xids_do_not_count) {
    const auto rule = rule_when("{gpu_xid: 1}");
    exec(kPid, "/usr/bin/python3");
    for (const uint64_t code : {48, 63, 79, 94, 95, 119, 45, 8, 999}) xid(code, 5 * kSecond);
    EXPECT_FALSE(holds(rule, "gpu_xid", kPid, 6 * kSecond));
    EXPECT_TRUE(in_.extra.empty());
    xid(43, 6 * kSecond);
    EXPECT_TRUE(holds(rule, "gpu_xid", kPid, 7 * kSecond));
    EXPECT_EQ(in_.extra.size(), 1u);
}

// NVML's event names the GPU, not the process: on a GPU two processes
// share, neither is blamed.
TEST_F(GpuXidTest, an_xid_on_a_shared_gpu_blames_nobody) {
    const auto rule = rule_when("{gpu_xid: 1}");
    exec(kPid, "/opt/app/bin/worker");
    xid(31, 5 * kSecond, 2);
    xid(13, 6 * kSecond, 3);
    EXPECT_FALSE(holds(rule, "gpu_xid", kPid, 7 * kSecond));
    xid(31, 8 * kSecond, 1);
    EXPECT_TRUE(holds(rule, "gpu_xid", kPid, 9 * kSecond));
    EXPECT_EQ(in_.extra.size(), 1u);
}

TEST_F(GpuXidTest, xids_older_than_the_rules_window_are_forgotten) {
    const auto rule = rule_when("{gpu_xid: 2}", "window: 1m");
    exec(kPid, "/opt/app/bin/worker");
    xid(31, 1 * kSecond);
    xid(31, 100 * kSecond);
    EXPECT_FALSE(holds(rule, "gpu_xid", kPid, 101 * kSecond));
    xid(31, 110 * kSecond);
    EXPECT_TRUE(holds(rule, "gpu_xid", kPid, 111 * kSecond));
    EXPECT_EQ(in_.extra.size(), 2u);
}

TEST(GpuFaultText, every_kind_is_described) {
    EXPECT_EQ(describe_gpu_fault(GpuFault{1, {}, "ecc_double_bit", 0}),
              "double-bit ECC error on GPU 1");
    EXPECT_EQ(describe_gpu_fault(GpuFault{0, {}, "clocks", 0x24}),
              "clocks changed on GPU 0: sw_power_cap, sw_thermal");
    EXPECT_EQ(describe_gpu_fault(GpuFault{0, {}, "xid", 79}),
              "NVIDIA Xid 79 (GPU has fallen off the bus, hardware) on GPU 0");
    EXPECT_EQ(describe_gpu_fault(GpuFault{0, {}, "xid", 4242}), "NVIDIA Xid 4242 on GPU 0");
    EXPECT_EQ(xid_cause_name(xid_cause(31)), "application");
    EXPECT_EQ(xid_cause_name(xid_cause(48)), "hardware");
    EXPECT_EQ(xid_cause_name(xid_cause(45)), "other");
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
