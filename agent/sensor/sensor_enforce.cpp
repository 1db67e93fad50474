#include "gpuguard/sensor/sensor_enforce.h"

#include <cerrno>
#include <cstring>
#include <map>

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "events.h"
#include "gpuguard/common/cgroup.h"
#include "gpuguard/common/clock.h"
#include "gpuguard/common/ip_address.h"
#include "gpuguard/common/logging.h"
#include "gpuguard/sensor/bpf_pins.h"
#include "gpuguard/sensor/sensor_support.h"
#include "gpuguard_enforce_bpf.skel.h"
#include "libbpf_handles.h"

namespace gpuguard::agent {
namespace {

using EnforceSkeletonPtr = LibbpfPtr<gpuguard_enforce_bpf, gpuguard_enforce_bpf__destroy>;

std::string normalise_cgroup(const std::string& path) {
    if (path.empty() || path.front() != '/') return "/" + path;
    return path;
}

Result<gg_addr_key> address_key(const std::string& ip) {
    auto canonical = canonical_ip(ip);
    if (!canonical) return Unexpected{canonical.error()};
    gg_addr_key key{};
    if (canonical->second == 4) {
        key.addr[10] = 0xff;
        key.addr[11] = 0xff;
        inet_pton(AF_INET, canonical->first.c_str(), &key.addr[12]);
    } else {
        inet_pton(AF_INET6, canonical->first.c_str(), key.addr);
    }
    return key;
}

}  // namespace

// Pinned link names (agent/bpf_pins.h).
std::string device_link_name(const std::string& cgroup) { return "dev@" + escape_pin_name(cgroup); }
std::string connect_link_name(int family, const std::string& cgroup) {
    return (family == 4 ? "connect4@" : "connect6@") + escape_pin_name(cgroup);
}

struct KernelEnforcer::Impl {
    EnforceSkeletonPtr skeleton;
    std::shared_ptr<PinDirectory> pins;  // null: nothing outlives this object
    std::string cgroup2_root;
    bool lsm = false;
    LinkPtr lsm_link;
    std::map<std::string, LinkPtr> device_links;                       // cgroup path -> cgroup/dev
    std::map<std::string, std::pair<LinkPtr, LinkPtr>> connect_links;  // -> connect4, connect6

    Result<int> open_cgroup(const std::string& path) const {
        const std::string dir = cgroup2_root + normalise_cgroup(path);
        const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
            const int err = errno;
            return fail(err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo,
                        "cgroup " + dir + ": " + std::strerror(err), err);
        }
        return fd;
    }

    Result<LinkPtr> attach(bpf_program* program, const std::string& path, const char* what) const {
        auto fd = open_cgroup(path);
        if (!fd) return Unexpected{fd.error()};
        bpf_link* link = bpf_program__attach_cgroup(program, *fd);
        const int err = errno;
        close(*fd);
        if (!link) {
            return Unexpected{
                libbpf_error(std::string("attaching ") + what + " to cgroup " + path, -err)};
        }
        return LinkPtr(link);
    }

    // Pins `link` as `name`; a failure only means this denial ends with the agent.
    void pin(bpf_link* link, const std::string& name) const {
        if (!pins) return;
        if (auto pinned = pins->pin_link(link, name); !pinned) {
            logger("enforcer")->warn("{}: it ends with the agent", pinned.error().message);
        }
    }

    // An earlier agent's pinned cgroup link, now running `program` (swapped
    // in place: the cgroup is never without it); null when none or gone.
    LinkPtr adopt(const std::string& name, bpf_program* program) const {
        LinkPtr link(pins->open_link(name));
        if (!link) return nullptr;
        if (int err = bpf_link__update_program(link.get(), program); err) {
            // ENOLINK: its cgroup was removed meanwhile. Unpinned, closed: gone.
            logger("enforcer")
                ->info("pinned link {} not taken over ({}): dropped", name, errno_text(-err));
            pins->unpin_link(name);
            return nullptr;
        }
        ++pins->report().links_adopted;
        return link;
    }

    // The cgroup links an earlier agent pinned, taken over.
    void adopt_cgroup_links() {
        const auto log = logger("enforcer");
        auto* progs = &skeleton->progs;
        for (const auto& name : pins->link_names("dev@")) {
            const std::string cgroup = unescape_pin_name(name.substr(4));
            if (auto link = adopt(name, progs->gg_cgroup_dev)) {
                device_links.emplace(cgroup, std::move(link));
                log->info("deny_gpu: GPU devices still denied to cgroup {} (taken over)", cgroup);
            }
        }
        for (const auto& name : pins->link_names("connect4@")) {
            const std::string cgroup = unescape_pin_name(name.substr(9));
            auto v4 = adopt(name, progs->gg_cgroup_connect4);
            auto v6 = adopt(connect_link_name(6, cgroup), progs->gg_cgroup_connect6);
            if (v4 && v6) {
                connect_links.emplace(cgroup, std::make_pair(std::move(v4), std::move(v6)));
                log->info("block_ip: cgroup/connect4/6 on cgroup {} (taken over)", cgroup);
            } else {
                pins->unpin_link(name);
                pins->unpin_link(connect_link_name(6, cgroup));
            }
        }
    }
};

KernelEnforcer::KernelEnforcer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KernelEnforcer::~KernelEnforcer() = default;

Result<std::unique_ptr<KernelEnforcer>> KernelEnforcer::open(const KernelEnforcerOptions& options) {
    install_libbpf_logger();
    if (auto privileges = check_privileges(); !privileges) return Unexpected{privileges.error()};
    auto impl = std::make_unique<Impl>();
    impl->cgroup2_root = options.cgroup2_root.empty() ? find_cgroup2_mount() : options.cgroup2_root;
    if (impl->cgroup2_root.empty()) {
        return fail(ErrorCode::kNotFound,
                    "no cgroup v2 mount in /proc/mounts: cgroup enforcement needs one");
    }
    LIBBPF_OPTS(bpf_object_open_opts, open_opts);
    if (!options.btf_path.empty()) open_opts.btf_custom_path = options.btf_path.c_str();
    impl->skeleton.reset(gpuguard_enforce_bpf__open_opts(&open_opts));
    if (!impl->skeleton) {
        return Unexpected{libbpf_error("opening BPF object gpuguard_enforce_bpf", -errno)};
    }
    auto* skel = impl->skeleton.get();
    bpf_program__set_autoload(skel->progs.gg_lsm_file_open, options.load_lsm);
    impl->pins = options.pins;
    if (impl->pins) {
        // What is denied outlives the agent: an earlier agent's sets are reused.
        for (bpf_map* map : {skel->maps.deny_devices, skel->maps.blocked_addrs,
                             skel->maps.deny_cgroups, skel->maps.deny_tgids}) {
            impl->pins->pin_map_on_load(map);
        }
    }
    if (int err = gpuguard_enforce_bpf__load(skel); err) {
        return Unexpected{libbpf_error(options.load_lsm
                                           ? "loading enforcement programs (with BPF LSM)"
                                           : "loading enforcement programs",
                                       err)};
    }
    if (impl->pins) {
        for (const bpf_map* map : {skel->maps.deny_devices, skel->maps.blocked_addrs,
                                   skel->maps.deny_cgroups, skel->maps.deny_tgids}) {
            impl->pins->note_pinned_map(map);
        }
    }
    if (options.load_lsm) {
        bpf_link* link = bpf_program__attach_lsm(skel->progs.gg_lsm_file_open);
        if (!link) return Unexpected{libbpf_error("attaching lsm/file_open", -errno)};
        impl->lsm_link.reset(link);
        impl->lsm = true;
        if (impl->pins) {
            LinkPtr earlier(impl->pins->open_link("lsm"));  // detached once ours is pinned
            impl->pin(link, "lsm");
            if (earlier) ++impl->pins->report().links_replaced;
        }
    }
    if (impl->pins) impl->adopt_cgroup_links();
    logger("enforcer")
        ->info(
            "kernel enforcement loaded (cgroup/dev, cgroup/connect4/6{}), cgroup "
            "v2 at {}",
            impl->lsm ? ", lsm/file_open" : "", impl->cgroup2_root);
    return std::unique_ptr<KernelEnforcer>(new KernelEnforcer(std::move(impl)));
}

Status KernelEnforcer::set_denied_devices(const std::vector<GpuDeviceNumber>& devices) {
    bpf_map* map = impl_->skeleton->maps.deny_devices;
    // Replace the set: clear, then add.
    gg_gpu_dev_key key{}, next{};
    const void* previous = nullptr;
    std::vector<gg_gpu_dev_key> old;
    while (bpf_map__get_next_key(map, previous, &next, sizeof(next)) == 0) {
        old.push_back(next);
        key = next;
        previous = &key;
    }
    for (const auto& stale : old) bpf_map__delete_elem(map, &stale, sizeof(stale), 0);
    for (const auto& device : devices) {
        const gg_gpu_dev_key entry{device.major,
                                   device.minor ? *device.minor : GG_GPU_DEV_ANY_MINOR};
        const gg_gpu_dev_val value{0, 0};
        if (int err =
                bpf_map__update_elem(map, &entry, sizeof(entry), &value, sizeof(value), BPF_ANY);
            err) {
            return Unexpected{libbpf_error("denying device " + device.to_string(), err)};
        }
    }
    return {};
}

Status KernelEnforcer::deny_cgroup(const std::string& cgroup_path) {
    const std::string path = normalise_cgroup(cgroup_path);
    if (path == "/") {
        return fail(ErrorCode::kInvalidArgument, "refusing to deny GPUs to the root cgroup");
    }
    if (!impl_->device_links.contains(path)) {
        auto link = impl_->attach(impl_->skeleton->progs.gg_cgroup_dev, path, "cgroup/dev");
        if (!link) return Unexpected{link.error()};
        impl_->pin(link->get(), device_link_name(path));
        impl_->device_links.emplace(path, std::move(*link));
    }
    if (impl_->lsm) {
        struct stat st {};
        const std::string dir = impl_->cgroup2_root + path;
        if (stat(dir.c_str(), &st) == 0) {
            const uint64_t id = st.st_ino;  // a cgroup v2 directory's inode is its cgroup id
            const uint8_t on = 1;
            bpf_map__update_elem(impl_->skeleton->maps.deny_cgroups, &id, sizeof(id), &on,
                                 sizeof(on), BPF_ANY);
        }
    }
    return {};
}

Status KernelEnforcer::allow_cgroup(const std::string& cgroup_path) {
    const std::string path = normalise_cgroup(cgroup_path);
    if (impl_->pins) impl_->pins->unpin_link(device_link_name(path));
    impl_->device_links.erase(path);
    if (impl_->lsm) {
        struct stat st {};
        if (stat((impl_->cgroup2_root + path).c_str(), &st) == 0) {
            const uint64_t id = st.st_ino;
            bpf_map__delete_elem(impl_->skeleton->maps.deny_cgroups, &id, sizeof(id), 0);
        }
    }
    return {};
}

std::string KernelEnforcer::name() const {
    return impl_->lsm ? "cgroup_device+bpf_lsm" : "cgroup_device";
}

Status KernelEnforcer::deny_process(uint32_t pid) {
    if (!impl_->lsm) {
        return fail(ErrorCode::kUnsupported,
                    "per-process GPU deny needs BPF LSM, which this kernel does not run");
    }
    const uint8_t on = 1;
    if (int err = bpf_map__update_elem(impl_->skeleton->maps.deny_tgids, &pid, sizeof(pid), &on,
                                       sizeof(on), BPF_ANY);
        err) {
        return Unexpected{libbpf_error("denying GPUs to pid " + std::to_string(pid), err)};
    }
    return {};
}

Status KernelEnforcer::attach_connect_filter(const std::string& cgroup_path) {
    const std::string path = normalise_cgroup(cgroup_path);
    if (impl_->connect_links.contains(path)) return {};
    auto v4 = impl_->attach(impl_->skeleton->progs.gg_cgroup_connect4, path, "cgroup/connect4");
    if (!v4) return Unexpected{v4.error()};
    auto v6 = impl_->attach(impl_->skeleton->progs.gg_cgroup_connect6, path, "cgroup/connect6");
    if (!v6) return Unexpected{v6.error()};
    impl_->pin(v4->get(), connect_link_name(4, path));
    impl_->pin(v6->get(), connect_link_name(6, path));
    impl_->connect_links.emplace(path, std::make_pair(std::move(*v4), std::move(*v6)));
    return {};
}

Status KernelEnforcer::block_address(const std::string& ip, std::chrono::seconds ttl) {
    auto key = address_key(ip);
    if (!key) return Unexpected{key.error()};
    const gg_blocked_addr value{
        ttl.count() > 0 ? monotonic_ns() + static_cast<uint64_t>(ttl.count()) * 1'000'000'000ull
                        : 0};
    if (int err = bpf_map__update_elem(impl_->skeleton->maps.blocked_addrs, &*key, sizeof(*key),
                                       &value, sizeof(value), BPF_ANY);
        err) {
        return Unexpected{libbpf_error("blocking " + ip + " in the connect filter", err)};
    }
    return {};
}

Status KernelEnforcer::unblock_address(const std::string& ip) {
    auto key = address_key(ip);
    if (!key) return Unexpected{key.error()};
    bpf_map__delete_elem(impl_->skeleton->maps.blocked_addrs, &*key, sizeof(*key), 0);
    return {};
}

bool KernelEnforcer::lsm_loaded() const { return impl_->lsm; }

std::vector<std::string> KernelEnforcer::denied_cgroups() const {
    std::vector<std::string> cgroups;
    for (const auto& [path, link] : impl_->device_links) cgroups.push_back(path);
    return cgroups;
}

KernelEnforcerStats KernelEnforcer::stats() const {
    KernelEnforcerStats stats;
    const int cpus = libbpf_num_possible_cpus();
    if (cpus <= 0) return stats;
    uint64_t* slots[] = {&stats.denied_device, &stats.denied_connect4, &stats.denied_connect6,
                         &stats.denied_lsm_open};
    std::vector<uint64_t> per_cpu(static_cast<size_t>(cpus));
    for (uint32_t slot = 0; slot < GG_DENIED_MAX; ++slot) {
        if (bpf_map__lookup_elem(impl_->skeleton->maps.enforce_counters, &slot, sizeof(slot),
                                 per_cpu.data(), per_cpu.size() * sizeof(uint64_t), 0) == 0) {
            for (uint64_t count : per_cpu) *slots[slot] += count;
        }
    }
    return stats;
}

}  // namespace gpuguard::agent
