// libFuzzer target for ring-buffer record decoding (gpuguard/events/event.h
// decode_record): any bytes as one record must decode or fail with kParse,
// never read past the record, and what decodes must survive the JSON round
// trip (event_round_trip.h). Seeds in corpus/event_decode are records of
// each type as bpf/events.h lays them out.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>

#include "gpuguard/events/event.h"
#include "tests/fuzz/event_round_trip.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    // An exact-size heap copy so ASan sees an over-read by one byte.
    std::unique_ptr<std::byte[]> copy(new std::byte[size ? size : 1]);
    if (size) __builtin_memcpy(copy.get(), data, size);
    auto event = gpuguard::agent::decode_record(std::span<const std::byte>(copy.get(), size));
    if (!event) {
        if (event.error().code != gpuguard::ErrorCode::kParse) std::abort();
        return 0;
    }
    gpuguard::fuzz::check_event_round_trip(*event);
    return 0;
}
