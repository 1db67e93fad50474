// Glue between the agent's configuration and the GPU telemetry backends.
#pragma once

#include "agent/config.h"
#include "gpuguard/backends/backends.h"

namespace gpuguard::agent {

// BackendOptions for the `backends:` section.
backends::BackendOptions backend_options(const BackendsConfig& config);

}  // namespace gpuguard::agent
