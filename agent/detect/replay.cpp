#include "gpuguard/detect/replay.h"

#include <cerrno>
#include <cstring>
#include <utility>

#include <fcntl.h>
#include <unistd.h>

#include "gpuguard/common/unique_fd.h"
#include "gpuguard/events/event_json.h"
#include "gpuguard/journal/journal.h"

namespace gpuguard::agent {

Result<std::unique_ptr<Replay>> Replay::create(std::vector<rules::CorrelationRule> rules,
                                               std::shared_ptr<const rules::RuleSet> rule_set,
                                               ReplayOptions options) {
    ProcessTableOptions table_options;
    table_options.read_host = false;  // only the events count, never this host's /proc
    // Every device a gpu_open event names is a GPU: the kernel already decided.
    auto table =
        std::make_unique<ProcessTable>(table_options, [](uint32_t, uint32_t) { return true; });
    std::unique_ptr<Replay> replay(new Replay(options, std::move(table)));
    auto correlator = Correlator::create(std::move(rules), std::move(rule_set), *replay->table_);
    if (!correlator) return Unexpected{correlator.error()};
    replay->correlator_ = std::move(*correlator);
    PipelineStages stages;
    stages.table = replay->table_.get();
    stages.net_intel = &replay->net_intel_;
    stages.correlator = replay->correlator_.get();
    PipelineHooks hooks;
    Replay* raw = replay.get();
    hooks.emit = [raw](const Detection& detection) { (*raw->emit_)(detection); };
    replay->pipeline_ = std::make_unique<Pipeline>(stages, std::move(hooks));
    return replay;
}

ReplayStats Replay::stats() const {
    ReplayStats stats = stats_;
    stats.derived = pipeline_->stats().derived;
    stats.rederived = pipeline_->stats().rederived;
    return stats;
}

void Replay::feed(const Event& event, std::optional<int64_t> time_unix_ns, const Emit& emit) {
    feed_event(event, time_unix_ns, emit);
}

// `event` const or an rvalue the table may take an exec's strings from.
template <typename AnEvent>
void Replay::feed_event(AnEvent&& event, std::optional<int64_t> time_unix_ns, const Emit& emit) {
    if (time_unix_ns && options_.until_unix_ns && *time_unix_ns >= *options_.until_unix_ns) {
        ++stats_.filtered;
        return;
    }
    emit_ = &emit;
    if (time_unix_ns && options_.since_unix_ns && *time_unix_ns < *options_.since_unix_ns) {
        // Before the window: not judged, but it says who the processes are,
        // which GPUs they hold and what the network showed when it opens.
        ++stats_.filtered;
        const uint64_t ts_ns = event.ts_ns;
        pipeline_->learn(event);
        evict_exited(ts_ns);
        window_needs_snapshot_ = true;
        return;
    }
    pipeline_->set_realtime_offset(time_unix_ns ? *time_unix_ns - static_cast<int64_t>(event.ts_ns)
                                                : 0);
    if (window_needs_snapshot_) {
        // The window opens as a journal segment does: with a snapshot of the
        // processes known so far, judged like exec events.
        window_needs_snapshot_ = false;
        for (const auto& process : table_->live_processes()) {
            pipeline_->judge_only(snapshot_event(process, event.ts_ns));
        }
    }
    ++stats_.events;
    const uint64_t ts_ns = event.ts_ns;
    pipeline_->feed(std::forward<AnEvent>(event));
    evict_exited(ts_ns);
}

void Replay::evict_exited(uint64_t ts_ns) {
    // Forget exited processes on the events' clock, as the live agent does on its own.
    if (ts_ns >= last_evict_ns_ + 1'000'000'000) {
        table_->evict(ts_ns);
        last_evict_ns_ = ts_ns;
    }
}

Status Replay::feed_line(std::string_view line, std::string_view name, uint64_t number,
                         const Emit& emit, bool padded) {
    ++stats_.lines;
    const auto start = line.find_first_not_of(" \t\r");
    if (start == std::string_view::npos || line[start] == '#') return {};
    auto parsed = json_reader_.parse(line, {}, padded);
    if (!parsed) {
        // Named only when it is needed: the same line again, for the message.
        parsed = json_reader_.parse(line, std::string(name) + ":" + std::to_string(number));
        return Unexpected{parsed.error()};
    }
    feed_event(std::move(parsed->event), parsed->time_unix_ns, emit);
    return {};
}

Status Replay::feed_file(const std::filesystem::path& path, const Emit& emit) {
    int fd = STDIN_FILENO;
    if (path != "-") {
        fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            return fail(errno == EACCES ? ErrorCode::kPermission : ErrorCode::kNotFound,
                        path.string() + ": cannot open: " + std::strerror(errno), errno);
        }
    }
    const UniqueFd opened(fd == STDIN_FILENO ? -1 : fd);  // stdin stays open
    uint64_t number = 0;
    const std::string name = path == "-" ? "<stdin>" : path.string();
    // Big reads, lines cut in place: one read(2) per MiB, not per stream
    // buffer, and no copy of each line. Lines as std::getline gives them.
    // The buffer is kPadding longer than what is read into it, so every line
    // cut from it has the readable bytes after it that simdjson wants.
    size_t capacity = 1 << 20;
    std::string buffer(capacity + EventJsonReader::kPadding, '\0');
    size_t filled = 0;
    const auto feed_one = [&](std::string_view line) {
        return feed_line(line, name, ++number, emit, /*padded=*/true);
    };
    while (true) {
        if (filled == capacity) {  // a line over the buffer
            capacity *= 2;
            buffer.resize(capacity + EventJsonReader::kPadding);
        }
        const ssize_t got = ::read(fd, buffer.data() + filled, capacity - filled);
        if (got < 0) {
            if (errno == EINTR) continue;
            return fail(ErrorCode::kIo, name + ": read error", errno);
        }
        if (got == 0) break;
        const size_t end = filled + static_cast<size_t>(got);
        size_t start = 0;
        while (const void* newline = std::memchr(buffer.data() + start, '\n', end - start)) {
            const size_t stop =
                static_cast<size_t>(static_cast<const char*>(newline) - buffer.data());
            if (auto status = feed_one(std::string_view(buffer.data() + start, stop - start));
                !status) {
                return status;
            }
            start = stop + 1;
        }
        std::memmove(buffer.data(), buffer.data() + start, end - start);
        filled = end - start;
    }
    if (filled > 0) return feed_one(std::string_view(buffer.data(), filled));  // no final newline
    return {};
}

Result<std::string> Replay::feed_journal(const std::filesystem::path& path, const Emit& emit) {
    auto reader = journal::JournalReader::open({path});
    if (!reader) return Unexpected{reader.error()};
    journal::JournalRecord record;
    while (reader->next(record)) {
        if (record.kind != journal::RecordKind::kEvent) continue;
        ++stats_.lines;
        feed(record.event, record.time_unix_ns(), emit);
    }
    std::string problems;
    for (const auto& problem : reader->problems()) {
        problems += problem.path.string() + ": " + journal::to_string(problem.kind) +
                    " at offset " + std::to_string(problem.offset) + ": " + problem.detail + "\n";
    }
    return problems;
}

}  // namespace gpuguard::agent
