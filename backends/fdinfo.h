// DRM client usage stats from /proc/<pid>/fdinfo/<fd>, as specified by the
// kernel's Documentation/gpu/drm-usage-stats.rst, and the bookkeeping that
// turns cumulative engine counters into utilisation between two samples.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

#include "gpuguard/common/result.h"

namespace gpuguard::backends::detail {

// The drm-* keys of one DRM file description.
struct FdinfoRecord {
    std::string driver;                               // drm-driver (mandatory)
    std::optional<uint64_t> client_id;                // drm-client-id
    std::string pdev;                                 // drm-pdev, "" on non-PCI devices
    std::map<std::string, uint64_t> engine_ns;        // drm-engine-<engine>: <n> ns
    std::map<std::string, uint64_t> engine_capacity;  // drm-engine-capacity-<engine>
    std::map<std::string, uint64_t> cycles;           // drm-cycles-<engine>
    std::map<std::string, uint64_t> total_cycles;     // drm-total-cycles-<engine>
    // "<stat>-<region>" -> bytes for drm-{total,shared,resident,purgeable,active}-<region>
    // and the legacy drm-memory-<region> ("memory-vram").
    std::map<std::string, uint64_t> memory;
};

// Parses fdinfo text. Returns nullopt for a file that is not a DRM client
// (no drm-driver line). Fails with kParse naming `source`, the line number and
// the text when a drm-* value is malformed.
Result<std::optional<FdinfoRecord>> parse_fdinfo(std::string_view text, const std::string& source);

// Device memory a client holds, in bytes: resident (else legacy drm-memory,
// else total) in VRAM-like regions ("vram", "local*") when the driver has
// any, otherwise in all regions (unified-memory GPUs). nullopt: no memory keys.
std::optional<uint64_t> device_memory_bytes(const FdinfoRecord& record);

// Sum of drm-engine-* nanoseconds; nullopt when the driver reports none.
std::optional<uint64_t> engine_busy_ns(const FdinfoRecord& record);

// Per-engine utilisation of one client between the previous and this record.
// Counters that went backwards (driver resets, client-id reuse, wrap) give no
// value for that engine this time instead of a huge or negative one.
struct EngineUsage {
    std::map<std::string, double> percent;  // engine -> 0..100 (capacity-normalised)
};

class ClientTracker {
  public:
    // `key` identifies the client across samples (driver/device/client-id).
    // Returns the usage since the last update of `key` (empty the first time).
    EngineUsage update(const std::string& key, const FdinfoRecord& record,
                       std::chrono::nanoseconds now);

    // Forgets clients not updated since the previous call (closed files).
    void end_round();

    size_t size() const { return clients_.size(); }

  private:
    struct Previous {
        FdinfoRecord record;
        std::chrono::nanoseconds at{};
        bool seen_this_round = false;
    };
    std::map<std::string, Previous> clients_;
};

}  // namespace gpuguard::backends::detail
