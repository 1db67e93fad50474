// What a telemetry sample adds to the book of its GPU: the GPU's own
// utilisation and what the processes known to hold it account for
// (unexplained_gpu_load, judged per GPU). Known holders are the processes
// the GPU's telemetry lists (NVML's process lists: host pids, any
// container's) and the live processes the sensor saw hold one of its
// device nodes; only the first have readings of their own.
#include <algorithm>
#include <charconv>
#include <set>

#include "evidence_book.h"
#include "gpuguard/events/gpu_devices.h"

namespace gpuguard::agent {
namespace {

// NVML leaves a busy process out of an interval's per-process samples now
// and then (one 500 ms interval in five on an H200 shared by two CUDA
// processes): its last reading stands in for it this long.
constexpr uint64_t kCarryReadingNs = 30'000'000'000ull;
constexpr size_t kMaxHoldersNamed = 8;

// The GPU's key: its first device number, else vendor and index.
std::string gpu_key(const Telemetry& telemetry) {
    for (const auto& device : telemetry.devices) {
        if (parse_device_number(device)) return device;
    }
    return telemetry.vendor + "#" + std::to_string(telemetry.gpu_index);
}

// "4242 (python3) 31%": a holder for the evidence.
std::string holder_text(uint32_t pid, const ProcessInfo* info, const std::string& what) {
    std::string text = std::to_string(pid);
    if (info && !info->comm.empty()) text += " (" + info->comm + ")";
    return text + " " + what;
}

std::string percent_text(double percent) {
    char text[32];
    // to_chars rounds as printf's "%.0f" does, without the locale and format machinery.
    const auto end =
        std::to_chars(text, text + sizeof(text) - 1, percent, std::chars_format::fixed, 0).ptr;
    *end = '%';
    return std::string(text, end + 1);
}

}  // namespace

GpuLoad& EvidenceBook::record_gpu_load(uint64_t ts_ns, const Telemetry& telemetry) {
    const std::string key = gpu_key(telemetry);
    GpuLoad& gpu = gpu_loads_[key];
    if (gpu.key.empty()) {
        gpu.key = key;
        gpu.subject.comm = "";
        if (const auto number = parse_device_number(key)) {
            gpu.subject.gpus.push_back(GpuHandle{number->first, number->second, -1, ts_ns, false});
        }
    }
    gpu.index = telemetry.gpu_index;
    gpu.vendor = telemetry.vendor;
    gpu.model = telemetry.model;
    gpu.devices = telemetry.devices;
    gpu.holders.clear();

    GpuLoadSample sample{ts_ns, telemetry.utilization_percent, std::nullopt};
    double explained = 0;
    bool undecided = false;
    std::set<uint32_t> known;
    for (const auto& usage : telemetry.processes) {
        known.insert(usage.pid);
        const ProcessInfo* info = table_.find(usage.pid);
        if (usage.compute_percent) {
            gpu.attributes = true;
            gpu.readings[usage.pid] = {ts_ns, *usage.compute_percent};
            explained += *usage.compute_percent;
            if (gpu.holders.size() < kMaxHoldersNamed) {
                gpu.holders.push_back(
                    holder_text(usage.pid, info, percent_text(*usage.compute_percent)));
            }
            continue;
        }
        // Listed without a reading this interval: its last one, if recent.
        const auto last = gpu.readings.find(usage.pid);
        if (last != gpu.readings.end() && ts_ns - last->second.first <= kCarryReadingNs) {
            explained += last->second.second;
        } else {
            undecided = true;
        }
        if (gpu.holders.size() < kMaxHoldersNamed) {
            gpu.holders.push_back(holder_text(usage.pid, info, "listed, no reading"));
        }
    }
    // Left out of this interval altogether: its last reading, while recent
    // and the process lives.
    for (auto it = gpu.readings.begin(); it != gpu.readings.end();) {
        const auto& [pid, reading] = *it;
        const ProcessInfo* info = table_.find(pid);
        if (ts_ns - reading.first > kCarryReadingNs || (info && info->exited)) {
            it = gpu.readings.erase(it);
            continue;
        }
        if (known.insert(pid).second) explained += reading.second;
        ++it;
    }
    // Holders the sensor saw that the telemetry does not list: on a GPU
    // whose telemetry reads load per process they have no context on it (or
    // NVML would list them); on one that never does, nobody can say.
    for (uint32_t pid : gpu_holders_) {
        if (known.contains(pid)) continue;
        const ProcessInfo* info = table_.find(pid);
        if (!info || info->exited) continue;
        const bool holds = std::any_of(info->gpus.begin(), info->gpus.end(), [&](const auto& h) {
            const std::string device = std::to_string(h.major) + ":" + std::to_string(h.minor);
            return std::find(gpu.devices.begin(), gpu.devices.end(), device) != gpu.devices.end();
        });
        if (!holds) continue;
        if (!gpu.attributes) undecided = true;
        if (gpu.holders.size() < kMaxHoldersNamed) {
            gpu.holders.push_back(holder_text(pid, info, "holds it, no reading"));
        }
    }
    if (!undecided) sample.explained = explained;
    gpu.samples.push_back(sample);
    if (gpu.samples.size() > options_.max_telemetry_samples) gpu.samples.pop_front();
    return gpu;
}

}  // namespace gpuguard::agent
