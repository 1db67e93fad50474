// The `when:` conditions of a correlation rule that judge readings over a
// window of time (GPU and CPU telemetry, the pipes' activity, a process's
// I/O, a flow's shape): their thresholds, statistic and window. Read from
// YAML by rules/correlation_window_conditions.cpp; judged by
// agent/detect/conditions/. Part of gpuguard/rules/correlation.h.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

namespace gpuguard::rules {

// GPU memory of the process grows by `bytes` within `within` while its
// compute utilisation stays at or below `max_utilization_percent`.
struct MemoryGrowthCondition {
    uint64_t bytes = 20ull << 30;
    std::chrono::seconds within{300};
    double max_utilization_percent = 20.0;
};

// The process keeps a GPU above `above_percent` for `duration` (every
// reading, or their mean or a percentile: `by`) while making at
// most `max_connects` new connections in that time, having made at least
// `min_connects` in its life: a miner holds one long-lived pool connection;
// a render or a training job on local data has none, one streaming its data
// opens many.
// How a window's readings are summed up against above_percent: every
// reading above it (kEvery, the default), their mean, or a percentile
// (p10: nine readings in ten above it) — a throttled or duty-cycled
// miner never keeps every reading high.
enum class UtilizationStatistic { kEvery, kMean, kPercentile };

struct SustainedUtilizationCondition {
    double above_percent = 90.0;
    UtilizationStatistic by = UtilizationStatistic::kEvery;
    int percentile = 0;  // 1..99 with kPercentile
    std::chrono::seconds duration{600};
    uint32_t max_connects = 2;
    uint32_t min_connects = 1;
    // The GPU's power draw over the window, by the same statistic (`every`:
    // its lowest), at least this percent of its limit: a kernel that spins
    // waiting (NCCL, a busy-poll) shows 100 % utilisation at idle power, a
    // miner draws. Samples without a power reading pass over; none in the
    // window: not judged by power.
    std::optional<double> min_power_percent;
};

// The process keeps `above_cores` cores' worth of CPU busy over `duration`
// (every reading, their mean or a percentile: `by`), judged from its
// cpu_usage readings; an interval with no reading counts as idle (the agent
// reports a process only while it is busy), and the readings must reach back
// to the window's start. With `max_connects`, it made at most that many new
// connections in the window (a miner keeps one).
struct SustainedCpuCondition {
    double above_cores = 1.0;
    UtilizationStatistic by = UtilizationStatistic::kMean;
    int percentile = 0;  // 1..99 with kPercentile
    std::chrono::seconds duration{300};
    std::optional<uint32_t> max_connects;
};

// One of the process's outbound connections has a mining session's shape
// (flow events): at least `min_age` old, the peer pushing at least
// `min_pushes` messages unprompted, at most `max_bytes_per_minute` both
// ways (agent/detect/flow_shape.h has the rest of the shape). `true` takes
// these defaults.
struct MiningFlowCondition {
    std::chrono::seconds min_age{120};
    uint32_t min_pushes = 3;
    uint64_t max_bytes_per_minute = 64 * 1024;
};

// Judged per GPU, not per process: the GPU's own utilisation stays above
// `above_percent` over `duration` (every reading, their mean or a
// percentile: `by`) while the processes known to hold it (listed by its
// telemetry, or seen opening it) explain at most `max_explained_percent` of
// that load by their own compute readings: load no process shows for. A
// rule with it has no other condition but time_window, and no supporting
// or counter signals; its detection names the GPU, pid 0.
struct UnexplainedGpuLoadCondition {
    double above_percent = 50.0;
    UtilizationStatistic by = UtilizationStatistic::kPercentile;
    int percentile = 20;  // 1..99 with kPercentile
    std::chrono::seconds duration{180};
    double max_explained_percent = 25.0;
};

// The process's writes over `duration` look like a miner talking to its
// pool and nothing else: at most `max_file_write_bytes` written to storage,
// network sends never further apart than `max_send_gap` (periodic), at most
// `max_net_send_bytes` in all and `max_bytes_per_send` on average (small).
// Judged from the agent's process_io samples; never true while they do not
// cover the whole window (no payload programs, a process seen too recently).
struct QuietIoCondition {
    std::chrono::seconds duration{600};
    uint64_t max_file_write_bytes = 0;
    uint64_t max_net_send_bytes = 1ull << 20;
    uint64_t max_bytes_per_send = 4096;
    std::chrono::seconds max_send_gap{300};
    // At most this many sends in the window: a miner submits a share every
    // few seconds to minutes; a worker's heartbeat to its scheduler is far
    // more frequent. Unset: any number.
    std::optional<uint64_t> max_sends;
    // At most this many bytes received in the window: a miner's jobs are a
    // few hundred bytes every few seconds to minutes; a job streaming its
    // data receives far more. Readings without receive counts (older
    // records) pass. Unset: any amount.
    std::optional<uint64_t> max_net_recv_bytes;
};

// The GPU's pipes (NVML GPM, telemetry's *_active_percent) over `duration`,
// each pipe by its mean over the samples that read it, while the process
// was the only one NVML listed on that GPU at every sample (GPM measures
// the whole GPU: on a shared one it says nothing about one process). Each
// bound that is set must hold: `integer_or_dram_above_percent` (the integer
// pipe or DRAM bandwidth above it: a hash kernel is integer or memory
// bound), `tensor_below_percent` and `fp_below_percent` (the tensor pipes,
// and each of FP16/FP32/FP64, below them: idle in a miner, busy in training,
// inference and simulation), `tensor_above_percent` (the tensor pipes busy:
// counter-evidence). Samples must reach back to the window's start and at
// least half carry pipe readings; a GPU without GPM (before Hopper) never
// holds it.
struct GpuPipeMixCondition {
    std::chrono::seconds duration{600};
    std::optional<double> integer_or_dram_above_percent;
    std::optional<double> tensor_below_percent;
    std::optional<double> fp_below_percent;
    std::optional<double> tensor_above_percent;
};

}  // namespace gpuguard::rules
