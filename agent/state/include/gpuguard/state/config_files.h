// Configuration files of a process, read the way the process would find
// them but never the way an attacker would like: which files it names on
// its command line (-c FILE, --config=FILE, ...) and which its miner family
// reads by default (config.json beside the executable, ~/.xmrig.json, ...),
// and opening one of them safely.
//
// Paths are resolved inside the process's own root (/proc/PID/root, with
// openat2 RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS), relative ones against
// its working directory; only regular files outside procfs and sysfs are
// opened (O_NONBLOCK | O_NOCTTY, so a FIFO or a terminal never blocks or
// becomes the agent's), and at most a bounded prefix is read.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gpuguard/common/result.h"
#include "gpuguard/common/unique_fd.h"

namespace gpuguard::agent {

// Where a process would look for a configuration file.
struct ConfigCandidate {
    std::string path;    // absolute inside the process's root, or relative to its cwd
    std::string reason;  // "argument" (its command line names it) or "default"
    bool operator==(const ConfigCandidate&) const = default;
};

// What a process's candidates depend on, as seen from inside its root.
struct ConfigContext {
    std::vector<std::string> argv;
    std::string exe;   // its executable's path ("" when unknown); " (deleted)" is ignored
    std::string cwd;   // its working directory ("" when unknown)
    std::string home;  // HOME of its environment ("" when unset)
};

// The files the command line names, then the defaults of the miner families
// (docs/detections.md lists them and their sources), without duplicates:
// a renamed miner does not say its family, so every family's defaults are
// candidates. Arguments that cannot be paths (empty, longer than PATH_MAX,
// with a NUL or newline) are skipped.
std::vector<ConfigCandidate> config_candidates(const ConfigContext& context);

// argv, exe, cwd and HOME of `pid`, read from `proc_root`/PID. kNotFound
// when the process is gone; parts it cannot read (a kernel thread's exe,
// another user's environ) are left empty.
Result<ConfigContext> read_config_context(uint32_t pid, const std::string& proc_root = "/proc");

// The identity of a file's contents as far as a cache needs it: the same
// (dev, ino, mtime, size) is the same configuration.
struct FileVersion {
    uint64_t dev = 0;
    uint64_t ino = 0;
    int64_t mtime_ns = 0;
    uint64_t size = 0;
    bool operator==(const FileVersion&) const = default;
    auto operator<=>(const FileVersion&) const = default;
};

class ConfigFileHandle;

// Opens `candidate` as process `pid` would find it: a relative path joined
// to `cwd` (the process's, from read_config_context), the result resolved
// inside `proc_root`/PID/root. Fails with kNotFound (no such file, or the
// process is gone), kPermission, or kInvalidArgument when it is not a
// regular file or lies on procfs or sysfs (the message says which).
Result<ConfigFileHandle> open_config_file(uint32_t pid, const ConfigCandidate& candidate,
                                          const std::string& cwd,
                                          const std::string& proc_root = "/proc");

// One configuration file, open for reading.
class ConfigFileHandle {
  public:
    const std::string& path() const { return path_; }  // absolute, inside the process's root
    const FileVersion& version() const { return version_; }

    // Up to `max_bytes` from the start of the file; `truncated` says whether
    // the file held more. kIo when read(2) fails.
    Result<std::string> read(size_t max_bytes, bool& truncated) const;

  private:
    friend Result<ConfigFileHandle> open_config_file(uint32_t, const ConfigCandidate&,
                                                     const std::string&, const std::string&);
    UniqueFd fd_;
    std::string path_;
    FileVersion version_;
};

}  // namespace gpuguard::agent
