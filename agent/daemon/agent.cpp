#include "gpuguard/daemon/agent.h"

#include <chrono>
#include <deque>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>

#include <nlohmann/json.hpp>
#include <time.h>
#include <unistd.h>

#include "gpuguard/backends/backends.h"
#include "gpuguard/common/logging.h"
#include "gpuguard/daemon/activity_log.h"
#include "gpuguard/daemon/control_socket.h"
#include "gpuguard/daemon/kernel_enforcement.h"
#include "gpuguard/daemon/metrics_server.h"
#include "gpuguard/daemon/telemetry.h"
#include "gpuguard/detect/correlator.h"
#include "gpuguard/detect/exe_scanner.h"
#include "gpuguard/detect/pipeline.h"
#include "gpuguard/detect/rule_pack_version.h"
#include "gpuguard/enforce/enforcer.h"
#include "gpuguard/enforce/nft_blocker.h"
#include "gpuguard/enforce/priority_guard.h"
#include "gpuguard/events/event_json.h"
#include "gpuguard/events/gpu_devices.h"
#include "gpuguard/events/net_event_codec.h"
#include "gpuguard/journal/journal.h"
#include "gpuguard/netintel/net_intel.h"
#include "gpuguard/rules/correlation.h"
#include "gpuguard/rules/rules.h"
#include "gpuguard/sensor/bpf_pins.h"
#include "gpuguard/sensor/sensor.h"
#include "gpuguard/sensor/sensor_enforce.h"
#include "gpuguard/sensor/sensor_probe.h"
#include "gpuguard/siem/siem.h"
#include "gpuguard/state/ioctl_names.h"
#include "gpuguard/state/process_handle.h"
#include "gpuguard/state/process_io.h"
#include "gpuguard/state/process_table.h"
#include "gpuguard/version.h"

namespace gpuguard::agent {
namespace {

using json = nlohmann::ordered_json;

uint64_t monotonic_ns() {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    return static_cast<uint64_t>(now.tv_sec) * 1'000'000'000ull +
           static_cast<uint64_t>(now.tv_nsec);
}

json yara_status_json(const ExeScanStats& stats) {
    return json{{"requested", stats.requested},
                {"scanned", stats.scanned},
                {"matched", stats.matched},
                {"failed", stats.failed},
                {"dropped", stats.dropped}};
}

// The rule tag a kill_now name carries in the kernel map (and in KillNow
// events): FNV-1a of the signature id, with the top bit set so it never
// collides with the enforcer's small sequential tags.
constexpr uint32_t kRuleTagBit = 0x80000000u;
uint32_t kill_now_tag(std::string_view signature_id) {
    uint32_t hash = 2166136261u;
    for (unsigned char c : signature_id) hash = (hash ^ c) * 16777619u;
    return hash | kRuleTagBit;
}

std::string device_text(uint32_t major, uint32_t minor) {
    return std::to_string(major) + ":" + std::to_string(minor);
}

// The cgroup programs of deny_gpu and the connect fallback, with BPF LSM
// where the kernel runs it; null (one warning) where they cannot load.
std::unique_ptr<KernelEnforcer> open_kernel_enforcer(const Config& config,
                                                     std::shared_ptr<PinDirectory> pins) {
    const auto log = logger("enforcer");
    KernelEnforcerOptions options;
    options.btf_path = config.sensor.btf_path;
    options.pins = std::move(pins);
    const FeatureStatus lsm = probe_bpf_lsm(config.sensor.btf_path);
    options.load_lsm = lsm.available;
    std::string lsm_detail = lsm.detail;
    auto kernel = KernelEnforcer::open(options);
    if (!kernel && options.load_lsm) {
        lsm_detail = kernel.error().message;  // the probe passed, the real program did not
        options.load_lsm = false;
        kernel = KernelEnforcer::open(options);
    }
    if (!kernel) {
        log->warn(
            "kernel enforcement unavailable ({}): deny_gpu fails and block_ip has no cgroup "
            "fallback",
            kernel.error().message);
        return nullptr;
    }
    if (!(*kernel)->lsm_loaded()) {
        log->warn("deny_gpu: BPF LSM unavailable ({}), per-cgroup cgroup/dev deny only",
                  lsm_detail);
    }
    return std::move(kernel).value();
}

}  // namespace

struct Agent::Impl {
    AgentOptions options;
    std::vector<GpuDeviceNumber> devices;                    // registered in the kernel map
    mutable std::map<std::string, std::string> drm_drivers;  // "226:128" -> "amdgpu"
    std::shared_ptr<PinDirectory> pins;  // null: in-kernel enforcement ends with the agent
    std::optional<Sensor> sensor;
    std::unique_ptr<ProcessTable> table;
    std::unique_ptr<backends::TelemetrySampler> sampler;
    std::unique_ptr<MetricsServer> metrics;
    std::optional<ControlServer> control;
    std::unique_ptr<rules::RuleSetWatcher> rules_watcher;
    std::unique_ptr<siem::AlertRouter> router;        // null without outputs
    std::unique_ptr<journal::JournalWriter> journal;  // null when journal.enabled is false
    std::unique_ptr<NftBlocker> nft;  // reconciled at start only where its table exists
    std::unique_ptr<KernelEnforcer> kernel_enforcer;       // null where cgroup programs fail
    std::unique_ptr<KernelGpuDenier> gpu_denier;           // deny_gpu through kernel_enforcer
    std::unique_ptr<CgroupConnectBlocker> connect_filter;  // block_ip's cgroup/connect fallback
    std::unique_ptr<SensorKnownBad> known_bad;
    std::unique_ptr<Enforcer> enforcer;
    std::unique_ptr<EnforcerWorker> enforcer_worker;  // kills wait out grace periods there
    std::unique_ptr<Correlator> correlator;
    std::unique_ptr<PriorityGuard> priority_guard;             // guard mode's GPU priorities
    std::unique_ptr<rules::GuardPolicyWatcher> guard_watcher;  // rules.correlation_files
    NetIntel net_intel;                  // names connects from DNS answers, derives Stratum events
    std::unique_ptr<Pipeline> pipeline;  // built last in start(), before the first event
    std::unique_ptr<ExeScanWorker> exe_scans;           // null when rules.yara_scan is off
    std::map<std::string, std::string> kill_now_names;  // in the kernel map: comm -> signature id
    uint64_t telemetry_sequence = 0;
    std::unique_ptr<ProcessIoSampler> process_io;  // GPU processes' writes, per sample
    uint64_t detections_total = 0;
    uint64_t rule_reloads_rejected = 0;
    std::unique_ptr<ActivityLog> activity;  // recent detections/actions: status page, metrics
    std::deque<std::pair<uint64_t, uint64_t>> delivered_samples;  // (monotonic ns, delivered), 60 s
    mutable std::mutex mutex;  // guards table, correlator and sensor reads from other threads
    int64_t realtime_offset_ns = 0;
    uint64_t started_ns = 0;
    BootstrapReport bootstrap;

    bool is_gpu(uint32_t major, uint32_t minor) const {
        for (const auto& device : devices) {
            if (device.matches(major, minor)) return true;
        }
        return false;
    }

    // Driver of a device number, for naming its ioctls: the /proc/devices
    // name, refined for DRM nodes by the sysfs driver link (amdgpu, i915, xe).
    std::string driver_of(uint32_t major, uint32_t minor) const {
        std::string driver;
        for (const auto& device : devices) {
            if (device.matches(major, minor)) driver = device.driver;
        }
        if (driver != "drm") return driver;
        const std::string key = device_text(major, minor);
        if (const auto found = drm_drivers.find(key); found != drm_drivers.end())
            return found->second;
        std::error_code ec;
        const auto link = std::filesystem::read_symlink(
            std::filesystem::path(options.sys_root) / "dev/char" / key / "device/driver", ec);
        const std::string resolved = ec ? "drm" : link.filename().string();
        drm_drivers[key] = resolved;
        return resolved;
    }

    json process_json(const ProcessInfo& info, const backends::Snapshot& telemetry) const {
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
            connects.push_back(json{
                {"address", connect.address}, {"port", connect.port}, {"result", connect.result}});
        }
        json gpu_usage = json::array();
        for (const auto& sample : telemetry.processes) {
            if (sample.pid != static_cast<pid_t>(info.pid)) continue;
            json usage{{"gpu", sample.gpu}, {"source", sample.source}};
            if (sample.gpu < telemetry.devices.size()) {
                usage["model"] = telemetry.devices[sample.gpu].model;
                usage["uuid"] = telemetry.devices[sample.gpu].uuid;
            }
            usage["memory_bytes"] =
                sample.memory_bytes ? json(*sample.memory_bytes) : json(nullptr);
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
                 {"exited", info.exited}};
        if (info.container) {
            out["container"] =
                json{{"runtime", info.container->runtime}, {"id", info.container->id}};
        }
        if (info.exit_code) out["exit_code"] = *info.exit_code;
        if (info.exit_signal) out["exit_signal"] = *info.exit_signal;
        return out;
    }

    // (pid, fd, device) of every GPU fd the table knows, for per-process telemetry.
    std::vector<backends::ProcessFd> gpu_fds() const {
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

    std::vector<AgentMetric> agent_metrics() const {
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

    void emit(const Detection& detection) {
        ++detections_total;
        activity->record(detection);
        if (options.detection_sink) options.detection_sink(detection);
        if (router) router->publish(detection);
        if (journal) {
            const std::string json = siem::format_ecs_json(detection, HostInfo{});
            journal->append_detection(detection.last_seen_ns, detection.process.pid,
                                      detection.rule_id, json);
            // An incident bundle (look-back + what follows) per new detection.
            if (detection.update == 0) {
                journal->trigger(detection.last_seen_ns, detection.process.pid, detection.rule_id,
                                 json);
            }
        }
        if (enforcer_worker && !detection.action.empty() && detection.action != "alert") {
            enforcer_worker->submit(detection);
        }
    }

    // block_ip goes to nftables, or to the cgroup/connect filter when
    // enforcement.connect_fallback_cgroup names a cgroup or nftables does
    // not answer (then on the root cgroup: every connect of the host, as the
    // output chain would). An existing table inet gpuguard is reconciled
    // (repaired, its elements kept); a host that never blocked gets none.
    AddressBlocker* address_blocker(const EnforcementConfig& config) {
        const auto log = logger("enforcer");
        nft = std::make_unique<NftBlocker>(std::chrono::seconds(config.block_ttl_s));
        const Status usable = nft->usable();
        if (usable && nft->table_exists()) {
            if (auto reconciled = nft->reconcile(); !reconciled) {
                log->error("{}", reconciled.error().message);
            } else {
                const auto kept = nft->list();
                log->info("nftables table inet {} reconciled, {} blocked address(es) kept",
                          kNftTable, kept ? kept->size() : 0);
            }
        }
        if (usable && config.connect_fallback_cgroup.empty()) return nft.get();
        const std::string why = usable ? "enforcement.connect_fallback_cgroup"
                                       : "nftables unusable: " + usable.error().message;
        const std::string cgroup =
            config.connect_fallback_cgroup.empty() ? "/" : config.connect_fallback_cgroup;
        if (!kernel_enforcer) {
            log->warn("block_ip: no cgroup/connect filter for {} ({})", cgroup, why);
            return nft.get();
        }
        if (auto attached = kernel_enforcer->attach_connect_filter(cgroup); !attached) {
            log->error("block_ip: {} ({})", attached.error().message, why);
            return nft.get();
        }
        connect_filter = std::make_unique<CgroupConnectBlocker>(*kernel_enforcer);
        log->info("block_ip: cgroup/connect4/6 on cgroup {} ({})", cgroup, why);
        return connect_filter.get();
    }

    // A kill_now the kernel carried out, told afterwards: an outcome like the
    // enforcer's own (outputs, journal), naming the rule that registered the
    // name (the agent's tags) or the file (the enforcer's).
    void report_kernel_kill(const Event& event, const KillNow& kill) {
        DetectionProcess process;
        if (const ProcessInfo* info = table->find(event.task.pid)) {
            process = describe_process(*info);
        }
        process.pid = event.task.pid;
        process.ppid = event.task.ppid;
        process.uid = event.task.uid;
        process.gid = event.task.gid;
        if (!event.task.comm.empty()) process.comm = event.task.comm;
        std::string rule_id;
        for (const auto& [name, id] : kill_now_names) {
            if (kill_now_tag(id) == kill.rule_id) rule_id = id;
        }
        const std::string what = kill.match == "name"
                                     ? "name '" + event.task.comm + "'"
                                     : "executable " + std::to_string(kill.dev >> 20) + ":" +
                                           std::to_string(kill.dev & 0xfffff) + " inode " +
                                           std::to_string(kill.ino);
        (void)enforcer->kernel_kill(process, kill.rule_id, kill.signal_result,
                                    "SIGKILL in the kernel at " + kill.trigger + " (" + what + ")",
                                    rule_id);
    }

    void on_outcome(const EnforcementOutcome& outcome) {
        activity->record(outcome);
        if (options.outcome_sink) options.outcome_sink(outcome);
        if (router) router->publish(outcome);
        if (journal) {
            journal->append_enforcement(outcome.ts_ns, outcome.process.pid, outcome.rule_id,
                                        siem::format_ecs_json(outcome, HostInfo{}));
        }
    }

    // A rule file change the watcher rejected: an alert about the agent
    // itself, so the SOC sees that its rules did not change.
    // Guard mode's pause/resume decisions go to the enforcer (its safety
    // rules and dry run apply there); a pause is also reported as a
    // detection, a resume through its outcome.
    void act_on_priorities(const std::vector<PriorityAction>& actions) {
        for (const auto& action : actions) {
            const uint64_t now = monotonic_ns();
            Detection detection;
            detection.id =
                "guard-priority-" + std::to_string(action.process.pid) + "-" + std::to_string(now);
            detection.rule_id = "GG-GUARD-0001";
            detection.rule_name = "Lower-priority GPU process paused under load";
            detection.ruleset = "gpuguard-guard";
            detection.description = action.reason;
            detection.severity = Severity::kNotice;
            detection.confidence = 1.0;
            detection.first_seen_ns = detection.last_seen_ns = now;
            detection.time_unix_ns = static_cast<int64_t>(now) + realtime_offset_ns;
            detection.process = action.process;
            detection.evidence.push_back(
                Evidence{now, "policy", "telemetry", "", "priority_guard", action.reason});
            detection.action = action.action;
            detection.dry_run = action.dry_run;
            logger("enforcer")
                ->info("GPU priority: {} pid {} ({}, priority {}){}: {}", action.action,
                       action.process.pid, action.process.comm, action.priority,
                       action.dry_run ? " (dry run)" : "", action.reason);
            if (action.action == "pause") {
                emit(detection);
            } else if (enforcer_worker) {
                enforcer_worker->submit(detection);
            }
        }
    }

    void raise_rules_rejected(const Error& error) {
        ++rule_reloads_rejected;
        Detection detection;
        const uint64_t now = monotonic_ns();
        detection.id = "agent-rules-" + std::to_string(now);
        detection.rule_id = "GG-AGENT-0001";
        detection.rule_name = "Rule file change rejected";
        detection.ruleset = "gpuguard-agent";
        detection.description =
            "A change to the rule files was rejected; the previous rules stay active: " +
            error.message;
        detection.severity = Severity::kError;
        detection.confidence = 1.0;
        detection.first_seen_ns = detection.last_seen_ns = now;
        detection.time_unix_ns = static_cast<int64_t>(now) + realtime_offset_ns;
        detection.process.pid = static_cast<uint32_t>(getpid());
        detection.process.ppid = static_cast<uint32_t>(getppid());
        detection.process.comm = "gpuguard";
        std::error_code ec;
        detection.process.executable = std::filesystem::read_symlink("/proc/self/exe", ec).string();
        detection.evidence.push_back(
            Evidence{now, "policy", "", "", "rules", error.message.substr(0, 4096)});
        detection.action = "alert";
        emit(detection);
    }

    // The kernel's kill_now name map follows the rules: literal process names
    // of kill_now signatures are killed at exec, before they run a single
    // instruction of their own. Names this agent did not register (the
    // enforcer's) are left alone; its own name and pid 1's are never added.
    void sync_kill_now_names(const rules::RuleSet& rule_set) {
        const auto log = logger("enforce");
        std::map<std::string, std::string> wanted;
        std::string init_comm;
        if (std::ifstream in(options.proc_root + "/1/comm"); in) std::getline(in, init_comm);
        for (auto& [name, id] : rule_set.kill_now_names()) {
            if (name == "gpuguard" || name == init_comm) {
                log->warn("kill_now: {} names '{}', which is never killed in the kernel", id, name);
                continue;
            }
            wanted.emplace(name, id);
        }
        for (auto it = kill_now_names.begin(); it != kill_now_names.end();) {
            if (wanted.contains(it->first)) {
                ++it;
                continue;
            }
            (void)sensor->remove_known_bad_name(it->first);
            log->info("kill_now: '{}' no longer killed at exec", it->first);
            it = kill_now_names.erase(it);
        }
        for (const auto& [name, id] : wanted) {
            if (auto it = kill_now_names.find(name); it != kill_now_names.end() && it->second == id)
                continue;
            if (auto added = sensor->add_known_bad_name(name, kill_now_tag(id)); !added) {
                log->error("kill_now: cannot register '{}' ({}): {}", name, id,
                           added.error().message);
                continue;
            }
            kill_now_names.insert_or_assign(name, id);
            log->info("kill_now: '{}' ({}) is killed at exec", name, id);
        }
    }

    // The correlator's YARA scan requests, for processes still alive.
    void submit_scans() {
        for (const auto& request : correlator->take_scan_requests()) {
            const ProcessInfo* info = table->find(request.pid);
            if (!info || info->exited) continue;
            TaskInfo task;
            task.pid = task.tid = info->pid;
            task.ppid = info->ppid;
            task.uid = info->uid;
            task.gid = info->gid;
            task.cgroup_id = info->cgroup_id;
            task.comm = info->comm;
            exe_scans->submit(task);
        }
    }

    // Every event, from the sensor or the agent's own samplers, takes the
    // one pipeline replay takes too (gpuguard/detect/pipeline.h).
    void on_event(const Event& event) { pipeline->feed(event); }

    // The pipeline's stages are this agent's; its hooks are what only the
    // live agent does: in-kernel kill reports, YARA scans, the priority
    // guard, --print-events.
    void build_pipeline() {
        PipelineStages stages;
        stages.table = table.get();
        stages.net_intel = &net_intel;
        stages.journal = journal.get();
        stages.correlator = correlator.get();
        stages.snapshot_new_gpu_holders = journal != nullptr;
        PipelineHooks hooks;
        hooks.emit = [this](const Detection& detection) { emit(detection); };
        hooks.on_applied = [this](const Event& event) {
            if (const auto* kill = std::get_if<KillNow>(&event.data); kill && enforcer) {
                report_kernel_kill(event, *kill);
            }
        };
        hooks.on_judged = [this](const Event& event) {
            if (correlator && exe_scans) submit_scans();
            if (const auto* telemetry = std::get_if<Telemetry>(&event.data);
                telemetry && priority_guard && priority_guard->enabled()) {
                act_on_priorities(priority_guard->observe(*telemetry, *table));
            }
            if (!options.event_sink) return;
            if (!options.event_types.empty() &&
                !options.event_types.contains(event_type_name(event))) {
                return;
            }
            options.event_sink(event_to_json(event, realtime_offset_ns));
        };
        pipeline = std::make_unique<Pipeline>(stages, std::move(hooks));
        pipeline->set_realtime_offset(realtime_offset_ns);
    }
};

Agent::Agent(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Agent::~Agent() {
    if (!impl_) return;
    // Stop everything that calls back into the state before the state goes.
    impl_->exe_scans.reset();
    impl_->rules_watcher.reset();
    impl_->guard_watcher.reset();
    if (impl_->priority_guard) {
        // Nothing stays stopped after the agent: resume what it paused.
        std::lock_guard lock(impl_->mutex);
        impl_->act_on_priorities(impl_->priority_guard->release_all());
    }
    impl_->enforcer_worker.reset();
    if (impl_->pins && !impl_->options.config.enforcement.keep_pinned_on_exit) {
        // A clean stop lifts in-kernel enforcement: unpinned here, detached
        // when the sensor and the enforcer close their links below.
        impl_->pins->remove_all();
        logger("agent")->info("in-kernel enforcement unpinned ({})", impl_->pins->path());
    }
    if (impl_->journal) impl_->journal->close();
    impl_->control.reset();
    impl_->metrics.reset();
    if (impl_->sampler) impl_->sampler->stop();
}

Result<std::unique_ptr<Agent>> Agent::start(AgentOptions options) {
    const auto log = logger("agent");
    auto impl = std::make_unique<Impl>();
    impl->options = std::move(options);
    impl->realtime_offset_ns = monotonic_to_realtime_offset_ns();
    impl->started_ns = monotonic_ns();
    const Config& config = impl->options.config;
    impl->activity =
        std::make_unique<ActivityLog>(50, std::chrono::seconds(config.enforcement.block_ttl_s));

    // A second agent must not attach a second sensor: ask the socket first.
    if (!config.control.socket.empty() &&
        control_request(config.control.socket, "ping", std::chrono::milliseconds(500)).ok()) {
        return fail(ErrorCode::kInvalidArgument,
                    "another gpuguard agent answers on " + config.control.socket +
                        ": stop it first or set control.socket to another path");
    }

    ProcessTableOptions table_options;
    table_options.proc_root = impl->options.proc_root;
    table_options.max_entries = config.process_table.max_entries;
    table_options.exit_grace = std::chrono::seconds(config.process_table.exit_grace_s);
    table_options.ignore_pid = static_cast<uint32_t>(getpid());
    Impl* raw = impl.get();
    impl->table = std::make_unique<ProcessTable>(
        table_options, [raw](uint32_t major, uint32_t minor) { return raw->is_gpu(major, minor); });

    if (!config.outputs.empty()) {
        siem::RouterOptions router_options;
        char hostname[256] = {};
        gethostname(hostname, sizeof(hostname) - 1);
        router_options.host.hostname = hostname;
        router_options.host.agent_version = GPUGUARD_VERSION;
        router_options.sinks = config.outputs;
        auto router = siem::AlertRouter::start(std::move(router_options));
        if (!router) return fail(router.error().code, "outputs: " + router.error().message);
        impl->router = std::move(router).value();
        log->info("alert outputs: {} sink(s)", config.outputs.size());
    }

    // Pinned in-kernel enforcement (enforcement.pin_path) outlives a crash;
    // an earlier agent's is taken over below, by the sensor and the enforcer.
    std::optional<Error> unpinned;  // told once the sensor loaded: without it, it does not matter
    if (!config.enforcement.pin_path.empty()) {
        auto pins = PinDirectory::claim(config.enforcement.pin_path);
        if (pins) {
            impl->pins = std::move(pins).value();
        } else {
            unpinned = pins.error();
        }
    }
    SensorOptions sensor_options{config.sensor, impl->pins};
    sensor_options.ignore_tgid = static_cast<uint32_t>(getpid());
    auto sensor = Sensor::open(sensor_options, [raw](const Event& event) {
        // Called from poll(), which run() does with the mutex held.
        raw->on_event(event);
    });
    if (!sensor) return Unexpected{sensor.error()};
    impl->sensor.emplace(std::move(sensor).value());
    if (unpinned) log->warn("enforcement.pin_path: {}", unpinned->message);
    // Names an earlier agent left in the pinned map are this agent's to keep
    // in step with the rules (sync_kill_now_names drops the stale ones); the
    // enforcer's tags (top bit clear) are not names of rules.
    for (const auto& [name, tag] : impl->sensor->known_bad_names()) {
        if (tag & kRuleTagBit) impl->kill_now_names.emplace(name, "(pinned)");
    }

    // Rules after the sensor (so a missing privilege fails fast) but before
    // the first poll: events wait in the ring buffer, every one is judged.
    auto builtin = rules::compile_builtin_pack();
    if (!builtin)
        return fail(builtin.error().code, "built-in signature pack: " + builtin.error().message);
    auto correlation_rules = rules::load_correlation_rules(config.rules.correlation_files);
    if (!correlation_rules) {
        return fail(correlation_rules.error().code,
                    "correlation rules: " + correlation_rules.error().message);
    }
    auto priority_policy = rules::load_priority_policy(config.rules.correlation_files);
    if (!priority_policy) {
        return fail(priority_policy.error().code,
                    "guard priorities: " + priority_policy.error().message);
    }
    // The watcher needs the main file's directory to exist (a fresh host has
    // no /etc/gpuguard yet); create it so rules dropped there later are seen.
    if (const auto rules_dir = std::filesystem::path(config.rules.main_file).parent_path();
        !rules_dir.empty() && !std::filesystem::exists(rules_dir)) {
        std::error_code ec;
        std::filesystem::create_directories(rules_dir, ec);
        if (ec) {
            return fail(ErrorCode::kIo,
                        "rules: cannot create " + rules_dir.string() + ": " + ec.message());
        }
        log->info("created {} for rule files", rules_dir.string());
    }
    auto watcher = rules::RuleSetWatcher::start(
        rules::RulePaths{config.rules.main_file, config.rules.drop_in_dir}, *builtin,
        rules::RuleSetWatcher::Callbacks{
            [raw](std::shared_ptr<const rules::RuleSet> set) {
                std::lock_guard lock(raw->mutex);
                raw->sync_kill_now_names(*set);
                if (auto applied = raw->correlator->set_rule_set(std::move(set)); !applied) {
                    logger("rules")->error("reloaded rules not applied: {}",
                                           applied.error().message);
                }
            },
            [raw](const Error& error) {
                std::lock_guard lock(raw->mutex);
                raw->raise_rules_rejected(error);
            }});
    if (!watcher) return fail(watcher.error().code, "rules: " + watcher.error().message);
    impl->rules_watcher = std::move(watcher).value();
    auto correlator = Correlator::create(
        std::move(*correlation_rules), impl->rules_watcher->current(), *impl->table,
        CorrelatorOptions{.dry_run = config.enforcement.dry_run,
                          .request_scans = config.rules.yara_scan});
    if (!correlator) return Unexpected{correlator.error()};
    if (config.rules.yara_scan) {
        // The built-in pack's YARA rules, compiled once; verdicts come back
        // as exe_scan events, judged and journaled under the mutex.
        auto pack = signatures::load_builtin_pack();
        if (!pack) return fail(pack.error().code, "YARA rules: " + pack.error().message);
        signatures::YaraOptions yara_options;
        yara_options.max_file_size = config.rules.yara_max_file_mb << 20;
        auto yara = signatures::YaraScanner::compile(*pack, yara_options);
        if (!yara) return fail(yara.error().code, "YARA rules: " + yara.error().message);
        impl->exe_scans = std::make_unique<ExeScanWorker>(
            std::move(yara).value(),
            [raw](Event event) {
                std::lock_guard lock(raw->mutex);
                event.ts_ns = monotonic_ns();
                raw->on_event(event);
            },
            impl->options.proc_root);
    }
    impl->correlator = std::move(correlator).value();
    impl->correlator->set_realtime_offset(impl->realtime_offset_ns);
    impl->sync_kill_now_names(*impl->rules_watcher->current());
    log->info("rules: {} signatures, {} correlation rules ({}, {})",
              impl->rules_watcher->current()->effective().size(), impl->correlator->rules().size(),
              config.rules.main_file, config.rules.drop_in_dir);

    // The enforcer acts on detections whose action is not "alert", on its
    // own thread. deny_gpu goes through the kernel enforcer (its device set
    // follows once the GPUs are known, below); block_ip through nftables or
    // the cgroup/connect filter.
    impl->kernel_enforcer = open_kernel_enforcer(config, impl->pins);
    if (impl->pins) {
        const PinReport& pinned = impl->pins->report();
        log->info(
            "in-kernel enforcement pinned under {}: {} map(s) reused, {} cgroup link(s) taken "
            "over, {} hook(s) replaced",
            pinned.path, pinned.maps_reused, pinned.links_adopted, pinned.links_replaced);
    }
    impl->known_bad = std::make_unique<SensorKnownBad>(*impl->sensor);
    EnforcerDependencies dependencies;
    dependencies.blocker = impl->address_blocker(config.enforcement);
    dependencies.known_bad = impl->known_bad.get();
    if (impl->kernel_enforcer) {
        impl->gpu_denier = std::make_unique<KernelGpuDenier>(*impl->kernel_enforcer);
        dependencies.gpu_denier = impl->gpu_denier.get();
    }
    dependencies.on_outcome = [raw](const EnforcementOutcome& outcome) {
        raw->on_outcome(outcome);
    };
    impl->enforcer = std::make_unique<Enforcer>(config.enforcement, std::move(dependencies));
    impl->enforcer_worker = std::make_unique<EnforcerWorker>(*impl->enforcer);
    if (config.enforcement.dry_run)
        log->info("enforcement: dry run (actions are reported, not taken)");

    // Guard mode's GPU priorities, judged at each telemetry reading; the
    // enforcer's protection keeps pid 1, kernel threads, the agent and the
    // allowlist out of every decision.
    const Enforcer* enforcer = impl->enforcer.get();
    impl->priority_guard = std::make_unique<PriorityGuard>(
        std::move(*priority_policy), [] { return monotonic_ns(); },
        [enforcer](uint32_t pid) { return enforcer->protected_reason(pid); },
        [proc_root = impl->options.proc_root](uint32_t pid) -> uint64_t {
            auto stat = read_proc_stat(pid, proc_root);
            return stat ? stat->start_time_ns : 0;
        });
    if (const auto& policy = impl->priority_guard->policy()) {
        log->info("guard priorities ({}): pause above {} %, resume below {} %, {} pattern(s){}",
                  policy->source, policy->pause_above_percent, policy->resume_below_percent,
                  policy->processes.size(), policy->dry_run ? ", dry run" : "");
    }
    // rules.correlation_files are reloaded when they change, like the rule
    // files; a rejected change raises GG-AGENT-0001 and the last good stays.
    auto guard_watcher = rules::GuardPolicyWatcher::start(
        config.rules.correlation_files,
        rules::GuardPolicyWatcher::Callbacks{
            [raw](rules::GuardPolicies policies) {
                std::lock_guard lock(raw->mutex);
                raw->correlator->set_rules(std::move(policies.rules));
                raw->act_on_priorities(
                    raw->priority_guard->set_policy(std::move(policies.priority)));
            },
            [raw](const Error& error) {
                std::lock_guard lock(raw->mutex);
                raw->raise_rules_rejected(error);
            }});
    if (!guard_watcher) {
        return fail(guard_watcher.error().code,
                    "correlation files: " + guard_watcher.error().message);
    }
    impl->guard_watcher = std::move(guard_watcher).value();

    auto from_proc = read_gpu_devices(impl->options.proc_root);
    if (!from_proc) {
        log->warn("{}; only sensor.extra_gpu_devices are watched", from_proc.error().message);
    } else {
        for (const auto& device : from_proc.value()) {
            if (auto added = impl->sensor->add_gpu_device(device); !added) {
                log->error("{}", added.error().message);
                continue;
            }
            impl->devices.push_back(device);
            log->info("watching GPU device {} ({})", device.to_string(), device.driver);
        }
    }
    for (const auto& device : config.sensor.extra_gpu_devices) {
        impl->devices.push_back(device);
        log->info("watching GPU device {} (sensor.extra_gpu_devices)", device.to_string());
    }
    if (impl->devices.empty()) {
        log->warn(
            "no GPU driver in /proc/devices and no sensor.extra_gpu_devices: only failed "
            "opens of GPU paths will be reported");
    }

    // GPU telemetry: one sample now (which also finds the GPUs' device nodes,
    // registered in the kernel map if /proc/devices did not cover them), then
    // its own thread. Per-process samples read only the fds the sensor saw.
    impl->sampler = std::make_unique<backends::TelemetrySampler>(
        backends::make_backends(backend_options(config.backends)),
        backends::SamplerOptions{std::chrono::milliseconds(config.backends.interval_ms),
                                 [raw] { return raw->gpu_fds(); }});
    impl->sampler->sample_once();
    impl->process_io = std::make_unique<ProcessIoSampler>(
        impl->options.proc_root, [raw](uint32_t pid) { return raw->sensor->net_sends(pid); });
    for (const auto& number : impl->sampler->gpu_device_numbers()) {
        if (!number.known() || impl->is_gpu(number.major, number.minor)) continue;
        const GpuDeviceNumber device{number.major, number.minor, "telemetry"};
        if (auto added = impl->sensor->add_gpu_device(device); added) {
            impl->devices.push_back(device);
            log->info("watching GPU device {} (found by the telemetry backends)",
                      device.to_string());
        }
    }

    if (impl->kernel_enforcer) {
        if (auto denied = impl->kernel_enforcer->set_denied_devices(impl->devices); !denied) {
            log->error("deny_gpu: {}", denied.error().message);
        }
    }

    // After attaching, so a process that opens a GPU meanwhile is seen by one or the other.
    auto bootstrap = impl->table->bootstrap();
    if (!bootstrap) {
        log->warn("process table bootstrap failed: {}", bootstrap.error().message);
    } else {
        impl->bootstrap = bootstrap.value();
        for (const auto& process : impl->table->gpu_processes()) {
            if (auto marked = impl->sensor->mark_gpu_process(process.pid); !marked) {
                log->warn("{}", marked.error().message);
            }
        }
        log->info("process table: {} processes, {} already holding a GPU", bootstrap->processes,
                  bootstrap->gpu_processes);
    }

    if (config.journal.enabled) {
        std::vector<Event> snapshot;
        const uint64_t now = monotonic_ns();
        for (const auto& process : impl->table->gpu_processes()) {
            snapshot.push_back(snapshot_event(process, now));
        }
        auto writer = journal::JournalWriter::open(
            journal_options(config.journal),
            journal::local_identity(
                rule_pack_version(*impl->rules_watcher->current(), impl->correlator->rules())),
            std::move(snapshot), impl->devices);
        if (!writer) {
            // Detection and enforcement go on without it; the operator must know.
            log->error("journal disabled: {}", writer.error().message);
        } else {
            impl->journal = std::move(writer).value();
            impl->journal->append_note(now, "info", "agent started");
            log->info("journal {}", config.journal.dir);
        }
    }

    impl->sampler->start();
    if (config.metrics.enabled) {
        MetricsServerOptions metrics_options{config.metrics.listen, config.metrics.port, {}};
        if (config.metrics.status_page) {
            metrics_options.status_json = [raw] {
                char hostname[256] = {};
                gethostname(hostname, sizeof(hostname) - 1);
                return json{{"host", hostname},
                            {"status", json::parse(Agent::status_json_of(*raw))},
                            {"ps", json::parse(Agent::ps_json_of(*raw))},
                            {"activity",
                             json::parse(raw->activity->to_json(
                                 static_cast<int64_t>(monotonic_ns()) + raw->realtime_offset_ns))}}
                    .dump(-1, ' ', false, json::error_handler_t::replace);
            };
        }
        auto metrics = MetricsServer::start(
            std::move(metrics_options), [raw] { return raw->sampler->latest(); },
            [raw] { return raw->agent_metrics(); });
        if (!metrics) return Unexpected{metrics.error()};
        impl->metrics = std::move(metrics).value();
        log->info("metrics on http://{}:{}/metrics", config.metrics.listen, impl->metrics->port());
    }

    if (!config.control.socket.empty()) {
        auto control = ControlServer::start(config.control.socket, [raw](
                                                                       const std::string& command) {
            if (command == "ping") return std::string(R"({"ok":true})");
            if (command == "status") return Agent::status_json_of(*raw);
            if (command == "ps") return Agent::ps_json_of(*raw);
            return json{{"error", "unknown command '" + command + "' (known: ping, status, ps)"}}
                .dump();
        });
        if (!control) return Unexpected{control.error()};
        impl->control.emplace(std::move(control).value());
        log->info("control socket {}", config.control.socket);
    }
    impl->build_pipeline();
    return std::unique_ptr<Agent>(new Agent(std::move(impl)));
}

Status Agent::run(const volatile std::sig_atomic_t* stop) {
    const auto log = logger("agent");
    Impl& impl = *impl_;
    const uint64_t ioctl_interval_ns =
        static_cast<uint64_t>(impl.options.config.process_table.ioctl_interval_ms) * 1'000'000ull;
    uint64_t next_ioctl_read = monotonic_ns() + ioctl_interval_ns;
    uint64_t next_drop_check = monotonic_ns();
    uint64_t next_rate_sample = monotonic_ns();
    std::map<std::string, uint64_t> reported_drops;
    while (*stop == 0) {
        {
            std::lock_guard lock(impl.mutex);
            auto polled = impl.sensor->poll(std::chrono::milliseconds(0));
            if (!polled) return Unexpected{polled.error()};
        }
        // Wait outside the lock so the control socket stays responsive.
        if (auto waited = impl.sensor->wait(std::chrono::milliseconds(100)); !waited) {
            return Unexpected{waited.error()};
        }
        if (impl.options.on_loop) impl.options.on_loop();
        const uint64_t now = monotonic_ns();
        // A new telemetry sample: one event per GPU, judged like kernel events.
        if (impl.sampler->latest_sequence() != impl.telemetry_sequence) {
            const auto snapshot = impl.sampler->latest();
            impl.telemetry_sequence = snapshot.sequence;
            std::lock_guard lock(impl.mutex);
            for (const auto& event : telemetry_events(snapshot, now)) impl.on_event(event);
            for (const auto& event : impl.process_io->sample(impl.table->gpu_processes(), now)) {
                impl.on_event(event);
            }
        }
        if (now < next_ioctl_read && now < next_drop_check && now < next_rate_sample) continue;
        std::lock_guard lock(impl.mutex);
        if (now >= next_rate_sample) {
            next_rate_sample = now + 1'000'000'000ull;
            auto& samples = impl.delivered_samples;
            samples.emplace_back(now, impl.sensor->stats().delivered);
            while (samples.size() > 2 && now - samples.front().first > 60'000'000'000ull) {
                samples.pop_front();
            }
        }
        if (now >= next_ioctl_read) {
            next_ioctl_read = now + ioctl_interval_ns;
            if (auto stats = impl.sensor->read_ioctl_stats(); stats) {
                impl.table->apply_ioctl_stats(stats.value(), now);
            }
            for (uint32_t pid : impl.table->evict(now)) (void)impl.sensor->forget_process(pid);
        }
        if (now >= next_drop_check) {
            next_drop_check = now + 5'000'000'000ull;
            for (const auto& type : impl.sensor->stats().kernel) {
                if (type.dropped > reported_drops[type.type]) {
                    log->warn(
                        "ring buffer full: {} {} event(s) lost so far (raise "
                        "sensor.ring_buffer_kb)",
                        type.dropped, type.type);
                    reported_drops[type.type] = type.dropped;
                }
            }
        }
    }
    std::lock_guard lock(impl.mutex);
    (void)impl.sensor->poll(std::chrono::milliseconds(0));  // what is already there
    const auto stats = impl.sensor->stats();
    log->info("stopping on {}: {} event(s) delivered, {} lost in the kernel, {} undecodable",
              *stop == SIGINT ? "SIGINT" : "SIGTERM", stats.delivered, stats.total_dropped(),
              stats.decode_errors);
    return {};
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
        {"hooks", impl.sensor->attached_hooks()},
        {"ring_buffer_kb", impl.options.config.sensor.ring_buffer_kb},
        {"events", events},
        {"delivered", stats.delivered},
        {"dropped", stats.total_dropped()},
        {"decode_errors", stats.decode_errors},
        {"gpu_devices", devices},
        {"events_per_s", events_per_s},
        {"gpus", gpus},
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
    json stratum = json::array();
    for (const auto& session : impl.net_intel.sessions()) {
        json entry = stratum_to_json(session.stratum);
        entry["pid"] = session.pid;
        stratum.push_back(std::move(entry));
    }
    // argv, paths and pool names need not be UTF-8: invalid bytes become U+FFFD
    // (nlohmann would throw), as in every JSON the agent writes.
    return json{{"processes", processes}, {"stratum_sessions", stratum}}.dump(
        -1, ' ', false, json::error_handler_t::replace);
}

}  // namespace gpuguard::agent
