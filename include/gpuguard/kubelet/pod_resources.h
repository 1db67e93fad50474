// The kubelet's PodResources API (k8s.io/kubelet/pkg/apis/podresources/v1)
// on its unix socket: which devices the kubelet gave each container of each
// pod on this node. gRPC and protobuf stay behind this header
// (kubelet/pod_resources_client.cpp is their one user).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gpuguard/common/result.h"

namespace gpuguard::kubelet {

// The devices of one resource a container was given ("nvidia.com/gpu",
// ["0", "1"] or ["GPU-8f3c...", "MIG-..."]).
struct ResourceDevices {
    std::string resource_name;
    std::vector<std::string> device_ids;
    bool operator==(const ResourceDevices&) const = default;
};

// A device a DRA claim (resource.k8s.io) gave the container: the claim,
// the driver that allocated it ("gpu.nvidia.com"; before Kubernetes 1.31
// only the claim's class, "gpu.nvidia.com"), and the device by its pool and
// name in the driver's ResourceSlice ("gpu-0").
struct ClaimDevice {
    std::string claim_namespace;
    std::string claim_name;
    std::string class_name;
    std::string driver_name;
    std::string pool_name;
    std::string device_name;
    bool operator==(const ClaimDevice&) const = default;
};

struct ContainerResources {
    std::string name;
    std::vector<ResourceDevices> devices;
    std::vector<ClaimDevice> claim_devices{};
    bool operator==(const ContainerResources&) const = default;
};

struct PodResources {
    std::string name;
    std::string pod_namespace;
    std::vector<ContainerResources> containers;
    bool operator==(const PodResources&) const = default;
};

// The device IDs of NVIDIA's resources ("nvidia.com/gpu", and MIG's
// "nvidia.com/mig-*") given to `container` of `pod`, or to all its
// containers when `container` is "" or not one of them (the caller did not
// know which); in the kubelet's order, each once.
std::vector<std::string> nvidia_device_ids(const PodResources& pod, const std::string& container);

// The devices DRA claims of GPU drivers (a driver or class name with "gpu"
// in it: gpu.nvidia.com, gpu.amd.com, gpu.intel.com) gave the same
// containers, each described ("gpu.nvidia.com/gpu-0 (claim ml/trainer-gpu)").
// The agent cannot turn these into device nodes without the driver's
// ResourceSlice (the API server's), so such an allocation is not judged.
std::vector<std::string> gpu_claim_devices(const PodResources& pod, const std::string& container);

inline constexpr const char* kDefaultPodResourcesSocket =
    "/var/lib/kubelet/pod-resources/kubelet.sock";

// One connection to the kubelet's socket. Every call has `deadline`; none
// retries. Failures: kNotFound when the socket is absent (no kubelet on this
// host), kUnsupported when the kubelet lacks the call (UNIMPLEMENTED: Get
// before Kubernetes 1.27 or with its feature gate off), kIo for every other
// status (UNAVAILABLE, DEADLINE_EXCEEDED, ...), the message naming the status
// and the socket. Calls are thread-safe.
class PodResourcesClient {
  public:
    PodResourcesClient(std::string socket_path, std::chrono::milliseconds deadline);
    ~PodResourcesClient();
    PodResourcesClient(const PodResourcesClient&) = delete;
    PodResourcesClient& operator=(const PodResourcesClient&) = delete;

    // Every pod the kubelet runs on this node.
    Result<std::vector<PodResources>> list() const;
    // One pod by namespace and name.
    Result<PodResources> get(const std::string& pod_namespace, const std::string& name) const;

    const std::string& socket_path() const { return socket_path_; }

  private:
    struct Stub;
    std::string socket_path_;
    std::chrono::milliseconds deadline_;
    std::unique_ptr<Stub> stub_;
};

struct PodResourcesCacheOptions {
    std::string socket_path = kDefaultPodResourcesSocket;
    std::chrono::milliseconds call_timeout{2000};
    std::chrono::milliseconds refresh_interval{30000};
};

// What the cache did, for /metrics and the tests.
struct PodResourcesCounters {
    uint64_t refreshes = 0;      // List answered
    uint64_t failures = 0;       // List failed (socket present)
    uint64_t socket_absent = 0;  // refreshes that found no socket
};

// The kubelet's answer kept in memory and refreshed by a thread of its own
// every refresh_interval, and soon after refresh_soon(): lookups never wait
// for the kubelet. An absent socket is logged once (info) and counted, a
// failing call logged once per change of error (warn); the last answer
// stays in use until a new one arrives.
class PodResourcesCache {
  public:
    explicit PodResourcesCache(PodResourcesCacheOptions options);
    ~PodResourcesCache();  // stops and joins the thread
    PodResourcesCache(const PodResourcesCache&) = delete;
    PodResourcesCache& operator=(const PodResourcesCache&) = delete;

    // The pod as last listed; nullopt when the kubelet has not named it
    // (yet): a new pod, or no kubelet.
    std::optional<PodResources> find(const std::string& pod_namespace,
                                     const std::string& name) const;
    // Asks the thread for a new List now (a GPU opened by a pod the last
    // answer lacked); returns at once.
    void refresh_soon();
    // Asks for a refresh and blocks until one that began after this call
    // has ended (tests, and a caller with time to wait).
    void refresh_and_wait();
    PodResourcesCounters counters() const;

  private:
    struct State;
    std::unique_ptr<State> state_;
};

}  // namespace gpuguard::kubelet
