// Writing a whole buffer to a descriptor, short writes and EINTR retried.
#pragma once

#include <cerrno>
#include <string_view>

#include <unistd.h>

namespace gpuguard {

// Writes everything or returns the errno of the failure (EIO when the
// kernel accepted nothing without saying why).
inline int write_all(int fd, std::string_view data) {
    while (!data.empty()) {
        const ssize_t n = ::write(fd, data.data(), data.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        if (n == 0) return EIO;
        data.remove_prefix(static_cast<size_t>(n));
    }
    return 0;
}

}  // namespace gpuguard
