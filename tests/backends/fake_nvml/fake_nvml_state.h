// The fake NVML's state and helpers, shared by its parts (fake_nvml.cpp:
// devices, metrics and processes; fake_nvml_events.cpp: the event API).
// Private to the fake library.
#pragma once

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/backends/fake_nvml/nvml_public.h"

struct nvmlDevice_st {
    unsigned index;  // the physical GPU's
    int mig = -1;    // a MIG device's index in its GPU's "mig_instances"; -1: the GPU itself
};
struct nvmlEventSet_st {
    std::deque<nvmlEventData_t> queue;
    std::vector<std::pair<nvmlDevice_t, unsigned long long>> registered;  // device, its types
};

namespace fake_nvml {

using nlohmann::json;

struct State {
    std::mutex mutex;
    json script;
    bool initialised = false;
    unsigned step = 0;
    std::vector<nvmlDevice_st> devices;
    std::deque<nvmlDevice_st> mig_devices;  // handed out by nvmlDeviceGetMigDeviceHandleByIndex
    std::map<std::string, int> calls;
    std::vector<nvmlEventSet_st*> event_sets;
    std::condition_variable event_queued;  // with `mutex`
    unsigned queued_step = 0;              // the step_file's step whose events were queued last
};

State& state();
// The script's object for a handle: the GPU's, or a MIG device's entry of
// its GPU's "mig_instances" (which the per-device calls then answer from).
const json* device_json(nvmlDevice_t device);
void count(const char* function);
// The device's current step, or null (no device, no steps).
const json* step_json(nvmlDevice_t device);
// NVML_SUCCESS and the step's value for `key`, or the scripted error for
// `function`, or NOT_SUPPORTED when the step lacks the key (nullptr key:
// only the errors are looked up).
nvmlReturn_t lookup(const char* function, nvmlDevice_t device, const char* key, const json** value);
// Queues the current step's "xid" and "events" on every set registered for
// them, and wakes its waiters; state().mutex held.
void queue_xids_locked();
// fake_nvml_set_step()'s step, or the number the script's "step_file" holds.
unsigned current_step();

template <typename F>
nvmlReturn_t guarded(F&& body) {
    try {
        return body();
    } catch (...) {
        return NVML_ERROR_UNKNOWN;  // malformed script value: never throw across the C ABI
    }
}

}  // namespace fake_nvml
