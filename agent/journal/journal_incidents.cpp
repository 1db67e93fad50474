// Incident bundles: a detection's look-back window and what follows it,
// written by the journal writer thread into incidents/, and their pruning.
#include "codec_primitives.h"
#include "gpuguard/common/dir_entries.h"
#include "gpuguard/journal/journal_codec.h"
#include "journal_writer.h"

namespace gpuguard::agent::journal {
namespace {

// The bytes of the regular files under `dir`, listed with getdents64.
uint64_t tree_bytes(const fs::path& dir, int depth = 0) {
    uint64_t bytes = 0;
    for (const DirEntry& entry : entries_of(dir)) {
        const fs::path path = dir / entry.name;
        std::error_code ec;
        const auto status = fs::symlink_status(path, ec);
        if (fs::is_directory(status) && depth < 8) {
            bytes += tree_bytes(path, depth + 1);
        } else if (fs::is_regular_file(status)) {
            const auto size = fs::file_size(path, ec);
            if (!ec) bytes += size;
        }
    }
    return bytes;
}

}  // namespace

// Incident bundles count toward retention_max_bytes but may hold at most
// half of it, so neither a burst of incidents nor a busy journal pushes
// the other out entirely: past half, or past the maximum age, the oldest
// closed bundles go first. Returns the bytes of the bundles kept.
uint64_t JournalWriter::Writer::prune_incidents(int64_t now, int64_t max_age_ns) {
    struct Bundle {
        int64_t mtime_ns;
        fs::path dir;
        uint64_t size;
    };
    std::vector<Bundle> bundles;
    uint64_t total = 0;
    const fs::path incidents = options.dir / "incidents";
    for (const DirEntry& entry : entries_of(incidents)) {
        const fs::path bundle = incidents / entry.name;
        const uint64_t size = tree_bytes(bundle);
        total += size;
        if (incident && bundle == incident->dir) continue;  // still being written
        bundles.push_back({mtime_unix_ns(bundle), bundle, size});
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
            log->warn("journal: cannot delete {}: {}", bundle.dir.string(), remove_ec.message());
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

void JournalWriter::Writer::write_file(const fs::path& file, const std::string& text) {
    std::ofstream stream(file, std::ios::trunc);
    stream << text;
    if (!stream) log->warn("journal: cannot write {}", file.string());
}

void JournalWriter::Writer::start_incident(TriggerCommand& command) {
    const AlertRecord& detection = command.detection;
    const uint64_t after_ns = uint64_t{options.incident_after_s} * 1'000'000'000;
    if (incident) {
        // Its detection record came just before the trigger and is in the
        // bundle already (incident_record): only the window grows.
        ++incident->detections;
        incident->until_ts_ns = std::max(incident->until_ts_ns, detection.ts_ns + after_ns);
        write_file(incident->dir / ("detection-" + std::to_string(incident->detections) + ".json"),
                   detection.json + "\n");
        return;
    }
    ++incident_sequence;
    const int64_t wall = static_cast<int64_t>(detection.ts_ns) + realtime_offset_ns;
    std::string name = "incident-" + compact_utc(wall) + "-" + std::to_string(incident_sequence);
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
        bundle.fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0640);
    }
    if (bundle.fd < 0) {
        log->warn("journal: cannot create incident bundle {}: {}", bundle.dir.string(),
                  ec ? ec.message() : std::strerror(errno));
        update_stats([](JournalStats& s) { ++s.incidents_failed; });
        return;
    }
    // A process forked inside the look-back is rebuilt by its own events
    // (fork, exec, GPU open): in the snapshot too, replay would know it as
    // it was at the trigger, ahead of those events, and judge them otherwise
    // than the live agent did (a GPU open already known is no evidence).
    std::set<uint32_t> forked;
    {
        size_t at = 0;
        uint8_t inner_kind = 0;
        std::string_view inner;
        Event event;
        std::string error;
        while (read_inner(command.lookback, at, inner_kind, inner)) {
            if (inner.empty() ||
                static_cast<uint8_t>(inner[0]) != static_cast<uint8_t>(EventTag::kFork) ||
                !decode_event(inner, event, error)) {
                continue;
            }
            if (const auto* fork = std::get_if<Fork>(&event.data)) forked.insert(fork->child_pid);
        }
    }
    bundle.out = opening(incident_sequence, "incident", false, forked);
    size_t in_snapshot = 0;
    for (const auto& entry : processes) in_snapshot += !forked.contains(entry.first);
    bundle.records = in_snapshot + 3;
    size_t pos = 0;
    uint8_t kind = 0;
    std::string_view payload;
    while (read_inner(command.lookback, pos, kind, payload)) {
        append_frame(static_cast<RecordKind>(kind), 0, payload, bundle.out);
        ++bundle.records;
        ++bundle.lookback_events;
        note_file_change(bundle, static_cast<RecordKind>(kind), payload);
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

void JournalWriter::Writer::incident_record(RecordKind kind, std::string_view payload,
                                            uint64_t ts) {
    if (!incident) return;
    if (kind == RecordKind::kEvent && ts > incident->until_ts_ns) {
        close_incident();
        return;
    }
    if (kind != RecordKind::kEvent && kind != RecordKind::kDetection &&
        kind != RecordKind::kEnforcement && kind != RecordKind::kNote && kind != RecordKind::kGap &&
        kind != RecordKind::kClock) {
        return;
    }
    append_frame(kind, 0, payload, incident->out);
    ++incident->records;
    if (kind == RecordKind::kEvent) ++incident->events;
    note_file_change(*incident, kind, payload);
}

void JournalWriter::Writer::note_file_change(Incident& bundle, RecordKind kind,
                                             std::string_view payload) {
    // Only file_change events are decoded (their tag is the payload's first byte).
    if (kind != RecordKind::kEvent || payload.empty() ||
        static_cast<uint8_t>(payload[0]) != static_cast<uint8_t>(EventTag::kFileChange)) {
        return;
    }
    Event event;
    std::string error;
    if (!decode_event(payload, event, error)) return;
    const auto* change = std::get_if<FileChange>(&event.data);
    if (!change || change->kind.empty()) return;
    nlohmann::ordered_json item{
        {"time", format_rfc3339(static_cast<int64_t>(event.ts_ns) + realtime_offset_ns)},
        {"kind", change->kind},
        {"operation", change->operation},
        {"path", change->path},
        {"pid", event.task.pid},
        {"ppid", event.task.ppid},
        {"comm", event.task.comm}};
    if (!change->libraries.empty()) item["libraries"] = change->libraries;
    bundle.file_changes.push_back(std::move(item));
}

void JournalWriter::Writer::write_incident() {
    if (!incident || incident->out.empty() || incident->failed) return;
    const int error = write_all(incident->fd, incident->out);
    incident->out.clear();
    if (error != 0) {
        incident->failed = true;
        log->warn("journal: incident bundle {}: {}", incident->dir.string(), std::strerror(error));
    }
}

void JournalWriter::Writer::close_incident() {
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
        {"complete", !incident->failed},
        {"file_changes", std::move(incident->file_changes)}};
    write_file(incident->dir / "summary.json",
               summary.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
    const bool ok = !incident->failed;
    update_stats([ok](JournalStats& s) { ++(ok ? s.incidents_written : s.incidents_failed); });
    log->info("journal: incident bundle {} closed ({} look-back + {} later events)",
              incident->dir.string(), incident->lookback_events, incident->events);
    incident.reset();
}

}  // namespace gpuguard::agent::journal
