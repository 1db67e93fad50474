// ProcessIoSampler and the /proc/PID/io parser on a fake proc tree: which
// readings become process_io events (new processes, moved counters), and
// what a missing or malformed file gives.
#include "gpuguard/state/process_io.h"

#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>

#include "gpuguard/state/proc_parse.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent {
namespace {

TEST(ProcIo, WriteBytesIsReadFromItsOwnLineOnly) {
    const std::string io =
        "rchar: 6976\nwchar: 812\nsyscr: 10\nsyscw: 3\nread_bytes: 0\nwrite_bytes: 4096\n"
        "cancelled_write_bytes: 512\n";
    EXPECT_EQ(proc_io_field(io, "write_bytes"), 4096u);
    EXPECT_EQ(proc_io_field(io, "cancelled_write_bytes"), 512u);
    EXPECT_EQ(proc_io_field(io, "wchar"), 812u);
    EXPECT_EQ(proc_io_field(io, "bytes"), std::nullopt);
    EXPECT_EQ(proc_io_field("write_bytes: 18446744073709551615", "write_bytes"),
              18446744073709551615ull);
    EXPECT_EQ(proc_io_field("write_bytes: 18446744073709551616", "write_bytes"), std::nullopt);
    EXPECT_EQ(proc_io_field("write_bytes: 12kB\n", "write_bytes"), std::nullopt);
    EXPECT_EQ(proc_io_field("write_bytes:\n", "write_bytes"), std::nullopt);
    EXPECT_EQ(proc_io_field("", "write_bytes"), std::nullopt);
}

class ProcessIoSamplerTest : public ::testing::Test {
  protected:
    void write_io(uint32_t pid, uint64_t write_bytes) {
        const auto dir = proc_.path() / std::to_string(pid);
        std::filesystem::create_directories(dir);
        std::ofstream(dir / "io") << "rchar: 1\nwchar: 2\nsyscr: 3\nsyscw: 4\nread_bytes: 0\n"
                                  << "write_bytes: " << write_bytes
                                  << "\ncancelled_write_bytes: 0\n";
    }
    static ProcessInfo process(uint32_t pid, bool exited = false) {
        ProcessInfo info;
        info.pid = pid;
        info.ppid = 1;
        info.uid = 1000;
        info.comm = "p" + std::to_string(pid);
        info.exited = exited;
        return info;
    }
    ProcessIoSampler sampler() {
        return ProcessIoSampler(proc_.path(), [this](uint32_t pid) -> std::optional<NetSends> {
            const auto found = sends_.find(pid);
            if (found == sends_.end()) return std::nullopt;
            return found->second;
        });
    }
    static std::vector<uint32_t> pids(const std::vector<Event>& events) {
        std::vector<uint32_t> out;
        for (const auto& event : events) out.push_back(event.task.pid);
        return out;
    }

    gpuguard::testing::TempDir proc_{"gg-proc-io"};
    std::map<uint32_t, NetSends> sends_;
};

TEST_F(ProcessIoSamplerTest, EmitsNewProcessesAndMovedCountersOnly) {
    auto io = sampler();
    write_io(10, 4096);
    write_io(11, 0);
    sends_[10] = NetSends{200, 1, 900, 3};
    auto events = io.sample({process(10), process(11), process(12, /*exited=*/true)}, 100);
    ASSERT_EQ(pids(events), (std::vector<uint32_t>{10, 11}));
    EXPECT_EQ(events[0].ts_ns, 100u);
    EXPECT_EQ(events[0].task.comm, "p10");
    EXPECT_EQ(events[0].task.uid, 1000u);
    EXPECT_EQ(std::get<ProcessIo>(events[0].data), (ProcessIo{4096, 200, 1, 900, 3}));
    // No net counter for 11 (not a GPU process in the kernel map, or no payload programs).
    EXPECT_EQ(std::get<ProcessIo>(events[1].data), (ProcessIo{0, std::nullopt, std::nullopt}));

    EXPECT_TRUE(io.sample({process(10), process(11)}, 200).empty()) << "nothing moved";

    sends_[10] = NetSends{400, 2, 900, 3};
    events = io.sample({process(10), process(11)}, 300);
    ASSERT_EQ(pids(events), std::vector<uint32_t>{10});
    EXPECT_EQ(std::get<ProcessIo>(events[0].data), (ProcessIo{4096, 400, 2, 900, 3}));

    write_io(11, 8192);
    EXPECT_EQ(pids(io.sample({process(10), process(11)}, 400)), std::vector<uint32_t>{11});

    // 10 leaves the list (exited, evicted): forgotten, so a process that
    // gets its pid later starts with a reading of its own.
    EXPECT_TRUE(io.sample({process(11)}, 500).empty());
    EXPECT_EQ(pids(io.sample({process(10), process(11)}, 600)), std::vector<uint32_t>{10});
}

TEST_F(ProcessIoSamplerTest, AProcessWithoutAnIoFileHasNoFileCounter) {
    auto io = sampler();
    sends_[20] = NetSends{0, 0};
    const auto events = io.sample({process(20)}, 1);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(std::get<ProcessIo>(events[0].data), (ProcessIo{std::nullopt, 0, 0, 0, 0}));
}

// An io file whose read fails after it opened (a process that exits
// mid-read gives ESRCH; a directory in its place gives EISDIR the same way):
// no file counter, and no exception. Read through an istreambuf_iterator,
// libstdc++'s filebuf threw here and the agent ended ("basic_filebuf::
// underflow error reading the file: No such process").
TEST_F(ProcessIoSamplerTest, AnIoFileThatFailsMidReadHasNoFileCounter) {
    auto io = sampler();
    std::filesystem::create_directories(proc_.path() / "21" / "io");
    sends_[21] = NetSends{10, 1};
    std::vector<Event> events;
    ASSERT_NO_THROW(events = io.sample({process(21)}, 1));
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(std::get<ProcessIo>(events[0].data), (ProcessIo{std::nullopt, 10, 1, 0, 0}));
}

}  // namespace
}  // namespace gpuguard::agent
