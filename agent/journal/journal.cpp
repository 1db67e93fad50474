// JournalWriter: the caller side (queue, look-back ring, drop accounting) and
// the writer thread (segments, rotation, retention, fsync, incident bundles).
#include "gpuguard/journal/journal.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <fcntl.h>
#include <nlohmann/json.hpp>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "gpuguard/events/event_json.h"
#include "gpuguard/common/logging.h"
#include "gpuguard/version.h"

namespace gpuguard::agent::journal {
namespace {

namespace fs = std::filesystem;
using SteadyClock = std::chrono::steady_clock;

constexpr uint8_t kTriggerMarker = 0x80;  // queue-only inner record: an incident trigger
constexpr int64_t kClockJitterNs = 1'000'000;
constexpr size_t kRingChunkBytes = 256 << 10;
constexpr size_t kWriteChunkBytes = 1 << 20;
constexpr auto kRetentionInterval = std::chrono::seconds(60);
constexpr size_t kSegmentEndReserve = 48;  // its frame, a varint and the reason

uint64_t monotonic_now() {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(now.tv_nsec);
}

int64_t realtime_now() {
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

std::string segment_file_name(uint64_t sequence) {
    char name[40];
    std::snprintf(name, sizeof name, "seg-%012" PRIu64 ".ggj", sequence);
    return name;
}

// "seg-000000000042.ggj" -> 42.
std::optional<uint64_t> segment_sequence(const std::string& name) {
    uint64_t sequence = 0;
    char tail[8] = {};
    if (name.size() != 20 ||
        std::sscanf(name.c_str(), "seg-%12" SCNu64 ".%3s", &sequence, tail) != 2 ||
        std::string(tail) != "ggj") {
        return std::nullopt;
    }
    return sequence;
}

// Writes everything or returns the errno of the failure.
int write_all(int fd, std::string_view data) {
    while (!data.empty()) {
        const ssize_t n = ::write(fd, data.data(), data.size());
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        if (n == 0) return EIO;
        data.remove_prefix(static_cast<size_t>(n));
    }
    return 0;
}

void fsync_directory(const fs::path& dir) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return;
    ::fsync(fd);
    ::close(fd);
}

int64_t mtime_unix_ns(const fs::path& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return 0;
    return static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

// Peeks the timestamp of a record of any kind (0 when it has none).
uint64_t record_ts(uint8_t kind, std::string_view payload) {
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

std::string safe_label(std::string_view text) {
    std::string out;
    for (char c : text.substr(0, 48)) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
        out.push_back(ok ? c : '_');
    }
    return out;
}

// 20261121T234929Z
std::string compact_utc(int64_t unix_ns) {
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

}  // namespace

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

    uint64_t mono_now() const {
        return options.monotonic_clock ? options.monotonic_clock() : monotonic_now();
    }
    int64_t real_now() const {
        return options.realtime_clock ? options.realtime_clock() : realtime_now();
    }

    template <typename F>
    void update_stats(F&& change) {
        std::lock_guard lock(stats_mutex);
        change(stats);
    }

    // --- process state for snapshots --------------------------------------

    Event& process_entry(const TaskInfo& task, bool& created) {
        auto [it, inserted] = processes.try_emplace(task.pid);
        created = inserted;
        if (inserted) {
            it->second.task = task;
            it->second.data = ProcessSnapshot{};
        }
        return it->second;
    }

    void update_state(std::string_view payload) {
        if (!event_changes_process_state(payload)) return;
        std::string error;
        if (!decode_event(payload, decoded, error)) return;
        const TaskInfo& task = decoded.task;
        const bool full = processes.size() >= options.max_tracked_processes;
        struct Visitor {
            Writer& w;
            const TaskInfo& task;
            bool full;
            void operator()(const Exec& exec) {
                if (full && !w.processes.contains(task.pid)) return;
                bool created = false;
                Event& entry = w.process_entry(task, created);
                entry.task = task;
                entry.task.tid = task.pid;
                auto& snapshot = std::get<ProcessSnapshot>(entry.data);
                snapshot.exe = exec.filename;
                snapshot.argv = exec.argv;
            }
            void operator()(const Fork& fork) {
                if (full) return;
                Event child;
                if (auto parent = w.processes.find(task.pid); parent != w.processes.end()) {
                    child = parent->second;
                    auto& snapshot = std::get<ProcessSnapshot>(child.data);
                    if (!fork.inherited_gpu) snapshot.gpus.clear();
                } else {
                    child.task = task;
                    child.data = ProcessSnapshot{};
                }
                child.task.pid = child.task.tid = fork.child_pid;
                child.task.ppid = task.pid;
                w.processes[fork.child_pid] = std::move(child);
            }
            void operator()(const Exit&) { w.processes.erase(task.pid); }
            void operator()(const GpuOpen& open) {
                if (!open.succeeded() || (full && !w.processes.contains(task.pid))) return;
                bool created = false;
                Event& entry = w.process_entry(task, created);
                auto& gpus = std::get<ProcessSnapshot>(entry.data).gpus;
                const SnapshotGpu gpu{open.major, open.minor, open.result};
                if (std::find(gpus.begin(), gpus.end(), gpu) == gpus.end()) gpus.push_back(gpu);
            }
            void operator()(const ProcessSnapshot& snapshot) {
                if (full && !w.processes.contains(task.pid)) return;
                Event& entry = w.processes[task.pid];
                entry.task = task;
                entry.data = snapshot;
            }
            void operator()(const GpuIoctl&) {}
            void operator()(const Connect&) {}
            void operator()(const Telemetry&) {}
            void operator()(const KillNow&) {}
            void operator()(const ExeScan&) {}
            void operator()(const NetPayload&) {}
            void operator()(const Stratum&) {}
            void operator()(const ProcessIo&) {}
        };
        std::visit(Visitor{*this, task, full}, decoded.data);
    }

    // Header and opening snapshot of a segment or incident file.
    std::string opening(uint64_t sequence, const std::string& kind, bool compressed) {
        SegmentHeader header;
        header.sequence = sequence;
        header.created_unix_ns = real_now();
        header.created_mono_ns = mono_now();
        header.realtime_offset_ns = realtime_offset_ns;
        header.hostname = identity.host.hostname;
        header.boot_id = identity.host.boot_id;
        header.kernel = identity.host.kernel;
        header.agent_version = identity.host.agent_version;
        header.rule_pack_version = identity.rule_pack_version;
        header.kind = kind;
        header.compressed = compressed;
        std::string bytes = encode_header(header);
        scratch.clear();
        encode_clock(realtime_offset_ns, scratch);
        append_frame(RecordKind::kClock, 0, scratch, bytes);
        scratch.clear();
        encode_gpu_devices(gpu_devices, scratch);
        append_frame(RecordKind::kGpuDevices, 0, scratch, bytes);
        const uint64_t snapshot_ts = last_ts_ns ? last_ts_ns : header.created_mono_ns;
        for (auto& [pid, event] : processes) {
            event.ts_ns = snapshot_ts;
            scratch.clear();
            encode_event(event, scratch);
            append_frame(RecordKind::kEvent, 0, scratch, bytes);
        }
        scratch.clear();
        encode_snapshot_end(processes.size(), scratch);
        append_frame(RecordKind::kSnapshotEnd, 0, scratch, bytes);
        return bytes;
    }

    // --- segments ---------------------------------------------------------

    // Opens the next segment with its header and snapshot (and the pending
    // gap record after a failure). Returns 0 or the errno of the failure.
    int open_segment() {
        const bool compressed = options.compress;
        size_t snapshot_records = processes.size() + 3;
        std::string gap_frame;
        if (failed && (gap.dropped_events || gap.dropped_records)) {
            ++snapshot_records;
            scratch.clear();
            encode_gap(gap, scratch);
            append_frame(RecordKind::kGap, 0, scratch, gap_frame);
        }
        int new_fd = -1;
        fs::path new_path;
        for (int attempt = 0; attempt < 100; ++attempt) {
            new_path = options.dir / segment_file_name(next_sequence);
            new_fd =
                ::open(new_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0640);
            if (new_fd >= 0 || errno != EEXIST) break;
            ++next_sequence;  // a file we did not expect: never overwrite it
        }
        if (new_fd < 0) return errno;
        const std::string bytes = opening(next_sequence, "segment", compressed) + gap_frame;
        const int error = write_all(new_fd, bytes);
        if (error != 0 || ::fdatasync(new_fd) != 0) {
            const int err = error ? error : errno;
            ::close(new_fd);
            ::unlink(new_path.c_str());
            return err;
        }
        fsync_directory(options.dir);
        fd = new_fd;
        path = new_path;
        ++next_sequence;
        size = bytes.size();
        created_mono_ns = mono_now();
        segment_records = snapshot_records;
        has_records = false;
        update_stats([&](JournalStats& s) {
            shared_path = new_path;
            ++s.segments_created;
            s.records_written += snapshot_records;
            s.bytes_written += bytes.size();
        });
        return 0;
    }

    // Ends the open segment (segment_end record, sync, close).
    void end_segment(const char* reason) {
        if (fd < 0) return;
        seal_block();
        flush_out();
        if (fd >= 0 && !failed) {
            scratch.clear();
            encode_segment_end(SegmentEnd{segment_records, reason}, scratch);
            std::string frame;
            append_frame(RecordKind::kSegmentEnd, 0, scratch, frame);
            if (write_all(fd, frame) != 0) {
                (void)::ftruncate(fd, static_cast<off_t>(size));
            } else {
                size += frame.size();
            }
            ::fdatasync(fd);
        }
        if (fd >= 0) ::close(fd);
        fd = -1;
        dirty = false;
    }

    bool rotate(const char* reason) {
        end_segment(reason);
        const int error = open_segment();
        if (error != 0) {
            fail_writes(error, "cannot create segment " +
                                   (options.dir / segment_file_name(next_sequence)).string());
            return false;
        }
        if (failed) {
            log->info("journal: writing again to {} after {} dropped events and {} other records",
                      path.string(), gap.dropped_events, gap.dropped_records);
            failed = false;
            gap = GapRecord{};
        }
        update_stats([&](JournalStats& s) {
            s.writing = true;
            s.tracked_processes = processes.size();
        });
        enforce_retention();
        return true;
    }

    void fail_writes(int error, const std::string& what) {
        const std::string message = what + ": " + std::strerror(error);
        if (!failed) {
            log->warn("journal: {}; dropping records until writing works again", message);
            failed = true;
            gap.reason = std::string("write_failed: ") + std::strerror(error);
        }
        retry_at = SteadyClock::now() + std::chrono::milliseconds(options.retry_interval_ms);
        update_stats([&](JournalStats& s) {
            ++s.write_errors;
            s.writing = false;
            s.last_error = message;
        });
    }

    void drop(uint64_t events, uint64_t records, uint64_t first_ts, uint64_t last_ts) {
        gap.dropped_events += events;
        gap.dropped_records += records - events;
        if (first_ts && (!gap.first_ts_ns || first_ts < gap.first_ts_ns))
            gap.first_ts_ns = first_ts;
        gap.last_ts_ns = std::max(gap.last_ts_ns, last_ts);
        update_stats([&](JournalStats& s) { s.dropped_write_failed += records; });
    }

    bool flush_out() {
        if (out.bytes.empty()) return true;
        if (fd < 0) {
            drop(out.events, out.records, out.first_ts, out.last_ts);
            out.reset();
            return false;
        }
        const int error = write_all(fd, out.bytes);
        if (error != 0) {
            // Cut the partial write off so the segment ends on a whole record.
            (void)::ftruncate(fd, static_cast<off_t>(size));
            fail_writes(error, "write to " + path.string());
            drop(out.events, out.records, out.first_ts, out.last_ts);
            out.reset();
            return false;
        }
        size += out.bytes.size();
        segment_records += out.records;
        dirty = true;
        update_stats([&](JournalStats& s) {
            s.events_written += out.events;
            s.records_written += out.records;
            s.bytes_written += out.bytes.size();
        });
        out.reset();
        return true;
    }

    void seal_block() {
        if (block.bytes.empty()) return;
        if (!cctx) cctx.reset(ZSTD_createCCtx());
        scratch.resize(ZSTD_compressBound(block.bytes.size()));
        const size_t n =
            ZSTD_compressCCtx(cctx.get(), scratch.data(), scratch.size(), block.bytes.data(),
                              block.bytes.size(), options.compression_level);
        if (ZSTD_isError(n)) {
            log->error("journal: zstd: {}", ZSTD_getErrorName(n));
            drop(block.events, block.records, block.first_ts, block.last_ts);
            block.reset();
            return;
        }
        append_frame(RecordKind::kBlock, kFlagZstd, std::string_view(scratch.data(), n), out.bytes);
        out.take(block);
        block.reset();
    }

    bool needs_rotation(size_t next_bytes) const {
        if (fd < 0) return true;
        if (!has_records) return false;
        // Room is kept for the segment_end record, so a file never exceeds the maximum.
        if (size + out.bytes.size() + block.bytes.size() + next_bytes + kSegmentEndReserve >
            options.segment_max_bytes) {
            return true;
        }
        return options.segment_max_age_s &&
               mono_now() - created_mono_ns >= options.segment_max_age_s * 1'000'000'000;
    }

    // One record from the queue.
    void on_record(uint8_t kind, std::string_view payload) {
        const auto record_kind = static_cast<RecordKind>(kind);
        const bool is_event = record_kind == RecordKind::kEvent;
        const uint64_t ts = record_ts(kind, payload);
        if (record_kind == RecordKind::kClock) {
            std::string error;
            (void)decode_clock(payload, realtime_offset_ns, error);
        }
        if (is_event) {
            update_state(payload);
            last_ts_ns = std::max(last_ts_ns, ts);
        }
        incident_record(record_kind, payload, ts);

        if (failed) {
            if (SteadyClock::now() < retry_at || !rotate("recover")) {
                drop(is_event ? 1 : 0, 1, ts, ts);
                return;
            }
        }
        const size_t frame_bytes = kFrameSize + payload.size();
        if (needs_rotation(frame_bytes)) {
            if (!rotate(fd < 0 ? "recover" : "rotate")) {
                drop(is_event ? 1 : 0, 1, ts, ts);
                return;
            }
        }
        has_records = true;
        if (options.compress) {
            if (block.bytes.empty()) block_started = SteadyClock::now();
            append_inner(record_kind, payload, block.bytes);
            block.count(is_event, ts);
            if (block.bytes.size() >= options.block_bytes) seal_block();
        } else {
            append_frame(record_kind, 0, payload, out.bytes);
            out.count(is_event, ts);
        }
        if (out.bytes.size() >= kWriteChunkBytes) flush_out();
    }

    void process(std::string_view batch, std::vector<TriggerCommand>& triggers) {
        size_t pos = 0;
        uint8_t kind = 0;
        std::string_view payload;
        while (read_inner(batch, pos, kind, payload)) {
            if (kind == kTriggerMarker) {
                size_t index = 0;
                for (char c : payload) index = index * 10 + static_cast<size_t>(c - '0');
                if (index < triggers.size()) start_incident(triggers[index]);
                continue;
            }
            on_record(kind, payload);
        }
        flush_out();
        write_incident();
    }

    void sync() {
        seal_block();
        flush_out();
        if (fd >= 0 && dirty) {
            ::fdatasync(fd);
            dirty = false;
            update_stats([](JournalStats& s) { ++s.syncs; });
        }
        last_sync = SteadyClock::now();
        write_incident();
    }

    // Periodic work: incident end, block sealing, fsync, age rotation, retention, retry.
    void timers(bool close_incident_on_clock) {
        const auto now = SteadyClock::now();
        if (incident && close_incident_on_clock && mono_now() > incident->until_ts_ns) {
            close_incident();
        }
        const auto interval = std::chrono::milliseconds(options.fsync_interval_ms);
        if (!block.bytes.empty() && now - block_started >= interval) {
            seal_block();
            flush_out();
        }
        if (dirty && now - last_sync >= interval) sync();
        if (fd >= 0 && has_records && options.segment_max_age_s &&
            mono_now() - created_mono_ns >= options.segment_max_age_s * 1'000'000'000) {
            rotate("rotate");
        }
        if (failed && now >= retry_at) rotate("recover");
        if (now - last_retention >= kRetentionInterval) enforce_retention();
    }

    void shutdown() {
        if (incident) close_incident();
        end_segment("close");
    }

    // --- retention --------------------------------------------------------

    void enforce_retention() {
        last_retention = SteadyClock::now();
        struct Segment {
            uint64_t sequence;
            fs::path path;
            uint64_t size;
        };
        std::vector<Segment> segments;
        std::error_code ec;
        for (const auto& entry : fs::directory_iterator(options.dir, ec)) {
            const auto sequence = segment_sequence(entry.path().filename().string());
            if (!sequence) continue;
            std::error_code size_ec;
            const auto bytes = entry.file_size(size_ec);
            segments.push_back({*sequence, entry.path(), size_ec ? 0 : bytes});
        }
        std::sort(segments.begin(), segments.end(),
                  [](const Segment& a, const Segment& b) { return a.sequence < b.sequence; });
        // The open segment counts at its maximum size, so the directory stays
        // within retention_max_bytes while it grows.
        uint64_t total = 0;
        for (const auto& segment : segments) {
            total += segment.path == path
                         ? std::max<uint64_t>(segment.size, options.segment_max_bytes)
                         : segment.size;
        }
        const int64_t now = real_now();
        const int64_t max_age_ns =
            static_cast<int64_t>(options.retention_max_age_s) * 1'000'000'000;
        total += prune_incidents(now, max_age_ns);
        uint64_t deleted = 0;
        for (const auto& segment : segments) {
            if (segment.path == path) break;  // never the open one (nor anything newer)
            const bool too_big = options.retention_max_bytes && total > options.retention_max_bytes;
            const bool too_old = max_age_ns && mtime_unix_ns(segment.path) < now - max_age_ns;
            if (!too_big && !too_old) break;
            if (::unlink(segment.path.c_str()) != 0) {
                log->warn("journal: cannot delete {}: {}", segment.path.string(),
                          std::strerror(errno));
                break;
            }
            log->debug("journal: deleted {} ({})", segment.path.string(),
                       too_big ? "retention_max_mb" : "retention_max_age_h");
            total -= segment.size;
            ++deleted;
        }
        if (deleted) update_stats([&](JournalStats& s) { s.segments_deleted += deleted; });
    }

    // Incident bundles count toward retention_max_bytes but may hold at most
    // half of it, so neither a burst of incidents nor a busy journal pushes
    // the other out entirely: past half, or past the maximum age, the oldest
    // closed bundles go first. Returns the bytes of the bundles kept.
    uint64_t prune_incidents(int64_t now, int64_t max_age_ns) {
        struct Bundle {
            int64_t mtime_ns;
            fs::path dir;
            uint64_t size;
        };
        std::vector<Bundle> bundles;
        uint64_t total = 0;
        std::error_code ec;
        for (const auto& entry : fs::directory_iterator(options.dir / "incidents", ec)) {
            uint64_t size = 0;
            std::error_code walk_ec;
            for (const auto& file : fs::recursive_directory_iterator(entry.path(), walk_ec)) {
                std::error_code size_ec;
                if (file.is_regular_file(size_ec)) size += file.file_size(size_ec);
            }
            total += size;
            if (incident && entry.path() == incident->dir) continue;  // still being written
            bundles.push_back({mtime_unix_ns(entry.path()), entry.path(), size});
        }
        std::sort(bundles.begin(), bundles.end(), [](const Bundle& a, const Bundle& b) {
            return std::tie(a.mtime_ns, a.dir) < std::tie(b.mtime_ns, b.dir);
        });
        const uint64_t budget = options.retention_max_bytes / 2;
        uint64_t deleted = 0;
        for (const auto& bundle : bundles) {
            const bool too_big = options.retention_max_bytes && total > budget;
            const bool too_old = max_age_ns && bundle.mtime_ns < now - max_age_ns;
            if (!too_big && !too_old) continue;  // a newer one may still be too old: keep looking
            std::error_code remove_ec;
            fs::remove_all(bundle.dir, remove_ec);
            if (remove_ec) {
                log->warn("journal: cannot delete {}: {}", bundle.dir.string(),
                          remove_ec.message());
                continue;
            }
            log->debug("journal: deleted {} ({})", bundle.dir.string(),
                       too_big ? "incidents over half of retention_max_mb" : "retention_max_age_h");
            total -= bundle.size;
            ++deleted;
        }
        if (deleted) update_stats([&](JournalStats& s) { s.incidents_deleted += deleted; });
        return total;
    }

    // --- incident bundles -------------------------------------------------

    void write_file(const fs::path& file, const std::string& text) {
        std::ofstream stream(file, std::ios::trunc);
        stream << text;
        if (!stream) log->warn("journal: cannot write {}", file.string());
    }

    void start_incident(TriggerCommand& command) {
        const AlertRecord& detection = command.detection;
        const uint64_t after_ns = uint64_t{options.incident_after_s} * 1'000'000'000;
        if (incident) {
            scratch.clear();
            encode_alert(detection, scratch);
            append_frame(RecordKind::kDetection, 0, scratch, incident->out);
            ++incident->records;
            ++incident->detections;
            incident->until_ts_ns = std::max(incident->until_ts_ns, detection.ts_ns + after_ns);
            write_file(
                incident->dir / ("detection-" + std::to_string(incident->detections) + ".json"),
                detection.json + "\n");
            return;
        }
        ++incident_sequence;
        const int64_t wall = static_cast<int64_t>(detection.ts_ns) + realtime_offset_ns;
        std::string name =
            "incident-" + compact_utc(wall) + "-" + std::to_string(incident_sequence);
        if (!detection.rule_id.empty()) name += "-" + safe_label(detection.rule_id);
        Incident bundle;
        bundle.dir = options.dir / "incidents" / name;
        bundle.trigger_ts_ns = detection.ts_ns;
        bundle.until_ts_ns = detection.ts_ns + after_ns;
        bundle.detections = 1;
        std::error_code ec;
        fs::create_directories(bundle.dir, ec);
        const fs::path file = bundle.dir / "incident.ggj";
        if (!ec) {
            bundle.fd =
                ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0640);
        }
        if (bundle.fd < 0) {
            log->warn("journal: cannot create incident bundle {}: {}", bundle.dir.string(),
                      ec ? ec.message() : std::strerror(errno));
            update_stats([](JournalStats& s) { ++s.incidents_failed; });
            return;
        }
        bundle.out = opening(incident_sequence, "incident", false);
        bundle.records = processes.size() + 3;
        size_t pos = 0;
        uint8_t kind = 0;
        std::string_view payload;
        while (read_inner(command.lookback, pos, kind, payload)) {
            append_frame(static_cast<RecordKind>(kind), 0, payload, bundle.out);
            ++bundle.records;
            ++bundle.lookback_events;
        }
        scratch.clear();
        encode_alert(detection, scratch);
        append_frame(RecordKind::kDetection, 0, scratch, bundle.out);
        ++bundle.records;
        write_file(bundle.dir / "detection.json", detection.json + "\n");
        incident = std::move(bundle);
        log->info("journal: incident bundle {} started ({} events of look-back)",
                  incident->dir.string(), incident->lookback_events);
        write_incident();
    }

    void incident_record(RecordKind kind, std::string_view payload, uint64_t ts) {
        if (!incident) return;
        if (kind == RecordKind::kEvent && ts > incident->until_ts_ns) {
            close_incident();
            return;
        }
        if (kind != RecordKind::kEvent && kind != RecordKind::kDetection &&
            kind != RecordKind::kEnforcement && kind != RecordKind::kNote &&
            kind != RecordKind::kGap && kind != RecordKind::kClock) {
            return;
        }
        append_frame(kind, 0, payload, incident->out);
        ++incident->records;
        if (kind == RecordKind::kEvent) ++incident->events;
    }

    void write_incident() {
        if (!incident || incident->out.empty() || incident->failed) return;
        const int error = write_all(incident->fd, incident->out);
        incident->out.clear();
        if (error != 0) {
            incident->failed = true;
            log->warn("journal: incident bundle {}: {}", incident->dir.string(),
                      std::strerror(error));
        }
    }

    void close_incident() {
        if (!incident) return;
        scratch.clear();
        encode_segment_end(SegmentEnd{incident->records, "incident_end"}, scratch);
        append_frame(RecordKind::kSegmentEnd, 0, scratch, incident->out);
        write_incident();
        ::fdatasync(incident->fd);
        ::close(incident->fd);
        nlohmann::ordered_json summary{
            {"file", "incident.ggj"},
            {"trigger_ts_ns", incident->trigger_ts_ns},
            {"trigger_time",
             format_rfc3339(static_cast<int64_t>(incident->trigger_ts_ns) + realtime_offset_ns)},
            {"until_ts_ns", incident->until_ts_ns},
            {"lookback_s", options.lookback_s},
            {"after_s", options.incident_after_s},
            {"lookback_events", incident->lookback_events},
            {"events_after", incident->events},
            {"detections", incident->detections},
            {"records", incident->records + 1},
            {"complete", !incident->failed}};
        write_file(incident->dir / "summary.json",
                   summary.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
        const bool ok = !incident->failed;
        update_stats([ok](JournalStats& s) { ++(ok ? s.incidents_written : s.incidents_failed); });
        log->info("journal: incident bundle {} closed ({} look-back + {} later events)",
                  incident->dir.string(), incident->lookback_events, incident->events);
        incident.reset();
    }
};

// --- caller side ---------------------------------------------------------------

JournalWriter::JournalWriter(JournalOptions options) : options_(std::move(options)) {}

Result<std::unique_ptr<JournalWriter>> JournalWriter::open(
    JournalOptions options, JournalIdentity identity, std::vector<Event> snapshot,
    std::vector<GpuDeviceNumber> gpu_devices) {
    if (options.dir.empty()) return fail(ErrorCode::kInvalidArgument, "journal.dir is empty");
    if (options.segment_max_bytes < 4096) {
        return fail(ErrorCode::kInvalidArgument, "journal segment size below 4096 bytes");
    }
    std::error_code ec;
    fs::create_directories(options.dir, ec);
    if (ec) {
        return fail(ec.value() == EACCES ? ErrorCode::kPermission : ErrorCode::kIo,
                    "cannot create journal directory " + options.dir.string() + ": " + ec.message(),
                    ec.value());
    }
    if (::access(options.dir.c_str(), W_OK | X_OK) != 0) {
        const int err = errno;
        return fail(
            err == EACCES ? ErrorCode::kPermission : ErrorCode::kIo,
            "journal directory " + options.dir.string() + " is not writable: " + std::strerror(err),
            err);
    }

    std::unique_ptr<JournalWriter> journal(new JournalWriter(std::move(options)));
    journal->writer_ = std::make_unique<Writer>(journal->options_, std::move(identity));
    Writer& w = *journal->writer_;
    w.gpu_devices = std::move(gpu_devices);
    w.realtime_offset_ns = monotonic_to_realtime_offset_ns();
    for (const auto& entry : fs::directory_iterator(journal->options_.dir, ec)) {
        if (auto sequence = segment_sequence(entry.path().filename().string())) {
            w.next_sequence = std::max(w.next_sequence, *sequence + 1);
        }
    }
    for (auto& event : snapshot) {
        if (!std::holds_alternative<ProcessSnapshot>(event.data)) continue;
        w.last_ts_ns = std::max(w.last_ts_ns, event.ts_ns);
        w.processes[event.task.pid] = std::move(event);
    }
    const int error = w.open_segment();
    if (error == EACCES || error == EPERM || error == EROFS) {
        return fail(ErrorCode::kPermission,
                    "cannot create a journal segment in " + journal->options_.dir.string() + ": " +
                        std::strerror(error),
                    error);
    }
    if (error != 0) {
        // A full disk is not fatal: the writer drops and retries.
        w.fail_writes(error, "cannot create segment in " + journal->options_.dir.string());
    } else {
        w.enforce_retention();
    }
    {
        std::lock_guard lock(w.stats_mutex);
        w.stats.tracked_processes = w.processes.size();
    }
    journal->thread_ = std::thread([raw = journal.get()] { raw->run(); });
    return journal;
}

JournalWriter::~JournalWriter() { close(); }

void JournalWriter::note_queue_drop(bool is_event, uint64_t ts_ns) {
    dropped_queue_full_.fetch_add(1, std::memory_order_relaxed);
    if (is_event) {
        ++queue_gap_.dropped_events;
    } else {
        ++queue_gap_.dropped_records;
    }
    if (ts_ns) {
        if (!queue_gap_.first_ts_ns) queue_gap_.first_ts_ns = ts_ns;
        queue_gap_.last_ts_ns = std::max(queue_gap_.last_ts_ns, ts_ns);
    }
    if (!in_queue_burst_) {
        in_queue_burst_ = true;
        queue_gap_.reason = "queue_full";
        logger("journal")->warn(
            "journal: queue full ({} events, {} bytes): dropping records until the writer "
            "catches up",
            pending_events_, pending_.size());
    }
}

bool JournalWriter::enqueue(RecordKind kind, std::string_view payload, bool is_event,
                            uint64_t ts_ns) {
    const bool full = is_event ? (pending_events_ >= options_.queue_events ||
                                  pending_.size() >= options_.queue_max_bytes)
                               : pending_.size() >= 2 * options_.queue_max_bytes;
    if (full) {
        note_queue_drop(is_event, ts_ns);
        return false;
    }
    if (in_queue_burst_) {
        logger("journal")->info("journal: queue accepting again after {} dropped events, {} other",
                                queue_gap_.dropped_events, queue_gap_.dropped_records);
        std::string gap;
        encode_gap(queue_gap_, gap);
        append_inner(RecordKind::kGap, gap, pending_);
        queue_gap_ = GapRecord{};
        in_queue_burst_ = false;
    }
    append_inner(kind, payload, pending_);
    if (is_event) ++pending_events_;
    if (writer_waiting_) wake_writer_.notify_one();
    return true;
}

void JournalWriter::ring_add(std::string_view inner, uint64_t ts_ns) {
    if (options_.lookback_s == 0) return;
    if (ring_.empty() || ring_.back().data.size() + inner.size() > kRingChunkBytes) {
        ring_.emplace_back();
        ring_.back().data.reserve(kRingChunkBytes);
    }
    ring_.back().data.append(inner);
    ring_.back().last_ts_ns = std::max(ring_.back().last_ts_ns, ts_ns);
    ring_bytes_ += inner.size();
    const uint64_t window = uint64_t{options_.lookback_s} * 1'000'000'000;
    while (ring_.size() > 1 && (ring_.front().last_ts_ns + window < ts_ns ||
                                ring_bytes_ > options_.lookback_max_bytes)) {
        ring_bytes_ -= ring_.front().data.size();
        ring_.pop_front();
    }
}

bool JournalWriter::append(const Event& event, int64_t realtime_offset_ns) {
    std::lock_guard lock(mutex_);
    if (stopping_) return false;
    if (!have_offset_ || realtime_offset_ns - realtime_offset_ns_ > kClockJitterNs ||
        realtime_offset_ns_ - realtime_offset_ns > kClockJitterNs) {
        scratch_.clear();
        encode_clock(realtime_offset_ns, scratch_);
        append_inner(RecordKind::kClock, scratch_, pending_);  // tiny: never refused
        realtime_offset_ns_ = realtime_offset_ns;
        have_offset_ = true;
    }
    scratch_.clear();
    encode_event(event, scratch_);
    if (options_.lookback_s) {
        inner_.clear();
        append_inner(RecordKind::kEvent, scratch_, inner_);
        ring_add(inner_, event.ts_ns);
    }
    return enqueue(RecordKind::kEvent, scratch_, true, event.ts_ns);
}

bool JournalWriter::append_detection(uint64_t ts_ns, uint32_t pid, std::string_view rule_id,
                                     std::string_view json) {
    std::lock_guard lock(mutex_);
    if (stopping_) return false;
    scratch_.clear();
    encode_alert(AlertRecord{ts_ns, pid, std::string(rule_id), std::string(json)}, scratch_);
    return enqueue(RecordKind::kDetection, scratch_, false, ts_ns);
}

bool JournalWriter::append_enforcement(uint64_t ts_ns, uint32_t pid, std::string_view rule_id,
                                       std::string_view json) {
    std::lock_guard lock(mutex_);
    if (stopping_) return false;
    scratch_.clear();
    encode_alert(AlertRecord{ts_ns, pid, std::string(rule_id), std::string(json)}, scratch_);
    return enqueue(RecordKind::kEnforcement, scratch_, false, ts_ns);
}

bool JournalWriter::append_note(uint64_t ts_ns, std::string_view level, std::string_view text) {
    std::lock_guard lock(mutex_);
    if (stopping_) return false;
    scratch_.clear();
    encode_note(NoteRecord{ts_ns, std::string(level), std::string(text)}, scratch_);
    return enqueue(RecordKind::kNote, scratch_, false, ts_ns);
}

void JournalWriter::set_gpu_devices(std::vector<GpuDeviceNumber> devices) {
    std::lock_guard lock(mutex_);
    new_gpu_devices_ = std::move(devices);
}

bool JournalWriter::trigger(uint64_t ts_ns, uint32_t pid, std::string_view rule_id,
                            std::string_view detection_json) {
    std::lock_guard lock(mutex_);
    if (stopping_) return false;
    TriggerCommand command;
    command.detection = AlertRecord{ts_ns, pid, std::string(rule_id), std::string(detection_json)};
    const uint64_t window = uint64_t{options_.lookback_s} * 1'000'000'000;
    const uint64_t cutoff = ts_ns > window ? ts_ns - window : 0;
    for (const auto& chunk : ring_) {
        if (chunk.last_ts_ns < cutoff) continue;
        size_t pos = 0;
        uint8_t kind = 0;
        std::string_view payload;
        while (read_inner(chunk.data, pos, kind, payload)) {
            if (peek_event_ts(payload).value_or(0) >= cutoff) {
                append_inner(static_cast<RecordKind>(kind), payload, command.lookback);
            }
        }
    }
    triggers_.push_back(std::move(command));
    append_inner(static_cast<RecordKind>(kTriggerMarker), std::to_string(triggers_.size() - 1),
                 pending_);
    if (writer_waiting_) wake_writer_.notify_one();
    return true;
}

void JournalWriter::flush() {
    std::unique_lock lock(mutex_);
    if (closed_) return;
    const uint64_t id = ++flush_requested_;
    wake_writer_.notify_one();
    flushed_.wait(lock, [&] { return flush_done_ >= id || closed_; });
}

void JournalWriter::close() {
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
        wake_writer_.notify_one();
    }
    if (thread_.joinable()) thread_.join();
}

JournalStats JournalWriter::stats() const {
    JournalStats copy;
    {
        std::lock_guard lock(writer_->stats_mutex);
        copy = writer_->stats;
    }
    copy.dropped_queue_full = dropped_queue_full_.load(std::memory_order_relaxed);
    return copy;
}

std::filesystem::path JournalWriter::current_segment() const {
    std::lock_guard lock(writer_->stats_mutex);
    return writer_->shared_path;
}

void JournalWriter::run() {
    pthread_setname_np(pthread_self(), "gg-journal");
    std::string batch;
    std::vector<TriggerCommand> triggers;
    uint64_t synced = 0;
    for (;;) {
        uint64_t flush_id = 0;
        bool stop = false;
        std::optional<std::vector<GpuDeviceNumber>> devices;
        {
            std::unique_lock lock(mutex_);
            writer_waiting_ = true;
            wake_writer_.wait_for(lock, std::chrono::milliseconds(100), [&] {
                return !pending_.empty() || stopping_ || flush_requested_ > flush_done_;
            });
            writer_waiting_ = false;
            batch.swap(pending_);
            pending_events_ = 0;
            triggers.swap(triggers_);
            flush_id = flush_requested_;
            stop = stopping_;
            devices.swap(new_gpu_devices_);
        }
        if (devices) writer_->gpu_devices = std::move(*devices);
        writer_->process(batch, triggers);
        batch.clear();
        triggers.clear();
        bool more_queued = false;
        {
            std::lock_guard lock(mutex_);
            more_queued = !pending_.empty();
        }
        // Events already queued may still belong to an open incident: it
        // closes on the clock only once they are written.
        writer_->timers(/*close_incident_on_clock=*/!more_queued);
        if (flush_id > synced || stop) {
            writer_->sync();
            synced = flush_id;
        }
        if (stop) writer_->shutdown();
        {
            std::lock_guard lock(mutex_);
            flush_done_ = flush_id;
            if (stop) closed_ = true;
        }
        flushed_.notify_all();
        if (stop) return;
    }
}

// --- helpers ---------------------------------------------------------------------

JournalIdentity local_identity(std::string rule_pack_version) {
    JournalIdentity identity;
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) == 0) identity.host.hostname = host;
    std::ifstream boot_id("/proc/sys/kernel/random/boot_id");
    std::getline(boot_id, identity.host.boot_id);
    struct utsname names {};
    if (::uname(&names) == 0) identity.host.kernel = names.release;
    identity.host.agent_version = GPUGUARD_VERSION;
    identity.rule_pack_version = std::move(rule_pack_version);
    return identity;
}

}  // namespace gpuguard::agent::journal
