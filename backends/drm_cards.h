// The DRM backend's view of one card (/sys/class/drm/cardN) and the
// vendor-specific sysfs readers that fill a GpuSample from it.
#pragma once

#include <chrono>
#include <filesystem>
#include <map>
#include <optional>
#include <string>

#include "backends/file_reader.h"
#include "gpuguard/backends/backends.h"

namespace gpuguard::backends::detail {

enum class DrmFamily { kAmdgpu, kI915, kXe, kGeneric };

struct DrmCard {
    GpuDevice device;
    DrmFamily family = DrmFamily::kGeneric;
    std::filesystem::path card_dir;    // <sysfs>/class/drm/cardN
    std::filesystem::path device_dir;  // card_dir/device (the PCI or platform device)
    std::optional<std::filesystem::path> hwmon_dir;
    DeviceNumber card_node;
    std::optional<DeviceNumber> render_node;
    std::map<std::string, std::string> uevent;  // device/uevent KEY=VALUE
    // Last energy reading, for drivers that report energy but not power (i915, xe).
    std::optional<uint64_t> last_energy_uj;
    std::chrono::nanoseconds last_energy_at{};
};

// drivers/gpu/drm/amd/pm/amdgpu_pm.c, amdgpu_vram_mgr.c, amdgpu_ras.c.
void read_amdgpu_sample(DrmCard& card, MetricFiles& files, GpuSample& sample);

// drivers/gpu/drm/i915/gt/intel_gt_sysfs_pm.c, i915_hwmon.c;
// drivers/gpu/drm/xe/xe_gt_freq.c, xe_gt_throttle.c, xe_hwmon.c, xe_tile_sysfs.c.
void read_intel_sample(DrmCard& card, MetricFiles& files, GpuSample& sample,
                       std::chrono::nanoseconds now);

// Drivers without vendor sysfs (asahi, msm, panfrost, ...): devfreq clock only.
void read_generic_sample(DrmCard& card, MetricFiles& files, GpuSample& sample);

// hwmon temperature (millidegrees) of the channel whose temp*_label is `label`.
std::optional<double> hwmon_temperature(const std::filesystem::path& hwmon, MetricFiles& files,
                                        std::string_view label);

}  // namespace gpuguard::backends::detail
