// ProcessCpuSampler: the CPU time of every live process, read from
// /proc/PID/stat at a bounded rate and turned into cpu_usage events for the
// processes that are busy (sustained_cpu, GG-CORR-0023): a process that
// used at least `busy_cpu_percent` of one core over the last interval, and
// once more the first interval it drops below. A process that was idle at
// its last reading is read every kIdleStride-th call only (staggered by
// pid), a busy one at every call: an idle host costs a quarter of the reads,
// and a process that turns busy is seen within kIdleStride intervals.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "gpuguard/events/event.h"
#include "gpuguard/state/proc_parse.h"

namespace gpuguard::agent {

class ProcessCpuSampler {
  public:
    static constexpr uint32_t kIdleStride = 4;

    ProcessCpuSampler(std::filesystem::path proc_root, uint32_t busy_cpu_percent,
                      uint32_t idle_stride = kIdleStride);
    ~ProcessCpuSampler();
    ProcessCpuSampler(const ProcessCpuSampler&) = delete;
    ProcessCpuSampler& operator=(const ProcessCpuSampler&) = delete;

    // The CPU use of each process of `pids` since the last call that read it
    // (a process read for the first time, or whose pid was recycled, only
    // sets its baseline), for the busy ones and those that just stopped
    // being busy. Processes no longer listed are forgotten.
    std::vector<std::pair<uint32_t, CpuUsage>> sample(const std::vector<uint32_t>& pids,
                                                      uint64_t ts_ns);

    // Whether the process was busy at its last reading.
    bool busy(uint32_t pid) const { return busy_.contains(pid); }
    const std::unordered_set<uint32_t>& busy_pids() const { return busy_; }

    // /proc/PID/stat's CPU fields as they are now; nullopt once it is gone.
    std::optional<ProcStatCpu> read(uint32_t pid) const;

  private:
    struct Reading {
        uint64_t ticks = 0;       // utime + stime
        uint64_t start_time = 0;  // tells a recycled pid
        uint64_t ts_ns = 0;
    };
    std::filesystem::path proc_root_;
    int proc_fd_ = -1;  // proc_root_, opened once: each read is "PID/stat" relative to it
    uint32_t busy_cpu_percent_;
    uint64_t ns_per_tick_;
    std::unordered_map<uint32_t, Reading> last_, next_;  // next_: reused by each pass
    std::unordered_set<uint32_t> busy_, next_busy_;
    uint32_t idle_stride_;
    uint64_t passes_ = 0;
};

}  // namespace gpuguard::agent
