// gpuguard config show|check|default
#include <iostream>
#include <string>

#include "cli.h"

namespace gpuguard::agent::cli {
namespace {

// Where the Debian package puts the file the service runs with.
constexpr const char* kInstalledConfigPath = "/etc/gpuguard/gpuguard.yaml";

}  // namespace

void add_config_command(CLI::App& app, Context& context) {
    auto* config = app.add_subcommand("config", "inspect configuration");
    config->require_subcommand(1);
    auto path = std::make_shared<std::string>();

    auto* show = config->add_subcommand("show", "print the effective configuration");
    show->add_option("-c,--config", *path, "configuration file (default: embedded)");
    show->callback([&context, path] {
        auto loaded = load_config_or_report(context, *path);
        if (!loaded) {
            context.exit_code = 2;
            return;
        }
        std::cout << config_to_yaml(*loaded);
    });

    auto* check = config->add_subcommand("check", "validate a configuration file");
    check->add_option("file", *path,
                      "configuration file (default: " + std::string(kInstalledConfigPath) +
                          ", the packaged service's)");
    check->callback([&context, path] {
        if (path->empty()) *path = kInstalledConfigPath;
        if (!load_config_or_report(context, *path)) {
            context.exit_code = 2;
            return;
        }
        std::cout << *path << ": OK\n";
    });

    auto* defaults = config->add_subcommand("default", "print the embedded default file");
    defaults->callback([] { std::cout << default_config_yaml(); });
}

}  // namespace gpuguard::agent::cli
