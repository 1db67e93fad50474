// The live path end to end: `gpuguard run --json` sees a child open a
// registered fake GPU node, exec with a miner's command line and connect to a
// loopback "pool", and prints the detections (ECS JSON) within 100 ms; a
// rule file change is applied live, and a broken one is rejected with an
// alert while the last good rules keep working. Also YARA at first GPU use,
// GG-CORR-0009 on a pegged GPU, correlation file reloads and hostile strings
// in every output. Fixture: agent_detect_fixture.h.
#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <unistd.h>

#include "gpuguard/signatures/signatures.h"
#include "tests/bpf/agent_detect_fixture.h"
#include "tests/support/child_process.h"
#include "tests/support/fake_nvml_script.h"
#include "tests/support/json_at.h"
#include "tests/support/run_command.h"
#include "tests/support/time_bound.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::testing::AgentDetectTest;
using gpuguard::testing::ChildReaper;
using gpuguard::testing::Clock;
using gpuguard::testing::copy_sleep;
using gpuguard::testing::file_bytes;
using gpuguard::testing::json_at;
using gpuguard::testing::LoopbackPool;
using gpuguard::testing::OwnChild;
using gpuguard::testing::Subprocess;
using gpuguard::testing::time_bound;

TEST_F(AgentDetectTest, miner_on_gpu_connecting_to_pool_is_detected_within_100ms) {
    LoopbackPool pool;
    ASSERT_GE(pool.fd, 0) << "no free miner port on loopback";
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();

    const std::string url = "stratum+tcp://127.0.0.1:" + std::to_string(pool.port);
    const std::string script =
        "exec 5<>/dev/tcp/127.0.0.1/" + std::to_string(pool.port) + "; read -t 30 <&5";
    const auto started = Clock::now();
    const pid_t child = start_child(
        "gg-miner", {"/bin/bash", "-c", script, "xmrig", "--cuda", "-o", url, "-u", "wallet"});
    ASSERT_GT(child, 0);
    ChildReaper reaper(child);

    // The agent's own latency: from the kernel event that completed the
    // evidence (the detection's last_seen_ns, CLOCK_MONOTONIC like the
    // events) to the detection line arriving here. The child's own start-up
    // (fork, exec of bash, its connect) is not the agent's and is left out.
    auto latency_of = [](const nlohmann::json& detection) {
        timespec now{};
        clock_gettime(CLOCK_MONOTONIC, &now);
        const int64_t received = now.tv_sec * 1'000'000'000ll + now.tv_nsec;
        const auto evidence_ns = detection["gpuguard"]["detection"]["last_seen_ns"].get<int64_t>();
        return std::chrono::nanoseconds(received - evidence_ns);
    };
    auto known_miner = wait_for_detection(agent, child, "GG-CORR-0001", 5s);
    ASSERT_TRUE(known_miner) << agent.stderr_text();
    const auto known_latency = latency_of(*known_miner);
    auto pool_connect = wait_for_detection(agent, child, "GG-CORR-0002", 5s);
    ASSERT_TRUE(pool_connect) << agent.stderr_text();
    const auto pool_latency = latency_of(*pool_connect);
    std::cerr << "child started to both detections: "
              << std::chrono::duration<double, std::milli>(Clock::now() - started).count()
              << " ms; agent latency: known miner "
              << std::chrono::duration<double, std::milli>(known_latency).count() << " ms, pool "
              << std::chrono::duration<double, std::milli>(pool_latency).count() << " ms\n";
    EXPECT_GE(known_latency, 0ms);
    EXPECT_LT(known_latency, time_bound(100ms));
    EXPECT_GE(pool_latency, 0ms);
    EXPECT_LT(pool_latency, time_bound(100ms));

    const auto& detection = *known_miner;
    EXPECT_EQ(detection["event"]["kind"], "alert");
    EXPECT_EQ(detection["rule"]["name"], "Known miner running on a GPU");
    EXPECT_EQ(detection["threat"]["technique"]["id"][0], "T1496");
    // The file it ran, where it is: /usr/bin/bash on a merged-/usr system.
    EXPECT_EQ(detection["process"]["executable"], std::filesystem::canonical("/bin/bash").string());
    EXPECT_NE(detection["process"]["command_line"].get<std::string>().find(url), std::string::npos);
    EXPECT_EQ((*pool_connect)["destination"]["ip"], "127.0.0.1");
    EXPECT_EQ((*pool_connect)["destination"]["port"], pool.port);
    expect_whole_output(
        agent, {{"GG-CORR-0001", child, "critical"}, {"GG-CORR-0002", child, "error"}}, {child});
}

// Configuration management writes rules right after starting the service:
// a drop-in written the moment the agent says "ready" is applied (the
// watches are in place before it), not lost until a later change.
TEST_F(AgentDetectTest, a_drop_in_written_right_at_ready_is_applied) {
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    std::ofstream(rules_dir_ / "60-local.yaml") << R"(rules:
  - id: local-ready-miner
    name: A name of this test's own
    severity: critical
    confidence: 0.9
    action: alert
    process_name: ["gg-ready-*"]
)";
    ASSERT_TRUE(agent.wait_for_stderr("from the built-in pack and 1 file(s)", 5s))
        << agent.stderr_text();
    const pid_t named = start_child("gg-ready-1", {});
    ChildReaper reap(named);
    auto detection = wait_for_detection(agent, named, "GG-CORR-0001", 5s);
    ASSERT_TRUE(detection) << agent.stderr_text();
    EXPECT_EQ((*detection)["gpuguard"]["detection"]["signature_ids"][0], "local-ready-miner");
    // Named at its exec, before it opens the GPU: a known miner without one
    // (GG-CORR-0012), then on the GPU (GG-CORR-0001).
    expect_whole_output(
        agent, {{"GG-CORR-0012", named, "error"}, {"GG-CORR-0001", named, "critical"}}, {named});
}

TEST_F(AgentDetectTest, rule_changes_apply_live_and_broken_ones_are_rejected_with_an_alert) {
    use_control_socket();
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();

    // Not a known miner yet: judged (the agent's table has it on the GPU)
    // before any rule names it.
    const pid_t before = start_child("gg-sched-7", {});
    ChildReaper reap_before(before);
    ASSERT_TRUE(wait_until_known_on_gpu(before, 10s)) << agent.stderr_text();

    // A broken drop-in is rejected and raised as an alert about the agent.
    std::ofstream(rules_dir_ / "50-broken.yaml") << "rules:\n  - id: x\n    severity: loud\n";
    auto rejected = wait_for_detection(agent, agent.pid(), "GG-AGENT-0001", 5s);
    ASSERT_TRUE(rejected) << agent.stderr_text();
    EXPECT_NE(rejected->dump().find("50-broken.yaml:"), std::string::npos) << rejected->dump();
    std::filesystem::remove(rules_dir_ / "50-broken.yaml");

    // A valid rule naming the scheduler's disguise takes effect.
    std::ofstream(rules_dir_ / "60-local.yaml") << R"(rules:
  - id: local-renamed-miner
    name: Miner renamed to our scheduler's name
    severity: critical
    confidence: 0.9
    action: alert
    process_name: ["gg-sched-*"]
    tests:
      match: ["gg-sched-7"]
      no_match: ["gg-scheduler"]
)";
    // In force once the agent says so (the broken file's removal reloads
    // too, with no file: only the reload that read 60-local.yaml counts).
    ASSERT_TRUE(agent.wait_for_stderr("from the built-in pack and 1 file(s)", 5s))
        << agent.stderr_text();
    const pid_t after = start_child("gg-sched-7", {});
    ChildReaper reap_after(after);
    auto detection = wait_for_detection(agent, after, "GG-CORR-0001", 5s);
    ASSERT_TRUE(detection) << agent.stderr_text();
    EXPECT_EQ((*detection)["gpuguard"]["detection"]["signature_ids"][0], "local-renamed-miner");
    // Named at its exec, before it opens the GPU (GG-CORR-0012), then on it.
    expect_whole_output(agent,
                        {{"GG-CORR-0012", after, "error"}, {"GG-CORR-0001", after, "critical"}},
                        {before, after});
}

// YARA on first GPU use: a binary no name, path or command-line signature
// knows (a copy of sleep carrying XMRig's strings) opens the GPU; the
// agent's scan of /proc/PID/exe finds it and GG-CORR-0004 fires with the
// YARA evidence, and `gpuguard status` counts the scan.
TEST_F(AgentDetectTest, yara_scan_at_first_gpu_use_finds_a_renamed_miner_binary) {
    const auto binary = dir_ / "svc-agent";
    static constexpr char kXmrigStrings[] = "\0donate.v2.xmrig.com\0--donate-level\0XMRig/6.21\0";
    copy_sleep(binary, std::string(kXmrigStrings, sizeof(kXmrigStrings) - 1));
    use_control_socket();
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();

    OwnChild child(start_child("svc-agent", {binary.string(), "30"}));
    ASSERT_GT(child.pid, 0);
    auto detection = wait_for_detection(agent, child.pid, "GG-CORR-0004", time_bound(10s));
    ASSERT_TRUE(detection) << agent.stderr_text();
    bool yara_evidence = false;
    for (const auto& item : (*detection)["gpuguard"]["detection"]["evidence"]) {
        if (item["kind"] != "yara") continue;
        yara_evidence = true;
        EXPECT_EQ(item["signature_id"], "GG-XMRIG-0011") << item.dump();
        EXPECT_NE(item["detail"].get<std::string>().find(
                      gpuguard::signatures::sha256_hex(file_bytes(binary))),
                  std::string::npos)
            << item.dump();
    }
    EXPECT_TRUE(yara_evidence) << detection->dump();

    const auto report = gpuguard::testing::run_command(
        {GPUGUARD_BINARY, "status", "--json", "--socket", (dir_ / "control.sock").string()}, 10s);
    ASSERT_EQ(report.exit_code, 0) << report.stderr_text;
    const auto yara = nlohmann::json::parse(report.stdout_text)["yara"];
    EXPECT_GE(yara["matched"].get<int>(), 1) << yara.dump();
    // Run from the test's directory under /tmp with a miner signature:
    // GG-CORR-0005 at error as well (a notice first when the GPU open is
    // judged before the scan ends).
    expect_whole_output(agent,
                        {{"GG-CORR-0004", child.pid, "critical"},
                         {"GG-CORR-0005", child.pid, "error"},
                         {"GG-CORR-0005", child.pid, "notice", /*optional=*/true}},
                        {child.pid});
}

// GG-CORR-0009's conditions, live: the fake GPU reports two children of
// this test at 95 % SM; both send a 100-byte message to a loopback "pool"
// every 200 ms, and one also writes 64 KiB to a file each time. With the
// windows cut to 2 s, only the quiet one is reported, its evidence naming
// its sends: the kernel's send counts, /proc/PID/io and the telemetry meet
// in the correlator as they do in the built-in rule.
TEST_F(AgentDetectTest, pegged_gpu_by_a_quiet_process_is_detected_and_a_writing_one_is_not) {
    // A local service on no miner's port (the rule is about the I/O alone);
    // the workers are programs of their own, no forks of this test binary.
    gpuguard::testing::LoopbackService pool;
    ASSERT_GE(pool.fd, 0);
    const gpuguard::testing::DiskScratchFile file("gg-writer");
    const auto worker = [&](const std::string& comm) {
        return gpuguard::testing::start_io_worker({.comm = comm,
                                                   .gpu_node = node_.string(),
                                                   .file = file.path(),
                                                   .tcp_port = pool.port,
                                                   .program = GPUGUARD_IO_WORKER});
    };
    const auto quiet = worker("gg-quiet");
    const auto writer = worker("gg-writer");
    ASSERT_EQ(quiet->ask('g'), 0);
    ASSERT_EQ(writer->ask('g'), 0);
    const auto script = dir_ / "nvml.json";
    std::ofstream(script) << gpuguard::testing::fake_nvml_script(
        {.gpu_utilization = 97,
         .memory_utilization = 40,
         .memory_used = 4ull << 30,
         .processes = {{quiet->pid(), 2ull << 30, 95}, {writer->pid(), 2ull << 30, 95}}});
    const auto rules = dir_ / "quiet.yaml";
    std::ofstream(rules) << R"(rules:
  - id: SITE-QUIET
    name: GPU pegged by a quiet process (2 s windows)
    severity: warning
    action: alert
    window: 1h
    when:
      gpu_held: true
      sustained_utilization: {above_percent: 90, for: 2s, max_connects: 2, min_connects: 0}
      quiet_io: {for: 2s, max_file_write_bytes: 0, max_net_send_bytes: 64KB,
                 max_bytes_per_send: 1KB, max_send_gap: 1s}
)";
    std::ofstream(config_, std::ios::app)
        << "  correlation_files: [" << rules.string() << "]\n"
        << "backends:\n  interval_ms: 200\n  nvml_library: \"" << GPUGUARD_FAKE_NVML_PATH << "\"\n";
    Subprocess agent({"/usr/bin/env", "GPUGUARD_FAKE_NVML_SCRIPT=" + script.string(),
                      GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    ASSERT_EQ(quiet->ask('c'), 0);
    ASSERT_EQ(writer->ask('c'), 0);

    const auto work = [&] {
        ASSERT_EQ(quiet->ask('s'), 0);
        ASSERT_EQ(writer->ask('s'), 0);
        ASSERT_EQ(writer->ask('f'), 0);
    };
    std::optional<nlohmann::json> detection;
    for (const auto deadline = Clock::now() + time_bound(10s);
         !detection && Clock::now() < deadline;) {
        work();
        detection = wait_for_detection(agent, quiet->pid(), "SITE-QUIET", 200ms);
    }
    ASSERT_TRUE(detection) << agent.stderr_text();
    const std::string text = detection->dump();
    EXPECT_NE(text.find("0 bytes written to files"), std::string::npos) << text;
    EXPECT_NE(text.find("network sends of"), std::string::npos) << text;
    EXPECT_NE(text.find("compute above 90%"), std::string::npos) << text;
    // The writer, pegged and sending the same in the same rounds, was judged
    // on the samples that reported the quiet one: it never is.
    expect_whole_output(agent, {{"SITE-QUIET", quiet->pid(), "warning"}},
                        {quiet->pid(), writer->pid()});
}

// rules.correlation_files are hot reloaded: a broken change raises
// GG-AGENT-0001 naming the file and the last good policy stays in force; a
// valid one replaces it for processes seen afterwards.
TEST_F(AgentDetectTest, correlation_file_changes_apply_live_and_broken_ones_raise_an_alert) {
    const auto policy = dir_ / "guard.yaml";
    const auto write_policy = [&](const std::string& text) {
        const auto temporary = dir_ / ".guard.yaml.tmp";
        std::ofstream(temporary) << text;
        std::filesystem::rename(temporary, policy);
    };
    const auto rule = [](const std::string& id) {
        return "rules:\n  - id: " + id +
               "\n    name: Root on a GPU\n    severity: notice\n    window: 1h\n"
               "    when:\n      gpu_held: true\n      scope: {users: [\"0\", root]}\n";
    };
    write_policy(rule("SITE-RELOAD-A"));
    std::ofstream(config_, std::ios::app) << "  correlation_files: [" << policy.string() << "]\n";
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    OwnChild first(start_child("gg-reload-1", {}));
    ASSERT_TRUE(wait_for_detection(agent, first.pid, "SITE-RELOAD-A", 5s)) << agent.stderr_text();

    write_policy(rule("SITE-RELOAD-BROKEN") + "    colour: red\n");
    auto rejected = wait_for_detection(agent, agent.pid(), "GG-AGENT-0001", 5s);
    ASSERT_TRUE(rejected) << agent.stderr_text();
    EXPECT_NE(rejected->dump().find(policy.string() + ":"), std::string::npos) << rejected->dump();
    EXPECT_NE(rejected->dump().find("unknown key 'colour'"), std::string::npos) << rejected->dump();
    OwnChild second(start_child("gg-reload-2", {}));
    EXPECT_TRUE(wait_for_detection(agent, second.pid, "SITE-RELOAD-A", 5s))
        << "the last good policy must stay in force\n"
        << agent.stderr_text();

    write_policy(rule("SITE-RELOAD-B"));
    ASSERT_TRUE(agent.wait_for_stderr("guard policies reloaded", 5s)) << agent.stderr_text();
    OwnChild third(start_child("gg-reload-3", {}));
    EXPECT_TRUE(wait_for_detection(agent, third.pid, "SITE-RELOAD-B", 5s)) << agent.stderr_text();
    // The replaced rule never fires for the third; the broken one never.
    // The new policy holds for the GPU holders it finds in scope at its next
    // evaluation too: the first two may have its notice as well.
    expect_whole_output(agent,
                        {{"SITE-RELOAD-A", first.pid, "notice"},
                         {"SITE-RELOAD-A", second.pid, "notice"},
                         {"SITE-RELOAD-B", third.pid, "notice"},
                         {"SITE-RELOAD-B", first.pid, "notice", /*optional=*/true},
                         {"SITE-RELOAD-B", second.pid, "notice", /*optional=*/true}},
                        {first.pid, second.pid, third.pid});
}

// Bytes a human reads must not carry terminal controls: no ESC, BEL, CR,
// other C0 controls or DEL, and a newline only where a line ends.
std::string control_bytes_in(const std::string& text) {
    std::string found;
    for (unsigned char c : text) {
        if ((c < 0x20 && c != '\n') || c == 0x7f) found += "\\x" + std::to_string(c) + " ";
    }
    return found;
}

// A process that chooses every string the agent reports (its name, argv,
// the path it runs) fills them with terminal escapes, forged log lines,
// shell syntax, CEF/LEEF/HTML delimiters and bytes that are not UTF-8.
// Every output stays what it claims to be: one record per line, valid JSON
// where JSON, no control byte in what people read (`gpuguard ps`, `journal
// show`, the log), the exact bytes kept where a format can carry them, and
// no shell ever runs what it says (the markers are never created).
TEST_F(AgentDetectTest, hostile_strings_are_escaped_in_every_output_and_never_reach_a_shell) {
    LoopbackPool pool;
    ASSERT_GE(pool.fd, 0) << "no free miner port on loopback";
    const auto journal_dir = dir_ / "journal";  // SetUp's
    use_control_socket();
    std::ofstream(config_, std::ios::app) << "outputs:\n";
    for (const char* format : {"ecs_json", "cef", "leef", "ocsf"}) {
        std::ofstream(config_, std::ios::app)
            << "  - name: " << format << "\n    type: file\n    format: " << format
            << "\n    address: " << (dir_ / (std::string(format) + ".out")).string() << "\n";
    }
    std::ofstream(config_, std::ios::app)
        << "  - name: syslog\n    type: file\n    format: cef\n    framing: rfc5424\n"
        << "    address: " << (dir_ / "syslog.out").string() << "\n";
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();

    const std::string marker = (dir_ / "shell-ran").string();
    const std::string forged = "2026-11-24T00:00:00.000 critical [agent] forged line";
    // comm: set by the process itself (15 bytes kept by the kernel; one
    // write, so no newline: printf would split the write there).
    const std::string comm = "g\x1b[31m\t$(id)|=<";
    const std::string script = "printf '%s' \"$HOSTILE_COMM\" > /proc/$$/comm; exec 6<>" +
                               node_.string() + "; exec 5<>/dev/tcp/127.0.0.1/" +
                               std::to_string(pool.port) + "; read -t 30 <&5";
    const std::string url = "stratum+tcp://127.0.0.1:" + std::to_string(pool.port);
    std::vector<std::string> argv = {"/bin/bash",
                                     "-c",
                                     script,
                                     "xmrig",
                                     "--cuda",
                                     "-o",
                                     url,
                                     "$(touch " + marker + ")",
                                     "`touch " + marker + "`; touch " + marker,
                                     "\x1b]0;pwned\x07\x1b[2J\x1b[H",
                                     "x\n" + forged,
                                     "\xff\xfe not utf-8 \xc3",
                                     "\xe2\x80\xae"
                                     "fdp.exe",
                                     "cef|pipe=eq\\back\tleef",
                                     "<script>alert(1)</script>\"quoted\""};
    std::vector<char*> args;
    for (auto& arg : argv) args.push_back(arg.data());
    args.push_back(nullptr);
    const pid_t child = fork();
    if (child == 0) {
        setenv("HOSTILE_COMM", comm.c_str(), 1);
        execv(args[0], args.data());
        _exit(127);
    }
    ASSERT_GT(child, 0);
    ChildReaper reaper(child);
    auto detection = wait_for_detection(agent, child, "GG-CORR-0001", 10s);
    ASSERT_TRUE(detection) << agent.stderr_text();
    auto connect = wait_for_detection(agent, child, "GG-CORR-0002", 10s);
    ASSERT_TRUE(connect) << agent.stderr_text();

    // JSON keeps the exact bytes (comm, argv); what is not UTF-8 becomes
    // U+FFFD. (The first detection may come at exec, before the new name.)
    const std::string kept_comm = comm.substr(0, 15);
    EXPECT_EQ((*connect)["process"]["name"], kept_comm) << connect->dump();
    const auto& args_out = (*detection)["process"]["args"];
    ASSERT_TRUE(args_out.is_array()) << detection->dump();
    EXPECT_NE(std::find(args_out.begin(), args_out.end(), "x\n" + forged), args_out.end())
        << detection->dump();
    EXPECT_NE(std::find(args_out.begin(), args_out.end(), "$(touch " + marker + ")"),
              args_out.end());

    // Every file output: one record per line, each whole.
    for (const char* format : {"ecs_json", "cef", "leef", "ocsf", "syslog"}) {
        // The file sinks write on their own thread: wait for both detections.
        std::string text;
        for (const auto deadline = Clock::now() + 5s;
             std::count(text.begin(), text.end(), '\n') < 2 && Clock::now() < deadline;) {
            std::this_thread::sleep_for(20ms);
            text = file_bytes(dir_ / (std::string(format) + ".out"));
            text.erase(text.find_last_of('\n') + 1);  // a record still being written
        }
        ASSERT_FALSE(text.empty()) << format;
        std::string controls = control_bytes_in(text);
        if (std::string_view(format) == "leef") {  // tab is LEEF's attribute delimiter
            std::erase(controls, ' ');
            controls = std::regex_replace(controls, std::regex("\\\\x9"), "");
        }
        EXPECT_EQ(controls, "") << format << ": " << text;
        std::istringstream lines(text);
        int records = 0;
        for (std::string line; std::getline(lines, line); ++records) {
            const std::string_view kind(format);
            if (kind == "ecs_json" || kind == "ocsf") {
                EXPECT_FALSE(nlohmann::json::parse(line, nullptr, false).is_discarded())
                    << format << ": " << line;
            } else if (kind == "cef") {
                EXPECT_EQ(line.rfind("CEF:0|", 0), 0u) << line;
            } else if (kind == "leef") {
                EXPECT_EQ(line.rfind("LEEF:2.0|", 0), 0u) << line;
            } else {
                EXPECT_EQ(line.rfind("<", 0), 0u) << line;
                EXPECT_NE(line.find("CEF:0|"), std::string::npos) << line;
            }
            EXPECT_NE(line.rfind(forged, 0), 0u) << format << ": a forged line";
        }
        EXPECT_GE(records, 2) << format;
    }

    // What people read.
    const auto socket = (dir_ / "control.sock").string();
    const auto table = gpuguard::testing::run_command({GPUGUARD_BINARY, "ps", "--socket", socket});
    ASSERT_EQ(table.exit_code, 0) << table.stderr_text;
    EXPECT_EQ(control_bytes_in(table.stdout_text), "") << table.stdout_text;
    EXPECT_NE(table.stdout_text.find("g\\x1b[31m\\t$(id)"), std::string::npos) << table.stdout_text;
    EXPECT_EQ(table.stdout_text.find("\n" + forged), std::string::npos) << table.stdout_text;
    const auto listed =
        gpuguard::testing::run_command({GPUGUARD_BINARY, "ps", "--json", "--socket", socket});
    ASSERT_EQ(listed.exit_code, 0) << listed.stderr_text;
    const auto processes = nlohmann::json::parse(listed.stdout_text, nullptr, false);
    ASSERT_FALSE(processes.is_discarded()) << listed.stdout_text;
    bool found = false;
    for (const auto& process : processes) {
        if (process["pid"] != child) continue;
        found = true;
        EXPECT_EQ(process["comm"], kept_comm);
    }
    EXPECT_TRUE(found) << listed.stdout_text;

    // Its argv names a miner at its exec, before the shell opens the GPU
    // (GG-CORR-0012), then on the GPU and at its connect.
    expect_whole_output(agent,
                        {{"GG-CORR-0012", child, "error"},
                         {"GG-CORR-0001", child, "critical"},
                         {"GG-CORR-0002", child, "error"}},
                        {child});
    EXPECT_EQ(control_bytes_in(agent.stderr_text()), "") << agent.stderr_text();
    EXPECT_EQ(agent.stderr_text().find("\n" + forged), std::string::npos) << agent.stderr_text();
    const auto shown =
        gpuguard::testing::run_command({GPUGUARD_BINARY, "journal", "show", "--dir",
                                        journal_dir.string(), "--pid", std::to_string(child)});
    ASSERT_EQ(shown.exit_code, 0) << shown.stderr_text;
    EXPECT_NE(shown.stdout_text.find("g\\x1b[31m"), std::string::npos) << shown.stdout_text;
    EXPECT_NE(shown.stdout_text.find("\\x1b]0;pwned\\x07"), std::string::npos) << shown.stdout_text;
    EXPECT_NE(shown.stdout_text.find("\\u202efdp.exe"), std::string::npos) << shown.stdout_text;
    EXPECT_NE(shown.stdout_text.find("\\xff\\xfe not utf-8"), std::string::npos)
        << shown.stdout_text;
    EXPECT_EQ(control_bytes_in(shown.stdout_text), "") << shown.stdout_text;

    EXPECT_FALSE(std::filesystem::exists(marker)) << "a shell ran what the process wrote";
}

}  // namespace
