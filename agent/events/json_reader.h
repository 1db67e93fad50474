// How event_parse.cpp and event_parse_bodies.h read a JSON object: the
// two DOMs (simdjson's for every line, nlohmann's to word a bad line's error)
// behind one Node interface, and Reader<Node>, which reads an object's
// fields the same way over either, so a line reads alike whichever parser
// has it (duplicate keys: the last, in both).
#pragma once

#include <algorithm>
#include <bit>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>
#include <simdjson.h>

#include "gpuguard/events/event.h"

namespace gpuguard::agent::json_read {

using json = nlohmann::json;

// Thrown by the readers, turned into a Result where a line is parsed.
struct FieldError {
    std::string field;
    std::string message;
};

// A member name the readers look up: always a literal, whose first 8 bytes
// (zero-padded, little-endian) are worked out as one word at compile time.
// The simdjson side keeps the same word for each member of an object, so one
// compare of words (and of sizes) tells most members apart.
struct Key {
    std::string_view name;
    uint64_t word = 0;

    template <size_t N>
    consteval Key(const char (&text)[N])  // NOLINT: implicit, from literals
        : name(text, N - 1), word(word_of(name)) {}
    operator std::string_view() const { return name; }  // NOLINT

    static constexpr uint64_t word_of(std::string_view text) {
        uint64_t word = 0;
        for (size_t i = 0; i < text.size() && i < sizeof(word); ++i) {
            word |= uint64_t{static_cast<unsigned char>(text[i])} << (8 * i);
        }
        return word;
    }
    // word_of() for a member name of a parsed line: a few loads, no loop.
    static uint64_t runtime_word_of(std::string_view text) {
        static_assert(std::endian::native == std::endian::little);
        const auto* bytes = reinterpret_cast<const unsigned char*>(text.data());
        const size_t size = text.size();
        uint64_t word = 0;
        if (size >= 8) {
            std::memcpy(&word, bytes, 8);
        } else if (size >= 4) {  // two 4-byte loads, overlapping when size < 8
            uint32_t low = 0, high = 0;
            std::memcpy(&low, bytes, 4);
            std::memcpy(&high, bytes + size - 4, 4);
            word = low | (uint64_t{high} << (8 * (size - 4)));
        } else if (size > 0) {  // first, middle and last byte (some the same)
            word = uint64_t{bytes[0]} | (uint64_t{bytes[size / 2]} << (8 * (size / 2))) |
                   (uint64_t{bytes[size - 1]} << (8 * (size - 1)));
        }
        return word;
    }
    // Whether the member name `text`, whose runtime_word_of() is
    // `text_word`, is this name: the words and sizes, then any bytes past 8.
    [[gnu::always_inline]] bool names(std::string_view text, uint64_t text_word) const {
        return text_word == word && text.size() == name.size() &&
               (text.size() <= 8 ||
                std::memcmp(text.data() + 8, name.data() + 8, text.size() - 8) == 0);
    }
};

// A JSON value of nlohmann's DOM.
class NlohmannNode {
  public:
    explicit NlohmannNode(const json& value) : value_(&value) {}

    bool is_null() const { return value_->is_null(); }
    bool is_object() const { return value_->is_object(); }
    bool is_array() const { return value_->is_array(); }
    bool is_string() const { return value_->is_string(); }
    bool is_boolean() const { return value_->is_boolean(); }
    bool is_number() const { return value_->is_number(); }
    bool is_integer() const { return value_->is_number_integer(); }
    std::optional<uint64_t> as_unsigned() const {
        if (!value_->is_number_unsigned()) return std::nullopt;
        return value_->get<uint64_t>();
    }
    int64_t get_integer() const { return value_->get<int64_t>(); }
    double get_double() const { return value_->get<double>(); }
    bool get_bool() const { return value_->get<bool>(); }
    std::string_view get_string() const { return value_->get_ref<const std::string&>(); }
    const char* type_name() const { return value_->type_name(); }
    // An object's members, looked up by key.
    using Fields = const json*;
    void list_fields(Fields& fields) const { fields = value_; }
    std::optional<NlohmannNode> find(Fields object, Key key) const {
        auto found = object->find(key.name);
        if (found == object->end()) return std::nullopt;
        return NlohmannNode(*found);
    }
    template <typename Visit>
    void for_each(Visit visit) const {
        size_t index = 0;
        for (const auto& item : *value_) visit(index++, NlohmannNode(item));
    }
    // Each member of an object, in order (a repeated name: its last value only).
    template <typename Visit>
    void for_each_member(Visit visit) const {
        for (const auto& [key, value] : value_->items())
            visit(std::string_view(key), NlohmannNode(value));
    }
    size_t array_size() const { return value_->size(); }
    const json& raw() const { return *value_; }

  private:
    const json* value_;
};

// Thrown where the simdjson side would word an error: the line goes to
// nlohmann, which words it.
struct Decline {};

// A JSON value of simdjson's DOM. Number kinds map onto nlohmann's: an
// integer literal that fits uint64 is "unsigned" when not negative.
class SimdNode {
  public:
    explicit SimdNode(simdjson::dom::element value) : value_(value) {}

    bool is_null() const { return value_.is_null(); }
    bool is_object() const { return value_.is_object(); }
    bool is_array() const { return value_.is_array(); }
    bool is_string() const { return value_.is_string(); }
    bool is_boolean() const { return value_.is_bool(); }
    bool is_number() const { return value_.is_number(); }
    bool is_integer() const { return value_.is_int64() || value_.is_uint64(); }
    // A non-negative integer in one look at the tape (most fields are).
    std::optional<uint64_t> as_unsigned() const {
        uint64_t number = 0;
        if (value_.get_uint64().get(number) != simdjson::SUCCESS) return std::nullopt;
        return number;
    }
    int64_t get_integer() const {
        // nlohmann wraps an unsigned above INT64_MAX the same way.
        return value_.is_int64() ? int64_t(value_) : static_cast<int64_t>(uint64_t(value_));
    }
    double get_double() const {
        if (value_.is_int64()) return static_cast<double>(int64_t(value_));
        if (value_.is_uint64()) return static_cast<double>(uint64_t(value_));
        return double(value_);
    }
    bool get_bool() const { return bool(value_); }
    std::string_view get_string() const { return std::string_view(value_); }
    const char* type_name() const { throw Decline{}; }  // errors are nlohmann's to word
    // An object's members, listed once: events have a dozen at most (an
    // object with more, hand-written extras, is read by the exact parser).
    // The storage is left uninitialised and filled in place: a Reader is
    // made for every object of every line, and zeroing or copying 24 slots
    // each time cost more than the lookups. (An open-addressed table instead
    // of the scan measured no faster: listing into it cost what the lookups
    // saved.)
    struct Field {
        std::string_view key;
        simdjson::dom::element value;
        uint64_t word;  // Key::runtime_word_of(key)
    };
    static_assert(std::is_trivially_destructible_v<Field>);
    class Fields {
      public:
        Fields() {}  // NOLINT: storage stays uninitialised on purpose
        Fields(const Fields&) = delete;
        Fields& operator=(const Fields&) = delete;
        size_t size() const { return count_; }
        const Field& operator[](size_t i) const {
            return *std::launder(reinterpret_cast<const Field*>(storage_ + i * sizeof(Field)));
        }
        void add(std::string_view key, simdjson::dom::element value) {
            if (count_ == kMax) throw Decline{};
            new (storage_ + count_++ * sizeof(Field)) Field{key, value, Key::runtime_word_of(key)};
        }

      private:
        static constexpr size_t kMax = 24;
        alignas(Field) std::byte storage_[kMax * sizeof(Field)];
        size_t count_ = 0;
    };
    void list_fields(Fields& fields) const {
        for (const auto [key, value] : simdjson::dom::object(value_)) fields.add(key, value);
    }
    // The last member named `key` (searched from the end): nlohmann keeps
    // the last of duplicate keys too.
    std::optional<SimdNode> find(const Fields& object, Key key) const {
        for (size_t i = object.size(); i-- > 0;) {
            const Field& field = object[i];
            if (key.names(field.key, field.word)) return SimdNode(field.value);
        }
        return std::nullopt;
    }
    template <typename Visit>
    void for_each(Visit visit) const {
        size_t index = 0;
        for (simdjson::dom::element item : simdjson::dom::array(value_)) {
            visit(index++, SimdNode(item));
        }
    }
    // Each member of an object, in order (a repeated name: each time).
    template <typename Visit>
    void for_each_member(Visit visit) const {
        for (const auto [key, value] : simdjson::dom::object(value_)) visit(key, SimdNode(value));
    }
    size_t array_size() const { return simdjson::dom::array(value_).size(); }  // from the tape
    const json& raw() const { throw Decline{}; }

  private:
    simdjson::dom::element value_;
};

template <typename Node>
class Reader {
  public:
    // `object` nullopt: an absent optional object, read as {}. The field
    // path for messages ("exec.argv", "telemetry.processes[1].pid") is made
    // only when an error needs it: `parent` must outlive this reader.
    Reader(std::optional<Node> object, const Reader* parent = nullptr, std::string_view key = {},
           size_t index = kNoIndex)
        : object_(object), parent_(parent), key_(key), index_(index) {
        if (object_) object_->list_fields(fields_);
    }

    bool has(Key key) const { return find(key).has_value(); }
    std::optional<Node> find(Key key) const {
        if (!object_) return std::nullopt;
        auto found = object_->find(fields_, key);
        if (!found || found->is_null()) return std::nullopt;
        return found;
    }
    std::string path() const {
        std::string out = parent_ ? parent_->path() : std::string();
        if (!key_.empty()) {
            if (!out.empty()) out += '.';
            out += key_;
        }
        if (index_ != kNoIndex) out += "[" + std::to_string(index_) + "]";
        return out;
    }
    std::string field(std::string_view key) const {
        std::string out = path();
        if (!out.empty()) out += '.';
        out += key;
        return out;
    }

    [[noreturn]] void error(std::string_view key, const std::string& message) const {
        throw FieldError{field(key), message};
    }

    template <typename Int>
    Int integer(Key key, std::optional<Int> fallback = std::nullopt) const {
        return integer_of<Int>(find(key), key, fallback);
    }
    // integer() of `value`, the member `key` found (nullopt: absent or null).
    template <typename Int>
    Int integer_of(const std::optional<Node>& value, std::string_view key,
                   std::optional<Int> fallback = std::nullopt) const {
        if (!value) {
            if (fallback) return *fallback;
            error(key, "missing");
        }
        return to_integer<Int>(*value, key);
    }

    template <typename Int>
    Int to_integer(const Node& value, std::string_view key) const {
        constexpr auto lo = std::numeric_limits<Int>::min();
        constexpr auto hi = std::numeric_limits<Int>::max();
        const auto range = [] { return " " + std::to_string(lo) + ".." + std::to_string(hi); };
        if (const auto unsigned_number = value.as_unsigned()) {
            const auto number = *unsigned_number;
            if (number > static_cast<uint64_t>(hi)) error(key, "expected an integer" + range());
            return static_cast<Int>(number);
        }
        if (value.is_integer()) {
            const auto number = value.get_integer();
            if (number < static_cast<int64_t>(lo) ||
                (number > 0 && static_cast<uint64_t>(number) > static_cast<uint64_t>(hi))) {
                error(key, "expected an integer" + range());
            }
            return static_cast<Int>(number);
        }
        if (value.is_string()) {  // "0xc0104629" for ioctl commands and arguments
            const std::string_view text = value.get_string();
            uint64_t number = 0;
            const bool hex = text.starts_with("0x") || text.starts_with("0X");
            const char* begin = text.data() + (hex ? 2 : 0);
            const char* end = text.data() + text.size();
            auto [ptr, ec] = std::from_chars(begin, end, number, hex ? 16 : 10);
            if (ec != std::errc() || ptr != end || begin == end ||
                number > static_cast<uint64_t>(hi)) {
                error(key, "expected an integer" + range() + ", got \"" + std::string(text) + "\"");
            }
            return static_cast<Int>(number);
        }
        error(key, std::string("expected an integer") + range() + ", got " + value.type_name());
    }

    // A string field as a view into the parsed line: valid while the line's
    // document is, which is as long as this reader.
    std::optional<std::string_view> optional_text(Key key) const {
        return optional_text_of(find(key), key);
    }
    std::optional<std::string_view> optional_text_of(const std::optional<Node>& value,
                                                     std::string_view key) const {
        if (!value) return std::nullopt;
        if (!value->is_string())
            error(key, std::string("expected a string, got ") + value->type_name());
        return value->get_string();
    }
    std::string_view text(Key key, std::optional<std::string_view> fallback = std::nullopt) const {
        return text_of(find(key), key, fallback);
    }
    std::string_view text_of(const std::optional<Node>& value, std::string_view key,
                             std::optional<std::string_view> fallback = std::nullopt) const {
        if (const auto text = optional_text_of(value, key)) return *text;
        if (fallback) return *fallback;
        error(key, "missing");
    }
    std::string string(Key key, std::optional<std::string_view> fallback = std::nullopt) const {
        return std::string(text(key, fallback));
    }

    bool boolean(Key key, bool fallback) const {
        const auto value = find(key);
        if (!value) return fallback;
        if (!value->is_boolean())
            error(key, std::string("expected true or false, got ") + value->type_name());
        return value->get_bool();
    }

    std::optional<double> number(Key key) const {
        const auto value = find(key);
        if (!value) return std::nullopt;
        if (!value->is_number())
            error(key, std::string("expected a number, got ") + value->type_name());
        return value->get_double();
    }

    template <typename Int>
    std::optional<Int> optional_integer(Key key) const {
        return optional_integer_of<Int>(find(key), key);
    }
    template <typename Int>
    std::optional<Int> optional_integer_of(const std::optional<Node>& value,
                                           std::string_view key) const {
        if (!value) return std::nullopt;
        return to_integer<Int>(*value, key);
    }

    // Each string of the list `key` (absent: none), as a view.
    template <typename Visit>
    void texts(Key key, Visit visit) const {
        each_text(key, find(key), visit);
    }
    std::vector<std::string> strings(Key key) const {
        const auto value = find(key);
        std::vector<std::string> out;
        out.reserve(reservable_length(value));  // argv: one allocation, not one per doubling
        each_text(key, value, [&](std::string_view text) { out.emplace_back(text); });
        return out;
    }
    // The length of the list `key`, for reserving (0 when absent or not a
    // list: the read that follows reports that).
    size_t count(Key key) const { return reservable_length(find(key)); }

    // Each object of the list `key` (absent: none), as a Reader named "key[i]".
    template <typename Visit>
    void objects(Key key, Visit visit) const {
        const auto list = find(key);
        if (!list) return;
        if (!list->is_array()) error(key, "expected a list");
        list->for_each([&](size_t index, const Node& item) {
            if (!item.is_object()) error(key, "expected a list of objects");
            visit(Reader(item, this, key, index));
        });
    }

    Reader object(Key key, bool required = true) const {
        return object_of(find(key), key, required);
    }
    Reader object_of(const std::optional<Node>& value, std::string_view key,
                     bool required = true) const {
        if (!is_object_member(value, key, required)) return Reader(std::nullopt, this, key);
        return Reader(*value, this, key);
    }
    // Whether `value`, the member `key` found, is an object (false: absent
    // and not required); else the error object_of() gives.
    bool is_object_member(const std::optional<Node>& value, std::string_view key,
                          bool required) const {
        if (!value) {
            if (required) error(key, "missing");
            return false;
        }
        if (!value->is_object())
            error(key, std::string("expected an object, got ") + value->type_name());
        return true;
    }

  private:
    static constexpr size_t kNoIndex = static_cast<size_t>(-1);

    static size_t reservable_length(const std::optional<Node>& list) {
        return list && list->is_array() ? std::min<size_t>(list->array_size(), 1024) : 0;
    }
    template <typename Visit>
    void each_text(Key key, const std::optional<Node>& list, Visit visit) const {
        if (!list) return;
        if (!list->is_array())
            error(key, std::string("expected a list of strings, got ") + list->type_name());
        list->for_each([&](size_t, const Node& item) {
            if (!item.is_string()) error(key, "expected a list of strings");
            visit(item.get_string());
        });
    }
    std::optional<Node> object_;
    typename Node::Fields fields_{};  // filled only when object_ is set
    const Reader* parent_;
    std::string_view key_;
    size_t index_;
};

}  // namespace gpuguard::agent::json_read
