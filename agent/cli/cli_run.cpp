// gpuguard run: load the sensor, register GPU devices, print events.
#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

#include <signal.h>
#include <unistd.h>

#include "allocator.h"
#include "cli.h"
#include "gpuguard/common/logging.h"
#include "gpuguard/common/printable.h"
#include "gpuguard/common/read_file.h"
#include "gpuguard/daemon/agent.h"
#include "gpuguard/daemon/config_reload.h"
#include "gpuguard/daemon/line_writer.h"
#include "gpuguard/events/event.h"
#include "gpuguard/siem/siem.h"
#include "gpuguard/version.h"
#include "last_good_config.h"
#include "service_notify.h"

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
        << ": pid " << detection.process.pid << " (" << printable(detection.process.comm) << ")";
    // What the process chose (name, exe path, argv, cgroup) is printed escaped.
    if (!detection.process.executable.empty()) {
        out << " exe " << printable(detection.process.executable);
    }
    if (!detection.process.user.empty()) out << " user " << printable(detection.process.user);
    if (!detection.process.container_id.empty()) {
        out << " container " << printable(detection.process.container_id.substr(0, 12));
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
        out << "\n    cmdline: " << printable(detection.process.command_line.substr(0, 300));
    }
    return out.str();
}

// Re-reads the configuration file on SIGHUP or when the file changes on
// disk, applies what a running agent can (log.level) and logs every other
// changed key as "requires restart". Runs on the agent's loop thread.
class ConfigReloader {
  public:
    ConfigReloader(const Context& context, const RunOptions& options, Config running,
                   ServiceNotifier& service)
        : context_(context), options_(options), running_(std::move(running)), service_(service) {
        if (options_.config_path.empty()) return;  // the embedded default never changes
        auto watch = ConfigFileWatch::start(options_.config_path);
        if (watch) {
            watch_.emplace(std::move(watch).value());
        } else {
            logger("agent")->warn("{}: changes to {} apply on SIGHUP only", watch.error().message,
                                  options_.config_path);
        }
    }

    // Cheap when nothing happened: one flag test, and one non-blocking
    // inotify read every 250 ms.
    void poll() {
        const char* reason = nullptr;
        if (context_.reload_signal && *context_.reload_signal) {
            *context_.reload_signal = 0;
            reason = "SIGHUP";
        }
        const auto now = std::chrono::steady_clock::now();
        if (watch_ && now >= next_watch_check_) {
            next_watch_check_ = now + std::chrono::milliseconds(250);
            if (watch_->changed() && !reason) reason = "file changed";
        }
        if (reason) reload(reason);
    }

    // The agent a reload reports its changes to (who changed what), once it runs.
    void set_agent(Agent* agent) { agent_ = agent; }

  private:
    void reload(const char* reason) {
        const auto log = logger("agent");
        if (options_.config_path.empty()) {
            log->info(
                "config reload ({}): running on the embedded default config, nothing to "
                "re-read",
                reason);
            return;
        }
        service_.reloading();
        log->debug("config reload ({}): re-reading {}", reason, options_.config_path);
        auto next = load_config_file(options_.config_path);
        if (!next) {
            log->error("config reload ({}): {}; the running configuration stays in effect", reason,
                       next.error().message);
            service_.ready("config reload rejected: " + next.error().message);
            return;
        }
        if (!options_.btf_path.empty()) next->sensor.btf_path = options_.btf_path;
        const auto changes = diff_config(running_, *next);
        if (changes.empty()) log->info("config reload ({}): no changes", reason);
        if (agent_ && !changes.empty()) agent_->config_reloaded(changes);
        size_t restart_needed = 0;
        for (const auto& change : changes) {
            if (!change.applies_live) {
                ++restart_needed;
                log->warn("config reload ({}): requires restart: {} ({} -> {})", reason, change.key,
                          change.old_value, change.new_value);
                continue;
            }
            if (change.key == "log.level") {
                if (!context_.log_level.empty()) {
                    log->warn(
                        "config reload ({}): log.level {} not applied: --log-level {} was "
                        "given on the command line",
                        reason, change.new_value, context_.log_level);
                    continue;
                }
                set_log_level(next->log.level);
                running_.log.level = next->log.level;
            }
            log->info("config reload ({}): applied {}: {} -> {}", reason, change.key,
                      change.old_value, change.new_value);
        }
        service_.ready(restart_needed ? "running; " + std::to_string(restart_needed) +
                                            " config change(s) wait for a restart"
                                      : "running");
    }

    const Context& context_;
    const RunOptions& options_;
    Config running_;  // what is in effect: keys needing a restart keep their start value
    ServiceNotifier& service_;
    std::optional<ConfigFileWatch> watch_;
    std::chrono::steady_clock::time_point next_watch_check_{};
    Agent* agent_ = nullptr;
};

int run_agent(const Context& context, const RunOptions& options) {
    // A reader of stdout or stderr that goes away (`gpuguard run 2>&1 | head`,
    // a log pipe restarted) must cost output, not the agent and the
    // enforcement it does: writes to it fail with EPIPE instead (the line
    // writer counts what is lost). The agent starts no processes, so none
    // inherits the ignored signal.
    std::signal(SIGPIPE, SIG_IGN);
    // SIGUSR1/SIGUSR2 mean nothing to the agent: one sent by another process
    // must not end it (by default they terminate). The kernel still reports
    // them (agent_tamper "signal", GG-CORR-0021).
    std::signal(SIGUSR1, SIG_IGN);
    std::signal(SIGUSR2, SIG_IGN);
    const std::string allocator = tune_allocator();
    const auto log = logger("agent");
    // A start never fails open on its configuration either: a file that does
    // not load starts on the last one that did, loudly (last_good_config.h).
    std::optional<Config> config;
    std::string config_rejected;
    const auto copy = last_good_config_copy(options.config_path);
    if (copy && !options.config_path.empty()) {
        auto loaded = load_config_file(options.config_path);
        if (loaded) {
            if (auto text = read_file(options.config_path)) keep_last_good_config(*copy, *text);
            config = std::move(loaded).value();
        } else if (auto kept = load_last_good_config(*copy)) {
            config_rejected = loaded.error().message +
                              " (running on the last good configuration, " + copy->string() + ")";
            log->critical("configuration rejected at start: {}", config_rejected);
            config = std::move(kept).value();
        } else {
            log->critical("{}", loaded.error().message);
            log->critical("no configuration to fall back on: {}", kept.error().message);
            return 2;
        }
        set_log_level(context.log_level.empty() ? config->log.level : context.log_level);
    } else {
        config = load_config_or_report(context, options.config_path);
        if (!config) return 2;
    }
    if (!options.btf_path.empty()) config->sensor.btf_path = options.btf_path;
    log->info("gpuguard {} starting ({})", GPUGUARD_VERSION,
              options.config_path.empty() ? "embedded default config" : options.config_path);

    ServiceNotifier service;
    ConfigReloader reloader(context, options, *config, service);
    AgentOptions agent_options;
    agent_options.config = *config;
    agent_options.config_rejected = config_rejected;
    agent_options.config_path = options.config_path;
    agent_options.on_loop = [&service, &reloader] {
        service.ping_watchdog_if_due();
        reloader.poll();
    };
    // With --print-events stdout carries events; detections and enforcement
    // outcomes join them only with --json.
    const bool prints_detections =
        !options.quiet_detections && (!options.print_events || options.json);
    // Everything for stdout goes through one writer thread: a reader that
    // stops reading costs dropped (and counted) lines, never a stalled agent.
    const auto stdout_lines = options.print_events || prints_detections
                                  ? std::make_shared<LineWriter>(STDOUT_FILENO)
                                  : nullptr;
    agent_options.stdout_writer = stdout_lines;
    if (options.print_events) {
        agent_options.event_sink = [stdout_lines](const std::string& line) {
            stdout_lines->write(line);
        };
    }
    if (prints_detections) {
        // JSON (the SIEM's ECS form) for machines; one readable line for people.
        const bool as_json = options.json;
        agent_options.detection_sink = [as_json, stdout_lines](const Detection& detection) {
            stdout_lines->write(as_json ? siem::format_ecs_json(detection, stdout_host())
                                        : describe(detection));
        };
        agent_options.outcome_sink = [as_json, stdout_lines](const EnforcementOutcome& outcome) {
            std::string line;
            if (as_json) {
                line = siem::format_ecs_json(outcome, stdout_host());
            } else {
                line = "ENFORCEMENT " + outcome.action + " " + outcome.outcome + ": pid " +
                       std::to_string(outcome.process.pid) + " (" + outcome.rule_id + ") " +
                       outcome.reason;
            }
            stdout_lines->write(std::move(line));
        };
    }
    if (options.event_types != "all") {
        std::stringstream list(options.event_types);
        for (std::string type; std::getline(list, type, ',');) {
            if (!type.empty()) agent_options.event_types.insert(type);
        }
    }
    if (context.stop_sender) {
        const RawStopSender* raw = context.stop_sender;
        agent_options.stop_sender = [raw]() -> std::optional<StopSender> {
            if (!raw->ready) return std::nullopt;
            StopSender sender;
            sender.signal = raw->signal;
            sender.pid = static_cast<uint32_t>(raw->pid);
            sender.uid = raw->uid;
            sender.comm = raw->comm;
            sender.exe = raw->exe;
            sender.cmdline =
                split_nul_separated(std::string_view(raw->cmdline, raw->cmdline_length));
            return sender;
        };
    }
    context.install_stop_handlers();
    if (context.install_reload_handler) context.install_reload_handler();
    const Config config_at_start = agent_options.config;
    auto agent = Agent::start(std::move(agent_options));
    if (!agent) {
        log->critical("cannot start the sensor: {}", agent.error().message);
        // The next start that succeeds reports the gap and this reason.
        Agent::record_failed_start(config_at_start,
                                   "cannot start the sensor: " + agent.error().message);
        return 1;
    }
    // Start-up's peak (Hyperscan and YARA compiles, the /proc bootstrap) is
    // freed by now; the arenas would otherwise keep it resident.
    log->info("start-up memory returned: {} ({})", release_free_memory(), allocator);
    log->info("ready{}", options.print_events ? ": printing events as JSON lines on stdout" : "");
    service.ready("running");
    reloader.set_agent(agent.value().get());
    auto ran = agent.value()->run(context.stop_signal);
    service.stopping();
    if (!ran) {
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
                const auto& known = event_type_names();
                if (std::find(known.begin(), known.end(), type) == known.end()) {
                    return "unknown event type '" + type + "' (" + join(known, ", ") + ", or all)";
                }
            }
            return "";
        });
    run->callback([&context, options] { context.exit_code = run_agent(context, *options); });
}

}  // namespace gpuguard::agent::cli
