// Faults the agent must survive while it keeps detecting (issue 13): the
// GPU is lost under NVML (GPU_IS_LOST after the first sample), the SIEM
// collector is down (its sink queues, drops nothing), and a burst of
// processes that vanish while the agent inspects them (/proc races).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <thread>

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

#include "tests/ops/service_support.h"
#include "tests/support/child_process.h"
#include "tests/support/detection_ledger.h"
#include "tests/support/fake_nvml_script.h"
#include "tests/support/json_at.h"
#include "tests/support/privileged.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::testing::ChildReaper;
using gpuguard::testing::json_at;
using gpuguard::testing::Subprocess;
using gpuguard::testing::TempDir;

// Reads the agent's --json lines until GG-CORR-0001 names `miner` (10 s at
// most), calling `between_reads` before each read. How long after `since`
// it came, or nullopt.
std::optional<double> wait_for_miner_detection(Subprocess& agent, pid_t miner,
                                               std::chrono::steady_clock::time_point since,
                                               const std::function<void()>& between_reads = {},
                                               std::vector<std::string>* printed = nullptr) {
    for (const auto deadline = std::chrono::steady_clock::now() + 10s;
         std::chrono::steady_clock::now() < deadline;) {
        if (between_reads) between_reads();
        auto line = agent.read_stdout_line(100ms);
        if (!line) continue;
        if (printed) printed->push_back(*line);
        const auto record = nlohmann::json::parse(*line);
        if (json_at(record, "/process/pid") == miner &&
            json_at(record, "/rule/id") == "GG-CORR-0001") {
            return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() -
                                                             since)
                .count();
        }
    }
    return std::nullopt;
}

TEST(AgentFaults, lost_gpu_dead_collector_and_vanishing_processes_do_not_stop_detection) {
    GG_REQUIRE_PRIVILEGED();
    TempDir dir("gg-faults");
    const auto node = dir / "gpu0";
    ASSERT_EQ(mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0);
    gpuguard::testing::RefusedPort collector;  // the SIEM collector, down
    ASSERT_NE(collector.port(), 0);

    // Step 0: a healthy GPU; step 1 (written to the step file once the agent
    // runs): every call on it fails with GPU_IS_LOST.
    auto script = nlohmann::json::parse(gpuguard::testing::fake_nvml_script({}));
    auto lost = script["devices"][0]["steps"][0];
    lost["errors"] = {{"*", "GPU_IS_LOST"}};
    script["devices"][0]["steps"].push_back(lost);
    const auto step_file = dir / "nvml-step";
    std::ofstream(step_file) << "0\n";
    script["step_file"] = step_file.string();
    std::ofstream(dir / "nvml.json") << script.dump();
    gpuguard::testing::write_miner_rule(dir.path(), "gg-fault-miner");
    const auto config = dir / "gpuguard.yaml";
    std::ofstream(config) << gpuguard::testing::scratch_agent_config(
        dir.path(), "1:7",
        "backends:\n  interval_ms: 100\n  nvml_library: \"" GPUGUARD_FAKE_NVML_PATH
        "\"\n"
        "outputs:\n  - name: siem\n    type: tcp\n    address: " +
            collector.address() + "\n    queue_dir: " + (dir / "queue").string() +
            "\n    retry_initial_ms: 50\n    retry_max_ms: 200\n");
    Subprocess agent({"/usr/bin/env", "GPUGUARD_FAKE_NVML_SCRIPT=" + (dir / "nvml.json").string(),
                      GPUGUARD_BINARY, "run", "--config", config.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(60s)) << agent.stderr_text();
    gpuguard::testing::replace_file(step_file, "1\n");  // the GPU falls off the bus
    EXPECT_TRUE(agent.wait_for_stderr("GPU is lost", 10s)) << agent.stderr_text();

    // Processes that exit while the agent reads their /proc entries.
    for (int i = 0; i < 300; ++i) {
        const pid_t pid = fork();
        if (pid == 0) {
            prctl(PR_SET_NAME, "gg-fault-miner");  // matches the rule, then gone
            const int fd = open(node.c_str(), O_RDWR);
            _exit(fd >= 0 ? 0 : 1);
        }
        waitpid(pid, nullptr, 0);
    }

    // The GPU is lost by now and the collector is dead: a miner is still caught.
    const pid_t miner = gpuguard::testing::start_gpu_holder("gg-fault-miner", node.string());
    ASSERT_GT(miner, 0);
    ChildReaper reaper(miner);
    std::vector<std::string> printed;  // for the whole-output check
    EXPECT_TRUE(
        wait_for_miner_detection(agent, miner, std::chrono::steady_clock::now(), {}, &printed))
        << agent.stderr_text();

    // Status: the backend says the GPU is lost, the sink queues and drops nothing.
    nlohmann::json status;
    for (const auto deadline = std::chrono::steady_clock::now() + 10s;
         std::chrono::steady_clock::now() < deadline;) {
        const auto report = gpuguard::testing::run_command(
            {GPUGUARD_BINARY, "status", "--json", "-c", config.string()});
        ASSERT_EQ(report.exit_code, 0) << report.stderr_text << agent.stderr_text();
        status = nlohmann::json::parse(report.stdout_text);
        const auto& output = status["outputs"][0];
        if (output["queue_records"].get<uint64_t>() > 0 && output["retried"].get<uint64_t>() > 0 &&
            output["persisted"] == output["queued"]) {
            break;
        }
        std::this_thread::sleep_for(100ms);
    }
    const auto& sink = status["outputs"][0];
    EXPECT_GE(sink["queue_records"].get<uint64_t>(), 1u) << sink;
    EXPECT_EQ(sink["persisted"].get<uint64_t>(), sink["queued"].get<uint64_t>())
        << "queued alerts not yet on disk: " << sink;
    EXPECT_EQ(sink["sent"].get<uint64_t>(), 0u) << sink;
    EXPECT_EQ(sink["dropped"].get<uint64_t>(), 0u) << sink;
    EXPECT_FALSE(sink["healthy"].get<bool>()) << sink;
    EXPECT_GE(status["detections"]["raised"].get<uint64_t>(), 1u);

    // And it stops cleanly, with the alert still queued on disk for later.
    EXPECT_EQ(agent.stop(SIGTERM, 15s), 0) << agent.stderr_text();
    // The miner's detections (its name at exec, then on the GPU), exactly (the 300 short-lived
    // namesakes are judged or not as they race their exit; the lost GPU changes nothing).
    while (auto line = agent.read_stdout_line(0ms)) printed.push_back(*line);
    EXPECT_TRUE(gpuguard::testing::DetectionLedger(printed).expect_exactly(
        {{"GG-CORR-0012", miner, "error"}, {"GG-CORR-0001", miner, "critical"}}, {miner}));
    bool queued_on_disk = false;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir / "queue")) {
        queued_on_disk |= entry.is_regular_file() && entry.file_size() > 0;
    }
    EXPECT_TRUE(queued_on_disk);
}

// Resident memory of `pid` in KiB (VmRSS), 0 when it is gone.
uint64_t rss_kib(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("VmRSS:", 0) == 0) return std::stoull(line.substr(6));
    }
    return 0;
}

// One short process: vfork (no page tables copied, so the storm runs as
// fast as the kernel creates tasks), then exec of /bin/true or exit; reaped.
__attribute__((noinline)) void spawn_short_process(bool exec) {
    static char* const argv[] = {const_cast<char*>("/bin/true"), nullptr};
    const pid_t child = vfork();
    if (child == 0) {
        if (exec) execv("/bin/true", argv);
        _exit(0);
    }
    if (child > 0) waitpid(child, nullptr, 0);
}

// A child that creates short processes until `seconds` pass, every fourth
// one an exec (exec events with argv). The count comes back through `count_fd`.
pid_t start_storm(int seconds, int count_fd) {
    const pid_t pid = fork();
    if (pid != 0) return pid;
    prctl(PR_SET_NAME, "gg-storm");
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    uint64_t spawned = 0;
    while (std::chrono::steady_clock::now() < end) {
        for (int i = 0; i < 64; ++i, ++spawned) spawn_short_process(spawned % 4 == 0);
    }
    (void)!write(count_fd, &spawned, sizeof(spawned));
    _exit(0);
}

// 30 s of process churn from two storm children (as fast as this host forks)
// while a third opens and closes the GPU node: the agent's memory stays
// bounded, every kernel record is either delivered or counted as dropped
// (and a drop is logged), the GPU opens reach it at the default ring size,
// and a miner started in the middle of the storm is still detected.
TEST(AgentFaults, exec_and_fork_storm_keeps_memory_bounded_counts_drops_and_still_detects) {
    GG_REQUIRE_PRIVILEGED();
    TempDir dir("gg-storm");
    const auto node = dir / "gpu0";
    ASSERT_EQ(mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 7)), 0);
    gpuguard::testing::write_miner_rule(dir.path(), "gg-storm-miner");
    const auto config = dir / "gpuguard.yaml";
    std::ofstream(config) << gpuguard::testing::scratch_agent_config(dir.path(), "1:7");
    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_agent_ready(60s)) << agent.stderr_text();
    auto status = [&] {
        const auto report = gpuguard::testing::run_command(
            {GPUGUARD_BINARY, "status", "--json", "-c", config.string()}, 20s);
        EXPECT_EQ(report.exit_code, 0) << report.stderr_text;
        return nlohmann::json::parse(report.stdout_text, nullptr, false);
    };
    std::this_thread::sleep_for(1s);
    const uint64_t rss_ready = rss_kib(agent.pid());

    constexpr int kSeconds = 30;
    int counts[2];
    ASSERT_EQ(pipe(counts), 0);
    const pid_t storms[] = {start_storm(kSeconds, counts[1]), start_storm(kSeconds, counts[1])};
    close(counts[1]);
    int opened_pipe[2];
    ASSERT_EQ(pipe(opened_pipe), 0);
    const pid_t opener = fork();
    if (opener == 0) {
        prctl(PR_SET_NAME, "gg-storm-open");
        uint64_t opened = 0;
        for (const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(kSeconds);
             std::chrono::steady_clock::now() < end; ++opened) {
            close(open(node.c_str(), O_RDWR));
            usleep(2000);
        }
        (void)!write(opened_pipe[1], &opened, sizeof(opened));
        _exit(0);
    }
    close(opened_pipe[1]);

    uint64_t rss_peak = rss_ready;
    const auto storm_start = std::chrono::steady_clock::now();
    auto sample_until = [&](std::chrono::steady_clock::time_point until) {
        while (std::chrono::steady_clock::now() < until) {
            rss_peak = std::max(rss_peak, rss_kib(agent.pid()));
            std::this_thread::sleep_for(250ms);
        }
    };
    sample_until(storm_start + std::chrono::seconds(kSeconds / 2));
    // In the middle of the storm: a miner opens the GPU and is caught.
    const auto miner_started = std::chrono::steady_clock::now();
    const pid_t miner = gpuguard::testing::start_gpu_holder("gg-storm-miner", node.string());
    ASSERT_GT(miner, 0);
    ChildReaper reaper(miner);
    const auto detected_after_ms = wait_for_miner_detection(
        agent, miner, miner_started, [&] { rss_peak = std::max(rss_peak, rss_kib(agent.pid())); });
    EXPECT_TRUE(detected_after_ms) << "miner not detected during the storm\n"
                                   << agent.stderr_text();
    sample_until(storm_start + std::chrono::seconds(kSeconds));
    uint64_t spawned = 0, opened = 0;
    for (pid_t storm : storms) {
        uint64_t count = 0;
        if (read(counts[0], &count, sizeof(count)) == sizeof(count)) spawned += count;
        waitpid(storm, nullptr, 0);
    }
    ASSERT_EQ(read(opened_pipe[0], &opened, sizeof(opened)), static_cast<ssize_t>(sizeof(opened)));
    waitpid(opener, nullptr, 0);
    close(counts[0]);
    close(opened_pipe[0]);

    // Drained: every record the kernel submitted was delivered.
    nlohmann::json after;
    uint64_t emitted = 0;
    for (const auto deadline = std::chrono::steady_clock::now() + 20s;
         std::chrono::steady_clock::now() < deadline;) {
        after = status();
        emitted = 0;
        for (const auto& [type, counts_of] : after["events"].items()) {
            emitted += counts_of["emitted"].get<uint64_t>();
        }
        if (emitted == after["delivered"].get<uint64_t>() + after["decode_errors"].get<uint64_t>())
            break;
        std::this_thread::sleep_for(200ms);
    }
    std::this_thread::sleep_for(6s);  // past the agent's 5 s drop check
    const uint64_t rss_after = rss_kib(agent.pid());
    rss_peak = std::max(rss_peak, rss_after);
    const auto& events = after["events"];
    const uint64_t dropped = after["dropped"].get<uint64_t>();
    std::cerr << "storm: " << spawned << " processes in " << kSeconds << " s ("
              << spawned / kSeconds << "/s), " << opened << " GPU opens; kernel records " << emitted
              << " delivered, " << dropped << " dropped (exec " << events["exec"]["dropped"]
              << ", fork " << events["fork"]["dropped"] << ", exit " << events["exit"]["dropped"]
              << ", gpu_open " << events["gpu_open"]["dropped"] << "); agent RSS "
              << rss_ready / 1024 << " MiB ready, peak " << rss_peak / 1024 << " MiB, "
              << rss_after / 1024 << " MiB after; process table "
              << after["process_table"]["entries"] << " entries; miner detected after "
              << detected_after_ms.value_or(-1) << " ms; journal dropped "
              << after["journal"].dump() << "\n";

    EXPECT_GT(spawned, 10'000u) << "the storm did not storm";
    EXPECT_EQ(emitted, after["delivered"].get<uint64_t>() + after["decode_errors"].get<uint64_t>())
        << "records the kernel submitted went missing";
    EXPECT_GE(events["fork"]["emitted"].get<uint64_t>() + events["fork"]["dropped"].get<uint64_t>(),
              spawned)
        << "fork records neither delivered nor counted as dropped";
    EXPECT_GE(events["gpu_open"]["emitted"].get<uint64_t>(), opened)
        << "GPU opens lost at the default ring size";
    EXPECT_EQ(events["gpu_open"]["dropped"].get<uint64_t>(), 0u);
    if (dropped > 0) {
        EXPECT_NE(agent.stderr_text().find("ring buffer full"), std::string::npos)
            << "records dropped without a warning";
    }
    EXPECT_LE(after["process_table"]["entries"].get<uint64_t>(),
              after["process_table"]["max_entries"].get<uint64_t>());
    EXPECT_LT(rss_peak, rss_ready + 128 * 1024) << "agent memory grew by more than 128 MiB";
    EXPECT_EQ(agent.stop(SIGTERM, 15s), 0) << agent.stderr_text();
}

}  // namespace
