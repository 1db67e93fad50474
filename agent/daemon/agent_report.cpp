// What the agent shows of itself: `gpuguard status` and `ps` (the control
// socket), the status page and the Prometheus metrics.
#include <cstdio>

#include <unistd.h>

#include "agent_impl.h"

namespace gpuguard::agent {
namespace {

json yara_status_json(const ExeScanStats& stats) {
    return json{{"requested", stats.requested}, {"scanned", stats.scanned},
                {"matched", stats.matched},     {"failed", stats.failed},
                {"dropped", stats.dropped},     {"clean_not_journaled", stats.withheld}};
}

json config_status_json(const ConfigScanStats& stats) {
    return json{{"requested", stats.requested},   {"files_read", stats.files_read},
                {"cache_hits", stats.cache_hits}, {"refused", stats.refused},
                {"truncated", stats.truncated},   {"reported", stats.reported},
                {"dropped", stats.dropped}};
}

// The mining sessions network intelligence follows, each with its pid and
// the process's name: the hash rate over the session and its 95 % interval
// are the session's own fields (hash_rate, hash_rate_low, hash_rate_high).
json mining_sessions_json(const NetIntel& net_intel, const ProcessTable& table) {
    json sessions = json::array();
    for (const auto& session : net_intel.sessions()) {
        json entry = stratum_to_json(session.stratum);
        entry["pid"] = session.pid;
        const ProcessInfo* info = table.find(session.pid);
        entry["comm"] = info ? info->comm : "";
        sessions.push_back(std::move(entry));
    }
    return sessions;
}

std::string device_text(uint32_t major, uint32_t minor) {
    return std::to_string(major) + ":" + std::to_string(minor);
}

}  // namespace

// Driver of a device number, for naming its ioctls: the /proc/devices
// name, refined for DRM nodes by the sysfs driver link (amdgpu, i915, xe).
std::string Agent::Impl::driver_of(uint32_t major, uint32_t minor) const {
    std::string driver;
    for (const auto& device : devices) {
        if (device.matches(major, minor)) driver = device.driver;
    }
    if (driver != "drm") return driver;
    const std::string key = device_text(major, minor);
    if (const auto found = drm_drivers.find(key); found != drm_drivers.end()) return found->second;
    std::error_code ec;
    const auto link = std::filesystem::read_symlink(
        std::filesystem::path(options.sys_root) / "dev/char" / key / "device/driver", ec);
    const std::string resolved = ec ? "drm" : link.filename().string();
    drm_drivers[key] = resolved;
    return resolved;
}

json Agent::Impl::process_json(const ProcessInfo& info, const backends::Snapshot& telemetry) const {
    json gpus = json::array();
    for (const auto& gpu : info.gpus) {
        gpus.push_back(json{{"device", device_text(gpu.major, gpu.minor)},
                            {"driver", driver_of(gpu.major, gpu.minor)},
                            {"fd", gpu.fd},
                            {"inherited", gpu.inherited}});
    }
    json ioctls = json::array();
    double rate = 0;
    for (const auto& counter : info.ioctls) {
        const auto name = classify_ioctl(driver_of(counter.major, counter.minor), counter.cmd);
        char cmd[16];
        snprintf(cmd, sizeof(cmd), "0x%08x", counter.cmd);
        ioctls.push_back(json{{"device", device_text(counter.major, counter.minor)},
                              {"cmd", cmd},
                              {"name", name.name.empty() ? nullptr : json(name.name)},
                              {"class", to_string(name.ioctl_class)},
                              {"count", counter.count},
                              {"rate_per_s", counter.rate_per_s}});
        rate += counter.rate_per_s;
    }
    json connects = json::array();
    for (const auto& connect : info.connects) {
        connects.push_back(
            json{{"address", connect.address}, {"port", connect.port}, {"result", connect.result}});
    }
    json gpu_usage = json::array();
    for (const auto& sample : telemetry.processes) {
        if (sample.pid != static_cast<pid_t>(info.pid)) continue;
        json usage{{"gpu", sample.gpu}, {"source", sample.source}};
        if (sample.gpu < telemetry.devices.size()) {
            usage["model"] = telemetry.devices[sample.gpu].model;
            usage["uuid"] = telemetry.devices[sample.gpu].uuid;
        }
        usage["memory_bytes"] = sample.memory_bytes ? json(*sample.memory_bytes) : json(nullptr);
        usage["compute_percent"] =
            sample.compute_percent ? json(*sample.compute_percent) : json(nullptr);
        gpu_usage.push_back(usage);
    }
    json out{{"pid", info.pid},
             {"ppid", info.ppid},
             {"uid", info.uid},
             {"user", info.user.empty() ? nullptr : json(info.user)},
             {"comm", info.comm},
             {"exe", info.exe},
             {"cmdline", info.cmdline},
             {"cmdline_truncated", info.cmdline_truncated},
             {"cgroup", info.cgroup_path},
             {"container", nullptr},
             {"gpus", gpus},
             {"gpu_usage", gpu_usage},
             {"ioctl_total", info.ioctl_total()},
             {"ioctl_rate_per_s", rate},
             {"ioctls", ioctls},
             {"connects", connects},
             {"exited", info.exited},
             // libc's readdir of /proc did not list it at the last check
             {"hidden", hidden_pids.contains(info.pid)}};
    if (info.container) {
        out["container"] = container_to_json(
            Container{info.container->id, info.container->runtime, info.container_details});
    }
    if (!info.slurm.empty()) {
        out["slurm"] = json{{"job_id", info.slurm.job_id},       {"step_id", info.slurm.step_id},
                            {"user", info.slurm.user},           {"account", info.slurm.account},
                            {"partition", info.slurm.partition}, {"gpus", info.slurm.gpus}};
    }
    if (info.exit_code) out["exit_code"] = *info.exit_code;
    if (info.exit_signal) out["exit_signal"] = *info.exit_signal;
    return out;
}

// (pid, fd, device) of every GPU fd the table knows, for per-process telemetry.
std::vector<backends::ProcessFd> Agent::Impl::gpu_fds() const {
    std::lock_guard lock(mutex);
    std::vector<backends::ProcessFd> fds;
    for (const auto& process : table->gpu_processes()) {
        if (process.exited) continue;
        for (const auto& gpu : process.gpus) {
            if (gpu.fd < 0) continue;
            fds.push_back(backends::ProcessFd{static_cast<pid_t>(process.pid), gpu.fd,
                                              backends::DeviceNumber{gpu.major, gpu.minor}});
        }
    }
    return fds;
}

std::vector<AgentMetric> Agent::Impl::agent_metrics() const {
    std::lock_guard lock(mutex);
    std::vector<AgentMetric> out;
    const auto stats = sensor->stats();
    for (const auto& type : stats.kernel) {
        out.push_back(AgentMetric{"gpuguard_events_total",
                                  "Records the kernel emitted, by type",
                                  "counter",
                                  {{"type", type.type}},
                                  static_cast<double>(type.emitted)});
    }
    for (const auto& type : stats.kernel) {
        out.push_back(AgentMetric{"gpuguard_events_dropped_total",
                                  "Records lost because the ring buffer was full, by type",
                                  "counter",
                                  {{"type", type.type}},
                                  static_cast<double>(type.dropped)});
    }
    out.push_back(AgentMetric{"gpuguard_events_undecodable_total",
                              "Records that failed to decode",
                              "counter",
                              {},
                              static_cast<double>(stats.decode_errors)});
    size_t live_gpu = 0;
    for (const auto& process : table->gpu_processes()) live_gpu += !process.exited;
    out.push_back(AgentMetric{"gpuguard_processes_holding_gpu",
                              "Live processes holding a GPU fd",
                              "gauge",
                              {},
                              static_cast<double>(live_gpu)});
    if (pod_resources) {
        // The kubelet's PodResources API (docs/deployment.md): a host
        // without a kubelet counts no_socket, which is not an error.
        const kubelet::PodResourcesCounters calls = pod_resources->counters();
        for (const auto& [result, value] :
             {std::pair{"answered", calls.refreshes}, std::pair{"failed", calls.failures},
              std::pair{"no_socket", calls.socket_absent}}) {
            out.push_back(AgentMetric{"gpuguard_kubelet_list_calls_total",
                                      "Calls of the kubelet's PodResources List, by result",
                                      "counter",
                                      {{"result", result}},
                                      static_cast<double>(value)});
        }
    }
    if (router) {
        // Per-sink delivery counters (docs/outputs.md).
        for (const auto& sink : router->counters()) {
            for (const auto& [state, value] :
                 {std::pair{"queued", sink.queued}, std::pair{"persisted", sink.persisted},
                  std::pair{"sent", sink.sent}, std::pair{"retried", sink.retried},
                  std::pair{"dropped", sink.dropped}, std::pair{"filtered", sink.filtered}}) {
                out.push_back(
                    AgentMetric{"gpuguard_output_records_total",
                                "Alert records per output sink and state",
                                "counter",
                                {{"sink", sink.name}, {"type", sink.type}, {"state", state}},
                                static_cast<double>(value)});
            }
            out.push_back(AgentMetric{"gpuguard_output_bytes_total",
                                      "Payload bytes delivered per output sink",
                                      "counter",
                                      {{"sink", sink.name}, {"type", sink.type}},
                                      static_cast<double>(sink.bytes)});
            out.push_back(AgentMetric{"gpuguard_output_queue_records",
                                      "Alert records waiting in a sink's queue",
                                      "gauge",
                                      {{"sink", sink.name}, {"type", sink.type}},
                                      static_cast<double>(sink.queue_records)});
        }
    }
    if (exe_scans) {
        const auto scans = exe_scans->stats();
        for (const auto& [result, value] :
             {std::pair{"scanned", scans.scanned}, std::pair{"matched", scans.matched},
              std::pair{"failed", scans.failed}, std::pair{"dropped", scans.dropped}}) {
            out.push_back(AgentMetric{"gpuguard_yara_scans_total",
                                      "YARA scans of executables, by result",
                                      "counter",
                                      {{"result", result}},
                                      static_cast<double>(value)});
        }
    }
    if (config_scans) {
        const auto reads = config_scans->stats();
        for (const auto& [result, value] :
             {std::pair{"read", reads.files_read}, std::pair{"cached", reads.cache_hits},
              std::pair{"refused", reads.refused}, std::pair{"reported", reads.reported}}) {
            out.push_back(AgentMetric{"gpuguard_config_files_total",
                                      "Configuration files of suspect processes, by result",
                                      "counter",
                                      {{"result", result}},
                                      static_cast<double>(value)});
        }
    }
    if (options.stdout_writer) {
        const auto printed = options.stdout_writer->stats();
        for (const auto& [state, count] :
             {std::pair{"written", printed.written}, std::pair{"dropped", printed.dropped}}) {
            out.push_back(AgentMetric{"gpuguard_stdout_lines_total",
                                      "Lines for stdout (--print-events, detections), "
                                      "written or dropped (not read fast enough, reader "
                                      "gone, not written at shutdown)",
                                      "counter",
                                      {{"state", state}},
                                      static_cast<double>(count)});
        }
    }
    out.push_back(AgentMetric{"gpuguard_detections_total",
                              "Detections raised (new and updated)",
                              "counter",
                              {},
                              static_cast<double>(detections_total)});
    activity->append_metrics(out);
    out.push_back(AgentMetric{"gpuguard_gpu_faults_total",
                              "GPU device events (NVML Xid, ECC, clock changes) reported",
                              "counter",
                              {},
                              static_cast<double>(gpu_faults_total)});
    out.push_back(AgentMetric{"gpuguard_gpu_faults_dropped_total",
                              "GPU device events lost to a full queue (a flood of Xids)",
                              "counter",
                              {},
                              static_cast<double>(gpu_faults_dropped)});
    if (pool_prober) {  // verify.active
        out.push_back(AgentMetric{"gpuguard_pool_probes_total",
                                  "Active verifications of suspected pools, made or refused",
                                  "counter",
                                  {},
                                  static_cast<double>(pool_prober->probed())});
        out.push_back(AgentMetric{"gpuguard_pool_probes_skipped_total",
                                  "Probes not made: verify.peer_interval_s, verify.max_per_hour "
                                  "or a full queue (each also logged)",
                                  "counter",
                                  {},
                                  static_cast<double>(pool_prober->skipped())});
    }
    if (journal) {
        const auto written = journal->stats();
        out.push_back(AgentMetric{"gpuguard_journal_events_total",
                                  "Events written to the forensic journal",
                                  "counter",
                                  {},
                                  static_cast<double>(written.events_written)});
        for (const auto& [reason, count] :
             {std::pair{"queue_full", written.dropped_queue_full},
              std::pair{"write_failed", written.dropped_write_failed}}) {
            out.push_back(AgentMetric{"gpuguard_journal_dropped_total",
                                      "Journal records lost, by reason (each also counted "
                                      "as a gap in the journal)",
                                      "counter",
                                      {{"reason", reason}},
                                      static_cast<double>(count)});
        }
        out.push_back(AgentMetric{"gpuguard_journal_writing",
                                  "1 while journal writes succeed, 0 while they fail",
                                  "gauge",
                                  {},
                                  written.writing ? 1.0 : 0.0});
    }
    out.push_back(AgentMetric{"gpuguard_tracked_processes",
                              "Entries in the process table",
                              "gauge",
                              {},
                              static_cast<double>(table->size())});
    const WatchStats watch = sensor->watch_stats();
    for (const auto& [list, counts] :
         {std::pair{"processes", watch.processes}, std::pair{"addresses", watch.addresses}}) {
        out.push_back(AgentMetric{"gpuguard_watch_list_entries",
                                  "Entries in a kernel watch list (processes, addresses)",
                                  "gauge",
                                  {{"list", list}},
                                  static_cast<double>(counts.entries)});
        out.push_back(AgentMetric{"gpuguard_watch_list_capacity",
                                  "Size of a kernel watch list (sensor.watch_*_max)",
                                  "gauge",
                                  {{"list", list}},
                                  static_cast<double>(counts.capacity)});
        out.push_back(AgentMetric{"gpuguard_watch_list_evictions_total",
                                  "Oldest entries dropped because a watch list was full",
                                  "counter",
                                  {{"list", list}},
                                  static_cast<double>(counts.evicted)});
    }
    const NetIntelStats& net = net_intel.stats();
    out.push_back(AgentMetric{"gpuguard_dns_answers_total",
                              "DNS answers observed",
                              "counter",
                              {},
                              static_cast<double>(net.dns_answers)});
    out.push_back(AgentMetric{"gpuguard_stratum_sessions_total",
                              "Connections recognised as a mining protocol",
                              "counter",
                              {},
                              static_cast<double>(net.sessions_recognised)});
    for (const auto& session : net_intel.sessions()) {
        if (!session.stratum.hash_rate) continue;
        out.push_back(AgentMetric{"gpuguard_stratum_hash_rate",
                                  "Hash rate estimated from a mining session's shares (H/s)",
                                  "gauge",
                                  {{"pid", std::to_string(session.pid)},
                                   {"protocol", session.stratum.protocol},
                                   {"pool", session.stratum.pool_address + ":" +
                                                std::to_string(session.stratum.pool_port)}},
                                  *session.stratum.hash_rate});
    }
    return out;
}

std::string Agent::status_json() const { return status_json_of(*impl_); }
std::string Agent::ps_json() const { return ps_json_of(*impl_); }

std::string Agent::status_json_of(const Impl& impl) {
    json outputs = json::array();
    if (impl.router) {
        for (const auto& sink : impl.router->counters()) {
            outputs.push_back(json{{"name", sink.name},
                                   {"type", sink.type},
                                   {"queued", sink.queued},
                                   {"persisted", sink.persisted},
                                   {"sent", sink.sent},
                                   {"retried", sink.retried},
                                   {"dropped", sink.dropped},
                                   {"filtered", sink.filtered},
                                   {"bytes", sink.bytes},
                                   {"queue_records", sink.queue_records},
                                   {"healthy", sink.healthy},
                                   {"last_error", sink.last_error}});
        }
    }
    json stdout_json = nullptr;  // nothing printed on stdout
    if (impl.options.stdout_writer) {
        const auto printed = impl.options.stdout_writer->stats();
        stdout_json = json{{"written", printed.written},
                           {"dropped", printed.dropped},
                           {"queued_bytes", printed.queued_bytes},
                           {"reader_gone", printed.reader_gone}};
    }
    const auto telemetry = impl.sampler->latest();
    json backends_status = json::array();
    for (const auto& backend : telemetry.backends) {
        backends_status.push_back(
            json{{"name", backend.name}, {"ok", backend.ok}, {"last_error", backend.last_error}});
    }
    std::lock_guard lock(impl.mutex);
    const auto stats = impl.sensor->stats();
    json events = json::object();
    for (const auto& type : stats.kernel) {
        events[type.type] = json{{"emitted", type.emitted}, {"dropped", type.dropped}};
    }
    json devices = json::array();
    for (const auto& device : impl.devices) {
        devices.push_back(json{{"device", device.to_string()}, {"driver", device.driver}});
    }
    const auto gpu_processes = impl.table->gpu_processes();
    size_t live_gpu = 0;
    for (const auto& process : gpu_processes) live_gpu += !process.exited;
    // Over the last minute (events/s), from the loop's once-a-second samples.
    json events_per_s = nullptr;
    if (impl.delivered_samples.size() >= 2) {
        const auto& [first_ns, first] = impl.delivered_samples.front();
        const auto& [last_ns, last] = impl.delivered_samples.back();
        events_per_s =
            static_cast<double>(last - first) * 1e9 / static_cast<double>(last_ns - first_ns);
    }
    json gpus = json::array();
    for (const auto& device : telemetry.devices) {
        json gpu{{"index", device.index},
                 {"model", device.model},
                 {"driver", device.driver},
                 {"bus_id", device.bus_id}};
        for (const auto& sample : telemetry.gpus) {
            if (sample.gpu != device.index) continue;
            if (sample.gpu_utilization_percent) {
                gpu["utilization_percent"] = *sample.gpu_utilization_percent;
            }
            if (sample.memory_used_bytes) gpu["memory_used_bytes"] = *sample.memory_used_bytes;
            if (sample.memory_total_bytes) gpu["memory_total_bytes"] = *sample.memory_total_bytes;
        }
        gpus.push_back(std::move(gpu));
    }
    const auto last_hour = impl.activity->last_hour();
    json pinned = nullptr;  // enforcement.pin_path unused (off, or no bpffs)
    if (impl.pins) {
        const PinReport& report = impl.pins->report();
        pinned = json{{"path", report.path},
                      {"maps_reused", report.maps_reused},
                      {"maps_dropped", report.maps_dropped},
                      {"links_taken_over", report.links_adopted},
                      {"hooks_replaced", report.links_replaced},
                      {"kept_on_exit", impl.options.config.enforcement.keep_pinned_on_exit}};
    }
    const auto watch_json = [](const WatchListCounts& counts) {
        return json{{"entries", counts.entries}, {"capacity", counts.capacity},
                    {"added", counts.added},     {"evicted", counts.evicted},
                    {"expired", counts.expired}, {"removed", counts.removed}};
    };
    const WatchStats watch = impl.sensor->watch_stats();
    const json watch_list{{"processes", watch_json(watch.processes)},
                          {"addresses", watch_json(watch.addresses)}};
    const json enforcement{
        {"dry_run", impl.options.config.enforcement.dry_run},
        {"pinned", pinned},
        {"denied_cgroups", impl.kernel_enforcer ? impl.kernel_enforcer->denied_cgroups()
                                                : std::vector<std::string>{}},
        {"kill_now", impl.known_bad != nullptr},
        {"deny_gpu", !impl.kernel_enforcer                ? "unavailable"
                     : impl.kernel_enforcer->lsm_loaded() ? "cgroup/dev + BPF LSM"
                                                          : "cgroup/dev"},
        {"block_ip", impl.connect_filter ? "cgroup/connect"
                     : impl.nft          ? "nftables"
                                         : "on first use"}};
    return json{
        {"version", GPUGUARD_VERSION},
        {"pid", getpid()},
        {"uptime_s", static_cast<double>(monotonic_ns() - impl.started_ns) / 1e9},
        {"attach_mode", attach_mode_name(impl.sensor->attach_mode())},
        {"attach_reason", impl.sensor->attach_reason()},
        {"payload_hooks", impl.sensor->payload_hooks()},
        {"hooks", impl.sensor->attached_hooks()},
        {"ring_buffer_kb", impl.options.config.sensor.ring_buffer_kb},
        {"events", events},
        {"delivered", stats.delivered},
        {"dropped", stats.total_dropped()},
        {"decode_errors", stats.decode_errors},
        {"gpu_devices", devices},
        {"watch_list", watch_list},
        {"events_per_s", events_per_s},
        {"gpus", gpus},
        {"stratum_sessions", mining_sessions_json(impl.net_intel, *impl.table)},
        {"enforcement", enforcement},
        {"last_hour", json{{"detections", last_hour.detections}, {"actions", last_hour.actions}}},
        {"rules", json{{"version", rule_pack_version(*impl.rules_watcher->current(),
                                                     impl.correlator->rules())},
                       {"signatures", impl.rules_watcher->current()->effective().size()},
                       {"correlation_rules", impl.correlator->rules().size()},
                       {"reloads", impl.rules_watcher->reloads()},
                       {"rejected", impl.rules_watcher->rejected()}}},
        {"journal", impl.journal ? json{{"dir", impl.options.config.journal.dir},
                                        {"events_written", impl.journal->stats().events_written},
                                        {"bytes_written", impl.journal->stats().bytes_written},
                                        {"dropped", impl.journal->stats().dropped()},
                                        {"writing", impl.journal->stats().writing},
                                        {"last_error", impl.journal->stats().last_error}}
                                 : json(nullptr)},
        {"outputs", outputs},
        {"stdout", stdout_json},
        {"yara", impl.exe_scans ? yara_status_json(impl.exe_scans->stats()) : json(nullptr)},
        {"config_files",
         impl.config_scans ? config_status_json(impl.config_scans->stats()) : json(nullptr)},
        {"detections", json{{"raised", impl.correlator->stats().detections},
                            {"updated", impl.correlator->stats().updates},
                            {"allowlisted", impl.correlator->stats().allowlisted},
                            {"emitted", impl.detections_total}}},
        {"telemetry", json{{"gpus", telemetry.devices.size()},
                           {"samples", telemetry.sequence},
                           {"backends", backends_status}}},
        {"process_table",
         json{{"entries", impl.table->size()},
              {"max_entries", impl.options.config.process_table.max_entries},
              {"gpu_processes", live_gpu},
              {"evicted_live", impl.table->evicted_live()},
              {"hidden_checks", impl.hidden_checks},
              {"hidden", impl.hidden_pids.size()},
              {"bootstrap", json{{"processes", impl.bootstrap.processes},
                                 {"gpu_processes", impl.bootstrap.gpu_processes}}}}}}
        .dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string Agent::ps_json_of(const Impl& impl) {
    const auto telemetry = impl.sampler->latest();  // before the lock: the sampler takes it too
    std::lock_guard lock(impl.mutex);
    json processes = json::array();
    for (const auto& process : impl.table->gpu_processes()) {
        processes.push_back(impl.process_json(process, telemetry));
    }
    const json stratum = mining_sessions_json(impl.net_intel, *impl.table);
    // argv, paths and pool names need not be UTF-8: invalid bytes become U+FFFD
    // (nlohmann would throw), as in every JSON the agent writes.
    return json{{"processes", processes}, {"stratum_sessions", stratum}}.dump(
        -1, ' ', false, json::error_handler_t::replace);
}

}  // namespace gpuguard::agent
