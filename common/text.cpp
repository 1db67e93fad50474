#include "gpuguard/common/text.h"

#include <algorithm>
#include <charconv>

namespace gpuguard {

std::string join(const std::vector<std::string>& parts, std::string_view separator) {
    size_t length = 0;
    for (const auto& part : parts) length += part.size() + separator.size();
    std::string out;
    out.reserve(length);
    for (const auto& part : parts) {
        if (!out.empty()) out += separator;
        out += part;
    }
    return out;
}

std::optional<uint32_t> parse_u32(std::string_view text) {
    uint32_t value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc{} || end != text.data() + text.size() || text.empty()) {
        return std::nullopt;
    }
    return value;
}

// No empty, "." or ".." part, no trailing slash, not below /proc: the
// split and the rebuild are skipped (an executable's path is judged at
// every evaluation).
bool is_normal_path(std::string_view path) {
    if (!path.starts_with('/')) return true;  // relative paths are left as they are
    if (path.ends_with(" (deleted)")) path.remove_suffix(std::string_view(" (deleted)").size());
    if (path == "/") return true;
    if (path.ends_with('/') || path.starts_with("/proc/") || path == "/proc") return false;
    for (size_t slash = path.find('/'); slash != std::string_view::npos;
         slash = path.find('/', slash + 1)) {
        const std::string_view rest = path.substr(slash + 1);
        if (rest.starts_with('/') || rest == "." || rest.starts_with("./") || rest == ".." ||
            rest.starts_with("../")) {
            return false;
        }
    }
    return true;
}

std::string normal_path(std::string_view path) {
    if (is_normal_path(path)) return std::string(path);
    constexpr std::string_view kDeleted = " (deleted)";
    const bool deleted = path.ends_with(kDeleted);
    if (deleted) path.remove_suffix(kDeleted.size());
    std::vector<std::string_view> parts;
    size_t start = 0;
    while (start < path.size()) {
        const size_t end = std::min(path.find('/', start), path.size());
        const std::string_view part = path.substr(start, end - start);
        if (part == "..") {
            if (!parts.empty()) parts.pop_back();
        } else if (!part.empty() && part != ".") {
            parts.push_back(part);
        }
        start = end + 1;
    }
    // /proc/self/root/x, /proc/4242/root/x: the process's own view of /x.
    while (parts.size() >= 3 && parts[0] == "proc" && parts[2] == "root" &&
           (parts[1] == "self" || parts[1] == "thread-self" ||
            parts[1].find_first_not_of("0123456789") == std::string_view::npos)) {
        parts.erase(parts.begin(), parts.begin() + 3);
    }
    std::string out;
    for (std::string_view part : parts) {
        out += '/';
        out += part;
    }
    if (out.empty()) out = "/";
    if (deleted) out += kDeleted;
    return out;
}

std::vector<std::string_view> split_fields(std::string_view line) {
    std::vector<std::string_view> fields;
    size_t at = line.find_first_not_of(" \t");
    while (at != std::string_view::npos) {
        const size_t end = std::min(line.find_first_of(" \t", at), line.size());
        fields.push_back(line.substr(at, end - at));
        at = line.find_first_not_of(" \t", end);
    }
    return fields;
}

bool namespace_glob(std::string_view glob) {
    return !glob.empty() && glob.size() <= 63 &&
           glob.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-*?[]!") ==
               std::string_view::npos;
}

}  // namespace gpuguard
