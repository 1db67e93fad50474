// Event: the one decoded form of everything the kernel reports. The sensor
// builds it from ring-buffer records; the JSON Lines form (docs/events.md) is
// its serialisation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <variant>

#include "gpuguard/common/result.h"

namespace gpuguard::agent {

// Identity of the task that caused an event, as seen in the kernel.
struct TaskInfo {
    uint32_t pid = 0;   // process id (kernel tgid)
    uint32_t tid = 0;   // thread id (kernel pid)
    uint32_t ppid = 0;  // parent's process id
    uint32_t uid = 0;
    uint32_t gid = 0;
    uint64_t cgroup_id = 0;  // cgroup v2 inode id, 0 if none
    std::string comm;
};

enum class OpenSyscall { kOpenat, kOpenat2, kOpen, kCreat };

const char* to_string(OpenSyscall syscall);  // "openat", "openat2", "open", "creat"

// openat(2)/openat2(2)/open(2)/creat(2) of a GPU device node, successful or
// not (a failed one is reported when its path names a GPU node).
struct GpuOpen {
    uint32_t major = 0;  // 0 when the open failed
    uint32_t minor = 0;
    int32_t result = 0;  // fd, or -errno
    int32_t dirfd = 0;   // AT_FDCWD (-100) for cwd-relative and absolute paths
    uint64_t open_flags = 0;
    OpenSyscall syscall = OpenSyscall::kOpenat;
    bool path_truncated = false;
    std::string path;  // as the process passed it (may be relative to dirfd)

    bool succeeded() const { return result >= 0; }
};

using EventData = std::variant<GpuOpen>;

struct Event {
    uint64_t ts_ns = 0;  // CLOCK_MONOTONIC nanoseconds
    TaskInfo task;
    EventData data;
};

// Name of an event's type as used in JSON ("gpu_open").
const char* event_type_name(const Event& event);

// Decodes one ring-buffer record (bpf/events.h). Fails with kParse on a
// short, oversized, unknown-type or wrong-ABI record; never reads past
// `record`.
Result<Event> decode_record(std::span<const std::byte> record);

}  // namespace gpuguard::agent
