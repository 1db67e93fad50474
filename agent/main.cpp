// gpuguard: command line entry point.
//   gpuguard run     load the sensor and watch GPU device use
//   gpuguard probe   report what this kernel offers
//   gpuguard config  show / check configuration
#include <CLI/CLI.hpp>
#include <signal.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <optional>
#include <string>

#include "agent/config.h"
#include "agent/event_json.h"
#include "agent/gpu_devices.h"
#include "agent/logging.h"
#include "agent/sensor.h"
#include "agent/sensor_probe.h"
#include "agent/sensor_support.h"
#include "gpuguard/version.h"

namespace {

// The one piece of mutable global state: set by SIGINT/SIGTERM.
volatile std::sig_atomic_t g_stop_signal = 0;

void on_stop_signal(int signo) { g_stop_signal = signo; }

void install_stop_handlers() {
    struct sigaction action {};
    action.sa_handler = on_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0;  // no SA_RESTART: epoll_wait must return EINTR
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
}

using gpuguard::agent::Config;

std::optional<Config> load_config_or_report(const std::string& path) {
    auto config = path.empty()
                      ? gpuguard::agent::load_config_text(gpuguard::agent::default_config_yaml(),
                                                          "<embedded default config>")
                      : gpuguard::agent::load_config_file(path);
    if (!config) {
        gpuguard::agent::logger("agent")->critical("{}", config.error().message);
        return std::nullopt;
    }
    return std::move(config).value();
}

struct RunOptions {
    std::string config_path;
    std::string btf_path;
    bool print_events = false;
    std::string log_level_override;  // --log-level wins over log.level
};

int run_agent(const RunOptions& options) {
    using namespace gpuguard::agent;
    const auto log = logger("agent");
    auto config = load_config_or_report(options.config_path);
    if (!config) return 2;
    set_log_level(options.log_level_override.empty() ? config->log.level
                                                     : options.log_level_override);
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

    install_stop_handlers();
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
        log->warn("no GPU driver in /proc/devices and no sensor.extra_gpu_devices: only failed "
                  "opens of GPU paths will be reported");
    }
    log->info("ready{}", options.print_events ? ": printing events as JSON lines on stdout" : "");

    uint64_t reported_drops = 0;
    auto next_drop_check = std::chrono::steady_clock::now();
    while (g_stop_signal == 0) {
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
              g_stop_signal == SIGINT ? "SIGINT" : "SIGTERM", stats.delivered,
              stats.total_dropped(), stats.decode_errors);
    return 0;
}

struct ProbeCommand {
    std::string config_path;
    std::string btf_path;
    bool as_json = false;
};

int run_probe(const ProbeCommand& command) {
    using namespace gpuguard::agent;
    auto config = load_config_or_report(command.config_path);
    if (!config) return 2;
    if (auto privileges = check_privileges(); !privileges) {
        logger("agent")->critical("gpuguard probe: {}", privileges.error().message);
        return 1;
    }
    ProbeOptions options;
    options.allow_mount_tracefs = config->sensor.mount_tracefs;
    options.btf_path = command.btf_path.empty() ? config->sensor.btf_path : command.btf_path;
    const auto features = probe_kernel_features(options);
    const bool as_json = command.as_json;
    bool required_missing = false;
    if (as_json) {
        std::cout << "[";
        for (size_t i = 0; i < features.size(); ++i) {
            const auto& f = features[i];
            // Details are plain ASCII we produced; escape quotes and backslashes only.
            std::string detail;
            for (char c : f.detail) {
                if (c == '"' || c == '\\') detail += '\\';
                detail += c;
            }
            std::cout << (i ? "," : "") << "\n  {\"feature\": \"" << f.name
                      << "\", \"available\": " << (f.available ? "true" : "false")
                      << ", \"required\": " << (f.required ? "true" : "false")
                      << ", \"detail\": \"" << detail << "\"}";
        }
        std::cout << "\n]\n";
    } else {
        std::printf("%-16s %-12s %s\n", "FEATURE", "STATUS", "DETAIL");
        for (const auto& f : features) {
            std::printf("%-16s %-12s %s\n", f.name.c_str(),
                        f.available ? "available" : (f.required ? "MISSING" : "unavailable"),
                        f.detail.c_str());
        }
    }
    for (const auto& f : features) required_missing |= f.required && !f.available;
    return required_missing ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"gpuguard: watch GPU use, detect miners and abuse, stop them"};
    app.require_subcommand(1);
    app.fallthrough();  // global options may follow the subcommand
    std::string log_level;
    app.add_option("--log-level", log_level, "override log.level")
        ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));

    RunOptions run_options;
    auto* run = app.add_subcommand("run", "load the sensor and watch GPU device use");
    run->add_option("-c,--config", run_options.config_path,
                    "configuration file (default: the embedded configuration)");
    run->add_option("--btf", run_options.btf_path, "vmlinux BTF file (overrides sensor.btf)");
    run->add_flag("--print-events", run_options.print_events,
                  "print every event as one JSON line on stdout (docs/events.md)");

    ProbeCommand probe_command;
    auto* probe = app.add_subcommand("probe", "report the BPF features this kernel offers");
    probe->add_flag("--json", probe_command.as_json, "print JSON instead of a table");
    probe->add_option("-c,--config", probe_command.config_path,
                      "configuration file whose sensor.btf and sensor.mount_tracefs apply");
    probe->add_option("--btf", probe_command.btf_path, "vmlinux BTF file (overrides sensor.btf)");

    std::string config_path;
    auto* config = app.add_subcommand("config", "inspect configuration");
    config->require_subcommand(1);
    auto* show = config->add_subcommand("show", "print the effective configuration");
    show->add_option("-c,--config", config_path, "configuration file (default: embedded)");
    auto* check = config->add_subcommand("check", "validate a configuration file");
    check->add_option("file", config_path, "configuration file")->required();
    auto* defaults = config->add_subcommand("default", "print the embedded default file");

    app.add_subcommand("version", "print the version");

    CLI11_PARSE(app, argc, argv);
    if (!log_level.empty()) gpuguard::agent::set_log_level(log_level);

    if (run->parsed()) {
        run_options.log_level_override = log_level;
        return run_agent(run_options);
    }
    if (probe->parsed()) return run_probe(probe_command);
    if (show->parsed() || check->parsed()) {
        auto loaded = load_config_or_report(config_path);
        if (!loaded) return 2;
        if (show->parsed()) std::cout << gpuguard::agent::config_to_yaml(*loaded);
        if (check->parsed()) std::cout << config_path << ": OK\n";
        return 0;
    }
    if (defaults->parsed()) {
        std::cout << gpuguard::agent::default_config_yaml();
        return 0;
    }
    std::cout << "gpuguard " << GPUGUARD_VERSION << "\n";
    return 0;
}
