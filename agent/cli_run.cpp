// gpuguard run: load the sensor, register GPU devices, print events.
#include <chrono>
#include <cstdio>

#include <signal.h>

#include "agent/cli.h"
#include "agent/event_json.h"
#include "agent/gpu_devices.h"
#include "agent/sensor.h"
#include "gpuguard/common/logging.h"
#include "gpuguard/version.h"

namespace gpuguard::agent::cli {
namespace {

struct RunOptions {
    std::string config_path;
    std::string btf_path;
    bool print_events = false;
};

int run_agent(const Context& context, const RunOptions& options) {
    const auto log = logger("agent");
    auto config = load_config_or_report(context, options.config_path);
    if (!config) return 2;
    if (!options.btf_path.empty()) config->sensor.btf_path = options.btf_path;
    log->info("gpuguard {} starting ({})", GPUGUARD_VERSION,
              options.config_path.empty() ? "embedded default config" : options.config_path);

    const int64_t realtime_offset = monotonic_to_realtime_offset_ns();
    auto handler = [&](const Event& event) {
        if (!options.print_events) return;
        const std::string line = event_to_json(event, realtime_offset) + "\n";
        std::fwrite(line.data(), 1, line.size(), stdout);
        std::fflush(stdout);
    };

    context.install_stop_handlers();
    auto sensor = Sensor::open(SensorOptions{config->sensor}, handler);
    if (!sensor) {
        log->critical("cannot start the sensor: {}", sensor.error().message);
        return 1;
    }

    auto from_proc = read_gpu_devices("/proc");
    if (!from_proc) {
        log->warn("{}; only sensor.extra_gpu_devices are watched", from_proc.error().message);
    } else {
        for (const auto& device : from_proc.value()) {
            if (auto added = sensor->add_gpu_device(device); !added) {
                log->error("{}", added.error().message);
            } else {
                log->info("watching GPU device {} ({})", device.to_string(), device.driver);
            }
        }
    }
    for (const auto& device : config->sensor.extra_gpu_devices) {
        log->info("watching GPU device {} (sensor.extra_gpu_devices)", device.to_string());
    }
    if ((!from_proc || from_proc->empty()) && config->sensor.extra_gpu_devices.empty()) {
        log->warn(
            "no GPU driver in /proc/devices and no sensor.extra_gpu_devices: only failed "
            "opens of GPU paths will be reported");
    }
    log->info("ready{}", options.print_events ? ": printing events as JSON lines on stdout" : "");

    uint64_t reported_drops = 0;
    auto next_drop_check = std::chrono::steady_clock::now();
    while (*context.stop_signal == 0) {
        auto polled = sensor->poll(std::chrono::milliseconds(200));
        if (!polled) {
            log->critical("{}", polled.error().message);
            return 1;
        }
        if (std::chrono::steady_clock::now() >= next_drop_check) {
            next_drop_check += std::chrono::seconds(5);
            const uint64_t dropped = sensor->stats().total_dropped();
            if (dropped > reported_drops) {
                log->warn("ring buffer full: {} event(s) lost so far (raise sensor.ring_buffer_kb)",
                          dropped);
                reported_drops = dropped;
            }
        }
    }
    const auto stats = sensor->stats();
    log->info("stopping on {}: {} event(s) delivered, {} lost in the kernel, {} undecodable",
              *context.stop_signal == SIGINT ? "SIGINT" : "SIGTERM", stats.delivered,
              stats.total_dropped(), stats.decode_errors);
    return 0;
}

}  // namespace

void add_run_command(CLI::App& app, Context& context) {
    auto options = std::make_shared<RunOptions>();
    auto* run = app.add_subcommand("run", "load the sensor and watch GPU device use");
    run->add_option("-c,--config", options->config_path,
                    "configuration file (default: the embedded configuration)");
    run->add_option("--btf", options->btf_path, "vmlinux BTF file (overrides sensor.btf)");
    run->add_flag("--print-events", options->print_events,
                  "print every event as one JSON line on stdout (docs/events.md)");
    run->callback([&context, options] { context.exit_code = run_agent(context, *options); });
}

}  // namespace gpuguard::agent::cli
