// The network event types' declarations (event_declarations.h says how
// to declare one): connect, net_payload, stratum, loopback_peer, flow,
// pool_probe.
#pragma once

#include "gpuguard/events/event.h"
#include "gpuguard/events/event_schema.h"

namespace gpuguard::agent::schema {

template <>
struct Declaration<Connect> {
    static constexpr std::string_view name = "connect";
    static constexpr uint8_t tag = 3;
    static constexpr Writer writer = Writer::kOwn;  // "reasons", "errno", "error"
    static constexpr Codec codec = Codec::kOwn;     // "bad ip version"
    static constexpr std::tuple fields{
        field("fd", &Connect::fd),
        field("ip_version", &Connect::ip_version,
              {.in = In::kDerived, .store = Store::kByte, .examples = "4 6"}),
        field("address", &Connect::address, {.examples = "198.51.100.7 198.51.100.8"}),
        field("port", &Connect::port),
        field("v4_mapped", &Connect::v4_mapped, {.store = Store::kBit, .bit = 8}),
        field("loopback", &Connect::loopback, {.store = Store::kBit, .bit = 16}),
        field("gpu_holder", &Connect::gpu_holder,
              {.key = "reasons", .store = Store::kBit, .bit = 1}),
        field("watched_port", &Connect::watched_port,
              {.key = "reasons", .store = Store::kBit, .bit = 2}),
        field("all", &Connect::all, {.key = "reasons", .store = Store::kBit, .bit = 4}),
        field("watched_tgid", &Connect::watched_tgid,
              {.key = "reasons", .store = Store::kBit, .bit = 64}),
        field("watched_addr", &Connect::watched_addr,
              {.key = "reasons", .store = Store::kBit, .bit = 128}),
        field("result", &Connect::result),
        field("domain", &Connect::domain,
              {.out = Out::kWhenSet, .store = Store::kIfBit, .bit = 32}),
        field("established", &Connect::established, {.key = "reasons", .store = Store::kTrailing}),
    };
    static constexpr auto layout = layout_of("fd", "result", "ip_version", "address", "port",
                                             kFlagByte, "domain", "established");
};

template <>
struct Declaration<NetPayload> {
    static constexpr std::string_view name = "net_payload";
    static constexpr uint8_t tag = 11;
    static constexpr Writer writer = Writer::kOwn;  // "in"/"out", "tcp"/"udp", base64
    static constexpr Codec codec = Codec::kDeclared;
    static constexpr std::tuple fields{
        field("fd", &NetPayload::fd),
        field("direction", &NetPayload::direction, {.store = Store::kBit, .bit = 1}),
        field("syscall", &NetPayload::syscall),
        field("length", &NetPayload::length),
        field("seq", &NetPayload::seq),
        field("flow", &NetPayload::flow),
        field("stream", &NetPayload::stream, {.key = "transport", .store = Store::kBit, .bit = 2}),
        field("dns", &NetPayload::dns, {.store = Store::kBit, .bit = 8}),
        field("followed", &NetPayload::followed, {.store = Store::kBit, .bit = 16}),
        field("truncated", &NetPayload::truncated, {.store = Store::kBit, .bit = 4}),
        field("local_address", &NetPayload::local_address),
        field("local_port", &NetPayload::local_port),
        field("remote_address", &NetPayload::remote_address),
        field("remote_port", &NetPayload::remote_port),
        field("data", &NetPayload::data),
    };
    static constexpr auto layout =
        layout_of("fd", kFlagByte, "syscall", "length", "seq", "flow", "local_address",
                  "local_port", "remote_address", "remote_port", "data");
};

template <>
struct Declaration<Stratum> {
    static constexpr std::string_view name = "stratum";
    static constexpr uint8_t tag = 12;
    static constexpr Writer writer = Writer::kDeclared;
    static constexpr Codec codec = Codec::kDeclared;
    static constexpr std::tuple fields{
        field("flow", &Stratum::flow),
        field("protocol", &Stratum::protocol),
        field("pool_address", &Stratum::pool_address),
        field("pool_port", &Stratum::pool_port),
        field("pool_domain", &Stratum::pool_domain),
        field("login", &Stratum::login),
        field("agent", &Stratum::agent),
        field("methods", &Stratum::methods),
        field("messages", &Stratum::messages),
        field("shares_submitted", &Stratum::shares_submitted),
        field("shares_accepted", &Stratum::shares_accepted),
        field("shares_rejected", &Stratum::shares_rejected),
        field("share_hashes", &Stratum::share_hashes),
        field("difficulty_updates", &Stratum::difficulty_updates),
        field("hash_rate", &Stratum::hash_rate),
        field("reported_hash_rate", &Stratum::reported_hash_rate),
        field("hash_rate_low", &Stratum::hash_rate_low,
              {.out = Out::kWhenSet, .store = Store::kTrailing}),
        field("hash_rate_high", &Stratum::hash_rate_high,
              {.out = Out::kWhenSet, .store = Store::kTrailing}),
    };
};

template <>
struct Declaration<LoopbackPeer> {
    static constexpr std::string_view name = "loopback_peer";
    static constexpr uint8_t tag = 26;
    static constexpr Writer writer = Writer::kDeclared;
    static constexpr Codec codec = Codec::kDeclared;
    static constexpr std::tuple fields{
        field("port", &LoopbackPeer::port),
        field("server_pid", &LoopbackPeer::server_pid),
        field("server_comm", &LoopbackPeer::server_comm),
        field("server_exe", &LoopbackPeer::server_exe),
        field("established", &LoopbackPeer::established),
        field("server_upstreams", &LoopbackPeer::server_upstreams,
              {.examples = "203.0.113.5:443 [2001:db8::5]:3333"}),
    };
};

template <>
struct Declaration<FlowGap> {
    static constexpr std::tuple fields{
        field("from_s", &FlowGap::from_s, {.examples = "1 128"}),
        field("count", &FlowGap::count),
    };
};

template <>
struct Declaration<Flow> {
    static constexpr std::string_view name = "flow";
    static constexpr uint8_t tag = 27;
    static constexpr Writer writer = Writer::kDeclared;
    static constexpr Codec codec = Codec::kDeclared;
    static constexpr std::tuple fields{
        field("flow", &Flow::flow),
        field("address", &Flow::address, {.examples = "198.51.100.7 2001:db8::7"}),
        field("port", &Flow::port),
        field("age_ns", &Flow::age_ns),
        field("since_send_ns", &Flow::since_send_ns),
        field("since_receive_ns", &Flow::since_receive_ns),
        field("bytes_out", &Flow::bytes_out),
        field("bytes_in", &Flow::bytes_in),
        field("sends", &Flow::sends),
        field("receives", &Flow::receives),
        field("send_bursts", &Flow::send_bursts),
        field("receive_bursts", &Flow::receive_bursts),
        field("pushes", &Flow::pushes),
        field("replies", &Flow::replies),
        field("send_gaps", &Flow::send_gaps),
        field("receive_gaps", &Flow::receive_gaps),
    };
};

template <>
struct Declaration<PoolProbe> {
    static constexpr std::string_view name = "pool_probe";
    static constexpr uint8_t tag = 28;
    static constexpr Writer writer = Writer::kDeclared;
    static constexpr Codec codec = Codec::kDeclared;
    static constexpr std::tuple fields{
        field("address", &PoolProbe::address, {.examples = "198.51.100.7 2001:db8::7"}),
        field("port", &PoolProbe::port),
        field("tls", &PoolProbe::tls),
        field("server_name", &PoolProbe::server_name, {.out = Out::kWhenSet}),
        field("rule", &PoolProbe::rule),
        field("protocol", &PoolProbe::protocol, {.out = Out::kWhenSet}),
        field("sent", &PoolProbe::sent, {.out = Out::kWhenSet}),
        field("answer", &PoolProbe::answer, {.out = Out::kWhenSet}),
        field("pool", &PoolProbe::pool),
        field("verdict", &PoolProbe::verdict),
        field("attempts", &PoolProbe::attempts),
        field("duration_ms", &PoolProbe::duration_ms),
    };
};

}  // namespace gpuguard::agent::schema
