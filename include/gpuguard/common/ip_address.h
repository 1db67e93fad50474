// IP address text in one canonical form (nftables sets and the kernel
// connect filter key on it).
#pragma once

#include <string>
#include <utility>

#include "gpuguard/common/result.h"

namespace gpuguard {

// Canonical form and version (4 or 6) of an address, or kInvalidArgument.
// An IPv4-mapped IPv6 address is its IPv4 address.
Result<std::pair<std::string, int>> canonical_ip(const std::string& text);

}  // namespace gpuguard
