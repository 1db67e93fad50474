// Reading events back from their JSON Lines form (docs/events.md): what
// `gpuguard replay` and `journal import` read. Strict about what defines an
// event, lenient about what can be derived, and every error names the field.
//
// Two JSON parsers read the same way (Reader<Node>): simdjson for speed, and
// nlohmann for everything simdjson declines (invalid JSON, net_payload and
// stratum events) and for every error, so messages and results are those of
// one parser whichever way a line goes (duplicate keys: the last, in both).
#include <algorithm>
#include <bit>
#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstring>
#include <limits>
#include <new>
#include <type_traits>

#include <arpa/inet.h>
#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <simdjson.h>

#include "gpuguard/events/event_json.h"
#include "gpuguard/events/net_event_codec.h"

namespace gpuguard::agent {
namespace {

using json = nlohmann::json;

// Thrown inside this file only, turned into a Result at the boundary.
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
    static std::optional<NlohmannNode> find(Fields object, Key key) {
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

// Makes the simdjson path give the line to nlohmann.
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
    // An object's members, listed once: events have a dozen at most. The
    // storage is left uninitialised and filled in place: a Reader is made for
    // every object of every line, and zeroing or copying 24 slots each time
    // cost more than the lookups. (An open-addressed table instead of the
    // scan measured no faster: listing into it cost what the lookups saved.)
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
    static std::optional<SimdNode> find(const Fields& object, Key key) {
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
        auto found = Node::find(fields_, key);
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

    // The object as nlohmann's DOM, for the readers that take one.
    const json& raw() const {
        static const json kEmpty = json::object();
        return object_ ? object_->raw() : kEmpty;
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

// "195:0" or major/minor fields.
template <typename Node>
void read_device(const Reader<Node>& reader, uint32_t& major, uint32_t& minor) {
    const auto major_value = reader.find("major");
    const auto minor_value = reader.find("minor");
    if (major_value || minor_value) {
        if (!major_value) reader.error("major", "missing");
        major = reader.template to_integer<uint32_t>(*major_value, "major");
        if (!minor_value) reader.error("minor", "missing");
        minor = reader.template to_integer<uint32_t>(*minor_value, "minor");
        return;
    }
    const auto device = reader.optional_text("device");
    if (!device) reader.error("device", "missing (or give major and minor)");
    const std::string_view text = *device;
    const auto colon = text.find(':');
    auto parse = [&](std::string_view part, uint32_t& out) {
        auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), out);
        return ec == std::errc() && ptr == part.data() + part.size() && !part.empty();
    };
    if (colon == std::string_view::npos || !parse(text.substr(0, colon), major) ||
        !parse(text.substr(colon + 1), minor)) {
        reader.error("device", "expected \"major:minor\", got \"" + std::string(text) + "\"");
    }
}

// "error" and "errno" give a failed call's result when "result"/"fd" is absent.
template <typename Node>
int32_t read_result(const Reader<Node>& reader, Key key) {
    if (const auto result = reader.template optional_integer<int32_t>(key)) return *result;
    if (const auto err = reader.template optional_integer<uint32_t>("errno")) {
        // 0..2^31: the negated result of every int32 failure, INT32_MIN included.
        if (*err > 2147483648u) reader.error("errno", "expected an integer 0..2147483648");
        return static_cast<int32_t>(-static_cast<int64_t>(*err));
    }
    return 0;
}

template <typename Node>
GpuOpen read_gpu_open(const Reader<Node>& reader) {
    GpuOpen open;
    static constexpr std::pair<const char*, OpenSyscall> kSyscalls[] = {
        {"openat", OpenSyscall::kOpenat},
        {"openat2", OpenSyscall::kOpenat2},
        {"open", OpenSyscall::kOpen},
        {"creat", OpenSyscall::kCreat}};
    const std::string_view syscall = reader.text("syscall", "openat");
    bool known = false;
    for (const auto& [name, value] : kSyscalls) {
        if (syscall == name) {
            open.syscall = value;
            known = true;
        }
    }
    if (!known)
        reader.error("syscall", "expected openat, openat2, open or creat, got \"" +
                                    std::string(syscall) + "\"");
    open.path = reader.string("path", "");
    open.path_truncated = reader.boolean("path_truncated", false);
    open.dirfd = reader.template integer<int32_t>("dirfd", AT_FDCWD);
    open.open_flags = reader.template integer<uint64_t>("open_flags", O_RDWR);
    open.result = read_result(reader, "fd");
    if (open.result >= 0) read_device(reader, open.major, open.minor);
    return open;
}

template <typename Node>
GpuIoctl read_gpu_ioctl(const Reader<Node>& reader) {
    GpuIoctl ioctl;
    read_device(reader, ioctl.major, ioctl.minor);
    ioctl.fd = reader.template integer<int32_t>("fd", -1);
    ioctl.cmd = reader.template integer<uint32_t>("cmd");
    ioctl.arg = reader.template integer<uint64_t>("arg", 0);
    return ioctl;
}

bool is_loopback(const std::string& address, int ip_version) {
    if (ip_version == 4) {
        in_addr addr{};
        return inet_pton(AF_INET, address.c_str(), &addr) == 1 && (ntohl(addr.s_addr) >> 24) == 127;
    }
    return address == "::1";
}

template <typename Node>
Connect read_connect(const Reader<Node>& reader) {
    Connect connect;
    connect.fd = reader.template integer<int32_t>("fd", -1);
    connect.address = reader.string("address");
    in6_addr v6{};
    in_addr v4{};
    if (inet_pton(AF_INET, connect.address.c_str(), &v4) == 1) {
        connect.ip_version = 4;
    } else if (inet_pton(AF_INET6, connect.address.c_str(), &v6) == 1) {
        connect.ip_version = 6;
    } else {
        reader.error("address",
                     "expected an IPv4 or IPv6 address, got \"" + connect.address + "\"");
    }
    if (const auto version = reader.template optional_integer<int>("ip_version");
        version && *version != connect.ip_version) {
        reader.error("ip_version", "does not match the address");
    }
    connect.port = reader.template integer<uint16_t>("port");
    connect.result = read_result(reader, "result");
    connect.v4_mapped = reader.boolean("v4_mapped", false);
    connect.loopback = reader.boolean("loopback", is_loopback(connect.address, connect.ip_version));
    connect.domain = reader.string("domain", "");
    reader.texts("reasons", [&](std::string_view reason) {
        if (reason == "gpu_holder") {
            connect.gpu_holder = true;
        } else if (reason == "watched_port") {
            connect.watched_port = true;
        } else if (reason == "connect_all") {
            connect.all = true;
        } else {
            reader.error("reasons", "unknown reason \"" + std::string(reason) +
                                        "\" (gpu_holder, watched_port, connect_all)");
        }
    });
    return connect;
}

template <typename Node>
Exec read_exec(const Reader<Node>& reader) {
    Exec exec;
    exec.filename = reader.string("filename");
    exec.argv = reader.strings("argv");
    exec.argv_truncated = reader.boolean("argv_truncated", false);
    exec.filename_truncated = reader.boolean("filename_truncated", false);
    exec.old_tid = reader.template integer<uint32_t>("old_tid", 0);
    return exec;
}

template <typename Node>
Exit read_exit(const Reader<Node>& reader) {
    Exit exit;
    if (const auto status = reader.template optional_integer<uint32_t>("status")) {
        exit.status = *status;
    } else if (const auto signal = reader.template optional_integer<uint32_t>("signal")) {
        exit.status = *signal & 0x7f;
    } else {
        exit.status = (reader.template integer<uint32_t>("exit_code", 0) & 0xff) << 8;
    }
    exit.held_gpu = reader.boolean("held_gpu", false);
    return exit;
}

template <typename Node>
Telemetry read_telemetry(const Reader<Node>& reader) {
    Telemetry telemetry;
    telemetry.gpu_index = reader.template integer<uint32_t>("gpu_index");
    telemetry.vendor = reader.string("vendor", "");
    telemetry.model = reader.string("model", "");
    telemetry.devices = reader.strings("devices");
    telemetry.utilization_percent = reader.number("utilization_percent");
    telemetry.memory_used_bytes = reader.template optional_integer<uint64_t>("memory_used_bytes");
    telemetry.memory_total_bytes = reader.template optional_integer<uint64_t>("memory_total_bytes");
    telemetry.processes.reserve(reader.count("processes"));
    reader.objects("processes", [&](const Reader<Node>& item) {
        ProcessGpuUsage usage;
        usage.pid = item.template integer<uint32_t>("pid");
        usage.memory_bytes = item.template optional_integer<uint64_t>("memory_bytes");
        usage.compute_percent = item.number("compute_percent");
        telemetry.processes.push_back(usage);
    });
    return telemetry;
}

template <typename Node>
ProcessSnapshot read_snapshot(const Reader<Node>& reader) {
    ProcessSnapshot snapshot;
    snapshot.exe = reader.string("exe", "");
    snapshot.argv = reader.strings("argv");
    snapshot.user = reader.string("user", "");
    snapshot.cgroup_path = reader.string("cgroup_path", "");
    snapshot.container_id = reader.string("container_id", "");
    snapshot.container_runtime = reader.string("container_runtime", "");
    reader.objects("gpus", [&](const Reader<Node>& item) {
        SnapshotGpu gpu;
        read_device(item, gpu.major, gpu.minor);
        gpu.fd = item.template integer<int32_t>("fd", -1);
        snapshot.gpus.push_back(gpu);
    });
    return snapshot;
}

template <typename Node>
KillNow read_kill_now(const Reader<Node>& reader) {
    KillNow kill;
    kill.trigger = reader.string("trigger");
    kill.match = reader.string("match", "file");
    kill.dev = reader.template integer<uint64_t>("dev", 0);
    kill.ino = reader.template integer<uint64_t>("ino", 0);
    kill.rule_id = reader.template integer<uint32_t>("rule_id", 0);
    kill.signal_result = reader.template integer<int32_t>("signal_result", 0);
    if (reader.has("device")) read_device(reader, kill.major, kill.minor);
    return kill;
}

template <typename Node>
ExeScan read_exe_scan(const Reader<Node>& reader) {
    ExeScan scan;
    scan.path = reader.string("path", "");
    scan.sha256 = reader.string("sha256", "");
    scan.size = reader.template integer<uint64_t>("size", 0);
    scan.rules = reader.strings("rules");
    scan.signature_ids = reader.strings("signature_ids");
    scan.error = reader.string("error", "");
    return scan;
}

template <typename Node>
ProcessIo read_process_io(const Reader<Node>& reader) {
    ProcessIo io;
    io.file_write_bytes = reader.template optional_integer<uint64_t>("file_write_bytes");
    io.net_send_bytes = reader.template optional_integer<uint64_t>("net_send_bytes");
    io.net_sends = reader.template optional_integer<uint64_t>("net_sends");
    return io;
}

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
// through a Reader.
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
    const auto object = [&](bool required = true) {
        return top.object_of(payload_value, type, required);
    };
    if (type == "gpu_open") {
        parsed.event.data = read_gpu_open(object());
    } else if (type == "gpu_ioctl") {
        parsed.event.data = read_gpu_ioctl(object());
    } else if (type == "connect") {
        parsed.event.data = read_connect(object());
    } else if (type == "exec") {
        parsed.event.data = read_exec(object());
    } else if (type == "fork") {
        const Reader<Node> fork = object();
        parsed.event.data = Fork{fork.template integer<uint32_t>("child_pid"),
                                 fork.boolean("inherited_gpu", false)};
    } else if (type == "exit") {
        parsed.event.data = read_exit(object(false));
    } else if (type == "telemetry") {
        parsed.event.data = read_telemetry(object());
    } else if (type == "process_snapshot") {
        parsed.event.data = read_snapshot(object());
    } else if (type == "kill_now") {
        parsed.event.data = read_kill_now(object());
    } else if (type == "exe_scan") {
        parsed.event.data = read_exe_scan(object());
    } else if (type == "net_payload") {
        auto payload = net_payload_from_json(object().raw());
        if (!payload) throw FieldError{std::string(type), payload.error().message};
        parsed.event.data = std::move(*payload);
    } else if (type == "stratum") {
        auto stratum = stratum_from_json(object().raw());
        if (!stratum) throw FieldError{std::string(type), stratum.error().message};
        parsed.event.data = std::move(*stratum);
    } else if (type == "process_io") {
        parsed.event.data = read_process_io(object());
    } else {
        top.error("type", "unknown event type \"" + std::string(type) + "\" (" +
                              join(event_type_names(), ", ") + ")");
    }
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
