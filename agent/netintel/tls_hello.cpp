#include "gpuguard/netintel/tls_hello.h"

#include <algorithm>
#include <cctype>
#include <cstdio>

#include "gpuguard/common/sha256.h"

namespace gpuguard::agent {
namespace {

constexpr uint16_t kServerName = 0x0000;
constexpr uint16_t kSignatureAlgorithms = 0x000d;
constexpr uint16_t kAlpn = 0x0010;
constexpr uint16_t kSupportedVersions = 0x002b;

// RFC 8701's reserved values (0x0a0a, 0x1a1a, ... 0xfafa): ignored by JA4.
bool grease(uint16_t value) {
    return (value & 0x0f0f) == 0x0a0a && (value >> 12) == ((value >> 4) & 0x0f);
}

// A bounds-checked reader over the captured bytes.
class Bytes {
  public:
    explicit Bytes(std::string_view data) : data_(data) {}
    bool left(size_t n) const { return data_.size() >= n; }
    size_t size() const { return data_.size(); }
    uint8_t u8() {
        const uint8_t v = static_cast<uint8_t>(data_[0]);
        data_.remove_prefix(1);
        return v;
    }
    uint16_t u16() {
        const uint16_t v = static_cast<uint16_t>(static_cast<uint8_t>(data_[0]) << 8 |
                                                 static_cast<uint8_t>(data_[1]));
        data_.remove_prefix(2);
        return v;
    }
    // The next `n` bytes (fewer when the capture ends first).
    std::string_view take(size_t n) {
        const std::string_view part = data_.substr(0, n);
        data_.remove_prefix(part.size());
        return part;
    }

  private:
    std::string_view data_;
};

std::string version_code(uint16_t version) {
    switch (version) {
        case 0x0304:
            return "13";
        case 0x0303:
            return "12";
        case 0x0302:
            return "11";
        case 0x0301:
            return "10";
        case 0x0300:
            return "s3";
        default:
            return "00";
    }
}

std::string hex4_list(const std::vector<uint16_t>& values) {
    std::string out;
    char item[6];
    for (const uint16_t value : values) {
        std::snprintf(item, sizeof(item), "%04x", value);
        if (!out.empty()) out += ',';
        out += item;
    }
    return out;
}

std::string truncated_hash(const std::string& text) {
    return text.empty() ? "000000000000" : sha256_hex(text).substr(0, 12);
}

std::string ja4_of(const TlsClientHello& hello) {
    std::vector<uint16_t> ciphers, extensions;
    for (const uint16_t cipher : hello.ciphers) {
        if (!grease(cipher)) ciphers.push_back(cipher);
    }
    size_t extension_count = 0;
    for (const uint16_t extension : hello.extensions) {
        if (grease(extension)) continue;
        ++extension_count;
        if (extension != kServerName && extension != kAlpn) extensions.push_back(extension);
    }
    std::string alpn = "00";
    if (!hello.alpn.empty() && !hello.alpn.front().empty()) {
        const std::string& first = hello.alpn.front();
        const unsigned char a = static_cast<unsigned char>(first.front());
        const unsigned char b = static_cast<unsigned char>(first.back());
        if (std::isalnum(a) && std::isalnum(b)) {
            alpn = {static_cast<char>(a), static_cast<char>(b)};
        } else {
            char hex[3];
            std::snprintf(hex, sizeof(hex), "%x%x", a >> 4, b & 0x0f);
            alpn = hex;
        }
    }
    char head[16];
    std::snprintf(head, sizeof(head), "t%s%c%02zu%02zu", version_code(hello.version).c_str(),
                  hello.server_name.empty() ? 'i' : 'd', std::min<size_t>(ciphers.size(), 99),
                  std::min<size_t>(extension_count, 99));
    std::sort(ciphers.begin(), ciphers.end());
    std::sort(extensions.begin(), extensions.end());
    std::string extension_text = hex4_list(extensions);
    if (!hello.signature_algorithms.empty() && !extension_text.empty()) {
        extension_text += "_" + hex4_list(hello.signature_algorithms);
    }
    return std::string(head) + alpn + "_" + truncated_hash(hex4_list(ciphers)) + "_" +
           truncated_hash(extension_text);
}

void read_extension(uint16_t type, std::string_view body, TlsClientHello& hello) {
    Bytes in(body);
    if (type == kServerName && in.left(2)) {
        Bytes names(in.take(in.u16()));
        while (names.left(3)) {
            const uint8_t kind = names.u8();
            const uint16_t length = names.u16();
            if (!names.left(length)) break;
            const std::string_view name = names.take(length);
            if (kind == 0 && hello.server_name.empty()) hello.server_name = std::string(name);
        }
    } else if (type == kAlpn && in.left(2)) {
        Bytes protocols(in.take(in.u16()));
        while (protocols.left(1)) {
            const uint8_t length = protocols.u8();
            if (!protocols.left(length)) break;
            hello.alpn.emplace_back(protocols.take(length));
        }
    } else if (type == kSupportedVersions && in.left(1)) {
        Bytes versions(in.take(in.u8()));
        uint16_t highest = 0;
        while (versions.left(2)) {
            const uint16_t version = versions.u16();
            if (!grease(version)) highest = std::max(highest, version);
        }
        if (highest) hello.version = highest;
    } else if (type == kSignatureAlgorithms && in.left(2)) {
        Bytes algorithms(in.take(in.u16()));
        while (algorithms.left(2)) hello.signature_algorithms.push_back(algorithms.u16());
    }
}

}  // namespace

std::optional<TlsClientHello> parse_tls_client_hello(std::string_view bytes) {
    Bytes in(bytes);
    // Record: handshake (22), version 3.x, length; then ClientHello (1), length.
    if (!in.left(9) || in.u8() != 0x16 || in.u8() != 0x03) return std::nullopt;
    in.take(3);  // minor version, record length
    if (in.u8() != 0x01) return std::nullopt;
    in.take(3);  // handshake length
    TlsClientHello hello;
    if (!in.left(2 + 32 + 1)) return std::nullopt;
    hello.version = in.u16();
    in.take(32);  // random
    const uint8_t session_id = in.u8();
    if (!in.left(session_id + 2u)) return std::nullopt;
    in.take(session_id);
    const uint16_t cipher_bytes = in.u16();
    if (cipher_bytes % 2 != 0 || !in.left(cipher_bytes)) return std::nullopt;
    for (Bytes ciphers(in.take(cipher_bytes)); ciphers.left(2);) {
        hello.ciphers.push_back(ciphers.u16());
    }
    if (!in.left(1)) return hello;
    const uint8_t compression = in.u8();
    if (!in.left(compression + 2u)) return hello;
    in.take(compression);
    const uint16_t extension_bytes = in.u16();
    const bool all_captured = in.left(extension_bytes);
    Bytes extensions(in.take(extension_bytes));
    while (extensions.left(4)) {
        const uint16_t type = extensions.u16();
        const uint16_t length = extensions.u16();
        if (!extensions.left(length)) break;  // cut off inside this one
        hello.extensions.push_back(type);
        read_extension(type, extensions.take(length), hello);
    }
    hello.complete = all_captured && extensions.size() == 0;
    if (hello.complete) hello.ja4 = ja4_of(hello);
    return hello;
}

}  // namespace gpuguard::agent
