// ProcessHandle: a pidfd on one process, checked against the start time the
// caller knows, so a signal never reaches a process that merely got the same
// pid later. Plus the /proc facts the enforcer's safety checks need.
//
// The order that makes this race-free: pidfd_open(pid) -> read
// /proc/PID/stat -> compare start time -> pidfd_send_signal(fd, 0). If the
// last call succeeds the process the stat line described is still the one
// behind the fd (a pid is not reused while its process exists), and from then
// on the fd refers to it whatever happens to the pid.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpuguard/common/cgroup.h"
#include "gpuguard/common/result.h"

namespace gpuguard::agent {

// PF_KTHREAD in include/linux/sched.h: the flags field of /proc/PID/stat.
inline constexpr uint32_t kPfKthread = 0x00200000;

// The fields of /proc/PID/stat the enforcer (and the environment reader) use.
struct ProcStat {
    uint32_t pid = 0;
    std::string comm;  // between the parentheses (may contain spaces and ')')
    char state = '?';  // R, S, D, T, t, Z, X, ...
    uint32_t ppid = 0;
    int32_t pgrp = 0;
    uint32_t flags = 0;             // field 9: PF_* task flags
    uint64_t start_time_ticks = 0;  // field 22: clock ticks after boot
    uint64_t start_time_ns = 0;     // the same in ns (ticks * 1e9 / CLK_TCK)
    // field 51: where its environment ends in its memory; 0 while an exec has
    // not yet built the new image's stack (and for a kernel thread)
    uint64_t env_end = 0;

    bool kernel_thread() const { return (flags & kPfKthread) != 0 || pid == 2 || ppid == 2; }
};

// A start time in CLOCK_BOOTTIME ns (the kernel's task->start_boottime, as
// a fork event carries it) in ProcStat::start_time_ns's units: /proc counts
// it in whole clock ticks, so both compare equal for the same process.
uint64_t proc_start_time_ns(uint64_t boottime_ns);

// Parses one /proc/PID/stat line. kParse on malformed text.
Result<ProcStat> parse_proc_stat(const std::string& line);

// Reads `<proc_root>/PID/stat`. kNotFound when the process is gone.
Result<ProcStat> read_proc_stat(uint32_t pid, const std::string& proc_root = "/proc");

// What the enforcer's allowlist and safety checks look at, read from /proc.
struct ProcFacts {
    ProcStat stat;
    uint32_t uid = 0;         // real uid (Uid: line of status)
    std::string executable;   // readlink of exe, "" for kernel threads / unreadable
    std::string cgroup_path;  // cgroup v2 path ("0::" line), "" when none
    bool empty_cmdline = false;
};

Result<ProcFacts> read_proc_facts(uint32_t pid, const std::string& proc_root = "/proc");

// A pidfd, move-only; closes on destruction.
class ProcessHandle {
  public:
    // Opens a pidfd for `pid` and, when `expected_start_time_ns` is not 0,
    // checks the process started then. Fails with:
    //   kNotFound     no such process (exited, or never existed)
    //   kInvalidArgument  the pid now belongs to a process with another start
    //                 time (recycled): nothing was signalled
    //   kUnsupported  pidfd_open is not available (kernel < 5.3)
    static Result<ProcessHandle> open(uint32_t pid, uint64_t expected_start_time_ns,
                                      const std::string& proc_root = "/proc");

    ProcessHandle(ProcessHandle&& other) noexcept;
    ProcessHandle& operator=(ProcessHandle&& other) noexcept;
    ProcessHandle(const ProcessHandle&) = delete;
    ProcessHandle& operator=(const ProcessHandle&) = delete;
    ~ProcessHandle();

    uint32_t pid() const { return pid_; }
    int fd() const { return fd_; }
    const ProcStat& stat() const { return stat_; }  // as read when opened

    // pidfd_send_signal. kNotFound (ESRCH) when it already exited.
    Status signal(int signo) const;

    // Waits until the process exits (the pidfd polls readable), at most
    // `timeout`. True when it exited.
    bool wait_exit(std::chrono::milliseconds timeout) const;

    // Has it exited (zombie or reaped)? Does not block.
    bool exited() const { return wait_exit(std::chrono::milliseconds(0)); }

  private:
    ProcessHandle(uint32_t pid, int fd, ProcStat stat) : pid_(pid), fd_(fd), stat_(stat) {}
    uint32_t pid_ = 0;
    int fd_ = -1;
    ProcStat stat_;
};

// Pids in a cgroup v2 directory's cgroup.procs. kNotFound when it is gone.
Result<std::vector<uint32_t>> read_cgroup_procs(const std::string& cgroup_dir);

}  // namespace gpuguard::agent
