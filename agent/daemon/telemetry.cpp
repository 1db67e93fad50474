#include "gpuguard/daemon/telemetry.h"

namespace gpuguard::agent {

backends::BackendOptions backend_options(const BackendsConfig& config) {
    backends::BackendOptions options;
    options.nvidia = config.nvidia;
    options.amd = config.amd;
    options.intel = config.intel;
    options.drm_fdinfo = config.drm_fdinfo;
    options.nvml_library = config.nvml_library;
    options.sysfs_root = config.sysfs_root;
    options.proc_root = config.proc_root;
    return options;
}

std::vector<Event> telemetry_events(const backends::Snapshot& snapshot, uint64_t ts_ns) {
    std::vector<Event> events;
    for (const auto& device : snapshot.devices) {
        Telemetry telemetry;
        telemetry.gpu_index = device.index;
        telemetry.vendor = backends::to_string(device.vendor);
        telemetry.model = device.model;
        for (const auto& number : device.device_numbers) {
            if (number.known()) telemetry.devices.push_back(number.to_string());
        }
        for (const auto& sample : snapshot.gpus) {
            if (sample.gpu != device.index) continue;
            telemetry.utilization_percent = sample.gpu_utilization_percent;
            telemetry.memory_used_bytes = sample.memory_used_bytes;
            telemetry.memory_total_bytes = sample.memory_total_bytes;
            telemetry.power_watts = sample.power_draw_watts;
            telemetry.power_limit_watts = sample.power_limit_watts;
        }
        for (const auto& sample : snapshot.processes) {
            if (sample.gpu != device.index || sample.pid <= 0) continue;
            telemetry.processes.push_back(ProcessGpuUsage{
                static_cast<uint32_t>(sample.pid), sample.memory_bytes, sample.compute_percent});
        }
        Event event;
        event.ts_ns = ts_ns;
        event.data = std::move(telemetry);
        events.push_back(std::move(event));
    }
    return events;
}

}  // namespace gpuguard::agent
