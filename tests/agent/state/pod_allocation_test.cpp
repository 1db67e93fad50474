// A pod's UID from its cgroup, its name from the kubelet's pod directory,
// the kubelet's device IDs as device numbers, and read_workload preferring
// the kubelet's allocation to NVIDIA_VISIBLE_DEVICES
// (gpuguard/state/pod_allocation.h), over fake /proc and host trees.
#include "gpuguard/state/pod_allocation.h"

#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>

#include "gpuguard/state/workload.h"
#include "tests/support/temp_dir.h"

namespace {

using gpuguard::agent::kubepods_pod_uid;
using gpuguard::agent::pod_identity_from_kubelet_dir;
using gpuguard::agent::PodQuery;
using gpuguard::agent::resolve_kubelet_device_ids;
namespace fs = std::filesystem;

constexpr const char* kUid = "5f1c2a3b-0d4e-4f60-8a7b-9c0d1e2f3a4b";

TEST(PodAllocation, the_pod_uid_is_read_from_every_cgroup_shape) {
    // cgroup v2, systemd driver, each QoS class.
    EXPECT_EQ(kubepods_pod_uid("0::/kubepods.slice/kubepods-besteffort.slice/"
                               "kubepods-besteffort-pod5f1c2a3b_0d4e_4f60_8a7b_9c0d1e2f3a4b.slice/"
                               "cri-containerd-0123abcd.scope\n"),
              kUid);
    EXPECT_EQ(kubepods_pod_uid("0::/kubepods.slice/kubepods-burstable.slice/"
                               "kubepods-burstable-pod5f1c2a3b_0d4e_4f60_8a7b_9c0d1e2f3a4b.slice/"
                               "crio-0123abcd.scope\n"),
              kUid);
    EXPECT_EQ(kubepods_pod_uid("0::/kubepods.slice/"
                               "kubepods-pod5f1c2a3b_0d4e_4f60_8a7b_9c0d1e2f3a4b.slice/"
                               "cri-containerd-0123abcd.scope\n"),
              kUid);
    // cgroupfs driver, v2 and v1 (the pod's line among others).
    EXPECT_EQ(kubepods_pod_uid(std::string("0::/kubepods/burstable/pod") + kUid + "/0123abcd\n"),
              kUid);
    EXPECT_EQ(
        kubepods_pod_uid(std::string("12:freezer:/kubepods/pod") + kUid + "/0123abcd\n0::/\n"),
        kUid);
    // A static pod's UID is the 32 hex digits of a hash.
    EXPECT_EQ(kubepods_pod_uid("0::/kubepods/besteffort/pod0123456789abcdef0123456789abcdef/c\n"),
              "0123456789abcdef0123456789abcdef");
    EXPECT_EQ(kubepods_pod_uid("0::/user.slice/user-1000.slice/session-3.scope\n"), "");
    EXPECT_EQ(kubepods_pod_uid("0::/kubepods.slice/kubepods-besteffort.slice\n"), "");
}

TEST(PodAllocation, the_kubelet_pod_directory_names_the_pod_and_its_namespace) {
    gpuguard::testing::TempDir dir("gg-poddir");
    const fs::path pod = dir / "pods" / kUid;
    fs::create_directories(pod / "volumes/kubernetes.io~projected/kube-api-access-x2k9p");
    std::ofstream(pod / "etc-hosts") << "# Kubernetes-managed hosts file.\n"
                                        "127.0.0.1\tlocalhost\n"
                                        "::1\tlocalhost ip6-localhost ip6-loopback\n"
                                        "fe00::0\tip6-localnet\n"
                                        "10.244.1.5\ttrainer-0.workers.ml.svc.cluster.local\t"
                                        "trainer-0\n"
                                        "\n# Entries added by HostAliases.\n"
                                        "10.0.0.9\tregistry.internal\n";
    std::ofstream(pod / "volumes/kubernetes.io~projected/kube-api-access-x2k9p/namespace") << "ml";
    const auto identity = pod_identity_from_kubelet_dir(pod.string());
    EXPECT_EQ(identity.name, "trainer-0");
    EXPECT_EQ(identity.pod_namespace, "ml");

    // A host-network pod gets the host's hosts file: no name there.
    std::ofstream(pod / "etc-hosts", std::ios::trunc)
        << "# Kubernetes-managed hosts file (host network).\n10.0.0.2\tnode1\n";
    EXPECT_EQ(pod_identity_from_kubelet_dir(pod.string()).name, "");
    EXPECT_EQ(pod_identity_from_kubelet_dir((dir / "pods/none").string()).pod_namespace, "");
}

TEST(PodAllocation, indices_and_known_gpu_and_mig_uuids_become_device_numbers_others_are_not) {
    gpuguard::testing::TempDir dir("gg-podgpus");
    fs::create_directories(dir / "dev");
    fs::create_symlink("/dev/null", dir / "dev/nvidia0");  // 1:3 stands for 195:0
    // GPU-8f3c: its /dev/nvidia1 and its nvidia-drm render node.
    // MIG-77aa: a MIG instance of GPU 2, its GPU and its access nodes.
    const std::map<std::string, std::vector<std::string>> inventory{
        {"GPU-8f3c", {"195:1", "226:129"}}, {"MIG-77aa", {"195:2", "236:66", "236:67"}}};
    const auto by_uuid = [&](const std::string& uuid) {
        const auto found = inventory.find(uuid);
        return found == inventory.end() ? std::vector<std::string>() : found->second;
    };
    const std::string host = dir.path().string();
    auto indices = resolve_kubelet_device_ids({"0", "3"}, by_uuid, host);
    EXPECT_EQ(indices.allocated, (std::vector<std::string>{"1:3", "195:3"}));
    EXPECT_EQ(indices.unresolved, "");
    // Two time-sliced replicas of one GPU are that GPU (all its nodes) once.
    auto uuids = resolve_kubelet_device_ids({"GPU-8f3c::0", "GPU-8f3c::1"}, by_uuid, host);
    EXPECT_EQ(uuids.allocated, (std::vector<std::string>{"195:1", "226:129"}));
    auto unknown = resolve_kubelet_device_ids({"0", "GPU-dead"}, by_uuid, host);
    EXPECT_TRUE(unknown.allocated.empty());
    EXPECT_NE(unknown.unresolved.find("GPU-dead"), std::string::npos);
    auto no_inventory = resolve_kubelet_device_ids({"GPU-8f3c"}, nullptr, host);
    EXPECT_NE(no_inventory.unresolved, "");
    // A MIG instance (the device plugin's mixed or single strategy) is
    // the nodes that reach it; one the inventory lacks is unresolved.
    auto mig = resolve_kubelet_device_ids({"MIG-77aa"}, by_uuid, host);
    EXPECT_EQ(mig.allocated, (std::vector<std::string>{"195:2", "236:66", "236:67"}));
    EXPECT_EQ(mig.unresolved, "");
    auto unknown_mig = resolve_kubelet_device_ids({"MIG-1a2b"}, by_uuid, host);
    EXPECT_TRUE(unknown_mig.allocated.empty());
    EXPECT_NE(unknown_mig.unresolved.find("MIG-1a2b"), std::string::npos);
    auto other = resolve_kubelet_device_ids({"nvidia0"}, by_uuid, host);
    EXPECT_NE(other.unresolved.find("not a GPU index, GPU UUID or MIG UUID"), std::string::npos);
    EXPECT_EQ(resolve_kubelet_device_ids({}, by_uuid, host).unresolved, "");
}

class ReadPodWorkload : public ::testing::Test {
  protected:
    ReadPodWorkload() {
        options_.proc_root = (dir_ / "proc").string();
        options_.host_root = (dir_ / "host").string();
        fs::create_directories(dir_ / "host/dev");
        fs::create_symlink("/dev/null", dir_ / "host/dev/nvidia0");  // 1:3
        fs::create_symlink("/dev/zero", dir_ / "host/dev/nvidia1");  // 1:5
        fs::create_directories(dir_ / "proc/42");
        std::ofstream(dir_ / "proc/42/cgroup")
            << "0::/kubepods.slice/kubepods-burstable.slice/"
               "kubepods-burstable-pod5f1c2a3b_0d4e_4f60_8a7b_9c0d1e2f3a4b.slice/"
               "cri-containerd-0123abcd.scope\n";
        std::ofstream(dir_ / "proc/42/environ", std::ios::binary)
            << std::string("NVIDIA_VISIBLE_DEVICES=0,1\0PATH=/bin\0", 38);
        const fs::path pod = dir_ / "host/var/lib/kubelet/pods" / kUid;
        fs::create_directories(pod / "volumes/kubernetes.io~projected/token");
        std::ofstream(pod / "etc-hosts") << "# Kubernetes-managed hosts file.\n"
                                            "127.0.0.1\tlocalhost\n10.244.1.5\ttrainer-0\n";
        std::ofstream(pod / "volumes/kubernetes.io~projected/token/namespace") << "ml\n";
        options_.kubelet.gpu_ids = [this](const PodQuery& query) {
            queries_.push_back(query);
            return kubelet_answer_;
        };
    }

    gpuguard::testing::TempDir dir_{"gg-podwork"};
    gpuguard::agent::WorkloadReadOptions options_;
    std::optional<gpuguard::agent::KubeletGpus> kubelet_answer_;
    std::vector<PodQuery> queries_;
};

TEST_F(ReadPodWorkload, the_kubelets_allocation_is_preferred_to_the_environment) {
    kubelet_answer_ = gpuguard::agent::KubeletGpus{{"1"}, {}};
    auto workload = gpuguard::agent::read_workload(42, options_);
    ASSERT_TRUE(workload);
    EXPECT_EQ(workload->scheduler, "kubernetes");
    EXPECT_EQ(workload->pod_uid, kUid);
    EXPECT_EQ(workload->pod_namespace, "ml");  // from the kubelet's pod directory
    EXPECT_EQ(workload->pod_name, "trainer-0");
    EXPECT_EQ(workload->allocation_source, "kubelet");
    EXPECT_EQ(workload->allocation, "1");
    EXPECT_EQ(workload->allocated, (std::vector<std::string>{"1:5"}));
    ASSERT_EQ(queries_.size(), 1u);
    EXPECT_EQ(queries_[0].container, "");  // not known without the runtime's labels
}

TEST_F(ReadPodWorkload, a_pod_the_kubelet_gave_no_gpu_has_an_empty_allocation) {
    kubelet_answer_ = gpuguard::agent::KubeletGpus{};
    gpuguard::ContainerDetails labels;
    labels.pod_namespace = "team-a";
    labels.pod_name = "notebook";
    labels.kube_container = "jupyter";
    auto workload = gpuguard::agent::read_workload(42, options_, labels);
    ASSERT_TRUE(workload);
    EXPECT_EQ(workload->allocation_source, "kubelet");
    EXPECT_TRUE(workload->allocated.empty());
    EXPECT_EQ(workload->unresolved, "");
    ASSERT_EQ(queries_.size(), 1u);  // the labels' names win over the directory's
    EXPECT_EQ(queries_[0].pod_namespace, "team-a");
    EXPECT_EQ(queries_[0].name, "notebook");
    EXPECT_EQ(queries_[0].container, "jupyter");
}

// A pod whose GPU a DRA claim gave (NVIDIA's DRA driver): the kubelet
// lists the claim's device, which the agent cannot turn into a device node,
// so the allocation is not judged, and is never read as "given none".
TEST_F(ReadPodWorkload, a_pod_given_its_gpu_by_a_dra_claim_is_not_judged) {
    kubelet_answer_ =
        gpuguard::agent::KubeletGpus{{}, {"gpu.nvidia.com/gpu-0 (claim ml/trainer-gpu)"}};
    auto workload = gpuguard::agent::read_workload(42, options_);
    ASSERT_TRUE(workload);
    EXPECT_EQ(workload->allocation_source, "kubelet");
    EXPECT_TRUE(workload->allocated.empty());
    EXPECT_EQ(workload->unresolved,
              "GPUs given by DRA claims: gpu.nvidia.com/gpu-0 (claim ml/trainer-gpu)");
    EXPECT_EQ(workload->allocation, "gpu.nvidia.com/gpu-0 (claim ml/trainer-gpu)");
}

// The GPU Operator's pods (its driver's persistenced, the device plugin,
// the DCGM exporter) open every GPU and ask the device plugin for none: in
// a namespace of kubelet.gpu_infrastructure_namespaces they are named and
// their allocation is not judged, whatever the kubelet says.
TEST_F(ReadPodWorkload, a_pod_of_the_gpu_infrastructure_is_named_and_not_judged) {
    kubelet_answer_ = gpuguard::agent::KubeletGpus{};  // given none
    options_.kubelet.infrastructure_namespaces = {"kube-system", "gpu-*"};
    gpuguard::ContainerDetails labels;
    labels.pod_namespace = "gpu-operator";
    labels.pod_name = "nvidia-dcgm-exporter-7xk2p";
    labels.kube_container = "nvidia-dcgm-exporter";
    auto workload = gpuguard::agent::read_workload(42, options_, labels);
    ASSERT_TRUE(workload);
    EXPECT_EQ(workload->pod_name, "nvidia-dcgm-exporter-7xk2p");
    EXPECT_EQ(workload->allocation_source, gpuguard::agent::kGpuInfrastructureSource);
    EXPECT_EQ(workload->allocation, "gpu-operator");
    EXPECT_TRUE(workload->allocated.empty());
    EXPECT_EQ(workload->unresolved,
              "a pod of the GPU infrastructure (namespace gpu-operator matches 'gpu-*', "
              "kubelet.gpu_infrastructure_namespaces): not judged");
    EXPECT_TRUE(queries_.empty());
    // The same pod in a tenant's namespace (the directory's "ml"): the kubelet's word.
    workload = gpuguard::agent::read_workload(42, options_);
    ASSERT_TRUE(workload);
    EXPECT_EQ(workload->pod_namespace, "ml");
    EXPECT_EQ(workload->allocation_source, "kubelet");
    EXPECT_EQ(workload->unresolved, "");
    EXPECT_EQ(queries_.size(), 1u);
}

TEST_F(ReadPodWorkload, a_pod_the_kubelet_has_not_named_falls_back_to_its_environment) {
    auto workload = gpuguard::agent::read_workload(42, options_);
    ASSERT_TRUE(workload);
    EXPECT_EQ(workload->allocation_source, "NVIDIA_VISIBLE_DEVICES");
    EXPECT_EQ(workload->allocated, (std::vector<std::string>{"1:3", "1:5"}));
    EXPECT_EQ(workload->pod_name, "trainer-0");
    EXPECT_EQ(queries_.size(), 1u);
}

}  // namespace
