// `gpuguard replay` on native journals, through the binary: a scenario's
// events written by the real JournalWriter (spread over several segments by
// unrelated host activity, with an incident bundle) give the same detections
// as the scenario's JSON Lines; a single later segment and the incident
// bundle alone reproduce the detection from their opening snapshots; other
// rules (--rules) and a time range (--until) re-judge the same journal.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "gpuguard/events/event_json.h"
#include "gpuguard/journal/journal.h"
#include "tests/agent/journal/journal_fixtures.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent::journal {
namespace {

namespace fs = std::filesystem;
using testing::run_command;

const fs::path kScenario =
    fs::path(GPUGUARD_SOURCE_DIR) / "tests/scenarios/miner_renamed_xmrig_cmdline.jsonl";
constexpr uint32_t kMinerPid = 4242;  // the scenario's "# expect: GG-CORR-0001 pid=4242"

std::vector<nlohmann::json> json_lines(const std::string& text) {
    std::vector<nlohmann::json> out;
    std::istringstream stream(text);
    for (std::string line; std::getline(stream, line);) {
        if (!line.empty()) out.push_back(nlohmann::json::parse(line));
    }
    return out;
}

bool has_detection(const std::vector<nlohmann::json>& records, const std::string& rule,
                   uint32_t pid) {
    for (const auto& record : records) {
        if (record["rule"]["id"] == rule && record["process"]["pid"] == pid) return true;
    }
    return false;
}

class JournalReplayTest : public ::testing::Test {
  protected:
    void SetUp() override {
        std::vector<ParsedEvent> scenario;
        std::ifstream in(kScenario);
        int line_number = 0;
        for (std::string line; std::getline(in, line);) {
            ++line_number;
            if (line.empty() || line[0] == '#') continue;
            auto parsed = event_from_json(line, "scenario:" + std::to_string(line_number));
            ASSERT_TRUE(parsed.ok()) << parsed.error().message;
            scenario.push_back(std::move(parsed).value());
        }
        ASSERT_GE(scenario.size(), 5u);
        ASSERT_TRUE(scenario.front().time_unix_ns);
        const int64_t offset =
            *scenario.front().time_unix_ns - static_cast<int64_t>(scenario.front().event.ts_ns);

        auto options = testing::test_options(journal_);
        options.segment_max_bytes = 4096;
        options.lookback_s = 60;
        options.incident_after_s = 5;
        auto writer = JournalWriter::open(options, testing::test_identity(), {}, {});
        ASSERT_TRUE(writer.ok());
        // Between the scenario's events, other processes' activity: enough to
        // rotate, so the miner's exec and its GPU use land in different segments.
        uint64_t filler = 0;
        for (const auto& parsed : scenario) {
            Event event = parsed.event;
            for (int i = 0; i < 40; ++i) {
                const uint32_t pid = 20000 + static_cast<uint32_t>(filler++);
                Event noise;
                noise.ts_ns = event.ts_ns - 1;
                noise.task = TaskInfo{pid, pid, 1, 1000, 1000, 1, "true"};
                noise.data =
                    Exec{"/usr/bin/true", {"true", std::to_string(pid)}, false, false, pid};
                ASSERT_TRUE((*writer)->append(noise, offset));
            }
            ASSERT_TRUE((*writer)->append(event, offset));
            if (std::holds_alternative<Connect>(event.data)) {
                connect_ts_ns_ = event.ts_ns;
                ASSERT_TRUE((*writer)->trigger(event.ts_ns, kMinerPid, "GG-CORR-0001",
                                               R"({"rule":{"id":"GG-CORR-0001"}})"));
            }
        }
        (*writer)->close();
        ASSERT_NE(connect_ts_ns_, 0u);
        for (const auto& entry : fs::directory_iterator(journal_)) {
            if (entry.path().extension() == ".ggj") segments_.push_back(entry.path());
        }
        std::sort(segments_.begin(), segments_.end());
        ASSERT_GE(segments_.size(), 3u);
        for (const auto& entry : fs::directory_iterator(journal_ / "incidents")) {
            incidents_.push_back(entry.path());
        }
        ASSERT_EQ(incidents_.size(), 1u);
    }

    testing::CommandResult replay(std::vector<std::string> args) {
        args.insert(args.begin(), {GPUGUARD_BINARY, "replay"});
        return run_command(args, std::chrono::seconds(60));
    }

    // The segment holding the miner's connect (the snapshot at its start is
    // all it knows about the miner's exec).
    fs::path segment_with_connect() {
        for (const auto& segment : segments_) {
            auto reader = JournalReader::open({segment});
            if (!reader) continue;
            JournalRecord record;
            while (reader->next(record)) {
                if (record.kind == RecordKind::kEvent && record.event.task.pid == kMinerPid &&
                    std::holds_alternative<Connect>(record.event.data)) {
                    return segment;
                }
            }
        }
        return {};
    }

    testing::TempDir dir_{"gg-journal-replay"};
    fs::path journal_ = dir_.path() / "journal";
    std::vector<fs::path> segments_;
    std::vector<fs::path> incidents_;
    uint64_t connect_ts_ns_ = 0;
};

TEST_F(JournalReplayTest, the_journal_gives_the_same_detections_as_the_scenario) {
    const auto from_json = replay({kScenario.string()});
    ASSERT_EQ(from_json.exit_code, 0) << from_json.stderr_text;
    ASSERT_TRUE(has_detection(json_lines(from_json.stdout_text), "GG-CORR-0001", kMinerPid))
        << from_json.stdout_text;
    const auto from_journal = replay({journal_.string()});
    ASSERT_EQ(from_journal.exit_code, 0) << from_journal.stderr_text;
    // The filler processes raise nothing, so the bytes are the same.
    EXPECT_EQ(from_journal.stdout_text, from_json.stdout_text);
}

TEST_F(JournalReplayTest, a_later_segment_alone_reproduces_the_detection_from_its_snapshot) {
    const fs::path segment = segment_with_connect();
    ASSERT_FALSE(segment.empty());
    ASSERT_NE(segment, segments_.front()) << "the exec and the connect share the first segment";
    const auto replayed = replay({segment.string()});
    ASSERT_EQ(replayed.exit_code, 0) << replayed.stderr_text;
    const auto records = json_lines(replayed.stdout_text);
    ASSERT_TRUE(has_detection(records, "GG-CORR-0001", kMinerPid)) << replayed.stdout_text;
    for (const auto& record : records) {
        if (record["process"]["pid"] != kMinerPid) continue;
        EXPECT_EQ(record["process"]["executable"], "/home/bob/.cache/worker");
    }
}

TEST_F(JournalReplayTest, the_incident_bundle_alone_reproduces_the_detection) {
    const auto replayed = replay({incidents_.front().string()});
    ASSERT_EQ(replayed.exit_code, 0) << replayed.stderr_text;
    EXPECT_TRUE(has_detection(json_lines(replayed.stdout_text), "GG-CORR-0001", kMinerPid))
        << replayed.stdout_text;
}

TEST_F(JournalReplayTest, other_rules_and_a_time_range_rejudge_the_same_journal) {
    // Today's rules allowlist the executable: nothing is raised for it.
    const auto rules = dir_.path() / "allow.yaml";
    std::ofstream(rules) << "allowlist:\n  exe_paths: [/home/bob/.cache/worker]\n";
    const auto allowed = replay({journal_.string(), "--rules", rules.string()});
    ASSERT_EQ(allowed.exit_code, 0) << allowed.stderr_text;
    EXPECT_FALSE(has_detection(json_lines(allowed.stdout_text), "GG-CORR-0001", kMinerPid))
        << allowed.stdout_text;

    // Up to before the GPU was opened: only the exec's verdict (a known miner
    // without a GPU, GG-CORR-0012); from then on: the GPU detection.
    const auto until = replay({journal_.string(), "--until", "2026-11-20T09:00:00.5Z"});
    ASSERT_EQ(until.exit_code, 0) << until.stderr_text;
    const auto before_gpu = json_lines(until.stdout_text);
    EXPECT_TRUE(has_detection(before_gpu, "GG-CORR-0012", kMinerPid)) << until.stdout_text;
    EXPECT_FALSE(has_detection(before_gpu, "GG-CORR-0001", kMinerPid)) << until.stdout_text;
    const auto since = replay({journal_.string(), "--since", "2026-11-20T09:00:00.5Z"});
    ASSERT_EQ(since.exit_code, 0) << since.stderr_text;
    EXPECT_TRUE(has_detection(json_lines(since.stdout_text), "GG-CORR-0001", kMinerPid))
        << since.stdout_text;
}

}  // namespace
}  // namespace gpuguard::agent::journal
