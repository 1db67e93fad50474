// Events in the journal's binary form: one encoder and one decoder per
// event type, tagged by EventTag (codec_primitives.h). Never renumber a tag.
#include "codec_primitives.h"

namespace gpuguard::agent::journal {
namespace {

// --- events -----------------------------------------------------------------

void encode_task(Writer& w, const TaskInfo& task) {
    w.varint(task.pid);
    w.varint(task.tid);
    w.varint(task.ppid);
    w.varint(task.uid);
    w.varint(task.gid);
    w.varint(task.cgroup_id);
    w.str(task.comm);
}

void decode_task(Reader& r, TaskInfo& task) {
    task.pid = r.uint<uint32_t>();
    task.tid = r.uint<uint32_t>();
    task.ppid = r.uint<uint32_t>();
    task.uid = r.uint<uint32_t>();
    task.gid = r.uint<uint32_t>();
    task.cgroup_id = r.varint();
    r.str(task.comm);
}

struct EncodeVisitor {
    Writer& w;

    void operator()(const GpuOpen& open) const {
        w.varint(open.major);
        w.varint(open.minor);
        w.svarint(open.result);
        w.svarint(open.dirfd);
        w.varint(open.open_flags);
        w.u8(static_cast<uint8_t>(open.syscall));
        w.u8(open.path_truncated ? 1 : 0);
        w.str(open.path);
    }
    void operator()(const GpuIoctl& ioctl) const {
        w.varint(ioctl.major);
        w.varint(ioctl.minor);
        w.svarint(ioctl.fd);
        w.varint(ioctl.cmd);
        w.varint(ioctl.arg);
    }
    void operator()(const Connect& connect) const {
        w.svarint(connect.fd);
        w.svarint(connect.result);
        w.u8(static_cast<uint8_t>(connect.ip_version));
        w.str(connect.address);
        w.varint(connect.port);
        w.u8(static_cast<uint8_t>((connect.gpu_holder ? 1 : 0) | (connect.watched_port ? 2 : 0) |
                                  (connect.all ? 4 : 0) | (connect.v4_mapped ? 8 : 0) |
                                  (connect.loopback ? 16 : 0) | (connect.domain.empty() ? 0 : 32) |
                                  (connect.watched_tgid ? 64 : 0) |
                                  (connect.watched_addr ? 128 : 0)));
        if (!connect.domain.empty()) w.str(connect.domain);  // bit 32: older records lack it
    }
    void operator()(const Exec& exec) const {
        w.str(exec.filename);
        w.strings(exec.argv);
        w.u8(static_cast<uint8_t>((exec.argv_truncated ? 1 : 0) |
                                  (exec.filename_truncated ? 2 : 0) | (exec.exe.empty() ? 0 : 4)));
        w.varint(exec.old_tid);
        if (!exec.exe.empty()) w.str(exec.exe);  // bit 4: older records lack it
    }
    void operator()(const Fork& fork) const {
        w.varint(fork.child_pid);
        w.u8(static_cast<uint8_t>((fork.inherited_gpu ? 1 : 0) |
                                  (fork.child_start_ns != 0 ? 2 : 0)));
        if (fork.child_start_ns != 0) w.varint(fork.child_start_ns);  // bit 2: older lack it
    }
    void operator()(const Exit& exit) const {
        w.varint(exit.status);
        w.u8(exit.held_gpu ? 1 : 0);
    }
    void operator()(const Telemetry& telemetry) const {
        w.varint(telemetry.gpu_index);
        w.str(telemetry.vendor);
        w.str(telemetry.model);
        w.strings(telemetry.devices);
        w.opt_f64(telemetry.utilization_percent);
        w.opt_u64(telemetry.memory_used_bytes);
        w.opt_u64(telemetry.memory_total_bytes);
        w.varint(telemetry.processes.size());
        for (const auto& usage : telemetry.processes) {
            w.varint(usage.pid);
            w.opt_u64(usage.memory_bytes);
            w.opt_f64(usage.compute_percent);
        }
    }
    void operator()(const ProcessSnapshot& snapshot) const {
        w.str(snapshot.exe);
        w.strings(snapshot.argv);
        w.str(snapshot.user);
        w.str(snapshot.cgroup_path);
        w.str(snapshot.container_id);
        w.str(snapshot.container_runtime);
        w.varint(snapshot.gpus.size());
        for (const auto& gpu : snapshot.gpus) {
            w.varint(gpu.major);
            w.varint(gpu.minor);
            w.svarint(gpu.fd);
        }
        w.str(snapshot.exe_package);  // older records end before it
    }
    void operator()(const KillNow& kill) const {
        w.str(kill.trigger);
        w.str(kill.match);
        w.varint(kill.dev);
        w.varint(kill.ino);
        w.varint(kill.rule_id);
        w.svarint(kill.signal_result);
        w.varint(kill.major);
        w.varint(kill.minor);
    }
    void operator()(const ExeScan& scan) const {
        w.str(scan.path);
        w.str(scan.sha256);
        w.varint(scan.size);
        w.strings(scan.rules);
        w.strings(scan.signature_ids);
        w.str(scan.error);
        w.str(scan.library);  // older records end before it
    }
    void operator()(const NetPayload& payload) const {
        w.svarint(payload.fd);
        w.u8(static_cast<uint8_t>((payload.direction == NetPayload::Direction::kIn ? 1 : 0) |
                                  (payload.stream ? 2 : 0) | (payload.truncated ? 4 : 0) |
                                  (payload.dns ? 8 : 0) | (payload.followed ? 16 : 0)));
        w.str(payload.syscall);
        w.varint(payload.length);
        w.varint(payload.seq);
        w.varint(payload.flow);
        w.str(payload.local_address);
        w.varint(payload.local_port);
        w.str(payload.remote_address);
        w.varint(payload.remote_port);
        w.str(payload.data);
    }
    void operator()(const Stratum& stratum) const {
        w.varint(stratum.flow);
        w.str(stratum.protocol);
        w.str(stratum.pool_address);
        w.varint(stratum.pool_port);
        w.str(stratum.pool_domain);
        w.str(stratum.login);
        w.str(stratum.agent);
        w.strings(stratum.methods);
        w.strings(stratum.messages);
        w.varint(stratum.shares_submitted);
        w.varint(stratum.shares_accepted);
        w.varint(stratum.shares_rejected);
        w.f64(stratum.share_hashes);
        w.varint(stratum.difficulty_updates);
        w.opt_f64(stratum.hash_rate);
        w.opt_f64(stratum.reported_hash_rate);
    }
    void operator()(const ProcessIo& io) const {
        w.opt_u64(io.file_write_bytes);
        w.opt_u64(io.net_send_bytes);
        w.opt_u64(io.net_sends);
    }
    void operator()(const ConfigFile& file) const {
        w.str(file.path);
        w.str(file.reason);
        w.varint(file.size);
        w.str(file.sha256);
        w.u8(file.truncated ? 1 : 0);
        w.varint(file.lines.size());
        for (const auto& line : file.lines) {
            w.varint(line.line);
            w.str(line.text);
        }
    }
    void operator()(const HiddenProcess& hidden) const {
        w.str(hidden.seen_by);
        w.strings(hidden.libraries);
        w.strings(hidden.mechanisms);
    }
    void operator()(const ModuleLoad& module) const {
        w.str(module.name);
        w.varint(module.taints);
    }
    void operator()(const FileChange& change) const {
        w.str(change.operation);
        w.str(change.syscall);
        w.str(change.kind);
        w.str(change.path);
        w.str(change.raw_path);
        w.svarint(change.result);
        w.svarint(change.dirfd);
        w.varint(change.flags);
        w.u8((change.path_truncated ? 1 : 0) | (change.watched_process ? 2 : 0));
        w.strings(change.libraries);
    }
    void operator()(const ProcessEnv& env) const {
        w.u8((env.ld_preload ? 1 : 0) | (env.ld_library_path ? 2 : 0) |
             (env.loader_paths.empty() ? 0 : 4));
        if (env.ld_preload) w.str(*env.ld_preload);
        if (env.ld_library_path) w.str(*env.ld_library_path);
        w.str(env.error);
        if (env.loader_paths.empty()) return;  // bit 4: older records lack them
        w.varint(env.loader_paths.size());
        for (const LoaderPath& entry : env.loader_paths) {
            w.str(entry.variable);
            w.str(entry.path);
            w.str(entry.resolved);
            w.str(entry.vouched_by);
            w.svarint(entry.age_s);
            w.u8(entry.others_can_write ? 1 : 0);
        }
    }
    void operator()(const AgentTamper& tamper) const {
        w.str(tamper.kind);
        w.svarint(tamper.signal);
        w.svarint(tamper.result);
        w.varint(tamper.command);
        w.varint(tamper.agent_pid);
        w.str(tamper.exe);
        w.strings(tamper.cmdline);
        w.str(tamper.detail);
        w.svarint(tamper.down_from_unix_ns);
        w.svarint(tamper.down_to_unix_ns);
    }
    void operator()(const Container& container) const {
        const ContainerDetails& d = container.details;
        for (const std::string* field :
             {&container.id, &container.runtime, &d.name, &d.image, &d.image_id, &d.pod_name,
              &d.pod_namespace, &d.pod_uid, &d.kube_container}) {
            w.str(*field);
        }
    }
};

EventTag tag_of(const EventData& data) {
    // The variant's order is not the on-disk tag: map explicitly.
    struct Visitor {
        EventTag operator()(const GpuOpen&) const { return EventTag::kGpuOpen; }
        EventTag operator()(const GpuIoctl&) const { return EventTag::kGpuIoctl; }
        EventTag operator()(const Connect&) const { return EventTag::kConnect; }
        EventTag operator()(const Exec&) const { return EventTag::kExec; }
        EventTag operator()(const Fork&) const { return EventTag::kFork; }
        EventTag operator()(const Exit&) const { return EventTag::kExit; }
        EventTag operator()(const Telemetry&) const { return EventTag::kTelemetry; }
        EventTag operator()(const ProcessSnapshot&) const { return EventTag::kProcessSnapshot; }
        EventTag operator()(const KillNow&) const { return EventTag::kKillNow; }
        EventTag operator()(const ExeScan&) const { return EventTag::kExeScan; }
        EventTag operator()(const NetPayload&) const { return EventTag::kNetPayload; }
        EventTag operator()(const Stratum&) const { return EventTag::kStratum; }
        EventTag operator()(const ProcessIo&) const { return EventTag::kProcessIo; }
        EventTag operator()(const ConfigFile&) const { return EventTag::kConfigFile; }
        EventTag operator()(const HiddenProcess&) const { return EventTag::kHiddenProcess; }
        EventTag operator()(const ModuleLoad&) const { return EventTag::kModuleLoad; }
        EventTag operator()(const FileChange&) const { return EventTag::kFileChange; }
        EventTag operator()(const ProcessEnv&) const { return EventTag::kProcessEnv; }
        EventTag operator()(const AgentTamper&) const { return EventTag::kAgentTamper; }
        EventTag operator()(const Container&) const { return EventTag::kContainer; }
    };
    return std::visit(Visitor{}, data);
}

// Reuses the variant's alternative when it already holds T (saves allocations
// when a reader decodes many events of one type into the same Event).
template <typename T>
T& emplace(EventData& data) {
    if (auto* existing = std::get_if<T>(&data)) return *existing;
    return data.emplace<T>();
}

void decode_body(Reader& r, EventTag tag, EventData& data) {
    switch (tag) {
        case EventTag::kGpuOpen: {
            auto& open = emplace<GpuOpen>(data);
            open.major = r.uint<uint32_t>();
            open.minor = r.uint<uint32_t>();
            open.result = r.sint<int32_t>();
            open.dirfd = r.sint<int32_t>();
            open.open_flags = r.varint();
            const uint8_t syscall = r.u8();
            if (syscall > static_cast<uint8_t>(OpenSyscall::kCreat)) r.fail("bad open syscall");
            open.syscall = static_cast<OpenSyscall>(syscall);
            open.path_truncated = r.flag();
            r.str(open.path);
            return;
        }
        case EventTag::kGpuIoctl: {
            auto& ioctl = emplace<GpuIoctl>(data);
            ioctl.major = r.uint<uint32_t>();
            ioctl.minor = r.uint<uint32_t>();
            ioctl.fd = r.sint<int32_t>();
            ioctl.cmd = r.uint<uint32_t>();
            ioctl.arg = r.varint();
            return;
        }
        case EventTag::kConnect: {
            auto& connect = emplace<Connect>(data);
            connect.fd = r.sint<int32_t>();
            connect.result = r.sint<int32_t>();
            connect.ip_version = r.u8();
            if (connect.ip_version != 4 && connect.ip_version != 6) r.fail("bad ip version");
            r.str(connect.address);
            connect.port = r.uint<uint16_t>();
            const uint8_t bits = r.u8();
            connect.gpu_holder = bits & 1;
            connect.watched_port = bits & 2;
            connect.all = bits & 4;
            connect.v4_mapped = bits & 8;
            connect.loopback = bits & 16;
            connect.watched_tgid = bits & 64;
            connect.watched_addr = bits & 128;
            connect.domain.clear();
            if (bits & 32) r.str(connect.domain);
            return;
        }
        case EventTag::kExec: {
            auto& exec = emplace<Exec>(data);
            r.str(exec.filename);
            r.strings(exec.argv);
            const uint8_t bits = r.u8();
            exec.argv_truncated = bits & 1;
            exec.filename_truncated = bits & 2;
            exec.old_tid = r.uint<uint32_t>();
            exec.exe.clear();
            if (bits & 4) r.str(exec.exe);
            return;
        }
        case EventTag::kFork: {
            auto& fork = emplace<Fork>(data);
            fork.child_pid = r.uint<uint32_t>();
            const uint8_t bits = r.u8();
            fork.inherited_gpu = bits & 1;
            fork.child_start_ns = (bits & 2) ? r.uint<uint64_t>() : 0;
            return;
        }
        case EventTag::kExit: {
            auto& exit = emplace<Exit>(data);
            exit.status = r.uint<uint32_t>();
            exit.held_gpu = r.flag();
            return;
        }
        case EventTag::kTelemetry: {
            auto& telemetry = emplace<Telemetry>(data);
            telemetry.gpu_index = r.uint<uint32_t>();
            r.str(telemetry.vendor);
            r.str(telemetry.model);
            r.strings(telemetry.devices);
            telemetry.utilization_percent = r.opt_f64();
            telemetry.memory_used_bytes = r.opt_u64();
            telemetry.memory_total_bytes = r.opt_u64();
            const size_t n = r.count();
            telemetry.processes.resize(n);
            for (auto& usage : telemetry.processes) {
                usage.pid = r.uint<uint32_t>();
                usage.memory_bytes = r.opt_u64();
                usage.compute_percent = r.opt_f64();
            }
            return;
        }
        case EventTag::kProcessSnapshot: {
            auto& snapshot = emplace<ProcessSnapshot>(data);
            r.str(snapshot.exe);
            r.strings(snapshot.argv);
            r.str(snapshot.user);
            r.str(snapshot.cgroup_path);
            r.str(snapshot.container_id);
            r.str(snapshot.container_runtime);
            const size_t n = r.count();
            snapshot.gpus.resize(n);
            for (auto& gpu : snapshot.gpus) {
                gpu.major = r.uint<uint32_t>();
                gpu.minor = r.uint<uint32_t>();
                gpu.fd = r.sint<int32_t>();
            }
            if (r.remaining() > 0) r.str(snapshot.exe_package);
            return;
        }
        case EventTag::kKillNow: {
            auto& kill = emplace<KillNow>(data);
            r.str(kill.trigger);
            r.str(kill.match);
            kill.dev = r.varint();
            kill.ino = r.varint();
            kill.rule_id = r.uint<uint32_t>();
            kill.signal_result = r.sint<int32_t>();
            kill.major = r.uint<uint32_t>();
            kill.minor = r.uint<uint32_t>();
            return;
        }
        case EventTag::kExeScan: {
            auto& scan = emplace<ExeScan>(data);
            r.str(scan.path);
            r.str(scan.sha256);
            scan.size = r.varint();
            r.strings(scan.rules);
            r.strings(scan.signature_ids);
            r.str(scan.error);
            if (r.remaining() > 0) r.str(scan.library);
            return;
        }
        case EventTag::kNetPayload: {
            auto& payload = emplace<NetPayload>(data);
            payload.fd = r.sint<int32_t>();
            const uint8_t bits = r.u8();
            payload.direction = bits & 1 ? NetPayload::Direction::kIn : NetPayload::Direction::kOut;
            payload.stream = bits & 2;
            payload.truncated = bits & 4;
            payload.dns = bits & 8;
            payload.followed = bits & 16;
            r.str(payload.syscall);
            payload.length = r.uint<uint32_t>();
            payload.seq = r.uint<uint32_t>();
            payload.flow = r.varint();
            r.str(payload.local_address);
            payload.local_port = r.uint<uint16_t>();
            r.str(payload.remote_address);
            payload.remote_port = r.uint<uint16_t>();
            r.str(payload.data);
            return;
        }
        case EventTag::kStratum: {
            auto& stratum = emplace<Stratum>(data);
            stratum.flow = r.varint();
            r.str(stratum.protocol);
            r.str(stratum.pool_address);
            stratum.pool_port = r.uint<uint16_t>();
            r.str(stratum.pool_domain);
            r.str(stratum.login);
            r.str(stratum.agent);
            r.strings(stratum.methods);
            r.strings(stratum.messages);
            stratum.shares_submitted = r.varint();
            stratum.shares_accepted = r.varint();
            stratum.shares_rejected = r.varint();
            stratum.share_hashes = r.f64();
            stratum.difficulty_updates = r.varint();
            stratum.hash_rate = r.opt_f64();
            stratum.reported_hash_rate = r.opt_f64();
            return;
        }
        case EventTag::kProcessIo: {
            auto& io = emplace<ProcessIo>(data);
            io.file_write_bytes = r.opt_u64();
            io.net_send_bytes = r.opt_u64();
            io.net_sends = r.opt_u64();
            return;
        }
        case EventTag::kConfigFile: {
            auto& file = emplace<ConfigFile>(data);
            r.str(file.path);
            r.str(file.reason);
            file.size = r.varint();
            r.str(file.sha256);
            file.truncated = r.flag();
            const size_t lines = r.count();
            file.lines.resize(lines);
            for (auto& line : file.lines) {
                line.line = r.uint<uint32_t>();
                r.str(line.text);
            }
            return;
        }
        case EventTag::kHiddenProcess: {
            auto& hidden = emplace<HiddenProcess>(data);
            r.str(hidden.seen_by);
            r.strings(hidden.libraries);
            r.strings(hidden.mechanisms);
            return;
        }
        case EventTag::kModuleLoad: {
            auto& module = emplace<ModuleLoad>(data);
            r.str(module.name);
            module.taints = r.uint<uint32_t>();
            return;
        }
        case EventTag::kFileChange: {
            auto& change = emplace<FileChange>(data);
            r.str(change.operation);
            r.str(change.syscall);
            r.str(change.kind);
            r.str(change.path);
            r.str(change.raw_path);
            change.result = r.sint<int32_t>();
            change.dirfd = r.sint<int32_t>();
            change.flags = r.varint();
            const uint8_t bits = r.u8();
            change.path_truncated = (bits & 1) != 0;
            change.watched_process = (bits & 2) != 0;
            r.strings(change.libraries);
            return;
        }
        case EventTag::kProcessEnv: {
            auto& env = emplace<ProcessEnv>(data);
            const uint8_t present = r.u8();
            env.ld_preload.reset();
            env.ld_library_path.reset();
            if (present & 1) r.str(env.ld_preload.emplace());
            if (present & 2) r.str(env.ld_library_path.emplace());
            r.str(env.error);
            env.loader_paths.resize((present & 4) ? r.count() : 0);
            for (LoaderPath& entry : env.loader_paths) {
                r.str(entry.variable);
                r.str(entry.path);
                r.str(entry.resolved);
                r.str(entry.vouched_by);
                entry.age_s = r.sint<int64_t>();
                entry.others_can_write = r.u8() != 0;
            }
            return;
        }
        case EventTag::kAgentTamper: {
            auto& tamper = emplace<AgentTamper>(data);
            r.str(tamper.kind);
            tamper.signal = r.sint<int32_t>();
            tamper.result = r.sint<int32_t>();
            tamper.command = r.uint<uint32_t>();
            tamper.agent_pid = r.uint<uint32_t>();
            r.str(tamper.exe);
            r.strings(tamper.cmdline);
            r.str(tamper.detail);
            tamper.down_from_unix_ns = r.svarint();
            tamper.down_to_unix_ns = r.svarint();
            return;
        }
        case EventTag::kContainer: {
            auto& container = emplace<Container>(data);
            ContainerDetails& d = container.details;
            for (std::string* field :
                 {&container.id, &container.runtime, &d.name, &d.image, &d.image_id, &d.pod_name,
                  &d.pod_namespace, &d.pod_uid, &d.kube_container}) {
                r.str(*field);
            }
            return;
        }
    }
    r.fail("unknown event type");
}

}  // namespace

void encode_event(const Event& event, std::string& out) {
    Writer w(out);
    w.u8(static_cast<uint8_t>(tag_of(event.data)));
    w.varint(event.ts_ns);
    encode_task(w, event.task);
    std::visit(EncodeVisitor{w}, event.data);
}

bool decode_event(std::string_view payload, Event& event, std::string& error) {
    Reader r(payload);
    const auto tag = static_cast<EventTag>(r.u8());
    event.ts_ns = r.varint();
    decode_task(r, event.task);
    if (r.ok()) decode_body(r, tag, event.data);
    return finish(r, error);
}

std::optional<uint64_t> peek_event_ts(std::string_view payload) {
    Reader r(payload);
    r.u8();
    const uint64_t ts = r.varint();
    if (!r.ok()) return std::nullopt;
    return ts;
}

}  // namespace gpuguard::agent::journal
