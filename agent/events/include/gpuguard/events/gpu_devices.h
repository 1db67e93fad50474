// Which character device numbers are GPUs: from /proc/devices and from
// configuration ("MAJOR:MINOR" or "MAJOR:*").
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gpuguard/common/result.h"

namespace gpuguard::agent {

struct GpuDeviceNumber {
    uint32_t major = 0;
    std::optional<uint32_t> minor;  // nullopt: every minor of the major
    std::string driver;             // "nvidia-frontend", "drm", "config", ...

    std::string to_string() const;  // "195:*", "1:3"
    // Is major:minor this number (or, for a whole major, any of its minors)?
    bool matches(uint32_t major_number, uint32_t minor_number) const {
        return major == major_number && (!minor || *minor == minor_number);
    }
    bool operator==(const GpuDeviceNumber&) const = default;
};

// Parses "MAJOR:MINOR" or "MAJOR:*". Fails with kInvalidArgument naming the text.
Result<GpuDeviceNumber> parse_gpu_device_number(std::string_view text);
// One device's "MAJOR:MINOR" (a telemetry record's devices), else nullopt.
std::optional<std::pair<uint32_t, uint32_t>> parse_device_number(std::string_view text);

// GPU drivers' majors in the "Character devices:" section of /proc/devices
// text: nvidia (nvidia-frontend), nvidia-uvm, nvidia-caps*, nvidia-nvlink,
// nvidia-nvswitch, drm, kfd, accel. Unknown lines are ignored.
std::vector<GpuDeviceNumber> gpu_devices_from_proc_devices(std::string_view text);

// Reads `<proc_root>/devices` and applies gpu_devices_from_proc_devices.
Result<std::vector<GpuDeviceNumber>> read_gpu_devices(const std::filesystem::path& proc_root);

}  // namespace gpuguard::agent
