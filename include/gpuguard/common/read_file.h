// Reading a whole file into memory.
#pragma once

#include <filesystem>
#include <string>

#include "gpuguard/common/result.h"

namespace gpuguard {

// The whole contents of `path`, read with open(2)/read(2) (EINTR retried).
// Fails with kNotFound (ENOENT, ENOTDIR), kPermission (EACCES, EPERM) or kIo,
// message "cannot read PATH: STRERROR" and Error::sys_errno set, so callers
// that word their own message can take the errno from it.
Result<std::string> read_file(const std::filesystem::path& path);

// The rest of the open file `fd` (not closed), errors as read_file()'s for `path`.
Result<std::string> read_open_file(int fd, const std::filesystem::path& path);

}  // namespace gpuguard
