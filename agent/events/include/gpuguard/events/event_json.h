// JSON Lines form of events (docs/events.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "gpuguard/common/result.h"
#include "gpuguard/events/event.h"

namespace gpuguard::agent {

// Offset to add to a CLOCK_MONOTONIC timestamp to get CLOCK_REALTIME, read now.
int64_t monotonic_to_realtime_offset_ns();

// One JSON object, no trailing newline. `realtime_offset_ns` turns ts_ns into
// the "time" field (RFC 3339, UTC, nanoseconds).
std::string event_to_json(const Event& event, int64_t realtime_offset_ns);

// The "stratum" body of event_to_json, alone: what `gpuguard ps` shows of a
// session.
nlohmann::ordered_json stratum_to_json(const Stratum& stratum);
// A container's JSON object ({"id", "runtime", then the details that are
// known}): the "container" event's body, and `gpuguard ps`'s container field.
nlohmann::ordered_json container_to_json(const Container& container);

// An event read back from its JSON form, with its wall-clock time when the
// line has one.
struct ParsedEvent {
    Event event;
    std::optional<int64_t> time_unix_ns;  // from "time"
};

// Parses one line of the JSON form (what event_to_json writes, or a
// hand-written event: only "type", "ts_ns", "process.pid" and the fields that
// define the event are required; derived fields may be left out). `where`
// names the input in errors ("events.jsonl:12"); a failure is kParse and
// names the field, e.g. "events.jsonl:12: connect.port: expected an integer
// 0..65535".
Result<ParsedEvent> event_from_json(std::string_view line, std::string_view where);

// The seconds of the last "YYYY-MM-DDTHH:MM:SS" parse_rfc3339 read, for a
// reader of many times in order: consecutive events mostly share them.
struct Rfc3339Seconds {
    static constexpr size_t kPrefix = 19;
    char prefix[kPrefix] = {};
    int64_t seconds = 0;
    bool valid = false;
};

// event_from_json for many lines: keeps its parser's buffers from one line
// to the next (one per thread). Same results and errors. simdjson reads every
// line; nlohmann re-reads only a line that fails, to word its error.
class EventJsonReader {
  public:
    EventJsonReader();
    ~EventJsonReader();
    EventJsonReader(EventJsonReader&&) noexcept;
    EventJsonReader& operator=(EventJsonReader&&) noexcept;

    // Bytes after a line that parse() may read when told the line is
    // padded (it then parses in place instead of copying the line).
    static constexpr size_t kPadding = 64;

    Result<ParsedEvent> parse(std::string_view line, std::string_view where, bool padded = false);

    // Lines the fast path (simdjson) handed to the exact one (nlohmann): bad
    // lines, to word their error, and the rare valid line simdjson's parser
    // refuses (an integer literal past 64 bits). Every kind is read by the
    // fast path.
    uint64_t exact_parses() const { return exact_parses_; }

  private:
    struct Parser;  // simdjson's, kept out of this header
    std::unique_ptr<Parser> parser_;
    Rfc3339Seconds last_time_;
    uint64_t exact_parses_ = 0;
};

// The errno name of a failed call's negative result ("ECONNREFUSED"), or the
// errno in decimal when it has no name.
std::string errno_name(int32_t result);

// "2026-11-21T23:49:29.227805351Z" -> nanoseconds since the epoch (UTC 'Z'
// or a +hh:mm offset; fraction optional). `last`, when given, is consulted
// and updated.
std::optional<int64_t> parse_rfc3339(std::string_view text, Rfc3339Seconds* last = nullptr);
// The inverse, always UTC with 9 fraction digits.
std::string format_rfc3339(int64_t unix_ns);

// RFC 4648 base64 (the JSON form of captured bytes). A failure is kParse,
// "not base64" or "not base64 (length)".
std::string base64_encode(std::string_view bytes);
Result<std::string> base64_decode(std::string_view text);

// "O_RDWR|O_CLOEXEC" style rendering of open(2) flags; unknown bits as hex.
std::string open_flags_to_string(uint64_t flags);

}  // namespace gpuguard::agent
