// libFuzzer target for the DNS answer parser (gpuguard/netintel/dns.h): any bytes, as a
// UDP payload or as DNS over TCP, must parse or fail without a crash, a hang
// or an over-read; what parses must respect the parser's bounds. Seeds in
// corpus/dns are real answers (plain, compressed, CNAME chains, truncated).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <span>

#include "gpuguard/netintel/dns.h"

namespace dns = gpuguard::agent::dns;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    // An exact-size heap copy so ASan sees an over-read by one byte.
    std::unique_ptr<uint8_t[]> copy(new uint8_t[size ? size : 1]);
    if (size) __builtin_memcpy(copy.get(), data, size);
    dns::Cache cache(8, 1);
    for (bool tcp : {false, true}) {
        auto message = dns::parse_message(std::span<const uint8_t>(copy.get(), size), tcp);
        if (!message) continue;
        if (message->answers.size() > 64 || message->questions.size() > 64) std::abort();
        for (const auto& record : message->answers) {
            if (record.name.size() > 255 || record.target.size() > 255) std::abort();
        }
        cache.add(*message, 1'000);
        if (cache.size() > 8) std::abort();
    }
    return 0;
}
