// LineWriter: what `gpuguard run` prints goes out whole and in order, and a
// reader that stops reading costs counted drops, never a blocked caller or
// a shutdown that hangs.
#include "gpuguard/daemon/line_writer.h"

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

namespace gpuguard::agent {
namespace {

using namespace std::chrono_literals;

struct Pipe {
    int read_end = -1;
    int write_end = -1;
    Pipe() {
        int fds[2];
        EXPECT_EQ(pipe2(fds, O_CLOEXEC), 0);
        read_end = fds[0];
        write_end = fds[1];
    }
    ~Pipe() {
        close(read_end);
        close(write_end);
    }
};

std::string read_all_available(int fd) {
    std::string out;
    char buffer[65536];
    const int flags = fcntl(fd, F_GETFL);
    fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    while (true) {
        const ssize_t n = read(fd, buffer, sizeof(buffer));
        if (n <= 0) break;
        out.append(buffer, static_cast<size_t>(n));
    }
    fcntl(fd, F_SETFL, flags);
    return out;
}

TEST(LineWriter, WritesEveryLineInOrder) {
    Pipe pipe;
    std::string expected;
    {
        LineWriter writer(pipe.write_end);
        for (int i = 0; i < 200; ++i) {
            const std::string line = "line " + std::to_string(i) + std::string(i, 'x');
            ASSERT_TRUE(writer.write(line));
            expected += line + "\n";
        }
        ASSERT_TRUE(writer.flush(5s));
        EXPECT_EQ(writer.written(), 200u);
        EXPECT_EQ(writer.dropped(), 0u);
    }
    EXPECT_EQ(read_all_available(pipe.read_end), expected);
}

TEST(LineWriter, AReaderThatStopsReadingCostsCountedDropsNotABlockedCaller) {
    Pipe pipe;  // nobody reads: the pipe holds 64 KiB, then every write would block
    LineWriterOptions options;
    options.max_queued_bytes = 256 << 10;
    options.drain_timeout = 300ms;
    const std::string line(1000, 'd');
    const auto started = std::chrono::steady_clock::now();
    uint64_t accepted = 0;
    uint64_t dropped_now = 0;
    {
        LineWriter writer(pipe.write_end, options);
        for (int i = 0; i < 5000; ++i) {  // 5 MB
            if (writer.write(line)) {
                ++accepted;
            } else {
                ++dropped_now;
            }
        }
        const auto writing = std::chrono::steady_clock::now() - started;
        EXPECT_LT(writing, 2s) << "write() blocked on the full pipe";
        EXPECT_GT(dropped_now, 4000u);
        EXPECT_FALSE(writer.flush(100ms));
    }  // the destructor gives up after drain_timeout
    const auto total = std::chrono::steady_clock::now() - started;
    EXPECT_LT(total, 4s) << "shutdown waited on a reader that never reads";
    // What the pipe holds are whole lines only: a line cut short would be
    // read as a corrupt JSON line.
    const std::string got = read_all_available(pipe.read_end);
    ASSERT_FALSE(got.empty());
    EXPECT_EQ(got.size() % (line.size() + 1), 0u);
    EXPECT_EQ(got.back(), '\n');
}

// `gpuguard run | head`: the reader is gone; lines are dropped and counted
// at once (the agent ignores SIGPIPE), nothing waits on the dead pipe.
TEST(LineWriter, AReaderThatWentAwayCostsCountedDrops) {
    Pipe pipe;
    close(pipe.read_end);
    pipe.read_end = -1;
    LineWriter writer(pipe.write_end);
    uint64_t accepted = 0;
    for (int i = 0; i < 10; ++i) accepted += writer.write("line " + std::to_string(i));
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!writer.reader_gone() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(5ms);
    }
    ASSERT_TRUE(writer.reader_gone());
    EXPECT_FALSE(writer.write("after")) << "queued for a reader that is gone";
    writer.close();
    EXPECT_EQ(writer.written(), 0u);
    EXPECT_EQ(writer.dropped(), 11u);
    EXPECT_GE(accepted, 1u);
}

TEST(LineWriter, CountsWhatIsLeftAtShutdownAsDropped) {
    Pipe pipe;
    LineWriterOptions options;
    options.drain_timeout = 200ms;
    LineWriter writer(pipe.write_end, options);
    const std::string line(4000, 'x');
    uint64_t accepted = 0;
    for (int i = 0; i < 100; ++i) accepted += writer.write(line);
    EXPECT_EQ(accepted, 100u);
    writer.close();  // the pipe holds 64 KiB of the 400 KB
    EXPECT_GT(writer.dropped(), 0u);
    EXPECT_EQ(writer.written() + writer.dropped(), 100u);
    EXPECT_EQ(read_all_available(pipe.read_end).size(), writer.written() * (line.size() + 1));
    EXPECT_FALSE(writer.write("after close"));
    EXPECT_EQ(writer.written() + writer.dropped(), 101u);
}

// stdout a terminal nobody reads (or a file on a hung file system): the
// write() itself never returns. Shutdown must not wait for it: close()
// leaves that thread behind, and what it held and what waited are counted.
TEST(LineWriter, AWriteThatNeverReturnsIsLeftBehindAtShutdown) {
    const int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    ASSERT_GE(master, 0);
    ASSERT_EQ(grantpt(master), 0);
    ASSERT_EQ(unlockpt(master), 0);
    const int terminal = open(ptsname(master), O_WRONLY | O_NOCTTY | O_CLOEXEC);
    ASSERT_GE(terminal, 0);
    LineWriterOptions options;
    options.drain_timeout = 200ms;
    auto writer = std::make_unique<LineWriter>(terminal, options);
    const std::string line(100000, 't');  // the terminal's buffer holds a few KiB
    for (int i = 0; i < 20; ++i) ASSERT_TRUE(writer->write(line));
    EXPECT_FALSE(writer->flush(300ms)) << "the terminal took 2 MB that nobody read";
    const auto started = std::chrono::steady_clock::now();
    writer->close();
    EXPECT_LT(std::chrono::steady_clock::now() - started, 1s);
    EXPECT_EQ(writer->written(), 0u);
    EXPECT_EQ(writer->dropped(), 20u);
    EXPECT_FALSE(writer->write("after close"));
    writer.reset();  // the blocked thread keeps what it uses alive
    close(master);   // which ends its write (EIO), long after the writer is gone
    close(terminal);
}

}  // namespace
}  // namespace gpuguard::agent
