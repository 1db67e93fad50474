// Replay throughput: a generated stream of events (GPU miners, GPU workloads
// and the host's ordinary process churn) through decode + correlate on one
// core. Prints events/s for JSON decoding alone (the baseline), the
// correlator alone on decoded events, and both together as `gpuguard replay`
// runs them, with the ratios; the goal is >= 1 M events/s end to end.
//
//   replay_bench [--events=N] [--goal=EVENTS_PER_S]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "agent/event_json.h"
#include "agent/replay.h"
#include "gpuguard/rules/correlation.h"

namespace {

using namespace gpuguard;
using namespace gpuguard::agent;
using Clock = std::chrono::steady_clock;

// One process lifetime: exec, GPU opens and ioctls, a connect, telemetry,
// exit. Every 8th is a miner, the rest GPU jobs or plain host processes.
std::vector<Event> generate(size_t count) {
    std::vector<Event> events;
    events.reserve(count + 16);
    uint64_t ts = 1'000'000'000'000;
    uint32_t pid = 1000;
    auto push = [&](uint32_t id, const std::string& comm, EventData data) {
        Event event;
        event.ts_ns = ts += 50'000;
        event.task = TaskInfo{id, id, 1, 1000, 1000, 1, comm};
        event.data = std::move(data);
        events.push_back(std::move(event));
    };
    for (size_t n = 0; events.size() < count; ++n) {
        const uint32_t id = pid++;
        if (pid > 4'000'000) pid = 1000;
        const bool miner = n % 8 == 0;
        const bool gpu = miner || n % 4 == 1;
        const std::string comm = miner ? "xmrig" : gpu ? "python3" : "sh";
        push(id, comm,
             Exec{miner ? "/opt/xmrig/xmrig"
                  : gpu ? "/usr/bin/python3"
                        : "/bin/sh",
                  miner ? std::vector<std::string>{"xmrig", "-o",
                                                   "stratum+tcp://pool.example.org:3333", "--cuda"}
                  : gpu ? std::vector<std::string>{"python3", "train.py", "--epochs", "10"}
                        : std::vector<std::string>{"sh", "-c", "date"},
                  false, false, id});
        if (gpu) {
            push(id, comm,
                 GpuOpen{195, 255, 3, -100, 2, OpenSyscall::kOpenat, false, "/dev/nvidiactl"});
            push(id, comm,
                 GpuOpen{195, 0, 4, -100, 2, OpenSyscall::kOpenat, false, "/dev/nvidia0"});
            push(id, comm, GpuIoctl{195, 255, 3, 0xc020462a, 0});
            push(id, comm,
                 Connect{9, -115, 4, "198.51.100.1", static_cast<uint16_t>(miner ? 3333 : 443),
                         true, false, false, false, false});
            Telemetry telemetry{0,    "nvidia",    "H100",      {"195:0"},
                                97.0, 40ull << 30, 80ull << 30, {{id, 30ull << 30, 95.0}}};
            Event sample;
            sample.ts_ns = ts += 50'000;
            sample.data = std::move(telemetry);
            events.push_back(std::move(sample));
        } else {
            push(id, comm, Fork{pid++, false});
        }
        push(id, comm, Exit{0, gpu});
    }
    events.resize(count);
    return events;
}

std::shared_ptr<const rules::RuleSet> builtin_rule_set() {
    auto pack = rules::compile_builtin_pack();
    if (!pack) {
        std::fprintf(stderr, "built-in pack: %s\n", pack.error().message.c_str());
        std::exit(2);
    }
    auto built = rules::RuleSet::build(*pack, {});
    if (!built) std::exit(2);
    return std::make_shared<const rules::RuleSet>(std::move(*built));
}

double seconds_since(Clock::time_point start) {
    return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
    size_t count = 1'000'000;
    double goal = 1e6;
    for (int i = 1; i < argc; ++i) {
        if (std::strncmp(argv[i], "--events=", 9) == 0)
            count = std::strtoull(argv[i] + 9, nullptr, 10);
        if (std::strncmp(argv[i], "--goal=", 7) == 0) goal = std::strtod(argv[i] + 7, nullptr);
    }
    const auto events = generate(count);
    std::vector<std::string> lines;
    lines.reserve(events.size());
    size_t bytes = 0;
    for (const auto& event : events) {
        lines.push_back(event_to_json(event, 1'790'000'000'000'000'000));
        bytes += lines.back().size() + 1;
    }
    const auto rule_set = builtin_rule_set();
    auto correlation = rules::builtin_correlation_rules();
    if (!correlation) return 2;

    // Baseline: JSON decoding alone.
    auto start = Clock::now();
    size_t decoded = 0;
    for (size_t i = 0; i < lines.size(); ++i) {
        decoded += event_from_json(lines[i], "bench").ok();
    }
    const double decode_s = seconds_since(start);

    // The correlator alone, on decoded events.
    auto replay = Replay::create(*correlation, rule_set);
    if (!replay) return 2;
    size_t detections = 0;
    const auto count_detection = [&](const Detection&) { ++detections; };
    start = Clock::now();
    for (const auto& event : events) (*replay)->feed(event, std::nullopt, count_detection);
    const double correlate_s = seconds_since(start);

    // Both, as `gpuguard replay` runs them.
    auto full = Replay::create(*correlation, rule_set);
    if (!full) return 2;
    size_t full_detections = 0;
    start = Clock::now();
    for (size_t i = 0; i < lines.size(); ++i) {
        (void)(*full)->feed_line(lines[i], "bench", [&](const Detection&) { ++full_detections; });
    }
    const double full_s = seconds_since(start);

    const double n = static_cast<double>(events.size());
    std::printf("replay_bench: %zu events (%.1f MB of JSON Lines), %zu detections\n", events.size(),
                bytes / 1e6, full_detections);
    std::printf("%-34s %12s %10s\n", "stage", "events/s", "ratio");
    std::printf("%-34s %12.0f %10s\n", "JSON decode only (baseline)", n / decode_s, "1.00");
    std::printf("%-34s %12.0f %10.2f\n", "correlate only (decoded events)", n / correlate_s,
                decode_s / correlate_s);
    std::printf("%-34s %12.0f %10.2f\n", "decode + correlate (replay)", n / full_s,
                decode_s / full_s);
    std::printf("goal: decode + correlate >= %.0f events/s: %s\n", goal,
                n / full_s >= goal ? "met" : "NOT met");
    if (decoded != events.size() || detections != full_detections || detections == 0) {
        std::fprintf(stderr,
                     "replay_bench: inconsistent run (%zu decoded, %zu vs %zu detections)\n",
                     decoded, detections, full_detections);
        return 1;
    }
    return 0;
}
