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
#include "payload.h"
#include "sensor_impl.h"

namespace gpuguard::agent {
namespace {

gg_gpu_dev_key device_key(const GpuDeviceNumber& device) {
    return gg_gpu_dev_key{device.major, device.minor ? *device.minor : GG_GPU_DEV_ANY_MINOR};
}

}  // namespace

void update_kill_now_armed(gpuguard_bpf* skel) {
    uint32_t armed = 0;
    if (!map_keys<gg_file_key>(skel->maps.known_bad_files).empty()) armed |= GG_KILL_ARMED_FILES;
    if (!map_keys<gg_name_key>(skel->maps.known_bad_names).empty()) armed |= GG_KILL_ARMED_NAMES;
    skel->bss->kill_now_armed = armed;
}

uint64_t SensorStats::total_dropped() const {
    uint64_t total = 0;
    for (const auto& type : kernel) total += type.dropped;
    return total;
}

Sensor::Sensor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Sensor::Sensor(Sensor&&) noexcept = default;
Sensor& Sensor::operator=(Sensor&&) noexcept = default;
Sensor::~Sensor() = default;

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
    const gg_gpu_proc proc{0, GG_PROC_BOOTSTRAP, 0, 0, 0, 0, 0};
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
                             sizeof(proc), 0) == 0) {
        return NetSends{proc.net_send_bytes, proc.net_sends, proc.net_recv_bytes, proc.net_recvs};
    }
    // A watched process (busy, or flagged): counted since it was watched.
    gg_watched_proc watched{};
    if (bpf_map__lookup_elem(impl_->skeleton->maps.watched_tgids, &pid, sizeof(pid), &watched,
                             sizeof(watched), 0) == 0) {
        return NetSends{watched.net_send_bytes, watched.net_sends, watched.net_recv_bytes,
                        watched.net_recvs};
    }
    return std::nullopt;
}

std::vector<FlowReading> Sensor::read_flow_shapes() const {
    std::vector<FlowReading> out;
    if (impl_->payload == PayloadHooks::kNone) return out;
    bpf_map* map = impl_->skeleton->maps.flow_shapes;
    const auto gaps = [](const uint32_t(&buckets)[GG_FLOW_GAP_BUCKETS]) {
        std::vector<FlowGap> listed;
        for (uint32_t b = 0; b < GG_FLOW_GAP_BUCKETS; ++b) {
            if (buckets[b] != 0) listed.push_back(FlowGap{1u << b, buckets[b]});
        }
        return listed;
    };
    for (const auto& key : map_keys<gg_flow_key>(map)) {
        gg_flow_shape shape{};
        // A flow evicted between listing and lookup is simply skipped.
        if (bpf_map__lookup_elem(map, &key, sizeof(key), &shape, sizeof(shape), 0) != 0) continue;
        FlowReading reading;
        reading.pid = key.tgid;
        reading.first_ns = shape.first_ns;
        reading.last_send_ns = shape.last_out_ns;
        reading.last_receive_ns = shape.last_in_ns;
        Flow& flow = reading.counts;
        flow.flow = key.sock;
        flow.address = kernel_address_text(shape.family, shape.remote_addr);
        flow.port = shape.remote_port;
        flow.bytes_out = shape.bytes_out;
        flow.bytes_in = shape.bytes_in;
        flow.sends = shape.sends;
        flow.receives = shape.receives;
        flow.send_bursts = shape.send_bursts;
        flow.receive_bursts = shape.receive_bursts;
        flow.pushes = shape.pushes;
        flow.replies = shape.replies;
        flow.send_gaps = gaps(shape.send_gaps);
        flow.receive_gaps = gaps(shape.receive_gaps);
        out.push_back(std::move(reading));
    }
    return out;
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
