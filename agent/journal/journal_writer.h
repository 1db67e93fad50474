// The journal writer's private parts, shared by journal.cpp (the caller
// side), journal_segments.cpp (the writer thread: segments, rotation,
// retention, fsync) and journal_incidents.cpp (incident bundles).
#pragma once

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <deque>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "gpuguard/common/clock.h"
#include "gpuguard/common/logging.h"
#include "gpuguard/common/write_all.h"
#include "gpuguard/events/event_json.h"
#include "gpuguard/journal/journal.h"
#include "gpuguard/version.h"

namespace gpuguard::agent::journal {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;

constexpr uint8_t kTriggerMarker = 0x80;  // queue-only inner record: an incident trigger
constexpr int64_t kClockJitterNs = 1'000'000;
constexpr size_t kRingChunkBytes = 256 << 10;
constexpr size_t kWriteChunkBytes = 1 << 20;
constexpr auto kRetentionInterval = std::chrono::seconds(60);
constexpr size_t kSegmentEndReserve = 48;  // its frame, a varint and the reason

inline std::string segment_file_name(uint64_t sequence) {
    char name[40];
    std::snprintf(name, sizeof name, "seg-%012" PRIu64 ".ggj", sequence);
    return name;
}

// "seg-000000000042.ggj" -> 42.
inline std::optional<uint64_t> segment_sequence(const std::string& name) {
    uint64_t sequence = 0;
    char tail[8] = {};
    if (name.size() != 20 ||
        std::sscanf(name.c_str(), "seg-%12" SCNu64 ".%3s", &sequence, tail) != 2 ||
        std::string(tail) != "ggj") {
        return std::nullopt;
    }
    return sequence;
}

inline void fsync_directory(const fs::path& dir) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    ::fsync(fd);
    ::close(fd);
}

inline int64_t mtime_unix_ns(const fs::path& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return 0;
    return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

// Peeks the timestamp of a record of any kind (0 when it has none).
inline uint64_t record_ts(uint8_t kind, std::string_view payload) {
    switch (static_cast<RecordKind>(kind)) {
        case RecordKind::kEvent:
            return peek_event_ts(payload).value_or(0);
        case RecordKind::kDetection:
        case RecordKind::kEnforcement: {
            AlertRecord alert;
            std::string error;
            return decode_alert(payload, alert, error) ? alert.ts_ns : 0;
        }
        case RecordKind::kNote: {
            NoteRecord note;
            std::string error;
            return decode_note(payload, note, error) ? note.ts_ns : 0;
        }
        default:
            return 0;
    }
}

inline std::string safe_label(std::string_view text) {
    std::string out;
    for (char c : text.substr(0, 48)) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
        out.push_back(ok ? c : '_');
    }
    return out;
}

// 20261121T234929Z
inline std::string compact_utc(int64_t unix_ns) {
    const time_t seconds = static_cast<time_t>(unix_ns / 1'000'000'000);
    struct tm utc {};
    gmtime_r(&seconds, &utc);
    char text[32];
    std::strftime(text, sizeof text, "%Y%m%dT%H%M%SZ", &utc);
    return text;
}

struct ZstdCctxDeleter {
    void operator()(ZSTD_CCtx* context) const { ZSTD_freeCCtx(context); }
};

// --- the writer thread's state ----------------------------------------------

struct JournalWriter::Writer {
    struct Incident {
        int fd = -1;
        fs::path dir;
        uint64_t trigger_ts_ns = 0;
        uint64_t until_ts_ns = 0;
        uint64_t lookback_events = 0;
        uint64_t events = 0;
        uint64_t records = 0;
        uint64_t detections = 0;
        std::string out;
        bool failed = false;
        // The watched-file changes among its events (file_change with a
        // kind): summary.json lists them, the responder's checklist.
        nlohmann::ordered_json file_changes = nlohmann::ordered_json::array();
    };

    Writer(const JournalOptions& options_in, JournalIdentity identity_in)
        : options(options_in), identity(std::move(identity_in)), log(logger("journal")) {}

    const JournalOptions& options;
    JournalIdentity identity;
    std::shared_ptr<spdlog::logger> log;

    // The open segment.
    int fd = -1;
    fs::path path;
    uint64_t next_sequence = 1;
    uint64_t size = 0;  // bytes in the file
    uint64_t created_mono_ns = 0;
    uint64_t segment_records = 0;
    bool has_records = false;  // beyond the opening snapshot

    // Frames not yet written, and records not yet sealed into a zstd block.
    struct Pending {
        std::string bytes;
        uint64_t events = 0;
        uint64_t records = 0;
        uint64_t first_ts = 0;
        uint64_t last_ts = 0;
        void count(bool is_event, uint64_t ts) {
            if (is_event) ++events;
            ++records;
            if (ts) {
                if (!first_ts) first_ts = ts;
                last_ts = std::max(last_ts, ts);
            }
        }
        void take(Pending& other) {
            events += other.events;
            records += other.records;
            if (!first_ts) first_ts = other.first_ts;
            last_ts = std::max(last_ts, other.last_ts);
            other.events = other.records = other.first_ts = other.last_ts = 0;
        }
        void reset() {
            bytes.clear();
            events = records = first_ts = last_ts = 0;
        }
    };
    Pending out;
    Pending block;
    SteadyClock::time_point block_started;
    std::string scratch;
    std::unique_ptr<ZSTD_CCtx, ZstdCctxDeleter> cctx;

    // What a snapshot holds: the processes seen so far, by pid.
    std::map<uint32_t, Event> processes;
    // ... and the containers those processes run in, by id (bounded: the
    // oldest ids go first), written before them.
    std::map<std::string, Event> containers;
    std::deque<std::string> container_order;
    // ... and the workload (job or pod, allocation) of those that have
    // one, by pid, written after them.
    std::map<uint32_t, Event> workloads;
    std::vector<GpuDeviceNumber> gpu_devices;
    int64_t realtime_offset_ns = 0;
    uint64_t last_ts_ns = 0;
    Event decoded;

    // Write failures: while failed, records are counted into `gap`.
    bool failed = false;
    GapRecord gap;
    SteadyClock::time_point retry_at;

    bool dirty = false;
    SteadyClock::time_point last_sync = SteadyClock::now();
    SteadyClock::time_point last_retention = SteadyClock::now();

    std::optional<Incident> incident;
    uint64_t incident_sequence = 0;

    mutable std::mutex stats_mutex;
    JournalStats stats;    // guarded by stats_mutex
    fs::path shared_path;  // the open segment, guarded by stats_mutex

    uint64_t mono_now() const;
    int64_t real_now() const;

    template <typename F>
    void update_stats(F&& change) {
        std::lock_guard lock(stats_mutex);
        change(stats);
    }

    // --- process state for snapshots --------------------------------------

    Event& process_entry(const TaskInfo& task, bool& created);

    void update_state(std::string_view payload);

    // Header and opening snapshot of a segment or incident file; the
    // processes in `leave_out` are not in the snapshot.
    std::string opening(uint64_t sequence, const std::string& kind, bool compressed,
                        const std::set<uint32_t>& leave_out = {});

    // --- segments ---------------------------------------------------------

    // Opens the next segment with its header and snapshot (and the pending
    // gap record after a failure). Returns 0 or the errno of the failure.
    int open_segment();

    // Ends the open segment (segment_end record, sync, close).
    void end_segment(const char* reason);

    bool rotate(const char* reason);

    void fail_writes(int error, const std::string& what);

    void drop(uint64_t events, uint64_t records, uint64_t first_ts, uint64_t last_ts);

    bool flush_out();

    void seal_block();

    bool needs_rotation(size_t next_bytes) const;

    // One record from the queue.
    void on_record(uint8_t kind, std::string_view payload);

    void process(std::string_view batch, std::vector<TriggerCommand>& triggers);

    void sync();

    // Periodic work: incident end, block sealing, fsync, age rotation, retention, retry.
    void timers(bool close_incident_on_clock);

    void shutdown();

    // --- retention --------------------------------------------------------

    void enforce_retention();

    // Incident bundles count toward retention_max_bytes but may hold at most
    // half of it, so neither a burst of incidents nor a busy journal pushes
    // the other out entirely: past half, or past the maximum age, the oldest
    // closed bundles go first. Returns the bytes of the bundles kept.
    uint64_t prune_incidents(int64_t now, int64_t max_age_ns);

    // --- incident bundles -------------------------------------------------

    void write_file(const fs::path& file, const std::string& text);

    void start_incident(TriggerCommand& command);

    void incident_record(RecordKind kind, std::string_view payload, uint64_t ts);
    // A file_change among the bundle's events goes into its summary.
    void note_file_change(Incident& bundle, RecordKind kind, std::string_view payload);

    void write_incident();

    void close_incident();
};

}  // namespace gpuguard::agent::journal
