// KernelWatch: the kernel's watch lists (bpf/maps.h watched_tgids,
// bpf/connect.bpf.c watched_addrs) kept in step with the agent's books
// (gpuguard/sensor/watch_list.h). Private to the sensor room; Sensor
// forwards to it.
#pragma once

#include <cstdint>
#include <string>

#include "gpuguard/common/result.h"
#include "gpuguard/sensor/sensor.h"
#include "gpuguard/sensor/watch_list.h"

struct bpf_map;

namespace gpuguard::agent {

class KernelWatch {
  public:
    // The maps are the loaded skeleton's; `armed` is its net_watch_armed,
    // kept non-zero only while a list holds entries. Capacities are the
    // maps' sizes.
    KernelWatch(bpf_map* tgids, bpf_map* addresses, bpf_map* net_watch, volatile uint32_t* armed);

    Status watch_process(uint32_t pid);
    void forget_process(uint32_t pid);
    Status watch_address(const std::string& address, uint64_t expires_ns);
    size_t expire(uint64_t now_ns);
    bool process_watched(uint32_t pid) const { return processes_.contains(pid); }
    WatchStats stats() const { return WatchStats{processes_.counts(), addresses_.counts()}; }

  private:
    void update_armed();

    bpf_map* tgids_;
    bpf_map* addresses_map_;
    bpf_map* net_watch_;
    volatile uint32_t* armed_;
    WatchList<uint32_t> processes_;
    WatchList<AddressKey, AddressKeyHash> addresses_;
};

}  // namespace gpuguard::agent
