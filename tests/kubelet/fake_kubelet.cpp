// FakeKubelet (fake_kubelet.h): v1.PodResourcesLister served by gRPC's
// synchronous server on a unix socket.
#include "fake_kubelet.h"

#include <atomic>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "podresources_v1.grpc.pb.h"

namespace gpuguard::testing {
namespace {

void fill(v1::PodResources& message, const kubelet::PodResources& pod) {
    message.set_name(pod.name);
    message.set_namespace_(pod.pod_namespace);
    for (const kubelet::ContainerResources& container : pod.containers) {
        v1::ContainerResources* out = message.add_containers();
        out->set_name(container.name);
        for (const kubelet::ResourceDevices& devices : container.devices) {
            v1::ContainerDevices* given = out->add_devices();
            given->set_resource_name(devices.resource_name);
            for (const std::string& id : devices.device_ids) given->add_device_ids(id);
            given->mutable_topology()->add_nodes()->set_id(0);
        }
        for (const kubelet::ClaimDevice& device : container.claim_devices) {
            v1::DynamicResource* claim = out->add_dynamic_resources();
            claim->set_claim_namespace(device.claim_namespace);
            claim->set_claim_name(device.claim_name);
            claim->set_class_name(device.class_name);
            if (device.driver_name.empty()) continue;  // an older kubelet's: the class alone
            v1::ClaimResource* resource = claim->add_claim_resources();
            resource->set_driver_name(device.driver_name);
            resource->set_pool_name(device.pool_name);
            resource->set_device_name(device.device_name);
            resource->add_cdi_devices()->set_name("k8s." + device.driver_name + "/claim=" +
                                                  device.claim_name + "-" + device.device_name);
        }
        out->add_cpu_ids(2);  // fields the client does not read, as a kubelet sends them
    }
}

class Lister final : public v1::PodResourcesLister::Service {
  public:
    grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                      v1::ListPodResourcesResponse* response) override {
        ++list_calls;
        if (auto status = delay_and_failure(); !status.ok()) return status;
        std::lock_guard lock(mutex);
        for (const kubelet::PodResources& pod : pods) fill(*response->add_pod_resources(), pod);
        return grpc::Status::OK;
    }

    grpc::Status GetAllocatableResources(grpc::ServerContext*,
                                         const v1::AllocatableResourcesRequest*,
                                         v1::AllocatableResourcesResponse*) override {
        return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "not served by the fake kubelet");
    }

    grpc::Status Get(grpc::ServerContext*, const v1::GetPodResourcesRequest* request,
                     v1::GetPodResourcesResponse* response) override {
        ++get_calls;
        if (auto status = delay_and_failure(); !status.ok()) return status;
        std::lock_guard lock(mutex);
        for (const kubelet::PodResources& pod : pods) {
            if (pod.name == request->pod_name() && pod.pod_namespace == request->pod_namespace()) {
                fill(*response->mutable_pod_resources(), pod);
                return grpc::Status::OK;
            }
        }
        // The kubelet's answer for a pod it does not run.
        return grpc::Status(grpc::StatusCode::NOT_FOUND, "pod not found");
    }

    std::mutex mutex;
    std::vector<kubelet::PodResources> pods;
    FakeKubelet::Failure failure = FakeKubelet::Failure::kNone;
    std::chrono::milliseconds delay{0};
    std::atomic<int> list_calls{0};
    std::atomic<int> get_calls{0};

  private:
    grpc::Status delay_and_failure() {
        std::chrono::milliseconds wait;
        FakeKubelet::Failure fails;
        {
            std::lock_guard lock(mutex);
            wait = delay;
            fails = failure;
        }
        std::this_thread::sleep_for(wait);
        switch (fails) {
            case FakeKubelet::Failure::kUnavailable:
                return grpc::Status(grpc::StatusCode::UNAVAILABLE, "kubelet restarting");
            case FakeKubelet::Failure::kUnimplemented:
                return grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "unknown method");
            case FakeKubelet::Failure::kNone:
                break;
        }
        return grpc::Status::OK;
    }
};

}  // namespace

struct FakeKubelet::Impl {
    Lister lister;
    std::unique_ptr<grpc::Server> server;
};

FakeKubelet::FakeKubelet(const std::string& socket_path) : impl_(std::make_unique<Impl>()) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + socket_path, grpc::InsecureServerCredentials());
    builder.RegisterService(&impl_->lister);
    impl_->server = builder.BuildAndStart();
    if (!impl_->server) {
        std::cerr << "FakeKubelet: cannot serve on " << socket_path << "\n";
        std::abort();
    }
}

FakeKubelet::~FakeKubelet() {
    // Answers still sleeping in set_delay end by the deadline given.
    impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
}

void FakeKubelet::set_pods(std::vector<kubelet::PodResources> pods) {
    std::lock_guard lock(impl_->lister.mutex);
    impl_->lister.pods = std::move(pods);
}

void FakeKubelet::set_failure(Failure failure) {
    std::lock_guard lock(impl_->lister.mutex);
    impl_->lister.failure = failure;
}

void FakeKubelet::set_delay(std::chrono::milliseconds delay) {
    std::lock_guard lock(impl_->lister.mutex);
    impl_->lister.delay = delay;
}

int FakeKubelet::list_calls() const { return impl_->lister.list_calls; }
int FakeKubelet::get_calls() const { return impl_->lister.get_calls; }

}  // namespace gpuguard::testing
