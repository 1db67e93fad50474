// Hidden processes with the real agent (AgentDetectTest, agent_detect_fixture.h):
// a real readdir hook (hide_processes.c, libprocesshider's kind) hides a
// process holding the fake GPU node from every libc listing of /proc. The
// agent, hooked itself — through LD_PRELOAD, or through an /etc/ld.so.preload
// that exists only in a private mount namespace the test makes (an overlay
// on /etc there; the host's /etc is never written) — still lists it in
// `gpuguard ps` (its /proc reads use getdents64) and raises GG-CORR-0017
// naming the library, and replaying the journal raises it again. Without a
// hiding library nothing is raised.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>

#include "tests/bpf/agent_detect_fixture.h"
#include "tests/support/run_command.h"
#include "tests/support/time_bound.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::testing::AgentDetectTest;
using gpuguard::testing::Clock;
using gpuguard::testing::OwnChild;
using gpuguard::testing::run_command;
using gpuguard::testing::Subprocess;
using gpuguard::testing::time_bound;
namespace fs = std::filesystem;

bool lists_pid(const std::string& ls_output, pid_t pid) {
    std::istringstream words(ls_output);
    for (std::string word; words >> word;) {
        if (word == std::to_string(pid)) return true;
    }
    return false;
}

std::vector<std::string> concat(std::vector<std::string> prefix,
                                const std::vector<std::string>& command) {
    prefix.insert(prefix.end(), command.begin(), command.end());
    return prefix;
}

class HiddenProcessTest : public AgentDetectTest {
  protected:
    void SetUp() override {
        AgentDetectTest::SetUp();
        if (::testing::Test::IsSkipped()) return;
        use_control_socket();
        // A check a second after each GPU open and every second after.
        std::ofstream(config_, std::ios::app) << "process_table:\n  hidden_check_interval_s: 1\n";
        comm_ = "gghide" + std::to_string(getpid() % 100000);
    }

    // Commands run as `prefix + command` see the hiding library.
    // LD_PRELOAD: the library and the name it hides in the environment.
    std::vector<std::string> ld_preload_prefix() const {
        return {"/usr/bin/env", std::string("LD_PRELOAD=") + GPUGUARD_HIDE_LIBRARY,
                "GG_HIDE_COMM=" + comm_};
    }
    // A private mount namespace whose /etc (an overlay on the host's) holds
    // an ld.so.preload naming the library: the dynamic linker of every
    // program started there loads it.
    std::vector<std::string> ld_so_preload_prefix() {
        const fs::path upper = dir_ / "etc-upper", work = dir_ / "etc-work";
        fs::create_directories(upper);
        fs::create_directories(work);
        std::ofstream(upper / "ld.so.preload") << GPUGUARD_HIDE_LIBRARY << "\n";
        const std::string script =
            "mount --make-rprivate / && mount -t overlay gg-preload -o lowerdir=/etc,upperdir=" +
            upper.string() + ",workdir=" + work.string() +
            " /etc && exec env GG_HIDE_COMM=" + comm_ + " \"$@\"";
        return {"/usr/bin/unshare", "-m", "/bin/sh", "-c", script, "sh"};
    }

    // Starts the agent under `prefix`, a process named comm_ holding the
    // GPU node, and checks what the agent, ps and ls say about it.
    void expect_hidden_and_detected(const std::vector<std::string>& prefix,
                                    const std::string& mechanism) {
        // The hiding library works: a plain libc listing under it misses a
        // process with the name (this test's own helper, started first; it
        // runs under that name once start_child returns: exec'd by it).
        OwnChild probe(start_child(comm_, {}));
        ASSERT_GT(probe.pid, 0);
        const auto hooked_ls = run_command(concat(prefix, {"/bin/ls", "/proc"}), 10s);
        ASSERT_EQ(hooked_ls.exit_code, 0) << hooked_ls.stderr_text;
        EXPECT_FALSE(lists_pid(hooked_ls.stdout_text, probe.pid)) << "ls under the hook";
        const auto plain_ls = run_command({"/bin/ls", "/proc"}, 10s);
        EXPECT_TRUE(lists_pid(plain_ls.stdout_text, probe.pid)) << "ls without the hook";

        Subprocess agent(
            concat(prefix, {GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"}));
        ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
        // Found at start too: the bootstrap read /proc with getdents64.
        auto at_start = wait_for_detection(agent, probe.pid, "GG-CORR-0017", time_bound(10s));
        ASSERT_TRUE(at_start) << agent.stderr_text();

        // And one that starts while the agent runs: its fork and GPU open
        // are what the kernel reports.
        OwnChild miner(start_child(comm_, {}));
        ASSERT_GT(miner.pid, 0);
        auto detection = wait_for_detection(agent, miner.pid, "GG-CORR-0017", time_bound(10s));
        ASSERT_TRUE(detection) << agent.stderr_text();
        EXPECT_EQ((*detection)["log"]["level"], "critical") << "it holds a GPU";
        bool library_named = false, how_named = false;
        for (const auto& item : (*detection)["gpuguard"]["detection"]["evidence"]) {
            if (item.value("event_type", "") != "hidden_process") continue;
            const std::string detail = item["detail"];
            library_named |= detail.find(GPUGUARD_HIDE_LIBRARY) != std::string::npos;
            how_named |= detail.find(mechanism) != std::string::npos;
            EXPECT_NE(detail.find("listed by getdents64"), std::string::npos) << detail;
        }
        EXPECT_TRUE(library_named) << detection->dump();
        EXPECT_TRUE(how_named) << mechanism << " in " << detection->dump();

        // gpuguard ps (itself under the hook) lists it, marked hidden.
        const auto socket = (dir_ / "control.sock").string();
        const auto ps =
            run_command(concat(prefix, {GPUGUARD_BINARY, "ps", "--json", "--socket", socket}), 10s);
        ASSERT_EQ(ps.exit_code, 0) << ps.stderr_text;
        const auto processes = nlohmann::json::parse(ps.stdout_text, nullptr, false);
        ASSERT_FALSE(processes.is_discarded()) << ps.stdout_text;
        // Both: the one found at start (the bootstrap's getdents64 listing)
        // and the one the kernel reported.
        int listed = 0;
        for (const auto& process : processes) {
            if (process["pid"] != miner.pid && process["pid"] != probe.pid) continue;
            ++listed;
            EXPECT_EQ(process["comm"], comm_);
            EXPECT_EQ(process["hidden"], true) << process.dump();
        }
        EXPECT_EQ(listed, 2) << ps.stdout_text;
        const auto table = run_command({GPUGUARD_BINARY, "ps", "--socket", socket}, 10s);
        EXPECT_NE(table.stdout_text.find("(hidden from /proc listings)"), std::string::npos)
            << table.stdout_text;
        expect_whole_output(
            agent,
            {{"GG-CORR-0017", probe.pid, "critical"}, {"GG-CORR-0017", miner.pid, "critical"}},
            {probe.pid, miner.pid});

        // The journal's hidden_process event makes replay judge it the same way.
        const auto replayed = replay_journal();
        ASSERT_EQ(replayed.exit_code, 0) << replayed.stderr_text;
        bool replayed_detection = false;
        std::istringstream lines(replayed.stdout_text);
        for (std::string line; std::getline(lines, line);) {
            const auto record = nlohmann::json::parse(line, nullptr, false);
            if (record.is_discarded() || record["rule"]["id"] != "GG-CORR-0017" ||
                record["process"]["pid"] != miner.pid) {
                continue;
            }
            replayed_detection = true;
            EXPECT_EQ(record["log"]["level"], "critical") << line;
        }
        EXPECT_TRUE(replayed_detection) << replayed.stdout_text;
    }

    std::string comm_;
};

TEST_F(HiddenProcessTest, ld_preload_hider_is_named_and_its_gpu_process_still_listed) {
    expect_hidden_and_detected(
        ld_preload_prefix(), std::string("LD_PRELOAD of the agent names ") + GPUGUARD_HIDE_LIBRARY);
}

TEST_F(HiddenProcessTest, ld_so_preload_hider_in_a_mount_namespace_is_named) {
    expect_hidden_and_detected(
        ld_so_preload_prefix(),
        std::string("/etc/ld.so.preload (the agent's mount namespace) preloads ") +
            GPUGUARD_HIDE_LIBRARY);
    EXPECT_FALSE(fs::exists("/etc/ld.so.preload")) << "the host's /etc was never written";
}

// A careless hider leaves errno set at the end of every listing: libc
// callers that check it (ls, std::filesystem) take each listing for a
// failure. The agent under it lists its rule drop-ins, its journal and /proc
// with getdents64: it starts, applies the drop-in, still finds the hidden
// process (it failed to start before: "cannot list .../rules.d"), and
// reports the library preloaded into it.
TEST_F(HiddenProcessTest, a_sloppy_hider_leaving_errno_set_does_not_stop_the_agent) {
    auto prefix = ld_preload_prefix();
    prefix.push_back("GG_HIDE_SLOPPY_ERRNO=1");
    const auto hooked_ls = run_command(concat(prefix, {"/bin/ls", rules_dir_.string()}), 10s);
    EXPECT_NE(hooked_ls.exit_code, 0) << "ls under the careless hook: " << hooked_ls.stdout_text;
    std::ofstream(rules_dir_ / "60-local.yaml") << R"(rules:
  - id: local-sloppy-probe
    name: A name of this test's own
    severity: critical
    confidence: 0.9
    action: alert
    process_name: ["gg-sloppy-*"]
)";
    OwnChild probe(start_child(comm_, {}));
    ASSERT_GT(probe.pid, 0);
    Subprocess agent(
        concat(prefix, {GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"}));
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    ASSERT_TRUE(wait_for_detection(agent, probe.pid, "GG-CORR-0017", time_bound(10s)))
        << agent.stderr_text();
    const pid_t named = start_child("gg-sloppy-1", {});
    gpuguard::testing::ChildReaper reap(named);
    auto detection = wait_for_detection(agent, named, "GG-CORR-0001", time_bound(10s));
    ASSERT_TRUE(detection) << agent.stderr_text();
    EXPECT_EQ((*detection)["gpuguard"]["detection"]["signature_ids"][0], "local-sloppy-probe");
    EXPECT_EQ(agent.stderr_text().find("cannot list"), std::string::npos) << agent.stderr_text();
    // And the library in the agent itself is reported, named (GG-CORR-0022),
    // at its start: among the lines the waits above read.
    const auto preloaded = detections_for({agent.pid()}, "GG-CORR-0022");
    ASSERT_EQ(preloaded.size(), 1u) << agent.stderr_text();
    EXPECT_NE(
        preloaded[0].find(std::string("LD_PRELOAD of the agent names ") + GPUGUARD_HIDE_LIBRARY),
        std::string::npos)
        << preloaded[0];
    // The named one: at its exec, before its GPU open (GG-CORR-0012), then on it.
    expect_whole_output(agent,
                        {{"GG-CORR-0017", probe.pid, "critical"},
                         {"GG-CORR-0012", named, "error"},
                         {"GG-CORR-0001", named, "critical"}},
                        {probe.pid, named});
}

TEST_F(HiddenProcessTest, without_a_hiding_library_nothing_is_hidden) {
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    const auto process_table = [&] {
        const auto status = run_command(
            {GPUGUARD_BINARY, "status", "--json", "--socket", (dir_ / "control.sock").string()},
            10s);
        EXPECT_EQ(status.exit_code, 0) << status.stderr_text;
        return nlohmann::json::parse(status.stdout_text, nullptr, false)["process_table"];
    };
    OwnChild gpu_user(start_child(comm_, {}));
    ASSERT_GT(gpu_user.pid, 0);
    // Two comparisons after it held the GPU (the second began after it ran),
    // by the agent's own count, instead of a fixed wait.
    const int before = process_table()["hidden_checks"].get<int>();
    nlohmann::json table;
    for (const auto deadline = Clock::now() + time_bound(10s); Clock::now() < deadline;) {
        table = process_table();
        if (table["hidden_checks"].get<int>() >= before + 2) break;
        std::this_thread::sleep_for(50ms);
    }
    EXPECT_GE(table["hidden_checks"].get<int>(), before + 2)
        << "the comparison did run: " << table.dump();
    EXPECT_EQ(table["hidden"], 0) << table.dump();
    expect_whole_output(agent, {}, {gpu_user.pid});
    for (const auto& line : seen_) {
        EXPECT_EQ(line.find("GG-CORR-0017"), std::string::npos) << line;
    }
}

}  // namespace
