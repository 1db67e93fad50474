// NVML's event API on a thread of its own: Xid critical errors, single- and
// double-bit ECC errors and clock changes, each GPU registered for the
// types it supports, queued (bounded, drops counted) until the next sample
// takes them. The thread waits in nvmlEventSetWait_v2 with a short timeout
// and checks its stop flag between waits, so it stops within that timeout.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "backends/nvml_api.h"
#include "gpuguard/backends/backends.h"

namespace gpuguard::backends {

// The entry points the watcher calls; `supported_types` and `clock_reasons`
// may be null (an older driver): every type is then asked for, and a clock
// event carries no reasons.
struct NvmlEventApi {
    nvmlReturn_t (*event_set_create)(nvmlEventSet_t*) = nullptr;
    nvmlReturn_t (*register_events)(nvmlDevice_t, unsigned long long, nvmlEventSet_t) = nullptr;
    nvmlReturn_t (*supported_types)(nvmlDevice_t, unsigned long long*) = nullptr;
    nvmlReturn_t (*event_set_wait)(nvmlEventSet_t, nvmlEventData_t*, unsigned) = nullptr;  // _v2
    nvmlReturn_t (*event_set_free)(nvmlEventSet_t) = nullptr;
    nvmlReturn_t (*clock_reasons)(nvmlDevice_t, unsigned long long*) = nullptr;
};

class NvmlEventWatcher {
  public:
    static constexpr unsigned long long kWantedTypes =
        NVML_EVENT_TYPE_XID_CRITICAL_ERROR | NVML_EVENT_TYPE_SINGLE_BIT_ECC_ERROR |
        NVML_EVENT_TYPE_DOUBLE_BIT_ECC_ERROR | NVML_EVENT_TYPE_CLOCK;
    static constexpr unsigned kWaitMs = 200;  // the longest a stop waits for the thread

    // Registers `handles` (indexed as the backend's GPUs; null ones are
    // skipped) and starts the thread; null when the library has no event
    // API or no GPU accepted a registration.
    static std::unique_ptr<NvmlEventWatcher> start(const NvmlEventApi& api,
                                                   std::vector<nvmlDevice_t> handles,
                                                   size_t capacity = 1024);
    ~NvmlEventWatcher();  // stops and joins the thread, frees the set
    NvmlEventWatcher(const NvmlEventWatcher&) = delete;
    NvmlEventWatcher& operator=(const NvmlEventWatcher&) = delete;

    struct Taken {
        std::vector<std::pair<size_t, GpuDeviceEvent>> events;  // (GPU index, event)
        uint64_t dropped = 0;                                   // since the last take
    };
    Taken take();

  private:
    NvmlEventWatcher(const NvmlEventApi& api, nvmlEventSet_t set, std::vector<nvmlDevice_t> handles,
                     size_t capacity);
    void run();
    void push(const nvmlEventData_t& data);

    NvmlEventApi api_;
    nvmlEventSet_t set_;
    std::vector<nvmlDevice_t> handles_;
    size_t capacity_;
    std::mutex mutex_;  // guards queue_ and dropped_
    std::deque<std::pair<size_t, GpuDeviceEvent>> queue_;
    uint64_t dropped_ = 0;
    std::atomic<bool> stopping_{false};
    std::thread thread_;
};

}  // namespace gpuguard::backends
