// KernelWatch: the kernel's watch lists (bpf/maps.h watched_tgids,
// bpf/connect.bpf.c watched_addrs) kept in step with the agent's books
// (gpuguard/sensor/watch_list.h). Private to the sensor room; Sensor
// forwards to it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <bpf/libbpf.h>

#include "gpuguard/common/result.h"
#include "gpuguard/events/file_watch.h"
#include "gpuguard/sensor/bpf_pins.h"
#include "gpuguard/sensor/sensor.h"
#include "gpuguard/sensor/watch_list.h"

namespace gpuguard::agent {

// Every key of a map, snapshotted first so callers may delete while using them.
template <typename Key>
std::vector<Key> map_keys(const bpf_map* map) {
    std::vector<Key> keys;
    Key next{};
    const void* previous = nullptr;
    while (bpf_map__get_next_key(map, previous, &next, sizeof(next)) == 0) {
        keys.push_back(next);
        previous = &keys.back();
    }
    return keys;
}

// sensor.watch_files as patterns, "~/" expanded for every home directory
// of the passwd database, the agent's own pin directory (kind "agent_pins")
// when `pins` is set, and its trusted files (kind "agent_config": exact
// paths, or directories ending in '/'; one the kernel cannot compare, too
// long or relative, is left out with a warning). Fails naming a bad entry.
Result<std::vector<WatchPattern>> watch_patterns(const std::vector<std::string>& entries,
                                                 const PinDirectory* pins,
                                                 const std::vector<std::string>& trusted = {});

// Replaces the file-change watch list in the kernel (bpf/files.bpf.c):
// exact paths and prefixes in `paths` (LPM trie), file names in `names`.
Status load_watch_files(bpf_map* paths, bpf_map* names, const std::vector<WatchPattern>& patterns);

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
