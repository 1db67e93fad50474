// libFuzzer target for the JSON Lines form of events (docs/events.md), what
// `gpuguard replay` and `journal import` read from foreign files: any line
// must parse or fail with a kParse error naming the input, and what parses
// must survive the round trip (event_round_trip.h). The in-place parse
// `gpuguard replay` uses on its read buffer (EventJsonReader::parse with
// padded=true) must give the same result as the copying one. Seeds in
// corpus/event_json are lines of every event type from tests/scenarios.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "gpuguard/events/event_json.h"
#include "tests/fuzz/event_round_trip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    // A heap copy of exactly the line (no terminator, no padding) so ASan
    // sees a parser reading past it.
    std::unique_ptr<char[]> copy(new char[size ? size : 1]);
    if (size) __builtin_memcpy(copy.get(), data, size);
    const std::string_view line(copy.get(), size);
    auto parsed = gpuguard::agent::event_from_json(line, "fuzz.jsonl:1");

    // The same bytes followed by kPadding bytes of JSON-looking junk.
    constexpr size_t kPadding = gpuguard::agent::EventJsonReader::kPadding;
    std::unique_ptr<char[]> padded(new char[size + kPadding]);
    if (size) __builtin_memcpy(padded.get(), data, size);
    for (size_t i = 0; i < kPadding; ++i) padded[size + i] = "\"}],:1"[i % 6];
    auto in_place = gpuguard::agent::EventJsonReader().parse(std::string_view(padded.get(), size),
                                                             "fuzz.jsonl:1", /*padded=*/true);
    if (parsed.ok() != in_place.ok()) std::abort();
    if (parsed && gpuguard::agent::event_to_json(parsed->event, 0) !=
                      gpuguard::agent::event_to_json(in_place->event, 0)) {
        std::abort();
    }
    if (!parsed && parsed.error().message != in_place.error().message) std::abort();

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
