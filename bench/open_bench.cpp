// Cost of the open sensor on every process of the host: ns per openat+close
// without the sensor (baseline) and with it attached, measured in the same
// run, alternating baseline and sensor rounds; prints both and the ratio.
//
//   regular_file   open of a regular file: the hot path every process pays
//   char_device    open of /dev/null-like node that is not a GPU (map lookups)
//   gpu_node       open of a registered GPU node: an event is emitted and consumed
//
// Needs root. Usage: open_bench [--rounds=N] [--attach=MODE] [google benchmark flags]
// (MODE: sensor.attach's values; auto by default).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "gpuguard/common/logging.h"
#include "gpuguard/sensor/sensor.h"

namespace {

using gpuguard::agent::GpuDeviceNumber;
using gpuguard::agent::Sensor;

struct Paths {
    std::string regular_file;
    std::string char_device;  // 1:5 (/dev/zero-like), not registered
    std::string gpu_node;     // 1:7 (/dev/full-like), registered as a GPU
};

void open_close_loop(benchmark::State& state, const std::string& path) {
    for (auto _ : state) {
        const int fd = open(path.c_str(), O_RDONLY);
        if (fd < 0) {
            state.SkipWithError("open failed");
            break;
        }
        close(fd);
    }
}

// Collects real time per iteration by benchmark name, while still printing.
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
    uint64_t delivered() const { return sensor_.stats().delivered; }
    uint64_t dropped() const { return sensor_.stats().total_dropped(); }
    std::string mode() const { return std::string(attach_mode_name(sensor_.attach_mode())); }

  private:
    Sensor sensor_;
    std::atomic<bool> stop_{false};
    std::thread consumer_;
};

}  // namespace

int main(int argc, char** argv) {
    int rounds = 3;
    auto attach = gpuguard::agent::AttachMode::kAuto;
    std::vector<char*> args;
    for (int i = 0; i < argc; ++i) {
        if (std::strncmp(argv[i], "--rounds=", 9) == 0) {
            rounds = std::max(1, std::atoi(argv[i] + 9));
        } else if (std::strncmp(argv[i], "--attach=", 9) == 0) {
            const auto mode = gpuguard::agent::parse_attach_mode(argv[i] + 9);
            if (!mode) {
                std::fprintf(stderr, "open_bench: %s is not a sensor.attach mode\n", argv[i] + 9);
                return 2;
            }
            attach = *mode;
        } else {
            args.push_back(argv[i]);
        }
    }
    int bench_argc = static_cast<int>(args.size());
    benchmark::Initialize(&bench_argc, args.data());
    gpuguard::set_log_level("warn");

    char dir_template[] = "/tmp/gg-bench-XXXXXX";
    if (!mkdtemp(dir_template)) return 1;
    const std::filesystem::path dir = dir_template;
    Paths paths{(dir / "regular").string(), (dir / "zero").string(), (dir / "gpu").string()};
    std::FILE* file = std::fopen(paths.regular_file.c_str(), "w");
    if (file) std::fclose(file);
    if (mknod(paths.char_device.c_str(), S_IFCHR | 0666, makedev(1, 5)) != 0 ||
        mknod(paths.gpu_node.c_str(), S_IFCHR | 0666, makedev(1, 7)) != 0) {
        std::fprintf(stderr, "open_bench: mknod failed (%s): run as root\n", std::strerror(errno));
        return 1;
    }

    const std::pair<const char*, std::string> cases[] = {
        {"regular_file", paths.regular_file},
        {"char_device", paths.char_device},
        {"gpu_node", paths.gpu_node},
    };
    for (const auto& [name, path] : cases) {
        for (const char* mode : {"baseline", "sensor"}) {
            benchmark::RegisterBenchmark(
                (std::string("BM_OpenClose_") + name + "/" + mode).c_str(),
                [path = path](benchmark::State& state) { open_close_loop(state, path); });
        }
    }

    CollectingReporter reporter;
    uint64_t gpu_events = 0, gpu_drops = 0;
    std::string mode_used;
    for (int round = 0; round < rounds; ++round) {
        benchmark::RunSpecifiedBenchmarks(&reporter, "/baseline$");
        gpuguard::agent::SensorOptions options;
        options.config.attach = attach;
        // Registered like a GPU host's drivers, plus the test node.
        options.config.extra_gpu_devices = {GpuDeviceNumber{195, std::nullopt, "bench"},
                                            GpuDeviceNumber{226, std::nullopt, "bench"},
                                            GpuDeviceNumber{1, 7, "bench"}};
        auto sensor = Sensor::open(options, nullptr);
        if (!sensor) {
            std::fprintf(stderr, "open_bench: %s\n", sensor.error().message.c_str());
            return 1;
        }
        {
            AttachedSensor attached(std::move(sensor).value());
            benchmark::RunSpecifiedBenchmarks(&reporter, "/sensor$");
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            gpu_events += attached.delivered();
            gpu_drops += attached.dropped();
            mode_used = attached.mode();
        }
    }
    std::filesystem::remove_all(dir);

    std::printf("\nopenat+close, median of %d round(s), same run:\n", rounds);
    std::printf("%-14s %14s %16s %8s\n", "case", "baseline ns", "with sensor ns", "ratio");
    for (const auto& [name, path] : cases) {
        const std::string prefix = std::string("BM_OpenClose_") + name + "/";
        const double base = median(reporter.times_ns[prefix + "baseline"]);
        const double with = median(reporter.times_ns[prefix + "sensor"]);
        std::printf("%-14s %14.1f %16.1f %7.2fx\n", name, base, with, base > 0 ? with / base : 0);
    }
    const double gpu_ns = median(reporter.times_ns[std::string("BM_OpenClose_gpu_node/sensor")]);
    std::printf(
        "attach mode %s; gpu_node events delivered while measuring: %llu, dropped: %llu "
        "(%.0f K GPU opens/s from one producer)\n",
        mode_used.c_str(), static_cast<unsigned long long>(gpu_events),
        static_cast<unsigned long long>(gpu_drops), gpu_ns > 0 ? 1e6 / gpu_ns : 0.0);
    if (gpu_events == 0) {
        std::fprintf(stderr,
                     "open_bench: the sensor delivered no GPU events: it was not attached\n");
        return 1;
    }
    return reporter.failed ? 1 : 0;
}
