// The fake NVML's GPM exports (nvmlGpmSampleAlloc/Free/Get, nvmlGpmMetricsGet,
// nvmlGpmQueryDeviceSupport). A step's "gpm" object scripts what a pair of
// samples ending at that step reports, in percent:
//   "gpm": { "sm": 80, "sm_occupancy": 40, "tensor": 0, "fp16": 0, "fp32": 1,
//            "fp64": 0, "integer": 70, "dram": 55 }
// A step without "gpm" is an unsupported device (isSupportedDevice 0, samples
// fail NOT_SUPPORTED); a metric missing from "gpm" answers NOT_SUPPORTED in
// its nvmlReturn. nvmlGpmMetricsGet checks what the real one requires: the
// version, two samples of one device, the second taken after the first.
#include <atomic>
#include <map>
#include <string>

#include "tests/backends/fake_nvml/fake_nvml_state.h"

struct nvmlGpmSample_st {
    bool taken = false;
    unsigned device = 0;
    int mig = -1;
    unsigned long long sequence = 0;  // order of nvmlGpmSampleGet calls
    nlohmann::json values;
};

namespace {

// fake_nvml::lookup, but never throwing across the C ABI.
nvmlReturn_t gpm_lookup(const char* function, nvmlDevice_t device, const nlohmann::json** value) {
    return fake_nvml::guarded([&] { return fake_nvml::lookup(function, device, "gpm", value); });
}

unsigned long long next_sequence() {
    static std::atomic<unsigned long long> sequence{0};
    return ++sequence;
}

const char* gpm_key_of(unsigned metric) {
    static const std::map<unsigned, const char*> kKeys = {
        {NVML_GPM_METRIC_SM_UTIL, "sm"},
        {NVML_GPM_METRIC_SM_OCCUPANCY, "sm_occupancy"},
        {NVML_GPM_METRIC_ANY_TENSOR_UTIL, "tensor"},
        {NVML_GPM_METRIC_FP16_UTIL, "fp16"},
        {NVML_GPM_METRIC_FP32_UTIL, "fp32"},
        {NVML_GPM_METRIC_FP64_UTIL, "fp64"},
        {NVML_GPM_METRIC_INTEGER_UTIL, "integer"},
        {NVML_GPM_METRIC_DRAM_BW_UTIL, "dram"},
    };
    const auto found = kKeys.find(metric);
    return found == kKeys.end() ? nullptr : found->second;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) nvmlReturn_t nvmlGpmQueryDeviceSupport(
    nvmlDevice_t device, nvmlGpmSupport_t* support) {
    if (!support || support->version != NVML_GPM_SUPPORT_VERSION) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    const nlohmann::json* gpm = nullptr;
    const nvmlReturn_t rc = gpm_lookup("nvmlGpmQueryDeviceSupport", device, &gpm);
    if (rc == NVML_ERROR_NOT_SUPPORTED) {
        support->isSupportedDevice = 0;
        return NVML_SUCCESS;
    }
    if (rc != NVML_SUCCESS) return rc;
    support->isSupportedDevice = 1;
    return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t* sample) {
    if (!sample) return NVML_ERROR_INVALID_ARGUMENT;
    try {
        *sample = new nvmlGpmSample_st{};
    } catch (...) {
        return NVML_ERROR_UNKNOWN;
    }
    return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t sample) {
    if (!sample) return NVML_ERROR_INVALID_ARGUMENT;
    delete sample;
    return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device,
                                                                     nvmlGpmSample_t sample) {
    if (!sample) return NVML_ERROR_INVALID_ARGUMENT;
    const nlohmann::json* gpm = nullptr;
    const nvmlReturn_t rc = gpm_lookup("nvmlGpmSampleGet", device, &gpm);
    if (rc != NVML_SUCCESS) return rc;
    try {
        sample->values = *gpm;
    } catch (...) {
        return NVML_ERROR_UNKNOWN;
    }
    sample->taken = true;
    sample->device = device->index;
    sample->mig = device->mig;
    sample->sequence = next_sequence();
    return NVML_SUCCESS;
}

// A MIG GPU instance's sample: the step's "gpm_mig" object holds one
// "gpm"-like object per GI id ("1": {...}); a GI it lacks is NOT_FOUND.
__attribute__((visibility("default"))) nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device,
                                                                        unsigned gpuInstanceId,
                                                                        nvmlGpmSample_t sample) {
    if (!sample) return NVML_ERROR_INVALID_ARGUMENT;
    const nlohmann::json* slices = nullptr;
    const nvmlReturn_t rc = fake_nvml::guarded(
        [&] { return fake_nvml::lookup("nvmlGpmMigSampleGet", device, "gpm_mig", &slices); });
    if (rc != NVML_SUCCESS) return rc;
    return fake_nvml::guarded([&] {
        const std::string key = std::to_string(gpuInstanceId);
        if (!slices->contains(key)) return NVML_ERROR_NOT_FOUND;
        sample->values = (*slices)[key];
        sample->taken = true;
        sample->device = device->index;
        sample->mig = 1000 + static_cast<int>(gpuInstanceId);  // never a MIG device's index
        sample->sequence = next_sequence();
        return NVML_SUCCESS;
    });
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlGpmMetricsGet(
    nvmlGpmMetricsGet_t* request) {
    if (!request || request->version != NVML_GPM_METRICS_GET_VERSION ||
        request->numMetrics > NVML_GPM_METRIC_MAX || !request->sample1 || !request->sample2) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    const auto& first = *request->sample1;
    const auto& second = *request->sample2;
    if (!first.taken || !second.taken || first.device != second.device || first.mig != second.mig ||
        second.sequence <= first.sequence) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    try {
        for (unsigned i = 0; i < request->numMetrics; ++i) {
            auto& metric = request->metrics[i];
            const char* key = gpm_key_of(metric.metricId);
            if (!key || !second.values.contains(key)) {
                metric.nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
                continue;
            }
            metric.value = second.values[key].get<double>();
            metric.nvmlReturn = NVML_SUCCESS;
        }
    } catch (...) {
        return NVML_ERROR_UNKNOWN;
    }
    return NVML_SUCCESS;
}

}  // extern "C"
