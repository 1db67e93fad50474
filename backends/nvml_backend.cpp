// NVIDIA telemetry through NVML, loaded with dlopen at run time so the agent
// runs on hosts without the driver. Versioned entry points (_v2, _v3) are
// resolved by name; optional ones that a driver lacks leave their metric absent.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <system_error>

#include <dlfcn.h>

#include "backends/file_reader.h"
#include "backends/nvml_api.h"
#include "backends/nvml_events.h"
#include "backends/nvml_gpm.h"
#include "backends/nvml_mig.h"
#include "gpuguard/backends/backends.h"
#include "gpuguard/common/logging.h"
#include "gpuguard/common/nvidia_clock_reasons.h"

namespace gpuguard::backends {
namespace {

namespace fs = std::filesystem;

constexpr uint32_t kNvidiaMajor = 195;  // /dev/nvidiaN (nvidia-frontend)

// dlsym'ed entry points; null when the library lacks one.
struct NvmlApi {
    nvmlReturn_t (*init)() = nullptr;                               // nvmlInit_v2
    nvmlReturn_t (*shutdown)() = nullptr;                           // nvmlShutdown
    const char* (*error_string)(nvmlReturn_t) = nullptr;            // nvmlErrorString
    nvmlReturn_t (*get_count)(unsigned*) = nullptr;                 // nvmlDeviceGetCount_v2
    nvmlReturn_t (*get_handle)(unsigned, nvmlDevice_t*) = nullptr;  // ..ByIndex_v2
    nvmlReturn_t (*driver_version)(char*, unsigned) = nullptr;
    nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned) = nullptr;
    nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned) = nullptr;
    nvmlReturn_t (*serial)(nvmlDevice_t, char*, unsigned) = nullptr;
    nvmlReturn_t (*pci_info)(nvmlDevice_t, nvmlPciInfo_t*) = nullptr;  // _v3
    nvmlReturn_t (*minor_number)(nvmlDevice_t, unsigned*) = nullptr;
    nvmlReturn_t (*utilization)(nvmlDevice_t, nvmlUtilization_t*) = nullptr;
    nvmlReturn_t (*memory)(nvmlDevice_t, nvmlMemory_t*) = nullptr;
    nvmlReturn_t (*temperature)(nvmlDevice_t, int, unsigned*) = nullptr;
    nvmlReturn_t (*field_values)(nvmlDevice_t, int, nvmlFieldValue_t*) = nullptr;
    nvmlReturn_t (*power_usage)(nvmlDevice_t, unsigned*) = nullptr;
    nvmlReturn_t (*power_limit)(nvmlDevice_t, unsigned*) = nullptr;  // Enforced
    nvmlReturn_t (*energy)(nvmlDevice_t, unsigned long long*) = nullptr;
    nvmlReturn_t (*clock)(nvmlDevice_t, int, unsigned*) = nullptr;
    nvmlReturn_t (*fan)(nvmlDevice_t, unsigned*) = nullptr;
    nvmlReturn_t (*pstate)(nvmlDevice_t, int*) = nullptr;
    nvmlReturn_t (*pcie)(nvmlDevice_t, int, unsigned*) = nullptr;
    nvmlReturn_t (*encoder)(nvmlDevice_t, unsigned*, unsigned*) = nullptr;
    nvmlReturn_t (*decoder)(nvmlDevice_t, unsigned*, unsigned*) = nullptr;
    nvmlReturn_t (*ecc)(nvmlDevice_t, int, int, unsigned long long*) = nullptr;
    nvmlReturn_t (*clock_reasons)(nvmlDevice_t, unsigned long long*) = nullptr;
    nvmlReturn_t (*compute_procs)(nvmlDevice_t, unsigned*, nvmlProcessInfo_t*) = nullptr;
    nvmlReturn_t (*graphics_procs)(nvmlDevice_t, unsigned*, nvmlProcessInfo_t*) = nullptr;
    nvmlReturn_t (*process_utilization)(nvmlDevice_t, nvmlProcessUtilizationSample_t*, unsigned*,
                                        unsigned long long) = nullptr;
    NvmlEventApi events;  // the event API, for the event thread
    NvmlMigApi mig;
};

template <typename F>
void resolve(void* library, F& slot, std::initializer_list<const char*> names) {
    for (const char* symbol : names) {
        if (void* address = dlsym(library, symbol)) {
            slot = reinterpret_cast<F>(address);
            return;
        }
    }
}

// "00000000:3B:00.0" -> "0000:3b:00.0" (the form sysfs and drm-pdev use).
std::string normalize_bus_id(std::string_view bus_id) {
    std::string out(bus_id.size() > 12 ? bus_id.substr(bus_id.size() - 12) : bus_id);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

// The table's bits are nvml.h's, as nvml_api.h spells them.
static_assert(kNvidiaClockReasons[0].first == NVML_CLOCKS_EVENT_REASON_GPU_IDLE &&
              kNvidiaClockReasons[1].first ==
                  NVML_CLOCKS_EVENT_REASON_APPLICATIONS_CLOCKS_SETTING &&
              kNvidiaClockReasons[2].first == NVML_CLOCKS_EVENT_REASON_SW_POWER_CAP &&
              kNvidiaClockReasons[3].first == NVML_CLOCKS_EVENT_REASON_HW_SLOWDOWN &&
              kNvidiaClockReasons[4].first == NVML_CLOCKS_EVENT_REASON_SYNC_BOOST &&
              kNvidiaClockReasons[5].first == NVML_CLOCKS_EVENT_REASON_SW_THERMAL_SLOWDOWN &&
              kNvidiaClockReasons[6].first == NVML_CLOCKS_EVENT_REASON_HW_THERMAL_SLOWDOWN &&
              kNvidiaClockReasons[7].first == NVML_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN &&
              kNvidiaClockReasons[8].first == NVML_CLOCKS_EVENT_REASON_DISPLAY_CLOCK_SETTING);

class NvmlBackend final : public GpuBackend {
  public:
    NvmlBackend(void* library, NvmlApi api, NvmlOptions options)
        : library_(library),
          api_(api),
          options_(std::move(options)),
          gpm_(std::in_place, library) {}

    ~NvmlBackend() override {
        events_.reset();  // its thread calls NVML: stopped before the shutdown
        gpm_.reset();     // frees its samples while the library is still loaded
        if (initialised_) api_.shutdown();
        dlclose(library_);
    }

    Status initialise() {
        const nvmlReturn_t rc = api_.init();
        if (rc != NVML_SUCCESS) {
            return fail(ErrorCode::kIo, "nvmlInit_v2: " + error_text(rc));
        }
        initialised_ = true;
        return {};
    }

    std::string_view name() const override { return "nvml"; }

    Result<std::vector<GpuDevice>> devices() override {
        if (auto ready = ensure_initialised(); !ready) return Unexpected{ready.error()};
        unsigned count = 0;
        if (const auto rc = api_.get_count(&count); rc != NVML_SUCCESS) {
            return lost_or_fail("nvmlDeviceGetCount_v2", rc);
        }
        std::string driver_version;
        if (api_.driver_version) {
            char text[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE] = {};
            if (api_.driver_version(text, sizeof text) == NVML_SUCCESS) driver_version = text;
        }
        handles_.clear();
        mig_enabled_.clear();
        gpu_instances_.clear();
        const MigNodes mig_nodes = read_mig_nodes(options_.proc_root);
        std::vector<GpuDevice> out;
        for (unsigned i = 0; i < count; ++i) {
            nvmlDevice_t handle = nullptr;
            if (const auto rc = api_.get_handle(i, &handle); rc != NVML_SUCCESS) {
                // A GPU that fell off the bus or is not ours to see: keep the
                // others, and keep the index so numbering matches nvidia-smi.
                logger("backends")
                    ->warn("nvmlDeviceGetHandleByIndex_v2({}): {}", i, error_text(rc));
                handle = nullptr;
            }
            handles_.push_back(handle);
            GpuDevice device;
            device.index = i;
            device.vendor = Vendor::kNvidia;
            device.backend = "nvml";
            device.driver = "nvidia";
            device.driver_version = driver_version;
            if (handle) describe(handle, device);
            if (handle && !device.device_numbers.empty()) {
                read_mig(api_.mig, handle, device.device_numbers.front().minor, mig_nodes, device);
            }
            mig_enabled_.push_back(device.mig_enabled);
            std::set<uint32_t> gpu_instances;
            for (const auto& mig : device.mig_instances) gpu_instances.insert(mig.gpu_instance);
            gpu_instances_.push_back(std::move(gpu_instances));
            out.push_back(std::move(device));
        }
        // A new list of handles: the event thread watches these from now on.
        events_.reset();
        events_ = NvmlEventWatcher::start(api_.events, handles_);
        return out;
    }

    Result<GpuSamples> sample_gpus() override {
        if (handles_.empty()) {
            auto listed = devices();
            if (!listed) return Unexpected{listed.error()};
        }
        GpuSamples samples;
        NvmlEventWatcher::Taken events;
        if (events_) events = events_->take();
        samples.device_events_dropped = events.dropped;
        for (size_t i = 0; i < handles_.size(); ++i) {
            GpuSample sample;
            sample.gpu = static_cast<uint32_t>(i);
            if (handles_[i]) {
                read_sample(handles_[i], sample);
                sample.gpm = gpm_->sample(static_cast<unsigned>(i), handles_[i]);
                // Each MIG GPU instance's own pipes: on a partitioned GPU a
                // process is judged by its slice's.
                for (const uint32_t gpu_instance : gpu_instances_[i]) {
                    if (auto slice =
                            gpm_->sample_mig(static_cast<unsigned>(i), handles_[i], gpu_instance)) {
                        sample.gpm_by_gpu_instance[gpu_instance] = *slice;
                    }
                }
            }
            for (auto& [index, event] : events.events) {
                if (index != i) continue;
                if (event.kind == "xid") last_xid_[i] = event.code;
                sample.device_events.push_back(std::move(event));
            }
            if (const auto xid = last_xid_.find(i); xid != last_xid_.end()) {
                sample.last_xid = xid->second;
            }
            samples.gpus.push_back(std::move(sample));
        }
        if (needs_reinit_) {
            return fail(ErrorCode::kIo, "NVML reports it is not initialised; re-initialising");
        }
        return samples;
    }

    Result<ProcessSamples> sample_processes(std::span<const ProcessFd>) override {
        if (handles_.empty()) {
            auto listed = devices();
            if (!listed) return Unexpected{listed.error()};
        }
        ProcessSamples result;
        for (size_t i = 0; i < handles_.size(); ++i) {
            if (!handles_[i]) continue;
            std::map<pid_t, ProcessSample> by_pid;
            for (const auto& [fn, label] :
                 {std::pair{api_.compute_procs, "nvmlDeviceGetComputeRunningProcesses_v3"},
                  std::pair{api_.graphics_procs, "nvmlDeviceGetGraphicsRunningProcesses_v3"}}) {
                if (!fn) continue;
                for (const auto& info : running_processes(handles_[i], fn, label, result)) {
                    ProcessSample& sample = by_pid[static_cast<pid_t>(info.pid)];
                    sample.pid = static_cast<pid_t>(info.pid);
                    sample.gpu = static_cast<uint32_t>(i);
                    sample.source = "nvml";
                    if (info.usedGpuMemory != NVML_VALUE_NOT_AVAILABLE_ULL) {
                        sample.memory_bytes =
                            std::max<uint64_t>(sample.memory_bytes.value_or(0), info.usedGpuMemory);
                    }
                    // nvml.h: 0xFFFFFFFF when MIG is not enabled.
                    if (mig_enabled_[i] && info.gpuInstanceId != 0xFFFFFFFFu) {
                        sample.gpu_instance = info.gpuInstanceId;
                        sample.compute_instance = info.computeInstanceId;
                    }
                }
            }
            // Under MIG NVML reports no per-process utilisation: left empty,
            // never read as idle.
            if (mig_enabled_[i]) {
                for (auto& [pid, sample] : by_pid) result.processes.push_back(std::move(sample));
                continue;
            }
            for (const auto& [pid, sm] : process_utilization(i, result)) {
                if (auto found = by_pid.find(pid); found != by_pid.end()) {
                    found->second.compute_percent = sm;
                }
            }
            for (auto& [pid, sample] : by_pid) result.processes.push_back(std::move(sample));
        }
        return result;
    }

  private:
    std::string error_text(nvmlReturn_t rc) const {
        const char* text = api_.error_string ? api_.error_string(rc) : nullptr;
        return std::string(text ? text : "unknown NVML error") + " (" + std::to_string(rc) + ")";
    }

    Status ensure_initialised() {
        if (initialised_ && !needs_reinit_) return {};
        if (initialised_) {
            api_.shutdown();
            initialised_ = false;
            handles_.clear();
        }
        needs_reinit_ = false;
        return initialise();
    }

    Unexpected lost_or_fail(const char* call, nvmlReturn_t rc) {
        if (rc == NVML_ERROR_UNINITIALIZED || rc == NVML_ERROR_DRIVER_NOT_LOADED) {
            needs_reinit_ = true;
        }
        return fail(ErrorCode::kIo, std::string(call) + ": " + error_text(rc));
    }

    // Whether `rc` means the value is there. Unsupported is silent; other
    // failures become a problem line naming the call and the GPU.
    bool check(nvmlReturn_t rc, const char* call, GpuSample& sample) {
        if (rc == NVML_SUCCESS) return true;
        if (rc == NVML_ERROR_NOT_SUPPORTED || rc == NVML_ERROR_NOT_FOUND ||
            rc == NVML_ERROR_FUNCTION_NOT_FOUND) {
            return false;
        }
        if (rc == NVML_ERROR_UNINITIALIZED) needs_reinit_ = true;
        if (rc == NVML_ERROR_GPU_IS_LOST) gpu_lost_ = true;
        sample.problems.push_back("GPU " + std::to_string(sample.gpu) + ": " + call + ": " +
                                  error_text(rc));
        return false;
    }

    void describe(nvmlDevice_t handle, GpuDevice& device) {
        char text[NVML_DEVICE_NAME_V2_BUFFER_SIZE] = {};
        if (api_.name && api_.name(handle, text, sizeof text) == NVML_SUCCESS) device.model = text;
        std::fill(std::begin(text), std::end(text), 0);
        if (api_.uuid && api_.uuid(handle, text, sizeof text) == NVML_SUCCESS) device.uuid = text;
        std::fill(std::begin(text), std::end(text), 0);
        if (api_.serial &&
            api_.serial(handle, text, NVML_DEVICE_SERIAL_BUFFER_SIZE) == NVML_SUCCESS) {
            device.serial = text;
        }
        nvmlPciInfo_t pci{};
        if (api_.pci_info && api_.pci_info(handle, &pci) == NVML_SUCCESS) {
            pci.busId[sizeof pci.busId - 1] = '\0';
            device.bus_id = normalize_bus_id(pci.busId);
        }
        unsigned minor = 0;
        if (api_.minor_number && api_.minor_number(handle, &minor) == NVML_SUCCESS) {
            device.device_numbers.push_back(DeviceNumber{kNvidiaMajor, minor});
        }
        // nvidia-drm's card and render nodes belong to the same GPU.
        if (!device.bus_id.empty()) {
            std::error_code ec;
            const fs::path drm =
                options_.sysfs_root / "bus" / "pci" / "devices" / device.bus_id / "drm";
            for (const auto& node : fs::directory_iterator(drm, ec)) {
                auto dev = detail::read_small_file(node.path() / "dev");
                if (!dev) continue;
                const std::string_view text_view = detail::trim(*dev);
                const auto colon = text_view.find(':');
                const auto major = detail::parse_u64(text_view.substr(0, colon));
                const auto minor_number = colon == std::string_view::npos
                                              ? std::nullopt
                                              : detail::parse_u64(text_view.substr(colon + 1));
                if (major && minor_number) {
                    device.device_numbers.push_back(DeviceNumber{
                        static_cast<uint32_t>(*major), static_cast<uint32_t>(*minor_number)});
                }
            }
        }
    }

    void read_sample(nvmlDevice_t handle, GpuSample& sample) {
        gpu_lost_ = false;
        // After GPU_IS_LOST every further call would fail the same way.
        auto call = [&](auto fn, const char* label, auto&&... args) {
            if (!fn || gpu_lost_) return false;
            return check(fn(handle, args...), label, sample);
        };
        nvmlUtilization_t utilization{};
        if (call(api_.utilization, "nvmlDeviceGetUtilizationRates", &utilization)) {
            sample.gpu_utilization_percent = utilization.gpu;
            sample.memory_utilization_percent = utilization.memory;
        }
        nvmlMemory_t memory{};
        if (call(api_.memory, "nvmlDeviceGetMemoryInfo", &memory)) {
            sample.memory_total_bytes = memory.total;
            sample.memory_used_bytes = memory.used;
            sample.memory_free_bytes = memory.free;
        }
        unsigned value = 0;
        if (call(api_.temperature, "nvmlDeviceGetTemperature", NVML_TEMPERATURE_GPU, &value)) {
            sample.temperature_gpu_celsius = value;
        }
        nvmlFieldValue_t field{};
        field.fieldId = NVML_FI_DEV_MEMORY_TEMP;
        if (call(api_.field_values, "nvmlDeviceGetFieldValues", 1, &field) &&
            check(field.nvmlReturn, "nvmlDeviceGetFieldValues(NVML_FI_DEV_MEMORY_TEMP)", sample)) {
            switch (field.valueType) {
                case NVML_VALUE_TYPE_UNSIGNED_INT:
                    sample.temperature_memory_celsius = field.value.uiVal;
                    break;
                case NVML_VALUE_TYPE_SIGNED_INT:
                    sample.temperature_memory_celsius = field.value.siVal;
                    break;
                case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
                    sample.temperature_memory_celsius = double(field.value.ullVal);
                    break;
                case NVML_VALUE_TYPE_DOUBLE:
                    sample.temperature_memory_celsius = field.value.dVal;
                    break;
                default:
                    sample.problems.push_back("GPU " + std::to_string(sample.gpu) +
                                              ": NVML_FI_DEV_MEMORY_TEMP: unexpected value type " +
                                              std::to_string(field.valueType));
            }
        }
        if (call(api_.power_usage, "nvmlDeviceGetPowerUsage", &value)) {
            sample.power_draw_watts = value / 1000.0;
        }
        if (call(api_.power_limit, "nvmlDeviceGetEnforcedPowerLimit", &value)) {
            sample.power_limit_watts = value / 1000.0;
        }
        unsigned long long counter = 0;
        if (call(api_.energy, "nvmlDeviceGetTotalEnergyConsumption", &counter)) {
            sample.energy_joules = counter / 1000.0;
        }
        if (call(api_.clock, "nvmlDeviceGetClockInfo(SM)", NVML_CLOCK_SM, &value)) {
            sample.sm_clock_mhz = value;
        }
        if (call(api_.clock, "nvmlDeviceGetClockInfo(MEM)", NVML_CLOCK_MEM, &value)) {
            sample.memory_clock_mhz = value;
        }
        if (call(api_.fan, "nvmlDeviceGetFanSpeed", &value)) sample.fan_speed_percent = value;
        int pstate = 0;
        if (call(api_.pstate, "nvmlDeviceGetPerformanceState", &pstate) && pstate >= 0 &&
            pstate < NVML_PSTATE_UNKNOWN) {
            sample.performance_state = static_cast<uint32_t>(pstate);
        }
        // KB/s over NVML's 20 ms window.
        if (call(api_.pcie, "nvmlDeviceGetPcieThroughput(TX)", NVML_PCIE_UTIL_TX_BYTES, &value)) {
            sample.pcie_tx_bytes_per_second = uint64_t(value) * 1024;
        }
        if (call(api_.pcie, "nvmlDeviceGetPcieThroughput(RX)", NVML_PCIE_UTIL_RX_BYTES, &value)) {
            sample.pcie_rx_bytes_per_second = uint64_t(value) * 1024;
        }
        unsigned period_us = 0;
        if (call(api_.encoder, "nvmlDeviceGetEncoderUtilization", &value, &period_us)) {
            sample.encoder_utilization_percent = value;
        }
        if (call(api_.decoder, "nvmlDeviceGetDecoderUtilization", &value, &period_us)) {
            sample.decoder_utilization_percent = value;
        }
        if (call(api_.ecc, "nvmlDeviceGetTotalEccErrors(corrected)",
                 NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC, &counter)) {
            sample.ecc_errors_corrected = counter;
        }
        if (call(api_.ecc, "nvmlDeviceGetTotalEccErrors(uncorrected)",
                 NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC, &counter)) {
            sample.ecc_errors_uncorrected = counter;
        }
        if (call(api_.clock_reasons, "nvmlDeviceGetCurrentClocksEventReasons", &counter)) {
            sample.throttle_reasons = nvidia_clock_reason_names(counter);
        }
    }

    using ProcessQuery = nvmlReturn_t (*)(nvmlDevice_t, unsigned*, nvmlProcessInfo_t*);

    std::vector<nvmlProcessInfo_t> running_processes(nvmlDevice_t handle, ProcessQuery query,
                                                     const char* label, ProcessSamples& result) {
        std::vector<nvmlProcessInfo_t> infos(32);
        // The list can grow between the size query and the read: retry a few times.
        for (int attempt = 0; attempt < 4; ++attempt) {
            unsigned count = static_cast<unsigned>(infos.size());
            const nvmlReturn_t rc = query(handle, &count, infos.data());
            if (rc == NVML_SUCCESS) {
                infos.resize(std::min<size_t>(count, infos.size()));
                return infos;
            }
            if (rc != NVML_ERROR_INSUFFICIENT_SIZE) {
                if (rc != NVML_ERROR_NOT_SUPPORTED) {
                    result.problems.push_back(std::string(label) + ": " + error_text(rc));
                }
                return {};
            }
            infos.resize(std::max<size_t>(count + 16, infos.size() * 2));
        }
        result.problems.push_back(std::string(label) + ": process list kept growing");
        return {};
    }

    // pid -> SM utilisation of its newest sample since the last call.
    std::map<pid_t, double> process_utilization(size_t index, ProcessSamples& result) {
        std::map<pid_t, double> out;
        if (!api_.process_utilization) return out;
        nvmlDevice_t handle = handles_[index];
        unsigned long long& last_seen = last_utilization_us_[index];
        unsigned count = 0;
        nvmlReturn_t rc = api_.process_utilization(handle, nullptr, &count, last_seen);
        if (rc == NVML_SUCCESS || rc == NVML_ERROR_NOT_FOUND || count == 0) return out;
        if (rc != NVML_ERROR_INSUFFICIENT_SIZE) {
            if (rc != NVML_ERROR_NOT_SUPPORTED) {
                result.problems.push_back("nvmlDeviceGetProcessUtilization: " + error_text(rc));
            }
            return out;
        }
        std::vector<nvmlProcessUtilizationSample_t> samples(count + 8);
        count = static_cast<unsigned>(samples.size());
        rc = api_.process_utilization(handle, samples.data(), &count, last_seen);
        if (rc != NVML_SUCCESS) {
            if (rc != NVML_ERROR_NOT_FOUND) {
                result.problems.push_back("nvmlDeviceGetProcessUtilization: " + error_text(rc));
            }
            return out;
        }
        std::map<pid_t, unsigned long long> newest;
        for (unsigned i = 0; i < count && i < samples.size(); ++i) {
            const auto& s = samples[i];
            const auto pid = static_cast<pid_t>(s.pid);
            if (newest.contains(pid) && newest[pid] > s.timeStamp) continue;
            newest[pid] = s.timeStamp;
            out[pid] = std::min(100u, s.smUtil);
            last_seen = std::max(last_seen, s.timeStamp);
        }
        return out;
    }

    void* library_;
    NvmlApi api_;
    NvmlOptions options_;
    bool initialised_ = false;
    bool needs_reinit_ = false;
    bool gpu_lost_ = false;
    std::vector<nvmlDevice_t> handles_;
    std::unique_ptr<NvmlEventWatcher> events_;
    std::vector<bool> mig_enabled_;                  // per handle
    std::vector<std::set<uint32_t>> gpu_instances_;  // per handle: its MIG GPU instances' ids
    std::map<size_t, uint64_t> last_xid_;
    std::optional<GpmReader> gpm_;  // reset before the library is closed
    std::map<size_t, unsigned long long> last_utilization_us_;
};

}  // namespace

Result<std::unique_ptr<GpuBackend>> open_nvml_backend(const NvmlOptions& options) {
    const std::string library = options.library.empty() ? "libnvidia-ml.so.1" : options.library;
    void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char* why = dlerror();
        return fail(ErrorCode::kNotFound,
                    "cannot load " + library + ": " + (why ? why : "unknown dlopen error"));
    }
    NvmlApi api;
    resolve(handle, api.init, {"nvmlInit_v2"});
    resolve(handle, api.shutdown, {"nvmlShutdown"});
    resolve(handle, api.error_string, {"nvmlErrorString"});
    resolve(handle, api.get_count, {"nvmlDeviceGetCount_v2"});
    resolve(handle, api.get_handle, {"nvmlDeviceGetHandleByIndex_v2"});
    for (const auto& [slot, symbol] :
         {std::pair{reinterpret_cast<void*>(api.init), "nvmlInit_v2"},
          std::pair{reinterpret_cast<void*>(api.shutdown), "nvmlShutdown"},
          std::pair{reinterpret_cast<void*>(api.get_count), "nvmlDeviceGetCount_v2"},
          std::pair{reinterpret_cast<void*>(api.get_handle), "nvmlDeviceGetHandleByIndex_v2"}}) {
        if (!slot) {
            dlclose(handle);
            return fail(ErrorCode::kUnsupported,
                        library + " lacks " + symbol + ": driver older than NVML 5.319?");
        }
    }
    resolve(handle, api.driver_version, {"nvmlSystemGetDriverVersion"});
    resolve(handle, api.name, {"nvmlDeviceGetName"});
    resolve(handle, api.uuid, {"nvmlDeviceGetUUID"});
    resolve(handle, api.serial, {"nvmlDeviceGetSerial"});
    resolve(handle, api.pci_info, {"nvmlDeviceGetPciInfo_v3"});
    resolve(handle, api.minor_number, {"nvmlDeviceGetMinorNumber"});
    resolve(handle, api.utilization, {"nvmlDeviceGetUtilizationRates"});
    resolve(handle, api.memory, {"nvmlDeviceGetMemoryInfo"});
    resolve(handle, api.temperature, {"nvmlDeviceGetTemperature"});
    resolve(handle, api.field_values, {"nvmlDeviceGetFieldValues"});
    resolve(handle, api.power_usage, {"nvmlDeviceGetPowerUsage"});
    resolve(handle, api.power_limit, {"nvmlDeviceGetEnforcedPowerLimit"});
    resolve(handle, api.energy, {"nvmlDeviceGetTotalEnergyConsumption"});
    resolve(handle, api.clock, {"nvmlDeviceGetClockInfo"});
    resolve(handle, api.fan, {"nvmlDeviceGetFanSpeed"});
    resolve(handle, api.pstate, {"nvmlDeviceGetPerformanceState"});
    resolve(handle, api.pcie, {"nvmlDeviceGetPcieThroughput"});
    resolve(handle, api.encoder, {"nvmlDeviceGetEncoderUtilization"});
    resolve(handle, api.decoder, {"nvmlDeviceGetDecoderUtilization"});
    resolve(handle, api.ecc, {"nvmlDeviceGetTotalEccErrors"});
    resolve(
        handle, api.clock_reasons,
        {"nvmlDeviceGetCurrentClocksEventReasons", "nvmlDeviceGetCurrentClocksThrottleReasons"});
    // _v2 and _v3 share the 24-byte nvmlProcessInfo_v2_t; never fall back to the 16-byte v1.
    resolve(handle, api.compute_procs,
            {"nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses_v2"});
    resolve(
        handle, api.graphics_procs,
        {"nvmlDeviceGetGraphicsRunningProcesses_v3", "nvmlDeviceGetGraphicsRunningProcesses_v2"});
    resolve(handle, api.process_utilization, {"nvmlDeviceGetProcessUtilization"});
    resolve(handle, api.events.event_set_create, {"nvmlEventSetCreate"});
    resolve(handle, api.events.register_events, {"nvmlDeviceRegisterEvents"});
    resolve(handle, api.events.supported_types, {"nvmlDeviceGetSupportedEventTypes"});
    resolve(handle, api.events.event_set_wait, {"nvmlEventSetWait_v2"});
    resolve(handle, api.events.event_set_free, {"nvmlEventSetFree"});
    api.events.clock_reasons = api.clock_reasons;
    resolve(handle, api.mig.mig_mode, {"nvmlDeviceGetMigMode"});
    resolve(handle, api.mig.max_mig_devices, {"nvmlDeviceGetMaxMigDeviceCount"});
    resolve(handle, api.mig.mig_handle, {"nvmlDeviceGetMigDeviceHandleByIndex"});
    resolve(handle, api.mig.gpu_instance_id, {"nvmlDeviceGetGpuInstanceId"});
    resolve(handle, api.mig.compute_instance_id, {"nvmlDeviceGetComputeInstanceId"});
    api.mig.uuid = api.uuid;
    api.mig.memory = api.memory;

    auto backend = std::make_unique<NvmlBackend>(handle, api, options);  // owns handle now
    if (auto status = backend->initialise(); !status) return Unexpected{status.error()};
    return std::unique_ptr<GpuBackend>(std::move(backend));
}

}  // namespace gpuguard::backends
