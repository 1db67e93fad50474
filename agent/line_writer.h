// LineWriter: lines for a file descriptor (what `gpuguard run` prints on
// stdout), written by a thread of their own. A reader that stops reading
// (a pipe into a stalled program) then fills the writer's queue, not the
// agent's event loop: lines over the queue's bound are dropped and counted,
// and shutdown waits for the queue a bounded time only. A reader that goes
// away costs the lines from then on, dropped and counted at once.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

namespace gpuguard::agent {

struct LineWriterOptions {
    size_t max_queued_bytes = 16 << 20;
    // How long the destructor keeps writing what is queued before it drops
    // the rest (counted).
    std::chrono::milliseconds drain_timeout{2000};
};

class LineWriter {
  public:
    explicit LineWriter(int fd, LineWriterOptions options = {});
    ~LineWriter() { close(); }
    LineWriter(const LineWriter&) = delete;
    LineWriter& operator=(const LineWriter&) = delete;

    // Queues `line` and a newline; false (and counted) when the queue is full.
    bool write(std::string line);
    // Waits up to `timeout` until everything queued is written.
    bool flush(std::chrono::milliseconds timeout);
    // Writes what is queued for up to drain_timeout, drops (counts) the
    // rest, and stops; later lines are dropped. The counts are final after it.
    void close();

    uint64_t written() const;  // lines
    uint64_t dropped() const;  // lines: queue full, write error, or not written at shutdown
    // The fd's reader has gone (a pipe or socket closed at the other end):
    // every line from then on is dropped at once, counted.
    bool reader_gone() const;

  private:
    void run();
    // Writes `lines` in order; the number written whole (the rest is lost:
    // the fd failed, or the shutdown's time ran out).
    size_t write_lines(const std::deque<std::string>& lines);
    // Waits for room; false when the fd failed or the shutdown's time ran out.
    bool wait_writable(bool mid_line);
    void note_drops();

    const int fd_;
    const LineWriterOptions options_;
    bool pipe_like_ = false;  // a pipe or socket: writes of at most PIPE_BUF after POLLOUT
    mutable std::mutex mutex_;
    std::condition_variable changed_;
    std::deque<std::string> queue_;
    size_t queued_bytes_ = 0;
    bool writing_ = false;  // lines taken from the queue are being written
    bool stopping_ = false;
    std::chrono::steady_clock::time_point stop_deadline_{};
    uint64_t written_ = 0;
    uint64_t dropped_ = 0;
    bool reader_gone_ = false;
    std::chrono::steady_clock::time_point last_drop_report_{};
    std::thread thread_;
};

}  // namespace gpuguard::agent
