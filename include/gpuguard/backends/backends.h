// GPU telemetry: which GPUs this host has, how busy they are, and how much of
// each one every process holds. One small interface (GpuBackend) with one
// implementation per source: NVML (dlopen'ed, never linked), DRM sysfs +
// fdinfo (amdgpu with KFD, i915, xe, and any driver that follows the
// kernel's drm-usage-stats spec: asahi, msm, panfrost, ...), and a scripted
// fake for tests. TelemetrySampler runs the backends on its own thread.
//
// Every metric is std::optional: absent means the driver or hardware does
// not report it, never zero. Nothing here throws; failures are Results.
#pragma once

#include <atomic>
#include <chrono>
#include <compare>
#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <sys/types.h>

#include "gpuguard/common/result.h"

namespace gpuguard::backends {

enum class Vendor { kNvidia, kAmd, kIntel, kApple, kQualcomm, kArm, kOther };

// "nvidia", "amd", "intel", "apple", "qualcomm", "arm", "other".
const char* to_string(Vendor vendor);

// A character device number (the inode's i_rdev), as the sensor reports it.
struct DeviceNumber {
    uint32_t major = 0;
    uint32_t minor = 0;

    bool known() const { return major != 0 || minor != 0; }
    std::string to_string() const;  // "226:128"
    auto operator<=>(const DeviceNumber&) const = default;
};

// One MIG device of an NVIDIA GPU: a GPU instance and a compute instance
// in it (nvidia-smi's "MIG 3g.40gb Device 0").
struct MigInstance {
    uint32_t gpu_instance = 0;      // GI id
    uint32_t compute_instance = 0;  // CI id within it
    std::string uuid;               // "MIG-..."
    std::optional<uint64_t> memory_total_bytes;
    // The minor of /dev/nvidia-caps/nvidia-capN that grants access to this
    // compute instance (/proc/driver/nvidia-caps/mig-minors), and of its GPU
    // instance's; none when the file does not name them.
    std::optional<uint32_t> access_minor;
    std::optional<uint32_t> gpu_instance_access_minor;
    // Those nodes' device numbers (the minors under the nvidia-caps major of
    // /proc/devices): what a process opens to use the instance; unknown
    // (0:0) when the major or the minor is.
    DeviceNumber access_node{};
    DeviceNumber gpu_instance_access_node{};
    bool operator==(const MigInstance&) const = default;
};

struct GpuDevice {
    uint32_t index = 0;  // position in Snapshot::devices (per backend before the sampler merges)
    Vendor vendor = Vendor::kOther;
    std::string backend;  // "nvml", "drm"
    std::string driver;   // "nvidia", "amdgpu", "i915", "xe", "asahi", ...
    std::string model;    // marketing name where the driver has one
    std::string uuid;     // "GPU-..." (NVML), unique_id (amdgpu); "" when none
    std::string serial;   // board serial; "" when none
    std::string bus_id;   // PCI "0000:03:00.0", or the platform device name ("206400000.gpu")
    std::string driver_version;
    std::vector<DeviceNumber> device_numbers;  // its nodes: /dev/nvidiaN, cardN, renderDN
    // NVIDIA MIG: enabled on this GPU, and its instances as NVML lists them.
    bool mig_enabled = false;
    std::vector<MigInstance> mig_instances;
};

// Something a GPU's driver reported on its own (NVML's event API), read on
// the backend's event thread and handed over with the next sample.
struct GpuDeviceEvent {
    // "xid" (an Xid critical error), "ecc_single_bit", "ecc_double_bit",
    // "clocks" (the clocks changed: `code` holds the clock-event reasons then
    // active, NVML_CLOCKS_EVENT_REASON_* bits).
    std::string kind;
    uint64_t code = 0;  // the Xid number; the reasons for "clocks"; 0 for ECC
    bool operator==(const GpuDeviceEvent&) const = default;
};

// Per-pipe activity over the last sampling interval from NVML's GPU
// Performance Monitoring (Hopper and later), as fractions 0..1 like DCGM's
// profiling fields; a member is absent when the GPU does not report it.
struct GpmActivity {
    std::optional<double> sm_active{};       // DCGM_FI_PROF_SM_ACTIVE
    std::optional<double> sm_occupancy{};    // DCGM_FI_PROF_SM_OCCUPANCY
    std::optional<double> tensor_active{};   // DCGM_FI_PROF_PIPE_TENSOR_ACTIVE (any tensor)
    std::optional<double> fp64_active{};     // DCGM_FI_PROF_PIPE_FP64_ACTIVE
    std::optional<double> fp32_active{};     // DCGM_FI_PROF_PIPE_FP32_ACTIVE
    std::optional<double> fp16_active{};     // DCGM_FI_PROF_PIPE_FP16_ACTIVE
    std::optional<double> integer_active{};  // DCGM_FI_PROF_PIPE_INT_ACTIVE
    std::optional<double> dram_active{};     // DCGM_FI_PROF_DRAM_ACTIVE
};

// One reading of one GPU. Counters (energy, ECC) are cumulative since the
// driver loaded; rates (utilisation, PCIe) are over the driver's own window.
struct GpuSample {
    uint32_t gpu = 0;  // GpuDevice::index
    std::optional<double> gpu_utilization_percent;
    std::optional<double> memory_utilization_percent;  // memory controller busy
    std::optional<uint64_t> memory_used_bytes;
    std::optional<uint64_t> memory_free_bytes;
    std::optional<uint64_t> memory_total_bytes;
    std::optional<double> temperature_gpu_celsius;
    std::optional<double> temperature_memory_celsius;
    std::optional<double> power_draw_watts;
    std::optional<double> power_limit_watts;
    std::optional<double> energy_joules;   // cumulative
    std::optional<uint32_t> sm_clock_mhz;  // SM / graphics / GT clock
    std::optional<uint32_t> memory_clock_mhz;
    std::optional<double> fan_speed_percent;
    std::optional<uint32_t> performance_state;  // NVIDIA P-state: 0 (max) .. 15
    std::optional<uint64_t> pcie_tx_bytes_per_second;
    std::optional<uint64_t> pcie_rx_bytes_per_second;
    std::optional<double> encoder_utilization_percent;
    std::optional<double> decoder_utilization_percent;
    std::optional<uint64_t> ecc_errors_corrected;    // cumulative
    std::optional<uint64_t> ecc_errors_uncorrected;  // cumulative
    // Active clock throttle reasons ("sw_power_cap", "hw_thermal", "pl1", ...);
    // an empty vector means "reported, none active".
    std::optional<std::vector<std::string>> throttle_reasons;
    std::optional<uint64_t> last_xid;  // last NVIDIA Xid error seen since start
    // What the driver reported since the previous sample, oldest first.
    std::vector<GpuDeviceEvent> device_events;
    std::optional<GpmActivity> gpm;  // NVML GPM, from the second sample on
    // On a GPU in MIG mode, each GPU instance's own (nvmlGpmMigSampleGet),
    // by its GI id, from the second sample on.
    std::map<uint32_t, GpmActivity> gpm_by_gpu_instance{};
    // Files or calls that returned something unusable this time: one line
    // each, naming the file or call ("…/gpu_busy_percent: not an integer: 'x'").
    std::vector<std::string> problems;
};

// A (pid, fd) pair the sensor saw open a GPU node, with the node's number
// ({0,0} when unknown). Per-process DRM telemetry reads only these fds.
struct ProcessFd {
    pid_t pid = 0;
    int fd = -1;
    DeviceNumber device;
    auto operator<=>(const ProcessFd&) const = default;
};

// What one process holds on one GPU. Join with the process table by pid.
struct ProcessSample {
    pid_t pid = 0;
    uint32_t gpu = 0;                        // GpuDevice::index
    std::optional<uint64_t> memory_bytes;    // device memory (VRAM, or all of it on UMA)
    std::optional<double> compute_percent;   // busiest engine / SM, over the last interval
    std::optional<uint64_t> engine_busy_ns;  // cumulative, all engines
    bool kfd_compute = false;  // a ROCm (KFD) compute process: its queues never show in fdinfo
    std::string source;        // "nvml", "fdinfo", "kfd", "fdinfo+kfd"
    // On a MIG GPU: the instance it runs in (NVML's process list). NVML
    // reports no per-process utilisation there: compute_percent stays empty.
    std::optional<uint32_t> gpu_instance;
    std::optional<uint32_t> compute_instance;
};

struct GpuSamples {
    std::vector<GpuSample> gpus;
    std::vector<std::string> problems;  // not tied to one GPU
    // Device events the backend's bounded queue had no room for since the
    // previous sample (a flood of Xids): counted, never silently lost.
    uint64_t device_events_dropped = 0;
};

struct ProcessSamples {
    std::vector<ProcessSample> processes;
    std::vector<std::string> problems;  // e.g. a malformed fdinfo file, naming it
};

// One telemetry source. Not thread-safe: the sampler calls it from one thread.
class GpuBackend {
  public:
    GpuBackend() = default;
    virtual ~GpuBackend() = default;
    GpuBackend(const GpuBackend&) = delete;
    GpuBackend& operator=(const GpuBackend&) = delete;

    // "nvml", "drm", "scripted", ...
    virtual std::string_view name() const = 0;

    // The GPUs this backend reports, indexed 0..n-1 in its own numbering.
    // Fails when the source itself is unusable (NVML lost, sysfs unreadable).
    virtual Result<std::vector<GpuDevice>> devices() = 0;

    // One reading of each device. Unreadable single metrics are absent and
    // listed in GpuSample::problems; only a source-wide failure is an Error.
    virtual Result<GpuSamples> sample_gpus() = 0;

    // Per-process usage. DRM backends read fdinfo of exactly `fds` (plus
    // KFD's own process list); NVML asks the driver and ignores `fds`.
    // Rates need two calls: the first returns no compute_percent.
    virtual Result<ProcessSamples> sample_processes(std::span<const ProcessFd> fds) = 0;
};

// Monotonic nanoseconds; injected so tests control elapsed time.
using MonotonicClock = std::function<std::chrono::nanoseconds()>;

struct NvmlOptions {
    // dlopen() argument: "" = "libnvidia-ml.so.1" found by the loader
    // (LD_LIBRARY_PATH, ld.so.cache); a path with '/' loads exactly that file.
    std::string library;
    // Where the NVIDIA GPUs' DRM nodes are looked up (<root>/bus/pci/devices/<bus>/drm).
    std::filesystem::path sysfs_root = "/sys";
    // Where /proc/driver/nvidia-caps/mig-minors is read (MIG access nodes).
    std::filesystem::path proc_root = "/proc";
};

// Loads NVML and initialises it. Fails with kNotFound when the library cannot
// be loaded (no NVIDIA driver), kUnsupported when a required symbol is
// missing, kIo when nvmlInit_v2 fails (message carries NVML's error string).
Result<std::unique_ptr<GpuBackend>> open_nvml_backend(const NvmlOptions& options);

struct DrmOptions {
    std::filesystem::path sysfs_root = "/sys";
    std::filesystem::path proc_root = "/proc";
    bool amd = true;       // amdgpu cards and KFD
    bool intel = true;     // i915 and xe cards
    bool generic = true;   // every other DRM driver with drm-usage-stats fdinfo
    MonotonicClock clock;  // empty: std::chrono::steady_clock
};

// The DRM backend (cards under <sysfs_root>/class/drm). NVIDIA cards are
// left to NVML. Never fails to construct; a host without DRM has no devices.
std::unique_ptr<GpuBackend> make_drm_backend(const DrmOptions& options);

struct BackendOptions {
    bool nvidia = true;
    bool amd = true;
    bool intel = true;
    bool drm_fdinfo = true;  // the generic DRM path (asahi, msm, panfrost, ...)
    std::string nvml_library;
    std::filesystem::path sysfs_root = "/sys";
    std::filesystem::path proc_root = "/proc";
    MonotonicClock clock;
};

// Every enabled backend that could start. A missing NVML is one info line,
// not an error. The returned list may be empty.
std::vector<std::unique_ptr<GpuBackend>> make_backends(const BackendOptions& options);

// Start-up only: every (pid, fd) under `proc_root` whose target is one of
// `gpu_devices` (by st_rdev, so paths, symlinks and containers don't matter).
// O(processes x fds); later samples use the fds the sensor reports instead.
// Processes that vanish or deny access are skipped.
std::vector<ProcessFd> sweep_gpu_fds(const std::filesystem::path& proc_root,
                                     std::span<const DeviceNumber> gpu_devices);

struct BackendStatus {
    std::string name;
    bool ok = true;
    std::string last_error;  // "" when ok
};

// Everything the sampler knows at one instant. Devices are numbered across
// backends; GpuSample::gpu and ProcessSample::gpu index `devices`.
struct Snapshot {
    uint64_t sequence = 0;  // 0: never sampled
    std::chrono::system_clock::time_point taken_at{};
    std::vector<GpuDevice> devices;
    std::vector<GpuSample> gpus;
    std::vector<ProcessSample> processes;
    std::vector<BackendStatus> backends;
};

// The snapshot as one JSON object (absent metrics are left out); indent < 0
// gives one line (JSON Lines).
std::string to_json(const Snapshot& snapshot, int indent = 2);

struct SamplerOptions {
    std::chrono::milliseconds interval{1000};
    // Called on the sampler thread before each process sample: the (pid, fd)
    // pairs currently open on GPU nodes. Empty function: use set_process_fds().
    std::function<std::vector<ProcessFd>()> process_fds;
};

// Samples every backend every `interval` on its own thread and keeps the
// latest Snapshot. A failing backend is logged once (again only when its
// error changes), retried on the next tick, and never stops the others.
class TelemetrySampler {
  public:
    TelemetrySampler(std::vector<std::unique_ptr<GpuBackend>> backends, SamplerOptions options);
    ~TelemetrySampler();  // stops the thread
    TelemetrySampler(const TelemetrySampler&) = delete;
    TelemetrySampler& operator=(const TelemetrySampler&) = delete;

    // Starts the sampling thread (first sample at once). Idempotent.
    void start();
    // Stops and joins the thread. Idempotent.
    void stop();

    // Takes one sample now on the calling thread and publishes it. Must not
    // be called while the thread runs (the backends are single-threaded).
    const Snapshot& sample_once();

    // A copy of the latest published snapshot (sequence 0 before the first).
    Snapshot latest() const;
    // Its sequence number alone, without the copy: poll this, copy on change.
    uint64_t latest_sequence() const;

    // Replaces the fds used when SamplerOptions::process_fds is empty.
    void set_process_fds(std::vector<ProcessFd> fds);

    // Device numbers of every GPU found so far (for sweep_gpu_fds / the sensor).
    std::vector<DeviceNumber> gpu_device_numbers() const;

    // The device events of every sample since the last call, oldest first,
    // each with its GPU's snapshot index and the processes the same sample
    // listed on that GPU: kept apart from the snapshot so that one the
    // reader never copied loses none of them, and tied to their own sample's
    // process list, not to whichever snapshot the reader holds.
    struct DeviceEvent {
        uint32_t gpu = 0;
        GpuDeviceEvent event;
        std::vector<pid_t> on_gpu;
    };
    struct DeviceEvents {
        std::vector<DeviceEvent> events;
        uint64_t dropped = 0;  // since the start: the backends' and this queue's
    };
    DeviceEvents take_device_events();

  private:
    struct BackendState {
        std::unique_ptr<GpuBackend> backend;
        std::vector<GpuDevice> devices;
        bool have_devices = false;
        std::string last_error;
    };

    void run();
    void take_sample();
    void report(BackendState& state, const std::string& error);

    std::vector<BackendState> backends_;
    SamplerOptions options_;
    mutable std::mutex mutex_;  // guards latest_ and fds_
    Snapshot latest_;
    Snapshot working_;
    std::vector<ProcessFd> fds_;
    DeviceEvents device_events_;             // guarded by mutex_; bounded
    std::set<std::string> logged_problems_;  // sampler thread only
    uint64_t sequence_ = 0;
    std::mutex wake_mutex_;
    std::condition_variable wake_;
    bool stopping_ = false;
    std::thread thread_;
};

}  // namespace gpuguard::backends
