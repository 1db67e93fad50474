// The script the fake libnvidia-ml.so.1 (tests/backends/fake_nvml) plays:
// one NVIDIA H100 with a fixed utilisation and memory use, and the compute
// processes NVML reports on it. Tests write it to the file named by the
// fake's environment variable.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <sys/types.h>

namespace gpuguard::testing {

struct FakeNvmlProcess {
    pid_t pid = 0;
    uint64_t used_memory = 0;
    unsigned sm_percent = 0;  // > 0: its SM utilisation, sampled anew at every reading
};

struct FakeH100 {
    unsigned gpu_utilization = 97;     // percent
    unsigned memory_utilization = 40;  // percent
    uint64_t memory_used = 1ull << 30;
    std::vector<FakeNvmlProcess> processes;
    // GPM readings in percent by the fake's keys ("sm", "tensor", "fp16",
    // "fp32", "fp64", "integer", "dram"): none, a GPU without GPM.
    std::vector<std::pair<std::string, unsigned>> gpm{};
};

// JSON text of a one-GPU script (80 GiB total, free = total - used).
std::string fake_nvml_script(const FakeH100& gpu);

// The same GPU going through `steps`: the fake plays the step whose number
// `step_file` holds (read at every NVML call; 0 when missing), so a test can
// change what a running agent's fake GPU reports by rewriting that file.
// `xids[i]`: the Xid critical errors step i raises on the fake's event API
// (queued when an agent's event thread sees the step file name it).
std::string fake_nvml_script(const std::vector<FakeH100>& steps, const std::string& step_file,
                             const std::vector<std::vector<unsigned>>& xids = {});

}  // namespace gpuguard::testing
