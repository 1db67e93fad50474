#include "gpuguard/state/proc_listing.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <memory>
#include <set>
#include <sstream>
#include <utility>

#include <dirent.h>
#include <dlfcn.h>
#include <sys/stat.h>

#include "gpuguard/common/dir_entries.h"
#include "gpuguard/common/file_error.h"
#include "gpuguard/common/read_file.h"
#include "gpuguard/common/text.h"
#include "gpuguard/state/proc_parse.h"

namespace gpuguard::agent {
namespace {

namespace fs = std::filesystem;

// Library paths in an ld.so.preload file: separated by blanks, tabs,
// newlines or colons, as the dynamic linker reads it.
std::vector<std::string> preload_file_libraries(const std::string& text) {
    std::vector<std::string> out;
    std::string current;
    for (const char c : text + "\n") {
        if (c == ' ' || c == '\t' || c == '\n' || c == ':') {
            if (!current.empty()) out.push_back(std::move(current));
            current.clear();
        } else {
            current.push_back(c);
        }
    }
    return out;
}

// LD_PRELOAD's libraries in a /proc/PID/environ (space- or colon-separated).
std::vector<std::string> environ_preload(const fs::path& environ) {
    auto text = read_file(environ);
    if (!text) return {};
    for (const auto& entry : split_nul_separated(*text)) {
        if (entry.starts_with("LD_PRELOAD=")) return preload_file_libraries(entry.substr(11));
    }
    return {};
}

void add(HiddenProcess& hidden, const std::string& library, std::string mechanism) {
    if (std::find(hidden.libraries.begin(), hidden.libraries.end(), library) ==
        hidden.libraries.end()) {
        hidden.libraries.push_back(library);
    }
    if (std::find(hidden.mechanisms.begin(), hidden.mechanisms.end(), mechanism) ==
        hidden.mechanisms.end()) {
        hidden.mechanisms.push_back(std::move(mechanism));
    }
}

struct DlClose {
    void operator()(void* handle) const { dlclose(handle); }
};
using DlHandle = std::unique_ptr<void, DlClose>;

// The file that defines the code at `address`, canonical ("/lib/x.so"
// and "/usr/lib/x.so" are one file where /lib is a link), "" when dladdr
// cannot say.
std::string library_of(const void* address) {
    Dl_info info{};
    if (!address || dladdr(address, &info) == 0 || !info.dli_fname) return "";
    std::error_code ec;
    const auto canonical = fs::weakly_canonical(info.dli_fname, ec);
    return ec ? std::string(info.dli_fname) : canonical.string();
}

// Libraries mapped into this process whose own readdir/readdir64 is not
// libc's: the one the agent's calls resolve to (first in the global scope,
// where LD_PRELOAD and /etc/ld.so.preload put theirs), and any other mapped
// library that defines one.
void probe_own_readdir(HiddenProcess& hidden) {
    const DlHandle libc(dlopen("libc.so.6", RTLD_NOLOAD | RTLD_LAZY));
    std::set<std::string> judged;  // libc and the hooks found: not looked at again
    // The program's own readdir is no preload: a sanitizer's interceptors are
    // linked into the executable (ASan's readdir), a hiding library never is.
    std::error_code exe_error;
    const std::string own_exe = fs::canonical("/proc/self/exe", exe_error).string();
    for (const char* symbol : {"readdir", "readdir64"}) {
        void* resolved = dlsym(RTLD_DEFAULT, symbol);
        void* real = libc ? dlsym(libc.get(), symbol) : nullptr;
        judged.insert(library_of(real));
        if (resolved && real && resolved != real) {
            const std::string hook = library_of(resolved);
            if (hook.empty() || (!exe_error && hook == own_exe)) continue;
            judged.insert(hook);
            add(hidden, hook,
                "the agent's " + std::string(symbol) + " resolves to " + hook + ", not libc's");
        }
    }
    auto maps = read_file("/proc/self/maps");
    if (!maps) return;
    std::istringstream lines(*maps);
    for (std::string line; std::getline(lines, line);) {
        const auto slash = line.find('/');
        if (slash == std::string::npos || line.find(".so", slash) == std::string::npos) continue;
        std::error_code ec;
        const std::string path = fs::weakly_canonical(line.substr(slash), ec).string();
        if (ec || !judged.insert(path).second) continue;
        const DlHandle handle(dlopen(path.c_str(), RTLD_NOLOAD | RTLD_LAZY));
        if (!handle) continue;
        for (const char* symbol : {"readdir", "readdir64"}) {
            // dlsym on a handle also searches its dependencies: only a
            // definition inside the library itself counts.
            if (library_of(dlsym(handle.get(), symbol)) == path) {
                add(hidden, path, path + " (mapped into the agent) defines " + std::string(symbol));
            }
        }
    }
}

bool contains(const std::vector<uint32_t>& sorted, uint32_t pid) {
    return std::binary_search(sorted.begin(), sorted.end(), pid);
}

}  // namespace

Result<std::vector<uint32_t>> list_proc_pids(const fs::path& proc_root) {
    return list_numbered_entries(proc_root);
}

std::vector<uint32_t> list_proc_fds(const fs::path& proc_root, uint32_t pid) {
    auto fds = list_numbered_entries(proc_root / std::to_string(pid) / "fd");
    return fds ? std::move(*fds) : std::vector<uint32_t>{};
}

Result<std::vector<uint32_t>> libc_listed_pids(const fs::path& proc_root) {
    // On purpose through libc: this is the view a preloaded library shapes.
    const std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(proc_root.c_str()), closedir);
    if (!dir) return file_error("cannot list " + proc_root.string(), errno);
    std::vector<uint32_t> pids;
    while (const dirent* entry = readdir(dir.get())) {
        if (const auto pid = parse_decimal_u32(entry->d_name)) pids.push_back(*pid);
    }
    std::sort(pids.begin(), pids.end());
    return pids;
}

std::vector<OwnPreload> own_preloads(const HiddenCheckOptions& options) {
    std::vector<OwnPreload> out;
    if (auto text = read_file(options.etc_root / "etc/ld.so.preload")) {
        for (auto& library : preload_file_libraries(*text)) {
            out.push_back(
                {library, "/etc/ld.so.preload (the agent's mount namespace) preloads " + library});
        }
    }
    for (auto& library : environ_preload(options.proc_root / "self/environ")) {
        out.push_back({library, "LD_PRELOAD of the agent names " + library});
    }
    return out;
}

void find_hiding_mechanism(const HiddenCheckOptions& options, uint32_t pid, HiddenProcess& hidden) {
    const fs::path pid_dir = options.proc_root / std::to_string(pid);
    const std::pair<fs::path, std::string> preload_files[] = {
        {options.etc_root / "etc/ld.so.preload",
         "/etc/ld.so.preload (the agent's mount namespace)"},
        {pid_dir / "root/etc/ld.so.preload",
         "/etc/ld.so.preload (the root of process " + std::to_string(pid) + ")"}};
    for (const auto& [file, where] : preload_files) {
        if (auto text = read_file(file)) {
            for (const auto& library : preload_file_libraries(*text)) {
                add(hidden, library, where + " preloads " + library);
            }
        }
    }
    for (const auto& library : environ_preload(options.proc_root / "self/environ")) {
        add(hidden, library, "LD_PRELOAD of the agent names " + library);
    }
    for (const auto& library : environ_preload(pid_dir / "environ")) {
        add(hidden, library, "LD_PRELOAD of process " + std::to_string(pid) + " names " + library);
    }
    if (options.probe_self) probe_own_readdir(hidden);
}

Result<std::vector<std::pair<uint32_t, HiddenProcess>>> HiddenProcessCheck::run(
    const std::vector<uint32_t>& known) {
    ++checks_;
    // The kernel's listing first: a process that starts after it is in
    // neither set, one that exits after it is dropped by the second pass.
    auto kernel = list_proc_pids(options_.proc_root);
    if (!kernel) return Unexpected{kernel.error()};
    auto libc = libc_listed_pids(options_.proc_root);
    if (!libc) return Unexpected{libc.error()};
    std::vector<std::pair<uint32_t, std::string>> suspects;
    for (const uint32_t pid : *kernel) {
        if (!contains(*libc, pid)) suspects.emplace_back(pid, "getdents64");
    }
    for (const uint32_t pid : known) {
        if (!contains(*libc, pid) && !contains(*kernel, pid)) {
            suspects.emplace_back(pid, "process_table");
        }
    }
    std::vector<std::pair<uint32_t, HiddenProcess>> hidden;
    if (suspects.empty()) return hidden;
    auto again = list_proc_pids(options_.proc_root);
    for (const auto& [pid, seen_by] : suspects) {
        const fs::path dir = options_.proc_root / std::to_string(pid);
        bool there = false;
        if (seen_by == "getdents64") {
            there = again && contains(*again, pid);
        } else {
            // Not listed even by getdents64: still there when its directory
            // answers and it is a process, not a thread (/proc/TID resolves
            // for threads too, unlisted).
            auto status = read_file(dir / "status");
            there = status && proc_status_field(*status, "Tgid") == pid;
        }
        if (there && options_.signal_probe) {
            there = ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
        }
        if (!there) continue;
        HiddenProcess event;
        event.seen_by = seen_by;
        find_hiding_mechanism(options_, pid, event);
        hidden.emplace_back(pid, std::move(event));
    }
    return hidden;
}

}  // namespace gpuguard::agent
