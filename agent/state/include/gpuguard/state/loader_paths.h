// What the disk says of the libraries a process's environment makes the
// dynamic loader take: each LD_PRELOAD library and LD_LIBRARY_PATH
// directory resolved inside the process's own root, what vouches for it (a
// package, a conda environment, a virtualenv, installed Python
// distributions), how long ago it changed and whether others can write it.
// Read live before the process_env event is journaled, so that replay
// judges the same facts (gpuguard/events/event.h, LoaderPath).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpuguard/events/event.h"

namespace gpuguard::agent {

// The entries of `env` in order: LD_PRELOAD's libraries named with a '/'
// (separated by spaces or ':'), LD_LIBRARY_PATH's non-empty directories
// (':' or ';'); at most 32. Resolved through /proc/PID/root (a relative
// entry from the process's working directory), symlinks included, never
// leaving that root; `now_unix_s` is the clock ages are taken against.
// Empty when the process is gone (its root cannot be opened).
std::vector<LoaderPath> read_loader_paths(uint32_t pid, const ProcessEnv& env,
                                          const std::string& proc_root, int64_t now_unix_s);

// The entries of `env` as written, one per library or directory, without
// facts (resolved "", age -1): what a record from before the agent read them
// is judged by.
std::vector<LoaderPath> loader_entries(const ProcessEnv& env);

}  // namespace gpuguard::agent
