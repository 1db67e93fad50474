// NVML's clock-event reasons (nvmlClocksEventReasons, formerly "clock
// throttle reasons") by bit, as gpuguard names them: the NVML backend's
// throttle_reasons and a gpu_fault event's "clocks" code read this one
// table, so a sample and a replayed event say the same words.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gpuguard {

inline constexpr std::array<std::pair<uint64_t, std::string_view>, 9> kNvidiaClockReasons{{
    {0x1, "gpu_idle"},
    {0x2, "applications_clocks"},
    {0x4, "sw_power_cap"},
    {0x8, "hw_slowdown"},
    {0x10, "sync_boost"},
    {0x20, "sw_thermal"},
    {0x40, "hw_thermal"},
    {0x80, "hw_power_brake"},
    {0x100, "display_clocks"},
}};

// The names of the reasons set in `bits`, in the table's order.
inline std::vector<std::string> nvidia_clock_reason_names(uint64_t bits) {
    std::vector<std::string> names;
    for (const auto& [bit, name] : kNvidiaClockReasons) {
        if (bits & bit) names.emplace_back(name);
    }
    return names;
}

}  // namespace gpuguard
