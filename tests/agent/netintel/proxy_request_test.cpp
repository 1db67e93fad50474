// The proxy handshake reader (gpuguard/netintel/proxy_request.h): what
// XMRig's SOCKS5 client (greeting, then CONNECT by name or address), a
// username/password SOCKS5 client (RFC 1929), SOCKS4/4a and an HTTP CONNECT
// send, split over messages or in one; where the tunnelled stream starts;
// and what is not a handshake or not a complete one.
#include "gpuguard/netintel/proxy_request.h"

#include <gtest/gtest.h>

namespace gpuguard::agent {
namespace {

using namespace std::string_literals;

std::optional<ProxyRequest> read(const std::vector<std::string>& messages) {
    return parse_proxy_request(std::vector<std::string_view>(messages.begin(), messages.end()));
}

std::string summary(const std::optional<ProxyRequest>& request) {
    if (!request) return "-";
    return request->protocol + " " + request->host + ":" + std::to_string(request->port) +
           (request->host_is_name ? " name" : " address") + " tunnel@" +
           std::to_string(request->tunnel_message) + "+" + std::to_string(request->tunnel_offset);
}

TEST(ProxyRequest, socks5ConnectByAddressOrNameAcrossMessages) {
    const std::string greeting = "\x05\x01\x00"s;
    const std::string by_address =
        "\x05\x01\x00\x01\x0e\xde\x8b\xf1\x01\xbb"s;  // 14.222.139.241:443
    EXPECT_EQ(summary(read({greeting, by_address})),
              "SOCKS5 14.222.139.241:443 address tunnel@2+0");
    EXPECT_EQ(summary(read({greeting, by_address, "\x16\x03\x01"s})),
              "SOCKS5 14.222.139.241:443 address tunnel@2+0");
    // Pipelined in one write, the ClientHello right behind.
    EXPECT_EQ(summary(read({greeting + by_address + "\x16\x03\x01"s})),
              "SOCKS5 14.222.139.241:443 address tunnel@0+13");
    const std::string by_name = "\x05\x01\x00\x03\x12gulf.moneroocean.s\x27\x0f"s;
    EXPECT_EQ(summary(read({greeting, by_name})), "SOCKS5 gulf.moneroocean.s:9999 name tunnel@2+0");
    std::string v6 = "\x05\x01\x00\x04"s + std::string(15, '\0') + "\x01"s + "\x0d\x05"s;
    v6[4] = '\x20';
    v6[5] = '\x01';
    v6[6] = '\x0d';
    v6[7] = '\xb8';
    EXPECT_EQ(summary(read({greeting, v6})), "SOCKS5 2001:db8::1:3333 address tunnel@2+0");
    // Username and password first (RFC 1929).
    const std::string auth = "\x01\x04user\x04pass"s;
    EXPECT_EQ(summary(read({"\x05\x02\x00\x02"s, auth, by_address})),
              "SOCKS5 14.222.139.241:443 address tunnel@3+0");
    // Incomplete: the greeting alone, a request cut short.
    EXPECT_EQ(summary(read({greeting})), "-");
    EXPECT_EQ(summary(read({greeting, by_address.substr(0, 7)})), "-");
    // Not CONNECT (BIND), a bad address type, a name that is not one.
    EXPECT_EQ(summary(read({greeting, "\x05\x02\x00\x01\x0e\xde\x8b\xf1\x01\xbb"s})), "-");
    EXPECT_EQ(summary(read({greeting, "\x05\x01\x00\x07\x0e\xde\x8b\xf1\x01\xbb"s})), "-");
    EXPECT_EQ(summary(read({greeting, "\x05\x01\x00\x03\x02\x01\x02\x01\xbb"s})), "-");
}

TEST(ProxyRequest, socks4AndSocks4aAndHttpConnect) {
    EXPECT_EQ(summary(read({"\x04\x01\x0d\x05\xc6\x33\x64\x07xmrig\x00"s, "{\"id\":1}"})),
              "SOCKS4 198.51.100.7:3333 address tunnel@1+0");
    EXPECT_EQ(summary(read({"\x04\x01\x01\xbb\x00\x00\x00\x01\x00pool.hashvault.pro\x00"s})),
              "SOCKS4a pool.hashvault.pro:443 name tunnel@1+0");
    EXPECT_EQ(summary(read({"\x04\x01\x01\xbb\x00\x00\x00\x01\x00pool.hashvault.pro"s})), "-");
    const std::string connect =
        "CONNECT s3.eu-west-1.amazonaws.com:443 HTTP/1.1\r\nHost: s3.eu-west-1.amazonaws.com:443"
        "\r\n\r\n";
    EXPECT_EQ(summary(read({connect, "\x16\x03\x01"s})),
              "HTTP CONNECT s3.eu-west-1.amazonaws.com:443 name tunnel@1+0");
    EXPECT_EQ(summary(read({"CONNECT 198.51.100.7:8443 HTTP/1.1\r\n\r\n\x16\x03\x01"s})),
              "HTTP CONNECT 198.51.100.7:8443 address tunnel@0+38");
    EXPECT_EQ(summary(read({"CONNECT [2001:db8::7]:443 HTTP/1.1\r\n\r\n"s})),
              "HTTP CONNECT 2001:db8::7:443 address tunnel@1+0");
    EXPECT_EQ(summary(read({"CONNECT pool:443 HTTP/1.1\r\nHost: pool"s})), "-");  // no end yet
    EXPECT_EQ(summary(read({"CONNECT pool HTTP/1.1\r\n\r\n"s})), "-");
    EXPECT_EQ(summary(read({"GET / HTTP/1.1\r\n\r\n"s})), "-");
    EXPECT_EQ(summary(read({"\x16\x03\x01\x02\x00"s})), "-");
    EXPECT_EQ(summary(read({"{\"id\":1,\"method\":\"login\"}"})), "-");
    EXPECT_EQ(summary(read({})), "-");
    EXPECT_EQ(summary(read({""})), "-");
}

}  // namespace
}  // namespace gpuguard::agent
