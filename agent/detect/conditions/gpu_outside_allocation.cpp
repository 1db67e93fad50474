// gpu_outside_allocation: outside | none_given — a Slurm job's or pod's
// process holds a GPU it was not allocated (its workload event: the GPUs
// Slurm's GRES, the kubelet's PodResources API, the pod's
// NVIDIA_VISIBLE_DEVICES or its own
// CUDA_VISIBLE_DEVICES gave it, as device numbers). Only GPUs count: the
// node's GRES devices, or without a gres.conf NVIDIA's GPU nodes
// (195:0-253); control nodes (nvidiactl 195:255, nvidia-modeset, -uvm)
// belong to every GPU user. An allocation the agent could not turn into
// device numbers (a UUID, "all") is not judged; nor is a process outside
// any job or pod.
#include <algorithm>

#include "condition.h"

namespace gpuguard::agent {
namespace {

constexpr uint32_t kNvidiaMajor = 195;
constexpr uint32_t kNvidiaFirstControlMinor = 254;  // nvidia-modeset; 255 is nvidiactl

bool contains(const std::vector<std::string>& list, const std::string& item) {
    return std::find(list.begin(), list.end(), item) != list.end();
}

// Whether the device is a GPU an allocation gives out.
bool allocatable(const Workload& workload, uint32_t major, uint32_t minor,
                 const std::string& number) {
    if (!workload.node_gpus.empty()) return contains(workload.node_gpus, number);
    return major == kNvidiaMajor && minor < kNvidiaFirstControlMinor;
}

// "Slurm job 42 step 0 (user alice, account physics, partition gpu)", "pod ns/name".
std::string workload_name(const Workload& workload, const ProcessInfo& info) {
    if (workload.scheduler == "slurm") {
        const SlurmJob& job = workload.slurm;
        std::string name = "Slurm job " + job.job_id;
        if (!job.step_id.empty()) name += " step " + job.step_id;
        std::vector<std::string> about;
        if (!job.user.empty()) about.push_back("user " + job.user);
        if (!job.account.empty()) about.push_back("account " + job.account);
        if (!job.partition.empty()) about.push_back("partition " + job.partition);
        if (!about.empty()) name += " (" + join(about, ", ") + ")";
        return name;
    }
    const ContainerDetails& pod = info.container_details;
    if (pod.in_pod()) return "pod " + pod.pod_namespace + "/" + pod.pod_name;
    // Named by the kubelet's pod directory when the runtime's labels were not read.
    if (!workload.pod_name.empty()) {
        return "pod " + workload.pod_namespace + "/" + workload.pod_name;
    }
    return "a Kubernetes pod's container";
}

class GpuOutsideAllocation final : public Condition {
  public:
    explicit GpuOutsideAllocation(bool none_given) : none_given_(none_given) {}
    std::string_view name() const override { return "gpu_outside_allocation"; }
    uint32_t needs() const override { return kFactHoldsGpu; }
    bool holds(const ConditionContext& context, RuleInputs& in) const override {
        const std::optional<Workload>& workload = context.evidence.workload;
        if (!workload || workload->scheduler.empty() || !workload->unresolved.empty()) {
            return false;
        }
        // A pod's process given no GPU: none_given's; a job without GRES
        // or any visible-devices variable: not known, not judged.
        const bool given_none = workload->allocated.empty();
        const bool pod_given_none = workload->scheduler == "kubernetes" && given_none;
        if (none_given_ != pod_given_none) return false;
        if (!none_given_ && workload->allocation_source.empty()) return false;
        std::vector<std::string> taken;
        for (const GpuHandle& gpu : context.info.gpus) {
            const std::string number = std::to_string(gpu.major) + ":" + std::to_string(gpu.minor);
            if (!allocatable(*workload, gpu.major, gpu.minor, number)) continue;
            if (contains(workload->allocated, number) || contains(taken, number)) continue;
            taken.push_back(number);
        }
        if (taken.empty()) return false;
        // Each node with the GPU it reaches, where telemetry named it.
        std::vector<std::string> named;
        for (const std::string& number : taken) {
            const GpuTelemetry* reading = context.book.gpu_at(number);
            if (!reading) {
                named.push_back(number);
            } else if (reading->node_gpu_instance) {
                named.push_back(number + " (GPU " + std::to_string(reading->index) +
                                "'s MIG GPU instance " +
                                std::to_string(*reading->node_gpu_instance) + ")");
            } else {
                named.push_back(number + " (GPU " + std::to_string(reading->index) + ")");
            }
        }
        std::string given = given_none ? std::string("none") : join(workload->allocated, ", ");
        if (workload->allocation_source == "kubelet") {
            given += " (the kubelet's nvidia.com/gpu devices: " +
                     (workload->allocation.empty() ? "none" : workload->allocation) + ")";
        } else if (workload->allocation_source.empty()) {
            given += " (no NVIDIA_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES)";
        } else {
            given += " (" + workload->allocation_source + "=" + workload->allocation + ")";
        }
        in.extra.push_back(Evidence{context.ts_ns, "event", "gpu_open", "", "allocation",
                                    workload_name(*workload, context.info) + " took GPU " +
                                        join(named, ", ") + "; it was given " + given});
        return true;
    }

  private:
    bool none_given_;
};

}  // namespace

std::unique_ptr<const Condition> conditions::gpu_outside_allocation(
    const rules::CorrelationRule& rule) {
    if (rule.gpu_outside_allocation.empty()) return nullptr;
    return std::make_unique<GpuOutsideAllocation>(rule.gpu_outside_allocation == "none_given");
}

}  // namespace gpuguard::agent
