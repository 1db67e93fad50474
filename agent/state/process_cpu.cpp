#include "gpuguard/state/process_cpu.h"

#include <cstdio>
#include <string>

#include <fcntl.h>
#include <unistd.h>

namespace gpuguard::agent {

ProcessCpuSampler::ProcessCpuSampler(std::filesystem::path proc_root, uint32_t busy_cpu_percent,
                                     uint32_t idle_stride)
    : proc_root_(std::move(proc_root)),
      busy_cpu_percent_(busy_cpu_percent),
      idle_stride_(idle_stride ? idle_stride : 1) {
    const long ticks_per_s = sysconf(_SC_CLK_TCK);
    ns_per_tick_ = 1'000'000'000ull / static_cast<uint64_t>(ticks_per_s > 0 ? ticks_per_s : 100);
    proc_fd_ = ::open(proc_root_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

ProcessCpuSampler::~ProcessCpuSampler() {
    if (proc_fd_ >= 0) ::close(proc_fd_);
}

std::optional<ProcStatCpu> ProcessCpuSampler::read(uint32_t pid) const {
    // A plain read into a stack buffer, relative to /proc opened once: this
    // runs for every process every interval. The line is a few hundred
    // bytes; the name in it at most 64.
    if (proc_fd_ < 0) return std::nullopt;
    char path[32];
    std::snprintf(path, sizeof(path), "%u/stat", pid);
    const int fd = ::openat(proc_fd_, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return std::nullopt;
    char text[1024];
    const ssize_t n = ::read(fd, text, sizeof(text));
    ::close(fd);
    if (n <= 0) return std::nullopt;
    return parse_proc_stat_cpu(std::string_view(text, static_cast<size_t>(n)));
}

std::vector<std::pair<uint32_t, CpuUsage>> ProcessCpuSampler::sample(
    const std::vector<uint32_t>& pids, uint64_t ts_ns) {
    std::vector<std::pair<uint32_t, CpuUsage>> out;
    std::unordered_map<uint32_t, Reading>& now = next_;
    now.clear();
    std::unordered_set<uint32_t>& busy = next_busy_;
    busy.clear();
    const uint64_t pass = passes_++;
    for (const uint32_t pid : pids) {
        const auto last = last_.find(pid);
        // Idle at its last reading: read on its turn only, the reading kept meanwhile.
        if (last != last_.end() && !busy_.contains(pid) && (pid + pass) % idle_stride_ != 0) {
            now.emplace(pid, last->second);
            continue;
        }
        const auto stat = read(pid);
        if (!stat) continue;  // gone since it was listed
        const Reading reading{stat->utime + stat->stime, stat->start_time, ts_ns};
        now.emplace(pid, reading);
        if (last == last_.end() || last->second.start_time != reading.start_time ||
            reading.ticks < last->second.ticks || ts_ns <= last->second.ts_ns) {
            continue;  // a baseline only
        }
        CpuUsage usage;
        usage.cpu_ns = (reading.ticks - last->second.ticks) * ns_per_tick_;
        usage.interval_ns = ts_ns - last->second.ts_ns;
        usage.threads = stat->threads;
        // Busy: cpu_ns / interval_ns >= percent / 100, in integers.
        const bool is_busy = usage.cpu_ns * 100 >= usage.interval_ns * busy_cpu_percent_;
        if (is_busy) busy.insert(pid);
        if (is_busy || busy_.contains(pid)) out.emplace_back(pid, usage);
    }
    last_.swap(now);
    busy_.swap(busy);
    return out;
}

}  // namespace gpuguard::agent
