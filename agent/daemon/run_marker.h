// The run marker (docs/operations.md, "Stopping"): journal.dir/agent.run,
// written once the agent has started, its modification time touched every
// second while it runs, removed on a clean stop. One found at start means
// the previous run ended uncleanly (SIGKILL, a crash, power loss) shortly
// after its last touch: the agent reports the gap (GG-CORR-0020).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "gpuguard/common/result.h"
#include "gpuguard/common/unique_fd.h"

namespace gpuguard::agent {

class RunMarker {
  public:
    // What a marker left behind says about the run that wrote it.
    struct Previous {
        uint32_t pid = 0;
        std::string exe;
        int64_t started_unix_ns = 0;
        int64_t last_alive_unix_ns = 0;  // its last touch (modification time)
    };

    // A marker a previous run left at `path`, if any. Unreadable content
    // still counts (pid 0): the file's time says when that run was last alive.
    static std::optional<Previous> left_behind(const std::filesystem::path& path);

    // Starts that failed since the last good one (journal.dir/agent.failed-start).
    struct FailedStarts {
        int64_t first_unix_ns = 0;
        int64_t last_unix_ns = 0;
        uint64_t count = 0;
        std::string last_reason;
    };
    // Adds one to the failed starts recorded at `path` (the first kept).
    static void record_failed_start(const std::filesystem::path& path, int64_t unix_ns,
                                    const std::string& reason);
    // What `path` records, if anything.
    static std::optional<FailedStarts> failed_starts(const std::filesystem::path& path);

    // Writes this run's marker (replacing one left behind). Fails with kIo
    // when the file cannot be written; the agent then runs without one.
    static Result<RunMarker> create(std::filesystem::path path, uint32_t pid,
                                    const std::string& exe, int64_t started_unix_ns);

    RunMarker(RunMarker&&) = default;
    RunMarker& operator=(RunMarker&&) = default;

    // Sets the modification time to now: one futimens(2) on the open fd.
    void touch() const;
    // Removes the marker: the next start finds a clean end.
    void remove();

    const std::filesystem::path& path() const { return path_; }

  private:
    RunMarker(std::filesystem::path path, UniqueFd fd)
        : path_(std::move(path)), fd_(std::move(fd)) {}
    std::filesystem::path path_;
    UniqueFd fd_;
};

}  // namespace gpuguard::agent
