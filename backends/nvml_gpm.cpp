// GPM sampling: two nvmlGpmSample_t per GPU (and per MIG GPU instance),
// swapped each tick, so every nvmlGpmMetricsGet covers exactly the last
// sampling interval.
#include "backends/nvml_gpm.h"

#include <algorithm>
#include <iterator>
#include <memory>
#include <utility>

#include <dlfcn.h>

#include "gpuguard/common/logging.h"

namespace gpuguard::backends {
namespace {

template <typename F>
void resolve_gpm(void* library, F& slot, const char* name) {
    slot = library ? reinterpret_cast<F>(dlsym(library, name)) : nullptr;
}

struct MetricSlot {
    unsigned id;
    std::optional<double> GpmActivity::*field;
};

constexpr MetricSlot kMetrics[] = {
    {NVML_GPM_METRIC_SM_UTIL, &GpmActivity::sm_active},
    {NVML_GPM_METRIC_SM_OCCUPANCY, &GpmActivity::sm_occupancy},
    {NVML_GPM_METRIC_ANY_TENSOR_UTIL, &GpmActivity::tensor_active},
    {NVML_GPM_METRIC_FP64_UTIL, &GpmActivity::fp64_active},
    {NVML_GPM_METRIC_FP32_UTIL, &GpmActivity::fp32_active},
    {NVML_GPM_METRIC_FP16_UTIL, &GpmActivity::fp16_active},
    {NVML_GPM_METRIC_INTEGER_UTIL, &GpmActivity::integer_active},
    {NVML_GPM_METRIC_DRAM_BW_UTIL, &GpmActivity::dram_active},
};

}  // namespace

GpmReader::GpmReader(void* library) {
    resolve_gpm(library, alloc_, "nvmlGpmSampleAlloc");
    resolve_gpm(library, free_, "nvmlGpmSampleFree");
    resolve_gpm(library, get_, "nvmlGpmSampleGet");
    resolve_gpm(library, metrics_, "nvmlGpmMetricsGet");
    resolve_gpm(library, support_, "nvmlGpmQueryDeviceSupport");
    resolve_gpm(library, mig_get_, "nvmlGpmMigSampleGet");  // R525 and later
}

GpmReader::~GpmReader() {
    if (!free_) return;
    for (auto& [key, gpu] : gpus_) {
        if (gpu.previous) free_(gpu.previous);
        if (gpu.current) free_(gpu.current);
    }
}

bool GpmReader::usable() {
    if (resolved()) return true;
    if (!said_absent_) {
        said_absent_ = true;
        logger("backends")
            ->info("NVML has no GPM entry points (driver older than R520?): no pipe activity");
    }
    return false;
}

bool GpmReader::allocate(Gpu& gpu) {
    return alloc_(&gpu.previous) == NVML_SUCCESS && alloc_(&gpu.current) == NVML_SUCCESS;
}

bool GpmReader::prepare(unsigned index, nvmlDevice_t device, Gpu& gpu) {
    if (gpu.checked) return gpu.supported;
    gpu.checked = true;
    nvmlGpmSupport_t support{};
    support.version = NVML_GPM_SUPPORT_VERSION;
    const nvmlReturn_t rc = support_(device, &support);
    if (rc != NVML_SUCCESS || !support.isSupportedDevice) {
        logger("backends")
            ->info("GPU {}: no GPM pipe activity (nvmlGpmQueryDeviceSupport: {})", index,
                   rc != NVML_SUCCESS ? "error " + std::to_string(rc) : "not supported");
        return false;
    }
    if (!allocate(gpu)) {
        logger("backends")->warn("GPU {}: nvmlGpmSampleAlloc failed; no GPM pipe activity", index);
        return false;
    }
    gpu.supported = true;
    return true;
}

std::optional<GpmActivity> GpmReader::sample(unsigned index, nvmlDevice_t device) {
    if (!usable()) return std::nullopt;
    Gpu& gpu = gpus_[{index, 0}];
    if (!prepare(index, device, gpu)) return std::nullopt;
    return take(
        "GPU " + std::to_string(index), gpu,
        [&](nvmlGpmSample_t sample) { return get_(device, sample); }, "nvmlGpmSampleGet");
}

std::optional<GpmActivity> GpmReader::sample_mig(unsigned index, nvmlDevice_t device,
                                                 unsigned gpu_instance) {
    if (!usable() || !mig_get_) return std::nullopt;
    // The GPU's own support decides for its slices (asked once, said once).
    if (!prepare(index, device, gpus_[{index, 0}])) return std::nullopt;
    Gpu& slice = gpus_[{index, gpu_instance + 1}];
    if (!slice.checked) {
        slice.checked = true;
        slice.supported = allocate(slice);
    }
    if (!slice.supported) return std::nullopt;
    return take(
        "GPU " + std::to_string(index) + " GPU instance " + std::to_string(gpu_instance), slice,
        [&](nvmlGpmSample_t sample) { return mig_get_(device, gpu_instance, sample); },
        "nvmlGpmMigSampleGet");
}

std::optional<GpmActivity> GpmReader::take(const std::string& what, Gpu& gpu,
                                           const std::function<nvmlReturn_t(nvmlGpmSample_t)>& get,
                                           const char* call) {
    const nvmlReturn_t got = get(gpu.current);
    if (got != NVML_SUCCESS) {
        gpu.have_previous = false;  // the next interval starts from the next good sample
        const std::string error = std::string(call) + ": error " + std::to_string(got);
        if (error != gpu.last_error) logger("backends")->warn("{}: {}", what, error);
        gpu.last_error = error;
        return std::nullopt;
    }
    std::optional<GpmActivity> activity;
    if (gpu.have_previous) {
        auto request = std::make_unique<nvmlGpmMetricsGet_t>();
        request->version = NVML_GPM_METRICS_GET_VERSION;
        request->numMetrics = std::size(kMetrics);
        request->sample1 = gpu.previous;
        request->sample2 = gpu.current;
        for (unsigned i = 0; i < std::size(kMetrics); ++i) {
            request->metrics[i].metricId = kMetrics[i].id;
        }
        const nvmlReturn_t rc = metrics_(request.get());
        if (rc == NVML_SUCCESS) {
            activity.emplace();
            for (unsigned i = 0; i < std::size(kMetrics); ++i) {
                const auto& metric = request->metrics[i];
                if (metric.nvmlReturn != NVML_SUCCESS) continue;
                (*activity).*(kMetrics[i].field) = std::clamp(metric.value / 100.0, 0.0, 1.0);
            }
            gpu.last_error.clear();
        } else {
            const std::string error = "nvmlGpmMetricsGet: error " + std::to_string(rc);
            if (error != gpu.last_error) logger("backends")->warn("{}: {}", what, error);
            gpu.last_error = error;
        }
    }
    std::swap(gpu.previous, gpu.current);  // this sample starts the next interval
    gpu.have_previous = true;
    return activity;
}

}  // namespace gpuguard::backends
