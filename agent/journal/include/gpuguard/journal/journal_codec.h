// The journal's binary format (docs/journal.md): segment headers, record
// frames and the compact encoding of every Event type. Little-endian,
// LEB128 varints, versioned; a newer minor version only appends fields, so
// decoders ignore bytes they do not know at the end of a payload.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuguard/events/event.h"
#include "gpuguard/events/gpu_devices.h"

namespace gpuguard::agent::journal {

// File header: magic, u16 major, u16 minor, u32 body length, u32 CRC32C of
// bytes [8, 16) and the body, then the body.
inline constexpr char kFileMagic[8] = {'G', 'P', 'U', 'G', 'J', 'R', 'N', 'L'};
inline constexpr size_t kFileHeaderFixedSize = 20;
inline constexpr uint16_t kFormatMajor = 1;  // readers refuse another major
inline constexpr uint16_t kFormatMinor = 0;  // appended fields only
inline constexpr size_t kMaxHeaderBody = 64 * 1024;

// Record frame: u32 magic "GGJR", u32 CRC32C of bytes [8, 16 + length), u32
// payload length, u8 kind, u8 flags, u16 reserved (0), then the payload. The
// magic lets a reader find the next record after a corrupt one.
inline constexpr uint32_t kRecordMagic = 0x524a4747;  // "GGJR" on disk
inline constexpr size_t kFrameSize = 16;
inline constexpr uint32_t kMaxRecordPayload = 64u << 20;
inline constexpr uint8_t kFlagZstd = 0x01;  // kBlock payload is a zstd frame

enum class RecordKind : uint8_t {
    kEvent = 1,        // one Event
    kDetection = 2,    // AlertRecord: the SIEM's JSON of a Detection
    kEnforcement = 3,  // AlertRecord: the JSON of an EnforcementOutcome
    kNote = 4,         // NoteRecord: the agent's own remarks (start, stop, config)
    kClock = 5,        // CLOCK_REALTIME - CLOCK_MONOTONIC from here on
    kGpuDevices = 6,   // the GPU device numbers in use (part of the snapshot)
    kSnapshotEnd = 7,  // the segment's opening snapshot ends here
    kGap = 8,          // GapRecord: records that were dropped (queue full, disk full)
    kBlock = 9,        // a block of inner records, zstd-compressed (kFlagZstd)
    kSegmentEnd = 10,  // clean end of a segment (rotation or shutdown)
};

const char* to_string(RecordKind kind);  // "event", "detection", ...; "unknown"

// What a segment says about where and when it was written.
struct SegmentHeader {
    uint16_t version_major = kFormatMajor;
    uint16_t version_minor = kFormatMinor;
    uint64_t sequence = 0;           // 1, 2, ... within one journal directory
    int64_t created_unix_ns = 0;     // CLOCK_REALTIME at creation
    uint64_t created_mono_ns = 0;    // CLOCK_MONOTONIC (journal clock) at creation
    int64_t realtime_offset_ns = 0;  // for ts_ns -> wall clock until a kClock record
    std::string hostname;
    std::string boot_id;
    std::string kernel;
    std::string agent_version;
    std::string rule_pack_version;
    std::string kind = "segment";  // "segment" or "incident"
    bool compressed = false;       // records may come in zstd blocks
};

struct AlertRecord {
    uint64_t ts_ns = 0;  // CLOCK_MONOTONIC
    uint32_t pid = 0;
    std::string rule_id;
    std::string json;  // as the caller gave it (the SIEM's ECS JSON)
};

struct NoteRecord {
    uint64_t ts_ns = 0;
    std::string level;  // "info", "warn", ...
    std::string text;
};

struct GapRecord {
    uint64_t dropped_events = 0;
    uint64_t dropped_records = 0;  // detections, enforcement outcomes, notes
    uint64_t first_ts_ns = 0;      // of the first and last dropped record
    uint64_t last_ts_ns = 0;
    std::string reason;  // "queue_full", "write_failed: No space left on device"
};

struct SegmentEnd {
    uint64_t records = 0;  // records written to the segment, this one excluded
    std::string reason;    // "rotate", "close"
};

// --- payload encoders: append to `out` -------------------------------------

void encode_event(const Event& event, std::string& out);
void encode_alert(const AlertRecord& alert, std::string& out);
void encode_note(const NoteRecord& note, std::string& out);
void encode_gap(const GapRecord& gap, std::string& out);
void encode_clock(int64_t realtime_offset_ns, std::string& out);
void encode_gpu_devices(const std::vector<GpuDeviceNumber>& devices, std::string& out);
void encode_snapshot_end(uint64_t processes, std::string& out);
void encode_segment_end(const SegmentEnd& end, std::string& out);
// The whole file header (fixed part and body).
std::string encode_header(const SegmentHeader& header);

// --- payload decoders: false (and `error` set) on a malformed payload ------

bool decode_event(std::string_view payload, Event& event, std::string& error);
bool decode_alert(std::string_view payload, AlertRecord& alert, std::string& error);
bool decode_note(std::string_view payload, NoteRecord& note, std::string& error);
bool decode_gap(std::string_view payload, GapRecord& gap, std::string& error);
bool decode_clock(std::string_view payload, int64_t& realtime_offset_ns, std::string& error);
bool decode_gpu_devices(std::string_view payload, std::vector<GpuDeviceNumber>& devices,
                        std::string& error);
bool decode_segment_end(std::string_view payload, SegmentEnd& end, std::string& error);

// The event's ts_ns without decoding the rest (nullopt if malformed).
std::optional<uint64_t> peek_event_ts(std::string_view payload);

// Parses a file header from the start of `file`. nullopt with `error` set
// when it is short, has the wrong magic, another major version or a bad CRC;
// `header_size` is the number of bytes it takes.
std::optional<SegmentHeader> decode_header(std::string_view file, size_t& header_size,
                                           std::string& error);

// --- record frames ------------------------------------------------------

// Appends a frame (16 bytes) and `payload` to `out`.
void append_frame(RecordKind kind, uint8_t flags, std::string_view payload, std::string& out);

// Inner records of a block: u8 kind, varint length, payload.
void append_inner(RecordKind kind, std::string_view payload, std::string& out);
// Reads the inner record at `pos` and advances it; false when the rest of
// `data` is not a whole inner record. `kind` is the raw byte (may be unknown).
bool read_inner(std::string_view data, size_t& pos, uint8_t& kind, std::string_view& payload);

// Does this event payload change what a process snapshot holds (exec, fork,
// exit, gpu_open, process_snapshot)? Looks at the type byte only.
bool event_changes_process_state(std::string_view payload);

// A frame read from a buffer.
struct Frame {
    RecordKind kind{};
    uint8_t flags = 0;
    std::string_view payload;
};

enum class FrameStatus {
    kOk,
    kTruncated,  // fewer bytes than the frame says (a torn write)
    kCorrupt,    // bad magic, length out of range or CRC mismatch
};

// Checks the frame at the start of `bytes`.
FrameStatus check_frame(std::string_view bytes, Frame& frame);

// Little-endian and varint helpers shared with the writer and reader.
void put_u32(std::string& out, uint32_t value);
uint32_t get_u32(const char* p);

}  // namespace gpuguard::agent::journal
