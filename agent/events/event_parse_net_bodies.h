// The network bodies of the JSON Lines events (net_payload, stratum,
// loopback_peer, flow, pool_probe; docs/events.md), over either DOM of
// json_reader.h. They keep
// their own reading rules (NetFields below). Included by
// event_parse_bodies.h alone.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "gpuguard/events/event_json.h"
#include "json_reader.h"

namespace gpuguard::agent::json_read::bodies {

// The net-intelligence bodies (net_payload, stratum) keep the rules they were
// first read with (nlohmann's get<T>()): an integer only as a JSON integer in
// range, a number only as a JSON number, no list but of strings, and errors
// worded "key: message" under the body's name ("net_payload: fd: expected an
// integer -2147483648..2147483647").
template <typename Node>
class NetFields {
  public:
    explicit NetFields(const Reader<Node>& reader) : reader_(reader) {}

    template <typename Int>
    Int integer(Key key, Int fallback) const {
        const auto value = reader_.find(key);
        if (!value) return fallback;
        constexpr auto lo = std::numeric_limits<Int>::min();
        constexpr auto hi = std::numeric_limits<Int>::max();
        if (const auto number = value->as_unsigned()) {
            if (*number <= static_cast<uint64_t>(hi)) return static_cast<Int>(*number);
        } else if (value->is_integer()) {
            const int64_t number = value->get_integer();  // negative: the rest are unsigned
            if (number >= static_cast<int64_t>(lo)) return static_cast<Int>(number);
        }
        error(key, "expected an integer " + std::to_string(lo) + ".." + std::to_string(hi));
    }
    std::string string(Key key, std::string_view fallback) const {
        const auto value = reader_.find(key);
        if (!value) return std::string(fallback);
        if (!value->is_string()) wrong_type(key, *value);
        return std::string(value->get_string());
    }
    std::string required_string(Key key) const {
        if (!reader_.has(key)) error(key, "missing");
        return string(key, "");
    }
    bool boolean(Key key, bool fallback) const {
        const auto value = reader_.find(key);
        if (!value) return fallback;
        if (!value->is_boolean()) wrong_type(key, *value);
        return value->get_bool();
    }
    std::optional<double> number(Key key) const {
        const auto value = reader_.find(key);
        if (!value) return std::nullopt;
        if (!value->is_number()) wrong_type(key, *value);
        return value->get_double();
    }
    std::vector<std::string> strings(Key key) const {
        const auto value = reader_.find(key);
        std::vector<std::string> out;
        if (!value) return out;
        if (!value->is_array()) wrong_type(key, *value);
        out.reserve(value->array_size());
        value->for_each([&](size_t, const Node& item) {
            if (!item.is_string()) wrong_type(key, *value);
            out.emplace_back(item.get_string());
        });
        return out;
    }
    [[noreturn]] void error(std::string_view key, const std::string& message) const {
        throw FieldError{reader_.path(), std::string(key) + ": " + message};
    }

  private:
    [[noreturn]] void wrong_type(std::string_view key, const Node& value) const {
        error(key, std::string("wrong type (") + value.type_name() + ")");
    }
    const Reader<Node>& reader_;
};

template <typename Node>
NetPayload read_net_payload(const Reader<Node>& reader) {
    const NetFields fields(reader);
    NetPayload payload;
    payload.fd = fields.template integer<int32_t>("fd", -1);
    const std::string direction = fields.required_string("direction");
    if (direction != "in" && direction != "out") {
        fields.error("direction", "expected \"in\" or \"out\"");
    }
    payload.direction =
        direction == "in" ? NetPayload::Direction::kIn : NetPayload::Direction::kOut;
    payload.syscall = fields.string("syscall", direction == "in" ? "read" : "write");
    payload.seq = fields.template integer<uint32_t>("seq", 0);
    payload.flow = fields.template integer<uint64_t>("flow", 0);
    const std::string transport = fields.string("transport", "tcp");
    if (transport != "tcp" && transport != "udp") {
        fields.error("transport", "expected \"tcp\" or \"udp\"");
    }
    payload.stream = transport == "tcp";
    payload.followed = fields.boolean("followed", false);
    payload.truncated = fields.boolean("truncated", false);
    payload.local_address = fields.string("local_address", "");
    payload.local_port = fields.template integer<uint16_t>("local_port", 0);
    payload.remote_address = fields.string("remote_address", "");
    payload.remote_port = fields.template integer<uint16_t>("remote_port", 0);
    payload.dns = fields.boolean("dns", payload.remote_port == 53);
    auto data = base64_decode(fields.required_string("data"));
    if (!data) fields.error("data", data.error().message);
    payload.data = std::move(*data);
    payload.length =
        fields.template integer<uint32_t>("length", static_cast<uint32_t>(payload.data.size()));
    return payload;
}

template <typename Node>
Stratum read_stratum(const Reader<Node>& reader) {
    const NetFields fields(reader);
    Stratum stratum;
    stratum.flow = fields.template integer<uint64_t>("flow", 0);
    stratum.protocol = fields.required_string("protocol");
    stratum.pool_address = fields.string("pool_address", "");
    stratum.pool_port = fields.template integer<uint16_t>("pool_port", 0);
    stratum.pool_domain = fields.string("pool_domain", "");
    stratum.login = fields.string("login", "");
    stratum.agent = fields.string("agent", "");
    stratum.methods = fields.strings("methods");
    stratum.messages = fields.strings("messages");
    stratum.shares_submitted = fields.template integer<uint64_t>("shares_submitted", 0);
    stratum.shares_accepted = fields.template integer<uint64_t>("shares_accepted", 0);
    stratum.shares_rejected = fields.template integer<uint64_t>("shares_rejected", 0);
    stratum.share_hashes = fields.number("share_hashes").value_or(0);
    stratum.difficulty_updates = fields.template integer<uint64_t>("difficulty_updates", 0);
    stratum.hash_rate = fields.number("hash_rate");
    stratum.reported_hash_rate = fields.number("reported_hash_rate");
    stratum.hash_rate_low = fields.number("hash_rate_low");
    stratum.hash_rate_high = fields.number("hash_rate_high");
    return stratum;
}

template <typename Node>
LoopbackPeer read_loopback_peer(const Reader<Node>& reader) {
    LoopbackPeer peer;
    peer.port = reader.template integer<uint16_t>("port");
    peer.server_pid = reader.template integer<uint32_t>("server_pid");
    peer.server_comm = reader.string("server_comm", "");
    peer.server_exe = reader.string("server_exe", "");
    peer.established = reader.boolean("established", false);
    peer.server_upstreams = reader.strings("server_upstreams");
    return peer;
}

template <typename Node>
Flow read_flow(const Reader<Node>& reader) {
    Flow flow;
    flow.flow = reader.template integer<uint64_t>("flow", 0);
    flow.address = reader.string("address");
    flow.port = reader.template integer<uint16_t>("port");
    flow.age_ns = reader.template integer<uint64_t>("age_ns");
    flow.since_send_ns = reader.template integer<uint64_t>("since_send_ns", flow.age_ns);
    flow.since_receive_ns = reader.template integer<uint64_t>("since_receive_ns", flow.age_ns);
    flow.bytes_out = reader.template integer<uint64_t>("bytes_out", 0);
    flow.bytes_in = reader.template integer<uint64_t>("bytes_in", 0);
    flow.sends = reader.template integer<uint64_t>("sends", 0);
    flow.receives = reader.template integer<uint64_t>("receives", 0);
    flow.send_bursts = reader.template integer<uint64_t>("send_bursts", 0);
    flow.receive_bursts = reader.template integer<uint64_t>("receive_bursts", 0);
    flow.pushes = reader.template integer<uint64_t>("pushes", 0);
    flow.replies = reader.template integer<uint64_t>("replies", 0);
    const auto gaps = [&](Key key, std::vector<FlowGap>& out) {
        reader.objects(key, [&](const Reader<Node>& item) {
            FlowGap gap;
            gap.from_s = item.template integer<uint32_t>("from_s");
            if (gap.from_s == 0 || gap.from_s > 128 || (gap.from_s & (gap.from_s - 1)) != 0) {
                item.error("from_s", "expected 1, 2, 4, 8, 16, 32, 64 or 128, got " +
                                         std::to_string(gap.from_s));
            }
            gap.count = item.template integer<uint32_t>("count");
            out.push_back(gap);
        });
    };
    gaps("send_gaps", flow.send_gaps);
    gaps("receive_gaps", flow.receive_gaps);
    return flow;
}

// pool_probe: the general Reader's rules (as loopback_peer), not NetFields'.
template <typename Node>
PoolProbe read_pool_probe(const Reader<Node>& reader) {
    PoolProbe probe;
    probe.address = reader.string("address");
    probe.port = reader.template integer<uint16_t>("port");
    probe.tls = reader.boolean("tls", false);
    probe.server_name = reader.string("server_name", "");
    probe.rule = reader.string("rule", "");
    probe.protocol = reader.string("protocol", "");
    probe.sent = reader.string("sent", "");
    probe.answer = reader.string("answer", "");
    probe.pool = reader.boolean("pool", false);
    probe.verdict = reader.string("verdict");
    probe.attempts = reader.strings("attempts");
    probe.duration_ms = reader.template integer<uint32_t>("duration_ms", 0);
    return probe;
}

}  // namespace gpuguard::agent::json_read::bodies
