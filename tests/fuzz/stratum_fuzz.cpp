// libFuzzer target for Stratum recognition (gpuguard/netintel/stratum.h): a session fed
// fuzzer-chosen client and server messages (JSON-RPC lines, cut captures,
// binary) must never crash, and what it reports must stay sane: counters
// consistent, rates finite and non-negative, the login redacted, at most a
// bounded number of lines kept. The helpers (difficulty and target
// readers, wallet redaction) get the same bytes. Seeds in corpus/stratum
// are real sessions of each dialect, one message per line of the seed,
// each prefixed by '>' (client) or '<' (server).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "gpuguard/netintel/stratum.h"

namespace agent = gpuguard::agent;
namespace stratum = gpuguard::agent::stratum;

namespace {

void check_rate(const std::optional<double>& rate) {
    if (rate && (!std::isfinite(*rate) || *rate < 0)) std::abort();
}

// redact_wallets keeps the line's shape: it only ever shortens strings.
void check_redaction(std::string_view text) {
    const std::string redacted = stratum::redact_wallets(text);
    if (redacted.size() > text.size() + 8) std::abort();
    const std::string login = stratum::redact_login(text);
    if (login.size() > text.size() + 3) std::abort();  // the ellipsis is 3 bytes
    (void)stratum::hashes_from_difficulty(static_cast<double>(text.size()));
    for (const auto hashes :
         {stratum::hashes_from_target256(text), stratum::hashes_from_cryptonote_target(text)}) {
        if (hashes && (!std::isfinite(*hashes) || *hashes <= 0)) std::abort();
    }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    check_redaction(input.substr(0, 1024));

    // Messages are the input's lines; a line's first byte picks the
    // direction, the rest (with "\\n" kept inside as a real newline would
    // be in a capture holding several lines) is the captured payload.
    stratum::Session session;
    uint32_t seq_out = 0, seq_in = 0;
    uint64_t ts_ns = 1'000'000'000;
    size_t start = 0;
    while (start < input.size()) {
        size_t end = input.find('\n', start);
        if (end == std::string_view::npos) end = input.size();
        std::string_view message = input.substr(start, end - start);
        start = end + 1;
        if (message.empty()) continue;
        const bool out = message.front() != '<';
        message.remove_prefix(1);
        std::string payload(message.substr(0, 512));
        for (size_t at = payload.find("\\n"); at != std::string::npos;
             at = payload.find("\\n", at)) {
            payload.replace(at, 2, "\n");
        }
        const uint32_t length = static_cast<uint32_t>(message.size());
        const auto direction =
            out ? agent::NetPayload::Direction::kOut : agent::NetPayload::Direction::kIn;
        (void)session.feed(direction, payload, out ? seq_out++ : seq_in++, length, ts_ns);
        ts_ns += 500'000'000 + (message.size() % 7) * 100'000'000;
        check_rate(session.hash_rate());
    }
    const agent::Stratum described = session.describe();
    check_rate(described.hash_rate);
    check_rate(described.reported_hash_rate);
    if (!std::isfinite(described.share_hashes) || described.share_hashes < 0) std::abort();
    // Only answers to pending submits count.
    if (described.shares_accepted + described.shares_rejected > described.shares_submitted) {
        std::abort();
    }
    if (described.messages.size() > described.methods.size()) std::abort();
    if (session.recognised() != !described.protocol.empty()) std::abort();
    return 0;
}
