// gpu_pipe_mix (agent/detect/conditions/gpu_pipe_mix.cpp): the GPU's pipes
// (NVML GPM, as telemetry events carry them) by their means over `for`,
// while the process was alone on the GPU at every sample. The samples go
// through the evidence book as the correlator records telemetry.
#include "condition_fixture.h"

namespace gpuguard::agent::condition_testing {
namespace {

class GpuPipeMixTest : public ConditionTest {
  protected:
    static constexpr uint32_t kPid = 500;
    static constexpr uint32_t kOther = 501;
    const rules::CorrelationRule hash_ = rule_when(
        "{gpu_pipe_mix: {for: 10m, integer_or_dram_above_percent: 25, tensor_below_percent: 1, "
        "fp_below_percent: 5}}");
    const rules::CorrelationRule tensor_busy_ =
        rule_when("{gpu_pipe_mix: {for: 10m, tensor_above_percent: 10}}");

    // One telemetry sample of GPU 0 listing `pids`, its pipes `pipes`.
    void sample(uint64_t ts_s, GpuPipes pipes, std::vector<uint32_t> pids = {kPid}) {
        Telemetry telemetry;
        telemetry.vendor = "nvidia";
        telemetry.devices = {"195:0"};
        telemetry.utilization_percent = 90;
        for (const uint32_t pid : pids) {
            telemetry.processes.push_back(ProcessGpuUsage{pid, 4ull << 30, 90.0});
        }
        telemetry.pipes = pipes;
        book_.record_telemetry(ts_s * kSecond, telemetry);
    }
    // A sample every 30 s from 1000 s to 1600 s: the window [1000 s, 1600 s].
    void samples(GpuPipes pipes, std::vector<uint32_t> pids = {kPid}) {
        for (uint64_t ts_s = 1000; ts_s <= 1600; ts_s += 30) sample(ts_s, pipes, pids);
    }
    static constexpr uint64_t kNow = 1600 * kSecond;
};

// An integer-bound hash kernel (kHeavyHash, SHA-256d) and a memory-bound
// one (Ethash, KawPow): tensor and FP pipes idle.
TEST_F(GpuPipeMixTest, a_hash_kernels_mix_holds_integer_or_dram_bound) {
    exec(kPid, "/opt/w/worker");
    open_gpu(kPid);
    GpuPipes integer_bound{.sm_active_percent = 97.0,
                           .tensor_active_percent = 0.0,
                           .fp64_active_percent = 0.0,
                           .fp32_active_percent = 0.4,
                           .fp16_active_percent = 0.0,
                           .integer_active_percent = 71.0,
                           .dram_active_percent = 3.0};
    samples(integer_bound);
    ASSERT_TRUE(holds(hash_, "gpu_pipe_mix", kPid, kNow));
    ASSERT_EQ(in_.extra.size(), 1u);
    EXPECT_EQ(in_.extra[0].field, "pipes");
    EXPECT_EQ(details(), std::vector<std::string>{
                             "the GPU's pipes over 600s while it was alone on it, by their mean: "
                             "integer 71% DRAM 3% tensor 0% FP (busiest) 0%"});

    evidence(kPid).usage.clear();
    samples(GpuPipes{.tensor_active_percent = 0.0,
                     .fp32_active_percent = 1.0,
                     .integer_active_percent = 18.0,
                     .dram_active_percent = 88.0});
    EXPECT_TRUE(holds(hash_, "gpu_pipe_mix", kPid, kNow)) << "memory bound";
}

// The benign look-alikes: LLM decoding is memory bound too, but its
// matrix-vector products keep the tensor pipes a little busy; training the
// tensor pipes a lot; a simulation FP64.
TEST_F(GpuPipeMixTest, tensor_or_fp_work_is_not_a_hash_kernel_and_tensor_work_is_counter_evidence) {
    exec(kPid, "/usr/bin/python3");
    open_gpu(kPid);
    samples(GpuPipes{.tensor_active_percent = 6.0,
                     .fp32_active_percent = 4.0,
                     .fp16_active_percent = 3.0,
                     .integer_active_percent = 9.0,
                     .dram_active_percent = 72.0});
    EXPECT_FALSE(holds(hash_, "gpu_pipe_mix", kPid, kNow)) << "LLM decoding";
    EXPECT_FALSE(holds(tensor_busy_, "gpu_pipe_mix", kPid, kNow)) << "6 % is not busy";

    evidence(kPid).usage.clear();
    samples(GpuPipes{.tensor_active_percent = 38.0,
                     .fp32_active_percent = 12.0,
                     .fp16_active_percent = 20.0,
                     .integer_active_percent = 8.0,
                     .dram_active_percent = 30.0});
    EXPECT_FALSE(holds(hash_, "gpu_pipe_mix", kPid, kNow)) << "training";
    ASSERT_TRUE(holds(tensor_busy_, "gpu_pipe_mix", kPid, kNow));
    EXPECT_NE(details()[0].find("tensor 38%"), std::string::npos) << details()[0];

    evidence(kPid).usage.clear();
    samples(GpuPipes{.tensor_active_percent = 0.0,
                     .fp64_active_percent = 55.0,
                     .fp32_active_percent = 2.0,
                     .integer_active_percent = 30.0,
                     .dram_active_percent = 40.0});
    EXPECT_FALSE(holds(hash_, "gpu_pipe_mix", kPid, kNow)) << "an FP64 simulation";
}

// GPM measures the whole GPU: with another process listed at any sample of
// the window, the pipes are not this process's.
TEST_F(GpuPipeMixTest, a_shared_gpu_says_nothing_about_one_process) {
    exec(kPid, "/opt/w/worker");
    open_gpu(kPid);
    const GpuPipes hash{.tensor_active_percent = 0.0,
                        .fp32_active_percent = 0.0,
                        .integer_active_percent = 70.0,
                        .dram_active_percent = 5.0};
    for (uint64_t ts_s = 1000; ts_s <= 1600; ts_s += 30) {
        sample(ts_s, hash,
               ts_s == 1300 ? std::vector<uint32_t>{kPid, kOther} : std::vector<uint32_t>{kPid});
    }
    EXPECT_FALSE(holds(hash_, "gpu_pipe_mix", kPid, kNow));
    // Once the window has passed the shared sample, it holds.
    for (uint64_t ts_s = 1630; ts_s <= 1930; ts_s += 30) sample(ts_s, hash);
    EXPECT_TRUE(holds(hash_, "gpu_pipe_mix", kPid, 1930 * kSecond));
}

// Without GPM (before Hopper, or a GPU that says unsupported) it never
// holds; samples must reach the window's start, half must carry readings,
// and a bound names a pipe the GPU must read.
TEST_F(GpuPipeMixTest, no_readings_a_short_history_or_too_few_readings_never_hold) {
    exec(kPid, "/opt/w/worker");
    open_gpu(kPid);
    samples(GpuPipes{});
    EXPECT_FALSE(holds(hash_, "gpu_pipe_mix", kPid, kNow)) << "no GPM";

    evidence(kPid).usage.clear();
    const GpuPipes hash{
        .tensor_active_percent = 0.0, .fp32_active_percent = 0.0, .integer_active_percent = 70.0};
    for (uint64_t ts_s = 1100; ts_s <= 1600; ts_s += 30) sample(ts_s, hash);
    EXPECT_FALSE(holds(hash_, "gpu_pipe_mix", kPid, kNow)) << "seen for 500 s of 600";

    evidence(kPid).usage.clear();
    for (uint64_t ts_s = 1000; ts_s <= 1600; ts_s += 30) {
        sample(ts_s, ts_s % 90 == 10 ? hash : GpuPipes{});  // one in three read
    }
    EXPECT_FALSE(holds(hash_, "gpu_pipe_mix", kPid, kNow));
    for (uint64_t ts_s = 1630; ts_s <= 2200; ts_s += 30) sample(ts_s, hash);
    ASSERT_TRUE(holds(hash_, "gpu_pipe_mix", kPid, 2200 * kSecond)) << "then read long enough";

    // No FP pipe read: fp_below_percent cannot be judged.
    evidence(kPid).usage.clear();
    samples(GpuPipes{.tensor_active_percent = 0.0, .integer_active_percent = 70.0});
    EXPECT_FALSE(holds(hash_, "gpu_pipe_mix", kPid, kNow));
}

// A GPU in MIG mode: each process is judged by its own GPU instance's
// pipes and the processes in that instance, not by the whole GPU's (which
// lists both and mixes their work).
class GpuPipeMixMigTest : public GpuPipeMixTest {
  protected:
    // GPU 0's samples with kPid and kOther listed: the whole GPU mixes a
    // hash kernel in GPU instance 1 with tensor work in instance 2. NVML
    // places them (`instances`), or not; the instances' access nodes
    // (GI 1: 236:66, its CI 236:67; GI 2: 236:75, 236:76) go with each.
    void mig_samples(std::vector<ProcessInstance> instances) {
        for (uint64_t ts_s = 1000; ts_s <= 1600; ts_s += 30) {
            Telemetry telemetry;
            telemetry.vendor = "nvidia";
            telemetry.devices = {"195:0"};
            for (const uint32_t pid : {kPid, kOther}) {
                telemetry.processes.push_back(ProcessGpuUsage{pid, 4ull << 30, std::nullopt});
            }
            telemetry.pipes = GpuPipes{.tensor_active_percent = 20.0,
                                       .fp32_active_percent = 5.0,
                                       .fp16_active_percent = 11.0,
                                       .integer_active_percent = 39.0};
            telemetry.mig_pipes = {{1, GpuPipes{.tensor_active_percent = 0.0,
                                                .fp32_active_percent = 0.5,
                                                .integer_active_percent = 72.0,
                                                .dram_active_percent = 3.0}},
                                   {2, GpuPipes{.tensor_active_percent = 41.0,
                                                .fp32_active_percent = 10.0,
                                                .fp16_active_percent = 22.0,
                                                .integer_active_percent = 6.0}}};
            telemetry.process_instances = instances;
            telemetry.mig_nodes = {{1, "236:66"}, {1, "236:67"}, {2, "236:75"}, {2, "236:76"}};
            book_.record_telemetry(ts_s * kSecond, telemetry,
                                   [this](uint32_t pid) { return table_.find(pid); });
        }
    }
    // The process opens the MIG access node 236:MINOR.
    void open_access_node(uint32_t pid, uint32_t minor) {
        apply(3 * kSecond, pid, table_.find(pid)->comm,
              GpuOpen{236, minor, 4, -100, 2, OpenSyscall::kOpenat, false,
                      "/dev/nvidia-caps/nvidia-cap" + std::to_string(minor)});
    }
    void start_both() {
        exec(kPid, "/opt/w/worker");
        open_gpu(kPid);
        exec(kOther, "/usr/bin/python3");
        open_gpu(kOther);
    }
    void expect_each_judged_by_its_slice() {
        ASSERT_TRUE(holds(hash_, "gpu_pipe_mix", kPid, kNow)) << "alone in GPU instance 1";
        EXPECT_NE(details()[0].find("integer 72%"), std::string::npos) << details()[0];
        EXPECT_FALSE(holds(hash_, "gpu_pipe_mix", kOther, kNow));
        ASSERT_TRUE(holds(tensor_busy_, "gpu_pipe_mix", kOther, kNow))
            << "GPU instance 2's tensor work";
        EXPECT_NE(details()[0].find("tensor 41%"), std::string::npos) << details()[0];
    }
};

TEST_F(GpuPipeMixMigTest, on_a_mig_gpu_each_process_is_judged_by_its_own_slice) {
    start_both();
    mig_samples({{kPid, 1}, {kOther, 2}});
    expect_each_judged_by_its_slice();
    // A detection's GPU names the instance.
    const auto gpus = book_.gpus_of(*table_.find(kOther));
    ASSERT_EQ(gpus.size(), 1u);
    EXPECT_EQ(gpus[0].index, 0);
    EXPECT_EQ(gpus[0].mig_gpu_instance, 2u);
}

// NVML does not place them: the access node each holds open does (the
// worker its GPU instance's, the trainer its compute instance's).
TEST_F(GpuPipeMixMigTest, a_process_nvml_does_not_place_is_in_the_instance_whose_node_it_holds) {
    start_both();
    open_access_node(kPid, 66);
    open_access_node(kOther, 76);
    mig_samples({});
    expect_each_judged_by_its_slice();
    // A detection's GPUs: /dev/nvidia0 in the instance the node placed it
    // in, and the access node itself, GPU 0's.
    const auto gpus = book_.gpus_of(*table_.find(kPid));
    ASSERT_EQ(gpus.size(), 2u);
    EXPECT_EQ(gpus[0].minor, 0u);
    EXPECT_EQ(gpus[0].mig_gpu_instance, 1u);
    EXPECT_EQ(gpus[1].minor, 66u);
    EXPECT_EQ(gpus[1].index, 0);
    EXPECT_EQ(gpus[1].vendor, "nvidia");
    EXPECT_EQ(gpus[1].mig_gpu_instance, 1u);
}

// Holding the nodes of two instances (a privileged process that opened
// them all) places a process in neither: the whole GPU, which two share,
// says nothing of it; nor does a process that holds no node.
TEST_F(GpuPipeMixMigTest, nodes_of_two_instances_or_none_place_a_process_nowhere) {
    start_both();
    open_access_node(kPid, 66);
    open_access_node(kPid, 75);
    mig_samples({});
    EXPECT_FALSE(holds(hash_, "gpu_pipe_mix", kPid, kNow));
    EXPECT_FALSE(holds(tensor_busy_, "gpu_pipe_mix", kOther, kNow));
}

TEST(GpuPipeMixRule, a_rule_names_its_window_and_a_bound_with_file_and_line) {
    for (const char* when :
         {"{gpu_pipe_mix: {tensor_below_percent: 1}}", "{gpu_pipe_mix: {for: 2m}}",
          "{gpu_pipe_mix: {for: 2m, tensor_below_percent: 101}}",
          "{gpu_pipe_mix: {for: 2m, integer_above_percent: 30}}"}) {
        const std::string yaml =
            "rules:\n  - id: TEST-0001\n    name: test\n    severity: warning\n    when: " +
            std::string(when) + "\n";
        const auto parsed = rules::parse_correlation_rules(yaml, "test.yaml");
        ASSERT_FALSE(parsed) << when;
        EXPECT_NE(parsed.error().message.find("test.yaml:5:"), std::string::npos)
            << parsed.error().message;
        EXPECT_NE(parsed.error().message.find("gpu_pipe_mix"), std::string::npos)
            << parsed.error().message;
    }
}

}  // namespace
}  // namespace gpuguard::agent::condition_testing
