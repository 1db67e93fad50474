// Where a client asks a proxy to take it, from the first bytes it sent on
// its connection to the proxy: SOCKS5 (RFC 1928: a greeting, an optional
// username/password exchange, RFC 1929, then CONNECT with an IPv4, IPv6 or
// domain address), SOCKS4 and SOCKS4a, and HTTP's CONNECT method (RFC 9110
// 9.3.6). XMRig's `-x`/`socks5` pool option, Tor's SocksPort and any HTTP
// proxy speak one of these; what follows the request on the same
// connection is the tunnelled stream itself (a TLS ClientHello, Stratum).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuguard::agent {

struct ProxyRequest {
    std::string protocol;  // "SOCKS5", "SOCKS4", "SOCKS4a", "HTTP CONNECT"
    std::string host;      // an address ("198.51.100.7", "2001:db8::1") or a name
    bool host_is_name = false;
    uint16_t port = 0;
    // Which message (index into what was given) and offset in it the
    // tunnelled stream starts at; equal to the messages' count and 0 when
    // nothing was sent through yet.
    size_t tunnel_message = 0;
    size_t tunnel_offset = 0;
};

// The request in the first messages a client sent on a connection, in
// order; nullopt when they are not a proxy handshake or it is not complete
// yet (a SOCKS5 greeting alone).
std::optional<ProxyRequest> parse_proxy_request(const std::vector<std::string_view>& messages);

}  // namespace gpuguard::agent
