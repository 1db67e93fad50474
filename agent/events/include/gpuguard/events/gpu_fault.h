// What a gpu_fault event means: NVIDIA's Xid catalogue (the "Xid Errors"
// chapter of NVIDIA's GPU deployment and management documentation) reduced
// to a name and to who causes it, so that the correlator blames a process
// only for the Xids its own work raises, and a GPU's health is not pinned
// on whichever job held it.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "gpuguard/events/event.h"

namespace gpuguard::agent {

enum class XidCause {
    kApplication,  // the process's kernels: an illegal address, an engine exception
    kHardware,     // ECC, page retirement, the GPU off the bus, NVLink, GSP
    kOther,        // driver, firmware, a cleanup after another error, or unknown
};

// "GPU memory page fault", "" for an Xid not in the table.
std::string_view xid_name(uint64_t xid);
XidCause xid_cause(uint64_t xid);
std::string_view xid_cause_name(XidCause cause);  // "application", "hardware", "other"

// One line: "NVIDIA Xid 31 (GPU memory page fault, caused by the
// application) on GPU 0", "double-bit ECC error on GPU 1", "clocks
// changed on GPU 0: sw_thermal, hw_slowdown".
std::string describe_gpu_fault(const GpuFault& fault);

}  // namespace gpuguard::agent
