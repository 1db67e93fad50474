// What a process sends to a proxy on this host: the first messages of each
// of its connections to a loopback address are read as a proxy handshake
// (SOCKS5, SOCKS4/4a, HTTP CONNECT). The target it asks for is a peer of
// its own, judged like a direct connection (a new connection, its port and
// name against the signatures, opaque_peer), with the tunnelled stream's
// first bytes (a TLS ClientHello: SNI, ALPN, JA4) as that peer's. A miner
// behind XMRig's `-x 127.0.0.1:1080`, Tor's SocksPort or an HTTP proxy is
// thus judged by where it really goes. From the events alone: replay reads
// the same.
#include <algorithm>
#include <charconv>

#include "evidence_book.h"
#include "gpuguard/common/ip_address.h"
#include "gpuguard/netintel/proxy_request.h"

namespace gpuguard::agent {
namespace {

// Messages a handshake may take before its request (a SOCKS5 greeting, a
// username/password exchange): the payload programs sample four a flow.
constexpr size_t kHandshakeMessages = 4;
constexpr size_t kMaxLoopbackFlows = 16;
// A forwarder's own connections that may carry its client's stream: one
// (socat, an SSH -L tunnel) or a couple (Tor's guards).
constexpr size_t kMaxForwarderUpstreams = 2;

}  // namespace

Peer* EvidenceBook::forwarded_first_bytes(ProcessEvidence& evidence, Peer spoken) {
    // A peer a forwarder on that port carries (record_loopback_peer) takes them.
    Peer* changed = nullptr;
    for (Peer& peer : evidence.peers) {
        if (peer.via_port == spoken.port && peer.via_flow == 0 && peer.protocol.empty()) {
            take_first_bytes(peer, spoken);
            changed = &peer;
        }
    }
    auto& kept = evidence.loopback_first_bytes;
    kept.push_back(std::move(spoken));
    if (kept.size() > kMaxLoopbackFlows) kept.erase(kept.begin());
    if (changed) evidence.dirty = true;
    return changed;
}

size_t EvidenceBook::record_loopback_peer(uint32_t pid, uint64_t ts_ns, const LoopbackPeer& link) {
    ProcessEvidence& evidence = processes_[pid];
    // A handshake through that port said where the client goes already.
    const bool asked = std::any_of(evidence.peers.begin(), evidence.peers.end(), [&](auto& peer) {
        return peer.via_port == link.port && peer.via_flow != 0;
    });
    // A server with many connections of its own (a shared proxy, a cluster
    // daemon) is not carrying this client's alone.
    if (asked || link.server_upstreams.empty() ||
        link.server_upstreams.size() > kMaxForwarderUpstreams) {
        return 0;
    }
    // What the client sent on its flow to that port: the stream the forwarder carries.
    const auto spoken =
        std::find_if(evidence.loopback_first_bytes.rbegin(), evidence.loopback_first_bytes.rend(),
                     [&](const Peer& first) { return first.port == link.port; });
    size_t added = 0;
    for (const std::string& upstream : link.server_upstreams) {
        const size_t colon = upstream.rfind(':');
        uint16_t port = 0;
        if (colon == std::string::npos ||
            std::from_chars(upstream.data() + colon + 1, upstream.data() + upstream.size(), port)
                    .ec != std::errc{}) {
            continue;
        }
        std::string address = upstream.substr(0, colon);
        if (address.starts_with('[') && address.ends_with(']')) {
            address = address.substr(1, address.size() - 2);
        }
        const bool known =
            std::any_of(evidence.peers.begin(), evidence.peers.end(), [&](auto& peer) {
                return peer.address == address && peer.port == port && peer.via_port == link.port;
            });
        if (known) continue;
        Peer peer;
        peer.ts_ns = ts_ns;
        peer.address = std::move(address);
        peer.port = port;
        peer.via = "pid " + std::to_string(link.server_pid) + " (" + link.server_comm +
                   ") listening on loopback port " + std::to_string(link.port);
        peer.via_port = link.port;
        if (spoken != evidence.loopback_first_bytes.rend()) {
            take_first_bytes(peer, *spoken);
        }
        evidence.peers.push_back(std::move(peer));
        ++added;
        if (!link.established) evidence.connect_ts.push_back(ts_ns);
    }
    while (evidence.peers.size() > kMaxPeers) evidence.peers.erase(evidence.peers.begin());
    while (evidence.connect_ts.size() > kMaxConnects) {
        evidence.connect_ts.erase(evidence.connect_ts.begin());
    }
    if (added) evidence.dirty = true;
    return std::min(added, evidence.peers.size());
}

bool EvidenceBook::loopback_send(const NetPayload& payload) const {
    return payload.direction == NetPayload::Direction::kOut && payload.stream && !payload.dns &&
           loopback_ip(payload.remote_address);
}

Peer* EvidenceBook::record_proxied_send(uint32_t pid, uint64_t ts_ns, const NetPayload& payload,
                                        bool& created) {
    created = false;
    if (!loopback_send(payload) || payload.seq >= kHandshakeMessages) return nullptr;
    ProcessEvidence& evidence = processes_[pid];
    auto& flows = evidence.loopback_flows;
    auto flow = std::find_if(flows.begin(), flows.end(),
                             [&](const LoopbackFlow& known) { return known.flow == payload.flow; });
    if (flow == flows.end()) {
        // Only a flow seen from its first message can be read as a handshake.
        if (payload.seq != 0) return nullptr;
        if (flows.size() >= kMaxLoopbackFlows) flows.erase(flows.begin());
        LoopbackFlow fresh;
        fresh.flow = payload.flow;
        fresh.proxy = endpoint_text(payload.remote_address, payload.remote_port);
        flows.push_back(std::move(fresh));
        flow = flows.end() - 1;
    }
    if (flow->tunnel_read) return nullptr;
    flow->sends.push_back(payload.data);
    if (!flow->resolved) {
        const std::vector<std::string_view> sends(flow->sends.begin(), flow->sends.end());
        const auto request = parse_proxy_request(sends);
        if (!request) {
            // Not a handshake, or never one: a local service's own protocol,
            // or a forwarder's client speaking to the far end already.
            const char first = sends.front().empty() ? 0 : sends.front().front();
            if (flow->sends.size() < kHandshakeMessages &&
                (first == 0x04 || first == 0x05 || first == 'C')) {
                return nullptr;
            }
            Peer spoken;
            spoken.port = payload.remote_port;
            read_first_bytes(spoken, flow->sends.front());
            flows.erase(flow);
            return forwarded_first_bytes(evidence, std::move(spoken));
        }
        flow->resolved = true;
        flow->tunnel_message = request->tunnel_message;
        flow->tunnel_offset = request->tunnel_offset;
        // The handshake says where this client goes: what a forwarder on
        // that port was taken to carry for it (record_loopback_peer) was
        // a guess, perhaps another client's connection.
        std::erase_if(evidence.peers, [&](const Peer& known) {
            return known.via_port == payload.remote_port && known.via_flow == 0;
        });
        Peer peer;
        peer.ts_ns = ts_ns;
        peer.address = request->host;
        peer.port = request->port;
        peer.named = request->host_is_name;  // the client named it; DNS is the proxy's
        peer.via = "the " + request->protocol + " proxy at " + flow->proxy;
        peer.via_flow = flow->flow;
        peer.via_port = payload.remote_port;
        evidence.peers.push_back(std::move(peer));
        if (evidence.peers.size() > kMaxPeers) evidence.peers.erase(evidence.peers.begin());
        // A connection of its own, made through the proxy.
        evidence.connect_ts.push_back(ts_ns);
        if (evidence.connect_ts.size() > kMaxConnects) {
            evidence.connect_ts.erase(evidence.connect_ts.begin());
        }
        created = true;
    }
    // Its peer (gone when the bounded list dropped it).
    const auto peer = std::find_if(evidence.peers.rbegin(), evidence.peers.rend(),
                                   [&](const Peer& known) { return known.via_flow == flow->flow; });
    if (peer == evidence.peers.rend()) {
        flows.erase(flow);
        return nullptr;
    }
    if (flow->tunnel_message < flow->sends.size()) {
        read_first_bytes(
            *peer, std::string_view(flow->sends[flow->tunnel_message]).substr(flow->tunnel_offset));
        flow->tunnel_read = true;
        flow->sends.clear();
    } else if (!created) {
        return nullptr;  // a handshake message after the request: nothing new
    }
    evidence.dirty = true;
    return &*peer;
}

}  // namespace gpuguard::agent
