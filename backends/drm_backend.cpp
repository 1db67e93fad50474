// The DRM backend: cards under /sys/class/drm, device metrics from vendor
// sysfs (drm_sysfs.cpp), per-process usage from the fdinfo of the (pid, fd)
// pairs the caller names plus amdgpu's KFD process list.
#include <algorithm>
#include <map>
#include <set>
#include <system_error>

#include "backends/drm_cards.h"
#include "backends/fdinfo.h"
#include "gpuguard/backends/backends.h"
#include "gpuguard/common/logging.h"

namespace gpuguard::backends {
namespace {

namespace fs = std::filesystem;
using detail::DrmCard;
using detail::DrmFamily;
using detail::MetricFiles;

std::optional<DeviceNumber> parse_device_number(std::string_view text) {
    text = detail::trim(text);
    const auto colon = text.find(':');
    if (colon == std::string_view::npos) return std::nullopt;
    const auto major = detail::parse_u64(text.substr(0, colon));
    const auto minor = detail::parse_u64(text.substr(colon + 1));
    if (!major || !minor || *major > 0xfff || *minor > 0xfffff) return std::nullopt;
    return DeviceNumber{static_cast<uint32_t>(*major), static_cast<uint32_t>(*minor)};
}

std::map<std::string, std::string> parse_uevent(std::string_view text) {
    std::map<std::string, std::string> values;
    size_t pos = 0;
    while (pos < text.size()) {
        const auto end = std::min(text.find('\n', pos), text.size());
        const auto line = text.substr(pos, end - pos);
        pos = end + 1;
        const auto eq = line.find('=');
        if (eq != std::string_view::npos) {
            values[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
        }
    }
    return values;
}

// "card12" -> 12; nullopt for connectors ("card0-DP-1") and render nodes.
std::optional<uint64_t> card_number(const std::string& name) {
    if (name.rfind("card", 0) != 0) return std::nullopt;
    return detail::parse_u64(std::string_view(name).substr(4));
}

Vendor vendor_of(const std::string& driver, const std::map<std::string, std::string>& uevent) {
    if (driver == "amdgpu" || driver == "radeon") return Vendor::kAmd;
    if (driver == "i915" || driver == "xe") return Vendor::kIntel;
    if (driver == "asahi") return Vendor::kApple;
    if (driver == "msm") return Vendor::kQualcomm;
    if (driver == "panfrost" || driver == "panthor" || driver == "lima") return Vendor::kArm;
    if (const auto id = uevent.find("PCI_ID"); id != uevent.end()) {
        const std::string vendor_id = id->second.substr(0, 4);
        if (vendor_id == "1002") return Vendor::kAmd;
        if (vendor_id == "8086") return Vendor::kIntel;
        if (vendor_id == "10DE" || vendor_id == "10de") return Vendor::kNvidia;
    }
    return Vendor::kOther;
}

class DrmBackend final : public GpuBackend {
  public:
    explicit DrmBackend(DrmOptions options) : options_(std::move(options)) {
        if (!options_.clock) {
            options_.clock = [] {
                return std::chrono::duration_cast<std::chrono::nanoseconds>(
                    std::chrono::steady_clock::now().time_since_epoch());
            };
        }
    }

    std::string_view name() const override { return "drm"; }

    Result<std::vector<GpuDevice>> devices() override {
        auto status = discover();
        if (!status)
            return status.error().code == ErrorCode::kNotFound
                       ? Result<std::vector<GpuDevice>>(std::vector<GpuDevice>{})
                       : Result<std::vector<GpuDevice>>(Unexpected{status.error()});
        std::vector<GpuDevice> out;
        for (const auto& card : cards_) out.push_back(card.device);
        return out;
    }

    Result<GpuSamples> sample_gpus() override {
        if (!discovered_) (void)devices();
        GpuSamples samples;
        const auto now = options_.clock();
        for (auto& card : cards_) {
            GpuSample sample;
            sample.gpu = card.device.index;
            MetricFiles files(sample.problems);
            switch (card.family) {
                case DrmFamily::kAmdgpu:
                    detail::read_amdgpu_sample(card, files, sample);
                    break;
                case DrmFamily::kI915:
                case DrmFamily::kXe:
                    detail::read_intel_sample(card, files, sample, now);
                    break;
                case DrmFamily::kGeneric:
                    detail::read_generic_sample(card, files, sample);
                    break;
            }
            samples.gpus.push_back(std::move(sample));
        }
        return samples;
    }

    Result<ProcessSamples> sample_processes(std::span<const ProcessFd> fds) override {
        if (!discovered_) (void)devices();
        ProcessSamples result;
        if (cards_.empty()) return result;
        const auto now = options_.clock();

        // One entry per DRM client: fds shared by dup() or fork() name the
        // same client id and count once, for the lowest pid holding it.
        struct Client {
            pid_t pid;
            uint32_t gpu;
            detail::FdinfoRecord record;
        };
        std::map<std::string, Client> clients;
        for (const auto& fd : fds) {
            const fs::path path =
                options_.proc_root / std::to_string(fd.pid) / "fdinfo" / std::to_string(fd.fd);
            auto text = detail::read_small_file(path);
            if (!text) {
                // The process exited or closed the fd since the sensor saw it:
                // nothing to report. Anything else is worth a line.
                if (text.error().code != ErrorCode::kNotFound) {
                    result.problems.push_back(text.error().message);
                }
                continue;
            }
            auto parsed = detail::parse_fdinfo(*text, path.string());
            if (!parsed) {
                result.problems.push_back(parsed.error().message);
                continue;
            }
            if (!parsed->has_value()) continue;  // fd now names something else
            detail::FdinfoRecord& record = **parsed;
            const DrmCard* card = card_for(record, fd.device);
            if (!card) continue;
            const std::string key =
                record.driver + "/" + card->device.bus_id + "/" +
                (record.client_id ? std::to_string(*record.client_id)
                                  : "pid" + std::to_string(fd.pid) + "fd" + std::to_string(fd.fd));
            auto [it, inserted] = clients.try_emplace(key, Client{fd.pid, card->device.index, {}});
            if (inserted || fd.pid < it->second.pid) {
                it->second.pid = fd.pid;
                it->second.record = std::move(record);
            }
        }

        struct Totals {
            std::optional<uint64_t> memory;
            std::optional<uint64_t> busy_ns;
            std::map<std::string, double> engine_percent;
            bool any_rate = false;
            bool kfd = false;
            bool fdinfo = false;
        };
        std::map<std::pair<pid_t, uint32_t>, Totals> per_process;
        for (const auto& [key, client] : clients) {
            const auto usage = tracker_.update(key, client.record, now);
            Totals& totals = per_process[{client.pid, client.gpu}];
            totals.fdinfo = true;
            if (const auto memory = detail::device_memory_bytes(client.record)) {
                totals.memory = totals.memory.value_or(0) + *memory;
            }
            if (const auto busy = detail::engine_busy_ns(client.record)) {
                totals.busy_ns = totals.busy_ns.value_or(0) + *busy;
            }
            for (const auto& [engine, percent] : usage.percent) {
                totals.engine_percent[engine] += percent;
                totals.any_rate = true;
            }
        }
        tracker_.end_round();

        read_kfd_processes(result, [&](pid_t pid, uint32_t gpu, uint64_t vram) {
            Totals& totals = per_process[{pid, gpu}];
            totals.kfd = true;
            // KFD buffers are also GEM objects of the render-node client on
            // recent kernels: take the larger figure rather than adding.
            totals.memory = std::max(totals.memory.value_or(0), vram);
        });

        for (const auto& [where, totals] : per_process) {
            ProcessSample sample;
            sample.pid = where.first;
            sample.gpu = where.second;
            sample.memory_bytes = totals.memory;
            sample.engine_busy_ns = totals.busy_ns;
            if (totals.any_rate) {
                double busiest = 0;
                for (const auto& [engine, percent] : totals.engine_percent) {
                    busiest = std::max(busiest, percent);
                }
                sample.compute_percent = std::min(busiest, 100.0);
            }
            sample.kfd_compute = totals.kfd;
            sample.source = totals.fdinfo && totals.kfd ? "fdinfo+kfd"
                            : totals.kfd                ? "kfd"
                                                        : "fdinfo";
            result.processes.push_back(std::move(sample));
        }
        return result;
    }

  private:
    Status discover() {
        discovered_ = true;
        cards_.clear();
        kfd_gpus_.clear();
        const fs::path class_drm = options_.sysfs_root / "class" / "drm";
        std::error_code ec;
        fs::directory_iterator it(class_drm, ec);
        if (ec) {
            return fail(
                ec == std::errc::no_such_file_or_directory ? ErrorCode::kNotFound : ErrorCode::kIo,
                class_drm.string() + ": " + ec.message(), ec.value());
        }
        std::vector<std::pair<uint64_t, fs::path>> found;
        for (const auto& entry : it) {
            if (const auto number = card_number(entry.path().filename().string())) {
                found.emplace_back(*number, entry.path());
            }
        }
        std::sort(found.begin(), found.end());
        const auto kfd_node =
            read_device_number(options_.sysfs_root / "class" / "kfd" / "kfd" / "dev");
        for (const auto& [number, card_dir] : found) {
            auto card = describe(card_dir);
            if (!card) continue;
            card->device.index = static_cast<uint32_t>(cards_.size());
            if (card->family == DrmFamily::kAmdgpu && kfd_node) {
                card->device.device_numbers.push_back(*kfd_node);
            }
            cards_.push_back(std::move(*card));
        }
        read_kfd_topology();
        return {};
    }

    std::optional<DeviceNumber> read_device_number(const fs::path& path) {
        auto text = detail::read_small_file(path);
        if (!text) return std::nullopt;
        const auto number = parse_device_number(*text);
        if (!number) {
            logger("backends")
                ->warn("{}: not MAJOR:MINOR: {}", path.string(), detail::quote_for_message(*text));
        }
        return number;
    }

    std::optional<DrmCard> describe(const fs::path& card_dir) {
        DrmCard card;
        card.card_dir = card_dir;
        card.device_dir = card_dir / "device";
        auto uevent = detail::read_small_file(card.device_dir / "uevent");
        if (!uevent) return std::nullopt;
        card.uevent = parse_uevent(*uevent);
        const auto driver = card.uevent.find("DRIVER");
        if (driver == card.uevent.end()) return std::nullopt;  // no driver bound
        const std::string& name = driver->second;
        if (name == "nvidia" || name == "nvidia-drm") return std::nullopt;  // NVML's
        if (name == "amdgpu") {
            if (!options_.amd) return std::nullopt;
            card.family = DrmFamily::kAmdgpu;
        } else if (name == "i915" || name == "xe") {
            if (!options_.intel) return std::nullopt;
            card.family = name == "xe" ? DrmFamily::kXe : DrmFamily::kI915;
        } else {
            if (!options_.generic) return std::nullopt;
            card.family = DrmFamily::kGeneric;
        }
        const auto card_node = read_device_number(card_dir / "dev");
        if (!card_node) return std::nullopt;
        card.card_node = *card_node;

        GpuDevice& device = card.device;
        device.backend = "drm";
        device.driver = name;
        device.vendor = vendor_of(name, card.uevent);
        device.device_numbers.push_back(card.card_node);
        std::error_code ec;
        for (const auto& entry : fs::directory_iterator(card.device_dir / "drm", ec)) {
            if (entry.path().filename().string().rfind("renderD", 0) != 0) continue;
            card.render_node = read_device_number(entry.path() / "dev");
            if (card.render_node) device.device_numbers.push_back(*card.render_node);
        }
        for (const auto& entry : fs::directory_iterator(card.device_dir / "hwmon", ec)) {
            if (entry.path().filename().string().rfind("hwmon", 0) == 0) {
                card.hwmon_dir = entry.path();
                break;
            }
        }
        if (const auto slot = card.uevent.find("PCI_SLOT_NAME"); slot != card.uevent.end()) {
            device.bus_id = slot->second;
        } else {
            const auto target = fs::canonical(card.device_dir, ec);
            device.bus_id = ec ? card_dir.filename().string() : target.filename().string();
        }
        std::vector<std::string> ignored;
        MetricFiles files(ignored);
        const auto read_line = [&](const fs::path& path) {
            return std::string(detail::trim(files.text(path).value_or("")));
        };
        device.model = read_line(card.device_dir / "product_name");  // amdgpu FRU
        device.uuid = read_line(card.device_dir / "unique_id");      // amdgpu
        device.serial = read_line(card.device_dir / "serial_number");
        if (device.model.empty()) {
            if (const auto id = card.uevent.find("PCI_ID"); id != card.uevent.end()) {
                device.model = std::string(to_string(device.vendor)) + " GPU [" + id->second + "]";
            } else if (const auto compat = card.uevent.find("OF_COMPATIBLE_0");
                       compat != card.uevent.end()) {
                device.model = compat->second;  // "apple,agx-g13g"
            } else {
                device.model = name;
            }
        }
        // Out-of-tree (DKMS) drivers have a module version; in-tree ones are
        // versioned by the kernel.
        device.driver_version = read_line(options_.sysfs_root / "module" / name / "version");
        if (device.driver_version.empty()) {
            device.driver_version = read_line(options_.proc_root / "sys" / "kernel" / "osrelease");
        }
        return card;
    }

    // kfd_topology.c: topology/nodes/N/gpu_id ("%u\n", 0 for CPU nodes) and
    // properties ("drm_render_minor %u\n" among others).
    void read_kfd_topology() {
        std::error_code ec;
        const fs::path nodes = options_.sysfs_root / "class" / "kfd" / "kfd" / "topology" / "nodes";
        for (const auto& node : fs::directory_iterator(nodes, ec)) {
            auto gpu_id = detail::read_small_file(node.path() / "gpu_id");
            auto properties = detail::read_small_file(node.path() / "properties");
            if (!gpu_id || !properties) continue;
            const auto id = detail::parse_u64(*gpu_id);
            if (!id || *id == 0) continue;
            const std::string_view text = *properties;
            const auto key = text.find("drm_render_minor ");
            if (key == std::string_view::npos) continue;
            const auto end = text.find('\n', key);
            const auto minor = detail::parse_u64(text.substr(key + 17, end - key - 17));
            if (!minor) continue;
            for (const auto& card : cards_) {
                if (card.family == DrmFamily::kAmdgpu && card.render_node &&
                    card.render_node->minor == *minor) {
                    kfd_gpus_[*id] = card.device.index;
                }
            }
        }
    }

    // kfd_process.c: proc/<pid>/vram_<gpuid> ("%llu\n" bytes), one directory
    // per process with KFD open.
    template <typename Visit>
    void read_kfd_processes(ProcessSamples& result, Visit&& visit) {
        if (kfd_gpus_.empty()) return;
        std::error_code ec;
        const fs::path procs = options_.sysfs_root / "class" / "kfd" / "kfd" / "proc";
        for (const auto& process : fs::directory_iterator(procs, ec)) {
            const auto pid = detail::parse_u64(process.path().filename().string());
            if (!pid) continue;
            for (const auto& [gpu_id, index] : kfd_gpus_) {
                const fs::path file = process.path() / ("vram_" + std::to_string(gpu_id));
                auto text = detail::read_small_file(file);
                if (!text) {
                    if (text.error().code != ErrorCode::kNotFound) {
                        result.problems.push_back(text.error().message);
                    }
                    continue;
                }
                const auto bytes = detail::parse_u64(*text);
                if (!bytes) {
                    result.problems.push_back(file.string() + ": not an unsigned integer: " +
                                              detail::quote_for_message(*text));
                    continue;
                }
                visit(static_cast<pid_t>(*pid), index, *bytes);
            }
        }
    }

    // Which card a client is on: the node number the sensor saw, else the
    // PCI address fdinfo names, else the only card of that driver.
    const DrmCard* card_for(const detail::FdinfoRecord& record, DeviceNumber node) const {
        if (node.known()) {
            for (const auto& card : cards_) {
                if (card.card_node == node || (card.render_node && *card.render_node == node)) {
                    return &card;
                }
            }
        }
        if (!record.pdev.empty()) {
            for (const auto& card : cards_) {
                if (card.device.bus_id == record.pdev) return &card;
            }
            return nullptr;
        }
        const DrmCard* only = nullptr;
        for (const auto& card : cards_) {
            if (card.device.driver != record.driver) continue;
            if (only) return nullptr;
            only = &card;
        }
        return only;
    }

    DrmOptions options_;
    bool discovered_ = false;
    std::vector<DrmCard> cards_;
    std::map<uint64_t, uint32_t> kfd_gpus_;  // KFD gpu_id -> device index
    detail::ClientTracker tracker_;
};

}  // namespace

std::unique_ptr<GpuBackend> make_drm_backend(const DrmOptions& options) {
    return std::make_unique<DrmBackend>(options);
}

}  // namespace gpuguard::backends
