// gpuguard status / gpuguard ps: ask the running agent over its control socket.
// `ps --standalone` scans /proc itself when no agent runs.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "gpuguard/common/logging.h"
#include "gpuguard/common/printable.h"
#include "gpuguard/daemon/control_socket.h"
#include "gpuguard/events/event.h"
#include "gpuguard/events/event_json.h"
#include "gpuguard/events/gpu_devices.h"
#include "gpuguard/netintel/stratum.h"
#include "gpuguard/state/process_table.h"

namespace gpuguard::agent::cli {
namespace {

using json = nlohmann::ordered_json;

struct QueryOptions {
    std::string config_path;
    std::string socket;  // overrides control.socket
    bool as_json = false;
    bool standalone = false;
};

std::optional<json> query(const Context& context, const QueryOptions& options,
                          const std::string& command) {
    auto config = load_config_or_report(context, options.config_path);
    if (!config) return std::nullopt;
    const std::string socket = options.socket.empty() ? config->control.socket : options.socket;
    if (socket.empty()) {
        logger("agent")->critical("control.socket is \"\": the agent has no control socket");
        return std::nullopt;
    }
    auto answer = control_request(socket, command);
    if (!answer) {
        logger("agent")->critical("{}", answer.error().message);
        return std::nullopt;
    }
    return json::parse(answer.value(), nullptr, false);
}

std::string join_json_strings(const json& array, size_t max_chars) {
    std::string out;
    for (const auto& item : array) {
        if (!out.empty()) out += ' ';
        out += item.get<std::string>();
    }
    if (out.size() > max_chars) out = out.substr(0, max_chars - 3) + "...";
    for (char& c : out) {
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = ' ';  // one row per process
    }
    return out;
}

// A session's hash rate over the session with its 95 % interval, "1.2
// MH/s (0.9-1.6)"; older agents answer without the interval.
std::string session_hash_rate(const json& session) {
    if (!session["hash_rate"].is_number()) return "- (needs two shares)";
    const auto number = [&](const char* key) -> std::optional<double> {
        if (!session.contains(key) || !session[key].is_number()) return std::nullopt;
        return session[key].get<double>();
    };
    return stratum::describe_hash_rate(session["hash_rate"].get<double>(), number("hash_rate_low"),
                                       number("hash_rate_high"));
}

// One line per mining session, each after `prefix` (ps: under its
// process's row; status: its pid and name).
void print_stratum_sessions(const json& sessions, bool with_pid = false) {
    for (const auto& session : sessions) {
        const std::string prefix =
            with_pid ? "  pid " + std::to_string(session.value("pid", 0u)) + " (" +
                           printable(session.value("comm", std::string())) + "): "
                     : "         mining: ";
        std::string pool = session.value("pool_address", std::string()) + ":" +
                           std::to_string(session.value("pool_port", 0));
        const std::string domain = session.value("pool_domain", std::string());
        if (!domain.empty()) pool += " (" + domain + ")";  // from DNS answers: theirs
        pool = printable(pool);
        std::string rate = session_hash_rate(session);
        if (session["reported_hash_rate"].is_number()) {
            rate += ", reported " +
                    stratum::describe_hash_rate(session["reported_hash_rate"].get<double>());
        }
        // The login and the pool came from the process's own traffic.
        const std::string login = printable(session.value("login", std::string()));
        std::printf(
            "%s%s pool %s%s%s, shares %llu sent %llu accepted %llu rejected, hash rate %s\n",
            prefix.c_str(), session.value("protocol", std::string()).c_str(), pool.c_str(),
            login.empty() ? "" : " login ", login.c_str(),
            static_cast<unsigned long long>(session.value("shares_submitted", uint64_t{0})),
            static_cast<unsigned long long>(session.value("shares_accepted", uint64_t{0})),
            static_cast<unsigned long long>(session.value("shares_rejected", uint64_t{0})),
            rate.c_str());
    }
}

// Each device a process holds, once, in the order first opened. The JSON
// has one entry per fd, and a CUDA process holds dozens of fds on a few
// nodes (/dev/nvidia0 over and over, nvidiactl, nvidia-uvm), so listing
// fds made the column hundreds of characters wide on a real GPU.
std::string device_column(const json& gpus) {
    std::vector<std::string> devices;
    for (const auto& gpu : gpus) {
        std::string device = gpu["device"].get<std::string>();
        if (std::find(devices.begin(), devices.end(), device) == devices.end())
            devices.push_back(std::move(device));
    }
    return join(devices, ",");
}

// "runtime:name" (or the id's first 12 digits), after "namespace/pod/" in a
// Kubernetes pod; "slurm:JOB.STEP" in a Slurm job on the host; "-" on the host.
std::string container_column(const json& container, const json& slurm) {
    if (!container.is_object()) {
        if (!slurm.is_object()) return "-";
        const std::string step = slurm.value("step_id", std::string());
        return printable("slurm:" + slurm.value("job_id", std::string()) +
                         (step.empty() ? "" : "." + step));
    }
    const auto text = [&](const char* key) { return container.value(key, std::string()); };
    std::string out =
        text("runtime") + ":" + (text("name").empty() ? text("id").substr(0, 12) : text("name"));
    if (!text("pod_name").empty()) out = text("pod_namespace") + "/" + text("pod_name") + "/" + out;
    return printable(out);
}

void print_ps_table(const json& processes) {
    std::printf("%-8s %-10s %-16s %-14s %9s %6s %10s %9s %-13s %s\n", "PID", "USER", "COMM", "GPU",
                "GPU-MEM", "UTIL%", "IOCTLS", "IOCTL/S", "CONTAINER", "EXE / CMDLINE");
    for (const auto& p : processes) {
        const std::string gpus = device_column(p["gpus"]);
        // Everything a process chose (name, argv, exe path, cgroup) is printed escaped.
        const std::string user = p["user"].is_string() ? printable(p["user"].get<std::string>())
                                                       : std::to_string(p["uid"].get<uint32_t>());
        const std::string container =
            container_column(p["container"], p.value("slurm", json(nullptr)));
        std::string what = p["exe"].get<std::string>();
        const std::string args = join_json_strings(p["cmdline"], 60);
        if (!args.empty()) what += "  " + args;
        what = printable(what);
        const std::string comm = printable(p["comm"].get<std::string>());
        // Telemetry per process (absent when no backend reports it: "-", never 0).
        std::optional<double> memory_mib, util;
        if (p.contains("gpu_usage")) {
            for (const auto& usage : p["gpu_usage"]) {
                if (usage["memory_bytes"].is_number()) {
                    memory_mib = memory_mib.value_or(0) +
                                 usage["memory_bytes"].get<double>() / (1024.0 * 1024.0);
                }
                if (usage["compute_percent"].is_number()) {
                    util = std::max(util.value_or(0), usage["compute_percent"].get<double>());
                }
            }
        }
        const std::string memory_text =
            memory_mib ? std::to_string(static_cast<long long>(*memory_mib)) + "MiB" : "-";
        const std::string util_text = util ? std::to_string(static_cast<int>(*util)) : "-";
        std::printf("%-8u %-10s %-16s %-14s %9s %6s %10llu %9.0f %-13s %s%s%s\n",
                    p["pid"].get<uint32_t>(), user.c_str(), comm.c_str(), gpus.c_str(),
                    memory_text.c_str(), util_text.c_str(),
                    static_cast<unsigned long long>(p["ioctl_total"].get<uint64_t>()),
                    p["ioctl_rate_per_s"].get<double>(), container.c_str(), what.c_str(),
                    p["exited"].get<bool>() ? "  (exited)" : "",
                    p.value("hidden", false) ? "  (hidden from /proc listings)" : "");
        if (p.contains("stratum_sessions")) print_stratum_sessions(p["stratum_sessions"]);
    }
}

// The agent answers the mining sessions beside the processes; each process
// gets its own. The sessions of processes that hold no GPU (CPU miners) go
// to `others` when given.
json with_stratum_sessions(const json& answer, json* others = nullptr) {
    json processes = answer.value("processes", json::array());
    const json sessions = answer.value("stratum_sessions", json::array());
    for (auto& process : processes) {
        json own = json::array();
        for (const auto& session : sessions) {
            if (session.value("pid", 0u) == process.value("pid", 0u)) own.push_back(session);
        }
        process["stratum_sessions"] = std::move(own);
    }
    if (others) {
        *others = json::array();
        for (const auto& session : sessions) {
            const bool listed =
                std::any_of(processes.begin(), processes.end(), [&](const json& process) {
                    return process.value("pid", 0u) == session.value("pid", 0u);
                });
            if (!listed) others->push_back(session);
        }
    }
    return processes;
}

// One row per alert sink: its counters, what waits in its queue, and whether
// its last delivery worked (else the error).
void print_outputs(const json& outputs) {
    if (!outputs.is_array() || outputs.empty()) {
        std::printf("outputs: none\n");
        return;
    }
    std::printf("outputs: %zu sink(s)\n", outputs.size());
    std::printf("  %-16s %-13s %10s %10s %8s %8s %12s %8s  %s\n", "SINK", "TYPE", "QUEUED", "SENT",
                "RETRIED", "DROPPED", "BYTES", "WAITING", "STATE");
    const auto count = [](const json& sink, const char* key) {
        return static_cast<unsigned long long>(sink.value(key, uint64_t{0}));
    };
    for (const auto& sink : outputs) {
        std::string state = "ok";
        if (!sink.value("healthy", true)) {
            state = "failing: " + sink.value("last_error", std::string());
            for (char& c : state) {
                if (static_cast<unsigned char>(c) < 0x20) c = ' ';  // one row per sink
            }
        }
        std::printf("  %-16s %-13s %10llu %10llu %8llu %8llu %12llu %8llu  %s\n",
                    sink.value("name", std::string()).c_str(),
                    sink.value("type", std::string()).c_str(), count(sink, "queued"),
                    count(sink, "sent"), count(sink, "retried"), count(sink, "dropped"),
                    count(sink, "bytes"), count(sink, "queue_records"), state.c_str());
    }
}

int run_status(const Context& context, const QueryOptions& options) {
    auto status = query(context, options, "status");
    if (!status || status->is_discarded()) return 1;
    if (options.as_json) {
        std::cout << status->dump(2, ' ', false, json::error_handler_t::replace) << "\n";
        return 0;
    }
    const json& s = *status;
    std::printf("gpuguard %s, pid %d, up %.0f s\n", s["version"].get<std::string>().c_str(),
                s["pid"].get<int>(), s["uptime_s"].get<double>());
    const json& rules = s["rules"];
    std::printf("rules: %s, %zu signatures, %zu correlation rules (%llu reloads, %llu rejected)\n",
                rules["version"].get<std::string>().c_str(), rules["signatures"].get<size_t>(),
                rules["correlation_rules"].get<size_t>(),
                static_cast<unsigned long long>(rules["reloads"].get<uint64_t>()),
                static_cast<unsigned long long>(rules["rejected"].get<uint64_t>()));
    std::string hooks;
    for (const auto& hook : s["hooks"]) hooks += " " + hook.get<std::string>();
    std::printf("attach mode: %s (%s)\n", s.value("attach_mode", std::string("?")).c_str(),
                s.value("attach_reason", std::string()).c_str());
    std::printf("hooks: %zu attached, ring buffer %u KiB:%s\n", s["hooks"].size(),
                s["ring_buffer_kb"].get<uint32_t>(), hooks.c_str());
    const json& enforcement = s["enforcement"];
    std::printf("enforcement: %s; kill_now %s; deny_gpu %s; block_ip %s\n",
                enforcement["dry_run"].get<bool>() ? "dry run" : "on",
                enforcement["kill_now"].get<bool>() ? "in the kernel" : "unavailable",
                enforcement["deny_gpu"].get<std::string>().c_str(),
                enforcement["block_ip"].get<std::string>().c_str());
    const std::string rate =
        s["events_per_s"].is_number()
            ? fmt::format(", {:.1f}/s over the last minute", s["events_per_s"].get<double>())
            : "";
    std::printf("events: %llu delivered%s, %llu dropped, %llu undecodable\n",
                static_cast<unsigned long long>(s["delivered"].get<uint64_t>()), rate.c_str(),
                static_cast<unsigned long long>(s["dropped"].get<uint64_t>()),
                static_cast<unsigned long long>(s["decode_errors"].get<uint64_t>()));
    std::printf("  %-12s %12s %10s\n", "TYPE", "EMITTED", "DROPPED");
    for (const auto& [type, counts] : s["events"].items()) {
        std::printf("  %-12s %12llu %10llu\n", type.c_str(),
                    static_cast<unsigned long long>(counts["emitted"].get<uint64_t>()),
                    static_cast<unsigned long long>(counts["dropped"].get<uint64_t>()));
    }
    const json& table = s["process_table"];
    std::printf("processes: %llu tracked (max %llu), %llu holding a GPU\n",
                static_cast<unsigned long long>(table["entries"].get<uint64_t>()),
                static_cast<unsigned long long>(table["max_entries"].get<uint64_t>()),
                static_cast<unsigned long long>(table["gpu_processes"].get<uint64_t>()));
    // Older agents answer without it.
    if (s.contains("watch_list")) {
        for (const char* list : {"processes", "addresses"}) {
            const json& counts = s["watch_list"][list];
            const auto count = [&](const char* key) {
                return static_cast<unsigned long long>(counts.value(key, uint64_t{0}));
            };
            std::printf(
                "watch list, %s: %llu of %llu (%llu added, %llu evicted when full, %llu expired, "
                "%llu removed)\n",
                list, count("entries"), count("capacity"), count("added"), count("evicted"),
                count("expired"), count("removed"));
        }
    }
    std::printf("GPU devices:");
    for (const auto& device : s["gpu_devices"]) {
        std::printf(" %s (%s)", device["device"].get<std::string>().c_str(),
                    device["driver"].get<std::string>().c_str());
    }
    std::printf("%s\n", s["gpu_devices"].empty() ? " none" : "");
    for (const auto& gpu : s["gpus"]) {
        const std::string util =
            gpu.contains("utilization_percent")
                ? fmt::format("{:.0f}%", gpu["utilization_percent"].get<double>())
                : "-";
        const std::string memory =
            gpu.contains("memory_used_bytes") && gpu.contains("memory_total_bytes")
                ? fmt::format("{} / {} MiB", gpu["memory_used_bytes"].get<uint64_t>() >> 20,
                              gpu["memory_total_bytes"].get<uint64_t>() >> 20)
                : "-";
        std::printf("GPU %u: %s (%s, %s), utilisation %s, memory %s\n",
                    gpu["index"].get<uint32_t>(), gpu["model"].get<std::string>().c_str(),
                    gpu["driver"].get<std::string>().c_str(),
                    gpu["bus_id"].get<std::string>().c_str(), util.c_str(), memory.c_str());
    }
    if (const json& journal = s["journal"]; journal.is_object()) {
        std::printf("journal: %s, %llu events written, %llu dropped, %s\n",
                    journal["dir"].get<std::string>().c_str(),
                    static_cast<unsigned long long>(journal["events_written"].get<uint64_t>()),
                    static_cast<unsigned long long>(journal["dropped"].get<uint64_t>()),
                    journal["writing"].get<bool>()
                        ? "writing"
                        : ("failing: " + journal["last_error"].get<std::string>()).c_str());
    } else {
        std::printf("journal: off\n");
    }
    const json& hour = s["last_hour"];
    std::string actions;
    for (const auto& [outcome, count] : hour["actions"].items()) {
        actions +=
            fmt::format("{}{} {}", actions.empty() ? "" : ", ", count.get<uint64_t>(), outcome);
    }
    std::printf("last hour: %llu detection(s); actions: %s\n",
                static_cast<unsigned long long>(hour["detections"].get<uint64_t>()),
                actions.empty() ? "none" : actions.c_str());
    // Older agents answer without them.
    if (s.contains("stratum_sessions")) {
        std::printf("mining sessions: %zu\n", s["stratum_sessions"].size());
        print_stratum_sessions(s["stratum_sessions"], /*with_pid=*/true);
    }
    print_outputs(s["outputs"]);
    return 0;
}

// Without an agent: one /proc scan, devices from /proc/devices and config.
std::optional<json> standalone_ps(const Context& context, const QueryOptions& options) {
    auto config = load_config_or_report(context, options.config_path);
    if (!config) return std::nullopt;
    std::vector<GpuDeviceNumber> devices = config->sensor.extra_gpu_devices;
    if (auto from_proc = read_gpu_devices("/proc"); from_proc) {
        devices.insert(devices.end(), from_proc->begin(), from_proc->end());
    }
    ProcessTable table(ProcessTableOptions{}, [&](uint32_t major, uint32_t minor) {
        for (const auto& device : devices) {
            if (device.matches(major, minor)) return true;
        }
        return false;
    });
    if (auto scanned = table.bootstrap(); !scanned) {
        logger("agent")->critical("{}", scanned.error().message);
        return std::nullopt;
    }
    json processes = json::array();
    for (const auto& p : table.gpu_processes()) {
        json gpus = json::array();
        for (const auto& gpu : p.gpus) {
            gpus.push_back(
                json{{"device", std::to_string(gpu.major) + ":" + std::to_string(gpu.minor)},
                     {"fd", gpu.fd}});
        }
        processes.push_back(json{
            {"pid", p.pid},
            {"ppid", p.ppid},
            {"uid", p.uid},
            {"user", p.user.empty() ? nullptr : json(p.user)},
            {"comm", p.comm},
            {"exe", p.exe},
            {"cmdline", p.cmdline},
            {"cgroup", p.cgroup_path},
            {"container", p.container
                              ? json(container_to_json(Container{
                                    p.container->id, p.container->runtime, p.container_details}))
                              : json(nullptr)},
            {"gpus", gpus},
            {"ioctl_total", 0},
            {"ioctl_rate_per_s", 0.0},
            {"exited", false}});
    }
    return json{{"processes", processes}, {"standalone", true}};
}

int run_ps(const Context& context, const QueryOptions& options) {
    auto answer =
        options.standalone ? standalone_ps(context, options) : query(context, options, "ps");
    if (!answer || answer->is_discarded()) return 1;
    json others;
    const json processes = with_stratum_sessions(*answer, &others);
    if (options.as_json) {
        std::cout << processes.dump(2, ' ', false, json::error_handler_t::replace) << "\n";
        return 0;
    }
    print_ps_table(processes);
    if (!others.empty()) {
        std::printf("mining sessions of processes that hold no GPU:\n");
        print_stratum_sessions(others, /*with_pid=*/true);
    }
    return 0;
}

void add_query_options(CLI::App* command, QueryOptions& options) {
    command->add_option("-c,--config", options.config_path,
                        "configuration file (for control.socket; default: embedded)");
    command->add_option("--socket", options.socket, "control socket (overrides control.socket)");
    command->add_flag("--json", options.as_json, "print JSON");
}

}  // namespace

void add_status_command(CLI::App& app, Context& context) {
    auto options = std::make_shared<QueryOptions>();
    auto* status =
        app.add_subcommand("status", "the running agent: hooks, events, drops, processes, outputs");
    add_query_options(status, *options);
    status->callback([&context, options] { context.exit_code = run_status(context, *options); });
}

void add_ps_command(CLI::App& app, Context& context) {
    auto options = std::make_shared<QueryOptions>();
    auto* ps = app.add_subcommand("ps", "processes holding a GPU, as the running agent sees them");
    add_query_options(ps, *options);
    ps->add_flag("--standalone", options->standalone,
                 "no agent: scan /proc once (no ioctl rates or connects)");
    ps->callback([&context, options] { context.exit_code = run_ps(context, *options); });
}

}  // namespace gpuguard::agent::cli
