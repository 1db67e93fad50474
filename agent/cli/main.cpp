// gpuguard: command line entry point. Each subcommand is in agent/cli_<name>.cpp.
#include <csignal>
#include <iostream>

#include <CLI/CLI.hpp>
#include <signal.h>

#include "cli.h"
#include "gpuguard/version.h"

namespace {

// The only mutable global state: set by SIGINT/SIGTERM (with who sent it),
// and by SIGHUP.
volatile std::sig_atomic_t g_stop_signal = 0;
volatile std::sig_atomic_t g_reload_signal = 0;
gpuguard::agent::cli::RawStopSender g_stop_sender{};

// Only async-signal-safe calls (open, read, readlink, close): the sender's
// executable and command line are read here, at once, while it still
// exists; `kill` exits right after its kill(2).
void on_stop_signal(int signo, siginfo_t* info, void*) {
    if (g_stop_signal == 0 && info) gpuguard::agent::cli::capture_stop_sender(*info, g_stop_sender);
    g_stop_signal = signo;
}
void on_reload_signal(int) { g_reload_signal = 1; }

void install_stop_handlers() {
    struct sigaction action {};
    action.sa_sigaction = on_stop_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_SIGINFO;  // no SA_RESTART: epoll_wait must return EINTR
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
}

void install_reload_handler() {
    struct sigaction action {};
    action.sa_handler = on_reload_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;  // the loop polls the flag; nothing needs to be woken
    sigaction(SIGHUP, &action, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
    namespace cli = gpuguard::agent::cli;
    cli::Context context;
    context.stop_signal = &g_stop_signal;
    context.stop_sender = &g_stop_sender;
    context.install_stop_handlers = install_stop_handlers;
    context.reload_signal = &g_reload_signal;
    context.install_reload_handler = install_reload_handler;

    CLI::App app{"gpuguard: watch GPU use, detect miners and abuse, stop them"};
    app.require_subcommand(1);
    app.fallthrough();  // global options may follow the subcommand
    app.add_option("--log-level", context.log_level, "override log.level")
        ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error", "critical", "off"}));

    cli::add_run_command(app, context);
    cli::add_probe_command(app, context);
    cli::add_config_command(app, context);
    cli::add_status_command(app, context);
    cli::add_ps_command(app, context);
    cli::add_gpus_command(app, context);
    cli::add_rules_command(app, context);
    cli::add_scan_command(app, context);
    cli::add_journal_command(app, context);
    cli::add_replay_command(app, context);
    cli::add_enforce_commands(app, context);
    app.add_subcommand("version", "print the version")->callback([] {
        std::cout << "gpuguard " << GPUGUARD_VERSION << "\n";
    });

    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& error) {
        // CLI11 prints the message (or the help). A mistake on the command
        // line exits 2, as the commands' own argument checks do, instead of
        // CLI11's own codes (105, 109, ...).
        return app.exit(error) == 0 ? 0 : 2;
    }
    return context.exit_code;
}
