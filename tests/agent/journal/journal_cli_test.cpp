// gpuguard journal show|export|verify on a test journal, through the binary.
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

std::vector<std::string> lines(const std::string& text) {
    std::vector<std::string> out;
    std::istringstream stream(text);
    std::string line;
    while (std::getline(stream, line)) out.push_back(line);
    return out;
}

class JournalCliTest : public ::testing::Test {
  protected:
    void SetUp() override {
        timespec now{};
        clock_gettime(CLOCK_MONOTONIC, &now);
        const uint64_t start = static_cast<uint64_t>(now.tv_sec) * 1'000'000'000 - 60'000'000'000;
        offset_ = monotonic_to_realtime_offset_ns();
        auto writer =
            JournalWriter::open(testing::test_options(journal_), testing::test_identity(), {}, {});
        ASSERT_TRUE(writer.ok());
        events_ = testing::every_event_type(start);
        for (const auto& event : events_) ASSERT_TRUE((*writer)->append(event, offset_));
        ASSERT_TRUE((*writer)->append_detection(start + 1'000'000'000, 4242, "miner.stratum",
                                                R"({"rule":{"id":"miner.stratum"}})"));
        (*writer)->close();
        segment_ = journal_ / "seg-000000000001.ggj";
        ASSERT_TRUE(fs::exists(segment_));
    }

    testing::CommandResult journal(std::vector<std::string> args) {
        args.insert(args.begin(), {GPUGUARD_BINARY, "journal"});
        return run_command(args, std::chrono::seconds(30));
    }

    testing::TempDir dir_{"gg-journal-cli"};
    fs::path journal_ = dir_.path() / "journal";
    fs::path segment_;
    std::vector<Event> events_;
    int64_t offset_ = 0;
};

TEST_F(JournalCliTest, show_prints_one_row_per_record) {
    const auto result = journal({"show", "--dir", journal_.string()});
    ASSERT_EQ(result.exit_code, 0) << result.stderr_text;
    const auto rows = lines(result.stdout_text);
    ASSERT_EQ(rows.size(), 1 + events_.size() + 1) << result.stdout_text;
    EXPECT_EQ(rows[0].rfind("TIME", 0), 0u);
    EXPECT_NE(result.stdout_text.find("openat /dev/nvidia0 -> fd 5 (195:0)"), std::string::npos)
        << result.stdout_text;
    EXPECT_NE(result.stdout_text.find("198.51.100.7:3333"), std::string::npos);
    EXPECT_NE(rows.back().find("detection"), std::string::npos);
    EXPECT_NE(rows.back().find("miner.stratum"), std::string::npos);
}

TEST_F(JournalCliTest, show_filters_by_pid_type_and_time) {
    auto result = journal({"show", "--dir", journal_.string(), "--pid", "4252"});
    ASSERT_EQ(result.exit_code, 0) << result.stderr_text;
    auto rows = lines(result.stdout_text);
    ASSERT_EQ(rows.size(), 2u) << result.stdout_text;
    EXPECT_NE(rows[1].find("fork"), std::string::npos);

    result = journal({"show", "--dir", journal_.string(), "--type", "exec,exit"});
    EXPECT_EQ(lines(result.stdout_text).size(), 1u + 2 + 3) << result.stdout_text;

    result = journal({"show", "--dir", journal_.string(), "--since", "-1h", "--until", "now"});
    EXPECT_EQ(lines(result.stdout_text).size(), 1 + events_.size() + 1) << result.stdout_text;
    result = journal({"show", "--dir", journal_.string(), "--since", "-10s"});
    EXPECT_EQ(lines(result.stdout_text).size(), 1u) << "events are a minute old";
    result = journal({"show", "--dir", journal_.string(), "--until",
                      format_rfc3339(offset_ + static_cast<int64_t>(events_[2].ts_ns))});
    EXPECT_EQ(lines(result.stdout_text).size(), 1u + 3) << result.stdout_text;

    result = journal({"show", "--dir", journal_.string(), "--type", "bogus"});
    EXPECT_EQ(result.exit_code, 2);
    // One type per --type: a stray word after it is not read as a second type
    // (nor a second --dir), but refused as the argument it is.
    result = journal({"show", "--dir", journal_.string(), "--type", "exec", "stray"});
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_NE(result.stderr_text.find("stray"), std::string::npos) << result.stderr_text;
    EXPECT_EQ(result.stderr_text.find("unknown --type"), std::string::npos) << result.stderr_text;
    result = journal({"show", "--dir", journal_.string(), "stray"});
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_EQ(result.stdout_text, "") << "nothing read from a second directory";
    result = journal({"show", "--dir", journal_.string(), "--type", "exec", "--type", "exit"});
    EXPECT_EQ(lines(result.stdout_text).size(), 1u + 2 + 3) << result.stdout_text;
    result = journal({"show", "--dir", journal_.string(), "--since", "last tuesday"});
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_NE(result.stderr_text.find("not a time"), std::string::npos);
}

TEST_F(JournalCliTest, export_jsonl_is_the_events_json_form) {
    const auto result = journal({"export", "--format", "jsonl", "--dir", journal_.string()});
    ASSERT_EQ(result.exit_code, 0) << result.stderr_text;
    const auto rows = lines(result.stdout_text);
    ASSERT_EQ(rows.size(), events_.size());
    for (size_t i = 0; i < rows.size(); ++i) {
        EXPECT_EQ(rows[i], event_to_json(events_[i], offset_));
        auto parsed = event_from_json(rows[i], "export:" + std::to_string(i + 1));
        EXPECT_TRUE(parsed.ok()) << (parsed.ok() ? "" : parsed.error().message);
    }
}

TEST_F(JournalCliTest, export_all_adds_detections_and_csv_has_a_header) {
    auto result = journal({"export", "--all", "--dir", journal_.string(), "-o",
                           (dir_.path() / "all.jsonl").string()});
    ASSERT_EQ(result.exit_code, 0) << result.stderr_text;
    const auto rows = lines(testing::read_bytes(dir_.path() / "all.jsonl"));
    ASSERT_EQ(rows.size(), events_.size() + 1);
    const auto detection = nlohmann::json::parse(rows.back());
    EXPECT_EQ(detection["type"], "detection");
    EXPECT_EQ(detection["rule_id"], "miner.stratum");
    EXPECT_EQ(detection["detection"]["rule"]["id"], "miner.stratum");
    EXPECT_EQ(detection["process"]["pid"], 4242);

    result = journal({"export", "--format", "csv", "--dir", journal_.string()});
    ASSERT_EQ(result.exit_code, 0) << result.stderr_text;
    const auto csv = lines(result.stdout_text);
    ASSERT_EQ(csv.size(), 1 + events_.size());
    EXPECT_EQ(csv[0], "time,ts_ns,type,pid,tid,ppid,uid,gid,comm,cgroup_id,details");
    EXPECT_NE(csv[1].find(",gpu_open,4242,4243,1,1000,1000,xmrig,"), std::string::npos) << csv[1];
}

TEST_F(JournalCliTest, verify_exit_status_says_whether_the_journal_is_clean) {
    auto result = journal({"verify", "--dir", journal_.string()});
    EXPECT_EQ(result.exit_code, 0) << result.stdout_text << result.stderr_text;
    EXPECT_NE(result.stdout_text.find("OK: 1 segments"), std::string::npos) << result.stdout_text;

    // One flipped byte in the middle: corrupt record.
    std::string bytes = testing::read_bytes(segment_);
    const std::string clean = bytes;
    bytes[bytes.size() / 2] ^= 0x01;
    testing::write_bytes(segment_, bytes);
    result = journal({"verify", "--dir", journal_.string()});
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_NE(result.stdout_text.find("DAMAGED"), std::string::npos) << result.stdout_text;
    EXPECT_NE(result.stdout_text.find("corrupt_record"), std::string::npos) << result.stdout_text;

    // Cut short: torn tail, with its offset in the JSON report.
    testing::write_bytes(segment_, clean.substr(0, clean.size() - 5));
    result = journal({"verify", "--json", "--dir", journal_.string()});
    EXPECT_EQ(result.exit_code, 1);
    const auto report = nlohmann::json::parse(result.stdout_text);
    EXPECT_FALSE(report["clean"].get<bool>());
    ASSERT_EQ(report["problems"].size(), 1u);
    EXPECT_EQ(report["problems"][0]["kind"], "torn_tail");
    EXPECT_EQ(report["torn_tails"], 1);

    // show still prints what is valid, and says what is not on stderr.
    result = journal({"show", "--dir", journal_.string()});
    EXPECT_EQ(result.exit_code, 0);
    EXPECT_EQ(lines(result.stdout_text).size(), 1 + events_.size() + 1);
    EXPECT_NE(result.stderr_text.find("torn_tail"), std::string::npos) << result.stderr_text;

    result = journal({"verify", "--dir", (dir_.path() / "nothing-here").string()});
    EXPECT_EQ(result.exit_code, 2);
}

}  // namespace
}  // namespace gpuguard::agent::journal
