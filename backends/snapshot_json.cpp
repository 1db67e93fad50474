// Snapshot -> JSON (gpuguard gpus --json). Absent metrics are left out.
#include <nlohmann/json.hpp>

#include "gpuguard/backends/backends.h"

namespace gpuguard::backends {
namespace {

template <typename T>
void put(nlohmann::json& object, const char* key, const std::optional<T>& value) {
    if (value) object[key] = *value;
}

// GPM's pipes under the names `gpuguard gpus --json` gives them (docs/backends.md).
void put_pipes(nlohmann::json& object, const GpmActivity& gpm) {
    put(object, "sm_active", gpm.sm_active);
    put(object, "sm_occupancy", gpm.sm_occupancy);
    put(object, "pipe_tensor_active", gpm.tensor_active);
    put(object, "pipe_fp64_active", gpm.fp64_active);
    put(object, "pipe_fp32_active", gpm.fp32_active);
    put(object, "pipe_fp16_active", gpm.fp16_active);
    put(object, "pipe_int_active", gpm.integer_active);
    put(object, "dram_active", gpm.dram_active);
}

}  // namespace

std::string to_json(const Snapshot& snapshot, int indent) {
    using nlohmann::json;
    json root;
    root["sequence"] = snapshot.sequence;
    root["taken_at_ms"] =
        std::chrono::duration_cast<std::chrono::milliseconds>(snapshot.taken_at.time_since_epoch())
            .count();
    json devices = json::array();
    for (const auto& device : snapshot.devices) {
        json d;
        d["index"] = device.index;
        d["vendor"] = to_string(device.vendor);
        d["backend"] = device.backend;
        d["driver"] = device.driver;
        d["model"] = device.model;
        d["uuid"] = device.uuid;
        d["serial"] = device.serial;
        d["bus_id"] = device.bus_id;
        d["driver_version"] = device.driver_version;
        json numbers = json::array();
        for (const auto& number : device.device_numbers) numbers.push_back(number.to_string());
        d["device_numbers"] = numbers;
        if (device.mig_enabled) {
            json instances = json::array();
            for (const auto& mig : device.mig_instances) {
                json m;
                m["gpu_instance"] = mig.gpu_instance;
                m["compute_instance"] = mig.compute_instance;
                m["uuid"] = mig.uuid;
                put(m, "memory_total_bytes", mig.memory_total_bytes);
                put(m, "access_minor", mig.access_minor);
                put(m, "gpu_instance_access_minor", mig.gpu_instance_access_minor);
                if (mig.access_node.known()) m["access_node"] = mig.access_node.to_string();
                if (mig.gpu_instance_access_node.known()) {
                    m["gpu_instance_access_node"] = mig.gpu_instance_access_node.to_string();
                }
                instances.push_back(m);
            }
            d["mig_instances"] = instances;
        }
        for (const auto& gpu : snapshot.gpus) {
            if (gpu.gpu != device.index) continue;
            json m = json::object();
            put(m, "gpu_utilization_percent", gpu.gpu_utilization_percent);
            put(m, "memory_utilization_percent", gpu.memory_utilization_percent);
            put(m, "memory_used_bytes", gpu.memory_used_bytes);
            put(m, "memory_free_bytes", gpu.memory_free_bytes);
            put(m, "memory_total_bytes", gpu.memory_total_bytes);
            put(m, "temperature_gpu_celsius", gpu.temperature_gpu_celsius);
            put(m, "temperature_memory_celsius", gpu.temperature_memory_celsius);
            put(m, "power_draw_watts", gpu.power_draw_watts);
            put(m, "power_limit_watts", gpu.power_limit_watts);
            put(m, "energy_joules", gpu.energy_joules);
            put(m, "sm_clock_mhz", gpu.sm_clock_mhz);
            put(m, "memory_clock_mhz", gpu.memory_clock_mhz);
            put(m, "fan_speed_percent", gpu.fan_speed_percent);
            put(m, "performance_state", gpu.performance_state);
            put(m, "pcie_tx_bytes_per_second", gpu.pcie_tx_bytes_per_second);
            put(m, "pcie_rx_bytes_per_second", gpu.pcie_rx_bytes_per_second);
            put(m, "encoder_utilization_percent", gpu.encoder_utilization_percent);
            put(m, "decoder_utilization_percent", gpu.decoder_utilization_percent);
            put(m, "ecc_errors_corrected", gpu.ecc_errors_corrected);
            put(m, "ecc_errors_uncorrected", gpu.ecc_errors_uncorrected);
            put(m, "throttle_reasons", gpu.throttle_reasons);
            put(m, "last_xid", gpu.last_xid);
            if (gpu.gpm) put_pipes(m, *gpu.gpm);
            d["metrics"] = m;
            if (!gpu.gpm_by_gpu_instance.empty()) {
                json slices = json::array();
                for (const auto& [gpu_instance, activity] : gpu.gpm_by_gpu_instance) {
                    json slice{{"gpu_instance", gpu_instance}};
                    put_pipes(slice, activity);
                    slices.push_back(slice);
                }
                d["mig_metrics"] = slices;  // each GPU instance's own pipes
            }
            if (!gpu.problems.empty()) d["problems"] = gpu.problems;
        }
        devices.push_back(d);
    }
    root["devices"] = devices;
    json processes = json::array();
    for (const auto& process : snapshot.processes) {
        json p;
        p["pid"] = process.pid;
        p["gpu"] = process.gpu;
        put(p, "memory_bytes", process.memory_bytes);
        put(p, "compute_percent", process.compute_percent);
        put(p, "engine_busy_ns", process.engine_busy_ns);
        p["kfd_compute"] = process.kfd_compute;
        p["source"] = process.source;
        put(p, "gpu_instance", process.gpu_instance);
        put(p, "compute_instance", process.compute_instance);
        processes.push_back(p);
    }
    root["processes"] = processes;
    json backends = json::array();
    for (const auto& backend : snapshot.backends) {
        json b;
        b["name"] = backend.name;
        b["ok"] = backend.ok;
        if (!backend.ok) b["error"] = backend.last_error;
        backends.push_back(b);
    }
    root["backends"] = backends;
    // Replace invalid UTF-8 from driver strings instead of throwing.
    return root.dump(indent, ' ', false, json::error_handler_t::replace);
}

}  // namespace gpuguard::backends
