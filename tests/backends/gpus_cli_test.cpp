// `gpuguard gpus` end to end: the fake NVML found through LD_LIBRARY_PATH
// (the loader's own search, as on a real host) plus an amdgpu fixture tree.
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/backends/sysfs_fixture.h"
#include "tests/support/run_command.h"
#include "tests/support/temp_dir.h"

namespace gpuguard::backends {
namespace {

using namespace std::chrono_literals;

class GpusCliTest : public ::testing::Test {
  protected:
    void SetUp() override {
        testing::FixtureTree tree(dir_.path());
        tree.add_amdgpu(0, "0000:03:00.0");
        std::ofstream(dir_ / "nvml.json") << R"({"driver_version": "550.54.15", "devices": [
            {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-1", "bus_id": "00000000:3B:00.0",
             "minor": 0, "steps": [{"utilization": [87, 40], "temperature": 61,
             "compute_processes": [{"pid": 4242, "used_memory": 1073741824}],
             "gpm": {"sm": 95, "tensor": 0, "fp16": 0, "fp32": 1, "fp64": 0, "integer": 70,
                     "dram": 4}}]}]})";
        std::ofstream(dir_ / "gpuguard.yaml") << "backends:\n  sysfs_root: " << tree.sys().string()
                                              << "\n  proc_root: " << tree.proc().string() << "\n";
    }

    gpuguard::testing::CommandResult gpus(std::vector<std::string> extra) {
        std::vector<std::string> argv = {
            "/usr/bin/env",
            "LD_LIBRARY_PATH=" GPUGUARD_FAKE_NVML_DIR,
            "GPUGUARD_FAKE_NVML_SCRIPT=" + (dir_ / "nvml.json").string(),
            GPUGUARD_BINARY,
            "gpus",
            "-c",
            (dir_ / "gpuguard.yaml").string()};
        argv.insert(argv.end(), extra.begin(), extra.end());
        return gpuguard::testing::run_command(argv, 30s);
    }

    gpuguard::testing::TempDir dir_{"gg-gpus-cli"};
};

TEST_F(GpusCliTest, table_lists_nvidia_and_amd) {
    const auto result = gpus({});
    ASSERT_EQ(result.exit_code, 0) << result.stderr_text;
    EXPECT_NE(result.stdout_text.find("GPU VENDOR"), std::string::npos) << result.stdout_text;
    EXPECT_NE(result.stdout_text.find("nvidia   NVIDIA H100 80GB HBM3"), std::string::npos)
        << result.stdout_text;
    EXPECT_NE(result.stdout_text.find("amd      AMD Radeon RX 6900 XT"), std::string::npos);
    EXPECT_NE(result.stdout_text.find("4096 / 16368 MiB"), std::string::npos);
    // GPM's pipes under the H100 (two samples 200 ms apart), none under the AMD GPU.
    EXPECT_NE(result.stdout_text.find(
                  "    pipes: sm 95% tensor 0% fp16 0% fp32 1% fp64 0% int 70% dram 4%\n1 "),
              std::string::npos)
        << result.stdout_text;
    EXPECT_NE(result.stderr_text.find("NVIDIA backend on"), std::string::npos);
}

TEST_F(GpusCliTest, json_has_devices_metrics_and_processes) {
    const auto result = gpus({"--json"});
    ASSERT_EQ(result.exit_code, 0) << result.stderr_text;
    const auto json = nlohmann::json::parse(result.stdout_text, nullptr, false);
    ASSERT_FALSE(json.is_discarded()) << result.stdout_text;
    ASSERT_EQ(json["devices"].size(), 2u);
    EXPECT_EQ(json["devices"][0]["vendor"], "nvidia");
    EXPECT_EQ(json["devices"][0]["metrics"]["gpu_utilization_percent"], 87.0);
    EXPECT_FALSE(json["devices"][0]["metrics"].contains("fan_speed_percent"));
    EXPECT_EQ(json["devices"][1]["index"], 1);
    EXPECT_EQ(json["devices"][1]["metrics"]["memory_total_bytes"], 17163091968ull);
    ASSERT_EQ(json["processes"].size(), 1u);
    EXPECT_EQ(json["processes"][0]["pid"], 4242);
    EXPECT_EQ(json["processes"][0]["source"], "nvml");
}

TEST_F(GpusCliTest, watch_prints_json_lines_until_interrupted) {
    gpuguard::testing::Subprocess watch(
        {"/usr/bin/env", "LD_LIBRARY_PATH=" GPUGUARD_FAKE_NVML_DIR,
         "GPUGUARD_FAKE_NVML_SCRIPT=" + (dir_ / "nvml.json").string(), GPUGUARD_BINARY, "gpus",
         "-c", (dir_ / "gpuguard.yaml").string(), "--watch", "--json", "--interval", "100"});
    for (int i = 0; i < 3; ++i) {
        const auto line = watch.read_stdout_line(10s);
        ASSERT_TRUE(line) << watch.stderr_text();
        const auto json = nlohmann::json::parse(*line, nullptr, false);
        ASSERT_FALSE(json.is_discarded()) << *line;
        EXPECT_EQ(json["devices"].size(), 2u);
    }
    EXPECT_EQ(watch.stop(SIGINT, 10s), 0);
}

TEST_F(GpusCliTest, without_nvml_the_nvidia_backend_is_off_with_one_info_line) {
    const auto result = gpuguard::testing::run_command(
        {"/usr/bin/env", "LD_LIBRARY_PATH=/nonexistent", GPUGUARD_BINARY, "gpus", "-c",
         (dir_ / "gpuguard.yaml").string()},
        30s);
    ASSERT_EQ(result.exit_code, 0) << result.stderr_text;
    EXPECT_NE(result.stderr_text.find("NVIDIA backend off: cannot load libnvidia-ml.so.1"),
              std::string::npos)
        << result.stderr_text;
    EXPECT_EQ(result.stdout_text.find("nvidia "), std::string::npos);
    EXPECT_NE(result.stdout_text.find("AMD Radeon RX 6900 XT"), std::string::npos);
}

}  // namespace
}  // namespace gpuguard::backends
