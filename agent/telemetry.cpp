#include "agent/telemetry.h"

namespace gpuguard::agent {

backends::BackendOptions backend_options(const BackendsConfig& config) {
    backends::BackendOptions options;
    options.nvidia = config.nvidia;
    options.amd = config.amd;
    options.intel = config.intel;
    options.drm_fdinfo = config.drm_fdinfo;
    options.nvml_library = config.nvml_library;
    options.sysfs_root = config.sysfs_root;
    options.proc_root = config.proc_root;
    return options;
}

}  // namespace gpuguard::agent
