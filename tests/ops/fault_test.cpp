// Faults the agent must survive while it keeps detecting (issue 13): the
// GPU is lost under NVML (GPU_IS_LOST after the first sample), the SIEM
// collector is down (its sink queues, drops nothing), and a burst of
// processes that vanish while the agent inspects them (/proc races).
#include <fstream>
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
#include "tests/support/fake_nvml_script.h"
#include "tests/support/privileged.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::testing::ChildReaper;
using gpuguard::testing::Subprocess;
using gpuguard::testing::TempDir;

// Forks a child named `comm` that opens the fake GPU node and stays.
pid_t start_gpu_child(const std::string& comm, const std::string& node) {
    const pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_NAME, comm.c_str());
        if (open(node.c_str(), O_RDWR) < 0) _exit(1);
        for (int i = 0; i < 60; ++i) sleep(1);
        _exit(0);
    }
    return pid;
}

TEST(AgentFaults, lost_gpu_dead_collector_and_vanishing_processes_do_not_stop_detection) {
    GG_REQUIRE_PRIVILEGED();
    TempDir dir("gg-faults");
    const auto node = dir / "gpu0";
    ASSERT_EQ(mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
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
    std::ofstream(dir / "miner-rules.yaml") << R"(rules:
  - id: local-fault-miner
    name: Test miner on the fake GPU
    severity: critical
    confidence: 0.9
    process_name: ["gg-fault-miner"]
    tests:
      match: ["gg-fault-miner"]
      no_match: ["gg-fault"]
)";
    const auto config = dir / "gpuguard.yaml";
    std::ofstream(config) << gpuguard::testing::scratch_agent_config(
        dir.path(), "1:3",
        "backends:\n  interval_ms: 100\n  nvml_library: \"" GPUGUARD_FAKE_NVML_PATH
        "\"\n"
        "outputs:\n  - name: siem\n    type: tcp\n    address: " +
            collector.address() + "\n    queue_dir: " + (dir / "queue").string() +
            "\n    retry_initial_ms: 50\n    retry_max_ms: 200\n");
    Subprocess agent({"/usr/bin/env", "GPUGUARD_FAKE_NVML_SCRIPT=" + (dir / "nvml.json").string(),
                      GPUGUARD_BINARY, "run", "--config", config.string(), "--json"});
    ASSERT_TRUE(agent.wait_for_stderr("ready", 60s)) << agent.stderr_text();
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
    const pid_t miner = start_gpu_child("gg-fault-miner", node.string());
    ASSERT_GT(miner, 0);
    ChildReaper reaper(miner);
    bool detected = false;
    for (const auto deadline = std::chrono::steady_clock::now() + 10s;
         !detected && std::chrono::steady_clock::now() < deadline;) {
        auto line = agent.read_stdout_line(200ms);
        if (!line) continue;
        const auto record = nlohmann::json::parse(*line);
        detected = record["process"]["pid"] == miner && record["rule"]["id"] == "GG-CORR-0001";
    }
    EXPECT_TRUE(detected) << agent.stderr_text();

    // Status: the backend says the GPU is lost, the sink queues and drops nothing.
    nlohmann::json status;
    for (const auto deadline = std::chrono::steady_clock::now() + 10s;
         std::chrono::steady_clock::now() < deadline;) {
        const auto report = gpuguard::testing::run_command(
            {GPUGUARD_BINARY, "status", "--json", "-c", config.string()});
        ASSERT_EQ(report.exit_code, 0) << report.stderr_text << agent.stderr_text();
        status = nlohmann::json::parse(report.stdout_text);
        if (status["outputs"][0]["queue_records"].get<uint64_t>() > 0 &&
            status["outputs"][0]["retried"].get<uint64_t>() > 0) {
            break;
        }
        std::this_thread::sleep_for(100ms);
    }
    const auto& sink = status["outputs"][0];
    EXPECT_GE(sink["queue_records"].get<uint64_t>(), 1u) << sink;
    EXPECT_EQ(sink["sent"].get<uint64_t>(), 0u) << sink;
    EXPECT_EQ(sink["dropped"].get<uint64_t>(), 0u) << sink;
    EXPECT_FALSE(sink["healthy"].get<bool>()) << sink;
    EXPECT_GE(status["detections"]["raised"].get<uint64_t>(), 1u);

    // And it stops cleanly, with the alert still queued on disk for later.
    EXPECT_EQ(agent.stop(SIGTERM, 15s), 0) << agent.stderr_text();
    bool queued_on_disk = false;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(dir / "queue")) {
        queued_on_disk |= entry.is_regular_file() && entry.file_size() > 0;
    }
    EXPECT_TRUE(queued_on_disk);
}

}  // namespace
