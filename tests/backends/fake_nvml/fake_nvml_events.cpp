// The fake NVML's event API: event sets, the types each GPU supports and
// registered, and waits that honour their timeout (fake_nvml.cpp's script
// comment says what a step queues).
#include <algorithm>
#include <chrono>

#include "tests/backends/fake_nvml/fake_nvml_state.h"

namespace fake_nvml {
namespace {

// NVML's event type of a script's "type" name; 0 for an unknown one.
unsigned long long event_type_named(const std::string& name) {
    if (name == "single_bit_ecc") return nvmlEventTypeSingleBitEccError;
    if (name == "double_bit_ecc") return nvmlEventTypeDoubleBitEccError;
    if (name == "xid") return nvmlEventTypeXidCriticalError;
    if (name == "clock") return nvmlEventTypeClock;
    return 0;
}

}  // namespace

void queue_xids_locked() {
    auto& s = state();
    if (!s.script.contains("devices")) return;
    for (auto* set : s.event_sets) {
        for (const auto& registration : set->registered) {
            // Named, not a structured binding: clang 14 cannot capture those.
            const nvmlDevice_t device = registration.first;
            const unsigned long long types = registration.second;
            const json* step = step_json(device);
            if (!step) continue;
            const auto queue = [&](unsigned long long type, unsigned long long data) {
                if (!(types & type)) return;
                nvmlEventData_t event{};
                event.device = device;
                event.eventType = type;
                event.eventData = data;
                set->queue.push_back(event);
            };
            for (const auto& xid : step->value("xid", json::array())) {
                queue(nvmlEventTypeXidCriticalError, xid.get<unsigned long long>());
            }
            for (const auto& event : step->value("events", json::array())) {
                const int times = event.value("count", 1);
                for (int i = 0; i < times; ++i) {
                    queue(event_type_named(event.at("type").get<std::string>()),
                          event.value("data", 0ull));
                }
            }
        }
    }
    s.event_queued.notify_all();
}

namespace {

// What the script's device supports: its "supported_events", or the four
// types the agent asks for.
unsigned long long supported_event_types(nvmlDevice_t device) {
    const json& devices = state().script["devices"];
    const json& entry = devices.at(device->index);
    return entry.value("supported_events", nvmlEventTypeSingleBitEccError |
                                               nvmlEventTypeDoubleBitEccError |
                                               nvmlEventTypeXidCriticalError | nvmlEventTypeClock);
}

}  // namespace
}  // namespace fake_nvml

using namespace fake_nvml;

extern "C" {

__attribute__((visibility("default"))) nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t* set) {
    count("nvmlEventSetCreate");
    if (!state().initialised) return NVML_ERROR_UNINITIALIZED;
    std::lock_guard lock(state().mutex);
    *set = new nvmlEventSet_st();
    state().event_sets.push_back(*set);
    return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceGetSupportedEventTypes(
    nvmlDevice_t device, unsigned long long* types) {
    return guarded([&]() -> nvmlReturn_t {
        const json* unused = nullptr;
        const auto rc = lookup("nvmlDeviceGetSupportedEventTypes", device, nullptr, &unused);
        if (rc != NVML_SUCCESS) return rc;
        std::lock_guard lock(state().mutex);
        *types = supported_event_types(device);
        return NVML_SUCCESS;
    });
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlDeviceRegisterEvents(
    nvmlDevice_t device, unsigned long long types, nvmlEventSet_t set) {
    return guarded([&]() -> nvmlReturn_t {
        const json* unused = nullptr;
        const auto rc = lookup("nvmlDeviceRegisterEvents", device, nullptr, &unused);
        if (rc != NVML_SUCCESS) return rc;
        std::lock_guard lock(state().mutex);
        // NVML refuses the whole registration when one type is not supported.
        if (types == 0 || (types & ~supported_event_types(device))) return NVML_ERROR_NOT_SUPPORTED;
        set->registered.emplace_back(device, types);
        return NVML_SUCCESS;
    });
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set,
                                                                        nvmlEventData_t* data,
                                                                        unsigned timeout_ms) {
    count("nvmlEventSetWait_v2");
    std::unique_lock lock(state().mutex);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    // With a "step_file" the step moves under a live agent without a call
    // here: entering a new one queues its events as fake_nvml_set_step does.
    const bool stepped_by_file = state().script.contains("step_file");
    while (set->queue.empty()) {
        if (stepped_by_file) {
            if (const unsigned now = current_step(); now != state().queued_step) {
                state().queued_step = now;
                queue_xids_locked();
                continue;
            }
        }
        const auto left = deadline - std::chrono::steady_clock::now();
        if (left <= std::chrono::steady_clock::duration::zero()) return NVML_ERROR_TIMEOUT;
        state().event_queued.wait_for(lock, stepped_by_file
                                                ? std::min<std::chrono::steady_clock::duration>(
                                                      left, std::chrono::milliseconds(50))
                                                : left);
    }
    *data = set->queue.front();
    set->queue.pop_front();
    return NVML_SUCCESS;
}

__attribute__((visibility("default"))) nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
    count("nvmlEventSetFree");
    std::lock_guard lock(state().mutex);
    auto& sets = state().event_sets;
    for (auto it = sets.begin(); it != sets.end(); ++it) {
        if (*it == set) {
            sets.erase(it);
            break;
        }
    }
    delete set;
    return NVML_SUCCESS;
}

}  // extern "C"
