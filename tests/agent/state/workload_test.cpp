// read_workload (gpuguard/state/workload.h) over fake /proc and host trees:
// a Slurm job named from slurmstepd's cgroup v2 and v1 hierarchies and its
// environment, its GRES indices mapped to device numbers through gres.conf,
// a pod's NVIDIA_VISIBLE_DEVICES, an environment that names another job
// than its cgroup, and a process outside any job.
#include "gpuguard/state/workload.h"

#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <sys/stat.h>

#include "tests/support/temp_dir.h"

namespace {

using namespace std::string_literals;
using gpuguard::agent::expand_gres_files;
using gpuguard::agent::gres_gpu_files;
using gpuguard::agent::read_workload;
using gpuguard::agent::slurm_cgroup_of;
using gpuguard::agent::WorkloadReadOptions;
namespace fs = std::filesystem;

constexpr const char* kSlurmCgroupV2 =
    "0::/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0\n";
constexpr const char* kSlurmCgroupV1 =
    "12:freezer:/slurm/uid_1000/job_77/step_batch/task_0\n"
    "11:devices:/slurm/uid_1000/job_77/step_batch/task_0\n"
    "0::/user.slice/user-1000.slice/session-3.scope\n";

class ReadWorkload : public ::testing::Test {
  protected:
    ReadWorkload() {
        options_.proc_root = (dir_ / "proc").string();
        options_.host_root = (dir_ / "host").string();
        options_.node_name = "node1";
        // The host's GPU nodes: links to real character devices (1:3, 1:5,
        // 1:7) stand for /dev/nvidia0..2 without mknod.
        fs::create_directories(dir_ / "host/dev");
        fs::create_symlink("/dev/null", dir_ / "host/dev/nvidia0");
        fs::create_symlink("/dev/zero", dir_ / "host/dev/nvidia1");
        fs::create_symlink("/dev/full", dir_ / "host/dev/nvidia2");
    }
    void process(const std::string& cgroup, const std::string& environ) {
        fs::create_directories(dir_ / "proc/42");
        std::ofstream(dir_ / "proc/42/cgroup") << cgroup;
        std::ofstream(dir_ / "proc/42/environ", std::ios::binary) << environ;
    }
    void gres_conf(const std::string& path, const std::string& text) {
        fs::create_directories((dir_ / "host" / path.substr(1)).parent_path());
        std::ofstream(dir_ / "host" / path.substr(1)) << text;
    }

    gpuguard::testing::TempDir dir_{"gg-workload"};
    WorkloadReadOptions options_;
};

TEST_F(ReadWorkload, a_slurm_job_under_cgroup_v2_is_named_and_its_gres_mapped_through_gres_conf) {
    gres_conf("/etc/slurm/gres.conf",
              "# the node's GPUs\nNodeName=node1 Name=gpu File=/dev/nvidia[1-2]\n"
              "NodeName=node2 Name=gpu File=/dev/nvidia0\nName=mps Count=100\n");
    process(kSlurmCgroupV2,
            "PATH=/bin\0SLURM_JOB_ID=4242\0SLURM_STEP_ID=0\0SLURM_JOB_USER=alice\0"
            "SLURM_JOB_ACCOUNT=physics\0SLURM_JOB_PARTITION=gpu\0SLURM_JOB_GPUS=1\0"
            "CUDA_VISIBLE_DEVICES=0\0"s);
    const auto workload = read_workload(42, options_);
    ASSERT_TRUE(workload);
    EXPECT_EQ(workload->scheduler, "slurm");
    EXPECT_EQ(workload->slurm, (gpuguard::SlurmJob{"4242", "0", "alice", "physics", "gpu", "1"}));
    EXPECT_EQ(workload->allocation_source, "SLURM_JOB_GPUS");
    EXPECT_EQ(workload->allocation, "1");
    EXPECT_EQ(workload->node_gpus, (std::vector<std::string>{"1:5", "1:7"}));
    EXPECT_EQ(workload->allocated, std::vector<std::string>{"1:7"});  // GRES index 1: nvidia2
    EXPECT_EQ(workload->unresolved, "");
}

TEST_F(ReadWorkload, a_batch_step_under_cgroup_v1_is_named_from_its_cgroup_alone) {
    process(kSlurmCgroupV1, "PATH=/bin\0SLURM_STEP_GPUS=0,2\0"s);
    const auto workload = read_workload(42, options_);
    ASSERT_TRUE(workload);
    EXPECT_EQ(workload->slurm.job_id, "77");
    EXPECT_EQ(workload->slurm.step_id, "batch");
    EXPECT_EQ(workload->allocation_source, "SLURM_STEP_GPUS");
    EXPECT_TRUE(workload->node_gpus.empty());  // no gres.conf: /dev/nvidiaN
    EXPECT_EQ(workload->allocated, (std::vector<std::string>{"1:3", "1:7"}));
}

TEST_F(ReadWorkload, an_environment_naming_another_job_than_its_cgroup_is_not_believed) {
    process(kSlurmCgroupV2, "SLURM_JOB_ID=1\0SLURM_JOB_GPUS=0,1,2\0"s);
    const auto workload = read_workload(42, options_);
    ASSERT_TRUE(workload);
    EXPECT_EQ(workload->slurm.job_id, "4242");
    EXPECT_TRUE(workload->allocated.empty());
    EXPECT_EQ(workload->unresolved, "its environment names job 1, its cgroup job 4242");
}

// A node whose GPU 0 is split into two MIG devices (each its GPU's node and
// its access nodes; /dev/nvidia0 stands for both instances' parent, nvidia1
// and nvidia2 for the first's and the second's access nodes) and whose
// GPU 1 is whole: GRES index 1 is the second MIG device, all its files.
TEST_F(ReadWorkload, a_mig_gres_of_several_files_is_all_of_them) {
    fs::create_symlink("/dev/random", dir_ / "host/dev/nvidia3");  // 1:8
    gres_conf("/etc/slurm/gres.conf",
              "Name=gpu Type=3g.40gb MultipleFiles=/dev/nvidia0,/dev/nvidia1\n"
              "Name=gpu Type=3g.40gb MultipleFiles=/dev/nvidia0,/dev/nvidia2\n"
              "Name=gpu Type=h100 File=/dev/nvidia3\n");
    process(kSlurmCgroupV2, "SLURM_JOB_ID=4242\0SLURM_STEP_GPUS=1\0"s);
    auto workload = read_workload(42, options_);
    ASSERT_TRUE(workload);
    EXPECT_EQ(workload->allocated, (std::vector<std::string>{"1:3", "1:7"}));
    EXPECT_EQ(workload->node_gpus, (std::vector<std::string>{"1:3", "1:5", "1:7", "1:8"}));
    EXPECT_EQ(workload->unresolved, "");
}

// Without gres.conf's files (AutoDetect=nvml), Slurm's indices on a node
// with MIG enabled count MIG devices: index 1 is not /dev/nvidia1 there,
// so they are not judged; without MIG they are /dev/nvidiaN.
TEST_F(ReadWorkload, gres_indices_without_files_on_a_mig_node_are_not_judged) {
    process(kSlurmCgroupV2, "SLURM_JOB_ID=4242\0SLURM_STEP_GPUS=1\0"s);
    bool mig = true;
    options_.kubelet.inventory_has_mig = [&mig] { return mig; };
    auto workload = read_workload(42, options_);
    ASSERT_TRUE(workload);
    EXPECT_TRUE(workload->allocated.empty());
    EXPECT_NE(workload->unresolved.find("MIG"), std::string::npos) << workload->unresolved;
    EXPECT_EQ(workload->allocation, "1");
    mig = false;
    workload = read_workload(42, options_);
    ASSERT_TRUE(workload);
    EXPECT_EQ(workload->allocated, std::vector<std::string>{"1:5"});
    EXPECT_EQ(workload->unresolved, "");
}

TEST_F(ReadWorkload, a_gres_conf_others_can_write_is_passed_over_for_the_default) {
    gres_conf("/etc/slurm/gres.conf", "Name=gpu File=/dev/nvidia2\n");
    gres_conf("/opt/slurm/gres.conf", "Name=gpu File=/dev/nvidia0\n");
    fs::permissions(dir_ / "host/opt/slurm/gres.conf", fs::perms::others_write,
                    fs::perm_options::add);
    process(kSlurmCgroupV2, "SLURM_CONF=/opt/slurm/slurm.conf\0SLURM_JOB_GPUS=0\0"s);
    const auto workload = read_workload(42, options_);
    ASSERT_TRUE(workload);
    EXPECT_EQ(workload->allocated, std::vector<std::string>{"1:7"});
}

TEST_F(ReadWorkload,
       a_pods_visible_devices_are_its_allocation_and_uuids_resolve_through_the_inventory) {
    const std::string pod = "0::/kubepods.slice/kubepods-pod0f1e.slice/cri-containerd-0a1b.scope\n";
    process(pod, "NVIDIA_VISIBLE_DEVICES=1\0CUDA_VISIBLE_DEVICES=0\0"s);
    auto workload = read_workload(42, options_);
    ASSERT_TRUE(workload);
    EXPECT_EQ(workload->scheduler, "kubernetes");
    EXPECT_TRUE(workload->slurm.empty());
    EXPECT_EQ(workload->allocation_source, "NVIDIA_VISIBLE_DEVICES");
    EXPECT_EQ(workload->allocated, std::vector<std::string>{"1:5"});

    // NVIDIA's device plugin names GPUs and MIG instances by UUID there by
    // default: without the agent's inventory they are not resolved ...
    process(pod, "NVIDIA_VISIBLE_DEVICES=GPU-8f3c0d2e-aa\0"s);
    workload = read_workload(42, options_);
    ASSERT_TRUE(workload);
    EXPECT_TRUE(workload->allocated.empty());
    EXPECT_NE(workload->unresolved.find("GPU-8f3c0d2e-aa"), std::string::npos);
    // ... with it, each is all the nodes that reach it, and the
    // inventory's nodes are what counts as a GPU.
    options_.kubelet.gpu_by_uuid = [](const std::string& uuid) -> std::vector<std::string> {
        if (uuid == "GPU-8f3c0d2e-aa") return {"195:1", "226:129"};
        if (uuid == "MIG-77aa") return {"195:2", "236:66", "236:67"};
        return {};
    };
    options_.kubelet.inventory_gpus = [] {
        return std::vector<std::string>{"195:1", "226:129", "195:2", "236:66", "236:67", "236:75"};
    };
    process(pod, "NVIDIA_VISIBLE_DEVICES=GPU-8f3c0d2e-aa,MIG-77aa\0"s);
    workload = read_workload(42, options_);
    ASSERT_TRUE(workload);
    EXPECT_EQ(workload->unresolved, "");
    EXPECT_EQ(workload->allocated,
              (std::vector<std::string>{"195:1", "226:129", "195:2", "236:66", "236:67"}));
    EXPECT_EQ(workload->node_gpus.size(), 6u);
    process(pod, "NVIDIA_VISIBLE_DEVICES=MIG-dead\0"s);
    workload = read_workload(42, options_);
    ASSERT_TRUE(workload);
    EXPECT_TRUE(workload->allocated.empty());
    EXPECT_NE(workload->unresolved.find("MIG-dead"), std::string::npos);

    // NVIDIA's CDI specifications write "void" (the runtime's device edits
    // gave the GPUs): not "given none", which it is for the legacy hook.
    process(pod, "NVIDIA_VISIBLE_DEVICES=void\0CUDA_VISIBLE_DEVICES=0\0"s);
    workload = read_workload(42, options_);
    ASSERT_TRUE(workload);
    EXPECT_EQ(workload->allocation_source, "NVIDIA_VISIBLE_DEVICES");
    EXPECT_EQ(workload->allocation, "void");
    EXPECT_TRUE(workload->allocated.empty());
    EXPECT_NE(workload->unresolved.find("came by CDI"), std::string::npos);
    // In a Slurm job it is enroot's word for a job given no GPU.
    process(kSlurmCgroupV2, "SLURM_JOB_ID=4242\0NVIDIA_VISIBLE_DEVICES=void\0"s);
    workload = read_workload(42, options_);
    ASSERT_TRUE(workload);
    EXPECT_EQ(workload->scheduler, "slurm");
    EXPECT_EQ(workload->allocation, "void");
    EXPECT_EQ(workload->unresolved, "");
    process(pod, "NVIDIA_VISIBLE_DEVICES=none\0"s);
    workload = read_workload(42, options_);
    ASSERT_TRUE(workload);
    EXPECT_EQ(workload->allocation, "none");
    EXPECT_TRUE(workload->allocated.empty());
    EXPECT_EQ(workload->unresolved, "");

    process(pod, "PATH=/bin\0"s);  // given none
    workload = read_workload(42, options_);
    ASSERT_TRUE(workload);
    EXPECT_EQ(workload->allocation_source, "");
    EXPECT_TRUE(workload->allocated.empty());
    EXPECT_EQ(workload->unresolved, "");
}

// NVIDIA's device plugin with DEVICE_LIST_STRATEGY=volume-mounts: the
// variable names a directory; the devices given are the mounts under it
// (/dev/null bind-mounted at one path per device ID), read from the
// process's mountinfo and resolved as the kubelet's IDs are.
TEST_F(ReadWorkload, a_pods_volume_mounted_device_list_is_its_allocation) {
    const std::string pod = "0::/kubepods.slice/kubepods-pod0f1e.slice/cri-containerd-0a1b.scope\n";
    options_.kubelet.gpu_by_uuid = [](const std::string& uuid) -> std::vector<std::string> {
        if (uuid == "GPU-8f3c0d2e-aa") return {"195:1", "226:129"};
        return {};
    };
    options_.kubelet.inventory_gpus = [] {
        return std::vector<std::string>{"195:0", "226:128", "195:1", "226:129"};
    };
    process(pod, "NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices\0"s);
    // The container's root shows /var/run as /run (a symlink in the image).
    std::ofstream(dir_ / "proc/42/mountinfo")
        << "1203 1190 0:312 / / rw,relatime - overlay overlay rw,lowerdir=/l\n"
           "1210 1203 0:5 /null /run/nvidia-container-devices/GPU-8f3c0d2e-aa rw,nosuid - "
           "devtmpfs udev rw,size=4096k\n"
           "1211 1203 0:5 /null /run/nvidia-container-devices/GPU-8f3c0d2e-aa rw,nosuid - "
           "devtmpfs udev rw\n"
           "1212 1203 0:5 /nvidia1 /dev/nvidia1 rw,nosuid - devtmpfs udev rw\n";
    auto workload = read_workload(42, options_);
    ASSERT_TRUE(workload);
    EXPECT_EQ(workload->allocation_source, "NVIDIA_VISIBLE_DEVICES");
    EXPECT_EQ(workload->allocation, "/var/run/nvidia-container-devices (GPU-8f3c0d2e-aa)");
    EXPECT_EQ(workload->unresolved, "");
    EXPECT_EQ(workload->allocated, (std::vector<std::string>{"195:1", "226:129"}));
    EXPECT_EQ(workload->node_gpus.size(), 4u);

    // Indices (DEVICE_ID_STRATEGY=index) are /dev/nvidiaN.
    std::ofstream(dir_ / "proc/42/mountinfo", std::ios::trunc)
        << "1210 1203 0:5 /null /var/run/nvidia-container-devices/0 rw - devtmpfs udev rw\n"
           "1211 1203 0:5 /null /var/run/nvidia-container-devices/2 rw - devtmpfs udev rw\n";
    workload = read_workload(42, options_);
    ASSERT_TRUE(workload);
    EXPECT_EQ(workload->allocation, "/var/run/nvidia-container-devices (0,2)");
    EXPECT_EQ(workload->allocated, (std::vector<std::string>{"1:3", "1:7"}));

    // Nothing mounted there, or a UUID the inventory lacks: not judged.
    std::ofstream(dir_ / "proc/42/mountinfo", std::ios::trunc)
        << "1203 1190 0:312 / / rw,relatime - overlay overlay rw\n";
    workload = read_workload(42, options_);
    ASSERT_TRUE(workload);
    EXPECT_TRUE(workload->allocated.empty());
    EXPECT_EQ(workload->unresolved,
              "NVIDIA_VISIBLE_DEVICES=/var/run/nvidia-container-devices (the device plugin's "
              "volume-mounts) but no device mounted there");
    std::ofstream(dir_ / "proc/42/mountinfo", std::ios::trunc)
        << "1210 1203 0:5 /null /var/run/nvidia-container-devices/GPU-dead rw - devtmpfs udev rw\n";
    workload = read_workload(42, options_);
    ASSERT_TRUE(workload);
    EXPECT_TRUE(workload->allocated.empty());
    EXPECT_NE(workload->unresolved.find("GPU-dead"), std::string::npos);
}

TEST_F(ReadWorkload, a_process_outside_any_job_or_pod_has_none) {
    process("0::/user.slice/user-1000.slice/session-3.scope\n", "CUDA_VISIBLE_DEVICES=0\0"s);
    EXPECT_FALSE(read_workload(42, options_));
    EXPECT_FALSE(read_workload(43, options_)) << "gone";
}

TEST(SlurmCgroup, takes_only_slurmstepd_paths) {
    EXPECT_EQ(slurm_cgroup_of(kSlurmCgroupV2).job_id, "4242");
    EXPECT_EQ(slurm_cgroup_of(kSlurmCgroupV2).step_id, "0");
    EXPECT_EQ(slurm_cgroup_of("0::/system.slice/slurmstepd.scope/job_12/step_extern/\n").step_id,
              "extern");
    EXPECT_EQ(slurm_cgroup_of("6:freezer:/slurm_node1/uid_0/job_9/step_batch\n").job_id, "9");
    EXPECT_EQ(slurm_cgroup_of("0::/user.slice/job_12/step_0\n").job_id, "");
    EXPECT_EQ(slurm_cgroup_of("6:freezer:/notslurm/uid_0/job_9/step_0\n").job_id, "");
    EXPECT_EQ(slurm_cgroup_of("0::/system.slice/slurmstepd.scope/system\n").job_id, "");
}

TEST(GresConf, files_expand_slurm_brackets_in_order) {
    EXPECT_EQ(expand_gres_files("/dev/nvidia[0-1,3]"),
              (std::vector<std::string>{"/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia3"}));
    EXPECT_EQ(
        expand_gres_files("/dev/nvidia2,/dev/dri/renderD[128-129]"),
        (std::vector<std::string>{"/dev/nvidia2", "/dev/dri/renderD128", "/dev/dri/renderD129"}));
    EXPECT_EQ(expand_gres_files("/dev/gpu[08-10]"),
              (std::vector<std::string>{"/dev/gpu08", "/dev/gpu09", "/dev/gpu10"}));
    using Gres = std::vector<std::vector<std::string>>;
    EXPECT_EQ(gres_gpu_files("NodeName=n[1-4] Name=gpu Type=a100 File=/dev/nvidia[0-1]\n"
                             "NodeName=other Name=gpu File=/dev/nvidia5\n",
                             "n2"),
              (Gres{{"/dev/nvidia0"}, {"/dev/nvidia1"}}));
    // A MIG device is one GRES of several files (Slurm's gres.conf
    // MultipleFiles=, as a node with MIG writes it by hand).
    EXPECT_EQ(
        gres_gpu_files("Name=gpu Type=3g.40gb "
                       "MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap[21-22]\n"
                       "Name=gpu Type=3g.40gb "
                       "MultipleFiles=/dev/nvidia0,/dev/nvidia-caps/nvidia-cap30,"
                       "/dev/nvidia-caps/nvidia-cap31\n"
                       "Name=gpu Type=h100 File=/dev/nvidia1\n",
                       "n1"),
        (Gres{{"/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap21", "/dev/nvidia-caps/nvidia-cap22"},
              {"/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap30", "/dev/nvidia-caps/nvidia-cap31"},
              {"/dev/nvidia1"}}));
}

}  // namespace
