// The fuzzer's seed corpus (tests/fuzz/corpus/journal) holds real segments of
// the current format: each reads as expected. DISABLED_write_fuzz_seeds
// regenerates them after a format change:
//   gpuguard_journal_tests --gtest_also_run_disabled_tests
//       --gtest_filter='JournalFuzzCorpus.DISABLED_write_fuzz_seeds'
#include <gtest/gtest.h>

#include "gpuguard/journal/journal.h"
#include "tests/agent/journal/journal_fixtures.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent::journal {
namespace {

namespace fs = std::filesystem;

const fs::path kCorpus = GPUGUARD_FUZZ_CORPUS;

fs::path write_segment(const fs::path& dir, bool compress, bool with_snapshot) {
    auto options = testing::test_options(dir);
    options.compress = compress;
    options.block_bytes = 1024;
    options.lookback_s = 60;
    options.incident_after_s = 1;
    std::vector<Event> snapshot;
    if (with_snapshot) {
        for (const auto& event : testing::every_event_type(500, 77)) {
            if (std::holds_alternative<ProcessSnapshot>(event.data)) snapshot.push_back(event);
        }
    }
    auto writer = JournalWriter::open(options, testing::test_identity(), snapshot,
                                      {{195, std::nullopt, "nvidia-frontend"}, {1, 3, "config"}});
    EXPECT_TRUE(writer.ok());
    for (const auto& event : testing::every_event_type())
        (*writer)->append(event, 1'790'000'000'000'000'000);
    (*writer)->append_detection(1'000'100'000, 4242, "miner.stratum", R"({"rule":{"id":"m"}})");
    (*writer)->append_enforcement(1'000'200'000, 4242, "miner.stratum", R"({"action":"kill"})");
    (*writer)->append_note(1'000'300'000, "info", "agent stopping");
    if (with_snapshot) (*writer)->trigger(1'000'010'000, 4242, "miner.stratum", "{}");
    (*writer)->close();
    return dir / "seg-000000000001.ggj";
}

TEST(JournalFuzzCorpus, DISABLED_write_fuzz_seeds) {
    testing::TempDir dir("gg-fuzz-seeds");
    fs::create_directories(kCorpus);
    const auto plain = write_segment(dir / "plain", false, false);
    fs::copy_file(plain, kCorpus / "plain.ggj", fs::copy_options::overwrite_existing);
    fs::copy_file(write_segment(dir / "zstd", true, false), kCorpus / "zstd.ggj",
                  fs::copy_options::overwrite_existing);
    const auto with_snapshot = write_segment(dir / "snapshot", false, true);
    fs::copy_file(with_snapshot, kCorpus / "snapshot.ggj", fs::copy_options::overwrite_existing);
    for (const auto& entry : fs::directory_iterator(dir / "snapshot" / "incidents")) {
        fs::copy_file(entry.path() / "incident.ggj", kCorpus / "incident.ggj",
                      fs::copy_options::overwrite_existing);
    }
    const std::string bytes = testing::read_bytes(plain);
    testing::write_bytes(kCorpus / "torn.ggj", bytes.substr(0, bytes.size() - 7));
}

TEST(JournalFuzzCorpus, seeds_are_segments_of_the_current_format) {
    for (const char* name : {"plain.ggj", "zstd.ggj", "snapshot.ggj", "incident.ggj"}) {
        auto reader = JournalReader::open({kCorpus / name});
        ASSERT_TRUE(reader.ok()) << name;
        JournalRecord record;
        size_t events = 0;
        while (reader->next(record)) events += record.kind == RecordKind::kEvent;
        EXPECT_TRUE(reader->clean()) << name;
        EXPECT_GE(events, 1u) << name;
    }
    auto torn = JournalReader::open({kCorpus / "torn.ggj"});
    ASSERT_TRUE(torn.ok());
    JournalRecord record;
    while (torn->next(record)) {
    }
    EXPECT_EQ(torn->stats().torn_tails, 1u);
}

}  // namespace
}  // namespace gpuguard::agent::journal
