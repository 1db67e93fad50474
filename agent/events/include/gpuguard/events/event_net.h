// The network observations of an Event (gpuguard/events/event.h): a
// connect, the first bytes of a message, a mining session recognised on a
// flow, the process at the other end of a loopback connection and the
// agent's own probe of a suspected pool.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpuguard::agent {

// connect(2) of an AF_INET/AF_INET6 socket.
struct Connect {
    int32_t fd = -1;
    int32_t result = 0;   // 0, -EINPROGRESS, or -errno
    int ip_version = 4;   // 4, or 6 (a v4-mapped IPv6 address is reported as 4)
    std::string address;  // "10.0.0.1", "2001:db8::1"
    uint16_t port = 0;
    bool gpu_holder = false;    // reported because the process holds a GPU fd
    bool watched_port = false;  // ... because the port is watched
    bool all = false;           // ... because sensor.connect_all is on
    bool v4_mapped = false;     // the socket was AF_INET6 with a ::ffff:a.b.c.d address
    bool loopback = false;
    std::string domain{};       // name an observed DNS answer gave `address` (net_intel.h), or ""
    bool watched_tgid = false;  // reported because the process is in the kernel watch list
    bool watched_addr = false;  // ... because the address is (resolved from a pool domain)
    // Not a connect the kernel saw: a TCP connection found established in
    // /proc when the process was put in the watch list (it connected before
    // anyone watched it). ts_ns is when it was found.
    bool established = false;
};

// The first bytes of one message on an INET socket (bpf/payload.h): the
// first few of each connection of a watched process, all of a JSON-RPC flow,
// and DNS answers of any process. Input of gpuguard/netintel/net_intel.h.
struct NetPayload {
    enum class Direction { kOut, kIn };
    int32_t fd = -1;
    Direction direction = Direction::kOut;
    std::string syscall;  // "write", "sendto", "sendmsg", "read", "recvfrom", "recvmsg"
    uint32_t length = 0;  // bytes the call moved
    uint32_t seq = 0;     // number of this message in its flow and direction, from 0
    uint64_t flow = 0;    // connection identity (kernel socket address)
    bool stream = true;   // SOCK_STREAM, else SOCK_DGRAM
    bool truncated = false;
    bool dns = false;           // reported as a DNS answer (peer port 53)
    bool followed = false;      // JSON-RPC flow sampled past the first messages
    std::string local_address;  // "10.0.0.1", "2001:db8::1"
    uint16_t local_port = 0;
    std::string remote_address;
    uint16_t remote_port = 0;
    std::string data;  // the captured bytes (binary)
};

// A mining session recognised on a connection (gpuguard/netintel/stratum.h), reported
// when recognised and then as it progresses. Derived by the agent from
// NetPayload events and journaled, so replay judges what live judged.
struct Stratum {
    uint64_t flow = 0;
    std::string protocol;  // "stratum1", "ethereumstratum", "ethproxy", "cryptonote", "stratum2"
    std::string pool_address;  // peer, "1.2.3.4"
    uint16_t pool_port = 0;
    std::string pool_domain;            // observed DNS name of the pool, or ""
    std::string login;                  // worker/login, wallet part cut to a prefix
    std::string agent;                  // user agent the miner announced, or ""
    std::vector<std::string> methods;   // method names seen so far, in order of appearance
    std::vector<std::string> messages;  // lines that showed a method first (for payload signatures)
    uint64_t shares_submitted = 0;
    uint64_t shares_accepted = 0;
    uint64_t shares_rejected = 0;
    double share_hashes = 0;  // hashes one share stands for at the current difficulty
    uint64_t difficulty_updates = 0;
    // Estimated from the shares: the hashes they stand for over the time
    // since the first job, H/s, with its 95 % interval from the share count.
    std::optional<double> hash_rate;
    std::optional<double> reported_hash_rate;  // what the miner told the pool, H/s
    std::optional<double> hash_rate_low{};
    std::optional<double> hash_rate_high{};
    bool operator==(const Stratum&) const = default;
};

// The process at the other end of a connection to a loopback address: the
// one holding the socket that listens on its port (found by the agent in
// /proc when a GPU holder or a watched process made the connection, or had
// it when it turned busy), and that process's own established connections
// off the host, one of which may carry the client's traffic (a forwarder,
// a proxy: docs/detections.md, `opaque_peer`). The task is the client.
struct LoopbackPeer {
    uint16_t port = 0;        // the loopback port the client connected to
    uint32_t server_pid = 0;  // who listens there
    std::string server_comm;  // its name and executable then
    std::string server_exe;
    bool established = false;  // read when the client turned busy, not at its connect
    // The server's established connections off the host then, "ADDRESS:PORT"
    // ("[ADDRESS]:PORT" for IPv6), at most 8.
    std::vector<std::string> server_upstreams;
    bool operator==(const LoopbackPeer&) const = default;
};

// One bucket of a flow's gap histogram: `count` gaps between message
// bursts of `from_s` seconds or more (and under twice that; the last
// bucket, 128 s, is open-ended).
struct FlowGap {
    uint32_t from_s = 1;  // 1, 2, 4 ... 128
    uint32_t count = 0;
    bool operator==(const FlowGap&) const = default;
};

// The shape of one TCP connection of a GPU holder or a watched process,
// counted by the kernel at every send and receive (bpf/payload.h,
// gg_flow_shape) and read by the agent with its process samples: reported
// once the flow is `flow.min_age` old and then whenever it moved, at most
// once per `flow.interval`. What a mining session looks like without
// reading it (docs/detections.md, "Flows by their shape"). The task is the
// process.
struct Flow {
    uint64_t flow = 0;              // the connection (kernel socket address), as NetPayload::flow
    std::string address;            // the peer, "203.0.113.5", "2001:db8::5"
    uint16_t port = 0;              // its port
    uint64_t age_ns = 0;            // since its first message either way
    uint64_t since_send_ns = 0;     // since its latest send (age_ns when none)
    uint64_t since_receive_ns = 0;  // since its latest receive (age_ns when none)
    uint64_t bytes_out = 0;
    uint64_t bytes_in = 0;
    uint64_t sends = 0;     // send calls
    uint64_t receives = 0;  // receive calls that returned data
    // Messages: calls a second or more after the previous one in the same
    // direction (one message read in parts is one burst).
    uint64_t send_bursts = 0;
    uint64_t receive_bursts = 0;
    // Receive bursts that came a second or more after the latest send: the
    // peer spoke unprompted (a pool pushing a job), not an answer.
    uint64_t pushes = 0;
    // Send bursts within a second of the latest receive: the process
    // answered what it got (a long poll asks again, a consumer acknowledges).
    uint64_t replies = 0;
    std::vector<FlowGap> send_gaps;     // gaps between send bursts, non-empty buckets
    std::vector<FlowGap> receive_gaps;  // ... between receive bursts
    bool operator==(const Flow&) const = default;
};

// A flow's counters as the sensor reads them, times CLOCK_MONOTONIC (0: none).
struct FlowReading {
    uint32_t pid = 0;
    uint64_t first_ns = 0;
    uint64_t last_send_ns = 0;
    uint64_t last_receive_ns = 0;
    Flow counts;  // all but the ages
};

// The agent's own probe of a peer a rule suspected (verify.active,
// docs/detections.md "Active verification"): one bounded connection per
// mining dialect tried, from the process's network namespace, and what the
// peer answered. Journaled, so replay judges the answer and never probes.
// The task is the process whose peer it is.
struct PoolProbe {
    std::string address;  // the peer, "203.0.113.7", "2001:db8::7"
    uint16_t port = 0;
    bool tls = false;         // spoken over TLS (the process's first bytes were a ClientHello)
    std::string server_name;  // the SNI sent (the process's own), "" none
    std::string rule;         // the rule whose detection asked for it
    // The dialect whose answer decided: "stratum1", "cryptonote",
    // "ethstratum"; "" when none did (no connection, no answer).
    std::string protocol;
    std::string sent;    // that dialect's first message, as sent
    std::string answer;  // the answer's first bytes, escaped (gpuguard/common/printable.h), capped
    bool pool = false;   // the answer was in a pool's form
    // "pool: stratum1 mining.subscribe answered with a subscription",
    // "not a pool: HTTP 400", "no answer in 3000 ms", "refused: loopback address"
    std::string verdict;
    // Each dialect tried and what came of it, in order: "stratum1: no answer in 3000 ms".
    std::vector<std::string> attempts;
    uint32_t duration_ms = 0;  // all attempts together
    bool operator==(const PoolProbe&) const = default;
};

}  // namespace gpuguard::agent
