// gpuguard probe: what this kernel offers, decided by loading test programs.
#include <cstdio>
#include <iostream>

#include "cli.h"
#include "gpuguard/common/logging.h"
#include "gpuguard/sensor/sensor_probe.h"
#include "gpuguard/sensor/sensor_support.h"

namespace gpuguard::agent::cli {
namespace {

struct ProbeCommand {
    std::string config_path;
    std::string btf_path;
    bool as_json = false;
};

int run_probe(const Context& context, const ProbeCommand& command) {
    auto config = load_config_or_report(context, command.config_path);
    if (!config) return 2;
    if (auto privileges = check_privileges(); !privileges) {
        logger("agent")->critical("gpuguard probe: {}", privileges.error().message);
        return 1;
    }
    ProbeOptions options;
    options.allow_mount_tracefs = config->sensor.mount_tracefs;
    options.btf_path = command.btf_path.empty() ? config->sensor.btf_path : command.btf_path;
    options.attach = config->sensor.attach;
    const auto features = probe_kernel_features(options);
    const bool as_json = command.as_json;
    bool required_missing = false;
    if (as_json) {
        std::cout << "[";
        for (size_t i = 0; i < features.size(); ++i) {
            const auto& f = features[i];
            // Details are plain ASCII we produced; escape quotes and backslashes only.
            std::string detail;
            for (char c : f.detail) {
                if (c == '"' || c == '\\') detail += '\\';
                detail += c;
            }
            std::cout << (i ? "," : "") << "\n  {\"feature\": \"" << f.name
                      << "\", \"available\": " << (f.available ? "true" : "false")
                      << ", \"required\": " << (f.required ? "true" : "false") << ", \"detail\": \""
                      << detail << "\"}";
        }
        std::cout << "\n]\n";
    } else {
        std::printf("%-16s %-12s %s\n", "FEATURE", "STATUS", "DETAIL");
        for (const auto& f : features) {
            std::printf("%-16s %-12s %s\n", f.name.c_str(),
                        f.available ? "available" : (f.required ? "MISSING" : "unavailable"),
                        f.detail.c_str());
        }
    }
    for (const auto& f : features) required_missing |= f.required && !f.available;
    return required_missing ? 1 : 0;
}

}  // namespace

void add_probe_command(CLI::App& app, Context& context) {
    auto command = std::make_shared<ProbeCommand>();
    auto* probe = app.add_subcommand("probe", "report the BPF features this kernel offers");
    probe->add_flag("--json", command->as_json, "print JSON instead of a table");
    probe->add_option("-c,--config", command->config_path,
                      "configuration file whose sensor.btf and sensor.mount_tracefs apply");
    probe->add_option("--btf", command->btf_path, "vmlinux BTF file (overrides sensor.btf)");
    probe->callback([&context, command] { context.exit_code = run_probe(context, *command); });
}

}  // namespace gpuguard::agent::cli
