// A GpuBackend that replays a script: for tests of the sampler, the CLI, the
// metrics exporter and the correlator, without sysfs or NVML.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <vector>

#include "gpuguard/backends/backends.h"

namespace gpuguard::backends {

class ScriptedBackend final : public GpuBackend {
  public:
    // One step per sample: sample_gpus() and sample_processes() each advance
    // their own cursor; the last step repeats forever.
    struct Step {
        Result<GpuSamples> gpus = GpuSamples{};
        Result<ProcessSamples> processes = ProcessSamples{};
    };

    // What the backend was asked, shared so tests can look after handing
    // ownership to a sampler.
    struct Calls {
        std::atomic<int> devices{0};
        std::atomic<int> gpus{0};
        std::atomic<int> processes{0};
        std::mutex mutex;
        std::vector<std::vector<ProcessFd>> fds;  // argument of each sample_processes()
    };

    // Devices are renumbered 0..n-1 in order. `failing_device_calls`: how
    // many devices() calls fail (with kIo) first.
    ScriptedBackend(std::string name, std::vector<GpuDevice> devices, std::vector<Step> steps,
                    int failing_device_calls = 0);

    std::shared_ptr<Calls> calls() const { return calls_; }

    std::string_view name() const override { return name_; }
    Result<std::vector<GpuDevice>> devices() override;
    Result<GpuSamples> sample_gpus() override;
    Result<ProcessSamples> sample_processes(std::span<const ProcessFd> fds) override;

  private:
    std::string name_;
    std::vector<GpuDevice> devices_;
    std::vector<Step> steps_;
    int failing_device_calls_;
    size_t gpu_cursor_ = 0;
    size_t process_cursor_ = 0;
    std::shared_ptr<Calls> calls_ = std::make_shared<Calls>();
};

}  // namespace gpuguard::backends
