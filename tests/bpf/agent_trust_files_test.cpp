// Writes to what the agent trusts are evidence (issue 39 point 1), with the
// real binary and real writers: a drop-in allowlist written by a shell is a
// warning (GG-CORR-0030) naming the shell and the diff, replayed from the
// journal alike; the same drop-in written by a maintainer hook under the
// real dpkg is the package manager's (the notice GG-CORR-0031, never
// GG-CORR-0030); a kill lowered to an alert is a warning with the diff, and
// so is a correlation file's override that scopes a built-in rule out;
// any write by a process another rule flagged (a miner, GG-CORR-0001) is
// critical (GG-CORR-0032).
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <unistd.h>

#include "tests/bpf/agent_detect_fixture.h"
#include "tests/support/run_command.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::testing::AgentDetectTest;
using gpuguard::testing::Clock;
using gpuguard::testing::OwnChild;
using gpuguard::testing::run_command;
using gpuguard::testing::Subprocess;
namespace fs = std::filesystem;

constexpr char kAllowEvil[] = "allowlist:\\n  exe_paths: [/opt/evil/*]\\n";

class AgentTrustFilesTest : public AgentDetectTest {
  protected:
    // Runs `argv` as a child of the test and waits for it to end; its pid.
    static pid_t run_writer(std::vector<std::string> argv) {
        std::vector<char*> args;
        for (auto& arg : argv) args.push_back(arg.data());
        args.push_back(nullptr);
        const pid_t pid = fork();
        if (pid == 0) {
            execv(args[0], args.data());
            _exit(127);
        }
        OwnChild child(pid);
        EXPECT_TRUE(child.wait_exit(30s)) << argv.back();
        EXPECT_TRUE(WIFEXITED(child.status) && WEXITSTATUS(child.status) == 0) << argv.back();
        return pid;
    }

    // The next detection of `rule`, any process, within `timeout`.
    std::optional<nlohmann::json> wait_for_rule(Subprocess& agent, const std::string& rule,
                                                std::chrono::milliseconds timeout) {
        const auto deadline = Clock::now() + timeout;
        while (Clock::now() < deadline) {
            auto line = agent.read_stdout_line(20ms);
            if (!line) continue;
            seen_.push_back(*line);
            auto detection = nlohmann::json::parse(*line, nullptr, false);
            if (detection.is_object() && detection["rule"]["id"] == rule) return detection;
        }
        return std::nullopt;
    }

    static std::string evidence_of(const nlohmann::json& detection) {
        std::string text;
        for (const auto& item : detection["gpuguard"]["detection"]["evidence"]) {
            text += item["detail"].get<std::string>() + "\n";
        }
        return text;
    }

    // The lines of `rule` read so far, any process.
    std::vector<std::string> lines_of(const std::string& rule) const {
        std::vector<std::string> out;
        for (const auto& line : seen_) {
            const auto record = nlohmann::json::parse(line, nullptr, false);
            if (record.is_object() && record.contains("rule") && record["rule"]["id"] == rule) {
                out.push_back(line);
            }
        }
        return out;
    }
};

TEST_F(AgentTrustFilesTest, a_drop_in_allowlist_written_by_a_shell_is_a_warning_naming_it) {
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    const fs::path drop_in = rules_dir_ / "50-allow.yaml";
    const pid_t shell = run_writer(
        {"/bin/sh", "-c", std::string("printf '") + kAllowEvil + "' > " + drop_in.string()});

    auto detection = wait_for_detection(agent, shell, "GG-CORR-0030", 10s);
    ASSERT_TRUE(detection) << agent.stderr_text();
    EXPECT_EQ((*detection)["log"]["level"], "warning") << detection->dump();
    const std::string evidence = evidence_of(*detection);
    EXPECT_NE(evidence.find("allowlist.exe_paths + /opt/evil/*"), std::string::npos) << evidence;
    EXPECT_NE(evidence.find(drop_in.string()), std::string::npos) << evidence;
    EXPECT_NE(evidence.find("by pid " + std::to_string(shell) + " (sh)"), std::string::npos)
        << evidence;
    // Its executable (read from /proc, or the exec's path when it ended
    // first) and its command line.
    const bool named = evidence.find(": /bin/sh /bin/sh -c printf") != std::string::npos ||
                       evidence.find(": " + fs::canonical("/bin/sh").string() +
                                     " /bin/sh -c printf") != std::string::npos;
    EXPECT_TRUE(named) << evidence;
    EXPECT_NE(evidence.find("[other]"), std::string::npos) << evidence;
    // The reload's log line says who changed what.
    EXPECT_TRUE(agent.wait_for_stderr("rules reloaded: " + drop_in.string(), 2s))
        << agent.stderr_text();

    expect_whole_output(agent, {{"GG-CORR-0030", shell, "warning"}}, {shell});
    // The journal carries it: replay raises the same detection for the shell.
    const auto replayed = replay_journal();
    ASSERT_EQ(replayed.exit_code, 0) << replayed.stderr_text;
    bool replayed_warning = false;
    std::istringstream lines(replayed.stdout_text);
    for (std::string line; std::getline(lines, line);) {
        const auto record = nlohmann::json::parse(line, nullptr, false);
        if (!record.is_object() || !record.contains("rule")) continue;
        replayed_warning = replayed_warning ||
                           (record["rule"]["id"] == "GG-CORR-0030" && pid_of(record) == shell &&
                            evidence_of(record).find("/opt/evil/*") != std::string::npos);
    }
    EXPECT_TRUE(replayed_warning) << replayed.stdout_text;
}

TEST_F(AgentTrustFilesTest, the_same_drop_in_written_under_dpkg_is_the_package_managers_notice) {
    if (!fs::exists("/usr/bin/dpkg")) GTEST_SKIP() << "no dpkg on this host";
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    const fs::path drop_in = rules_dir_ / "50-allow.yaml";
    // A maintainer hook: dpkg runs it with sh -c, as its own child. The
    // triggers-only run changes nothing of the package database but what
    // was pending anyway.
    const auto packaged =
        run_command({"/usr/bin/dpkg",
                     "--pre-invoke=printf '" + std::string(kAllowEvil) + "' > " + drop_in.string(),
                     "--triggers-only", "--pending"},
                    60s);
    ASSERT_EQ(packaged.exit_code, 0) << packaged.stderr_text;
    ASSERT_TRUE(fs::exists(drop_in)) << "dpkg did not run its hook: " << packaged.stderr_text;

    auto notice = wait_for_rule(agent, "GG-CORR-0031", 10s);
    ASSERT_TRUE(notice) << agent.stderr_text();
    EXPECT_EQ((*notice)["log"]["level"], "notice") << notice->dump();
    const std::string evidence = evidence_of(*notice);
    EXPECT_NE(evidence.find("allowlist.exe_paths + /opt/evil/*"), std::string::npos) << evidence;
    EXPECT_NE(evidence.find("[package_manager: under /usr/bin/dpkg"), std::string::npos)
        << evidence;
    // Not the warning a shell's change is, not for the hook nor for anyone.
    // The reload that judged the write came with the notice: the whole
    // output has no GG-CORR-0030, for anyone, and nothing at warning or
    // above for the hook's writer.
    const pid_t writer = pid_of(*notice);
    expect_whole_output(agent, {{"GG-CORR-0031", writer, "notice"}}, {writer});
    EXPECT_TRUE(lines_of("GG-CORR-0030").empty()) << lines_of("GG-CORR-0030").front();
}

TEST_F(AgentTrustFilesTest, an_action_lowered_from_kill_to_alert_is_a_warning_with_the_diff) {
    const fs::path kill_file = rules_dir_ / "10-kill.yaml";
    std::ofstream(kill_file) << "signatures:\n  override:\n    - id: GG-PORT-0001\n"
                             << "      action: kill\n";
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    const pid_t shell = run_writer(
        {"/bin/sh", "-c",
         "printf 'signatures:\\n  override:\\n    - id: GG-PORT-0001\\n      action: alert\\n' > " +
             kill_file.string()});

    auto detection = wait_for_detection(agent, shell, "GG-CORR-0030", 10s);
    ASSERT_TRUE(detection) << agent.stderr_text();
    const std::string evidence = evidence_of(*detection);
    EXPECT_NE(evidence.find("actions lowered: GG-PORT-0001 action kill -> alert"),
              std::string::npos)
        << evidence;
    EXPECT_EQ(evidence.find("allowlist added"), std::string::npos) << evidence;
    expect_whole_output(agent, {{"GG-CORR-0030", shell, "warning"}}, {shell});
}

// A correlation file's override that scopes a built-in rule out of a
// namespace widens the agent's trust like an edited copy: the shell that
// wrote it is a warning naming the exemption added.
TEST_F(AgentTrustFilesTest, an_override_scoping_a_rule_out_written_by_a_shell_is_a_warning) {
    const fs::path correlation = dir_ / "site-correlation.yaml";
    std::ofstream(correlation) << "rules:\n  - id: GG-CORR-0013\n    override: {dry_run: true}\n";
    use_fake_gpu(correlation);
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    const pid_t shell =
        run_writer({"/bin/sh", "-c",
                    "printf 'rules:\\n  - id: GG-CORR-0013\\n    override: {dry_run: true, scope: "
                    "{not_pod_namespaces: [sd-queue]}}\\n' > " +
                        correlation.string()});

    auto detection = wait_for_detection(agent, shell, "GG-CORR-0030", 10s);
    ASSERT_TRUE(detection) << agent.stderr_text();
    const std::string evidence = evidence_of(*detection);
    EXPECT_NE(evidence.find("GG-CORR-0013 scope.not_pod_namespaces + sd-queue"), std::string::npos)
        << evidence;
    expect_whole_output(agent, {{"GG-CORR-0030", shell, "warning"}}, {shell});
}

TEST_F(AgentTrustFilesTest, a_write_by_a_flagged_miner_is_critical) {
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    const fs::path trigger = dir_ / "write-now";
    const fs::path drop_in = rules_dir_ / "60-miner.yaml";
    // A known miner by its command line (GG-CORR-0001 flags it), which then
    // writes a drop-in, whatever it says, and stays.
    const std::string script = "while [ ! -e " + trigger.string() + " ]; do sleep 0.05; done; " +
                               "printf '# nothing\\n' > " + drop_in.string() + "; sleep 30";
    const pid_t miner = start_child("gg-miner", {"/bin/bash", "-c", script, "xmrig", "--cuda", "-o",
                                                 "stratum+tcp://127.0.0.1:3333", "-u", "wallet"});
    ASSERT_GT(miner, 0);
    OwnChild reap(miner);
    ASSERT_TRUE(wait_for_detection(agent, miner, "GG-CORR-0001", 10s)) << agent.stderr_text();
    std::ofstream(trigger) << "go\n";

    auto detection = wait_for_detection(agent, miner, "GG-CORR-0032", 10s);
    ASSERT_TRUE(detection) << agent.stderr_text();
    EXPECT_EQ((*detection)["log"]["level"], "critical") << detection->dump();
    const std::string evidence = evidence_of(*detection);
    EXPECT_NE(evidence.find(drop_in.string()), std::string::npos) << evidence;
    EXPECT_NE(evidence.find("flagged by GG-CORR-0001"), std::string::npos) << evidence;
    expect_whole_output(agent,
                        {{"GG-CORR-0012", miner, "error", /*optional=*/true},
                         {"GG-CORR-0001", miner, "critical"},
                         {"GG-CORR-0032", miner, "critical"}},
                        {miner});
}

// A start never fails open on the correlation files either (issue 39 point
// 2): a correlation file that does not parse at start runs the agent on the
// copy the last good start kept, with the critical GG-AGENT-0002 naming
// file:line:col, and the site rule of that copy still fires.
TEST_F(AgentTrustFilesTest, a_broken_correlation_file_at_start_runs_on_the_last_good_copy) {
    const fs::path correlation = dir_ / "site-correlation.yaml";
    std::ofstream(correlation) << "rules:\n  - id: SITE-0001\n    name: Site GPU watch\n"
                               << "    severity: warning\n    when: {gpu_held: true}\n";
    use_fake_gpu(correlation);
    {
        Subprocess first({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
        ASSERT_TRUE(first.wait_for_agent_ready(30s)) << first.stderr_text();
        EXPECT_EQ(first.stop(SIGTERM, 10s), 0) << first.stderr_text();
    }
    std::ofstream(correlation) << "rules:\n  - id: [SITE-0001\n";
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    const std::string text = agent_critical(agent, "GG-AGENT-0002");
    ASSERT_FALSE(text.empty());
    EXPECT_NE(text.find(correlation.string() + ":"), std::string::npos) << text;
    EXPECT_NE(text.find("running on the last good correlation files (1 file(s) kept in"),
              std::string::npos)
        << text;

    const pid_t holder = start_child("gg-site", {});
    ASSERT_GT(holder, 0);
    OwnChild reap(holder);
    EXPECT_TRUE(wait_for_detection(agent, holder, "SITE-0001", 10s)) << agent.stderr_text();
}

}  // namespace
