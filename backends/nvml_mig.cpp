#include "backends/nvml_mig.h"

#include "backends/file_reader.h"

namespace gpuguard::backends {

std::map<std::string, uint32_t> read_mig_minors(const std::filesystem::path& proc_root) {
    std::map<std::string, uint32_t> minors;
    auto text = detail::read_small_file(proc_root / "driver" / "nvidia-caps" / "mig-minors");
    if (!text) return minors;
    std::string_view rest = *text;
    while (!rest.empty()) {
        const auto end = rest.find('\n');
        std::string_view line = detail::trim(rest.substr(0, end));
        rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
        const auto space = line.rfind(' ');
        if (space == std::string_view::npos) continue;
        if (const auto minor = detail::parse_u64(detail::trim(line.substr(space + 1)))) {
            minors[std::string(detail::trim(line.substr(0, space)))] =
                static_cast<uint32_t>(*minor);
        }
    }
    return minors;
}

void read_mig(const NvmlMigApi& api, nvmlDevice_t handle, uint32_t gpu_minor,
              const std::map<std::string, uint32_t>& minors, GpuDevice& device) {
    if (!api.mig_mode || !api.max_mig_devices || !api.mig_handle || !api.gpu_instance_id ||
        !api.compute_instance_id) {
        return;
    }
    unsigned current = 0, pending = 0;
    if (api.mig_mode(handle, &current, &pending) != NVML_SUCCESS || current != 1) return;
    device.mig_enabled = true;
    unsigned most = 0;
    if (api.max_mig_devices(handle, &most) != NVML_SUCCESS) return;
    const std::string gpu = "gpu" + std::to_string(gpu_minor);
    const auto minor_of = [&](const std::string& name) -> std::optional<uint32_t> {
        const auto found = minors.find(name);
        if (found == minors.end()) return std::nullopt;
        return found->second;
    };
    for (unsigned i = 0; i < most; ++i) {
        nvmlDevice_t mig = nullptr;
        // NOT_FOUND: no MIG device at this index (the GPU is partly partitioned).
        if (api.mig_handle(handle, i, &mig) != NVML_SUCCESS || !mig) continue;
        MigInstance instance;
        unsigned id = 0;
        if (api.gpu_instance_id(mig, &id) != NVML_SUCCESS) continue;
        instance.gpu_instance = id;
        if (api.compute_instance_id(mig, &id) != NVML_SUCCESS) continue;
        instance.compute_instance = id;
        char text[NVML_DEVICE_UUID_V2_BUFFER_SIZE] = {};
        if (api.uuid && api.uuid(mig, text, sizeof text) == NVML_SUCCESS) instance.uuid = text;
        nvmlMemory_t memory{};
        if (api.memory && api.memory(mig, &memory) == NVML_SUCCESS) {
            instance.memory_total_bytes = memory.total;
        }
        const std::string gi = gpu + "/gi" + std::to_string(instance.gpu_instance);
        instance.gpu_instance_access_minor = minor_of(gi + "/access");
        instance.access_minor =
            minor_of(gi + "/ci" + std::to_string(instance.compute_instance) + "/access");
        device.mig_instances.push_back(std::move(instance));
    }
}

}  // namespace gpuguard::backends
