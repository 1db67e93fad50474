// SHA-256 digests as lowercase hex, and MD5 for dpkg's md5sums lists
// (OpenSSL underneath; its headers stay in common/sha256.cpp).
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "gpuguard/common/result.h"

namespace gpuguard {

// Lowercase hex sha256 of `bytes`.
std::string sha256_hex(std::string_view bytes);
// Lowercase hex MD5 of `bytes`: only to compare a file with the sum its
// package recorded (dpkg's md5sums), never as an identity.
std::string md5_hex(std::string_view bytes);

// Lowercase hex sha256 of a file's contents, streamed. kIo when it cannot be
// opened ("open PATH: STRERROR") or read ("read PATH: STRERROR"), sys_errno set.
Result<std::string> sha256_file(const std::filesystem::path& path);

}  // namespace gpuguard
