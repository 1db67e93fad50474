// Small text helpers every library shares.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpuguard {

// `parts` with `separator` between them: join(argv, " ") is a command line,
// join(names, ", ") a list in an error message. Empty parts are kept, but no
// separator comes before the first non-empty text.
std::string join(const std::vector<std::string>& parts, std::string_view separator);

// `text` as a decimal number that fits 32 bits, all of it digits ("7",
// "0042"); nullopt for "", a sign, a space or anything after the digits.
std::optional<uint32_t> parse_u32(std::string_view text);

// The fields of `line` between runs of spaces and tabs (a mountinfo line, an
// /etc/hosts line), views into it; none for a blank line.
std::vector<std::string_view> split_fields(std::string_view line);

// An absolute path with its spelling undone, without touching the disk:
// "//" and "/./" collapsed, ".." taken back (never above "/"), a trailing
// '/' dropped, and a leading /proc/self/root, /proc/thread-self/root or
// /proc/PID/root removed (a process's root seen through /proc is its "/").
// A " (deleted)" suffix stays. A relative path is returned as it is.
std::string normal_path(std::string_view path);
// Whether normal_path(path) is `path` itself (most executables' paths).
bool is_normal_path(std::string_view path);

// Whether `glob` can match a Kubernetes namespace: a DNS label (lowercase
// letters, digits and '-', at most 63) with fnmatch's wildcards ('*', '?',
// "[...]") allowed; "GPU_Ops" and "" cannot.
bool namespace_glob(std::string_view glob);

}  // namespace gpuguard
