// gpuguard replay FILE... : events from JSON Lines files through the same
// correlator as the live agent, on the events' own clock, enforcement off.
// Each detection is printed as one ECS JSON line (the SIEM's JSON format).
#include <iostream>

#include <unistd.h>

#include "cli.h"
#include "gpuguard/common/clock.h"
#include "gpuguard/detect/replay.h"
#include "gpuguard/events/event_json.h"
#include "gpuguard/journal/journal.h"
#include "gpuguard/rules/correlation.h"
#include "gpuguard/siem/siem.h"
#include "gpuguard/version.h"

namespace gpuguard::agent::cli {
namespace {

struct ReplayCommand {
    std::vector<std::string> files;
    std::vector<std::string> rule_files;  // miner-rules.yaml format, replace the installed ones
    std::vector<std::string> correlation_files;
    std::string main_file = rules::RulePaths{}.main_file.string();
    std::string drop_in_dir = rules::RulePaths{}.drop_in_dir.string();
    std::string since;
    std::string until;
    std::string host;
    bool stats = false;
};

// RFC 3339, or relative to now: "-10m", "-2h", "-1d".
std::optional<int64_t> parse_time(const std::string& text) {
    if (auto absolute = parse_rfc3339(text)) return absolute;
    if (text.starts_with("-")) {
        if (auto ago = rules::parse_duration(text.substr(1))) {
            return unix_now_ns() - static_cast<int64_t>(ago->count()) * 1'000'000'000;
        }
    }
    return std::nullopt;
}

int run_replay(const ReplayCommand& command) {
    ReplayOptions options;
    for (const auto& [text, target] : {std::pair{&command.since, &options.since_unix_ns},
                                       std::pair{&command.until, &options.until_unix_ns}}) {
        if (text->empty()) continue;
        *target = parse_time(*text);
        if (!*target) {
            std::cerr << "replay: bad time '" << *text
                      << "' (RFC 3339 like 2026-11-21T23:49:29Z, or relative like -10m)\n";
            return 2;
        }
    }
    auto builtin = rules::compile_builtin_pack();
    if (!builtin) {
        std::cerr << "built-in pack: " << builtin.error().message << "\n";
        return 2;
    }
    Result<std::vector<rules::RuleFile>> files = std::vector<rules::RuleFile>{};
    if (command.rule_files.empty()) {
        files = rules::read_rule_files({command.main_file, command.drop_in_dir});
    } else {
        for (const auto& path : command.rule_files) {
            auto one = rules::read_rule_files({path, "/nonexistent"});
            if (!one) {
                files = Unexpected{one.error()};
                break;
            }
            if (one->empty()) {
                std::cerr << path << ": cannot read\n";
                return 2;
            }
            files->insert(files->end(), one->begin(), one->end());
        }
    }
    if (!files) {
        std::cerr << files.error().message << "\n";
        return 2;
    }
    auto rule_set = rules::RuleSet::build(*builtin, *files);
    if (!rule_set) {
        std::cerr << rule_set.error().message << "\n";
        return 2;
    }
    auto correlation = rules::load_correlation_rules(command.correlation_files);
    if (!correlation) {
        std::cerr << correlation.error().message << "\n";
        return 2;
    }
    auto replay =
        Replay::create(std::move(*correlation),
                       std::make_shared<const rules::RuleSet>(std::move(*rule_set)), options);
    if (!replay) {
        std::cerr << "replay: " << replay.error().message << "\n";
        return 2;
    }
    HostInfo host;
    host.hostname = command.host;
    host.agent_version = GPUGUARD_VERSION;
    uint64_t detections = 0;
    const auto emit = [&](const Detection& detection) {
        std::cout << siem::format_ecs_json(detection, host) << '\n';
        ++detections;
    };
    for (const auto& file : command.files) {
        if (file != "-" && journal::is_journal(file)) {
            auto problems = (*replay)->feed_journal(file, emit);
            if (!problems) {
                std::cout.flush();
                std::cerr << problems.error().message << "\n";
                return 1;
            }
            std::cerr << *problems;  // damage was skipped; say where
            continue;
        }
        if (auto status = (*replay)->feed_file(file, emit); !status) {
            std::cout.flush();
            std::cerr << status.error().message << "\n";
            return 1;
        }
    }
    std::cout.flush();
    if (command.stats) {
        const auto& stats = (*replay)->stats();
        std::cerr << "replay: " << stats.events << " events, " << stats.filtered
                  << " outside the time range, " << stats.derived
                  << " stratum events derived from payloads, " << detections << " detections ("
                  << (*replay)->correlator().stats().updates << " of them updates)\n";
    }
    return 0;
}

}  // namespace

void add_replay_command(CLI::App& app, Context& context) {
    auto command = std::make_shared<ReplayCommand>();
    CLI::App* sub = app.add_subcommand(
        "replay",
        "Run recorded events (JSON Lines, docs/events.md, or a native journal directory, "
        "segment or incident bundle) through the correlator and print each detection as one "
        "ECS JSON line; enforcement is off");
    sub->add_option("files", command->files,
                    "Event files ('-' for stdin) or journal directories/segments")
        ->required();
    sub->add_option("--rules", command->rule_files,
                    "miner-rules.yaml-format files to judge with, instead of the installed "
                    "ones (repeatable)");
    sub->add_option("--correlation", command->correlation_files,
                    "Correlation rule files applied over the built-in rules (repeatable)");
    sub->add_option("--rules-file", command->main_file, "Installed main rule file")
        ->capture_default_str();
    sub->add_option("--rules-dir", command->drop_in_dir, "Installed drop-in rule directory")
        ->capture_default_str();
    sub->add_option("--since", command->since, "Skip events before this time (RFC 3339 or -10m)");
    sub->add_option("--until", command->until, "Skip events from this time on");
    sub->add_option("--host", command->host, "host.name to put in the output (default: none)");
    sub->add_flag("--stats", command->stats, "Print counts to stderr at the end");
    sub->callback([command, &context] { context.exit_code = run_replay(*command); });
}

}  // namespace gpuguard::agent::cli
