// The sensor's loader, by lifecycle: probe (privileges, BTF, the attach
// mode and the payload hooks this kernel takes), configure (the object's
// read-only settings and map sizes before load), load (maps an earlier
// agent pinned reused), attach (each planned hook; pinned, an earlier
// agent's replaced), read (the ring-buffer consumer), and the first
// settings of the running sensor. `auto` falls back a mode when the kernel
// refuses this one's programs.
#include <algorithm>
#include <cerrno>
#include <tuple>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <unistd.h>

#include "gpuguard/sensor/bpf_pins.h"
#include "gpuguard/sensor/sensor_probe.h"
#include "gpuguard/sensor/sensor_support.h"
#include "sensor_attach.h"
#include "sensor_impl.h"

namespace gpuguard::agent {
namespace {

// The BTF CO-RE resolves against when it is not the running kernel's: the
// configured sensor.btf, else the path a test points at; "" = the kernel's.
std::string custom_btf_path(const SensorOptions& options) {
    if (!options.config.btf_path.empty()) return options.config.btf_path;
    return options.kernel_btf_path != kKernelBtfPath ? options.kernel_btf_path : std::string();
}

// Probe: the payload programs' variant (bpf/payload.bpf.c). The socket
// layer's sock_send_length/sock_recv_length tracepoints (6.3+) are reached
// by socket I/O only; syscall hooks make every write and read of every
// process pay. Decided by the probe `gpuguard probe` reports: the
// tracepoints must exist, load and attach here.
PayloadHooks choose_payload_hooks(const SensorConfig& config, const std::string& btf_path) {
    if (!config.payload_capture) return PayloadHooks::kNone;
    if (config.payload_syscall_hooks) return PayloadHooks::kSyscalls;
    const FeatureStatus socket_layer = probe_socket_layer(btf_path);
    logger("sensor")->debug("probe sock_send_length: {} ({})",
                            socket_layer.available ? "available" : "unavailable",
                            socket_layer.detail);
    return socket_layer.available ? PayloadHooks::kSocketLayer : PayloadHooks::kSyscalls;
}

// Configure: what the programs read as constants, and the maps' sizes.
Status configure_object(gpuguard_bpf* skel, const SensorOptions& options) {
    const SensorConfig& config = options.config;
    if (skel->rodata->gg_abi_major != GG_ABI_MAJOR) {
        return fail(ErrorCode::kUnsupported,
                    "BPF object ABI " + std::to_string(skel->rodata->gg_abi_major) +
                        " does not match the agent's " + std::to_string(GG_ABI_MAJOR) +
                        ": rebuild gpuguard");
    }
    logger("sensor")->debug("BPF object ABI {}.{}; report_failed_opens={}",
                            skel->rodata->gg_abi_major, skel->rodata->gg_abi_minor,
                            config.report_failed_opens);
    skel->rodata->cfg_report_failed_opens = config.report_failed_opens ? 1 : 0;
    skel->rodata->cfg_connect_all = config.connect_all ? 1 : 0;
    skel->rodata->cfg_connect_loopback = config.connect_loopback ? 1 : 0;
    skel->rodata->cfg_argv_max = config.argv_max_bytes;
    skel->rodata->cfg_ignore_tgid = options.ignore_tgid;
    skel->rodata->cfg_payload_all = config.payload_all ? 1 : 0;
    skel->rodata->cfg_payload_dns = config.payload_dns ? 1 : 0;
    skel->rodata->cfg_payload_msgs = config.payload_messages;
    skel->rodata->cfg_flow_shapes = config.flow_shapes ? 1 : 0;

    const uint32_t ring_bytes = config.ring_buffer_kb * 1024;
    const long page_bytes = sysconf(_SC_PAGESIZE);
    if (page_bytes > 0 && ring_bytes < static_cast<uint64_t>(page_bytes)) {
        return fail(ErrorCode::kInvalidArgument,
                    "sensor.ring_buffer_kb " + std::to_string(config.ring_buffer_kb) +
                        " is smaller than this machine's page size (" +
                        std::to_string(page_bytes / 1024) + " KiB): raise it");
    }
    if (int err = bpf_map__set_max_entries(skel->maps.events, ring_bytes); err) {
        return Unexpected{libbpf_error("sizing ring buffer to " + std::to_string(ring_bytes), err)};
    }
    for (auto [map, entries, key] :
         {std::tuple{skel->maps.watched_tgids, config.watch_processes_max, "watch_processes_max"},
          std::tuple{skel->maps.watched_addrs, config.watch_addresses_max,
                     "watch_addresses_max"}}) {
        if (int err = bpf_map__set_max_entries(map, entries); err) {
            return Unexpected{libbpf_error(std::string("sizing ") + bpf_map__name(map) +
                                               " to sensor." + key + " " + std::to_string(entries),
                                           err)};
        }
    }
    return {};
}

// Load: kill_now's targets outlive the agent (an earlier agent's are
// reused), and so does the record of who SIGKILLed an earlier agent (read
// by the next one: agent_killer).
Status load_object(gpuguard_bpf* skel, PinDirectory* pins) {
    bpf_map* outliving[] = {skel->maps.known_bad_files, skel->maps.known_bad_names,
                            skel->maps.agent_kills};
    if (pins) {
        for (bpf_map* map : outliving) pins->pin_map_on_load(map);
    }
    if (int err = gpuguard_bpf__load(skel); err) {
        return Unexpected{libbpf_error("loading BPF programs", err)};
    }
    if (pins) {
        for (const bpf_map* map : outliving) pins->note_pinned_map(map);
    }
    update_kill_now_armed(skel);  // reused maps may hold targets already
    return {};
}

// Attach: each planned hook; pinned ones replace an earlier agent's, still
// running, once ours is attached, and an earlier agent's hooks of another
// mode go too (ours do their work now).
Status attach_hooks(const AttachPlan& plan, PinDirectory* pins, std::vector<LinkPtr>& links,
                    std::vector<std::string>& hooks) {
    std::vector<std::string> pinned_names;
    for (const auto& hook : plan.hooks) {
        bpf_link* link = bpf_program__attach(hook.program);
        if (!link) return Unexpected{libbpf_error("attaching to " + hook.name(), -errno)};
        links.emplace_back(link);
        hooks.push_back(hook.name());
        if (!pins || !hook.pinned) continue;
        const std::string name = std::string("sensor-") + bpf_program__name(hook.program);
        pinned_names.push_back(name);
        LinkPtr earlier(pins->open_link(name));
        if (auto pinned = pins->pin_link(link, name); !pinned) {
            logger("sensor")->warn("{}: this hook ends with the agent", pinned.error().message);
            continue;
        }
        if (earlier) ++pins->report().links_replaced;
    }
    if (!pins) return {};
    for (const auto& name : pins->link_names("sensor-")) {
        if (std::find(pinned_names.begin(), pinned_names.end(), name) != pinned_names.end()) {
            continue;
        }
        LinkPtr earlier(pins->open_link(name));
        pins->unpin_link(name);
        ++pins->report().links_replaced;
    }
    return {};
}

}  // namespace

Result<Sensor> Sensor::open(const SensorOptions& options, EventHandler handler) {
    const auto log = logger("sensor");
    install_libbpf_logger();
    if (auto privileges = check_privileges(); !privileges) return Unexpected{privileges.error()};
    const SensorConfig& config = options.config;
    if (auto btf = check_btf(config.btf_path, options.kernel_btf_path); !btf) {
        return Unexpected{btf.error()};
    }
    const std::string btf_path = custom_btf_path(options);
    AttachDecision decision = decide_attach_mode(config.attach, btf_path);
    if (decision.mode == AttachMode::kAuto) {
        return fail(ErrorCode::kUnsupported, "sensor.attach " +
                                                 std::string(attach_mode_name(config.attach)) +
                                                 " is not possible on this kernel (" +
                                                 decision.reason + "): set sensor.attach to auto");
    }
    if (options.raw_syscalls_untyped && decision.raw_btf) {
        decision.raw_btf = false;
        decision.reason += "; plain raw tracepoints asked for";
    }
    log->info("sensor attach mode {}: {}", attach_mode_name(decision.mode), decision.reason);
    while (true) {
        auto sensor = open_in_mode(options, handler, decision);
        if (sensor || config.attach != AttachMode::kAuto ||
            decision.mode == AttachMode::kSyscallTracepoints) {
            return sensor;
        }
        const AttachMode next = decision.mode == AttachMode::kKernelFunctions
                                    ? AttachMode::kRawSyscalls
                                    : AttachMode::kSyscallTracepoints;
        log->warn("sensor attach mode {} failed ({}); trying {}", attach_mode_name(decision.mode),
                  sensor.error().message, attach_mode_name(next));
        const std::string refused = std::string(attach_mode_name(decision.mode)) + " refused (" +
                                    sensor.error().message + ")";
        decision = decide_attach_mode(next, btf_path);
        if (decision.mode == AttachMode::kAuto) {
            decision = {AttachMode::kSyscallTracepoints, false, ""};
        }
        decision.reason = refused + "; " + decision.reason;
    }
}

Result<Sensor> Sensor::open_in_mode(const SensorOptions& options, const EventHandler& handler,
                                    const AttachDecision& decision) {
    const auto log = logger("sensor");
    const SensorConfig& config = options.config;
    if (auto tracefs = ensure_tracefs(options.tracefs_dir, config.mount_tracefs); !tracefs) {
        return Unexpected{tracefs.error()};
    }
    auto impl = std::make_unique<Impl>();
    impl->handler = handler;

    const std::string btf_path = custom_btf_path(options);
    LIBBPF_OPTS(bpf_object_open_opts, open_opts);
    if (!btf_path.empty()) open_opts.btf_custom_path = btf_path.c_str();
    impl->skeleton.reset(gpuguard_bpf__open_opts(&open_opts));
    if (!impl->skeleton) return Unexpected{libbpf_error("opening BPF object gpuguard_bpf", -errno)};
    gpuguard_bpf* skel = impl->skeleton.get();
    if (auto configured = configure_object(skel, options); !configured) {
        return Unexpected{configured.error()};
    }

    // Plan: hooks missing on this kernel or ABI (openat2 came in 5.6; arm64
    // has no open/creat) are skipped, not fatal.
    const PayloadHooks payload = choose_payload_hooks(config, btf_path);
    auto plan = plan_attachment(
        skel, AttachRequest{decision.mode, decision.raw_btf, payload,
                            !config.watch_files.empty() || !options.trusted_paths.empty(),
                            options.tracefs_dir, btf_path});
    if (!plan) return Unexpected{plan.error()};
    impl->mode = decision.mode;
    impl->reason = decision.reason;
    impl->payload = payload;
    log->debug("payload sampling: {}",
               payload == PayloadHooks::kNone          ? "off (sensor.payload_capture)"
               : payload == PayloadHooks::kSocketLayer ? "tp_btf/sock_send_length, sock_recv_length"
                                                       : "syscall hooks");

    PinDirectory* pins = options.pins.get();
    if (auto loaded = load_object(skel, pins); !loaded) return Unexpected{loaded.error()};
    impl->watch =
        std::make_unique<KernelWatch>(skel->maps.watched_tgids, skel->maps.watched_addrs,
                                      skel->maps.net_watch_tgids, &skel->bss->net_watch_armed);
    if (auto attached = attach_hooks(*plan, pins, impl->links, impl->hooks); !attached) {
        return Unexpected{attached.error()};
    }

    // Read: the consumer of the ring buffer, polled by the agent's loop.
    impl->ring.reset(
        ring_buffer__new(bpf_map__fd(skel->maps.events), &Impl::on_record, impl.get(), nullptr));
    if (!impl->ring) return Unexpected{libbpf_error("creating ring buffer consumer", -errno)};
    log->info("sensor attached ({}): {} hook(s), ring buffer {} KiB", attach_mode_name(impl->mode),
              impl->hooks.size(), config.ring_buffer_kb);

    // The running sensor's first settings: devices, ports, watched files.
    Sensor sensor(std::move(impl));
    for (const auto& device : config.extra_gpu_devices) {
        if (auto added = sensor.add_gpu_device(device); !added) return Unexpected{added.error()};
    }
    if (auto ports = sensor.set_watched_ports(config.watched_ports); !ports) {
        return Unexpected{ports.error()};
    }
    auto files = watch_patterns(config.watch_files, options.pins.get(), options.trusted_paths);
    if (!files) return Unexpected{files.error()};
    if (auto watched = sensor.set_watched_files(*files); !watched) {
        return Unexpected{watched.error()};
    }
    return sensor;
}

}  // namespace gpuguard::agent
