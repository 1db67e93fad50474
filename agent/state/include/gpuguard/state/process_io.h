// ProcessIoSampler: the write counters of GPU processes, read with each
// telemetry sample and turned into process_io events for the correlator's
// quiet_io condition (GG-CORR-0009): /proc/PID/io's write_bytes for file
// writes, the payload programs' per-process count for network sends.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <unordered_map>
#include <vector>

#include "gpuguard/events/event.h"
#include "gpuguard/state/process_table.h"

namespace gpuguard::agent {

class ProcessIoSampler {
  public:
    // Sends of a process, or nullopt when they are not counted for it.
    using NetSendsReader = std::function<std::optional<NetSends>(uint32_t pid)>;

    ProcessIoSampler(std::filesystem::path proc_root, NetSendsReader net_sends);

    // A process_io event, stamped `ts_ns`, for each live process of
    // `processes` seen for the first time or whose counters moved since the
    // last call: a quiet process costs no event. Processes no longer listed
    // are forgotten.
    std::vector<Event> sample(const std::vector<ProcessInfo>& processes, uint64_t ts_ns);

    // The counters of one process as they are now.
    ProcessIo read(uint32_t pid);

  private:
    std::filesystem::path proc_root_;
    NetSendsReader net_sends_;
    std::unordered_map<uint32_t, ProcessIo> last_;  // last emitted, by pid
    bool warned_unreadable_ = false;
};

}  // namespace gpuguard::agent
