// NVIDIA Xids seen by the real agent: the fake libnvidia-ml.so.1 raises
// them on its event API as a running agent's fake GPU moves through its
// steps (the step file), the agent's NVML event thread takes them, and the
// correlator blames a process only for the application Xids raised while
// it was the GPU's lone holder (GG-CORR-0035): three page faults with the
// prober alone on the GPU are a warning naming them; the same Xids and a
// hardware one while a training job shares the GPU blame nobody, which a
// later Xid of the prober's, reported after them, shows was judged.
#include <chrono>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/bpf/agent_detect_fixture.h"
#include "tests/support/fake_nvml_script.h"
#include "tests/support/run_command.h"
#include "tests/support/time_bound.h"

namespace {

using namespace std::chrono_literals;
using gpuguard::testing::AgentDetectTest;
using gpuguard::testing::FakeH100;
using gpuguard::testing::Subprocess;
using gpuguard::testing::time_bound;

TEST_F(AgentDetectTest, xids_are_blamed_on_a_lone_holder_and_on_nobody_on_a_shared_gpu) {
    auto prober = start_gpu_worker("gg-prober");
    auto trainer = start_gpu_worker("gg-trainer");
    ASSERT_EQ(prober->ask('g'), 0);
    ASSERT_EQ(trainer->ask('g'), 0);
    const auto step_file = dir_ / "nvml-step";
    std::ofstream(step_file) << "0\n";
    const auto on_gpu = [&](std::vector<pid_t> pids) {
        FakeH100 gpu{.gpu_utilization = 60,
                     .memory_utilization = 30,
                     .memory_used = 4ull << 30,
                     .processes = {}};
        for (const pid_t pid : pids) gpu.processes.push_back({pid, 1ull << 30, 0});
        return gpu;
    };
    const auto script = dir_ / "nvml.json";
    std::ofstream(script) << gpuguard::testing::fake_nvml_script(
        {on_gpu({prober->pid(), trainer->pid()}),
         on_gpu({prober->pid()}),                  // the prober alone: three page faults
         on_gpu({prober->pid(), trainer->pid()}),  // a shared GPU: two of its own and an ECC one
         on_gpu({prober->pid()})},                 // the prober alone again: an exception
        step_file.string(), {{}, {31, 31, 31}, {31, 43, 79}, {13}});
    const auto rules = dir_ / "none.yaml";
    std::ofstream(rules) << "rules: []\n";  // the built-in rules only
    use_fake_gpu(rules);
    auto started = start_agent_playing(script);
    Subprocess& agent = *started;
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();

    std::ofstream(step_file) << "1\n";
    auto detection = wait_for_detection(agent, prober->pid(), "GG-CORR-0035", time_bound(10s));
    // The first Xid alone is a notice; the third raises it.
    while (detection && (*detection)["log"]["level"] != "warning") {
        detection = wait_for_detection(agent, prober->pid(), "GG-CORR-0035", time_bound(10s));
    }
    ASSERT_TRUE(detection) << agent.stderr_text();
    const std::string text = detection->dump();
    EXPECT_NE(text.find("NVIDIA Xid 31 (GPU memory page fault, caused by the application) on "
                        "GPU 0 while " +
                        std::to_string(prober->pid()) + " (gg-prober) was on it"),
              std::string::npos)
        << text;

    // Shared: the Xids are taken and journaled, and blame neither.
    std::ofstream(step_file) << "2\n";
    ASSERT_TRUE(
        agent.wait_for_stderr("NVIDIA Xid 79 (GPU has fallen off the bus, hardware) on "
                              "GPU 0, 2 process(es) on it",
                              time_bound(10s)))
        << agent.stderr_text();
    // The prober alone again: its Xid comes after the shared ones, so once
    // its update is out they were judged.
    std::ofstream(step_file) << "3\n";
    const auto marker = wait_for_detection(agent, prober->pid(), "GG-CORR-0035", time_bound(10s));
    ASSERT_TRUE(marker) << agent.stderr_text();
    EXPECT_NE(marker->dump().find("NVIDIA Xid 13"), std::string::npos) << marker->dump();
    EXPECT_EQ(marker->dump().find("NVIDIA Xid 43"), std::string::npos) << marker->dump();
    // The notice the first Xid raised, then the warning: for the prober only.
    expect_whole_output(
        agent,
        {{"GG-CORR-0035", prober->pid(), "notice"}, {"GG-CORR-0035", prober->pid(), "warning"}},
        {prober->pid(), trainer->pid()});
}

}  // namespace
