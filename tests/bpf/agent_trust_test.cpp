// The agent's own trust (issue 28, point 6), with the real binary: config
// and rule files that anyone but root can write are refused (start-up
// fails; a reload keeps the last good rules).
#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>

#include "tests/bpf/agent_detect_fixture.h"
#include "tests/support/child_process.h"
#include "tests/support/run_command.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::testing::AgentDetectTest;
using gpuguard::testing::ChildReaper;
using gpuguard::testing::run_command;
using gpuguard::testing::Subprocess;
namespace fs = std::filesystem;

constexpr char kLocalRule[] = R"(rules:
  - id: local-renamed-miner
    name: Miner renamed to our scheduler's name
    severity: critical
    confidence: 0.9
    action: alert
    process_name: ["gg-sched-*"]
)";

TEST_F(AgentDetectTest, start_refuses_config_and_rule_files_others_can_write) {
    // A group-writable drop-in: one line naming it, its mode and owner; exit 2.
    const fs::path drop_in = rules_dir_ / "60-local.yaml";
    std::ofstream(drop_in) << kLocalRule;
    fs::permissions(drop_in, fs::perms(0664));
    auto run = run_command({GPUGUARD_BINARY, "run", "--config", config_.string()}, 30s);
    EXPECT_EQ(run.exit_code, 2) << run.stderr_text;
    EXPECT_NE(
        run.stderr_text.find(drop_in.string() + ": writable by group (mode 0664, owner root:"),
        std::string::npos)
        << run.stderr_text;
    EXPECT_NE(run.stderr_text.find("refused; make it writable by root only"), std::string::npos)
        << run.stderr_text;
    EXPECT_EQ(run.stderr_text.find("[agent] ready"), std::string::npos);

    // The rules directory itself, world-writable.
    fs::permissions(drop_in, fs::perms(0644));
    fs::permissions(rules_dir_, fs::perms(0777));
    run = run_command({GPUGUARD_BINARY, "run", "--config", config_.string()}, 30s);
    EXPECT_EQ(run.exit_code, 2) << run.stderr_text;
    EXPECT_NE(run.stderr_text.find(rules_dir_.string() + ": writable by group and others"),
              std::string::npos)
        << run.stderr_text;
    fs::permissions(rules_dir_, fs::perms(0755));

    // The config file, owned by someone else.
    ASSERT_EQ(chown(config_.c_str(), 65534, static_cast<gid_t>(-1)), 0);
    run = run_command({GPUGUARD_BINARY, "run", "--config", config_.string()}, 30s);
    EXPECT_EQ(run.exit_code, 2) << run.stderr_text;
    EXPECT_NE(run.stderr_text.find(config_.string() + ": owned by "), std::string::npos)
        << run.stderr_text;
    EXPECT_NE(run.stderr_text.find("make it owned by root and writable by root only"),
              std::string::npos)
        << run.stderr_text;
}

TEST_F(AgentDetectTest, a_rule_file_made_writable_by_others_is_refused_and_the_last_good_stays) {
    const fs::path drop_in = rules_dir_ / "60-local.yaml";
    std::ofstream(drop_in) << kLocalRule;
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();

    // Someone makes the rules group-writable and empties them: refused, with
    // the agent's own alert naming the file.
    fs::permissions(drop_in, fs::perms(0664));
    std::ofstream(drop_in) << "rules: []\n";
    auto rejected = wait_for_detection(agent, agent.pid(), "GG-AGENT-0001", 5s);
    ASSERT_TRUE(rejected) << agent.stderr_text();
    EXPECT_NE(rejected->dump().find(drop_in.string() + ": writable by group (mode 0664"),
              std::string::npos)
        << rejected->dump();

    // The rule of the last good set still detects.
    const pid_t child = start_child("gg-sched-7", {});
    ChildReaper reap(child);
    auto detection = wait_for_detection(agent, child, "GG-CORR-0001", 5s);
    ASSERT_TRUE(detection) << agent.stderr_text();
    EXPECT_EQ((*detection)["gpuguard"]["detection"]["signature_ids"][0], "local-renamed-miner");
    EXPECT_EQ(agent.stop(SIGTERM, 10s), 0) << agent.stderr_text();
}

}  // namespace
