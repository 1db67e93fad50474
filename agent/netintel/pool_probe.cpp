#include "gpuguard/netintel/pool_probe.h"

#include <cctype>
#include <cstring>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>

#include "gpuguard/common/ip_address.h"
#include "gpuguard/common/printable.h"
#include "gpuguard/netintel/stratum.h"

namespace gpuguard::agent::pool_probe {
namespace {

using json = nlohmann::json;

// Method names split as stratum.cpp keeps them: the agent's executable must
// not carry the whole names its own YARA rule looks for in miners.
constexpr std::string_view kMiningFamily = "mining.";
const std::string kAgent = "gpuguard-probe/1.0";

std::string mining_method(std::string_view name) {
    return std::string(kMiningFamily) + std::string(name);
}

// The words of an error value: its message, or the value itself.
std::string error_text(const json& error) {
    if (error.is_string()) return error.get<std::string>();
    if (error.is_object()) {
        const auto message = error.find("message");
        if (message != error.end() && message->is_string()) return message->get<std::string>();
    }
    return error.dump();
}

bool names_notify(const json& value, int depth = 0) {
    if (depth > 4) return false;
    if (value.is_string()) return value.get<std::string>() == mining_method("notify");
    if (!value.is_array()) return false;
    for (const auto& item : value) {
        if (names_notify(item, depth + 1)) return true;
    }
    return false;
}

// A refusal of the login's wallet: only a pool checks a payout address.
bool refuses_wallet(std::string text) {
    for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (text.find("method") != std::string::npos) return false;  // "method not found"
    for (const char* word : {"address", "wallet", "login", "payment", "miner"}) {
        if (text.find(word) != std::string::npos) return true;
    }
    return false;
}

// The answer's JSON-RPC lines judged for `dialect`: a pool's form, or
// nullopt and what they were (in `seen`).
std::optional<std::string> pool_form(Dialect dialect, std::string_view answer, std::string& seen) {
    // The answer to the request first, line by line.
    for (size_t start = 0; start < answer.size();) {
        size_t end = answer.find('\n', start);
        if (end == std::string_view::npos) end = answer.size();
        const json line = json::parse(answer.substr(start, end - start), nullptr, false);
        start = end + 1;
        if (line.is_discarded() || !line.is_object()) continue;
        const auto result = line.find("result");
        const auto error = line.find("error");
        if (error != line.end() && !error->is_null()) {
            const std::string text = error_text(*error);
            if (dialect == Dialect::kCryptoNote && refuses_wallet(text)) {
                return "pool: cryptonote login refused the dummy wallet (" + text + ")";
            }
            seen = "JSON-RPC error: " + text;
            continue;
        }
        if (result == line.end() || result->is_null()) continue;
        if (dialect != Dialect::kCryptoNote && result->is_array() && !result->empty() &&
            (names_notify(*result) || (*result)[0].is_array())) {
            return std::string("pool: ") + to_string(dialect) + " " + mining_method("subscribe") +
                   " answered with a subscription";
        }
        seen = "a JSON-RPC result without a pool's form";
    }
    // Then what the Stratum parser reads: a job or difficulty the pool
    // pushed, a login's job.
    stratum::Session session;
    const std::string sent = first_message(dialect);
    session.feed(NetPayload::Direction::kOut, sent, 0, static_cast<uint32_t>(sent.size()), 0);
    const size_t methods_sent = session.describe().methods.size();
    const auto update = session.feed(NetPayload::Direction::kIn, answer, 0,
                                     static_cast<uint32_t>(answer.size()), 1);
    const Stratum read = session.describe();
    if (read.methods.size() > methods_sent) {
        return "pool: pushed " + read.methods[methods_sent];
    }
    if (update.difficulty && dialect == Dialect::kCryptoNote) {
        return "pool: cryptonote login answered with a job";
    }
    return std::nullopt;
}

bool in_v4(const in_addr& address, uint32_t network, int bits) {
    const uint32_t host = ntohl(address.s_addr);
    const uint32_t mask = bits == 0 ? 0 : ~uint32_t{0} << (32 - bits);
    return (host & mask) == network;
}

std::optional<std::string> refused_v4(const in_addr& v4) {
    if (in_v4(v4, 0x7f000000u, 8)) return "loopback";
    if (in_v4(v4, 0xa9fe0000u, 16)) return "link-local";
    if (in_v4(v4, 0xe0000000u, 4)) return "multicast";
    if (in_v4(v4, 0x00000000u, 8)) return "unspecified";
    if (v4.s_addr == INADDR_BROADCAST) return "broadcast";
    return std::nullopt;
}

}  // namespace

const char* to_string(Dialect dialect) {
    switch (dialect) {
        case Dialect::kStratum1:
            return "stratum1";
        case Dialect::kCryptoNote:
            return "cryptonote";
        case Dialect::kEthStratum:
            return "ethstratum";
    }
    return "";
}

std::string dummy_wallet() { return "4" + std::string(94, '1'); }

std::string first_message(Dialect dialect) {
    json message;
    message["id"] = 1;
    switch (dialect) {
        case Dialect::kStratum1:
            message["method"] = mining_method("subscribe");
            message["params"] = json::array({kAgent});
            break;
        case Dialect::kCryptoNote:
            message["jsonrpc"] = "2.0";
            message["method"] = "login";
            message["params"] = {{"login", dummy_wallet()}, {"pass", "x"}, {"agent", kAgent}};
            break;
        case Dialect::kEthStratum:
            message["method"] = mining_method("subscribe");
            message["params"] = json::array({kAgent, "EthereumStratum/1.0.0"});
            break;
    }
    return message.dump() + "\n";
}

Verdict classify(Dialect dialect, const Exchange& exchange) {
    if (!exchange.error.empty()) return {false, true, "no connection: " + exchange.error};
    const std::string_view answer = exchange.answer;
    if (answer.empty()) {
        if (exchange.closed) return {false, false, "no answer: the peer closed the connection"};
        return {false, false, "no answer in " + std::to_string(exchange.timeout_ms) + " ms"};
    }
    if (answer.starts_with("HTTP/")) {
        const auto space = answer.find(' ');
        const std::string_view code =
            space == std::string_view::npos ? "" : answer.substr(space + 1, 3);
        return {false, true, "not a pool: HTTP " + std::string(code.empty() ? "answer" : code)};
    }
    if (answer.starts_with("SSH-")) return {false, true, "not a pool: an SSH server"};
    const auto first = static_cast<unsigned char>(answer.front());
    if ((first == 0x15 || first == 0x16) && answer.size() > 1 && answer[1] == 0x03) {
        return {false, true, "not a pool: a TLS record on a plain connection"};
    }
    if (first == '{') {
        std::string seen = "JSON without a pool's form";
        if (auto pool = pool_form(dialect, answer, seen)) return {true, true, std::move(*pool)};
        return {false, false, "not a pool for " + std::string(to_string(dialect)) + ": " + seen};
    }
    return {false, true, "not a pool: an answer in no pool's form"};
}

std::optional<std::string> refused_address(std::string_view address) {
    const std::string text(address);
    in_addr v4{};
    in6_addr v6{};
    if (inet_pton(AF_INET, text.c_str(), &v4) == 1) return refused_v4(v4);
    if (inet_pton(AF_INET6, text.c_str(), &v6) != 1) return "not an IP address";
    if (IN6_IS_ADDR_V4MAPPED(&v6) || IN6_IS_ADDR_V4COMPAT(&v6)) {
        std::memcpy(&v4.s_addr, &v6.s6_addr[12], 4);
        if (IN6_IS_ADDR_V4MAPPED(&v6)) return refused_v4(v4);
    }
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return "loopback";
    if (IN6_IS_ADDR_UNSPECIFIED(&v6)) return "unspecified";
    if (IN6_IS_ADDR_LINKLOCAL(&v6)) return "link-local";
    if (IN6_IS_ADDR_MULTICAST(&v6)) return "multicast";
    if (IN6_IS_ADDR_V4COMPAT(&v6)) return "unspecified";  // deprecated ::a.b.c.d: never a peer
    return std::nullopt;
}

bool own_address(std::string_view address, const std::vector<std::string>& own) {
    const auto canonical = canonical_ip(std::string(address));
    if (!canonical) return false;
    for (const auto& mine : own) {
        const auto other = canonical_ip(mine);
        if (other && other->first == canonical->first) return true;
    }
    return false;
}

std::string quoted_answer(std::string_view bytes, size_t cap) {
    const std::string_view kept = bytes.substr(0, cap);
    return printable(stratum::redact_wallets(kept)) + (bytes.size() > cap ? "…" : "");
}

}  // namespace gpuguard::agent::pool_probe
