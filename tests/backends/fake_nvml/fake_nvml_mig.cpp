// The fake NVML's MIG calls, from a GPU's script entry:
//   "mig_mode": [current, pending]     (absent: NOT_SUPPORTED, a GPU without MIG)
//   "mig_instances": [ {"gpu_instance": 1, "compute_instance": 0,
//                       "uuid": "MIG-...", "steps": [ {"memory": [...]} ]} ]
// A MIG device's handle answers nvmlDeviceGetUUID and nvmlDeviceGetMemoryInfo
// from its own entry. Processes on the GPU carry "gpu_instance" and
// "compute_instance" in nvmlProcessInfo_v2_t (fake_nvml.cpp).
#include "tests/backends/fake_nvml/fake_nvml_state.h"

using namespace fake_nvml;

namespace {

// The MIG instance entry a MIG handle names, or null.
const json* instance_json(nvmlDevice_t device) {
    if (!device || device->mig < 0) return nullptr;
    return device_json(device);
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device,
                                                                         unsigned* current,
                                                                         unsigned* pending) {
    return guarded([&]() -> nvmlReturn_t {
        count("nvmlDeviceGetMigMode");
        const json* gpu = device_json(device);
        if (!gpu || device->mig >= 0) return NVML_ERROR_INVALID_ARGUMENT;
        if (!gpu->contains("mig_mode")) return NVML_ERROR_NOT_SUPPORTED;
        *current = (*gpu)["mig_mode"].at(0).get<unsigned>();
        *pending = (*gpu)["mig_mode"].at(1).get<unsigned>();
        return NVML_SUCCESS;
    });
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(
    nvmlDevice_t device, unsigned* count_out) {
    return guarded([&]() -> nvmlReturn_t {
        count("nvmlDeviceGetMaxMigDeviceCount");
        const json* gpu = device_json(device);
        if (!gpu || device->mig >= 0) return NVML_ERROR_INVALID_ARGUMENT;
        if (!gpu->contains("mig_mode")) return NVML_ERROR_NOT_SUPPORTED;
        *count_out = 7;  // an A100/H100's most: fewer may exist, as on a real GPU
        return NVML_SUCCESS;
    });
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(
    nvmlDevice_t device, unsigned index, nvmlDevice_t* mig) {
    return guarded([&]() -> nvmlReturn_t {
        count("nvmlDeviceGetMigDeviceHandleByIndex");
        const json* gpu = device_json(device);
        if (!gpu || device->mig >= 0) return NVML_ERROR_INVALID_ARGUMENT;
        const json instances = gpu->value("mig_instances", json::array());
        if (index >= instances.size()) return NVML_ERROR_NOT_FOUND;  // no MIG device there
        std::lock_guard lock(state().mutex);
        state().mig_devices.push_back(nvmlDevice_st{device->index, static_cast<int>(index)});
        *mig = &state().mig_devices.back();
        return NVML_SUCCESS;
    });
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device,
                                                                               unsigned* id) {
    return guarded([&]() -> nvmlReturn_t {
        count("nvmlDeviceGetGpuInstanceId");
        const json* instance = instance_json(device);
        if (!instance) return NVML_ERROR_INVALID_ARGUMENT;  // not a MIG device
        *id = instance->at("gpu_instance").get<unsigned>();
        return NVML_SUCCESS;
    });
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetComputeInstanceId(
    nvmlDevice_t device, unsigned* id) {
    return guarded([&]() -> nvmlReturn_t {
        count("nvmlDeviceGetComputeInstanceId");
        const json* instance = instance_json(device);
        if (!instance) return NVML_ERROR_INVALID_ARGUMENT;
        *id = instance->at("compute_instance").get<unsigned>();
        return NVML_SUCCESS;
    });
}

}  // extern "C"
