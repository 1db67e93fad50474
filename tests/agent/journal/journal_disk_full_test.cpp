// Disk full on a small tmpfs: the writer counts drops instead of blocking the
// caller, keeps the segment whole, and resumes (with a gap record) once space
// returns. Needs root to mount the tmpfs.
#include <chrono>
#include <cstring>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <sys/mount.h>

#include "gpuguard/events/event_json.h"
#include "gpuguard/journal/journal.h"
#include "tests/agent/journal/journal_fixtures.h"
#include "tests/support/privileged.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent::journal {
namespace {

namespace fs = std::filesystem;

class Mount {
  public:
    explicit Mount(const fs::path& target) : target_(target) {
        fs::create_directories(target);
        mounted_ = ::mount("tmpfs", target.c_str(), "tmpfs", 0, "size=512k,mode=0700") == 0;
        error_ = mounted_ ? 0 : errno;
    }
    ~Mount() {
        if (mounted_) ::umount2(target_.c_str(), MNT_DETACH);
    }
    bool mounted() const { return mounted_; }
    int error() const { return error_; }

  private:
    fs::path target_;
    bool mounted_ = false;
    int error_ = 0;
};

// Fills the file system with one file until write(2) fails.
void fill(const fs::path& file) {
    std::FILE* out = std::fopen(file.c_str(), "wb");
    ASSERT_NE(out, nullptr);
    const std::string chunk(4096, 'x');
    while (std::fwrite(chunk.data(), 1, chunk.size(), out) == chunk.size() &&
           std::fflush(out) == 0) {
    }
    std::fclose(out);
}

TEST(JournalDiskFull, drops_without_blocking_and_resumes_when_space_returns) {
    GG_REQUIRE_PRIVILEGED();
    testing::TempDir dir("gg-journal-full");
    Mount mount(dir / "tmpfs");
    ASSERT_TRUE(mount.mounted()) << "mount tmpfs: " << std::strerror(mount.error());

    auto options = testing::test_options(dir / "tmpfs" / "journal");
    options.segment_max_bytes = 64 << 10;
    options.retry_interval_ms = 50;
    auto opened = JournalWriter::open(options, testing::test_identity(), {}, {});
    ASSERT_TRUE(opened.ok()) << opened.error().message;
    auto& writer = *opened;

    uint64_t index = 0;
    std::vector<std::string> first, last;
    for (; index < 200; ++index) {
        const Event event = testing::numbered_event(index);
        first.push_back(event_to_json(event, 0));
        ASSERT_TRUE(writer->append(event, 0));
    }
    writer->flush();
    ASSERT_EQ(writer->stats().write_errors, 0u);

    fill(dir / "tmpfs" / "filler");
    auto slowest = std::chrono::nanoseconds(0);
    for (; index < 5200; ++index) {
        const auto start = std::chrono::steady_clock::now();
        (void)writer->append(testing::numbered_event(index), 0);
        slowest = std::max(slowest, std::chrono::steady_clock::now() - start);
    }
    writer->flush();
    auto stats = writer->stats();
    EXPECT_GT(stats.write_errors, 0u);
    EXPECT_GT(stats.dropped_write_failed, 0u);
    EXPECT_FALSE(stats.writing);
    EXPECT_NE(stats.last_error.find("No space left on device"), std::string::npos)
        << stats.last_error;
    EXPECT_LT(slowest, std::chrono::milliseconds(100)) << "append() waited on the disk";

    fs::remove(dir / "tmpfs" / "filler");
    // The writer retries every retry_interval_ms on its own: wait until it writes again.
    for (const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
         !writer->stats().writing && std::chrono::steady_clock::now() < deadline;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_TRUE(writer->stats().writing) << "no retry within 5 s: " << writer->stats().last_error;
    for (; index < 5400; ++index) {
        const Event event = testing::numbered_event(index);
        last.push_back(event_to_json(event, 0));
        ASSERT_TRUE(writer->append(event, 0));
    }
    writer->close();
    stats = writer->stats();
    EXPECT_TRUE(stats.writing);

    auto reader = JournalReader::open({options.dir});
    ASSERT_TRUE(reader.ok());
    std::vector<std::string> events;
    uint64_t gap_events = 0;
    uint64_t snapshot_events = 0;
    JournalRecord record;
    while (reader->next(record)) {
        if (record.kind == RecordKind::kEvent && record.in_snapshot) {
            ++snapshot_events;  // the new segment's snapshot re-establishes process state
            continue;
        }
        if (record.kind == RecordKind::kEvent) events.push_back(event_to_json(record.event, 0));
        if (record.kind == RecordKind::kGap) {
            EXPECT_NE(record.gap.reason.find("No space left on device"), std::string::npos);
            gap_events += record.gap.dropped_events;
        }
    }
    EXPECT_TRUE(reader->clean()) << "a failed write leaves no torn record behind: "
                                 << reader->problems().front().detail;
    EXPECT_EQ(gap_events, stats.dropped_write_failed);
    EXPECT_EQ(snapshot_events, 7u) << "workers 1000-1006, delivered after the gap";
    EXPECT_EQ(events.size() + stats.dropped_write_failed, index);
    ASSERT_GE(events.size(), first.size() + last.size());
    EXPECT_TRUE(std::equal(first.begin(), first.end(), events.begin()));
    EXPECT_TRUE(std::equal(last.rbegin(), last.rend(), events.rbegin()));
}

}  // namespace
}  // namespace gpuguard::agent::journal
