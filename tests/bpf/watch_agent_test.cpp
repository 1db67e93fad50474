// The whole agent (`gpuguard run`) and its kernel watch list (WatchAgentTest):
// a process that holds no GPU, whose argv names a pool
// (`xmrig -o stratum+tcp://127.0.0.1:PORT -u WALLET`), connects to a port
// that is not in sensor.watched_ports; the agent watches it from its exec on,
// so its connect and its login are captured and GG-CORR-0003 names it. The
// same client named innocuously, without a pool URL, is not captured.
// `gpuguard status` shows the list. The client: test_pool_client.cpp.
// And the list of addresses: a DNS answer naming a pool domain (from a
// resolver the test plays on loopback, stratum_test_pool.h) puts its address
// in the list, and a connect there from any process is reported, on any port;
// an answer naming any other domain puts nothing there.
#include <array>
#include <csignal>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tests/bpf/stratum_test_pool.h"
#include "tests/support/child_process.h"
#include "tests/support/detection_ledger.h"
#include "tests/support/privileged.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// The pool client exec'ed with `argv`; it connects at go() (`delay_ms`
// after its start at the earliest) and stays connected until close_stdin().
// Killed and reaped at the end of the scope.
class PoolClient {
  public:
    PoolClient(const std::vector<std::string>& argv, int delay_ms) {
        int input[2];
        if (pipe2(input, O_CLOEXEC) != 0) return;
        const pid_t parent = getpid();
        std::vector<char*> args;
        for (const auto& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
        args.push_back(nullptr);
        const std::string delay = "GG_CLIENT_DELAY_MS=" + std::to_string(delay_ms);
        char wait[] = "GG_CLIENT_WAIT=1";
        char* env[] = {const_cast<char*>(delay.c_str()), wait, nullptr};
        pid_ = fork();
        if (pid_ == 0) {
            gpuguard::testing::end_with_parent(parent, SIGKILL);
            dup2(input[0], STDIN_FILENO);
            execve(GPUGUARD_POOL_CLIENT, args.data(), env);
            _exit(127);
        }
        close(input[0]);
        stdin_ = input[1];
    }
    ~PoolClient() {
        close_stdin();
        if (pid_ > 0 && !reaped_) {
            kill(pid_, SIGKILL);
            waitpid(pid_, nullptr, 0);
        }
    }
    PoolClient(const PoolClient&) = delete;
    PoolClient& operator=(const PoolClient&) = delete;

    pid_t pid() const { return pid_; }
    // Lets it connect.
    void go() { (void)!write(stdin_, "g", 1); }
    void close_stdin() {
        if (stdin_ >= 0) close(stdin_);
        stdin_ = -1;
    }
    // Its exit status once it ended within `timeout` (reaped then).
    std::optional<int> wait_exit(std::chrono::milliseconds timeout) {
        const auto deadline = std::chrono::steady_clock::now() + timeout;
        while (std::chrono::steady_clock::now() < deadline) {
            int status = 0;
            if (waitpid(pid_, &status, WNOHANG) == pid_) {
                reaped_ = true;
                return status;
            }
            std::this_thread::sleep_for(20ms);
        }
        return std::nullopt;
    }

  private:
    pid_t pid_ = -1;
    int stdin_ = -1;
    bool reaped_ = false;
};

// What the agent printed about one pid: its connect and payload events and
// its GG-CORR-0003 detection.
struct Seen {
    std::optional<json> connect;
    std::optional<json> payload;
    std::optional<json> detection;
};

void read_agent_output(gpuguard::testing::Subprocess& agent, std::vector<json>& lines,
                       std::chrono::milliseconds period) {
    const auto deadline = std::chrono::steady_clock::now() + period;
    while (std::chrono::steady_clock::now() < deadline) {
        const auto line = agent.read_stdout_line(100ms);
        if (!line) continue;
        auto parsed = json::parse(*line, nullptr, false);
        if (parsed.is_object()) lines.push_back(std::move(parsed));
    }
}

Seen seen_for(const std::vector<json>& lines, pid_t pid) {
    Seen seen;
    for (const auto& line : lines) {
        const json process = line.value("process", json::object());
        if (process.value("pid", -1) != pid) continue;
        const std::string type = line.value("type", "");
        if (type == "connect" && !seen.connect) seen.connect = line["connect"];
        if (type == "net_payload" && !seen.payload) seen.payload = line["net_payload"];
        if (line.contains("rule") && line["rule"].value("id", "") == "GG-CORR-0003") {
            seen.detection = line;
        }
    }
    return seen;
}

// Stops the agent (SIGTERM, a clean exit) and adds the rest of its output to
// `lines`: what a test checks its negatives on, once the agent has read the
// events that would have broken them.
void read_to_the_end(gpuguard::testing::Subprocess& agent, std::vector<json>& lines) {
    EXPECT_EQ(agent.stop(SIGTERM, 10s), 0) << agent.stderr_text();
    while (const auto line = agent.read_stdout_line(0ms)) {
        auto parsed = json::parse(*line, nullptr, false);
        if (parsed.is_object()) lines.push_back(std::move(parsed));
    }
}

// Every detection in `lines` against `expected` for the pids `started`
// (gpuguard::testing::DetectionLedger::expect_exactly).
::testing::AssertionResult detections_are(
    const std::vector<json>& lines,
    const std::vector<gpuguard::testing::ExpectedDetection>& expected,
    const std::vector<pid_t>& started) {
    gpuguard::testing::DetectionLedger ledger;
    for (const auto& line : lines) ledger.add(line.dump());
    return ledger.expect_exactly(expected, started);
}

json agent_status(const std::filesystem::path& socket) {
    const auto status = gpuguard::testing::run_command(
        {GPUGUARD_BINARY, "status", "--socket", socket.string(), "--json"});
    if (status.exit_code != 0) return json();
    return json::parse(status.stdout_text, nullptr, false);
}

TEST(WatchAgentTest, a_cpu_miner_named_by_its_argv_is_captured_on_an_unlisted_port) {
    GG_REQUIRE_PRIVILEGED();
    gpuguard::testing::TempDir dir("gg-watch-agent");
    const auto socket_path = dir / "control.sock";
    const auto config = dir / "gpuguard.yaml";
    // No watched port at all: only the watch list can capture these connects.
    std::ofstream(config) << "sensor:\n  connect_loopback: true\n  watched_ports: []\n"
                          << "control:\n  socket: " << socket_path.string() << "\n"
                          << "journal:\n  enabled: false\n"
                          << "enforcement:\n  dry_run: true\n";
    gpuguard::testing::Subprocess agent({GPUGUARD_BINARY, "run", "--config", config.string(),
                                         "--json", "--print-events", "--event-types",
                                         "connect,net_payload"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    // What the agent watches already: processes it found running at its
    // start and judged miners (another test's leftovers on a shared host).
    const json before = agent_status(socket_path);
    ASSERT_TRUE(before.is_object()) << agent.stderr_text();
    const int base_entries = before["watch_list"]["processes"]["entries"].get<int>();
    const int base_added = before["watch_list"]["processes"]["added"].get<int>();
    const int base_removed = before["watch_list"]["processes"]["removed"].get<int>();
    if (base_entries != 0) std::cerr << "watched at start:\n" << agent.stderr_text();

    const auto cryptonote = gpuguard::testing::dialects()[1];
    ASSERT_STREQ(cryptonote.name, "cryptonote");
    gpuguard::testing::TestServer pool("127.0.0.1", cryptonote.pool);
    gpuguard::testing::TestServer other_pool("127.0.0.1", cryptonote.pool);
    ASSERT_TRUE(pool.ok() && other_pool.ok());
    const std::string wallet =
        "44AFFq5kSiGBoZ4NMDwYtN18obc8AemS33DBLWs3H7otXft3XjrpDtQGv7SqSsaBYBb98uNbr2VBBEt7f2wfn3RVGQ"
        "B"
        "EP3A";
    PoolClient miner({"xmrig", "-o", "stratum+tcp://127.0.0.1:" + std::to_string(pool.port()), "-u",
                      wallet, "-p", "x"},
                     0);
    PoolClient worker(
        {"worker", "--host", "127.0.0.1", "--port", std::to_string(other_pool.port())}, 0);
    ASSERT_GT(miner.pid(), 0);
    ASSERT_GT(worker.pid(), 0);
    // A connect before the agent judged the exec is not the list's to catch
    // (docs/network.md): both connect once the agent says it watches the
    // miner (a few ms after its exec; longer on a loaded host).
    EXPECT_TRUE(agent.wait_for_stderr("watch list: pid " + std::to_string(miner.pid()) + " ", 10s))
        << agent.stderr_text();
    miner.go();
    worker.go();

    std::vector<json> lines;
    Seen miner_seen;
    const auto deadline = std::chrono::steady_clock::now() + 15s;
    while (!(miner_seen.connect && miner_seen.payload && miner_seen.detection) &&
           std::chrono::steady_clock::now() < deadline) {
        read_agent_output(agent, lines, 200ms);
        miner_seen = seen_for(lines, miner.pid());
    }
    ASSERT_TRUE(miner_seen.connect) << agent.stderr_text();
    EXPECT_EQ((*miner_seen.connect)["port"], pool.port());
    const json reasons = (*miner_seen.connect)["reasons"];
    EXPECT_NE(std::find(reasons.begin(), reasons.end(), "watched_process"), reasons.end())
        << miner_seen.connect->dump();
    ASSERT_TRUE(miner_seen.payload) << agent.stderr_text();
    ASSERT_TRUE(miner_seen.detection) << agent.stderr_text();
    EXPECT_EQ((*miner_seen.detection)["process"]["pid"], miner.pid());
    EXPECT_EQ((*miner_seen.detection)["destination"]["port"], pool.port());
    EXPECT_NE(agent.stderr_text().find("watch list: pid " + std::to_string(miner.pid())),
              std::string::npos)
        << agent.stderr_text();

    json status = agent_status(socket_path);
    ASSERT_TRUE(status.is_object()) << agent.stderr_text();
    EXPECT_EQ(status["watch_list"]["processes"]["entries"], base_entries + 1)
        << status["watch_list"].dump();
    EXPECT_EQ(status["watch_list"]["processes"]["added"], base_added + 1);
    EXPECT_EQ(status["watch_list"]["processes"]["capacity"], 4096);
    EXPECT_EQ(status["watch_list"]["processes"]["evicted"], 0);
    const auto text = gpuguard::testing::run_command(
        {GPUGUARD_BINARY, "status", "--socket", socket_path.string()});
    EXPECT_NE(text.stdout_text.find("watch list, processes: " + std::to_string(base_entries + 1) +
                                    " of 4096 (" + std::to_string(base_added + 1) + " added"),
              std::string::npos)
        << text.stdout_text;

    // Its exit takes it out of the list.
    miner.close_stdin();
    worker.close_stdin();
    const auto miner_status = miner.wait_exit(5s);
    const auto worker_status = worker.wait_exit(5s);
    ASSERT_TRUE(miner_status && worker_status);
    // Both connected and sent their login (else the worker's silence proves nothing).
    EXPECT_TRUE(WIFEXITED(*miner_status) && WEXITSTATUS(*miner_status) == 0) << *miner_status;
    EXPECT_TRUE(WIFEXITED(*worker_status) && WEXITSTATUS(*worker_status) == 0) << *worker_status;
    const auto exit_deadline = std::chrono::steady_clock::now() + 10s;
    do {
        std::this_thread::sleep_for(100ms);
        status = agent_status(socket_path);
    } while (status["watch_list"]["processes"]["entries"] != base_entries &&
             std::chrono::steady_clock::now() < exit_deadline);
    EXPECT_EQ(status["watch_list"]["processes"]["entries"], base_entries)
        << status["watch_list"].dump();
    EXPECT_EQ(status["watch_list"]["processes"]["removed"], base_removed + 1);

    // The worker connected and sent its login at the same time as the
    // miner, before either exited, and the agent has read the miner's exit:
    // nothing of the worker in its whole output.
    read_to_the_end(agent, lines);
    const Seen worker_seen = seen_for(lines, worker.pid());
    EXPECT_FALSE(worker_seen.connect) << worker_seen.connect->dump();
    EXPECT_FALSE(worker_seen.payload);
    EXPECT_FALSE(worker_seen.detection);
    // The miner: a known one by its argv at its exec (GG-CORR-0012), then at
    // its pool (GG-CORR-0003).
    EXPECT_TRUE(detections_are(
        lines, {{"GG-CORR-0012", miner.pid(), "error"}, {"GG-CORR-0003", miner.pid(), "critical"}},
        {miner.pid(), worker.pid()}));
}

TEST(WatchAgentTest, an_address_resolved_from_a_pool_domain_is_watched_on_any_port) {
    GG_REQUIRE_PRIVILEGED();
    gpuguard::testing::TempDir dir("gg-watch-agent");
    const auto socket_path = dir / "control.sock";
    const auto config = dir / "gpuguard.yaml";
    const uint16_t metrics_port = gpuguard::testing::free_loopback_port();
    std::ofstream(config) << "sensor:\n  connect_loopback: true\n  watched_ports: []\n"
                          << "metrics:\n  enabled: true\n  listen: 127.0.0.1\n  port: "
                          << metrics_port << "\n"
                          << "control:\n  socket: " << socket_path.string() << "\n"
                          << "journal:\n  enabled: false\n"
                          << "enforcement:\n  dry_run: true\n";
    gpuguard::testing::Subprocess agent({GPUGUARD_BINARY, "run", "--config", config.string(),
                                         "--json", "--print-events", "--event-types", "connect"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();

    // The pool, and an address nobody resolved, both on loopback, unlisted ports.
    gpuguard::testing::TestServer pool("127.77.0.9", gpuguard::testing::dialects()[1].pool);
    gpuguard::testing::TestServer elsewhere("127.77.0.10", gpuguard::testing::dialects()[1].pool);
    ASSERT_TRUE(pool.ok() && elsewhere.ok());
    // A process looks a name up: a real UDP query and answer on the wire,
    // from a resolver on 127.53.53.53:53 that knows that one name.
    const auto look_up = gpuguard::testing::look_up_through_test_resolver;
    // First a name no pool signature knows, for the other address: the
    // agent reads its answer before the pool's (one stream, in order), and
    // must not watch it.
    ASSERT_EQ(look_up("huggingface.co", {127, 77, 0, 10}), 0);
    ASSERT_EQ(look_up("xmr-eu1.nanopool.org", {127, 77, 0, 9}), 0);

    // The pool's address, and only it, is in the list once the agent has
    // read the answers.
    json status;
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    do {
        std::this_thread::sleep_for(100ms);
        status = agent_status(socket_path);
    } while (status["watch_list"]["addresses"]["entries"] != 1 &&
             std::chrono::steady_clock::now() < deadline);
    ASSERT_EQ(status["watch_list"]["addresses"]["entries"], 1) << agent.stderr_text();
    EXPECT_EQ(status["watch_list"]["addresses"]["capacity"], 4096);
    const std::string metrics = gpuguard::testing::http_get(metrics_port, "/metrics");
    EXPECT_NE(metrics.find("gpuguard_watch_list_entries{list=\"addresses\"} 1\n"),
              std::string::npos)
        << metrics.substr(0, 3000);
    EXPECT_NE(metrics.find("gpuguard_watch_list_evictions_total{list=\"processes\"} 0\n"),
              std::string::npos);

    // Any process connecting there is reported; to the other address, not.
    // The other connect comes first: once the agent printed the pool's, it
    // has read the other's (one stream, in order).
    int connected_elsewhere = -1, connected_to_pool = -1;
    const pid_t to_elsewhere = gpuguard::testing::run_in_child(
        "gg-plain",
        [&] {
            const int fd = gpuguard::testing::connect_v4("127.77.0.10", elsewhere.port());
            return fd < 0 ? 1 : 0;
        },
        &connected_elsewhere);
    const pid_t to_pool = gpuguard::testing::run_in_child(
        "gg-plain",
        [&] {
            const int fd = gpuguard::testing::connect_v4("127.77.0.9", pool.port());
            return fd < 0 ? 1 : 0;
        },
        &connected_to_pool);
    ASSERT_EQ(connected_elsewhere, 0);
    ASSERT_EQ(connected_to_pool, 0);
    std::vector<json> lines;
    std::optional<json> connect;
    const auto connect_deadline = std::chrono::steady_clock::now() + 5s;
    while (!connect && std::chrono::steady_clock::now() < connect_deadline) {
        read_agent_output(agent, lines, 200ms);
        connect = seen_for(lines, to_pool).connect;
    }
    ASSERT_TRUE(connect) << agent.stderr_text();
    EXPECT_EQ((*connect)["address"], "127.77.0.9");
    EXPECT_EQ((*connect)["port"], pool.port());
    EXPECT_EQ((*connect)["domain"], "xmr-eu1.nanopool.org");
    const json reasons = (*connect)["reasons"];
    EXPECT_EQ(reasons, json::array({"watched_address"})) << connect->dump();
    read_to_the_end(agent, lines);
    EXPECT_FALSE(seen_for(lines, to_elsewhere).connect);
    EXPECT_TRUE(detections_are(lines, {}, {to_pool, to_elsewhere}));
}

}  // namespace
}  // namespace gpuguard::agent
