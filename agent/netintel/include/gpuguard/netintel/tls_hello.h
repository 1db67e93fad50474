// What a TLS ClientHello says without decrypting anything: the server name
// it asks for (SNI), the application protocols it offers (ALPN) and a
// JA4 fingerprint of the client (FoxIO's JA4: version, SNI or not, cipher
// and extension counts, first ALPN, then truncated SHA-256s of the sorted
// cipher suites and of the sorted extensions with the signature
// algorithms), read from the first bytes a connection sent (the payload
// programs capture 512). A miner's pool name is in the SNI even under TLS;
// XMRig and most miners link OpenSSL, whose hello puts it first.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuguard::agent {

struct TlsClientHello {
    uint16_t version = 0;           // highest offered (supported_versions, else legacy_version)
    std::string server_name;        // SNI host_name; "" when absent or past the bytes captured
    std::vector<std::string> alpn;  // offered protocols, in order
    std::vector<uint16_t> ciphers;  // as sent, GREASE included
    std::vector<uint16_t> extensions;
    std::vector<uint16_t> signature_algorithms;
    bool complete = false;  // every extension was within the bytes given
    // "t13d1516h2_8daaf6152771_e5627efa2ab1"; "" when not complete (a JA4
    // needs every extension).
    std::string ja4;
};

// The ClientHello at the start of `bytes` (a TLS handshake record, type 1),
// as much of it as `bytes` holds: nullopt when it is not one, or is cut
// before its cipher suites.
std::optional<TlsClientHello> parse_tls_client_hello(std::string_view bytes);

}  // namespace gpuguard::agent
