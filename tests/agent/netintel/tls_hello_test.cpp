// The TLS ClientHello reader (gpuguard/netintel/tls_hello.h): SNI, ALPN and
// JA4 of a hello built from a published fingerprint (Chrome 143 as
// browserleaks.com reported it: ja4 t13d1516h2_8daaf6152771_d8a2da3f94cd,
// with its ciphers and extensions in wire order), GREASE ignored; a hello
// cut short keeps what came before the cut; anything else is not one.
#include "gpuguard/netintel/tls_hello.h"

#include <gtest/gtest.h>

namespace gpuguard::agent {
namespace {

void u16(std::string& out, uint16_t value) {
    out.push_back(static_cast<char>(value >> 8));
    out.push_back(static_cast<char>(value & 0xff));
}
void u24(std::string& out, uint32_t value) {
    out.push_back(static_cast<char>(value >> 16));
    u16(out, static_cast<uint16_t>(value));
}
std::string with_u16_length(const std::string& body) {
    std::string out;
    u16(out, static_cast<uint16_t>(body.size()));
    return out + body;
}

struct Extension {
    uint16_t type;
    std::string body;
};

// A TLS record holding a ClientHello with these ciphers and extensions.
std::string client_hello(const std::vector<uint16_t>& ciphers,
                         const std::vector<Extension>& extensions) {
    std::string hello;
    u16(hello, 0x0303);
    hello += std::string(32, '\x11');  // random
    hello += '\x20';
    hello += std::string(32, '\x22');  // session id
    std::string suites;
    for (const uint16_t cipher : ciphers) u16(suites, cipher);
    hello += with_u16_length(suites);
    hello += std::string("\x01\x00", 2);  // compression: null
    std::string list;
    for (const auto& [type, body] : extensions) {
        u16(list, type);
        list += with_u16_length(body);
    }
    hello += with_u16_length(list);
    std::string handshake = "\x01";
    u24(handshake, static_cast<uint32_t>(hello.size()));
    handshake += hello;
    std::string record = "\x16\x03\x01";
    return record + with_u16_length(handshake);
}

std::string server_name(const std::string& name) {
    std::string entry = std::string(1, '\0') + with_u16_length(name);
    return with_u16_length(entry);
}
std::string alpn(const std::vector<std::string>& protocols) {
    std::string list;
    for (const auto& protocol : protocols) list += static_cast<char>(protocol.size()) + protocol;
    return with_u16_length(list);
}
std::string u16_list(const std::vector<uint16_t>& values, bool byte_length = false) {
    std::string list;
    for (const uint16_t value : values) u16(list, value);
    return byte_length ? static_cast<char>(list.size()) + list : with_u16_length(list);
}

std::string chrome_hello(const std::string& sni = "tls.browserleaks.com") {
    const std::vector<uint16_t> ciphers = {0x3a3a,  // GREASE
                                           0x1301, 0x1302, 0x1303, 0xc02b, 0xc02f,
                                           0xc02c, 0xc030, 0xcca9, 0xcca8, 0xc013,
                                           0xc014, 0x009c, 0x009d, 0x002f, 0x0035};
    std::vector<Extension> extensions = {
        {0xdada, ""},  // GREASE
        {0x002d, std::string("\x01\x01", 2)},
        {0x0033, std::string(40, '\x33')},
        {0x0010, alpn({"h2", "http/1.1"})},
        {0xfe0d, std::string(20, '\x0d')},
        {0x0017, ""},
        {0x44cd, std::string("\x00\x03\x02h2", 6)},
        {0x0000, server_name(sni)},
        {0x000b, std::string("\x01\x00", 2)},
        {0x000a, u16_list({0x4a4a, 0x11ec, 0x001d, 0x0017, 0x0018})},
        {0x002b, u16_list({0x7a7a, 0x0304, 0x0303}, /*byte_length=*/true)},
        {0xff01, std::string(1, '\0')},
        {0x0023, ""},
        {0x0012, ""},
        {0x0005, std::string("\x01\x00\x00\x00\x00", 5)},
        {0x000d, u16_list({0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601})},
        {0x001b, std::string("\x02\x00\x02", 3)},
        {0x1a1a, std::string(1, '\0')},  // GREASE
    };
    return client_hello(ciphers, extensions);
}

TEST(TlsClientHello, ChromesHelloGivesItsPublishedJa4) {
    const auto hello = parse_tls_client_hello(chrome_hello());
    ASSERT_TRUE(hello);
    EXPECT_TRUE(hello->complete);
    EXPECT_EQ(hello->version, 0x0304);
    EXPECT_EQ(hello->server_name, "tls.browserleaks.com");
    EXPECT_EQ(hello->alpn, (std::vector<std::string>{"h2", "http/1.1"}));
    EXPECT_EQ(hello->ciphers.size(), 16u);  // GREASE kept as sent
    EXPECT_EQ(hello->ja4, "t13d1516h2_8daaf6152771_d8a2da3f94cd");
    // No SNI: "i"; one cipher fewer: another count and another hash.
    const auto by_address = parse_tls_client_hello(chrome_hello(""));
    ASSERT_TRUE(by_address);
    EXPECT_TRUE(by_address->ja4.starts_with("t13i1516h2_8daaf6152771_")) << by_address->ja4;
}

TEST(TlsClientHello, AMinersOpenSslHelloNamesItsPoolFirstAndOffersNoAlpn) {
    // OpenSSL's order: server_name first; XMRig sets no ALPN.
    const auto hello = parse_tls_client_hello(client_hello(
        {0x1302, 0x1303, 0x1301, 0xc02c, 0xc030}, {{0x0000, server_name("pool.supportxmr.com")},
                                                   {0x000b, std::string("\x03\x00\x01\x02", 4)},
                                                   {0x000a, u16_list({0x001d, 0x0017})},
                                                   {0x0023, ""},
                                                   {0x0016, ""},
                                                   {0x0017, ""},
                                                   {0x000d, u16_list({0x0403, 0x0503})},
                                                   {0x002b, u16_list({0x0304, 0x0303}, true)},
                                                   {0x002d, std::string("\x01\x01", 2)},
                                                   {0x0033, std::string(38, '\x01')}}));
    ASSERT_TRUE(hello);
    EXPECT_EQ(hello->server_name, "pool.supportxmr.com");
    EXPECT_TRUE(hello->alpn.empty());
    EXPECT_TRUE(hello->ja4.starts_with("t13d051000_")) << hello->ja4;
}

TEST(TlsClientHello, AHelloCutShortKeepsWhatCameBeforeTheCut) {
    std::string bytes = client_hello({0x1301}, {{0x0000, server_name("pool.example.net")},
                                                {0x0015, std::string(600, '\0')}});  // padding
    bytes.resize(512);  // what the payload programs capture
    const auto hello = parse_tls_client_hello(bytes);
    ASSERT_TRUE(hello);
    EXPECT_EQ(hello->server_name, "pool.example.net");
    EXPECT_FALSE(hello->complete);
    EXPECT_EQ(hello->ja4, "");
    // Cut inside the SNI itself: no name, still a hello.
    const std::string whole = client_hello({0x1301}, {{0x0000, server_name("pool.example.net")}});
    const auto cut = parse_tls_client_hello(whole.substr(0, whole.size() - 3));
    ASSERT_TRUE(cut);
    EXPECT_EQ(cut->server_name, "");
    EXPECT_FALSE(cut->complete);
}

TEST(TlsClientHello, AnythingElseIsNotOne) {
    EXPECT_FALSE(parse_tls_client_hello(""));
    EXPECT_FALSE(parse_tls_client_hello("{\"id\":1,\"method\":\"login\"}"));
    EXPECT_FALSE(
        parse_tls_client_hello(std::string("\x17\x03\x03\x00\x20", 5) + std::string(32, 'x')));
    std::string server_hello = chrome_hello();
    server_hello[5] = 0x02;
    EXPECT_FALSE(parse_tls_client_hello(server_hello));
    // Cut before its cipher suites end.
    EXPECT_FALSE(parse_tls_client_hello(chrome_hello().substr(0, 5 + 4 + 2 + 32 + 33 + 10)));
    // Lengths that point past the end never read past it.
    std::string lying = chrome_hello();
    for (size_t at = 0; at < lying.size(); ++at) {
        std::string bent = lying;
        bent[at] = '\xff';
        (void)parse_tls_client_hello(bent);
    }
}

}  // namespace
}  // namespace gpuguard::agent
