// A pod's identity and the GPUs the kubelet gave it (docs/deployment.md,
// "Pods and the GPUs the kubelet gave them"): the pod UID from the cgroup
// path, its namespace and name from the kubelet's pod directory, and the
// kubelet's device IDs turned into device numbers. The kubelet itself is
// asked through KubeletSources::gpu_ids (the daemon wires it to
// gpuguard/kubelet's cache); this room includes no gRPC.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuguard::agent {

// The pod UID ("5f1c...-...") in /proc/PID/cgroup's text: cgroup v2 with
// the systemd driver (".../kubepods-burstable-pod5f1c_..._.slice/cri-containerd-<id>.scope",
// the UID's dashes written as '_') and the cgroupfs driver
// ("/kubepods/burstable/pod5f1c-...-.../<container id>"), any QoS class;
// "" when no line is a pod's.
std::string kubepods_pod_uid(std::string_view proc_cgroup);

struct PodIdentity {
    std::string pod_namespace;
    std::string name;
};

// What the kubelet's directory of one pod (<kubelet root>/pods/<uid>/) says
// of it: the name from its etc-hosts (the kubelet writes the pod's hostname
// last, which is its name unless spec.hostname sets another; host-network
// pods get the host's file and no name), the namespace from the service
// account volume's `namespace` file (volumes/kubernetes.io~projected/*/);
// "" for what it does not say.
PodIdentity pod_identity_from_kubelet_dir(const std::string& pod_dir);

// The kubelet's answer for one pod's container: the device IDs of its
// nvidia.com/ resources and the devices DRA claims of GPU drivers gave it,
// described (both empty: given none); nullopt when the kubelet has not
// named the pod. `container` "" asks for every container of the pod (the
// process's container name is not known).
struct PodQuery {
    std::string pod_namespace;
    std::string name;
    std::string container;
};
struct KubeletGpus {
    std::vector<std::string> device_ids;
    std::vector<std::string> gpu_claims;
};
using KubeletGpuIds = std::function<std::optional<KubeletGpus>(const PodQuery&)>;
// Every node of the GPU with this UUID ("GPU-8f3c..."), from the agent's GPU
// inventory (NVML): its /dev/nvidiaN ("195:0") and its nvidia-drm card and
// render nodes, which reach the same GPU; for a MIG instance ("MIG-..."),
// its GPU's /dev/nvidiaN and the instance's access nodes (/dev/nvidia-caps);
// empty when it does not know the UUID.
using GpuByUuid = std::function<std::vector<std::string>(const std::string& uuid)>;
// Every node of every GPU the inventory knows: what counts as a GPU for a
// pod's allocation (empty: NVIDIA's GPU nodes 195:0-253, as without it).
using InventoryGpus = std::function<std::vector<std::string>()>;
// How many answers the kubelet has given (0: none yet, or no kubelet): a
// process of a pod the last answer lacked is read again after the next.
using KubeletAnswers = std::function<uint64_t()>;

struct KubeletSources {
    std::string kubelet_root = "/var/lib/kubelet";  // on the host (read through host_root)
    KubeletGpuIds gpu_ids;                          // unset: no kubelet asked
    GpuByUuid gpu_by_uuid;                          // unset: UUIDs stay unresolved
    InventoryGpus inventory_gpus;                   // unset: NVIDIA's GPU nodes count
    KubeletAnswers answers;                         // unset: no kubelet asked
    // Whether the inventory has a GPU in MIG mode (unset: none known).
    std::function<bool()> inventory_has_mig;
    // Globs on a pod's namespace whose pods are the GPU infrastructure (the
    // GPU Operator's driver, device plugin, DCGM and validators): they open
    // every GPU without asking the device plugin, so their allocation is
    // not judged (kubelet.gpu_infrastructure_namespaces).
    std::vector<std::string> infrastructure_namespaces;
};

// The allocation_source of a pod in one of infrastructure_namespaces.
inline constexpr std::string_view kGpuInfrastructureSource = "gpu_infrastructure_namespace";

// The device number of NVIDIA's GPU node N ("/dev/nvidiaN" stat'ed on the
// host, else 195:N, the driver's fixed major and minor N).
std::string nvidia_gpu_node(const std::string& index, const std::string& host_root);

struct ResolvedGpus {
    std::vector<std::string> allocated;  // device numbers, "195:0"
    std::string unresolved;              // why not all could be: then nothing is judged
};

// The kubelet's device IDs as device numbers: an index ("0", the NVIDIA
// device plugin's DEVICE_ID_STRATEGY=index) is /dev/nvidiaN; a UUID
// ("GPU-8f3c...", its default; "GPU-...::2", a time-sliced replica of it;
// "MIG-...", a MIG instance under its MIG strategies) goes through
// `gpu_by_uuid` (all the nodes that reach that GPU or instance); a UUID
// the inventory lacks is unresolved.
ResolvedGpus resolve_kubelet_device_ids(const std::vector<std::string>& ids,
                                        const GpuByUuid& gpu_by_uuid, const std::string& host_root);

}  // namespace gpuguard::agent
