// Ring-buffer record -> Event, for every record type the sensor delivers:
// the one reader of the event structs of bpf/events.h and bpf/payload.h.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <system_error>
#include <utility>

#include <arpa/inet.h>
#include <linux/bpf.h>

#include "events.h"
#include "gpuguard/events/event.h"
#include "gpuguard/events/event_declarations.h"
#include "payload.h"

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

// Copies a fixed-size record out of the ring buffer (which gives no alignment
// guarantee for our structs) after checking its length.
template <typename Raw>
Status copy_record(std::span<const std::byte> record, const char* name, Raw& raw) {
    if (record.size() < sizeof(raw)) {
        return fail(ErrorCode::kParse, std::string(name) +
                                           " record too short: " + std::to_string(record.size()) +
                                           " bytes, expected " + std::to_string(sizeof(raw)));
    }
    std::memcpy(&raw, record.data(), sizeof(raw));
    return {};
}

template <typename Raw>
Event event_base(const Raw& raw) {
    Event event;
    event.ts_ns = raw.hdr.ts_ns;
    event.task = decode_task(raw.task);
    return event;
}

Result<Event> decode_gpu_ioctl(std::span<const std::byte> record) {
    gg_gpu_ioctl_event raw;
    if (auto copied = copy_record(record, "gpu_ioctl", raw); !copied)
        return Unexpected{copied.error()};
    Event event = event_base(raw);
    event.data = GpuIoctl{raw.major, raw.minor, raw.fd, raw.cmd, raw.arg};
    return event;
}

Result<Event> decode_connect(std::span<const std::byte> record) {
    gg_connect_event raw;
    if (auto copied = copy_record(record, "connect", raw); !copied)
        return Unexpected{copied.error()};
    Event event = event_base(raw);
    Connect connect;
    connect.fd = raw.fd;
    connect.result = raw.ret;
    connect.port = raw.port;
    connect.gpu_holder = raw.flags & GG_CONNECT_GPU_HOLDER;
    connect.watched_port = raw.flags & GG_CONNECT_WATCHED_PORT;
    connect.all = raw.flags & GG_CONNECT_ALL;
    connect.watched_tgid = raw.flags & GG_CONNECT_WATCHED_TGID;
    connect.watched_addr = raw.flags & GG_CONNECT_WATCHED_ADDR;
    connect.v4_mapped = raw.flags & GG_CONNECT_V4_MAPPED;
    connect.loopback = raw.flags & GG_CONNECT_LOOPBACK;
    char text[INET6_ADDRSTRLEN] = {};
    if (raw.family == AF_INET) {
        inet_ntop(AF_INET, raw.addr, text, sizeof(text));
        connect.ip_version = 4;
    } else if (raw.family == AF_INET6 && connect.v4_mapped) {
        inet_ntop(AF_INET, raw.addr + 12, text, sizeof(text));
        connect.ip_version = 4;
    } else if (raw.family == AF_INET6) {
        inet_ntop(AF_INET6, raw.addr, text, sizeof(text));
        connect.ip_version = 6;
    } else {
        return fail(ErrorCode::kParse, "connect record with family " + std::to_string(raw.family));
    }
    connect.address = text;
    event.data = std::move(connect);
    return event;
}

Result<Event> decode_exec(std::span<const std::byte> record) {
    // Variable length: the fixed part, then argv_len bytes of argv.
    if (record.size() < GG_EXEC_FIXED_SIZE) {
        return fail(ErrorCode::kParse, "exec record too short: " + std::to_string(record.size()) +
                                           " bytes, expected at least " +
                                           std::to_string(GG_EXEC_FIXED_SIZE));
    }
    gg_exec_event raw;
    std::memcpy(&raw, record.data(), std::min(record.size(), sizeof(raw)));
    if (raw.argv_len > GG_ARGV_MAX || GG_EXEC_FIXED_SIZE + raw.argv_len > record.size()) {
        return fail(ErrorCode::kParse,
                    "exec record argv_len " + std::to_string(raw.argv_len) + " exceeds the record");
    }
    Event event = event_base(raw);
    Exec exec;
    exec.filename = bounded_string(raw.filename, std::min<size_t>(raw.filename_len, GG_PATH_LEN));
    exec.argv = split_nul_separated(std::string_view(raw.argv, raw.argv_len));
    exec.argv_truncated = raw.flags & GG_EXEC_ARGV_TRUNCATED;
    exec.filename_truncated = raw.flags & GG_EXEC_FILENAME_TRUNCATED;
    exec.old_tid = raw.old_pid;
    event.data = std::move(exec);
    return event;
}

Result<Event> decode_fork(std::span<const std::byte> record) {
    // ABI 1.6 records end before child_start_ns: they decode with it 0.
    constexpr size_t kBeforeStart = offsetof(gg_fork_event, child_start_ns);
    gg_fork_event raw{};
    if (record.size() < kBeforeStart) {
        return fail(ErrorCode::kParse, "fork record too short: " + std::to_string(record.size()) +
                                           " bytes, expected " + std::to_string(sizeof(raw)));
    }
    std::memcpy(&raw, record.data(), std::min(record.size(), sizeof(raw)));
    Event event = event_base(raw);
    event.data = Fork{raw.child_pid, (raw.flags & GG_PROC_INHERITED) != 0, raw.child_start_ns};
    return event;
}

Result<Event> decode_exit(std::span<const std::byte> record) {
    gg_exit_event raw;
    if (auto copied = copy_record(record, "exit", raw); !copied) return Unexpected{copied.error()};
    Event event = event_base(raw);
    event.data = Exit{raw.exit_status, (raw.flags & GG_PROC_HELD_GPU) != 0};
    return event;
}

Result<Event> decode_gpu_open(std::span<const std::byte> record) {
    gg_gpu_open_event raw;
    if (auto copied = copy_record(record, "gpu_open", raw); !copied)
        return Unexpected{copied.error()};
    Event event = event_base(raw);
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

Result<Event> decode_file_change(std::span<const std::byte> record) {
    gg_file_change_event raw;
    if (auto copied = copy_record(record, "file_change", raw); !copied)
        return Unexpected{copied.error()};
    const char* operation = file_change_operation(raw.syscall);
    if (!operation) {
        return fail(ErrorCode::kParse,
                    "file_change record with unknown syscall " + std::to_string(raw.syscall));
    }
    const char* kind = file_change_kind(raw.category);
    if (!kind) {
        return fail(ErrorCode::kParse,
                    "file_change record with unknown category " + std::to_string(raw.category));
    }
    Event event = event_base(raw);
    FileChange change;
    change.operation = operation;
    change.syscall = file_change_syscall(raw.syscall);
    change.kind = kind;
    change.result = raw.ret;
    change.dirfd = raw.dirfd;
    change.flags = raw.open_flags;
    change.path_truncated = (raw.flags & GG_FILE_PATH_TRUNCATED) != 0;
    change.watched_process = (raw.flags & GG_FILE_WATCHED_TGID) != 0;
    change.path = bounded_string(raw.path, std::min<size_t>(raw.path_len, sizeof(raw.path)));
    event.data = std::move(change);
    return event;
}

Result<Event> decode_kill_now(std::span<const std::byte> record) {
    gg_kill_now_event raw;
    if (auto copied = copy_record(record, "kill_now", raw); !copied) {
        return Unexpected{copied.error()};
    }
    Event event = event_base(raw);
    KillNow kill;
    switch (raw.trigger) {
        case GG_KILL_AT_EXEC:
            kill.trigger = "exec";
            break;
        case GG_KILL_AT_GPU_OPEN:
            kill.trigger = "gpu_open";
            break;
        case GG_KILL_AT_GPU_IOCTL:
            kill.trigger = "gpu_ioctl";
            break;
        default:
            return fail(ErrorCode::kParse,
                        "kill_now record with unknown trigger " + std::to_string(raw.trigger));
    }
    kill.match = raw.match == GG_KILL_MATCH_NAME ? "name" : "file";
    kill.dev = raw.dev;
    kill.ino = raw.ino;
    kill.rule_id = raw.rule_id;
    kill.signal_result = raw.signal_ret;
    kill.major = raw.major;
    kill.minor = raw.minor;
    event.data = std::move(kill);
    return event;
}

constexpr const char* kPayloadSyscalls[] = {"write", "sendto",   "sendmsg",
                                            "read",  "recvfrom", "recvmsg"};

}  // namespace

std::string kernel_address_text(uint16_t family, const uint8_t* addr) {
    char text[INET6_ADDRSTRLEN] = {};
    // A v4-mapped IPv6 address is shown as the IPv4 one, as for connects.
    static constexpr uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (family == AF_INET) {
        inet_ntop(AF_INET, addr, text, sizeof(text));
    } else if (std::memcmp(addr, kMapped, sizeof(kMapped)) == 0) {
        inet_ntop(AF_INET, addr + 12, text, sizeof(text));
    } else {
        inet_ntop(AF_INET6, addr, text, sizeof(text));
    }
    return text;
}

namespace {

Result<Event> decode_net_payload(std::span<const std::byte> record) {
    if (record.size() < GG_PAYLOAD_FIXED_SIZE) {
        return fail(ErrorCode::kParse,
                    "net_payload record too short: " + std::to_string(record.size()) +
                        " bytes, expected " + std::to_string(GG_PAYLOAD_FIXED_SIZE));
    }
    gg_payload_event raw;
    std::memcpy(&raw, record.data(), std::min(record.size(), sizeof(raw)));
    if (raw.captured > GG_PAYLOAD_MAX || GG_PAYLOAD_FIXED_SIZE + raw.captured > record.size()) {
        return fail(ErrorCode::kParse, "net_payload record captured " +
                                           std::to_string(raw.captured) + " exceeds the record");
    }
    if (raw.family != AF_INET && raw.family != AF_INET6) {
        return fail(ErrorCode::kParse,
                    "net_payload record with family " + std::to_string(raw.family));
    }
    if (raw.direction > GG_PAYLOAD_IN || raw.syscall > GG_PSYS_RECVMSG) {
        return fail(ErrorCode::kParse, "net_payload record with unknown direction or syscall");
    }
    Event event = event_base(raw);
    NetPayload payload;
    payload.fd = raw.fd;
    payload.direction =
        raw.direction == GG_PAYLOAD_IN ? NetPayload::Direction::kIn : NetPayload::Direction::kOut;
    payload.syscall = kPayloadSyscalls[raw.syscall];
    payload.length = raw.len;
    payload.seq = raw.seq;
    payload.flow = raw.flow;
    payload.stream = (raw.flags & GG_PAYLOAD_DGRAM) == 0;
    payload.truncated = (raw.flags & GG_PAYLOAD_TRUNCATED) != 0;
    payload.dns = (raw.flags & GG_PAYLOAD_DNS) != 0;
    payload.followed = (raw.flags & GG_PAYLOAD_FOLLOWED) != 0;
    payload.local_address = kernel_address_text(raw.family, raw.local_addr);
    payload.local_port = raw.local_port;
    payload.remote_address = kernel_address_text(raw.family, raw.remote_addr);
    payload.remote_port = raw.remote_port;
    payload.data.assign(raw.data, raw.captured);
    event.data = std::move(payload);
    return event;
}

Result<Event> decode_module_load(std::span<const std::byte> record) {
    gg_module_load_event raw;
    if (auto copied = copy_record(record, "module_load", raw); !copied)
        return Unexpected{copied.error()};
    std::string name = bounded_string(raw.name, sizeof(raw.name));
    // The tracepoint always names the module; a record without one is damage.
    if (name.empty()) return fail(ErrorCode::kParse, "module_load record without a module name");
    Event event = event_base(raw);
    event.data = ModuleLoad{std::move(name), raw.taints};
    return event;
}

// task is the sender; the agent it signalled is the record's target.
Result<Event> decode_agent_signal(std::span<const std::byte> record) {
    gg_agent_signal_event raw;
    if (auto copied = copy_record(record, "agent_signal", raw); !copied)
        return Unexpected{copied.error()};
    Event event = event_base(raw);
    AgentTamper tamper;
    tamper.kind = "signal";
    tamper.signal = raw.sig;
    tamper.result = raw.result;
    tamper.agent_pid = raw.target_tgid;
    event.data = std::move(tamper);
    return event;
}

// task is the caller; the detail names the agent's object the fd held.
Result<Event> decode_bpf_command(std::span<const std::byte> record) {
    gg_bpf_command_event raw;
    if (auto copied = copy_record(record, "bpf_command", raw); !copied)
        return Unexpected{copied.error()};
    Event event = event_base(raw);
    AgentTamper tamper;
    tamper.kind = "bpf_command";
    tamper.command = raw.cmd;
    tamper.agent_pid = raw.agent_tgid;
    tamper.detail =
        raw.cmd == BPF_PROG_DETACH
            ? "program id " + std::to_string(raw.object_id) + " (fd " + std::to_string(raw.fd) +
                  "), attach type " + std::to_string(raw.attach_type)
            : "link id " + std::to_string(raw.object_id) + " (fd " + std::to_string(raw.fd) + ")";
    if (raw.ret < 0) {
        // In 64 bits: INT32_MIN (a damaged or forged record) negates without overflow.
        const int64_t error = -static_cast<int64_t>(raw.ret);
        tamper.detail +=
            ", failed: " + (error <= INT32_MAX
                                ? std::generic_category().message(static_cast<int>(error))
                                : "error " + std::to_string(error));
    }
    event.data = std::move(tamper);
    return event;
}

// kernel/panic.c's taint_flags, by bit.
constexpr char kTaintLetters[] = "PFSRMBUDAWCIOELKXTNJ";

// Every record type the BPF programs emit (bpf/events.h), its name in the
// sensor's per-type counters and its decoder: the one list both use.
struct RecordType {
    uint32_t type;
    const char* name;
    Result<Event> (*decode)(std::span<const std::byte> record);
};
constexpr RecordType kRecordTypes[] = {
    {GG_EVENT_GPU_OPEN, "gpu_open", decode_gpu_open},
    {GG_EVENT_GPU_IOCTL, "gpu_ioctl", decode_gpu_ioctl},
    {GG_EVENT_CONNECT, "connect", decode_connect},
    {GG_EVENT_EXEC, "exec", decode_exec},
    {GG_EVENT_FORK, "fork", decode_fork},
    {GG_EVENT_EXIT, "exit", decode_exit},
    {GG_EVENT_KILL_NOW, "kill_now", decode_kill_now},
    {GG_EVENT_NET_PAYLOAD, "net_payload", decode_net_payload},
    {GG_EVENT_FILE_CHANGE, "file_change", decode_file_change},
    {GG_EVENT_MODULE_LOAD, "module_load", decode_module_load},
    {GG_EVENT_AGENT_SIGNAL, "agent_signal", decode_agent_signal},
    {GG_EVENT_BPF_COMMAND, "bpf_command", decode_bpf_command},
};

const RecordType* record_type(uint32_t type) {
    for (const RecordType& known : kRecordTypes) {
        if (known.type == type) return &known;
    }
    return nullptr;
}
}  // namespace

std::string module_taint_letters(uint32_t taints) {
    std::string letters;
    for (uint32_t bit = 0; bit < 32; ++bit) {
        if (!(taints & (1u << bit))) continue;
        letters += bit + 1 < sizeof(kTaintLetters) ? kTaintLetters[bit] : '?';
    }
    return letters;
}

std::optional<uint32_t> module_taint_bits(std::string_view letters) {
    uint32_t bits = 0;
    for (char letter : letters) {
        const char* found = std::strchr(kTaintLetters, letter);
        if (letter == '\0' || !found) return std::nullopt;
        bits |= 1u << (found - kTaintLetters);
    }
    return bits;
}

std::vector<std::string> split_nul_separated(std::string_view bytes) {
    std::vector<std::string> parts;
    size_t start = 0;
    for (size_t i = 0; i < bytes.size(); ++i) {
        if (bytes[i] == '\0') {
            parts.emplace_back(bytes.substr(start, i - start));
            start = i + 1;
        }
    }
    if (start < bytes.size()) parts.emplace_back(bytes.substr(start));
    return parts;
}

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
    // Declared as string literals: each name's data() ends in a NUL.
    return std::visit(
        [](const auto& body) {
            return schema::Declaration<std::remove_cvref_t<decltype(body)>>::name.data();
        },
        event.data);
}

const char* file_change_operation(uint16_t syscall) {
    switch (syscall) {
        case GG_FILE_SYS_OPENAT:
        case GG_FILE_SYS_OPENAT2:
        case GG_FILE_SYS_OPEN:
        case GG_FILE_SYS_CREAT:
            return "write";
        case GG_FILE_SYS_RENAME:
        case GG_FILE_SYS_RENAMEAT:
        case GG_FILE_SYS_RENAMEAT2:
            return "rename";
        case GG_FILE_SYS_UNLINK:
        case GG_FILE_SYS_UNLINKAT:
            return "unlink";
        default:
            return nullptr;
    }
}

const char* file_change_syscall(uint16_t syscall) {
    static constexpr const char* kNames[] = {"openat",   "openat2",   "open",   "creat",   "rename",
                                             "renameat", "renameat2", "unlink", "unlinkat"};
    return syscall < std::size(kNames) ? kNames[syscall] : nullptr;
}

namespace {
// Indexed by enum gg_file_category.
constexpr const char* kFileKinds[] = {"",         "preload",    "cron",  "systemd",     "shell_rc",
                                      "ssh_keys", "agent_pins", "other", "agent_config"};
static_assert(std::size(kFileKinds) == GG_FILE_CAT_AGENT_CONFIG + 1);
}  // namespace

const char* file_change_kind(uint32_t category) {
    return category < std::size(kFileKinds) ? kFileKinds[category] : nullptr;
}

uint32_t file_change_category(std::string_view kind) {
    for (uint32_t i = 1; i < std::size(kFileKinds); ++i) {
        if (kind == kFileKinds[i]) return i;
    }
    return 0;
}

const std::vector<std::string>& event_type_names() {
    static const std::vector<std::string> names = [] {
        std::vector<std::string> out;
        [&out]<size_t... index>(std::index_sequence<index...>) {
            (out.emplace_back(event_type_name(Event{0, {}, EventData(std::in_place_index<index>)})),
             ...);
        }
        (std::make_index_sequence<std::variant_size_v<EventData>>{});
        return out;
    }();
    return names;
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
    if (const RecordType* known = record_type(header.type)) return known->decode(body);
    return fail(ErrorCode::kParse, "unknown record type " + std::to_string(header.type));
}

const char* record_type_name(uint32_t type) {
    const RecordType* known = record_type(type);
    return known ? known->name : nullptr;  // nullptr: a number no program emits
}

}  // namespace gpuguard::agent
