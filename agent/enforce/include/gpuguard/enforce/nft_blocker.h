// NftBlocker: block_ip through libnftables, in one table the agent owns,
// `inet gpuguard`, and nowhere else:
//
//   table inet gpuguard {
//     set blocked_v4 { type ipv4_addr; flags timeout; }
//     set blocked_v6 { type ipv6_addr; flags timeout; }
//     chain output  { type filter hook output  priority 0; policy accept;
//                     ip daddr @blocked_v4 counter drop; ip6 daddr @blocked_v6 counter drop }
//     chain forward { ... the same, for containers' and VMs' traffic }
//   }
//
// Every call builds its nft context in the calling thread's network
// namespace, so tests that run inside a namespace they created never touch
// the host. Addresses are parsed and re-printed before they reach nft: no
// caller text is ever interpreted as nft syntax.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpuguard/enforce/enforcer.h"
#include "gpuguard/common/ip_address.h"
#include "gpuguard/common/result.h"

namespace gpuguard::agent {

inline constexpr const char* kNftTable = "gpuguard";  // family inet

struct BlockedAddress {
    std::string ip;  // canonical text
    int ip_version = 4;
    std::optional<uint64_t> timeout_s;     // nullopt: never expires
    std::optional<uint64_t> expires_in_s;  // seconds left, when it has a timeout
};

class NftBlocker : public AddressBlocker {
  public:
    // `default_ttl`: element timeout when block() is given 0 (0 = none).
    explicit NftBlocker(std::chrono::seconds default_ttl = std::chrono::hours(1));

    // Creates the table, sets and chains where missing and rewrites the two
    // chains' rules, in one transaction: existing elements are kept. A table
    // that refuses that (a set of the wrong type or without timeouts, a chain
    // that lost its hook) is rebuilt with the elements it held, logged as a
    // warning. kUnsupported/kPermission when nftables is unusable.
    Status reconcile();

    // Whether nftables answers here at all (CAP_NET_ADMIN, nf_tables), without
    // changing anything. kPermission or kUnsupported with nft's reason.
    Status usable();

    // Adds (or refreshes the timeout of) an element; reconciles first when
    // the table is missing. kInvalidArgument for text that is not an address.
    Status block(const std::string& ip, std::chrono::seconds ttl) override;
    std::string name() const override { return "nftables"; }

    // Removes an element. Returns false when it was not there.
    Result<bool> unblock(const std::string& ip);

    // Every element of both sets; empty when the table does not exist.
    Result<std::vector<BlockedAddress>> list();

    // Empties both sets; the table and chains stay.
    Status flush();

    // Deletes the whole table (uninstall). Succeeds when it is already gone.
    Status remove_table();

    // Does the table exist?
    bool table_exists();

  private:
    std::chrono::seconds default_ttl_;
};

}  // namespace gpuguard::agent
