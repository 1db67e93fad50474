// FlowSampler (agent/state/flow_sampler.cpp): flow events for the sampled
// processes' flows, once old enough and when they moved, the map read at
// most once per interval.
#include "gpuguard/state/flow_sampler.h"

#include <gtest/gtest.h>

namespace gpuguard::agent {
namespace {

constexpr uint64_t kSec = 1'000'000'000;

FlowReading reading(uint32_t pid, uint64_t flow, uint64_t first_ns, uint64_t sends) {
    FlowReading r;
    r.pid = pid;
    r.first_ns = first_ns;
    r.last_send_ns = sends ? first_ns + sends * kSec : 0;
    r.counts.flow = flow;
    r.counts.address = "203.0.113.9";
    r.counts.port = 443;
    r.counts.sends = sends;
    r.counts.send_bursts = sends;
    return r;
}

ProcessInfo process(uint32_t pid, bool exited = false) {
    ProcessInfo info;
    info.pid = pid;
    info.comm = "worker";
    info.exited = exited;
    return info;
}

TEST(FlowSamplerTest, reports_old_enough_flows_of_sampled_processes_when_they_moved) {
    std::vector<FlowReading> map;
    int reads = 0;
    FlowSampler sampler(
        [&] {
            ++reads;
            return map;
        },
        FlowSampler::Options{10 * kSec, 30 * kSec});
    const std::vector<ProcessInfo> sampled{process(7), process(8, true)};
    map = {reading(7, 1, 100 * kSec, 3),   // 40 s old at 140 s
           reading(7, 2, 120 * kSec, 1),   // 20 s old: too young
           reading(8, 3, 100 * kSec, 1),   // its process exited
           reading(9, 4, 100 * kSec, 1)};  // not a sampled process
    auto events = sampler.sample(sampled, 140 * kSec);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(reads, 1);
    EXPECT_EQ(events[0].ts_ns, 140 * kSec);
    EXPECT_EQ(events[0].task.pid, 7u);
    const Flow& flow = std::get<Flow>(events[0].data);
    EXPECT_EQ(flow.flow, 1u);
    EXPECT_EQ(flow.age_ns, 40 * kSec);
    EXPECT_EQ(flow.since_send_ns, 37 * kSec);
    EXPECT_EQ(flow.since_receive_ns, 40 * kSec) << "nothing received: its age";
    EXPECT_EQ(flow.sends, 3u);

    EXPECT_TRUE(sampler.sample(sampled, 145 * kSec).empty()) << "within the interval";
    EXPECT_EQ(reads, 1) << "and the map not read";

    // 10 s on: flow 1 did not move (not again), flow 2 is now old enough.
    events = sampler.sample(sampled, 150 * kSec);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(std::get<Flow>(events[0].data).flow, 2u);

    map[0].counts.receives = 1;  // flow 1 moved
    map[0].last_receive_ns = 155 * kSec;
    events = sampler.sample(sampled, 160 * kSec);
    ASSERT_EQ(events.size(), 1u);
    EXPECT_EQ(std::get<Flow>(events[0].data).since_receive_ns, 5 * kSec);

    // A flow gone from the map and back is new again.
    const FlowReading first = map[0];
    map.erase(map.begin());
    EXPECT_TRUE(sampler.sample(sampled, 170 * kSec).empty());
    map.push_back(first);
    EXPECT_EQ(sampler.sample(sampled, 180 * kSec).size(), 1u);
}

}  // namespace
}  // namespace gpuguard::agent
