// CRC-32C (Castagnoli, the iSCSI/ext4/Btrfs checksum) for journal records.
// Debian 12 packages no C/C++ CRC32C library (Google's crc32c is not in the
// archive), so this is a small own implementation: SSE4.2's crc32
// instruction when the CPU has it, else slicing-by-8 tables.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpuguard::agent {

// CRC-32C of `size` bytes at `data`, continuing from `crc` (0 to start).
// crc32c(0, "123456789", 9) == 0xe3069283.
uint32_t crc32c(uint32_t crc, const void* data, size_t size);

}  // namespace gpuguard::agent
