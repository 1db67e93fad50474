// The live path end to end: `gpuguard run --json` sees a child open a
// registered fake GPU node, exec with a miner's command line and connect to a
// loopback "pool", and prints the detections (ECS JSON) within 100 ms; a
// rule file change is applied live, and a broken one is rejected with an
// alert while the last good rules keep working.
#include <chrono>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <regex>
#include <sstream>
#include <thread>

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpuguard/sensor/bpf_pins.h"
#include "gpuguard/sensor/sensor_probe.h"
#include "gpuguard/signatures/signatures.h"
#include "tests/support/agent_config.h"
#include "tests/support/child_process.h"
#include "tests/support/fake_nvml_script.h"
#include "tests/support/json_at.h"
#include "tests/support/netns.h"
#include "tests/support/privileged.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"
#include "tests/support/time_bound.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::testing::ChildReaper;
using gpuguard::testing::json_at;
using gpuguard::testing::NetnsScope;
using gpuguard::testing::RequestChild;
using gpuguard::testing::Subprocess;
using gpuguard::testing::TempDir;
using gpuguard::testing::TestCgroup;
using gpuguard::testing::time_bound;
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

// A network namespace the test made, 10.77.0.1 on its loopback interface
// (127/8 is never blocked) and a "pool" listening there on a miner port.
struct PoolNetns {
    NetnsScope netns;
    std::optional<LoopbackPool> pool;
    std::string error;
    PoolNetns() {
        if (error = netns.error(); !error.empty()) return;
        const auto added = gpuguard::testing::run_command(
            {"/usr/sbin/ip", "addr", "add", "10.77.0.1/32", "dev", "lo"}, 10s);
        if (added.exit_code != 0) {
            error = "ip addr add: " + added.stderr_text;
            return;
        }
        pool.emplace(INADDR_ANY);
        if (pool->fd < 0) error = "no free miner port";
    }
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

// A child the test started that acts when asked, named `comm`: 'O' opens
// the fake GPU node and keeps it open, 'o' opens and closes it, 'c' connects
// to `ip`:`port`. Each request is answered with the errno (0: it worked).
RequestChild gpu_prober(const std::string& comm, const std::string& node,
                        const std::string& ip = "", int port = 0) {
    return RequestChild(
        [node, ip, port](char request) {
            if (request == 'c') return gpuguard::testing::tcp_connect(ip, port, 1000);
            const int fd = open(node.c_str(), O_RDWR);
            const int result = fd >= 0 ? 0 : errno;
            if (fd >= 0 && request == 'o') close(fd);
            return result;
        },
        [comm] { prctl(PR_SET_NAME, comm.c_str()); });
}

// A copy of /bin/sleep at `path` with `tail` appended: still runs, and its
// bytes (hash, strings) are the test's to choose.
void copy_sleep(const std::filesystem::path& path, const std::string& tail) {
    std::filesystem::copy_file("/bin/sleep", path);
    std::ofstream(path, std::ios::app | std::ios::binary) << tail;
    std::filesystem::permissions(path, std::filesystem::perms::owner_all |
                                           std::filesystem::perms::group_exec |
                                           std::filesystem::perms::others_exec);
}

std::string file_bytes(const std::filesystem::path& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

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

    // Gives the agent a control socket in the test's directory (SetUp has none).
    void use_control_socket() {
        replace_in_config("socket: \"\"", "socket: " + (dir_ / "control.sock").string());
    }

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
            if (detection["rule"]["id"] == rule && detection["process"]["pid"] == pid) {
                return detection;
            }
        }
        return std::nullopt;
    }

    // Forks a child that names itself `comm`, opens the fake GPU node (the fd
    // survives exec) and, when argv is given, execs it.
    pid_t start_child(const std::string& comm, std::vector<std::string> argv) {
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

    TempDir dir_{"gg-detect"};
    std::filesystem::path node_, rules_dir_, config_;
    std::vector<std::string> seen_;
};

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
    EXPECT_EQ(detection["process"]["executable"], "/bin/bash");
    EXPECT_NE(detection["process"]["command_line"].get<std::string>().find(url), std::string::npos);
    EXPECT_EQ((*pool_connect)["destination"]["ip"], "127.0.0.1");
    EXPECT_EQ((*pool_connect)["destination"]["port"], pool.port);
    EXPECT_EQ(agent.stop(SIGTERM, 10s), 0) << agent.stderr_text();
}

TEST_F(AgentDetectTest, rule_changes_apply_live_and_broken_ones_are_rejected_with_an_alert) {
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();

    // Not a known miner yet.
    const pid_t before = start_child("gg-sched-7", {});
    ChildReaper reap_before(before);
    EXPECT_FALSE(wait_for_detection(agent, before, "GG-CORR-0001", 500ms));

    // A broken drop-in is rejected and raised as an alert about the agent.
    std::ofstream(rules_dir_ / "50-broken.yaml") << "rules:\n  - id: x\n    severity: loud\n";
    auto rejected = wait_for_detection(agent, agent.pid(), "GG-AGENT-0001", 5s);
    ASSERT_TRUE(rejected) << agent.stderr_text();
    EXPECT_NE(rejected->dump().find("50-broken.yaml:"), std::string::npos) << rejected->dump();
    std::filesystem::remove(rules_dir_ / "50-broken.yaml");

    // A valid rule naming the scheduler's disguise takes effect within a second.
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
    std::this_thread::sleep_for(1s);
    const pid_t after = start_child("gg-sched-7", {});
    ChildReaper reap_after(after);
    auto detection = wait_for_detection(agent, after, "GG-CORR-0001", 5s);
    ASSERT_TRUE(detection) << agent.stderr_text();
    EXPECT_EQ((*detection)["gpuguard"]["detection"]["signature_ids"][0], "local-renamed-miner");
    EXPECT_EQ(agent.stop(SIGTERM, 10s), 0) << agent.stderr_text();
}

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

// A rule that asks for "kill": the enforcer stops the miner through its
// pidfd, and both the detection and the outcome reach a file output.
TEST_F(AgentDetectTest, kill_action_stops_the_miner_and_outputs_get_both_records) {
    LoopbackPool pool;
    ASSERT_GE(pool.fd, 0) << "no free miner port on loopback";
    std::ofstream(rules_dir_ / "10-kill.yaml")
        << "signatures:\n  override:\n    - id: GG-PORT-0001\n      action: kill\n";
    const auto alerts = dir_ / "alerts.jsonl";
    use_control_socket();  // this test asks `gpuguard status`
    std::ofstream(config_, std::ios::app) << "enforcement:\n  grace_period_ms: 500\n";
    add_file_output(alerts);
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
    EXPECT_EQ(agent.stop(SIGTERM, 10s), 0) << agent.stderr_text();
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
    {
        OwnChild child(exec_child(doomed));
        ASSERT_TRUE(child.wait_exit(2s)) << "gg-doomed ran on";
        EXPECT_TRUE(child.killed_by_sigkill()) << child.status;
    }
    {
        OwnChild child(exec_child(hashed));
        auto detection = wait_for_detection(agent, child.pid, "GG-CORR-0010", 10s);
        ASSERT_TRUE(detection) << agent.stderr_text();
        EXPECT_EQ((*detection)["event"]["action"], "kill_now") << detection->dump();
        ASSERT_TRUE(child.wait_exit(5s)) << "known-bad copy was not killed";
        EXPECT_TRUE(child.killed_by_sigkill()) << child.status;
    }
    {
        // Registered by inode now: the next exec dies in the kernel, at once.
        const auto started = Clock::now();
        OwnChild child(exec_child(hashed));
        ASSERT_TRUE(child.wait_exit(2s)) << "second run of the known-bad copy ran on";
        EXPECT_TRUE(child.killed_by_sigkill()) << child.status;
        std::cerr << "second run dead after "
                  << std::chrono::duration<double, std::milli>(Clock::now() - started).count()
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
}

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
    std::ofstream(config_, std::ios::app)
        << "  correlation_files: [" << policy.string() << "]\n"
        << "enforcement:\n  grace_period_ms: 500\n"
        << "backends:\n  interval_ms: 200\n  nvml_library: \"" << GPUGUARD_FAKE_NVML_PATH << "\"\n";
    Subprocess agent({"/usr/bin/env", "GPUGUARD_FAKE_NVML_SCRIPT=" + script.string(),
                      GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
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
}

// GG-CORR-0009's conditions, live: the fake GPU reports two children of
// this test at 95 % SM; both send a 100-byte message to a loopback "pool"
// every 200 ms, and one also writes 64 KiB to a file each time. With the
// windows cut to 2 s, only the quiet one is reported, its evidence naming
// its sends: the kernel's send counts, /proc/PID/io and the telemetry meet
// in the correlator as they do in the built-in rule.
TEST_F(AgentDetectTest, pegged_gpu_by_a_quiet_process_is_detected_and_a_writing_one_is_not) {
    LoopbackPool pool;
    ASSERT_GE(pool.fd, 0) << "no free miner port on loopback";
    const gpuguard::testing::DiskScratchFile file("gg-writer");
    const auto worker = [&](const std::string& comm) {
        return gpuguard::testing::start_io_worker(
            {.comm = comm, .gpu_node = node_.string(), .file = file.path(), .tcp_port = pool.port});
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
    // The writer, pegged and sending the same for 3 s more, is never reported.
    for (int i = 0; i < 15; ++i) {
        work();
        EXPECT_FALSE(wait_for_detection(agent, writer->pid(), "SITE-QUIET", 200ms)) << i;
    }
    EXPECT_EQ(agent.stop(SIGTERM, 10s), 0) << agent.stderr_text();
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
    std::ofstream(policy) << R"(priority_guard:
  pause_above_percent: 80
  resume_below_percent: 50
  max_pause: 10m
  processes:
    - {comm: [gg-high], priority: 100}
    - {comm: [gg-low], priority: 1}
)";
    std::ofstream(config_, std::ios::app)
        << "  correlation_files: [" << policy.string() << "]\n"
        << "backends:\n  interval_ms: 200\n  nvml_library: \"" << GPUGUARD_FAKE_NVML_PATH << "\"\n";
    const auto alerts = dir_ / "alerts.jsonl";
    add_file_output(alerts);
    Subprocess agent({"/usr/bin/env", "GPUGUARD_FAKE_NVML_SCRIPT=" + script.string(),
                      GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
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
    EXPECT_EQ(agent.stop(SIGTERM, 10s), 0) << agent.stderr_text();
    EXPECT_FALSE(high.wait_exit(100ms)) << "never signalled";
}

// enforcement.dry_run: the same decision is reported (detection and a
// "dry_run" outcome that would send SIGSTOP) and the child never stops.
TEST_F(AgentDetectTest, guard_priorities_in_dry_run_report_the_pause_and_never_stop_the_child) {
    OwnChild low(start_child("gg-low", {}));
    OwnChild high(start_child("gg-high", {}));
    ASSERT_GT(low.pid, 0);
    ASSERT_GT(high.pid, 0);
    const auto script = dir_ / "nvml.json";
    std::ofstream(script) << gpuguard::testing::fake_nvml_script(
        {.gpu_utilization = 95,
         .memory_utilization = 50,
         .memory_used = 10ull << 30,
         .processes = {{low.pid, 2ull << 30}, {high.pid, 8ull << 30}}});
    const auto policy = dir_ / "guard.yaml";
    std::ofstream(policy) << "priority_guard:\n  processes:\n"
                          << "    - {comm: [gg-high], priority: 100}\n"
                          << "    - {comm: [gg-low], priority: 1}\n";
    std::ofstream(config_, std::ios::app)
        << "  correlation_files: [" << policy.string() << "]\n"
        << "enforcement:\n  dry_run: true\n"
        << "backends:\n  interval_ms: 200\n  nvml_library: \"" << GPUGUARD_FAKE_NVML_PATH << "\"\n";
    const auto alerts = dir_ / "alerts.jsonl";
    add_file_output(alerts);
    Subprocess agent({"/usr/bin/env", "GPUGUARD_FAKE_NVML_SCRIPT=" + script.string(),
                      GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    auto paused = wait_for_detection(agent, low.pid, "GG-GUARD-0001", 10s);
    ASSERT_TRUE(paused) << agent.stderr_text();
    auto outcome = wait_for_outcome(alerts, low.pid, "pause");
    ASSERT_TRUE(outcome) << agent.stderr_text();
    EXPECT_EQ((*outcome)["gpuguard"]["enforcement"]["outcome"], "dry_run") << outcome->dump();
    EXPECT_EQ((*outcome)["event"]["reason"], "would send SIGSTOP") << outcome->dump();
    EXPECT_FALSE(wait_for_state(low.pid, true, 1s)) << "stopped in dry run";
    EXPECT_EQ(agent.stop(SIGTERM, 10s), 0) << agent.stderr_text();
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
    for (const auto& line : seen_) {
        const auto record = nlohmann::json::parse(line);
        if (json_at(record, "/process/pid") == third.pid) {
            EXPECT_NE(json_at(record, "/rule/id"), "SITE-RELOAD-A")
                << "the replaced rule still fires";
        }
    }
    EXPECT_EQ(agent.stop(SIGTERM, 10s), 0) << agent.stderr_text();
}

// deny_gpu from a rule: the live agent attaches cgroup/dev to the cgroup of
// the detected process (a cgroup the test made), so its next open of the
// fake GPU node fails with EPERM; this process, outside it, still opens the
// node, and the denial ends with the agent. BPF LSM: loaded where the kernel
// runs it, else one warning says so.
TEST_F(AgentDetectTest, deny_gpu_rule_denies_the_gpu_node_to_the_detections_cgroup) {
    TestCgroup cgroup("gpuguard-deny");
    ASSERT_EQ(cgroup.error(), "");
    std::ofstream(dir_ / "miner-rules.yaml") << R"(rules:
  - id: local-deny-gpu
    name: Renamed miner denied the GPU
    severity: critical
    confidence: 0.9
    action: deny_gpu
    process_name: ["gg-deny-*"]
)";
    const auto alerts = dir_ / "alerts.jsonl";
    add_file_output(alerts);
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    const bool lsm = gpuguard::agent::probe_bpf_lsm("").available;
    const auto& log = agent.stderr_text();
    const auto warned = log.find("deny_gpu: BPF LSM unavailable");
    if (lsm) {
        EXPECT_EQ(warned, std::string::npos) << log;
    } else {
        ASSERT_NE(warned, std::string::npos) << log;
        EXPECT_EQ(log.find("BPF LSM unavailable", log.find('\n', warned)), std::string::npos)
            << "one line\n"
            << log;
    }

    auto child = gpu_prober("gg-deny-1", node_.string());
    ASSERT_GT(child.pid(), 0);
    ASSERT_TRUE(cgroup.add(child.pid()));
    ASSERT_EQ(child.ask('O'), 0) << "opens the GPU before the deny";
    const auto reason = enforced_reason(agent, child.pid(), "GG-CORR-0001", "deny_gpu", alerts);
    ASSERT_NE(reason, "");
    EXPECT_NE(reason.find("GPU devices denied to cgroup " + cgroup.path()), std::string::npos)
        << reason;
    EXPECT_EQ(child.ask('o'), EPERM) << "opened the GPU after the deny";
    const int fd = open(node_.c_str(), O_RDWR);
    EXPECT_GE(fd, 0) << "outside the denied cgroup the node still opens";
    if (fd >= 0) close(fd);

    EXPECT_EQ(agent.stop(SIGTERM, 10s), 0) << agent.stderr_text();
    EXPECT_EQ(child.ask('o'), 0) << "the denial ends with the agent";
}

// block_ip through the cgroup/connect4/6 fallback
// (enforcement.connect_fallback_cgroup), in a network namespace the test
// made: a GPU process in the test's cgroup connects to a "pool" on this
// namespace's loopback interface (10.77.0.1: 127/8 is never blocked), the
// agent blocks the peer, and the process's next connect is refused while
// connects from outside the cgroup still work. No nftables table appears.
TEST_F(AgentDetectTest, block_ip_through_the_connect_fallback_refuses_the_cgroups_connects) {
    PoolNetns netns;
    ASSERT_EQ(netns.error, "");
    const LoopbackPool& pool = *netns.pool;
    TestCgroup cgroup("gpuguard-block");
    ASSERT_EQ(cgroup.error(), "");
    std::ofstream(rules_dir_ / "10-block.yaml")
        << "signatures:\n  override:\n    - id: GG-PORT-0001\n      action: block_ip\n";
    std::ofstream(config_, std::ios::app)
        << "enforcement:\n  connect_fallback_cgroup: \"" << cgroup.path() << "\"\n";
    const auto alerts = dir_ / "alerts.jsonl";
    add_file_output(alerts);
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config_.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    EXPECT_NE(agent.stderr_text().find("block_ip: cgroup/connect4/6 on cgroup " + cgroup.path()),
              std::string::npos)
        << agent.stderr_text();

    auto child = gpu_prober("gg-pool-client", node_.string(), "10.77.0.1", pool.port);
    ASSERT_GT(child.pid(), 0);
    ASSERT_TRUE(cgroup.add(child.pid()));
    ASSERT_EQ(child.ask('O'), 0);
    ASSERT_EQ(child.ask('c'), 0) << "the first connect goes through (and is detected)";
    const auto reason = enforced_reason(agent, child.pid(), "GG-CORR-0002", "block_ip", alerts);
    ASSERT_NE(reason, "");
    EXPECT_NE(reason.find("blocked 10.77.0.1 via cgroup_connect"), std::string::npos) << reason;
    EXPECT_EQ(child.ask('c'), EPERM) << "connect after the block";
    EXPECT_EQ(gpuguard::testing::tcp_connect("10.77.0.1", pool.port, 1000), 0)
        << "outside the cgroup: not filtered";
    EXPECT_EQ(gpuguard::testing::run_command({"/usr/sbin/nft", "list", "ruleset"}).stdout_text, "")
        << "the fallback must not create an nftables table";
    EXPECT_EQ(agent.stop(SIGTERM, 10s), 0) << agent.stderr_text();
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
    EXPECT_EQ(agent.stop(SIGTERM, 10s), 0) << agent.stderr_text();
}

// A pinned link's kernel ids (the link, the program it runs); zeros when
// nothing is pinned at `file`.
struct PinnedLink {
    uint32_t id = 0;
    uint32_t prog_id = 0;
};
PinnedLink pinned_link(const std::filesystem::path& file) {
    PinnedLink ids;
    const int fd = bpf_obj_get(file.c_str());
    if (fd < 0) return ids;
    bpf_link_info info{};
    uint32_t length = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &length) == 0) ids = {info.id, info.prog_id};
    close(fd);
    return ids;
}

// Programs attached to the cgroup directory `dir` for `type`.
uint32_t attached_programs(const std::string& dir, bpf_attach_type type) {
    const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return 0;
    uint32_t ids[8] = {}, count = 8, flags = 0;
    if (bpf_prog_query(fd, type, 0, &flags, ids, &count) != 0) count = 0;
    close(fd);
    return count;
}

// enforcement.pin_path: the agent dies by SIGKILL and its in-kernel
// enforcement stays in force (a known-bad name dies at exec, the denied
// cgroup cannot open the GPU nor reach the blocked pool); the next agent
// takes it over without attaching anything twice: the cgroup links are the
// same links running its programs, the tracepoint links are its own and the
// old ones are gone. A clean stop then lifts all of it. Everything is pinned
// in a bpf filesystem the test mounts, never the host's /sys/fs/bpf.
TEST_F(AgentDetectTest, pinned_enforcement_outlives_a_killed_agent_and_is_taken_over) {
    const auto bpffs = dir_ / "bpffs";
    std::filesystem::create_directory(bpffs);
    ASSERT_EQ(mount("bpf", bpffs.c_str(), "bpf", 0, nullptr), 0) << std::strerror(errno);
    struct Unmount {
        std::string path;
        ~Unmount() { umount2(path.c_str(), MNT_DETACH); }  // drops whatever is still pinned
    } unmount{bpffs.string()};
    const auto pins = bpffs / "gpuguard";
    PoolNetns netns;
    ASSERT_EQ(netns.error, "");
    const LoopbackPool& pool = *netns.pool;
    TestCgroup cgroup("gpuguard-pin");
    ASSERT_EQ(cgroup.error(), "");
    const auto doomed = dir_ / "gg-doomed";
    copy_sleep(doomed, "");
    std::ofstream(dir_ / "miner-rules.yaml") << R"(rules:
  - id: local-doomed
    action: kill_now
    process_name: [gg-doomed]
  - id: local-deny-gpu
    severity: critical
    action: deny_gpu
    process_name: ["gg-deny-*"]
)";
    std::ofstream(rules_dir_ / "10-block.yaml")
        << "signatures:\n  override:\n    - id: GG-PORT-0001\n      action: block_ip\n";
    std::ofstream(config_, std::ios::app)
        << "enforcement:\n  connect_fallback_cgroup: \"" << cgroup.path() << "\"\n"
        << "  pin_path: " << pins.string() << "\n";
    const auto alerts = dir_ / "alerts.jsonl";
    add_file_output(alerts);
    use_control_socket();
    const std::vector<std::string> run = {GPUGUARD_BINARY, "run", "--config", config_.string(),
                                          "--json"};
    auto doomed_dies = [&doomed] {
        const std::string file = doomed.string();
        OwnChild child(fork());
        if (child.pid == 0) {
            execl(file.c_str(), file.c_str(), "0", nullptr);
            _exit(127);
        }
        return child.wait_exit(5s) && child.killed_by_sigkill();
    };

    auto child = gpu_prober("gg-deny-miner", node_.string(), "10.77.0.1", pool.port);
    ASSERT_GT(child.pid(), 0);
    ASSERT_TRUE(cgroup.add(child.pid()));
    std::map<std::string, PinnedLink> first;
    {
        Subprocess agent(run);
        ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
        ASSERT_EQ(child.ask('O'), 0) << "opens the GPU before the deny";
        ASSERT_NE(enforced_reason(agent, child.pid(), "GG-CORR-0001", "deny_gpu", alerts), "");
        ASSERT_EQ(child.ask('c'), 0) << "the first connect goes through (and is detected)";
        ASSERT_NE(enforced_reason(agent, child.pid(), "GG-CORR-0002", "block_ip", alerts), "");
        for (const auto& entry : std::filesystem::directory_iterator(pins / "links")) {
            first[entry.path().filename().string()] = pinned_link(entry.path());
        }
        EXPECT_EQ(agent.stop(SIGKILL, 10s), 128 + SIGKILL) << agent.stderr_text();
    }
    const std::string cgroup_name = gpuguard::agent::escape_pin_name(cgroup.path());
    for (const std::string& name :
         {"dev@" + cgroup_name, "connect4@" + cgroup_name, "connect6@" + cgroup_name,
          std::string("sensor-gg_sched_exec"), std::string("sensor-gg_exit_openat")}) {
        ASSERT_TRUE(first.contains(name) && first[name].id != 0) << name << " is not pinned";
    }

    // No agent runs: the kernel enforces on its own.
    EXPECT_TRUE(doomed_dies()) << "kill_now at exec without an agent";
    EXPECT_EQ(child.ask('o'), EPERM) << "GPU open in the denied cgroup without an agent";
    EXPECT_EQ(child.ask('c'), EPERM) << "connect to the blocked pool without an agent";

    Subprocess agent(run);
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    const std::string log = agent.stderr_text();
    EXPECT_NE(log.find("GPU devices still denied to cgroup " + cgroup.path() + " (taken over)"),
              std::string::npos)
        << log;
    EXPECT_NE(log.find("cgroup/connect4/6 on cgroup " + cgroup.path() + " (taken over)"),
              std::string::npos)
        << log;
    for (const auto& [name, before] : first) {
        const PinnedLink now = pinned_link(pins / "links" / name);
        ASSERT_NE(now.id, 0u) << name << " is no longer pinned";
        EXPECT_NE(now.prog_id, before.prog_id) << name << " still runs the dead agent's program";
        if (name.starts_with("sensor-")) {
            EXPECT_NE(now.id, before.id) << name;
            const int old_fd = bpf_link_get_fd_by_id(before.id);
            EXPECT_LT(old_fd, 0) << name << ": the dead agent's link is still attached";
            if (old_fd >= 0) close(old_fd);
        } else {
            EXPECT_EQ(now.id, before.id) << name << " was replaced, not taken over";
        }
    }
    EXPECT_EQ(attached_programs(cgroup.dir(), BPF_CGROUP_DEVICE), 1u);
    EXPECT_EQ(attached_programs(cgroup.dir(), BPF_CGROUP_INET4_CONNECT), 1u);
    EXPECT_EQ(attached_programs(cgroup.dir(), BPF_CGROUP_INET6_CONNECT), 1u);
    EXPECT_TRUE(doomed_dies()) << "kill_now at exec under the second agent";
    EXPECT_EQ(child.ask('o'), EPERM);
    EXPECT_EQ(child.ask('c'), EPERM);
    const auto report = gpuguard::testing::run_command(
        {GPUGUARD_BINARY, "status", "--json", "--socket", (dir_ / "control.sock").string()}, 10s);
    ASSERT_EQ(report.exit_code, 0) << report.stderr_text;
    const auto enforcement = nlohmann::json::parse(report.stdout_text)["enforcement"];
    EXPECT_EQ(enforcement["pinned"]["path"], pins.string()) << enforcement.dump();
    EXPECT_EQ(enforcement["pinned"]["links_taken_over"], 3) << enforcement.dump();
    EXPECT_EQ(enforcement["pinned"]["maps_dropped"], 0) << enforcement.dump();
    EXPECT_EQ(enforcement["denied_cgroups"], nlohmann::json::array({cgroup.path()}))
        << enforcement.dump();

    // A clean stop lifts it all.
    EXPECT_EQ(agent.stop(SIGTERM, 10s), 0) << agent.stderr_text();
    EXPECT_FALSE(std::filesystem::exists(pins)) << "pins left after a clean stop";
    EXPECT_EQ(attached_programs(cgroup.dir(), BPF_CGROUP_DEVICE), 0u);
    EXPECT_EQ(child.ask('o'), 0) << "the denial ends with a clean stop";
    EXPECT_EQ(child.ask('c'), 0) << "the block ends with a clean stop";
    EXPECT_FALSE(doomed_dies()) << "kill_now ends with a clean stop";
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
    std::this_thread::sleep_for(500ms);  // the file sinks flush
    for (const char* format : {"ecs_json", "cef", "leef", "ocsf", "syslog"}) {
        std::ifstream in(dir_ / (std::string(format) + ".out"), std::ios::binary);
        const std::string text((std::istreambuf_iterator<char>(in)),
                               std::istreambuf_iterator<char>());
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

    EXPECT_EQ(agent.stop(SIGTERM, 10s), 0) << agent.stderr_text();
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
