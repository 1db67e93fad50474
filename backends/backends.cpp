// Backend selection from options, the start-up /proc sweep, and small helpers.
#include "gpuguard/backends/backends.h"

#include <algorithm>
#include <system_error>

#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "backends/file_reader.h"
#include "gpuguard/common/dir_entries.h"
#include "gpuguard/common/logging.h"

namespace gpuguard::backends {

namespace fs = std::filesystem;

const char* to_string(Vendor vendor) {
    switch (vendor) {
        case Vendor::kNvidia:
            return "nvidia";
        case Vendor::kAmd:
            return "amd";
        case Vendor::kIntel:
            return "intel";
        case Vendor::kApple:
            return "apple";
        case Vendor::kQualcomm:
            return "qualcomm";
        case Vendor::kArm:
            return "arm";
        case Vendor::kOther:
            return "other";
    }
    return "other";
}

std::string DeviceNumber::to_string() const {
    return std::to_string(major) + ":" + std::to_string(minor);
}

std::vector<std::unique_ptr<GpuBackend>> make_backends(const BackendOptions& options) {
    std::vector<std::unique_ptr<GpuBackend>> backends;
    auto log = logger("backends");
    if (options.nvidia) {
        NvmlOptions nvml;
        nvml.library = options.nvml_library;
        nvml.sysfs_root = options.sysfs_root;
        nvml.proc_root = options.proc_root;
        auto backend = open_nvml_backend(nvml);
        if (backend) {
            log->info("NVIDIA backend on ({})",
                      options.nvml_library.empty() ? "libnvidia-ml.so.1" : options.nvml_library);
            backends.push_back(std::move(backend).value());
        } else {
            log->info("NVIDIA backend off: {}", backend.error().message);
        }
    }
    if (options.amd || options.intel || options.drm_fdinfo) {
        DrmOptions drm;
        drm.sysfs_root = options.sysfs_root;
        drm.proc_root = options.proc_root;
        drm.amd = options.amd;
        drm.intel = options.intel;
        drm.generic = options.drm_fdinfo;
        drm.clock = options.clock;
        backends.push_back(make_drm_backend(drm));
    }
    return backends;
}

std::vector<ProcessFd> sweep_gpu_fds(const fs::path& proc_root,
                                     std::span<const DeviceNumber> gpu_devices) {
    std::vector<ProcessFd> found;
    if (gpu_devices.empty()) return found;
    // getdents64, not readdir: a process a preloaded library hides is still found.
    auto pids = list_numbered_entries(proc_root);
    if (!pids) return found;
    for (const uint32_t pid : *pids) {
        const fs::path fd_dir = proc_root / std::to_string(pid) / "fd";
        // Racy by nature: processes exit and fds close while we look.
        auto fds = list_numbered_entries(fd_dir);
        if (!fds) continue;
        for (const uint32_t fd : *fds) {
            const fs::path fd_path = fd_dir / std::to_string(fd);
            struct stat st {};
            if (::stat(fd_path.c_str(), &st) != 0 || !S_ISCHR(st.st_mode)) continue;
            const DeviceNumber number{major(st.st_rdev), minor(st.st_rdev)};
            if (std::find(gpu_devices.begin(), gpu_devices.end(), number) == gpu_devices.end()) {
                continue;
            }
            found.push_back(ProcessFd{static_cast<pid_t>(pid), static_cast<int>(fd), number});
        }
    }
    std::sort(found.begin(), found.end());
    return found;
}

}  // namespace gpuguard::backends
