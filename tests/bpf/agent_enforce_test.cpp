// The live agent's enforcement by signal (AgentDetectTest, agent_detect_fixture.h):
// kill, kill_now from names and hashes and its outcome from the kernel. The
// cgroup-level enforcement (deny_gpu, block_ip, pinned) is in
// agent_enforce_cgroup_test.cpp.
#include <chrono>
#include <fstream>
#include <thread>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpuguard/signatures/signatures.h"
#include "tests/bpf/agent_detect_fixture.h"
#include "tests/support/child_process.h"
#include "tests/support/netns.h"  // TestCgroup
#include "tests/support/run_command.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::testing::AgentDetectTest;
using gpuguard::testing::ChildReaper;
using gpuguard::testing::Clock;
using gpuguard::testing::copy_sleep;
using gpuguard::testing::file_bytes;
using gpuguard::testing::LoopbackPool;
using gpuguard::testing::OwnChild;
using gpuguard::testing::Subprocess;
using gpuguard::testing::TestCgroup;

// A rule that asks for "kill": the enforcer stops the miner through its
// pidfd, and both the detection and the outcome reach a file output.
TEST_F(AgentDetectTest, kill_action_stops_the_miner_and_outputs_get_both_records) {
    LoopbackPool pool;
    ASSERT_GE(pool.fd, 0) << "no free miner port on loopback";
    const auto alerts = dir_ / "alerts.jsonl";
    use_control_socket();  // this test asks `gpuguard status`
    kill_on_pool_port(alerts);
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();

    const std::string script =
        "exec 5<>/dev/tcp/127.0.0.1/" + std::to_string(pool.port) + "; read -t 30 <&5";
    const pid_t child = start_child("gg-miner", {"/bin/bash", "-c", script, "worker"});
    ASSERT_GT(child, 0);
    ChildReaper reaper(child);
    auto detection = wait_for_detection(agent, child, "GG-CORR-0002", 5s);
    ASSERT_TRUE(detection) << agent.stderr_text();
    EXPECT_EQ((*detection)["event"]["action"], "kill");

    int status = 0;
    pid_t reaped = 0;
    const auto deadline = Clock::now() + 5s;
    while (reaped == 0 && Clock::now() < deadline) {
        reaped = waitpid(child, &status, WNOHANG);
        if (reaped == 0) std::this_thread::sleep_for(10ms);
    }
    ASSERT_EQ(reaped, child) << "the enforcer did not stop the miner\n" << agent.stderr_text();
    EXPECT_TRUE(WIFSIGNALED(status));
    EXPECT_EQ(WTERMSIG(status), SIGTERM) << "bash exits on SIGTERM: no SIGKILL needed";

    const bool detection_out =
        wait_for_output(
            alerts,
            [&](const nlohmann::json& record) {
                return record["process"]["pid"] == child && record["rule"]["id"] == "GG-CORR-0002";
            },
            5s)
            .has_value();
    const auto outcome_out = wait_for_outcome(alerts, child, "kill");
    EXPECT_TRUE(detection_out) << "detection not in " << alerts;
    ASSERT_TRUE(outcome_out) << "enforcement outcome not in " << alerts;
    EXPECT_EQ((*outcome_out)["event"]["outcome"], "success") << outcome_out->dump();

    // The sink's counters are in `gpuguard status`.
    const auto report = gpuguard::testing::run_command(
        {GPUGUARD_BINARY, "status", "--json", "--socket", (dir_ / "control.sock").string()}, 10s);
    ASSERT_EQ(report.exit_code, 0) << report.stderr_text;
    const auto outputs = nlohmann::json::parse(report.stdout_text)["outputs"];
    ASSERT_EQ(outputs.size(), 1u) << report.stdout_text;
    EXPECT_EQ(outputs[0]["name"], "file");
    EXPECT_GE(outputs[0]["sent"].get<int>(), 2);
    EXPECT_EQ(outputs[0]["dropped"], 0);
    expect_whole_output(agent, {{"GG-CORR-0002", child, "error"}}, {child});
}

// fnmatch globs (without FNM_PATHNAME) that match every cgroup path except
// `path` and what lies below it: as enforcement.allowlist.cgroups they keep
// an agent that kills on every signature off processes other than the test's.
std::vector<std::string> cgroups_other_than(const std::string& path) {
    std::vector<std::string> globs{"[!/]*", path + "[!/]*"};
    for (size_t i = 1; i < path.size(); ++i) {
        globs.push_back(path.substr(0, i));                          // a proper prefix
        globs.push_back(path.substr(0, i) + "[!" + path[i] + "]*");  // differs at i
    }
    return globs;
}

// GPU Kill's miner-rules.yaml, exactly as its users write it (a top-level
// process_name glob and a hash-rate threshold) with default_action: kill: a
// bash named miner-x (a symlink's name is its comm) opening the GPU is
// killed under the rule's derived id; the same bash named trainer is not.
TEST_F(AgentDetectTest, gpu_kill_process_name_file_kills_miner_x_and_spares_trainer) {
    std::ofstream(dir_ / "miner-rules.yaml")
        << "process_name: \"miner*\"\nhash_rate_threshold: 100MH/s\ndefault_action: kill\n";
    // default_action: kill is every signature's action: only this test's
    // cgroup may be acted on.
    TestCgroup cgroup("gg-snippet");
    ASSERT_TRUE(cgroup.error().empty()) << cgroup.error();
    const auto alerts = dir_ / "alerts.jsonl";
    std::string globs;
    for (const auto& glob : cgroups_other_than(cgroup.path())) {
        globs += (globs.empty() ? "\"" : ", \"") + glob + "\"";
    }
    std::ofstream(config_, std::ios::app) << "enforcement:\n  grace_period_ms: 500\n"
                                          << "  allowlist:\n    cgroups: [" << globs << "]\n";
    add_file_output(alerts);
    ASSERT_EQ(mkfifo((dir_ / "idle").c_str(), 0600), 0);
    // Not under /tmp, where an executable is suspect of its own (GG-CORR-0005).
    const auto bin =
        std::filesystem::path("/var/lib") / ("gpuguard-test-snippet-" + std::to_string(getpid()));
    std::filesystem::create_directories(bin);
    struct RemoveBin {
        std::filesystem::path path;
        ~RemoveBin() {
            std::error_code ec;
            std::filesystem::remove_all(path, ec);
        }
    } remove_bin{bin};
    for (const char* name : {"miner-x", "trainer"}) {
        std::filesystem::create_symlink("/bin/bash", bin / name);
    }
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();

    // Waits for the test's word on its own FIFO, joins the cgroup, opens the
    // GPU, waits on a FIFO nobody writes.
    auto start = [&](const char* name) {
        const auto go = dir_ / (std::string("go-") + name);
        if (mkfifo(go.c_str(), 0600) != 0) return pid_t{-1};
        const std::string script = "read -t 30 < " + go.string() + " && echo 0 > " + cgroup.dir() +
                                   "/cgroup.procs && exec 5<>" + node_.string() + " 6<>" +
                                   (dir_ / "idle").string() + " && read -t 30 -u 6";
        const std::string program = (bin / name).string();
        const pid_t pid = fork();
        if (pid == 0) {
            execl(program.c_str(), program.c_str(), "-c", script.c_str(), nullptr);
            _exit(127);
        }
        return pid;
    };
    // Non-blocking, so a child that died before its read fails the test
    // instead of hanging it.
    auto release = [&](const char* name) {
        const auto go = dir_ / (std::string("go-") + name);
        for (int attempt = 0; attempt < 500; ++attempt) {
            const int fd = open(go.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
            if (fd >= 0) {
                const bool written = write(fd, "go\n", 3) == 3;
                close(fd);
                return written;
            }
            std::this_thread::sleep_for(10ms);
        }
        return false;
    };
    OwnChild trainer(start("trainer"));
    OwnChild miner(start("miner-x"));
    ASSERT_GT(trainer.pid, 0);
    ASSERT_GT(miner.pid, 0);
    // Its name is already a miner's at exec (GG-CORR-0012), in the host's root
    // cgroup, which the test's allowlist keeps safe: that kill is withheld.
    // Only then does it move (a slow agent, as under the sanitizers, would
    // otherwise judge the exec after the move and kill it off the GPU).
    const auto withheld = wait_for_output(
        alerts,
        [&](const nlohmann::json& record) {
            return record["gpuguard"]["record"] == "enforcement" &&
                   record["process"]["pid"] == miner.pid &&
                   record["gpuguard"]["enforcement"]["outcome"] == "withheld";
        },
        10s);
    ASSERT_TRUE(withheld) << file_bytes(alerts) << agent.stderr_text();
    ASSERT_TRUE(release("trainer"));
    ASSERT_TRUE(release("miner-x"));
    auto detection = wait_for_detection(agent, miner.pid, "GG-CORR-0001", 5s);
    ASSERT_TRUE(detection) << agent.stderr_text();
    EXPECT_EQ((*detection)["event"]["action"], "kill");
    EXPECT_EQ((*detection)["gpuguard"]["detection"]["signature_ids"][0],
              "local-miner-rules-703991ac")
        << detection->dump();
    ASSERT_TRUE(miner.wait_exit(5s)) << "miner-x was not stopped\n" << agent.stderr_text();
    EXPECT_TRUE(WIFSIGNALED(miner.status) && WTERMSIG(miner.status) == SIGTERM) << miner.status;
    // GG-CORR-0001's kill, on the GPU in the test's cgroup, stopped it.
    const auto outcome = wait_for_output(
        alerts,
        [&](const nlohmann::json& record) {
            return record["gpuguard"]["record"] == "enforcement" &&
                   record["process"]["pid"] == miner.pid && record["event"]["action"] == "kill" &&
                   record["event"]["outcome"] == "success";
        },
        5s);
    ASSERT_TRUE(outcome) << file_bytes(alerts) << agent.stderr_text();

    // The trainer held the GPU all along: no detection of any rule, still running.
    EXPECT_FALSE(wait_for_detection(agent, trainer.pid, "GG-CORR-0001", 500ms));
    for (const auto& line : seen_) {
        EXPECT_NE(nlohmann::json::parse(line)["process"]["pid"], trainer.pid) << line;
    }
    EXPECT_FALSE(trainer.wait_exit(0ms)) << "trainer ended: " << trainer.status << "\n"
                                         << file_bytes(alerts) << agent.stderr_text();
    // The name rule's signature is a process one: GG-CORR-0012 as well.
    expect_whole_output(
        agent, {{"GG-CORR-0001", miner.pid, "critical"}, {"GG-CORR-0012", miner.pid, "error"}},
        {miner.pid, trainer.pid});
}

// kill_now from the rules: a literal process name with action kill_now is
// in the kernel's map from the start (its exec dies before it runs), and an
// executable listed by sha256 is killed when it first runs (GG-CORR-0010,
// user-space path) and in the kernel at every later exec, by inode.
TEST_F(AgentDetectTest, kill_now_names_and_known_bad_hashes_from_the_rules) {
    const auto doomed = dir_ / "gg-doomed";
    copy_sleep(doomed, "");
    const auto hashed = dir_ / "gg-hashed";
    copy_sleep(hashed, "gpuguard known-bad test copy " + std::to_string(getpid()));
    const std::string sha = gpuguard::signatures::sha256_hex(file_bytes(hashed));
    std::ofstream(dir_ / "miner-rules.yaml")
        << "rules:\n  - id: local-doomed\n    action: kill_now\n"
        << "    process_name: [gg-doomed]\n"
        << "known_bad:\n  sha256: [" << sha << "]\n";
    use_control_socket();  // to read the kernel's kill_now count
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    EXPECT_NE(agent.stderr_text().find("'gg-doomed' (local-doomed) is killed at exec"),
              std::string::npos)
        << agent.stderr_text();

    auto exec_child = [](const std::filesystem::path& path) {
        const std::string file = path.string();
        const pid_t pid = fork();
        if (pid == 0) {
            execl(file.c_str(), file.c_str(), "30", nullptr);
            _exit(127);
        }
        return pid;
    };
    std::vector<pid_t> started;  // for the whole-output check
    pid_t first_hashed = 0, doomed_pid = 0, second_hashed = 0;
    {
        OwnChild child(exec_child(doomed));
        started.push_back(doomed_pid = child.pid);
        ASSERT_TRUE(child.wait_exit(2s)) << "gg-doomed ran on";
        EXPECT_TRUE(child.killed_by_sigkill()) << child.status;
    }
    {
        OwnChild child(exec_child(hashed));
        started.push_back(first_hashed = child.pid);
        auto detection = wait_for_detection(agent, child.pid, "GG-CORR-0010", 10s);
        ASSERT_TRUE(detection) << agent.stderr_text();
        EXPECT_EQ((*detection)["event"]["action"], "kill_now") << detection->dump();
        ASSERT_TRUE(child.wait_exit(5s)) << "known-bad copy was not killed";
        EXPECT_TRUE(child.killed_by_sigkill()) << child.status;
    }
    {
        // Registered by inode now: the next exec dies in the kernel, at once.
        const auto began = Clock::now();
        OwnChild child(exec_child(hashed));
        started.push_back(second_hashed = child.pid);
        ASSERT_TRUE(child.wait_exit(2s)) << "second run of the known-bad copy ran on";
        EXPECT_TRUE(child.killed_by_sigkill()) << child.status;
        std::cerr << "second run dead after "
                  << std::chrono::duration<double, std::milli>(Clock::now() - began).count()
                  << " ms\n";
    }
    // Both in-kernel kills (the name, the registered inode) were the kernel's:
    // it counts one kill_now record each; the user-space kill is not one.
    const auto report = gpuguard::testing::run_command(
        {GPUGUARD_BINARY, "status", "--json", "--socket", (dir_ / "control.sock").string()}, 10s);
    ASSERT_EQ(report.exit_code, 0) << report.stderr_text;
    const auto events = nlohmann::json::parse(report.stdout_text)["events"];
    ASSERT_TRUE(events.contains("kill_now")) << events.dump();
    EXPECT_EQ(events["kill_now"]["emitted"].get<int>(), 2) << events.dump();
    // The name killed at exec (its rule's record and GG-CORR-0012), the
    // hash judged once in user space, then in the kernel.
    expect_whole_output(agent,
                        {{"local-doomed", doomed_pid, "critical"},
                         {"GG-CORR-0012", doomed_pid, "critical"},
                         {"GG-CORR-0010", first_hashed, "critical"},
                         {"GG-CORR-0010", second_hashed, "critical"}},
                        started);
}

// The kernel's kill_now is told to user space afterwards: the live agent
// turns the kill_now event into an enforcement outcome (taken, in the
// kernel) that reaches the outputs like any other, naming the rule.
TEST_F(AgentDetectTest, kill_now_in_the_kernel_reaches_the_outputs_as_an_outcome) {
    const auto doomed = dir_ / "gg-doomed";
    copy_sleep(doomed, "");
    std::ofstream(dir_ / "miner-rules.yaml") << "rules:\n  - id: local-doomed\n"
                                             << "    action: kill_now\n"
                                             << "    process_name: [gg-doomed]\n";
    const auto alerts = dir_ / "alerts.jsonl";
    add_file_output(alerts);
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();

    const std::string file = doomed.string();
    OwnChild child(fork());
    if (child.pid == 0) {
        execl(file.c_str(), file.c_str(), "30", nullptr);
        _exit(127);
    }
    ASSERT_TRUE(child.wait_exit(2s)) << "gg-doomed ran on";
    EXPECT_TRUE(child.killed_by_sigkill()) << child.status;
    auto outcome = wait_for_outcome(alerts, child.pid, "kill_now");
    ASSERT_TRUE(outcome) << "no kill_now outcome in " << alerts << "\n" << agent.stderr_text();
    EXPECT_EQ((*outcome)["event"]["outcome"], "success") << outcome->dump();
    EXPECT_EQ((*outcome)["rule"]["id"], "local-doomed") << outcome->dump();
    EXPECT_EQ((*outcome)["event"]["reason"], "SIGKILL in the kernel at exec (name 'gg-doomed')")
        << outcome->dump();
    expect_whole_output(
        agent, {{"local-doomed", child.pid, "critical"}, {"GG-CORR-0012", child.pid, "critical"}},
        {child.pid});
}

}  // namespace
