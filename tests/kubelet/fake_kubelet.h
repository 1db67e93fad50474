// A PodResourcesLister server from the same proto as the agent's client
// (kubelet/podresources_v1.proto), on a unix socket the test names: the
// kubelet's side of the PodResources API, with the answers and failures a
// test sets. gRPC stays behind this header (fake_kubelet.cpp).
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "gpuguard/kubelet/pod_resources.h"

namespace gpuguard::testing {

class FakeKubelet {
  public:
    // What every call answers instead of the pods.
    enum class Failure { kNone, kUnavailable, kUnimplemented };

    // Serves on `socket_path` until destroyed; aborts the test binary when
    // the socket cannot be bound (a test cannot run without it).
    explicit FakeKubelet(const std::string& socket_path);
    ~FakeKubelet();
    FakeKubelet(const FakeKubelet&) = delete;
    FakeKubelet& operator=(const FakeKubelet&) = delete;

    void set_pods(std::vector<kubelet::PodResources> pods);
    void set_failure(Failure failure);
    // Each answer waits this long first (a kubelet slower than the deadline).
    void set_delay(std::chrono::milliseconds delay);
    int list_calls() const;
    int get_calls() const;

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace gpuguard::testing
