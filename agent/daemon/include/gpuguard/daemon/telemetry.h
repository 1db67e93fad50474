// Glue between the agent's configuration and the GPU telemetry backends.
#pragma once

#include <vector>

#include "gpuguard/daemon/config.h"
#include "gpuguard/events/event.h"
#include "gpuguard/backends/backends.h"

namespace gpuguard::agent {

// BackendOptions for the `backends:` section.
backends::BackendOptions backend_options(const BackendsConfig& config);

// One Telemetry event per GPU of a sampler snapshot, stamped `ts_ns`
// (CLOCK_MONOTONIC): the form the correlator and the journal take.
std::vector<Event> telemetry_events(const backends::Snapshot& snapshot, uint64_t ts_ns);

}  // namespace gpuguard::agent
