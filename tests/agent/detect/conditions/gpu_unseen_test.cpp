// gpu_unseen (agent/detect/conditions/gpu_unseen.cpp) over the process
// table's handling of telemetry: a live process the GPU lists that holds no
// GPU the sensor saw becomes a GPU holder on the GPU's word
// (GpuHandle::reported_only), and the condition holds once that has lasted
// `for`; any open seen, before or after, clears it. Over time.
#include "condition_fixture.h"

namespace gpuguard::agent::condition_testing {
namespace {

class GpuUnseenTest : public ConditionTest {
  protected:
    const rules::CorrelationRule rule_ = rule_when("{gpu_unseen: {for: 10s}}");

    // A telemetry sample of GPU 0 (195:0) listing `pids`.
    void listed(uint64_t ts_ns, std::vector<uint32_t> pids) {
        Telemetry telemetry;
        telemetry.devices = {"bogus", "195:0", "195:255"};
        for (uint32_t pid : pids) telemetry.processes.push_back({pid, 1ull << 30, 90.0});
        apply(ts_ns, 0, "", telemetry);
    }
    static constexpr uint32_t kPid = 600;
};

TEST_F(GpuUnseenTest, a_process_only_the_gpu_lists_holds_after_the_wait) {
    exec(kPid, "/usr/lib/x/helper");
    EXPECT_FALSE(table_.find(kPid)->holds_gpu());
    listed(20 * kSecond, {kPid, 9999});  // 9999: not a process the table knows
    ASSERT_TRUE(table_.find(kPid)->holds_gpu());
    EXPECT_TRUE(table_.find(kPid)->gpus[0].reported_only);
    EXPECT_EQ(table_.find(kPid)->gpus[0].major, 195u);
    EXPECT_EQ(table_.find(kPid)->gpus[0].minor, 0u);
    EXPECT_EQ(table_.find(9999), nullptr) << "no entry made for a pid the table does not know";
    EXPECT_FALSE(holds(rule_, "gpu_unseen", kPid, 29 * kSecond));
    ASSERT_TRUE(holds(rule_, "gpu_unseen", kPid, 30 * kSecond));
    EXPECT_EQ(details(),
              std::vector<std::string>{
                  "the GPU's telemetry lists it on device 195:0 for 10s, but no open of a GPU "
                  "device was seen (io_uring, an fd passed over a UNIX socket, or the sensor's "
                  "GPU process map full)"});
    EXPECT_TRUE(find("gpu_unseen")->time_dependent());
    // Listed again: the handle keeps its first time.
    listed(40 * kSecond, {kPid});
    EXPECT_EQ(table_.find(kPid)->gpus.size(), 1u);
    EXPECT_TRUE(holds(rule_, "gpu_unseen", kPid, 40 * kSecond));
}

TEST_F(GpuUnseenTest, an_open_seen_before_or_after_means_the_sensor_was_not_blind) {
    exec(kPid, "/usr/bin/python3");
    open_gpu(kPid, 10 * kSecond, 255);  // nvidiactl, seen
    listed(20 * kSecond, {kPid});
    EXPECT_FALSE(table_.find(kPid)->gpus[0].reported_only);
    EXPECT_FALSE(holds(rule_, "gpu_unseen", kPid, 60 * kSecond));

    exec(kPid + 1, "/usr/bin/python3");
    listed(20 * kSecond, {kPid + 1});
    EXPECT_TRUE(holds(rule_, "gpu_unseen", kPid + 1, 31 * kSecond));
    // Its ring buffer lagged: the open comes after the sample, on another node.
    open_gpu(kPid + 1, 32 * kSecond, 255);
    EXPECT_FALSE(holds(rule_, "gpu_unseen", kPid + 1, 60 * kSecond));
    EXPECT_TRUE(table_.find(kPid + 1)->holds_gpu());
}

TEST_F(GpuUnseenTest, a_sample_without_a_device_number_or_an_exited_process_changes_nothing) {
    exec(kPid, "/usr/lib/x/helper");
    Telemetry telemetry;  // an AMD GPU whose nodes the sampler could not number
    telemetry.processes.push_back({kPid, 1ull << 30, 90.0});
    apply(20 * kSecond, 0, "", telemetry);
    EXPECT_FALSE(table_.find(kPid)->holds_gpu());
    apply(21 * kSecond, kPid, "helper", Exit{});
    listed(22 * kSecond, {kPid});
    EXPECT_FALSE(table_.find(kPid)->holds_gpu());
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
