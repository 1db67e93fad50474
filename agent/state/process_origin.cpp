#include "gpuguard/state/process_origin.h"

#include <filesystem>

#include "gpuguard/common/read_file.h"
#include "gpuguard/common/text.h"
#include "gpuguard/state/proc_parse.h"
#include "proc_links.h"

namespace gpuguard::agent {
namespace {

// A mountinfo field with its octal escapes (\040 for a space) undone.
std::string unescaped(std::string_view field) {
    std::string out;
    out.reserve(field.size());
    for (size_t at = 0; at < field.size(); ++at) {
        if (field[at] == '\\' && at + 3 < field.size()) {
            const std::string_view digits = field.substr(at + 1, 3);
            if (digits.find_first_not_of("01234567") == std::string::npos) {
                out += static_cast<char>((digits[0] - '0') * 64 + (digits[1] - '0') * 8 +
                                         (digits[2] - '0'));
                at += 3;
                continue;
            }
        }
        out += field[at];
    }
    return out;
}

bool below(std::string_view path, std::string_view dir) {
    return path.size() > dir.size() && path.starts_with(dir) && path[dir.size()] == '/';
}

}  // namespace

std::optional<MountPoint> mount_at_in(std::string_view mountinfo, std::string_view dir) {
    std::optional<MountPoint> found;
    size_t at = 0;
    while (at < mountinfo.size()) {
        const size_t end = std::min(mountinfo.find('\n', at), mountinfo.size());
        const auto fields = split_fields(mountinfo.substr(at, end - at));
        at = end + 1;
        // ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER
        if (fields.size() < 7 || unescaped(fields[4]) != dir) continue;
        size_t dash = 6;
        while (dash < fields.size() && fields[dash] != "-") ++dash;
        if (dash + 1 >= fields.size()) continue;
        found = MountPoint{unescaped(fields[dash + 1]),
                           dash + 2 < fields.size() ? unescaped(fields[dash + 2]) : ""};
    }
    return found;
}

std::optional<MountPoint> mount_at(uint32_t pid, std::string_view dir,
                                   const std::string& proc_root) {
    auto text = read_file(proc_root + "/" + std::to_string(pid) + "/mountinfo");
    if (!text) return std::nullopt;
    return mount_at_in(*text, dir);
}

std::vector<Ancestor> ancestors_of(uint32_t pid, size_t depth, const std::string& proc_root) {
    std::vector<Ancestor> out;
    // Each level's status file gives its parent, and is the next level's own.
    auto status = read_file(proc_root + "/" + std::to_string(pid) + "/status");
    while (status && out.size() < depth) {
        const auto parent = proc_status_field(*status, "PPid");
        // pid 1 and kthreadd (2) end the chain: nothing unpacks for them.
        if (!parent || *parent <= 2) break;
        const std::string dir = proc_root + "/" + std::to_string(*parent);
        status = read_file(dir + "/status");
        if (!status) break;
        const std::string root = link_target(dir + "/root");
        out.push_back(Ancestor{*parent, inside_root(link_target(dir + "/exe"), root),
                               proc_status_name(*status)});
    }
    return out;
}

bool maps_below(std::string_view maps, std::string_view dir) {
    size_t at = 0;
    while (at < maps.size()) {
        const size_t end = std::min(maps.find('\n', at), maps.size());
        const std::string_view line = maps.substr(at, end - at);
        at = end + 1;
        const size_t path = line.find('/');
        if (path != std::string_view::npos && below(line.substr(path), dir)) return true;
    }
    return false;
}

bool uses_files_below(uint32_t pid, std::string_view dir, const std::string& proc_root) {
    const std::string pid_dir = proc_root + "/" + std::to_string(pid);
    const std::string root = link_target(pid_dir + "/root");
    if (auto maps = read_file(pid_dir + "/maps"); maps && maps_below(*maps, dir)) return true;
    const std::string cwd = inside_root(link_target(pid_dir + "/cwd"), root);
    if (cwd == dir || below(cwd, dir)) return true;
    std::error_code error;
    for (const auto& entry : std::filesystem::directory_iterator(pid_dir + "/fd", error)) {
        const std::string target = inside_root(link_target(entry.path().string()), root);
        if (target == dir || below(target, dir)) return true;
    }
    return false;
}

}  // namespace gpuguard::agent
