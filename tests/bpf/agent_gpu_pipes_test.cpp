// What the GPU's pipes say, seen by the real agent: the fake
// libnvidia-ml.so.1 reports GPM readings as a running agent's fake GPU
// moves through its steps; the agent journals them with each telemetry
// sample and judges gpu_pipe_mix over them (rules with 3 s windows in
// place of GG-CORR-0036's 10 minutes). A hash kernel's mix while two
// processes share the GPU blames neither; the same mix with the hasher
// alone names it; a tensor-bound job alone is not a hash kernel, and the
// rule that looks for busy tensor pipes, naming it, shows it was judged.
// A replay of the journal judges the same. On a GPU in MIG mode each
// process is judged by its own GPU instance's pipes: the instance NVML
// places it in, or the one whose access node it holds open.
#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

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

constexpr const char* kPipeRules = R"(rules:
  - id: TEST-PIPES-HASH
    name: a hash kernel's pipe mix (3 s)
    severity: warning
    window: 1h
    when:
      gpu_held: true
      gpu_pipe_mix: {for: 3s, integer_or_dram_above_percent: 25, tensor_below_percent: 1, fp_below_percent: 5}
  - id: TEST-PIPES-TENSOR
    name: the tensor pipes busy (3 s)
    severity: notice
    window: 1h
    when:
      gpu_held: true
      gpu_pipe_mix: {for: 3s, tensor_above_percent: 10}
)";

// GPM readings in percent by the fake's keys: a hash kernel's (integer
// bound) and a training step's (tensor bound).
using PipeMix = std::vector<std::pair<std::string, unsigned>>;
const PipeMix kHashMix = {{"sm", 95},  {"tensor", 0},   {"fp16", 0}, {"fp32", 1},
                          {"fp64", 0}, {"integer", 70}, {"dram", 4}};
const PipeMix kTensorMix = {{"sm", 92},  {"tensor", 40}, {"fp16", 22}, {"fp32", 10},
                            {"fp64", 0}, {"integer", 8}, {"dram", 35}};

nlohmann::json gpm_json(const PipeMix& mix) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [metric, percent] : mix) out[metric] = percent;
    return out;
}

// The fake NVML's H100 in MIG mode, GPU instances 1 and 2 (one compute
// instance each), listing `processes`: the whole GPU's pipes mix a hash
// kernel and a training step, instance 1's are the hash kernel's alone,
// instance 2's the training step's.
nlohmann::json mig_script(const nlohmann::json& processes) {
    auto script = nlohmann::json::parse(gpuguard::testing::fake_nvml_script(FakeH100{}));
    auto& device = script["devices"][0];
    device["mig_mode"] = {1, 1};
    device["mig_instances"] = nlohmann::json::array(
        {{{"gpu_instance", 1},
          {"compute_instance", 0},
          {"uuid", "MIG-aaaa-1111"},
          {"steps", nlohmann::json::array({{{"memory", {42949672960ull, 0, 42949672960ull}}}})}},
         {{"gpu_instance", 2},
          {"compute_instance", 0},
          {"uuid", "MIG-bbbb-2222"},
          {"steps", nlohmann::json::array({{{"memory", {42949672960ull, 0, 42949672960ull}}}})}}});
    auto& step = device["steps"][0];
    step.erase("utilization");  // NOT_SUPPORTED on a MIG GPU
    step["compute_processes"] = processes;
    step["graphics_processes"] = nlohmann::json::array();
    step["gpm"] = {{"sm", 93}, {"tensor", 20}, {"fp16", 11}, {"fp32", 5}, {"integer", 39}};
    step["gpm_mig"] = {{"1", gpm_json(kHashMix)}, {"2", gpm_json(kTensorMix)}};
    return script;
}

class AgentPipesTest : public AgentDetectTest {
  protected:
    // The agent on the fake NVML playing `script`, judging with kPipeRules
    // (`more_backends`: further lines under backends:).
    std::unique_ptr<Subprocess> start_judging_pipes(const std::filesystem::path& script,
                                                    const std::string& more_backends = "") {
        std::ofstream(rules_) << kPipeRules;
        use_fake_gpu(rules_, more_backends);
        return start_agent_playing(script);
    }
    // On the MIG GPU of mig_script: the hasher named by its slice's hash
    // mix and the trainer by its tensor work, nothing else for either, and
    // the journal's replay the same. The live detections, for more checks.
    std::pair<nlohmann::json, nlohmann::json> expect_judged_by_their_slices(Subprocess& agent,
                                                                            pid_t hasher,
                                                                            pid_t trainer) {
        const auto hash = wait_for_detection(agent, hasher, "TEST-PIPES-HASH", time_bound(15s));
        EXPECT_TRUE(hash) << agent.stderr_text();
        if (hash) {
            EXPECT_NE(hash->dump().find("integer 70% DRAM 4% tensor 0% FP (busiest) 1%"),
                      std::string::npos)
                << hash->dump();
        }
        const auto tensor =
            wait_for_detection(agent, trainer, "TEST-PIPES-TENSOR", time_bound(15s));
        EXPECT_TRUE(tensor) << agent.stderr_text();
        if (tensor) {
            EXPECT_NE(tensor->dump().find("tensor 40%"), std::string::npos) << tensor->dump();
        }
        expect_whole_output(
            agent,
            {{"TEST-PIPES-HASH", hasher, "warning"}, {"TEST-PIPES-TENSOR", trainer, "notice"}},
            {hasher, trainer});
        // The journal carries each slice's pipes and what places each
        // process in its slice: replay judges the same.
        const auto replayed = replay_journal(rules_);
        EXPECT_EQ(replayed.exit_code, 0) << replayed.stderr_text;
        EXPECT_EQ(replayed_pids(replayed, "TEST-PIPES-HASH"), std::vector<pid_t>{hasher})
            << replayed.stdout_text.substr(0, 4000);
        EXPECT_EQ(replayed_pids(replayed, "TEST-PIPES-TENSOR"), std::vector<pid_t>{trainer});
        return {hash.value_or(nlohmann::json()), tensor.value_or(nlohmann::json())};
    }

    const std::filesystem::path rules_ = dir_ / "pipes.yaml";
};

TEST_F(AgentPipesTest, gpm_pipes_name_a_lone_hash_kernel_not_a_shared_gpu_or_a_tensor_job) {
    auto hasher = start_gpu_worker("gg-hasher");
    auto trainer = start_gpu_worker("gg-trainer");
    ASSERT_EQ(hasher->ask('g'), 0);
    ASSERT_EQ(trainer->ask('g'), 0);
    const auto step_file = dir_ / "nvml-step";
    std::ofstream(step_file) << "0\n";
    const auto on_gpu = [&](std::vector<pid_t> pids, const PipeMix& gpm) {
        FakeH100 gpu{.gpu_utilization = 90,
                     .memory_utilization = 30,
                     .memory_used = 4ull << 30,
                     .processes = {},
                     .gpm = gpm};
        for (const pid_t pid : pids) gpu.processes.push_back({pid, 1ull << 30, 0});
        return gpu;
    };
    const auto script = dir_ / "nvml.json";
    std::ofstream(script) << gpuguard::testing::fake_nvml_script(
        {on_gpu({hasher->pid(), trainer->pid()}, kHashMix),  // shared: nobody's
         on_gpu({hasher->pid()}, kHashMix),                  // the hasher alone
         on_gpu({trainer->pid()}, kTensorMix)},              // the trainer alone
        step_file.string());
    auto started = start_judging_pipes(script);
    Subprocess& agent = *started;
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();

    // Shared for well over a window: what the agent journals carries the
    // pipes (the journal is read back at the end); nothing is raised.
    ASSERT_FALSE(wait_for_detection(agent, hasher->pid(), "TEST-PIPES-HASH", time_bound(4s)))
        << "a shared GPU's pipes are not one process's";
    std::ofstream(step_file) << "1\n";
    const auto hash = wait_for_detection(agent, hasher->pid(), "TEST-PIPES-HASH", time_bound(15s));
    ASSERT_TRUE(hash) << agent.stderr_text();
    EXPECT_EQ((*hash)["log"]["level"], "warning");
    const std::string text = hash->dump();
    EXPECT_NE(text.find("while it was alone on it, by their mean: integer 70% DRAM 4% tensor 0% "
                        "FP (busiest) 1%"),
              std::string::npos)
        << text;

    std::ofstream(step_file) << "2\n";
    const auto tensor =
        wait_for_detection(agent, trainer->pid(), "TEST-PIPES-TENSOR", time_bound(15s));
    ASSERT_TRUE(tensor) << agent.stderr_text();
    EXPECT_NE(tensor->dump().find("tensor 40%"), std::string::npos) << tensor->dump();
    // The hash rule never named the trainer, and the tensor rule never the hasher.
    expect_whole_output(agent,
                        {{"TEST-PIPES-HASH", hasher->pid(), "warning"},
                         {"TEST-PIPES-TENSOR", trainer->pid(), "notice"}},
                        {hasher->pid(), trainer->pid()});

    // The journal's telemetry carries the pipes: its replay judges the same.
    const auto replayed = replay_journal(rules_);
    ASSERT_EQ(replayed.exit_code, 0) << replayed.stderr_text;
    EXPECT_EQ(replayed_pids(replayed, "TEST-PIPES-HASH"), std::vector<pid_t>{hasher->pid()})
        << replayed.stdout_text.substr(0, 4000);
    EXPECT_EQ(replayed_pids(replayed, "TEST-PIPES-TENSOR"), std::vector<pid_t>{trainer->pid()});
}

// A GPU in MIG mode, live: the hasher runs in GPU instance 1, the trainer
// in GPU instance 2; the whole GPU's pipes mix both, each instance's own
// (nvmlGpmMigSampleGet) are apart. Each process is named by its slice's.
TEST_F(AgentPipesTest, gpm_pipes_of_a_mig_slice_name_the_process_alone_in_it) {
    auto hasher = start_gpu_worker("gg-mig-hasher");
    auto trainer = start_gpu_worker("gg-mig-trainer");
    ASSERT_EQ(hasher->ask('g'), 0);
    ASSERT_EQ(trainer->ask('g'), 0);
    auto script = mig_script({{{"pid", hasher->pid()},
                               {"used_memory", 1ull << 30},
                               {"gpu_instance", 1},
                               {"compute_instance", 0}},
                              {{"pid", trainer->pid()},
                               {"used_memory", 8ull << 30},
                               {"gpu_instance", 2},
                               {"compute_instance", 0}}});
    const auto script_path = dir_ / "nvml.json";
    std::ofstream(script_path) << script.dump();
    auto started = start_judging_pipes(script_path);
    Subprocess& agent = *started;
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    expect_judged_by_their_slices(agent, hasher->pid(), trainer->pid());
}

// The same GPU where NVML's process list does not say which instance each
// process runs in: the access node each holds open does
// (use_mig_access_nodes: GPU instance 1's is 1:7, the fixture's GPU node,
// instance 2's 1:5); the hasher holds the first, the trainer the second.
TEST_F(AgentPipesTest, gpm_pipes_of_a_mig_slice_place_a_process_by_its_access_node) {
    const std::string backends_tree = use_mig_access_nodes();
    const std::string gi2_node = (dir_ / "gpu1").string();
    const auto holding = [](const std::string& node) {
        return std::make_unique<Subprocess>(
            std::vector<std::string>{"/bin/sh", "-c", "exec 5<" + node + "; exec sleep 60"});
    };
    const auto hasher = holding(node_.string());
    const auto trainer = holding(gi2_node);
    auto script = mig_script({{{"pid", hasher->pid()}, {"used_memory", 1ull << 30}},
                              {{"pid", trainer->pid()}, {"used_memory", 8ull << 30}}});
    const auto script_path = dir_ / "nvml.json";
    std::ofstream(script_path) << script.dump();
    auto started = start_judging_pipes(script_path, backends_tree);
    Subprocess& agent = *started;
    ASSERT_TRUE(agent.wait_for_agent_ready(30s)) << agent.stderr_text();
    const auto [hash, tensor] = expect_judged_by_their_slices(agent, hasher->pid(), trainer->pid());
    // The alert's GPU is GPU 0's access node of instance 1.
    const auto& gpus = hash["gpuguard"]["gpus"];
    ASSERT_EQ(gpus.size(), 1u) << hash.dump();
    EXPECT_EQ(gpus[0]["minor"], 7) << hash.dump();
    EXPECT_EQ(gpus[0]["index"], 0) << hash.dump();
    EXPECT_EQ(gpus[0]["mig_gpu_instance"], 1) << hash.dump();
    EXPECT_EQ(tensor["gpuguard"]["gpus"][0]["mig_gpu_instance"], 2) << tensor.dump();
}

}  // namespace
