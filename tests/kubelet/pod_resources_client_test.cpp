// The PodResources client and cache against FakeKubelet: a real gRPC
// server from the same proto on a unix socket in a temp dir.
#include <chrono>
#include <filesystem>
#include <thread>

#include <gtest/gtest.h>

#include "gpuguard/kubelet/pod_resources.h"
#include "tests/kubelet/fake_kubelet.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::kubelet {
namespace {

using namespace std::chrono_literals;
using testing::FakeKubelet;

PodResources trainer_pod() {
    return PodResources{
        "trainer-7f9c",
        "ml",
        {ContainerResources{"worker", {ResourceDevices{"nvidia.com/gpu", {"0", "2"}}}},
         ContainerResources{"sidecar", {}}}};
}

TEST(NvidiaDeviceIds, one_containers_ids_or_every_containers_when_it_is_not_named) {
    PodResources pod = trainer_pod();
    pod.containers[1].devices = {ResourceDevices{"nvidia.com/gpu", {"2", "3"}},
                                 ResourceDevices{"example.com/fpga", {"fpga0"}}};
    EXPECT_EQ(nvidia_device_ids(pod, "worker"), (std::vector<std::string>{"0", "2"}));
    EXPECT_EQ(nvidia_device_ids(pod, "sidecar"), (std::vector<std::string>{"2", "3"}));
    EXPECT_EQ(nvidia_device_ids(pod, ""), (std::vector<std::string>{"0", "2", "3"}));
    EXPECT_EQ(nvidia_device_ids(pod, "renamed"), (std::vector<std::string>{"0", "2", "3"}));
    pod.containers[1].devices.clear();
    EXPECT_TRUE(nvidia_device_ids(pod, "sidecar").empty());  // a container given none
}

// DRA: the devices GPU drivers' claims gave, described; a NIC's claim is
// not a GPU, and a claim an older kubelet names by its class alone is.
TEST(GpuClaimDevices, claims_of_gpu_drivers_are_described_others_left_out) {
    PodResources pod = trainer_pod();
    pod.containers[0].claim_devices = {
        ClaimDevice{"ml", "trainer-gpu", "", "gpu.nvidia.com", "node-1", "gpu-0"},
        ClaimDevice{"ml", "trainer-net", "", "dra.net", "node-1", "eth1"}};
    pod.containers[1].claim_devices = {
        ClaimDevice{"ml", "old-claim", "gpu.example.com", "", "", ""}};
    EXPECT_EQ(gpu_claim_devices(pod, "worker"),
              std::vector<std::string>{"gpu.nvidia.com/gpu-0 (claim ml/trainer-gpu)"});
    EXPECT_EQ(gpu_claim_devices(pod, "sidecar"),
              std::vector<std::string>{"gpu.example.com (claim ml/old-claim)"});
    EXPECT_EQ(gpu_claim_devices(pod, "").size(), 2u);
    EXPECT_TRUE(gpu_claim_devices(trainer_pod(), "").empty());
}

class PodResourcesClientTest : public ::testing::Test {
  protected:
    gpuguard::testing::TempDir dir{"gg-kubelet"};
    std::string socket = (dir / "kubelet.sock").string();
};

TEST_F(PodResourcesClientTest, list_gives_each_containers_devices) {
    FakeKubelet kubelet(socket);
    PodResources plain{"web", "default", {ContainerResources{"nginx", {}}}};
    // A pod given its GPU by a DRA claim (Kubernetes 1.31+'s fields), and
    // one an older kubelet lists by the claim's class alone.
    PodResources claimed{"llm-0",
                         "serving",
                         {ContainerResources{"vllm",
                                             {},
                                             {ClaimDevice{"serving", "llm-0-gpu", "",
                                                          "gpu.nvidia.com", "node-1", "gpu-1"}}}}};
    PodResources older{
        "old-0",
        "serving",
        {ContainerResources{
            "main", {}, {ClaimDevice{"serving", "old-0-gpu", "gpu.nvidia.com", "", "", ""}}}}};
    kubelet.set_pods({trainer_pod(), plain, claimed, older});
    PodResourcesClient client(socket, 2s);
    auto pods = client.list();
    ASSERT_TRUE(pods) << pods.error().message;
    ASSERT_EQ(pods->size(), 4u);
    EXPECT_EQ((*pods)[0], trainer_pod());
    EXPECT_EQ((*pods)[1], plain);
    EXPECT_EQ((*pods)[2], claimed);
    EXPECT_EQ((*pods)[3], older);
    EXPECT_EQ(kubelet.list_calls(), 1);
}

TEST_F(PodResourcesClientTest, get_names_one_pod_and_fails_for_a_pod_not_run) {
    FakeKubelet kubelet(socket);
    kubelet.set_pods({trainer_pod()});
    PodResourcesClient client(socket, 2s);
    auto pod = client.get("ml", "trainer-7f9c");
    ASSERT_TRUE(pod) << pod.error().message;
    EXPECT_EQ(*pod, trainer_pod());
    auto missing = client.get("ml", "gone");
    ASSERT_FALSE(missing);
    EXPECT_EQ(missing.error().code, ErrorCode::kIo);
    EXPECT_NE(missing.error().message.find("pod not found"), std::string::npos);
}

TEST_F(PodResourcesClientTest, an_absent_socket_is_not_found) {
    PodResourcesClient client(socket, 2s);
    auto pods = client.list();
    ASSERT_FALSE(pods);
    EXPECT_EQ(pods.error().code, ErrorCode::kNotFound);
    EXPECT_NE(pods.error().message.find(socket), std::string::npos);
}

TEST_F(PodResourcesClientTest, unavailable_and_unimplemented_are_told_apart) {
    FakeKubelet kubelet(socket);
    PodResourcesClient client(socket, 2s);
    kubelet.set_failure(FakeKubelet::Failure::kUnavailable);
    auto unavailable = client.list();
    ASSERT_FALSE(unavailable);
    EXPECT_EQ(unavailable.error().code, ErrorCode::kIo);
    EXPECT_NE(unavailable.error().message.find("kubelet restarting"), std::string::npos);
    kubelet.set_failure(FakeKubelet::Failure::kUnimplemented);
    auto unimplemented = client.get("ml", "trainer-7f9c");
    ASSERT_FALSE(unimplemented);
    EXPECT_EQ(unimplemented.error().code, ErrorCode::kUnsupported);
}

TEST_F(PodResourcesClientTest, a_slow_kubelet_fails_at_the_deadline) {
    FakeKubelet kubelet(socket);
    kubelet.set_pods({trainer_pod()});
    kubelet.set_delay(800ms);
    PodResourcesClient client(socket, 100ms);
    const auto start = std::chrono::steady_clock::now();
    auto pods = client.list();
    const auto took = std::chrono::steady_clock::now() - start;
    ASSERT_FALSE(pods);
    EXPECT_EQ(pods.error().code, ErrorCode::kIo);
    EXPECT_NE(pods.error().message.find("status 4 "), std::string::npos)  // DEADLINE_EXCEEDED
        << pods.error().message;
    EXPECT_LT(took, 600ms);
}

TEST_F(PodResourcesClientTest,
       the_cache_refreshes_soon_when_asked_and_keeps_its_answer_on_failure) {
    FakeKubelet kubelet(socket);
    PodResourcesCache cache({socket, 2s, 1h});
    cache.refresh_and_wait();
    EXPECT_FALSE(cache.find("ml", "trainer-7f9c"));
    kubelet.set_pods({trainer_pod()});
    cache.refresh_and_wait();
    ASSERT_TRUE(cache.find("ml", "trainer-7f9c"));
    EXPECT_EQ(*cache.find("ml", "trainer-7f9c"), trainer_pod());
    kubelet.set_failure(FakeKubelet::Failure::kUnavailable);
    cache.refresh_and_wait();
    EXPECT_TRUE(cache.find("ml", "trainer-7f9c"));  // the last answer stays
    const PodResourcesCounters counters = cache.counters();
    EXPECT_GE(counters.refreshes, 2u);
    EXPECT_EQ(counters.failures, 1u);
    EXPECT_EQ(counters.socket_absent, 0u);
}

TEST_F(PodResourcesClientTest, refresh_soon_returns_at_once_and_the_thread_lists_again) {
    FakeKubelet kubelet(socket);
    PodResourcesCache cache({socket, 2s, 1h});
    cache.refresh_and_wait();
    kubelet.set_pods({trainer_pod()});
    kubelet.set_delay(300ms);
    const int calls_before = kubelet.list_calls();
    const auto start = std::chrono::steady_clock::now();
    cache.refresh_soon();
    EXPECT_LT(std::chrono::steady_clock::now() - start, 100ms);  // the caller never waits
    for (int i = 0; i < 100 && !cache.find("ml", "trainer-7f9c"); ++i) {
        std::this_thread::sleep_for(20ms);
    }
    EXPECT_TRUE(cache.find("ml", "trainer-7f9c"));
    EXPECT_EQ(kubelet.list_calls(), calls_before + 1);
}

TEST_F(PodResourcesClientTest, a_kubelet_that_starts_late_or_restarts_is_answered_again) {
    PodResourcesCache cache({socket, 2s, 1h});
    cache.refresh_and_wait();  // no kubelet yet
    {
        FakeKubelet kubelet(socket);
        kubelet.set_pods({trainer_pod()});
        cache.refresh_and_wait();
        EXPECT_TRUE(cache.find("ml", "trainer-7f9c"));
    }
    // The kubelet restarts with the pod gone: a new server on the same path.
    std::filesystem::remove(socket);
    FakeKubelet restarted(socket);
    for (int i = 0; i < 50 && cache.find("ml", "trainer-7f9c"); ++i) {
        cache.refresh_and_wait();
        if (cache.find("ml", "trainer-7f9c")) std::this_thread::sleep_for(100ms);
    }
    EXPECT_FALSE(cache.find("ml", "trainer-7f9c"));
    EXPECT_GE(restarted.list_calls(), 1);
}

TEST_F(PodResourcesClientTest, a_cache_without_a_kubelet_counts_the_absent_socket) {
    PodResourcesCache cache({socket, 2s, 1h});
    cache.refresh_and_wait();
    EXPECT_FALSE(cache.find("ml", "trainer-7f9c"));
    EXPECT_GE(cache.counters().socket_absent, 1u);
    EXPECT_EQ(cache.counters().failures, 0u);
}

}  // namespace
}  // namespace gpuguard::kubelet
