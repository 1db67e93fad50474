// gpuguard rules check [--correlation] FILE... | rules list: validate rule
// files the way the agent loads them (built-in pack or built-in correlation
// rules first, then the files in order), and print the effective set.
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli.h"
#include "gpuguard/common/logging.h"
#include "gpuguard/common/text.h"
#include "gpuguard/rules/correlation.h"
#include "gpuguard/rules/rules.h"
#include "gpuguard/rules/trust_diff.h"

namespace gpuguard::agent::cli {
namespace {

struct RulesCommand {
    std::vector<std::string> files;  // check
    bool correlation = false;        // check: correlation rule files and guard policies
    std::string main_file = rules::RulePaths{}.main_file.string();
    std::string drop_in_dir = rules::RulePaths{}.drop_in_dir.string();
};

// Errors go to stderr, one "file:line:col: message" per line; exit 1.
int run_check(const RulesCommand& command) {
    auto builtin = rules::compile_builtin_pack();
    if (!builtin) {
        std::cerr << "built-in pack: " << builtin.error().message << "\n";
        return 2;
    }
    std::vector<rules::RuleFile> files;
    bool unreadable = false;
    for (const auto& path : command.files) {
        std::ifstream in(path, std::ios::binary);
        if (!in) {
            std::cerr << path << ": cannot read: " << std::strerror(errno) << "\n";
            unreadable = true;
            continue;
        }
        std::stringstream text;
        text << in.rdbuf();
        files.push_back({path, text.str()});
    }
    if (unreadable) return 1;
    auto set = rules::RuleSet::build(*builtin, files);
    if (!set) {
        std::cerr << set.error().message << "\n";
        return 1;
    }
    size_t user_rules = 0;
    for (const auto& entry : set->effective()) user_rules += entry.origin != "builtin";
    for (const auto& path : command.files) std::cout << path << ": OK\n";
    for (const auto& entry : set->effective()) {
        if (!entry.id_derived) continue;
        std::cout << entry.origin << ": rule without an id: " << entry.signature.id << " ("
                  << entry.signature.name << ", action " << rules::to_string(entry.action) << ")\n";
    }
    std::cout << set->effective().size() << " signatures active (" << set->disabled().size()
              << " disabled, " << user_rules << " added or changed by these files)\n";
    return 0;
}

// Correlation rule files and guard policies, loaded as the agent loads
// rules.correlation_files; each entry named with what it does to the set.
int run_check_correlation(const RulesCommand& command) {
    auto loaded = rules::load_guard_policies(command.files);
    if (!loaded) {
        std::cerr << loaded.error().message << "\n";
        return 1;
    }
    auto builtin = rules::builtin_correlation_rules();
    if (!builtin) {
        std::cerr << "built-in correlation rules: " << builtin.error().message << "\n";
        return 2;
    }
    std::vector<std::string> known;
    for (const auto& rule : *builtin) known.push_back(rule.id);
    for (const auto& path : command.files) {
        std::cout << path << ": OK\n";
        std::ifstream in(path, std::ios::binary);
        std::stringstream text;
        text << in.rdbuf();
        auto parsed = rules::parse_correlation_rules(text.str(), path);
        if (!parsed) continue;  // loaded above: it parses
        for (const auto& rule : *parsed) {
            const bool was_known = std::find(known.begin(), known.end(), rule.id) != known.end();
            const char* what = rule.override_of ? "override"
                               : was_known      ? "replaces the rule"
                                                : "added";
            std::cout << "  " << rule.id << ": " << what << " (" << rule.source << ")\n";
            if (!was_known) known.push_back(rule.id);
        }
    }
    const auto enabled = std::count_if(loaded->rules.begin(), loaded->rules.end(),
                                       [](const auto& rule) { return rule.enabled; });
    std::cout << loaded->rules.size() << " correlation rules (" << enabled << " enabled)"
              << (loaded->priority ? ", priority_guard set" : "") << "\n";
    // What a reviewer of the change should see first: what these files let
    // through that the built-in rules do not (the agent raises GG-CORR-0030
    // for the same once they are deployed).
    const rules::TrustDiff diff = rules::diff_correlation_rules(*builtin, loaded->rules);
    if (diff.widens()) {
        std::cout << "widens the built-in rules:\n";
        for (const auto* lines :
             {&diff.allowlist_added, &diff.actions_lowered, &diff.rules_disabled}) {
            for (const auto& line : *lines) std::cout << "  " << line << "\n";
        }
    }
    return 0;
}

// "not_pod_namespaces [sd-queue], containers container": the scope's
// lists that are set, in the order rule files write them.
std::string scope_text(const rules::ScopeCondition& scope) {
    std::string text;
    const auto add = [&](const char* key, const std::vector<std::string>& values) {
        if (values.empty()) return;
        text += (text.empty() ? "" : ", ") + std::string(key) + " [" + join(values, ", ") + "]";
    };
    for (const rules::ScopeList& list : rules::kScopeLists) add(list.key, scope.*list.member);
    if (scope.containers != rules::ContainerScope::kAny) {
        text += (text.empty() ? "" : ", ") + std::string("containers ") +
                (scope.containers == rules::ContainerScope::kHost ? "host" : "container");
    }
    return text;
}

// The correlation rules the agent would run with these files: one line per
// rule (where it comes from, each override applied to it), its scope below.
int run_list_correlation(const RulesCommand& command) {
    auto loaded = rules::load_guard_policies(command.files);
    if (!loaded) {
        std::cerr << loaded.error().message << "\n";
        return 1;
    }
    std::cout << "# files: built-in correlation rules";
    for (const auto& file : command.files) std::cout << ", " << file;
    std::cout << "\n";
    std::printf("%-14s %-9s %-15s %-3s %-3s %-34s %s\n", "ID", "SEVERITY", "ACTION", "DRY", "ON",
                "ORIGIN", "NAME");
    for (const auto& rule : loaded->rules) {
        std::string origin = rule.source.starts_with("builtin:") ? "builtin" : rule.source;
        for (const auto& at : rule.overridden_at) origin += ", override " + at;
        std::printf("%-14s %-9s %-15s %-3s %-3s %-34s %s\n", rule.id.c_str(),
                    to_string(rule.severity), rule.action.c_str(), rule.dry_run ? "yes" : "no",
                    rule.enabled ? "yes" : "no", origin.c_str(), rule.name.c_str());
        if (rule.scope) std::cout << "    scope: " << scope_text(*rule.scope) << "\n";
    }
    return 0;
}

std::string allowlist_summary(const rules::Allowlist& allowlist) {
    return std::to_string(allowlist.users.size()) + " users, " +
           std::to_string(allowlist.exe_paths.size()) + " exe paths, " +
           std::to_string(allowlist.sha256.size()) + " sha256, " +
           std::to_string(allowlist.containers.size()) + " containers";
}

int run_list(const RulesCommand& command) {
    int exit_code = 0;
    auto set = load_rule_set(command.main_file, command.drop_in_dir, 1, exit_code);
    if (!set) return exit_code;
    std::cout << "# files: built-in pack";
    for (const auto& file : set->files()) std::cout << ", " << file;
    std::cout << "\n# disabled:";
    for (const auto& id : set->disabled()) std::cout << " " << id;
    if (set->disabled().empty()) std::cout << " none";
    std::cout << "\n# hash_rate_threshold: ";
    if (set->hash_rate_threshold()) {
        std::cout << *set->hash_rate_threshold() << " H/s";
    } else {
        std::cout << "unset";
    }
    std::cout << "\n# allowlist: " << allowlist_summary(set->allowlist()) << "\n";
    // Derived ids (local-<file stem>-<hash>) can be longer than the pack's.
    int id_width = 26;
    for (const auto& entry : set->effective()) {
        id_width = std::max(id_width, static_cast<int>(entry.signature.id.size()));
    }
    std::printf("%-*s %-9s %-4s %-8s %-22s %s\n", id_width, "ID", "SEVERITY", "CONF", "ACTION",
                "ORIGIN", "NAME");
    for (const auto& entry : set->effective()) {
        const auto& signature = entry.signature;
        std::printf("%-*s %-9s %-4.2f %-8s %-22s %s\n", id_width, signature.id.c_str(),
                    signatures::to_string(signature.severity), signature.confidence,
                    rules::to_string(entry.action), entry.origin.c_str(), signature.name.c_str());
    }
    return 0;
}

}  // namespace

void add_rules_command(CLI::App& app, Context& context) {
    auto* rules_app = app.add_subcommand("rules", "check and list miner rules");
    rules_app->require_subcommand(1);
    auto command = std::make_shared<RulesCommand>();

    auto* check = rules_app->add_subcommand(
        "check", "validate rule files (exit 0 when valid, else one error per line and exit 1)");
    check->add_option("files", command->files, "miner-rules.yaml files, loaded in this order")
        ->required();
    check->add_flag("--correlation", command->correlation,
                    "the files are correlation rule files and guard policies "
                    "(rules.correlation_files)");
    check->callback([&context, command] {
        context.exit_code =
            command->correlation ? run_check_correlation(*command) : run_check(*command);
    });

    auto* list = rules_app->add_subcommand("list", "print the effective rule set");
    list->add_option("--file", command->main_file, "main rule file")->capture_default_str();
    list->add_option("--dir", command->drop_in_dir, "drop-in directory (*.yaml)")
        ->capture_default_str();
    list->add_flag("--correlation", command->correlation,
                   "the correlation rules instead, with these correlation files over them");
    list->add_option("files", command->files, "correlation rule files (with --correlation)");
    list->callback([&context, command] {
        set_log_level(context.log_level.empty() ? "warn" : context.log_level);
        if (!command->correlation && !command->files.empty()) {
            std::cerr << "rules list: files are correlation files: add --correlation\n";
            context.exit_code = 2;
            return;
        }
        context.exit_code =
            command->correlation ? run_list_correlation(*command) : run_list(*command);
    });
}

}  // namespace gpuguard::agent::cli
