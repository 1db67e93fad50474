#include "agent/cli.h"
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

}  // namespace gpuguard::agent::cli
