// Active verification of a suspected pool (verify.active,
// docs/detections.md "Active verification"): the first message of each
// mining dialect the agent speaks to a peer, what its answer says, and the
// addresses it never speaks to. Pure functions: the connection is the
// daemon's (pool_prober.cpp), the judgement of the journaled answer the
// detect room's (pool_answered).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuguard::agent::pool_probe {

// The dialects tried, in this order, one connection each.
enum class Dialect { kStratum1, kCryptoNote, kEthStratum };
inline constexpr Dialect kDialects[] = {Dialect::kStratum1, Dialect::kCryptoNote,
                                        Dialect::kEthStratum};

// "stratum1", "cryptonote", "ethstratum".
const char* to_string(Dialect dialect);

// The dialect's first message, one JSON-RPC line ending in '\n', id 1:
// Stratum v1 `mining.subscribe` with the agent's user agent, CryptoNote
// `login` with kDummyWallet, EthereumStratum/1.0.0 `mining.subscribe`.
std::string first_message(Dialect dialect);

// The wallet the CryptoNote login names: shaped like a Monero address (95
// characters from '4'), not one (its checksum is not valid), so no pool
// can credit anything to it. Made at run time, so the agent's executable
// carries no wallet-shaped string for its own signatures to find.
std::string dummy_wallet();

// What an answer said.
struct Verdict {
    bool pool = false;   // in a mining pool's form: certain
    bool final = false;  // no other dialect is worth trying (a pool, or a server that is not one)
    std::string text;    // "pool: ...", "not a pool: ...", "no answer ..."
};

// How one attempt ended, as the connection saw it.
struct Exchange {
    std::string answer;       // the bytes read (capped by the caller)
    bool closed = false;      // the peer closed the connection
    bool timed_out = false;   // the time ran out first
    std::string error;        // the connection failed: "connect: Connection refused"; "" none
    uint32_t timeout_ms = 0;  // the time allowed, for the words
};

// Judges the answer to `dialect`'s first message. A pool's form is: to a
// subscribe, a result holding a subscription (an array whose first item
// is the subscribed notifications, or naming mining.notify); to a login, a
// result holding a job with a target, or an error that refuses the wallet
// (only a pool validates a payout address); from either, a job or a
// difficulty pushed (mining.notify, mining.set_difficulty, CryptoNote's
// job), as the Stratum parser (stratum.h) reads them. Any other JSON-RPC
// answer is not a pool for this dialect but leaves the next one worth
// trying; HTTP, SSH, TLS records or other bytes are a server that is not a
// pool, which ends the probe.
Verdict classify(Dialect dialect, const Exchange& exchange);

// Why `address` is never probed: "loopback", "link-local", "multicast",
// "unspecified", "broadcast" (IPv4, IPv6 and IPv4-mapped forms), "not an IP
// address"; nullopt when it may be. The probing namespace's own addresses
// are refused too, by the caller (own_address()).
std::optional<std::string> refused_address(std::string_view address);

// Whether `address` is one of `own` (the probing namespace's addresses),
// whatever the spelling of either.
bool own_address(std::string_view address, const std::vector<std::string>& own);

// The answer's first bytes as kept in the event: at most `cap` bytes,
// escaped (gpuguard/common/printable.h), wallets shortened.
std::string quoted_answer(std::string_view bytes, size_t cap);

}  // namespace gpuguard::agent::pool_probe
