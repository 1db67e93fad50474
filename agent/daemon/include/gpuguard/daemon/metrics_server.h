// Prometheus /metrics over HTTP on a loopback address: per-GPU and
// per-process gauges from the telemetry sampler, plus counters the rest of
// the agent supplies through a callback (events, drops, alerts, actions).
// The HTTP library stays inside metrics_server.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gpuguard/backends/backends.h"
#include "gpuguard/common/result.h"

namespace gpuguard::agent {

// One sample of an agent metric, e.g. {"gpuguard_events_total", "...",
// "counter", {{"type", "exec"}}, 1234}. Samples with the same name form one
// family; its help and type come from the first.
struct AgentMetric {
    std::string name;
    std::string help;
    std::string type;  // "counter" or "gauge"
    std::vector<std::pair<std::string, std::string>> labels;
    double value = 0;
};

using AgentMetricsSource = std::function<std::vector<AgentMetric>()>;
using SnapshotSource = std::function<backends::Snapshot()>;

// The Prometheus text exposition format (version 0.0.4) for a snapshot and
// the agent's own metrics. Absent telemetry gives no sample, never 0.
// Agent metrics with invalid names or types are dropped (and logged).
std::string render_metrics(const backends::Snapshot& snapshot,
                           const std::vector<AgentMetric>& agent_metrics);

struct MetricsServerOptions {
    std::string listen = "127.0.0.1";  // must be loopback; config validates it
    uint16_t port = 9842;              // 0: any free port (tests), see port()
    // Set: also serve the read-only status page (/status, /status.js) and its
    // data, /status.json = {"telemetry": <the snapshot>, "agent": <this>}.
    // Must return a JSON object; called on the server's threads.
    std::function<std::string()> status_json;
};

class MetricsServer {
  public:
    // Binds and starts serving on its own thread. Fails with kInvalidArgument
    // for a non-loopback address and kIo when the port cannot be bound.
    // `snapshot` and `agent` are called on the server's threads; they must be
    // thread-safe (TelemetrySampler::latest() is). `agent` may be empty.
    static Result<std::unique_ptr<MetricsServer>> start(const MetricsServerOptions& options,
                                                        SnapshotSource snapshot,
                                                        AgentMetricsSource agent);
    ~MetricsServer();  // stops serving and joins
    MetricsServer(const MetricsServer&) = delete;
    MetricsServer& operator=(const MetricsServer&) = delete;

    uint16_t port() const;  // the bound port

    struct Impl;

  private:
    explicit MetricsServer(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace gpuguard::agent
