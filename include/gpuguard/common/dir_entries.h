// Listing a directory with the getdents64 system call itself, not libc's
// opendir/readdir: a library preloaded into the agent (LD_PRELOAD,
// /etc/ld.so.preload) can replace readdir to drop entries, as process
// hiders do with /proc, or leave errno set at the end of a listing, which
// makes a careful caller of readdir (std::filesystem's iterators included)
// report an error; it cannot change what the syscall returns. Every
// listing of /proc and of the agent's own directories goes through here
// (gpuguard/state/proc_listing.h names the /proc ones).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "gpuguard/common/result.h"

namespace gpuguard {

struct DirEntry {
    std::string name;
    uint64_t inode = 0;
    unsigned char type = 0;  // DT_DIR, DT_REG, DT_LNK, ...; DT_UNKNOWN where the fs does not say
};

// Every entry of `dir` but "." and "..", in the order the kernel gives
// them. Fails with kNotFound (ENOENT, ENOTDIR), kPermission or kIo:
// "cannot list DIR: STRERROR", sys_errno set.
Result<std::vector<DirEntry>> list_directory(const std::filesystem::path& dir);
// The entries as list_directory gives them, or none where it fails (an
// absent directory is an empty one to most callers).
std::vector<DirEntry> entries_of(const std::filesystem::path& dir);

// The same of a directory already open (`fd`, read from its current
// position; `dir` names it in errors): one checked by fstat first.
Result<std::vector<DirEntry>> list_open_directory(int fd, const std::filesystem::path& dir);

// The entries of `dir` whose names are decimal numbers that fit 32 bits
// (pids under /proc, fds under /proc/PID/fd), ascending. Failures as
// list_directory's.
Result<std::vector<uint32_t>> list_numbered_entries(const std::filesystem::path& dir);

}  // namespace gpuguard
