// The live agent's journal (AgentDetectTest, agent_detect_fixture.h): replaying
// it gives the live detections, and a full disk under it loses no detection.
#include <chrono>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/bpf/agent_detect_fixture.h"
#include "tests/support/child_process.h"
#include "tests/support/run_command.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::testing::AgentDetectTest;
using gpuguard::testing::ChildReaper;
using gpuguard::testing::Clock;
using gpuguard::testing::LoopbackPool;
using gpuguard::testing::Subprocess;

// Everything the live agent saw is in its journal: replaying the journal
// with the same rules gives the same detections, byte for byte once the
// wall-clock fields are set aside.
TEST_F(AgentDetectTest, replaying_the_journal_reproduces_the_live_detections) {
    LoopbackPool pool;
    ASSERT_GE(pool.fd, 0) << "no free miner port on loopback";
    const auto journal_dir = dir_ / "journal";  // SetUp's
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();

    const std::string url = "stratum+tcp://127.0.0.1:" + std::to_string(pool.port);
    const std::string script =
        "exec 5<>/dev/tcp/127.0.0.1/" + std::to_string(pool.port) + "; read -t 30 <&5";
    const pid_t child =
        start_child("gg-miner", {"/bin/bash", "-c", script, "xmrig", "--cuda", "-o", url});
    ASSERT_GT(child, 0);
    ChildReaper reaper(child);
    ASSERT_TRUE(wait_for_detection(agent, child, "GG-CORR-0002", 5s)) << agent.stderr_text();
    std::this_thread::sleep_for(300ms);  // let anything else arrive
    while (auto line = agent.read_stdout_line(100ms)) seen_.push_back(*line);
    ASSERT_EQ(agent.stop(SIGTERM, 10s), 0) << agent.stderr_text();

    // Wall-clock values differ by design (the live agent stamps them when it
    // reports, replay from the journaled time); every other byte of the
    // line, key order included, must not.
    auto without_clock = [](const std::string& line) {
        static const std::regex wall_clock(R"re("(@timestamp|created)":"[^"]*")re");
        return std::regex_replace(line, wall_clock, "\"$1\":\"<wall clock>\"");
    };
    std::vector<std::string> live;
    for (const auto& line : seen_) {
        if (nlohmann::json::parse(line)["process"]["pid"] == child)
            live.push_back(without_clock(line));
    }
    const auto replayed = gpuguard::testing::run_command(
        {GPUGUARD_BINARY, "replay", "--rules-file", (dir_ / "miner-rules.yaml").string(),
         "--rules-dir", rules_dir_.string(), journal_dir.string()},
        60s);
    ASSERT_EQ(replayed.exit_code, 0) << replayed.stderr_text;
    std::vector<std::string> from_journal;
    std::istringstream lines(replayed.stdout_text);
    for (std::string line; std::getline(lines, line);) {
        auto record = nlohmann::json::parse(line);
        if (record["process"]["pid"] != child) continue;
        from_journal.push_back(without_clock(line));
    }
    ASSERT_FALSE(live.empty());
    EXPECT_EQ(from_journal, live);
}

// A full disk under the journal: the agent keeps detecting, counts and
// reports the journal's drops, and writes again once space returns.
TEST_F(AgentDetectTest, full_journal_disk_loses_no_detection_and_writing_resumes) {
    const auto mount_point = dir_ / "jfs";
    std::filesystem::create_directory(mount_point);
    ASSERT_EQ(mount("gg-jfs", mount_point.c_str(), "tmpfs", 0, "size=256k"), 0)
        << std::strerror(errno);
    struct Unmount {
        std::string path;
        ~Unmount() { umount2(path.c_str(), MNT_DETACH); }
    } unmount{mount_point.string()};
    use_control_socket();
    // Enforcement must not depend on the journal either: the miner is killed.
    std::ofstream(rules_dir_ / "10-kill.yaml")
        << "signatures:\n  override:\n    - id: GG-STRATUM-0001\n      action: kill\n";
    replace_in_config(journal_section(dir_ / "journal"),
                      journal_section(mount_point / "journal", "  fsync_interval_ms: 50\n"));
    std::ofstream(config_, std::ios::app) << "enforcement:\n  grace_period_ms: 500\n";
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    auto journal_status = [&] {
        const auto report = gpuguard::testing::run_command(
            {GPUGUARD_BINARY, "status", "--json", "--socket", (dir_ / "control.sock").string()},
            10s);
        EXPECT_EQ(report.exit_code, 0) << report.stderr_text;
        return nlohmann::json::parse(report.stdout_text)["journal"];
    };

    // Fill the file system to the last block.
    const auto filler = mount_point / "filler";
    {
        const int fd = open(filler.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        ASSERT_GE(fd, 0);
        std::vector<char> block(4096, 'x');
        for (int i = 0; i < 1024 && write(fd, block.data(), block.size()) > 0; ++i) {
        }
        close(fd);
    }
    const std::string script = "exec -a xmrig sleep 30";
    const pid_t first = start_child(
        "gg-miner", {"/bin/bash", "-c", script, "x", "-o", "stratum+tcp://127.0.0.1:3333"});
    ChildReaper reap_first(first);
    auto detection = wait_for_detection(agent, first, "GG-CORR-0001", 5s);
    ASSERT_TRUE(detection) << "detection must not depend on the journal\n" << agent.stderr_text();
    EXPECT_EQ((*detection)["event"]["action"], "kill");
    int status = 0;
    pid_t reaped = 0;
    for (const auto kill_deadline = Clock::now() + 5s;
         reaped == 0 && Clock::now() < kill_deadline;) {
        reaped = waitpid(first, &status, WNOHANG);
        if (reaped == 0) std::this_thread::sleep_for(10ms);
    }
    EXPECT_EQ(reaped, first) << "the enforcer must act with the journal's disk full\n"
                             << agent.stderr_text();
    EXPECT_TRUE(WIFSIGNALED(status));
    nlohmann::json full;
    const auto deadline = Clock::now() + 10s;
    do {
        std::this_thread::sleep_for(200ms);
        full = journal_status();
    } while (full["dropped"].get<uint64_t>() == 0 && Clock::now() < deadline);
    EXPECT_GT(full["dropped"].get<uint64_t>(), 0u) << full.dump();
    EXPECT_FALSE(full["writing"].get<bool>()) << full.dump();
    EXPECT_FALSE(full["last_error"].get<std::string>().empty()) << full.dump();
    // The plain status says so too.
    const auto text = gpuguard::testing::run_command(
        {GPUGUARD_BINARY, "status", "--socket", (dir_ / "control.sock").string()}, 10s);
    EXPECT_TRUE(std::regex_search(
        text.stdout_text,
        std::regex(R"(journal: \S+, \d+ events written, [1-9]\d* dropped, failing: )")))
        << text.stdout_text;

    // Space returns: the writer resumes on its own.
    std::filesystem::remove(filler);
    const pid_t second = start_child(
        "gg-miner", {"/bin/bash", "-c", script, "x", "-o", "stratum+tcp://127.0.0.1:3333"});
    ChildReaper reap_second(second);
    ASSERT_TRUE(wait_for_detection(agent, second, "GG-CORR-0001", 5s)) << agent.stderr_text();
    nlohmann::json resumed;
    const auto resume_deadline = Clock::now() + 10s;
    do {
        std::this_thread::sleep_for(200ms);
        resumed = journal_status();
    } while (!(resumed["writing"].get<bool>() && resumed["events_written"].get<uint64_t>() >
                                                     full["events_written"].get<uint64_t>()) &&
             Clock::now() < resume_deadline);
    EXPECT_TRUE(resumed["writing"].get<bool>()) << resumed.dump();
    EXPECT_GT(resumed["events_written"].get<uint64_t>(), full["events_written"].get<uint64_t>())
        << resumed.dump();
    EXPECT_EQ(agent.stop(SIGTERM, 10s), 0) << agent.stderr_text();
}

}  // namespace
