// Events in the journal's binary form, tagged by EventTag (codec_primitives.h,
// from each type's declaration; never renumber a tag). Each type is stored
// as its declaration lays it out (gpuguard/events/event_declarations.h),
// but gpu_open and connect, whose decoders check a byte in words of their
// own; tests/agent/journal/event_declaration_test.cpp holds both to the
// declarations.
#include "codec_primitives.h"

namespace gpuguard::agent::journal {
namespace {

// --- events -----------------------------------------------------------------

void encode_task(Writer& w, const TaskInfo& task) {
    w.varint(task.pid);
    w.varint(task.tid);
    w.varint(task.ppid);
    w.varint(task.uid);
    w.varint(task.gid);
    w.varint(task.cgroup_id);
    w.str(task.comm);
}

void decode_task(Reader& r, TaskInfo& task) {
    task.pid = r.uint<uint32_t>();
    task.tid = r.uint<uint32_t>();
    task.ppid = r.uint<uint32_t>();
    task.uid = r.uint<uint32_t>();
    task.gid = r.uint<uint32_t>();
    task.cgroup_id = r.varint();
    r.str(task.comm);
}

// --- declared records (event_declarations.h) ---------------------------------

template <typename T>
void encode_declared(Writer& w, const T& body);
template <typename T>
void decode_declared(Reader& r, T& body);

template <typename V>
inline constexpr bool kUnstorable = false;

// Store::kValue and kTrailing: by the value's type.
template <typename V>
void encode_value(Writer& w, const V& value) {
    if constexpr (std::is_same_v<V, bool>) {
        w.u8(value ? 1 : 0);
    } else if constexpr (std::is_same_v<V, std::string>) {
        w.str(value);
    } else if constexpr (std::is_same_v<V, std::vector<std::string>>) {
        w.strings(value);
    } else if constexpr (std::is_same_v<V, double>) {
        w.f64(value);
    } else if constexpr (std::is_same_v<V, std::optional<uint64_t>>) {
        w.opt_u64(value);
    } else if constexpr (std::is_same_v<V, std::optional<double>>) {
        w.opt_f64(value);
    } else if constexpr (std::is_same_v<V, std::optional<std::string>>) {
        w.str(*value);  // Store::kIfBit only: its bit says it is there
    } else if constexpr (schema::ListOf<V>::value) {
        w.varint(value.size());
        for (const auto& element : value) encode_declared(w, element);
    } else if constexpr (schema::Declared<V>) {
        encode_declared(w, value);  // flattened into its owner
    } else if constexpr (std::is_integral_v<V> && std::is_signed_v<V>) {
        w.svarint(value);
    } else if constexpr (std::is_integral_v<V>) {
        w.varint(value);
    } else {
        static_assert(kUnstorable<V>, "declare how the journal stores this type");
    }
}

template <typename V>
void decode_value(Reader& r, V& value) {
    if constexpr (std::is_same_v<V, bool>) {
        value = r.flag();
    } else if constexpr (std::is_same_v<V, std::string>) {
        r.str(value);
    } else if constexpr (std::is_same_v<V, std::vector<std::string>>) {
        r.strings(value);
    } else if constexpr (std::is_same_v<V, double>) {
        value = r.f64();
    } else if constexpr (std::is_same_v<V, std::optional<uint64_t>>) {
        value = r.opt_u64();
    } else if constexpr (std::is_same_v<V, std::optional<double>>) {
        value = r.opt_f64();
    } else if constexpr (std::is_same_v<V, std::optional<std::string>>) {
        r.str(value.emplace());
    } else if constexpr (schema::ListOf<V>::value) {
        value.resize(r.count());
        for (auto& element : value) decode_declared(r, element);
    } else if constexpr (schema::Declared<V>) {
        decode_declared(r, value);
    } else if constexpr (std::is_same_v<V, int64_t>) {
        value = r.svarint();
    } else if constexpr (std::is_same_v<V, uint64_t>) {
        value = r.varint();
    } else if constexpr (std::is_integral_v<V> && std::is_signed_v<V>) {
        value = r.sint<V>();
    } else if constexpr (std::is_integral_v<V>) {
        value = r.uint<V>();
    } else {
        static_assert(kUnstorable<V>, "declare how the journal stores this type");
    }
}

// The record's flag byte: the kBit fields that are true (an enum: not its
// first value) and the kIfBit fields that are set.
template <typename T>
uint8_t flag_byte_of(const T& body) {
    uint8_t bits = 0;
    schema::for_each_field<T>([&](const auto& field) {
        if (schema::has_bit(field.forms.store) && schema::is_set(body.*field.member)) {
            bits |= field.forms.bit;
        }
    });
    return bits;
}

// One slot of T's layout: field F, or the flag byte.
template <typename T, size_t F>
void encode_slot(Writer& w, const T& body) {
    if constexpr (F == schema::kFlagSlot) {
        w.u8(flag_byte_of(body));
    } else {
        constexpr auto& field = std::get<F>(schema::Declaration<T>::fields);
        const auto& value = body.*field.member;
        if constexpr (field.forms.store == schema::Store::kIfBit) {
            if (schema::is_set(value)) encode_value(w, value);  // older records lack it
        } else if constexpr (field.forms.store == schema::Store::kByte) {
            w.u8(static_cast<uint8_t>(value));
        } else {
            encode_value(w, value);
        }
    }
}

template <typename T, size_t F>
void decode_slot(Reader& r, T& body, uint8_t& bits) {
    if constexpr (F == schema::kFlagSlot) {
        bits = r.u8();
        schema::for_each_field_index<T>([&](auto index) {
            constexpr auto& field =
                std::get<decltype(index)::value>(schema::Declaration<T>::fields);
            if constexpr (field.forms.store == schema::Store::kBit) {
                using Value = typename std::remove_cvref_t<decltype(field)>::Value;
                body.*field.member = static_cast<Value>((bits & field.forms.bit) != 0);
            }
        });
    } else {
        constexpr auto& field = std::get<F>(schema::Declaration<T>::fields);
        auto& value = body.*field.member;
        using Value = std::remove_cvref_t<decltype(value)>;
        if constexpr (field.forms.store == schema::Store::kIfBit) {
            if (bits & field.forms.bit) {
                decode_value(r, value);
            } else {
                value = Value{};
            }
        } else if constexpr (field.forms.store == schema::Store::kTrailing) {
            if (r.remaining() > 0) decode_value(r, value);  // older records end before it
        } else if constexpr (field.forms.store == schema::Store::kByte) {
            const uint8_t byte = r.u8();
            if constexpr (std::is_same_v<Value, bool>) {
                value = byte != 0;
            } else {
                value = static_cast<Value>(byte);
            }
        } else {
            decode_value(r, value);
        }
    }
}

template <typename T>
void encode_declared(Writer& w, const T& body) {
    [&]<size_t... S>(std::index_sequence<S...>) {
        (encode_slot<T, schema::journal_layout<T>()[S]>(w, body), ...);
    }
    (std::make_index_sequence<schema::journal_slot_count<T>()>{});
}

template <typename T>
void decode_declared(Reader& r, T& body) {
    uint8_t bits = 0;
    [&]<size_t... S>(std::index_sequence<S...>) {
        (decode_slot<T, schema::journal_layout<T>()[S]>(r, body, bits), ...);
    }
    (std::make_index_sequence<schema::journal_slot_count<T>()>{});
}

struct EncodeVisitor {
    Writer& w;

    void operator()(const GpuOpen& open) const {
        w.varint(open.major);
        w.varint(open.minor);
        w.svarint(open.result);
        w.svarint(open.dirfd);
        w.varint(open.open_flags);
        w.u8(static_cast<uint8_t>(open.syscall));
        w.u8(open.path_truncated ? 1 : 0);
        w.str(open.path);
    }
    void operator()(const Connect& connect) const {
        w.svarint(connect.fd);
        w.svarint(connect.result);
        w.u8(static_cast<uint8_t>(connect.ip_version));
        w.str(connect.address);
        w.varint(connect.port);
        w.u8(static_cast<uint8_t>((connect.gpu_holder ? 1 : 0) | (connect.watched_port ? 2 : 0) |
                                  (connect.all ? 4 : 0) | (connect.v4_mapped ? 8 : 0) |
                                  (connect.loopback ? 16 : 0) | (connect.domain.empty() ? 0 : 32) |
                                  (connect.watched_tgid ? 64 : 0) |
                                  (connect.watched_addr ? 128 : 0)));
        if (!connect.domain.empty()) w.str(connect.domain);  // bit 32: older records lack it
        if (connect.established) w.u8(1);  // older records, and connects seen, end before it
    }
    // The rest: stored as their declarations lay them out.
    template <schema::DeclaredEvent T>
    void operator()(const T& body) const {
        encode_declared(w, body);
    }
};

EventTag tag_of(const EventData& data) {
    // The variant's order is not the on-disk tag: each declaration gives its own.
    return std::visit(
        [](const auto& body) {
            return static_cast<EventTag>(
                schema::Declaration<std::remove_cvref_t<decltype(body)>>::tag);
        },
        data);
}

// Reuses the variant's alternative when it already holds T (saves allocations
// when a reader decodes many events of one type into the same Event).
template <typename T>
T& emplace(EventData& data) {
    if (auto* existing = std::get_if<T>(&data)) return *existing;
    return data.emplace<T>();
}

void decode_body(Reader& r, EventTag tag, EventData& data) {
    switch (tag) {
        case EventTag::kGpuOpen: {
            auto& open = emplace<GpuOpen>(data);
            open.major = r.uint<uint32_t>();
            open.minor = r.uint<uint32_t>();
            open.result = r.sint<int32_t>();
            open.dirfd = r.sint<int32_t>();
            open.open_flags = r.varint();
            const uint8_t syscall = r.u8();
            if (syscall > static_cast<uint8_t>(OpenSyscall::kCreat)) r.fail("bad open syscall");
            open.syscall = static_cast<OpenSyscall>(syscall);
            open.path_truncated = r.flag();
            r.str(open.path);
            return;
        }
        case EventTag::kConnect: {
            auto& connect = emplace<Connect>(data);
            connect.fd = r.sint<int32_t>();
            connect.result = r.sint<int32_t>();
            connect.ip_version = r.u8();
            if (connect.ip_version != 4 && connect.ip_version != 6) r.fail("bad ip version");
            r.str(connect.address);
            connect.port = r.uint<uint16_t>();
            const uint8_t bits = r.u8();
            connect.gpu_holder = bits & 1;
            connect.watched_port = bits & 2;
            connect.all = bits & 4;
            connect.v4_mapped = bits & 8;
            connect.loopback = bits & 16;
            connect.watched_tgid = bits & 64;
            connect.watched_addr = bits & 128;
            connect.domain.clear();
            if (bits & 32) r.str(connect.domain);
            connect.established = r.remaining() > 0 && (r.u8() & 1) != 0;
            return;
        }
        default:
            break;
    }
    // The rest: read as their declarations lay them out.
    bool known = false;
    schema::for_each_event_type([&]<typename T>(std::type_identity<T>) {
        if constexpr (schema::Declaration<T>::codec == schema::Codec::kDeclared) {
            if (!known && static_cast<uint8_t>(tag) == schema::Declaration<T>::tag) {
                known = true;
                decode_declared(r, emplace<T>(data));
            }
        }
    });
    if (known) return;
    r.fail("unknown event type");
}

}  // namespace

void encode_event(const Event& event, std::string& out) {
    Writer w(out);
    w.u8(static_cast<uint8_t>(tag_of(event.data)));
    w.varint(event.ts_ns);
    encode_task(w, event.task);
    std::visit(EncodeVisitor{w}, event.data);
}

bool decode_event(std::string_view payload, Event& event, std::string& error) {
    Reader r(payload);
    const auto tag = static_cast<EventTag>(r.u8());
    event.ts_ns = r.varint();
    decode_task(r, event.task);
    if (r.ok()) decode_body(r, tag, event.data);
    return finish(r, error);
}

std::optional<uint64_t> peek_event_ts(std::string_view payload) {
    Reader r(payload);
    r.u8();
    const uint64_t ts = r.varint();
    if (!r.ok()) return std::nullopt;
    return ts;
}

}  // namespace gpuguard::agent::journal
