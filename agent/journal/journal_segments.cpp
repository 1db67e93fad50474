// The journal writer thread: records into segments (framing, zstd blocks,
// snapshots), rotation, write failures and gaps, fsync and retention.
#include "gpuguard/common/dir_entries.h"
#include "journal_writer.h"

namespace gpuguard::agent::journal {
namespace {

// Containers a segment's opening snapshot names at most (each a few hundred bytes).
constexpr size_t kMaxSnapshotContainers = 1024;

}  // namespace

uint64_t JournalWriter::Writer::mono_now() const {
    return options.monotonic_clock ? options.monotonic_clock() : monotonic_ns();
}

int64_t JournalWriter::Writer::real_now() const {
    return options.realtime_clock ? options.realtime_clock() : unix_now_ns();
}

Event& JournalWriter::Writer::process_entry(const TaskInfo& task, bool& created) {
    auto [it, inserted] = processes.try_emplace(task.pid);
    created = inserted;
    if (inserted) {
        it->second.task = task;
        it->second.data = ProcessSnapshot{};
    }
    return it->second;
}

void JournalWriter::Writer::update_state(std::string_view payload) {
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
        void operator()(const Exit&) {
            w.processes.erase(task.pid);
            w.workloads.erase(task.pid);
        }
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
        void operator()(const CpuUsage&) {}
        void operator()(const GpuLibraries&) {}
        void operator()(const LoopbackPeer&) {}
        void operator()(const Flow&) {}
        void operator()(const ProcessCmdline&) {}
        void operator()(const PoolProbe&) {}
        void operator()(const GpuFault&) {}
        void operator()(const Workload& workload) {
            if (!w.processes.contains(task.pid)) return;  // bounded with the processes
            w.workloads[task.pid] = Event{0, task, workload};
        }
        void operator()(const ConfigFile&) {}
        void operator()(const HiddenProcess&) {}
        void operator()(const ModuleLoad&) {}
        void operator()(const FileChange&) {}
        void operator()(const ProcessEnv&) {}
        void operator()(const AgentTamper&) {}
        void operator()(const TrustChange&) {}
        void operator()(const Container& container) {
            auto [it, inserted] = w.containers.try_emplace(container.id);
            it->second.task = task;
            it->second.data = container;
            if (!inserted) return;
            w.container_order.push_back(container.id);
            if (w.container_order.size() > kMaxSnapshotContainers) {
                w.containers.erase(w.container_order.front());
                w.container_order.pop_front();
            }
        }
    };
    std::visit(Visitor{*this, task, full}, decoded.data);
}

// Header and opening snapshot of a segment or incident file.
std::string JournalWriter::Writer::opening(uint64_t sequence, const std::string& kind,
                                           bool compressed, const std::set<uint32_t>& leave_out) {
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
    for (auto& [id, event] : containers) {
        event.ts_ns = snapshot_ts;
        scratch.clear();
        encode_event(event, scratch);
        append_frame(RecordKind::kEvent, 0, scratch, bytes);
    }
    uint64_t written = 0;
    for (auto& [pid, event] : processes) {
        if (leave_out.contains(pid)) continue;
        ++written;
        event.ts_ns = snapshot_ts;
        scratch.clear();
        encode_event(event, scratch);
        append_frame(RecordKind::kEvent, 0, scratch, bytes);
    }
    for (auto& [pid, event] : workloads) {
        if (leave_out.contains(pid) || !processes.contains(pid)) continue;
        event.ts_ns = snapshot_ts;
        scratch.clear();
        encode_event(event, scratch);
        append_frame(RecordKind::kEvent, 0, scratch, bytes);
    }
    scratch.clear();
    encode_snapshot_end(written, scratch);
    append_frame(RecordKind::kSnapshotEnd, 0, scratch, bytes);
    return bytes;
}

// Opens the next segment with its header and snapshot (and the pending
// gap record after a failure). Returns 0 or the errno of the failure.
int JournalWriter::Writer::open_segment() {
    const bool compressed = options.compress;
    size_t snapshot_records = containers.size() + processes.size() + workloads.size() + 3;
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
        new_fd = ::open(new_path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0640);
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
void JournalWriter::Writer::end_segment(const char* reason) {
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

bool JournalWriter::Writer::rotate(const char* reason) {
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

void JournalWriter::Writer::fail_writes(int error, const std::string& what) {
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

void JournalWriter::Writer::drop(uint64_t events, uint64_t records, uint64_t first_ts,
                                 uint64_t last_ts) {
    gap.dropped_events += events;
    gap.dropped_records += records - events;
    if (first_ts && (!gap.first_ts_ns || first_ts < gap.first_ts_ns)) gap.first_ts_ns = first_ts;
    gap.last_ts_ns = std::max(gap.last_ts_ns, last_ts);
    update_stats([&](JournalStats& s) { s.dropped_write_failed += records; });
}

bool JournalWriter::Writer::flush_out() {
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

void JournalWriter::Writer::seal_block() {
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

bool JournalWriter::Writer::needs_rotation(size_t next_bytes) const {
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
void JournalWriter::Writer::on_record(uint8_t kind, std::string_view payload) {
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

void JournalWriter::Writer::process(std::string_view batch, std::vector<TriggerCommand>& triggers) {
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

void JournalWriter::Writer::sync() {
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
void JournalWriter::Writer::timers(bool close_incident_on_clock) {
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

void JournalWriter::Writer::shutdown() {
    if (incident) close_incident();
    end_segment("close");
}

void JournalWriter::Writer::enforce_retention() {
    last_retention = SteadyClock::now();
    struct Segment {
        uint64_t sequence;
        fs::path path;
        uint64_t size;
    };
    std::vector<Segment> segments;
    for (const DirEntry& entry : entries_of(options.dir)) {
        const auto sequence = segment_sequence(entry.name);
        if (!sequence) continue;
        std::error_code size_ec;
        const auto bytes = fs::file_size(options.dir / entry.name, size_ec);
        segments.push_back({*sequence, options.dir / entry.name, size_ec ? 0 : bytes});
    }
    std::sort(segments.begin(), segments.end(),
              [](const Segment& a, const Segment& b) { return a.sequence < b.sequence; });
    // The open segment counts at its maximum size, so the directory stays
    // within retention_max_bytes while it grows.
    uint64_t total = 0;
    for (const auto& segment : segments) {
        total += segment.path == path ? std::max<uint64_t>(segment.size, options.segment_max_bytes)
                                      : segment.size;
    }
    const int64_t now = real_now();
    const int64_t max_age_ns = static_cast<int64_t>(options.retention_max_age_s) * 1'000'000'000;
    total += prune_incidents(now, max_age_ns);
    uint64_t deleted = 0;
    for (const auto& segment : segments) {
        if (segment.path == path) break;  // never the open one (nor anything newer)
        const bool too_big = options.retention_max_bytes && total > options.retention_max_bytes;
        const bool too_old = max_age_ns && mtime_unix_ns(segment.path) < now - max_age_ns;
        if (!too_big && !too_old) break;
        if (::unlink(segment.path.c_str()) != 0) {
            log->warn("journal: cannot delete {}: {}", segment.path.string(), std::strerror(errno));
            break;
        }
        log->debug("journal: deleted {} ({})", segment.path.string(),
                   too_big ? "retention_max_mb" : "retention_max_age_h");
        total -= segment.size;
        ++deleted;
    }
    if (deleted) update_stats([&](JournalStats& s) { s.segments_deleted += deleted; });
}

}  // namespace gpuguard::agent::journal
