#include "gpuguard/state/file_context.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <ctime>
#include <thread>

#include "gpuguard/common/read_file.h"
#include "gpuguard/state/config_files.h"
#include "gpuguard/state/loader_paths.h"
#include "gpuguard/state/process_handle.h"
#include "proc_links.h"

namespace gpuguard::agent {
namespace {

constexpr int kAtFdcwd = -100;
constexpr size_t kPreloadMaxBytes = 4096;
constexpr int kPreloadWaitAttempts = 40;
constexpr std::chrono::milliseconds kPreloadWaitStep{5};

// The directory a relative path of `pid` starts from, as the process sees it.
std::string base_directory(const std::string& dir, const FileChange& change,
                           const std::string& root) {
    const std::string link =
        change.dirfd == kAtFdcwd ? dir + "/cwd" : dir + "/fd/" + std::to_string(change.dirfd);
    const std::string target = link_target(link);
    return target.empty() ? target : inside_root(target, root);
}

bool all_digits(std::string_view text) {
    return !text.empty() &&
           std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// "/proc/self/fd/3", "/proc/thread-self/fd/3", "/proc/42/fd/3", "/dev/fd/3",
// and below one ("/dev/fd/3/x": execveat of a path relative to a dirfd).
bool names_an_fd(std::string_view path) {
    const auto fd_number = [](std::string_view rest) {
        return all_digits(rest.substr(0, rest.find('/')));
    };
    if (path.starts_with("/dev/fd/")) return fd_number(path.substr(8));
    if (!path.starts_with("/proc/")) return false;
    path.remove_prefix(6);
    const std::string_view who = path.substr(0, path.find('/'));
    if (who != "self" && who != "thread-self" && !all_digits(who)) return false;
    path.remove_prefix(who.size());
    return path.starts_with("/fd/") && fd_number(path.substr(4));
}

}  // namespace

void complete_exec(uint32_t pid, Exec& exec, const std::string& proc_root) {
    const std::string dir = proc_root + "/" + std::to_string(pid);
    if (!exec.filename.starts_with("/") || names_an_fd(exec.filename)) {
        exec.exe = link_target(dir + "/exe");
        return;
    }
    // The file the path names once symlinks, "..", "//" and /proc/PID/root
    // are undone (a script's own path, not its interpreter's, as the
    // filename is). Kept only where it differs from the filename.
    std::string resolved = real_path_in_root(dir, exec.filename);
    if (!resolved.empty() && resolved != exec.filename) exec.exe = std::move(resolved);
}

std::vector<std::string> preload_libraries(std::string_view contents) {
    std::vector<std::string> out;
    std::string current;
    bool comment = false;
    for (char c : contents) {
        if (c == '\n') comment = false;
        if (comment) continue;
        if (c == '#') {
            comment = true;
        } else if (!std::isspace(static_cast<unsigned char>(c)) && c != ':') {
            current.push_back(c);
            continue;
        }
        if (!current.empty()) out.push_back(std::exchange(current, {}));
    }
    if (!current.empty()) out.push_back(std::move(current));
    return out;
}

void complete_file_change(uint32_t pid, FileChange& change,
                          const std::vector<WatchPattern>& patterns, const std::string& proc_root) {
    const std::string dir = proc_root + "/" + std::to_string(pid);
    const std::string root = link_target(dir + "/root");
    if (!change.path.empty() && change.path.front() != '/') {
        std::string absolute;
        if (change.operation == "write" && change.result >= 0) {
            // The file it opened, unless the fd was closed (or reused) since.
            const std::string target = link_target(dir + "/fd/" + std::to_string(change.result));
            const std::string name = change.path.substr(change.path.rfind('/') + 1);
            if (target.starts_with("/") && target.ends_with("/" + name)) {
                absolute = inside_root(target, root);
            }
        }
        if (absolute.empty()) {
            const std::string base = base_directory(dir, change, root);
            if (!base.empty()) absolute = (base == "/" ? "" : base) + "/" + change.path;
        }
        if (!absolute.empty()) {
            change.raw_path = std::exchange(change.path, absolute);
            if (change.kind.empty()) change.kind = watch_kind(patterns, change.path);
        }
    }
    if (change.kind != "preload" || change.operation == "unlink") return;
    // The event is the open for writing: the contents follow it. While the
    // writer still holds the file open and it names nothing yet, look again
    // for a short while (these writes are rare; the wait is bounded).
    const std::string writer_fd = dir + "/fd/" + std::to_string(change.result);
    for (int attempt = 0;; ++attempt) {
        auto file = open_config_file(pid, ConfigCandidate{change.path, "default"}, "/", proc_root);
        if (!file) return;
        bool truncated = false;
        if (auto contents = file->read(kPreloadMaxBytes, truncated)) {
            change.libraries = preload_libraries(*contents);
        }
        const bool still_writing = change.operation == "write" && change.result >= 0 &&
                                   link_target(writer_fd).ends_with("/ld.so.preload");
        if (!change.libraries.empty() || !still_writing || attempt >= kPreloadWaitAttempts) return;
        std::this_thread::sleep_for(kPreloadWaitStep);
    }
}

ProcessEnv read_process_env(uint32_t pid, const std::string& proc_root) {
    ProcessEnv env;
    const std::string path = proc_root + "/" + std::to_string(pid) + "/environ";
    auto environ = read_file(path);
    if (environ && environ->empty()) {
        // Mid-exec the new image's environ reads empty: the kernel switched
        // to its memory but has not built its stack yet (env_end still 0).
        // Its exec event follows, and the environment is read again then.
        const auto stat = read_proc_stat(pid, proc_root);
        if (stat && stat->env_end == 0) {
            env.error = path + ": not set up yet (the process is executing a new program)";
            return env;
        }
        environ = read_file(path);  // the exec may have ended between the two reads
    }
    if (!environ) {
        env.error = environ.error().message;
        return env;
    }
    for (const auto& entry : split_nul_separated(*environ)) {
        if (entry.starts_with("LD_PRELOAD=")) env.ld_preload = entry.substr(11);
        if (entry.starts_with("LD_LIBRARY_PATH=")) env.ld_library_path = entry.substr(16);
    }
    env.loader_paths = read_loader_paths(pid, env, proc_root, ::time(nullptr));
    return env;
}

}  // namespace gpuguard::agent
