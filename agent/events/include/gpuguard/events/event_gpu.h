// The GPU readings of an Event (gpuguard/events/event.h) that the agent's
// backends make, not the kernel: a telemetry sample of a GPU (its load, its
// processes, its pipes, its MIG slices) and a fault its driver reported.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpuguard::agent {

// What one process holds on the GPU of a Telemetry event.
struct ProcessGpuUsage {
    uint32_t pid = 0;
    std::optional<uint64_t> memory_bytes;   // device memory
    std::optional<double> compute_percent;  // busiest engine / SM over the last interval
    bool operator==(const ProcessGpuUsage&) const = default;
};

// What the GPU's pipes did over the last interval (NVML GPU Performance
// Monitoring, Hopper and later), in percent of the interval: DCGM's
// profiling fields (DCGM_FI_PROF_SM_ACTIVE, ..._PIPE_TENSOR_ACTIVE, ...)
// times 100. Each absent where the GPU does not report it.
struct GpuPipes {
    std::optional<double> sm_active_percent{};
    std::optional<double> sm_occupancy_percent{};
    std::optional<double> tensor_active_percent{};  // any tensor pipe
    std::optional<double> fp64_active_percent{};
    std::optional<double> fp32_active_percent{};
    std::optional<double> fp16_active_percent{};
    std::optional<double> integer_active_percent{};
    std::optional<double> dram_active_percent{};  // DRAM bandwidth used
    bool operator==(const GpuPipes&) const = default;
};

// One MIG GPU instance's pipes.
struct MigPipes {
    uint32_t gpu_instance = 0;  // GI id
    GpuPipes pipes{};           // flattened
    bool operator==(const MigPipes&) const = default;
};

// The MIG GPU instance a listed process runs in.
struct ProcessInstance {
    uint32_t pid = 0;
    uint32_t gpu_instance = 0;  // GI id
    bool operator==(const ProcessInstance&) const = default;
};

// A node a process opens to use one MIG GPU instance: the access node
// (/dev/nvidia-caps/nvidia-capN) of the GPU instance or of a compute
// instance in it.
struct MigNode {
    uint32_t gpu_instance = 0;  // GI id
    std::string device;         // "236:67"
    bool operator==(const MigNode&) const = default;
};

// One telemetry reading of one GPU by the agent's backends (not from the
// kernel: the event's task is all zero).
struct Telemetry {
    uint32_t gpu_index = 0;  // the sampler's GPU index
    std::string vendor;      // "nvidia", "amd", "intel", ...
    std::string model;
    std::vector<std::string> devices;  // device numbers of its nodes, "195:0"
    std::optional<double> utilization_percent;
    std::optional<uint64_t> memory_used_bytes;
    std::optional<uint64_t> memory_total_bytes;
    std::vector<ProcessGpuUsage> processes;
    // Its power draw and the limit it is held to, where the backend reads
    // them (NVML, amdgpu's hwmon); none otherwise.
    std::optional<double> power_watts{};
    std::optional<double> power_limit_watts{};
    GpuPipes pipes{};  // flattened: "tensor_active_percent", ...
    // On a GPU in MIG mode: each GPU instance's own pipes, and which
    // instance each listed process runs in (NVML's per-process GI id), so a
    // process is judged by its slice's pipes.
    std::vector<MigPipes> mig_pipes{};
    std::vector<ProcessInstance> process_instances{};
    // Its MIG instances' access nodes: a process NVML does not place in an
    // instance is in the one whose node it holds open.
    std::vector<MigNode> mig_nodes{};
};

// Something a GPU's driver reported on its own (NVML's event API: an Xid
// critical error, an ECC error, a clock change), read by the backend's
// event thread. The task is a process that held the GPU when the agent
// took the event (one event each), or all zero when none did.
struct GpuFault {
    uint32_t gpu_index = 0;            // the sampler's GPU index
    std::vector<std::string> devices;  // device numbers of its nodes, "195:0"
    // "xid", "ecc_single_bit", "ecc_double_bit", "clocks".
    std::string kind;
    uint64_t code = 0;  // the Xid; the clock-event reason bits for "clocks"; 0 for ECC
    // How many processes NVML listed on the GPU then: NVML's event does not
    // say whose work raised it, so only a lone holder can be blamed.
    uint32_t holders = 0;
    bool operator==(const GpuFault&) const = default;
};

}  // namespace gpuguard::agent
