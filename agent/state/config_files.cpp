#include "gpuguard/state/config_files.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>

#include <fcntl.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "gpuguard/common/read_file.h"
#include "gpuguard/events/event.h"
#include "proc_links.h"

namespace gpuguard::agent {
namespace {

// Options whose value names a configuration file. Sources, each miner's own
// documentation: XMRig, T-Rex, GMiner, cpuminer-multi, ccminer and
// xmr-stak (-c/--config FILE), lolMiner (--config, --json), SRBMiner-MULTI
// (--config-file), PhoenixMiner (-config, -epoolsfile), xmr-stak
// (--poolconf, --cpu, --amd, --nvidia FILE).
constexpr std::string_view kFileOptions[] = {
    "-c",          "--config",   "--config-file", "--json", "-config",
    "-epoolsfile", "--poolconf", "--cpu",         "--amd",  "--nvidia",
};

// Files the miner families read without being told, beside their
// executable or in their working directory (docs/detections.md).
constexpr std::string_view kBesideExecutable[] = {
    "config.json",         // XMRig, T-Rex
    "config.txt",          // PhoenixMiner, Claymore
    "epools.txt",          // PhoenixMiner, Claymore
    "config.ini",          // nanominer
    "cpuminer-conf.json",  // cpuminer-multi
    "ccminer.conf",        // ccminer
};
constexpr std::string_view kInWorkingDirectory[] = {
    "config.json",       // XMRig (a config.json where it is started)
    "config.ini",        // nanominer
    "config.txt",        // xmr-stak
    "pools.txt",         // xmr-stak
    "cpu.txt",           // xmr-stak
    "nvidia.txt",        // xmr-stak
    "amd.txt",           // xmr-stak
    "lolMiner.cfg",      // lolMiner --config default
    "user_config.json",  // lolMiner --json default
};
constexpr std::string_view kInHome[] = {
    ".xmrig.json",         // XMRig
    ".config/xmrig.json",  // XMRig
};

std::string basename_lower(std::string_view path) {
    const auto slash = path.rfind('/');
    std::string name(slash == std::string_view::npos ? path : path.substr(slash + 1));
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return name;
}

// Plain arguments looked at (a long argv is data, not options).
constexpr size_t kMaxPlainArguments = 32;

bool config_like(std::string_view argument) {
    static constexpr std::string_view kExtensions[] = {".ini", ".json", ".conf", ".cfg",
                                                       ".txt", ".toml", ".yaml", ".yml"};
    const std::string name = basename_lower(argument);
    return std::any_of(std::begin(kExtensions), std::end(kExtensions),
                       [&](std::string_view extension) {
                           return name.size() > extension.size() && name.ends_with(extension);
                       });
}

bool usable_path(std::string_view value) {
    return !value.empty() && value.size() < PATH_MAX &&
           value.find_first_of(std::string_view("\0\n", 2)) == std::string_view::npos;
}

std::string parent_of(std::string_view path) {
    const auto slash = path.rfind('/');
    if (slash == std::string_view::npos) return "";
    return std::string(slash == 0 ? "/" : path.substr(0, slash));
}

std::string joined(const std::string& dir, std::string_view name) {
    if (dir.empty()) return std::string(name);
    return dir.back() == '/' ? dir + std::string(name) : dir + "/" + std::string(name);
}

}  // namespace

std::string link_target(const std::string& path) {
    char buffer[PATH_MAX];
    const ssize_t n = ::readlink(path.c_str(), buffer, sizeof(buffer));
    return n > 0 ? std::string(buffer, static_cast<size_t>(n)) : std::string();
}

// `path` as the process sees it: the agent reads /proc/PID/exe and cwd
// relative to its own root, so a process in another root shows that root's
// path in front.
std::string inside_root(std::string path, const std::string& root) {
    if (path.ends_with(" (deleted)")) path.resize(path.size() - 10);
    if (root.empty() || root == "/") return path;
    if (path == root) return "/";
    if (path.starts_with(root) && path[root.size()] == '/') return path.substr(root.size());
    return path;
}

std::vector<ConfigCandidate> config_candidates(const ConfigContext& context) {
    std::vector<ConfigCandidate> out;
    const auto add = [&](std::string path, const char* reason) {
        if (!usable_path(path)) return;
        const bool known = std::any_of(
            out.begin(), out.end(), [&](const ConfigCandidate& seen) { return seen.path == path; });
        if (!known) out.push_back(ConfigCandidate{std::move(path), reason});
    };
    const auto& argv = context.argv;
    for (size_t i = 1; i < argv.size(); ++i) {
        const std::string_view arg = argv[i];
        if (arg.starts_with("config=")) {
            add(std::string(arg.substr(7)), "argument");
            continue;
        }
        for (std::string_view option : kFileOptions) {
            if (arg == option && i + 1 < argv.size()) {
                add(argv[i + 1], "argument");
            } else if (arg.size() > option.size() + 1 && arg.starts_with(option) &&
                       arg[option.size()] == '=' && option.starts_with("--")) {
                add(std::string(arg.substr(option.size() + 1)), "argument");
            }
        }
    }
    // nanominer takes its config file as its first argument, whatever its
    // name; so may any renamed miner: a plain argument named like a
    // configuration file is one.
    for (size_t i = 1; i < argv.size() && i <= kMaxPlainArguments; ++i) {
        const std::string& arg = argv[i];
        if (!arg.starts_with("-") && arg.find('=') == std::string::npos && config_like(arg)) {
            add(arg, "argument");
        }
    }
    std::string exe = context.exe;
    if (exe.ends_with(" (deleted)")) exe.resize(exe.size() - 10);
    if (exe.starts_with("/") && !exe.starts_with("/memfd:")) {
        const std::string dir = parent_of(exe);
        for (std::string_view name : kBesideExecutable) add(joined(dir, name), "default");
    }
    for (std::string_view name : kInWorkingDirectory) add(std::string(name), "default");
    if (context.home.starts_with("/")) {
        for (std::string_view name : kInHome) add(joined(context.home, name), "default");
    }
    return out;
}

Result<ConfigContext> read_config_context(uint32_t pid, const std::string& proc_root) {
    const std::string dir = proc_root + "/" + std::to_string(pid);
    auto cmdline = read_file(dir + "/cmdline");
    if (!cmdline) {
        return fail(ErrorCode::kNotFound, "process " + std::to_string(pid) + " is gone");
    }
    ConfigContext context;
    context.argv = split_nul_separated(*cmdline);
    const std::string root = link_target(dir + "/root");
    context.exe = link_target(dir + "/exe");
    if (!context.exe.empty()) context.exe = inside_root(context.exe, root);
    context.cwd = link_target(dir + "/cwd");
    if (!context.cwd.empty()) context.cwd = inside_root(context.cwd, root);
    if (auto environ = read_file(dir + "/environ")) {
        for (const auto& entry : split_nul_separated(*environ)) {
            if (entry.starts_with("HOME=")) context.home = entry.substr(5);
        }
    }
    return context;
}

Result<std::string> ConfigFileHandle::read(size_t max_bytes, bool& truncated) const {
    std::string data(std::min<uint64_t>(version_.size, max_bytes) + 1, '\0');
    size_t have = 0;
    while (true) {
        if (have == data.size()) {
            if (have > max_bytes) break;
            data.resize(std::min(data.size() * 2, max_bytes + 1));
        }
        const ssize_t n =
            ::pread(fd_.get(), data.data() + have, data.size() - have, static_cast<off_t>(have));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            return fail(ErrorCode::kIo, "read " + path_ + ": " + std::strerror(errno), errno);
        }
        if (n == 0) break;
        have += static_cast<size_t>(n);
    }
    truncated = have > max_bytes;
    data.resize(std::min(have, max_bytes));
    return data;
}

Result<ConfigFileHandle> open_config_file(uint32_t pid, const ConfigCandidate& candidate,
                                          const std::string& cwd, const std::string& proc_root) {
    std::string path = candidate.path;
    if (!path.starts_with("/")) {
        if (!cwd.starts_with("/")) {
            return fail(ErrorCode::kNotFound, path + ": the working directory is unknown");
        }
        path = joined(cwd, path);
    }
    const std::string root_path = proc_root + "/" + std::to_string(pid) + "/root";
    UniqueFd root(::open(root_path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!root) {
        return fail(ErrorCode::kNotFound, "process " + std::to_string(pid) + " is gone");
    }
    // O_PATH first: nothing is opened for reading (a device's open has side
    // effects, a FIFO's blocks) until the file is known to be a regular one.
    open_how how{};
    how.flags = O_PATH | O_CLOEXEC;
    how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
    UniqueFd located(
        static_cast<int>(::syscall(SYS_openat2, root.get(), path.c_str(), &how, sizeof(how))));
    if (!located) {
        const int err = errno;
        const ErrorCode code = err == ENOENT || err == ENOTDIR ? ErrorCode::kNotFound
                               : err == EACCES || err == EPERM ? ErrorCode::kPermission
                                                               : ErrorCode::kIo;
        return fail(code, path + ": " + std::strerror(err), err);
    }
    struct stat st {};
    struct statfs fs {};
    if (::fstat(located.get(), &st) != 0 || ::fstatfs(located.get(), &fs) != 0) {
        return fail(ErrorCode::kIo, path + ": " + std::strerror(errno), errno);
    }
    if (fs.f_type == PROC_SUPER_MAGIC || fs.f_type == SYSFS_MAGIC) {
        return fail(
            ErrorCode::kInvalidArgument,
            path + ": on " + (fs.f_type == PROC_SUPER_MAGIC ? "procfs" : "sysfs") + ", not read");
    }
    if (!S_ISREG(st.st_mode)) {
        return fail(ErrorCode::kInvalidArgument, path + ": not a regular file");
    }
    // The very inode just checked, now for reading.
    const std::string reopen = "/proc/self/fd/" + std::to_string(located.get());
    ConfigFileHandle handle;
    handle.fd_.reset(::open(reopen.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
    if (!handle.fd_) {
        const int err = errno;
        return fail(err == EACCES ? ErrorCode::kPermission : ErrorCode::kIo,
                    path + ": " + std::strerror(err), err);
    }
    handle.path_ = std::move(path);
    handle.version_ =
        FileVersion{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                    static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec,
                    static_cast<uint64_t>(st.st_size)};
    return handle;
}

}  // namespace gpuguard::agent
