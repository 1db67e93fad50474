#include "gpuguard/common/dir_entries.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstring>

#include <dirent.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "gpuguard/common/file_error.h"
#include "gpuguard/common/unique_fd.h"

namespace gpuguard {
namespace {

// The kernel's record (include/linux/dirent.h); glibc declares none for
// getdents64, so it is spelled out here.
struct LinuxDirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

Unexpected list_error(const std::filesystem::path& dir, int err) {
    return file_error("cannot list " + dir.string(), err);
}

}  // namespace

Result<std::vector<DirEntry>> list_directory(const std::filesystem::path& dir) {
    const UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!fd) return list_error(dir, errno);
    return list_open_directory(fd.get(), dir);
}

std::vector<DirEntry> entries_of(const std::filesystem::path& dir) {
    auto entries = list_directory(dir);
    return entries ? std::move(*entries) : std::vector<DirEntry>{};
}

Result<std::vector<DirEntry>> list_open_directory(int fd, const std::filesystem::path& dir) {
    std::vector<DirEntry> entries;
    // 32 KiB holds ~1000 /proc entries per call; a bigger /proc takes more calls.
    alignas(8) char buffer[32 * 1024];
    for (;;) {
        const long n = ::syscall(SYS_getdents64, fd, buffer, sizeof buffer);
        if (n < 0) {
            if (errno == EINTR) continue;
            return list_error(dir, errno);
        }
        if (n == 0) break;
        for (long offset = 0; offset < n;) {
            const auto* record = reinterpret_cast<const LinuxDirent64*>(buffer + offset);
            if (record->d_reclen == 0) return list_error(dir, EIO);  // never from a sane kernel
            offset += record->d_reclen;
            const size_t limit = record->d_reclen - offsetof(LinuxDirent64, d_name);
            const std::string name(record->d_name, strnlen(record->d_name, limit));
            if (name == "." || name == "..") continue;
            entries.push_back(DirEntry{name, record->d_ino, record->d_type});
        }
    }
    return entries;
}

Result<std::vector<uint32_t>> list_numbered_entries(const std::filesystem::path& dir) {
    auto entries = list_directory(dir);
    if (!entries) return Unexpected{entries.error()};
    std::vector<uint32_t> numbers;
    numbers.reserve(entries->size());
    for (const auto& entry : *entries) {
        uint32_t number = 0;
        const char* first = entry.name.data();
        const char* last = first + entry.name.size();
        const auto [end, ec] = std::from_chars(first, last, number);
        if (ec == std::errc() && end == last && first != last) numbers.push_back(number);
    }
    std::sort(numbers.begin(), numbers.end());
    return numbers;
}

}  // namespace gpuguard
