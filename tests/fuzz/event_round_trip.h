// The round-trip property both event fuzz targets check: an Event written as
// JSON (docs/events.md) reads back, and writing what was read gives the same
// line. The first write may differ from the Event itself (invalid UTF-8 is
// replaced), so the property is on the JSON.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "gpuguard/events/event_json.h"

namespace gpuguard::fuzz {

inline void check_event_round_trip(const agent::Event& event) {
    const std::string line = agent::event_to_json(event, 0);
    if (line.find('\n') != std::string::npos) std::abort();
    auto parsed = agent::event_from_json(line, "round-trip");
    if (!parsed) {
        std::fprintf(stderr, "written event does not read back: %s\n%s\n",
                     parsed.error().message.c_str(), line.c_str());
        std::abort();
    }
    const std::string again = agent::event_to_json(parsed->event, 0);
    if (again != line) {
        std::fprintf(stderr, "round trip changed the event:\n%s\n%s\n", line.c_str(),
                     again.c_str());
        std::abort();
    }
}

}  // namespace gpuguard::fuzz
