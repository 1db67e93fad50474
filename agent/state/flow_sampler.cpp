#include "gpuguard/state/flow_sampler.h"

#include <unordered_map>

namespace gpuguard::agent {

FlowSampler::FlowSampler(Reader reader, Options options)
    : reader_(std::move(reader)), options_(options) {}

Flow flow_at(const FlowReading& reading, uint64_t now_ns) {
    const auto since = [&](uint64_t then) {
        return then != 0 && now_ns > then ? now_ns - then : 0;
    };
    Flow flow = reading.counts;
    flow.age_ns = since(reading.first_ns);
    flow.since_send_ns = reading.last_send_ns != 0 ? since(reading.last_send_ns) : flow.age_ns;
    flow.since_receive_ns =
        reading.last_receive_ns != 0 ? since(reading.last_receive_ns) : flow.age_ns;
    return flow;
}

std::vector<Event> FlowSampler::sample(const std::vector<ProcessInfo>& processes, uint64_t now_ns) {
    std::vector<Event> events;
    if (read_once_ && now_ns - last_read_ns_ < options_.interval_ns) return events;
    read_once_ = true;
    last_read_ns_ = now_ns;
    std::unordered_map<uint32_t, const ProcessInfo*> live;
    for (const ProcessInfo& info : processes) {
        if (!info.exited) live.emplace(info.pid, &info);
    }
    std::map<std::pair<uint32_t, uint64_t>, Flow> still_there;
    for (const FlowReading& reading : reader_()) {
        const auto process = live.find(reading.pid);
        if (process == live.end()) continue;
        const std::pair key{reading.pid, reading.counts.flow};
        Flow flow = flow_at(reading, now_ns);
        if (flow.age_ns < options_.min_age_ns) continue;
        // Moved: any count differs from the last report (the ages always do).
        const auto known = reported_.find(key);
        still_there.emplace(key, reading.counts);
        if (known != reported_.end() && known->second == reading.counts) continue;
        Event event;
        event.ts_ns = now_ns;
        event.task = task_of(*process->second);
        event.data = std::move(flow);
        events.push_back(std::move(event));
    }
    reported_ = std::move(still_there);
    return events;
}

}  // namespace gpuguard::agent
