// Small-file reads for sysfs and procfs, and the strict number parsing every
// backend shares. A metric file that is missing (or that the driver says it
// does not support) is "absent"; one that is unreadable or holds garbage is a
// problem, reported with the file's path and the offending text.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuguard/common/result.h"

namespace gpuguard::backends::detail {

// Reads a whole small file (at most `max_bytes`) with open/read, as sysfs and
// procfs want. Fails with kNotFound when the file does not exist or the driver
// reports the attribute unsupported (ENOENT, ENODEV, ENXIO, EOPNOTSUPP,
// ENODATA, ESRCH), kIo otherwise; the message names the path and errno.
Result<std::string> read_small_file(const std::filesystem::path& path, size_t max_bytes = 65536);

// Strict parsers: optional surrounding whitespace, nothing else.
std::optional<uint64_t> parse_u64(std::string_view text);
std::optional<int64_t> parse_i64(std::string_view text);
std::string_view trim(std::string_view text);

// Quotes text for a problem line: at most 40 characters, control bytes escaped.
std::string quote_for_message(std::string_view text);

// Reads metric files and records why one could not be used. Not thread-safe.
class MetricFiles {
  public:
    explicit MetricFiles(std::vector<std::string>& problems) : problems_(problems) {}

    // nullopt (and no problem) when absent; nullopt and a problem on error.
    std::optional<std::string> text(const std::filesystem::path& path);
    std::optional<uint64_t> u64(const std::filesystem::path& path);
    std::optional<int64_t> i64(const std::filesystem::path& path);
    // "0"/"1" files (throttle reasons).
    std::optional<bool> flag(const std::filesystem::path& path);

    void problem(std::string line) { problems_.push_back(std::move(line)); }

  private:
    std::vector<std::string>& problems_;
};

}  // namespace gpuguard::backends::detail
