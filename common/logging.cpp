#include "gpuguard/common/logging.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace gpuguard {

std::shared_ptr<spdlog::logger> logger(const std::string& name) {
    if (auto existing = spdlog::get(name)) return existing;
    auto created = spdlog::stderr_color_mt(name);
    created->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%-5l%$ [%n] %v");
    created->set_level(spdlog::get_level());
    return created;
}

bool set_log_level(const std::string& level_name) {
    const auto level = spdlog::level::from_str(level_name);
    if (level == spdlog::level::off && level_name != "off") return false;
    spdlog::set_level(level);  // applies to existing loggers and the default for new ones
    return true;
}

}  // namespace gpuguard
