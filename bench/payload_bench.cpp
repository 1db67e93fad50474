// Cost of the payload programs (bpf/payload.bpf.c) on a process they do not
// watch: ns per small write(2) to a pipe (plus the read(2) that drains it,
// which passes sys_exit_read) with the sensor attached without the payload
// programs (baseline) and with them, alternating rounds in the same run.
// A third case without any sensor is shown for reference. Goal: <= 10 %
// added. Wall time per iteration, as open_bench: process CPU time would also
// count the in-process ring-buffer consumer thread. Needs root.
//
// With --flow-shapes it measures instead what counting flow shapes
// (flow_shapes, bpf/payload.h) adds to a process the programs watch: ns per
// send+recv of 64 bytes over a loopback TCP connection by the benchmark
// itself, marked as a GPU process, with the payload programs attached and
// the shapes off (baseline) and on, alternating. (An unwatched process
// never reaches the shape code: the default mode measures it.)
//
// Usage: payload_bench [--writes=N] [--rounds=N] [--max-ratio=R] [--syscall-hooks]
//                      [--flow-shapes] [google benchmark flags]
// --syscall-hooks measures the fallback variant (syscall tracepoints).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gpuguard/common/logging.h"
#include "gpuguard/sensor/sensor.h"

namespace {

using gpuguard::agent::Sensor;

void write_read_loop(benchmark::State& state, int read_fd, int write_fd) {
    char byte[8] = "payload";
    for (auto _ : state) {
        if (write(write_fd, byte, sizeof(byte)) != sizeof(byte) ||
            read(read_fd, byte, sizeof(byte)) != sizeof(byte)) {
            state.SkipWithError("pipe write/read failed");
            break;
        }
    }
}

// A connected loopback TCP pair: [0] the client's end, [1] the accepted one.
bool tcp_pair(int fds[2]) {
    const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in in{};
    in.sin_family = AF_INET;
    in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(in);
    const bool ok = listener >= 0 &&
                    bind(listener, reinterpret_cast<sockaddr*>(&in), sizeof(in)) == 0 &&
                    listen(listener, 1) == 0 &&
                    getsockname(listener, reinterpret_cast<sockaddr*>(&in), &length) == 0 &&
                    (fds[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0 &&
                    connect(fds[0], reinterpret_cast<sockaddr*>(&in), sizeof(in)) == 0 &&
                    (fds[1] = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC)) >= 0;
    if (listener >= 0) close(listener);
    return ok;
}

void send_recv_loop(benchmark::State& state, int from, int to) {
    char block[64] = "shape";
    for (auto _ : state) {
        if (send(from, block, sizeof(block), 0) != sizeof(block) ||
            recv(to, block, sizeof(block), MSG_WAITALL) != sizeof(block)) {
            state.SkipWithError("tcp send/recv failed");
            break;
        }
    }
}

class CollectingReporter : public benchmark::ConsoleReporter {
  public:
    void ReportRuns(const std::vector<Run>& runs) override {
        for (const auto& run : runs) {
            if (run.error_occurred) failed = true;
            if (run.run_type == Run::RT_Iteration) {
                times_ns[run.benchmark_name()].push_back(run.GetAdjustedRealTime());
            }
        }
        ConsoleReporter::ReportRuns(runs);
    }
    std::map<std::string, std::vector<double>> times_ns;
    bool failed = false;
};

double median(std::vector<double> values) {
    std::sort(values.begin(), values.end());
    return values.empty() ? 0 : values[values.size() / 2];
}

// The least disturbed round: on a shared machine other load only adds time.
double fastest(const std::vector<double>& values) {
    return values.empty() ? 0 : *std::min_element(values.begin(), values.end());
}

// An attached sensor and a thread consuming its ring buffer.
class AttachedSensor {
  public:
    explicit AttachedSensor(Sensor sensor) : sensor_(std::move(sensor)) {
        consumer_ = std::thread([this] {
            while (!stop_) (void)sensor_.poll(std::chrono::milliseconds(50));
        });
    }
    ~AttachedSensor() {
        stop_ = true;
        consumer_.join();
    }
    Sensor& sensor() { return sensor_; }

  private:
    Sensor sensor_;
    std::atomic<bool> stop_{false};
    std::thread consumer_;
};

std::optional<AttachedSensor> attach(bool payload, bool syscall_hooks, bool flow_shapes = true) {
    gpuguard::agent::SensorOptions options;
    options.config.payload_capture = payload;
    options.config.payload_syscall_hooks = syscall_hooks;
    options.config.flow_shapes = flow_shapes;
    auto sensor = Sensor::open(options, nullptr);
    if (!sensor) {
        std::fprintf(stderr, "payload_bench: %s\n", sensor.error().message.c_str());
        return std::nullopt;
    }
    // Either variant (bpf/payload.bpf.c): socket-layer tp_btf or syscall
    // tracepoints (by whichever dispatch the attach mode uses).
    const std::string_view hooks = sensor->payload_hooks();
    if ((hooks != "off") != payload) {
        std::fprintf(stderr, "payload_bench: the payload programs %s attached\n",
                     hooks != "off" ? "are" : "are not");
        return std::nullopt;
    }
    if (payload) {
        std::printf("payload programs: %s\n",
                    hooks == "socket_layer" ? "tp_btf/sock_send_length, tp_btf/sock_recv_length"
                                            : "syscall tracepoints");
    }
    return std::optional<AttachedSensor>(std::in_place, std::move(sensor).value());
}

// --flow-shapes: a watched process's TCP send+recv with the shapes off and on.
int flow_shapes_main(long writes, int rounds, double max_ratio, bool syscall_hooks) {
    int fds[2] = {-1, -1};
    if (!tcp_pair(fds)) {
        std::fprintf(stderr, "payload_bench: no loopback TCP pair\n");
        return 1;
    }
    for (const char* mode : {"shapes_off", "shapes_on"}) {
        benchmark::RegisterBenchmark(
            (std::string("BM_Payload_watched_tcp/") + mode).c_str(),
            [&](benchmark::State& state) { send_recv_loop(state, fds[0], fds[1]); })
            ->Iterations(writes);
    }
    CollectingReporter reporter;
    for (int round = 0; round < rounds; ++round) {
        for (bool shapes : {false, true}) {
            auto attached = attach(true, syscall_hooks, shapes);
            if (!attached) return 1;
            const auto pid = static_cast<uint32_t>(getpid());
            if (!attached->sensor().mark_gpu_process(pid)) return 1;
            benchmark::RunSpecifiedBenchmarks(&reporter, shapes ? "/shapes_on/" : "/shapes_off/");
        }
    }
    close(fds[0]);
    close(fds[1]);
    const auto times_of = [&](const std::string& mode) {
        std::vector<double> times;
        for (const auto& [name, runs] : reporter.times_ns) {
            if (name.starts_with("BM_Payload_watched_tcp/" + mode + "/")) {
                times.insert(times.end(), runs.begin(), runs.end());
            }
        }
        return times;
    };
    const double off = median(times_of("shapes_off")), on = median(times_of("shapes_on"));
    if (off <= 0 || on <= 0) {
        std::fprintf(stderr, "payload_bench: a case did not run\n");
        return 1;
    }
    std::printf(
        "\n%ld send+recv pairs of 64 bytes on loopback TCP by a watched process, "
        "median of %d round(s):\n",
        writes, rounds);
    std::printf("  flow shapes off                %8.1f ns\n", off);
    std::printf("  flow shapes on                 %8.1f ns\n", on);
    std::printf("  ratio on/off                   %8.3fx (%+.1f %%)\n", on / off,
                (on / off - 1) * 100);
    const double off_best = fastest(times_of("shapes_off"));
    const double on_best = fastest(times_of("shapes_on"));
    std::printf("fastest round of each: off %.1f ns, on %.1f ns, ratio %.3fx\n", off_best, on_best,
                on_best / off_best);
    if (max_ratio > 0 && on / off > max_ratio) {
        std::fprintf(stderr, "payload_bench: ratio %.3f above --max-ratio=%.3f\n", on / off,
                     max_ratio);
        return 1;
    }
    return reporter.failed ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
    int rounds = 3;
    long writes = 1'000'000;
    double max_ratio = 0;  // 0: report only
    bool syscall_hooks = false;
    bool flow_shapes = false;
    std::vector<char*> args;
    for (int i = 0; i < argc; ++i) {
        if (std::strncmp(argv[i], "--rounds=", 9) == 0) {
            rounds = std::max(1, std::atoi(argv[i] + 9));
        } else if (std::strncmp(argv[i], "--writes=", 9) == 0) {
            writes = std::max(1L, std::atol(argv[i] + 9));
        } else if (std::strcmp(argv[i], "--syscall-hooks") == 0) {
            syscall_hooks = true;  // measure the syscall-tracepoint variant
        } else if (std::strcmp(argv[i], "--flow-shapes") == 0) {
            flow_shapes = true;
        } else if (std::strncmp(argv[i], "--max-ratio=", 12) == 0) {
            max_ratio = std::atof(argv[i] + 12);
        } else {
            args.push_back(argv[i]);
        }
    }
    int bench_argc = static_cast<int>(args.size());
    benchmark::Initialize(&bench_argc, args.data());
    gpuguard::set_log_level("warn");

    if (flow_shapes) return flow_shapes_main(writes, rounds, max_ratio, syscall_hooks);
    int fds[2];
    if (pipe(fds) != 0) return 1;
    for (const char* mode : {"no_sensor", "baseline", "payload"}) {
        benchmark::RegisterBenchmark(
            (std::string("BM_Payload_pipe_write/") + mode).c_str(),
            [&](benchmark::State& state) { write_read_loop(state, fds[0], fds[1]); })
            ->Iterations(writes);
    }

    CollectingReporter reporter;
    for (int round = 0; round < rounds; ++round) {
        benchmark::RunSpecifiedBenchmarks(&reporter, "/no_sensor/");
        for (bool payload : {false, true}) {
            auto attached = attach(payload, syscall_hooks);
            if (!attached) return 1;
            benchmark::RunSpecifiedBenchmarks(&reporter, payload ? "/payload/" : "/baseline/");
        }
    }
    close(fds[0]);
    close(fds[1]);

    // Names carry the iteration count: "BM_Payload_pipe_write/payload/iterations:1000000".
    const auto times_of = [&](const std::string& mode) {
        const std::string prefix = "BM_Payload_pipe_write/" + mode + "/";
        std::vector<double> times;
        for (const auto& [name, runs] : reporter.times_ns) {
            if (name.starts_with(prefix)) times.insert(times.end(), runs.begin(), runs.end());
        }
        return times;
    };
    const auto median_of = [&](const std::string& mode) { return median(times_of(mode)); };
    const double none = median_of("no_sensor");
    const double base = median_of("baseline");
    const double with = median_of("payload");
    if (none <= 0 || base <= 0 || with <= 0) {
        std::fprintf(stderr, "payload_bench: a case did not run\n");
        return 1;
    }
    const double ratio = base > 0 ? with / base : 0;
    std::printf(
        "\n%ld write+read pairs on a pipe by an unwatched process, median of %d round(s):\n",
        writes, rounds);
    std::printf("  no sensor                      %8.1f ns\n", none);
    std::printf("  sensor, payload programs off   %8.1f ns\n", base);
    std::printf("  sensor, payload programs on    %8.1f ns\n", with);
    std::printf("  ratio on/off                   %8.3fx (%+.1f %%, goal <= +10 %%)\n", ratio,
                (ratio - 1) * 100);
    const double base_best = fastest(times_of("baseline"));
    const double with_best = fastest(times_of("payload"));
    std::printf("fastest round of each (least disturbed by other load):\n");
    std::printf("  no sensor %.1f ns, payload programs off %.1f ns, on %.1f ns\n",
                fastest(times_of("no_sensor")), base_best, with_best);
    std::printf("  ratio on/off                   %8.3fx (%+.1f %%)\n", with_best / base_best,
                (with_best / base_best - 1) * 100);
    if (max_ratio > 0 && ratio > max_ratio) {
        std::fprintf(stderr, "payload_bench: ratio %.3f above --max-ratio=%.3f\n", ratio,
                     max_ratio);
        return 1;
    }
    return reporter.failed ? 1 : 0;
}
