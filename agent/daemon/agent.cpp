// Agent: the composition root. start() puts the rooms together step by
// step (outputs, sensor, rules, enforcement, GPUs, process table, journal,
// servers: the steps are agent_steps.cpp) and run() is the event loop. The
// state they share is agent_impl.h; what events set off is
// agent_actions.cpp, what the agent shows of itself agent_report.cpp.
#include "gpuguard/daemon/agent.h"

#include <filesystem>

#include <unistd.h>

#include "agent_impl.h"

namespace gpuguard::agent {

bool Agent::Impl::is_gpu(uint32_t major, uint32_t minor) const {
    for (const auto& device : devices) {
        if (device.matches(major, minor)) return true;
    }
    return false;
}

Agent::Agent(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Agent::~Agent() {
    if (!impl_) return;
    // Stop everything that calls back into the state before the state goes.
    impl_->exe_scans.reset();
    impl_->config_scans.reset();
    impl_->pool_prober.reset();
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

    // In this order, stopping at the first that fails: rules after the
    // sensor (so a missing privilege fails fast) but before the first poll.
    using Step = Status (Impl::*)();
    for (Step step :
         {&Impl::open_outputs, &Impl::open_sensor, &Impl::load_rules, &Impl::open_enforcement}) {
        if (auto done = (raw->*step)(); !done) return Unexpected{done.error()};
    }
    impl->find_gpus();
    impl->open_kubelet();
    impl->bootstrap_processes();
    impl->open_journal();
    if (auto servers = impl->start_servers(); !servers) return Unexpected{servers.error()};
    impl->build_pipeline();
    impl->judge_running_processes();
    impl->mark_run();
    impl->report_own_preloads();
    if (!impl->options.config_rejected.empty()) {
        impl->raise_config_rejected_at_start(impl->options.config_rejected);
    }
    if (impl->correlation_rejected_at_start) {
        impl->raise_rules_rejected_at_start(impl->correlation_rejected_at_start->first,
                                            impl->correlation_rejected_at_start->second);
    }
    if (impl->rules_rejected_at_start) {
        impl->raise_rules_rejected_at_start(*impl->rules_rejected_at_start,
                                            impl->rules_watcher->started_on());
    }
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
    const uint64_t cpu_interval_ns =
        static_cast<uint64_t>(impl.options.config.process_table.cpu_interval_ms) * 1'000'000ull;
    uint64_t next_cpu_sample = impl.process_cpu ? monotonic_ns() : UINT64_MAX;
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
            for (const auto& event : telemetry_events(snapshot, now)) {
                impl.on_event(event);
                impl.mark_unseen_gpu_processes(std::get<Telemetry>(event.data));
            }
            impl.report_gpu_faults(snapshot, now);
            for (const auto& event : impl.process_io->sample(impl.table->gpu_processes(), now)) {
                impl.on_event(event);
            }
        }
        impl.check_hidden_processes(now);
        if (impl.pod_resources) {
            std::lock_guard lock(impl.mutex);
            impl.judge_waiting_pods(now);
        }
        if (impl.flows) {
            std::lock_guard lock(impl.mutex);
            impl.sample_flows(now);
        }
        if (!impl.pending_loopback.empty()) {
            std::lock_guard lock(impl.mutex);
            impl.link_loopback_peers(now);
        }
        {
            std::lock_guard lock(impl.mutex);
            impl.check_pins(now);
        }
        if (now < next_ioctl_read && now < next_drop_check && now < next_rate_sample &&
            now < next_cpu_sample) {
            continue;
        }
        std::lock_guard lock(impl.mutex);
        if (now >= next_cpu_sample) {
            next_cpu_sample = now + cpu_interval_ns;
            impl.sample_cpu(now);
        }
        if (now >= next_rate_sample) {
            next_rate_sample = now + 1'000'000'000ull;
            if (impl.run_marker) impl.run_marker->touch();  // alive: T1 of a later "down"
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
            impl.sensor->expire_watched_addresses(now);
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
    const auto sender = impl.options.stop_sender ? impl.options.stop_sender() : std::nullopt;
    log->info("stopping on {}{}: {} event(s) delivered, {} lost in the kernel, {} undecodable",
              *stop == SIGINT ? "SIGINT" : "SIGTERM",
              sender && sender->pid
                  ? " from pid " + std::to_string(sender->pid) + " (" + sender->exe + ")"
                  : "",
              stats.delivered, stats.total_dropped(), stats.decode_errors);
    if (sender && sender->pid) impl.report_stop(*sender);  // before the programs detach
    if (impl.run_marker) impl.run_marker->remove();  // a clean end: the next start reports none
    return {};
}

}  // namespace gpuguard::agent
