// gpuguard journal show|export|verify: read the forensic journal
// (docs/journal.md) as a table, as JSON Lines or CSV, or check every CRC.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli.h"
#include "gpuguard/common/clock.h"
#include "gpuguard/common/ip_address.h"
#include "gpuguard/common/logging.h"
#include "gpuguard/common/printable.h"
#include "gpuguard/events/agent_tamper.h"
#include "gpuguard/events/event.h"
#include "gpuguard/events/event_json.h"
#include "gpuguard/events/gpu_fault.h"
#include "gpuguard/journal/journal.h"

namespace gpuguard::agent::cli {
namespace {

namespace jr = journal;

struct JournalCommand {
    std::string config_path;
    std::vector<std::string> dirs;
    std::optional<uint32_t> pid;
    std::string since;
    std::string until;
    std::vector<std::string> types;
    bool snapshots = false;
    bool all_records = false;
    size_t limit = 0;
    std::string format = "jsonl";
    std::string output;
    bool as_json = false;
};

// Every event type, and the journal's other records.
bool known_type(const std::string& name) {
    static const std::set<std::string> records = {"detection", "enforcement", "note", "gap"};
    const auto& events = event_type_names();
    return records.contains(name) || std::find(events.begin(), events.end(), name) != events.end();
}

// The reader for the command's paths and filters; prints the error and
// sets `exit_code` on failure.
std::optional<jr::JournalReader> open_reader(const Context& context, const JournalCommand& command,
                                             jr::ReaderOptions options, int& exit_code) {
    std::vector<std::filesystem::path> paths(command.dirs.begin(), command.dirs.end());
    if (paths.empty()) {
        auto config = load_config_or_report(context, command.config_path);
        if (!config) {
            exit_code = 2;
            return std::nullopt;
        }
        paths.push_back(config->journal.dir);
    }
    const int64_t now = unix_now_ns();
    for (const auto& [text, target] : {std::pair<const std::string*, std::optional<int64_t>*>{
                                           &command.since, &options.since_unix_ns},
                                       {&command.until, &options.until_unix_ns}}) {
        if (text->empty()) continue;
        *target = jr::parse_time_argument(*text, now);
        if (!*target) {
            std::cerr << "'" << *text
                      << "' is not a time: use RFC 3339 (2026-11-21T23:49:29Z), now, or a "
                         "relative time (-10m, -2h, -1d)\n";
            exit_code = 2;
            return std::nullopt;
        }
    }
    options.pid = command.pid;
    for (const auto& type : command.types) {
        std::stringstream list(type);
        std::string name;
        while (std::getline(list, name, ',')) {
            if (!known_type(name)) {
                std::cerr << "unknown --type '" << name << "'\n";
                exit_code = 2;
                return std::nullopt;
            }
            options.types.push_back(name);
        }
    }
    auto reader = jr::JournalReader::open(paths, std::move(options));
    if (!reader) {
        std::cerr << reader.error().message << "\n";
        exit_code = 2;
        return std::nullopt;
    }
    return std::move(reader).value();
}

void report_problems(const jr::JournalReader& reader) {
    for (const auto& problem : reader.problems()) {
        std::cerr << "journal: " << problem.path.string() << " at offset " << problem.offset << ": "
                  << jr::to_string(problem.kind) << " (" << problem.bytes
                  << " bytes): " << problem.detail << "\n";
    }
}

std::string short_time(int64_t unix_ns) {
    std::string text = format_rfc3339(unix_ns);  // 2026-11-21T23:49:29.227805351Z
    if (text.size() == 30) text = text.substr(0, 23) + "Z";
    return text;
}

std::string event_details(const Event& event) {
    struct Visitor {
        std::string operator()(const GpuOpen& open) const {
            std::string out = std::string(to_string(open.syscall)) + " " + open.path;
            if (open.succeeded()) {
                out += " -> fd " + std::to_string(open.result) + " (" + std::to_string(open.major) +
                       ":" + std::to_string(open.minor) + ")";
            } else {
                out += " -> " + errno_name(open.result);
            }
            return out + " " + open_flags_to_string(open.open_flags);
        }
        std::string operator()(const GpuIoctl& ioctl) const {
            char cmd[16];
            std::snprintf(cmd, sizeof cmd, "0x%08x", ioctl.cmd);
            return std::to_string(ioctl.major) + ":" + std::to_string(ioctl.minor) + " fd " +
                   std::to_string(ioctl.fd) + " cmd " + cmd;
        }
        std::string operator()(const Connect& connect) const {
            std::string out =
                (connect.ip_version == 6 ? "[" + connect.address + "]" : connect.address) + ":" +
                std::to_string(connect.port);
            out += connect.result == 0 ? " ok" : " " + errno_name(connect.result);
            std::vector<std::string> reasons;
            if (connect.gpu_holder) reasons.push_back("gpu_holder");
            if (connect.watched_port) reasons.push_back("watched_port");
            if (connect.all) reasons.push_back("connect_all");
            if (!reasons.empty()) out += " [" + join(reasons, ",") + "]";
            return out;
        }
        std::string operator()(const Exec& exec) const {
            return exec.filename + (exec.exe.empty() ? "" : " (runs " + exec.exe + ")") + " [" +
                   join(exec.argv, " ") + "]" + (exec.argv_truncated ? " (argv truncated)" : "");
        }
        std::string operator()(const Fork& fork) const {
            return "child " + std::to_string(fork.child_pid) +
                   (fork.inherited_gpu ? " (inherits GPU fds)" : "");
        }
        std::string operator()(const Exit& exit) const {
            std::string out = exit.signal() ? "signal " + std::to_string(exit.signal())
                                            : "exit code " + std::to_string(exit.exit_code());
            return out + (exit.held_gpu ? " (held GPU)" : "");
        }
        std::string operator()(const Telemetry& telemetry) const {
            char util[32] = "-";
            if (telemetry.utilization_percent) {
                std::snprintf(util, sizeof util, "%.0f%%", *telemetry.utilization_percent);
            }
            std::string out = "gpu" + std::to_string(telemetry.gpu_index) + " " + telemetry.vendor +
                              " " + telemetry.model + " util " + util;
            if (telemetry.memory_used_bytes) {
                out += " mem " + std::to_string(*telemetry.memory_used_bytes >> 20) + " MiB";
            }
            return out + ", " + std::to_string(telemetry.processes.size()) + " processes";
        }
        std::string operator()(const ProcessSnapshot& snapshot) const {
            std::string out = snapshot.exe + " [" + join(snapshot.argv, " ") + "]";
            if (!snapshot.user.empty()) out += " user " + snapshot.user;
            if (!snapshot.container_id.empty()) {
                out += " container " + snapshot.container_id.substr(0, 12);
            }
            for (const auto& gpu : snapshot.gpus) {
                out += " gpu " + std::to_string(gpu.major) + ":" + std::to_string(gpu.minor);
            }
            return out;
        }
        std::string operator()(const KillNow& kill) const {
            return "killed in kernel: trigger " + kill.trigger + ", match " + kill.match +
                   ", rule " + std::to_string(kill.rule_id) +
                   (kill.signal_result ? ", " + errno_name(kill.signal_result) : "");
        }
        std::string operator()(const NetPayload& payload) const {
            return std::string(payload.direction == NetPayload::Direction::kIn ? "in " : "out ") +
                   payload.remote_address + ":" + std::to_string(payload.remote_port) + " " +
                   std::to_string(payload.length) + " bytes" + (payload.dns ? " (dns)" : "");
        }
        std::string operator()(const Stratum& stratum) const {
            char rate[32] = "-";
            if (stratum.hash_rate) std::snprintf(rate, sizeof rate, "%.3g H/s", *stratum.hash_rate);
            return stratum.protocol + " pool " + stratum.pool_address + ":" +
                   std::to_string(stratum.pool_port) + " login " + stratum.login + " shares " +
                   std::to_string(stratum.shares_submitted) + " rate " + rate;
        }
        std::string operator()(const ProcessIo& io) const {
            const auto count = [](const std::optional<uint64_t>& value) {
                return value ? std::to_string(*value) : std::string("-");
            };
            return "file writes " + count(io.file_write_bytes) + " bytes, net sends " +
                   count(io.net_sends) + " (" + count(io.net_send_bytes) + " bytes)" +
                   (io.net_recvs ? ", receives " + count(io.net_recvs) + " (" +
                                       count(io.net_recv_bytes) + " bytes)"
                                 : std::string());
        }
        std::string operator()(const LoopbackPeer& peer) const {
            return "loopback port " + std::to_string(peer.port) + " served by pid " +
                   std::to_string(peer.server_pid) + " (" + peer.server_comm + ")" +
                   (peer.server_upstreams.empty()
                        ? std::string()
                        : ", its connections " + join(peer.server_upstreams, " "));
        }
        std::string operator()(const Flow& flow) const {
            return fmt::format(
                "flow to {} {} s old: {} bytes sent in {} messages, {} received in {} ({} "
                "unprompted)",
                endpoint_text(flow.address, flow.port), flow.age_ns / 1'000'000'000, flow.bytes_out,
                flow.send_bursts, flow.bytes_in, flow.receive_bursts, flow.pushes);
        }
        std::string operator()(const GpuLibraries& found) const {
            if (!found.error.empty()) return "GPU libraries not read: " + found.error;
            return "GPU stack " + found.stack +
                   (found.frameworks.empty() ? "" : " (" + join(found.frameworks, ", ") + ")") +
                   ", " + std::to_string(found.libraries.size()) + " GPU libraries mapped";
        }
        std::string operator()(const GpuFault& fault) const { return describe_gpu_fault(fault); }
        std::string operator()(const PoolProbe& probe) const {
            return "pool probe of " + endpoint_text(probe.address, probe.port) +
                   (probe.tls ? " over TLS" : "") + ": " + probe.verdict;
        }
        std::string operator()(const ProcessCmdline& read) const {
            return "command line read again, " + std::to_string(read.argv.size()) + " arguments" +
                   (read.truncated ? " (cut at 64 KiB)" : "") +
                   (read.extends_exec ? "" : "; not the exec's (rewritten, or another exec)");
        }
        std::string operator()(const CpuUsage& usage) const {
            return fmt::format("CPU {:.2f} cores over {:.1f} s, {} threads", usage.cores(),
                               static_cast<double>(usage.interval_ns) / 1e9, usage.threads);
        }
        std::string operator()(const AgentTamper& tamper) const {
            return "agent " + tamper.kind + ": " + describe_agent_tamper(task, tamper);
        }
        std::string operator()(const TrustChange& change) const {
            return "trust " + change.stage + ": " + describe_trust_change(task, change);
        }
        const TaskInfo& task;
        std::string operator()(const ConfigFile& file) const {
            return "config " + file.path + " (" + file.reason + ", " + std::to_string(file.size) +
                   " bytes" + (file.truncated ? ", truncated" : "") + ") " +
                   std::to_string(file.lines.size()) + " matched line(s)";
        }
        std::string operator()(const HiddenProcess& hidden) const {
            return "hidden from libc readdir of /proc (listed by " + hidden.seen_by + ")" +
                   (hidden.libraries.empty() ? "" : " by " + join(hidden.libraries, ", "));
        }
        std::string operator()(const ModuleLoad& module) const {
            const std::string taints = module_taint_letters(module.taints);
            return "kernel module " + module.name + (taints.empty() ? "" : " taints " + taints);
        }
        std::string operator()(const FileChange& change) const {
            std::string text = change.operation + " " + change.path + " (" + change.syscall +
                               (change.kind.empty() ? "" : ", " + change.kind) + ")";
            if (!change.libraries.empty()) text += " libraries " + join(change.libraries, ",");
            return text;
        }
        std::string operator()(const ProcessEnv& env) const {
            if (!env.error.empty()) return "environment not read: " + env.error;
            return "LD_PRELOAD=" + env.ld_preload.value_or("(unset)") +
                   " LD_LIBRARY_PATH=" + env.ld_library_path.value_or("(unset)");
        }
        std::string operator()(const Container& container) const {
            const ContainerDetails& d = container.details;
            std::string out = "container " + container.runtime + ":" + container.id.substr(0, 12);
            if (!d.name.empty()) out += " name " + d.name;
            if (!d.image.empty()) out += " image " + d.image;
            if (d.in_pod()) out += " pod " + d.pod_namespace + "/" + d.pod_name;
            return out;
        }
        std::string operator()(const Workload& workload) const {
            std::string out = workload.scheduler;
            if (!workload.slurm.empty()) {
                out += " job " + workload.slurm.job_id +
                       (workload.slurm.step_id.empty() ? "" : "." + workload.slurm.step_id);
            }
            if (workload.allocation_source.empty()) return out + " no GPU allocation";
            return out + " " + workload.allocation_source + "=" + workload.allocation +
                   (workload.unresolved.empty() ? " -> " + join(workload.allocated, ",")
                                                : " (" + workload.unresolved + ")");
        }
        std::string operator()(const ExeScan& scan) const {
            if (!scan.error.empty()) return "yara: " + scan.path + " not scanned: " + scan.error;
            return "yara: " + scan.path + " sha256 " + scan.sha256.substr(0, 16) + " " +
                   (scan.rules.empty() ? std::string("no rule hit") : join(scan.rules, ","));
        }
    };
    return std::visit(Visitor{event.task}, event.data);
}

std::string record_details(const jr::JournalRecord& record) {
    switch (record.kind) {
        case jr::RecordKind::kEvent:
            return event_details(record.event);
        case jr::RecordKind::kDetection:
        case jr::RecordKind::kEnforcement: {
            std::string json = record.alert.json;
            if (json.size() > 160) json = json.substr(0, 157) + "...";
            return record.alert.rule_id + " " + json;
        }
        case jr::RecordKind::kNote:
            return record.note.level + ": " + record.note.text;
        case jr::RecordKind::kGap:
            return std::to_string(record.gap.dropped_events) + " events and " +
                   std::to_string(record.gap.dropped_records) + " other records missing (" +
                   record.gap.reason + ")";
        default:
            return "";
    }
}

uint32_t record_pid(const jr::JournalRecord& record) {
    if (record.kind == jr::RecordKind::kEvent) return record.event.task.pid;
    if (record.kind == jr::RecordKind::kDetection || record.kind == jr::RecordKind::kEnforcement) {
        return record.alert.pid;
    }
    return 0;
}

jr::ReaderOptions base_options(const JournalCommand& command) {
    jr::ReaderOptions options;
    options.snapshots = command.snapshots ? jr::SnapshotMode::kAll : jr::SnapshotMode::kNone;
    return options;
}

int run_show(const Context& context, const JournalCommand& command) {
    int exit_code = 0;
    auto reader = open_reader(context, command, base_options(command), exit_code);
    if (!reader) return exit_code;
    std::printf("%-24s %-16s %7s %-16s %s\n", "TIME", "TYPE", "PID", "COMM", "DETAILS");
    jr::JournalRecord record;
    size_t shown = 0;
    while (reader->next(record)) {
        if (command.limit && shown >= command.limit) break;
        const bool task = record.kind == jr::RecordKind::kEvent;
        std::printf("%-24s %-16s %7" PRIu32 " %-16s %s\n",
                    short_time(record.time_unix_ns()).c_str(), jr::record_type(record).c_str(),
                    record_pid(record), task ? printable(record.event.task.comm).c_str() : "-",
                    printable(record_details(record)).c_str());
        ++shown;
    }
    std::fflush(stdout);
    report_problems(*reader);
    if (reader->segments().empty()) std::cerr << "journal: no segments found\n";
    return 0;
}

std::string csv_field(const std::string& text) {
    if (text.find_first_of(",\"\n\r") == std::string::npos) return text;
    std::string out = "\"";
    for (char c : text) {
        if (c == '"') out += '"';
        out += c;
    }
    return out + "\"";
}

// JSON object for the non-event records of `export --all`.
std::string record_json(const jr::JournalRecord& record) {
    nlohmann::ordered_json out{{"v", 1},
                               {"type", jr::record_type(record)},
                               {"ts_ns", record.ts_ns},
                               {"time", format_rfc3339(record.time_unix_ns())}};
    switch (record.kind) {
        case jr::RecordKind::kDetection:
        case jr::RecordKind::kEnforcement: {
            out["process"] = {{"pid", record.alert.pid}};
            out["rule_id"] = record.alert.rule_id;
            auto parsed = nlohmann::ordered_json::parse(record.alert.json, nullptr, false);
            out[jr::record_type(record)] =
                parsed.is_discarded() ? nlohmann::ordered_json(record.alert.json) : parsed;
            break;
        }
        case jr::RecordKind::kNote:
            out["note"] = {{"level", record.note.level}, {"text", record.note.text}};
            break;
        case jr::RecordKind::kGap:
            out["gap"] = {{"dropped_events", record.gap.dropped_events},
                          {"dropped_records", record.gap.dropped_records},
                          {"first_ts_ns", record.gap.first_ts_ns},
                          {"last_ts_ns", record.gap.last_ts_ns},
                          {"reason", record.gap.reason}};
            break;
        default:
            break;
    }
    return out.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

int run_export(const Context& context, const JournalCommand& command) {
    int exit_code = 0;
    jr::ReaderOptions options;
    // Snapshots by default: a JSON Lines export replays from the same state.
    options.snapshots = command.snapshots ? jr::SnapshotMode::kAll : jr::SnapshotMode::kAuto;
    auto reader = open_reader(context, command, std::move(options), exit_code);
    if (!reader) return exit_code;
    std::ofstream file;
    if (!command.output.empty() && command.output != "-") {
        file.open(command.output, std::ios::trunc);
        if (!file) {
            std::cerr << "cannot write " << command.output << "\n";
            return 2;
        }
    }
    std::ostream& out = file.is_open() ? file : std::cout;
    const bool csv = command.format == "csv";
    if (csv) out << "time,ts_ns,type,pid,tid,ppid,uid,gid,comm,cgroup_id,details\n";
    jr::JournalRecord record;
    size_t written = 0;
    while (reader->next(record)) {
        const bool is_event = record.kind == jr::RecordKind::kEvent;
        if (!is_event && !command.all_records) continue;
        if (command.limit && written >= command.limit) break;
        if (csv) {
            const TaskInfo empty;
            const TaskInfo& task = is_event ? record.event.task : empty;
            out << format_rfc3339(record.time_unix_ns()) << ',' << record.ts_ns << ','
                << jr::record_type(record) << ',' << record_pid(record) << ',' << task.tid << ','
                << task.ppid << ',' << task.uid << ',' << task.gid << ',' << csv_field(task.comm)
                << ',' << task.cgroup_id << ',' << csv_field(record_details(record)) << '\n';
        } else if (is_event) {
            out << event_to_json(record.event, record.realtime_offset_ns) << '\n';
        } else {
            out << record_json(record) << '\n';
        }
        ++written;
    }
    out.flush();
    report_problems(*reader);
    if (!out) {
        std::cerr << "write failed\n";
        return 2;
    }
    return 0;
}

int run_verify(const Context& context, const JournalCommand& command) {
    int exit_code = 0;
    jr::ReaderOptions options;
    options.snapshots = jr::SnapshotMode::kAll;
    options.meta = true;
    JournalCommand unfiltered;
    unfiltered.config_path = command.config_path;
    unfiltered.dirs = command.dirs;
    auto reader = open_reader(context, unfiltered, std::move(options), exit_code);
    if (!reader) return exit_code;
    jr::JournalRecord record;
    uint64_t events = 0;
    while (reader->next(record)) events += record.kind == jr::RecordKind::kEvent;
    const auto& stats = reader->stats();
    if (command.as_json) {
        nlohmann::ordered_json segments = nlohmann::ordered_json::array();
        for (const auto& segment : reader->segments()) {
            segments.push_back({{"path", segment.path.string()},
                                {"bytes", segment.size},
                                {"header_ok", segment.header_ok},
                                {"sequence", segment.header.sequence},
                                {"kind", segment.header.kind},
                                {"host", segment.header.hostname},
                                {"boot_id", segment.header.boot_id},
                                {"agent_version", segment.header.agent_version},
                                {"records", segment.records},
                                {"closed", segment.clean_end}});
        }
        nlohmann::ordered_json problems = nlohmann::ordered_json::array();
        for (const auto& problem : reader->problems()) {
            problems.push_back({{"path", problem.path.string()},
                                {"offset", problem.offset},
                                {"kind", jr::to_string(problem.kind)},
                                {"bytes", problem.bytes},
                                {"detail", problem.detail}});
        }
        nlohmann::ordered_json out{{"clean", reader->clean()},
                                   {"segments", segments},
                                   {"records", stats.records},
                                   {"events", events},
                                   {"corrupt_records", stats.corrupt_records},
                                   {"undecodable_records", stats.undecodable_records},
                                   {"unknown_records", stats.unknown_records},
                                   {"torn_tails", stats.torn_tails},
                                   {"skipped_bytes", stats.skipped_bytes},
                                   {"problems", problems}};
        std::cout << out.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
    } else {
        std::printf("%-60s %10s %9s %-7s %s\n", "SEGMENT", "BYTES", "RECORDS", "CLOSED", "HOST");
        for (const auto& segment : reader->segments()) {
            std::printf("%-60s %10" PRIu64 " %9" PRIu64 " %-7s %s\n", segment.path.c_str(),
                        segment.size, segment.records,
                        !segment.header_ok ? "BAD" : (segment.clean_end ? "yes" : "no"),
                        segment.header.hostname.c_str());
        }
        for (const auto& problem : reader->problems()) {
            std::printf("PROBLEM %s at offset %" PRIu64 ": %s, %" PRIu64 " bytes: %s\n",
                        problem.path.c_str(), problem.offset, jr::to_string(problem.kind),
                        problem.bytes, problem.detail.c_str());
        }
        std::printf("%s: %zu segments, %" PRIu64 " records (%" PRIu64 " events), %" PRIu64
                    " corrupt, %" PRIu64 " undecodable, %" PRIu64 " torn tails, %" PRIu64
                    " bytes skipped\n",
                    reader->clean() ? "OK" : "DAMAGED", reader->segments().size(), stats.records,
                    events, stats.corrupt_records, stats.undecodable_records, stats.torn_tails,
                    stats.skipped_bytes);
    }
    std::fflush(stdout);
    return reader->clean() ? 0 : 1;
}

void add_source_options(CLI::App* app, JournalCommand& command) {
    app->add_option("-c,--config", command.config_path,
                    "config file whose journal.dir is read (default: the embedded config)");
    // One value per occurrence (repeat the option for more): a word after
    // it is then an unexpected argument, not a second directory.
    app->add_option("-d,--dir", command.dirs,
                    "journal directory, incident bundle or segment file (repeatable)")
        ->allow_extra_args(false);
}

void add_filter_options(CLI::App* app, JournalCommand& command) {
    app->add_option("--pid", command.pid, "only this process (events, detections, enforcement)");
    app->add_option("--since", command.since, "from this time: RFC 3339, now, or -10m/-2h/-1d");
    app->add_option("--until", command.until, "up to this time (same forms as --since)");
    app->add_option(
           "--type", command.types,
           "only these types (repeatable or comma-separated): gpu_open, gpu_ioctl, "
           "connect, exec, fork, exit, telemetry, process_snapshot, kill_now, exe_scan, "
           "net_payload, stratum, process_io, config_file, hidden_process, module_load, "
           "file_change, process_env, agent_tamper, container, cpu_usage, gpu_libraries, cmdline, "
           "detection, enforcement, note, gap")
        ->allow_extra_args(false);
    app->add_option("--limit", command.limit, "stop after this many records");
}

}  // namespace

void add_journal_command(CLI::App& app, Context& context) {
    auto* journal_app = app.add_subcommand("journal", "read and check the forensic journal");
    journal_app->require_subcommand(1);
    auto command = std::make_shared<JournalCommand>();

    auto* show = journal_app->add_subcommand("show", "print journal records as a table");
    add_source_options(show, *command);
    add_filter_options(show, *command);
    show->add_flag("--snapshots", command->snapshots,
                   "include the process snapshots that open each segment");
    show->callback([&context, command] {
        set_log_level(context.log_level.empty() ? "warn" : context.log_level);
        context.exit_code = run_show(context, *command);
    });

    auto* exporter = journal_app->add_subcommand(
        "export", "write events as JSON Lines (docs/events.md, replayable) or CSV");
    add_source_options(exporter, *command);
    add_filter_options(exporter, *command);
    exporter->add_option("--format", command->format, "jsonl or csv")
        ->check(CLI::IsMember({"jsonl", "csv"}))
        ->capture_default_str();
    exporter->add_option("-o,--output", command->output, "file to write (default: stdout)");
    exporter->add_flag("--all", command->all_records,
                       "also detections, enforcement outcomes, notes and gaps");
    exporter->add_flag("--snapshots", command->snapshots,
                       "every segment's snapshot (default: only where state must be rebuilt)");
    exporter->callback([&context, command] {
        set_log_level(context.log_level.empty() ? "warn" : context.log_level);
        context.exit_code = run_export(context, *command);
    });

    auto* verify = journal_app->add_subcommand(
        "verify", "check every record's CRC (exit 0 clean, 1 damaged, 2 unreadable)");
    add_source_options(verify, *command);
    verify->add_flag("--json", command->as_json, "report as JSON");
    verify->callback([&context, command] {
        set_log_level(context.log_level.empty() ? "warn" : context.log_level);
        context.exit_code = run_verify(context, *command);
    });
}

}  // namespace gpuguard::agent::cli
