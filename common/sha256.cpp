#include "gpuguard/common/sha256.h"

#include <cerrno>
#include <cstring>
#include <memory>

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include "gpuguard/common/unique_fd.h"

namespace gpuguard {
namespace {

std::string to_hex(const unsigned char* digest, unsigned int length) {
    static constexpr char kHex[] = "0123456789abcdef";
    std::string out;
    out.reserve(2 * length);
    for (unsigned i = 0; i < length; ++i) {
        out += kHex[digest[i] >> 4];
        out += kHex[digest[i] & 15];
    }
    return out;
}

std::string digest_hex(std::string_view bytes, const EVP_MD* algorithm) {
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    EVP_Digest(bytes.data(), bytes.size(), digest, &length, algorithm, nullptr);
    return to_hex(digest, length);
}

}  // namespace

std::string sha256_hex(std::string_view bytes) { return digest_hex(bytes, EVP_sha256()); }

std::string md5_hex(std::string_view bytes) { return digest_hex(bytes, EVP_md5()); }

Result<std::string> sha256_file(const std::filesystem::path& path) {
    const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) {
        const int err = errno;
        return fail(ErrorCode::kIo, "open " + path.string() + ": " + std::strerror(err), err);
    }
    std::unique_ptr<EVP_MD_CTX, decltype(&EVP_MD_CTX_free)> context(EVP_MD_CTX_new(),
                                                                    &EVP_MD_CTX_free);
    EVP_DigestInit_ex(context.get(), EVP_sha256(), nullptr);
    char buffer[1 << 16];
    for (;;) {
        const ssize_t n = ::read(fd.get(), buffer, sizeof(buffer));
        if (n == 0) break;
        if (n < 0) {
            if (errno == EINTR) continue;
            const int err = errno;
            return fail(ErrorCode::kIo, "read " + path.string() + ": " + std::strerror(err), err);
        }
        EVP_DigestUpdate(context.get(), buffer, static_cast<size_t>(n));
    }
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int length = 0;
    EVP_DigestFinal_ex(context.get(), digest, &length);
    return to_hex(digest, length);
}

}  // namespace gpuguard
