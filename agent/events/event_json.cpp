#include "gpuguard/events/event_json.h"

#include <cstring>
#include <string>

#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <time.h>

#include "gpuguard/events/event_declarations.h"

namespace gpuguard::agent {
namespace {

constexpr char kBase64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

}  // namespace

std::string errno_name(int32_t result) {
    // In 64 bits: INT32_MIN, which no kernel returns but a damaged or forged
    // record can hold, negates without overflow.
    const int64_t err = -static_cast<int64_t>(result);
    const char* name = err <= INT32_MAX ? strerrorname_np(static_cast<int>(err)) : nullptr;
    return name ? name : std::to_string(err);
}
namespace {

using json = nlohmann::ordered_json;

// --- the bodies written from their declarations (event_declarations.h) -----

template <schema::Declared T>
void add_declared_fields(json& out, const T& body);

template <typename V>
json declared_value_json(const V& value) {
    if constexpr (schema::ListOf<V>::value) {
        json list = json::array();
        for (const auto& element : value) {
            json item = json::object();
            add_declared_fields(item, element);
            list.push_back(std::move(item));
        }
        return list;
    } else if constexpr (requires { value.has_value(); }) {
        return value ? json(*value) : json(nullptr);
    } else {
        return json(value);
    }
}

template <schema::Declared T>
void add_declared_fields(json& out, const T& body) {
    schema::for_each_field<T>([&](const auto& field) {
        const auto& value = body.*field.member;
        using Value = std::remove_cvref_t<decltype(value)>;
        if constexpr (schema::Declared<Value>) {
            add_declared_fields(out, value);  // flattened into its owner
        } else {
            if (field.forms.out == schema::Out::kWhenSet && !schema::is_set(value)) return;
            out[std::string(field.json_key())] = declared_value_json(value);
        }
    });
}

template <schema::Declared T>
json declared_json(const T& body) {
    static_assert(schema::Declaration<T>::writer == schema::Writer::kDeclared,
                  "a type with its own writer needs its overload in event_to_json's visitor");
    json out = json::object();
    add_declared_fields(out, body);
    return out;
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
        out["device"] = nullptr;
        out["errno"] = -static_cast<int64_t>(open.result);
        out["error"] = errno_name(open.result);
    }
    return out;
}

std::string hex(uint64_t value) {
    char text[24];
    snprintf(text, sizeof(text), "0x%llx", static_cast<unsigned long long>(value));
    return text;
}

std::string hex8(uint32_t value) {
    char text[16];
    snprintf(text, sizeof(text), "0x%08x", value);
    return text;
}

json errno_fields(json out, int32_t result) {
    if (result >= 0) {
        out["error"] = nullptr;
        return out;
    }
    out["errno"] = -static_cast<int64_t>(result);
    out["error"] = errno_name(result);
    return out;
}

json gpu_ioctl_json(const GpuIoctl& ioctl) {
    // _IOC layout (asm-generic/ioctl.h): nr 8 bits, type 8, size 14, dir 2.
    return json{{"device", std::to_string(ioctl.major) + ":" + std::to_string(ioctl.minor)},
                {"major", ioctl.major},
                {"minor", ioctl.minor},
                {"fd", ioctl.fd},
                {"cmd", hex8(ioctl.cmd)},
                {"ioc_type", hex((ioctl.cmd >> 8) & 0xff)},
                {"ioc_nr", hex(ioctl.cmd & 0xff)},
                {"ioc_size", (ioctl.cmd >> 16) & 0x3fff},
                {"arg", hex(ioctl.arg)}};
}

json connect_json(const Connect& connect) {
    json reasons = json::array();
    if (connect.gpu_holder) reasons.push_back("gpu_holder");
    if (connect.watched_port) reasons.push_back("watched_port");
    if (connect.all) reasons.push_back("connect_all");
    if (connect.watched_tgid) reasons.push_back("watched_process");
    if (connect.watched_addr) reasons.push_back("watched_address");
    if (connect.established) reasons.push_back("established");
    json out{
        {"fd", connect.fd},     {"ip_version", connect.ip_version}, {"address", connect.address},
        {"port", connect.port}, {"v4_mapped", connect.v4_mapped},   {"loopback", connect.loopback},
        {"reasons", reasons},   {"result", connect.result}};
    if (!connect.domain.empty()) out["domain"] = connect.domain;
    return errno_fields(std::move(out), connect.result);
}

json exit_json(const Exit& exit) {
    json out{{"status", exit.status}, {"held_gpu", exit.held_gpu}};
    if (exit.signal() != 0) {
        out["exit_code"] = nullptr;
        out["signal"] = exit.signal();
        const char* name = sigabbrev_np(exit.signal());
        out["signal_name"] = name ? std::string("SIG") + name : std::to_string(exit.signal());
    } else {
        out["exit_code"] = exit.exit_code();
        out["signal"] = nullptr;
    }
    return out;
}

json snapshot_json(const ProcessSnapshot& snapshot) {
    json gpus = json::array();
    for (const auto& gpu : snapshot.gpus) {
        gpus.push_back(json{{"device", std::to_string(gpu.major) + ":" + std::to_string(gpu.minor)},
                            {"major", gpu.major},
                            {"minor", gpu.minor},
                            {"fd", gpu.fd}});
    }
    json out{{"exe", snapshot.exe},
             {"argv", snapshot.argv},
             {"user", snapshot.user},
             {"cgroup_path", snapshot.cgroup_path},
             {"container_id", snapshot.container_id},
             {"container_runtime", snapshot.container_runtime},
             {"gpus", gpus}};
    if (!snapshot.exe_package.empty()) out["exe_package"] = snapshot.exe_package;
    return out;
}

json net_payload_json(const NetPayload& payload) {
    return json{{"fd", payload.fd},
                {"direction", payload.direction == NetPayload::Direction::kIn ? "in" : "out"},
                {"syscall", payload.syscall},
                {"length", payload.length},
                {"seq", payload.seq},
                {"flow", payload.flow},
                {"transport", payload.stream ? "tcp" : "udp"},
                {"dns", payload.dns},
                {"followed", payload.followed},
                {"truncated", payload.truncated},
                {"local_address", payload.local_address},
                {"local_port", payload.local_port},
                {"remote_address", payload.remote_address},
                {"remote_port", payload.remote_port},
                {"data", base64_encode(payload.data)}};
}

// Adds an event's body to its JSON object, under its type's name.
struct BodyJsonVisitor {
    json& out;
    void operator()(const GpuOpen& open) const { out["gpu_open"] = gpu_open_json(open); }
    void operator()(const GpuIoctl& ioctl) const { out["gpu_ioctl"] = gpu_ioctl_json(ioctl); }
    void operator()(const Connect& connect) const { out["connect"] = connect_json(connect); }
    void operator()(const Exit& exit) const { out["exit"] = exit_json(exit); }
    void operator()(const ProcessSnapshot& snapshot) const {
        out["process_snapshot"] = snapshot_json(snapshot);
    }
    void operator()(const KillNow& kill) const {
        json body{{"trigger", kill.trigger}, {"match", kill.match},
                  {"dev", kill.dev},         {"ino", kill.ino},
                  {"rule_id", kill.rule_id}, {"signal_result", kill.signal_result}};
        if (kill.major || kill.minor) {
            body["device"] = std::to_string(kill.major) + ":" + std::to_string(kill.minor);
        }
        out["kill_now"] = std::move(body);
    }
    void operator()(const NetPayload& payload) const {
        out["net_payload"] = net_payload_json(payload);
    }
    void operator()(const ModuleLoad& module) const {
        out["module_load"] = json{{"name", module.name},
                                  {"taints", module_taint_letters(module.taints)},
                                  {"taint_bits", module.taints}};
    }
    // The rest: written from their declarations alone.
    template <schema::DeclaredEvent T>
    void operator()(const T& body) const {
        out[std::string(schema::Declaration<T>::name)] = declared_json(body);
    }
};

}  // namespace

json container_to_json(const Container& container) { return declared_json(container); }

json stratum_to_json(const Stratum& stratum) { return declared_json(stratum); }

std::string base64_encode(std::string_view bytes) {
    std::string out;
    out.reserve((bytes.size() + 2) / 3 * 4);
    size_t i = 0;
    for (; i + 2 < bytes.size(); i += 3) {
        const uint32_t v = static_cast<uint8_t>(bytes[i]) << 16 |
                           static_cast<uint8_t>(bytes[i + 1]) << 8 |
                           static_cast<uint8_t>(bytes[i + 2]);
        out += kBase64[v >> 18];
        out += kBase64[(v >> 12) & 63];
        out += kBase64[(v >> 6) & 63];
        out += kBase64[v & 63];
    }
    if (i < bytes.size()) {
        uint32_t v = static_cast<uint8_t>(bytes[i]) << 16;
        if (i + 1 < bytes.size()) v |= static_cast<uint8_t>(bytes[i + 1]) << 8;
        out += kBase64[v >> 18];
        out += kBase64[(v >> 12) & 63];
        out += i + 1 < bytes.size() ? kBase64[(v >> 6) & 63] : '=';
        out += '=';
    }
    return out;
}

Result<std::string> base64_decode(std::string_view text) {
    if (text.size() % 4 != 0) return fail(ErrorCode::kParse, "not base64 (length)");
    std::string out;
    out.reserve(text.size() / 4 * 3);
    for (size_t i = 0; i < text.size(); i += 4) {
        uint32_t v = 0;
        int padding = 0;
        for (size_t j = 0; j < 4; ++j) {
            const char c = text[i + j];
            int digit = -1;
            if (c == '=' && i + 4 == text.size() && j >= 2) {
                ++padding;
                digit = 0;
            } else if (padding == 0) {
                const char* at = std::strchr(kBase64, c);
                if (c != '\0' && at) digit = static_cast<int>(at - kBase64);
            }
            if (digit < 0) return fail(ErrorCode::kParse, "not base64");
            v = v << 6 | static_cast<uint32_t>(digit);
        }
        out += static_cast<char>(v >> 16);
        if (padding < 2) out += static_cast<char>((v >> 8) & 0xff);
        if (padding < 1) out += static_cast<char>(v & 0xff);
    }
    return out;
}

std::string format_rfc3339(int64_t unix_ns) {
    int64_t seconds = unix_ns / 1'000'000'000;
    int64_t nanos = unix_ns % 1'000'000'000;
    if (nanos < 0) {
        nanos += 1'000'000'000;
        seconds -= 1;
    }
    const time_t as_time = static_cast<time_t>(seconds);
    struct tm utc {};
    gmtime_r(&as_time, &utc);
    char date[32];
    strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &utc);
    char full[48];
    snprintf(full, sizeof(full), "%s.%09ldZ", date, static_cast<long>(nanos));
    return full;
}

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
             {"time", format_rfc3339(static_cast<int64_t>(event.ts_ns) + realtime_offset_ns)},
             {"process", task_json(event.task)}};
    std::visit(BodyJsonVisitor{out}, event.data);
    // Replace invalid UTF-8 (paths and comm are bytes) instead of throwing.
    return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace gpuguard::agent
