// libFuzzer target for what backends/ reads from procfs and sysfs: DRM
// fdinfo text (drm-usage-stats) and the strict number parsers of sysfs
// metric files. Any text must parse or fail cleanly; what parses must make
// sense (a memory total that fits, utilisation within 0..100, problem
// quotes that stay on one line). Seeds in corpus/fdinfo are real fdinfo
// files (amdgpu, i915, xe, msm, panfrost, asahi) and sysfs values.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "backends/fdinfo.h"
#include "backends/file_reader.h"

namespace detail = gpuguard::backends::detail;

namespace {

// A problem line quotes at most 40 characters, every one printable.
void check_quote(std::string_view text) {
    const std::string quoted = detail::quote_for_message(text);
    for (const char c : quoted) {
        if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) {
            std::abort();
        }
    }
    if (quoted.size() > 2 + 40 * 4 + 3) std::abort();
}

void check_numbers(std::string_view text) {
    const auto u = detail::parse_u64(text);
    const auto i = detail::parse_i64(text);
    const auto trimmed = detail::trim(text);
    if (trimmed.size() > text.size()) std::abort();
    // Strict: a value parses only from digits (and a sign for i64) after trimming.
    if (u &&
        (trimmed.empty() || trimmed.find_first_not_of("0123456789+") != std::string_view::npos)) {
        std::abort();
    }
    if (u) {
        // Round trip: the decimal rendering parses back to the same value.
        if (detail::parse_u64(std::to_string(*u)) != u) std::abort();
        if (i && *i >= 0 && static_cast<uint64_t>(*i) != *u) std::abort();
    }
    if (i && detail::parse_i64(std::to_string(*i)) != i) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    check_quote(text);
    check_numbers(text);

    auto parsed = detail::parse_fdinfo(text, "fdinfo");
    if (!parsed) {
        // Errors name the source and stay on one line.
        const auto& message = parsed.error().message;
        if (message.rfind("fdinfo:", 0) != 0 || message.find('\n') != std::string::npos) {
            std::abort();
        }
        return 0;
    }
    if (!*parsed) return 0;
    const detail::FdinfoRecord& record = **parsed;
    if (record.driver.empty()) std::abort();
    (void)detail::device_memory_bytes(record);
    const auto busy = detail::engine_busy_ns(record);
    if (busy.has_value() == record.engine_ns.empty()) std::abort();

    // The same client sampled twice, then again with its counters reset:
    // utilisation stays within 0..100 whatever the counters say.
    detail::ClientTracker tracker;
    auto check = [](const detail::EngineUsage& usage) {
        for (const auto& [engine, percent] : usage.percent) {
            if (!(percent >= 0.0 && percent <= 100.0)) std::abort();
        }
    };
    using std::chrono::nanoseconds;
    check(tracker.update("c", record, nanoseconds(1'000'000'000)));
    detail::FdinfoRecord later = record;
    for (auto& [engine, ns] : later.engine_ns) ns += 250'000'000;
    for (auto& [engine, cycles] : later.cycles) cycles += 1000;
    for (auto& [engine, total] : later.total_cycles) total += 2000;
    check(tracker.update("c", later, nanoseconds(2'000'000'000)));
    check(tracker.update("c", record, nanoseconds(3'000'000'000)));
    check(tracker.update("c", record, nanoseconds(3'000'000'000)));
    tracker.end_round();
    tracker.end_round();
    if (tracker.size() != 0) std::abort();
    return 0;
}
