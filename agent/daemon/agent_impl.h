// The agent's state: every part Agent::start() puts together, and what
// they do for each other. Private to the daemon room; shared by agent.cpp
// (start, run), agent_actions.cpp (what events and detections set off) and
// agent_report.cpp (status, ps and metrics).
#pragma once

#include <atomic>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>
#include <time.h>

#include "gpuguard/backends/backends.h"
#include "gpuguard/common/clock.h"
#include "gpuguard/common/logging.h"
#include "gpuguard/daemon/activity_log.h"
#include "gpuguard/daemon/agent.h"
#include "gpuguard/daemon/control_socket.h"
#include "gpuguard/daemon/kernel_enforcement.h"
#include "gpuguard/daemon/metrics_server.h"
#include "gpuguard/daemon/telemetry.h"
#include "gpuguard/detect/config_scanner.h"
#include "gpuguard/detect/correlator.h"
#include "gpuguard/detect/exe_scanner.h"
#include "gpuguard/detect/pipeline.h"
#include "gpuguard/detect/rule_pack_version.h"
#include "gpuguard/enforce/enforcer.h"
#include "gpuguard/enforce/nft_blocker.h"
#include "gpuguard/enforce/priority_guard.h"
#include "gpuguard/events/event_json.h"
#include "gpuguard/events/gpu_devices.h"
#include "gpuguard/journal/journal.h"
#include "gpuguard/kubelet/pod_resources.h"
#include "gpuguard/netintel/net_intel.h"
#include "gpuguard/rules/correlation.h"
#include "gpuguard/rules/rules.h"
#include "gpuguard/rules/trust_diff.h"
#include "gpuguard/sensor/bpf_pins.h"
#include "gpuguard/sensor/sensor.h"
#include "gpuguard/sensor/sensor_enforce.h"
#include "gpuguard/sensor/sensor_probe.h"
#include "gpuguard/siem/siem.h"
#include "gpuguard/state/flow_sampler.h"
#include "gpuguard/state/ioctl_names.h"
#include "gpuguard/state/proc_listing.h"
#include "gpuguard/state/process_cpu.h"
#include "gpuguard/state/process_handle.h"
#include "gpuguard/state/process_io.h"
#include "gpuguard/state/process_table.h"
#include "gpuguard/version.h"
#include "pool_prober.h"
#include "run_marker.h"

namespace gpuguard::agent {

using json = nlohmann::ordered_json;

// The rule tag a kill_now name carries in the kernel map (and in KillNow
// events): FNV-1a of the signature id, with the top bit set so it never
// collides with the enforcer's small sequential tags.
constexpr uint32_t kRuleTagBit = 0x80000000u;
inline uint32_t kill_now_tag(std::string_view signature_id) {
    uint32_t hash = 2166136261u;
    for (unsigned char c : signature_id) hash = (hash ^ c) * 16777619u;
    return hash | kRuleTagBit;
}

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
    // Names connects from DNS answers, derives Stratum events; keeps the
    // addresses answers give for the watch list of pool addresses.
    NetIntel net_intel{NetIntelOptions{.max_pending_resolutions = 1024}};
    // The kubelet's PodResources answers (docs/deployment.md); null when
    // kubelet.pod_resources_socket is "". Before host_reads, which asks it.
    std::unique_ptr<kubelet::PodResourcesCache> pod_resources;
    std::unique_ptr<HostReads> host_reads;     // the pipeline's live /proc reads
    std::unique_ptr<Pipeline> pipeline;        // built last in start(), before the first event
    std::unique_ptr<ExeScanWorker> exe_scans;  // null when rules.yara_scan is off
    std::unique_ptr<ConfigScanWorker> config_scans;     // null when rules.config_scan is off
    std::unique_ptr<PoolProber> pool_prober;            // null when verify.active is off
    std::map<std::string, std::string> kill_now_names;  // in the kernel map: comm -> signature id
    uint64_t telemetry_sequence = 0;
    // GPU device events (Xids, ECC errors, clock changes) turned into
    // gpu_fault events, and those the backends' and sampler's queues had no
    // room for (agent_report.cpp's /metrics).
    uint64_t gpu_faults_total = 0;
    uint64_t gpu_faults_dropped = 0;
    // Hidden processes (hidden_processes.cpp): null when
    // process_table.hidden_check_interval_s is 0.
    std::unique_ptr<HiddenProcessCheck> hidden_check;
    std::set<uint32_t> hidden_pids;                 // hidden at the last check: reported once each
    std::atomic<uint64_t> next_hidden_check_ns{0};  // monotonic
    uint64_t hidden_checks = 0;                     // comparisons made (under mutex)
    // Pins and BPF objects the agent keeps an eye on (agent_trust.cpp).
    uint64_t next_pin_check_ns = 0;                // monotonic (under mutex)
    std::map<std::string, TaskInfo> pin_removers;  // pin file -> who the kernel saw remove it
    // Pins the check found missing before the kernel's report of who removed
    // them came (the unlink's event trails the unlink): reported once it
    // comes or the grace ends (pin file -> the pin, when the grace ends).
    std::map<std::string, std::pair<MissingPin, uint64_t>> unattributed_pins;
    // Writes of the trusted files (trust_change "write" events), oldest
    // first, until a reload takes them (agent_trust_files.cpp; under mutex).
    std::deque<Event> trust_writes;
    std::optional<Event> last_trust_writer;  // of the latest reload
    // The rule set before a reload, to say what the reload changed.
    std::shared_ptr<const rules::RuleSet> trusted_rule_set;
    std::unique_ptr<ProcessIoSampler> process_io;  // GPU processes' writes, per sample
    // Busy processes (busy_processes.cpp): null when process_table.cpu_interval_ms is 0.
    std::unique_ptr<ProcessCpuSampler> process_cpu;
    std::unique_ptr<ProcessIoSampler> busy_io;  // busy processes' writes and sends, per CPU sample
    // The shapes of GPU holders' and watched processes' TCP flows; null
    // when process_table.flow_interval_ms is 0.
    std::unique_ptr<FlowSampler> flows;
    // In the kernel watch list for being busy: pid -> when it was last busy
    // (kept for a while after, so a duty-cycled miner stays watched).
    std::map<uint32_t, uint64_t> busy_watched;
    std::set<uint32_t> signature_watched;  // ... for a miner signature (kept when no longer busy)
    std::set<uint32_t> unseen_gpu_marked;  // marked GPU processes on the telemetry's word
    // Loopback connections whose server is still to be found, and those
    // found (client pid, port): loopback_peers.cpp.
    std::vector<std::pair<uint32_t, uint16_t>> pending_loopback;
    std::set<std::pair<uint32_t, uint16_t>> loopback_linked;
    uint64_t detections_total = 0;
    uint64_t rule_reloads_rejected = 0;
    // Why the rule files were not used at start (reported once the
    // correlator and outputs are up); nullopt when they were.
    std::optional<Error> rules_rejected_at_start;
    // The same for rules.correlation_files, with what it runs on instead.
    std::optional<std::pair<Error, std::string>> correlation_rejected_at_start;
    // The guard priorities read with the correlation rules at start.
    std::optional<rules::PriorityPolicy> priority_at_start;
    std::unique_ptr<ActivityLog> activity;  // recent detections/actions: status page, metrics
    std::deque<std::pair<uint64_t, uint64_t>> delivered_samples;  // (monotonic ns, delivered), 60 s
    mutable std::mutex mutex;  // guards table, correlator and sensor reads from other threads
    int64_t realtime_offset_ns = 0;
    uint64_t started_ns = 0;
    BootstrapReport bootstrap;
    std::optional<RunMarker> run_marker;  // journal.dir/agent.run; none when it cannot be written

    bool is_gpu(uint32_t major, uint32_t minor) const;

    // Starting, step by step (agent.cpp): each fills its members or fails.
    Status open_outputs();
    Status open_sensor();
    Status load_rules();
    Status open_enforcement();
    void find_gpus();
    void bootstrap_processes();
    void open_journal();
    void open_kubelet();
    Status start_servers();

    // What events and detections set off (agent_actions.cpp).
    // Every event, from the sensor or the agent's own samplers, takes the
    // one pipeline replay takes too (gpuguard/detect/pipeline.h).
    void on_event(const Event& event) { pipeline->feed(event); }
    void emit(const Detection& detection);
    // block_ip goes to nftables, or to the cgroup/connect filter when
    // enforcement.connect_fallback_cgroup names a cgroup or nftables does
    // not answer (then on the root cgroup: every connect of the host, as the
    // output chain would). An existing table inet gpuguard is reconciled
    // (repaired, its elements kept); a host that never blocked gets none.
    AddressBlocker* address_blocker(const EnforcementConfig& config);
    // A kill_now the kernel carried out, told afterwards: an outcome like the
    // enforcer's own (outputs, journal), naming the rule that registered the
    // name (the agent's tags) or the file (the enforcer's).
    void report_kernel_kill(const Event& event, const KillNow& kill);
    void on_outcome(const EnforcementOutcome& outcome);
    // Guard mode's pause/resume decisions go to the enforcer (its safety
    // rules and dry run apply there); a pause is also reported as a
    // detection, a resume through its outcome.
    void act_on_priorities(const std::vector<PriorityAction>& actions);
    // A rule file change the watcher rejected: an alert about the agent
    // itself, so the SOC sees that its rules did not change.
    void raise_rules_rejected(const Error& error);
    // The rule files given at start did not build: a critical detection
    // naming file:line:col and what the agent runs on instead.
    void raise_rules_rejected_at_start(const Error& error, const std::string& running_on);
    // The configuration file did not load at start: the critical GG-AGENT-0003.
    void raise_config_rejected_at_start(const std::string& why);

    // The agent's own trust (agent_trust.cpp). Who stopped the agent
    // (SIGTERM/SIGINT's sender): an agent_tamper event of kind "stop" through
    // the pipeline (GG-CORR-0019), journaled and sent to the outputs before
    // the programs detach.
    void report_stop(const StopSender& sender);
    // A run marker left behind by the previous run is an unclean end: an
    // agent_tamper event of kind "down" (GG-CORR-0020) with the gap; then
    // this run's marker (run_marker.h).
    void mark_run();
    // The kernel's kill_now name map follows the rules: literal process names
    // of kill_now signatures are killed at exec, before they run a single
    // instruction of their own. Names this agent did not register (the
    // enforcer's) are left alone; its own name and pid 1's are never added.
    void sync_kill_now_names(const rules::RuleSet& rule_set);
    // The correlator's YARA scan requests, for processes still alive.
    void submit_scans();
    // The correlator's probe requests (verify.active), for processes still
    // alive (pool_prober.cpp).
    void submit_probes();
    // The kernel watch lists follow the correlator (processes that matched a
    // miner signature) and DNS answers (addresses of pool domains); an exit
    // takes its process out.
    void update_watch_lists(const Event& event);
    // The pipeline's stages are this agent's; its hooks are what only the
    // live agent does: in-kernel kill reports, YARA scans, the priority
    // guard, --print-events.
    void build_pipeline();
    // Judges every process found running at start that holds no GPU, as at
    // its exec, through the pipeline (journaled, so replay judges the same).
    void judge_running_processes();

    // Compares libc's listing of /proc with the kernel's when due
    // (hidden_processes.cpp); new hidden processes become hidden_process
    // events. Takes `mutex` itself, not across the listings.
    void check_hidden_processes(uint64_t now_ns);
    // One CPU sample of every live process: cpu_usage events for the busy
    // ones, the watch list and write/send counters while they are busy.
    void sample_cpu(uint64_t now_ns);
    // The sampler's device events as gpu_fault events, one per process NVML
    // lists on the GPU in `snapshot` (telemetry.cpp).
    void report_gpu_faults(const backends::Snapshot& snapshot, uint64_t now_ns);
    // Processes the GPU's telemetry lists that the sensor never saw open a
    // GPU: marked GPU processes in the kernel too (their ioctls, connects
    // and payloads reported from then on).
    void mark_unseen_gpu_processes(const Telemetry& telemetry);
    // How read_workload asks the kubelet and the GPU inventory (agent_steps.cpp).
    KubeletSources kubelet_sources();
    // The workload events of GPU processes whose pods the kubelet has
    // answered for since their first GPU use (under mutex).
    void judge_waiting_pods(uint64_t now);
    // flow events for the flows of GPU holders and watched processes, once
    // per process_table.flow_interval_ms.
    void sample_flows(uint64_t now_ns);
    // A GPU holder's or watched process's loopback connect, to find who
    // serves it (outside the pipeline: link_loopback_peers() reports it).
    void note_loopback_connect(const Event& event);
    void link_loopback_peers(uint64_t now_ns);
    void link_loopback_peer(uint32_t client, uint16_t port, bool established, uint64_t now_ns);
    // A check about a second from now (a new GPU process, a detection),
    // unless one is due sooner.
    void check_hidden_soon(uint64_t now_ns);

    // Every few seconds (sooner after the kernel saw a pin removed): pins
    // gone from enforcement.pin_path are pinned again and reported as
    // agent_tamper "pin_removed"; the tamper hook's list of the agent's BPF
    // objects follows the links it holds. Under `mutex`.
    void check_pins(uint64_t now_ns);
    // Libraries preloaded into the agent itself, each an agent_tamper event.
    void report_own_preloads();
    void report_pin(const MissingPin& pin, const TaskInfo* remover, uint64_t now_ns);
    // The kernel saw a process remove one of the agent's pins (file_change
    // of kind agent_pins): remember who, check at once.
    void note_pin_change(const Event& event, const FileChange& change);

    // The agent's trusted files (agent_trust_files.cpp). The paths of `what`
    // ("config", "rules", "correlation"; "" all, with the unit files and the
    // executable): the kernel watches them as kind agent_config.
    std::vector<std::string> trusted_paths(const std::string& what = "") const;
    // A write the pipeline passed (trust_change "write"): logged and kept
    // for the reload that follows.
    void note_trust_write(const Event& event, const TrustChange& change);
    // A reload of `what` took the files in: a trust_change "reload" event
    // with the writes seen since the last one (the last writer named) and
    // what the reload changed, logged (a warning when it widens the agent's
    // trust) and judged. Nothing when nothing was written and nothing
    // changed. Under `mutex`.
    void report_trust_reload(const std::string& what, const rules::TrustDiff& diff);

    // What the agent shows: status page, ps, metrics (agent_report.cpp).
    // Driver of a device number, for naming its ioctls: the /proc/devices
    // name, refined for DRM nodes by the sysfs driver link (amdgpu, i915, xe).
    std::string driver_of(uint32_t major, uint32_t minor) const;
    json process_json(const ProcessInfo& info, const backends::Snapshot& telemetry) const;
    // (pid, fd, device) of every GPU fd the table knows, for per-process telemetry.
    std::vector<backends::ProcessFd> gpu_fds() const;
    std::vector<AgentMetric> agent_metrics() const;
};

}  // namespace gpuguard::agent
