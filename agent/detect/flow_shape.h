// A flow's shape (flow events, bpf/payload.h): whether a TCP connection
// looks like a mining session without reading it. A pool hands out work:
// one long-lived connection on which the peer pushes a small job every few
// seconds to minutes, unprompted, and the miner sends back small shares;
// a few KB a minute next to the compute they stand for. Answers to the
// client's own requests (telemetry, an API, a long poll) are not pushes,
// a stream or a download is not small (docs/detections.md, "Flows by their
// shape").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "evidence.h"

namespace gpuguard::agent {

struct FlowShapeLimits {
    uint64_t min_age_ns = 120'000'000'000;  // long-lived: two minutes at least
    uint64_t min_pushes = 3;                // messages the peer sent unprompted
    double min_push_share = 0.5;            // ... of all its message bursts
    // Of the pushes, the share the process answered at most: shares do not
    // follow jobs, a long poll's next request and a consumer's ack do.
    double max_reply_share = 0.5;
    // Of the gaps between its message bursts, the share of 4 s or more: the
    // peer speaks at intervals, not in a stream.
    double min_spaced_share = 0.75;
    uint64_t max_bytes_per_minute = 64 * 1024;  // both ways, over its age
    uint64_t max_bytes_per_push = 16 * 1024;    // received, per receive burst
};

// Why `flow` has a pool's shape under `limits` ("pushed 14 messages
// unprompted over 6 min, ..."); nullopt when it has not.
std::optional<std::string> mining_shape(const Flow& flow, const FlowShapeLimits& limits = {});

// "6 min old, 2.1 KB sent in 12 messages, 40 KB received in 30 (28
// unprompted), receive gaps mostly 16-32 s".
std::string describe_flow(const Flow& flow);

// The latest flow event of `evidence` that carries `peer`'s connection: by
// address and port, or the loopback flow it was reached through (a proxy,
// a forwarder); nullptr for none.
const Flow* flow_of(const ProcessEvidence& evidence, const Peer& peer);

// Why nothing vouches for `peer` (opaque_peer): what it was sent was TLS or
// unrecognised and no DNS answer named it (`by_address`), or it is a
// miner's port and nothing recognised was sent (`by_port`), or, what it
// was sent unread, its flow has a pool's shape (`shape`, the why) though
// a DNS answer named it. nullopt when something vouches for it.
struct Unvouched {
    bool by_address = false;
    bool by_port = false;
    std::optional<std::string> shape;
};
std::optional<Unvouched> unvouched(const ProcessEvidence& evidence, const Peer& peer);

}  // namespace gpuguard::agent
