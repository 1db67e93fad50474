// What the host shows of where a process's executable came from: the mount
// at a directory in its mount namespace, its ancestors, and whether a
// process maps or holds open files below a directory. The detect room uses
// them to check what a look-alike location's name claims (an AppImage's
// FUSE mount, a self-extracting runtime's unpack directory) before the name
// exempts anything (detect/exe_scanner.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuguard::agent {

struct MountPoint {
    std::string fstype;  // "fuse.krita.AppImage", "squashfs", "tmpfs"
    std::string source;  // the mount's source field
};

// The mount whose mount point is exactly `dir` in a mountinfo file's
// contents (octal escapes undone); the last one (the one on top) when
// several are stacked there. Pure.
std::optional<MountPoint> mount_at_in(std::string_view mountinfo, std::string_view dir);

// The same for a live process (its /proc/PID/mountinfo).
std::optional<MountPoint> mount_at(uint32_t pid, std::string_view dir,
                                   const std::string& proc_root = "/proc");

struct Ancestor {
    uint32_t pid = 0;
    std::string exe;  // what /proc/PID/exe names; "" when unreadable
    std::string comm;
};

// The process's parent, grandparent, ... (nearest first), at most `depth`
// of them; pid 1 and kernel threads end the chain and are not listed.
std::vector<Ancestor> ancestors_of(uint32_t pid, size_t depth,
                                   const std::string& proc_root = "/proc");

// Whether a maps file's contents name a file below `dir`. Pure.
bool maps_below(std::string_view maps, std::string_view dir);

// Whether the process maps a file below `dir` (/proc/PID/maps) or holds one
// open (/proc/PID/fd, its working directory included).
bool uses_files_below(uint32_t pid, std::string_view dir, const std::string& proc_root = "/proc");

}  // namespace gpuguard::agent
