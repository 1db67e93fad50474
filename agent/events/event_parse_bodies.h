// The bodies of the JSON Lines event kinds (docs/events.md), one reader per
// kind, over either DOM of json_reader.h: each field's rules (required,
// derived, its range) and the words of its errors. Included by
// event_parse.cpp alone: read_event() inlines read_body(). The net bodies
// (net_payload, stratum) are in event_parse_net_bodies.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>

#include <arpa/inet.h>
#include <fcntl.h>

#include "event_parse_net_bodies.h"
#include "gpuguard/events/event_json.h"
#include "json_reader.h"

namespace gpuguard::agent::json_read {
namespace bodies {  // the per-kind readers read_body() calls

// "195:0" or major/minor fields.
template <typename Node>
void read_device(const Reader<Node>& reader, uint32_t& major, uint32_t& minor) {
    const auto major_value = reader.find("major");
    const auto minor_value = reader.find("minor");
    if (major_value || minor_value) {
        if (!major_value) reader.error("major", "missing");
        major = reader.template to_integer<uint32_t>(*major_value, "major");
        if (!minor_value) reader.error("minor", "missing");
        minor = reader.template to_integer<uint32_t>(*minor_value, "minor");
        return;
    }
    const auto device = reader.optional_text("device");
    if (!device) reader.error("device", "missing (or give major and minor)");
    const std::string_view text = *device;
    const auto colon = text.find(':');
    auto parse = [&](std::string_view part, uint32_t& out) {
        auto [ptr, ec] = std::from_chars(part.data(), part.data() + part.size(), out);
        return ec == std::errc() && ptr == part.data() + part.size() && !part.empty();
    };
    if (colon == std::string_view::npos || !parse(text.substr(0, colon), major) ||
        !parse(text.substr(colon + 1), minor)) {
        reader.error("device", "expected \"major:minor\", got \"" + std::string(text) + "\"");
    }
}

// "error" and "errno" give a failed call's result when "result"/"fd" is absent.
template <typename Node>
int32_t read_result(const Reader<Node>& reader, Key key) {
    if (const auto result = reader.template optional_integer<int32_t>(key)) return *result;
    if (const auto err = reader.template optional_integer<uint32_t>("errno")) {
        // 0..2^31: the negated result of every int32 failure, INT32_MIN included.
        if (*err > 2147483648u) reader.error("errno", "expected an integer 0..2147483648");
        return static_cast<int32_t>(-static_cast<int64_t>(*err));
    }
    return 0;
}

template <typename Node>
GpuOpen read_gpu_open(const Reader<Node>& reader) {
    GpuOpen open;
    static constexpr std::pair<const char*, OpenSyscall> kSyscalls[] = {
        {"openat", OpenSyscall::kOpenat},
        {"openat2", OpenSyscall::kOpenat2},
        {"open", OpenSyscall::kOpen},
        {"creat", OpenSyscall::kCreat}};
    const std::string_view syscall = reader.text("syscall", "openat");
    bool known = false;
    for (const auto& [name, value] : kSyscalls) {
        if (syscall == name) {
            open.syscall = value;
            known = true;
        }
    }
    if (!known)
        reader.error("syscall", "expected openat, openat2, open or creat, got \"" +
                                    std::string(syscall) + "\"");
    open.path = reader.string("path", "");
    open.path_truncated = reader.boolean("path_truncated", false);
    open.dirfd = reader.template integer<int32_t>("dirfd", AT_FDCWD);
    open.open_flags = reader.template integer<uint64_t>("open_flags", O_RDWR);
    open.result = read_result(reader, "fd");
    if (open.result >= 0) read_device(reader, open.major, open.minor);
    return open;
}

template <typename Node>
GpuIoctl read_gpu_ioctl(const Reader<Node>& reader) {
    GpuIoctl ioctl;
    read_device(reader, ioctl.major, ioctl.minor);
    ioctl.fd = reader.template integer<int32_t>("fd", -1);
    ioctl.cmd = reader.template integer<uint32_t>("cmd");
    ioctl.arg = reader.template integer<uint64_t>("arg", 0);
    return ioctl;
}

inline bool is_loopback(const std::string& address, int ip_version) {
    if (ip_version == 4) {
        in_addr addr{};
        return inet_pton(AF_INET, address.c_str(), &addr) == 1 && (ntohl(addr.s_addr) >> 24) == 127;
    }
    return address == "::1";
}

template <typename Node>
Connect read_connect(const Reader<Node>& reader) {
    Connect connect;
    connect.fd = reader.template integer<int32_t>("fd", -1);
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
    if (const auto version = reader.template optional_integer<int>("ip_version");
        version && *version != connect.ip_version) {
        reader.error("ip_version", "does not match the address");
    }
    connect.port = reader.template integer<uint16_t>("port");
    connect.result = read_result(reader, "result");
    connect.v4_mapped = reader.boolean("v4_mapped", false);
    connect.loopback = reader.boolean("loopback", is_loopback(connect.address, connect.ip_version));
    connect.domain = reader.string("domain", "");
    reader.texts("reasons", [&](std::string_view reason) {
        if (reason == "gpu_holder") {
            connect.gpu_holder = true;
        } else if (reason == "watched_port") {
            connect.watched_port = true;
        } else if (reason == "connect_all") {
            connect.all = true;
        } else if (reason == "watched_process") {
            connect.watched_tgid = true;
        } else if (reason == "watched_address") {
            connect.watched_addr = true;
        } else if (reason == "established") {
            connect.established = true;
        } else {
            reader.error("reasons", "unknown reason \"" + std::string(reason) +
                                        "\" (gpu_holder, watched_port, connect_all, "
                                        "watched_process, watched_address, established)");
        }
    });
    return connect;
}

template <typename Node>
Exec read_exec(const Reader<Node>& reader) {
    Exec exec;
    exec.filename = reader.string("filename");
    exec.argv = reader.strings("argv");
    exec.argv_truncated = reader.boolean("argv_truncated", false);
    exec.filename_truncated = reader.boolean("filename_truncated", false);
    exec.old_tid = reader.template integer<uint32_t>("old_tid", 0);
    exec.exe = reader.string("exe", "");
    return exec;
}

template <typename Node>
Exit read_exit(const Reader<Node>& reader) {
    Exit exit;
    if (const auto status = reader.template optional_integer<uint32_t>("status")) {
        exit.status = *status;
    } else if (const auto signal = reader.template optional_integer<uint32_t>("signal")) {
        exit.status = *signal & 0x7f;
    } else {
        exit.status = (reader.template integer<uint32_t>("exit_code", 0) & 0xff) << 8;
    }
    exit.held_gpu = reader.boolean("held_gpu", false);
    return exit;
}

// A GPU's pipes, flattened into the object that holds them.
template <typename Node>
GpuPipes read_gpu_pipes(const Reader<Node>& reader) {
    GpuPipes pipes;
    pipes.sm_active_percent = reader.number("sm_active_percent");
    pipes.sm_occupancy_percent = reader.number("sm_occupancy_percent");
    pipes.tensor_active_percent = reader.number("tensor_active_percent");
    pipes.fp64_active_percent = reader.number("fp64_active_percent");
    pipes.fp32_active_percent = reader.number("fp32_active_percent");
    pipes.fp16_active_percent = reader.number("fp16_active_percent");
    pipes.integer_active_percent = reader.number("integer_active_percent");
    pipes.dram_active_percent = reader.number("dram_active_percent");
    return pipes;
}

template <typename Node>
Telemetry read_telemetry(const Reader<Node>& reader) {
    Telemetry telemetry;
    telemetry.gpu_index = reader.template integer<uint32_t>("gpu_index");
    telemetry.vendor = reader.string("vendor", "");
    telemetry.model = reader.string("model", "");
    telemetry.devices = reader.strings("devices");
    telemetry.utilization_percent = reader.number("utilization_percent");
    telemetry.memory_used_bytes = reader.template optional_integer<uint64_t>("memory_used_bytes");
    telemetry.memory_total_bytes = reader.template optional_integer<uint64_t>("memory_total_bytes");
    telemetry.processes.reserve(reader.count("processes"));
    reader.objects("processes", [&](const Reader<Node>& item) {
        ProcessGpuUsage usage;
        usage.pid = item.template integer<uint32_t>("pid");
        usage.memory_bytes = item.template optional_integer<uint64_t>("memory_bytes");
        usage.compute_percent = item.number("compute_percent");
        telemetry.processes.push_back(usage);
    });
    telemetry.power_watts = reader.number("power_watts");
    telemetry.power_limit_watts = reader.number("power_limit_watts");
    telemetry.pipes = read_gpu_pipes(reader);
    reader.objects("mig_pipes", [&](const Reader<Node>& item) {
        telemetry.mig_pipes.push_back(
            MigPipes{item.template integer<uint32_t>("gpu_instance"), read_gpu_pipes(item)});
    });
    reader.objects("process_instances", [&](const Reader<Node>& item) {
        telemetry.process_instances.push_back(
            ProcessInstance{item.template integer<uint32_t>("pid"),
                            item.template integer<uint32_t>("gpu_instance")});
    });
    reader.objects("mig_nodes", [&](const Reader<Node>& item) {
        telemetry.mig_nodes.push_back(
            MigNode{item.template integer<uint32_t>("gpu_instance"), item.string("device")});
    });
    return telemetry;
}

template <typename Node>
ProcessSnapshot read_snapshot(const Reader<Node>& reader) {
    ProcessSnapshot snapshot;
    snapshot.exe = reader.string("exe", "");
    snapshot.argv = reader.strings("argv");
    snapshot.user = reader.string("user", "");
    snapshot.cgroup_path = reader.string("cgroup_path", "");
    snapshot.container_id = reader.string("container_id", "");
    snapshot.container_runtime = reader.string("container_runtime", "");
    reader.objects("gpus", [&](const Reader<Node>& item) {
        SnapshotGpu gpu;
        read_device(item, gpu.major, gpu.minor);
        gpu.fd = item.template integer<int32_t>("fd", -1);
        snapshot.gpus.push_back(gpu);
    });
    snapshot.exe_package = reader.string("exe_package", "");
    return snapshot;
}

template <typename Node>
KillNow read_kill_now(const Reader<Node>& reader) {
    KillNow kill;
    kill.trigger = reader.string("trigger");
    kill.match = reader.string("match", "file");
    kill.dev = reader.template integer<uint64_t>("dev", 0);
    kill.ino = reader.template integer<uint64_t>("ino", 0);
    kill.rule_id = reader.template integer<uint32_t>("rule_id", 0);
    kill.signal_result = reader.template integer<int32_t>("signal_result", 0);
    if (reader.has("device")) read_device(reader, kill.major, kill.minor);
    return kill;
}

template <typename Node>
ExeScan read_exe_scan(const Reader<Node>& reader) {
    ExeScan scan;
    scan.path = reader.string("path", "");
    scan.sha256 = reader.string("sha256", "");
    scan.size = reader.template integer<uint64_t>("size", 0);
    scan.rules = reader.strings("rules");
    scan.signature_ids = reader.strings("signature_ids");
    scan.error = reader.string("error", "");
    scan.library = reader.string("library", "");
    scan.package = reader.string("package", "");
    scan.package_check = reader.string("package_check", "");
    scan.location_check = reader.string("location_check", "");
    scan.error_kind = reader.string("error_kind", "");
    return scan;
}

template <typename Node>
ConfigFile read_config_file(const Reader<Node>& reader) {
    ConfigFile file;
    file.path = reader.string("path");
    file.reason = reader.string("reason", "default");
    if (file.reason != "argument" && file.reason != "default") {
        reader.error("reason", "expected \"argument\" or \"default\", got \"" + file.reason + "\"");
    }
    file.size = reader.template integer<uint64_t>("size", 0);
    file.sha256 = reader.string("sha256", "");
    file.truncated = reader.boolean("truncated", false);
    reader.objects("lines", [&](const Reader<Node>& item) {
        ConfigLine line;
        line.line = item.template integer<uint32_t>("line");
        line.text = item.string("text");
        file.lines.push_back(std::move(line));
    });
    file.error = reader.string("error", "");
    return file;
}

// "taint_bits" when given (what the agent writes: exact, bits without a
// letter included), else the letters of "taints" (hand-written events).
template <typename Node>
ModuleLoad read_module_load(const Reader<Node>& reader) {
    ModuleLoad module;
    module.name = reader.string("name");
    if (module.name.empty()) reader.error("name", "must name the module");
    if (reader.has("taint_bits")) {
        module.taints = reader.template integer<uint32_t>("taint_bits");
        return module;
    }
    const std::string letters = reader.string("taints", "");
    const auto bits = module_taint_bits(letters);
    if (!bits) {
        reader.error("taints", "expected the kernel's taint letters (P, O, E, C, ...), got \"" +
                                   letters + "\"");
    }
    module.taints = *bits;
    return module;
}

template <typename Node>
HiddenProcess read_hidden_process(const Reader<Node>& reader) {
    HiddenProcess hidden;
    hidden.seen_by = reader.string("seen_by", "getdents64");
    if (hidden.seen_by != "getdents64" && hidden.seen_by != "process_table") {
        reader.error("seen_by", "expected \"getdents64\" or \"process_table\", got \"" +
                                    hidden.seen_by + "\"");
    }
    hidden.libraries = reader.strings("libraries");
    hidden.mechanisms = reader.strings("mechanisms");
    return hidden;
}

template <typename Node>
FileChange read_file_change(const Reader<Node>& reader) {
    FileChange change;
    change.operation = reader.string("operation");
    if (change.operation != "write" && change.operation != "rename" &&
        change.operation != "unlink") {
        reader.error("operation", "expected \"write\", \"rename\" or \"unlink\", got \"" +
                                      change.operation + "\"");
    }
    change.syscall = reader.string("syscall", "");
    change.kind = reader.string("kind", "");
    if (!change.kind.empty() && file_change_category(change.kind) == 0) {
        reader.error("kind", "unknown kind \"" + change.kind +
                                 "\" (preload, cron, systemd, shell_rc, ssh_keys, agent_pins, "
                                 "agent_config, other)");
    }
    change.path = reader.string("path");
    change.raw_path = reader.string("raw_path", "");
    change.result = reader.template integer<int32_t>("result", 0);
    change.dirfd = reader.template integer<int32_t>("dirfd", AT_FDCWD);
    change.flags = reader.template integer<uint64_t>("flags", 0);
    change.path_truncated = reader.boolean("path_truncated", false);
    change.watched_process = reader.boolean("watched_process", false);
    change.libraries = reader.strings("libraries");
    return change;
}

template <typename Node>
ProcessEnv read_process_env(const Reader<Node>& reader) {
    ProcessEnv env;
    if (auto value = reader.optional_text("ld_preload")) env.ld_preload = std::string(*value);
    if (auto value = reader.optional_text("ld_library_path")) {
        env.ld_library_path = std::string(*value);
    }
    env.error = reader.string("error", "");
    reader.objects("loader_paths", [&](const Reader<Node>& item) {
        LoaderPath entry;
        entry.variable = item.string("variable", "");
        entry.path = item.string("path", "");
        entry.resolved = item.string("resolved", "");
        entry.vouched_by = item.string("vouched_by", "");
        entry.age_s = item.template integer<int64_t>("age_s", -1);
        entry.others_can_write = item.boolean("others_can_write", false);
        env.loader_paths.push_back(std::move(entry));
    });
    return env;
}

template <typename Node>
AgentTamper read_agent_tamper(const Reader<Node>& reader) {
    AgentTamper tamper;
    tamper.kind = reader.string("kind");
    tamper.signal = reader.template integer<int32_t>("signal", 0);
    tamper.result = reader.template integer<int32_t>("result", 0);
    tamper.command = reader.template integer<uint32_t>("command", 0);
    tamper.agent_pid = reader.template integer<uint32_t>("agent_pid", 0);
    tamper.exe = reader.string("exe", "");
    tamper.cmdline = reader.strings("cmdline");
    tamper.detail = reader.string("detail", "");
    tamper.down_from_unix_ns = reader.template integer<int64_t>("down_from_unix_ns", 0);
    tamper.down_to_unix_ns = reader.template integer<int64_t>("down_to_unix_ns", 0);
    return tamper;
}

template <typename Node>
TrustChange read_trust_change(const Reader<Node>& reader) {
    TrustChange change;
    change.stage = reader.string("stage");
    if (change.stage != "write" && change.stage != "reload") {
        reader.error("stage", "expected \"write\" or \"reload\", got \"" + change.stage + "\"");
    }
    change.what = reader.string("what", "");
    change.paths = reader.strings("paths");
    change.operation = reader.string("operation", "");
    change.writer = reader.string("writer");
    change.writer_detail = reader.string("writer_detail", "");
    change.exe = reader.string("exe", "");
    change.cmdline = reader.strings("cmdline");
    change.allowlist_added = reader.strings("allowlist_added");
    change.actions_lowered = reader.strings("actions_lowered");
    change.rules_disabled = reader.strings("rules_disabled");
    change.other_changes = reader.strings("other_changes");
    return change;
}

template <typename Node>
CpuUsage read_cpu_usage(const Reader<Node>& reader) {
    CpuUsage usage;
    usage.cpu_ns = reader.template integer<uint64_t>("cpu_ns");
    usage.interval_ns = reader.template integer<uint64_t>("interval_ns");
    usage.threads = reader.template integer<uint32_t>("threads", 0);
    if (usage.interval_ns == 0) reader.error("interval_ns", "must be above 0");
    return usage;
}

template <typename Node>
GpuLibraries read_gpu_libraries(const Reader<Node>& reader) {
    GpuLibraries found;
    found.libraries = reader.strings("libraries");
    found.stack = reader.string("stack", "none");
    found.frameworks = reader.strings("frameworks");
    found.error = reader.string("error", "");
    return found;
}

template <typename Node>
ProcessCmdline read_process_cmdline(const Reader<Node>& reader) {
    ProcessCmdline read;
    read.argv = reader.strings("argv");
    read.truncated = reader.boolean("truncated", false);
    read.extends_exec = reader.boolean("extends_exec", false);
    return read;
}

template <typename Node>
Container read_container(const Reader<Node>& reader) {
    Container container;
    container.id = reader.string("id");
    container.runtime = reader.string("runtime", "");
    ContainerDetails& d = container.details;
    d.name = reader.string("name", "");
    d.image = reader.string("image", "");
    d.image_id = reader.string("image_id", "");
    d.pod_name = reader.string("pod_name", "");
    d.pod_namespace = reader.string("pod_namespace", "");
    d.pod_uid = reader.string("pod_uid", "");
    d.kube_container = reader.string("kube_container", "");
    return container;
}

template <typename Node>
GpuFault read_gpu_fault(const Reader<Node>& reader) {
    GpuFault fault;
    fault.gpu_index = reader.template integer<uint32_t>("gpu_index");
    fault.devices = reader.strings("devices");
    fault.kind = reader.string("kind");
    fault.code = reader.template integer<uint64_t>("code");
    fault.holders = reader.template integer<uint32_t>("holders", 0);
    return fault;
}

template <typename Node>
Workload read_workload(const Reader<Node>& reader) {
    Workload workload;
    workload.scheduler = reader.string("scheduler");
    SlurmJob& job = workload.slurm;
    job.job_id = reader.string("job_id", "");
    job.step_id = reader.string("step_id", "");
    job.user = reader.string("job_user", "");
    job.account = reader.string("account", "");
    job.partition = reader.string("partition", "");
    job.gpus = reader.string("job_gpus", "");
    workload.allocation_source = reader.string("allocation_source", "");
    workload.allocation = reader.string("allocation", "");
    workload.allocated = reader.strings("allocated");
    workload.node_gpus = reader.strings("node_gpus");
    workload.unresolved = reader.string("unresolved", "");
    workload.pod_namespace = reader.string("pod_namespace", "");
    workload.pod_name = reader.string("pod_name", "");
    workload.pod_uid = reader.string("pod_uid", "");
    workload.container = reader.string("container", "");
    return workload;
}

template <typename Node>
ProcessIo read_process_io(const Reader<Node>& reader) {
    ProcessIo io;
    io.file_write_bytes = reader.template optional_integer<uint64_t>("file_write_bytes");
    io.net_send_bytes = reader.template optional_integer<uint64_t>("net_send_bytes");
    io.net_sends = reader.template optional_integer<uint64_t>("net_sends");
    io.net_recv_bytes = reader.template optional_integer<uint64_t>("net_recv_bytes");
    io.net_recvs = reader.template optional_integer<uint64_t>("net_recvs");
    return io;
}
}  // namespace bodies

// Reads into `body` the body of an event of type `type`: `value`, the line's
// member named as the type (nullopt: absent or null), read under `top` (the
// line's Reader). Throws FieldError (an unknown type, a bad field), or
// Decline on the simdjson side.
template <typename Node>
void read_body(std::string_view type, const Reader<Node>& top, const std::optional<Node>& value,
               EventData& body) {
    using namespace bodies;
    const auto object = [&](bool required = true) { return top.object_of(value, type, required); };
    if (type == "gpu_open") {
        body = read_gpu_open(object());
    } else if (type == "gpu_ioctl") {
        body = read_gpu_ioctl(object());
    } else if (type == "connect") {
        body = read_connect(object());
    } else if (type == "exec") {
        body = read_exec(object());
    } else if (type == "fork") {
        const Reader<Node> fork = object();
        body =
            Fork{fork.template integer<uint32_t>("child_pid"), fork.boolean("inherited_gpu", false),
                 fork.template integer<uint64_t>("child_start_ns", 0)};
    } else if (type == "exit") {
        body = read_exit(object(false));
    } else if (type == "telemetry") {
        body = read_telemetry(object());
    } else if (type == "process_snapshot") {
        body = read_snapshot(object());
    } else if (type == "kill_now") {
        body = read_kill_now(object());
    } else if (type == "exe_scan") {
        body = read_exe_scan(object());
    } else if (type == "net_payload") {
        body = read_net_payload(object());
    } else if (type == "stratum") {
        body = read_stratum(object());
    } else if (type == "process_io") {
        body = read_process_io(object());
    } else if (type == "config_file") {
        body = read_config_file(object());
    } else if (type == "hidden_process") {
        body = read_hidden_process(object());
    } else if (type == "module_load") {
        body = read_module_load(object());
    } else if (type == "file_change") {
        body = read_file_change(object());
    } else if (type == "process_env") {
        body = read_process_env(object(false));
    } else if (type == "agent_tamper") {
        body = read_agent_tamper(object());
    } else if (type == "container") {
        body = read_container(object());
    } else if (type == "cpu_usage") {
        body = read_cpu_usage(object());
    } else if (type == "gpu_libraries") {
        body = read_gpu_libraries(object());
    } else if (type == "loopback_peer") {
        body = read_loopback_peer(object());
    } else if (type == "cmdline") {
        body = read_process_cmdline(object());
    } else if (type == "flow") {
        body = read_flow(object());
    } else if (type == "trust_change") {
        body = read_trust_change(object());
    } else if (type == "pool_probe") {
        body = read_pool_probe(object());
    } else if (type == "workload") {
        body = read_workload(object());
    } else if (type == "gpu_fault") {
        body = read_gpu_fault(object());
    } else {
        top.error("type", "unknown event type \"" + std::string(type) + "\" (" +
                              join(event_type_names(), ", ") + ")");
    }
}

}  // namespace gpuguard::agent::json_read
