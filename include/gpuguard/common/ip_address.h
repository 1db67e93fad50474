// IP address text in one canonical form (nftables sets and the kernel
// connect filter key on it).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include "gpuguard/common/result.h"

namespace gpuguard {

// Canonical form and version (4 or 6) of an address, or kInvalidArgument.
// An IPv4-mapped IPv6 address is its IPv4 address.
Result<std::pair<std::string, int>> canonical_ip(const std::string& text);

// Whether address text (as the kernel's and inet_ntop's) is a loopback
// one: 127.0.0.0/8, ::1, or 127/8 mapped into IPv6 (::ffff:127.x.y.z).
bool loopback_ip(std::string_view address);

// "ADDRESS:PORT", the address bracketed when it is IPv6 ("[::1]:443").
std::string endpoint_text(std::string_view address, uint16_t port);

}  // namespace gpuguard
