// gpu_index_not_in and gpu_vendor_not_in
// (agent/detect/conditions/gpu_not_allowed.cpp): a guard policy's
// allotment — the process holds a GPU whose index or vendor, from the
// latest telemetry of its device, is not listed. One condition for both
// keys; its evidence names the last GPU outside either list.
#include "condition_fixture.h"

namespace gpuguard::agent::condition_testing {
namespace {

class GpuNotAllowedTest : public ConditionTest {
  protected:
    // The host's GPUs: 195:0 and 195:1 are NVIDIA's GPUs 0 and 1, 195:2 an
    // AMD card, GPU 2.
    GpuNotAllowedTest() {
        reading(0, "nvidia", 0);
        reading(1, "nvidia", 1);
        reading(2, "amd", 2);
    }
    void reading(uint32_t index, const std::string& vendor, uint32_t minor) {
        Telemetry telemetry;
        telemetry.gpu_index = index;
        telemetry.vendor = vendor;
        telemetry.devices = {"195:" + std::to_string(minor)};
        book_.record_telemetry(10 * kSecond, telemetry);
    }
    static constexpr uint32_t kPid = 700;
    static constexpr uint64_t kNow = 20 * kSecond;
};

TEST_F(GpuNotAllowedTest, a_gpu_outside_the_allotted_indexes_holds) {
    const auto rule = rule_when("{gpu_index_not_in: [1]}");
    exec(kPid, "/usr/bin/python3");
    open_gpu(kPid, 2 * kSecond, 1);
    EXPECT_FALSE(holds(rule, "gpu_index_not_in", kPid, kNow));  // its own GPU
    EXPECT_TRUE(in_.extra.empty());

    open_gpu(kPid, 3 * kSecond, 0);  // and another's
    ASSERT_TRUE(holds(rule, "gpu_index_not_in", kPid, kNow));
    ASSERT_EQ(in_.extra.size(), 1u);
    EXPECT_EQ(in_.extra[0].ts_ns, kNow);
    EXPECT_EQ(in_.extra[0].kind, "policy");
    EXPECT_EQ(in_.extra[0].event_type, "gpu_open");
    EXPECT_EQ(in_.extra[0].field, "gpu");
    EXPECT_EQ(in_.extra[0].detail, "GPU 0 is not an allowed GPU");
}

TEST_F(GpuNotAllowedTest, a_gpu_of_another_vendor_holds) {
    const auto rule = rule_when("{gpu_vendor_not_in: [nvidia]}");
    exec(kPid, "/usr/bin/python3");
    open_gpu(kPid, 2 * kSecond, 0);
    open_gpu(kPid, 2 * kSecond, 1);
    EXPECT_FALSE(holds(rule, "gpu_vendor_not_in", kPid, kNow));
    EXPECT_TRUE(in_.extra.empty());

    open_gpu(kPid, 3 * kSecond, 2);
    ASSERT_TRUE(holds(rule, "gpu_vendor_not_in", kPid, kNow));
    ASSERT_EQ(in_.extra.size(), 1u);
    EXPECT_EQ(in_.extra[0].kind, "policy");
    EXPECT_EQ(in_.extra[0].field, "gpu");
    EXPECT_EQ(in_.extra[0].detail, "GPU 2 is amd, not an allowed vendor");
}

TEST_F(GpuNotAllowedTest, with_both_keys_one_condition_names_the_last_gpu_outside_either) {
    const auto rule = rule_when("{gpu_index_not_in: [0, 1], gpu_vendor_not_in: [nvidia]}");
    exec(kPid, "/usr/bin/python3");
    open_gpu(kPid, 2 * kSecond, 0);
    EXPECT_FALSE(holds(rule, "gpu_index_not_in", kPid, kNow));
    EXPECT_EQ(find("gpu_vendor_not_in"), nullptr);  // one condition, named by the index key

    open_gpu(kPid, 3 * kSecond, 2);  // outside both lists: the vendor is named
    ASSERT_TRUE(holds(rule, "gpu_index_not_in", kPid, kNow));
    EXPECT_EQ(details(), std::vector<std::string>{"GPU 2 is amd, not an allowed vendor"});
}

TEST_F(GpuNotAllowedTest, a_gpu_without_telemetry_is_not_judged_until_it_has_some) {
    const auto rule = rule_when("{gpu_index_not_in: [0], gpu_vendor_not_in: [nvidia]}");
    exec(kPid, "/usr/bin/python3");
    open_gpu(kPid, 2 * kSecond, 5);  // index and vendor unknown
    EXPECT_FALSE(holds(rule, "gpu_index_not_in", kPid, kNow));
    EXPECT_TRUE(find("gpu_index_not_in")->time_dependent());

    reading(5, "nvidia", 5);  // a later sample names it
    ASSERT_TRUE(holds(rule, "gpu_index_not_in", kPid, kNow));
    EXPECT_EQ(details(), std::vector<std::string>{"GPU 5 is not an allowed GPU"});
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
