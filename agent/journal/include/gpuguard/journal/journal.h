// The forensic journal (docs/journal.md): every event, detection and
// enforcement outcome, appended to checksummed segment files off the hot
// path, rotated and pruned; a look-back window of recent events kept in
// memory for incident bundles; and the reader that `gpuguard journal` and
// `gpuguard replay` use.
//
// JournalWriter owns one thread. append*() and trigger() never wait on the
// disk: they copy the record into a bounded queue, and a full queue or a
// failed write (ENOSPC, EIO) counts the record as dropped, logs once per
// burst and writes a gap record when writing resumes.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "gpuguard/common/detection.h"
#include "gpuguard/common/result.h"
#include "gpuguard/events/event.h"
#include "gpuguard/events/gpu_devices.h"
#include "gpuguard/journal/journal_codec.h"

namespace gpuguard::agent {

namespace journal {

struct JournalOptions {
    std::filesystem::path dir = "/var/lib/gpuguard/journal";
    uint64_t segment_max_bytes = 64ull << 20;   // rotate before a segment grows past this
    uint64_t segment_max_age_s = 3600;          // rotate a segment this old (0: never)
    uint64_t retention_max_bytes = 1ull << 30;  // all segments together (0: unbounded)
    uint64_t retention_max_age_s = 7 * 86400;   // delete older segments/incidents (0: never)
    uint32_t fsync_interval_ms = 1000;          // fdatasync at most this often; 0: every write
    bool compress = false;                      // zstd blocks
    int compression_level = 3;
    size_t block_bytes = 64 << 10;         // uncompressed bytes per zstd block
    uint32_t lookback_s = 60;              // events kept in memory for incident bundles
    uint32_t incident_after_s = 60;        // events added to a bundle after its trigger
    size_t lookback_max_bytes = 64 << 20;  // memory bound of the look-back window
    size_t queue_events = 65536;           // bound of the writer's queue (events)
    size_t queue_max_bytes = 64 << 20;     // ... and bytes
    size_t max_tracked_processes = 32768;  // process state kept for segment snapshots
    uint32_t retry_interval_ms = 1000;     // after a failed write, how often to try again
    // CLOCK_MONOTONIC ns (the clock of Event::ts_ns): segment age, incident end.
    std::function<uint64_t()> monotonic_clock;
    // CLOCK_REALTIME ns: retention by age, segment headers.
    std::function<int64_t()> realtime_clock;
};

// Written into every segment header.
struct JournalIdentity {
    HostInfo host;
    std::string rule_pack_version;
};

// Fills hostname, boot id (/proc/sys/kernel/random/boot_id) and kernel
// release (uname) of this host; `agent_version` is GPUGUARD_VERSION.
JournalIdentity local_identity(std::string rule_pack_version);

struct JournalStats {
    uint64_t events_written = 0;   // events in segments (snapshots excluded)
    uint64_t records_written = 0;  // all records, snapshots included
    uint64_t bytes_written = 0;
    uint64_t dropped_queue_full = 0;    // records refused because the queue was full
    uint64_t dropped_write_failed = 0;  // records lost because a write failed
    uint64_t write_errors = 0;          // failed writes (each may lose many records)
    uint64_t syncs = 0;                 // fdatasync calls on segments
    uint64_t segments_created = 0;
    uint64_t segments_deleted = 0;  // by retention
    uint64_t incidents_written = 0;
    uint64_t incidents_deleted = 0;  // by retention
    uint64_t incidents_failed = 0;
    uint64_t tracked_processes = 0;
    bool writing = true;     // false while writes fail
    std::string last_error;  // of the latest failed write, "" if none

    uint64_t dropped() const { return dropped_queue_full + dropped_write_failed; }
};

class JournalWriter {
  public:
    // Creates `options.dir` if needed and starts the writer thread; the
    // first segment opens with `snapshot` (ProcessSnapshot events, e.g. from
    // gpuguard/state/process_table.h's snapshot_event()) and `gpu_devices`. Fails with
    // kIo/kPermission when the directory cannot be created or written; a full disk is not a failure
    // (the writer drops and retries).
    static Result<std::unique_ptr<JournalWriter>> open(JournalOptions options,
                                                       JournalIdentity identity,
                                                       std::vector<Event> snapshot,
                                                       std::vector<GpuDeviceNumber> gpu_devices);
    ~JournalWriter();  // close()
    JournalWriter(const JournalWriter&) = delete;
    JournalWriter& operator=(const JournalWriter&) = delete;

    // Queues `event` (and keeps it in the look-back window). The offset is
    // CLOCK_REALTIME - CLOCK_MONOTONIC (monotonic_to_realtime_offset_ns());
    // a clock record is journaled when it moves by more than 1 ms. Returns
    // false when the event was dropped (queue full or journal closed). Never
    // blocks on I/O; safe from any thread.
    bool append(const Event& event, int64_t realtime_offset_ns);

    // A detection or enforcement outcome as the SIEM formats it (ECS JSON),
    // with the rule id and pid for filtering. ts_ns is CLOCK_MONOTONIC.
    bool append_detection(uint64_t ts_ns, uint32_t pid, std::string_view rule_id,
                          std::string_view json);
    bool append_enforcement(uint64_t ts_ns, uint32_t pid, std::string_view rule_id,
                            std::string_view json);
    // An agent note ("agent started", "config reloaded"); level as spdlog's.
    bool append_note(uint64_t ts_ns, std::string_view level, std::string_view text);

    // GPU device numbers recorded in the snapshot of later segments.
    void set_gpu_devices(std::vector<GpuDeviceNumber> devices);

    // Writes an incident bundle under <dir>/incidents/: the look-back window
    // (events of the last lookback_s before ts_ns), the detection, and the
    // records of the following incident_after_s seconds. A trigger while a
    // bundle is open extends it: the detection is in it already, as the
    // record append_detection() queued just before (call that first, as the
    // agent does; a bundle holds each detection once). Returns false
    // when the journal is closed; a bundle that cannot be written is counted
    // in incidents_failed and logged.
    bool trigger(uint64_t ts_ns, uint32_t pid, std::string_view rule_id,
                 std::string_view detection_json);

    // Waits until everything queued before the call is written and synced
    // (or dropped). For shutdown and tests.
    void flush();
    // Flushes, closes an open incident bundle, ends the segment; idempotent.
    void close();

    JournalStats stats() const;
    std::filesystem::path current_segment() const;

  private:
    struct Writer;  // state owned by the writer thread
    struct RingChunk {
        std::string data;  // inner records (u8 kind, varint length, payload)
        uint64_t last_ts_ns = 0;
    };
    struct TriggerCommand {
        AlertRecord detection;
        std::string lookback;  // inner event records
    };

    explicit JournalWriter(JournalOptions options);
    bool enqueue(RecordKind kind, std::string_view payload, bool is_event, uint64_t ts_ns);
    void ring_add(std::string_view inner, uint64_t ts_ns);
    void note_queue_drop(bool is_event, uint64_t ts_ns);
    void run();

    const JournalOptions options_;
    std::unique_ptr<Writer> writer_;
    std::thread thread_;

    mutable std::mutex mutex_;
    std::condition_variable wake_writer_;
    std::condition_variable flushed_;
    std::string pending_;  // inner records for the writer
    size_t pending_events_ = 0;
    std::vector<TriggerCommand> triggers_;
    std::optional<std::vector<GpuDeviceNumber>> new_gpu_devices_;
    std::string scratch_;
    std::string inner_;
    int64_t realtime_offset_ns_ = 0;
    bool have_offset_ = false;
    bool writer_waiting_ = false;
    bool stopping_ = false;
    bool closed_ = false;
    uint64_t flush_requested_ = 0;
    uint64_t flush_done_ = 0;
    std::deque<RingChunk> ring_;
    size_t ring_bytes_ = 0;
    // Queue-full burst: counted here, reported as a gap record when it ends.
    GapRecord queue_gap_;
    bool in_queue_burst_ = false;

    std::atomic<uint64_t> dropped_queue_full_{0};
};

// --- reading ----------------------------------------------------------------

enum class SnapshotMode {
    kAuto,  // a segment's snapshot unless it continues the previous segment (clean rotation)
    kAll,   // every segment's snapshot
    kNone,  // never
};

struct ReaderOptions {
    std::optional<int64_t> since_unix_ns;  // records at or after (wall clock)
    std::optional<int64_t> until_unix_ns;  // records at or before
    std::optional<uint32_t> pid;           // events of, and alerts about, this process
    std::vector<std::string> types;        // record_type() names; empty: all
    SnapshotMode snapshots = SnapshotMode::kAuto;
    bool meta = false;  // also clock, gpu_devices, snapshot_end and segment_end records
};

// One record read back. Only the member that matches `kind` is filled.
struct JournalRecord {
    RecordKind kind = RecordKind::kEvent;
    uint64_t ts_ns = 0;              // CLOCK_MONOTONIC of the record
    int64_t realtime_offset_ns = 0;  // in effect for it
    bool in_snapshot = false;        // part of its segment's opening snapshot
    size_t segment = 0;              // index into JournalReader::segments()
    uint64_t offset = 0;             // of its frame (of the block, for compressed records)
    Event event;                     // kEvent
    AlertRecord alert;               // kDetection, kEnforcement
    NoteRecord note;                 // kNote
    GapRecord gap;                   // kGap
    std::vector<GpuDeviceNumber> gpu_devices;  // kGpuDevices
    SegmentEnd segment_end;                    // kSegmentEnd

    int64_t time_unix_ns() const { return static_cast<int64_t>(ts_ns) + realtime_offset_ns; }
};

// "gpu_open", ..., "process_snapshot" for events, else to_string(kind).
std::string record_type(const JournalRecord& record);

struct SegmentInfo {
    std::filesystem::path path;
    uint64_t size = 0;
    bool header_ok = false;
    SegmentHeader header;
    uint64_t records = 0;    // valid records read from it so far
    bool clean_end = false;  // ends with a segment_end record
};

struct JournalProblem {
    enum class Kind {
        kTornTail,       // the last record is cut short (crash during a write)
        kCorruptTail,    // the bytes after the last valid record are not a record
        kCorruptRecord,  // a bad record in the middle, skipped
        kUndecodable,    // CRC good but the payload does not decode
        kBadHeader,      // the segment's header is unreadable: whole file skipped
        kUnreadable,     // the file could not be read
    };
    Kind kind{};
    std::filesystem::path path;
    uint64_t offset = 0;  // where the problem starts
    uint64_t bytes = 0;   // bytes skipped
    std::string detail;
};

const char* to_string(JournalProblem::Kind kind);

struct ReadStats {
    uint64_t segments = 0;
    uint64_t records = 0;  // valid records, filtered or not
    uint64_t corrupt_records = 0;
    uint64_t undecodable_records = 0;
    uint64_t unknown_records = 0;  // kinds this build does not know (newer writer)
    uint64_t skipped_bytes = 0;
    uint64_t torn_tails = 0;
};

class JournalReader {
  public:
    // Each path is a journal directory (its *.ggj files in name order, i.e.
    // sequence order), an incident bundle directory, or a segment file.
    // Fails with kNotFound when a path does not exist; a directory without
    // segments gives an empty reader.
    static Result<JournalReader> open(const std::vector<std::filesystem::path>& paths,
                                      ReaderOptions options = {});

    JournalReader(JournalReader&&) noexcept;
    JournalReader& operator=(JournalReader&&) noexcept;
    ~JournalReader();

    // The next record that passes the filters; false at the end. Damage never
    // fails the read: it is skipped and listed in problems().
    bool next(JournalRecord& record);

    const std::vector<SegmentInfo>& segments() const { return segments_; }
    const std::vector<JournalProblem>& problems() const { return problems_; }
    const ReadStats& stats() const { return stats_; }
    // No problems so far (call after reading everything to verify).
    bool clean() const { return problems_.empty(); }

  private:
    struct State;
    JournalReader();

    bool load_segment();
    bool next_raw(JournalRecord& record);
    bool handle(RecordKind kind, std::string_view payload, JournalRecord& record);
    bool wanted(const JournalRecord& record) const;
    void problem(JournalProblem::Kind kind, uint64_t offset, uint64_t bytes, std::string detail);

    ReaderOptions options_;
    std::vector<SegmentInfo> segments_;
    std::vector<JournalProblem> problems_;
    ReadStats stats_;
    std::unique_ptr<State> state_;
};

// True when `path` is a segment file (by its magic) or a directory that
// holds *.ggj files: lets `gpuguard replay` tell native journals from JSON Lines.
bool is_journal(const std::filesystem::path& path);

// Parses a --since/--until argument: RFC 3339, "now", or relative to `now_unix_ns`
// ("-10m", "-90s", "-2h", "-1d", "-500ms"). nullopt when it is neither.
std::optional<int64_t> parse_time_argument(std::string_view text, int64_t now_unix_ns);

}  // namespace journal
}  // namespace gpuguard::agent
