#include "gpuguard/daemon/line_writer.h"

#include <cerrno>
#include <climits>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <utility>

#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpuguard/common/logging.h"

namespace gpuguard::agent {

struct LineWriter::Shared {
    Shared(int fd, LineWriterOptions options) : fd(fd), options(options) {
        struct stat status {};
        pipe_like =
            fstat(fd, &status) == 0 && (S_ISFIFO(status.st_mode) || S_ISSOCK(status.st_mode));
    }

    void run();
    // Writes `lines` in order; the number written whole (the rest is lost:
    // the fd failed, or the shutdown's time ran out).
    size_t write_lines(const std::deque<std::string>& lines);
    // Waits for room; false when the fd failed or the shutdown's time ran out.
    bool wait_writable(bool mid_line);
    void note_drops();  // with mutex held

    const int fd;
    const LineWriterOptions options;
    bool pipe_like = false;  // a pipe or socket: writes of at most PIPE_BUF after POLLOUT
    mutable std::mutex mutex;
    std::condition_variable changed;
    std::deque<std::string> queue;
    size_t queued_bytes = 0;
    size_t in_flight = 0;  // lines taken from the queue, not yet written whole
    bool stopping = false;
    bool finished = false;   // run() has returned
    bool abandoned = false;  // close() gave up on a write that does not return
    std::chrono::steady_clock::time_point stop_deadline{};
    uint64_t written = 0;
    uint64_t dropped = 0;
    bool reader_gone = false;
    std::chrono::steady_clock::time_point last_drop_report{};
};

LineWriter::LineWriter(int fd, LineWriterOptions options)
    : shared_(std::make_shared<Shared>(fd, options)) {
    thread_ = std::thread([shared = shared_] {
        shared->run();
        std::lock_guard lock(shared->mutex);
        shared->finished = true;
        shared->changed.notify_all();
    });
}

void LineWriter::close() {
    if (!thread_.joinable()) return;
    Shared& shared = *shared_;
    const auto drain = shared.options.drain_timeout;
    std::unique_lock lock(shared.mutex);
    shared.stopping = true;
    shared.stop_deadline = std::chrono::steady_clock::now() + drain;
    shared.changed.notify_all();
    // The writer gives up by itself at the deadline (plus a line's end)
    // unless a write() does not return; then it is left behind, with what
    // it has not written and what waits counted as lost. (Twice the drain
    // time: a writer that is only slow, a sanitizer build, still finishes.)
    const bool ended = shared.changed.wait_until(lock, shared.stop_deadline + drain,
                                                 [&] { return shared.finished; });
    if (!ended) {
        shared.abandoned = true;
        shared.dropped += shared.in_flight + shared.queue.size();
        shared.queue.clear();
        shared.queued_bytes = 0;
        logger("output")->warn("a write to stdout has not returned for {} ms: left behind",
                               (2 * drain).count());
    }
    const uint64_t dropped_lines = shared.dropped;
    lock.unlock();
    if (ended) {
        thread_.join();
    } else {
        thread_.detach();  // owns its Shared; the process ends without waiting for it
    }
    if (dropped_lines != 0) {
        logger("output")->warn("{} lines not printed in all: stdout was not read fast enough",
                               dropped_lines);
    }
}

bool LineWriter::write(std::string line) {
    line += '\n';
    Shared& shared = *shared_;
    {
        std::lock_guard lock(shared.mutex);
        if (shared.stopping || shared.reader_gone ||
            shared.queued_bytes + line.size() > shared.options.max_queued_bytes) {
            ++shared.dropped;
            shared.note_drops();
            return false;
        }
        shared.queued_bytes += line.size();
        shared.queue.push_back(std::move(line));
    }
    shared.changed.notify_all();
    return true;
}

bool LineWriter::flush(std::chrono::milliseconds timeout) {
    Shared& shared = *shared_;
    std::unique_lock lock(shared.mutex);
    return shared.changed.wait_for(lock, timeout,
                                   [&] { return shared.queue.empty() && shared.in_flight == 0; });
}

LineWriterStats LineWriter::stats() const {
    std::lock_guard lock(shared_->mutex);
    return LineWriterStats{shared_->written, shared_->dropped, shared_->queued_bytes,
                           shared_->reader_gone};
}

// A warning on the first drop and at most one a minute after it: the log
// says when output was lost, without flooding.
void LineWriter::Shared::note_drops() {
    const auto now = std::chrono::steady_clock::now();
    const bool reported_before = last_drop_report != std::chrono::steady_clock::time_point{};
    if (reported_before && now - last_drop_report < std::chrono::minutes(1)) return;
    last_drop_report = now;
    if (reader_gone) {
        logger("output")->warn("stdout's reader has gone: {} lines dropped so far", dropped);
        return;
    }
    logger("output")->warn(
        "stdout is not read fast enough: {} lines dropped so far (at most {} bytes wait)", dropped,
        options.max_queued_bytes);
}

void LineWriter::Shared::run() {
    while (true) {
        std::deque<std::string> lines;
        {
            std::unique_lock lock(mutex);
            changed.wait(lock, [&] { return stopping || !queue.empty(); });
            if (queue.empty() || abandoned) return;  // stopping, and all written
            lines.swap(queue);
            queued_bytes = 0;
            in_flight = lines.size();
        }
        const size_t whole = write_lines(lines);  // counted in `written` as they went
        {
            std::lock_guard lock(mutex);
            if (abandoned) return;  // close() counted the rest already
            if (whole < lines.size()) {
                dropped += lines.size() - whole;
                note_drops();
            }
            in_flight = 0;
        }
        changed.notify_all();
    }
}

bool LineWriter::Shared::wait_writable(bool mid_line) {
    while (true) {
        pollfd ready{fd, POLLOUT, 0};
        // In slices, so that a stop is noticed: a reader that never reads
        // must not hold the agent's shutdown.
        const int polled = poll(&ready, 1, 50);
        if (polled > 0) {
            if (!(ready.revents & (POLLERR | POLLNVAL))) return true;
            // POLLERR on a pipe or socket: nobody will read again.
            std::lock_guard lock(mutex);
            reader_gone = true;
            return false;
        }
        if (polled < 0 && errno != EINTR) return false;
        std::lock_guard lock(mutex);
        if (abandoned) return false;
        // At shutdown, lines not yet begun wait until the deadline; a line
        // begun gets a quarter of the drain time again to end.
        const auto grace = mid_line ? options.drain_timeout / 4 : std::chrono::milliseconds(0);
        if (stopping && std::chrono::steady_clock::now() >= stop_deadline + grace) return false;
    }
}

size_t LineWriter::Shared::write_lines(const std::deque<std::string>& lines) {
    // Chunks of whole lines where they fit: on a pipe, POLLOUT promises room
    // for PIPE_BUF bytes and a write of at most that much is atomic, so a
    // chunk is never cut and never blocks; a longer line goes in pieces.
    const size_t limit = pipe_like ? PIPE_BUF : size_t{1} << 20;
    size_t line = 0;
    size_t offset = 0;  // into lines[line]
    std::string chunk;
    while (line < lines.size()) {
        if (!wait_writable(offset != 0)) return line;
        chunk.clear();
        if (offset == 0) {
            for (size_t next = line;
                 next < lines.size() && chunk.size() + lines[next].size() <= limit; ++next) {
                chunk += lines[next];
            }
        }
        if (chunk.empty()) chunk.assign(lines[line], offset, limit);  // part of a long line
        const ssize_t wrote = ::write(fd, chunk.data(), chunk.size());
        if (wrote < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            if (errno == EPIPE) {
                std::lock_guard lock(mutex);
                reader_gone = true;
            }
            return line;  // EPIPE and the like: the rest is lost
        }
        const size_t before = line;
        for (size_t left = static_cast<size_t>(wrote); left > 0;) {
            const size_t rest = lines[line].size() - offset;
            if (left < rest) {
                offset += left;
                break;
            }
            left -= rest;
            ++line;
            offset = 0;
        }
        // Counted as they go out, so that a close() that gives up on a later
        // write counts as lost only what was not written.
        std::lock_guard lock(mutex);
        if (abandoned) return line;
        written += line - before;
        in_flight -= line - before;
    }
    return line;
}

}  // namespace gpuguard::agent
