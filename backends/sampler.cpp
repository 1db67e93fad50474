// TelemetrySampler: one thread, every backend once per interval, the newest
// Snapshot behind a mutex. A failing backend is logged when its error first
// appears or changes, retried every tick, and never fatal.
#include <set>

#include "gpuguard/backends/backends.h"
#include "gpuguard/common/logging.h"

namespace gpuguard::backends {
namespace {

// Device events waiting for the agent: a reader that stalls for a while
// (a loaded host) loses none below this; past it they are counted.
constexpr size_t kMaxPendingDeviceEvents = 4096;

}  // namespace

TelemetrySampler::TelemetrySampler(std::vector<std::unique_ptr<GpuBackend>> backends,
                                   SamplerOptions options)
    : options_(std::move(options)) {
    for (auto& backend : backends) {
        if (backend) backends_.push_back(BackendState{std::move(backend), {}, false, {}});
    }
}

TelemetrySampler::~TelemetrySampler() { stop(); }

void TelemetrySampler::start() {
    if (thread_.joinable()) return;
    {
        std::lock_guard lock(wake_mutex_);
        stopping_ = false;
    }
    thread_ = std::thread([this] { run(); });
}

void TelemetrySampler::stop() {
    {
        std::lock_guard lock(wake_mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

void TelemetrySampler::run() {
    auto next = std::chrono::steady_clock::now();
    for (;;) {
        take_sample();
        next += options_.interval;
        const auto now = std::chrono::steady_clock::now();
        if (next < now) next = now;  // a slow sample delays, it does not pile up ticks
        std::unique_lock lock(wake_mutex_);
        if (wake_.wait_until(lock, next, [this] { return stopping_; })) return;
    }
}

const Snapshot& TelemetrySampler::sample_once() {
    take_sample();
    return working_;
}

TelemetrySampler::DeviceEvents TelemetrySampler::take_device_events() {
    std::lock_guard lock(mutex_);
    DeviceEvents taken;
    taken.events.swap(device_events_.events);
    taken.dropped = device_events_.dropped;
    return taken;
}

Snapshot TelemetrySampler::latest() const {
    std::lock_guard lock(mutex_);
    return latest_;
}

uint64_t TelemetrySampler::latest_sequence() const {
    std::lock_guard lock(mutex_);
    return latest_.sequence;
}

void TelemetrySampler::set_process_fds(std::vector<ProcessFd> fds) {
    std::lock_guard lock(mutex_);
    fds_ = std::move(fds);
}

std::vector<DeviceNumber> TelemetrySampler::gpu_device_numbers() const {
    std::lock_guard lock(mutex_);
    std::set<DeviceNumber> numbers;
    for (const auto& device : latest_.devices) {
        numbers.insert(device.device_numbers.begin(), device.device_numbers.end());
    }
    return {numbers.begin(), numbers.end()};
}

void TelemetrySampler::report(BackendState& state, const std::string& error) {
    if (error == state.last_error) return;
    auto log = logger("backends");
    if (error.empty()) {
        log->info("{} backend recovered", state.backend->name());
    } else {
        log->warn("{} backend: {} (retrying every {} ms)", state.backend->name(), error,
                  options_.interval.count());
    }
    state.last_error = error;
}

void TelemetrySampler::take_sample() {
    std::vector<ProcessFd> fds;
    if (options_.process_fds) {
        fds = options_.process_fds();
    } else {
        std::lock_guard lock(mutex_);
        fds = fds_;
    }
    Snapshot snapshot;
    std::vector<DeviceEvent> events_now;  // this sample's device events
    uint64_t dropped_now = 0;
    snapshot.taken_at = std::chrono::system_clock::now();
    for (auto& state : backends_) {
        BackendStatus status{std::string(state.backend->name()), true, {}};
        std::string error;
        if (!state.have_devices) {
            auto devices = state.backend->devices();
            if (devices) {
                state.devices = std::move(devices).value();
                state.have_devices = true;
            } else {
                error = devices.error().message;
            }
        }
        const auto base = static_cast<uint32_t>(snapshot.devices.size());
        if (state.have_devices) {
            for (auto device : state.devices) {
                device.index += base;
                snapshot.devices.push_back(std::move(device));
            }
            auto gpus = state.backend->sample_gpus();
            if (gpus) {
                dropped_now += gpus->device_events_dropped;
                for (auto& gpu : gpus->gpus) {
                    gpu.gpu += base;
                    for (auto& event : gpu.device_events) {
                        events_now.push_back(DeviceEvent{gpu.gpu, std::move(event), {}});
                    }
                    gpu.device_events.clear();
                    snapshot.gpus.push_back(std::move(gpu));
                }
            } else {
                error = gpus.error().message;
            }
            auto processes = state.backend->sample_processes(fds);
            if (processes) {
                for (auto& process : processes->processes) {
                    process.gpu += base;
                    snapshot.processes.push_back(std::move(process));
                }
                // Per-file problems: log each distinct one once at debug; they
                // are usually races with exiting processes.
                for (const auto& problem : processes->problems) {
                    logger("backends")->debug("{}: {}", state.backend->name(), problem);
                }
            } else if (error.empty()) {
                error = processes.error().message;
            }
        }
        report(state, error);
        status.ok = error.empty();
        status.last_error = error;
        snapshot.backends.push_back(std::move(status));
    }
    // Problems of individual metrics: warn once per distinct line.
    for (const auto& gpu : snapshot.gpus) {
        for (const auto& problem : gpu.problems) {
            if (logged_problems_.size() > 4096) logged_problems_.clear();  // bound memory
            if (logged_problems_.insert(problem).second) {
                logger("backends")->warn("{} (metric left absent; logged once)", problem);
            }
        }
    }
    snapshot.sequence = ++sequence_;
    working_ = snapshot;
    // Who was on each GPU in this sample: the processes its events go with.
    for (DeviceEvent& pending : events_now) {
        for (const auto& process : snapshot.processes) {
            if (process.gpu == pending.gpu) pending.on_gpu.push_back(process.pid);
        }
    }
    std::lock_guard lock(mutex_);
    device_events_.dropped += dropped_now;
    for (DeviceEvent& pending : events_now) {
        if (device_events_.events.size() >= kMaxPendingDeviceEvents) {
            ++device_events_.dropped;
            continue;
        }
        device_events_.events.push_back(std::move(pending));
    }
    latest_ = std::move(snapshot);
}

}  // namespace gpuguard::backends
