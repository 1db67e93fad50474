// The vocabulary of the event declarations (event_declarations.h) and the
// walks over them. Each event type is declared once (issue 37): its JSON name, its journal tag,
// and per field its JSON key, when the JSON form writes it, whether the
// JSON reader reads it back, and how the journal stores it. A declaration
// is a Declaration<T> specialisation with a constexpr tuple of fields, each
// a member pointer with its forms, in JSON order (the order docs/events.md
// lists them).
//
// What the declarations drive: event_to_json writes the types declared
// with Writer::kDeclared from their fields alone (event_json.cpp), and the
// journal codec encodes and decodes the types declared with
// Codec::kDeclared (journal_event_codec.cpp). The rest keep their own code
// where a derived key or a worded check would not fit a table (gpu_open's
// "flags", connect's "reasons", a decoder's "bad ip version"); the JSON
// reader keeps its per-kind rules and error words (event_parse_bodies.h).
// tests/agent/journal/event_declaration_test.cpp holds every form to every
// declared field: JSON out, JSON in, the journal round trip, the journal's
// declared layout and docs/events.md's field table.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "gpuguard/common/detection.h"
#include "gpuguard/events/event.h"

namespace gpuguard::agent::schema {

// When event_to_json writes a field.
enum class Out : uint8_t {
    kAlways,     // always (an unset optional as null)
    kWhenSet,    // only when not empty, zero, false or unset
    kSometimes,  // as the type's own writer decides (gpu_open's fd on success only)
};

// How the JSON reader takes a field.
enum class In : uint8_t {
    kRead,     // read back under its key
    kDerived,  // derived from other fields (connect's ip_version from its address)
};

// How the journal stores a field, at its place in the record's layout.
enum class Store : uint8_t {
    kValue,     // by its type: unsigned varint, zigzag varint, length-prefixed string, a
                // bool as a 0/1 byte, a list as a count and its elements, an optional
                // as a presence byte and the value
    kByte,      // one byte: a small integer or enum; a bool read back as "not 0"
    kBit,       // a bit of the record's flag byte (a bool, or an enum of two values)
    kIfBit,     // stored only when set, which a bit of the flag byte says: a field
                // added later (older records lack the bit)
    kTrailing,  // stored last; older records end before it (read when bytes are left)
};

// A field's forms, all optional (designated initialisers).
struct Forms {
    std::string_view key{};  // its JSON key, when not the member's name
    Out out = Out::kAlways;
    In in = In::kRead;
    Store store = Store::kValue;
    uint8_t bit = 0;  // kBit, kIfBit: its bit in the flag byte
    // Two values, space separated, a field takes where not every value of its
    // type is valid ("write unlink"): what tests probe it with.
    std::string_view examples{};
};

template <typename S, typename V>
struct Field {
    using Struct = S;
    using Value = V;
    std::string_view name;  // the member's name
    V S::*member;
    Forms forms;

    constexpr std::string_view json_key() const { return forms.key.empty() ? name : forms.key; }
};

template <typename S, typename V>
constexpr Field<S, V> field(std::string_view name, V S::*member, Forms forms = {}) {
    return Field<S, V>{name, member, forms};
}

// Who writes a type's JSON body and who codes its journal record.
enum class Writer : uint8_t { kDeclared, kOwn };
enum class Codec : uint8_t { kDeclared, kOwn };

// The journal record's layout, when it is not the fields' order: member
// names in storage order, kFlagByte where the flag byte goes. Without one,
// the fields are stored in their order, the flag byte at the first kBit or
// kIfBit field.
inline constexpr std::string_view kFlagByte = "(flag byte)";

template <typename... Names>
constexpr std::array<std::string_view, sizeof...(Names)> layout_of(Names... names) {
    return {std::string_view(names)...};
}

// Declaration<T>: for an event type `name` (its JSON type and body key),
// `tag` (its journal tag: never renumber), `writer`, `codec`, `fields` and
// optionally `layout`; for a type inside an event (a list's element, a
// flattened struct) `fields` alone.
template <typename T>
struct Declaration;

template <typename T>
concept Declared = requires {
    Declaration<T>::fields;
};

template <typename T>
concept DeclaredEvent = Declared<T> && requires {
    Declaration<T>::tag;
};

// --- walking the declarations -----------------------------------------------

// Calls fn(field) for each field of T, in declaration (JSON) order.
template <Declared T, typename Fn>
constexpr void for_each_field(Fn&& fn) {
    std::apply([&](const auto&... each) { (fn(each), ...); }, Declaration<T>::fields);
}

// Calls fn(std::integral_constant<size_t, I>{}) for the index I of each
// field of T: for code that needs a field's forms at compile time.
template <Declared T, typename Fn>
constexpr void for_each_field_index(Fn&& fn) {
    constexpr size_t count =
        std::tuple_size_v<std::remove_cvref_t<decltype(Declaration<T>::fields)>>;
    [&]<size_t... I>(std::index_sequence<I...>) { (fn(std::integral_constant<size_t, I>{}), ...); }
    (std::make_index_sequence<count>{});
}

// Calls fn(std::type_identity<T>{}) for each event type T, in EventData's order.
template <typename Fn>
constexpr void for_each_event_type(Fn&& fn) {
    [&]<size_t... I>(std::index_sequence<I...>) {
        (fn(std::type_identity<std::variant_alternative_t<I, EventData>>{}), ...);
    }
    (std::make_index_sequence<std::variant_size_v<EventData>>{});
}

// A field's value is a list of declared elements, or a declared struct flattened into its owner.
template <typename V>
struct ListOf : std::false_type {};
template <typename E>
struct ListOf<std::vector<E>> : std::bool_constant<Declared<E>> {
    using Element = E;
};

// Whether a value counts as unset for Out::kWhenSet and Store::kIfBit.
template <typename V>
constexpr bool is_set(const V& value) {
    if constexpr (requires { value.has_value(); }) {
        return value.has_value();
    } else if constexpr (requires { value.empty(); }) {
        return !value.empty();
    } else {
        return value != V{};
    }
}

// The journal layout of T: for each slot, the index of its field in
// `fields`, or kFlagSlot for the flag byte. Fields stored as kBit have no
// slot of their own.
inline constexpr size_t kFlagSlot = SIZE_MAX;

template <Declared T>
constexpr auto field_names() {
    return std::apply(
        [](const auto&... each) {
            return std::array<std::string_view, sizeof...(each)>{each.name...};
        },
        Declaration<T>::fields);
}

template <Declared T>
constexpr auto field_stores() {
    return std::apply(
        [](const auto&... each) { return std::array<Store, sizeof...(each)>{each.forms.store...}; },
        Declaration<T>::fields);
}

constexpr bool has_bit(Store store) { return store == Store::kBit || store == Store::kIfBit; }

template <Declared T>
constexpr size_t journal_slot_count() {
    if constexpr (requires { Declaration<T>::layout; }) {
        return Declaration<T>::layout.size();
    } else {
        size_t n = 0;
        bool flag_byte = false;
        for (Store store : field_stores<T>()) {
            if (has_bit(store) && !flag_byte) ++n, flag_byte = true;
            if (store != Store::kBit) ++n;
        }
        return n;
    }
}

template <Declared T>
constexpr std::array<size_t, journal_slot_count<T>()> journal_layout() {
    std::array<size_t, journal_slot_count<T>()> slots{};
    constexpr auto names = field_names<T>();
    constexpr auto stores = field_stores<T>();
    if constexpr (requires { Declaration<T>::layout; }) {
        for (size_t s = 0; s < slots.size(); ++s) {
            const std::string_view name = Declaration<T>::layout[s];
            slots[s] = kFlagSlot;
            bool found = name == kFlagByte;
            for (size_t f = 0; f < names.size(); ++f) {
                if (names[f] == name) slots[s] = f, found = true;
            }
            // Reached only in a constant expression: a compile error naming this line.
            if (!found) throw "a journal layout names a member that is not declared";
        }
    } else {
        size_t n = 0;
        bool flag_byte = false;
        for (size_t f = 0; f < stores.size(); ++f) {
            if (has_bit(stores[f]) && !flag_byte) slots[n++] = kFlagSlot, flag_byte = true;
            if (stores[f] != Store::kBit) slots[n++] = f;
        }
    }
    return slots;
}

}  // namespace gpuguard::agent::schema
