// Guard mode in the live agent (AgentDetectTest, agent_detect_fixture.h): a
// policy's memory limit kills, priorities pause and resume a low-priority
// child under load (and again after the pause cap's cool-down; resumed at
// the agent's stop), and dry run only reports.
#include <chrono>
#include <fstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/bpf/agent_detect_fixture.h"
#include "tests/support/fake_nvml_script.h"
#include "tests/support/run_command.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::testing::AgentDetectTest;
using gpuguard::testing::Clock;
using gpuguard::testing::OwnChild;
using gpuguard::testing::Subprocess;

// Guard mode, enforced: a process over its user's GPU memory limit (memory
// reported by NVML, here the fake libnvidia-ml.so.1) gets the policy's
// action, kill, from the live agent; one within the limit is left alone.
TEST_F(AgentDetectTest, guard_policy_kills_a_process_over_its_memory_limit) {
    OwnChild hog(start_child("gg-hog", {}));
    OwnChild modest(start_child("gg-modest", {}));
    ASSERT_GT(hog.pid, 0);
    ASSERT_GT(modest.pid, 0);
    const auto script = dir_ / "nvml.json";
    std::ofstream(script) << gpuguard::testing::fake_nvml_script(
        {.gpu_utilization = 95,
         .memory_utilization = 60,
         .memory_used = 24ull << 30,
         .processes = {{hog.pid, 20ull << 30}, {modest.pid, 4ull << 30}}});
    const auto policy = dir_ / "guard.yaml";
    std::ofstream(policy) << R"(rules:
  - id: SITE-GUARD-MEM
    name: GPU memory over root's limit
    severity: warning
    action: kill
    window: 1h
    when:
      gpu_held: true
      scope: {users: ["0", root]}
      gpu_memory_above: 16GiB
)";
    use_fake_gpu(policy);
    std::ofstream(config_, std::ios::app) << "enforcement:\n  grace_period_ms: 500\n";
    auto started = start_agent_playing(script);
    Subprocess& agent = *started;
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();

    auto detection = wait_for_detection(agent, hog.pid, "SITE-GUARD-MEM", 10s);
    ASSERT_TRUE(detection) << agent.stderr_text();
    EXPECT_EQ((*detection)["event"]["action"], "kill");
    EXPECT_NE(detection->dump().find("over the limit"), std::string::npos) << detection->dump();
    ASSERT_TRUE(hog.wait_exit(5s)) << "the process over its limit still runs";
    EXPECT_TRUE(WIFSIGNALED(hog.status)) << hog.status;
    // The process within its limit is untouched and never reported.
    EXPECT_FALSE(modest.wait_exit(500ms));
    for (const auto& line : seen_) {
        const auto record = nlohmann::json::parse(line);
        if (record.contains("process") && record["process"].contains("pid")) {
            EXPECT_NE(record["process"]["pid"], modest.pid) << line;
        }
    }
    expect_whole_output(agent, {{"SITE-GUARD-MEM", hog.pid, "warning"}}, {hog.pid, modest.pid});
}

// A site override of a built-in rule, live: GG-CORR-0008 (GPU memory
// hoarding) raised to error and scoped out of one executable path, with no
// copy of the rule. Two copies of the idle program hold the fake GPU, one
// under the exempt serving/bin/, one under batch/bin/; both take 19.5 GiB
// more at 3 % compute. Only the batch one is reported, at the override's
// severity; a replay of the journal with the same file says the same.
TEST_F(AgentDetectTest, a_site_override_scopes_a_built_in_rule_out_of_one_executable_path) {
    const auto copy_to = [&](const std::string& where) {
        const auto path = dir_ / where;
        std::filesystem::create_directories(path.parent_path());
        std::filesystem::copy_file(GPUGUARD_IDLE_PROCESS, path);
        return path;
    };
    OwnChild served(start_idle_holder("gg-served", {}, copy_to("serving/bin/gg-served")));
    OwnChild batch(start_idle_holder("gg-batch", {}, copy_to("batch/bin/gg-batch")));
    OwnChild canary(start_child("gg-canary", {}));
    for (pid_t pid : {served.pid, batch.pid, canary.pid}) ASSERT_GT(pid, 0);
    const auto step_file = dir_ / "nvml-step";
    std::ofstream(step_file) << "0\n";
    const auto hoarding = [&](uint64_t each) {
        return gpuguard::testing::FakeH100{
            .gpu_utilization = 10,
            .memory_utilization = 60,
            .memory_used = each * 2 + (2ull << 30),
            .processes = {
                {served.pid, each, 3}, {batch.pid, each, 3}, {canary.pid, 2ull << 30, 3}}};
    };
    const auto script = dir_ / "nvml.json";
    std::ofstream(script) << gpuguard::testing::fake_nvml_script(
        {hoarding(1ull << 30), hoarding(41ull << 29)}, step_file.string());
    const auto site = dir_ / "site.yaml";
    std::ofstream(site) << "rules:\n"
                           "  - id: SITE-CANARY\n"
                           "    name: Over 1 GiB (the test's canary)\n"
                           "    severity: notice\n"
                           "    when: {gpu_held: true, gpu_memory_above: 1GiB}\n"
                           "  - id: GG-CORR-0008\n"
                           "    override:\n"
                           "      severity: error\n"
                           "      scope: {not_exe_paths: ['"
                        << (dir_ / "serving/bin/*").string() << "']}\n";
    use_fake_gpu(site);
    auto started = start_agent_playing(script);
    Subprocess& agent = *started;
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    ASSERT_TRUE(wait_for_detection(agent, canary.pid, "SITE-CANARY", 10s)) << agent.stderr_text();

    std::ofstream(step_file) << "1\n";
    const auto detection = wait_for_detection(agent, batch.pid, "GG-CORR-0008", 10s);
    ASSERT_TRUE(detection) << agent.stderr_text();
    EXPECT_EQ((*detection)["log"]["level"], "error") << detection->dump();
    // The served copy's reading past 1 GiB (its canary notice, in the whole
    // output below) was judged for GG-CORR-0008 too: it was not reported.
    const std::vector<gpuguard::testing::ExpectedDetection> expected = {
        {"SITE-CANARY", canary.pid, "notice"},
        {"SITE-CANARY", served.pid, "notice"},
        {"SITE-CANARY", batch.pid, "notice"},
        {"GG-CORR-0008", batch.pid, "error"}};
    expect_whole_output(agent, expected, {served.pid, batch.pid, canary.pid});

    const auto replayed = replay_journal(site);
    ASSERT_EQ(replayed.exit_code, 0) << replayed.stderr_text;
    EXPECT_EQ(replayed_pids(replayed, "GG-CORR-0008"), std::vector<pid_t>{batch.pid})
        << replayed.stdout_text.substr(0, 4000);
}

// A priority_guard section pausing above 80 % and resuming below 50 %, with
// `limits` (its max_pause and cooldown lines), gg-high over gg-low.
std::string priority_policy(const std::string& limits) {
    return "priority_guard:\n  pause_above_percent: 80\n  resume_below_percent: 50\n" + limits +
           "  processes:\n    - {comm: [gg-high], priority: 100}\n"
           "    - {comm: [gg-low], priority: 1}\n";
}

// A process's state letter from /proc/PID/stat ('T' stopped), '?' when gone.
char proc_state(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string line;
    std::getline(in, line);
    const auto close = line.rfind(')');
    return close == std::string::npos || close + 2 >= line.size() ? '?' : line[close + 2];
}

bool wait_for_state(pid_t pid, bool stopped, std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline) {
        if ((proc_state(pid) == 'T') == stopped) return true;
        std::this_thread::sleep_for(10ms);
    }
    return false;
}

// Guard priorities, live: the fake GPU (NVML) reports 95 % with a
// low-priority and a high-priority child of this test on it; the agent
// SIGSTOPs the low one through the enforcer (outcome "success") and leaves
// the high one running. When the script's load drops to 20 %, the low one
// is SIGCONTed.
TEST_F(AgentDetectTest, guard_priorities_pause_a_low_priority_child_under_load_and_resume_it) {
    OwnChild low(start_child("gg-low", {}));
    OwnChild high(start_child("gg-high", {}));
    ASSERT_GT(low.pid, 0);
    ASSERT_GT(high.pid, 0);
    const auto step_file = dir_ / "nvml-step";
    std::ofstream(step_file) << "0\n";
    const std::vector<gpuguard::testing::FakeNvmlProcess> both = {{low.pid, 2ull << 30},
                                                                  {high.pid, 8ull << 30}};
    const auto script = dir_ / "nvml.json";
    std::ofstream(script) << gpuguard::testing::fake_nvml_script({{.gpu_utilization = 95,
                                                                   .memory_utilization = 50,
                                                                   .memory_used = 10ull << 30,
                                                                   .processes = both},
                                                                  {.gpu_utilization = 20,
                                                                   .memory_utilization = 10,
                                                                   .memory_used = 10ull << 30,
                                                                   .processes = both}},
                                                                 step_file.string());
    const auto policy = dir_ / "guard.yaml";
    std::ofstream(policy) << priority_policy("  max_pause: 10m\n");
    use_fake_gpu(policy);
    const auto alerts = dir_ / "alerts.jsonl";
    add_file_output(alerts);
    auto started = start_agent_playing(script);
    Subprocess& agent = *started;
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();

    auto paused = wait_for_detection(agent, low.pid, "GG-GUARD-0001", 10s);
    ASSERT_TRUE(paused) << agent.stderr_text();
    EXPECT_EQ((*paused)["event"]["action"], "pause");
    EXPECT_NE(paused->dump().find("yields to priority 100 (gg-high, pid " +
                                  std::to_string(high.pid) + ")"),
              std::string::npos)
        << paused->dump();
    auto outcome = wait_for_outcome(alerts, low.pid, "pause");
    ASSERT_TRUE(outcome) << agent.stderr_text();
    EXPECT_EQ((*outcome)["gpuguard"]["enforcement"]["outcome"], "success") << outcome->dump();
    EXPECT_TRUE(wait_for_state(low.pid, true, 2s)) << "the low-priority child is not stopped";
    EXPECT_NE(proc_state(high.pid), 'T') << "the high-priority child must keep running";
    // Still loaded: it stays stopped across further readings (200 ms apart).
    std::this_thread::sleep_for(600ms);
    EXPECT_EQ(proc_state(low.pid), 'T');

    // The load drops below 50 %: resumed.
    std::ofstream(step_file) << "1\n";
    auto resumed = wait_for_outcome(alerts, low.pid, "resume");
    ASSERT_TRUE(resumed) << agent.stderr_text();
    EXPECT_EQ((*resumed)["gpuguard"]["enforcement"]["outcome"], "success") << resumed->dump();
    EXPECT_EQ((*resumed)["event"]["reason"], "SIGCONT") << resumed->dump();
    EXPECT_TRUE(wait_for_state(low.pid, false, 2s)) << "the low-priority child is still stopped";
    EXPECT_TRUE(agent.wait_for_stderr("GPU priority: resume pid " + std::to_string(low.pid), 2s))
        << agent.stderr_text();
    expect_whole_output(agent, {{"GG-GUARD-0001", low.pid, "notice"}}, {low.pid, high.pid});
    EXPECT_FALSE(high.wait_exit(100ms)) << "never signalled";
}

// The fake GPU at 95 % with a low- and a high-priority child on it.
std::string loaded_gpu_script(pid_t low, pid_t high) {
    return gpuguard::testing::fake_nvml_script(
        {.gpu_utilization = 95,
         .memory_utilization = 50,
         .memory_used = 10ull << 30,
         .processes = {{low, 2ull << 30}, {high, 8ull << 30}}});
}

// enforcement.dry_run: the same decision is reported (detection and a
// "dry_run" outcome that would send SIGSTOP) and the child never stops.
TEST_F(AgentDetectTest, guard_priorities_in_dry_run_report_the_pause_and_never_stop_the_child) {
    OwnChild low(start_child("gg-low", {}));
    OwnChild high(start_child("gg-high", {}));
    ASSERT_GT(low.pid, 0);
    ASSERT_GT(high.pid, 0);
    const auto script = dir_ / "nvml.json";
    std::ofstream(script) << loaded_gpu_script(low.pid, high.pid);
    const auto policy = dir_ / "guard.yaml";
    std::ofstream(policy) << "priority_guard:\n  processes:\n"
                          << "    - {comm: [gg-high], priority: 100}\n"
                          << "    - {comm: [gg-low], priority: 1}\n";
    use_fake_gpu(policy);
    std::ofstream(config_, std::ios::app) << "enforcement:\n  dry_run: true\n";
    const auto alerts = dir_ / "alerts.jsonl";
    add_file_output(alerts);
    auto started = start_agent_playing(script);
    Subprocess& agent = *started;
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    auto paused = wait_for_detection(agent, low.pid, "GG-GUARD-0001", 10s);
    ASSERT_TRUE(paused) << agent.stderr_text();
    auto outcome = wait_for_outcome(alerts, low.pid, "pause");
    ASSERT_TRUE(outcome) << agent.stderr_text();
    EXPECT_EQ((*outcome)["gpuguard"]["enforcement"]["outcome"], "dry_run") << outcome->dump();
    EXPECT_EQ((*outcome)["event"]["reason"], "would send SIGSTOP") << outcome->dump();
    EXPECT_FALSE(wait_for_state(low.pid, true, 1s)) << "stopped in dry run";
    expect_whole_output(agent, {{"GG-GUARD-0001", low.pid, "notice"}}, {low.pid, high.pid});
}

}  // namespace

namespace {

// The priority guard's cap and cool-down, and its promise at the agent's
// stop: with max_pause 1 s and cooldown 2 s on a GPU that stays at 95 %,
// the low-priority child is paused, resumed after its second however loaded
// the GPU, left running through the cool-down, paused again after it, and
// running once more when the agent is SIGTERMed while it is paused.
TEST_F(AgentDetectTest, guard_priorities_cap_a_pause_cool_down_and_resume_at_the_agents_stop) {
    OwnChild low(start_child("gg-low", {}));
    OwnChild high(start_child("gg-high", {}));
    ASSERT_GT(low.pid, 0);
    ASSERT_GT(high.pid, 0);
    const auto script = dir_ / "nvml.json";
    std::ofstream(script) << loaded_gpu_script(low.pid, high.pid);
    const auto policy = dir_ / "guard.yaml";
    std::ofstream(policy) << priority_policy("  max_pause: 1s\n  cooldown: 2s\n");
    use_fake_gpu(policy);
    const auto alerts = dir_ / "alerts.jsonl";
    add_file_output(alerts);
    auto started = start_agent_playing(script);
    Subprocess& agent = *started;
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    const std::string low_line = "GPU priority: resume pid " + std::to_string(low.pid) + " (gg-low";

    ASSERT_TRUE(wait_for_detection(agent, low.pid, "GG-GUARD-0001", 10s)) << agent.stderr_text();
    ASSERT_TRUE(wait_for_state(low.pid, true, 2s)) << "the low-priority child is not stopped";
    const auto paused_at = Clock::now();
    // The cap: resumed after a second although the GPU is still at 95 %.
    ASSERT_TRUE(agent.wait_for_stderr(
        low_line + ", priority 1): paused for the maximum of 1 s; not paused again for 2 s", 5s))
        << agent.stderr_text();
    ASSERT_TRUE(wait_for_state(low.pid, false, 2s)) << "still stopped after its maximum pause";
    const auto resumed_at = Clock::now();
    EXPECT_GE(resumed_at - paused_at, 800ms) << "resumed before its maximum pause";
    auto resumed = wait_for_outcome(alerts, low.pid, "resume");
    ASSERT_TRUE(resumed) << agent.stderr_text();
    EXPECT_EQ((*resumed)["gpuguard"]["enforcement"]["outcome"], "success") << resumed->dump();
    // The cool-down: running for its two seconds (checked for 1.5 s of them).
    while (Clock::now() < resumed_at + 1500ms) {
        ASSERT_NE(proc_state(low.pid), 'T') << "paused again within cooldown";
        std::this_thread::sleep_for(20ms);
    }
    // After it: paused again, the GPU being as loaded as before.
    ASSERT_TRUE(wait_for_detection(agent, low.pid, "GG-GUARD-0001", 5s)) << agent.stderr_text();
    ASSERT_TRUE(wait_for_state(low.pid, true, 2s)) << "not paused again after the cool-down";
    EXPECT_NE(proc_state(high.pid), 'T');

    // The agent stops while the child is paused: it resumes it on its way out.
    expect_whole_output(agent, {{"GG-GUARD-0001", low.pid, "notice"}}, {low.pid, high.pid});
    EXPECT_TRUE(wait_for_state(low.pid, false, 1s)) << "left stopped by the agent's stop";
    EXPECT_NE(agent.stderr_text().find(low_line + ", priority 1): the agent is stopping"),
              std::string::npos)
        << agent.stderr_text();
    EXPECT_FALSE(low.wait_exit(100ms)) << "the resumed child must still run";
}

}  // namespace
