// Journal records other than events (alerts, notes, gaps, clock, GPU
// devices, segment ends), segment headers and frames; events are
// journal_event_codec.cpp.
#include "gpuguard/journal/journal_codec.h"

#include <bit>
#include <cstring>
#include <limits>

#include "codec_primitives.h"
#include "crc32c.h"

namespace gpuguard::agent::journal {

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
        case EventTag::kContainer:
        case EventTag::kWorkload:
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
