// Where cgroup v2 is mounted: this host mixes v1 controllers and a v2
// mount at /sys/fs/cgroup/unified, so the path is read, never assumed.
#pragma once

#include <string>

namespace gpuguard {

// The cgroup v2 mount point from /proc/mounts ("" when none is mounted).
std::string find_cgroup2_mount(const std::string& mounts_file = "/proc/mounts");

}  // namespace gpuguard
