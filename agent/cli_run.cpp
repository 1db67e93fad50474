// gpuguard run: load the sensor, register GPU devices, print events.
#include <chrono>
#include <cstdio>
#include <ctime>
#include <set>
#include <sstream>

#include <signal.h>

#include "agent/agent.h"
#include "agent/cli.h"
#include "gpuguard/common/logging.h"
#include "gpuguard/siem/siem.h"
#include "gpuguard/version.h"

namespace gpuguard::agent::cli {
namespace {

struct RunOptions {
    std::string config_path;
    std::string btf_path;
    bool print_events = false;
    bool json = false;
    bool quiet_detections = false;
    std::string event_types = "gpu_open,gpu_ioctl,connect";
};

// What stdout's JSON carries about the agent: the same as `gpuguard replay`
// prints, so live and replayed detections compare byte for byte.
HostInfo stdout_host() {
    HostInfo host;
    host.agent_version = GPUGUARD_VERSION;
    return host;
}

// "03:30:00 CRITICAL GG-CORR-0001 Known miner running on a GPU: pid 42 ..."
std::string describe(const Detection& detection) {
    char clock[16] = "--:--:--";
    if (detection.time_unix_ns != 0) {
        const time_t seconds = static_cast<time_t>(detection.time_unix_ns / 1'000'000'000);
        struct tm local {};
        localtime_r(&seconds, &local);
        strftime(clock, sizeof(clock), "%H:%M:%S", &local);
    }
    std::string severity = to_string(detection.severity);
    for (auto& c : severity) c = static_cast<char>(toupper(static_cast<unsigned char>(c)));
    std::ostringstream out;
    out << clock << ' ' << severity << ' ' << detection.rule_id << ' ' << detection.rule_name
        << (detection.update ? " (update " + std::to_string(detection.update) + ")" : "")
        << ": pid " << detection.process.pid << " (" << detection.process.comm << ")";
    if (!detection.process.executable.empty()) out << " exe " << detection.process.executable;
    if (!detection.process.user.empty()) out << " user " << detection.process.user;
    if (!detection.process.container_id.empty()) {
        out << " container " << detection.process.container_id.substr(0, 12);
    }
    if (detection.peer) out << " peer " << detection.peer->ip << ":" << detection.peer->port;
    char confidence[16];
    snprintf(confidence, sizeof(confidence), "%.2f", detection.confidence);
    out << " confidence " << confidence << " action " << detection.action
        << (detection.dry_run ? " (dry run)" : "");
    if (!detection.signature_ids.empty()) {
        out << " signatures";
        for (const auto& id : detection.signature_ids) out << ' ' << id;
    }
    if (!detection.process.command_line.empty()) {
        out << "\n    cmdline: " << detection.process.command_line.substr(0, 300);
    }
    return out.str();
}

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
    if (!options.quiet_detections && (!options.print_events || options.json)) {
        // JSON (the SIEM's ECS form) for machines; one readable line for people.
        // With --print-events stdout carries events; detections join them only with --json.
        const bool as_json = options.json;
        agent_options.detection_sink = [as_json](const Detection& detection) {
            const std::string line =
                as_json ? siem::format_ecs_json(detection, stdout_host()) : describe(detection);
            std::fwrite(line.data(), 1, line.size(), stdout);
            std::fputc('\n', stdout);
            std::fflush(stdout);
        };
    }
    if (!options.quiet_detections && (!options.print_events || options.json)) {
        const bool as_json = options.json;
        agent_options.outcome_sink = [as_json](const EnforcementOutcome& outcome) {
            std::string line;
            if (as_json) {
                line = siem::format_ecs_json(outcome, stdout_host());
            } else {
                line = "ENFORCEMENT " + outcome.action + " " + outcome.outcome + ": pid " +
                       std::to_string(outcome.process.pid) + " (" + outcome.rule_id + ") " +
                       outcome.reason;
            }
            line += '\n';
            std::fwrite(line.data(), 1, line.size(), stdout);
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
    run->add_flag("--json", options->json,
                  "print detections as ECS JSON lines (default: one readable line each, and "
                  "none while --print-events is on)");
    run->add_flag("--no-detections", options->quiet_detections,
                  "do not print detections on stdout");
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
                static const std::set<std::string> known = {
                    "gpu_open", "gpu_ioctl", "connect", "exec", "fork", "exit", "telemetry"};
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
