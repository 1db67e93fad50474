#include "gpuguard/state/process_handle.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace gpuguard::agent {
namespace {

std::string read_text(const std::string& path) {
    std::ifstream in(path);
    if (!in) return {};
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

uint64_t clock_ticks_per_second() {
    const long ticks = sysconf(_SC_CLK_TCK);
    return ticks > 0 ? static_cast<uint64_t>(ticks) : 100;
}

uint64_t ticks_to_ns(uint64_t ticks) {
    const uint64_t hz = clock_ticks_per_second();
    return ticks / hz * 1'000'000'000ull + ticks % hz * 1'000'000'000ull / hz;
}

// Raw syscalls: glibc's wrappers came in 2.36, the syscalls in Linux 5.1/5.3.
int sys_pidfd_open(pid_t pid) { return static_cast<int>(syscall(SYS_pidfd_open, pid, 0)); }
int sys_pidfd_send_signal(int fd, int signo) {
    return static_cast<int>(syscall(SYS_pidfd_send_signal, fd, signo, nullptr, 0));
}

}  // namespace

Result<ProcStat> parse_proc_stat(const std::string& line) {
    // comm may contain anything, ')' included: it ends at the last ')'.
    const size_t open = line.find('(');
    const size_t close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close < open) {
        return fail(ErrorCode::kParse, "malformed /proc stat line: no (comm)");
    }
    ProcStat stat;
    stat.pid = static_cast<uint32_t>(std::strtoul(line.c_str(), nullptr, 10));
    stat.comm = line.substr(open + 1, close - open - 1);
    std::istringstream rest(line.substr(close + 1));
    // Field 3 (state) onwards; field N is rest-field N-3.
    std::vector<std::string> fields;
    std::string field;
    while (rest >> field) fields.push_back(field);
    if (fields.size() < 20) {
        return fail(ErrorCode::kParse,
                    "malformed /proc stat line: " + std::to_string(fields.size() + 2) + " fields");
    }
    stat.state = fields[0].empty() ? '?' : fields[0][0];
    stat.ppid = static_cast<uint32_t>(std::strtoul(fields[1].c_str(), nullptr, 10));
    stat.pgrp = static_cast<int32_t>(std::strtol(fields[2].c_str(), nullptr, 10));
    stat.flags = static_cast<uint32_t>(std::strtoul(fields[6].c_str(), nullptr, 10));
    stat.start_time_ticks = std::strtoull(fields[19].c_str(), nullptr, 10);
    stat.start_time_ns = ticks_to_ns(stat.start_time_ticks);
    // Linux 3.5 added it; 0 for a process we may not ptrace (root may).
    if (fields.size() > 48) stat.env_end = std::strtoull(fields[48].c_str(), nullptr, 10);
    return stat;
}

uint64_t proc_start_time_ns(uint64_t boottime_ns) {
    // fs/proc/array.c: nsec_to_clock_t(task->start_boottime), rounded down.
    return ticks_to_ns(boottime_ns / (1'000'000'000ull / clock_ticks_per_second()));
}

Result<ProcStat> read_proc_stat(uint32_t pid, const std::string& proc_root) {
    const std::string path = proc_root + "/" + std::to_string(pid) + "/stat";
    const std::string text = read_text(path);
    if (text.empty()) {
        return fail(ErrorCode::kNotFound, "process " + std::to_string(pid) + " not found", ESRCH);
    }
    return parse_proc_stat(text);
}

Result<ProcFacts> read_proc_facts(uint32_t pid, const std::string& proc_root) {
    auto stat = read_proc_stat(pid, proc_root);
    if (!stat) return Unexpected{stat.error()};
    ProcFacts facts;
    facts.stat = *stat;
    const std::string dir = proc_root + "/" + std::to_string(pid);
    std::istringstream status(read_text(dir + "/status"));
    for (std::string line; std::getline(status, line);) {
        if (line.rfind("Uid:", 0) == 0) {
            facts.uid = static_cast<uint32_t>(std::strtoul(line.c_str() + 4, nullptr, 10));
            break;
        }
    }
    char exe[4096];
    const ssize_t n = readlink((dir + "/exe").c_str(), exe, sizeof(exe) - 1);
    if (n > 0) facts.executable.assign(exe, static_cast<size_t>(n));
    std::istringstream cgroups(read_text(dir + "/cgroup"));
    for (std::string line; std::getline(cgroups, line);) {
        if (line.rfind("0::", 0) == 0) facts.cgroup_path = line.substr(3);
    }
    facts.empty_cmdline = read_text(dir + "/cmdline").empty();
    return facts;
}

Result<ProcessHandle> ProcessHandle::open(uint32_t pid, uint64_t expected_start_time_ns,
                                          const std::string& proc_root) {
    if (pid == 0) return fail(ErrorCode::kInvalidArgument, "pid 0 is not a process");
    const int fd = sys_pidfd_open(static_cast<pid_t>(pid));
    if (fd < 0) {
        const int err = errno;
        if (err == ESRCH) {
            return fail(ErrorCode::kNotFound, "process " + std::to_string(pid) + " not found", err);
        }
        if (err == ENOSYS) {
            return fail(ErrorCode::kUnsupported, "pidfd_open needs Linux 5.3 or later", err);
        }
        return fail(ErrorCode::kIo,
                    "pidfd_open(" + std::to_string(pid) + "): " + std::strerror(err), err);
    }
    ProcessHandle handle(pid, fd, ProcStat{});
    auto stat = read_proc_stat(pid, proc_root);
    if (!stat) return Unexpected{stat.error()};
    // The stat line read after pidfd_open describes the fd's process only if
    // that process is still alive now (its pid cannot have been reused).
    if (sys_pidfd_send_signal(fd, 0) != 0) {
        return fail(ErrorCode::kNotFound, "process " + std::to_string(pid) + " exited", ESRCH);
    }
    if (expected_start_time_ns != 0 && stat->start_time_ns != expected_start_time_ns) {
        return fail(ErrorCode::kInvalidArgument,
                    "pid " + std::to_string(pid) + " now belongs to another process (started " +
                        std::to_string(stat->start_time_ns) + " ns after boot, expected " +
                        std::to_string(expected_start_time_ns) + ")");
    }
    handle.stat_ = *stat;
    return handle;
}

ProcessHandle::ProcessHandle(ProcessHandle&& other) noexcept
    : pid_(other.pid_), fd_(other.fd_), stat_(std::move(other.stat_)) {
    other.fd_ = -1;
}

ProcessHandle& ProcessHandle::operator=(ProcessHandle&& other) noexcept {
    if (this != &other) {
        if (fd_ >= 0) close(fd_);
        pid_ = other.pid_;
        fd_ = other.fd_;
        stat_ = std::move(other.stat_);
        other.fd_ = -1;
    }
    return *this;
}

ProcessHandle::~ProcessHandle() {
    if (fd_ >= 0) close(fd_);
}

Status ProcessHandle::signal(int signo) const {
    if (sys_pidfd_send_signal(fd_, signo) == 0) return {};
    const int err = errno;
    if (err == ESRCH) {
        return fail(ErrorCode::kNotFound, "process " + std::to_string(pid_) + " already exited",
                    err);
    }
    return fail(err == EPERM ? ErrorCode::kPermission : ErrorCode::kIo,
                "pidfd_send_signal(" + std::to_string(pid_) + ", " + std::to_string(signo) +
                    "): " + std::strerror(err),
                err);
}

bool ProcessHandle::wait_exit(std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
        pollfd pfd{fd_, POLLIN, 0};
        // Rounded up: poll() must not return before the deadline.
        const auto left = std::chrono::ceil<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        const int n = ::poll(&pfd, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
        if (n > 0) return true;
        if (n == 0) return false;
        if (errno != EINTR) return false;
    }
}

Result<std::vector<uint32_t>> read_cgroup_procs(const std::string& cgroup_dir) {
    std::ifstream in(cgroup_dir + "/cgroup.procs");
    if (!in) {
        return fail(ErrorCode::kNotFound, "cannot read " + cgroup_dir + "/cgroup.procs", errno);
    }
    std::vector<uint32_t> pids;
    for (uint32_t pid = 0; in >> pid;) pids.push_back(pid);
    return pids;
}

}  // namespace gpuguard::agent
