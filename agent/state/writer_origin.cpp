#include "gpuguard/state/writer_origin.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string_view>
#include <system_error>

#include "gpuguard/common/read_file.h"
#include "gpuguard/events/event.h"
#include "gpuguard/state/package_owner.h"

namespace gpuguard::agent {
namespace {

constexpr std::string_view kPackageManagers[] = {
    "dpkg",   "dpkg-deb", "dpkg-divert", "dpkg-statoverride",
    "apt",    "apt-get",  "aptitude",    "rpm",
    "dnf",    "dnf5",     "yum",         "microdnf",
    "zypper", "apk",      "packagekitd", "unattended-upgrade"};

std::string base_name(std::string_view path) {
    const auto slash = path.rfind('/');
    std::string_view name = slash == std::string_view::npos ? path : path.substr(slash + 1);
    if (name.ends_with(" (deleted)")) name.remove_suffix(10);
    return std::string(name);
}

bool in_system_bin(std::string_view path) {
    for (std::string_view dir : {"/usr/bin/", "/usr/sbin/", "/bin/", "/sbin/"}) {
        if (path.starts_with(dir) && path.find('/', dir.size()) == std::string_view::npos) {
            return true;
        }
    }
    return false;
}

}  // namespace

std::string writer_tool_kind(const std::string& exe_path) {
    const std::string name = base_name(exe_path);
    if (name == "systemctl") return "systemctl";
    if (std::find(std::begin(kPackageManagers), std::end(kPackageManagers), name) !=
        std::end(kPackageManagers)) {
        return "package_manager";
    }
    return "";
}

WriterOrigin classify_writer(const std::vector<Ancestor>& chain,
                             const std::function<std::string(const Ancestor&)>& vouch) {
    WriterOrigin origin;
    origin.kind = "other";
    std::vector<std::string> refused;
    for (size_t i = 0; i < chain.size(); ++i) {
        const Ancestor& process = chain[i];
        const std::string kind = writer_tool_kind(process.exe);
        if (kind.empty()) continue;
        const std::string vouched = vouch(process);
        const std::string who = process.exe + " (pid " + std::to_string(process.pid);
        if (vouched.empty()) {
            refused.push_back("named " + base_name(process.exe) + ", but " + process.exe +
                              " is owned by no package");
            continue;
        }
        origin.kind = kind;
        origin.detail = (i == 0 ? "is " : "under ") + who + ", " + vouched + ")";
        break;
    }
    if (origin.kind == "other" && !refused.empty()) {
        origin.detail = refused.front();
        for (size_t i = 1; i < refused.size(); ++i) origin.detail += "; " + refused[i];
    }
    return origin;
}

std::string vouch_for_tool(const std::string& root, const std::string& exe) {
    if (exe.ends_with(" (deleted)")) return "";  // replaced since: no longer the package's
    if (std::string owner = package_owner(root, exe); !owner.empty()) return owner;
    std::error_code missing;
    if (!std::filesystem::exists(root + "/var/lib/dpkg/info", missing) && in_system_bin(exe)) {
        return "no dpkg database, in a system directory";
    }
    return "";
}

WriterOrigin writer_origin(uint32_t pid, const std::string& proc_root) {
    const std::string base = proc_root + "/" + std::to_string(pid);
    std::error_code ec;
    Ancestor self;
    self.pid = pid;
    self.exe = std::filesystem::read_symlink(base + "/exe", ec).string();
    std::vector<Ancestor> chain{self};
    for (Ancestor& ancestor : ancestors_of(pid, 16, proc_root))
        chain.push_back(std::move(ancestor));
    WriterOrigin origin = classify_writer(chain, [&](const Ancestor& process) {
        return vouch_for_tool(proc_root + "/" + std::to_string(process.pid) + "/root", process.exe);
    });
    origin.exe = self.exe;
    // A writer gone by now has no command line (read_file: a read error
    // ends the read, where an istreambuf_iterator would throw).
    if (auto bytes = read_file(base + "/cmdline")) origin.cmdline = split_nul_separated(*bytes);
    return origin;
}

}  // namespace gpuguard::agent
