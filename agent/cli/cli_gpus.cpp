// gpuguard gpus: the GPUs this host has and their telemetry, as a table,
// JSON (--json) or refreshed until Ctrl-C (--watch). Runs without the sensor:
// per-process figures come from one /proc sweep at start, then targeted reads.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <thread>

#include <unistd.h>

#include "cli.h"
#include "gpuguard/backends/backends.h"
#include "gpuguard/common/logging.h"
#include "gpuguard/common/printable.h"
#include "gpuguard/daemon/telemetry.h"

namespace gpuguard::agent::cli {
namespace {

struct GpusCommand {
    std::string config_path;
    bool as_json = false;
    bool watch = false;
    uint32_t interval_ms = 0;  // 0: backends.interval_ms
};

template <typename T>
std::string or_dash(const std::optional<T>& value, const char* format) {
    if (!value) return "-";
    char text[64];
    std::snprintf(text, sizeof text, format, *value);
    return text;
}

std::string memory_column(const backends::GpuSample& gpu) {
    if (!gpu.memory_used_bytes && !gpu.memory_total_bytes) return "-";
    const auto mib = [](const std::optional<uint64_t>& bytes) {
        return bytes ? std::to_string(*bytes >> 20) : std::string("?");
    };
    return mib(gpu.memory_used_bytes) + " / " + mib(gpu.memory_total_bytes) + " MiB";
}

// "    pipes: sm 95% tensor 0% ...": the pipes a GPU (or a MIG GPU instance) reports.
void print_pipes(const std::string& what, const backends::GpmActivity& gpm) {
    std::string pipes;
    for (const auto& [name, fraction] :
         {std::pair{"sm", gpm.sm_active}, std::pair{"tensor", gpm.tensor_active},
          std::pair{"fp16", gpm.fp16_active}, std::pair{"fp32", gpm.fp32_active},
          std::pair{"fp64", gpm.fp64_active}, std::pair{"int", gpm.integer_active},
          std::pair{"dram", gpm.dram_active}}) {
        if (!fraction) continue;
        char part[32];
        std::snprintf(part, sizeof part, " %s %.0f%%", name, *fraction * 100);
        pipes += part;
    }
    if (!pipes.empty()) std::printf("    %s:%s\n", what.c_str(), pipes.c_str());
}

void print_table(const backends::Snapshot& snapshot) {
    std::printf("%-3s %-8s %-28s %-14s %6s %22s %6s %8s %5s\n", "GPU", "VENDOR", "MODEL", "BUS-ID",
                "UTIL", "MEMORY", "TEMP", "POWER", "PROCS");
    if (snapshot.devices.empty()) std::printf("(no GPUs found)\n");
    for (const auto& device : snapshot.devices) {
        const backends::GpuSample* gpu = nullptr;
        for (const auto& sample : snapshot.gpus) {
            if (sample.gpu == device.index) gpu = &sample;
        }
        size_t processes = 0;
        for (const auto& process : snapshot.processes) processes += process.gpu == device.index;
        const backends::GpuSample empty;
        const auto& g = gpu ? *gpu : empty;
        std::printf("%-3u %-8s %-28.28s %-14.14s %6s %22s %6s %8s %5zu\n", device.index,
                    backends::to_string(device.vendor), printable(device.model).c_str(),
                    printable(device.bus_id).c_str(),
                    or_dash(g.gpu_utilization_percent, "%.0f%%").c_str(), memory_column(g).c_str(),
                    or_dash(g.temperature_gpu_celsius, "%.0fC").c_str(),
                    or_dash(g.power_draw_watts, "%.0fW").c_str(), processes);
        // GPM's pipes over the last interval (Hopper and later), under their
        // GPU: the whole GPU's, then each MIG GPU instance's.
        if (g.gpm) print_pipes("pipes", *g.gpm);
        for (const auto& [gpu_instance, activity] : g.gpm_by_gpu_instance) {
            print_pipes("pipes gi" + std::to_string(gpu_instance), activity);
        }
        // MIG devices under their GPU: utilisation is not reported per instance.
        for (const auto& mig : device.mig_instances) {
            size_t in_it = 0;
            for (const auto& process : snapshot.processes) {
                in_it += process.gpu == device.index && process.gpu_instance == mig.gpu_instance &&
                         process.compute_instance == mig.compute_instance;
            }
            const std::string name = "gi" + std::to_string(mig.gpu_instance) + "/ci" +
                                     std::to_string(mig.compute_instance);
            const std::string memory =
                mig.memory_total_bytes
                    ? std::to_string(*mig.memory_total_bytes / (1024 * 1024)) + " MiB"
                    : "-";
            std::printf(
                "  %-10s %-31.31s %-14s %6s %22s %6s %8s %5zu\n", name.c_str(),
                printable(mig.uuid).c_str(),
                mig.access_minor ? ("cap " + std::to_string(*mig.access_minor)).c_str() : "-", "-",
                memory.c_str(), "", "", in_it);
        }
    }
    for (const auto& backend : snapshot.backends) {
        if (!backend.ok)
            std::printf("backend %s: %s\n", backend.name.c_str(), backend.last_error.c_str());
    }
    std::fflush(stdout);
}

int run_gpus(const Context& context, const GpusCommand& command) {
    auto config = load_config_or_report(context, command.config_path);
    if (!config) return 2;
    const auto interval = std::chrono::milliseconds(
        command.interval_ms ? command.interval_ms : config->backends.interval_ms);
    backends::TelemetrySampler sampler(backends::make_backends(backend_options(config->backends)),
                                       {});
    sampler.sample_once();
    // Start-up sweep (no sensor here), then only those fds are read.
    sampler.set_process_fds(
        backends::sweep_gpu_fds(config->backends.proc_root, sampler.gpu_device_numbers()));
    if (!command.watch) {
        // A second sample gives per-process rates; 200 ms is enough for them.
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        const auto& snapshot = sampler.sample_once();
        if (command.as_json) {
            std::cout << backends::to_json(snapshot) << "\n";
        } else {
            print_table(snapshot);
        }
        return 0;
    }
    if (context.install_stop_handlers) context.install_stop_handlers();
    const bool clear = !command.as_json && isatty(STDOUT_FILENO);
    while (!(context.stop_signal && *context.stop_signal)) {
        const auto& snapshot = sampler.sample_once();
        if (command.as_json) {
            std::cout << backends::to_json(snapshot, -1) << std::endl;
        } else {
            if (clear) std::printf("\033[H\033[2J");
            print_table(snapshot);
            if (!clear) std::printf("\n");
        }
        const auto until = std::chrono::steady_clock::now() + interval;
        while (std::chrono::steady_clock::now() < until &&
               !(context.stop_signal && *context.stop_signal)) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
    }
    return 0;
}

}  // namespace

void add_gpus_command(CLI::App& app, Context& context) {
    auto command = std::make_shared<GpusCommand>();
    auto* gpus = app.add_subcommand("gpus", "show GPUs and their telemetry");
    gpus->add_option("-c,--config", command->config_path,
                     "configuration file whose backends section applies");
    gpus->add_flag("--json", command->as_json, "print JSON (one line per sample with --watch)");
    gpus->add_flag("--watch", command->watch, "refresh every interval until interrupted");
    gpus->add_option("--interval", command->interval_ms, "refresh period in ms (--watch)")
        ->check(CLI::Range(100, 3600000));
    gpus->callback([&context, command] { context.exit_code = run_gpus(context, *command); });
}

}  // namespace gpuguard::agent::cli
