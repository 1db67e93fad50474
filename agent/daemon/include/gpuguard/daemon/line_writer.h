// LineWriter: lines for a file descriptor (what `gpuguard run` prints on
// stdout), written by a thread of their own. A reader that stops reading
// (a pipe into a stalled program) then fills the writer's queue, not the
// agent's event loop: lines over the queue's bound are dropped and counted,
// and shutdown waits for the queue a bounded time only. A reader that goes
// away costs the lines from then on, dropped and counted at once. A write
// that never returns (stdout a file on a hung file system, a terminal held
// by Ctrl-S) costs its lines too: shutdown leaves that thread behind.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

namespace gpuguard::agent {

struct LineWriterOptions {
    size_t max_queued_bytes = 16 << 20;
    // How long close() keeps writing what is queued before it drops the rest
    // (counted). A line begun by then gets at most a quarter of this again
    // to end, so that stdout does not end in half a line.
    std::chrono::milliseconds drain_timeout{500};
};

// What was printed and lost, for `status` and /metrics.
struct LineWriterStats {
    uint64_t written = 0;  // lines
    uint64_t dropped =
        0;  // lines: queue full, reader gone, write error, or not written at shutdown
    size_t queued_bytes = 0;
    bool reader_gone = false;
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
    // rest, and stops; later lines are dropped. Returns within about
    // 2 x drain_timeout whatever the fd does. The counts are final after it.
    void close();

    LineWriterStats stats() const;
    uint64_t written() const { return stats().written; }
    uint64_t dropped() const { return stats().dropped; }
    // The fd's reader has gone (a pipe or socket closed at the other end):
    // every line from then on is dropped at once, counted.
    bool reader_gone() const { return stats().reader_gone; }

  private:
    struct Shared;  // what the writer thread uses; it outlives us when a write hangs
    std::shared_ptr<Shared> shared_;
    std::thread thread_;
};

}  // namespace gpuguard::agent
