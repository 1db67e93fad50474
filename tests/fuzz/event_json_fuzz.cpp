// libFuzzer target for the JSON Lines form of events (docs/events.md), what
// `gpuguard replay` and `journal import` read from foreign files: any line
// must parse or fail with a kParse error naming the input, and what parses
// must survive the round trip (event_round_trip.h). Seeds in
// corpus/event_json are lines of every event type from tests/scenarios.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "agent/event_json.h"
#include "tests/fuzz/event_round_trip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    // A heap copy of exactly the line (no terminator, no padding) so ASan
    // sees a parser reading past it.
    std::unique_ptr<char[]> copy(new char[size ? size : 1]);
    if (size) __builtin_memcpy(copy.get(), data, size);
    const std::string_view line(copy.get(), size);
    auto parsed = gpuguard::agent::event_from_json(line, "fuzz.jsonl:1");
    if (!parsed) {
        const auto& error = parsed.error();
        if (error.code != gpuguard::ErrorCode::kParse ||
            error.message.rfind("fuzz.jsonl:1", 0) != 0) {
            std::abort();
        }
        return 0;
    }
    gpuguard::fuzz::check_event_round_trip(parsed->event);
    return 0;
}
