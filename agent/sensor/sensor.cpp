#include "gpuguard/sensor/sensor.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <span>
#include <tuple>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "events.h"
#include "gpuguard/common/logging.h"
#include "gpuguard/sensor/bpf_pins.h"
#include "gpuguard/sensor/sensor_probe.h"
#include "gpuguard/sensor/sensor_support.h"
#include "gpuguard_bpf.skel.h"
#include "kernel_watch.h"
#include "libbpf_handles.h"
#include "own_bpf_objects.h"
#include "sensor_attach.h"

namespace gpuguard::agent {
namespace {

using SkeletonPtr = LibbpfPtr<gpuguard_bpf, gpuguard_bpf__destroy>;

const char* record_type_name(uint32_t type) {
    switch (type) {
        case GG_EVENT_GPU_OPEN:
            return "gpu_open";
        case GG_EVENT_GPU_IOCTL:
            return "gpu_ioctl";
        case GG_EVENT_CONNECT:
            return "connect";
        case GG_EVENT_EXEC:
            return "exec";
        case GG_EVENT_FORK:
            return "fork";
        case GG_EVENT_EXIT:
            return "exit";
        case GG_EVENT_KILL_NOW:
            return "kill_now";
        case GG_EVENT_NET_PAYLOAD:
            return "net_payload";
        case GG_EVENT_FILE_CHANGE:
            return "file_change";
        case GG_EVENT_MODULE_LOAD:
            return "module_load";
        case GG_EVENT_AGENT_SIGNAL:
            return "agent_signal";
        case GG_EVENT_BPF_COMMAND:
            return "bpf_command";
        default:
            return nullptr;  // a number no program emits
    }
}

gg_gpu_dev_key device_key(const GpuDeviceNumber& device) {
    return gg_gpu_dev_key{device.major, device.minor ? *device.minor : GG_GPU_DEV_ANY_MINOR};
}

// The BTF CO-RE resolves against when it is not the running kernel's: the
// configured sensor.btf, else the path a test points at; "" = the kernel's.
std::string custom_btf_path(const SensorOptions& options) {
    if (!options.config.btf_path.empty()) return options.config.btf_path;
    return options.kernel_btf_path != kKernelBtfPath ? options.kernel_btf_path : std::string();
}

// Keeps kill_now_armed in step with the known-bad maps, so the hot paths
// skip their lookups while a map is empty.
void update_kill_now_armed(gpuguard_bpf* skel) {
    uint32_t armed = 0;
    if (!map_keys<gg_file_key>(skel->maps.known_bad_files).empty()) armed |= GG_KILL_ARMED_FILES;
    if (!map_keys<gg_name_key>(skel->maps.known_bad_names).empty()) armed |= GG_KILL_ARMED_NAMES;
    skel->bss->kill_now_armed = armed;
}

}  // namespace

uint64_t SensorStats::total_dropped() const {
    uint64_t total = 0;
    for (const auto& type : kernel) total += type.dropped;
    return total;
}

struct Sensor::Impl {
    // Destroyed bottom-up: consumer, then links (detach), then the skeleton (unload).
    SkeletonPtr skeleton;
    std::vector<LinkPtr> links;
    RingBufferPtr ring;
    EventHandler handler;
    uint64_t delivered = 0;
    uint64_t decode_errors = 0;
    std::vector<std::string> hooks;
    AttachMode mode = AttachMode::kSyscallTracepoints;
    std::string reason;                          // why this mode
    PayloadHooks payload = PayloadHooks::kNone;  // kNone: no program counts GPU processes' sends
    std::unique_ptr<KernelWatch> watch;          // watched_tgids, watched_addrs
    std::vector<WatchPattern> watch_files;       // as loaded into watch_paths, watch_names
    BpfObjects own_objects;                      // as loaded into agent_bpf_objects

    static int on_record(void* context, void* data, size_t size) {
        auto* self = static_cast<Impl*>(context);
        auto event = decode_record(std::span(static_cast<const std::byte*>(data), size));
        if (!event) {
            // Counted and reported in stats; a bad record never stops the stream.
            ++self->decode_errors;
            logger("sensor")->warn("dropping undecodable record ({} bytes): {}", size,
                                   event.error().message);
            return 0;
        }
        ++self->delivered;
        if (self->handler) self->handler(event.value());
        return 0;
    }
};

Sensor::Sensor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Sensor::Sensor(Sensor&&) noexcept = default;
Sensor& Sensor::operator=(Sensor&&) noexcept = default;
Sensor::~Sensor() = default;

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
        // auto falls back a mode when the kernel refuses this one's programs.
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

    if (skel->rodata->gg_abi_major != GG_ABI_MAJOR) {
        return fail(ErrorCode::kUnsupported,
                    "BPF object ABI " + std::to_string(skel->rodata->gg_abi_major) +
                        " does not match the agent's " + std::to_string(GG_ABI_MAJOR) +
                        ": rebuild gpuguard");
    }
    log->debug("BPF object ABI {}.{}; report_failed_opens={}", skel->rodata->gg_abi_major,
               skel->rodata->gg_abi_minor, config.report_failed_opens);
    skel->rodata->cfg_report_failed_opens = config.report_failed_opens ? 1 : 0;
    skel->rodata->cfg_connect_all = config.connect_all ? 1 : 0;
    skel->rodata->cfg_connect_loopback = config.connect_loopback ? 1 : 0;
    skel->rodata->cfg_argv_max = config.argv_max_bytes;
    skel->rodata->cfg_ignore_tgid = options.ignore_tgid;
    skel->rodata->cfg_payload_all = config.payload_all ? 1 : 0;
    skel->rodata->cfg_payload_dns = config.payload_dns ? 1 : 0;
    skel->rodata->cfg_payload_msgs = config.payload_messages;

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

    // The payload programs' preferred variant (bpf/payload.bpf.c): the socket
    // layer's sock_send_length/sock_recv_length tracepoints (6.3+), which only
    // socket I/O reaches; syscall hooks make every write and read of every
    // process pay. Decided by the probe `gpuguard probe` reports: the
    // tracepoints must exist, load and attach here.
    PayloadHooks payload = PayloadHooks::kNone;
    if (config.payload_capture) {
        payload = PayloadHooks::kSyscalls;
        if (!config.payload_syscall_hooks) {
            const FeatureStatus socket_layer = probe_socket_layer(btf_path);
            if (socket_layer.available) payload = PayloadHooks::kSocketLayer;
            log->debug("probe sock_send_length: {} ({})",
                       socket_layer.available ? "available" : "unavailable", socket_layer.detail);
        }
    }
    // Hooks missing on this kernel or ABI (openat2 came in 5.6; arm64 has no
    // open/creat) are skipped, not fatal.
    auto plan = plan_attachment(
        skel, AttachRequest{decision.mode, decision.raw_btf, payload, !config.watch_files.empty(),
                            options.tracefs_dir, btf_path});
    if (!plan) return Unexpected{plan.error()};
    impl->mode = decision.mode;
    impl->reason = decision.reason;
    impl->payload = payload;
    log->debug("payload sampling: {}",
               payload == PayloadHooks::kNone          ? "off (sensor.payload_capture)"
               : payload == PayloadHooks::kSocketLayer ? "tp_btf/sock_send_length, sock_recv_length"
                                                       : "syscall hooks");

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

    PinDirectory* pins = options.pins.get();
    if (pins) {
        // kill_now's targets outlive the agent: an earlier agent's are reused.
        pins->pin_map_on_load(skel->maps.known_bad_files);
        pins->pin_map_on_load(skel->maps.known_bad_names);
        // Who SIGKILLed an earlier agent: read by the next one (agent_killer).
        pins->pin_map_on_load(skel->maps.agent_kills);
    }
    if (int err = gpuguard_bpf__load(skel); err) {
        return Unexpected{libbpf_error("loading BPF programs", err)};
    }
    if (pins) {
        for (const bpf_map* map :
             {skel->maps.known_bad_files, skel->maps.known_bad_names, skel->maps.agent_kills}) {
            pins->note_pinned_map(map);
        }
    }
    update_kill_now_armed(skel);  // reused maps may hold targets already
    impl->watch =
        std::make_unique<KernelWatch>(skel->maps.watched_tgids, skel->maps.watched_addrs,
                                      skel->maps.net_watch_tgids, &skel->bss->net_watch_armed);
    std::vector<std::string> pinned_names;
    for (const auto& hook : plan->hooks) {
        bpf_link* link = bpf_program__attach(hook.program);
        if (!link) return Unexpected{libbpf_error("attaching to " + hook.name(), -errno)};
        impl->links.emplace_back(link);
        impl->hooks.push_back(hook.name());
        if (!pins || !hook.pinned) continue;
        // Ours is attached; an earlier agent's, still running, goes now.
        const std::string name = std::string("sensor-") + bpf_program__name(hook.program);
        pinned_names.push_back(name);
        LinkPtr earlier(pins->open_link(name));
        if (auto pinned = pins->pin_link(link, name); !pinned) {
            log->warn("{}: this hook ends with the agent", pinned.error().message);
            continue;
        }
        if (earlier) ++pins->report().links_replaced;
    }
    if (pins) {
        // An earlier agent's hooks of another mode: ours do their work now.
        for (const auto& name : pins->link_names("sensor-")) {
            if (std::find(pinned_names.begin(), pinned_names.end(), name) != pinned_names.end()) {
                continue;
            }
            LinkPtr earlier(pins->open_link(name));
            pins->unpin_link(name);
            ++pins->report().links_replaced;
        }
    }

    impl->ring.reset(
        ring_buffer__new(bpf_map__fd(skel->maps.events), &Impl::on_record, impl.get(), nullptr));
    if (!impl->ring) return Unexpected{libbpf_error("creating ring buffer consumer", -errno)};

    log->info("sensor attached ({}): {} hook(s), ring buffer {} KiB", attach_mode_name(impl->mode),
              impl->hooks.size(), config.ring_buffer_kb);
    Sensor sensor(std::move(impl));
    for (const auto& device : config.extra_gpu_devices) {
        if (auto added = sensor.add_gpu_device(device); !added) return Unexpected{added.error()};
    }
    if (auto ports = sensor.set_watched_ports(config.watched_ports); !ports) {
        return Unexpected{ports.error()};
    }
    auto files = watch_patterns(config.watch_files, options.pins.get());
    if (!files) return Unexpected{files.error()};
    if (auto watched = sensor.set_watched_files(*files); !watched) {
        return Unexpected{watched.error()};
    }
    return sensor;
}

Status Sensor::add_gpu_device(const GpuDeviceNumber& device) {
    const gg_gpu_dev_key key = device_key(device);
    const gg_gpu_dev_val value{0, 0};
    if (int err = bpf_map__update_elem(impl_->skeleton->maps.gpu_devices, &key, sizeof(key), &value,
                                       sizeof(value), BPF_ANY);
        err) {
        return Unexpected{libbpf_error("registering GPU device " + device.to_string(), err)};
    }
    logger("sensor")->debug("GPU device {} ({}) registered", device.to_string(), device.driver);
    return {};
}

Status Sensor::remove_gpu_device(const GpuDeviceNumber& device) {
    const gg_gpu_dev_key key = device_key(device);
    if (int err = bpf_map__delete_elem(impl_->skeleton->maps.gpu_devices, &key, sizeof(key), 0);
        err) {
        return Unexpected{libbpf_error("removing GPU device " + device.to_string(), err)};
    }
    return {};
}

Status Sensor::wait(std::chrono::milliseconds timeout) {
    epoll_event ready{};
    const int n = epoll_wait(ring_buffer__epoll_fd(impl_->ring.get()), &ready, 1,
                             static_cast<int>(timeout.count()));
    if (n < 0 && errno != EINTR) return Unexpected{libbpf_error("waiting on ring buffer", -errno)};
    return {};
}

Status Sensor::set_watched_ports(const std::vector<uint16_t>& ports) {
    bpf_map* map = impl_->skeleton->maps.watched_ports;
    // Replace the whole set: delete what is not wanted any more, add the rest.
    for (uint16_t port : map_keys<uint16_t>(map)) {
        if (std::find(ports.begin(), ports.end(), port) == ports.end()) {
            bpf_map__delete_elem(map, &port, sizeof(port), 0);
        }
    }
    const uint8_t on = 1;
    for (uint16_t port : ports) {
        if (int err = bpf_map__update_elem(map, &port, sizeof(port), &on, sizeof(on), BPF_ANY);
            err) {
            return Unexpected{libbpf_error("watching port " + std::to_string(port), err)};
        }
    }
    return {};
}

Status Sensor::mark_gpu_process(uint32_t pid) {
    const gg_gpu_proc proc{0, GG_PROC_BOOTSTRAP, 0, 0, 0};
    int err = bpf_map__update_elem(impl_->skeleton->maps.gpu_tgids, &pid, sizeof(pid), &proc,
                                   sizeof(proc), BPF_NOEXIST);
    if (err && err != -EEXIST) {
        return Unexpected{
            libbpf_error("marking pid " + std::to_string(pid) + " as a GPU process", err)};
    }
    // Its socket payloads are sampled too (payload.bpf.c), as for a GPU open seen live.
    const uint8_t on = 1;
    err = bpf_map__update_elem(impl_->skeleton->maps.net_watch_tgids, &pid, sizeof(pid), &on,
                               sizeof(on), BPF_ANY);
    if (err) {
        return Unexpected{
            libbpf_error("marking pid " + std::to_string(pid) + " for payload sampling", err)};
    }
    return {};
}

Result<std::vector<IoctlAggregate>> Sensor::read_ioctl_stats() const {
    bpf_map* map = impl_->skeleton->maps.ioctl_stats;
    std::vector<IoctlAggregate> out;
    for (const auto& key : map_keys<gg_ioctl_key>(map)) {
        gg_ioctl_stats stats{};
        // An entry deleted between listing and lookup is simply skipped.
        if (bpf_map__lookup_elem(map, &key, sizeof(key), &stats, sizeof(stats), 0) == 0) {
            out.push_back(IoctlAggregate{key.tgid, key.dev >> 20, key.dev & ((1u << 20) - 1),
                                         key.cmd, stats.count, stats.first_ns, stats.last_ns});
        }
    }
    return out;
}

std::optional<NetSends> Sensor::net_sends(uint32_t pid) const {
    if (impl_->payload == PayloadHooks::kNone) return std::nullopt;
    gg_gpu_proc proc{};
    if (bpf_map__lookup_elem(impl_->skeleton->maps.gpu_tgids, &pid, sizeof(pid), &proc,
                             sizeof(proc), 0) != 0) {
        return std::nullopt;
    }
    return NetSends{proc.net_send_bytes, proc.net_sends};
}

Status Sensor::forget_process(uint32_t pid) {
    bpf_map* map = impl_->skeleton->maps.ioctl_stats;
    for (const auto& key : map_keys<gg_ioctl_key>(map)) {
        if (key.tgid == pid) bpf_map__delete_elem(map, &key, sizeof(key), 0);
    }
    bpf_map__delete_elem(impl_->skeleton->maps.gpu_tgids, &pid, sizeof(pid), 0);
    impl_->watch->forget_process(pid);
    return {};
}

Status Sensor::watch_process(uint32_t pid) { return impl_->watch->watch_process(pid); }

void Sensor::unwatch_process(uint32_t pid) { impl_->watch->forget_process(pid); }

Status Sensor::watch_address(const std::string& address, uint64_t expires_ns) {
    return impl_->watch->watch_address(address, expires_ns);
}

size_t Sensor::expire_watched_addresses(uint64_t now_ns) { return impl_->watch->expire(now_ns); }

Status Sensor::set_watched_files(const std::vector<WatchPattern>& patterns) {
    auto& maps = impl_->skeleton->maps;
    if (auto loaded = load_watch_files(maps.watch_paths, maps.watch_names, patterns); !loaded) {
        return loaded;
    }
    impl_->watch_files = patterns;
    return {};
}

const std::vector<WatchPattern>& Sensor::watched_files() const { return impl_->watch_files; }

bool Sensor::process_watched(uint32_t pid) const { return impl_->watch->process_watched(pid); }

WatchStats Sensor::watch_stats() const { return impl_->watch->stats(); }

namespace {

gg_name_key name_key(const std::string& comm) {
    gg_name_key key{};
    std::memcpy(key.comm, comm.data(), std::min(comm.size(), sizeof(key.comm) - 1));
    return key;
}

}  // namespace

Status Sensor::add_known_bad_file(uint64_t dev, uint64_t ino, uint32_t rule_id) {
    const gg_file_key key{dev, ino};
    const gg_known_bad value{rule_id, 0};
    gpuguard_bpf* skel = impl_->skeleton.get();
    if (int err = bpf_map__update_elem(skel->maps.known_bad_files, &key, sizeof(key), &value,
                                       sizeof(value), BPF_ANY);
        err) {
        return Unexpected{libbpf_error(
            "registering known-bad file " + std::to_string(dev) + ":" + std::to_string(ino), err)};
    }
    update_kill_now_armed(skel);
    return {};
}

Status Sensor::remove_known_bad_file(uint64_t dev, uint64_t ino) {
    const gg_file_key key{dev, ino};
    gpuguard_bpf* skel = impl_->skeleton.get();
    bpf_map__delete_elem(skel->maps.known_bad_files, &key, sizeof(key), 0);
    update_kill_now_armed(skel);
    return {};
}

Status Sensor::add_known_bad_name(const std::string& comm, uint32_t rule_id) {
    if (comm.empty() || comm.size() >= GG_COMM_LEN) {
        return fail(ErrorCode::kInvalidArgument,
                    "known-bad name '" + comm + "' must be 1-15 bytes (the kernel's comm)");
    }
    const gg_name_key key = name_key(comm);
    const gg_known_bad value{rule_id, 0};
    gpuguard_bpf* skel = impl_->skeleton.get();
    if (int err = bpf_map__update_elem(skel->maps.known_bad_names, &key, sizeof(key), &value,
                                       sizeof(value), BPF_ANY);
        err) {
        return Unexpected{libbpf_error("registering known-bad name " + comm, err)};
    }
    update_kill_now_armed(skel);
    return {};
}

Status Sensor::remove_known_bad_name(const std::string& comm) {
    const gg_name_key key = name_key(comm);
    gpuguard_bpf* skel = impl_->skeleton.get();
    bpf_map__delete_elem(skel->maps.known_bad_names, &key, sizeof(key), 0);
    update_kill_now_armed(skel);
    return {};
}

std::vector<std::pair<std::string, uint32_t>> Sensor::known_bad_names() const {
    std::vector<std::pair<std::string, uint32_t>> names;
    const bpf_map* map = impl_->skeleton->maps.known_bad_names;
    for (const auto& key : map_keys<gg_name_key>(map)) {
        gg_known_bad value{};
        if (bpf_map__lookup_elem(map, &key, sizeof(key), &value, sizeof(value), 0) != 0) continue;
        names.emplace_back(std::string(key.comm, strnlen(key.comm, sizeof(key.comm))),
                           value.rule_id);
    }
    return names;
}

std::optional<AgentKiller> Sensor::agent_killer(uint32_t agent_pid) const {
    gg_agent_kill kill{};
    if (bpf_map__lookup_elem(impl_->skeleton->maps.agent_kills, &agent_pid, sizeof(agent_pid),
                             &kill, sizeof(kill), 0) != 0) {
        return std::nullopt;
    }
    AgentKiller killer;
    killer.task.pid = kill.sender.tgid;
    killer.task.tid = kill.sender.pid;
    killer.task.ppid = kill.sender.ppid;
    killer.task.uid = kill.sender.uid;
    killer.task.gid = kill.sender.gid;
    killer.task.cgroup_id = kill.sender.cgroup_id;
    killer.task.comm.assign(kill.sender.comm, strnlen(kill.sender.comm, sizeof(kill.sender.comm)));
    killer.signal = kill.sig;
    return killer;
}

Result<size_t> Sensor::protect_own_bpf_objects() {
    if (auto synced = sync_bpf_objects(impl_->skeleton->maps.agent_bpf_objects, held_bpf_objects(),
                                       impl_->own_objects);
        !synced) {
        return Unexpected{synced.error()};
    }
    return impl_->own_objects.size();
}

Result<int> Sensor::poll(std::chrono::milliseconds timeout) {
    const int handled = ring_buffer__poll(impl_->ring.get(), static_cast<int>(timeout.count()));
    if (handled == -EINTR) return 0;
    if (handled < 0) return Unexpected{libbpf_error("polling ring buffer", handled)};
    return handled;
}

SensorStats Sensor::stats() const {
    SensorStats stats;
    stats.delivered = impl_->delivered;
    stats.decode_errors = impl_->decode_errors;
    const int cpus = libbpf_num_possible_cpus();
    if (cpus <= 0) return stats;
    std::vector<gg_counters> per_cpu(static_cast<size_t>(cpus));
    for (uint32_t type = 1; type < GG_EVENT_TYPE_MAX; ++type) {
        if (!record_type_name(type)) continue;
        SensorStats::PerType counts{record_type_name(type)};
        if (bpf_map__lookup_elem(impl_->skeleton->maps.counters, &type, sizeof(type),
                                 per_cpu.data(), per_cpu.size() * sizeof(gg_counters), 0) == 0) {
            for (const auto& cpu : per_cpu) {
                counts.emitted += cpu.emitted;
                counts.dropped += cpu.dropped;
            }
        }
        stats.kernel.push_back(counts);
    }
    return stats;
}

std::vector<uint32_t> Sensor::program_ids() const {
    std::vector<uint32_t> ids;
    bpf_program* program = nullptr;
    bpf_object__for_each_program(program, impl_->skeleton->obj) {
        const int fd = bpf_program__fd(program);
        if (fd < 0) continue;
        bpf_prog_info info{};
        uint32_t length = sizeof(info);
        if (bpf_obj_get_info_by_fd(fd, &info, &length) == 0) ids.push_back(info.id);
    }
    return ids;
}

std::vector<std::string> Sensor::attached_hooks() const { return impl_->hooks; }

AttachMode Sensor::attach_mode() const { return impl_->mode; }

const std::string& Sensor::attach_reason() const { return impl_->reason; }

std::string_view Sensor::payload_hooks() const {
    switch (impl_->payload) {
        case PayloadHooks::kSocketLayer:
            return "socket_layer";
        case PayloadHooks::kSyscalls:
            return "syscalls";
        case PayloadHooks::kNone:
            break;
    }
    return "off";
}

}  // namespace gpuguard::agent
