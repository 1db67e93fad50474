// Per-vendor device metrics from sysfs. Every path and format here follows
// the kernel file named beside it; a missing file is an absent metric.
#include <algorithm>
#include <cmath>
#include <system_error>

#include "backends/drm_cards.h"

namespace gpuguard::backends::detail {
namespace {

namespace fs = std::filesystem;

double micro_to_unit(uint64_t value) { return double(value) / 1e6; }

// pp_dpm_sclk / pp_dpm_mclk (amdgpu_pm.c, smu_v*_ppt.c print_clk_levels):
// "0: 500Mhz\n1: 1800Mhz *\n"; the current level ends with '*'.
std::optional<uint32_t> current_dpm_level_mhz(const fs::path& path, MetricFiles& files) {
    const auto text = files.text(path);
    if (!text) return std::nullopt;
    size_t pos = 0;
    while (pos < text->size()) {
        const auto end = std::min(text->find('\n', pos), text->size());
        const std::string_view line(text->data() + pos, end - pos);
        pos = end + 1;
        if (trim(line).empty() || trim(line).back() != '*') continue;
        const auto colon = line.find(':');
        const auto mhz = line.find("Mhz");
        if (colon == std::string_view::npos || mhz == std::string_view::npos || mhz < colon) break;
        if (const auto value = parse_u64(line.substr(colon + 1, mhz - colon - 1))) {
            return static_cast<uint32_t>(*value);
        }
        break;
    }
    files.problem(path.string() +
                  ": no current level ('<n>: <clock>Mhz *'): " + quote_for_message(*text));
    return std::nullopt;
}

// hwmon freqN_input (Hz) of the channel labelled `label` ("sclk", "mclk").
std::optional<uint32_t> hwmon_clock_mhz(const fs::path& hwmon, MetricFiles& files,
                                        std::string_view label) {
    for (int channel = 1; channel <= 4; ++channel) {
        const auto name = files.text(hwmon / ("freq" + std::to_string(channel) + "_label"));
        if (!name || trim(*name) != label) continue;
        const auto hz = files.u64(hwmon / ("freq" + std::to_string(channel) + "_input"));
        if (!hz) return std::nullopt;
        return static_cast<uint32_t>(*hz / 1000000);
    }
    return std::nullopt;
}

// amdgpu_ras.c amdgpu_ras_sysfs_read: "ue: %lu\nce: %lu\n".
void read_ras_counts(const fs::path& path, MetricFiles& files, GpuSample& sample) {
    const auto text = files.text(path);
    if (!text) return;
    std::optional<uint64_t> ue, ce;
    size_t pos = 0;
    while (pos < text->size()) {
        const auto end = std::min(text->find('\n', pos), text->size());
        const std::string_view line(text->data() + pos, end - pos);
        pos = end + 1;
        if (line.substr(0, 3) == "ue:") ue = parse_u64(line.substr(3));
        if (line.substr(0, 3) == "ce:") ce = parse_u64(line.substr(3));
    }
    if (!ue || !ce) {
        files.problem(path.string() +
                      ": expected 'ue: <n>' and 'ce: <n>': " + quote_for_message(*text));
        return;
    }
    sample.ecc_errors_uncorrected = ue;
    sample.ecc_errors_corrected = ce;
}

// Power from an energy counter (µJ) between two samples; a counter that went
// backwards (wrap, driver reload) gives no power this time.
void power_from_energy(DrmCard& card, uint64_t energy_uj, std::chrono::nanoseconds now,
                       GpuSample& sample) {
    sample.energy_joules = micro_to_unit(energy_uj);
    if (card.last_energy_uj && energy_uj >= *card.last_energy_uj && now > card.last_energy_at) {
        const double seconds = std::chrono::duration<double>(now - card.last_energy_at).count();
        sample.power_draw_watts = micro_to_unit(energy_uj - *card.last_energy_uj) / seconds;
    }
    card.last_energy_uj = energy_uj;
    card.last_energy_at = now;
}

}  // namespace

std::optional<double> hwmon_temperature(const fs::path& hwmon, MetricFiles& files,
                                        std::string_view label) {
    for (int channel = 1; channel <= 8; ++channel) {
        const std::string prefix = "temp" + std::to_string(channel);
        const auto name = files.text(hwmon / (prefix + "_label"));
        if (!name || trim(*name) != label) continue;
        const auto milli = files.i64(hwmon / (prefix + "_input"));
        if (!milli) return std::nullopt;
        return double(*milli) / 1000.0;
    }
    return std::nullopt;
}

void read_amdgpu_sample(DrmCard& card, MetricFiles& files, GpuSample& sample) {
    const fs::path& dev = card.device_dir;
    // amdgpu_pm.c: gpu_busy_percent / mem_busy_percent, "%d\n".
    if (const auto busy = files.u64(dev / "gpu_busy_percent"))
        sample.gpu_utilization_percent = *busy;
    if (const auto busy = files.u64(dev / "mem_busy_percent")) {
        sample.memory_utilization_percent = *busy;
    }
    // amdgpu_vram_mgr.c: mem_info_vram_total / mem_info_vram_used, "%llu\n" bytes.
    sample.memory_total_bytes = files.u64(dev / "mem_info_vram_total");
    sample.memory_used_bytes = files.u64(dev / "mem_info_vram_used");
    if (sample.memory_total_bytes && sample.memory_used_bytes &&
        *sample.memory_used_bytes <= *sample.memory_total_bytes) {
        sample.memory_free_bytes = *sample.memory_total_bytes - *sample.memory_used_bytes;
    }
    if (card.hwmon_dir) {
        const fs::path& hwmon = *card.hwmon_dir;
        // amdgpu_pm.c hwmon: temp1 "edge", temp2 "junction", temp3 "mem" (millidegrees).
        sample.temperature_gpu_celsius = hwmon_temperature(hwmon, files, "edge");
        if (!sample.temperature_gpu_celsius) {
            sample.temperature_gpu_celsius = hwmon_temperature(hwmon, files, "junction");
        }
        sample.temperature_memory_celsius = hwmon_temperature(hwmon, files, "mem");
        // power1_average (older SMUs) or power1_input (SMU 13+), µW; power1_cap, µW.
        auto power = files.u64(hwmon / "power1_average");
        if (!power) power = files.u64(hwmon / "power1_input");
        if (power) sample.power_draw_watts = micro_to_unit(*power);
        if (const auto cap = files.u64(hwmon / "power1_cap")) {
            sample.power_limit_watts = micro_to_unit(*cap);
        }
        // pwm1: 0..255 duty cycle.
        if (const auto pwm = files.u64(hwmon / "pwm1")) {
            if (*pwm <= 255) {
                sample.fan_speed_percent = std::round(double(*pwm) * 1000.0 / 255.0) / 10.0;
            } else {
                files.problem((hwmon / "pwm1").string() + ": " + std::to_string(*pwm) +
                              " is above 255");
            }
        }
        sample.sm_clock_mhz = hwmon_clock_mhz(hwmon, files, "sclk");
        sample.memory_clock_mhz = hwmon_clock_mhz(hwmon, files, "mclk");
    }
    if (!sample.sm_clock_mhz)
        sample.sm_clock_mhz = current_dpm_level_mhz(dev / "pp_dpm_sclk", files);
    if (!sample.memory_clock_mhz) {
        sample.memory_clock_mhz = current_dpm_level_mhz(dev / "pp_dpm_mclk", files);
    }
    read_ras_counts(dev / "ras" / "umc_err_count", files, sample);
    // Not read: pcie_bw (sleeps one second per read in the driver), gpu_metrics
    // (binary, version-specific). Their metrics stay absent.
}

void read_intel_sample(DrmCard& card, MetricFiles& files, GpuSample& sample,
                       std::chrono::nanoseconds now) {
    std::vector<std::pair<std::string, fs::path>> reasons;
    if (card.family == DrmFamily::kI915) {
        // intel_gt_sysfs_pm.c: legacy card-level gt_act_freq_mhz ("%u\n").
        if (const auto mhz = files.u64(card.card_dir / "gt_act_freq_mhz")) {
            sample.sm_clock_mhz = static_cast<uint32_t>(*mhz);
        }
        const fs::path gt = card.card_dir / "gt" / "gt0";
        for (const char* name :
             {"pl1", "pl2", "pl4", "thermal", "prochot", "ratl", "vr_thermalert", "vr_tdc"}) {
            reasons.emplace_back(name, gt / (std::string("throttle_reason_") + name));
        }
        reasons.emplace_back("status", gt / "throttle_reason_status");
    } else {
        // xe_gt_freq.c: tile0/gt0/freq0/act_freq ("%d\n" MHz).
        const fs::path freq = card.device_dir / "tile0" / "gt0" / "freq0";
        if (const auto mhz = files.u64(freq / "act_freq")) {
            sample.sm_clock_mhz = static_cast<uint32_t>(*mhz);
        }
        // xe_tile_sysfs.c: physical_vram_size_bytes ("%llu\n"); integrated parts have none.
        sample.memory_total_bytes =
            files.u64(card.device_dir / "tile0" / "physical_vram_size_bytes");
        // xe_gt_throttle.c: freq0/throttle/{status,reason_*} ("%u\n").
        for (const char* name :
             {"pl1", "pl2", "pl4", "thermal", "prochot", "ratl", "vr_thermalert", "vr_tdc"}) {
            reasons.emplace_back(name, freq / "throttle" / (std::string("reason_") + name));
        }
        reasons.emplace_back("status", freq / "throttle" / "status");
    }
    std::optional<std::vector<std::string>> active;
    for (const auto& [name, path] : reasons) {
        if (name == "status") continue;
        const auto on = files.flag(path);
        if (!on) continue;
        if (!active) active.emplace();
        if (*on) active->push_back(name);
    }
    sample.throttle_reasons = active;

    if (card.hwmon_dir) {
        const fs::path& hwmon = *card.hwmon_dir;
        // i915_hwmon.c / xe_hwmon.c: energy1_input (µJ, 64-bit, the driver
        // extends the 32-bit register); power1_max (µW, PL1; 0 = PL1 disabled).
        if (const auto energy = files.u64(hwmon / "energy1_input")) {
            power_from_energy(card, *energy, now, sample);
        }
        if (const auto limit = files.u64(hwmon / "power1_max"); limit && *limit > 0) {
            sample.power_limit_watts = micro_to_unit(*limit);
        }
        // xe_hwmon.c (6.15+): temp2 "pkg", temp3 "vram".
        sample.temperature_gpu_celsius = hwmon_temperature(hwmon, files, "pkg");
        sample.temperature_memory_celsius = hwmon_temperature(hwmon, files, "vram");
    }
}

void read_generic_sample(DrmCard& card, MetricFiles& files, GpuSample& sample) {
    // drivers/devfreq/devfreq.c: devfreq/<name>/cur_freq ("%lu\n" Hz), used by
    // msm, panfrost, panthor, lima. asahi has no devfreq.
    std::error_code ec;
    const fs::path devfreq = card.device_dir / "devfreq";
    for (const auto& entry : fs::directory_iterator(devfreq, ec)) {
        if (const auto hz = files.u64(entry.path() / "cur_freq")) {
            sample.sm_clock_mhz = static_cast<uint32_t>(*hz / 1000000);
        }
        break;
    }
}

}  // namespace gpuguard::backends::detail
