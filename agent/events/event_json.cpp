#include "gpuguard/events/event_json.h"

#include <cstring>

#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <time.h>

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
    json out{
        {"fd", connect.fd},     {"ip_version", connect.ip_version}, {"address", connect.address},
        {"port", connect.port}, {"v4_mapped", connect.v4_mapped},   {"loopback", connect.loopback},
        {"reasons", reasons},   {"result", connect.result}};
    if (!connect.domain.empty()) out["domain"] = connect.domain;
    return errno_fields(std::move(out), connect.result);
}

json exec_json(const Exec& exec) {
    json out{{"filename", exec.filename},
             {"filename_truncated", exec.filename_truncated},
             {"argv", exec.argv},
             {"argv_truncated", exec.argv_truncated},
             {"old_tid", exec.old_tid}};
    if (!exec.exe.empty()) out["exe"] = exec.exe;
    return out;
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

template <typename T>
json optional_json(const std::optional<T>& value) {
    return value ? json(*value) : json(nullptr);
}

json telemetry_json(const Telemetry& telemetry) {
    json processes = json::array();
    for (const auto& usage : telemetry.processes) {
        processes.push_back(json{{"pid", usage.pid},
                                 {"memory_bytes", optional_json(usage.memory_bytes)},
                                 {"compute_percent", optional_json(usage.compute_percent)}});
    }
    return json{{"gpu_index", telemetry.gpu_index},
                {"vendor", telemetry.vendor},
                {"model", telemetry.model},
                {"devices", telemetry.devices},
                {"utilization_percent", optional_json(telemetry.utilization_percent)},
                {"memory_used_bytes", optional_json(telemetry.memory_used_bytes)},
                {"memory_total_bytes", optional_json(telemetry.memory_total_bytes)},
                {"processes", processes}};
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

}  // namespace

json container_to_json(const Container& container) {
    const ContainerDetails& d = container.details;
    json body{{"id", container.id}, {"runtime", container.runtime}};
    for (const auto& [key, value] : {std::pair{"name", &d.name},
                                     {"image", &d.image},
                                     {"image_id", &d.image_id},
                                     {"pod_name", &d.pod_name},
                                     {"pod_namespace", &d.pod_namespace},
                                     {"pod_uid", &d.pod_uid},
                                     {"kube_container", &d.kube_container}}) {
        if (!value->empty()) body[key] = *value;
    }
    return body;
}

json stratum_to_json(const Stratum& stratum) {
    const auto optional_number = [](const std::optional<double>& value) {
        return value ? json(*value) : json(nullptr);
    };
    return json{{"flow", stratum.flow},
                {"protocol", stratum.protocol},
                {"pool_address", stratum.pool_address},
                {"pool_port", stratum.pool_port},
                {"pool_domain", stratum.pool_domain},
                {"login", stratum.login},
                {"agent", stratum.agent},
                {"methods", stratum.methods},
                {"messages", stratum.messages},
                {"shares_submitted", stratum.shares_submitted},
                {"shares_accepted", stratum.shares_accepted},
                {"shares_rejected", stratum.shares_rejected},
                {"share_hashes", stratum.share_hashes},
                {"difficulty_updates", stratum.difficulty_updates},
                {"hash_rate", optional_number(stratum.hash_rate)},
                {"reported_hash_rate", optional_number(stratum.reported_hash_rate)}};
}

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
    struct Visitor {
        json& out;
        void operator()(const GpuOpen& open) const { out["gpu_open"] = gpu_open_json(open); }
        void operator()(const GpuIoctl& ioctl) const { out["gpu_ioctl"] = gpu_ioctl_json(ioctl); }
        void operator()(const Connect& connect) const { out["connect"] = connect_json(connect); }
        void operator()(const Exec& exec) const { out["exec"] = exec_json(exec); }
        void operator()(const Fork& fork) const {
            out["fork"] =
                json{{"child_pid", fork.child_pid}, {"inherited_gpu", fork.inherited_gpu}};
            if (fork.child_start_ns != 0) out["fork"]["child_start_ns"] = fork.child_start_ns;
        }
        void operator()(const Exit& exit) const { out["exit"] = exit_json(exit); }
        void operator()(const Telemetry& telemetry) const {
            out["telemetry"] = telemetry_json(telemetry);
        }
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
        void operator()(const ExeScan& scan) const {
            json body{{"path", scan.path},
                      {"sha256", scan.sha256},
                      {"size", scan.size},
                      {"rules", scan.rules},
                      {"signature_ids", scan.signature_ids}};
            if (!scan.error.empty()) body["error"] = scan.error;
            if (!scan.library.empty()) body["library"] = scan.library;
            out["exe_scan"] = std::move(body);
        }
        void operator()(const NetPayload& payload) const {
            out["net_payload"] = net_payload_json(payload);
        }
        void operator()(const Stratum& stratum) const { out["stratum"] = stratum_to_json(stratum); }
        void operator()(const ProcessIo& io) const {
            json body = json::object();
            if (io.file_write_bytes) body["file_write_bytes"] = *io.file_write_bytes;
            if (io.net_send_bytes) body["net_send_bytes"] = *io.net_send_bytes;
            if (io.net_sends) body["net_sends"] = *io.net_sends;
            out["process_io"] = std::move(body);
        }
        void operator()(const ConfigFile& file) const {
            json lines = json::array();
            for (const auto& line : file.lines) {
                lines.push_back(json{{"line", line.line}, {"text", line.text}});
            }
            json body{{"path", file.path},
                      {"reason", file.reason},
                      {"size", file.size},
                      {"sha256", file.sha256},
                      {"lines", std::move(lines)}};
            if (file.truncated) body["truncated"] = true;
            out["config_file"] = std::move(body);
        }
        void operator()(const HiddenProcess& hidden) const {
            out["hidden_process"] = json{{"seen_by", hidden.seen_by},
                                         {"libraries", hidden.libraries},
                                         {"mechanisms", hidden.mechanisms}};
        }
        void operator()(const ModuleLoad& module) const {
            out["module_load"] = json{{"name", module.name},
                                      {"taints", module_taint_letters(module.taints)},
                                      {"taint_bits", module.taints}};
        }
        void operator()(const FileChange& change) const {
            json body{{"operation", change.operation}, {"syscall", change.syscall},
                      {"kind", change.kind},           {"path", change.path},
                      {"result", change.result},       {"dirfd", change.dirfd},
                      {"flags", change.flags}};
            if (!change.raw_path.empty()) body["raw_path"] = change.raw_path;
            if (change.path_truncated) body["path_truncated"] = true;
            if (change.watched_process) body["watched_process"] = true;
            if (!change.libraries.empty()) body["libraries"] = change.libraries;
            out["file_change"] = std::move(body);
        }
        void operator()(const ProcessEnv& env) const {
            json body = json::object();
            if (env.ld_preload) body["ld_preload"] = *env.ld_preload;
            if (env.ld_library_path) body["ld_library_path"] = *env.ld_library_path;
            if (!env.error.empty()) body["error"] = env.error;
            if (!env.loader_paths.empty()) {
                json paths = json::array();
                for (const LoaderPath& entry : env.loader_paths) {
                    paths.push_back(json{{"variable", entry.variable},
                                         {"path", entry.path},
                                         {"resolved", entry.resolved},
                                         {"vouched_by", entry.vouched_by},
                                         {"age_s", entry.age_s},
                                         {"others_can_write", entry.others_can_write}});
                }
                body["loader_paths"] = std::move(paths);
            }
            out["process_env"] = std::move(body);
        }
        void operator()(const AgentTamper& tamper) const {
            json body{{"kind", tamper.kind}, {"agent_pid", tamper.agent_pid}};
            if (tamper.signal) body["signal"] = tamper.signal;
            if (tamper.result) body["result"] = tamper.result;
            if (tamper.command) body["command"] = tamper.command;
            if (!tamper.exe.empty()) body["exe"] = tamper.exe;
            if (!tamper.cmdline.empty()) body["cmdline"] = tamper.cmdline;
            if (!tamper.detail.empty()) body["detail"] = tamper.detail;
            if (tamper.down_from_unix_ns) body["down_from_unix_ns"] = tamper.down_from_unix_ns;
            if (tamper.down_to_unix_ns) body["down_to_unix_ns"] = tamper.down_to_unix_ns;
            out["agent_tamper"] = std::move(body);
        }
        void operator()(const Container& container) const {
            out["container"] = container_to_json(container);
        }
    };
    std::visit(Visitor{out}, event.data);
    // Replace invalid UTF-8 (paths and comm are bytes) instead of throwing.
    return out.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace gpuguard::agent
