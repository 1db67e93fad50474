// What a mining session's values mean, apart from the session itself:
// protocol names, the hashes a difficulty or a target stands for (the
// hash-rate estimate's unit), and wallets cut out of logins and lines
// before anything is printed or journaled.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <iterator>

#include "gpuguard/netintel/stratum.h"

namespace gpuguard::agent::stratum {
namespace {

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

}  // namespace

std::string describe_hash_rate(double rate, std::optional<double> low, std::optional<double> high) {
    static constexpr const char* kUnits[] = {"H/s", "kH/s", "MH/s", "GH/s", "TH/s", "PH/s"};
    size_t unit = 0;
    double scale = 1;
    while (rate / scale >= 1000 && unit + 1 < std::size(kUnits)) {
        scale *= 1000;
        ++unit;
    }
    char text[96];
    if (low && high) {
        // One decimal, more where the low end would read 0.0.
        const int digits = *low / scale > 0 && *low / scale < 0.05 ? 3 : 1;
        std::snprintf(text, sizeof(text), "%.1f %s (%.*f-%.*f)", rate / scale, kUnits[unit], digits,
                      *low / scale, digits, *high / scale);
    } else {
        std::snprintf(text, sizeof(text), "%.1f %s", rate / scale, kUnits[unit]);
    }
    return text;
}

const char* to_string(Protocol protocol) {
    switch (protocol) {
        case Protocol::kUnknown:
            return "";
        case Protocol::kStratum1:
            return "stratum1";
        case Protocol::kEthereumStratum:
            return "ethereumstratum";
        case Protocol::kEthProxy:
            return "ethproxy";
        case Protocol::kCryptoNote:
            return "cryptonote";
        case Protocol::kStratum2:
            return "stratum2";
        case Protocol::kNodeRpc:
            return "node_rpc";
        case Protocol::kGrin:
            return "grin";
    }
    return "";
}

std::optional<double> hashes_from_difficulty(double difficulty) {
    if (!(difficulty > 0) || !std::isfinite(difficulty)) return std::nullopt;
    return difficulty * 4294967296.0;
}

std::optional<double> hashes_from_target256(std::string_view hex) {
    if (hex.starts_with("0x") || hex.starts_with("0X")) hex.remove_prefix(2);
    if (hex.empty() || hex.size() > 64) return std::nullopt;
    long double target = 0;
    for (char c : hex) {
        const int digit = hex_digit(c);
        if (digit < 0) return std::nullopt;
        target = target * 16 + digit;
    }
    // Fewer than 64 digits: the most significant ones (NiceHash sends "0000ffff").
    target *= std::pow(16.0L, static_cast<long double>(64 - hex.size()));
    if (target <= 0) return std::nullopt;
    return static_cast<double>(std::pow(2.0L, 256.0L) / target);
}

std::optional<double> hashes_from_cryptonote_target(std::string_view hex) {
    if (hex.size() != 8 && hex.size() != 16) return std::nullopt;
    uint64_t target = 0;
    // Little-endian bytes: the first pair is the least significant.
    for (size_t byte = 0; byte < hex.size() / 2; ++byte) {
        const int high = hex_digit(hex[2 * byte]);
        const int low = hex_digit(hex[2 * byte + 1]);
        if (high < 0 || low < 0) return std::nullopt;
        target |= static_cast<uint64_t>(high << 4 | low) << (8 * byte);
    }
    if (target == 0) return std::nullopt;
    const double full = hex.size() == 8 ? 4294967295.0 : 18446744073709551615.0;
    return std::floor(full / static_cast<double>(target));
}

std::string redact_login(std::string_view login) {
    const size_t cut = login.find_first_of("./+");
    const std::string_view wallet = login.substr(0, cut);
    const std::string_view rest = cut == std::string_view::npos ? "" : login.substr(cut);
    if (wallet.size() <= 16) return std::string(login);
    return std::string(wallet.substr(0, 8)) + "\u2026" + std::string(rest);
}

namespace {

// A login or worker string whose wallet part redact_login() would cut.
bool wallet_like(std::string_view value) {
    const std::string_view wallet = value.substr(0, value.find_first_of("./+"));
    if (wallet.size() <= 16) return false;
    return std::all_of(wallet.begin(), wallet.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == ':';
    });
}

}  // namespace

std::string redact_wallets(std::string_view line) {
    std::string out;
    out.reserve(line.size());
    size_t at = 0;
    while (at < line.size()) {
        if (line[at] != '"') {
            out += line[at++];
            continue;
        }
        // A string literal, to its closing quote or the end of a cut line.
        size_t end = at + 1;
        while (end < line.size() && line[end] != '"') end += line[end] == '\\' ? 2 : 1;
        end = std::min(end, line.size());
        const std::string_view value = line.substr(at + 1, end - at - 1);
        out += '"';
        out += wallet_like(value) ? redact_login(value) : std::string(value);
        if (end < line.size()) out += '"';
        at = end + 1;
    }
    return out;
}

}  // namespace gpuguard::agent::stratum
