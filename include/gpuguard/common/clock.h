// The two clocks the agent reads, in nanoseconds. Code that tests must steer
// takes a clock through its constructor instead of calling these directly.
#pragma once

#include <cstdint>
#include <ctime>

namespace gpuguard {

// CLOCK_MONOTONIC: the kernel's bpf_ktime_get_ns() time base.
inline uint64_t monotonic_ns() {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000ull +
           static_cast<uint64_t>(now.tv_nsec);
}

// CLOCK_REALTIME: nanoseconds since the Unix epoch.
inline int64_t unix_now_ns() {
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + static_cast<int64_t>(now.tv_nsec);
}

}  // namespace gpuguard
