#include "gpuguard/common/logging.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include "gpuguard/common/printable.h"

namespace gpuguard {
namespace {

// %* in the pattern: the message with control characters escaped. Messages
// quote process names, argv and paths, which their process chose: a
// newline there must not start a forged log line, nor an escape sequence
// drive the terminal or journal viewer.
class PrintableMessage : public spdlog::custom_flag_formatter {
  public:
    void format(const spdlog::details::log_msg& message, const std::tm&,
                spdlog::memory_buf_t& dest) override {
        const std::string text =
            printable(std::string_view(message.payload.data(), message.payload.size()));
        dest.append(text.data(), text.data() + text.size());
    }
    std::unique_ptr<custom_flag_formatter> clone() const override {
        return std::make_unique<PrintableMessage>();
    }
};

}  // namespace

std::shared_ptr<spdlog::logger> logger(const std::string& name) {
    if (auto existing = spdlog::get(name)) return existing;
    auto created = spdlog::stderr_color_mt(name);
    auto formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<PrintableMessage>('*').set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%-5l%$ [%n] %*");
    created->set_formatter(std::move(formatter));
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
