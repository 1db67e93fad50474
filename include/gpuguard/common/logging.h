// Named spdlog loggers, one per library ("agent", "sensor", ...), all
// writing to stderr so stdout stays free for --print-events.
#pragma once

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

namespace gpuguard {

// The logger called `name`, created on first use with the shared format.
std::shared_ptr<spdlog::logger> logger(const std::string& name);

// Sets the level of every gpuguard logger, present and future.
// Fails (returns false) on an unknown level name.
bool set_log_level(const std::string& level_name);

}  // namespace gpuguard
