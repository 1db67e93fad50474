// JournalWriter: the caller side (queue, look-back ring, drop accounting).
// The writer thread is journal_segments.cpp, incident bundles
// journal_incidents.cpp, their shared state journal_writer.h.
#include "gpuguard/journal/journal.h"

#include "gpuguard/common/dir_entries.h"
#include "journal_writer.h"

namespace gpuguard::agent::journal {

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
    for (const DirEntry& entry : entries_of(journal->options_.dir)) {
        if (auto sequence = segment_sequence(entry.name)) {
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
