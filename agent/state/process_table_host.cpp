// What the process table reads of the host: the /proc bootstrap of the
// processes running at start, a process's details from /proc (its real
// executable, cgroup and container, the package owning a deleted
// executable) and the names of its user and group.
#include <algorithm>

#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "gpuguard/common/read_file.h"
#include "gpuguard/state/package_owner.h"
#include "gpuguard/state/proc_listing.h"
#include "gpuguard/state/process_handle.h"
#include "gpuguard/state/process_table.h"
#include "process_info_edits.h"

namespace gpuguard::agent {

Result<BootstrapReport> ProcessTable::bootstrap() {
    BootstrapReport report;
    // getdents64, not readdir: a preloaded library cannot hide a process here.
    auto pids = list_proc_pids(options_.proc_root);
    if (!pids) return Unexpected{pids.error()};
    for (const uint32_t pid : *pids) {
        const auto pid_dir = options_.proc_root / std::to_string(pid);
        ProcessInfo info;
        info.pid = pid;
        load_from_proc(info);
        if (options_.read_host) {  // the process there now: the one listed
            auto stat = read_proc_stat(pid, options_.proc_root.string());
            if (stat) info.start_time_ns = stat->start_time_ns;
        }
        if (info.comm.empty() && info.cmdline.empty()) {
            ++report.unreadable;  // exited while we looked, or a kernel we cannot read
            continue;
        }
        // Each fd once: stat() follows the /proc symlink to the opened inode.
        if (info.pid != options_.ignore_pid) {
            for (const uint32_t fd : list_proc_fds(options_.proc_root, pid)) {
                const auto fd_path = pid_dir / "fd" / std::to_string(fd);
                struct stat st {};
                if (stat(fd_path.c_str(), &st) != 0 || !S_ISCHR(st.st_mode)) continue;
                const uint32_t major_number = major(st.st_rdev), minor_number = minor(st.st_rdev);
                if (is_gpu_(major_number, minor_number)) {
                    add_gpu(info, GpuHandle{major_number, minor_number, static_cast<int32_t>(fd), 0,
                                            false});
                }
            }
        }
        if (info.holds_gpu()) {
            enrich_from_proc(info);
            ++report.gpu_processes;
        }
        processes_[info.pid] = std::move(info);
        ++report.processes;
    }
    rebuild_candidates();
    enforce_bound();
    return report;
}

void ProcessTable::load_from_proc(ProcessInfo& info) {
    if (!options_.read_host) return;
    const auto dir = options_.proc_root / std::to_string(info.pid);
    if (auto status = read_file(dir / "status")) {
        info.comm = proc_status_name(*status);
        info.ppid = proc_status_field(*status, "PPid").value_or(info.ppid);
        info.uid = proc_status_field(*status, "Uid").value_or(info.uid);
        info.gid = proc_status_field(*status, "Gid").value_or(info.gid);
    }
    if (auto cmdline = read_file(dir / "cmdline")) info.cmdline = split_nul_separated(*cmdline);
}

void ProcessTable::enrich_from_proc(ProcessInfo& info) {
    if (!options_.read_host) return;
    const auto dir = options_.proc_root / std::to_string(info.pid);
    std::error_code ec;
    // The exec event's filename wins when it is absolute: /proc is read later
    // than the event happened and may already show a newer image. Except
    // that the same file unlinked since is news: "PATH (deleted)".
    if (const auto exe = std::filesystem::read_symlink(dir / "exe", ec); !ec) {
        if (info.exe.empty() || info.exe.front() != '/' ||
            exe.string() == info.exe + " (deleted)") {
            info.exe = exe.string();
        }
    }
    // A file replaced under the running process: an upgrade where the
    // process's own package database owns the path (a package's postinst
    // restarts it soon), anything else where none does.
    constexpr std::string_view kDeleted = " (deleted)";
    info.exe_package.clear();
    if (info.exe.ends_with(kDeleted) && info.exe.front() == '/') {
        info.exe_package = package_owner((dir / "root").string(),
                                         info.exe.substr(0, info.exe.size() - kDeleted.size()));
    }
    if (auto cgroup = read_file(dir / "cgroup")) {
        info.cgroup_path = cgroup_path_from_proc(*cgroup);
        info.container = container_from_cgroup(info.cgroup_path);
    }
    ContainerDetails details =
        info.container ? container_names_.details_of(*info.container) : ContainerDetails{};
    // A pod the workload event named where the runtime has no labels stays named.
    if (!details.in_pod() && info.container_details.in_pod()) {
        details.pod_name = info.container_details.pod_name;
        details.pod_namespace = info.container_details.pod_namespace;
        details.pod_uid = info.container_details.pod_uid;
        details.kube_container = info.container_details.kube_container;
    }
    info.container_details = std::move(details);
    info.user = user_name(info.uid);
    info.group = group_name(info.gid);
}

std::string ProcessTable::group_name(uint32_t gid) {
    if (const auto found = group_names_.find(gid); found != group_names_.end()) {
        return found->second;
    }
    std::string name;
    group entry{};
    group* result = nullptr;
    std::vector<char> buffer(16384);
    if (getgrgid_r(gid, &entry, buffer.data(), buffer.size(), &result) == 0 && result) {
        name = result->gr_name;
    }
    group_names_[gid] = name;
    return name;
}

std::string ProcessTable::user_name(uint32_t uid) {
    if (const auto found = user_names_.find(uid); found != user_names_.end()) return found->second;
    std::string name;
    passwd entry{};
    passwd* result = nullptr;
    std::vector<char> buffer(4096);
    if (getpwuid_r(uid, &entry, buffer.data(), buffer.size(), &result) == 0 && result) {
        name = result->pw_name;
    }
    user_names_[uid] = name;
    return name;
}

ProcessInfo ProcessTable::enriched(const TaskInfo& task) {
    ProcessInfo info;
    if (const ProcessInfo* found = processes_.find(task.pid); found && !found->exited) {
        info = *found;
    } else {
        info.pid = task.pid;
        load_from_proc(info);
    }
    take_identity(info, task);
    enrich_from_proc(info);
    return info;
}

}  // namespace gpuguard::agent
