#include "gpuguard/common/read_file.h"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpuguard/common/file_error.h"
#include "gpuguard/common/unique_fd.h"

namespace gpuguard {
namespace {

Unexpected read_error(const std::filesystem::path& path, int err) {
    return file_error("cannot read " + path.string(), err);
}

}  // namespace

Unexpected file_error(const std::string& what, int err) {
    ErrorCode code = ErrorCode::kIo;
    if (err == ENOENT || err == ENOTDIR) code = ErrorCode::kNotFound;
    if (err == EACCES || err == EPERM) code = ErrorCode::kPermission;
    return fail(code, what + ": " + std::strerror(err), err);
}

Result<std::string> read_file(const std::filesystem::path& path) {
    const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) return read_error(path, errno);
    return read_open_file(fd.get(), path);
}

Result<std::string> read_open_file(int fd, const std::filesystem::path& path) {
    std::string data;
    struct stat st {};
    if (::fstat(fd, &st) == 0 && st.st_size > 0) {
        data.reserve(static_cast<size_t>(st.st_size));
    }
    char buffer[1 << 16];
    for (;;) {
        const ssize_t n = ::read(fd, buffer, sizeof buffer);
        if (n < 0) {
            if (errno == EINTR) continue;
            return read_error(path, errno);
        }
        if (n == 0) break;
        data.append(buffer, static_cast<size_t>(n));
    }
    return data;
}

}  // namespace gpuguard
