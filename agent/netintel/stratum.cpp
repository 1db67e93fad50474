#include "gpuguard/netintel/stratum.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <tuple>

#include <nlohmann/json.hpp>

namespace gpuguard::agent::stratum {
namespace {

using json = nlohmann::json;

constexpr size_t kMaxPending = 256;
constexpr size_t kMaxMessageChars = 512;
constexpr uint32_t kNoiseClientAct = 64;   // Stratum v2: initiator's first handshake message
constexpr uint32_t kNoiseServerAct = 170;  // responder's answer
constexpr std::string_view kNoiseHandshakeLine = "noise_handshake client_act=64 server_act=170";

// The method names of each dialect that no ordinary JSON-RPC API uses,
// kept as family + name: the agent's own executable must not carry the
// whole names, which YARA rule GG_Stratum_Client_Executable looks for in
// miners (tests/rules/cli_test.cpp scans the agent with its own rules).
constexpr std::string_view kMining = "mining.";
constexpr std::string_view kEth = "eth_";

struct MethodProtocol {
    std::string_view family;
    std::string_view name;
    Protocol protocol;
};
constexpr MethodProtocol kMethods[] = {
    {kMining, "subscribe", Protocol::kStratum1},
    {kMining, "authorize", Protocol::kStratum1},
    {kMining, "submit", Protocol::kStratum1},
    {kMining, "notify", Protocol::kStratum1},
    {kMining, "set_difficulty", Protocol::kStratum1},
    {kMining, "set_extranonce", Protocol::kStratum1},
    {kMining, "extranonce.subscribe", Protocol::kStratum1},
    {kMining, "configure", Protocol::kStratum1},
    {kMining, "suggest_difficulty", Protocol::kStratum1},
    {kMining, "set_target", Protocol::kEthereumStratum},
    {kMining, "hello", Protocol::kEthereumStratum},
    {kMining, "hashrate", Protocol::kEthereumStratum},
    {kEth, "submitLogin", Protocol::kEthProxy},
    {kEth, "submitWork", Protocol::kEthProxy},
    {kEth, "submitHashrate", Protocol::kEthProxy},
    {kMining, "suggest_target", Protocol::kStratum1},
    {kMining, "multi_version", Protocol::kStratum1},
    {kMining, "get_transactions", Protocol::kStratum1},
    // Solo mining against a node (BIP 22 getblocktemplate, legacy getwork,
    // monerod's daemon RPC as XMRig's daemon mode and p2pool use it), and
    // Grin's stratum. Split like the others: family + rest.
    {"getblock", "template", Protocol::kNodeRpc},
    {"submit", "block", Protocol::kNodeRpc},
    {"get", "work", Protocol::kNodeRpc},
    {"get_block_", "template", Protocol::kNodeRpc},
    {"submit_", "block", Protocol::kNodeRpc},
    {"get_miner_", "data", Protocol::kNodeRpc},
    {"getjob", "template", Protocol::kGrin},
};

// The Ergo node's mining API: what an Autolykos solo miner polls and posts.
constexpr std::string_view kErgoMiningPaths[] = {"/mining/candidate", "/mining/solution"};

// method == family + name.
bool is(std::string_view method, std::string_view family, std::string_view name) {
    return method.size() == family.size() + name.size() && method.starts_with(family) &&
           method.ends_with(name);
}

// The value of "key": "..." in text that is not valid JSON (a capture cut
// at 512 bytes), or nullopt; with `cut_ok`, a value the cut ends inside is
// returned as far as it goes.
std::optional<std::string> string_field(std::string_view text, std::string_view key,
                                        bool cut_ok = false) {
    std::string quoted(1, '"');  // not `"\"" + std::string(...)`: GCC 12 -O3 -Wrestrict
    quoted.append(key);
    quoted += '"';
    size_t pos = text.find(quoted);
    while (pos != std::string_view::npos) {
        size_t cursor = pos + quoted.size();
        while (cursor < text.size() && (text[cursor] == ' ' || text[cursor] == '\t')) ++cursor;
        if (cursor < text.size() && text[cursor] == ':') {
            ++cursor;
            while (cursor < text.size() && (text[cursor] == ' ' || text[cursor] == '\t')) ++cursor;
            if (cursor < text.size() && text[cursor] == '"') {
                const size_t end = text.find('"', cursor + 1);
                if (end == std::string_view::npos) {
                    if (!cut_ok) return std::nullopt;
                    return std::string(text.substr(cursor + 1));
                }
                return std::string(text.substr(cursor + 1, end - cursor - 1));
            }
        }
        pos = text.find(quoted, pos + 1);
    }
    return std::nullopt;
}

std::string id_text(const json& message) {
    const auto id = message.find("id");
    if (id == message.end() || id->is_null()) return "";
    return id->is_string() ? id->get<std::string>() : id->dump();
}

// "0x1dcd6500" or a number: a rate or value the miner reports.
std::optional<double> number_or_hex(const json& value) {
    if (value.is_number()) return value.get<double>();
    if (!value.is_string()) return std::nullopt;
    std::string text = value.get<std::string>();
    if (text.starts_with("0x") || text.starts_with("0X")) {
        text.erase(0, 2);
        // EthereumStratum/2.0.0 sends rates as 32-byte hex: leading zeros do not count.
        const size_t digits = text.find_first_not_of('0');
        text.erase(0, std::min(digits, text.size() > 0 ? text.size() - 1 : 0));
        if (text.empty() || text.size() > 16 ||
            text.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos) {
            return std::nullopt;
        }
        return static_cast<double>(std::stoull(text, nullptr, 16));
    }
    char* end = nullptr;
    const double parsed = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || *end != '\0') return std::nullopt;
    return parsed;
}

const json* param_at(const json& message, size_t index) {
    const auto params = message.find("params");
    if (params == message.end() || !params->is_array() || params->size() <= index) return nullptr;
    return &(*params)[index];
}

const json* param(const json& message, const char* key) {
    const auto params = message.find("params");
    if (params == message.end() || !params->is_object()) return nullptr;
    const auto found = params->find(key);
    return found == params->end() ? nullptr : &*found;
}

}  // namespace

Update Session::feed(NetPayload::Direction direction, std::string_view bytes, uint32_t seq,
                     uint32_t length, uint64_t ts_ns) {
    Update update;
    const bool outbound = direction == NetPayload::Direction::kOut;
    if (seq == 0 && !bytes.empty()) {
        (outbound ? first_out_size_ : first_in_size_) = length;
        if (outbound) first_out_binary_ = bytes.front() != '{';
    }
    if (outbound && (bytes.starts_with("POST ") || bytes.starts_with("GET "))) {
        http_request(bytes, ts_ns, update);
    } else if (!bytes.empty() && bytes.front() == '{') {
        size_t start = 0;
        while (start < bytes.size()) {
            size_t end = bytes.find('\n', start);
            if (end == std::string_view::npos) end = bytes.size();
            const std::string_view text = bytes.substr(start, end - start);
            if (!text.empty() && text.front() == '{') line(direction, text, ts_ns, update);
            start = end + 1;
        }
    }
    // Stratum v2 opens with a Noise NX handshake of fixed sizes; nothing else
    // sends exactly 64 bytes of binary and gets exactly 170 back. The
    // connection must go on past the handshake (SetupConnection follows at
    // once): a probe that closes after the answer is not a session.
    if (seq > 0) after_handshake_ = true;
    if (protocol_ == Protocol::kUnknown && first_out_binary_ &&
        first_out_size_ == kNoiseClientAct && first_in_size_ == kNoiseServerAct &&
        after_handshake_) {
        set_protocol(Protocol::kStratum2, update);
        // The handshake bytes are random: what payload signatures match is
        // this line, which no JSON-RPC line can be (GG-STRATUM-0023).
        method_seen("noise_handshake", kNoiseHandshakeLine, update);
    }
    return update;
}

bool may_be_node_rpc(std::string_view bytes) {
    const auto line_end = bytes.find("\r\n");
    const std::string_view request = bytes.substr(0, line_end);
    if (request.starts_with("GET ") || request.starts_with("POST ")) {
        const std::string_view path = request.substr(request.find(' ') + 1);
        for (std::string_view mining : kErgoMiningPaths) {
            if (path.starts_with(mining)) return true;
        }
    }
    if (!bytes.starts_with("POST ")) return false;
    const auto body = bytes.find("\r\n\r\n");
    return body != std::string_view::npos && body + 4 < bytes.size() && bytes[body + 4] == '{';
}

// One outbound HTTP request: the Ergo node's mining API by its path, a
// JSON-RPC body (bitcoind, monerod's /json_rpc) by its method.
void Session::http_request(std::string_view bytes, uint64_t ts_ns, Update& update) {
    const std::string_view request = bytes.substr(0, bytes.find("\r\n"));
    const auto space = request.find(' ');
    const std::string_view path =
        request.substr(space + 1, request.find(' ', space + 1) - space - 1);
    for (std::string_view mining : kErgoMiningPaths) {
        if (path.starts_with(mining)) {
            set_protocol(Protocol::kNodeRpc, update);
            method_seen(std::string(mining), request, update);
        }
    }
    const auto body = bytes.find("\r\n\r\n");
    if (body == std::string_view::npos || body + 4 >= bytes.size() || bytes[body + 4] != '{') {
        return;
    }
    line(NetPayload::Direction::kOut, bytes.substr(body + 4), ts_ns, update);
}

void Session::set_protocol(Protocol protocol, Update& update) {
    if (protocol_ == protocol) return;
    // The more specific dialect wins over plain Stratum v1 (EthereumStratum
    // uses mining.subscribe/notify too).
    if (protocol_ == Protocol::kUnknown) update.recognised = true;
    if (protocol_ == Protocol::kUnknown || protocol_ == Protocol::kStratum1) protocol_ = protocol;
}

void Session::method_seen(const std::string& method, std::string_view text, Update& update) {
    if (std::find(methods_.begin(), methods_.end(), method) != methods_.end()) return;
    methods_.push_back(method);
    if (!text.empty()) messages_.emplace_back(text.substr(0, kMaxMessageChars));
    update.new_method = true;
}

void Session::set_share_hashes(std::optional<double> hashes, Update& update) {
    if (!hashes) return;
    if (!job_seen_) {
        job_seen_ = true;
        first_job_ns_ = line_ts_ns_;
    }
    share_hashes_ = *hashes;
    ++difficulty_updates_;
    update.difficulty = true;
}

void Session::share_submitted(const std::string& id, uint64_t ts_ns, Update& update) {
    ++submitted_;
    hashes_submitted_ += share_hashes_;
    last_seen_ns_ = std::max(last_seen_ns_, ts_ns);
    if (!id.empty() && pending_.size() < kMaxPending) pending_.insert(id);
    update.share = true;
}

void Session::share_answered(const std::string& id, bool accepted, Update& update) {
    if (pending_.erase(id) == 0) return;
    ++(accepted ? accepted_ : rejected_);
    update.share = true;
}

void Session::line(NetPayload::Direction direction, std::string_view text, uint64_t ts_ns,
                   Update& update) {
    line_ts_ns_ = ts_ns;
    last_seen_ns_ = std::max(last_seen_ns_, ts_ns);
    const bool outbound = direction == NetPayload::Direction::kOut;
    const json message = json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (message.is_discarded() || !message.is_object()) {
        // Cut at 512 bytes: the method name and a job's target are near the start.
        const auto method = string_field(text, "method");
        if (!method) return;
        for (const auto& known : kMethods) {
            if (is(*method, known.family, known.name)) {
                set_protocol(known.protocol, update);
                method_seen(*method, text, update);
            }
        }
        if (*method == "job" && protocol_ == Protocol::kCryptoNote) {
            if (auto target = string_field(text, "target")) {
                set_share_hashes(hashes_from_cryptonote_target(*target), update);
            }
        }
        if (*method == "login" && outbound) cut_login(text, update);
        return;
    }
    const auto method_it = message.find("method");
    const std::string method =
        method_it != message.end() && method_it->is_string() ? method_it->get<std::string>() : "";
    const std::string id = id_text(message);

    if (method.empty()) {
        // A response: to a submit, to a CryptoNote login (with the first job),
        // or an ETHPROXY work package.
        const auto result = message.find("result");
        const auto error = message.find("error");
        const bool failed = error != message.end() && !error->is_null();
        if (outbound || !recognised()) return;
        if (pending_.contains(id)) {
            bool ok = !failed;
            if (result != message.end() && result->is_boolean()) ok = ok && result->get<bool>();
            if (result != message.end() && result->is_object()) {
                const auto status = result->find("status");
                if (status != result->end() && status->is_string()) ok = ok && *status == "OK";
            }
            share_answered(id, ok, update);
            return;
        }
        if (result == message.end()) return;
        if (protocol_ == Protocol::kCryptoNote && result->is_object()) {
            const auto job = result->find("job");
            if (job != result->end() && job->is_object() && job->contains("target") &&
                (*job)["target"].is_string()) {
                set_share_hashes(hashes_from_cryptonote_target((*job)["target"].get<std::string>()),
                                 update);
            }
        } else if (protocol_ == Protocol::kEthProxy && result->is_array() && result->size() >= 3 &&
                   (*result)[2].is_string()) {
            const auto hashes = hashes_from_target256((*result)[2].get<std::string>());
            if (hashes && *hashes != share_hashes_) set_share_hashes(hashes, update);
        }
        return;
    }

    for (const auto& known : kMethods) {
        if (is(method, known.family, known.name)) {
            set_protocol(known.protocol, update);
            method_seen(method, text, update);
        }
    }
    // Parameter shapes of the CryptoNote (XMRig) dialect, whose method names
    // are common words: login{login}, submit{job_id, nonce}, job{blob|seed_hash, target}.
    if (method == "login" && outbound && param(message, "login")) {
        set_protocol(Protocol::kCryptoNote, update);
        method_seen(method, text, update);
        if (const json* login = param(message, "login"); login->is_string()) {
            login_ = redact_login(login->get<std::string>());
        }
        if (const json* agent = param(message, "agent"); agent && agent->is_string()) {
            agent_ = agent->get<std::string>();
        }
        login_id_ = id;
        return;
    }
    if (method == "submit" && outbound && param(message, "job_id") && param(message, "nonce")) {
        set_protocol(Protocol::kCryptoNote, update);
        method_seen(method, text, update);
        share_submitted(id, ts_ns, update);
        return;
    }
    if (method == "job" && !outbound && (param(message, "blob") || param(message, "seed_hash"))) {
        set_protocol(Protocol::kCryptoNote, update);
        method_seen(method, text, update);
        if (const json* target = param(message, "target"); target && target->is_string()) {
            set_share_hashes(hashes_from_cryptonote_target(target->get<std::string>()), update);
        }
        return;
    }
    if (method == "keepalived" && outbound && protocol_ == Protocol::kCryptoNote) {
        method_seen(method, text, update);
        return;
    }
    if (is(method, kEth, "getWork") && outbound && protocol_ == Protocol::kEthProxy) {
        method_seen(method, text, update);
        return;
    }
    if (!recognised()) return;

    if (outbound) {
        if (is(method, kMining, "subscribe")) {
            const json* agent = param_at(message, 0);
            if (agent && agent->is_string()) agent_ = agent->get<std::string>();
            const json* version = param_at(message, 1);
            if (version && version->is_string() &&
                version->get<std::string>().starts_with("EthereumStratum/")) {
                set_protocol(Protocol::kEthereumStratum, update);
            }
        } else if (is(method, kMining, "hello")) {
            if (const json* agent = param(message, "agent"); agent && agent->is_string()) {
                agent_ = agent->get<std::string>();
            }
        } else if (is(method, kMining, "authorize") || is(method, kEth, "submitLogin")) {
            const json* login = param_at(message, 0);
            if (login && login->is_string()) login_ = redact_login(login->get<std::string>());
            if (is(method, kEth, "submitLogin")) {
                const auto worker = message.find("worker");
                if (worker != message.end() && worker->is_string() && !login_.empty()) {
                    login_ += "." + worker->get<std::string>();
                }
            }
        } else if (is(method, kMining, "submit") || is(method, kEth, "submitWork")) {
            share_submitted(id, ts_ns, update);
        } else if (is(method, kEth, "submitHashrate") || is(method, kMining, "hashrate")) {
            if (const json* rate = param_at(message, 0)) {
                if (auto value = number_or_hex(*rate)) {
                    reported_rate_ = *value;
                    update.reported_rate = true;
                }
            }
        }
        return;
    }
    if (is(method, kMining, "set_difficulty")) {
        if (const json* difficulty = param_at(message, 0); difficulty && difficulty->is_number()) {
            set_share_hashes(hashes_from_difficulty(difficulty->get<double>()), update);
        }
    } else if (is(method, kMining, "set")) {
        // EthereumStratum/2.0.0: {"target":"0x0112e0be..."}, leading zeros left out.
        if (const json* target = param(message, "target"); target && target->is_string()) {
            std::string hex = target->get<std::string>();
            if (hex.starts_with("0x") || hex.starts_with("0X")) hex.erase(0, 2);
            if (!hex.empty() && hex.size() < 64) hex.insert(0, 64 - hex.size(), '0');
            set_share_hashes(hashes_from_target256(hex), update);
        }
    } else if (is(method, kMining, "set_target")) {
        if (const json* target = param_at(message, 0); target && target->is_string()) {
            set_share_hashes(hashes_from_target256(target->get<std::string>()), update);
        }
    }
}

// A CryptoNote (XMRig) login cut at the capture limit, recognised without
// the pool's answer: "method":"login" with a "params" object whose "login"
// value has begun, and the miner's shape beside it -- its "agent" or "algo"
// list, or a login long enough to be a wallet (a Monero address is 95
// characters: the reason the line outgrew the capture). A web API's
// {"method":"login","params":{"login":"alice"}} is none of these.
void Session::cut_login(std::string_view text, Update& update) {
    const size_t params = text.find("\"params\"");
    if (params == std::string_view::npos) return;
    const auto login = string_field(text.substr(params), "login", /*cut_ok=*/true);
    if (!login) return;
    const auto wallet_chars = std::count_if(login->begin(), login->end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) != 0;
    });
    const bool shaped = text.find("\"agent\"", params) != std::string_view::npos ||
                        text.find("\"algo\"", params) != std::string_view::npos ||
                        wallet_chars >= 64;
    if (!shaped) return;
    set_protocol(Protocol::kCryptoNote, update);
    method_seen("login", text, update);
    login_ = redact_login(*login);
    if (auto agent = string_field(text, "agent")) agent_ = *agent;
}

namespace {

// The p-quantile of the chi-square distribution with k degrees of freedom,
// by Wilson and Hilferty's cube-root approximation (within 1 % for k >= 2,
// what a share count's interval needs).
double chi_square_quantile(double k, double z) {
    const double a = 2.0 / (9.0 * k);
    const double root = 1.0 - a + z * std::sqrt(a);
    return k * root * root * root;
}

constexpr double kZ975 = 1.959963985;  // the standard normal's 97.5 % point

}  // namespace

std::optional<double> Session::hash_rate() const {
    // Two shares at least: one share's interval spans a factor of 200.
    if (submitted_ < 2 || hashes_submitted_ <= 0 || !job_seen_ || last_seen_ns_ <= first_job_ns_) {
        return std::nullopt;
    }
    return hashes_submitted_ / (static_cast<double>(last_seen_ns_ - first_job_ns_) / 1e9);
}

std::pair<double, double> Session::hash_rate_interval(double rate) const {
    // Garwood's interval for a Poisson count N, as a share of N.
    const double n = static_cast<double>(submitted_);
    const double low = chi_square_quantile(2.0 * n, -kZ975) / 2.0;
    const double high = chi_square_quantile(2.0 * n + 2.0, kZ975) / 2.0;
    return {rate * std::max(0.0, low) / n, rate * high / n};
}

Stratum Session::describe() const {
    Stratum out;
    out.protocol = to_string(protocol_);
    out.login = login_;
    out.agent = agent_;
    out.methods = methods_;
    out.messages = messages_;
    out.shares_submitted = submitted_;
    out.shares_accepted = accepted_;
    out.shares_rejected = rejected_;
    out.share_hashes = share_hashes_;
    out.difficulty_updates = difficulty_updates_;
    out.hash_rate = hash_rate();
    if (out.hash_rate)
        std::tie(out.hash_rate_low, out.hash_rate_high) = hash_rate_interval(*out.hash_rate);
    out.reported_hash_rate = reported_rate_;
    return out;
}

}  // namespace gpuguard::agent::stratum
