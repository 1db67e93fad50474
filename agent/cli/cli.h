// The gpuguard command line: each subcommand lives in its own cli_<name>.cpp
// and registers itself on the CLI11 app; main.cpp only wires them together.
#pragma once

#include <csignal>
#include <cstddef>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>
#include <signal.h>
#include <sys/types.h>

#include "gpuguard/daemon/config.h"
#include "gpuguard/rules/rules.h"

namespace gpuguard::agent::cli {

// Who sent SIGTERM/SIGINT, as the signal handler captured it (only
// async-signal-safe calls there): siginfo's pid and uid, and /proc's exe,
// cmdline and comm of the sender read at once. `ready` is set last.
struct RawStopSender {
    volatile std::sig_atomic_t ready = 0;
    int signal = 0;
    pid_t pid = 0;
    uid_t uid = 0;
    char exe[1024] = {};
    char cmdline[4096] = {};
    size_t cmdline_length = 0;
    char comm[32] = {};
};

// Fills `out` from `info` (SI_USER, SI_QUEUE, SI_TKILL: a process sent it;
// nothing for the kernel's own, a terminal's Ctrl-C). Async-signal-safe.
void capture_stop_sender(const siginfo_t& info, RawStopSender& out);

// What every command may use; owned by main().
struct Context {
    std::string log_level;  // --log-level, "" when not given
    int exit_code = 0;      // set by the command that ran
    // Set to the signal number by SIGINT/SIGTERM once install_stop_handlers() ran.
    const volatile std::sig_atomic_t* stop_signal = nullptr;
    void (*install_stop_handlers)() = nullptr;
    const RawStopSender* stop_sender = nullptr;  // filled with stop_signal
    // Set to 1 by SIGHUP once install_reload_handler() ran; the reader clears it.
    volatile std::sig_atomic_t* reload_signal = nullptr;
    void (*install_reload_handler)() = nullptr;
};

// Loads `path`, or the embedded default when empty; logs the error and
// returns nullopt on failure. Applies --log-level or log.level.
std::optional<Config> load_config_or_report(const Context& context, const std::string& path);

// The built-in pack plus the rule files; on failure prints the error to
// stderr and sets `exit_code` (2 when something cannot be read, and
// `invalid_exit_code` when the rules do not build).
std::optional<rules::RuleSet> load_rule_set(const std::string& main_file,
                                            const std::string& drop_in_dir, int invalid_exit_code,
                                            int& exit_code);

void add_run_command(CLI::App& app, Context& context);
void add_probe_command(CLI::App& app, Context& context);
void add_config_command(CLI::App& app, Context& context);
void add_status_command(CLI::App& app, Context& context);
void add_ps_command(CLI::App& app, Context& context);
void add_gpus_command(CLI::App& app, Context& context);
void add_rules_command(CLI::App& app, Context& context);
void add_scan_command(CLI::App& app, Context& context);
void add_journal_command(CLI::App& app, Context& context);  // cli_journal.cpp
void add_replay_command(CLI::App& app, Context& context);
// cli_enforce.cpp: kill, free, block.
void add_enforce_commands(CLI::App& app, Context& context);

}  // namespace gpuguard::agent::cli
