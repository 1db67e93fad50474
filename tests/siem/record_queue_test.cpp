// RecordQueue: order, acknowledgement, restart recovery, torn and corrupt
// segments, dropping the oldest segment.
#include "siem/record_queue.h"

#include <fstream>

#include <gtest/gtest.h>

#include "tests/support/temp_dir.h"

namespace gpuguard::siem {
namespace {

std::vector<QueuedRecord> peek_all(RecordQueue& queue) {
    std::vector<QueuedRecord> out;
    EXPECT_TRUE(queue.peek(1000000, 1u << 30, &out));
    return out;
}

std::vector<std::filesystem::path> segments(const std::filesystem::path& dir) {
    std::vector<std::filesystem::path> out;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        if (entry.path().extension() == ".seg") out.push_back(entry.path());
    }
    std::sort(out.begin(), out.end());
    return out;
}

TEST(MemoryQueue, keeps_order_and_acknowledges_by_sequence) {
    auto queue = make_memory_queue();
    for (int i = 0; i < 5; ++i) ASSERT_TRUE(queue->append("r" + std::to_string(i)));
    auto records = peek_all(*queue);
    ASSERT_EQ(records.size(), 5u);
    EXPECT_EQ(records[3].data, "r3");
    ASSERT_TRUE(queue->ack_through(records[1].seq));
    EXPECT_EQ(queue->records(), 3u);
    EXPECT_EQ(peek_all(*queue).front().data, "r2");
    EXPECT_EQ(queue->drop_oldest(), 1u);
    EXPECT_EQ(peek_all(*queue).front().data, "r3");
}

TEST(DiskQueue, resumes_unacknowledged_records_after_reopen) {
    testing::TempDir dir;
    {
        auto queue = open_disk_queue(dir.path(), 4096);
        ASSERT_TRUE(queue) << queue.error().message;
        for (int i = 0; i < 300; ++i) {
            ASSERT_TRUE((*queue)->append("record-" + std::to_string(i) + std::string(40, 'x')));
        }
        EXPECT_GT(segments(dir.path()).size(), 3u);  // rotated
        std::vector<QueuedRecord> batch;
        ASSERT_TRUE((*queue)->peek(120, 1u << 20, &batch));
        ASSERT_EQ(batch.size(), 120u);
        ASSERT_TRUE((*queue)->ack_through(batch.back().seq));
        EXPECT_EQ((*queue)->records(), 180u);
    }
    auto queue = open_disk_queue(dir.path(), 4096);
    ASSERT_TRUE(queue) << queue.error().message;
    EXPECT_EQ((*queue)->records(), 180u);
    auto records = peek_all(**queue);
    ASSERT_EQ(records.size(), 180u);
    EXPECT_EQ(records.front().data.rfind("record-120", 0), 0u);
    EXPECT_EQ(records.back().data.rfind("record-299", 0), 0u);
    for (size_t i = 1; i < records.size(); ++i) EXPECT_EQ(records[i].seq, records[i - 1].seq + 1);
    // New records continue the sequence.
    ASSERT_TRUE((*queue)->append("after"));
    EXPECT_EQ(peek_all(**queue).back().seq, records.back().seq + 1);
    // Fully acknowledged segments are deleted.
    ASSERT_TRUE((*queue)->ack_through(records.back().seq + 1));
    EXPECT_EQ((*queue)->records(), 0u);
    EXPECT_LE(segments(dir.path()).size(), 1u);
}

TEST(DiskQueue, torn_tail_is_cut_and_counted) {
    testing::TempDir dir;
    {
        auto queue = open_disk_queue(dir.path(), 1 << 20);
        ASSERT_TRUE(queue);
        for (int i = 0; i < 10; ++i) ASSERT_TRUE((*queue)->append("r" + std::to_string(i)));
    }
    {
        // A crash in the middle of a write leaves half a record behind.
        std::ofstream out(segments(dir.path()).back(), std::ios::app | std::ios::binary);
        out.write("GGQ1\x10\x00\x00", 7);
    }
    auto queue = open_disk_queue(dir.path(), 1 << 20);
    ASSERT_TRUE(queue);
    EXPECT_EQ((*queue)->records(), 10u);
    EXPECT_EQ((*queue)->corrupt(), 1u);
    ASSERT_TRUE((*queue)->append("r10"));
    auto records = peek_all(**queue);
    ASSERT_EQ(records.size(), 11u);
    EXPECT_EQ(records.back().data, "r10");
}

TEST(DiskQueue, checksum_mismatch_drops_the_rest_of_the_segment) {
    testing::TempDir dir;
    {
        auto queue = open_disk_queue(dir.path(), 1 << 20);
        ASSERT_TRUE(queue);
        for (int i = 0; i < 10; ++i) ASSERT_TRUE((*queue)->append("payload-" + std::to_string(i)));
    }
    {
        std::fstream file(segments(dir.path()).back(),
                          std::ios::in | std::ios::out | std::ios::binary);
        file.seekp(5 * (20 + 9) + 22);  // inside record 5's payload
        file.put('#');
    }
    auto queue = open_disk_queue(dir.path(), 1 << 20);
    ASSERT_TRUE(queue);
    EXPECT_EQ((*queue)->records(), 5u);
    EXPECT_EQ((*queue)->corrupt(), 1u);
    EXPECT_EQ(peek_all(**queue).back().data, "payload-4");
}

TEST(DiskQueue, drop_oldest_discards_a_segment_and_survives_restart) {
    testing::TempDir dir;
    uint64_t dropped = 0;
    {
        auto queue = open_disk_queue(dir.path(), 4096);
        ASSERT_TRUE(queue);
        for (int i = 0; i < 200; ++i) ASSERT_TRUE((*queue)->append(std::string(100, 'a' + i % 26)));
        dropped = (*queue)->drop_oldest();
        EXPECT_GT(dropped, 0u);
        EXPECT_EQ((*queue)->records(), 200u - dropped);
    }
    auto queue = open_disk_queue(dir.path(), 4096);
    ASSERT_TRUE(queue);
    EXPECT_EQ((*queue)->records(), 200u - dropped);
    EXPECT_EQ(peek_all(**queue).front().seq, dropped + 1);
}

}  // namespace
}  // namespace gpuguard::siem
