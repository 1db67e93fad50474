// Reading events back from their JSON Lines form (docs/events.md): what
// `gpuguard replay` and `journal import` read. Strict about what defines an
// event, lenient about what can be derived, and every error names the field.
//
// simdjson reads every line of every kind; a line it cannot take (invalid
// JSON, a bad field, or an integer literal past 64 bits, which only nlohmann
// reads) goes to nlohmann through the same Reader<Node> (json_reader.h),
// which words the error, so messages are those of one parser whichever way a
// line goes. The bodies of the kinds are read in event_parse_bodies.h.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>

#include <nlohmann/json.hpp>
#include <simdjson.h>

#include "event_parse_bodies.h"
#include "gpuguard/events/event_json.h"
#include "json_reader.h"

namespace gpuguard::agent {
namespace {

using namespace json_read;

int digits(std::string_view text, size_t pos, size_t count) {
    int value = 0;
    for (size_t i = pos; i < pos + count; ++i) {
        if (i >= text.size() || text[i] < '0' || text[i] > '9') return -1;
        value = value * 10 + (text[i] - '0');
    }
    return value;
}

// Seconds since the epoch of "YYYY-MM-DDTHH:MM:SS" (the first 19 bytes, not
// checked here), as if UTC; nullopt when a field is out of range.
std::optional<int64_t> civil_seconds(std::string_view text) {
    if (text[4] != '-' || text[7] != '-' ||
        (text[10] != 'T' && text[10] != 't' && text[10] != ' ') || text[13] != ':' ||
        text[16] != ':') {
        return std::nullopt;
    }
    const int year = digits(text, 0, 4), month = digits(text, 5, 2), day = digits(text, 8, 2);
    const int hour = digits(text, 11, 2), minute = digits(text, 14, 2),
              second = digits(text, 17, 2);
    if (year < 0 || month < 1 || month > 12 || day < 1 || day > 31 || hour < 0 || hour > 23 ||
        minute < 0 || minute > 59 || second < 0 || second > 60) {
        return std::nullopt;
    }
    // timegm() without its cost: days from the civil date (H. Hinnant's
    // algorithm), linear in every field as timegm's normalisation is.
    const int64_t y = month <= 2 ? year - 1 : year;
    const int64_t era = (y >= 0 ? y : y - 399) / 400;
    const int64_t year_of_era = y - era * 400;
    const int64_t day_of_year = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1;
    const int64_t day_of_era =
        year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    const int64_t days = era * 146097 + day_of_era - 719468;
    return days * 86400 + hour * 3600 + minute * 60 + second;
}

}  // namespace

std::optional<int64_t> parse_rfc3339(std::string_view text, Rfc3339Seconds* last) {
    // YYYY-MM-DDTHH:MM:SS[.fraction](Z|+hh:mm|-hh:mm)
    constexpr size_t kCivil = Rfc3339Seconds::kPrefix;
    if (text.size() < 20) return std::nullopt;
    std::optional<int64_t> civil;
    if (last && last->valid && std::memcmp(last->prefix, text.data(), kCivil) == 0) {
        civil = last->seconds;  // events of one second share it: most of a busy stream
    } else {
        civil = civil_seconds(text);
        if (!civil) return std::nullopt;
        if (last) {
            std::memcpy(last->prefix, text.data(), kCivil);
            last->seconds = *civil;
            last->valid = true;
        }
    }
    size_t pos = kCivil;
    int64_t nanos = 0;
    if (pos < text.size() && text[pos] == '.') {
        ++pos;
        int count = 0;
        while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
            if (count < 9) nanos = nanos * 10 + (text[pos] - '0');
            ++count;
            ++pos;
        }
        if (count == 0) return std::nullopt;
        for (int i = count; i < 9; ++i) nanos *= 10;
    }
    int64_t offset_seconds = 0;
    if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z')) {
        ++pos;
    } else if (pos + 6 == text.size() && (text[pos] == '+' || text[pos] == '-') &&
               text[pos + 3] == ':') {
        const int oh = digits(text, pos + 1, 2), om = digits(text, pos + 4, 2);
        if (oh < 0 || om < 0) return std::nullopt;
        offset_seconds = (oh * 3600 + om * 60) * (text[pos] == '-' ? -1 : 1);
        pos += 6;
    } else {
        return std::nullopt;
    }
    if (pos != text.size()) return std::nullopt;
    // Wider than int64 on the way: 1677 and 2262 are where nanoseconds end,
    // and a time outside them is not one this reader can give.
    const __int128 unix_ns = static_cast<__int128>(*civil - offset_seconds) * 1'000'000'000 + nanos;
    if (unix_ns < std::numeric_limits<int64_t>::min() ||
        unix_ns > std::numeric_limits<int64_t>::max()) {
        return std::nullopt;
    }
    return static_cast<int64_t>(unix_ns);
}

namespace {

// Whether the member name `key`, whose Key::runtime_word_of() is `word`, is `name`.
[[gnu::always_inline]] inline bool is_named(std::string_view key, uint64_t word, const Key& name) {
    return name.names(key, word);
}

// `value` as the member found so far under its name: the last one wins and
// null reads as absent, as Reader::find() has them.
template <typename Node>
void take_member(std::optional<Node>& found, const Node& value) {
    if (value.is_null()) {
        found.reset();
    } else {
        found = value;
    }
}

// The event in `root` (the line's object); throws FieldError, or Decline from
// the simdjson side. The members every line has (its head and the process)
// are read in one pass over each object: a lookup per member cost more. The
// names are an if chain on purpose: a table or a fold over them compiled to
// 2-8 % more instructions. The payload, one member among many kinds, is read
// by read_body() (event_parse_bodies.h).
template <typename Node>
ParsedEvent read_event(const Node& root, Rfc3339Seconds* last_time = nullptr) {
    std::optional<Node> version, type_value, ts_value, time_value, process_value;
    root.for_each_member([&](std::string_view key, const Node& value) {
        const uint64_t word = Key::runtime_word_of(key);
        if (is_named(key, word, "type")) {
            take_member(type_value, value);
        } else if (is_named(key, word, "ts_ns")) {
            take_member(ts_value, value);
        } else if (is_named(key, word, "time")) {
            take_member(time_value, value);
        } else if (is_named(key, word, "process")) {
            take_member(process_value, value);
        } else if (is_named(key, word, "v")) {
            take_member(version, value);
        }
    });
    const Reader<Node> top(std::nullopt);  // names the fields in messages
    ParsedEvent parsed;
    if (const auto number = top.template optional_integer_of<int>(version, "v");
        number && *number != 1) {
        top.error("v", "unsupported version " + version->raw().dump() + " (this agent reads 1)");
    }
    const std::string_view type = top.text_of(type_value, "type");
    parsed.event.ts_ns = top.template integer_of<uint64_t>(ts_value, "ts_ns");
    if (const auto time = top.optional_text_of(time_value, "time")) {
        parsed.time_unix_ns = parse_rfc3339(*time, last_time);
        if (!parsed.time_unix_ns) {
            top.error("time", "expected RFC 3339, got \"" + std::string(*time) + "\"");
        }
    }
    const bool agent_made = type == "telemetry";
    std::optional<Node> pid, tid, ppid, uid, gid, comm, cgroup_id;
    if (top.is_object_member(process_value, "process", !agent_made)) {
        process_value->for_each_member([&](std::string_view key, const Node& value) {
            const uint64_t word = Key::runtime_word_of(key);
            if (is_named(key, word, "pid")) {
                take_member(pid, value);
            } else if (is_named(key, word, "tid")) {
                take_member(tid, value);
            } else if (is_named(key, word, "ppid")) {
                take_member(ppid, value);
            } else if (is_named(key, word, "uid")) {
                take_member(uid, value);
            } else if (is_named(key, word, "gid")) {
                take_member(gid, value);
            } else if (is_named(key, word, "comm")) {
                take_member(comm, value);
            } else if (is_named(key, word, "cgroup_id")) {
                take_member(cgroup_id, value);
            }
        });
    }
    const Reader<Node> process(std::nullopt, &top, "process");
    TaskInfo& task = parsed.event.task;
    task.pid = process.template integer_of<uint32_t>(
        pid, "pid", agent_made ? std::optional<uint32_t>(0) : std::nullopt);
    task.tid = process.template integer_of<uint32_t>(tid, "tid", task.pid);
    task.ppid = process.template integer_of<uint32_t>(ppid, "ppid", 0);
    task.uid = process.template integer_of<uint32_t>(uid, "uid", 0);
    task.gid = process.template integer_of<uint32_t>(gid, "gid", 0);
    task.comm = process.text_of(comm, "comm", "");
    task.cgroup_id = process.template integer_of<uint64_t>(cgroup_id, "cgroup_id", 0);

    // The payload: the member named as the type.
    std::optional<Node> payload_value;
    root.for_each_member([&](std::string_view key, const Node& value) {
        if (key == type) take_member(payload_value, value);
    });
    read_body(type, top, payload_value, parsed.event.data);
    return parsed;
}

Result<ParsedEvent> nlohmann_event_from_json(std::string_view line, std::string_view where) {
    const std::string prefix = std::string(where) + ": ";
    json root = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (root.is_discarded()) return fail(ErrorCode::kParse, prefix + "not valid JSON");
    if (!root.is_object()) return fail(ErrorCode::kParse, prefix + "expected a JSON object");
    try {
        return read_event(NlohmannNode(root));
    } catch (const FieldError& error) {
        return fail(ErrorCode::kParse, prefix + error.field + ": " + error.message);
    } catch (const json::exception& error) {
        return fail(ErrorCode::kParse, prefix + error.what());
    }
}

}  // namespace

struct EventJsonReader::Parser {
    simdjson::dom::parser parser;
};

EventJsonReader::EventJsonReader() : parser_(std::make_unique<Parser>()) {}
EventJsonReader::~EventJsonReader() = default;
EventJsonReader::EventJsonReader(EventJsonReader&&) noexcept = default;
EventJsonReader& EventJsonReader::operator=(EventJsonReader&&) noexcept = default;

static_assert(EventJsonReader::kPadding >= simdjson::SIMDJSON_PADDING);

Result<ParsedEvent> EventJsonReader::parse(std::string_view line, std::string_view where,
                                           bool padded) {
    simdjson::dom::element root;
    if (parser_->parser.parse(line.data(), line.size(), /*realloc_if_needed=*/!padded).get(root) ==
            simdjson::SUCCESS &&
        root.is_object()) {
        try {
            return read_event(SimdNode(root), &last_time_);
        } catch (const FieldError&) {
        } catch (const Decline&) {
        } catch (const simdjson::simdjson_error&) {
        }
    }
    // Declined, or an error to report: nlohmann words it.
    ++exact_parses_;
    return nlohmann_event_from_json(line, where);
}

Result<ParsedEvent> event_from_json(std::string_view line, std::string_view where) {
    return EventJsonReader().parse(line, where);
}

}  // namespace gpuguard::agent
