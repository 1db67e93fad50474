// Ring-buffer record -> Event. The only place that reads bpf/events.h structs.
#include <cstring>

#include "agent/event.h"
#include "events.h"

namespace gpuguard::agent {
namespace {

std::string bounded_string(const char* chars, size_t capacity) {
    return std::string(chars, strnlen(chars, capacity));
}

TaskInfo decode_task(const gg_task_info& raw) {
    TaskInfo task;
    task.pid = raw.tgid;
    task.tid = raw.pid;
    task.ppid = raw.ppid;
    task.uid = raw.uid;
    task.gid = raw.gid;
    task.cgroup_id = raw.cgroup_id;
    task.comm = bounded_string(raw.comm, sizeof(raw.comm));
    return task;
}

Result<Event> decode_gpu_open(std::span<const std::byte> record) {
    gg_gpu_open_event raw;
    if (record.size() < sizeof(raw)) {
        return fail(ErrorCode::kParse,
                    "gpu_open record too short: " + std::to_string(record.size()) +
                        " bytes, expected " + std::to_string(sizeof(raw)));
    }
    std::memcpy(&raw, record.data(), sizeof(raw));
    Event event;
    event.ts_ns = raw.hdr.ts_ns;
    event.task = decode_task(raw.task);
    GpuOpen open;
    open.major = raw.major;
    open.minor = raw.minor;
    open.result = raw.ret;
    open.dirfd = raw.dirfd;
    open.open_flags = raw.open_flags;
    switch (raw.syscall) {
        case GG_SYS_OPENAT:
            open.syscall = OpenSyscall::kOpenat;
            break;
        case GG_SYS_OPENAT2:
            open.syscall = OpenSyscall::kOpenat2;
            break;
        case GG_SYS_OPEN:
            open.syscall = OpenSyscall::kOpen;
            break;
        case GG_SYS_CREAT:
            open.syscall = OpenSyscall::kCreat;
            break;
        default:
            return fail(ErrorCode::kParse,
                        "gpu_open record with unknown syscall " + std::to_string(raw.syscall));
    }
    open.path_truncated = (raw.flags & GG_OPEN_PATH_TRUNCATED) != 0;
    open.path = bounded_string(raw.path, std::min<size_t>(raw.path_len, sizeof(raw.path)));
    event.data = std::move(open);
    return event;
}

}  // namespace

const char* to_string(OpenSyscall syscall) {
    switch (syscall) {
        case OpenSyscall::kOpenat:
            return "openat";
        case OpenSyscall::kOpenat2:
            return "openat2";
        case OpenSyscall::kOpen:
            return "open";
        case OpenSyscall::kCreat:
            return "creat";
    }
    return "unknown";
}

const char* event_type_name(const Event& event) {
    struct Visitor {
        const char* operator()(const GpuOpen&) const { return "gpu_open"; }
    };
    return std::visit(Visitor{}, event.data);
}

Result<Event> decode_record(std::span<const std::byte> record) {
    gg_event_header header;
    if (record.size() < sizeof(header)) {
        return fail(ErrorCode::kParse,
                    "record too short for a header: " + std::to_string(record.size()) + " bytes");
    }
    std::memcpy(&header, record.data(), sizeof(header));
    if (header.abi_major != GG_ABI_MAJOR) {
        return fail(ErrorCode::kParse, "record ABI major " + std::to_string(header.abi_major) +
                                           " != " + std::to_string(GG_ABI_MAJOR));
    }
    if (header.size > record.size()) {
        return fail(ErrorCode::kParse, "record claims " + std::to_string(header.size) +
                                           " bytes but holds " + std::to_string(record.size()));
    }
    const auto body = record.first(header.size);
    switch (header.type) {
        case GG_EVENT_GPU_OPEN:
            return decode_gpu_open(body);
        default:
            return fail(ErrorCode::kParse, "unknown record type " + std::to_string(header.type));
    }
}

}  // namespace gpuguard::agent
