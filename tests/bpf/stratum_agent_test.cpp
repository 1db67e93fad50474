// The whole agent (`gpuguard run`) against a Stratum session on loopback
// (StratumAgentTest): it detects the session, `gpuguard ps` and /metrics show
// its hash rate, and `gpuguard replay` of its raw events and of its journal
// gives the live detections. Pool and dialects: stratum_test_pool.h.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpuguard/netintel/stratum.h"
#include "tests/bpf/stratum_test_pool.h"
#include "tests/support/child_process.h"
#include "tests/support/detection_ledger.h"
#include "tests/support/privileged.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::agent {
namespace {

using gpuguard::testing::connect_v4;
using gpuguard::testing::Dialect;
using gpuguard::testing::dialects;
using gpuguard::testing::drain_input;
using gpuguard::testing::free_loopback_port;
using gpuguard::testing::http_get;
using gpuguard::testing::kShareIntervalNs;
using gpuguard::testing::kShares;
using gpuguard::testing::read_lines;
using gpuguard::testing::sleep_ns;
using gpuguard::testing::TestServer;
using gpuguard::testing::write_all;

// The whole agent (`gpuguard run`): a miner holding a fake GPU node mines
// against a loopback pool; the agent raises GG-CORR-0003, and `gpuguard ps`
// and /metrics show the session's hash rate within 10 % of the truth while
// the miner is still connected.
// The agent's first detection of `rule` on `pid` within `timeout`, from its stdout.
// Every line read is kept in `printed` for the whole-output check.
std::optional<nlohmann::json> wait_for_rule(gpuguard::testing::Subprocess& agent,
                                            const std::string& rule, pid_t pid,
                                            std::chrono::milliseconds timeout,
                                            std::vector<std::string>& printed) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
        const auto line = agent.read_stdout_line(std::chrono::milliseconds(200));
        if (!line) continue;
        printed.push_back(*line);
        const auto parsed = nlohmann::json::parse(*line, nullptr, false);
        if (parsed.is_object() && parsed["rule"]["id"] == rule && parsed["process"]["pid"] == pid) {
            return parsed;
        }
    }
    return std::nullopt;
}

// The check each test ends on: stops the agent (a clean exit), reads the
// rest of its output, and checks every detection printed against
// `expected` for the pids the test started (DetectionLedger::expect_exactly).
void expect_whole_output(gpuguard::testing::Subprocess& agent, std::vector<std::string>& printed,
                         const std::vector<gpuguard::testing::ExpectedDetection>& expected,
                         const std::vector<pid_t>& started) {
    EXPECT_EQ(agent.stop(SIGTERM, std::chrono::seconds(10)), 0) << agent.stderr_text();
    while (auto line = agent.read_stdout_line(std::chrono::milliseconds(0))) {
        printed.push_back(*line);
    }
    EXPECT_TRUE(gpuguard::testing::DetectionLedger(printed).expect_exactly(expected, started));
}

TEST(StratumAgentTest, live_agent_detects_the_session_and_ps_and_metrics_show_its_hash_rate) {
    GG_REQUIRE_PRIVILEGED();
    using namespace std::chrono_literals;
    gpuguard::testing::TempDir dir("gg-stratum-agent");
    const std::string node = (dir / "gpu0").string();
    ASSERT_EQ(mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0);
    const auto socket_path = dir / "control.sock";
    const uint16_t metrics_port = free_loopback_port();
    const auto config = dir / "gpuguard.yaml";
    std::ofstream(config) << "sensor:\n  extra_gpu_devices: [\"1:7\"]\n  connect_loopback: true\n"
                          << "control:\n  socket: " << socket_path.string() << "\n"
                          << "metrics:\n  enabled: true\n  listen: 127.0.0.1\n  port: "
                          << metrics_port << "\n"
                          << "journal:\n  enabled: false\n";
    gpuguard::testing::Subprocess agent(
        {GPUGUARD_BINARY, "run", "--config", config.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();

    const Dialect dialect = dialects().front();  // stratum1, difficulty 8
    const std::string wallet = "bc1qtestwalletaddressxxxxxxxxxxxxxxxxx";
    TestServer pool("127.0.0.1", dialect.pool);
    ASSERT_TRUE(pool.ok());
    const uint16_t port = pool.port();
    std::vector<std::string> lines;
    for (const auto& line : dialect.login) lines.push_back(line + "\n");
    for (int i = 0; i < kShares; ++i) lines.push_back(dialect.submit(i) + "\n");
    int done[2], timing[2];
    ASSERT_EQ(pipe2(done, O_CLOEXEC), 0);
    ASSERT_EQ(pipe2(timing, O_CLOEXEC), 0);
    const pid_t miner = fork();
    ASSERT_GE(miner, 0);
    if (miner == 0) {
        prctl(PR_SET_NAME, "gg-live-miner");
        close(done[1]);
        close(timing[0]);
        const int gpu = open(node.c_str(), O_RDWR);
        const int fd = gpu < 0 ? -1 : connect_v4("127.0.0.1", port);
        if (fd < 0) _exit(2);
        timespec first{}, last{};
        for (size_t i = 0; i < lines.size(); ++i) {
            if (i == dialect.login.size()) clock_gettime(CLOCK_MONOTONIC, &first);
            if (i + 1 == lines.size()) clock_gettime(CLOCK_MONOTONIC, &last);
            if (!write_all(fd, lines[i]) || !read_lines(fd, 1)) _exit(3);
            if (i + 1 == dialect.login.size()) {
                sleep_ns(20'000'000);
                drain_input(fd);
            }
            if (i >= dialect.login.size()) sleep_ns(kShareIntervalNs);
        }
        // How long the shares really took (the machine may be loaded).
        const int64_t elapsed =
            (last.tv_sec - first.tv_sec) * 1'000'000'000ll + (last.tv_nsec - first.tv_nsec);
        if (write(timing[1], &elapsed, sizeof(elapsed)) != sizeof(elapsed)) _exit(4);
        // Connected until the test has looked (20 s at most).
        pollfd wait{done[0], POLLIN, 0};
        poll(&wait, 1, 20000);
        _exit(0);
    }
    gpuguard::testing::ChildReaper reaper(miner);
    close(done[0]);
    close(timing[1]);

    // The detection, from the agent's own output.
    std::vector<std::string> printed;
    const auto detection = wait_for_rule(agent, "GG-CORR-0003", miner, 10s, printed);
    ASSERT_TRUE(detection) << agent.stderr_text();
    EXPECT_EQ((*detection)["destination"]["port"], port);
    EXPECT_EQ(detection->dump().find(wallet), std::string::npos) << "wallet in the alert";

    // The truth: the hashes the shares after the first stand for over the
    // time the miner took to submit them, by its own clock.
    int64_t elapsed_ns = 0;
    pollfd timed{timing[0], POLLIN, 0};
    ASSERT_GT(poll(&timed, 1, 15000), 0);
    ASSERT_EQ(read(timing[0], &elapsed_ns, sizeof(elapsed_ns)),
              static_cast<ssize_t>(sizeof(elapsed_ns)));
    close(timing[0]);
    const double truth = dialect.share_hashes * (kShares - 1) / (elapsed_ns / 1e9);

    // ps --json: the process's session, once all shares are in.
    nlohmann::json session;
    const auto ps_deadline = std::chrono::steady_clock::now() + 15s;
    while (std::chrono::steady_clock::now() < ps_deadline) {
        const auto ps = gpuguard::testing::run_command(
            {GPUGUARD_BINARY, "ps", "--socket", socket_path.string(), "--json"});
        ASSERT_EQ(ps.exit_code, 0) << ps.stderr_text;
        for (const auto& process : nlohmann::json::parse(ps.stdout_text)) {
            if (process["pid"] == miner && !process["stratum_sessions"].empty()) {
                session = process["stratum_sessions"][0];
            }
        }
        if (!session.is_null() && session["shares_submitted"] == kShares) break;
        std::this_thread::sleep_for(200ms);
    }
    ASSERT_FALSE(session.is_null()) << agent.stderr_text();
    EXPECT_EQ(session["protocol"], "stratum1");
    EXPECT_EQ(session["pool_address"], "127.0.0.1");
    EXPECT_EQ(session["pool_port"], port);
    EXPECT_EQ(session["shares_submitted"], kShares);
    EXPECT_EQ(session["shares_accepted"], kShares);
    ASSERT_TRUE(session["hash_rate"].is_number()) << session.dump();
    const double ps_rate = session["hash_rate"].get<double>();
    std::printf("ps hash rate %.6g H/s, truth %.6g H/s, error %+.2f %%\n", ps_rate, truth,
                (ps_rate - truth) / truth * 100);
    EXPECT_NEAR(ps_rate, truth, truth * 0.10);
    // Its 95 % interval from the share count, around the estimate.
    ASSERT_TRUE(session["hash_rate_low"].is_number() && session["hash_rate_high"].is_number())
        << session.dump();
    const double low = session["hash_rate_low"].get<double>();
    const double high = session["hash_rate_high"].get<double>();
    EXPECT_LT(low, ps_rate);
    EXPECT_GT(high, ps_rate);
    EXPECT_EQ(session["comm"], "gg-live-miner");
    EXPECT_EQ(session.dump().find(wallet), std::string::npos) << "wallet in ps";
    const auto table =
        gpuguard::testing::run_command({GPUGUARD_BINARY, "ps", "--socket", socket_path.string()});
    EXPECT_NE(table.stdout_text.find("mining: stratum1 pool 127.0.0.1:" + std::to_string(port)),
              std::string::npos)
        << table.stdout_text;
    // The rate with its interval, as describe_hash_rate() writes both (no
    // message since: the same numbers).
    const std::string rate_shape = "shares 11 sent 11 accepted 0 rejected, hash rate ";
    const auto rate_at = table.stdout_text.find(rate_shape);
    ASSERT_NE(rate_at, std::string::npos) << table.stdout_text;
    const std::string printed_rate = table.stdout_text.substr(
        rate_at + rate_shape.size(),
        table.stdout_text.find('\n', rate_at) - rate_at - rate_shape.size());
    EXPECT_EQ(printed_rate, gpuguard::agent::stratum::describe_hash_rate(ps_rate, low, high));
    // `gpuguard status`: the same session under "mining sessions", named by pid and comm.
    const auto status_text = gpuguard::testing::run_command(
        {GPUGUARD_BINARY, "status", "--socket", socket_path.string()});
    ASSERT_EQ(status_text.exit_code, 0) << status_text.stderr_text;
    EXPECT_NE(status_text.stdout_text.find(
                  "mining sessions: 1\n  pid " + std::to_string(miner) +
                  " (gg-live-miner): stratum1 pool 127.0.0.1:" + std::to_string(port)),
              std::string::npos)
        << status_text.stdout_text;
    EXPECT_NE(status_text.stdout_text.find(rate_shape + printed_rate), std::string::npos)
        << status_text.stdout_text;

    // /metrics: the same session's gauge.
    const std::string metrics = http_get(metrics_port, "/metrics");
    const std::string prefix = "gpuguard_stratum_hash_rate{pid=\"" + std::to_string(miner) + "\"";
    const auto at = metrics.find(prefix);
    ASSERT_NE(at, std::string::npos) << metrics.substr(0, 2000);
    const auto line_end = metrics.find('\n', at);
    const std::string line = metrics.substr(at, line_end - at);
    EXPECT_NE(line.find("protocol=\"stratum1\""), std::string::npos) << line;
    const double metrics_rate = std::strtod(line.substr(line.rfind(' ') + 1).c_str(), nullptr);
    EXPECT_NEAR(metrics_rate, truth, truth * 0.10) << line;

    close(done[1]);  // the miner disconnects and exits
    int status = 0;
    EXPECT_EQ(waitpid(miner, &status, 0), miner);
    // GG-CORR-0003 on the miner (a Stratum session on the wire: critical),
    // and nothing at warning or above for anything else of this test's. The
    // miner is a fork of this test binary, whose test strings YARA takes for
    // a miner's: GG-CORR-0004 allowed (the sanitizer build's binary is over
    // the YARA size limit and is not scanned).
    expect_whole_output(agent, printed,
                        {{"GG-CORR-0003", miner, "critical"},
                         {"GG-CORR-0004", miner, "critical", /*optional=*/true}},
                        {miner});
}

// One pipeline (gpuguard/detect/pipeline.h): the live agent's detections of
// a real Stratum session come back byte for byte (wall-clock fields set
// aside) from `gpuguard replay` of (1) the events it printed with
// --print-events --event-types all, (2) the same stream without the stratum
// events it derived, so that replay must derive them from the raw payload
// samples itself, and (3) its journal.
TEST(StratumAgentTest, replay_of_the_raw_events_and_of_the_journal_gives_the_live_detections) {
    GG_REQUIRE_PRIVILEGED();
    using namespace std::chrono_literals;
    gpuguard::testing::TempDir dir("gg-one-pipeline");
    const std::string node = (dir / "gpu0").string();
    ASSERT_EQ(mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0);
    const auto journal_dir = dir / "journal";
    const auto config = dir / "gpuguard.yaml";
    std::ofstream(config) << "sensor:\n  extra_gpu_devices: [\"1:7\"]\n  connect_loopback: true\n"
                          << "journal:\n  enabled: true\n  dir: " << journal_dir.string() << "\n"
                          << "  fsync_interval_ms: 50\n";
    gpuguard::testing::Subprocess agent({GPUGUARD_BINARY, "run", "--config", config.string(),
                                         "--json", "--print-events", "--event-types", "all"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();

    const Dialect dialect = dialects().front();
    TestServer pool("127.0.0.1", dialect.pool);
    ASSERT_TRUE(pool.ok());
    const uint16_t port = pool.port();
    std::vector<std::string> lines;
    for (const auto& line : dialect.login) lines.push_back(line + "\n");
    for (int i = 0; i < 4; ++i) lines.push_back(dialect.submit(i) + "\n");
    const pid_t miner = fork();
    ASSERT_GE(miner, 0);
    if (miner == 0) {
        prctl(PR_SET_NAME, "gg-raw-miner");
        const int gpu = open(node.c_str(), O_RDWR);
        const int fd = gpu < 0 ? -1 : connect_v4("127.0.0.1", port);
        if (fd < 0) _exit(2);
        for (size_t i = 0; i < lines.size(); ++i) {
            if (!write_all(fd, lines[i]) || !read_lines(fd, 1)) _exit(3);
            if (i + 1 == dialect.login.size()) {
                sleep_ns(20'000'000);
                drain_input(fd);
            }
        }
        _exit(0);
    }
    gpuguard::testing::ChildReaper reaper(miner);

    // Everything the agent prints until the session was judged and the miner is gone.
    std::vector<std::string> printed;
    bool judged = false;
    const auto deadline = std::chrono::steady_clock::now() + 15s;
    while (!judged && std::chrono::steady_clock::now() < deadline) {
        const auto line = agent.read_stdout_line(200ms);
        if (!line) continue;
        printed.push_back(*line);
        const auto parsed = nlohmann::json::parse(*line, nullptr, false);
        judged = parsed.is_object() && parsed.contains("rule") &&
                 parsed["rule"]["id"] == "GG-CORR-0003" && parsed["process"]["pid"] == miner;
    }
    ASSERT_TRUE(judged) << agent.stderr_text();
    int status = 0;
    ASSERT_EQ(waitpid(miner, &status, 0), miner);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    // The agent has handled the miner's exit once it prints the exit event
    // (--event-types all): whatever the exit raises comes before it or with
    // the rest of the output read at the stop.
    const auto exit_printed = [&] {
        return std::any_of(printed.begin(), printed.end(), [&](const std::string& text) {
            const auto parsed = nlohmann::json::parse(text, nullptr, false);
            return parsed.is_object() && parsed.value("type", "") == "exit" &&
                   parsed["process"]["pid"] == miner;
        });
    };
    for (const auto until = std::chrono::steady_clock::now() + 10s;
         !exit_printed() && std::chrono::steady_clock::now() < until;) {
        if (auto line = agent.read_stdout_line(200ms)) printed.push_back(*line);
    }
    ASSERT_TRUE(exit_printed()) << agent.stderr_text();
    expect_whole_output(agent, printed,
                        {{"GG-CORR-0003", miner, "critical"},
                         {"GG-CORR-0004", miner, "critical", /*optional=*/true}},
                        {miner});
    if (::testing::Test::HasFailure()) return;

    auto without_clock = [](const std::string& line) {
        static const std::regex wall_clock(R"re("(@timestamp|created)":"[^"]*")re");
        return std::regex_replace(line, wall_clock, "\"$1\":\"<wall clock>\"");
    };
    auto of_miner = [&](const std::string& text) {
        std::vector<std::string> out;
        std::istringstream in(text);
        for (std::string line; std::getline(in, line);) {
            const auto parsed = nlohmann::json::parse(line, nullptr, false);
            if (parsed.is_object() && parsed.contains("rule") && parsed["process"]["pid"] == miner)
                out.push_back(without_clock(line));
        }
        return out;
    };
    std::string live_text;
    std::ofstream all_events(dir / "events.jsonl");
    std::ofstream raw_events(dir / "raw.jsonl");
    size_t stratum_lines = 0, payload_lines = 0;
    for (const auto& line : printed) {
        const auto parsed = nlohmann::json::parse(line, nullptr, false);
        ASSERT_TRUE(parsed.is_object()) << line;
        if (parsed.contains("rule")) {
            live_text += line + "\n";
            continue;
        }
        all_events << line << "\n";
        if (parsed["type"] == "stratum") {
            ++stratum_lines;
            continue;
        }
        if (parsed["type"] == "net_payload" && parsed["process"]["pid"] == miner) ++payload_lines;
        raw_events << line << "\n";
    }
    all_events.close();
    raw_events.close();
    const auto live = of_miner(live_text);
    ASSERT_FALSE(live.empty());
    ASSERT_GT(stratum_lines, 0u) << "the agent derived no stratum event";
    ASSERT_GT(payload_lines, 0u) << "no payload sample of the miner was printed";

    for (const auto& source : {dir / "events.jsonl", dir / "raw.jsonl", journal_dir}) {
        const auto replayed = gpuguard::testing::run_command(
            {GPUGUARD_BINARY, "replay", "--stats", source.string()}, 60s);
        ASSERT_EQ(replayed.exit_code, 0) << source << ": " << replayed.stderr_text;
        EXPECT_EQ(of_miner(replayed.stdout_text), live) << source << "\n" << replayed.stderr_text;
        if (source == dir / "raw.jsonl") {
            EXPECT_NE(replayed.stderr_text.find(" stratum events derived from payloads"),
                      std::string::npos)
                << replayed.stderr_text;
            EXPECT_EQ(replayed.stderr_text.find(" 0 stratum events derived"), std::string::npos)
                << "replay of raw events derived nothing: " << replayed.stderr_text;
        }
    }
}

// XMRig's login with a real 95-character Monero address and its algorithm
// list is longer than the 512 bytes the sensor captures; the pool never
// answers (egress filtered, pool down). The running agent recognises the cut
// line alone: GG-CORR-0003 on the miner, the wallet cut in the alert.
TEST(StratumAgentTest, a_cut_login_is_detected_without_the_pools_answer) {
    GG_REQUIRE_PRIVILEGED();
    using namespace std::chrono_literals;
    gpuguard::testing::TempDir dir("gg-cut-login");
    const std::string node = (dir / "gpu0").string();
    ASSERT_EQ(mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0);
    const auto config = dir / "gpuguard.yaml";
    std::ofstream(config) << "sensor:\n  extra_gpu_devices: [\"1:7\"]\n  connect_loopback: true\n"
                          << "control:\n  socket: \"\"\njournal:\n  enabled: false\n";
    gpuguard::testing::Subprocess agent(
        {GPUGUARD_BINARY, "run", "--config", config.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();

    const std::string wallet =
        "48edfHu7V9Z84YzzMa6fUueoELZ9ZRXq9VetWzYGzKt52XU5xvqgzYnDK9URnRoJMk1j8nLwEVsaSWJ4fhdUyZijBG"
        "UicoD";
    const std::string login =
        R"({"id":1,"jsonrpc":"2.0","method":"login","params":{"login":")" + wallet +
        R"(","pass":"x","agent":"XMRig/6.21.0 (Linux x86_64) libuv/1.44.2 gcc/12.2.0","rigid":"",)"
        R"("algo":["cn/1","cn/2","cn/r","cn/fast","cn/half","cn/xao","cn/rto","cn/rwz","cn/zls",)"
        R"("cn/double","cn/ccx","cn-lite/1","cn-heavy/0","cn-heavy/tube","cn-heavy/xhv","cn-pico",)"
        R"("cn-pico/tlo","cn/upx2","rx/0","rx/wow","rx/arq","rx/graft","rx/sfx","rx/keva",)"
        R"("argon2/chukwa","argon2/chukwav2","argon2/ninja","ghostrider"]}})"
        "\n";
    ASSERT_GT(login.size(), 512u);
    std::atomic<int> lines_seen{0};
    gpuguard::testing::TestServer pool("127.0.0.1", [&](const std::string&) {
        ++lines_seen;
        return std::vector<std::string>{};  // never answers
    });
    ASSERT_TRUE(pool.ok());
    const uint16_t port = pool.port();
    int done[2];
    ASSERT_EQ(pipe2(done, O_CLOEXEC), 0);
    const pid_t miner = fork();
    ASSERT_GE(miner, 0);
    if (miner == 0) {
        prctl(PR_SET_NAME, "kworker-cut");
        close(done[1]);
        const int gpu = open(node.c_str(), O_RDWR);
        const int fd = gpu < 0 ? -1 : gpuguard::testing::connect_v4("127.0.0.1", port);
        if (fd < 0 || !gpuguard::testing::write_all(fd, login)) _exit(2);
        pollfd wait{done[0], POLLIN, 0};
        poll(&wait, 1, 20000);
        _exit(0);
    }
    gpuguard::testing::ChildReaper reaper(miner);
    close(done[0]);
    std::vector<std::string> printed;
    const auto detection = wait_for_rule(agent, "GG-CORR-0003", miner, 10s, printed);
    close(done[1]);
    ASSERT_TRUE(detection) << agent.stderr_text();
    // The agent can judge the sampled bytes before the pool's thread has read
    // its line: wait for the pool (bounded) instead of racing it.
    for (int tries = 0; tries < 500 && lines_seen.load() == 0; ++tries)
        std::this_thread::sleep_for(10ms);
    EXPECT_EQ(lines_seen.load(), 1) << "the pool got the login and said nothing";
    const std::string text = detection->dump();
    EXPECT_EQ(text.find(wallet), std::string::npos) << "wallet in the alert";
    EXPECT_NE(text.find("48edfHu7"), std::string::npos) << text;
    // The miner named itself kworker-cut: GG-CORR-0003 for its login only.
    expect_whole_output(agent, printed,
                        {{"GG-CORR-0003", miner, "critical"},
                         {"GG-CORR-0004", miner, "critical", /*optional=*/true}},
                        {miner});
}

}  // namespace
}  // namespace gpuguard::agent
