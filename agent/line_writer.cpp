#include "agent/line_writer.h"

#include <cerrno>
#include <climits>
#include <utility>

#include <poll.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpuguard/common/logging.h"

namespace gpuguard::agent {

LineWriter::LineWriter(int fd, LineWriterOptions options) : fd_(fd), options_(options) {
    struct stat status {};
    pipe_like_ = fstat(fd_, &status) == 0 && (S_ISFIFO(status.st_mode) || S_ISSOCK(status.st_mode));
    thread_ = std::thread([this] { run(); });
}

void LineWriter::close() {
    if (!thread_.joinable()) return;
    {
        std::lock_guard lock(mutex_);
        stopping_ = true;
        stop_deadline_ = std::chrono::steady_clock::now() + options_.drain_timeout;
    }
    changed_.notify_all();
    thread_.join();
    const uint64_t dropped_lines = dropped();
    if (dropped_lines != 0) {
        logger("output")->warn("{} lines not printed in all: stdout was not read fast enough",
                               dropped_lines);
    }
}

bool LineWriter::write(std::string line) {
    line += '\n';
    {
        std::lock_guard lock(mutex_);
        if (stopping_ || reader_gone_ || queued_bytes_ + line.size() > options_.max_queued_bytes) {
            ++dropped_;
            note_drops();
            return false;
        }
        queued_bytes_ += line.size();
        queue_.push_back(std::move(line));
    }
    changed_.notify_all();
    return true;
}

bool LineWriter::flush(std::chrono::milliseconds timeout) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, timeout, [&] { return queue_.empty() && !writing_; });
}

uint64_t LineWriter::written() const {
    std::lock_guard lock(mutex_);
    return written_;
}

uint64_t LineWriter::dropped() const {
    std::lock_guard lock(mutex_);
    return dropped_;
}

bool LineWriter::reader_gone() const {
    std::lock_guard lock(mutex_);
    return reader_gone_;
}

// Called with mutex_ held. A warning on the first drop and at most one a
// minute after it: the log says when output was lost, without flooding.
void LineWriter::note_drops() {
    const auto now = std::chrono::steady_clock::now();
    const bool reported_before = last_drop_report_ != std::chrono::steady_clock::time_point{};
    if (reported_before && now - last_drop_report_ < std::chrono::minutes(1)) return;
    last_drop_report_ = now;
    if (reader_gone_) {
        logger("output")->warn("stdout's reader has gone: {} lines dropped so far", dropped_);
        return;
    }
    logger("output")->warn(
        "stdout is not read fast enough: {} lines dropped so far (at most {} bytes wait)", dropped_,
        options_.max_queued_bytes);
}

void LineWriter::run() {
    while (true) {
        std::deque<std::string> lines;
        {
            std::unique_lock lock(mutex_);
            changed_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
            if (queue_.empty()) return;  // stopping, and all written
            lines.swap(queue_);
            queued_bytes_ = 0;
            writing_ = true;
        }
        const size_t whole = write_lines(lines);
        {
            std::lock_guard lock(mutex_);
            written_ += whole;
            if (whole < lines.size()) {
                dropped_ += lines.size() - whole;
                note_drops();
            }
            writing_ = false;
        }
        changed_.notify_all();
    }
}

bool LineWriter::wait_writable(bool mid_line) {
    while (true) {
        pollfd ready{fd_, POLLOUT, 0};
        // In slices, so that a stop is noticed: a reader that never reads
        // must not hold the agent's shutdown.
        const int polled = poll(&ready, 1, 100);
        if (polled > 0) {
            if (!(ready.revents & (POLLERR | POLLNVAL))) return true;
            // POLLERR on a pipe or socket: nobody will read again.
            std::lock_guard lock(mutex_);
            reader_gone_ = true;
            return false;
        }
        if (polled < 0 && errno != EINTR) return false;
        std::lock_guard lock(mutex_);
        // At shutdown, lines not yet begun wait drain_timeout; a line begun
        // gets as long again to end, so that stdout does not end in half a line.
        if (stopping_ && std::chrono::steady_clock::now() >=
                             stop_deadline_ + (mid_line ? options_.drain_timeout
                                                        : std::chrono::milliseconds(0))) {
            return false;
        }
    }
}

size_t LineWriter::write_lines(const std::deque<std::string>& lines) {
    // Chunks of whole lines where they fit: on a pipe, POLLOUT promises room
    // for PIPE_BUF bytes and a write of at most that much is atomic, so a
    // chunk is never cut and never blocks; a longer line goes in pieces.
    const size_t limit = pipe_like_ ? PIPE_BUF : size_t{1} << 20;
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
        const ssize_t wrote = ::write(fd_, chunk.data(), chunk.size());
        if (wrote < 0) {
            if (errno == EINTR || errno == EAGAIN) continue;
            if (errno == EPIPE) {
                std::lock_guard lock(mutex_);
                reader_gone_ = true;
            }
            return line;  // EPIPE and the like: the rest is lost
        }
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
    }
    return line;
}

}  // namespace gpuguard::agent
