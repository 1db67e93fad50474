#include "gpuguard/state/loader_paths.h"

#include <algorithm>
#include <cerrno>

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "gpuguard/common/dir_entries.h"
#include "gpuguard/common/text.h"
#include "gpuguard/common/unique_fd.h"
#include "gpuguard/state/package_owner.h"
#include "proc_links.h"

namespace gpuguard::agent {
namespace {

constexpr size_t kMaxEntries = 32;
// Directory entries looked at for the newest shared library (a lib
// directory of a large environment holds a few hundred).
constexpr size_t kMaxListed = 4096;
// Directories walked up from an entry looking for its environment's prefix.
constexpr int kMaxAncestors = 16;

void split_into(std::string_view text, std::string_view separators, const char* variable,
                bool need_slash, std::vector<LoaderPath>& out) {
    size_t start = 0;
    while (start <= text.size() && out.size() < kMaxEntries) {
        const size_t end = std::min(text.find_first_of(separators, start), text.size());
        const std::string_view entry = text.substr(start, end - start);
        // A preload named without a '/' is looked up in the library path.
        if (!entry.empty() && (!need_slash || entry.find('/') != std::string_view::npos)) {
            out.push_back(LoaderPath{variable, std::string(entry)});
        }
        start = end + 1;
    }
}

bool shared_library_name(std::string_view name) {
    return name.ends_with(".so") || name.find(".so.") != std::string_view::npos;
}

struct Inspected {
    bool exists = false;
    bool directory = false;
    int64_t newest_mtime = 0;
    bool others_can_write = false;
};

bool others_write(const struct stat& st) {
    return (st.st_mode & S_IWOTH) != 0 && (st.st_mode & S_ISVTX) == 0;
}

// `resolved` seen through `root_path` (no symlinks left in it).
Inspected inspect(const std::string& root_path, const std::string& resolved) {
    Inspected out;
    const std::string at = root_path + resolved;
    struct stat st {};
    if (::lstat(at.c_str(), &st) != 0) return out;
    out.exists = true;
    out.directory = S_ISDIR(st.st_mode);
    out.newest_mtime = st.st_mtim.tv_sec;
    out.others_can_write = others_write(st);
    // The directory holding it: whoever can write there can swap the file.
    const std::string parent = resolved.substr(0, resolved.rfind('/'));
    struct stat up {};
    if (::stat((root_path + (parent.empty() ? "/" : parent)).c_str(), &up) == 0) {
        out.others_can_write |= others_write(up);
    }
    if (!out.directory) return out;
    auto entries = list_directory(at);
    if (!entries) return out;
    size_t listed = 0;
    for (const DirEntry& entry : *entries) {
        if (++listed > kMaxListed) break;
        if (!shared_library_name(entry.name)) continue;
        struct stat library {};
        if (::lstat((at + "/" + entry.name).c_str(), &library) == 0) {
            out.newest_mtime = std::max<int64_t>(out.newest_mtime, library.st_mtim.tv_sec);
            if (S_ISREG(library.st_mode) && others_write(library)) out.others_can_write = true;
        }
    }
    return out;
}

bool has(const std::string& path, bool directory) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0 &&
           (directory ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode));
}

bool holds_distributions(const std::string& dir) {
    auto entries = list_directory(dir);
    if (!entries) return false;
    size_t listed = 0;
    return std::any_of(entries->begin(), entries->end(), [&](const DirEntry& entry) {
        return ++listed <= kMaxListed && entry.name.ends_with(".dist-info");
    });
}

// The environment `resolved` lies in, by what its prefix holds: conda's
// conda-meta/, a virtualenv's pyvenv.cfg (PEP 405), or a site-packages /
// dist-packages directory with installed distributions (pip's nvidia-*
// wheels put their libraries in site-packages/nvidia/NAME/lib).
std::string environment_of(const std::string& root_path, const std::string& resolved) {
    std::string python;
    std::string dir = resolved;
    for (int up = 0; up < kMaxAncestors && dir.size() > 1; ++up) {
        const std::string at = root_path + dir;
        if (has(at + "/conda-meta", true)) return "conda:" + dir;
        if (has(at + "/pyvenv.cfg", false)) return "virtualenv:" + dir;
        const std::string_view name = std::string_view(dir).substr(dir.rfind('/') + 1);
        if (python.empty() && (name == "site-packages" || name == "dist-packages") &&
            holds_distributions(at)) {
            python = "python:" + dir;
        }
        dir = dir.substr(0, std::max<size_t>(dir.rfind('/'), 1));
    }
    return python;
}

}  // namespace

std::string real_path_in_root(const std::string& proc_dir, const std::string& path) {
    // The kernel undoes symlinks and ".." below; only a /proc/PID/root in
    // front (a magic link openat2 refuses here) is undone by spelling.
    std::string absolute = path.starts_with("/proc/") ? normal_path(path) : path;
    const std::string root_link = link_target(proc_dir + "/root");
    if (!absolute.starts_with("/")) {
        const std::string cwd = inside_root(link_target(proc_dir + "/cwd"), root_link);
        if (!cwd.starts_with("/")) return "";
        absolute = (cwd == "/" ? "" : cwd) + "/" + absolute;
    }
    UniqueFd root(::open((proc_dir + "/root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!root) return "";
    open_how how{};
    how.flags = O_PATH | O_CLOEXEC;
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
    UniqueFd located(
        static_cast<int>(::syscall(SYS_openat2, root.get(), absolute.c_str(), &how, sizeof(how))));
    if (!located) return "";
    const std::string target = link_target("/proc/self/fd/" + std::to_string(located.get()));
    return target.starts_with("/") ? inside_root(target, root_link) : "";
}

std::vector<LoaderPath> loader_entries(const ProcessEnv& env) {
    std::vector<LoaderPath> out;
    if (env.ld_preload) split_into(*env.ld_preload, ": \t", "LD_PRELOAD", true, out);
    if (env.ld_library_path) split_into(*env.ld_library_path, ":;", "LD_LIBRARY_PATH", false, out);
    return out;
}

std::vector<LoaderPath> read_loader_paths(uint32_t pid, const ProcessEnv& env,
                                          const std::string& proc_root, int64_t now_unix_s) {
    std::vector<LoaderPath> out = loader_entries(env);
    if (out.empty()) return out;
    const std::string dir = proc_root + "/" + std::to_string(pid);
    const std::string root_path = dir + "/root";
    if (link_target(root_path).empty()) return {};  // gone
    for (LoaderPath& entry : out) {
        entry.resolved = real_path_in_root(dir, entry.path);
        if (entry.resolved.empty()) continue;
        const Inspected found = inspect(root_path, entry.resolved);
        if (!found.exists) {
            entry.resolved.clear();
            continue;
        }
        entry.age_s = std::max<int64_t>(0, now_unix_s - found.newest_mtime);
        entry.others_can_write = found.others_can_write;
        // Under a temporary directory nothing vouches: the correlator says so.
        entry.vouched_by = package_owner(root_path, entry.resolved);
        if (entry.vouched_by.empty()) entry.vouched_by = environment_of(root_path, entry.resolved);
    }
    return out;
}

}  // namespace gpuguard::agent
