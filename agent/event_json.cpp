#include "agent/event_json.h"

#include <cstring>

#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <time.h>

namespace gpuguard::agent {
namespace {

using json = nlohmann::ordered_json;

std::string rfc3339_utc(int64_t realtime_ns) {
    const time_t seconds = static_cast<time_t>(realtime_ns / 1'000'000'000);
    const long nanos = static_cast<long>(realtime_ns % 1'000'000'000);
    struct tm utc {};
    gmtime_r(&seconds, &utc);
    char date[32];
    strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &utc);
    char full[48];
    snprintf(full, sizeof(full), "%s.%09ldZ", date, nanos);
    return full;
}

json task_json(const TaskInfo& task) {
    return json{
        {"pid", task.pid}, {"tid", task.tid},   {"ppid", task.ppid},          {"uid", task.uid},
        {"gid", task.gid}, {"comm", task.comm}, {"cgroup_id", task.cgroup_id}};
}

json gpu_open_json(const GpuOpen& open) {
    json out{{"syscall", to_string(open.syscall)},
             {"path", open.path},
             {"path_truncated", open.path_truncated},
             {"dirfd", open.dirfd},
             {"flags", open_flags_to_string(open.open_flags)},
             {"open_flags", open.open_flags}};
    if (open.succeeded()) {
        out["device"] = std::to_string(open.major) + ":" + std::to_string(open.minor);
        out["major"] = open.major;
        out["minor"] = open.minor;
        out["fd"] = open.result;
        out["error"] = nullptr;
    } else {
        const int err = -open.result;
        const char* name = strerrorname_np(err);
        out["device"] = nullptr;
        out["errno"] = err;
        out["error"] = name ? name : std::to_string(err);
    }
    return out;
}

}  // namespace

int64_t monotonic_to_realtime_offset_ns() {
    timespec mono{}, real{};
    clock_gettime(CLOCK_MONOTONIC, &mono);
    clock_gettime(CLOCK_REALTIME, &real);
    return (static_cast<int64_t>(real.tv_sec) - mono.tv_sec) * 1'000'000'000 +
           (real.tv_nsec - mono.tv_nsec);
}

std::string open_flags_to_string(uint64_t flags) {
    std::string out;
    switch (flags & O_ACCMODE) {
        case O_RDONLY:
            out = "O_RDONLY";
            break;
        case O_WRONLY:
            out = "O_WRONLY";
            break;
        case O_RDWR:
            out = "O_RDWR";
            break;
        default:
            out = "O_ACCMODE";
    }
    uint64_t rest = flags & ~static_cast<uint64_t>(O_ACCMODE);
    static constexpr struct {
        uint64_t bit;
        const char* name;
    } kNames[] = {
        // Multi-bit flags first: O_SYNC includes O_DSYNC, O_TMPFILE includes O_DIRECTORY.
        {O_SYNC, "O_SYNC"},       {O_TMPFILE, "O_TMPFILE"},     {O_CREAT, "O_CREAT"},
        {O_EXCL, "O_EXCL"},       {O_NOCTTY, "O_NOCTTY"},       {O_TRUNC, "O_TRUNC"},
        {O_APPEND, "O_APPEND"},   {O_NONBLOCK, "O_NONBLOCK"},   {O_DSYNC, "O_DSYNC"},
        {O_DIRECT, "O_DIRECT"},   {O_DIRECTORY, "O_DIRECTORY"}, {O_NOFOLLOW, "O_NOFOLLOW"},
        {O_NOATIME, "O_NOATIME"}, {O_CLOEXEC, "O_CLOEXEC"},     {O_PATH, "O_PATH"}};
    for (const auto& [bit, name] : kNames) {
        if ((rest & bit) == bit) {
            out += '|';
            out += name;
            rest &= ~bit;
        }
    }
    if (rest != 0) {
        char hex[24];
        snprintf(hex, sizeof(hex), "|0x%llx", static_cast<unsigned long long>(rest));
        out += hex;
    }
    return out;
}

std::string event_to_json(const Event& event, int64_t realtime_offset_ns) {
    json out{{"v", 1},
             {"type", event_type_name(event)},
             {"ts_ns", event.ts_ns},
             {"time", rfc3339_utc(static_cast<int64_t>(event.ts_ns) + realtime_offset_ns)},
             {"process", task_json(event.task)}};
    struct Visitor {
        json& out;
        void operator()(const GpuOpen& open) const { out["gpu_open"] = gpu_open_json(open); }
    };
    std::visit(Visitor{out}, event.data);
    // Replace invalid UTF-8 (paths and comm are bytes) instead of throwing.
    return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace gpuguard::agent
