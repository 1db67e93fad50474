// Reading events back from their JSON Lines form (docs/events.md): what
// `gpuguard replay` and `journal import` read. Strict about what defines an
// event, lenient about what can be derived, and every error names the field.
#include <cerrno>
#include <charconv>
#include <cstring>
#include <ctime>
#include <limits>

#include <arpa/inet.h>
#include <fcntl.h>
#include <nlohmann/json.hpp>

#include "agent/event_json.h"
#include "agent/net_event_codec.h"

namespace gpuguard::agent {
namespace {

using json = nlohmann::json;

// Thrown inside this file only, turned into a Result at the boundary.
struct FieldError {
    std::string field;
    std::string message;
};

class Reader {
  public:
    Reader(const json& object, std::string path) : object_(object), path_(std::move(path)) {}

    bool has(const char* key) const {
        auto found = object_.find(key);
        return found != object_.end() && !found->is_null();
    }
    const json* find(const char* key) const {
        auto found = object_.find(key);
        return found == object_.end() || found->is_null() ? nullptr : &*found;
    }
    std::string field(const char* key) const { return path_.empty() ? key : path_ + "." + key; }

    [[noreturn]] void error(const char* key, const std::string& message) const {
        throw FieldError{field(key), message};
    }

    template <typename Int>
    Int integer(const char* key, std::optional<Int> fallback = std::nullopt) const {
        const json* value = find(key);
        if (!value) {
            if (fallback) return *fallback;
            error(key, "missing");
        }
        return to_integer<Int>(*value, key);
    }

    template <typename Int>
    Int to_integer(const json& value, const char* key) const {
        constexpr auto lo = std::numeric_limits<Int>::min();
        constexpr auto hi = std::numeric_limits<Int>::max();
        const std::string range = " " + std::to_string(lo) + ".." + std::to_string(hi);
        if (value.is_number_unsigned()) {
            const auto number = value.get<uint64_t>();
            if (number > static_cast<uint64_t>(hi)) error(key, "expected an integer" + range);
            return static_cast<Int>(number);
        }
        if (value.is_number_integer()) {
            const auto number = value.get<int64_t>();
            if (number < static_cast<int64_t>(lo) ||
                (number > 0 && static_cast<uint64_t>(number) > static_cast<uint64_t>(hi))) {
                error(key, "expected an integer" + range);
            }
            return static_cast<Int>(number);
        }
        if (value.is_string()) {  // "0xc0104629" for ioctl commands and arguments
            const std::string text = value.get<std::string>();
            uint64_t number = 0;
            const bool hex = text.starts_with("0x") || text.starts_with("0X");
            const char* begin = text.data() + (hex ? 2 : 0);
            const char* end = text.data() + text.size();
            auto [ptr, ec] = std::from_chars(begin, end, number, hex ? 16 : 10);
            if (ec != std::errc() || ptr != end || begin == end ||
                number > static_cast<uint64_t>(hi)) {
                error(key, "expected an integer" + range + ", got \"" + text + "\"");
            }
            return static_cast<Int>(number);
        }
        error(key, std::string("expected an integer") + range + ", got " + value.type_name());
    }

    std::string string(const char* key, std::optional<std::string> fallback = std::nullopt) const {
        const json* value = find(key);
        if (!value) {
            if (fallback) return *fallback;
            error(key, "missing");
        }
        if (!value->is_string())
            error(key, std::string("expected a string, got ") + value->type_name());
        return value->get<std::string>();
    }

    bool boolean(const char* key, bool fallback) const {
        const json* value = find(key);
        if (!value) return fallback;
        if (!value->is_boolean())
            error(key, std::string("expected true or false, got ") + value->type_name());
        return value->get<bool>();
    }

    std::optional<double> number(const char* key) const {
        const json* value = find(key);
        if (!value) return std::nullopt;
        if (!value->is_number())
            error(key, std::string("expected a number, got ") + value->type_name());
        return value->get<double>();
    }

    template <typename Int>
    std::optional<Int> optional_integer(const char* key) const {
        const json* value = find(key);
        if (!value) return std::nullopt;
        return to_integer<Int>(*value, key);
    }

    std::vector<std::string> strings(const char* key) const {
        std::vector<std::string> out;
        const json* value = find(key);
        if (!value) return out;
        if (!value->is_array())
            error(key, std::string("expected a list of strings, got ") + value->type_name());
        for (const auto& item : *value) {
            if (!item.is_string()) error(key, "expected a list of strings");
            out.push_back(item.get<std::string>());
        }
        return out;
    }

    Reader object(const char* key, bool required = true) const {
        const json* value = find(key);
        if (!value) {
            if (required) error(key, "missing");
            static const json kEmpty = json::object();
            return Reader(kEmpty, field(key));
        }
        if (!value->is_object())
            error(key, std::string("expected an object, got ") + value->type_name());
        return Reader(*value, field(key));
    }

    const json& raw() const { return object_; }
    const std::string& path() const { return path_; }

  private:
    const json& object_;
    std::string path_;
};

// "195:0" or major/minor fields.
void read_device(const Reader& reader, uint32_t& major, uint32_t& minor) {
    if (reader.has("major") || reader.has("minor")) {
        major = reader.integer<uint32_t>("major");
        minor = reader.integer<uint32_t>("minor");
        return;
    }
    if (!reader.has("device")) reader.error("device", "missing (or give major and minor)");
    const std::string text = reader.string("device");
    const auto colon = text.find(':');
    auto parse = [&](std::string_view part, uint32_t& out) {
        auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), out);
        return ec == std::errc() && ptr == part.data() + part.size() && !part.empty();
    };
    if (colon == std::string::npos || !parse(std::string_view(text).substr(0, colon), major) ||
        !parse(std::string_view(text).substr(colon + 1), minor)) {
        reader.error("device", "expected \"major:minor\", got \"" + text + "\"");
    }
}

// "error" and "errno" give a failed call's result when "result"/"fd" is absent.
int32_t read_result(const Reader& reader, const char* key) {
    if (reader.has(key)) return reader.integer<int32_t>(key);
    if (reader.has("errno")) return -reader.integer<int32_t>("errno");
    return 0;
}

GpuOpen read_gpu_open(const Reader& reader) {
    GpuOpen open;
    static constexpr std::pair<const char*, OpenSyscall> kSyscalls[] = {
        {"openat", OpenSyscall::kOpenat},
        {"openat2", OpenSyscall::kOpenat2},
        {"open", OpenSyscall::kOpen},
        {"creat", OpenSyscall::kCreat}};
    const std::string syscall = reader.string("syscall", "openat");
    bool known = false;
    for (const auto& [name, value] : kSyscalls) {
        if (syscall == name) {
            open.syscall = value;
            known = true;
        }
    }
    if (!known)
        reader.error("syscall", "expected openat, openat2, open or creat, got \"" + syscall + "\"");
    open.path = reader.string("path", "");
    open.path_truncated = reader.boolean("path_truncated", false);
    open.dirfd = reader.integer<int32_t>("dirfd", AT_FDCWD);
    open.open_flags = reader.integer<uint64_t>("open_flags", O_RDWR);
    open.result = read_result(reader, "fd");
    if (open.result >= 0) read_device(reader, open.major, open.minor);
    return open;
}

GpuIoctl read_gpu_ioctl(const Reader& reader) {
    GpuIoctl ioctl;
    read_device(reader, ioctl.major, ioctl.minor);
    ioctl.fd = reader.integer<int32_t>("fd", -1);
    ioctl.cmd = reader.integer<uint32_t>("cmd");
    ioctl.arg = reader.integer<uint64_t>("arg", 0);
    return ioctl;
}

bool is_loopback(const std::string& address, int ip_version) {
    if (ip_version == 4) {
        in_addr addr{};
        return inet_pton(AF_INET, address.c_str(), &addr) == 1 && (ntohl(addr.s_addr) >> 24) == 127;
    }
    return address == "::1";
}

Connect read_connect(const Reader& reader) {
    Connect connect;
    connect.fd = reader.integer<int32_t>("fd", -1);
    connect.address = reader.string("address");
    in6_addr v6{};
    in_addr v4{};
    if (inet_pton(AF_INET, connect.address.c_str(), &v4) == 1) {
        connect.ip_version = 4;
    } else if (inet_pton(AF_INET6, connect.address.c_str(), &v6) == 1) {
        connect.ip_version = 6;
    } else {
        reader.error("address",
                     "expected an IPv4 or IPv6 address, got \"" + connect.address + "\"");
    }
    if (reader.has("ip_version") && reader.integer<int>("ip_version") != connect.ip_version) {
        reader.error("ip_version", "does not match the address");
    }
    connect.port = reader.integer<uint16_t>("port");
    connect.result = read_result(reader, "result");
    connect.v4_mapped = reader.boolean("v4_mapped", false);
    connect.loopback = reader.boolean("loopback", is_loopback(connect.address, connect.ip_version));
    connect.domain = reader.string("domain", "");
    for (const auto& reason : reader.strings("reasons")) {
        if (reason == "gpu_holder") {
            connect.gpu_holder = true;
        } else if (reason == "watched_port") {
            connect.watched_port = true;
        } else if (reason == "connect_all") {
            connect.all = true;
        } else {
            reader.error("reasons", "unknown reason \"" + reason +
                                        "\" (gpu_holder, watched_port, connect_all)");
        }
    }
    return connect;
}

Exec read_exec(const Reader& reader) {
    Exec exec;
    exec.filename = reader.string("filename");
    exec.argv = reader.strings("argv");
    exec.argv_truncated = reader.boolean("argv_truncated", false);
    exec.filename_truncated = reader.boolean("filename_truncated", false);
    exec.old_tid = reader.integer<uint32_t>("old_tid", 0);
    return exec;
}

Exit read_exit(const Reader& reader) {
    Exit exit;
    if (reader.has("status")) {
        exit.status = reader.integer<uint32_t>("status");
    } else if (reader.has("signal")) {
        exit.status = reader.integer<uint32_t>("signal") & 0x7f;
    } else {
        exit.status = (reader.integer<uint32_t>("exit_code", 0) & 0xff) << 8;
    }
    exit.held_gpu = reader.boolean("held_gpu", false);
    return exit;
}

Telemetry read_telemetry(const Reader& reader) {
    Telemetry telemetry;
    telemetry.gpu_index = reader.integer<uint32_t>("gpu_index");
    telemetry.vendor = reader.string("vendor", "");
    telemetry.model = reader.string("model", "");
    telemetry.devices = reader.strings("devices");
    telemetry.utilization_percent = reader.number("utilization_percent");
    telemetry.memory_used_bytes = reader.optional_integer<uint64_t>("memory_used_bytes");
    telemetry.memory_total_bytes = reader.optional_integer<uint64_t>("memory_total_bytes");
    if (const json* list = reader.find("processes")) {
        if (!list->is_array()) reader.error("processes", "expected a list");
        for (size_t i = 0; i < list->size(); ++i) {
            if (!(*list)[i].is_object()) reader.error("processes", "expected a list of objects");
            Reader item((*list)[i], reader.field("processes") + "[" + std::to_string(i) + "]");
            ProcessGpuUsage usage;
            usage.pid = item.integer<uint32_t>("pid");
            usage.memory_bytes = item.optional_integer<uint64_t>("memory_bytes");
            usage.compute_percent = item.number("compute_percent");
            telemetry.processes.push_back(usage);
        }
    }
    return telemetry;
}

ProcessSnapshot read_snapshot(const Reader& reader) {
    ProcessSnapshot snapshot;
    snapshot.exe = reader.string("exe", "");
    snapshot.argv = reader.strings("argv");
    snapshot.user = reader.string("user", "");
    snapshot.cgroup_path = reader.string("cgroup_path", "");
    snapshot.container_id = reader.string("container_id", "");
    snapshot.container_runtime = reader.string("container_runtime", "");
    if (const json* list = reader.find("gpus")) {
        if (!list->is_array()) reader.error("gpus", "expected a list");
        for (size_t i = 0; i < list->size(); ++i) {
            if (!(*list)[i].is_object()) reader.error("gpus", "expected a list of objects");
            Reader item((*list)[i], reader.field("gpus") + "[" + std::to_string(i) + "]");
            SnapshotGpu gpu;
            read_device(item, gpu.major, gpu.minor);
            gpu.fd = item.integer<int32_t>("fd", -1);
            snapshot.gpus.push_back(gpu);
        }
    }
    return snapshot;
}

KillNow read_kill_now(const Reader& reader) {
    KillNow kill;
    kill.trigger = reader.string("trigger");
    kill.match = reader.string("match", "file");
    kill.dev = reader.integer<uint64_t>("dev", 0);
    kill.ino = reader.integer<uint64_t>("ino", 0);
    kill.rule_id = reader.integer<uint32_t>("rule_id", 0);
    kill.signal_result = reader.integer<int32_t>("signal_result", 0);
    if (reader.has("device")) read_device(reader, kill.major, kill.minor);
    return kill;
}

ExeScan read_exe_scan(const Reader& reader) {
    ExeScan scan;
    scan.path = reader.string("path", "");
    scan.sha256 = reader.string("sha256", "");
    scan.size = reader.integer<uint64_t>("size", 0);
    scan.rules = reader.strings("rules");
    scan.signature_ids = reader.strings("signature_ids");
    scan.error = reader.string("error", "");
    return scan;
}

int digits(std::string_view text, size_t pos, size_t count) {
    int value = 0;
    for (size_t i = pos; i < pos + count; ++i) {
        if (i >= text.size() || text[i] < '0' || text[i] > '9') return -1;
        value = value * 10 + (text[i] - '0');
    }
    return value;
}

}  // namespace

std::optional<int64_t> parse_rfc3339(std::string_view text) {
    // YYYY-MM-DDTHH:MM:SS[.fraction](Z|+hh:mm|-hh:mm)
    if (text.size() < 20 || text[4] != '-' || text[7] != '-' ||
        (text[10] != 'T' && text[10] != 't' && text[10] != ' ') || text[13] != ':' ||
        text[16] != ':') {
        return std::nullopt;
    }
    struct tm parts {};
    const int year = digits(text, 0, 4), month = digits(text, 5, 2), day = digits(text, 8, 2);
    const int hour = digits(text, 11, 2), minute = digits(text, 14, 2),
              second = digits(text, 17, 2);
    if (year < 0 || month < 1 || month > 12 || day < 1 || day > 31 || hour < 0 || hour > 23 ||
        minute < 0 || minute > 59 || second < 0 || second > 60) {
        return std::nullopt;
    }
    parts.tm_year = year - 1900;
    parts.tm_mon = month - 1;
    parts.tm_mday = day;
    parts.tm_hour = hour;
    parts.tm_min = minute;
    parts.tm_sec = second;
    size_t pos = 19;
    int64_t nanos = 0;
    if (pos < text.size() && text[pos] == '.') {
        ++pos;
        int count = 0;
        while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
            if (count < 9) nanos = nanos * 10 + (text[pos] - '0');
            ++count;
            ++pos;
        }
        if (count == 0) return std::nullopt;
        for (int i = count; i < 9; ++i) nanos *= 10;
    }
    int64_t offset_seconds = 0;
    if (pos < text.size() && (text[pos] == 'Z' || text[pos] == 'z')) {
        ++pos;
    } else if (pos + 6 == text.size() && (text[pos] == '+' || text[pos] == '-') &&
               text[pos + 3] == ':') {
        const int oh = digits(text, pos + 1, 2), om = digits(text, pos + 4, 2);
        if (oh < 0 || om < 0) return std::nullopt;
        offset_seconds = (oh * 3600 + om * 60) * (text[pos] == '-' ? -1 : 1);
        pos += 6;
    } else {
        return std::nullopt;
    }
    if (pos != text.size()) return std::nullopt;
    const time_t seconds = timegm(&parts);
    return (static_cast<int64_t>(seconds) - offset_seconds) * 1'000'000'000 + nanos;
}

Result<ParsedEvent> event_from_json(std::string_view line, std::string_view where) {
    const std::string prefix = std::string(where) + ": ";
    json root = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (root.is_discarded()) return fail(ErrorCode::kParse, prefix + "not valid JSON");
    if (!root.is_object()) return fail(ErrorCode::kParse, prefix + "expected a JSON object");
    try {
        Reader top(root, "");
        ParsedEvent parsed;
        if (top.has("v") && top.integer<int>("v") != 1) {
            top.error("v", "unsupported version " + root["v"].dump() + " (this agent reads 1)");
        }
        const std::string type = top.string("type");
        parsed.event.ts_ns = top.integer<uint64_t>("ts_ns");
        if (top.has("time")) {
            const std::string time = top.string("time");
            parsed.time_unix_ns = parse_rfc3339(time);
            if (!parsed.time_unix_ns) top.error("time", "expected RFC 3339, got \"" + time + "\"");
        }
        const bool agent_made = type == "telemetry";
        const Reader process = top.object("process", !agent_made);
        TaskInfo& task = parsed.event.task;
        task.pid = process.integer<uint32_t>(
            "pid", agent_made ? std::optional<uint32_t>(0) : std::nullopt);
        task.tid = process.integer<uint32_t>("tid", task.pid);
        task.ppid = process.integer<uint32_t>("ppid", 0);
        task.uid = process.integer<uint32_t>("uid", 0);
        task.gid = process.integer<uint32_t>("gid", 0);
        task.comm = process.string("comm", "");
        task.cgroup_id = process.integer<uint64_t>("cgroup_id", 0);

        if (type == "gpu_open") {
            parsed.event.data = read_gpu_open(top.object("gpu_open"));
        } else if (type == "gpu_ioctl") {
            parsed.event.data = read_gpu_ioctl(top.object("gpu_ioctl"));
        } else if (type == "connect") {
            parsed.event.data = read_connect(top.object("connect"));
        } else if (type == "exec") {
            parsed.event.data = read_exec(top.object("exec"));
        } else if (type == "fork") {
            const Reader fork = top.object("fork");
            parsed.event.data =
                Fork{fork.integer<uint32_t>("child_pid"), fork.boolean("inherited_gpu", false)};
        } else if (type == "exit") {
            parsed.event.data = read_exit(top.object("exit", false));
        } else if (type == "telemetry") {
            parsed.event.data = read_telemetry(top.object("telemetry"));
        } else if (type == "process_snapshot") {
            parsed.event.data = read_snapshot(top.object("process_snapshot"));
        } else if (type == "kill_now") {
            parsed.event.data = read_kill_now(top.object("kill_now"));
        } else if (type == "exe_scan") {
            parsed.event.data = read_exe_scan(top.object("exe_scan"));
        } else if (type == "net_payload") {
            auto payload = net_payload_from_json(top.object("net_payload").raw());
            if (!payload) throw FieldError{type, payload.error().message};
            parsed.event.data = std::move(*payload);
        } else if (type == "stratum") {
            auto stratum = stratum_from_json(top.object("stratum").raw());
            if (!stratum) throw FieldError{type, stratum.error().message};
            parsed.event.data = std::move(*stratum);
        } else {
            top.error("type",
                      "unknown event type \"" + type +
                          "\" (gpu_open, gpu_ioctl, connect, exec, fork, exit, "
                          "telemetry, process_snapshot, kill_now, exe_scan, net_payload, stratum)");
        }
        return parsed;
    } catch (const FieldError& error) {
        return fail(ErrorCode::kParse, prefix + error.field + ": " + error.message);
    } catch (const json::exception& error) {
        return fail(ErrorCode::kParse, prefix + error.what());
    }
}

}  // namespace gpuguard::agent
