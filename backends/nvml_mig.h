// NVIDIA MIG through NVML: whether a GPU is partitioned, and its MIG
// devices (GPU instance, compute instance, UUID, memory), with the minors of
// the /dev/nvidia-caps nodes that grant access to them, read from
// /proc/driver/nvidia-caps/mig-minors ("gpu0/gi1/ci0/access 13").
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "backends/nvml_api.h"
#include "gpuguard/backends/backends.h"

namespace gpuguard::backends {

struct NvmlMigApi {
    nvmlReturn_t (*mig_mode)(nvmlDevice_t, unsigned*, unsigned*) = nullptr;
    nvmlReturn_t (*max_mig_devices)(nvmlDevice_t, unsigned*) = nullptr;
    nvmlReturn_t (*mig_handle)(nvmlDevice_t, unsigned, nvmlDevice_t*) = nullptr;
    nvmlReturn_t (*gpu_instance_id)(nvmlDevice_t, unsigned*) = nullptr;
    nvmlReturn_t (*compute_instance_id)(nvmlDevice_t, unsigned*) = nullptr;
    nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned) = nullptr;
    nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
};

// The MIG access nodes: mig-minors' lines as name -> minor
// ("gpu0/gi1/ci0/access" -> 13), empty when the file is absent (no
// MIG-capable driver) or unreadable; and the major they are minors of, the
// "nvidia-caps" line of /proc/devices' character devices (dynamic), none
// when the driver did not register it.
struct MigNodes {
    std::map<std::string, uint32_t> minors;
    std::optional<uint32_t> major;
};
MigNodes read_mig_nodes(const std::filesystem::path& proc_root);

// Fills `device.mig_enabled` and `device.mig_instances` for the GPU
// `handle` whose /dev/nvidiaN minor is `gpu_minor`; nothing when the
// library lacks the MIG calls or the GPU has MIG off or unsupported.
void read_mig(const NvmlMigApi& api, nvmlDevice_t handle, uint32_t gpu_minor, const MigNodes& nodes,
              GpuDevice& device);

}  // namespace gpuguard::backends
