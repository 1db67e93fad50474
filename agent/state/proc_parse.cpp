#include "gpuguard/state/proc_parse.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <sstream>
#include <vector>

namespace gpuguard::agent {
namespace {

bool is_hex_id(std::string_view text) {
    return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
               return std::isxdigit(static_cast<unsigned char>(c)) != 0;
           });
}

}  // namespace

std::optional<uint32_t> parse_decimal_u32(std::string_view text) {
    uint32_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc{} || end != text.data() + text.size() || text.empty()) return std::nullopt;
    return value;
}

std::optional<uint32_t> proc_status_field(std::string_view status, std::string_view key) {
    std::istringstream lines{std::string(status)};
    std::string line;
    while (std::getline(lines, line)) {
        if (line.size() > key.size() && line.compare(0, key.size(), key) == 0 &&
            line[key.size()] == ':') {
            std::istringstream fields(line.substr(key.size() + 1));
            std::string first;
            fields >> first;
            return parse_decimal_u32(first);
        }
    }
    return std::nullopt;
}

std::optional<uint64_t> proc_io_field(std::string_view io, std::string_view key) {
    while (!io.empty()) {
        const size_t end = std::min(io.find('\n'), io.size());
        std::string_view line = io.substr(0, end);
        io.remove_prefix(std::min(end + 1, io.size()));
        if (line.size() <= key.size() + 1 || !line.starts_with(key) || line[key.size()] != ':') {
            continue;
        }
        line.remove_prefix(key.size() + 1);
        while (!line.empty() && line.front() == ' ') line.remove_prefix(1);
        uint64_t value = 0;
        const auto [rest, error] = std::from_chars(line.data(), line.data() + line.size(), value);
        if (error != std::errc{} || rest != line.data() + line.size()) return std::nullopt;
        return value;
    }
    return std::nullopt;
}

std::optional<ProcStatCpu> parse_proc_stat_cpu(std::string_view stat) {
    const size_t name_end = stat.rfind(')');
    if (name_end == std::string_view::npos) return std::nullopt;
    std::string_view rest = stat.substr(name_end + 1);
    ProcStatCpu cpu;
    // Field 3 (the state) is the first after the name; 22 (start time) the last needed.
    for (int field = 3; field <= 22; ++field) {
        while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
        const size_t end = std::min(rest.find(' '), rest.size());
        const std::string_view token = rest.substr(0, end);
        rest.remove_prefix(end);
        if (token.empty()) return std::nullopt;
        uint64_t* target = field == 14   ? &cpu.utime
                           : field == 15 ? &cpu.stime
                           : field == 22 ? &cpu.start_time
                                         : nullptr;
        uint64_t threads = 0;
        if (field == 20) target = &threads;
        if (!target) continue;
        const auto [last, error] =
            std::from_chars(token.data(), token.data() + token.size(), *target);
        if (error != std::errc{} || last != token.data() + token.size()) return std::nullopt;
        if (field == 20)
            cpu.threads = static_cast<uint32_t>(std::min<uint64_t>(threads, UINT32_MAX));
    }
    return cpu;
}

std::string proc_status_name(std::string_view status) {
    std::istringstream lines{std::string(status)};
    std::string line;
    while (std::getline(lines, line)) {
        if (line.rfind("Name:", 0) == 0) {
            auto value = line.substr(5);
            value.erase(0, value.find_first_not_of(" \t"));
            return value;
        }
    }
    return "";
}

std::optional<ContainerInfo> container_from_cgroup(std::string_view cgroup_path) {
    // Walk the path's components from the leaf up: the innermost id wins.
    std::vector<std::string_view> parts;
    size_t start = 0;
    while (start <= cgroup_path.size()) {
        const size_t slash = cgroup_path.find('/', start);
        const size_t end = slash == std::string_view::npos ? cgroup_path.size() : slash;
        if (end > start) parts.push_back(cgroup_path.substr(start, end - start));
        if (slash == std::string_view::npos) break;
        start = slash + 1;
    }
    // systemd driver: <prefix>-<id>.scope; podman's and CRI-O's cgroupfs
    // driver: <prefix>-<id> (/libpod_parent/libpod-<id>, .../crio-<id>).
    static constexpr struct {
        std::string_view prefix;
        std::string_view runtime;
    } kScopes[] = {{"docker-", "docker"},
                   {"cri-containerd-", "containerd"},
                   {"crio-", "cri-o"},
                   {"libpod-", "podman"}};
    for (auto it = parts.rbegin(); it != parts.rend(); ++it) {
        std::string_view part = *it;
        const bool scope_unit = part.ends_with(".scope");
        if (scope_unit) part.remove_suffix(6);
        for (const auto& scope : kScopes) {
            if (part.starts_with(scope.prefix) && is_hex_id(part.substr(scope.prefix.size()))) {
                return ContainerInfo{std::string(scope.runtime),
                                     std::string(part.substr(scope.prefix.size()))};
            }
        }
        if (scope_unit) continue;
        if (!is_hex_id(part)) continue;
        // cgroupfs driver: the id is a bare component; its parent names the runtime.
        const auto parent = (it + 1) != parts.rend() ? *(it + 1) : std::string_view{};
        if (parent == "docker") return ContainerInfo{"docker", std::string(part)};
        if (parent.starts_with("libpod")) return ContainerInfo{"podman", std::string(part)};
        if (parent.starts_with("crio")) return ContainerInfo{"cri-o", std::string(part)};
        for (auto up = it + 1; up != parts.rend(); ++up) {
            if (up->starts_with("kubepods")) return ContainerInfo{"containerd", std::string(part)};
        }
    }
    return std::nullopt;
}

std::string cgroup_path_from_proc(std::string_view contents) {
    std::string systemd;
    size_t start = 0;
    while (start < contents.size()) {
        size_t end = contents.find('\n', start);
        if (end == std::string_view::npos) end = contents.size();
        const auto line = contents.substr(start, end - start);
        start = end + 1;
        if (line.starts_with("0::")) return std::string(line.substr(3));
        const auto second_colon = line.find(':', line.find(':') + 1);
        if (second_colon == std::string_view::npos) continue;
        if (line.find(":name=systemd:") != std::string_view::npos) {
            systemd = std::string(line.substr(second_colon + 1));
        }
    }
    return systemd;
}

}  // namespace gpuguard::agent
