// PodResourcesCache (gpuguard/kubelet/pod_resources.h): List on a thread
// of its own, so that the event loop reads memory and never waits on the
// kubelet.
#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

#include "gpuguard/common/logging.h"
#include "gpuguard/kubelet/pod_resources.h"

namespace gpuguard::kubelet {

namespace {

// The containers of `pod` a lookup reads: `container`, or every one when it
// is "" or not among them (the caller did not know which).
std::vector<const ContainerResources*> containers_named(const PodResources& pod,
                                                        const std::string& container) {
    bool known = false;
    for (const ContainerResources& each : pod.containers) known |= each.name == container;
    std::vector<const ContainerResources*> chosen;
    for (const ContainerResources& each : pod.containers) {
        if (!known || each.name == container) chosen.push_back(&each);
    }
    return chosen;
}

void add_once(std::vector<std::string>& list, std::string item) {
    if (std::find(list.begin(), list.end(), item) == list.end()) list.push_back(std::move(item));
}

}  // namespace

std::vector<std::string> nvidia_device_ids(const PodResources& pod, const std::string& container) {
    std::vector<std::string> ids;
    for (const ContainerResources* each : containers_named(pod, container)) {
        for (const ResourceDevices& devices : each->devices) {
            if (!devices.resource_name.starts_with("nvidia.com/")) continue;
            for (const std::string& id : devices.device_ids) add_once(ids, id);
        }
    }
    return ids;
}

std::vector<std::string> gpu_claim_devices(const PodResources& pod, const std::string& container) {
    std::vector<std::string> claims;
    for (const ContainerResources* each : containers_named(pod, container)) {
        for (const ClaimDevice& device : each->claim_devices) {
            const std::string& driver =
                device.driver_name.empty() ? device.class_name : device.driver_name;
            if (driver.find("gpu") == std::string::npos) continue;
            std::string text = driver;
            if (!device.device_name.empty()) text += "/" + device.device_name;
            add_once(claims,
                     text + " (claim " + device.claim_namespace + "/" + device.claim_name + ")");
        }
    }
    return claims;
}

struct PodResourcesCache::State {
    PodResourcesCacheOptions options;
    PodResourcesClient client;
    mutable std::mutex mutex;
    mutable std::condition_variable changed;
    std::map<std::pair<std::string, std::string>, PodResources> pods;  // (namespace, name)
    PodResourcesCounters counters;
    uint64_t refreshes_begun = 0;
    uint64_t refreshes_ended = 0;
    bool soon = false;
    bool stopping = false;
    std::string last_error;  // logged once until it changes
    std::thread thread;

    explicit State(PodResourcesCacheOptions o)
        : options(std::move(o)), client(options.socket_path, options.call_timeout) {}

    void refresh() {
        auto listed = client.list();
        std::lock_guard lock(mutex);
        if (listed) {
            pods.clear();
            for (PodResources& pod : *listed) {
                auto key = std::make_pair(pod.pod_namespace, pod.name);
                pods.insert_or_assign(std::move(key), std::move(pod));
            }
            ++counters.refreshes;
            if (!last_error.empty()) {
                logger("kubelet")->info("kubelet PodResources answers again ({} pods)",
                                        pods.size());
            }
            last_error.clear();
            return;
        }
        const Error& error = listed.error();
        if (error.code == ErrorCode::kNotFound) {
            ++counters.socket_absent;
        } else {
            ++counters.failures;
        }
        if (error.message != last_error) {
            // No kubelet is the normal case off Kubernetes: info, not warn.
            if (error.code == ErrorCode::kNotFound) {
                logger("kubelet")->info("{}: pods' GPU allocations from their environment only",
                                        error.message);
            } else {
                logger("kubelet")->warn("{}; keeping the last answer", error.message);
            }
            last_error = error.message;
        }
    }

    void run() {
        std::unique_lock lock(mutex);
        while (!stopping) {
            ++refreshes_begun;
            soon = false;
            lock.unlock();
            refresh();
            lock.lock();
            ++refreshes_ended;
            changed.notify_all();
            changed.wait_for(lock, options.refresh_interval, [&] { return stopping || soon; });
        }
    }
};

PodResourcesCache::PodResourcesCache(PodResourcesCacheOptions options)
    : state_(std::make_unique<State>(std::move(options))) {
    state_->thread = std::thread([state = state_.get()] { state->run(); });
}

PodResourcesCache::~PodResourcesCache() {
    {
        std::lock_guard lock(state_->mutex);
        state_->stopping = true;
    }
    state_->changed.notify_all();
    state_->thread.join();
}

std::optional<PodResources> PodResourcesCache::find(const std::string& pod_namespace,
                                                    const std::string& name) const {
    std::lock_guard lock(state_->mutex);
    const auto found = state_->pods.find(std::make_pair(pod_namespace, name));
    if (found == state_->pods.end()) return std::nullopt;
    return found->second;
}

void PodResourcesCache::refresh_soon() {
    {
        std::lock_guard lock(state_->mutex);
        state_->soon = true;
    }
    state_->changed.notify_all();
}

void PodResourcesCache::refresh_and_wait() {
    std::unique_lock lock(state_->mutex);
    // One that begins after now: the one running may have read the old answer.
    const uint64_t target = state_->refreshes_begun + 1;
    state_->soon = true;
    state_->changed.notify_all();
    state_->changed.wait(lock, [&] { return state_->refreshes_ended >= target; });
}

PodResourcesCounters PodResourcesCache::counters() const {
    std::lock_guard lock(state_->mutex);
    return state_->counters;
}

}  // namespace gpuguard::kubelet
