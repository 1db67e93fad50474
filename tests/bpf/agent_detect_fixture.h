// The fixture the live-agent tests share (agent_detect_test.cpp,
// agent_journal_test.cpp, agent_enforce_test.cpp, agent_guard_test.cpp,
// agent_identity_test.cpp, ...): a scratch configuration with a registered
// fake GPU node, and waiting for the agent's detections and outputs; with
// the loopback pool, program directory and child helpers they all use.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/support/agent_config.h"
#include "tests/support/child_process.h"
#include "tests/support/detection_ledger.h"
#include "tests/support/privileged.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::testing {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A listening loopback socket on a port miners use (the pack's GG-PORT-0001).
struct LoopbackPool {
    int fd = -1;
    uint16_t port = 0;
    explicit LoopbackPool(uint32_t address = INADDR_LOOPBACK) {
        for (uint16_t candidate : {3333, 3334, 3335, 3336, 4444, 5555, 7777, 9999}) {
            fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            sockaddr_in addr{};
            addr.sin_family = AF_INET;
            addr.sin_port = htons(candidate);
            addr.sin_addr.s_addr = htonl(address);
            const int one = 1;
            setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
            if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                listen(fd, 4) == 0) {
                port = candidate;
                return;
            }
            close(fd);
            fd = -1;
        }
    }
    ~LoopbackPool() {
        if (fd >= 0) close(fd);
    }
};

// A listening loopback socket on a port the kernel picks (an ephemeral
// one, which no miner signature names): a local service.
struct LoopbackService {
    int fd = -1;
    uint16_t port = 0;
    LoopbackService() {
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t size = sizeof(addr);
        if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 4) != 0 ||
            getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &size) != 0) {
            close(fd);
            fd = -1;
            return;
        }
        port = ntohs(addr.sin_port);
    }
    ~LoopbackService() {
        if (fd >= 0) close(fd);
    }
    LoopbackService(const LoopbackService&) = delete;
    LoopbackService& operator=(const LoopbackService&) = delete;
};

// A child the test started, waited for with a deadline; killed and reaped at
// scope end only if it is still ours (never a pid we already reaped).
struct OwnChild {
    pid_t pid = -1;
    bool reaped = false;
    int status = 0;
    explicit OwnChild(pid_t started) : pid(started) {}
    ~OwnChild() {
        if (pid <= 0 || reaped) return;
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
    }
    // True when it ended within `timeout` (status then holds its wait status).
    bool wait_exit(std::chrono::milliseconds timeout) {
        const auto deadline = Clock::now() + timeout;
        while (!reaped) {
            if (waitpid(pid, &status, WNOHANG) == pid) {
                reaped = true;
                break;
            }
            if (Clock::now() >= deadline) return false;
            std::this_thread::sleep_for(2ms);
        }
        return true;
    }
    bool killed_by_sigkill() const {
        return reaped && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    }
};

// A copy of /bin/sleep at `path` with `tail` appended: still runs, and its
// bytes (hash, strings) are the test's to choose.
inline void copy_sleep(const std::filesystem::path& path, const std::string& tail) {
    std::filesystem::copy_file("/bin/sleep", path);
    std::ofstream(path, std::ios::app | std::ios::binary) << tail;
    std::filesystem::permissions(path, std::filesystem::perms::owner_all |
                                           std::filesystem::perms::group_exec |
                                           std::filesystem::perms::others_exec);
}

inline std::string file_bytes(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Programs placed outside /tmp (whose executables GG-CORR-0005 reports on
// its own), and not in the build tree either (a clean clone may live under
// /tmp): a directory of the test's own under /var/lib, removed at the end.
struct ProgramTree {
    std::filesystem::path path;
    explicit ProgramTree(const std::string& name)
        : path(std::filesystem::path("/var/lib") /
               ("gpuguard-test-" + name + "-" + std::to_string(getpid()))) {
        std::filesystem::create_directories(path);
    }
    ~ProgramTree() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    ProgramTree(const ProgramTree&) = delete;
    ProgramTree& operator=(const ProgramTree&) = delete;
};

// The built-in GG-CORR-0023 with its 3-minute windows cut to 4 s (same id,
// given as `rules.correlation_files`), for the live CPU tests.
inline constexpr const char* kQuietCpuRule = R"(rules:
  - id: GG-CORR-0023
    name: Quiet CPU miner by its behaviour (the built-in rule with 4 s windows)
    severity: warning
    action: alert
    window: 1h
    when:
      gpu_held: false
      sustained_cpu: {above_cores: 0.2, by: p20, for: 4s, max_connects: 3}
      quiet_io: {for: 4s, max_file_write_bytes: 16KB, max_net_send_bytes: 64KB,
                 max_bytes_per_send: 1KB, max_send_gap: 2s, max_sends: 100}
      opaque_peer: true
    supporting:
      severity: error
      signals:
        - name: no file writes at all
          quiet_io: {for: 4s, max_file_write_bytes: 0, max_net_send_bytes: 64KB,
                     max_bytes_per_send: 1KB, max_send_gap: 2s, max_sends: 100}
)";

class AgentDetectTest : public ::testing::Test {
  protected:
    void SetUp() override {
        GG_REQUIRE_PRIVILEGED();
        node_ = dir_ / "gpu0";
        ASSERT_EQ(mknod(node_.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0);
        rules_dir_ = dir_ / "rules.d";  // made by scratch_paths_config()
        config_ = dir_ / "gpuguard.yaml";
        std::ofstream(config_) << "sensor:\n  extra_gpu_devices: [\"1:7\"]\n"
                               << "  connect_loopback: true\n"
                               << "control:\n  socket: \"\"\n"
                               // Last: tests append their own keys under rules:.
                               << gpuguard::testing::scratch_paths_config(dir_.path());
    }

    // As scratch_paths_config() writes it, so a test can swap it.
    static std::string journal_section(const std::filesystem::path& journal_dir,
                                       const std::string& more = "") {
        return "journal:\n  dir: " + journal_dir.string() + "\n" + more;
    }

    void replace_in_config(const std::string& from, const std::string& to) {
        std::string text = file_bytes(config_);
        const auto at = text.find(from);
        ASSERT_NE(at, std::string::npos) << from;
        text.replace(at, from.size(), to);
        std::ofstream(config_) << text;
    }

    // A GPU in MIG mode's two GPU instances' access nodes, as the driver
    // names them (mig-minors under an nvidia-caps major in a procfs tree of
    // the test's): GPU instance 1's is the fixture's node (1:7), instance
    // 2's the test's `gpu1` (1:5), both watched as GPU nodes. Returns the
    // lines under backends: that point the agent's backends at that tree.
    std::string use_mig_access_nodes() {
        const std::string gi2_node = (dir_ / "gpu1").string();
        EXPECT_EQ(mknod(gi2_node.c_str(), S_IFCHR | 0666, makedev(1, 5)), 0);
        replace_in_config("extra_gpu_devices: [\"1:7\"]", "extra_gpu_devices: [\"1:7\", \"1:5\"]");
        std::filesystem::create_directories(dir_ / "proc/driver/nvidia-caps");
        std::filesystem::create_directories(dir_ / "sys");
        std::ofstream(dir_ / "proc/devices") << "Character devices:\n  1 nvidia-caps\n";
        std::ofstream(dir_ / "proc/driver/nvidia-caps/mig-minors")
            << "config 1\nmonitor 2\ngpu0/gi1/access 7\ngpu0/gi2/access 5\n";
        return "  sysfs_root: " + (dir_ / "sys").string() +
               "\n  proc_root: " + (dir_ / "proc").string() + "\n";
    }

    // Gives the agent a control socket in the test's directory (SetUp has none).
    void use_control_socket() {
        replace_in_config("socket: \"\"", "socket: " + (dir_ / "control.sock").string());
    }

    // Whether the agent's `status` (use_control_socket) lists `count` GPUs
    // within `timeout`: its telemetry has sampled them.
    bool wait_for_gpus(size_t count, std::chrono::milliseconds timeout) const {
        for (const auto deadline = Clock::now() + timeout; Clock::now() < deadline;) {
            const auto status = gpuguard::testing::run_command(
                {GPUGUARD_BINARY, "status", "--json", "--socket", (dir_ / "control.sock").string()},
                std::chrono::seconds(10));
            const auto json = nlohmann::json::parse(status.stdout_text, nullptr, false);
            if (!json.is_discarded() && json.contains("gpus") && json["gpus"].size() == count) {
                return true;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
        return false;
    }

    // A quiet worker (gg_test_io_worker) named `comm` that opens the test's
    // GPU node when asked ('g'), and writes and sends nothing.
    std::unique_ptr<RequestChild> start_gpu_worker(const std::string& comm) {
        return start_io_worker({.comm = comm,
                                .gpu_node = node_.string(),
                                .file = "",
                                .tcp_port = 0,
                                .program = GPUGUARD_IO_WORKER});
    }

    // The pid of an output record's process; 0 for a record with none (a
    // GPU's own detection).
    static pid_t pid_of(const nlohmann::json& record) { return record_pid(record); }

    // The next detection line for `pid` and `rule` within `timeout`.
    std::optional<nlohmann::json> wait_for_detection(Subprocess& agent, pid_t pid,
                                                     const std::string& rule,
                                                     std::chrono::milliseconds timeout) {
        const auto deadline = Clock::now() + timeout;
        while (Clock::now() < deadline) {
            auto line = agent.read_stdout_line(20ms);
            if (!line) continue;
            seen_.push_back(*line);
            auto detection = nlohmann::json::parse(*line);
            if (detection["rule"]["id"] == rule && pid_of(detection) == pid) return detection;
        }
        return std::nullopt;
    }

    // The agent's own critical detection of `rule` (GG-AGENT-000N, for its
    // own pid) within 5 s, as text; "" after a failed expectation.
    std::string agent_critical(Subprocess& agent, const std::string& rule) {
        const auto detection = wait_for_detection(agent, agent.pid(), rule, 5s);
        EXPECT_TRUE(detection) << agent.stderr_text();
        if (!detection) return "";
        EXPECT_EQ((*detection)["log"]["level"], "critical") << detection->dump();
        return detection->dump();
    }

    // The check every live detection test ends on: stops the agent
    // (`signo`, SIGTERM unless told; 0 waits for an exit the test caused; a
    // clean exit expected), reads the rest of its output, and checks every
    // detection read (seen_, then that rest) against `expected` for the pids
    // the test started (DetectionLedger::expect_exactly).
    void expect_whole_output(Subprocess& agent, const std::vector<ExpectedDetection>& expected,
                             const std::vector<pid_t>& started, int signo = SIGTERM,
                             std::chrono::seconds stop_within = 10s) {
        EXPECT_EQ(agent.stop(signo, stop_within), 0) << agent.stderr_text();
        while (auto line = agent.read_stdout_line(0ms)) seen_.push_back(*line);
        EXPECT_TRUE(ledger().expect_exactly(expected, started));
    }

    // `expected` and, for each of `forks` (children forked from this test
    // binary, whose own test strings YARA takes for a miner's), its YARA
    // verdict allowed, not required: GG-CORR-0012 at error, and GG-CORR-0004
    // at critical for one holding a GPU. The sanitizer build's binary is
    // over the agent's YARA size limit and is never scanned.
    static std::vector<ExpectedDetection> with_test_binary_scans(
        std::vector<ExpectedDetection> expected, const std::vector<pid_t>& forks) {
        for (const pid_t pid : forks) {
            expected.push_back({"GG-CORR-0012", pid, "error", /*optional=*/true});
            expected.push_back({"GG-CORR-0004", pid, "critical", /*optional=*/true});
        }
        return expected;
    }

    // Every detection read so far (seen_).
    DetectionLedger ledger() const { return DetectionLedger(seen_); }

    // The detections read so far (seen_, the lines other waits read
    // included) of any of `pids` at warning or above: what a negative must
    // find empty once the agent has judged the events that would raise one.
    std::vector<std::string> alarms_for(std::initializer_list<pid_t> pids) const {
        std::vector<std::string> out;
        for (const auto& line : seen_) {
            const auto record = nlohmann::json::parse(line, nullptr, false);
            if (!record.is_object() || !record.contains("log")) continue;
            const pid_t pid = pid_of(record);
            const std::string level = record["log"]["level"].get<std::string>();
            const bool alarm = level == "warning" || level == "error" || level == "critical";
            for (pid_t wanted : pids) {
                if (alarm && pid == wanted) out.push_back(line);
            }
        }
        return out;
    }

    // The detections of `rule` read so far (seen_, the lines other waits
    // read included) of any of `pids`, at any level.
    std::vector<std::string> detections_for(std::initializer_list<pid_t> pids,
                                            const std::string& rule) const {
        std::vector<std::string> out;
        for (const auto& line : seen_) {
            const auto record = nlohmann::json::parse(line, nullptr, false);
            if (!record.is_object() || !record.contains("rule")) continue;
            if (record["rule"]["id"] != rule) continue;
            for (pid_t wanted : pids) {
                if (pid_of(record) == wanted) out.push_back(line);
            }
        }
        return out;
    }

    // Forks a child that names itself `comm`, opens the fake GPU node (the fd
    // survives exec) and, when argv is given, execs it. With no argv it
    // execs the idle program under the name `comm` (a link), which opens the
    // node itself: a GPU holder that is no fork of this test binary (whose
    // miner strings YARA knows), judged on what it does alone.
    pid_t start_child(const std::string& comm, std::vector<std::string> argv) {
        if (argv.empty()) return start_idle_holder(comm);
        const std::string node = node_.string();
        std::vector<char*> args;
        for (auto& arg : argv) args.push_back(arg.data());
        args.push_back(nullptr);
        const pid_t pid = fork();
        if (pid == 0) {
            prctl(PR_SET_NAME, comm.c_str());
            if (open(node.c_str(), O_RDWR) < 0) _exit(1);
            if (args.size() > 1) execv(args[0], args.data());
            pause();
            _exit(0);
        }
        return pid;
    }

    // True once the agent's table shows `pid` holding a GPU (gpuguard ps
    // over the control socket: use_control_socket() first), within
    // `timeout`: it has read the process's exec and GPU open and judged them.
    bool wait_until_known_on_gpu(pid_t pid, std::chrono::milliseconds timeout) {
        const auto known = [&] {
            const auto listed = run_command(
                {GPUGUARD_BINARY, "ps", "--json", "--socket", (dir_ / "control.sock").string()},
                60s);
            const auto processes = nlohmann::json::parse(listed.stdout_text, nullptr, false);
            if (!processes.is_array()) return false;
            for (const auto& process : processes) {
                if (process.value("pid", 0) == pid && process.contains("gpus") &&
                    !process["gpus"].empty()) {
                    return true;
                }
            }
            return false;
        };
        for (const auto deadline = Clock::now() + timeout; Clock::now() < deadline;) {
            if (known()) return true;
            std::this_thread::sleep_for(50ms);
        }
        return known();
    }

    // The idle program (or a copy of it at `executable`) exec'd as `comm`
    // holding the fake GPU node open (with `env` besides); its pid once it
    // holds it (-1 when it never did in 5 s).
    pid_t start_idle_holder(const std::string& comm, std::vector<std::string> env = {},
                            const std::filesystem::path& executable = GPUGUARD_IDLE_PROCESS) {
        const auto names = dir_ / "idle-names";
        std::filesystem::create_directories(names);
        const auto link = names / comm;
        std::error_code ec;
        std::filesystem::remove(link, ec);
        std::filesystem::create_symlink(executable, link);
        const std::string node = node_.string();
        env.push_back("GG_HOLD=" + node);
        const pid_t pid = spawn_process(link.string(), {comm}, "/", env);
        if (pid <= 0) return -1;
        const auto fds = std::filesystem::path("/proc") / std::to_string(pid) / "fd";
        for (const auto deadline = Clock::now() + 5s; Clock::now() < deadline;) {
            for (const auto& fd : std::filesystem::directory_iterator(fds, ec)) {
                if (std::filesystem::read_symlink(fd.path(), ec) == node_) return pid;
            }
            std::this_thread::sleep_for(1ms);
        }
        return -1;
    }

    // Kills on a connect to a miner port (GG-PORT-0001's action, so
    // GG-CORR-0002 too) with a 500 ms grace period; outcomes and detections
    // go to the file output at `alerts` as well.
    void kill_on_pool_port(const std::filesystem::path& alerts) {
        std::ofstream(rules_dir_ / "10-kill.yaml")
            << "signatures:\n  override:\n    - id: GG-PORT-0001\n      action: kill\n";
        std::ofstream(config_, std::ios::app) << "enforcement:\n  grace_period_ms: 500\n";
        add_file_output(alerts);
    }

    // Adds a file output at `path` (ECS JSON lines) to the configuration.
    void add_file_output(const std::filesystem::path& path) {
        std::ofstream(config_, std::ios::app)
            << "outputs:\n  - name: file\n    type: file\n    address: " << path.string() << "\n";
    }

    // The first record of the file output at `path` that `wanted` accepts,
    // within `timeout`.
    std::optional<nlohmann::json> wait_for_output(
        const std::filesystem::path& path, const std::function<bool(const nlohmann::json&)>& wanted,
        std::chrono::milliseconds timeout) {
        const auto deadline = Clock::now() + timeout;
        do {
            std::ifstream in(path);
            for (std::string line; std::getline(in, line);) {
                auto record = nlohmann::json::parse(line, nullptr, false);
                if (!record.is_discarded() && wanted(record)) return record;
            }
            std::this_thread::sleep_for(20ms);
        } while (Clock::now() < deadline);
        return std::nullopt;
    }

    // The enforcement outcome record of `action` for `pid` in the file output.
    std::optional<nlohmann::json> wait_for_outcome(const std::filesystem::path& path, pid_t pid,
                                                   const std::string& action) {
        return wait_for_output(
            path,
            [&](const nlohmann::json& record) {
                return record["gpuguard"]["record"] == "enforcement" &&
                       record["process"]["pid"] == pid && record["event"]["action"] == action;
            },
            5s);
    }

    // Waits for `rule`'s detection of `pid` asking for `action`, then for the
    // successful outcome of that action in the file output at `alerts`;
    // returns the outcome's reason ("" after a failed expectation).
    std::string enforced_reason(Subprocess& agent, pid_t pid, const std::string& rule,
                                const std::string& action, const std::filesystem::path& alerts) {
        auto detection = wait_for_detection(agent, pid, rule, 5s);
        EXPECT_TRUE(detection) << agent.stderr_text();
        if (!detection) return "";
        EXPECT_EQ((*detection)["event"]["action"], action);
        auto outcome = wait_for_outcome(alerts, pid, action);
        EXPECT_TRUE(outcome) << agent.stderr_text();
        if (!outcome) return "";
        EXPECT_EQ((*outcome)["gpuguard"]["enforcement"]["outcome"], "success") << outcome->dump();
        return (*outcome)["event"]["reason"].get<std::string>();
    }

    // Adds `correlation` to rules.correlation_files and the fake NVML,
    // sampled every 200 ms (`more_backends`: further lines under backends:),
    // to the configuration: before any section a test appends after it.
    void use_fake_gpu(const std::filesystem::path& correlation,
                      const std::string& more_backends = "") {
        std::ofstream(config_, std::ios::app)
            << "  correlation_files: [" << correlation.string() << "]\n"
            << "backends:\n  interval_ms: 200\n  nvml_library: \"" << GPUGUARD_FAKE_NVML_PATH
            << "\"\n"
            << more_backends;
    }

    // Starts the agent (--json) with the fake NVML playing `script`.
    std::unique_ptr<Subprocess> start_agent_playing(const std::filesystem::path& script) {
        return std::make_unique<Subprocess>(std::vector<std::string>{
            "/usr/bin/env", "GPUGUARD_FAKE_NVML_SCRIPT=" + script.string(), GPUGUARD_BINARY, "run",
            "--config", config_.string(), "--json"});
    }

    // `gpuguard replay` of the agent's journal with the test's rules: what
    // the journal alone reproduces.
    // With `correlation`, that rule file over the built-in rules too.
    CommandResult replay_journal(const std::filesystem::path& correlation = {}) {
        std::vector<std::string> argv = {GPUGUARD_BINARY, "replay",
                                         "--rules-file",  (dir_ / "miner-rules.yaml").string(),
                                         "--rules-dir",   rules_dir_.string()};
        if (!correlation.empty()) argv.insert(argv.end(), {"--correlation", correlation.string()});
        argv.push_back((dir_ / "journal").string());
        return run_command(argv, 60s);
    }

    // The pid of each detection of `rule` a replay printed, in order.
    static std::vector<pid_t> replayed_pids(const CommandResult& replayed,
                                            const std::string& rule) {
        std::vector<pid_t> pids;
        for (size_t at = 0, end; at < replayed.stdout_text.size(); at = end + 1) {
            end = std::min(replayed.stdout_text.find('\n', at), replayed.stdout_text.size());
            const auto record =
                nlohmann::json::parse(replayed.stdout_text.substr(at, end - at), nullptr, false);
            if (record.is_object() && record.contains("rule") && record["rule"]["id"] == rule) {
                pids.push_back(pid_of(record));
            }
        }
        return pids;
    }

    TempDir dir_{"gg-detect"};
    std::filesystem::path node_, rules_dir_, config_;
    std::vector<std::string> seen_;
};

}  // namespace gpuguard::testing
