#include "gpuguard/events/gpu_fault.h"

#include <array>

#include "gpuguard/common/nvidia_clock_reasons.h"
#include "gpuguard/common/text.h"

namespace gpuguard::agent {
namespace {

struct XidEntry {
    uint64_t xid;
    std::string_view name;
    XidCause cause;
};

// The Xids NVIDIA's catalogue documents as the likely result of a user
// application (13, 31, 43), and those it documents as hardware or GPU
// health; the rest are the driver's or unknown and blame nobody.
constexpr std::array kXids{
    XidEntry{8, "GPU stopped processing (driver)", XidCause::kOther},
    XidEntry{13, "graphics engine exception", XidCause::kApplication},
    XidEntry{31, "GPU memory page fault", XidCause::kApplication},
    XidEntry{32, "invalid or corrupted push buffer stream", XidCause::kOther},
    XidEntry{38, "driver firmware error", XidCause::kOther},
    XidEntry{43, "GPU stopped processing (reset channel)", XidCause::kApplication},
    XidEntry{45, "preemptive cleanup, due to previous errors", XidCause::kOther},
    XidEntry{48, "double-bit ECC error", XidCause::kHardware},
    XidEntry{61, "internal micro-controller breakpoint", XidCause::kHardware},
    XidEntry{62, "internal micro-controller halt", XidCause::kHardware},
    XidEntry{63, "ECC page retirement or row remapping recorded", XidCause::kHardware},
    XidEntry{64, "ECC page retirement or row remapping failed", XidCause::kHardware},
    XidEntry{69, "graphics engine class error", XidCause::kOther},
    XidEntry{74, "NVLink error", XidCause::kHardware},
    XidEntry{79, "GPU has fallen off the bus", XidCause::kHardware},
    XidEntry{92, "high single-bit ECC error rate", XidCause::kHardware},
    XidEntry{94, "contained ECC error", XidCause::kHardware},
    XidEntry{95, "uncontained ECC error", XidCause::kHardware},
    XidEntry{109, "context switch timeout", XidCause::kOther},
    XidEntry{119, "GSP RPC timeout", XidCause::kHardware},
    XidEntry{120, "GSP error", XidCause::kHardware},
    XidEntry{154, "GPU recovery action changed", XidCause::kHardware},
};

const XidEntry* find_xid(uint64_t xid) {
    for (const auto& entry : kXids) {
        if (entry.xid == xid) return &entry;
    }
    return nullptr;
}

}  // namespace

std::string_view xid_name(uint64_t xid) {
    const XidEntry* entry = find_xid(xid);
    return entry ? entry->name : std::string_view{};
}

XidCause xid_cause(uint64_t xid) {
    const XidEntry* entry = find_xid(xid);
    return entry ? entry->cause : XidCause::kOther;
}

std::string_view xid_cause_name(XidCause cause) {
    switch (cause) {
        case XidCause::kApplication:
            return "application";
        case XidCause::kHardware:
            return "hardware";
        case XidCause::kOther:
            break;
    }
    return "other";
}

std::string describe_gpu_fault(const GpuFault& fault) {
    const std::string on = " on GPU " + std::to_string(fault.gpu_index);
    if (fault.kind == "xid") {
        const std::string_view name = xid_name(fault.code);
        const XidCause cause = xid_cause(fault.code);
        std::string what = "NVIDIA Xid " + std::to_string(fault.code);
        if (!name.empty()) {
            what += " (" + std::string(name);
            if (cause == XidCause::kApplication) what += ", caused by the application";
            if (cause == XidCause::kHardware) what += ", hardware";
            what += ")";
        }
        return what + on;
    }
    if (fault.kind == "ecc_single_bit") return "single-bit ECC error" + on;
    if (fault.kind == "ecc_double_bit") return "double-bit ECC error" + on;
    if (fault.kind == "clocks") {
        const std::string reasons = join(nvidia_clock_reason_names(fault.code), ", ");
        return "clocks changed" + on + (reasons.empty() ? "" : ": " + reasons);
    }
    return fault.kind + on;
}

}  // namespace gpuguard::agent
