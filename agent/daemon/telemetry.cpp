#include "gpuguard/daemon/telemetry.h"

#include <algorithm>

#include "agent_impl.h"
#include "gpuguard/common/logging.h"
#include "gpuguard/common/text.h"
#include "gpuguard/events/gpu_fault.h"

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

namespace {

// A device's node numbers as events carry them ("195:0"), the unknown left out.
std::vector<std::string> known_device_numbers(const backends::GpuDevice& device) {
    std::vector<std::string> numbers;
    for (const auto& number : device.device_numbers) {
        if (number.known()) numbers.push_back(number.to_string());
    }
    return numbers;
}

// GPM's fractions as the event's percentages.
GpuPipes pipes_of(const backends::GpmActivity& gpm) {
    const auto percent = [](const std::optional<double>& fraction) -> std::optional<double> {
        if (!fraction) return std::nullopt;
        return *fraction * 100.0;
    };
    return GpuPipes{percent(gpm.sm_active),      percent(gpm.sm_occupancy),
                    percent(gpm.tensor_active),  percent(gpm.fp64_active),
                    percent(gpm.fp32_active),    percent(gpm.fp16_active),
                    percent(gpm.integer_active), percent(gpm.dram_active)};
}

}  // namespace

std::vector<Event> telemetry_events(const backends::Snapshot& snapshot, uint64_t ts_ns) {
    std::vector<Event> events;
    for (const auto& device : snapshot.devices) {
        Telemetry telemetry;
        telemetry.gpu_index = device.index;
        telemetry.vendor = backends::to_string(device.vendor);
        telemetry.model = device.model;
        telemetry.devices = known_device_numbers(device);
        for (const auto& sample : snapshot.gpus) {
            if (sample.gpu != device.index) continue;
            telemetry.utilization_percent = sample.gpu_utilization_percent;
            telemetry.memory_used_bytes = sample.memory_used_bytes;
            telemetry.memory_total_bytes = sample.memory_total_bytes;
            telemetry.power_watts = sample.power_draw_watts;
            telemetry.power_limit_watts = sample.power_limit_watts;
            if (sample.gpm) telemetry.pipes = pipes_of(*sample.gpm);
            for (const auto& [gpu_instance, gpm] : sample.gpm_by_gpu_instance) {
                telemetry.mig_pipes.push_back(MigPipes{gpu_instance, pipes_of(gpm)});
            }
        }
        for (const auto& mig : device.mig_instances) {
            for (const auto* node : {&mig.gpu_instance_access_node, &mig.access_node}) {
                MigNode known{mig.gpu_instance, node->to_string()};
                if (!node->known() ||
                    std::find(telemetry.mig_nodes.begin(), telemetry.mig_nodes.end(), known) !=
                        telemetry.mig_nodes.end()) {
                    continue;  // the GI's node, once for all its compute instances
                }
                telemetry.mig_nodes.push_back(std::move(known));
            }
        }
        for (const auto& sample : snapshot.processes) {
            if (sample.gpu != device.index || sample.pid <= 0) continue;
            telemetry.processes.push_back(ProcessGpuUsage{
                static_cast<uint32_t>(sample.pid), sample.memory_bytes, sample.compute_percent});
            if (sample.gpu_instance) {
                telemetry.process_instances.push_back(
                    ProcessInstance{static_cast<uint32_t>(sample.pid), *sample.gpu_instance});
            }
        }
        Event event;
        event.ts_ns = ts_ns;
        event.data = std::move(telemetry);
        events.push_back(std::move(event));
    }
    return events;
}

void Agent::Impl::report_gpu_faults(const backends::Snapshot& snapshot, uint64_t now_ns) {
    auto taken = sampler->take_device_events();
    if (taken.dropped > gpu_faults_dropped) {
        logger("agent")->warn("GPU device events: {} lost to a full queue since the start",
                              taken.dropped);
        gpu_faults_dropped = taken.dropped;
    }
    for (auto& pending : taken.events) {
        ++gpu_faults_total;
        GpuFault fault;
        fault.gpu_index = pending.gpu;
        fault.kind = std::move(pending.event.kind);
        fault.code = pending.event.code;
        for (const auto& device : snapshot.devices) {
            if (device.index == pending.gpu) fault.devices = known_device_numbers(device);
        }
        // Who was on the GPU: NVML's process list of the sample that brought it.
        std::vector<TaskInfo> tasks;
        for (const pid_t pid : pending.on_gpu) {
            if (pid <= 0) continue;
            const ProcessInfo* info = table->find(static_cast<uint32_t>(pid));
            if (info && !info->exited) tasks.push_back(task_of(*info));
        }
        fault.holders = static_cast<uint32_t>(tasks.size());
        // The one log line of a device event (the backend's thread logs
        // none, so a flood costs a count, not a line each): an Xid or a
        // double-bit ECC error a warning, clock changes only at debug.
        const auto level = fault.kind == "clocks"           ? spdlog::level::debug
                           : fault.kind == "ecc_single_bit" ? spdlog::level::info
                                                            : spdlog::level::warn;
        logger("agent")->log(level, "{}, {} process(es) on it", describe_gpu_fault(fault),
                             fault.holders);
        for (const TaskInfo& task : tasks) on_event(Event{now_ns, task, fault});
        if (tasks.empty()) on_event(Event{now_ns, TaskInfo{}, std::move(fault)});
    }
}

namespace {

constexpr uint32_t kNvidiaMajor = 195;

void add_once(std::vector<std::string>& nodes, const backends::DeviceNumber& number) {
    if (!number.known()) return;
    std::string text = number.to_string();
    if (std::find(nodes.begin(), nodes.end(), text) == nodes.end()) nodes.push_back(text);
}

// A GPU's nodes: all of them (/dev/nvidiaN, its nvidia-drm card and render
// nodes reach the same GPU) and, in MIG mode, every instance's access nodes.
void add_gpu(std::vector<std::string>& nodes, const backends::GpuDevice& device) {
    for (const auto& number : device.device_numbers) add_once(nodes, number);
    for (const auto& mig : device.mig_instances) {
        add_once(nodes, mig.gpu_instance_access_node);
        add_once(nodes, mig.access_node);
    }
}

// One MIG instance's: its GPU's /dev/nvidiaN and the access nodes of its
// GPU instance and compute instance (what NVIDIA's container toolkit gives a
// container of one MIG device).
void add_mig(std::vector<std::string>& nodes, const backends::GpuDevice& device,
             const backends::MigInstance& mig) {
    for (const auto& number : device.device_numbers) {
        if (number.major == kNvidiaMajor) add_once(nodes, number);
    }
    add_once(nodes, mig.gpu_instance_access_node);
    add_once(nodes, mig.access_node);
}

}  // namespace

std::vector<std::string> gpu_nodes_by_uuid(const std::vector<backends::GpuDevice>& devices,
                                           const std::string& uuid) {
    std::vector<std::string> nodes;
    // NVIDIA's older MIG device names: "MIG-GPU-<GPU uuid>/<GI>/<CI>".
    if (uuid.starts_with("MIG-GPU-")) {
        const std::string_view name = std::string_view(uuid).substr(4);
        const auto first = name.find('/');
        const auto second = name.find('/', first == std::string_view::npos ? first : first + 1);
        if (second == std::string_view::npos) return nodes;
        const auto gi = parse_u32(name.substr(first + 1, second - first - 1));
        const auto ci = parse_u32(name.substr(second + 1));
        if (!gi || !ci) return nodes;
        for (const auto& device : devices) {
            if (device.uuid != name.substr(0, first)) continue;
            for (const auto& mig : device.mig_instances) {
                if (mig.gpu_instance == *gi && mig.compute_instance == *ci) {
                    add_mig(nodes, device, mig);
                }
            }
        }
        return nodes;
    }
    for (const auto& device : devices) {
        if (device.uuid == uuid) add_gpu(nodes, device);
        for (const auto& mig : device.mig_instances) {
            if (mig.uuid == uuid) add_mig(nodes, device, mig);
        }
    }
    return nodes;
}

std::vector<std::string> nvidia_gpu_nodes(const std::vector<backends::GpuDevice>& devices) {
    std::vector<std::string> nodes;
    for (const auto& device : devices) {
        if (device.vendor == backends::Vendor::kNvidia && !device.uuid.empty()) {
            add_gpu(nodes, device);
        }
    }
    return nodes;
}

}  // namespace gpuguard::agent
