// PodResourcesClient (gpuguard/kubelet/pod_resources.h): the one
// translation unit that includes gRPC, so its heavy headers are parsed once
// per build.
#include <cerrno>

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include "gpuguard/kubelet/pod_resources.h"
#include "podresources_v1.grpc.pb.h"

namespace gpuguard::kubelet {
namespace {

PodResources from_message(const v1::PodResources& pod) {
    PodResources out{pod.name(), pod.namespace_(), {}};
    for (const v1::ContainerResources& container : pod.containers()) {
        ContainerResources& kept = out.containers.emplace_back();
        kept.name = container.name();
        for (const v1::ContainerDevices& devices : container.devices()) {
            kept.devices.push_back(
                ResourceDevices{devices.resource_name(),
                                {devices.device_ids().begin(), devices.device_ids().end()}});
        }
        for (const v1::DynamicResource& claim : container.dynamic_resources()) {
            for (const v1::ClaimResource& device : claim.claim_resources()) {
                kept.claim_devices.push_back(
                    ClaimDevice{claim.claim_namespace(), claim.claim_name(), claim.class_name(),
                                device.driver_name(), device.pool_name(), device.device_name()});
            }
            // A claim without devices listed (an older kubelet's) is still a claim.
            if (claim.claim_resources().empty()) {
                kept.claim_devices.push_back(ClaimDevice{
                    claim.claim_namespace(), claim.claim_name(), claim.class_name(), "", "", ""});
            }
        }
    }
    return out;
}

Unexpected call_failed(const grpc::Status& status, const char* call, const std::string& socket) {
    const ErrorCode code = status.error_code() == grpc::StatusCode::UNIMPLEMENTED
                               ? ErrorCode::kUnsupported
                               : ErrorCode::kIo;
    return fail(code, std::string("kubelet PodResources ") + call + " on " + socket + ": status " +
                          std::to_string(static_cast<int>(status.error_code())) + " (" +
                          status.error_message() + ")");
}

// Checked before a call: gRPC would only say UNAVAILABLE, as it does for a
// kubelet that is restarting.
bool socket_present(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0;
}

Unexpected no_socket(const std::string& path) {
    return fail(ErrorCode::kNotFound, "no kubelet PodResources socket at " + path, ENOENT);
}

}  // namespace

struct PodResourcesClient::Stub {
    std::unique_ptr<v1::PodResourcesLister::Stub> lister;
};

PodResourcesClient::PodResourcesClient(std::string socket_path, std::chrono::milliseconds deadline)
    : socket_path_(std::move(socket_path)), deadline_(deadline), stub_(std::make_unique<Stub>()) {
    // The kubelet's socket is local and unauthenticated: insecure
    // credentials are what every PodResources client uses.
    stub_->lister = v1::PodResourcesLister::NewStub(
        grpc::CreateChannel("unix:" + socket_path_, grpc::InsecureChannelCredentials()));
}

PodResourcesClient::~PodResourcesClient() = default;

Result<std::vector<PodResources>> PodResourcesClient::list() const {
    if (!socket_present(socket_path_)) return no_socket(socket_path_);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + deadline_);
    v1::ListPodResourcesResponse response;
    const grpc::Status status =
        stub_->lister->List(&context, v1::ListPodResourcesRequest{}, &response);
    if (!status.ok()) return call_failed(status, "List", socket_path_);
    std::vector<PodResources> pods;
    pods.reserve(response.pod_resources_size());
    for (const v1::PodResources& pod : response.pod_resources()) {
        pods.push_back(from_message(pod));
    }
    return pods;
}

Result<PodResources> PodResourcesClient::get(const std::string& pod_namespace,
                                             const std::string& name) const {
    if (!socket_present(socket_path_)) return no_socket(socket_path_);
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + deadline_);
    v1::GetPodResourcesRequest request;
    request.set_pod_name(name);
    request.set_pod_namespace(pod_namespace);
    v1::GetPodResourcesResponse response;
    const grpc::Status status = stub_->lister->Get(&context, request, &response);
    if (!status.ok()) return call_failed(status, "Get", socket_path_);
    return from_message(response.pod_resources());
}

}  // namespace gpuguard::kubelet
