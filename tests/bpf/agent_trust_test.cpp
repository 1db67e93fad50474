// The agent's own trust (issue 28, point 6), with the real binary: config
// and rule files that anyone but root can write are refused (start-up
// fails; a reload keeps the last good rules); a SIGTERM from a test process
// is a record naming it (GG-CORR-0019) in the outputs; a SIGKILL followed
// by a restart is "agent was down from T1 to T2" (GG-CORR-0020), and a
// clean stop followed by a restart is not; a test process that sends the
// agent SIGUSR2 and SIGSTOP is a detection naming it (GG-CORR-0021, from
// the kernel's signal_generate; SIGCONT, which systemd sends after every
// SIGTERM, is not); a test process that detaches one of the agent's links
// (bpf_link_detach) is a detection naming it, one detaching its own link is
// not; a pin removed is reported and pinned again.
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "tests/bpf/agent_detect_fixture.h"
#include "tests/support/bpf_objects.h"
#include "tests/support/child_process.h"
#include "tests/support/run_command.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::testing::AgentDetectTest;
using gpuguard::testing::ChildReaper;
using gpuguard::testing::Clock;
using gpuguard::testing::file_bytes;
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
    // A group-writable drop-in: not loaded, and the start does not fail open
    // for it: the agent runs on the built-in pack (no last good copy yet) and
    // raises the critical GG-AGENT-0002 naming the file, its mode and owner.
    const fs::path drop_in = rules_dir_ / "60-local.yaml";
    std::ofstream(drop_in) << kLocalRule;
    fs::permissions(drop_in, fs::perms(0664));
    const auto refused_at_start = [&](const std::string& wanted) {
        Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
        ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
        const std::string text = agent_critical(agent, "GG-AGENT-0002");
        ASSERT_FALSE(text.empty());
        EXPECT_NE(text.find(wanted), std::string::npos) << text;
        EXPECT_NE(text.find("running on the built-in pack alone"), std::string::npos) << text;
        EXPECT_EQ(agent.stop(SIGTERM, 10s), 0) << agent.stderr_text();
    };
    refused_at_start(drop_in.string() + ": writable by group (mode 0664, owner root:");
    refused_at_start("refused; make it writable by root only");

    // The rules directory itself, world-writable.
    fs::permissions(drop_in, fs::perms(0644));
    fs::permissions(rules_dir_, fs::perms(0777));
    refused_at_start(rules_dir_.string() + ": writable by group and others");
    fs::permissions(rules_dir_, fs::perms(0755));

    // The config file, owned by someone else: refused before anything loads (2).
    ASSERT_EQ(chown(config_.c_str(), 65534, static_cast<gid_t>(-1)), 0);
    const auto run = run_command({GPUGUARD_BINARY, "run", "--config", config_.string()}, 30s);
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

int64_t realtime_ns() {
    struct timespec now {};
    clock_gettime(CLOCK_REALTIME, &now);
    return static_cast<int64_t>(now.tv_sec) * 1'000'000'000 + now.tv_nsec;
}

TEST_F(AgentDetectTest, sigterm_from_a_process_is_a_record_naming_it_before_the_agent_stops) {
    const fs::path alerts = dir_ / "alerts.jsonl";
    add_file_output(alerts);
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();

    // The test's own child sends SIGTERM to the agent the test started, and
    // waits (it still exists when the agent reads who it is).
    const pid_t agent_pid = agent.pid();
    const pid_t stopper = fork();
    if (stopper == 0) {
        prctl(PR_SET_NAME, "gg-stopper");
        kill(agent_pid, SIGTERM);
        pause();
        _exit(0);
    }
    ChildReaper reap(stopper);
    auto detection = wait_for_detection(agent, stopper, "GG-CORR-0019", 10s);
    ASSERT_TRUE(detection) << agent.stderr_text();
    std::error_code ec;
    const std::string own_exe = fs::read_symlink("/proc/self/exe", ec).string();
    EXPECT_EQ((*detection)["process"]["executable"], own_exe) << detection->dump();
    const std::string own_argv0 = file_bytes("/proc/self/cmdline").c_str();
    EXPECT_EQ((*detection)["process"]["args"][0], own_argv0) << detection->dump();
    const std::string evidence = (*detection)["gpuguard"]["detection"]["evidence"][0]["detail"];
    EXPECT_NE(evidence.find("SIGTERM to the agent (pid " + std::to_string(agent_pid) +
                            ") from pid " + std::to_string(stopper) + " (gg-stopper)"),
              std::string::npos)
        << evidence;
    EXPECT_TRUE(
        agent.wait_for_stderr("stopping on SIGTERM from pid " + std::to_string(stopper), 10s))
        << agent.stderr_text();
    expect_whole_output(agent, {{"GG-CORR-0019", stopper, "notice"}}, {stopper});
    // The file output has it too: sent before the agent detached.
    auto record = wait_for_output(
        alerts,
        [&](const nlohmann::json& line) {
            return line["rule"]["id"] == "GG-CORR-0019" && line["process"]["pid"] == stopper;
        },
        2s);
    EXPECT_TRUE(record) << file_bytes(alerts);
}

// Forks a child named `comm` that sends `signals` to `target` (a pause
// between them), then waits to be reaped: it exists while the agent learns
// who it is.
pid_t signal_sender(const char* comm, pid_t target, std::vector<int> signals) {
    const pid_t sender = fork();
    if (sender == 0) {
        prctl(PR_SET_NAME, comm);
        for (int signal : signals) {
            kill(target, signal);
            usleep(200'000);
        }
        pause();
        _exit(0);
    }
    return sender;
}

TEST_F(AgentDetectTest, signals_from_a_process_are_a_detection_naming_the_sender) {
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    const pid_t agent_pid = agent.pid();
    const auto evidence_of = [&](pid_t sender, const char* comm) {
        auto detection = wait_for_detection(agent, sender, "GG-CORR-0021", 10s);
        EXPECT_TRUE(detection) << comm << ": " << agent.stderr_text();
        std::string evidence;
        if (!detection) return evidence;
        EXPECT_EQ((*detection)["process"]["name"], comm) << detection->dump();
        for (const auto& item : (*detection)["gpuguard"]["detection"]["evidence"])
            evidence += item["detail"].get<std::string>() + "\n";
        return evidence;
    };
    const auto to_agent = [&](pid_t sender, const char* comm) {
        return " to the agent (pid " + std::to_string(agent_pid) + ") from pid " +
               std::to_string(sender) + " (" + comm + ")";
    };

    // SIGUSR2, which the agent ignores: still the sender's detection.
    const pid_t usr2 = signal_sender("gg-signaller", agent_pid, {SIGUSR2});
    ChildReaper reap_usr2(usr2);
    std::string evidence = evidence_of(usr2, "gg-signaller");
    EXPECT_NE(evidence.find("SIGUSR2" + to_agent(usr2, "gg-signaller") + ", uid 0"),
              std::string::npos)
        << evidence;
    EXPECT_NE(evidence.find("(ignored by the agent)"), std::string::npos) << evidence;

    // Frozen for a moment, then let go on: the detection names the freezer.
    const pid_t freezer = signal_sender("gg-freezer", agent_pid, {SIGSTOP, SIGCONT});
    ChildReaper reap_freezer(freezer);
    evidence = evidence_of(freezer, "gg-freezer");
    EXPECT_NE(evidence.find("SIGSTOP" + to_agent(freezer, "gg-freezer")), std::string::npos)
        << evidence;

    // The test's own stop is GG-CORR-0019's, not tampering: no GG-CORR-0021
    // for it.
    expect_whole_output(agent,
                        {{"GG-CORR-0021", usr2, "warning"},
                         {"GG-CORR-0021", freezer, "warning"},
                         {"GG-CORR-0019", getpid(), "notice"}},
                        {usr2, freezer, getpid()});

    // The journal has every signal but SIGCONT (it only resumes) and SIGTERM.
    auto exported =
        run_command({GPUGUARD_BINARY, "journal", "export", "--dir", (dir_ / "journal").string(),
                     "--format", "jsonl", "--type", "agent_tamper"},
                    30s);
    ASSERT_EQ(exported.exit_code, 0) << exported.stderr_text;
    std::vector<std::pair<pid_t, int>> signals;
    std::istringstream lines(exported.stdout_text);
    for (std::string line; std::getline(lines, line);) {
        auto event = nlohmann::json::parse(line, nullptr, false);
        if (event.is_discarded() || event["agent_tamper"]["kind"] != "signal") continue;
        EXPECT_EQ(event["agent_tamper"]["agent_pid"], agent_pid) << line;
        signals.emplace_back(event["process"]["pid"], event["agent_tamper"]["signal"]);
    }
    const std::vector<std::pair<pid_t, int>> expected{{usr2, SIGUSR2}, {freezer, SIGSTOP}};
    EXPECT_EQ(signals, expected) << exported.stdout_text;
}

TEST_F(AgentDetectTest, a_process_detaching_the_agents_link_is_a_detection_naming_it) {
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    // The signal program's link: not one the detection itself rides on.
    const uint32_t link_id = gpuguard::testing::link_id_of_program(agent.pid(), "gg_agent_signal");
    ASSERT_NE(link_id, 0u) << "no link of gg_agent_signal in the agent's fds";

    // The test's child first detaches a link of its own (not the agent's:
    // the kernel hook resolves the fd and stays quiet), then opens the
    // agent's link by id and detaches it (whether the kernel allows it for
    // this link type or not, the attempt is reported).
    int pipe_fds[2];
    ASSERT_EQ(pipe(pipe_fds), 0);
    const pid_t detacher = fork();
    if (detacher == 0) {
        prctl(PR_SET_NAME, "gg-detacher");
        const int own = gpuguard::testing::own_raw_tracepoint_link();
        char status = own >= 0 ? 'y' : 'n';
        if (own >= 0) (void)bpf_link_detach(own);
        (void)!write(pipe_fds[1], &status, 1);
        const int fd = bpf_link_get_fd_by_id(link_id);
        (void)bpf_link_detach(fd);
        pause();
        _exit(0);
    }
    ChildReaper reap(detacher);
    close(pipe_fds[1]);
    char own_link = 0;
    ASSERT_EQ(read(pipe_fds[0], &own_link, 1), 1);
    close(pipe_fds[0]);
    EXPECT_EQ(own_link, 'y') << "the child could not attach a link of its own";
    auto detection = wait_for_detection(agent, detacher, "GG-CORR-0021", 10s);
    ASSERT_TRUE(detection) << agent.stderr_text();
    EXPECT_EQ((*detection)["process"]["name"], "gg-detacher") << detection->dump();
    const auto& evidence = (*detection)["gpuguard"]["detection"]["evidence"];
    ASSERT_EQ(evidence.size(), 1u) << "only the agent's link: " << detection->dump();
    const std::string detail = evidence[0]["detail"];
    EXPECT_NE(detail.find("BPF_LINK_DETACH on the agent (pid " + std::to_string(agent.pid()) +
                          ")'s programs by pid " + std::to_string(detacher) + " (gg-detacher)"),
              std::string::npos)
        << detail;
    EXPECT_NE(detail.find("(link id " + std::to_string(link_id) + " (fd "), std::string::npos)
        << detail;
    expect_whole_output(agent, {{"GG-CORR-0021", detacher, "warning"}}, {detacher});
}

// A bpf filesystem the test mounts for the agent's pins (the host's
// /sys/fs/bpf may be none), unmounted at the end.
struct TestBpffs {
    explicit TestBpffs(fs::path where) : path(std::move(where)) {
        fs::create_directories(path);
        mounted = mount("bpf", path.c_str(), "bpf", 0, nullptr) == 0;
    }
    ~TestBpffs() {
        if (mounted) umount2(path.c_str(), MNT_DETACH);
    }
    fs::path path;
    bool mounted = false;
};

// The agent's pins are its enforcement when it is not running: one removed
// by a process is reported naming it and pinned again; one removed where
// the kernel's watch cannot tell (a relative path) is found by the agent's
// check within seconds and pinned again too.
TEST_F(AgentDetectTest, a_removed_pin_is_reported_and_pinned_again) {
    TestBpffs bpffs(dir_ / "bpffs");
    ASSERT_TRUE(bpffs.mounted) << std::strerror(errno);
    const fs::path pins = bpffs.path / "gpuguard";
    std::ofstream(config_, std::ios::app) << "enforcement:\n  pin_path: " << pins.string() << "\n";
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    const fs::path kills = pins / "maps" / "agent_kills";
    const fs::path names = pins / "maps" / "known_bad_names";
    ASSERT_TRUE(fs::exists(kills));
    ASSERT_TRUE(fs::exists(names));

    const pid_t remover = gpuguard::testing::spawn_process("/bin/rm", {"rm", kills.string()}, "/");
    ASSERT_GT(remover, 0);
    ChildReaper reap_remover(remover);
    auto detection = wait_for_detection(agent, remover, "GG-CORR-0021", 15s);
    ASSERT_TRUE(detection) << agent.stderr_text();
    const std::string detail = (*detection)["gpuguard"]["detection"]["evidence"][0]["detail"];
    EXPECT_NE(detail.find("pin " + kills.string() + " (pinned again), removed by rm of the agent"),
              std::string::npos)
        << detail;
    EXPECT_NE(detail.find("removed by pid " + std::to_string(remover) + " (rm)"), std::string::npos)
        << detail;
    EXPECT_TRUE(fs::exists(kills)) << "pinned again";

    // Relative to its working directory: only the agent's check sees it.
    const pid_t quiet = gpuguard::testing::spawn_process(
        "/bin/rm", {"rm", names.filename().string()}, names.parent_path().string());
    ASSERT_GT(quiet, 0);
    ChildReaper reap_quiet(quiet);
    std::optional<nlohmann::json> found;
    const auto deadline = std::chrono::steady_clock::now() + 15s;
    while (!found && std::chrono::steady_clock::now() < deadline) {
        auto line = agent.read_stdout_line(50ms);
        if (!line) continue;
        seen_.push_back(*line);
        auto record = nlohmann::json::parse(*line, nullptr, false);
        if (record.is_discarded() || record["rule"]["id"] != "GG-CORR-0021") continue;
        for (const auto& item : record["gpuguard"]["detection"]["evidence"]) {
            if (item["detail"].get<std::string>().find(names.string()) != std::string::npos) {
                found = record;
            }
        }
    }
    ASSERT_TRUE(found) << agent.stderr_text();
    EXPECT_TRUE(fs::exists(names)) << "pinned again";
    expect_whole_output(
        agent, {{"GG-CORR-0021", remover, "warning"}, {"GG-CORR-0021", pid_of(*found), "warning"}},
        {remover, quiet});
}

TEST_F(AgentDetectTest, sigkill_then_restart_reports_the_gap_and_a_clean_stop_does_not) {
    const std::vector<std::string> run{GPUGUARD_BINARY, "run", "--config", config_.string(),
                                       "--json"};
    // Pins of its own (the killer is kept in a pinned map across agents).
    TestBpffs bpffs(dir_ / "bpffs");
    ASSERT_TRUE(bpffs.mounted) << std::strerror(errno);
    const fs::path pins = bpffs.path / "gpuguard";
    std::ofstream(config_, std::ios::app) << "enforcement:\n  pin_path: " << pins.string() << "\n";
    pid_t killed_pid = 0;
    pid_t killer = 0;
    int64_t killed_at = 0;
    std::optional<ChildReaper> reap_killer;
    {
        Subprocess first(run);
        ASSERT_TRUE(first.wait_for_agent_ready(30s)) << first.stderr_text();
        // Alive for a while: its run marker touched once after it was made.
        const fs::path marker = dir_ / "journal" / "agent.run";
        std::error_code ec;
        const auto made = fs::last_write_time(marker, ec);
        ASSERT_FALSE(ec) << marker << ": " << ec.message();
        for (const auto deadline = Clock::now() + 10s;
             fs::last_write_time(marker, ec) == made && Clock::now() < deadline;) {
            std::this_thread::sleep_for(20ms);
        }
        ASSERT_NE(fs::last_write_time(marker, ec), made) << "the run marker was never touched";
        killed_pid = first.pid();
        killed_at = realtime_ns();
        killer = signal_sender("gg-killer", killed_pid, {SIGKILL});
        reap_killer.emplace(killer);
        // Dead by the killer's signal (a zombie until stop() reaps it), not
        // the test's: stop() below would otherwise be the last SIGKILL the
        // kernel saw (a loaded host can take seconds to run the killer).
        bool dead = false;
        const auto deadline = Clock::now() + 20s;
        while (!dead && Clock::now() < deadline) {
            const std::string stat = file_bytes("/proc/" + std::to_string(killed_pid) + "/stat");
            const auto paren = stat.rfind(')');
            dead = paren != std::string::npos && stat.compare(paren, 3, ") Z") == 0;
            if (!dead) std::this_thread::sleep_for(25ms);
        }
        ASSERT_TRUE(dead) << "the killer's SIGKILL did not end the agent";
        EXPECT_EQ(first.stop(SIGKILL, 10s), 128 + SIGKILL) << first.stderr_text();
    }
    {
        Subprocess second(run);
        ASSERT_TRUE(second.wait_for_agent_ready(30s)) << second.stderr_text();
        // The kernel saw the SIGKILL: the down record names the killer.
        auto down = wait_for_detection(second, killer, "GG-CORR-0020", 10s);
        ASSERT_TRUE(down) << second.stderr_text();
        const std::string evidence = (*down)["gpuguard"]["detection"]["evidence"][0]["detail"];
        EXPECT_NE(evidence.find("agent (pid " + std::to_string(killed_pid) + ") was down from "),
                  std::string::npos)
            << evidence;
        EXPECT_NE(evidence.find(": killed by SIGKILL from pid " + std::to_string(killer) +
                                " (gg-killer), uid 0"),
                  std::string::npos)
            << evidence;
        expect_whole_output(second, {{"GG-CORR-0020", killer, "warning"}}, {killer});
    }

    // The journal keeps the gap: T1 within the last seconds before the kill,
    // T2 after it.
    auto exported =
        run_command({GPUGUARD_BINARY, "journal", "export", "--dir", (dir_ / "journal").string(),
                     "--format", "jsonl", "--type", "agent_tamper"},
                    30s);
    ASSERT_EQ(exported.exit_code, 0) << exported.stderr_text;
    std::optional<nlohmann::json> gap;
    std::istringstream lines(exported.stdout_text);
    for (std::string line; std::getline(lines, line);) {
        auto event = nlohmann::json::parse(line, nullptr, false);
        if (!event.is_discarded() && event["agent_tamper"]["kind"] == "down") gap = event;
    }
    ASSERT_TRUE(gap) << exported.stdout_text;
    const int64_t from = (*gap)["agent_tamper"]["down_from_unix_ns"];
    const int64_t to = (*gap)["agent_tamper"]["down_to_unix_ns"];
    EXPECT_LE(from, killed_at);
    EXPECT_GT(from, killed_at - 3'000'000'000);  // touched every second
    EXPECT_GE(to, killed_at);
    EXPECT_LT(to, realtime_ns());

    // A clean stop (above) left no marker: the next start reports no gap.
    // It decides before it says it is ready; its whole output is read.
    seen_.clear();
    Subprocess third(run);
    ASSERT_TRUE(third.wait_for_agent_ready(30s)) << third.stderr_text();
    expect_whole_output(third, {}, {killer});
    for (const auto& line : seen_) {
        EXPECT_EQ(line.find("GG-CORR-0020"), std::string::npos) << line;
    }
}

// A start never fails open (issue 39): a drop-in that asked for kills is
// broken by one line between two starts. The second start is not refused:
// it runs on the copy of the files the first one loaded, says so in a
// critical GG-AGENT-0002 naming file:line:col, and a miner that connects to
// a pool port is still killed by the rule the broken file held.
TEST_F(AgentDetectTest, a_broken_rule_file_at_start_runs_on_the_last_good_set_and_says_so) {
    gpuguard::testing::LoopbackPool pool;
    ASSERT_GE(pool.fd, 0) << "no free miner port on loopback";
    const auto alerts = dir_ / "alerts.jsonl";
    kill_on_pool_port(alerts);
    {
        Subprocess first({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
        ASSERT_TRUE(first.wait_for_agent_ready(30s)) << first.stderr_text();
        EXPECT_EQ(first.stop(SIGTERM, 10s), 0) << first.stderr_text();
    }
    std::ofstream(rules_dir_ / "10-kill.yaml")
        << "signatures:\n  override:\n    - id: [GG-PORT-0001\n      action: kill\n";
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    const std::string text = agent_critical(agent, "GG-AGENT-0002");
    ASSERT_FALSE(text.empty());
    EXPECT_NE(text.find((rules_dir_ / "10-kill.yaml").string() + ":"), std::string::npos) << text;
    EXPECT_NE(text.find("running on the last good rule set (1 file(s) kept in"), std::string::npos)
        << text;

    const std::string script =
        "exec 5<>/dev/tcp/127.0.0.1/" + std::to_string(pool.port) + "; read -t 30 <&5";
    const pid_t child = start_child("gg-miner", {"/bin/bash", "-c", script, "worker"});
    ASSERT_GT(child, 0);
    ChildReaper reaper(child);
    EXPECT_FALSE(enforced_reason(agent, child, "GG-CORR-0002", "kill", alerts).empty());
    expect_whole_output(agent, {{"GG-CORR-0002", child, "error"}}, {child});
}

// A failed start reaches the alert feed (issue 39): a start that fails (its
// metrics port held by another process; a broken rule or correlation file
// no longer stops a start) records why in journal.dir; the
// next start that succeeds reports the gap from that first failure with the
// reason (GG-CORR-0020) and clears the record.
TEST_F(AgentDetectTest, a_failed_start_is_reported_by_the_next_start_with_the_gap) {
    // A loopback port someone else listens on (the test, until it lets go).
    std::optional<gpuguard::testing::LoopbackPool> holder(std::in_place);
    ASSERT_GE(holder->fd, 0) << "no free port on loopback";
    const std::string port = std::to_string(holder->port);
    std::ofstream(config_, std::ios::app)
        << "metrics:\n  enabled: true\n  listen: 127.0.0.1\n  port: " << port << "\n";
    const auto record = dir_ / "journal" / "agent.failed-start";
    for (int attempt = 0; attempt < 2; ++attempt) {
        Subprocess failing({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
        EXPECT_EQ(failing.stop(0, 30s), 1) << failing.stderr_text();
    }
    ASSERT_TRUE(std::filesystem::exists(record));
    holder.reset();
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    const auto down = wait_for_detection(agent, agent.pid(), "GG-CORR-0020", 5s);
    ASSERT_TRUE(down) << agent.stderr_text();
    const std::string text = down->dump();
    EXPECT_NE(text.find("2 start(s) failed (the first at "), std::string::npos) << text;
    EXPECT_NE(text.find("cannot start the sensor: metrics: cannot listen on 127.0.0.1:" + port),
              std::string::npos)
        << text;
    EXPECT_FALSE(std::filesystem::exists(record)) << "reported once";
    const pid_t agent_pid = agent.pid();
    expect_whole_output(agent, {{"GG-CORR-0020", agent_pid, "warning"}}, {agent_pid});
}

// The configuration half (issue 39): with a state directory (systemd's
// $STATE_DIRECTORY, here $GPUGUARD_STATE_DIR), every start that loads its
// gpuguard.yaml keeps a copy; a start on a broken one runs on that copy and
// raises the critical GG-AGENT-0003 naming the problem, and the miner is
// still killed. Without a state directory the broken file stops the start.
TEST_F(AgentDetectTest, a_broken_configuration_at_start_runs_on_the_last_good_one_and_says_so) {
    gpuguard::testing::LoopbackPool pool;
    ASSERT_GE(pool.fd, 0) << "no free miner port on loopback";
    const auto alerts = dir_ / "alerts.jsonl";
    kill_on_pool_port(alerts);
    const std::vector<std::string> with_state = {
        "/usr/bin/env",  "GPUGUARD_STATE_DIR=" + (dir_ / "state").string(),
        GPUGUARD_BINARY, "run",
        "--config",      config_.string(),
        "--json"};
    {
        Subprocess first(with_state);
        ASSERT_TRUE(first.wait_for_agent_ready(30s)) << first.stderr_text();
        EXPECT_EQ(first.stop(SIGTERM, 10s), 0) << first.stderr_text();
    }
    std::ofstream(config_, std::ios::app) << "bogus_section: 1\n";
    {
        Subprocess refused({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
        EXPECT_EQ(refused.stop(0, 30s), 2) << "no state directory: nothing to fall back on";
    }
    Subprocess agent(with_state);
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    const std::string text = agent_critical(agent, "GG-AGENT-0003");
    ASSERT_FALSE(text.empty());
    EXPECT_NE(text.find(config_.string() + ":"), std::string::npos) << text;
    EXPECT_NE(text.find("bogus_section"), std::string::npos) << text;
    EXPECT_NE(text.find("running on the last good configuration"), std::string::npos) << text;

    const std::string script =
        "exec 5<>/dev/tcp/127.0.0.1/" + std::to_string(pool.port) + "; read -t 30 <&5";
    const pid_t child = start_child("gg-miner", {"/bin/bash", "-c", script, "worker"});
    ASSERT_GT(child, 0);
    ChildReaper reaper(child);
    EXPECT_FALSE(enforced_reason(agent, child, "GG-CORR-0002", "kill", alerts).empty());
    expect_whole_output(agent, {{"GG-CORR-0002", child, "error"}}, {child});
}

}  // namespace
