#include "gpuguard/netintel/proxy_request.h"

#include <algorithm>
#include <charconv>

#include <arpa/inet.h>

namespace gpuguard::agent {
namespace {

// The messages as one stream, with where each begins: a client may send a
// handshake's steps in one write or several.
struct Stream {
    std::string bytes;
    std::vector<size_t> starts;
};

Stream joined(const std::vector<std::string_view>& messages) {
    Stream stream;
    for (std::string_view message : messages) {
        stream.starts.push_back(stream.bytes.size());
        stream.bytes.append(message);
    }
    return stream;
}

// Where the tunnel begins in message terms.
void tunnel_at(const Stream& stream, size_t offset, ProxyRequest& request) {
    const auto after = std::upper_bound(stream.starts.begin(), stream.starts.end(), offset);
    const size_t index = static_cast<size_t>(after - stream.starts.begin()) - 1;
    if (offset >= stream.bytes.size()) {
        request.tunnel_message = stream.starts.size();
        request.tunnel_offset = 0;
        return;
    }
    request.tunnel_message = index;
    request.tunnel_offset = offset - stream.starts[index];
}

uint16_t port_at(std::string_view bytes, size_t at) {
    return static_cast<uint16_t>(static_cast<uint8_t>(bytes[at]) << 8 |
                                 static_cast<uint8_t>(bytes[at + 1]));
}

std::string address_text(int family, const char* bytes) {
    char text[INET6_ADDRSTRLEN];
    return inet_ntop(family, bytes, text, sizeof(text)) ? text : "";
}

bool printable_name(std::string_view name) {
    return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
        return c > 0x20 && c < 0x7f && c != '/' && c != '@';
    });
}

std::optional<ProxyRequest> socks5(const Stream& stream) {
    const std::string_view bytes = stream.bytes;
    // Greeting: VER NMETHODS METHODS...
    if (bytes.size() < 2) return std::nullopt;
    const size_t methods = static_cast<uint8_t>(bytes[1]);
    if (methods == 0 || methods > 16) return std::nullopt;
    size_t at = 2 + methods;
    if (bytes.size() < at) return std::nullopt;
    // Username/password (RFC 1929): VER(1) ULEN UNAME PLEN PASSWD.
    if (bytes.size() > at && bytes[at] == 0x01) {
        if (bytes.size() < at + 2) return std::nullopt;
        const size_t user = static_cast<uint8_t>(bytes[at + 1]);
        if (bytes.size() < at + 3 + user) return std::nullopt;
        const size_t password = static_cast<uint8_t>(bytes[at + 2 + user]);
        at += 3 + user + password;
    }
    // Request: VER CMD(1: CONNECT) RSV ATYP DST.ADDR DST.PORT.
    if (bytes.size() < at + 4 || bytes[at] != 0x05 || bytes[at + 1] != 0x01 ||
        bytes[at + 2] != 0x00) {
        return std::nullopt;
    }
    ProxyRequest request;
    request.protocol = "SOCKS5";
    const uint8_t type = static_cast<uint8_t>(bytes[at + 3]);
    at += 4;
    if (type == 0x01 || type == 0x04) {
        const size_t size = type == 0x01 ? 4 : 16;
        if (bytes.size() < at + size + 2) return std::nullopt;
        request.host = address_text(type == 0x01 ? AF_INET : AF_INET6, bytes.data() + at);
        at += size;
    } else if (type == 0x03) {
        if (bytes.size() < at + 1) return std::nullopt;
        const size_t size = static_cast<uint8_t>(bytes[at]);
        if (bytes.size() < at + 1 + size + 2) return std::nullopt;
        request.host = std::string(bytes.substr(at + 1, size));
        request.host_is_name = true;
        if (!printable_name(request.host)) return std::nullopt;
        at += 1 + size;
    } else {
        return std::nullopt;
    }
    request.port = port_at(bytes, at);
    if (request.host.empty() || request.port == 0) return std::nullopt;
    tunnel_at(stream, at + 2, request);
    return request;
}

std::optional<ProxyRequest> socks4(const Stream& stream) {
    const std::string_view bytes = stream.bytes;
    // VER(4) CMD(1) DSTPORT DSTIP USERID NUL [HOST NUL]
    if (bytes.size() < 9 || bytes[1] != 0x01) return std::nullopt;
    ProxyRequest request;
    request.protocol = "SOCKS4";
    request.port = port_at(bytes, 2);
    const size_t user_end = bytes.find('\0', 8);
    if (user_end == std::string_view::npos || request.port == 0) return std::nullopt;
    size_t end = user_end + 1;
    // 0.0.0.x (x != 0): SOCKS4a, the name follows the user id.
    if (bytes[4] == 0 && bytes[5] == 0 && bytes[6] == 0 && bytes[7] != 0) {
        const size_t host_end = bytes.find('\0', end);
        if (host_end == std::string_view::npos) return std::nullopt;
        request.protocol = "SOCKS4a";
        request.host = std::string(bytes.substr(end, host_end - end));
        request.host_is_name = true;
        if (!printable_name(request.host)) return std::nullopt;
        end = host_end + 1;
    } else {
        request.host = address_text(AF_INET, bytes.data() + 4);
    }
    tunnel_at(stream, end, request);
    return request;
}

std::optional<ProxyRequest> http_connect(const Stream& stream) {
    const std::string_view bytes = stream.bytes;
    // CONNECT host:port HTTP/1.1, the header fields, an empty line.
    const size_t line_end = bytes.find("\r\n");
    const size_t head_end = bytes.find("\r\n\r\n");
    if (line_end == std::string_view::npos || head_end == std::string_view::npos) {
        return std::nullopt;
    }
    const std::string_view line = bytes.substr(8, line_end - 8);
    const size_t space = line.find(' ');
    if (space == std::string_view::npos || !line.substr(space + 1).starts_with("HTTP/")) {
        return std::nullopt;
    }
    std::string_view target = line.substr(0, space);
    const size_t colon = target.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    ProxyRequest request;
    request.protocol = "HTTP CONNECT";
    const std::string_view port = target.substr(colon + 1);
    const auto [last, error] =
        std::from_chars(port.data(), port.data() + port.size(), request.port);
    if (error != std::errc{} || last != port.data() + port.size() || request.port == 0) {
        return std::nullopt;
    }
    target = target.substr(0, colon);
    if (target.starts_with('[') && target.ends_with(']'))
        target = target.substr(1, target.size() - 2);
    request.host = std::string(target);
    char scratch[16];
    request.host_is_name = inet_pton(AF_INET, request.host.c_str(), scratch) != 1 &&
                           inet_pton(AF_INET6, request.host.c_str(), scratch) != 1;
    if (!printable_name(request.host)) return std::nullopt;
    tunnel_at(stream, head_end + 4, request);
    return request;
}

}  // namespace

std::optional<ProxyRequest> parse_proxy_request(const std::vector<std::string_view>& messages) {
    if (messages.empty() || messages.front().empty()) return std::nullopt;
    const Stream stream = joined(messages);
    switch (stream.bytes[0]) {
        case 0x05:
            return socks5(stream);
        case 0x04:
            return socks4(stream);
        case 'C':
            if (stream.bytes.starts_with("CONNECT ")) return http_connect(stream);
            return std::nullopt;
        default:
            return std::nullopt;
    }
}

}  // namespace gpuguard::agent
