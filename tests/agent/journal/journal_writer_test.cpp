// JournalWriter: what it writes, rotation and retention boundaries, process
// snapshots, queue drops, look-back incident bundles (the containers and
// workloads a segment opens with: journal_snapshot_test.cpp).
#include <atomic>
#include <fstream>
#include <map>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/stat.h>

#include "gpuguard/events/event_json.h"
#include "gpuguard/journal/journal.h"
#include "tests/agent/journal/journal_fixtures.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent::journal {
namespace {

namespace fs = std::filesystem;
using testing::open_writer;
using testing::segment_paths;
using testing::TempDir;

uint64_t total_size(const fs::path& dir) {
    uint64_t total = 0;
    for (const auto& path : segment_paths(dir)) total += fs::file_size(path);
    return total;
}

class JournalWriterTest : public ::testing::Test {
  protected:
    TempDir dir_{"gg-journal"};
};

TEST_F(JournalWriterTest, writes_every_record_kind_and_reads_it_back) {
    auto writer = open_writer(testing::test_options(dir_.path()));
    ASSERT_TRUE(writer);
    const auto events = testing::every_event_type();
    const int64_t offset = 1'790'000'000'000'000'000;
    for (const auto& event : events) EXPECT_TRUE(writer->append(event, offset));
    EXPECT_TRUE(writer->append_detection(5'000'000'000, 4242, "miner.stratum", R"({"a":1})"));
    EXPECT_TRUE(writer->append_enforcement(5'100'000'000, 4242, "miner.stratum", R"({"b":2})"));
    EXPECT_TRUE(writer->append_note(5'200'000'000, "info", "agent stopping"));
    writer->close();
    EXPECT_FALSE(writer->append(events.front(), offset)) << "appends after close are refused";

    ReaderOptions options;
    options.meta = true;
    auto reader = JournalReader::open({dir_.path()}, options);
    ASSERT_TRUE(reader.ok());
    std::vector<std::string> kinds;
    std::vector<std::string> jsons;
    JournalRecord record;
    while (reader->next(record)) {
        kinds.push_back(to_string(record.kind));
        if (record.kind == RecordKind::kEvent) {
            jsons.push_back(event_to_json(record.event, 0));
            EXPECT_EQ(record.realtime_offset_ns, offset);
        }
        if (record.kind == RecordKind::kDetection) {
            EXPECT_EQ(record.alert.json, R"({"a":1})");
        }
        if (record.kind == RecordKind::kEnforcement) {
            EXPECT_EQ(record.alert.rule_id, "miner.stratum");
        }
        if (record.kind == RecordKind::kNote) {
            EXPECT_EQ(record.note.text, "agent stopping");
        }
        if (record.kind == RecordKind::kGpuDevices) {
            ASSERT_EQ(record.gpu_devices.size(), 1u);
            EXPECT_EQ(record.gpu_devices[0].major, 195u);
        }
    }
    EXPECT_TRUE(reader->clean());
    std::vector<std::string> expected;
    for (const auto& event : events) expected.push_back(event_to_json(event, 0));
    EXPECT_EQ(jsons, expected);
    ASSERT_EQ(reader->segments().size(), 1u);
    const auto& segment = reader->segments()[0];
    EXPECT_TRUE(segment.clean_end);
    EXPECT_EQ(segment.header.hostname, "testhost");
    EXPECT_EQ(segment.header.kernel, "6.18.0-test");
    EXPECT_EQ(segment.header.rule_pack_version, "rules-2026.11");
    EXPECT_EQ(segment.header.sequence, 1u);
    EXPECT_EQ(kinds.front(), "clock");
    EXPECT_EQ(kinds.back(), "segment_end");
    EXPECT_EQ(std::count(kinds.begin(), kinds.end(), "snapshot_end"), 1);

    const auto stats = writer->stats();
    EXPECT_EQ(stats.events_written, events.size());
    EXPECT_EQ(stats.dropped(), 0u);
    EXPECT_EQ(stats.segments_created, 1u);
}

TEST_F(JournalWriterTest, compressed_blocks_read_back_identically) {
    auto options = testing::test_options(dir_.path());
    options.compress = true;
    options.block_bytes = 4096;
    options.fsync_interval_ms = 1000;  // 0 would seal a block per write batch
    auto writer = open_writer(options);
    ASSERT_TRUE(writer);
    std::vector<std::string> expected;
    for (uint64_t i = 0; i < 5000; ++i) {
        const Event event = testing::numbered_event(i);
        ASSERT_TRUE(writer->append(event, 0));
        expected.push_back(event_to_json(event, 0));
    }
    writer->close();
    auto records = testing::read_all(dir_.path());
    EXPECT_EQ(testing::event_jsons(records), expected);
    // Compression pays: numbered events repeat a lot.
    EXPECT_LT(total_size(dir_.path()), 5000u * 20);
}

TEST_F(JournalWriterTest, rotates_before_a_segment_would_exceed_its_size) {
    auto options = testing::test_options(dir_.path());
    options.segment_max_bytes = 8192;
    auto writer = open_writer(options);
    ASSERT_TRUE(writer);
    std::vector<std::string> expected;
    size_t largest_frame = 0;
    for (uint64_t i = 0; i < 3000; ++i) {
        const Event event = testing::numbered_event(i);
        std::string payload;
        encode_event(event, payload);
        largest_frame = std::max(largest_frame, kFrameSize + payload.size());
        ASSERT_TRUE(writer->append(event, 0));
        expected.push_back(event_to_json(event, 0));
    }
    writer->close();
    const auto paths = segment_paths(dir_.path());
    ASSERT_GT(paths.size(), 10u);
    for (size_t i = 0; i < paths.size(); ++i) {
        const auto size = fs::file_size(paths[i]);
        EXPECT_LE(size, options.segment_max_bytes) << paths[i];
        if (i + 1 < paths.size()) {
            // Full: one more record (and the end record's reserve) would not have fit.
            EXPECT_GT(size + largest_frame + 48, options.segment_max_bytes) << paths[i];
        }
    }
    ReaderOptions read_options;
    read_options.meta = true;
    auto records = testing::read_all(dir_.path(), read_options);
    EXPECT_EQ(testing::event_jsons(records), expected) << "no event lost or repeated at rotation";
    size_t rotations = 0;
    for (const auto& record : records) {
        if (record.kind == RecordKind::kSegmentEnd) {
            rotations += record.segment_end.reason == "rotate";
        }
    }
    EXPECT_EQ(rotations, paths.size() - 1);
    EXPECT_EQ(writer->stats().segments_created, paths.size());
}

TEST_F(JournalWriterTest, rotates_by_age_on_the_journal_clock) {
    auto now = std::make_shared<std::atomic<uint64_t>>(1'000'000'000'000);
    auto options = testing::test_options(dir_.path());
    options.segment_max_age_s = 10;
    options.monotonic_clock = [now] { return now->load(); };
    auto writer = open_writer(options);
    ASSERT_TRUE(writer);
    ASSERT_TRUE(writer->append(testing::numbered_event(0), 0));
    writer->flush();
    now->fetch_add(9'000'000'000);
    ASSERT_TRUE(writer->append(testing::numbered_event(1), 0));
    writer->flush();
    EXPECT_EQ(segment_paths(dir_.path()).size(), 1u) << "9 s old: not yet";
    now->fetch_add(2'000'000'000);
    ASSERT_TRUE(writer->append(testing::numbered_event(2), 0));
    writer->flush();
    EXPECT_EQ(segment_paths(dir_.path()).size(), 2u) << "11 s old: rotated";
    writer->close();
    EXPECT_EQ(testing::event_jsons(testing::read_all(dir_.path())).size(), 3u);
}

TEST_F(JournalWriterTest, each_segment_opens_with_a_snapshot_of_the_known_processes) {
    auto options = testing::test_options(dir_.path());
    options.segment_max_bytes = 4096;
    Event initial;
    initial.ts_ns = 10;
    initial.task = TaskInfo{100, 100, 1, 0, 0, 7, "trainer"};
    initial.data = ProcessSnapshot{
        "/usr/bin/python3", {"python3", "train.py"}, "root", "/", "", "", {SnapshotGpu{195, 0, 4}}};
    Event doomed = initial;
    doomed.task.pid = doomed.task.tid = 101;
    auto writer = open_writer(options, {initial, doomed});
    ASSERT_TRUE(writer);

    auto event_for = [](uint32_t pid, uint64_t ts, EventData data) {
        Event event;
        event.ts_ns = ts;
        event.task = TaskInfo{pid, pid, 100, 1000, 1000, 9, "xmrig"};
        event.data = std::move(data);
        return event;
    };
    ASSERT_TRUE(writer->append(
        event_for(500, 20, Exec{"/tmp/xmrig", {"xmrig", "-o", "pool:3333"}, false, false, 500}),
        0));
    ASSERT_TRUE(writer->append(
        event_for(500, 21,
                  GpuOpen{195, 1, 6, -100, 2, OpenSyscall::kOpenat, false, "/dev/nvidia1"}),
        0));
    ASSERT_TRUE(writer->append(event_for(500, 22, Fork{501, true}), 0));
    ASSERT_TRUE(writer->append(event_for(101, 23, Exit{0, true}), 0));
    // Enough to rotate several times.
    for (uint64_t i = 0; i < 200; ++i) {
        ASSERT_TRUE(writer->append(testing::numbered_event(i, 100), 0));
    }
    writer->close();
    const auto paths = segment_paths(dir_.path());
    ASSERT_GE(paths.size(), 2u);

    // The last segment alone rebuilds the state.
    ReaderOptions snapshots_only;
    snapshots_only.types = {"process_snapshot"};
    auto records = testing::read_all(paths.back(), snapshots_only);
    std::map<uint32_t, ProcessSnapshot> state;
    for (const auto& record : records) {
        EXPECT_TRUE(record.in_snapshot);
        state[record.event.task.pid] = std::get<ProcessSnapshot>(record.event.data);
    }
    // 100 (initial), 500 (exec + GPU), 501 (forked, inherits the GPU); 101 exited. The
    // numbered events' workers (pids 1000-1006) exec'd too.
    ASSERT_TRUE(state.contains(100));
    EXPECT_FALSE(state.contains(101));
    ASSERT_TRUE(state.contains(500));
    ASSERT_TRUE(state.contains(501));
    EXPECT_EQ(state[100].exe, "/usr/bin/python3");
    EXPECT_EQ(state[500].exe, "/tmp/xmrig");
    EXPECT_EQ(state[500].argv, (std::vector<std::string>{"xmrig", "-o", "pool:3333"}));
    ASSERT_EQ(state[500].gpus.size(), 1u);
    EXPECT_EQ(state[500].gpus[0], (SnapshotGpu{195, 1, 6}));
    EXPECT_EQ(state[501].gpus, state[500].gpus);
    EXPECT_EQ(state[501].exe, "/tmp/xmrig");

    // Reading the whole directory delivers only the first segment's snapshot
    // (the others continue it), unless asked for all.
    auto all_auto = testing::read_all(dir_.path(), snapshots_only);
    EXPECT_EQ(all_auto.size(), 2u) << "the two initial processes";
    ReaderOptions every;
    every.types = {"process_snapshot"};
    every.snapshots = SnapshotMode::kAll;
    EXPECT_GT(testing::read_all(dir_.path(), every).size(), 2u * paths.size() - 2);
}

TEST_F(JournalWriterTest, retention_keeps_the_directory_within_its_size) {
    auto options = testing::test_options(dir_.path());
    options.segment_max_bytes = 8192;
    options.retention_max_bytes = 40000;
    auto writer = open_writer(options);
    ASSERT_TRUE(writer);
    for (uint64_t i = 0; i < 4000; ++i) {
        ASSERT_TRUE(writer->append(testing::numbered_event(i), 0));
        if (i % 100 == 0) {
            writer->flush();
            EXPECT_LE(total_size(dir_.path()), options.retention_max_bytes) << "after " << i;
        }
    }
    writer->close();
    EXPECT_LE(total_size(dir_.path()), options.retention_max_bytes);
    const auto paths = segment_paths(dir_.path());
    EXPECT_GE(paths.size(), 3u);
    EXPECT_GT(writer->stats().segments_deleted, 0u);
    EXPECT_NE(paths.front().filename(), "seg-000000000001.ggj") << "the oldest went first";
    // What is left is the newest events, in order, up to the last one.
    const auto jsons = testing::event_jsons(testing::read_all(dir_.path()));
    ASSERT_FALSE(jsons.empty());
    EXPECT_EQ(jsons.back(), event_to_json(testing::numbered_event(3999), 0));
}

TEST_F(JournalWriterTest, retention_deletes_segments_older_than_the_maximum_age) {
    auto real_now = std::make_shared<std::atomic<int64_t>>(0);
    auto options = testing::test_options(dir_.path());
    options.segment_max_bytes = 8192;
    options.retention_max_age_s = 3600;
    options.realtime_clock = [real_now] {
        timespec now{};
        clock_gettime(CLOCK_REALTIME, &now);
        return now.tv_sec * 1'000'000'000ll + now.tv_nsec + real_now->load();
    };
    auto writer = open_writer(options);
    ASSERT_TRUE(writer);
    for (uint64_t i = 0; i < 1000; ++i) ASSERT_TRUE(writer->append(testing::numbered_event(i), 0));
    writer->flush();
    const size_t before = segment_paths(dir_.path()).size();
    ASSERT_GE(before, 3u);
    real_now->store(2 * 3600ll * 1'000'000'000);  // two hours later
    for (uint64_t i = 1000; i < 1200; ++i) {
        ASSERT_TRUE(writer->append(testing::numbered_event(i), 0));
    }
    writer->close();
    const auto jsons = testing::event_jsons(testing::read_all(dir_.path()));
    ASSERT_FALSE(jsons.empty());
    // Everything written before the jump is gone except what shares the segment open then.
    EXPECT_LT(jsons.size(), 400u);
    EXPECT_EQ(jsons.back(), event_to_json(testing::numbered_event(1199), 0));
    EXPECT_GE(writer->stats().segments_deleted, before - 1);
}

TEST_F(JournalWriterTest, a_full_queue_drops_counts_and_records_a_gap) {
    auto options = testing::test_options(dir_.path());
    options.queue_events = 2;  // and fdatasync after every batch: the writer lags
    auto writer = open_writer(options);
    ASSERT_TRUE(writer);
    const uint64_t n = 20000;
    uint64_t accepted = 0;
    for (uint64_t i = 0; i < n; ++i) accepted += writer->append(testing::numbered_event(i), 0);
    writer->flush();
    ASSERT_TRUE(writer->append(testing::numbered_event(n), 0)) << "accepts again once drained";
    ++accepted;
    writer->close();
    const auto stats = writer->stats();
    EXPECT_GT(stats.dropped_queue_full, 0u);
    EXPECT_EQ(accepted + stats.dropped_queue_full, n + 1);
    auto records = testing::read_all(dir_.path());
    uint64_t events = 0;
    uint64_t gap_events = 0;
    for (const auto& record : records) {
        if (record.kind == RecordKind::kEvent) ++events;
        if (record.kind == RecordKind::kGap) {
            EXPECT_EQ(record.gap.reason, "queue_full");
            EXPECT_LE(record.gap.first_ts_ns, record.gap.last_ts_ns);
            gap_events += record.gap.dropped_events;
        }
    }
    EXPECT_EQ(events, accepted);
    EXPECT_EQ(gap_events, stats.dropped_queue_full);
}

TEST_F(JournalWriterTest, trigger_writes_look_back_detection_and_the_following_seconds) {
    auto now = std::make_shared<std::atomic<uint64_t>>(0);
    auto options = testing::test_options(dir_.path());
    options.lookback_s = 10;
    options.incident_after_s = 5;
    options.monotonic_clock = [now] { return now->load(); };
    auto writer = open_writer(options);
    ASSERT_TRUE(writer);
    constexpr uint64_t kSecond = 1'000'000'000;
    auto at = [&](uint64_t second) {
        Event event = testing::numbered_event(second, 0, kSecond);
        event.ts_ns = 100 * kSecond + second * kSecond;
        now->store(event.ts_ns);
        return event;
    };
    // Telemetry is part of the look-back too.
    Event telemetry = testing::every_event_type(0).at(15);
    ASSERT_TRUE(std::holds_alternative<Telemetry>(telemetry.data));
    for (uint64_t s = 0; s <= 20; ++s) {
        ASSERT_TRUE(writer->append(at(s), 0));
        if (s == 15) {
            telemetry.ts_ns = at(s).ts_ns + 1;
            ASSERT_TRUE(writer->append(telemetry, 0));
        }
    }
    ASSERT_TRUE(writer->trigger(120 * kSecond, 1002, "miner/stratum", R"({"rule":"x"})"));
    ASSERT_TRUE(writer->append_enforcement(120 * kSecond + 5, 1002, "miner/stratum", R"({"k":1})"));
    for (uint64_t s = 21; s <= 30; ++s) ASSERT_TRUE(writer->append(at(s), 0));
    writer->close();

    const fs::path incidents = dir_.path() / "incidents";
    ASSERT_TRUE(fs::is_directory(incidents));
    std::vector<fs::path> bundles;
    for (const auto& entry : fs::directory_iterator(incidents)) bundles.push_back(entry.path());
    ASSERT_EQ(bundles.size(), 1u);
    const fs::path bundle = bundles[0];
    EXPECT_NE(bundle.filename().string().find("miner_stratum"), std::string::npos) << bundle;
    EXPECT_EQ(testing::read_bytes(bundle / "detection.json"), "{\"rule\":\"x\"}\n");

    auto summary = nlohmann::json::parse(testing::read_bytes(bundle / "summary.json"));
    EXPECT_EQ(summary["lookback_events"], 12) << summary.dump();  // 110..120 s and telemetry
    EXPECT_EQ(summary["events_after"], 5) << summary.dump();      // 121..125 s
    EXPECT_TRUE(summary["complete"].get<bool>());

    ReaderOptions all;
    all.snapshots = SnapshotMode::kNone;
    auto reader = JournalReader::open({bundle}, all);
    ASSERT_TRUE(reader.ok());
    std::vector<uint64_t> seconds;
    std::vector<std::string> order;
    JournalRecord record;
    while (reader->next(record)) {
        order.push_back(record_type(record));
        if (record.kind == RecordKind::kEvent &&
            !std::holds_alternative<Telemetry>(record.event.data)) {
            seconds.push_back(record.ts_ns / kSecond);
        }
    }
    EXPECT_TRUE(reader->clean());
    ASSERT_EQ(reader->segments().size(), 1u);
    EXPECT_EQ(reader->segments()[0].header.kind, "incident");
    EXPECT_TRUE(reader->segments()[0].clean_end);
    std::vector<uint64_t> expected;
    for (uint64_t s = 110; s <= 125; ++s) expected.push_back(s);
    EXPECT_EQ(seconds, expected);
    ASSERT_GE(order.size(), 14u);
    EXPECT_EQ(order[12], "detection") << "after the look-back";
    EXPECT_EQ(order[13], "enforcement");
    EXPECT_EQ(writer->stats().incidents_written, 1u);
}

TEST_F(JournalWriterTest, an_incident_closes_on_the_clock_without_new_events) {
    auto now = std::make_shared<std::atomic<uint64_t>>(1'000'000'000);
    auto options = testing::test_options(dir_.path());
    options.lookback_s = 5;
    options.incident_after_s = 1;
    options.monotonic_clock = [now] { return now->load(); };
    auto writer = open_writer(options);
    ASSERT_TRUE(writer);
    ASSERT_TRUE(writer->append(testing::numbered_event(0, 1'000'000'000), 0));
    ASSERT_TRUE(writer->trigger(1'000'000'000, 1000, "r", "{}"));
    writer->flush();
    now->store(3'000'000'000);
    for (int i = 0; i < 50 && writer->stats().incidents_written == 0; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_EQ(writer->stats().incidents_written, 1u);
}

// Incident bundles count toward retention_max_bytes and keep at most half of
// it: with many incidents the oldest bundles go, the newest stays, and the
// segments keep the other half.
TEST_F(JournalWriterTest, retention_keeps_incidents_within_half_of_the_size) {
    auto now = std::make_shared<std::atomic<uint64_t>>(1'000'000'000);
    auto options = testing::test_options(dir_.path());
    options.segment_max_bytes = 8192;
    options.retention_max_bytes = 60000;
    options.lookback_s = 1;  // a bundle holds its own round of events
    options.incident_after_s = 1;
    options.monotonic_clock = [now] { return now->load(); };
    auto writer = open_writer(options);
    ASSERT_TRUE(writer);
    constexpr uint64_t kSecond = 1'000'000'000;
    uint64_t sequence = 0;
    for (uint64_t round = 0; round < 12; ++round) {
        for (int i = 0; i < 60; ++i) {
            Event event = testing::numbered_event(sequence++);
            event.ts_ns = now->load();
            ASSERT_TRUE(writer->append(event, 0));
        }
        ASSERT_TRUE(writer->trigger(now->load(), 1000, "r" + std::to_string(round), "{}"));
        now->fetch_add(2 * kSecond);  // past incident_after_s: the bundle closes
        for (int i = 0; i < 100 && writer->stats().incidents_written <= round; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        ASSERT_EQ(writer->stats().incidents_written, round + 1);
    }
    // One more rotation runs retention after the last bundle closed.
    for (int i = 0; i < 400; ++i)
        ASSERT_TRUE(writer->append(testing::numbered_event(sequence++), 0));
    writer->close();

    std::map<std::string, uint64_t> bundles;  // name -> bytes
    uint64_t incident_bytes = 0;
    for (const auto& entry : fs::directory_iterator(dir_.path() / "incidents")) {
        uint64_t size = 0;
        for (const auto& file : fs::recursive_directory_iterator(entry.path())) {
            if (file.is_regular_file()) size += file.file_size();
        }
        bundles[entry.path().filename().string()] = size;
        incident_bytes += size;
    }
    EXPECT_GT(writer->stats().incidents_deleted, 0u);
    EXPECT_LT(bundles.size(), 12u);
    EXPECT_LE(incident_bytes, options.retention_max_bytes / 2);
    EXPECT_LE(incident_bytes + total_size(dir_.path()), options.retention_max_bytes);
    bool newest_kept = false, oldest_kept = false;
    for (const auto& [name, size] : bundles) {
        newest_kept |= name.ends_with("-r11");
        oldest_kept |= name.ends_with("-r0");
    }
    EXPECT_TRUE(newest_kept) << ::testing::PrintToString(bundles);
    EXPECT_FALSE(oldest_kept) << ::testing::PrintToString(bundles);
}

// fsync_interval_ms bounds how often a steady stream is synced: at most once
// per interval (plus the final one), and after every batch with 0.
TEST_F(JournalWriterTest, fsync_follows_its_interval) {
    auto syncs_for = [&](uint32_t interval_ms, const fs::path& dir) {
        auto options = testing::test_options(dir);
        options.fsync_interval_ms = interval_ms;
        auto writer = open_writer(options);
        EXPECT_TRUE(writer);
        if (!writer) return uint64_t{0};
        const auto start = std::chrono::steady_clock::now();
        for (uint64_t i = 0;
             std::chrono::steady_clock::now() - start < std::chrono::milliseconds(1200); ++i) {
            EXPECT_TRUE(writer->append(testing::numbered_event(i), 0));
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        const uint64_t syncs = writer->stats().syncs;
        writer->close();
        return syncs;
    };
    const uint64_t every_300ms = syncs_for(300, dir_.path() / "slow");
    EXPECT_GE(every_300ms, 2u);
    EXPECT_LE(every_300ms, 5u) << "at most one per 300 ms over 1.2 s";
    const uint64_t every_write = syncs_for(0, dir_.path() / "eager");
    EXPECT_GE(every_write, 20u) << "0: a sync after every batch of appends";
}

TEST_F(JournalWriterTest, open_fails_on_an_unwritable_directory) {
    auto options = testing::test_options("/proc/gpuguard-journal");
    auto writer = JournalWriter::open(options, testing::test_identity(), {}, {});
    ASSERT_FALSE(writer.ok());
    EXPECT_NE(writer.error().message.find("/proc/gpuguard-journal"), std::string::npos);
}

TEST_F(JournalWriterTest, continues_the_sequence_of_an_existing_directory) {
    for (int run = 0; run < 3; ++run) {
        auto writer = open_writer(testing::test_options(dir_.path()));
        ASSERT_TRUE(writer);
        ASSERT_TRUE(writer->append(testing::numbered_event(run), 0));
        writer->close();
    }
    const auto paths = segment_paths(dir_.path());
    ASSERT_EQ(paths.size(), 3u);
    EXPECT_EQ(paths[2].filename(), "seg-000000000003.ggj");
    // After a clean close, the next run's snapshot is delivered again (state may differ).
    ReaderOptions options;
    options.meta = true;
    const auto records = testing::read_all(dir_.path(), options);
    EXPECT_EQ(testing::event_jsons(records).size(), 3u);
}

}  // namespace
}  // namespace gpuguard::agent::journal
