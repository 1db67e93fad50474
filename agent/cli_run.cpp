// gpuguard run: load the sensor, register GPU devices, print events.
#include <chrono>
#include <cstdio>
#include <set>
#include <sstream>

#include <signal.h>

#include "agent/agent.h"
#include "agent/cli.h"
#include "gpuguard/common/logging.h"
#include "gpuguard/version.h"

namespace gpuguard::agent::cli {
namespace {

struct RunOptions {
    std::string config_path;
    std::string btf_path;
    bool print_events = false;
    std::string event_types = "gpu_open,gpu_ioctl,connect";
};

int run_agent(const Context& context, const RunOptions& options) {
    const auto log = logger("agent");
    auto config = load_config_or_report(context, options.config_path);
    if (!config) return 2;
    if (!options.btf_path.empty()) config->sensor.btf_path = options.btf_path;
    log->info("gpuguard {} starting ({})", GPUGUARD_VERSION,
              options.config_path.empty() ? "embedded default config" : options.config_path);

    AgentOptions agent_options;
    agent_options.config = *config;
    if (options.print_events) {
        agent_options.event_sink = [](const std::string& line) {
            std::fwrite(line.data(), 1, line.size(), stdout);
            std::fputc('\n', stdout);
            std::fflush(stdout);
        };
    }
    if (options.event_types != "all") {
        std::stringstream list(options.event_types);
        for (std::string type; std::getline(list, type, ',');) {
            if (!type.empty()) agent_options.event_types.insert(type);
        }
    }
    context.install_stop_handlers();
    auto agent = Agent::start(std::move(agent_options));
    if (!agent) {
        log->critical("cannot start the sensor: {}", agent.error().message);
        return 1;
    }
    log->info("ready{}", options.print_events ? ": printing events as JSON lines on stdout" : "");
    if (auto ran = agent.value()->run(context.stop_signal); !ran) {
        log->critical("{}", ran.error().message);
        return 1;
    }
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
                  "print events as JSON lines on stdout (docs/events.md)");
    run->add_option("--event-types", options->event_types,
                    "comma-separated types --print-events prints, or \"all\" (adds exec, fork, "
                    "exit of every process)")
        ->capture_default_str()
        ->check([](const std::string& value) -> std::string {
            if (value == "all") return "";
            std::stringstream list(value);
            for (std::string type; std::getline(list, type, ',');) {
                static const std::set<std::string> known = {"gpu_open", "gpu_ioctl", "connect",
                                                            "exec",     "fork",      "exit"};
                if (!known.contains(type)) {
                    return "unknown event type '" + type +
                           "' (gpu_open, gpu_ioctl, connect, exec, fork, exit, or all)";
                }
            }
            return "";
        });
    run->callback([&context, options] { context.exit_code = run_agent(context, *options); });
}

}  // namespace gpuguard::agent::cli
