// The agent never stalls on its output (issue 24): `gpuguard run` with its
// stdout a pipe that nobody reads, flooded with GPU opens and detections.
// The control socket still answers within a second, the lines it could not
// print are counted in `status` and /metrics, the journal holds every
// event, and SIGTERM ends it within two seconds.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/ops/service_support.h"
#include "tests/support/child_process.h"
#include "tests/support/privileged.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::testing::ChildReaper;
using gpuguard::testing::run_command;
using gpuguard::testing::TempDir;
using Clock = std::chrono::steady_clock;

// ~24 MB of event lines: past the stdout queue's 16 MiB. In batches, so
// that the 4 MiB ring buffer never overflows: every open reaches the agent.
constexpr int kFloodOpens = 60000;
constexpr int kFloodBatch = 1000;
constexpr auto kFloodPause = std::chrono::milliseconds(20);
constexpr int kMiners = 20;

using gpuguard::testing::file_text;

// Polls `path` until it contains `text`.
bool wait_for_text(const std::filesystem::path& path, const std::string& text,
                   std::chrono::milliseconds timeout) {
    for (const auto deadline = Clock::now() + timeout; Clock::now() < deadline;) {
        if (file_text(path).find(text) != std::string::npos) return true;
        std::this_thread::sleep_for(20ms);
    }
    return false;
}

// A child named `comm` that opens and closes `node` `opens` times (a pause
// after each kFloodBatch), then exits.
pid_t start_flooder(const std::string& comm, const std::string& node, int opens) {
    const pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_NAME, comm.c_str());
        const timespec pause{0, std::chrono::nanoseconds(kFloodPause).count()};
        for (int i = 0; i < opens; ++i) {
            const int fd = open(node.c_str(), O_RDONLY | O_CLOEXEC);
            if (fd < 0) _exit(1);
            close(fd);
            if (i % kFloodBatch == kFloodBatch - 1) nanosleep(&pause, nullptr);
        }
        _exit(0);
    }
    return pid;
}

// The agent, a child of the test: SIGKILLed and reaped when the test ends
// unless reap_within() reaped it (then its pid is never signalled again).
struct AgentChild {
    pid_t pid = -1;
    bool reaped = false;
    ~AgentChild() {
        if (pid > 0 && !reaped) {
            kill(pid, SIGKILL);
            waitpid(pid, nullptr, 0);
        }
    }
    // waitpid() within `timeout`; past it the agent is SIGKILLed and nullopt returned.
    std::optional<int> reap_within(std::chrono::milliseconds timeout) {
        int status = 0;
        for (const auto deadline = Clock::now() + timeout; waitpid(pid, &status, WNOHANG) == 0;) {
            if (Clock::now() >= deadline) {
                kill(pid, SIGKILL);
                waitpid(pid, nullptr, 0);
                reaped = true;
                return std::nullopt;
            }
            std::this_thread::sleep_for(5ms);
        }
        reaped = true;
        return status;
    }
};

// The value of the sample `series` (name and labels, as exposed) in a
// Prometheus exposition; nullopt when absent.
std::optional<double> sample_value(const std::string& exposition, const std::string& series) {
    std::istringstream lines(exposition);
    for (std::string line; std::getline(lines, line);) {
        if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
    }
    return std::nullopt;
}

class StalledOutput : public ::testing::TestWithParam<const char*> {};

// The parameter is what stdout carries besides events: "--json" adds the
// detections (ECS JSON), as a SIEM pipe would take them.
TEST_P(StalledOutput, unread_stdout_costs_counted_lines_never_status_shutdown_or_journal) {
    GG_REQUIRE_PRIVILEGED();
    TempDir dir("gg-stall");
    const auto node = dir / "gpu0";
    ASSERT_EQ(mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0);
    const uint16_t metrics_port = gpuguard::testing::free_loopback_port();
    ASSERT_NE(metrics_port, 0);
    gpuguard::testing::write_miner_rule(dir.path(), "gg-stall-miner");
    const auto config = dir / "gpuguard.yaml";
    std::ofstream(config) << gpuguard::testing::scratch_agent_config(
        dir.path(), "1:7",
        "metrics:\n  enabled: true\n  port: " + std::to_string(metrics_port) + "\n");

    int out[2];
    ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
    const auto log = dir / "agent.log";
    const int err = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ASSERT_GE(err, 0);
    std::vector<std::string> args = {GPUGUARD_BINARY, "run", "--config", config.string(),
                                     "--print-events"};
    const std::string extra = GetParam();
    if (!extra.empty()) args.push_back(extra);
    AgentChild agent{
        gpuguard::testing::spawn_with_output(args, out[1], err)};  // never outlives the test
    ASSERT_GT(agent.pid, 0);
    close(out[1]);
    close(err);
    // out[0] stays open and is never read: the pipe fills after 64 KiB.
    ASSERT_TRUE(wait_for_text(log, "[agent] ready", 30s)) << file_text(log);

    // Miners that the local rule names (detections), then the flood.
    std::vector<std::unique_ptr<ChildReaper>> miners;
    for (int i = 0; i < kMiners; ++i) {
        const pid_t miner = gpuguard::testing::start_gpu_holder("gg-stall-miner", node.string());
        ASSERT_GT(miner, 0);
        miners.push_back(std::make_unique<ChildReaper>(miner));
    }
    const pid_t flooder = start_flooder("gg-flooder", node.string(), kFloodOpens);
    ASSERT_GT(flooder, 0);
    int flood_status = 0;
    ASSERT_EQ(waitpid(flooder, &flood_status, 0), flooder);
    ASSERT_TRUE(WIFEXITED(flood_status) && WEXITSTATUS(flood_status) == 0);

    // The control socket answers while stdout is stuck, within a second,
    // and counts the lines stdout lost.
    const std::vector<std::string> status_command = {GPUGUARD_BINARY, "status", "--json",
                                                     "--config", config.string()};
    nlohmann::json status;
    for (const auto deadline = Clock::now() + 20s; Clock::now() < deadline;) {
        const auto asked = Clock::now();
        const auto report = run_command(status_command, 10s);
        const auto took = Clock::now() - asked;
        ASSERT_EQ(report.exit_code, 0) << report.stderr_text << file_text(log);
        EXPECT_LT(took, 1s) << "status took " << std::chrono::duration<double>(took).count()
                            << " s";
        status = nlohmann::json::parse(report.stdout_text);
        const uint64_t opens_seen = status["events"]["gpu_open"]["emitted"].get<uint64_t>();
        if (opens_seen >= kFloodOpens + kMiners &&
            status["stdout"]["dropped"].get<uint64_t>() > 0 &&
            status["detections"]["raised"].get<uint64_t>() >= kMiners) {
            break;
        }
        std::this_thread::sleep_for(100ms);
    }
    ASSERT_TRUE(status["stdout"].is_object()) << status.dump();
    const uint64_t dropped = status["stdout"]["dropped"].get<uint64_t>();
    EXPECT_GT(dropped, 0u) << status["stdout"].dump();
    EXPECT_FALSE(status["stdout"]["reader_gone"].get<bool>());
    EXPECT_EQ(status["dropped"].get<uint64_t>(), 0u) << "the kernel lost events: " << status.dump();
    EXPECT_GE(status["detections"]["raised"].get<uint64_t>(), static_cast<uint64_t>(kMiners));

    // /metrics says the same.
    httplib::Client metrics("127.0.0.1", metrics_port);
    metrics.set_read_timeout(2, 0);
    const auto scraped = metrics.Get("/metrics");
    ASSERT_TRUE(scraped) << "no answer from /metrics";
    ASSERT_EQ(scraped->status, 200);
    const auto dropped_metric =
        sample_value(scraped->body, "gpuguard_stdout_lines_total{state=\"dropped\"}");
    ASSERT_TRUE(dropped_metric.has_value()) << scraped->body;
    EXPECT_GE(*dropped_metric, static_cast<double>(dropped));
    EXPECT_TRUE(sample_value(scraped->body, "gpuguard_stdout_lines_total{state=\"written\"}"));

    // SIGTERM ends it within two seconds, with its programs detached.
    const auto signalled = Clock::now();
    ASSERT_EQ(kill(agent.pid, SIGTERM), 0);
    const auto stopped = agent.reap_within(10s);
    const auto stop_took = Clock::now() - signalled;
    ASSERT_TRUE(stopped.has_value()) << "no stop on SIGTERM within 10 s: " << file_text(log);
    EXPECT_LT(stop_took, 2s) << "SIGTERM took " << std::chrono::duration<double>(stop_took).count()
                             << " s";
    EXPECT_TRUE(WIFEXITED(*stopped) && WEXITSTATUS(*stopped) == 0) << file_text(log);
    EXPECT_NE(file_text(log).find("lines not printed in all"), std::string::npos) << file_text(log);
    close(out[0]);

    // The journal holds every GPU open of the flood, printed or not.
    const auto exported =
        run_command({GPUGUARD_BINARY, "journal", "export", "--dir", (dir / "journal").string(),
                     "--pid", std::to_string(flooder), "--type", "gpu_open"},
                    60s);
    ASSERT_EQ(exported.exit_code, 0) << exported.stderr_text;
    size_t journaled = 0;
    std::istringstream lines(exported.stdout_text);
    for (std::string line; std::getline(lines, line);) journaled += !line.empty();
    EXPECT_EQ(journaled, static_cast<size_t>(kFloodOpens));
}

INSTANTIATE_TEST_SUITE_P(EventsAndDetections, StalledOutput, ::testing::Values("", "--json"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                             return std::string(info.param).empty() ? "events"
                                                                    : "events_and_detections";
                         });

}  // namespace
