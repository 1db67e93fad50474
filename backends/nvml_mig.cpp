#include "backends/nvml_mig.h"

#include "backends/file_reader.h"

namespace gpuguard::backends {

MigNodes read_mig_nodes(const std::filesystem::path& proc_root) {
    MigNodes nodes;
    const auto each_line = [](std::string_view text, auto&& use) {
        while (!text.empty()) {
            const auto end = text.find('\n');
            use(detail::trim(text.substr(0, end)));
            text = end == std::string_view::npos ? std::string_view{} : text.substr(end + 1);
        }
    };
    if (auto text = detail::read_small_file(proc_root / "driver" / "nvidia-caps" / "mig-minors")) {
        each_line(*text, [&](std::string_view line) {
            const auto space = line.rfind(' ');
            if (space == std::string_view::npos) return;
            if (const auto minor = detail::parse_u64(detail::trim(line.substr(space + 1)))) {
                nodes.minors[std::string(detail::trim(line.substr(0, space)))] =
                    static_cast<uint32_t>(*minor);
            }
        });
    }
    // "Character devices:" lines are "MAJOR NAME"; "Block devices:" follow.
    if (auto text = detail::read_small_file(proc_root / "devices")) {
        bool character = false;
        each_line(*text, [&](std::string_view line) {
            if (line.ends_with("devices:")) {
                character = line == "Character devices:";
                return;
            }
            const auto space = line.find(' ');
            if (!character || space == std::string_view::npos) return;
            if (detail::trim(line.substr(space + 1)) != "nvidia-caps") return;
            if (const auto major = detail::parse_u64(line.substr(0, space));
                major && *major < 4096) {
                nodes.major = static_cast<uint32_t>(*major);
            }
        });
    }
    return nodes;
}

void read_mig(const NvmlMigApi& api, nvmlDevice_t handle, uint32_t gpu_minor, const MigNodes& nodes,
              GpuDevice& device) {
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
        const auto found = nodes.minors.find(name);
        if (found == nodes.minors.end()) return std::nullopt;
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
        if (nodes.major && instance.access_minor) {
            instance.access_node = DeviceNumber{*nodes.major, *instance.access_minor};
        }
        if (nodes.major && instance.gpu_instance_access_minor) {
            instance.gpu_instance_access_node =
                DeviceNumber{*nodes.major, *instance.gpu_instance_access_minor};
        }
        device.mig_instances.push_back(std::move(instance));
    }
}

}  // namespace gpuguard::backends
