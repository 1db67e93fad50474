// JournalReader: iterates the records of segment files in order, skipping
// damage (torn tails, corrupt records) with a report instead of failing.
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <fstream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "gpuguard/common/dir_entries.h"
#include "gpuguard/common/read_file.h"
#include "gpuguard/events/event_json.h"
#include "gpuguard/journal/journal.h"

namespace gpuguard::agent::journal {
namespace {

namespace fs = std::filesystem;

struct ZstdDctxDeleter {
    void operator()(ZSTD_DCtx* context) const { ZSTD_freeDCtx(context); }
};

// Offset of the next whole valid frame at or after `from`, or npos.
size_t find_next_frame(std::string_view data, size_t from) {
    char magic[4];
    std::memcpy(magic, &kRecordMagic, 4);
    while (from + kFrameSize <= data.size()) {
        const void* hit = ::memmem(data.data() + from, data.size() - from, magic, 4);
        if (!hit) return std::string_view::npos;
        const size_t at = static_cast<size_t>(static_cast<const char*>(hit) - data.data());
        Frame frame;
        if (check_frame(data.substr(at), frame) == FrameStatus::kOk) return at;
        from = at + 1;
    }
    return std::string_view::npos;
}

bool is_meta(RecordKind kind) {
    return kind == RecordKind::kClock || kind == RecordKind::kGpuDevices ||
           kind == RecordKind::kSnapshotEnd || kind == RecordKind::kSegmentEnd ||
           kind == RecordKind::kBlock;
}

std::vector<fs::path> segment_files(const fs::path& dir) {
    std::vector<fs::path> files;
    std::error_code ec;
    for (const DirEntry& entry : entries_of(dir)) {
        const fs::path path = dir / entry.name;
        if (path.extension() == ".ggj" && fs::is_regular_file(path, ec)) files.push_back(path);
    }
    std::sort(files.begin(), files.end());  // seg-<zero-padded sequence>.ggj
    return files;
}

}  // namespace

struct JournalReader::State {
    std::vector<fs::path> files;
    size_t next_file = 0;
    bool active = false;
    std::string data;
    size_t pos = 0;
    size_t segment = 0;
    std::string block;
    size_t block_pos = 0;
    bool in_block = false;
    uint64_t block_offset = 0;
    int64_t offset_ns = 0;
    uint64_t last_ts = 0;
    bool in_snapshot = false;
    bool deliver_snapshot = true;
    bool previous_rotated = false;  // the previous segment ended with a clean rotation
    std::unique_ptr<ZSTD_DCtx, ZstdDctxDeleter> dctx;
    std::string error;
};

const char* to_string(JournalProblem::Kind kind) {
    switch (kind) {
        case JournalProblem::Kind::kTornTail:
            return "torn_tail";
        case JournalProblem::Kind::kCorruptTail:
            return "corrupt_tail";
        case JournalProblem::Kind::kCorruptRecord:
            return "corrupt_record";
        case JournalProblem::Kind::kUndecodable:
            return "undecodable_record";
        case JournalProblem::Kind::kBadHeader:
            return "bad_header";
        case JournalProblem::Kind::kUnreadable:
            return "unreadable";
    }
    return "unknown";
}

std::string record_type(const JournalRecord& record) {
    if (record.kind == RecordKind::kEvent) return event_type_name(record.event);
    return to_string(record.kind);
}

JournalReader::JournalReader() : state_(std::make_unique<State>()) {}
JournalReader::JournalReader(JournalReader&&) noexcept = default;
JournalReader& JournalReader::operator=(JournalReader&&) noexcept = default;
JournalReader::~JournalReader() = default;

Result<JournalReader> JournalReader::open(const std::vector<std::filesystem::path>& paths,
                                          ReaderOptions options) {
    JournalReader reader;
    reader.options_ = std::move(options);
    for (const auto& path : paths) {
        std::error_code ec;
        const auto status = fs::status(path, ec);
        if (ec || !fs::exists(status)) {
            return fail(ErrorCode::kNotFound, "journal " + path.string() + " does not exist");
        }
        if (fs::is_directory(status)) {
            for (auto& file : segment_files(path)) reader.state_->files.push_back(std::move(file));
        } else {
            reader.state_->files.push_back(path);
        }
    }
    return reader;
}

void JournalReader::problem(JournalProblem::Kind kind, uint64_t offset, uint64_t bytes,
                            std::string detail) {
    const fs::path& path = segments_[state_->segment].path;
    problems_.push_back(JournalProblem{kind, path, offset, bytes, std::move(detail)});
}

bool JournalReader::load_segment() {
    State& s = *state_;
    while (s.next_file < s.files.size()) {
        const fs::path& path = s.files[s.next_file++];
        SegmentInfo info;
        info.path = path;
        auto data = read_file(path);
        if (!data) {
            segments_.push_back(std::move(info));
            s.segment = segments_.size() - 1;
            problem(JournalProblem::Kind::kUnreadable, 0, 0, std::strerror(data.error().sys_errno));
            s.previous_rotated = false;
            continue;
        }
        s.data = std::move(data).value();
        info.size = s.data.size();
        size_t header_size = 0;
        auto header = decode_header(s.data, header_size, s.error);
        segments_.push_back(std::move(info));
        s.segment = segments_.size() - 1;
        ++stats_.segments;
        if (!header) {
            problem(JournalProblem::Kind::kBadHeader, 0, s.data.size(), s.error);
            stats_.skipped_bytes += s.data.size();
            s.previous_rotated = false;
            continue;
        }
        SegmentInfo& segment = segments_.back();
        segment.header_ok = true;
        segment.header = std::move(*header);
        s.pos = header_size;
        s.offset_ns = segment.header.realtime_offset_ns;
        s.last_ts = segment.header.created_mono_ns;
        s.in_snapshot = true;
        switch (options_.snapshots) {
            case SnapshotMode::kAll:
                s.deliver_snapshot = true;
                break;
            case SnapshotMode::kNone:
                s.deliver_snapshot = false;
                break;
            case SnapshotMode::kAuto:
                s.deliver_snapshot = !s.previous_rotated;
                break;
        }
        s.previous_rotated = false;
        s.in_block = false;
        s.active = true;
        return true;
    }
    return false;
}

bool JournalReader::handle(RecordKind kind, std::string_view payload, JournalRecord& record) {
    State& s = *state_;
    record.kind = kind;
    record.segment = s.segment;
    record.in_snapshot = s.in_snapshot;
    bool ok = true;
    switch (kind) {
        case RecordKind::kEvent:
            ok = decode_event(payload, record.event, s.error);
            record.ts_ns = record.event.ts_ns;
            break;
        case RecordKind::kDetection:
        case RecordKind::kEnforcement:
            ok = decode_alert(payload, record.alert, s.error);
            record.ts_ns = record.alert.ts_ns;
            break;
        case RecordKind::kNote:
            ok = decode_note(payload, record.note, s.error);
            record.ts_ns = record.note.ts_ns;
            break;
        case RecordKind::kGap:
            ok = decode_gap(payload, record.gap, s.error);
            record.ts_ns = record.gap.first_ts_ns ? record.gap.first_ts_ns : s.last_ts;
            break;
        case RecordKind::kClock:
            ok = decode_clock(payload, s.offset_ns, s.error);
            record.ts_ns = s.last_ts;
            break;
        case RecordKind::kGpuDevices:
            ok = decode_gpu_devices(payload, record.gpu_devices, s.error);
            record.ts_ns = s.last_ts;
            break;
        case RecordKind::kSnapshotEnd:
            s.in_snapshot = false;
            record.ts_ns = s.last_ts;
            break;
        case RecordKind::kSegmentEnd:
            ok = decode_segment_end(payload, record.segment_end, s.error);
            if (ok) {
                segments_[s.segment].clean_end = true;
                s.previous_rotated = record.segment_end.reason == "rotate";
            }
            record.ts_ns = s.last_ts;
            break;
        case RecordKind::kBlock:  // nested blocks are not written
        default:
            ++stats_.unknown_records;
            return false;
    }
    if (!ok) {
        ++stats_.undecodable_records;
        problem(JournalProblem::Kind::kUndecodable, record.offset, payload.size(),
                std::string(to_string(kind)) + ": " + s.error);
        return false;
    }
    ++stats_.records;
    ++segments_[s.segment].records;
    if (record.ts_ns > s.last_ts) s.last_ts = record.ts_ns;
    record.realtime_offset_ns = s.offset_ns;
    if (kind == RecordKind::kEvent && record.in_snapshot && !s.deliver_snapshot) return false;
    return wanted(record);
}

bool JournalReader::wanted(const JournalRecord& record) const {
    if (is_meta(record.kind) && !options_.meta) return false;
    if (!options_.types.empty()) {
        const std::string type = record_type(record);
        if (std::find(options_.types.begin(), options_.types.end(), type) == options_.types.end()) {
            return false;
        }
    }
    if (options_.pid) {
        const uint32_t pid = *options_.pid;
        switch (record.kind) {
            case RecordKind::kEvent: {
                const Event& event = record.event;
                bool match = event.task.pid == pid;
                if (const auto* fork = std::get_if<Fork>(&event.data)) {
                    match = match || fork->child_pid == pid;
                }
                if (const auto* telemetry = std::get_if<Telemetry>(&event.data)) {
                    for (const auto& usage : telemetry->processes)
                        match = match || usage.pid == pid;
                }
                if (!match) return false;
                break;
            }
            case RecordKind::kDetection:
            case RecordKind::kEnforcement:
                if (record.alert.pid != pid) return false;
                break;
            case RecordKind::kGap:
                break;  // missing data may concern any process
            default:
                return false;
        }
    }
    if (options_.since_unix_ns || options_.until_unix_ns) {
        int64_t first = record.time_unix_ns();
        int64_t last = first;
        if (record.kind == RecordKind::kGap && record.gap.last_ts_ns) {
            last = static_cast<int64_t>(record.gap.last_ts_ns) + record.realtime_offset_ns;
        }
        if (options_.since_unix_ns && last < *options_.since_unix_ns) return false;
        if (options_.until_unix_ns && first > *options_.until_unix_ns) return false;
    }
    return true;
}

bool JournalReader::next_raw(JournalRecord& record) {
    State& s = *state_;
    for (;;) {
        if (s.in_block) {
            uint8_t kind = 0;
            std::string_view payload;
            if (read_inner(s.block, s.block_pos, kind, payload)) {
                record.offset = s.block_offset;
                if (handle(static_cast<RecordKind>(kind), payload, record)) return true;
                continue;
            }
            if (s.block_pos != s.block.size()) {
                ++stats_.undecodable_records;
                problem(JournalProblem::Kind::kUndecodable, s.block_offset,
                        s.block.size() - s.block_pos, "block ends inside a record");
            }
            s.in_block = false;
        }
        if (!s.active && !load_segment()) return false;
        if (s.pos >= s.data.size()) {
            s.active = false;
            continue;
        }
        const std::string_view rest = std::string_view(s.data).substr(s.pos);
        Frame frame;
        const FrameStatus status = check_frame(rest, frame);
        if (status != FrameStatus::kOk) {
            const size_t next = find_next_frame(s.data, s.pos + 1);
            if (next != std::string_view::npos) {
                ++stats_.corrupt_records;
                stats_.skipped_bytes += next - s.pos;
                problem(JournalProblem::Kind::kCorruptRecord, s.pos, next - s.pos,
                        "corrupt record skipped");
                s.pos = next;
                continue;
            }
            const bool torn = status == FrameStatus::kTruncated;
            if (torn) ++stats_.torn_tails;
            stats_.skipped_bytes += rest.size();
            problem(torn ? JournalProblem::Kind::kTornTail : JournalProblem::Kind::kCorruptTail,
                    s.pos, rest.size(),
                    torn ? "last record cut short (torn write); the records before it are used"
                         : "bytes after the last valid record are not a record");
            s.pos = s.data.size();
            continue;
        }
        const uint64_t offset = s.pos;
        s.pos += kFrameSize + frame.payload.size();
        if (frame.kind == RecordKind::kBlock) {
            ++stats_.records;
            ++segments_[s.segment].records;
            if (!(frame.flags & kFlagZstd)) {
                ++stats_.unknown_records;
                continue;
            }
            if (!s.dctx) s.dctx.reset(ZSTD_createDCtx());
            const unsigned long long raw =
                ZSTD_getFrameContentSize(frame.payload.data(), frame.payload.size());
            if (raw == ZSTD_CONTENTSIZE_ERROR || raw == ZSTD_CONTENTSIZE_UNKNOWN ||
                raw > kMaxRecordPayload) {
                ++stats_.undecodable_records;
                problem(JournalProblem::Kind::kUndecodable, offset, frame.payload.size(),
                        "zstd block without a valid content size");
                continue;
            }
            s.block.resize(raw);
            const size_t n = ZSTD_decompressDCtx(s.dctx.get(), s.block.data(), s.block.size(),
                                                 frame.payload.data(), frame.payload.size());
            if (ZSTD_isError(n) || n != raw) {
                ++stats_.undecodable_records;
                problem(JournalProblem::Kind::kUndecodable, offset, frame.payload.size(),
                        std::string("zstd: ") +
                            (ZSTD_isError(n) ? ZSTD_getErrorName(n) : "short block"));
                continue;
            }
            s.in_block = true;
            s.block_pos = 0;
            s.block_offset = offset;
            if (options_.meta) {
                record.kind = RecordKind::kBlock;
                record.offset = offset;
                record.segment = s.segment;
                record.ts_ns = s.last_ts;
                record.realtime_offset_ns = s.offset_ns;
                record.in_snapshot = s.in_snapshot;
                if (wanted(record)) return true;
            }
            continue;
        }
        record.offset = offset;
        if (handle(frame.kind, frame.payload, record)) return true;
    }
}

bool JournalReader::next(JournalRecord& record) { return next_raw(record); }

bool is_journal(const std::filesystem::path& path) {
    std::error_code ec;
    if (fs::is_directory(path, ec)) return !segment_files(path).empty();
    std::ifstream file(path, std::ios::binary);
    char magic[sizeof kFileMagic] = {};
    file.read(magic, sizeof magic);
    return file.gcount() == sizeof magic && std::memcmp(magic, kFileMagic, sizeof magic) == 0;
}

std::optional<int64_t> parse_time_argument(std::string_view text, int64_t now_unix_ns) {
    if (text == "now") return now_unix_ns;
    if (!text.empty() && (text.front() == '-' || text.front() == '+')) {
        const bool past = text.front() == '-';
        text.remove_prefix(1);
        double amount = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), amount);
        if (ec != std::errc() || end == text.data()) return std::nullopt;
        const std::string_view unit(end, static_cast<size_t>(text.data() + text.size() - end));
        double scale = 0;
        if (unit == "ms") {
            scale = 1e6;
        } else if (unit == "s" || unit.empty()) {
            scale = 1e9;
        } else if (unit == "m") {
            scale = 60e9;
        } else if (unit == "h") {
            scale = 3600e9;
        } else if (unit == "d") {
            scale = 86400e9;
        } else {
            return std::nullopt;
        }
        const auto delta = static_cast<int64_t>(amount * scale);
        return past ? now_unix_ns - delta : now_unix_ns + delta;
    }
    return parse_rfc3339(text);
}

}  // namespace gpuguard::agent::journal
