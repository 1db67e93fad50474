// gpu_outside_allocation (agent/detect/conditions/gpu_outside_allocation.cpp):
// a job's or pod's process holding a GPU it was not allocated ("outside"),
// or a pod's process given none holding one ("none_given"); control nodes,
// processes outside any job and allocations named by UUID stay silent.
#include "condition_fixture.h"

namespace gpuguard::agent::condition_testing {
namespace {

class GpuOutsideAllocationTest : public ConditionTest {
  protected:
    static constexpr uint32_t kPid = 710;
    static constexpr uint64_t kNow = 20 * kSecond;

    static Workload slurm_job(std::vector<std::string> allocated) {
        Workload workload;
        workload.scheduler = "slurm";
        workload.slurm = SlurmJob{"4242", "0", "alice", "physics", "gpu", "0"};
        workload.allocation_source = "SLURM_JOB_GPUS";
        workload.allocation = "0";
        workload.allocated = std::move(allocated);
        return workload;
    }
    void open_control_node(uint32_t pid) {
        apply(3 * kSecond, pid, "python3",
              GpuOpen{195, 255, 4, -100, 2, OpenSyscall::kOpenat, false, "/dev/nvidiactl"});
    }
};

TEST_F(GpuOutsideAllocationTest, a_job_on_a_gpu_it_was_not_given_holds_and_names_job_and_gpus) {
    const auto rule = rule_when("{gpu_outside_allocation: outside}");
    exec(kPid, "/usr/bin/python3");
    evidence(kPid).workload = slurm_job({"195:0"});
    open_control_node(kPid);
    open_gpu(kPid, 3 * kSecond, 0);
    EXPECT_FALSE(holds(rule, "gpu_outside_allocation", kPid, kNow));  // its own and nvidiactl

    open_gpu(kPid, 4 * kSecond, 1);
    ASSERT_TRUE(holds(rule, "gpu_outside_allocation", kPid, kNow));
    ASSERT_EQ(in_.extra.size(), 1u);
    EXPECT_EQ(in_.extra[0].field, "allocation");
    EXPECT_EQ(details(), std::vector<std::string>{
                             "Slurm job 4242 step 0 (user alice, account physics, partition gpu) "
                             "took GPU 195:1; it was given 195:0 (SLURM_JOB_GPUS=0)"});
}

TEST_F(GpuOutsideAllocationTest, gres_devices_decide_what_is_a_gpu) {
    const auto rule = rule_when("{gpu_outside_allocation: outside}");
    exec(kPid, "/usr/bin/python3");
    Workload workload = slurm_job({"195:7"});
    workload.node_gpus = {"195:7", "195:8"};
    evidence(kPid).workload = workload;
    open_gpu(kPid, 3 * kSecond, 7);
    open_gpu(kPid, 3 * kSecond, 0);  // not one of the node's GRES devices
    EXPECT_FALSE(holds(rule, "gpu_outside_allocation", kPid, kNow));
    open_gpu(kPid, 4 * kSecond, 8);
    EXPECT_TRUE(holds(rule, "gpu_outside_allocation", kPid, kNow));
}

TEST_F(GpuOutsideAllocationTest, outside_any_job_or_with_an_unresolved_allocation_is_silent) {
    const auto rule = rule_when("{gpu_outside_allocation: outside}");
    exec(kPid, "/usr/bin/python3");
    open_gpu(kPid, 3 * kSecond, 1);
    EXPECT_FALSE(holds(rule, "gpu_outside_allocation", kPid, kNow));  // no workload

    Workload uuid = slurm_job({});
    uuid.allocation_source = "CUDA_VISIBLE_DEVICES";
    uuid.allocation = "GPU-8f3c0d2e";
    uuid.unresolved = "'GPU-8f3c0d2e' is not a GPU index (a UUID or MIG instance)";
    evidence(kPid).workload = uuid;
    EXPECT_FALSE(holds(rule, "gpu_outside_allocation", kPid, kNow));

    Workload no_gres = slurm_job({});
    no_gres.allocation_source.clear();
    no_gres.allocation.clear();
    evidence(kPid).workload = no_gres;  // a job without GRES: not known, not judged
    EXPECT_FALSE(holds(rule, "gpu_outside_allocation", kPid, kNow));
}

TEST_F(GpuOutsideAllocationTest, a_pod_given_no_gpu_is_none_given_not_outside) {
    const auto outside = rule_when("{gpu_outside_allocation: outside}");
    const auto none_given = rule_when("{gpu_outside_allocation: none_given}");
    exec(kPid, "/usr/bin/python3");
    Workload pod;
    pod.scheduler = "kubernetes";
    evidence(kPid).workload = pod;
    open_control_node(kPid);
    EXPECT_FALSE(holds(none_given, "gpu_outside_allocation", kPid, kNow));  // nvidiactl only

    open_gpu(kPid, 4 * kSecond, 3);
    EXPECT_FALSE(holds(outside, "gpu_outside_allocation", kPid, kNow));
    ASSERT_TRUE(holds(none_given, "gpu_outside_allocation", kPid, kNow));
    EXPECT_EQ(details(), std::vector<std::string>{
                             "a Kubernetes pod's container took GPU 195:3; it was given none "
                             "(no NVIDIA_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES)"});

    pod.allocation_source = "NVIDIA_VISIBLE_DEVICES";
    pod.allocation = "2";
    pod.allocated = {"195:2"};
    evidence(kPid).workload = pod;  // given GPU 2: outside's, not none_given's
    EXPECT_FALSE(holds(none_given, "gpu_outside_allocation", kPid, kNow));
    EXPECT_TRUE(holds(outside, "gpu_outside_allocation", kPid, kNow));
}

TEST_F(GpuOutsideAllocationTest, the_kubelets_allocation_names_the_pod_and_its_devices) {
    const auto outside = rule_when("{gpu_outside_allocation: outside}");
    const auto none_given = rule_when("{gpu_outside_allocation: none_given}");
    exec(kPid, "/usr/bin/python3");
    Workload pod;
    pod.scheduler = "kubernetes";
    pod.pod_namespace = "ml";  // named by the kubelet's pod directory, not labels
    pod.pod_name = "trainer-0";
    pod.allocation_source = "kubelet";
    pod.allocation = "0";
    pod.allocated = {"195:0"};
    evidence(kPid).workload = pod;
    open_gpu(kPid, 3 * kSecond, 0);
    EXPECT_FALSE(holds(outside, "gpu_outside_allocation", kPid, kNow));
    open_gpu(kPid, 4 * kSecond, 1);
    ASSERT_TRUE(holds(outside, "gpu_outside_allocation", kPid, kNow));
    EXPECT_EQ(details(), std::vector<std::string>{
                             "pod ml/trainer-0 took GPU 195:1; it was given 195:0 (the kubelet's "
                             "nvidia.com/gpu devices: 0)"});

    pod.allocation.clear();  // the kubelet gave the container no GPU
    pod.allocated.clear();
    evidence(kPid).workload = pod;
    EXPECT_FALSE(holds(outside, "gpu_outside_allocation", kPid, kNow));
    ASSERT_TRUE(holds(none_given, "gpu_outside_allocation", kPid, kNow));
    EXPECT_EQ(details(), std::vector<std::string>{
                             "pod ml/trainer-0 took GPU 195:0, 195:1; it was given none (the "
                             "kubelet's nvidia.com/gpu devices: none)"});
}

// A pod given one MIG device of a partitioned GPU: its GPU's /dev/nvidia0
// and its instance's access nodes (/dev/nvidia-caps, major 236 here) are
// its own; another instance's access node on the same GPU is not.
TEST_F(GpuOutsideAllocationTest, a_pod_given_a_mig_slice_that_opens_another_slice_is_outside) {
    const auto outside = rule_when("{gpu_outside_allocation: outside}");
    exec(kPid, "/usr/bin/python3");
    Workload pod;
    pod.scheduler = "kubernetes";
    pod.pod_namespace = "ml";
    pod.pod_name = "tenant-a";
    pod.allocation_source = "kubelet";
    pod.allocation = "MIG-1111";
    pod.allocated = {"195:0", "236:66", "236:67"};
    // The inventory's GPU nodes: both instances' access nodes among them.
    pod.node_gpus = {"195:0", "226:128", "236:66", "236:67", "236:75", "236:76"};
    evidence(kPid).workload = pod;
    const auto open_node = [&](uint32_t major, uint32_t minor, uint64_t ts_s) {
        apply(ts_s * kSecond, kPid, "python3",
              GpuOpen{major, minor, static_cast<int32_t>(ts_s), -100, 2, OpenSyscall::kOpenat,
                      false, "/dev/x"});
    };
    open_gpu(kPid, 3 * kSecond, 0);
    open_node(236, 66, 4);
    open_node(236, 67, 5);
    open_node(195, 255, 6);  // nvidiactl: every GPU user's
    EXPECT_FALSE(holds(outside, "gpu_outside_allocation", kPid, kNow)) << "its own slice";
    open_node(236, 75, 7);
    ASSERT_TRUE(holds(outside, "gpu_outside_allocation", kPid, kNow));
    EXPECT_EQ(details(),
              std::vector<std::string>{"pod ml/tenant-a took GPU 236:75; it was given 195:0, "
                                       "236:66, 236:67 (the kubelet's nvidia.com/gpu devices: "
                                       "MIG-1111)"});
    // With the GPU's telemetry, the node is named by its GPU and instance.
    Telemetry telemetry;
    telemetry.gpu_index = 3;
    telemetry.vendor = "nvidia";
    telemetry.devices = {"195:0"};
    telemetry.mig_nodes = {{1, "236:66"}, {1, "236:67"}, {2, "236:75"}, {2, "236:76"}};
    book_.record_telemetry(9 * kSecond, telemetry);
    ASSERT_TRUE(holds(outside, "gpu_outside_allocation", kPid, kNow));
    EXPECT_EQ(details(), std::vector<std::string>{
                             "pod ml/tenant-a took GPU 236:75 (GPU 3's MIG GPU instance 2); it "
                             "was given 195:0, 236:66, 236:67 (the kubelet's nvidia.com/gpu "
                             "devices: MIG-1111)"});
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
