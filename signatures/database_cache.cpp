#include "signatures/database_cache.h"

#include <cerrno>
#include <cstdint>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpuguard/common/sha256.h"
#include "gpuguard/common/trusted_file.h"
#include "gpuguard/common/unique_fd.h"
#include "gpuguard/common/write_all.h"

namespace gpuguard::signatures::database_cache {
namespace {

// "gpuguard hyperscan cache 1\n": the kind's magic line.
std::string magic_of(const Kind& kind) {
    return "gpuguard " + std::string(kind.file_prefix) + " cache 1\n";
}
constexpr size_t kDigestChars = 64;  // SHA-256 as hex

void put_u64(std::string& out, uint64_t value) {
    for (int shift = 0; shift < 64; shift += 8) out += static_cast<char>((value >> shift) & 0xff);
}

// Reads a little-endian u64 at `at`, advancing it; nullopt past the end.
std::optional<uint64_t> get_u64(std::string_view bytes, size_t& at) {
    if (bytes.size() < at || bytes.size() - at < 8) return std::nullopt;
    uint64_t value = 0;
    for (int i = 0; i < 8; ++i) {
        value |= static_cast<uint64_t>(static_cast<unsigned char>(bytes[at + i])) << (8 * i);
    }
    at += 8;
    return value;
}

Unexpected unusable(const std::filesystem::path& file, const std::string& why) {
    return fail(ErrorCode::kInvalidArgument, file.string() + ": " + why);
}

}  // namespace

std::filesystem::path file_of(const std::filesystem::path& directory, const Kind& kind,
                              const std::string& key) {
    return directory / (std::string(kind.file_prefix) + "-" + key + ".db");
}

Result<std::vector<std::string>> load(const std::filesystem::path& file, const Kind& kind,
                                      const std::string& key) {
    auto text = read_trusted_file(file, geteuid());
    if (!text) return Unexpected{text.error()};
    const std::string_view bytes = *text;
    const std::string magic = magic_of(kind);
    if (bytes.size() < magic.size() + kDigestChars + 1 + kDigestChars ||
        !bytes.starts_with(magic)) {
        return unusable(file, "not a gpuguard " + std::string(kind.library) + " cache file");
    }
    const std::string_view body = bytes.substr(0, bytes.size() - kDigestChars);
    if (sha256_hex(body) != bytes.substr(body.size())) {
        return unusable(file, "checksum does not match its contents");
    }
    size_t at = magic.size();
    if (body.substr(at, kDigestChars) != key || body[at + kDigestChars] != '\n') {
        return unusable(file, "made for other rules or another " + std::string(kind.library));
    }
    at += kDigestChars + 1;
    const auto count = get_u64(body, at);
    if (!count || *count > 64) return unusable(file, "bad database count");
    std::vector<std::string> databases;
    for (uint64_t i = 0; i < *count; ++i) {
        const auto size = get_u64(body, at);
        if (!size || *size > body.size() - at) return unusable(file, "truncated database");
        databases.emplace_back(body.substr(at, *size));
        at += *size;
    }
    if (at != body.size()) return unusable(file, "trailing bytes after the databases");
    return databases;
}

Status store(const std::filesystem::path& file, const Kind& kind, const std::string& key,
             const std::vector<std::string>& databases) {
    const auto directory = file.parent_path();
    // Its parents too (a user's ~/.cache on a fresh account); the directory
    // itself for its owner only.
    std::error_code ec;
    if (std::filesystem::create_directories(directory, ec)) ::chmod(directory.c_str(), 0700);
    if (ec)
        return fail(ErrorCode::kIo, "cannot create " + directory.string() + ": " + ec.message());
    std::string bytes = magic_of(kind);
    bytes += key;
    bytes += '\n';
    put_u64(bytes, databases.size());
    for (const auto& database : databases) {
        put_u64(bytes, database.size());
        bytes += database;
    }
    bytes += sha256_hex(bytes);

    std::string temporary =
        (directory / ("." + std::string(kind.file_prefix) + "-XXXXXX")).string();
    UniqueFd fd(::mkstemp(temporary.data()));
    if (!fd)
        return fail(ErrorCode::kIo,
                    "cannot create a file in " + directory.string() + ": " + std::strerror(errno));
    if (const int err = write_all(fd.get(), bytes); err != 0) {
        ::unlink(temporary.c_str());
        return fail(ErrorCode::kIo, "cannot write " + temporary + ": " + std::strerror(err));
    }
    if (::rename(temporary.c_str(), file.c_str()) != 0) {
        const int err = errno;
        ::unlink(temporary.c_str());
        return fail(ErrorCode::kIo, "cannot rename " + temporary + " to " + file.string() + ": " +
                                        std::strerror(err));
    }
    return {};
}

std::string compiled_note(const std::filesystem::path& file, const std::string& unused_because,
                          const Status& stored) {
    if (!unused_because.empty()) {
        return "compiled (" + unused_because + ")" +
               (stored ? ", replaced" : ", not replaced: " + stored.error().message);
    }
    return stored ? "compiled, stored in " + file.string()
                  : "compiled, not stored: " + stored.error().message;
}

}  // namespace gpuguard::signatures::database_cache
