// The live agent's journal (AgentDetectTest, agent_detect_fixture.h): replaying
// it, or a detection's incident bundle alone, gives the live detections, and a
// full disk under it loses no detection.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
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
using gpuguard::testing::file_bytes;
using gpuguard::testing::LoopbackPool;
using gpuguard::testing::OwnChild;
using gpuguard::testing::Subprocess;

// Whether `pid` holds an fd on `path` within `timeout`.
bool holds_file(pid_t pid, const std::filesystem::path& path, std::chrono::milliseconds timeout) {
    const auto fds = std::filesystem::path("/proc") / std::to_string(pid) / "fd";
    const auto deadline = Clock::now() + timeout;
    do {
        std::error_code ec;
        for (const auto& fd : std::filesystem::directory_iterator(fds, ec)) {
            std::error_code link_ec;
            if (std::filesystem::read_symlink(fd.path(), link_ec) == path) return true;
        }
        std::this_thread::sleep_for(5ms);
    } while (Clock::now() < deadline);
    return false;
}

// The incident bundle holding a detection of `pid` (detection.json, or a
// later detection-N.json: another process may have opened the bundle),
// once it is closed (its summary.json written); empty after `timeout`.
std::filesystem::path closed_incident_bundle(const std::filesystem::path& journal_dir, pid_t pid,
                                             std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    do {
        std::error_code ec;
        for (const auto& bundle :
             std::filesystem::directory_iterator(journal_dir / "incidents", ec)) {
            if (!std::filesystem::exists(bundle.path() / "summary.json")) continue;
            for (const auto& file : std::filesystem::directory_iterator(bundle.path(), ec)) {
                if (!file.path().filename().string().starts_with("detection")) continue;
                const auto detection =
                    nlohmann::json::parse(file_bytes(file.path()), nullptr, false);
                if (!detection.is_discarded() && detection["process"]["pid"] == pid) {
                    return bundle.path();
                }
            }
        }
        std::this_thread::sleep_for(20ms);
    } while (Clock::now() < deadline);
    return {};
}

// Every record of `bundle` (events, detections, outcomes) in file order, as
// `gpuguard journal export --all` writes them.
std::vector<nlohmann::json> exported_records(const std::filesystem::path& bundle) {
    const auto exported =
        gpuguard::testing::run_command({GPUGUARD_BINARY, "journal", "export", "--dir",
                                        bundle.string(), "--format", "jsonl", "--all"});
    EXPECT_EQ(exported.exit_code, 0) << exported.stderr_text;
    std::vector<nlohmann::json> records;
    std::istringstream lines(exported.stdout_text);
    for (std::string line; std::getline(lines, line);)
        records.push_back(nlohmann::json::parse(line));
    return records;
}

// Everything the live agent saw is in its journal: replaying the journal
// with the same rules gives the same detections, byte for byte once the
// wall-clock fields are set aside. The detection's incident bundle holds
// the look-back (a process that opened the GPU before the miner started)
// and what followed (one that opened it after the detection), and replaying
// the bundle alone gives the miner's detection again.
TEST_F(AgentDetectTest, replaying_the_journal_or_its_incident_bundle_reproduces_live_detections) {
    LoopbackPool pool;
    ASSERT_GE(pool.fd, 0) << "no free miner port on loopback";
    const auto journal_dir = dir_ / "journal";  // SetUp's
    // A short after-window: the bundle closes (summary.json) two seconds after
    // the last detection, while the agent runs.
    replace_in_config(journal_section(journal_dir),
                      journal_section(journal_dir, "  incident_after_s: 2\n"));
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();

    OwnChild before(start_child("gg-before", {}));
    ASSERT_GT(before.pid, 0);
    // Its open is then in the kernel's record before anything the miner does.
    ASSERT_TRUE(holds_file(before.pid, node_, 5s));
    const std::string url = "stratum+tcp://127.0.0.1:" + std::to_string(pool.port);
    const std::string script =
        "exec 5<>/dev/tcp/127.0.0.1/" + std::to_string(pool.port) + "; read -t 30 <&5";
    const pid_t child =
        start_child("gg-miner", {"/bin/bash", "-c", script, "xmrig", "--cuda", "-o", url});
    ASSERT_GT(child, 0);
    ChildReaper reaper(child);
    ASSERT_TRUE(wait_for_detection(agent, child, "GG-CORR-0002", 5s)) << agent.stderr_text();
    OwnChild after(start_child("gg-after", {}));
    ASSERT_GT(after.pid, 0);
    const auto bundle = closed_incident_bundle(journal_dir, child, 10s);
    ASSERT_FALSE(bundle.empty()) << agent.stderr_text();
    // Stopping drains the agent's output: every live detection is read, and
    // they are exactly the miner's (named at exec, on the GPU, at its pool).
    expect_whole_output(agent,
                        {{"GG-CORR-0012", child, "error", /*optional=*/true},
                         {"GG-CORR-0001", child, "critical"},
                         {"GG-CORR-0002", child, "error"}},
                        {before.pid, child, after.pid});
    if (HasFailure()) return;

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
    ASSERT_FALSE(live.empty());
    const auto replay = [&](const std::filesystem::path& input) {
        const auto replayed = gpuguard::testing::run_command(
            {GPUGUARD_BINARY, "replay", "--rules-file", (dir_ / "miner-rules.yaml").string(),
             "--rules-dir", rules_dir_.string(), input.string()},
            60s);
        EXPECT_EQ(replayed.exit_code, 0) << replayed.stderr_text;
        std::vector<std::string> detections;
        std::istringstream lines(replayed.stdout_text);
        for (std::string line; std::getline(lines, line);) {
            auto record = nlohmann::json::parse(line);
            if (record["process"]["pid"] != child) continue;
            detections.push_back(without_clock(line));
        }
        return detections;
    };
    EXPECT_EQ(replay(journal_dir), live);

    // The bundle, in file order: the look-back, the detection, what followed.
    const auto records = exported_records(bundle);
    const auto position = [&](const std::function<bool(const nlohmann::json&)>& wanted) {
        const auto found = std::find_if(records.begin(), records.end(), wanted);
        return found == records.end() ? -1 : static_cast<int>(found - records.begin());
    };
    const auto event_of = [](pid_t pid, const char* type) {
        return [=](const nlohmann::json& record) {
            return record["type"] == type && record["process"]["pid"] == pid;
        };
    };
    const int detected = position([&](const nlohmann::json& record) {
        return record["type"] == "detection" && record["rule_id"] == "GG-CORR-0001" &&
               record["process"]["pid"] == child;
    });
    ASSERT_GE(detected, 0) << bundle;
    const int looked_back = position(event_of(before.pid, "gpu_open"));
    EXPECT_GE(looked_back, 0) << "no look-back in " << bundle;
    EXPECT_LT(looked_back, detected);
    EXPECT_GT(position(event_of(after.pid, "gpu_open")), detected)
        << "no event after the detection in " << bundle;
    // Each detection once: one made while the bundle is open is in it as its
    // record, and its trigger must not add it again.
    std::map<std::string, int> detection_records;
    for (const auto& record : records) {
        if (record["type"] == "detection") {
            ++detection_records[record["detection"]["event"]["id"].get<std::string>()];
        }
    }
    EXPECT_GE(detection_records.size(), 2u);
    for (const auto& [id, count] : detection_records) EXPECT_EQ(count, 1) << id;
    const auto summary = nlohmann::json::parse(file_bytes(bundle / "summary.json"));
    EXPECT_GE(summary["lookback_events"].get<int>(), 1) << summary.dump();
    EXPECT_GE(summary["events_after"].get<int>(), 1) << summary.dump();
    EXPECT_TRUE(summary["complete"].get<bool>()) << summary.dump();

    // The bundle alone replays to the miner's first detection, as it was live.
    const auto from_bundle = replay(bundle);
    ASSERT_FALSE(from_bundle.empty()) << bundle;
    EXPECT_EQ(from_bundle.front(), live.front());
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
    // Not one detection lost to the full disk: both miners', exactly.
    expect_whole_output(agent,
                        {{"GG-CORR-0012", first, "error", /*optional=*/true},
                         {"GG-CORR-0001", first, "critical"},
                         {"GG-CORR-0012", second, "error", /*optional=*/true},
                         {"GG-CORR-0001", second, "critical"}},
                        {first, second});
}

}  // namespace
