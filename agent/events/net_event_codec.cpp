#include "gpuguard/events/net_event_codec.h"

#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

#include <arpa/inet.h>

#include "payload.h"

namespace gpuguard::agent {
namespace {

using ojson = nlohmann::ordered_json;
using json = nlohmann::json;

constexpr const char* kSyscalls[] = {"write", "sendto", "sendmsg", "read", "recvfrom", "recvmsg"};
constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string address_text(uint16_t family, const uint8_t* addr) {
    char text[INET6_ADDRSTRLEN] = {};
    // A v4-mapped IPv6 address is shown as the IPv4 one, as for connects.
    static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (family == AF_INET) {
        inet_ntop(AF_INET, addr, text, sizeof(text));
    } else if (std::memcmp(addr, kMapped, sizeof(kMapped)) == 0) {
        inet_ntop(AF_INET, addr + 12, text, sizeof(text));
    } else {
        inet_ntop(AF_INET6, addr, text, sizeof(text));
    }
    return text;
}

struct FieldError {
    std::string message;
};

template <typename T>
T get(const json& body, const char* key, T fallback) {
    const auto found = body.find(key);
    if (found == body.end() || found->is_null()) return fallback;
    // nlohmann converts any number to any arithmetic type, and a float or
    // an integer out of T's range does not fit (undefined for a float):
    // integers must be integers, in range.
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
        const bool fits = found->is_number_unsigned()
                              ? found->template get<uint64_t>() <=
                                    static_cast<uint64_t>(std::numeric_limits<T>::max())
                              : found->is_number_integer() &&
                                    found->template get<int64_t>() >=
                                        static_cast<int64_t>(std::numeric_limits<T>::min()) &&
                                    (std::is_unsigned_v<T> ||
                                     found->template get<int64_t>() <=
                                         static_cast<int64_t>(std::numeric_limits<T>::max()));
        if (!fits) {
            throw FieldError{std::string(key) + ": expected an integer " +
                             std::to_string(std::numeric_limits<T>::min()) + ".." +
                             std::to_string(std::numeric_limits<T>::max())};
        }
    }
    try {
        return found->get<T>();
    } catch (const json::exception&) {
        throw FieldError{std::string(key) + ": wrong type (" + found->type_name() + ")"};
    }
}

template <typename T>
T required(const json& body, const char* key) {
    if (!body.contains(key) || body[key].is_null())
        throw FieldError{std::string(key) + ": missing"};
    return get<T>(body, key, T{});
}

template <typename T>
std::optional<T> optional(const json& body, const char* key) {
    if (!body.contains(key) || body[key].is_null()) return std::nullopt;
    return get<T>(body, key, T{});
}

}  // namespace

std::string base64_encode(std::string_view bytes) {
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    size_t i = 0;
    for (; i + 2 < bytes.size(); i += 3) {
        const uint32_t v = static_cast<uint8_t>(bytes[i]) << 16 |
                           static_cast<uint8_t>(bytes[i + 1]) << 8 |
                           static_cast<uint8_t>(bytes[i + 2]);
        out += kBase64[v >> 18];
        out += kBase64[(v >> 12) & 63];
        out += kBase64[(v >> 6) & 63];
        out += kBase64[v & 63];
    }
    if (i < bytes.size()) {
        uint32_t v = static_cast<uint8_t>(bytes[i]) << 16;
        if (i + 1 < bytes.size()) v |= static_cast<uint8_t>(bytes[i + 1]) << 8;
        out += kBase64[v >> 18];
        out += kBase64[(v >> 12) & 63];
        out += i + 1 < bytes.size() ? kBase64[(v >> 6) & 63] : '=';
        out += '=';
    }
    return out;
}

Result<std::string> base64_decode(std::string_view text) {
    if (text.size() % 4 != 0) return fail(ErrorCode::kParse, "not base64 (length)");
    std::string out;
    out.reserve(text.size() / 4 * 3);
    for (size_t i = 0; i < text.size(); i += 4) {
        uint32_t v = 0;
        int padding = 0;
        for (size_t j = 0; j < 4; ++j) {
            const char c = text[i + j];
            int digit = -1;
            if (c == '=' && i + 4 == text.size() && j >= 2) {
                ++padding;
                digit = 0;
            } else if (padding == 0) {
                const char* at = std::strchr(kBase64, c);
                if (c != '\0' && at) digit = static_cast<int>(at - kBase64);
            }
            if (digit < 0) return fail(ErrorCode::kParse, "not base64");
            v = v << 6 | static_cast<uint32_t>(digit);
        }
        out += static_cast<char>(v >> 16);
        if (padding < 2) out += static_cast<char>((v >> 8) & 0xff);
        if (padding < 1) out += static_cast<char>(v & 0xff);
    }
    return out;
}

Result<Event> decode_net_payload_record(std::span<const std::byte> record) {
    if (record.size() < GG_PAYLOAD_FIXED_SIZE) {
        return fail(ErrorCode::kParse,
                    "net_payload record too short: " + std::to_string(record.size()) +
                        " bytes, expected " + std::to_string(GG_PAYLOAD_FIXED_SIZE));
    }
    gg_payload_event raw;
    std::memcpy(&raw, record.data(), std::min(record.size(), sizeof(raw)));
    if (raw.captured > GG_PAYLOAD_MAX || GG_PAYLOAD_FIXED_SIZE + raw.captured > record.size()) {
        return fail(ErrorCode::kParse, "net_payload record captured " +
                                           std::to_string(raw.captured) + " exceeds the record");
    }
    if (raw.family != AF_INET && raw.family != AF_INET6) {
        return fail(ErrorCode::kParse,
                    "net_payload record with family " + std::to_string(raw.family));
    }
    if (raw.direction > GG_PAYLOAD_IN || raw.syscall > GG_PSYS_RECVMSG) {
        return fail(ErrorCode::kParse, "net_payload record with unknown direction or syscall");
    }
    Event event;
    event.ts_ns = raw.hdr.ts_ns;
    event.task.pid = raw.task.tgid;
    event.task.tid = raw.task.pid;
    event.task.ppid = raw.task.ppid;
    event.task.uid = raw.task.uid;
    event.task.gid = raw.task.gid;
    event.task.cgroup_id = raw.task.cgroup_id;
    event.task.comm = std::string(raw.task.comm, strnlen(raw.task.comm, sizeof(raw.task.comm)));
    NetPayload payload;
    payload.fd = raw.fd;
    payload.direction =
        raw.direction == GG_PAYLOAD_IN ? NetPayload::Direction::kIn : NetPayload::Direction::kOut;
    payload.syscall = kSyscalls[raw.syscall];
    payload.length = raw.len;
    payload.seq = raw.seq;
    payload.flow = raw.flow;
    payload.stream = (raw.flags & GG_PAYLOAD_DGRAM) == 0;
    payload.truncated = (raw.flags & GG_PAYLOAD_TRUNCATED) != 0;
    payload.dns = (raw.flags & GG_PAYLOAD_DNS) != 0;
    payload.followed = (raw.flags & GG_PAYLOAD_FOLLOWED) != 0;
    payload.local_address = address_text(raw.family, raw.local_addr);
    payload.local_port = raw.local_port;
    payload.remote_address = address_text(raw.family, raw.remote_addr);
    payload.remote_port = raw.remote_port;
    payload.data.assign(raw.data, raw.captured);
    event.data = std::move(payload);
    return event;
}

ojson net_payload_to_json(const NetPayload& payload) {
    return ojson{{"fd", payload.fd},
                 {"direction", payload.direction == NetPayload::Direction::kIn ? "in" : "out"},
                 {"syscall", payload.syscall},
                 {"length", payload.length},
                 {"seq", payload.seq},
                 {"flow", payload.flow},
                 {"transport", payload.stream ? "tcp" : "udp"},
                 {"dns", payload.dns},
                 {"followed", payload.followed},
                 {"truncated", payload.truncated},
                 {"local_address", payload.local_address},
                 {"local_port", payload.local_port},
                 {"remote_address", payload.remote_address},
                 {"remote_port", payload.remote_port},
                 {"data", base64_encode(payload.data)}};
}

ojson stratum_to_json(const Stratum& stratum) {
    const auto optional_number = [](const std::optional<double>& value) {
        return value ? ojson(*value) : ojson(nullptr);
    };
    return ojson{{"flow", stratum.flow},
                 {"protocol", stratum.protocol},
                 {"pool_address", stratum.pool_address},
                 {"pool_port", stratum.pool_port},
                 {"pool_domain", stratum.pool_domain},
                 {"login", stratum.login},
                 {"agent", stratum.agent},
                 {"methods", stratum.methods},
                 {"messages", stratum.messages},
                 {"shares_submitted", stratum.shares_submitted},
                 {"shares_accepted", stratum.shares_accepted},
                 {"shares_rejected", stratum.shares_rejected},
                 {"share_hashes", stratum.share_hashes},
                 {"difficulty_updates", stratum.difficulty_updates},
                 {"hash_rate", optional_number(stratum.hash_rate)},
                 {"reported_hash_rate", optional_number(stratum.reported_hash_rate)}};
}

Result<NetPayload> net_payload_from_json(const json& body) {
    try {
        NetPayload payload;
        payload.fd = get<int32_t>(body, "fd", -1);
        const auto direction = required<std::string>(body, "direction");
        if (direction != "in" && direction != "out") {
            throw FieldError{"direction: expected \"in\" or \"out\""};
        }
        payload.direction =
            direction == "in" ? NetPayload::Direction::kIn : NetPayload::Direction::kOut;
        payload.syscall = get<std::string>(body, "syscall", direction == "in" ? "read" : "write");
        payload.seq = get<uint32_t>(body, "seq", 0);
        payload.flow = get<uint64_t>(body, "flow", 0);
        const auto transport = get<std::string>(body, "transport", "tcp");
        if (transport != "tcp" && transport != "udp") {
            throw FieldError{"transport: expected \"tcp\" or \"udp\""};
        }
        payload.stream = transport == "tcp";
        payload.followed = get<bool>(body, "followed", false);
        payload.truncated = get<bool>(body, "truncated", false);
        payload.local_address = get<std::string>(body, "local_address", "");
        payload.local_port = get<uint16_t>(body, "local_port", 0);
        payload.remote_address = get<std::string>(body, "remote_address", "");
        payload.remote_port = get<uint16_t>(body, "remote_port", 0);
        payload.dns = get<bool>(body, "dns", payload.remote_port == 53);
        auto data = base64_decode(required<std::string>(body, "data"));
        if (!data) throw FieldError{"data: " + data.error().message};
        payload.data = std::move(*data);
        payload.length = get<uint32_t>(body, "length", static_cast<uint32_t>(payload.data.size()));
        return payload;
    } catch (const FieldError& error) {
        return fail(ErrorCode::kParse, error.message);
    }
}

Result<Stratum> stratum_from_json(const json& body) {
    try {
        Stratum stratum;
        stratum.flow = get<uint64_t>(body, "flow", 0);
        stratum.protocol = required<std::string>(body, "protocol");
        stratum.pool_address = get<std::string>(body, "pool_address", "");
        stratum.pool_port = get<uint16_t>(body, "pool_port", 0);
        stratum.pool_domain = get<std::string>(body, "pool_domain", "");
        stratum.login = get<std::string>(body, "login", "");
        stratum.agent = get<std::string>(body, "agent", "");
        stratum.methods = get<std::vector<std::string>>(body, "methods", {});
        stratum.messages = get<std::vector<std::string>>(body, "messages", {});
        stratum.shares_submitted = get<uint64_t>(body, "shares_submitted", 0);
        stratum.shares_accepted = get<uint64_t>(body, "shares_accepted", 0);
        stratum.shares_rejected = get<uint64_t>(body, "shares_rejected", 0);
        stratum.share_hashes = get<double>(body, "share_hashes", 0);
        stratum.difficulty_updates = get<uint64_t>(body, "difficulty_updates", 0);
        stratum.hash_rate = optional<double>(body, "hash_rate");
        stratum.reported_hash_rate = optional<double>(body, "reported_hash_rate");
        return stratum;
    } catch (const FieldError& error) {
        return fail(ErrorCode::kParse, error.message);
    }
}

}  // namespace gpuguard::agent
