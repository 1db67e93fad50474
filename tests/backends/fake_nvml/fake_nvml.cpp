// A fake libnvidia-ml.so.1 for tests: exports NVML's C symbols under their
// real names (nvmlInit_v2, nvmlDeviceGetComputeRunningProcesses_v3, ...) and
// answers from a JSON script named by $GPUGUARD_FAKE_NVML_SCRIPT, read at
// nvmlInit_v2. Written in C++ for the JSON parser; every export is extern "C"
// and catches everything, so the ABI seen by dlopen/dlsym is NVML's.
//
// Script:
//   { "init_error": "DRIVER_NOT_LOADED",          (optional: nvmlInit_v2 fails)
//     "driver_version": "550.54.15",
//     "devices": [ { "name": ..., "uuid": ..., "serial": ..., "bus_id": "00000000:3B:00.0",
//                    "minor": 0,
//                    "steps": [ { "utilization": [gpu, memory], "memory": [total, used, free],
//                                 "temperature": 61, "memory_temperature": 70,
//                                 "power_mw": 250000, "power_limit_mw": 350000,
//                                 "energy_mj": 1000, "sm_clock": 1980, "mem_clock": 2619,
//                                 "fan": 45, "pstate": 2, "pcie_tx_kbs": 10, "pcie_rx_kbs": 20,
//                                 "encoder": 5, "decoder": 6, "ecc_corrected": 3,
//                                 "ecc_uncorrected": 1, "clock_reasons": 68,
//                                 "compute_processes": [ {"pid": 1, "used_memory": 2} ],
//                                 "graphics_processes": [ ... ],
//                                 "process_utilization": [ {"pid":1,"sm":50,"timestamp":10} ],
//                                   ("timestamp_now": true stamps a sample at each call)
//                                 "xid": [79],
//                                 "events": [ {"type": "double_bit_ecc"}, {"type": "clock"},
//                                             {"type": "xid", "data": 31, "count": 3} ],
//                                 "errors": { "nvmlDeviceGetFanSpeed": "NO_PERMISSION",
//                                             "*": "GPU_IS_LOST" } } ] } ] }
// A device's "supported_events" (default: single/double-bit ECC, Xid,
// clock) is what nvmlDeviceGetSupportedEventTypes answers and what
// nvmlDeviceRegisterEvents accepts; "xid" and "events" are queued, for the
// types a set registered, when the step is entered by fake_nvml_set_step,
// or (with a "step_file") when a wait sees the file name a new step; step
// 0's are never queued. nvmlEventSetWait_v2 waits up to its timeout.
// A key missing from a step answers NVML_ERROR_NOT_SUPPORTED. Steps change
// through fake_nvml_set_step(), or, when the script names a "step_file", by
// the number in that file (read at every call); the last step repeats.
//
// Test-only exports: fake_nvml_set_step(unsigned), fake_nvml_call_count(name).
// NVML's types come from nvml_public.h, written from NVIDIA's documentation,
// never from the backend's own nvml_api.h.
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/backends/fake_nvml/fake_nvml_state.h"

namespace fake_nvml {

using nlohmann::json;

State& state() {
    static State instance;  // the fake's only global; lives as long as the library
    return instance;
}

nvmlReturn_t code_of(const std::string& name) {
    static const std::map<std::string, nvmlReturn_t> kCodes = {
        {"UNINITIALIZED", NVML_ERROR_UNINITIALIZED},
        {"INVALID_ARGUMENT", NVML_ERROR_INVALID_ARGUMENT},
        {"NOT_SUPPORTED", NVML_ERROR_NOT_SUPPORTED},
        {"NO_PERMISSION", NVML_ERROR_NO_PERMISSION},
        {"NOT_FOUND", NVML_ERROR_NOT_FOUND},
        {"DRIVER_NOT_LOADED", NVML_ERROR_DRIVER_NOT_LOADED},
        {"GPU_IS_LOST", NVML_ERROR_GPU_IS_LOST},
    };
    const auto found = kCodes.find(name);
    return found == kCodes.end() ? NVML_ERROR_UNKNOWN : found->second;
}

void count(const char* function) {
    std::lock_guard lock(state().mutex);
    ++state().calls[function];
}

const json* device_json(nvmlDevice_t device) {
    auto& s = state();
    if (!s.initialised || !device || !s.script.contains("devices")) return nullptr;
    const auto& devices = s.script["devices"];
    if (device->index >= devices.size()) return nullptr;
    const json& gpu = devices[device->index];
    if (device->mig < 0) return &gpu;
    const json& instances = gpu.value("mig_instances", json::array());
    if (static_cast<size_t>(device->mig) >= instances.size()) return nullptr;
    return &gpu["mig_instances"][static_cast<size_t>(device->mig)];
}

// The current step: fake_nvml_set_step()'s, or the number in the script's
// "step_file", read at every call (a test moves a live agent's fake GPU,
// in another process, through its steps by rewriting that file).
unsigned current_step() {
    const auto& s = state();
    if (s.script.contains("step_file")) {
        std::ifstream in(s.script["step_file"].get<std::string>());
        unsigned step = 0;
        if (in >> step) return step;
        return 0;
    }
    return s.step;
}

const json* step_json(nvmlDevice_t device) {
    const json* d = device_json(device);
    if (!d || !d->contains("steps") || (*d)["steps"].empty()) return nullptr;
    const auto& steps = (*d)["steps"];
    return &steps[std::min<size_t>(current_step(), steps.size() - 1)];
}

// NVML_SUCCESS and the step's value for `key`, or the scripted error for
// `function`, or NOT_SUPPORTED when the step lacks the key.
nvmlReturn_t lookup(const char* function, nvmlDevice_t device, const char* key,
                    const json** value) {
    count(function);
    if (!state().initialised) return NVML_ERROR_UNINITIALIZED;
    if (!device_json(device)) return NVML_ERROR_INVALID_ARGUMENT;
    const json* step = step_json(device);
    if (!step) return NVML_ERROR_NOT_SUPPORTED;
    if (step->contains("errors")) {
        const auto& errors = (*step)["errors"];
        if (errors.contains(function)) return code_of(errors[function].get<std::string>());
        if (errors.contains("*")) return code_of(errors["*"].get<std::string>());
    }
    if (key == nullptr) return NVML_SUCCESS;
    if (!step->contains(key)) return NVML_ERROR_NOT_SUPPORTED;
    *value = &(*step)[key];
    return NVML_SUCCESS;
}

nvmlReturn_t copy_string(const std::string& text, char* out, unsigned length) {
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    if (text.size() + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    std::memcpy(out, text.c_str(), text.size() + 1);
    return NVML_SUCCESS;
}

// Writes nvmlProcessInfo_v2_t records byte by byte at NVIDIA's offsets
// (pid @0, usedGpuMemory @8, gpuInstanceId @16, computeInstanceId @20,
// stride 24), independent of the struct the backend was compiled with.
nvmlReturn_t processes(const char* function, nvmlDevice_t device, const char* key,
                       unsigned* info_count, nvmlProcessInfo_t* infos) {
    const json* list = nullptr;
    const nvmlReturn_t rc = lookup(function, device, key, &list);
    if (rc == NVML_ERROR_NOT_SUPPORTED && list == nullptr) {
        *info_count = 0;
        return NVML_SUCCESS;  // no such processes
    }
    if (rc != NVML_SUCCESS) return rc;
    const unsigned needed = static_cast<unsigned>(list->size());
    if (*info_count < needed || (needed > 0 && infos == nullptr)) {
        *info_count = needed;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    auto* bytes = reinterpret_cast<unsigned char*>(infos);
    for (unsigned i = 0; i < needed; ++i) {
        const auto& p = (*list)[i];
        const unsigned pid = p.value("pid", 0u);
        const unsigned long long used = p.contains("used_memory")
                                            ? p["used_memory"].get<unsigned long long>()
                                            : NVML_VALUE_NOT_AVAILABLE_ULL;
        // nvml.h: the instance IDs are 0xFFFFFFFF when MIG is not enabled.
        const unsigned gpu_instance = p.value("gpu_instance", 0xFFFFFFFFu);
        const unsigned compute_instance = p.value("compute_instance", 0xFFFFFFFFu);
        std::memset(bytes + 24 * i, 0, 24);
        std::memcpy(bytes + 24 * i, &pid, 4);
        std::memcpy(bytes + 24 * i + 8, &used, 8);
        std::memcpy(bytes + 24 * i + 16, &gpu_instance, 4);
        std::memcpy(bytes + 24 * i + 20, &compute_instance, 4);
    }
    *info_count = needed;
    return NVML_SUCCESS;
}

}  // namespace fake_nvml

using namespace fake_nvml;

extern "C" {

__attribute__((visibility("default"))) nvmlReturn_t nvmlInit_v2() {
    return guarded([]() -> nvmlReturn_t {
        count("nvmlInit_v2");
        auto& s = state();
        std::lock_guard lock(s.mutex);
        const char* path = std::getenv("GPUGUARD_FAKE_NVML_SCRIPT");
        if (!path) return NVML_ERROR_DRIVER_NOT_LOADED;
        std::ifstream in(path);
        if (!in) return NVML_ERROR_DRIVER_NOT_LOADED;
        s.script = json::parse(in);
        if (s.script.contains("init_error")) {
            return code_of(s.script["init_error"].get<std::string>());
        }
        s.devices.clear();
        s.mig_devices.clear();
        const size_t n = s.script.contains("devices") ? s.script["devices"].size() : 0;
        for (unsigned i = 0; i < n; ++i) s.devices.push_back(nvmlDevice_st{i, -1});
        s.initialised = true;
        return NVML_SUCCESS;
    });
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlShutdown() {
    count("nvmlShutdown");
    state().initialised = false;
    return NVML_SUCCESS;
}

__attribute__((visibility("default"))) const char* nvmlErrorString(nvmlReturn_t rc) {
    switch (rc) {
        case NVML_SUCCESS:
            return "Success";
        case NVML_ERROR_UNINITIALIZED:
            return "Uninitialized";
        case NVML_ERROR_NOT_SUPPORTED:
            return "Not Supported";
        case NVML_ERROR_NO_PERMISSION:
            return "Insufficient Permissions";
        case NVML_ERROR_DRIVER_NOT_LOADED:
            return "Driver Not Loaded";
        case NVML_ERROR_GPU_IS_LOST:
            return "GPU is lost";
        default:
            return "Unknown Error";
    }
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlSystemGetDriverVersion(char* out,
                                                                               unsigned length) {
    return guarded([&]() -> nvmlReturn_t {
        count("nvmlSystemGetDriverVersion");
        if (!state().initialised) return NVML_ERROR_UNINITIALIZED;
        return copy_string(state().script.value("driver_version", ""), out, length);
    });
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetCount_v2(unsigned* count_out) {
    count("nvmlDeviceGetCount_v2");
    if (!state().initialised) return NVML_ERROR_UNINITIALIZED;
    *count_out = static_cast<unsigned>(state().devices.size());
    return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(
    unsigned index, nvmlDevice_t* device) {
    count("nvmlDeviceGetHandleByIndex_v2");
    if (!state().initialised) return NVML_ERROR_UNINITIALIZED;
    if (index >= state().devices.size()) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &state().devices[index];
    return NVML_SUCCESS;
}

#define FAKE_STRING(symbol, key)                                                               \
    __attribute__((visibility("default"))) nvmlReturn_t symbol(nvmlDevice_t device, char* out, \
                                                               unsigned len) {                 \
        return guarded([&]() -> nvmlReturn_t {                                                 \
            count(#symbol);                                                                    \
            const json* d = device_json(device);                                               \
            if (!d) return NVML_ERROR_INVALID_ARGUMENT;                                        \
            if (!d->contains(key)) return NVML_ERROR_NOT_SUPPORTED;                            \
            return copy_string((*d)[key].get<std::string>(), out, len);                        \
        });                                                                                    \
    }
FAKE_STRING(nvmlDeviceGetName, "name")
FAKE_STRING(nvmlDeviceGetUUID, "uuid")
FAKE_STRING(nvmlDeviceGetSerial, "serial")

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device,
                                                                            nvmlPciInfo_t* pci) {
    return guarded([&]() -> nvmlReturn_t {
        count("nvmlDeviceGetPciInfo_v3");
        const json* d = device_json(device);
        if (!d) return NVML_ERROR_INVALID_ARGUMENT;
        std::memset(pci, 0, sizeof *pci);
        return copy_string(d->value("bus_id", ""), pci->busId, sizeof pci->busId);
    });
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device,
                                                                             unsigned* minor) {
    return guarded([&]() -> nvmlReturn_t {
        count("nvmlDeviceGetMinorNumber");
        const json* d = device_json(device);
        if (!d) return NVML_ERROR_INVALID_ARGUMENT;
        if (!d->contains("minor")) return NVML_ERROR_NOT_SUPPORTED;
        *minor = (*d)["minor"].get<unsigned>();
        return NVML_SUCCESS;
    });
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetUtilizationRates(
    nvmlDevice_t device, nvmlUtilization_t* out) {
    return guarded([&]() -> nvmlReturn_t {
        const json* v = nullptr;
        const auto rc = lookup("nvmlDeviceGetUtilizationRates", device, "utilization", &v);
        if (rc == NVML_SUCCESS)
            *out = nvmlUtilization_t{(*v)[0].get<unsigned>(), (*v)[1].get<unsigned>()};
        return rc;
    });
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device,
                                                                            nvmlMemory_t* out) {
    return guarded([&]() -> nvmlReturn_t {
        const json* v = nullptr;
        const auto rc = lookup("nvmlDeviceGetMemoryInfo", device, "memory", &v);
        if (rc == NVML_SUCCESS) {
            *out =
                nvmlMemory_t{(*v)[0].get<unsigned long long>(), (*v)[2].get<unsigned long long>(),
                             (*v)[1].get<unsigned long long>()};
        }
        return rc;
    });
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device,
                                                                             int sensor,
                                                                             unsigned* out) {
    return guarded([&]() -> nvmlReturn_t {
        const json* v = nullptr;
        if (sensor != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
        const auto rc = lookup("nvmlDeviceGetTemperature", device, "temperature", &v);
        if (rc == NVML_SUCCESS) *out = v->get<unsigned>();
        return rc;
    });
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetFieldValues(
    nvmlDevice_t device, int value_count, nvmlFieldValue_t* values) {
    return guarded([&]() -> nvmlReturn_t {
        const json* step = nullptr;
        const auto rc = lookup("nvmlDeviceGetFieldValues", device, nullptr, &step);
        if (rc != NVML_SUCCESS) return rc;
        const json* s = step_json(device);
        for (int i = 0; i < value_count; ++i) {
            nvmlFieldValue_t& field = values[i];
            if (field.fieldId == NVML_FI_DEV_MEMORY_TEMP && s &&
                s->contains("memory_temperature")) {
                field.valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
                field.value.uiVal = (*s)["memory_temperature"].get<unsigned>();
                field.nvmlReturn = NVML_SUCCESS;
            } else {
                field.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
            }
        }
        return NVML_SUCCESS;
    });
}

#define FAKE_SCALAR(symbol, key, type)                                                           \
    __attribute__((visibility("default"))) nvmlReturn_t symbol(nvmlDevice_t device, type* out) { \
        return guarded([&]() -> nvmlReturn_t {                                                   \
            const json* value = nullptr;                                                         \
            const nvmlReturn_t rc = lookup(#symbol, device, key, &value);                        \
            if (rc == NVML_SUCCESS) *out = value->get<type>();                                   \
            return rc;                                                                           \
        });                                                                                      \
    }
FAKE_SCALAR(nvmlDeviceGetPowerUsage, "power_mw", unsigned)
FAKE_SCALAR(nvmlDeviceGetEnforcedPowerLimit, "power_limit_mw", unsigned)
FAKE_SCALAR(nvmlDeviceGetTotalEnergyConsumption, "energy_mj", unsigned long long)
FAKE_SCALAR(nvmlDeviceGetFanSpeed, "fan", unsigned)
FAKE_SCALAR(nvmlDeviceGetPerformanceState, "pstate", int)
FAKE_SCALAR(nvmlDeviceGetCurrentClocksEventReasons, "clock_reasons", unsigned long long)

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device,
                                                                           int type,
                                                                           unsigned* out) {
    return guarded([&]() -> nvmlReturn_t {
        const json* v = nullptr;
        const char* key = type == NVML_CLOCK_SM    ? "sm_clock"
                          : type == NVML_CLOCK_MEM ? "mem_clock"
                                                   : "";
        const auto rc = lookup("nvmlDeviceGetClockInfo", device, key, &v);
        if (rc == NVML_SUCCESS) *out = v->get<unsigned>();
        return rc;
    });
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device,
                                                                                int counter,
                                                                                unsigned* out) {
    return guarded([&]() -> nvmlReturn_t {
        const json* v = nullptr;
        const char* key = counter == NVML_PCIE_UTIL_TX_BYTES ? "pcie_tx_kbs" : "pcie_rx_kbs";
        const auto rc = lookup("nvmlDeviceGetPcieThroughput", device, key, &v);
        if (rc == NVML_SUCCESS) *out = v->get<unsigned>();
        return rc;
    });
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetEncoderUtilization(
    nvmlDevice_t device, unsigned* util, unsigned* period) {
    return guarded([&]() -> nvmlReturn_t {
        const json* v = nullptr;
        const auto rc = lookup("nvmlDeviceGetEncoderUtilization", device, "encoder", &v);
        if (rc == NVML_SUCCESS) {
            *util = v->get<unsigned>();
            *period = 167000;
        }
        return rc;
    });
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetDecoderUtilization(
    nvmlDevice_t device, unsigned* util, unsigned* period) {
    return guarded([&]() -> nvmlReturn_t {
        const json* v = nullptr;
        const auto rc = lookup("nvmlDeviceGetDecoderUtilization", device, "decoder", &v);
        if (rc == NVML_SUCCESS) {
            *util = v->get<unsigned>();
            *period = 167000;
        }
        return rc;
    });
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetTotalEccErrors(
    nvmlDevice_t device, int error_type, int counter_type, unsigned long long* out) {
    return guarded([&]() -> nvmlReturn_t {
        const json* v = nullptr;
        if (counter_type != NVML_VOLATILE_ECC && counter_type != NVML_AGGREGATE_ECC) {
            return NVML_ERROR_INVALID_ARGUMENT;
        }
        const char* key =
            error_type == NVML_MEMORY_ERROR_TYPE_CORRECTED ? "ecc_corrected" : "ecc_uncorrected";
        const auto rc = lookup("nvmlDeviceGetTotalEccErrors", device, key, &v);
        if (rc == NVML_SUCCESS) *out = v->get<unsigned long long>();
        return rc;
    });
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(
    nvmlDevice_t device, unsigned* count_inout, nvmlProcessInfo_t* infos) {
    return guarded([&]() -> nvmlReturn_t {
        return processes("nvmlDeviceGetComputeRunningProcesses_v3", device, "compute_processes",
                         count_inout, infos);
    });
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(
    nvmlDevice_t device, unsigned* count_inout, nvmlProcessInfo_t* infos) {
    return guarded([&]() -> nvmlReturn_t {
        return processes("nvmlDeviceGetGraphicsRunningProcesses_v3", device, "graphics_processes",
                         count_inout, infos);
    });
}

// Writes nvmlProcessUtilizationSample_t at NVIDIA's offsets (pid @0,
// timeStamp @8, smUtil @16, memUtil @20, encUtil @24, decUtil @28, stride 32).
__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetProcessUtilization(
    nvmlDevice_t device, nvmlProcessUtilizationSample_t* samples, unsigned* count_inout,
    unsigned long long last_seen) {
    return guarded([&]() -> nvmlReturn_t {
        const json* list = nullptr;
        const auto rc =
            lookup("nvmlDeviceGetProcessUtilization", device, "process_utilization", &list);
        if (rc != NVML_SUCCESS) return rc;
        // "timestamp_now": a sample taken at this call (CLOCK_REALTIME in
        // microseconds, as NVML stamps them), so every reading has a new one.
        timespec now{};
        clock_gettime(CLOCK_REALTIME, &now);
        const unsigned long long now_us =
            static_cast<unsigned long long>(now.tv_sec) * 1'000'000ull + now.tv_nsec / 1000;
        const auto stamp_of = [&](const json& s) {
            return s.value("timestamp_now", false) ? now_us : s.value("timestamp", 0ull);
        };
        std::vector<const json*> newer;
        for (const auto& s : *list) {
            if (stamp_of(s) > last_seen) newer.push_back(&s);
        }
        if (newer.empty()) return NVML_ERROR_NOT_FOUND;
        if (samples == nullptr || *count_inout < newer.size()) {
            *count_inout = static_cast<unsigned>(newer.size());
            return NVML_ERROR_INSUFFICIENT_SIZE;
        }
        auto* bytes = reinterpret_cast<unsigned char*>(samples);
        for (size_t i = 0; i < newer.size(); ++i) {
            const json& s = *newer[i];
            const unsigned fields[] = {s.value("pid", 0u), s.value("sm", 0u), s.value("mem", 0u),
                                       s.value("enc", 0u), s.value("dec", 0u)};
            const unsigned long long stamp = stamp_of(s);
            std::memset(bytes + 32 * i, 0, 32);
            std::memcpy(bytes + 32 * i, &fields[0], 4);
            std::memcpy(bytes + 32 * i + 8, &stamp, 8);
            for (int f = 1; f < 5; ++f) std::memcpy(bytes + 32 * i + 12 + 4 * f, &fields[f], 4);
        }
        *count_inout = static_cast<unsigned>(newer.size());
        return NVML_SUCCESS;
    });
}

// Test controls.
__attribute__((visibility("default"))) void fake_nvml_set_step(unsigned step) {
    std::lock_guard lock(state().mutex);
    state().step = step;
    try {
        queue_xids_locked();
    } catch (...) {
    }
}

__attribute__((visibility("default"))) int fake_nvml_call_count(const char* function) {
    std::lock_guard lock(state().mutex);
    const auto found = state().calls.find(function);
    return found == state().calls.end() ? 0 : found->second;
}

}  // extern "C"
