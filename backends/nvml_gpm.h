// NVML GPU Performance Monitoring (GPM, Hopper and later): per-pipe activity
// of a GPU over the interval between two samples. dlsym'd from the NVML
// library already open; absent on older drivers and unsupported GPUs.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "backends/nvml_api.h"

namespace gpuguard::backends {

// Fractions 0..1 of the interval, as DCGM's profiling fields report them;
// absent when NVML does not report that metric.
struct GpmActivity {
    std::optional<double> sm_active;       // DCGM_FI_PROF_SM_ACTIVE
    std::optional<double> sm_occupancy;    // DCGM_FI_PROF_SM_OCCUPANCY
    std::optional<double> tensor_active;   // DCGM_FI_PROF_PIPE_TENSOR_ACTIVE (any)
    std::optional<double> fp64_active;     // DCGM_FI_PROF_PIPE_FP64_ACTIVE
    std::optional<double> fp32_active;     // DCGM_FI_PROF_PIPE_FP32_ACTIVE
    std::optional<double> fp16_active;     // DCGM_FI_PROF_PIPE_FP16_ACTIVE
    std::optional<double> integer_active;  // DCGM_FI_PROF_PIPE_INT_ACTIVE
    std::optional<double> dram_active;     // DCGM_FI_PROF_DRAM_ACTIVE
};

class GpmReader {
  public:
    // Resolves the GPM entry points in `library` (a dlopen handle).
    explicit GpmReader(void* library);
    ~GpmReader();
    GpmReader(const GpmReader&) = delete;
    GpmReader& operator=(const GpmReader&) = delete;

    // Whether the library exports the GPM entry points.
    bool resolved() const { return alloc_ && free_ && get_ && metrics_ && support_; }

    // Takes a sample of GPU `index` and returns its activity since the
    // previous call for that GPU; nothing on the first call, when the GPU or
    // library lacks GPM (said once per GPU), or when sampling fails.
    std::optional<GpmActivity> sample(unsigned index, nvmlDevice_t device);

  private:
    struct Gpu {
        bool checked = false;
        bool supported = false;
        nvmlGpmSample_t previous = nullptr;
        nvmlGpmSample_t current = nullptr;
        bool have_previous = false;
        std::string last_error;  // logged once until it changes
    };
    bool prepare(unsigned index, nvmlDevice_t device, Gpu& gpu);

    nvmlReturn_t (*alloc_)(nvmlGpmSample_t*) = nullptr;
    nvmlReturn_t (*free_)(nvmlGpmSample_t) = nullptr;
    nvmlReturn_t (*get_)(nvmlDevice_t, nvmlGpmSample_t) = nullptr;
    nvmlReturn_t (*metrics_)(nvmlGpmMetricsGet_t*) = nullptr;
    nvmlReturn_t (*support_)(nvmlDevice_t, nvmlGpmSupport_t*) = nullptr;
    bool said_absent_ = false;
    std::map<unsigned, Gpu> gpus_;
};

}  // namespace gpuguard::backends
