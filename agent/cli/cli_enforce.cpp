// gpuguard kill, free and block: the enforcer's actions for admins, run
// without the agent. Safety rules apply as in the agent (never pid 1, kernel
// threads, this command and its parents, the allowlist); the rate limit and
// enforcement.dry_run do not (use --dry-run).
#include <cstdio>
#include <iostream>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli.h"
#include "gpuguard/backends/backends.h"
#include "gpuguard/common/logging.h"
#include "gpuguard/common/printable.h"
#include "gpuguard/daemon/telemetry.h"
#include "gpuguard/enforce/enforcer.h"
#include "gpuguard/enforce/nft_blocker.h"
#include "gpuguard/state/process_handle.h"

namespace gpuguard::agent::cli {
namespace {

struct KillCommand {
    std::string config_path;
    uint32_t pid = 0;
    bool force = false;
    double timeout_s = -1;  // < 0: enforcement.grace_period_ms
    std::string scope;      // "": enforcement.kill_scope
    bool dry_run = false;
};

struct FreeCommand {
    std::string config_path;
    int gpu = -1;
    std::vector<std::string> devices;  // "MAJOR:MINOR" instead of --gpu
    bool force = false;
    double timeout_s = -1;
    bool dry_run = false;
};

struct BlockCommand {
    std::string config_path;
    std::string ip;
    uint32_t ttl_s = 0;  // 0: enforcement.block_ttl_s
    bool all = false;
    bool as_json = false;
};

KillOptions kill_options(const EnforcementConfig& config, bool force, double timeout_s,
                         const std::string& scope) {
    KillOptions options;
    options.force = force;
    options.count_toward_rate_limit = false;
    options.grace = std::chrono::milliseconds(
        timeout_s >= 0 ? static_cast<int64_t>(timeout_s * 1000) : config.grace_period_ms);
    if (!scope.empty()) options.scope = parse_kill_scope(scope);
    return options;
}

void print_outcome(const EnforcementOutcome& outcome) {
    std::printf("%s pid %u (%s): %s: %s\n", outcome.action.c_str(), outcome.process.pid,
                printable(outcome.process.comm).c_str(), outcome.outcome.c_str(),
                printable(outcome.reason).c_str());
}

int exit_code_of(const EnforcementOutcome& outcome) {
    if (outcome.outcome == "success" || outcome.outcome == "dry_run") return 0;
    return outcome.outcome == "withheld" ? 3 : 1;
}

int run_kill(const Context& context, const KillCommand& command) {
    auto config = load_config_or_report(context, command.config_path);
    if (!config) return 2;
    EnforcementConfig enforcement = config->enforcement;
    enforcement.dry_run = command.dry_run;
    Enforcer enforcer(enforcement);
    DetectionProcess target;
    target.pid = command.pid;
    // The process the admin named is the one running now: pin its start time.
    if (auto stat = read_proc_stat(command.pid)) {
        target.start_time_ns = stat->start_time_ns;
        target.comm = stat->comm;
    }
    const auto outcome = enforcer.kill(
        target, kill_options(enforcement, command.force, command.timeout_s, command.scope));
    print_outcome(outcome);
    return exit_code_of(outcome);
}

int run_free(const Context& context, const FreeCommand& command) {
    auto config = load_config_or_report(context, command.config_path);
    if (!config) return 2;
    std::vector<backends::DeviceNumber> devices;
    for (const auto& text : command.devices) {
        auto number = parse_gpu_device_number(text);
        if (!number || !number->minor) {
            std::cerr << "--device " << text << ": expected MAJOR:MINOR\n";
            return 2;
        }
        // Only numbers known as GPUs: 1:3 (/dev/null) would take every process on the host.
        bool known = false;
        for (const auto& gpu : config->sensor.extra_gpu_devices) {
            known |= gpu.matches(number->major, *number->minor);
        }
        if (auto found = read_gpu_devices(config->backends.proc_root); found) {
            for (const auto& gpu : *found) known |= gpu.matches(number->major, *number->minor);
        }
        if (!known) {
            std::cerr << "--device " << text
                      << ": not a GPU device number (a GPU driver's in /proc/devices, or "
                         "sensor.extra_gpu_devices in --config)\n";
            return 2;
        }
        devices.push_back(backends::DeviceNumber{number->major, *number->minor});
    }
    if (command.gpu >= 0) {
        backends::TelemetrySampler sampler(
            backends::make_backends(backend_options(config->backends)), {});
        const auto& snapshot = sampler.sample_once();
        const backends::GpuDevice* found = nullptr;
        for (const auto& device : snapshot.devices) {
            if (device.index == static_cast<uint32_t>(command.gpu)) found = &device;
        }
        if (!found) {
            std::cerr << "gpuguard free: no GPU " << command.gpu << " (see gpuguard gpus)\n";
            return 2;
        }
        devices.insert(devices.end(), found->device_numbers.begin(), found->device_numbers.end());
    }
    if (devices.empty()) {
        std::cerr << "gpuguard free: give --gpu N or --device MAJOR:MINOR\n";
        return 2;
    }
    std::set<uint32_t> pids;
    for (const auto& holder : backends::sweep_gpu_fds(config->backends.proc_root, devices)) {
        pids.insert(static_cast<uint32_t>(holder.pid));
    }
    if (pids.empty()) {
        std::printf("no process holds the GPU\n");
        return 0;
    }
    EnforcementConfig enforcement = config->enforcement;
    enforcement.dry_run = command.dry_run;
    // Every holder at once, each graceful then forced: total time is one grace period.
    std::mutex mutex;
    int worst = 0;
    std::vector<std::thread> workers;
    // One Enforcer per holder (one is not for concurrent use), made here one
    // after another: their outcome ids carry distinct start times.
    std::vector<std::unique_ptr<Enforcer>> enforcers;
    for (size_t i = 0; i < pids.size(); ++i) {
        enforcers.push_back(std::make_unique<Enforcer>(enforcement));
    }
    size_t next = 0;
    for (uint32_t pid : pids) {
        workers.emplace_back([&, pid, &enforcer = *enforcers[next++]] {
            DetectionProcess target;
            target.pid = pid;
            if (auto stat = read_proc_stat(pid)) target.start_time_ns = stat->start_time_ns;
            const auto outcome = enforcer.kill(
                target, kill_options(enforcement, command.force, command.timeout_s, "process"));
            std::lock_guard lock(mutex);
            print_outcome(outcome);
            worst = std::max(worst, exit_code_of(outcome));
        });
    }
    for (auto& worker : workers) worker.join();
    return worst;
}

int run_block(const Context& context, const std::string& verb, const BlockCommand& command) {
    auto config = load_config_or_report(context, command.config_path);
    if (!config) return 2;
    NftBlocker blocker(std::chrono::seconds(config->enforcement.block_ttl_s));
    const auto report = [](const Status& status) {
        if (status) return 0;
        std::cerr << "gpuguard block: " << status.error().message << "\n";
        return 1;
    };
    if (verb == "add") {
        return report(blocker.block(command.ip, std::chrono::seconds(command.ttl_s)));
    }
    if (verb == "remove") {
        auto removed = blocker.unblock(command.ip);
        if (!removed) return report(Unexpected{removed.error()});
        if (!*removed) std::printf("%s was not blocked\n", command.ip.c_str());
        return 0;
    }
    if (verb == "flush") return report(command.all ? blocker.remove_table() : blocker.flush());
    auto listed = blocker.list();
    if (!listed) return report(Unexpected{listed.error()});
    if (command.as_json) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& entry : *listed) {
            nlohmann::json item{{"ip", entry.ip}, {"ip_version", entry.ip_version}};
            item["timeout_s"] = entry.timeout_s ? nlohmann::json(*entry.timeout_s) : nullptr;
            item["expires_in_s"] =
                entry.expires_in_s ? nlohmann::json(*entry.expires_in_s) : nullptr;
            out.push_back(item);
        }
        std::cout << out.dump() << "\n";
        return 0;
    }
    std::printf("%-40s %10s %10s\n", "ADDRESS", "TIMEOUT", "EXPIRES");
    for (const auto& entry : *listed) {
        const auto seconds = [](const std::optional<uint64_t>& value) {
            return value ? std::to_string(*value) + "s" : std::string("-");
        };
        std::printf("%-40s %10s %10s\n", entry.ip.c_str(), seconds(entry.timeout_s).c_str(),
                    seconds(entry.expires_in_s).c_str());
    }
    return 0;
}

}  // namespace

void add_enforce_commands(CLI::App& app, Context& context) {
    {
        auto command = std::make_shared<KillCommand>();
        auto* kill = app.add_subcommand(
            "kill", "SIGTERM a process, SIGKILL it after the grace period (through a pidfd)");
        kill->add_option("pid", command->pid, "process id")->required();
        kill->add_flag("--force", command->force, "SIGKILL at once");
        kill->add_option("--timeout", command->timeout_s,
                         "grace period in seconds (default enforcement.grace_period_ms)")
            ->check(CLI::Range(0.0, 600.0));
        kill->add_option("--scope", command->scope, "process, process_group or cgroup")
            ->check(CLI::IsMember({"process", "process_group", "cgroup"}));
        kill->add_flag("--dry-run", command->dry_run, "report what would happen, do nothing");
        kill->add_option("-c,--config", command->config_path,
                         "configuration file whose enforcement section applies");
        kill->callback([&context, command] { context.exit_code = run_kill(context, *command); });
    }
    {
        auto command = std::make_shared<FreeCommand>();
        auto* free =
            app.add_subcommand("free", "kill every process holding a GPU (graceful, then forced)");
        free->add_option("--gpu", command->gpu, "GPU index as gpuguard gpus shows it");
        free->add_option("--device", command->devices,
                         "GPU device number MAJOR:MINOR instead of --gpu (repeatable; must be a "
                         "GPU driver's or in sensor.extra_gpu_devices)");
        free->add_flag("--force", command->force, "SIGKILL at once");
        free->add_option("--timeout", command->timeout_s, "grace period in seconds")
            ->check(CLI::Range(0.0, 600.0));
        free->add_flag("--dry-run", command->dry_run, "report what would happen, do nothing");
        free->add_option("-c,--config", command->config_path, "configuration file");
        free->callback([&context, command] { context.exit_code = run_free(context, *command); });
    }
    {
        auto command = std::make_shared<BlockCommand>();
        auto* block = app.add_subcommand(
            "block",
            "addresses blocked in nftables table inet gpuguard (list, add, remove, flush)");
        block->require_subcommand(1);
        block->add_option("-c,--config", command->config_path, "configuration file");
        auto* list = block->add_subcommand("list", "show blocked addresses and their timeouts");
        list->add_flag("--json", command->as_json, "print JSON");
        auto* add = block->add_subcommand("add", "block an address (idempotent)");
        add->add_option("ip", command->ip, "IPv4 or IPv6 address")->required();
        add->add_option("--ttl", command->ttl_s, "seconds (default enforcement.block_ttl_s)");
        auto* remove = block->add_subcommand("remove", "unblock an address");
        remove->add_option("ip", command->ip, "IPv4 or IPv6 address")->required();
        auto* flush = block->add_subcommand("flush", "unblock everything");
        flush->add_flag("--all", command->all, "delete the whole table (uninstall)");
        for (auto* verb : {list, add, remove, flush}) {
            verb->callback([&context, command, verb] {
                context.exit_code = run_block(context, verb->get_name(), *command);
            });
        }
    }
}

}  // namespace gpuguard::agent::cli
