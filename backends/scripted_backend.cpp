#include "gpuguard/backends/scripted_backend.h"

namespace gpuguard::backends {

ScriptedBackend::ScriptedBackend(std::string name, std::vector<GpuDevice> devices,
                                 std::vector<Step> steps, int failing_device_calls)
    : name_(std::move(name)),
      devices_(std::move(devices)),
      steps_(std::move(steps)),
      failing_device_calls_(failing_device_calls) {
    if (steps_.empty()) steps_.emplace_back();
    for (size_t i = 0; i < devices_.size(); ++i) devices_[i].index = static_cast<uint32_t>(i);
}

Result<std::vector<GpuDevice>> ScriptedBackend::devices() {
    const int call = calls_->devices++;
    if (call < failing_device_calls_) {
        return fail(ErrorCode::kIo,
                    name_ + ": scripted device failure " + std::to_string(call + 1));
    }
    return devices_;
}

Result<GpuSamples> ScriptedBackend::sample_gpus() {
    ++calls_->gpus;
    const Step& step = steps_[std::min(gpu_cursor_++, steps_.size() - 1)];
    return step.gpus;
}

Result<ProcessSamples> ScriptedBackend::sample_processes(std::span<const ProcessFd> fds) {
    ++calls_->processes;
    {
        std::lock_guard lock(calls_->mutex);
        calls_->fds.emplace_back(fds.begin(), fds.end());
    }
    const Step& step = steps_[std::min(process_cursor_++, steps_.size() - 1)];
    return step.processes;
}

}  // namespace gpuguard::backends
