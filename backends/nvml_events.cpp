#include "backends/nvml_events.h"

#include <algorithm>

#include "gpuguard/common/logging.h"

namespace gpuguard::backends {

std::unique_ptr<NvmlEventWatcher> NvmlEventWatcher::start(const NvmlEventApi& api,
                                                          std::vector<nvmlDevice_t> handles,
                                                          size_t capacity) {
    if (!api.event_set_create || !api.register_events || !api.event_set_wait ||
        !api.event_set_free) {
        return nullptr;
    }
    nvmlEventSet_t set = nullptr;
    if (api.event_set_create(&set) != NVML_SUCCESS || !set) return nullptr;
    size_t registered = 0;
    for (size_t i = 0; i < handles.size(); ++i) {
        if (!handles[i]) continue;
        // NVML refuses a registration naming any type the GPU lacks.
        unsigned long long types = kWantedTypes;
        if (unsigned long long supported = 0;
            api.supported_types && api.supported_types(handles[i], &supported) == NVML_SUCCESS) {
            types &= supported;
        }
        if (types == 0) continue;
        nvmlReturn_t rc = api.register_events(handles[i], types, set);
        if (rc == NVML_ERROR_NOT_SUPPORTED && types != NVML_EVENT_TYPE_XID_CRITICAL_ERROR) {
            types = NVML_EVENT_TYPE_XID_CRITICAL_ERROR;  // the one every driver since R319 has
            rc = api.register_events(handles[i], types, set);
        }
        if (rc == NVML_SUCCESS) {
            ++registered;
            logger("backends")->debug("GPU {}: NVML events {:#x} registered", i, types);
        } else {
            logger("backends")->info("GPU {}: NVML events not available (error {})", i, rc);
        }
    }
    if (registered == 0) {
        api.event_set_free(set);
        return nullptr;
    }
    return std::unique_ptr<NvmlEventWatcher>(
        new NvmlEventWatcher(api, set, std::move(handles), capacity));
}

NvmlEventWatcher::NvmlEventWatcher(const NvmlEventApi& api, nvmlEventSet_t set,
                                   std::vector<nvmlDevice_t> handles, size_t capacity)
    : api_(api), set_(set), handles_(std::move(handles)), capacity_(capacity) {
    thread_ = std::thread([this] { run(); });
}

NvmlEventWatcher::~NvmlEventWatcher() {
    stopping_ = true;
    if (thread_.joinable()) thread_.join();
    api_.event_set_free(set_);
}

NvmlEventWatcher::Taken NvmlEventWatcher::take() {
    std::lock_guard lock(mutex_);
    Taken taken;
    taken.events.assign(std::make_move_iterator(queue_.begin()),
                        std::make_move_iterator(queue_.end()));
    queue_.clear();
    taken.dropped = std::exchange(dropped_, 0);
    return taken;
}

void NvmlEventWatcher::run() {
    while (!stopping_) {
        nvmlEventData_t data{};
        const nvmlReturn_t rc = api_.event_set_wait(set_, &data, kWaitMs);
        if (rc == NVML_SUCCESS) {
            push(data);
        } else if (rc != NVML_ERROR_TIMEOUT) {
            // A GPU lost or NVML shut down under us: no busy loop, the
            // backend's next devices() starts a new watcher.
            logger("backends")->warn("nvmlEventSetWait_v2: error {}; NVML events stop", rc);
            return;
        }
    }
}

void NvmlEventWatcher::push(const nvmlEventData_t& data) {
    const auto found = std::find(handles_.begin(), handles_.end(), data.device);
    if (found == handles_.end() || !data.device) return;  // not a GPU this backend lists
    const auto index = static_cast<size_t>(found - handles_.begin());
    GpuDeviceEvent event;
    if (data.eventType & NVML_EVENT_TYPE_XID_CRITICAL_ERROR) {
        event.kind = "xid";
        event.code = data.eventData;
    } else if (data.eventType & NVML_EVENT_TYPE_DOUBLE_BIT_ECC_ERROR) {
        event.kind = "ecc_double_bit";
    } else if (data.eventType & NVML_EVENT_TYPE_SINGLE_BIT_ECC_ERROR) {
        event.kind = "ecc_single_bit";
    } else if (data.eventType & NVML_EVENT_TYPE_CLOCK) {
        event.kind = "clocks";
        unsigned long long reasons = 0;
        if (api_.clock_reasons && api_.clock_reasons(data.device, &reasons) == NVML_SUCCESS) {
            event.code = reasons;
        }
    } else {
        return;
    }
    std::lock_guard lock(mutex_);
    if (queue_.size() >= capacity_) {
        ++dropped_;
        return;
    }
    queue_.emplace_back(index, std::move(event));
}

}  // namespace gpuguard::backends
