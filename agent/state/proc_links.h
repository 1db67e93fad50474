// Links of /proc/PID (private to the state room): config_files.cpp,
// loader_paths.cpp and file_context.cpp read a process's cwd, root, exe and fds through them.
#pragma once

#include <string>

namespace gpuguard::agent {

// The target of the symlink `path`, "" when it cannot be read.
std::string link_target(const std::string& path);

// `path` as the process sees it: the agent reads /proc/PID/exe and cwd
// relative to its own root, so a process in another root shows that root's
// path in front. A " (deleted)" suffix is dropped.
std::string inside_root(std::string path, const std::string& root);

// The real path of `path` (absolute, or relative to the process's working
// directory) inside the root of the process whose /proc directory is
// `proc_dir`: symlinks and ".." resolved by the kernel without leaving that
// root (openat2 RESOLVE_IN_ROOT); "" when it does not exist or the process
// is gone. Defined in loader_paths.cpp.
std::string real_path_in_root(const std::string& proc_dir, const std::string& path);

}  // namespace gpuguard::agent
