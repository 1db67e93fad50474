// What a Sensor holds (private to the sensor room): the loaded object, its
// links and the ring-buffer consumer, shared by sensor_open.cpp (the
// loader: probe, configure, load, attach, pin, read) and sensor.cpp (the
// running sensor's maps, counters and stream).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <vector>

#include "gpuguard/common/logging.h"
#include "gpuguard/sensor/sensor.h"
#include "gpuguard_bpf.skel.h"
#include "kernel_watch.h"
#include "libbpf_handles.h"
#include "own_bpf_objects.h"
#include "sensor_attach.h"

namespace gpuguard::agent {

using SkeletonPtr = LibbpfPtr<gpuguard_bpf, gpuguard_bpf__destroy>;

// Keeps kill_now_armed in step with the known-bad maps, so the hot paths
// skip their lookups while a map is empty (sensor.cpp).
void update_kill_now_armed(gpuguard_bpf* skel);

struct Sensor::Impl {
    // Destroyed bottom-up: consumer, then links (detach), then the skeleton (unload).
    SkeletonPtr skeleton;
    std::vector<LinkPtr> links;
    RingBufferPtr ring;
    EventHandler handler;
    uint64_t delivered = 0;
    uint64_t decode_errors = 0;
    std::vector<std::string> hooks;
    AttachMode mode = AttachMode::kSyscallTracepoints;
    std::string reason;                          // why this mode
    PayloadHooks payload = PayloadHooks::kNone;  // kNone: no program counts GPU processes' sends
    std::unique_ptr<KernelWatch> watch;          // watched_tgids, watched_addrs
    std::vector<WatchPattern> watch_files;       // as loaded into watch_paths, watch_names
    BpfObjects own_objects;                      // as loaded into agent_bpf_objects

    static int on_record(void* context, void* data, size_t size) {
        auto* self = static_cast<Impl*>(context);
        auto event = decode_record(std::span(static_cast<const std::byte*>(data), size));
        if (!event) {
            // Counted and reported in stats; a bad record never stops the stream.
            ++self->decode_errors;
            logger("sensor")->warn("dropping undecodable record ({} bytes): {}", size,
                                   event.error().message);
            return 0;
        }
        ++self->delivered;
        if (self->handler) self->handler(event.value());
        return 0;
    }
};

}  // namespace gpuguard::agent
