// Mining protocols recognised in captured socket payloads: Stratum v1 and
// its dialects (EthereumStratum, ETHPROXY, the CryptoNote/XMRig JSON-RPC)
// by their method names and parameter shapes, whatever the key order, and
// Stratum v2 by the sizes of its Noise handshake. A Session follows one
// connection: who logs in, the share difficulty the pool sets, the shares
// the miner submits, and from them a hash-rate estimate.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "gpuguard/events/event.h"

namespace gpuguard::agent::stratum {

// kNodeRpc: solo mining against a coin's node over HTTP (getblocktemplate,
// getwork, monerod's get_block_template, the Ergo node's /mining API); kGrin:
// Grin's stratum (getjobtemplate).
enum class Protocol {
    kUnknown,
    kStratum1,
    kEthereumStratum,
    kEthProxy,
    kCryptoNote,
    kStratum2,
    kNodeRpc,
    kGrin
};

// "stratum1", "ethereumstratum", "ethproxy", "cryptonote", "stratum2",
// "node_rpc", "grin", "" for kUnknown.
const char* to_string(Protocol protocol);

// Hashes one share stands for, from the pool's numbers. Nullopt when the
// value cannot be read.
//   bitcoin-style difficulty (Stratum v1, EthereumStratum/1.0): d * 2^32
std::optional<double> hashes_from_difficulty(double difficulty);
//   256-bit big-endian hex target ("0x" optional; fewer than 64 digits are
//   the most significant ones): 2^256 / target
std::optional<double> hashes_from_target256(std::string_view hex);
//   CryptoNote job target, little-endian hex of 4 or 8 bytes: 0xff..ff / target
std::optional<double> hashes_from_cryptonote_target(std::string_view hex);

// "1.2 MH/s (0.9-1.6)": a hash rate in the largest unit that keeps it at
// least 1, with its 95 % interval in the same unit when both ends are
// known; what `gpuguard ps` and `gpuguard status` print of a session.
std::string describe_hash_rate(double rate, std::optional<double> low = std::nullopt,
                               std::optional<double> high = std::nullopt);

// "4AdUndXHHZ6cfufT...long wallet.rig1" -> "4AdUndXH….rig1": the wallet part
// (before '.', '+' or '/') cut to 8 characters when longer than 16, the
// worker name kept.
std::string redact_login(std::string_view login);

// A captured line (JSON-RPC, possibly cut at 512 bytes) with every string
// value that could carry a wallet shortened as redact_login() does: a value
// whose part before '.', '+' or '/' is more than 16 letters, digits, '_',
// '-' or ':' keeps its first 8 and the worker name. What alerts, `gpuguard
// ps` and logs show of a payload line; signatures match the raw line.
std::string redact_wallets(std::string_view line);

// Whether a connection's first captured bytes can be solo mining against a
// node: an HTTP POST whose body is JSON (JSON-RPC over HTTP), or a request
// for the Ergo node's /mining/ API. Other HTTP is not followed.
bool may_be_node_rpc(std::string_view bytes);

// What feeding a message changed.
struct Update {
    bool recognised = false;  // the session became a mining session with this message
    bool new_method = false;  // a method name not seen before on this connection
    bool difficulty = false;  // the pool set a new share difficulty or target
    bool share = false;       // a share was submitted, accepted or rejected
    bool reported_rate = false;
    bool any() const { return recognised || new_method || difficulty || share || reported_rate; }
};

class Session {
  public:
    // One captured message. `seq` numbers it in its direction (0 = first),
    // `length` is the whole message's size (captures are cut at 512 bytes).
    Update feed(NetPayload::Direction direction, std::string_view bytes, uint32_t seq,
                uint32_t length, uint64_t ts_ns);

    bool recognised() const { return protocol_ != Protocol::kUnknown; }
    Protocol protocol() const { return protocol_; }

    // Σ hashes of the shares sent (each at the difficulty then) / time from
    // the first job to the session's latest message, H/s: over the session,
    // not the gaps between shares. nullopt before two shares with a known
    // difficulty.
    std::optional<double> hash_rate() const;
    // The 95 % interval of `rate` from the number of shares it rests on.
    std::pair<double, double> hash_rate_interval(double rate) const;

    // The session's fields of a Stratum event (flow and pool left for the caller).
    Stratum describe() const;

  private:
    void line(NetPayload::Direction direction, std::string_view text, uint64_t ts_ns,
              Update& update);
    void http_request(std::string_view bytes, uint64_t ts_ns, Update& update);
    void method_seen(const std::string& method, std::string_view text, Update& update);
    void cut_login(std::string_view text, Update& update);
    void set_protocol(Protocol protocol, Update& update);
    void share_submitted(const std::string& id, uint64_t ts_ns, Update& update);
    void share_answered(const std::string& id, bool accepted, Update& update);
    void set_share_hashes(std::optional<double> hashes, Update& update);

    Protocol protocol_ = Protocol::kUnknown;
    std::vector<std::string> methods_;
    std::vector<std::string> messages_;
    std::string login_;
    std::string agent_;
    double share_hashes_ = 0;  // hashes per share at the current difficulty
    uint64_t difficulty_updates_ = 0;
    uint64_t submitted_ = 0;
    uint64_t accepted_ = 0;
    uint64_t rejected_ = 0;
    std::set<std::string> pending_;  // ids of submits awaiting an answer (bounded)
    std::string login_id_;           // id of the login request (CryptoNote, ETHPROXY)
    // The hash rate over the session: the hashes its shares stand for
    // (each at the difficulty when it was sent) over the time since the
    // first job (a difficulty or target seen), with a 95 % interval from the
    // share count (shares are a Poisson process).
    bool job_seen_ = false;
    uint64_t first_job_ns_ = 0;
    uint64_t last_seen_ns_ = 0;  // the session's latest message
    uint64_t line_ts_ns_ = 0;    // the message being read
    double hashes_submitted_ = 0;
    std::optional<double> reported_rate_;
    uint32_t first_out_size_ = 0;  // Stratum v2: sizes of the first message each way
    uint32_t first_in_size_ = 0;
    bool first_out_binary_ = false;
    bool after_handshake_ = false;  // a second message either way
};

}  // namespace gpuguard::agent::stratum
