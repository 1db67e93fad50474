// Glue between the agent's configuration and the GPU telemetry backends.
#pragma once

#include <string>
#include <vector>

#include "gpuguard/backends/backends.h"
#include "gpuguard/daemon/config.h"
#include "gpuguard/events/event.h"

namespace gpuguard::agent {

// BackendOptions for the `backends:` section.
backends::BackendOptions backend_options(const BackendsConfig& config);

// One Telemetry event per GPU of a sampler snapshot, stamped `ts_ns`
// (CLOCK_MONOTONIC): the form the correlator and the journal take.
std::vector<Event> telemetry_events(const backends::Snapshot& snapshot, uint64_t ts_ns);

// The nodes a process opens to use the GPU a UUID names (the kubelet's
// device IDs, NVIDIA_VISIBLE_DEVICES), as device numbers ("195:0"): a GPU
// ("GPU-..."): all its nodes (/dev/nvidiaN, its nvidia-drm card and render
// nodes) and, in MIG mode, every instance's access node; a MIG instance
// ("MIG-...", or the older "MIG-GPU-<GPU uuid>/<GI>/<CI>"): its GPU's
// /dev/nvidiaN and its GPU and compute instances' access nodes
// (/dev/nvidia-caps). Empty when `devices` (the GPU inventory) lacks it.
std::vector<std::string> gpu_nodes_by_uuid(const std::vector<backends::GpuDevice>& devices,
                                           const std::string& uuid);
// Every such node of the inventory's NVIDIA GPUs: what counts as a GPU when
// a pod's allocation is judged.
std::vector<std::string> nvidia_gpu_nodes(const std::vector<backends::GpuDevice>& devices);

}  // namespace gpuguard::agent
