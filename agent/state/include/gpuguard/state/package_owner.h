// Which installed package owns a file, from the package database of the
// root the file is seen in (a container's own, through /proc/PID/root):
// dpkg's file lists, /var/lib/dpkg/info/*.list. An executable deleted under
// a running process is forgiven as a package upgrade only when a package
// owns its path, and an LD_PRELOAD library or LD_LIBRARY_PATH directory a
// package installed is vouched for (docs/detections.md).
#pragma once

#include <string>

namespace gpuguard::agent {

// "dpkg:PACKAGE" when a dpkg file list under `root` ("/" or "/proc/PID/root")
// names `path` or its merged-/usr twin (/bin/x and /usr/bin/x), "" when none
// does or there is no dpkg database. Nothing under /usr/local is owned:
// Debian packages install nothing there (Policy 9.1.2). Answers are cached
// per database (its info directory's inode and mtime) and path; a scan of a
// full database reads its lists once (about 9 MB on a desktop install).
std::string package_owner(const std::string& root, const std::string& path);

// What the package database of `root` says of the file seen at `path`
// whose contents have the MD5 sum `md5` (lowercase hex): its owner
// ("dpkg:PACKAGE") and `check`:
//   ""            no dpkg database under `root` (rpm, Alpine: not judged)
//   "unowned"     no package installed this path
//   "intact"      the package's md5sums list has this very sum for it
//   "modified"    it lists another sum: the file was replaced since
//   "unverified"  owned, but the package keeps no sum for it
struct PackageFileCheck {
    std::string owner;
    std::string check;
};
PackageFileCheck check_package_file(const std::string& root, const std::string& path,
                                    const std::string& md5);

}  // namespace gpuguard::agent
