#include "gpuguard/state/ioctl_names.h"

#include <array>

namespace gpuguard::agent {
namespace {

struct Entry {
    uint32_t nr;
    const char* name;
    IoctlClass ioctl_class;
};

constexpr uint32_t ioc_type(uint32_t cmd) { return (cmd >> 8) & 0xff; }
constexpr uint32_t ioc_nr(uint32_t cmd) { return cmd & 0xff; }

template <size_t N>
const Entry* find(const std::array<Entry, N>& table, uint32_t nr) {
    for (const auto& entry : table) {
        if (entry.nr == nr) return &entry;
    }
    return nullptr;
}

using C = IoctlClass;

// NVIDIA resource manager escapes, type 'F' (0x46). Numbers from
// open-gpu-kernel-modules src/nvidia/arch/nvalloc/unix/include/nv_escape.h
// (NV_ESC_RM_*) and kernel-open/common/inc/nv-ioctl-numbers.h (NV_ESC_*,
// NV_IOCTL_BASE 200).
constexpr std::array<Entry, 30> kNvidia = {{
    {0x27, "NV_ESC_RM_ALLOC_MEMORY", C::kMemory},
    {0x28, "NV_ESC_RM_ALLOC_OBJECT", C::kControl},
    {0x29, "NV_ESC_RM_FREE", C::kMemory},
    {0x2A, "NV_ESC_RM_CONTROL", C::kControl},
    {0x2B, "NV_ESC_RM_ALLOC", C::kMemory},
    {0x32, "NV_ESC_RM_CONFIG_GET", C::kQuery},
    {0x33, "NV_ESC_RM_CONFIG_SET", C::kControl},
    {0x34, "NV_ESC_RM_DUP_OBJECT", C::kControl},
    {0x35, "NV_ESC_RM_SHARE", C::kControl},
    {0x37, "NV_ESC_RM_CONFIG_GET_EX", C::kQuery},
    {0x38, "NV_ESC_RM_CONFIG_SET_EX", C::kControl},
    {0x39, "NV_ESC_RM_I2C_ACCESS", C::kControl},
    {0x41, "NV_ESC_RM_IDLE_CHANNELS", C::kSubmit},
    {0x4A, "NV_ESC_RM_VID_HEAP_CONTROL", C::kMemory},
    {0x4D, "NV_ESC_RM_ACCESS_REGISTRY", C::kControl},
    {0x4E, "NV_ESC_RM_MAP_MEMORY", C::kMemory},
    {0x4F, "NV_ESC_RM_UNMAP_MEMORY", C::kMemory},
    {0x52, "NV_ESC_RM_GET_EVENT_DATA", C::kQuery},
    {0x54, "NV_ESC_RM_ALLOC_CONTEXT_DMA2", C::kMemory},
    {0x57, "NV_ESC_RM_MAP_MEMORY_DMA", C::kMemory},
    {0x58, "NV_ESC_RM_UNMAP_MEMORY_DMA", C::kMemory},
    {0x59, "NV_ESC_RM_BIND_CONTEXT_DMA", C::kMemory},
    {0x5C, "NV_ESC_RM_EXPORT_OBJECT_TO_FD", C::kMemory},
    {0x5D, "NV_ESC_RM_IMPORT_OBJECT_FROM_FD", C::kMemory},
    {0x5E, "NV_ESC_RM_UPDATE_DEVICE_MAPPING_INFO", C::kMemory},
    {0xC8, "NV_ESC_CARD_INFO", C::kQuery},
    {0xC9, "NV_ESC_REGISTER_FD", C::kControl},
    {0xCE, "NV_ESC_ALLOC_OS_EVENT", C::kControl},
    {0xD2, "NV_ESC_CHECK_VERSION_STR", C::kQuery},
    {0xD4, "NV_ESC_ATTACH_GPUS_TO_FD", C::kControl},
}};

// nvidia-uvm: plain request numbers, not _IOC-encoded. From
// kernel-open/nvidia-uvm/uvm_ioctl.h and uvm_linux_ioctl.h.
constexpr std::array<Entry, 14> kUvm = {{
    {1, "UVM_RESERVE_VA", C::kMemory},
    {2, "UVM_RELEASE_VA", C::kMemory},
    {3, "UVM_REGION_COMMIT", C::kMemory},
    {4, "UVM_REGION_DECOMMIT", C::kMemory},
    {23, "UVM_CREATE_RANGE_GROUP", C::kMemory},
    {25, "UVM_REGISTER_GPU_VASPACE", C::kMemory},
    {27, "UVM_REGISTER_CHANNEL", C::kSubmit},
    {29, "UVM_ENABLE_PEER_ACCESS", C::kControl},
    {33, "UVM_MAP_EXTERNAL_ALLOCATION", C::kMemory},
    {34, "UVM_FREE", C::kMemory},
    {37, "UVM_REGISTER_GPU", C::kControl},
    {39, "UVM_PAGEABLE_MEM_ACCESS", C::kQuery},
    {51, "UVM_MIGRATE", C::kMemory},
    {75, "UVM_MM_INITIALIZE", C::kControl},
}};
constexpr uint32_t kUvmInitialize = 0x30000001;    // uvm_linux_ioctl.h
constexpr uint32_t kUvmDeinitialize = 0x30000002;  // uvm_linux_ioctl.h

// DRM core, type 'd' (0x64), nr below DRM_COMMAND_BASE (0x40) and the mode
// range: include/uapi/drm/drm.h.
constexpr std::array<Entry, 12> kDrmCore = {{
    {0x00, "DRM_IOCTL_VERSION", C::kQuery},
    {0x01, "DRM_IOCTL_GET_UNIQUE", C::kQuery},
    {0x09, "DRM_IOCTL_GEM_CLOSE", C::kMemory},
    {0x0A, "DRM_IOCTL_GEM_FLINK", C::kMemory},
    {0x0B, "DRM_IOCTL_GEM_OPEN", C::kMemory},
    {0x0C, "DRM_IOCTL_GET_CAP", C::kQuery},
    {0x0D, "DRM_IOCTL_SET_CLIENT_CAP", C::kControl},
    {0x2D, "DRM_IOCTL_PRIME_HANDLE_TO_FD", C::kMemory},
    {0x2E, "DRM_IOCTL_PRIME_FD_TO_HANDLE", C::kMemory},
    {0xBF, "DRM_IOCTL_SYNCOBJ_CREATE", C::kSubmit},
    {0xC3, "DRM_IOCTL_SYNCOBJ_WAIT", C::kSubmit},
    {0xCA, "DRM_IOCTL_SYNCOBJ_TIMELINE_WAIT", C::kSubmit},
}};

// Driver-specific DRM requests: nr = DRM_COMMAND_BASE (0x40) + offset.
// amdgpu: include/uapi/drm/amdgpu_drm.h (DRM_AMDGPU_*).
constexpr std::array<Entry, 16> kAmdgpu = {{
    {0x00, "DRM_IOCTL_AMDGPU_GEM_CREATE", C::kMemory},
    {0x01, "DRM_IOCTL_AMDGPU_GEM_MMAP", C::kMemory},
    {0x02, "DRM_IOCTL_AMDGPU_CTX", C::kControl},
    {0x03, "DRM_IOCTL_AMDGPU_BO_LIST", C::kMemory},
    {0x04, "DRM_IOCTL_AMDGPU_CS", C::kSubmit},
    {0x05, "DRM_IOCTL_AMDGPU_INFO", C::kQuery},
    {0x06, "DRM_IOCTL_AMDGPU_GEM_METADATA", C::kMemory},
    {0x07, "DRM_IOCTL_AMDGPU_GEM_WAIT_IDLE", C::kSubmit},
    {0x08, "DRM_IOCTL_AMDGPU_GEM_VA", C::kMemory},
    {0x09, "DRM_IOCTL_AMDGPU_WAIT_CS", C::kSubmit},
    {0x10, "DRM_IOCTL_AMDGPU_GEM_OP", C::kMemory},
    {0x11, "DRM_IOCTL_AMDGPU_GEM_USERPTR", C::kMemory},
    {0x12, "DRM_IOCTL_AMDGPU_WAIT_FENCES", C::kSubmit},
    {0x13, "DRM_IOCTL_AMDGPU_VM", C::kMemory},
    {0x14, "DRM_IOCTL_AMDGPU_FENCE_TO_HANDLE", C::kSubmit},
    {0x15, "DRM_IOCTL_AMDGPU_SCHED", C::kControl},
}};

// i915: include/uapi/drm/i915_drm.h (DRM_I915_*).
constexpr std::array<Entry, 10> kI915 = {{
    {0x06, "DRM_IOCTL_I915_GETPARAM", C::kQuery},
    {0x17, "DRM_IOCTL_I915_GEM_BUSY", C::kSubmit},
    {0x1b, "DRM_IOCTL_I915_GEM_CREATE", C::kMemory},
    {0x1e, "DRM_IOCTL_I915_GEM_MMAP", C::kMemory},
    {0x24, "DRM_IOCTL_I915_GEM_MMAP_OFFSET", C::kMemory},
    {0x29, "DRM_IOCTL_I915_GEM_EXECBUFFER2", C::kSubmit},
    {0x2c, "DRM_IOCTL_I915_GEM_WAIT", C::kSubmit},
    {0x2d, "DRM_IOCTL_I915_GEM_CONTEXT_CREATE", C::kControl},
    {0x39, "DRM_IOCTL_I915_QUERY", C::kQuery},
    {0x3c, "DRM_IOCTL_I915_GEM_CREATE_EXT", C::kMemory},
}};

// xe: include/uapi/drm/xe_drm.h (DRM_XE_*).
constexpr std::array<Entry, 11> kXe = {{
    {0x00, "DRM_IOCTL_XE_DEVICE_QUERY", C::kQuery},
    {0x01, "DRM_IOCTL_XE_GEM_CREATE", C::kMemory},
    {0x02, "DRM_IOCTL_XE_GEM_MMAP_OFFSET", C::kMemory},
    {0x03, "DRM_IOCTL_XE_VM_CREATE", C::kMemory},
    {0x04, "DRM_IOCTL_XE_VM_DESTROY", C::kMemory},
    {0x05, "DRM_IOCTL_XE_VM_BIND", C::kMemory},
    {0x06, "DRM_IOCTL_XE_EXEC_QUEUE_CREATE", C::kSubmit},
    {0x07, "DRM_IOCTL_XE_EXEC_QUEUE_DESTROY", C::kSubmit},
    {0x08, "DRM_IOCTL_XE_EXEC_QUEUE_GET_PROPERTY", C::kQuery},
    {0x09, "DRM_IOCTL_XE_EXEC", C::kSubmit},
    {0x0a, "DRM_IOCTL_XE_WAIT_USER_FENCE", C::kSubmit},
}};

// AMD KFD (ROCm compute), type 'K' (0x4B): include/uapi/linux/kfd_ioctl.h.
constexpr std::array<Entry, 16> kKfd = {{
    {0x01, "AMDKFD_IOC_GET_VERSION", C::kQuery},
    {0x02, "AMDKFD_IOC_CREATE_QUEUE", C::kSubmit},
    {0x03, "AMDKFD_IOC_DESTROY_QUEUE", C::kSubmit},
    {0x04, "AMDKFD_IOC_SET_MEMORY_POLICY", C::kMemory},
    {0x05, "AMDKFD_IOC_GET_CLOCK_COUNTERS", C::kQuery},
    {0x06, "AMDKFD_IOC_GET_PROCESS_APERTURES", C::kQuery},
    {0x07, "AMDKFD_IOC_UPDATE_QUEUE", C::kSubmit},
    {0x08, "AMDKFD_IOC_CREATE_EVENT", C::kControl},
    {0x0C, "AMDKFD_IOC_WAIT_EVENTS", C::kSubmit},
    {0x14, "AMDKFD_IOC_GET_PROCESS_APERTURES_NEW", C::kQuery},
    {0x15, "AMDKFD_IOC_ACQUIRE_VM", C::kMemory},
    {0x16, "AMDKFD_IOC_ALLOC_MEMORY_OF_GPU", C::kMemory},
    {0x17, "AMDKFD_IOC_FREE_MEMORY_OF_GPU", C::kMemory},
    {0x18, "AMDKFD_IOC_MAP_MEMORY_TO_GPU", C::kMemory},
    {0x19, "AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU", C::kMemory},
    {0x20, "AMDKFD_IOC_SVM", C::kMemory},
}};

template <size_t N>
IoctlName lookup(const char* family, const std::array<Entry, N>& table, uint32_t nr) {
    if (const Entry* entry = find(table, nr)) return {family, entry->name, entry->ioctl_class};
    return {family, "", IoctlClass::kOther};
}

IoctlName classify_drm(std::string_view driver, uint32_t nr) {
    constexpr uint32_t kCommandBase = 0x40, kCommandEnd = 0xA0;  // drm.h DRM_COMMAND_BASE/END
    if (nr >= kCommandBase && nr < kCommandEnd) {
        const uint32_t offset = nr - kCommandBase;
        if (driver == "amdgpu") return lookup("amdgpu", kAmdgpu, offset);
        if (driver == "i915") return lookup("i915", kI915, offset);
        if (driver == "xe") return lookup("xe", kXe, offset);
        return {"drm", "", IoctlClass::kOther};  // another driver's private request
    }
    return lookup("drm", kDrmCore, nr);
}

}  // namespace

const char* to_string(IoctlClass ioctl_class) {
    switch (ioctl_class) {
        case IoctlClass::kSubmit:
            return "submit";
        case IoctlClass::kMemory:
            return "memory";
        case IoctlClass::kControl:
            return "control";
        case IoctlClass::kQuery:
            return "query";
        case IoctlClass::kOther:
            return "other";
        case IoctlClass::kUnknown:
            return "unknown";
    }
    return "unknown";
}

IoctlName classify_ioctl(std::string_view driver, uint32_t cmd) {
    if (driver == "nvidia-uvm") {
        if (cmd == kUvmInitialize) return {"nvidia-uvm", "UVM_INITIALIZE", IoctlClass::kControl};
        if (cmd == kUvmDeinitialize)
            return {"nvidia-uvm", "UVM_DEINITIALIZE", IoctlClass::kControl};
        return lookup("nvidia-uvm", kUvm, cmd);
    }
    const uint32_t type = ioc_type(cmd), nr = ioc_nr(cmd);
    if (type == 'F' && (driver.empty() || driver.starts_with("nvidia") || driver == "config")) {
        return lookup("nvidia", kNvidia, nr);
    }
    if (type == 'd') return classify_drm(driver, nr);
    if (type == 'K') return lookup("kfd", kKfd, nr);
    // The UVM init/deinit numbers are distinctive enough to name on any device.
    if (cmd == kUvmInitialize) return {"nvidia-uvm", "UVM_INITIALIZE", IoctlClass::kControl};
    if (cmd == kUvmDeinitialize) return {"nvidia-uvm", "UVM_DEINITIALIZE", IoctlClass::kControl};
    return {"", "", IoctlClass::kUnknown};
}

}  // namespace gpuguard::agent
