#include "crc32c.h"

#include <array>
#include <cstring>

namespace gpuguard::agent {
namespace {

constexpr uint32_t kPolynomial = 0x82f63b78;  // Castagnoli, reflected

using Tables = std::array<std::array<uint32_t, 256>, 8>;

constexpr Tables make_tables() {
    Tables tables{};
    for (uint32_t i = 0; i < 256; ++i) {
        uint32_t crc = i;
        for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ ((crc & 1) ? kPolynomial : 0);
        tables[0][i] = crc;
    }
    for (uint32_t i = 0; i < 256; ++i) {
        for (size_t t = 1; t < 8; ++t) {
            tables[t][i] = (tables[t - 1][i] >> 8) ^ tables[0][tables[t - 1][i] & 0xff];
        }
    }
    return tables;
}

constexpr Tables kTables = make_tables();

uint32_t crc32c_software(uint32_t crc, const uint8_t* p, size_t size) {
    while (size >= 8) {
        uint64_t word;
        std::memcpy(&word, p, 8);  // little-endian hosts only (x86-64, arm64)
        word ^= crc;
        crc = kTables[7][word & 0xff] ^ kTables[6][(word >> 8) & 0xff] ^
              kTables[5][(word >> 16) & 0xff] ^ kTables[4][(word >> 24) & 0xff] ^
              kTables[3][(word >> 32) & 0xff] ^ kTables[2][(word >> 40) & 0xff] ^
              kTables[1][(word >> 48) & 0xff] ^ kTables[0][word >> 56];
        p += 8;
        size -= 8;
    }
    while (size-- > 0) crc = (crc >> 8) ^ kTables[0][(crc ^ *p++) & 0xff];
    return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t crc32c_sse42(uint32_t crc, const uint8_t* p,
                                                        size_t size) {
    uint64_t crc64 = crc;
    while (size >= 8) {
        uint64_t word;
        std::memcpy(&word, p, 8);
        crc64 = __builtin_ia32_crc32di(crc64, word);
        p += 8;
        size -= 8;
    }
    uint32_t crc32 = static_cast<uint32_t>(crc64);
    while (size-- > 0) crc32 = __builtin_ia32_crc32qi(crc32, *p++);
    return crc32;
}

bool have_sse42() {
    static const bool supported = __builtin_cpu_supports("sse4.2");
    return supported;
}
#endif

}  // namespace

uint32_t crc32c(uint32_t crc, const void* data, size_t size) {
    const auto* p = static_cast<const uint8_t*>(data);
    crc = ~crc;
#if defined(__x86_64__)
    if (have_sse42()) return ~crc32c_sse42(crc, p, size);
#endif
    return ~crc32c_software(crc, p, size);
}

}  // namespace gpuguard::agent
