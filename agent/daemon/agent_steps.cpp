// The agent's start steps, in the order Agent::start (agent.cpp) takes
// them: the outputs, the sensor, the rules, enforcement, the GPUs, the
// processes already running, the journal and the servers. Each fails or
// warns in its own words; the state they fill is agent_impl.h.
#include <cerrno>
#include <cstring>
#include <filesystem>

#include <sys/stat.h>
#include <unistd.h>

#include "agent_impl.h"
#include "gpuguard/daemon/agent.h"

namespace gpuguard::agent {
namespace {

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

// The alert outputs (docs/outputs.md): one router, a queue per sink.
Status Agent::Impl::open_outputs() {
    const Config& config = options.config;
    const auto log = logger("agent");
    if (!config.outputs.empty()) {
        siem::RouterOptions router_options;
        char hostname[256] = {};
        gethostname(hostname, sizeof(hostname) - 1);
        router_options.host.hostname = hostname;
        router_options.host.agent_version = GPUGUARD_VERSION;
        router_options.sinks = config.outputs;
        auto router = siem::AlertRouter::start(std::move(router_options));
        if (!router) return fail(router.error().code, "outputs: " + router.error().message);
        this->router = std::move(router).value();
        log->info("alert outputs: {} sink(s)", config.outputs.size());
    }
    return {};
}

namespace {

// The host's pid namespace has this inode (PROC_PID_INIT_INO, fixed since
// Linux 3.8); an agent in any other sees its container's processes only,
// and would report ready with a process table of one (a pod without
// hostPID: true, podman without --pid=host).
Status in_the_hosts_pid_namespace(const std::string& proc_root) {
    constexpr ino_t kInitialPidNamespace = 0xEFFFFFFCu;
    struct stat own {};
    const std::string path = proc_root + "/self/ns/pid";
    if (stat(path.c_str(), &own) != 0) {
        return fail(ErrorCode::kIo, path + ": " + std::strerror(errno), errno);
    }
    if (own.st_ino == kInitialPidNamespace) return {};
    return fail(ErrorCode::kUnsupported,
                "gpuguard runs in a pid namespace of its own (" + path + " is pid:[" +
                    std::to_string(own.st_ino) +
                    "]): it would see only the processes of its container. Run it in the "
                    "host's: podman or docker run --pid=host, a pod with hostPID: true "
                    "(docs/deployment.md)");
}

}  // namespace

Status Agent::Impl::open_sensor() {
    const Config& config = options.config;
    const auto log = logger("agent");
    // Before any program is loaded: an agent that cannot see the host's
    // processes must not report ready as if it did. (A proc_root of a
    // test's own is a fake host: nothing to check.)
    if (options.proc_root == "/proc") {
        if (auto host = in_the_hosts_pid_namespace(options.proc_root); !host) {
            if (config.sensor.require_host_pid_namespace) return host;
            log->critical("{} (sensor.require_host_pid_namespace: false)", host.error().message);
        }
    }
    // Pinned in-kernel enforcement (enforcement.pin_path) outlives a crash;
    // an earlier agent's is taken over below, by the sensor and the enforcer.
    std::optional<Error> unpinned;  // told once the sensor loaded: without it, it does not matter
    if (!config.enforcement.pin_path.empty()) {
        auto pins = PinDirectory::claim(config.enforcement.pin_path);
        if (pins) {
            this->pins = std::move(pins).value();
        } else {
            unpinned = pins.error();
        }
    }
    SensorOptions sensor_options;
    sensor_options.config = config.sensor;
    sensor_options.pins = this->pins;
    sensor_options.ignore_tgid = static_cast<uint32_t>(getpid());
    // No one reads the flow shapes: the kernel does not count them.
    sensor_options.config.flow_shapes = config.process_table.flow_interval_ms > 0;
    sensor_options.trusted_paths = trusted_paths();
    auto sensor = Sensor::open(sensor_options, [this](const Event& event) {
        // Called from poll(), which run() does with the mutex held.
        this->on_event(event);
    });
    if (!sensor) return Unexpected{sensor.error()};
    this->sensor.emplace(std::move(sensor).value());
    if (unpinned) log->warn("enforcement.pin_path: {}", unpinned->message);
    // Names an earlier agent left in the pinned map are this agent's to keep
    // in step with the rules (sync_kill_now_names drops the stale ones); the
    // enforcer's tags (top bit clear) are not names of rules.
    for (const auto& [name, tag] : this->sensor->known_bad_names()) {
        if (tag & kRuleTagBit) this->kill_now_names.emplace(name, "(pinned)");
    }
    return {};
}

Status Agent::Impl::load_rules() {
    const Config& config = options.config;
    const auto log = logger("agent");
    // Rules after the sensor (so a missing privilege fails fast) but before
    // the first poll: events wait in the ring buffer, every one is judged.
    auto builtin = rules::compile_builtin_pack();
    if (!builtin)
        return fail(builtin.error().code, "built-in signature pack: " + builtin.error().message);
    if (const auto& note = (*builtin)->cache_note(); !note.empty()) {
        log->info("built-in signature pack {}", note);
    }
    // Correlation files that do not load start the agent on their last
    // good copy (or the built-in rules) with the critical GG-AGENT-0002.
    auto guard_policies = rules::load_guard_policies_at_start(
        config.rules.correlation_files,
        std::filesystem::path(config.journal.dir) / "last-good" / "correlation");
    if (!guard_policies) {
        return fail(guard_policies.error().code,
                    "correlation rules: " + guard_policies.error().message);
    }
    if (guard_policies->rejected) {
        log->critical("correlation files rejected at start, running on {}: {}",
                      guard_policies->running_on, guard_policies->rejected->message);
        this->correlation_rejected_at_start.emplace(*guard_policies->rejected,
                                                    guard_policies->running_on);
    }
    this->priority_at_start = std::move(guard_policies->policies.priority);
    auto* correlation_rules = &guard_policies->policies.rules;
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
    // The last files that built, kept in the agent's state: a start on
    // files that do not build runs on them (or on the built-in pack) and
    // says so as a critical detection, instead of not starting.
    const auto last_good = std::filesystem::path(config.journal.dir) / "last-good" / "rules";
    auto watcher = rules::RuleSetWatcher::start(
        rules::RulePaths{config.rules.main_file, config.rules.drop_in_dir, last_good}, *builtin,
        rules::RuleSetWatcher::Callbacks{
            [this](std::shared_ptr<const rules::RuleSet> set) {
                std::lock_guard lock(this->mutex);
                // Who changed what, before the new rules judge anything.
                if (this->trusted_rule_set) {
                    this->report_trust_reload("rules",
                                              rules::diff_rule_sets(*this->trusted_rule_set, *set));
                }
                this->trusted_rule_set = set;
                this->sync_kill_now_names(*set);
                if (this->config_scans) this->config_scans->set_rule_set(set);
                if (auto applied = this->correlator->set_rule_set(std::move(set)); !applied) {
                    logger("rules")->error("reloaded rules not applied: {}",
                                           applied.error().message);
                }
            },
            [this](const Error& error) {
                std::lock_guard lock(this->mutex);
                this->raise_rules_rejected(error);
            }});
    if (!watcher) return fail(watcher.error().code, "rules: " + watcher.error().message);
    this->rules_watcher = std::move(watcher).value();
    if (const auto& rejected = this->rules_watcher->start_error()) {
        log->critical("rule files rejected at start, running on {}: {}",
                      this->rules_watcher->started_on(), rejected->message);
        this->rules_rejected_at_start = *rejected;
    }
    auto correlator = Correlator::create(
        std::move(*correlation_rules), this->rules_watcher->current(), *this->table,
        CorrelatorOptions{.dry_run = config.enforcement.dry_run,
                          .request_scans = config.rules.yara_scan,
                          .scan_every_exec = config.rules.yara_scan_every_exec,
                          .request_configs = config.rules.config_scan,
                          .request_watches = true,
                          .request_probes = config.verify.active});
    if (!correlator) return Unexpected{correlator.error()};
    if (config.rules.yara_scan) {
        // The built-in pack's YARA rules, compiled once; verdicts come back
        // as exe_scan events, judged and journaled under the mutex.
        auto pack = signatures::load_builtin_pack();
        if (!pack) return fail(pack.error().code, "YARA rules: " + pack.error().message);
        signatures::YaraOptions yara_options;
        yara_options.max_file_size = config.rules.yara_max_file_mb << 20;
        auto yara =
            signatures::YaraScanner::compile(*pack, yara_options, rules::default_compile_cache());
        if (!yara) return fail(yara.error().code, "YARA rules: " + yara.error().message);
        if (const auto& note = yara->cache_note(); !note.empty()) {
            logger("agent")->info("built-in YARA rules {}", note);
        }
        this->exe_scans = std::make_unique<ExeScanWorker>(
            std::move(yara).value(),
            [this](Event event) {
                std::lock_guard lock(this->mutex);
                event.ts_ns = monotonic_ns();
                this->on_event(event);
            },
            this->options.proc_root);
    }
    if (config.rules.config_scan) {
        // Config files a suspect process reads; matching ones come back as
        // config_file events, judged and journaled under the mutex.
        auto reader = ConfigScanWorker::create(
            this->rules_watcher->current(),
            [this](Event event) {
                std::lock_guard lock(this->mutex);
                event.ts_ns = monotonic_ns();
                this->on_event(event);
            },
            ConfigScanOptions{.max_bytes = config.rules.config_max_kb << 10,
                              .proc_root = this->options.proc_root,
                              .max_queue = 256,
                              .max_cached = 1024,
                              .limits = {}});
        if (!reader) return fail(reader.error().code, "config files: " + reader.error().message);
        this->config_scans = std::move(reader).value();
    }
    if (config.verify.active) {
        // Probes of suspected pools; answers come back as pool_probe
        // events, judged and journaled under the mutex.
        this->pool_prober = std::make_unique<PoolProber>(config.verify, this->options.proc_root,
                                                         [this](Event event) {
                                                             std::lock_guard lock(this->mutex);
                                                             event.ts_ns = monotonic_ns();
                                                             this->on_event(event);
                                                         });
        log->warn("verify.active: suspected pools are probed (at most {} an hour, {} ms each)",
                  config.verify.max_per_hour, config.verify.timeout_ms);
    }
    this->correlator = std::move(correlator).value();
    this->trusted_rule_set = this->rules_watcher->current();
    this->sync_kill_now_names(*this->rules_watcher->current());
    log->info("rules: {} signatures, {} correlation rules ({}, {})",
              this->rules_watcher->current()->effective().size(), this->correlator->rules().size(),
              config.rules.main_file, config.rules.drop_in_dir);
    return {};
}

Status Agent::Impl::open_enforcement() {
    const Config& config = options.config;
    const auto log = logger("agent");
    // The enforcer acts on detections whose action is not "alert", on its
    // own thread. deny_gpu goes through the kernel enforcer (its device set
    // follows once the GPUs are known, below); block_ip through nftables or
    // the cgroup/connect filter.
    this->kernel_enforcer = open_kernel_enforcer(config, this->pins);
    if (this->pins) {
        const PinReport& pinned = this->pins->report();
        log->info(
            "in-kernel enforcement pinned under {}: {} map(s) reused, {} cgroup link(s) taken "
            "over, {} hook(s) replaced",
            pinned.path, pinned.maps_reused, pinned.links_adopted, pinned.links_replaced);
    }
    this->known_bad = std::make_unique<SensorKnownBad>(*this->sensor);
    EnforcerDependencies dependencies;
    dependencies.blocker = this->address_blocker(config.enforcement);
    dependencies.known_bad = this->known_bad.get();
    if (this->kernel_enforcer) {
        this->gpu_denier = std::make_unique<KernelGpuDenier>(*this->kernel_enforcer);
        dependencies.gpu_denier = this->gpu_denier.get();
    }
    dependencies.on_outcome = [this](const EnforcementOutcome& outcome) {
        this->on_outcome(outcome);
    };
    this->enforcer = std::make_unique<Enforcer>(config.enforcement, std::move(dependencies));
    this->enforcer_worker = std::make_unique<EnforcerWorker>(*this->enforcer);
    if (config.enforcement.dry_run)
        log->info("enforcement: dry run (actions are reported, not taken)");

    // Read with the correlation rules at start (load_rules), from the same files.
    auto priority_policy = std::move(this->priority_at_start);
    // Guard mode's GPU priorities, judged at each telemetry reading; the
    // enforcer's protection keeps pid 1, kernel threads, the agent and the
    // allowlist out of every decision.
    const Enforcer* enforcer = this->enforcer.get();
    this->priority_guard = std::make_unique<PriorityGuard>(
        std::move(priority_policy), [] { return monotonic_ns(); },
        [enforcer](uint32_t pid) { return enforcer->protected_reason(pid); },
        [proc_root = this->options.proc_root](uint32_t pid) -> uint64_t {
            auto stat = read_proc_stat(pid, proc_root);
            return stat ? stat->start_time_ns : 0;
        });
    if (const auto& policy = this->priority_guard->policy()) {
        log->info("guard priorities ({}): pause above {} %, resume below {} %, {} pattern(s){}",
                  policy->source, policy->pause_above_percent, policy->resume_below_percent,
                  policy->processes.size(), policy->dry_run ? ", dry run" : "");
    }
    // rules.correlation_files are reloaded when they change, like the rule
    // files; a rejected change raises GG-AGENT-0001 and the last good stays.
    auto guard_watcher = rules::GuardPolicyWatcher::start(
        config.rules.correlation_files,
        rules::GuardPolicyWatcher::Callbacks{
            [this](rules::GuardPolicies policies) {
                std::lock_guard lock(this->mutex);
                this->report_trust_reload(
                    "correlation",
                    rules::diff_correlation_rules(this->correlator->rules(), policies.rules));
                this->correlator->set_rules(std::move(policies.rules));
                this->act_on_priorities(
                    this->priority_guard->set_policy(std::move(policies.priority)));
            },
            [this](const Error& error) {
                std::lock_guard lock(this->mutex);
                this->raise_rules_rejected(error);
            }});
    if (!guard_watcher) {
        return fail(guard_watcher.error().code,
                    "correlation files: " + guard_watcher.error().message);
    }
    this->guard_watcher = std::move(guard_watcher).value();
    return {};
}

// The GPUs to watch: /proc/devices, sensor.extra_gpu_devices and what the
// telemetry backends find; the kernel enforcer denies the same set.
void Agent::Impl::find_gpus() {
    const Config& config = options.config;
    const auto log = logger("agent");
    auto from_proc = read_gpu_devices(this->options.proc_root);
    if (!from_proc) {
        log->warn("{}; only sensor.extra_gpu_devices are watched", from_proc.error().message);
    } else {
        for (const auto& device : from_proc.value()) {
            if (auto added = this->sensor->add_gpu_device(device); !added) {
                log->error("{}", added.error().message);
                continue;
            }
            this->devices.push_back(device);
            log->info("watching GPU device {} ({})", device.to_string(), device.driver);
        }
    }
    for (const auto& device : config.sensor.extra_gpu_devices) {
        this->devices.push_back(device);
        log->info("watching GPU device {} (sensor.extra_gpu_devices)", device.to_string());
    }
    if (this->devices.empty()) {
        log->warn(
            "no GPU driver in /proc/devices and no sensor.extra_gpu_devices: only failed "
            "opens of GPU paths will be reported");
    }

    // GPU telemetry: one sample now (which also finds the GPUs' device nodes,
    // registered in the kernel map if /proc/devices did not cover them), then
    // its own thread. Per-process samples read only the fds the sensor saw.
    this->sampler = std::make_unique<backends::TelemetrySampler>(
        backends::make_backends(backend_options(config.backends)),
        backends::SamplerOptions{std::chrono::milliseconds(config.backends.interval_ms),
                                 [this] { return this->gpu_fds(); }});
    this->sampler->sample_once();
    this->process_io = std::make_unique<ProcessIoSampler>(
        this->options.proc_root, [this](uint32_t pid) { return this->sensor->net_sends(pid); });
    if (config.process_table.cpu_interval_ms > 0) {
        this->process_cpu = std::make_unique<ProcessCpuSampler>(
            this->options.proc_root, config.process_table.busy_cpu_percent);
        this->busy_io = std::make_unique<ProcessIoSampler>(
            this->options.proc_root, [this](uint32_t pid) { return this->sensor->net_sends(pid); });
    }
    if (config.process_table.flow_interval_ms > 0) {
        this->flows = std::make_unique<FlowSampler>(
            [this] { return this->sensor->read_flow_shapes(); },
            FlowSampler::Options{config.process_table.flow_interval_ms * 1'000'000ull,
                                 config.process_table.flow_min_age_ms * 1'000'000ull});
    }
    for (const auto& number : this->sampler->gpu_device_numbers()) {
        if (!number.known() || this->is_gpu(number.major, number.minor)) continue;
        const GpuDeviceNumber device{number.major, number.minor, "telemetry"};
        if (auto added = this->sensor->add_gpu_device(device); added) {
            this->devices.push_back(device);
            log->info("watching GPU device {} (found by the telemetry backends)",
                      device.to_string());
        }
    }

    if (this->kernel_enforcer) {
        if (auto denied = this->kernel_enforcer->set_denied_devices(this->devices); !denied) {
            log->error("deny_gpu: {}", denied.error().message);
        }
    }
}

// The kubelet's PodResources answers, refreshed on the cache's own thread;
// the first is awaited (one call's deadline at most) so that pods running
// now are judged by the kubelet's allocation.
void Agent::Impl::open_kubelet() {
    const KubeletConfig& config = options.config.kubelet;
    if (config.pod_resources_socket.empty()) return;
    pod_resources = std::make_unique<kubelet::PodResourcesCache>(kubelet::PodResourcesCacheOptions{
        config.pod_resources_socket, std::chrono::milliseconds(config.call_timeout_ms),
        std::chrono::seconds(config.refresh_interval_s)});
    pod_resources->refresh_and_wait();
}

KubeletSources Agent::Impl::kubelet_sources() {
    KubeletSources sources;
    sources.kubelet_root = options.config.kubelet.root;
    sources.infrastructure_namespaces = options.config.kubelet.gpu_infrastructure_namespaces;
    if (pod_resources) {
        sources.gpu_ids =
            [cache = pod_resources.get()](const PodQuery& query) -> std::optional<KubeletGpus> {
            auto pod = cache->find(query.pod_namespace, query.name);
            if (!pod) {
                cache->refresh_soon();  // a pod newer than the last answer: for the next GPU user
                return std::nullopt;
            }
            return KubeletGpus{kubelet::nvidia_device_ids(*pod, query.container),
                               kubelet::gpu_claim_devices(*pod, query.container)};
        };
    }
    // NVML's UUIDs name the GPUs and MIG instances the NVIDIA device plugin
    // hands out by default.
    sources.gpu_by_uuid = [this](const std::string& uuid) -> std::vector<std::string> {
        if (!sampler) return {};
        return gpu_nodes_by_uuid(sampler->latest().devices, uuid);
    };
    sources.inventory_gpus = [this]() -> std::vector<std::string> {
        if (!sampler) return {};
        return nvidia_gpu_nodes(sampler->latest().devices);
    };
    sources.inventory_has_mig = [this] {
        if (!sampler) return false;
        const auto devices = sampler->latest().devices;
        return std::any_of(devices.begin(), devices.end(),
                           [](const backends::GpuDevice& device) { return device.mig_enabled; });
    };
    if (pod_resources) {
        sources.answers = [cache = pod_resources.get()] { return cache->counters().refreshes; };
    }
    return sources;
}

void Agent::Impl::bootstrap_processes() {
    const auto log = logger("agent");
    // After attaching, so a process that opens a GPU meanwhile is seen by one or the other.
    auto bootstrap = this->table->bootstrap();
    if (!bootstrap) {
        log->warn("process table bootstrap failed: {}", bootstrap.error().message);
    } else {
        this->bootstrap = bootstrap.value();
        for (const auto& process : this->table->gpu_processes()) {
            if (auto marked = this->sensor->mark_gpu_process(process.pid); !marked) {
                log->warn("{}", marked.error().message);
            }
        }
        log->info("process table: {} processes, {} already holding a GPU", bootstrap->processes,
                  bootstrap->gpu_processes);
    }
    if (this->options.config.process_table.hidden_check_interval_s > 0) {
        HiddenCheckOptions hidden;
        hidden.proc_root = this->options.proc_root;
        this->hidden_check = std::make_unique<HiddenProcessCheck>(std::move(hidden));
    }
}

// The forensic journal (docs/journal.md); the agent goes on without one.
void Agent::Impl::open_journal() {
    const Config& config = options.config;
    const auto log = logger("agent");
    if (config.journal.enabled) {
        std::vector<Event> snapshot;
        const uint64_t now = monotonic_ns();
        for (const auto& process : this->table->gpu_processes()) {
            if (auto container = container_event(process, now)) snapshot.push_back(*container);
            snapshot.push_back(snapshot_event(process, now));
        }
        auto writer = journal::JournalWriter::open(
            journal_options(config.journal),
            journal::local_identity(
                rule_pack_version(*this->rules_watcher->current(), this->correlator->rules())),
            std::move(snapshot), this->devices);
        if (!writer) {
            // Detection and enforcement go on without it; the operator must know.
            log->error("journal disabled: {}", writer.error().message);
        } else {
            this->journal = std::move(writer).value();
            this->journal->append_note(now, "info", "agent started");
            log->info("journal {}", config.journal.dir);
        }
    }
}

// Telemetry sampling, the metrics endpoint and status page, the control socket.
Status Agent::Impl::start_servers() {
    const Config& config = options.config;
    const auto log = logger("agent");
    this->sampler->start();
    if (config.metrics.enabled) {
        MetricsServerOptions metrics_options{config.metrics.listen, config.metrics.port, {}};
        if (config.metrics.status_page) {
            metrics_options.status_json = [this] {
                char hostname[256] = {};
                gethostname(hostname, sizeof(hostname) - 1);
                return json{{"host", hostname},
                            {"status", json::parse(Agent::status_json_of(*this))},
                            {"ps", json::parse(Agent::ps_json_of(*this))},
                            {"activity",
                             json::parse(this->activity->to_json(
                                 static_cast<int64_t>(monotonic_ns()) + this->realtime_offset_ns))}}
                    .dump(-1, ' ', false, json::error_handler_t::replace);
            };
        }
        auto metrics = MetricsServer::start(
            std::move(metrics_options), [this] { return this->sampler->latest(); },
            [this] { return this->agent_metrics(); });
        if (!metrics) return Unexpected{metrics.error()};
        this->metrics = std::move(metrics).value();
        log->info("metrics on http://{}:{}/metrics", config.metrics.listen, this->metrics->port());
    }

    // The tamper hook reports detaches of the agent's links from the start.
    if (this->sensor) {
        if (auto listed = this->sensor->protect_own_bpf_objects(); listed) {
            log->debug("tamper hook: {} BPF links and programs of the agent listed", *listed);
        } else {
            log->warn("{}", listed.error().message);
        }
    }
    if (!config.control.socket.empty()) {
        auto control = ControlServer::start(config.control.socket, [this](
                                                                       const std::string& command) {
            if (command == "ping") return std::string(R"({"ok":true})");
            if (command == "status") return Agent::status_json_of(*this);
            if (command == "ps") return Agent::ps_json_of(*this);
            return json{{"error", "unknown command '" + command + "' (known: ping, status, ps)"}}
                .dump();
        });
        if (!control) return Unexpected{control.error()};
        this->control.emplace(std::move(control).value());
        log->info("control socket {}", config.control.socket);
    }
    return {};
}

}  // namespace gpuguard::agent
