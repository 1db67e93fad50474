// Each event declared once (gpuguard/events/event_declarations.h): every
// declared field of every event type, and of the types inside events, is
// probed with two values and must reach every form — the JSON written, the
// JSON read back, the journal round trip — and docs/events.md's table for
// its event; every member of the structs is declared; the journal layouts
// and tags are consistent.
#include <algorithm>
#include <bit>
#include <charconv>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <typeinfo>

#include <gtest/gtest.h>

#include "gpuguard/events/event_declarations.h"
#include "gpuguard/events/event_json.h"
#include "gpuguard/journal/journal_codec.h"
#include "tests/agent/journal/journal_fixtures.h"

namespace gpuguard::agent::schema {
namespace {

// Two different valid values for a field: its declared examples, else two
// values of its type.
template <typename V>
std::pair<V, V> probe_values(std::string_view examples) {
    if constexpr (std::is_same_v<V, std::string> ||
                  (std::is_integral_v<V> && !std::is_same_v<V, bool>)) {
        if (!examples.empty()) {
            const size_t space = examples.find(' ');
            const std::string_view a = examples.substr(0, space), b = examples.substr(space + 1);
            if constexpr (std::is_same_v<V, std::string>) {
                return {std::string(a), std::string(b)};
            } else {
                V x{}, y{};
                std::from_chars(a.data(), a.data() + a.size(), x);
                std::from_chars(b.data(), b.data() + b.size(), y);
                return {x, y};
            }
        }
    }
    if constexpr (std::is_same_v<V, bool>) {
        return {false, true};
    } else if constexpr (std::is_enum_v<V>) {
        return {static_cast<V>(0), static_cast<V>(1)};
    } else if constexpr (std::is_integral_v<V>) {
        return {3, 5};
    } else if constexpr (std::is_same_v<V, double>) {
        return {1.5, 2.5};
    } else if constexpr (std::is_same_v<V, std::string>) {
        return {"probe-a", "probe-b"};
    } else if constexpr (std::is_same_v<V, std::vector<std::string>>) {
        return {{}, {"probe-a", "probe-b"}};
    } else if constexpr (std::is_same_v<V, std::optional<std::string>>) {
        return {std::nullopt, "probe-b"};
    } else if constexpr (requires {
                             typename V::value_type;
                             V{}.has_value();
                         }) {
        return {std::nullopt, typename V::value_type(5)};
    } else {
        static_assert(sizeof(V) == 0, "give the probe values of this type");
    }
}

// The backticked words of each "### `name` ..." section's table rows.
std::map<std::string, std::set<std::string>> documented_keys() {
    std::ifstream in(std::string(GPUGUARD_SOURCE_DIR) + "/docs/events.md");
    std::map<std::string, std::set<std::string>> keys;
    const std::regex heading("^### `([a-z_]+)`.*");
    const std::regex word("`([a-z_0-9]+)`");
    std::string line, section;
    while (std::getline(in, line)) {
        std::smatch match;
        if (std::regex_match(line, match, heading)) {
            section = match[1];
        } else if (line.starts_with("#")) {
            section.clear();
        } else if (!section.empty() && line.starts_with("|")) {
            for (std::sregex_iterator it(line.begin(), line.end(), word), end; it != end; ++it) {
                keys[section].insert((*it)[1]);
            }
        }
    }
    return keys;
}

std::string json_of(const Event& event) { return event_to_json(event, 0); }

std::optional<Event> through_json(const Event& event) {
    auto parsed = event_from_json(json_of(event), "probe");
    if (!parsed) {
        ADD_FAILURE() << parsed.error().message;
        return std::nullopt;
    }
    return parsed->event;
}

std::optional<Event> through_journal(const Event& event) {
    std::string bytes;
    journal::encode_event(event, bytes);
    Event decoded;
    std::string error;
    if (!journal::decode_event(bytes, decoded, error)) {
        ADD_FAILURE() << error;
        return std::nullopt;
    }
    return decoded;
}

class Probe {
  public:
    Probe(const Event& base, std::string_view type, const std::set<std::string>& documented)
        : base_(base), type_(type), documented_(documented) {}

    // Probes one field reached through `access` (an event -> the field's value).
    template <typename V, typename Access>
    void field(std::string_view label, std::string_view key, const Forms& forms, Access access) {
        SCOPED_TRACE(std::string(type_) + "." + std::string(label));
        const auto [a, b] = probe_values<V>(forms.examples);
        Event with_a = base_, with_b = base_;
        access(with_a) = a;
        access(with_b) = b;
        EXPECT_NE(json_of(with_a), json_of(with_b)) << "not in the JSON written";
        for (const auto& [event, value] : {std::pair{&with_a, a}, std::pair{&with_b, b}}) {
            if (forms.in == In::kRead) {  // a derived one need not match the others alone
                if (auto back = through_json(*event)) {
                    EXPECT_EQ(access(*back), value) << "not read back from JSON";
                }
            }
            if (auto decoded = through_journal(*event)) {
                EXPECT_EQ(access(*decoded), value) << "not kept by the journal";
            }
        }
        EXPECT_TRUE(documented_.contains(std::string(key)))
            << "`" << key << "` is not in docs/events.md's table for " << type_;
        ++probed_;
    }

    // Every field of T, reached through `owner` (an event -> the T holding them).
    template <typename T, typename Owner>
    void fields_of(Owner owner) {
        for_each_field<T>([&](const auto& decl) {
            using V = typename std::remove_cvref_t<decltype(decl)>::Value;
            const auto access = [ owner, member = decl.member ](auto& event) -> auto& {
                return owner(event).*member;
            };
            if constexpr (Declared<V>) {  // flattened
                fields_of<V>(access);
            } else if constexpr (ListOf<V>::value) {
                // A list of one element, each of its fields probed in turn.
                using Element = typename ListOf<V>::Element;
                const auto element = [access](auto& event) -> auto& {
                    auto& list = access(event);
                    return list.at(0);
                };
                const Event saved = base_;
                access(base_) = V{Element{}};
                fields_of<Element>(element);
                base_ = saved;
                EXPECT_TRUE(documented_.contains(std::string(decl.json_key())))
                    << "`" << decl.json_key() << "` is not in docs/events.md's table for " << type_;
            } else {
                field<V>(decl.name, decl.json_key(), decl.forms, access);
            }
        });
    }

    int probed() const { return probed_; }

  private:
    Event base_;
    std::string_view type_;
    const std::set<std::string>& documented_;
    int probed_ = 0;
};

TEST(EventDeclaration, every_declared_field_reaches_every_form_and_the_docs) {
    const auto docs = documented_keys();
    const auto fixtures = testing::every_event_type();
    int probed = 0;
    for_each_event_type([&]<typename T>(std::type_identity<T>) {
        const std::string name(Declaration<T>::name);
        const auto base = std::find_if(fixtures.begin(), fixtures.end(), [](const Event& event) {
            return std::holds_alternative<T>(event.data);
        });
        ASSERT_NE(base, fixtures.end()) << name << ": add it to testing::every_event_type()";
        const auto documented = docs.find(name);
        ASSERT_NE(documented, docs.end()) << "docs/events.md has no ### `" << name << "` table";
        Probe probe(*base, name, documented->second);
        probe.fields_of<T>([](auto& event) -> auto& { return std::get<T>(event.data); });
        probed += probe.probed();
    });
    EXPECT_GT(probed, 150);
}

// How many members an aggregate has: the most initialisers it takes.
struct AnyValue {
    template <typename T>
    operator T() const;
};

template <typename T, typename... Values>
constexpr size_t member_count() {
    if constexpr (requires { T{Values{}..., AnyValue{}}; }) {
        return member_count<T, Values..., AnyValue>();
    } else {
        return sizeof...(Values);
    }
}

template <typename T>
constexpr size_t declared_count() {
    return std::tuple_size_v<std::remove_cvref_t<decltype(Declaration<T>::fields)>>;
}

template <typename T>
void expect_every_member_declared() {
    EXPECT_EQ(member_count<T>(), declared_count<T>())
        << typeid(T).name() << ": declare the new member in event_declarations.h";
    for_each_field<T>([](const auto& decl) {
        using V = typename std::remove_cvref_t<decltype(decl)>::Value;
        if constexpr (Declared<V>) expect_every_member_declared<V>();
        if constexpr (ListOf<V>::value) expect_every_member_declared<typename ListOf<V>::Element>();
    });
}

TEST(EventDeclaration, every_member_of_every_event_is_declared) {
    for_each_event_type(
        []<typename T>(std::type_identity<T>) { expect_every_member_declared<T>(); });
}

template <typename T>
void expect_a_consistent_layout(std::set<uint8_t>& tags) {
    SCOPED_TRACE(std::string(Declaration<T>::name));
    EXPECT_TRUE(tags.insert(Declaration<T>::tag).second) << "journal tag used twice";
    const auto stores = field_stores<T>();
    std::map<size_t, int> slots_of_field;
    int flag_bytes = 0;
    for (size_t slot : journal_layout<T>()) {
        if (slot == kFlagSlot) {
            ++flag_bytes;
        } else {
            ++slots_of_field[slot];
        }
    }
    uint8_t bits = 0;
    bool any_bit = false;
    for (size_t f = 0; f < stores.size(); ++f) {
        const bool bit_only = stores[f] == Store::kBit;
        EXPECT_EQ(slots_of_field[f], bit_only ? 0 : 1) << field_names<T>()[f] << ": its slots";
        if (has_bit(stores[f])) {
            any_bit = true;
            for_each_field<T>([&](const auto& decl) {
                if (decl.name != field_names<T>()[f]) return;
                EXPECT_EQ(std::popcount(decl.forms.bit), 1) << decl.name << ": one bit";
                EXPECT_EQ(bits & decl.forms.bit, 0) << decl.name << ": its bit is taken";
                bits |= decl.forms.bit;
            });
        }
    }
    // Trailing fields are the layout's tail (older records end before each
    // one in turn): nothing stored after the first of them is not trailing.
    bool in_tail = false;
    for (size_t f : journal_layout<T>()) {
        if (f == kFlagSlot) {
            EXPECT_FALSE(in_tail) << "the flag byte after a trailing field";
            continue;
        }
        if (stores[f] == Store::kTrailing) in_tail = true;
        EXPECT_TRUE(!in_tail || stores[f] == Store::kTrailing)
            << field_names<T>()[f] << ": after a trailing field, not trailing";
    }
    EXPECT_EQ(flag_bytes, any_bit ? 1 : 0) << "one flag byte when a field has a bit";
}

TEST(EventDeclaration, journal_layouts_and_tags_are_consistent) {
    std::set<uint8_t> tags;
    for_each_event_type(
        [&]<typename T>(std::type_identity<T>) { expect_a_consistent_layout<T>(tags); });
    EXPECT_EQ(tags.size(), std::variant_size_v<EventData>);
}

TEST(EventDeclaration, names_are_the_event_type_names) {
    std::vector<std::string> declared;
    for_each_event_type(
        [&]<typename T>(std::type_identity<T>) { declared.emplace_back(Declaration<T>::name); });
    EXPECT_EQ(declared, event_type_names());
}

}  // namespace
}  // namespace gpuguard::agent::schema
