// The Error for a failed system call on a file, shared by read_file and
// list_directory so both word and classify errno alike.
#pragma once

#include <string>

#include "gpuguard/common/result.h"

namespace gpuguard {

// kNotFound (ENOENT, ENOTDIR), kPermission (EACCES, EPERM) or kIo, message
// "WHAT: STRERROR" (WHAT e.g. "cannot read /x"), sys_errno = `err`.
Unexpected file_error(const std::string& what, int err);

}  // namespace gpuguard
