// JSON Lines form of events (docs/events.md).
#pragma once

#include <cstdint>
#include <string>

#include "agent/event.h"

namespace gpuguard::agent {

// Offset to add to a CLOCK_MONOTONIC timestamp to get CLOCK_REALTIME, read now.
int64_t monotonic_to_realtime_offset_ns();

// One JSON object, no trailing newline. `realtime_offset_ns` turns ts_ns into
// the "time" field (RFC 3339, UTC, nanoseconds).
std::string event_to_json(const Event& event, int64_t realtime_offset_ns);

// "O_RDWR|O_CLOEXEC" style rendering of open(2) flags; unknown bits as hex.
std::string open_flags_to_string(uint64_t flags);

}  // namespace gpuguard::agent
