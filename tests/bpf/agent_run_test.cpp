// `gpuguard run` end to end: the binary loads, prints a JSON line for an
// open of a registered node, and leaves no program behind after SIGTERM.
#include <fstream>
#include <thread>

#include <bpf/bpf.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "tests/support/child_process.h"
#include "tests/support/privileged.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::testing::run_command;
using gpuguard::testing::Subprocess;
using gpuguard::testing::TempDir;

// Ids of loaded programs whose name starts with gg_ (all of ours do).
std::vector<uint32_t> gpuguard_program_ids() {
    std::vector<uint32_t> ids;
    uint32_t id = 0;
    while (bpf_prog_get_next_id(id, &id) == 0) {
        const int fd = bpf_prog_get_fd_by_id(id);
        if (fd < 0) continue;
        bpf_prog_info info{};
        uint32_t length = sizeof(info);
        if (bpf_obj_get_info_by_fd(fd, &info, &length) == 0 &&
            std::string(info.name).rfind("gg_", 0) == 0) {
            ids.push_back(id);
        }
        close(fd);
    }
    return ids;
}

bool wait_until_no_programs(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!gpuguard_program_ids().empty()) {
        if (std::chrono::steady_clock::now() >= deadline) return false;
        std::this_thread::sleep_for(20ms);
    }
    return true;
}

class AgentRunTest : public ::testing::Test {
  protected:
    void SetUp() override {
        GG_REQUIRE_PRIVILEGED();
        ASSERT_TRUE(wait_until_no_programs(3s)) << "gg_ programs loaded before the test";
    }
    TempDir dir_{"gg-run"};
};

TEST_F(AgentRunTest, prints_json_line_for_registered_node_and_detaches_on_sigterm) {
    const auto node = dir_ / "gpu0";
    ASSERT_EQ(mknod(node.c_str(), S_IFCHR | 0666, makedev(1, 3)), 0);
    const auto config = dir_ / "gpuguard.yaml";
    std::ofstream(config) << "sensor:\n  extra_gpu_devices: [\"1:3\"]\n";

    Subprocess agent({GPUGUARD_BINARY, "run", "--config", config.string(), "--print-events"});
    ASSERT_TRUE(agent.wait_for_stderr("ready", 20s)) << agent.stderr_text();
    EXPECT_FALSE(gpuguard_program_ids().empty());

    const std::string path = node.string();
    const pid_t child = gpuguard::testing::run_in_child(
        "gg-cli-opener", [&] { return open(path.c_str(), O_RDWR) >= 0 ? 0 : 1; });

    std::optional<nlohmann::json> seen;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!seen && std::chrono::steady_clock::now() < deadline) {
        auto line = agent.read_stdout_line(500ms);
        if (!line) continue;
        auto event = nlohmann::json::parse(*line);  // every stdout line is one JSON object
        if (event["process"]["pid"] == child && event["type"] == "gpu_open") seen = event;
    }
    ASSERT_TRUE(seen) << agent.stderr_text();
    const auto& event = *seen;
    EXPECT_EQ(event["v"], 1);
    EXPECT_EQ(event["type"], "gpu_open");
    EXPECT_EQ(event["process"]["comm"], "gg-cli-opener");
    EXPECT_EQ(event["process"]["ppid"], getpid());
    EXPECT_EQ(event["gpu_open"]["device"], "1:3");
    EXPECT_EQ(event["gpu_open"]["path"], path);
    EXPECT_EQ(event["gpu_open"]["syscall"], "openat");
    EXPECT_EQ(event["gpu_open"]["flags"], "O_RDWR");
    EXPECT_TRUE(event["gpu_open"]["error"].is_null());
    EXPECT_TRUE(event["time"].is_string());

    const auto code = agent.stop(SIGTERM, 10s);
    ASSERT_TRUE(code.has_value()) << "agent did not exit on SIGTERM";
    EXPECT_EQ(*code, 0) << agent.stderr_text();
    EXPECT_NE(agent.stderr_text().find("stopping on SIGTERM"), std::string::npos);
    EXPECT_TRUE(wait_until_no_programs(3s)) << "programs left after SIGTERM";
}

TEST_F(AgentRunTest, sigint_also_detaches) {
    // --log-level may follow the subcommand and wins over the config's log.level.
    Subprocess agent({GPUGUARD_BINARY, "run", "--log-level", "debug"});
    ASSERT_TRUE(agent.wait_for_stderr("ready", 20s)) << agent.stderr_text();
    EXPECT_NE(agent.stderr_text().find("debug"), std::string::npos);
    const auto code = agent.stop(SIGINT, 10s);
    ASSERT_TRUE(code.has_value());
    EXPECT_EQ(*code, 0);
    EXPECT_TRUE(wait_until_no_programs(3s));
}

TEST_F(AgentRunTest, bad_btf_path_fails_with_one_clear_line) {
    const auto result = run_command({GPUGUARD_BINARY, "run", "--btf", "/nonexistent/vmlinux"});
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_NE(result.stderr_text.find("BTF file /nonexistent/vmlinux (sensor.btf) does not exist"),
              std::string::npos)
        << result.stderr_text;
    EXPECT_TRUE(result.stdout_text.empty());
}

TEST_F(AgentRunTest, unprivileged_run_fails_with_one_clear_line) {
    const auto result = run_command({GPUGUARD_BINARY, "run"}, 30s, 65534);
    EXPECT_EQ(result.exit_code, 1);
    EXPECT_NE(result.stderr_text.find("cannot start the sensor: not running as root"),
              std::string::npos)
        << result.stderr_text;
    // One line: no libbpf noise, no tracefs confusion.
    EXPECT_EQ(std::count(result.stderr_text.begin(), result.stderr_text.end(), '\n'), 2)
        << result.stderr_text;  // the "starting" line and the error
}

TEST_F(AgentRunTest, unknown_log_level_is_rejected) {
    const auto result = run_command({GPUGUARD_BINARY, "--log-level", "loud", "run"});
    EXPECT_NE(result.exit_code, 0);
    EXPECT_NE(result.stderr_text.find("loud"), std::string::npos) << result.stderr_text;
    EXPECT_TRUE(gpuguard_program_ids().empty());
}

TEST_F(AgentRunTest, bad_config_names_file_line_and_key) {
    const auto config = dir_ / "bad.yaml";
    std::ofstream(config) << "sensor:\n  ring_buffer_kb: 4096\n  extra_gpu_devices: [\"195\"]\n";
    const auto result = run_command({GPUGUARD_BINARY, "run", "--config", config.string()});
    EXPECT_EQ(result.exit_code, 2);
    EXPECT_NE(result.stderr_text.find(config.string() + ":3:"), std::string::npos)
        << result.stderr_text;
    EXPECT_NE(result.stderr_text.find("sensor.extra_gpu_devices[0]"), std::string::npos);
    EXPECT_TRUE(gpuguard_program_ids().empty());
}

}  // namespace
