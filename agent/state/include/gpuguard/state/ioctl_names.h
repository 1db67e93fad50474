// Names and classes of GPU driver ioctl requests, for `gpuguard ps` and the
// correlator ("how hard does it drive the GPU": submissions vs allocations).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace gpuguard::agent {

enum class IoctlClass {
    kSubmit,   // work sent to the GPU: command submission, exec, queue creation
    kMemory,   // allocation, mapping, freeing of GPU memory
    kControl,  // driver control calls (NVIDIA RM control, contexts)
    kQuery,    // information queries, version, capabilities
    kOther,    // known driver, unclassified request
    kUnknown,  // not a request we know
};

const char* to_string(IoctlClass ioctl_class);  // "submit", "memory", ...

struct IoctlName {
    std::string family;  // "nvidia", "nvidia-uvm", "drm", "amdgpu", "i915", "xe", "kfd", ""
    std::string name;    // "NV_ESC_RM_CONTROL", "DRM_IOCTL_AMDGPU_CS", ... or "" when unknown
    IoctlClass ioctl_class = IoctlClass::kUnknown;
};

// Classifies `cmd` issued on a device of `driver` (the /proc/devices name:
// "nvidia-frontend", "nvidia-uvm", "drm", "kfd", or a DRM driver name from
// sysfs: "amdgpu", "i915", "xe"). With an unknown driver the _IOC type
// decides ('F' nvidia, 'd' DRM core, 'K' KFD).
IoctlName classify_ioctl(std::string_view driver, uint32_t cmd);

}  // namespace gpuguard::agent
