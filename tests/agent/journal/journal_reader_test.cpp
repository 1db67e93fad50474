// JournalReader: torn tails, corrupt records and bit flips are reported and
// skipped, never fatal; filters; ordering; time arguments.
#include <random>

#include <gtest/gtest.h>

#include "gpuguard/events/event_json.h"
#include "gpuguard/journal/journal.h"
#include "tests/agent/journal/journal_fixtures.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent::journal {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

class JournalReaderTest : public ::testing::Test {
  protected:
    // Writes `n` numbered events (and every event type) into one segment; returns its path.
    fs::path write_journal(uint64_t n, bool compress = false) {
        auto options = testing::test_options(dir_.path() / "journal");
        options.compress = compress;
        options.block_bytes = 2048;
        auto writer = JournalWriter::open(options, testing::test_identity(), {}, {});
        EXPECT_TRUE(writer.ok());
        for (const auto& event : testing::every_event_type()) {
            expected_.push_back(event_to_json(event, 0));
            encoded_.emplace_back();
            encode_event(event, encoded_.back());
            EXPECT_TRUE((*writer)->append(event, 0));
        }
        for (uint64_t i = 0; i < n; ++i) {
            const Event event = testing::numbered_event(i, 2'000'000'000);
            expected_.push_back(event_to_json(event, 0));
            encoded_.emplace_back();
            encode_event(event, encoded_.back());
            EXPECT_TRUE((*writer)->append(event, 0));
        }
        (*writer)->close();
        return dir_.path() / "journal" / "seg-000000000001.ggj";
    }

    // Offsets of every record frame (meta included), or of the event records only.
    std::vector<uint64_t> record_offsets(const fs::path& path, bool events_only = false) {
        ReaderOptions options;
        options.meta = true;
        std::vector<uint64_t> offsets;
        for (const auto& record : testing::read_all(path, options)) {
            if (events_only && record.kind != RecordKind::kEvent) continue;
            if (offsets.empty() || offsets.back() != record.offset)
                offsets.push_back(record.offset);
        }
        return offsets;
    }

    struct ReadResult {
        std::vector<std::string> events;
        std::vector<JournalProblem> problems;
        ReadStats stats;
    };
    ReadResult read(const fs::path& path) {
        ReadResult result;
        auto reader = JournalReader::open({path});
        EXPECT_TRUE(reader.ok());
        JournalRecord record;
        while (reader->next(record)) {
            if (record.kind == RecordKind::kEvent) {
                result.events.push_back(event_to_json(record.event, 0));
            }
        }
        result.problems = reader->problems();
        result.stats = reader->stats();
        return result;
    }

    TempDir dir_{"gg-journal-reader"};
    std::vector<std::string> expected_;
    std::vector<std::string> encoded_;  // the same events in the binary encoding
};

TEST_F(JournalReaderTest, reads_a_clean_journal_without_problems) {
    const auto path = write_journal(100);
    const auto result = read(path);
    EXPECT_EQ(result.events, expected_);
    EXPECT_TRUE(result.problems.empty());
    EXPECT_EQ(result.stats.torn_tails, 0u);
}

TEST_F(JournalReaderTest, a_tail_cut_at_every_offset_of_the_last_records_reads_the_valid_prefix) {
    const auto path = write_journal(20);
    const std::string bytes = testing::read_bytes(path);
    const auto offsets = record_offsets(path);
    ASSERT_GE(offsets.size(), 3u);
    // The last event and the segment_end after it: every cut inside them.
    const uint64_t last_event = offsets[offsets.size() - 2];
    const uint64_t segment_end = offsets.back();
    const fs::path cut_path = dir_.path() / "cut.ggj";
    for (uint64_t cut = last_event; cut < bytes.size(); ++cut) {
        testing::write_bytes(cut_path, bytes.substr(0, cut));
        const auto result = read(cut_path);
        const bool inside_last_event = cut < segment_end;
        const size_t expected_events = expected_.size() - (inside_last_event ? 1 : 0);
        ASSERT_EQ(result.events.size(), expected_events) << "cut at " << cut;
        EXPECT_TRUE(std::equal(result.events.begin(), result.events.end(), expected_.begin()));
        const uint64_t record_start = inside_last_event ? last_event : segment_end;
        if (cut == record_start) {
            EXPECT_TRUE(result.problems.empty()) << "cut at a record boundary is a clean end";
            continue;
        }
        ASSERT_EQ(result.problems.size(), 1u) << "cut at " << cut;
        EXPECT_EQ(result.problems[0].kind, JournalProblem::Kind::kTornTail) << "cut at " << cut;
        EXPECT_EQ(result.problems[0].offset, record_start) << "cut at " << cut;
        EXPECT_EQ(result.problems[0].bytes, cut - record_start);
        EXPECT_EQ(result.stats.torn_tails, 1u);
    }
}

TEST_F(JournalReaderTest, a_file_cut_inside_its_header_is_reported_not_fatal) {
    const auto path = write_journal(1);
    const std::string bytes = testing::read_bytes(path);
    const fs::path cut_path = dir_.path() / "cut.ggj";
    for (size_t cut = 0; cut < 40; ++cut) {
        testing::write_bytes(cut_path, bytes.substr(0, cut));
        const auto result = read(cut_path);
        EXPECT_TRUE(result.events.empty());
        ASSERT_EQ(result.problems.size(), 1u) << cut;
        EXPECT_EQ(result.problems[0].kind, JournalProblem::Kind::kBadHeader);
    }
}

TEST_F(JournalReaderTest, a_corrupt_record_in_the_middle_is_skipped_and_counted) {
    const auto path = write_journal(50);
    std::string bytes = testing::read_bytes(path);
    const auto offsets = record_offsets(path, true);
    const uint64_t victim = offsets[30];
    bytes[victim + kFrameSize + 2] ^= 0x40;
    const fs::path damaged = dir_.path() / "damaged.ggj";
    testing::write_bytes(damaged, bytes);
    const auto result = read(damaged);
    ASSERT_EQ(result.problems.size(), 1u);
    EXPECT_EQ(result.problems[0].kind, JournalProblem::Kind::kCorruptRecord);
    EXPECT_EQ(result.problems[0].offset, victim);
    EXPECT_EQ(result.problems[0].bytes, offsets[31] - victim);
    EXPECT_EQ(result.stats.corrupt_records, 1u);
    auto expected = expected_;
    expected.erase(expected.begin() + 30);
    EXPECT_EQ(result.events, expected);
}

TEST_F(JournalReaderTest, a_corrupt_length_field_resynchronises_on_the_next_record) {
    const auto path = write_journal(50);
    std::string bytes = testing::read_bytes(path);
    const auto offsets = record_offsets(path, true);
    const uint64_t victim = offsets[10];
    bytes[victim + 10] = 0x7f;  // length now far beyond the file
    const fs::path damaged = dir_.path() / "damaged.ggj";
    testing::write_bytes(damaged, bytes);
    const auto result = read(damaged);
    ASSERT_EQ(result.problems.size(), 1u);
    EXPECT_EQ(result.problems[0].kind, JournalProblem::Kind::kCorruptRecord);
    EXPECT_EQ(result.events.size(), expected_.size() - 1);
}

// Random bit flips anywhere after the header: never a crash; each event read
// is an original one, in order; at most one record lost per flip; any loss is
// reported.
void check_bit_flips(JournalReaderTest& test, const fs::path& path, bool compressed,
                     const std::vector<std::string>& expected, const fs::path& scratch,
                     int rounds) {
    const std::string bytes = testing::read_bytes(path);
    size_t header_size = 0;
    std::string error;
    ASSERT_TRUE(decode_header(bytes, header_size, error));
    std::mt19937_64 random(20261121);
    for (int round = 0; round < rounds; ++round) {
        std::string damaged = bytes;
        const int flips = 1 + static_cast<int>(random() % 3);
        for (int i = 0; i < flips; ++i) {
            const size_t at = header_size + random() % (bytes.size() - header_size);
            damaged[at] ^= static_cast<char>(1u << (random() % 8));
        }
        testing::write_bytes(scratch, damaged);
        auto reader = JournalReader::open({scratch});
        ASSERT_TRUE(reader.ok());
        std::vector<std::string> events;
        JournalRecord record;
        while (reader->next(record)) {
            if (record.kind != RecordKind::kEvent) continue;
            events.emplace_back();
            encode_event(record.event, events.back());
        }
        // A subsequence of the originals.
        size_t j = 0;
        for (const auto& event : events) {
            while (j < expected.size() && expected[j] != event) ++j;
            ASSERT_LT(j, expected.size()) << "round " << round << ": an event not written";
            ++j;
        }
        const size_t lost = expected.size() - events.size();
        if (!compressed) {
            EXPECT_LE(lost, static_cast<size_t>(flips)) << "round " << round;
        }
        EXPECT_FALSE(reader->problems().empty()) << "round " << round << ": flip unreported";
        (void)test;
    }
}

TEST_F(JournalReaderTest, random_bit_flips_are_reported_and_skipped) {
    const auto path = write_journal(200);
    check_bit_flips(*this, path, false, encoded_, dir_.path() / "flipped.ggj", 400);
}

TEST_F(JournalReaderTest, random_bit_flips_in_compressed_blocks_are_reported_and_skipped) {
    const auto path = write_journal(2000, true);
    check_bit_flips(*this, path, true, encoded_, dir_.path() / "flipped.ggj", 150);
}

TEST_F(JournalReaderTest, filters_by_pid_type_and_time) {
    const auto path = write_journal(70);
    ReaderOptions by_pid;
    by_pid.pid = 1003;
    auto records = testing::read_all(path, by_pid);
    EXPECT_EQ(records.size(), 10u);
    for (const auto& record : records) EXPECT_EQ(record.event.task.pid, 1003u);

    ReaderOptions by_type;
    by_type.types = {"exec", "fork"};
    records = testing::read_all(path, by_type);
    size_t forks = 0;
    for (const auto& record : records) {
        const auto type = record_type(record);
        EXPECT_TRUE(type == "exec" || type == "fork") << type;
        forks += type == "fork";
    }
    EXPECT_EQ(forks, 2u);
    EXPECT_EQ(records.size(), 2u + 2u + 23u);

    // Fork children and telemetry processes match --pid too.
    ReaderOptions child;
    child.pid = 4242 + 10;
    records = testing::read_all(path, child);
    ASSERT_EQ(records.size(), 1u);
    EXPECT_EQ(record_type(records[0]), "fork");

    // Numbered events are 1 ms apart from 2 s; realtime offset 0.
    ReaderOptions window;
    window.since_unix_ns = 2'010'000'000;
    window.until_unix_ns = 2'019'000'000;
    records = testing::read_all(path, window);
    ASSERT_EQ(records.size(), 10u);
    EXPECT_EQ(records.front().ts_ns, 2'010'000'000u);
    EXPECT_EQ(records.back().ts_ns, 2'019'000'000u);
}

TEST_F(JournalReaderTest, reads_several_segments_in_sequence_order) {
    auto options = testing::test_options(dir_.path() / "multi");
    options.segment_max_bytes = 4096;
    auto writer = JournalWriter::open(options, testing::test_identity(), {}, {});
    ASSERT_TRUE(writer.ok());
    std::vector<std::string> expected;
    for (uint64_t i = 0; i < 1000; ++i) {
        const Event event = testing::numbered_event(i);
        expected.push_back(event_to_json(event, 0));
        ASSERT_TRUE((*writer)->append(event, 0));
    }
    (*writer)->close();
    auto reader = JournalReader::open({dir_.path() / "multi"});
    ASSERT_TRUE(reader.ok());
    std::vector<std::string> events;
    JournalRecord record;
    uint64_t last_sequence = 0;
    while (reader->next(record)) {
        events.push_back(event_to_json(record.event, 0));
        const uint64_t sequence = reader->segments()[record.segment].header.sequence;
        EXPECT_GE(sequence, last_sequence);
        last_sequence = sequence;
    }
    EXPECT_GT(reader->segments().size(), 5u);
    EXPECT_EQ(events, expected);
    EXPECT_TRUE(reader->clean());
}

TEST_F(JournalReaderTest, a_foreign_file_is_a_bad_header_and_is_journal_says_no) {
    const fs::path text = dir_.path() / "events.jsonl";
    testing::write_bytes(text, "{\"type\":\"exec\"}\n");
    EXPECT_FALSE(is_journal(text));
    EXPECT_FALSE(is_journal(dir_.path()));
    const auto result = read(text);
    ASSERT_EQ(result.problems.size(), 1u);
    EXPECT_EQ(result.problems[0].kind, JournalProblem::Kind::kBadHeader);
    const auto path = write_journal(1);
    EXPECT_TRUE(is_journal(path));
    EXPECT_TRUE(is_journal(path.parent_path()));
    EXPECT_FALSE(JournalReader::open({dir_.path() / "missing"}).ok());
}

TEST(JournalTimeArgument, accepts_rfc3339_now_and_relative_times) {
    const int64_t now = 1'790'000'000'000'000'000;
    EXPECT_EQ(parse_time_argument("now", now), now);
    EXPECT_EQ(parse_time_argument("-10m", now), now - 600'000'000'000);
    EXPECT_EQ(parse_time_argument("-90s", now), now - 90'000'000'000);
    EXPECT_EQ(parse_time_argument("-2h", now), now - 7'200'000'000'000);
    EXPECT_EQ(parse_time_argument("-1d", now), now - 86'400'000'000'000);
    EXPECT_EQ(parse_time_argument("-500ms", now), now - 500'000'000);
    EXPECT_EQ(parse_time_argument("+1.5s", now), now + 1'500'000'000);
    EXPECT_EQ(parse_time_argument("2026-11-21T23:49:29Z", now),
              parse_rfc3339("2026-11-21T23:49:29Z"));
    EXPECT_FALSE(parse_time_argument("-10x", now));
    EXPECT_FALSE(parse_time_argument("yesterday", now));
    EXPECT_FALSE(parse_time_argument("-", now));
}

}  // namespace
}  // namespace gpuguard::agent::journal
