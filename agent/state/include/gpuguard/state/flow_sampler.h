// FlowSampler: the kernel's flow shapes (bpf/payload.h, gg_flow_shape) of
// the processes the agent samples, turned into flow events: one for each
// TCP flow that is old enough and moved since it was last reported, read
// at most once per interval, so the correlator can judge a connection by
// its shape (docs/detections.md, "Flows by their shape").
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "gpuguard/events/event.h"
#include "gpuguard/state/process_table.h"

namespace gpuguard::agent {

class FlowSampler {
  public:
    // Every flow in the kernel's map, of any process.
    using Reader = std::function<std::vector<FlowReading>()>;

    struct Options {
        uint64_t interval_ns = 10'000'000'000;  // the map is read at most this often
        uint64_t min_age_ns = 30'000'000'000;   // younger flows are not reported
    };

    FlowSampler(Reader reader, Options options);

    // At `now_ns` (CLOCK_MONOTONIC), once `interval_ns` passed since the last
    // read: a flow event, stamped `now_ns`, for each flow of a live process
    // of `processes` at least `min_age_ns` old whose counters moved since
    // it was last reported (or never were). Flows gone from the map are
    // forgotten. Before the interval passed: nothing, and no read.
    std::vector<Event> sample(const std::vector<ProcessInfo>& processes, uint64_t now_ns);

  private:
    Reader reader_;
    Options options_;
    uint64_t last_read_ns_ = 0;
    bool read_once_ = false;
    std::map<std::pair<uint32_t, uint64_t>, Flow> reported_;  // (pid, flow) -> counts last sent
};

// The flow event body of `reading` at `now_ns`: its counts with the ages
// (time since its first message, its latest send and receive) filled in.
Flow flow_at(const FlowReading& reading, uint64_t now_ns);

}  // namespace gpuguard::agent
