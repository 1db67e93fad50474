// NVML GPU Performance Monitoring (GPM, Hopper and later): per-pipe activity
// of a GPU over the interval between two samples. dlsym'd from the NVML
// library already open; absent on older drivers and unsupported GPUs.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "backends/nvml_api.h"
#include "gpuguard/backends/backends.h"

namespace gpuguard::backends {

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
    // The same for MIG GPU instance `gpu_instance` of GPU `index`
    // (nvmlGpmMigSampleGet): the pipes of that slice alone. Nothing when the
    // GPU lacks GPM or the library lacks the call.
    std::optional<GpmActivity> sample_mig(unsigned index, nvmlDevice_t device,
                                          unsigned gpu_instance);

  private:
    struct Gpu {
        bool checked = false;
        bool supported = false;
        nvmlGpmSample_t previous = nullptr;
        nvmlGpmSample_t current = nullptr;
        bool have_previous = false;
        std::string last_error;  // logged once until it changes
    };
    bool usable();
    bool prepare(unsigned index, nvmlDevice_t device, Gpu& gpu);
    bool allocate(Gpu& gpu);
    // The next sample into `gpu` by `get`, and the activity since its last.
    std::optional<GpmActivity> take(const std::string& what, Gpu& gpu,
                                    const std::function<nvmlReturn_t(nvmlGpmSample_t)>& get,
                                    const char* call);

    nvmlReturn_t (*alloc_)(nvmlGpmSample_t*) = nullptr;
    nvmlReturn_t (*free_)(nvmlGpmSample_t) = nullptr;
    nvmlReturn_t (*get_)(nvmlDevice_t, nvmlGpmSample_t) = nullptr;
    nvmlReturn_t (*metrics_)(nvmlGpmMetricsGet_t*) = nullptr;
    nvmlReturn_t (*support_)(nvmlDevice_t, nvmlGpmSupport_t*) = nullptr;
    nvmlReturn_t (*mig_get_)(nvmlDevice_t, unsigned, nvmlGpmSample_t) = nullptr;
    bool said_absent_ = false;
    // By (GPU index, 0 for the whole GPU or its GI id + 1).
    std::map<std::pair<unsigned, unsigned>, Gpu> gpus_;
};

}  // namespace gpuguard::backends
