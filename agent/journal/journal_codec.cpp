#include "gpuguard/journal/journal_codec.h"

#include <bit>
#include <cstring>
#include <limits>

#include "crc32c.h"

namespace gpuguard::agent::journal {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the journal format is little-endian; add byte swaps for this host");

// Event type tags on disk. Never renumber: add new ones at the end.
enum class EventTag : uint8_t {
    kGpuOpen = 1,
    kGpuIoctl = 2,
    kConnect = 3,
    kExec = 4,
    kFork = 5,
    kExit = 6,
    kTelemetry = 7,
    kProcessSnapshot = 8,
    kKillNow = 9,
    kExeScan = 10,
    kNetPayload = 11,
    kStratum = 12,
    kProcessIo = 13,
};

// --- writing --------------------------------------------------------------

class Writer {
  public:
    explicit Writer(std::string& out) : out_(out) {}

    void u8(uint8_t value) { out_.push_back(static_cast<char>(value)); }
    void varint(uint64_t value) {
        char bytes[10];
        size_t n = 0;
        while (value >= 0x80) {
            bytes[n++] = static_cast<char>(value | 0x80);
            value >>= 7;
        }
        bytes[n++] = static_cast<char>(value);
        out_.append(bytes, n);
    }
    void svarint(int64_t value) {  // zigzag
        varint((static_cast<uint64_t>(value) << 1) ^ static_cast<uint64_t>(value >> 63));
    }
    void str(std::string_view text) {
        varint(text.size());
        out_.append(text);
    }
    void strings(const std::vector<std::string>& list) {
        varint(list.size());
        for (const auto& text : list) str(text);
    }
    void f64(double value) {
        char bytes[8];
        std::memcpy(bytes, &value, 8);
        out_.append(bytes, 8);
    }
    void opt_u64(const std::optional<uint64_t>& value) {
        u8(value ? 1 : 0);
        if (value) varint(*value);
    }
    void opt_f64(const std::optional<double>& value) {
        u8(value ? 1 : 0);
        if (value) f64(*value);
    }

  private:
    std::string& out_;
};

// --- reading --------------------------------------------------------------

// Reads fields in order; the first failure sticks and later reads return
// zero values, so a decoder checks ok() once at the end.
class Reader {
  public:
    explicit Reader(std::string_view bytes) : p_(bytes.data()), end_(bytes.data() + bytes.size()) {}

    bool ok() const { return error_ == nullptr; }
    const char* error() const { return error_; }
    size_t remaining() const { return static_cast<size_t>(end_ - p_); }
    void fail(const char* what) {
        if (!error_) error_ = what;
        p_ = end_;
    }

    uint8_t u8() {
        if (p_ >= end_) {
            fail("truncated");
            return 0;
        }
        return static_cast<uint8_t>(*p_++);
    }
    bool flag() {
        const uint8_t value = u8();
        if (value > 1) fail("bad boolean");
        return value == 1;
    }
    uint64_t varint() {
        uint64_t value = 0;
        for (int shift = 0; shift < 64; shift += 7) {
            if (p_ >= end_) {
                fail("truncated varint");
                return 0;
            }
            const auto byte = static_cast<uint8_t>(*p_++);
            value |= static_cast<uint64_t>(byte & 0x7f) << shift;
            if ((byte & 0x80) == 0) return value;
        }
        fail("varint too long");
        return 0;
    }
    int64_t svarint() {
        const uint64_t raw = varint();
        return static_cast<int64_t>((raw >> 1) ^ (~(raw & 1) + 1));
    }
    template <typename T>
    T uint() {
        const uint64_t value = varint();
        if (value > static_cast<uint64_t>(std::numeric_limits<T>::max())) {
            fail("integer out of range");
            return 0;
        }
        return static_cast<T>(value);
    }
    template <typename T>
    T sint() {
        const int64_t value = svarint();
        if (value < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
            value > static_cast<int64_t>(std::numeric_limits<T>::max())) {
            fail("integer out of range");
            return 0;
        }
        return static_cast<T>(value);
    }
    void str(std::string& out) {
        const uint64_t size = varint();
        if (size > remaining()) {
            fail("string longer than the record");
            out.clear();
            return;
        }
        out.assign(p_, size);
        p_ += size;
    }
    std::string str() {
        std::string out;
        str(out);
        return out;
    }
    // A count of elements that take at least one byte each: bounded by what is left.
    size_t count() {
        const uint64_t n = varint();
        if (n > remaining()) {
            fail("count larger than the record");
            return 0;
        }
        return static_cast<size_t>(n);
    }
    void strings(std::vector<std::string>& out) {
        const size_t n = count();
        out.resize(n);
        for (auto& text : out) str(text);
        if (!ok()) out.clear();
    }
    double f64() {
        if (remaining() < 8) {
            fail("truncated");
            return 0;
        }
        double value;
        std::memcpy(&value, p_, 8);
        p_ += 8;
        return value;
    }
    std::optional<uint64_t> opt_u64() {
        if (!flag()) return std::nullopt;
        return varint();
    }
    std::optional<double> opt_f64() {
        if (!flag()) return std::nullopt;
        return f64();
    }

  private:
    const char* p_;
    const char* end_;
    const char* error_ = nullptr;
};

bool finish(const Reader& reader, std::string& error) {
    if (reader.ok()) return true;  // trailing bytes: fields of a newer minor version
    error = reader.error();
    return false;
}

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
                                  (connect.loopback ? 16 : 0) | (connect.domain.empty() ? 0 : 32)));
        if (!connect.domain.empty()) w.str(connect.domain);  // bit 32: older records lack it
    }
    void operator()(const Exec& exec) const {
        w.str(exec.filename);
        w.strings(exec.argv);
        w.u8(static_cast<uint8_t>((exec.argv_truncated ? 1 : 0) |
                                  (exec.filename_truncated ? 2 : 0)));
        w.varint(exec.old_tid);
    }
    void operator()(const Fork& fork) const {
        w.varint(fork.child_pid);
        w.u8(fork.inherited_gpu ? 1 : 0);
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
            return;
        }
        case EventTag::kFork: {
            auto& fork = emplace<Fork>(data);
            fork.child_pid = r.uint<uint32_t>();
            fork.inherited_gpu = r.flag();
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
    }
    r.fail("unknown event type");
}

}  // namespace

const char* to_string(RecordKind kind) {
    switch (kind) {
        case RecordKind::kEvent:
            return "event";
        case RecordKind::kDetection:
            return "detection";
        case RecordKind::kEnforcement:
            return "enforcement";
        case RecordKind::kNote:
            return "note";
        case RecordKind::kClock:
            return "clock";
        case RecordKind::kGpuDevices:
            return "gpu_devices";
        case RecordKind::kSnapshotEnd:
            return "snapshot_end";
        case RecordKind::kGap:
            return "gap";
        case RecordKind::kBlock:
            return "block";
        case RecordKind::kSegmentEnd:
            return "segment_end";
    }
    return "unknown";
}

void put_u32(std::string& out, uint32_t value) {
    char bytes[4];
    std::memcpy(bytes, &value, 4);
    out.append(bytes, 4);
}

uint32_t get_u32(const char* p) {
    uint32_t value;
    std::memcpy(&value, p, 4);
    return value;
}

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

void encode_alert(const AlertRecord& alert, std::string& out) {
    Writer w(out);
    w.varint(alert.ts_ns);
    w.varint(alert.pid);
    w.str(alert.rule_id);
    w.str(alert.json);
}

bool decode_alert(std::string_view payload, AlertRecord& alert, std::string& error) {
    Reader r(payload);
    alert.ts_ns = r.varint();
    alert.pid = r.uint<uint32_t>();
    r.str(alert.rule_id);
    r.str(alert.json);
    return finish(r, error);
}

void encode_note(const NoteRecord& note, std::string& out) {
    Writer w(out);
    w.varint(note.ts_ns);
    w.str(note.level);
    w.str(note.text);
}

bool decode_note(std::string_view payload, NoteRecord& note, std::string& error) {
    Reader r(payload);
    note.ts_ns = r.varint();
    r.str(note.level);
    r.str(note.text);
    return finish(r, error);
}

void encode_gap(const GapRecord& gap, std::string& out) {
    Writer w(out);
    w.varint(gap.dropped_events);
    w.varint(gap.dropped_records);
    w.varint(gap.first_ts_ns);
    w.varint(gap.last_ts_ns);
    w.str(gap.reason);
}

bool decode_gap(std::string_view payload, GapRecord& gap, std::string& error) {
    Reader r(payload);
    gap.dropped_events = r.varint();
    gap.dropped_records = r.varint();
    gap.first_ts_ns = r.varint();
    gap.last_ts_ns = r.varint();
    r.str(gap.reason);
    return finish(r, error);
}

void encode_clock(int64_t realtime_offset_ns, std::string& out) {
    Writer(out).svarint(realtime_offset_ns);
}

bool decode_clock(std::string_view payload, int64_t& realtime_offset_ns, std::string& error) {
    Reader r(payload);
    realtime_offset_ns = r.svarint();
    return finish(r, error);
}

void encode_gpu_devices(const std::vector<GpuDeviceNumber>& devices, std::string& out) {
    Writer w(out);
    w.varint(devices.size());
    for (const auto& device : devices) {
        w.varint(device.major);
        w.u8(device.minor ? 1 : 0);
        if (device.minor) w.varint(*device.minor);
        w.str(device.driver);
    }
}

bool decode_gpu_devices(std::string_view payload, std::vector<GpuDeviceNumber>& devices,
                        std::string& error) {
    Reader r(payload);
    const size_t n = r.count();
    devices.assign(n, GpuDeviceNumber{});
    for (auto& device : devices) {
        device.major = r.uint<uint32_t>();
        if (r.flag()) device.minor = r.uint<uint32_t>();
        r.str(device.driver);
    }
    if (!r.ok()) devices.clear();
    return finish(r, error);
}

void encode_snapshot_end(uint64_t processes, std::string& out) { Writer(out).varint(processes); }

void encode_segment_end(const SegmentEnd& end, std::string& out) {
    Writer w(out);
    w.varint(end.records);
    w.str(end.reason);
}

bool decode_segment_end(std::string_view payload, SegmentEnd& end, std::string& error) {
    Reader r(payload);
    end.records = r.varint();
    r.str(end.reason);
    return finish(r, error);
}

std::string encode_header(const SegmentHeader& header) {
    std::string body;
    Writer w(body);
    w.varint(header.sequence);
    w.svarint(header.created_unix_ns);
    w.varint(header.created_mono_ns);
    w.svarint(header.realtime_offset_ns);
    w.str(header.hostname);
    w.str(header.boot_id);
    w.str(header.kernel);
    w.str(header.agent_version);
    w.str(header.rule_pack_version);
    w.str(header.kind);
    w.u8(header.compressed ? 1 : 0);

    std::string out(kFileMagic, sizeof(kFileMagic));
    char version[4];
    std::memcpy(version, &header.version_major, 2);
    std::memcpy(version + 2, &header.version_minor, 2);
    out.append(version, 4);
    put_u32(out, static_cast<uint32_t>(body.size()));
    put_u32(out, crc32c(crc32c(0, out.data() + 8, 8), body.data(), body.size()));
    out += body;
    return out;
}

std::optional<SegmentHeader> decode_header(std::string_view file, size_t& header_size,
                                           std::string& error) {
    if (file.size() < kFileHeaderFixedSize) {
        error = "file shorter than a segment header";
        return std::nullopt;
    }
    if (std::memcmp(file.data(), kFileMagic, sizeof(kFileMagic)) != 0) {
        error = "not a gpuguard journal (bad magic)";
        return std::nullopt;
    }
    SegmentHeader header;
    std::memcpy(&header.version_major, file.data() + 8, 2);
    std::memcpy(&header.version_minor, file.data() + 10, 2);
    if (header.version_major != kFormatMajor) {
        error = "journal format " + std::to_string(header.version_major) + "." +
                std::to_string(header.version_minor) + " is not supported (this build reads " +
                std::to_string(kFormatMajor) + ".x)";
        return std::nullopt;
    }
    const uint32_t body_size = get_u32(file.data() + 12);
    const uint32_t crc = get_u32(file.data() + 16);
    if (body_size > kMaxHeaderBody) {
        error = "segment header length out of range";
        return std::nullopt;
    }
    if (file.size() - kFileHeaderFixedSize < body_size) {
        error = "file shorter than its segment header";
        return std::nullopt;
    }
    const std::string_view body = file.substr(kFileHeaderFixedSize, body_size);
    if (crc32c(crc32c(0, file.data() + 8, 8), body.data(), body.size()) != crc) {
        error = "segment header CRC mismatch";
        return std::nullopt;
    }
    Reader r(body);
    header.sequence = r.varint();
    header.created_unix_ns = r.svarint();
    header.created_mono_ns = r.varint();
    header.realtime_offset_ns = r.svarint();
    r.str(header.hostname);
    r.str(header.boot_id);
    r.str(header.kernel);
    r.str(header.agent_version);
    r.str(header.rule_pack_version);
    r.str(header.kind);
    header.compressed = r.flag();
    if (!finish(r, error)) {
        error = "segment header: " + error;
        return std::nullopt;
    }
    header_size = kFileHeaderFixedSize + body_size;
    return header;
}

void append_frame(RecordKind kind, uint8_t flags, std::string_view payload, std::string& out) {
    const size_t start = out.size();
    put_u32(out, kRecordMagic);
    put_u32(out, 0);  // CRC, filled below
    put_u32(out, static_cast<uint32_t>(payload.size()));
    out.push_back(static_cast<char>(kind));
    out.push_back(static_cast<char>(flags));
    out.push_back(0);
    out.push_back(0);
    out.append(payload);
    const uint32_t crc = crc32c(0, out.data() + start + 8, kFrameSize - 8 + payload.size());
    std::memcpy(out.data() + start + 4, &crc, 4);
}

void append_inner(RecordKind kind, std::string_view payload, std::string& out) {
    out.push_back(static_cast<char>(kind));
    Writer(out).varint(payload.size());
    out.append(payload);
}

bool read_inner(std::string_view data, size_t& pos, uint8_t& kind, std::string_view& payload) {
    if (pos >= data.size()) return false;
    Reader r(data.substr(pos + 1));
    const uint64_t length = r.varint();
    if (!r.ok() || length > r.remaining()) return false;
    kind = static_cast<uint8_t>(data[pos]);
    const size_t start = data.size() - r.remaining();
    payload = data.substr(start, length);
    pos = start + length;
    return true;
}

bool event_changes_process_state(std::string_view payload) {
    if (payload.empty()) return false;
    switch (static_cast<EventTag>(static_cast<uint8_t>(payload[0]))) {
        case EventTag::kGpuOpen:
        case EventTag::kExec:
        case EventTag::kFork:
        case EventTag::kExit:
        case EventTag::kProcessSnapshot:
            return true;
        default:
            return false;
    }
}

FrameStatus check_frame(std::string_view bytes, Frame& frame) {
    if (bytes.size() < kFrameSize) {
        // A shorter tail that still starts like a frame is a torn write.
        const size_t n = bytes.size() < 4 ? bytes.size() : 4;
        char magic[4];
        std::memcpy(magic, &kRecordMagic, 4);
        return std::memcmp(bytes.data(), magic, n) == 0 ? FrameStatus::kTruncated
                                                        : FrameStatus::kCorrupt;
    }
    if (get_u32(bytes.data()) != kRecordMagic) return FrameStatus::kCorrupt;
    const uint32_t length = get_u32(bytes.data() + 8);
    if (length > kMaxRecordPayload || bytes[14] != 0 || bytes[15] != 0) {
        return FrameStatus::kCorrupt;
    }
    if (bytes.size() - kFrameSize < length) return FrameStatus::kTruncated;
    const uint32_t crc = crc32c(0, bytes.data() + 8, kFrameSize - 8 + length);
    if (crc != get_u32(bytes.data() + 4)) return FrameStatus::kCorrupt;
    frame.kind = static_cast<RecordKind>(static_cast<uint8_t>(bytes[12]));
    frame.flags = static_cast<uint8_t>(bytes[13]);
    frame.payload = bytes.substr(kFrameSize, length);
    return FrameStatus::kOk;
}

}  // namespace gpuguard::agent::journal
