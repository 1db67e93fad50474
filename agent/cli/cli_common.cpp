#include <iostream>

#include "cli.h"
#include "gpuguard/common/logging.h"

namespace gpuguard::agent::cli {

std::optional<Config> load_config_or_report(const Context& context, const std::string& path) {
    auto config = path.empty()
                      ? load_config_text(default_config_yaml(), "<embedded default config>")
                      : load_config_file(path);
    if (!config) {
        logger("agent")->critical("{}", config.error().message);
        return std::nullopt;
    }
    set_log_level(context.log_level.empty() ? config->log.level : context.log_level);
    return std::move(config).value();
}

std::optional<rules::RuleSet> load_rule_set(const std::string& main_file,
                                            const std::string& drop_in_dir, int invalid_exit_code,
                                            int& exit_code) {
    auto builtin = rules::compile_builtin_pack();
    if (!builtin) {
        std::cerr << "built-in pack: " << builtin.error().message << "\n";
        exit_code = 2;
        return std::nullopt;
    }
    auto files = rules::read_rule_files({main_file, drop_in_dir});
    if (!files) {
        std::cerr << files.error().message << "\n";
        exit_code = 2;
        return std::nullopt;
    }
    auto set = rules::RuleSet::build(*builtin, *files);
    if (!set) {
        std::cerr << set.error().message << "\n";
        exit_code = invalid_exit_code;
        return std::nullopt;
    }
    return std::move(set).value();
}

}  // namespace gpuguard::agent::cli
