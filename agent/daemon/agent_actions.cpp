// What events and detections set off in the live agent: outputs, the
// journal, the enforcer, kill_now names in the kernel, YARA scans, the
// priority guard; and the pipeline every event takes (gpuguard/detect/pipeline.h).
#include <fstream>
#include <set>

#include <unistd.h>

#include "agent_impl.h"
#include "gpuguard/state/proc_sockets.h"
#include "gpuguard/state/workload.h"

namespace gpuguard::agent {

void Agent::Impl::emit(const Detection& detection) {
    ++detections_total;
    if (detection.rule_id != "GG-CORR-0017") check_hidden_soon(detection.last_seen_ns);
    activity->record(detection);
    if (options.detection_sink) options.detection_sink(detection);
    if (router) router->publish(detection);
    if (journal) {
        const std::string json = siem::format_ecs_json(detection, HostInfo{});
        journal->append_detection(detection.last_seen_ns, detection.process.pid, detection.rule_id,
                                  json);
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
AddressBlocker* Agent::Impl::address_blocker(const EnforcementConfig& config) {
    const auto log = logger("enforcer");
    nft = std::make_unique<NftBlocker>(std::chrono::seconds(config.block_ttl_s));
    const Status usable = nft->usable();
    if (usable && nft->table_exists()) {
        if (auto reconciled = nft->reconcile(); !reconciled) {
            log->error("{}", reconciled.error().message);
        } else {
            const auto kept = nft->list();
            log->info("nftables table inet {} reconciled, {} blocked address(es) kept", kNftTable,
                      kept ? kept->size() : 0);
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
void Agent::Impl::report_kernel_kill(const Event& event, const KillNow& kill) {
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
    const std::string what = kill.match == "name" ? "name '" + event.task.comm + "'"
                                                  : "executable " + std::to_string(kill.dev >> 20) +
                                                        ":" + std::to_string(kill.dev & 0xfffff) +
                                                        " inode " + std::to_string(kill.ino);
    (void)enforcer->kernel_kill(process, kill.rule_id, kill.signal_result,
                                "SIGKILL in the kernel at " + kill.trigger + " (" + what + ")",
                                rule_id);
}

void Agent::Impl::on_outcome(const EnforcementOutcome& outcome) {
    activity->record(outcome);
    if (options.outcome_sink) options.outcome_sink(outcome);
    if (router) router->publish(outcome);
    if (journal) {
        journal->append_enforcement(outcome.ts_ns, outcome.process.pid, outcome.rule_id,
                                    siem::format_ecs_json(outcome, HostInfo{}));
    }
}

// Guard mode's pause/resume decisions go to the enforcer (its safety
// rules and dry run apply there); a pause is also reported as a
// detection, a resume through its outcome.
void Agent::Impl::act_on_priorities(const std::vector<PriorityAction>& actions) {
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

// A rule file change the watcher rejected: an alert about the agent
// itself, so the SOC sees that its rules did not change.
namespace {

// A detection about the agent's own rule files, from the agent itself.
Detection agent_rules_detection(const std::string& rule_id, const std::string& rule_name,
                                const std::string& description, Severity severity,
                                const Error& error) {
    Detection detection;
    const uint64_t now = monotonic_ns();
    detection.id = "agent-rules-" + std::to_string(now);
    detection.rule_id = rule_id;
    detection.rule_name = rule_name;
    detection.ruleset = "gpuguard-agent";
    detection.description = description;
    detection.severity = severity;
    detection.confidence = 1.0;
    detection.first_seen_ns = detection.last_seen_ns = now;
    detection.process.pid = static_cast<uint32_t>(getpid());
    detection.process.ppid = static_cast<uint32_t>(getppid());
    detection.process.comm = "gpuguard";
    std::error_code ec;
    detection.process.executable = std::filesystem::read_symlink("/proc/self/exe", ec).string();
    detection.evidence.push_back(
        Evidence{now, "policy", "", "", "rules", error.message.substr(0, 4096)});
    detection.action = "alert";
    return detection;
}

}  // namespace

void Agent::Impl::raise_rules_rejected_at_start(const Error& error, const std::string& running_on) {
    Detection detection =
        agent_rules_detection("GG-AGENT-0002", "Rule files rejected at start",
                              "The rule files did not build when the agent started; it runs on " +
                                  running_on + " until they are fixed: " + error.message,
                              Severity::kCritical, error);
    detection.time_unix_ns = static_cast<int64_t>(detection.first_seen_ns) + realtime_offset_ns;
    detection.evidence.push_back(
        Evidence{detection.first_seen_ns, "policy", "", "", "rules", "running on " + running_on});
    emit(detection);
}

void Agent::Impl::raise_config_rejected_at_start(const std::string& why) {
    Detection detection =
        agent_rules_detection("GG-AGENT-0003", "Configuration rejected at start",
                              "The configuration file did not load when the agent started: " + why,
                              Severity::kCritical, Error{ErrorCode::kParse, why});
    detection.time_unix_ns = static_cast<int64_t>(detection.first_seen_ns) + realtime_offset_ns;
    emit(detection);
}

void Agent::Impl::raise_rules_rejected(const Error& error) {
    ++rule_reloads_rejected;
    Detection detection = agent_rules_detection(
        "GG-AGENT-0001", "Rule file change rejected",
        "A change to the rule files was rejected; the previous rules stay active: " + error.message,
        Severity::kError, error);
    detection.time_unix_ns = static_cast<int64_t>(detection.first_seen_ns) + realtime_offset_ns;
    emit(detection);
}

// The kernel's kill_now name map follows the rules: literal process names
// of kill_now signatures are killed at exec, before they run a single
// instruction of their own. Names this agent did not register (the
// enforcer's) are left alone; its own name and pid 1's are never added.
void Agent::Impl::sync_kill_now_names(const rules::RuleSet& rule_set) {
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
            log->error("kill_now: cannot register '{}' ({}): {}", name, id, added.error().message);
            continue;
        }
        kill_now_names.insert_or_assign(name, id);
        log->info("kill_now: '{}' ({}) is killed at exec", name, id);
    }
}

// The correlator's YARA scan and config file requests, for processes
// still alive: the same processes, not ones that got their pids after an
// exit the agent has not read yet (the start times the table knows).
void Agent::Impl::submit_scans() {
    if (exe_scans) {
        for (const auto& request : correlator->take_scan_requests()) {
            const ProcessInfo* info = table->find(request.pid);
            if (!info || info->exited) continue;
            if (!request.library.empty()) {
                exe_scans->submit_library(task_of(*info), request.library, info->start_time_ns);
                continue;
            }
            // A clean verdict matters for a GPU holder or a process with hits
            // (sha256 allowlist, the journal's record); for any other exec only a hit does.
            exe_scans->submit(task_of(*info), request.reason != "exec", info->start_time_ns);
        }
    }
    if (config_scans) {
        for (const auto& request : correlator->take_config_requests()) {
            const ProcessInfo* info = table->find(request.pid);
            if (info && !info->exited) config_scans->submit(task_of(*info), info->start_time_ns);
        }
    }
}

// Watched processes and addresses have their connects reported and first
// payloads sampled on any port (docs/network.md).
void Agent::Impl::update_watch_lists(const Event& event) {
    const auto log = logger("agent");
    if (std::holds_alternative<Exit>(event.data)) {
        sensor->unwatch_process(event.task.pid);
        busy_watched.erase(event.task.pid);
        unseen_gpu_marked.erase(event.task.pid);
        signature_watched.erase(event.task.pid);
        loopback_linked.erase(loopback_linked.lower_bound({event.task.pid, 0}),
                              loopback_linked.lower_bound({event.task.pid + 1, 0}));
    }
    for (const auto& request : correlator->take_watch_requests()) {
        const ProcessInfo* info = table->find(request.pid);
        if (!info || info->exited) continue;
        if (auto watched = sensor->watch_process(request.pid); !watched) {
            log->warn("watch list: {}", watched.error().message);
            continue;
        }
        signature_watched.insert(request.pid);
        log->info("watch list: pid {} ({}) watched on any port: {} matched '{}'", request.pid,
                  info->comm, request.signature_id, request.detail.substr(0, 200));
    }
    for (const auto& named : net_intel.take_resolutions()) {
        if (!correlator->pool_domain(named.name)) continue;
        const uint64_t ttl_s = std::max(named.ttl_s, options.config.sensor.watch_address_min_ttl_s);
        if (auto watched =
                sensor->watch_address(named.address, event.ts_ns + ttl_s * 1'000'000'000ull);
            !watched) {
            log->warn("watch list: {}", watched.error().message);
            continue;
        }
        log->debug("watch list: {} ({}) watched for {} s", named.address, named.name, ttl_s);
    }
}

// The pipeline's stages are this agent's; its hooks are what only the
// live agent does: in-kernel kill reports, YARA scans, the priority
// guard, --print-events.
void Agent::Impl::build_pipeline() {
    PipelineStages stages;
    stages.table = table.get();
    stages.net_intel = &net_intel;
    stages.journal = journal.get();
    stages.correlator = correlator.get();
    // The live agent completes file changes and execs and reads GPU
    // processes' environments from /proc; a recording already carries them.
    HostReadOptions host_options;
    host_options.watch_files = sensor ? &sensor->watched_files() : nullptr;
    host_options.snapshot_new_gpu_holders = journal != nullptr;
    host_options.kubelet = kubelet_sources();
    host_reads = std::make_unique<HostReads>(*table, std::move(host_options));
    stages.host = host_reads.get();
    PipelineHooks hooks;
    hooks.emit = [this](const Detection& detection) { emit(detection); };
    hooks.on_applied = [this](const Event& event) {
        if (const auto* kill = std::get_if<KillNow>(&event.data); kill && enforcer) {
            report_kernel_kill(event, *kill);
        }
    };
    hooks.on_judged = [this](const Event& event) {
        if (const auto* open = std::get_if<GpuOpen>(&event.data); open && open->succeeded()) {
            check_hidden_soon(event.ts_ns);
        }
        if (const auto* change = std::get_if<FileChange>(&event.data)) {
            note_pin_change(event, *change);
        }
        if (const auto* trust = std::get_if<TrustChange>(&event.data)) {
            note_trust_write(event, *trust);
        }
        if (correlator && (exe_scans || config_scans)) submit_scans();
        if (correlator && pool_prober) submit_probes();
        if (correlator && sensor) update_watch_lists(event);
        if (sensor) note_loopback_connect(event);
        if (const auto* telemetry = std::get_if<Telemetry>(&event.data);
            telemetry && priority_guard && priority_guard->enabled()) {
            act_on_priorities(priority_guard->observe(*telemetry, *table));
        }
        if (!options.event_sink) return;
        if (!options.event_types.empty() && !options.event_types.contains(event_type_name(event))) {
            return;
        }
        options.event_sink(event_to_json(event, realtime_offset_ns));
    };
    pipeline = std::make_unique<Pipeline>(stages, std::move(hooks));
    pipeline->set_realtime_offset(realtime_offset_ns);
}

// A miner started before the agent, or while it was down, is not left alone
// until it happens to exec or connect: its name and command line are judged
// now (a process_snapshot, as a journal segment's opening one is). GPU
// holders are in the journal's opening snapshot and judged at their next GPU
// event, with the connections they have open (their pool's, a miner's);
// kernel threads have nothing to judge. Nor are the agent's own
// ancestors (systemd, the shell or harness that started it): who controls
// the agent's launcher controls the agent.
void Agent::Impl::judge_running_processes() {
    std::set<uint32_t> ancestors;
    for (uint32_t pid = static_cast<uint32_t>(getppid());
         pid > 1 && ancestors.insert(pid).second;) {
        const ProcessInfo* parent = table->find(pid);
        if (!parent) break;
        pid = parent->ppid;
    }
    const uint64_t now = monotonic_ns();
    size_t judged = 0;
    for (const ProcessInfo& process : table->live_processes()) {
        if (ancestors.contains(process.pid)) continue;
        if (process.holds_gpu()) {
            // Its job or pod and allocation, judged now: its first GPU use
            // came before the agent.
            if (auto workload = host_reads->workload_of(Event{now, task_of(process), {}})) {
                pipeline->feed(std::move(*workload));
            }
            // Its pool connection is older than the agent: found open now.
            for (Connect& connect :
                 established_connects(options.proc_root, process.pid, /*gpu_holder=*/true)) {
                pipeline->feed(Event{now, task_of(process), std::move(connect)});
            }
            continue;
        }
        const ProcessInfo info = table->enriched(task_of(process));
        if (info.exe.empty() && info.cmdline.empty()) continue;  // a kernel thread, or gone
        if (auto container = container_event(info, now)) pipeline->feed(std::move(*container));
        pipeline->feed(snapshot_event(info, now));
        ++judged;
    }
    logger("agent")->info("judged {} processes found running at start", judged);
}

// A pod's GPU process that waited for the kubelet to name its pod, judged
// by the answer (host_reads.h).
void Agent::Impl::judge_waiting_pods(uint64_t now) {
    for (const Event& workload : host_reads->workloads_after_refresh(now)) on_event(workload);
}

}  // namespace gpuguard::agent
