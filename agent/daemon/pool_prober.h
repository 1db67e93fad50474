// PoolProber: the live agent's active verification of suspected pools
// (verify.active, docs/detections.md "Active verification"). The
// correlator asks (ProbeRequest); the prober rate-limits (per peer and
// overall), then on a thread of its own enters the process's network
// namespace, refuses addresses it must never speak to, and tries each
// mining dialect's first message over one bounded connection
// (siem::exchange_once), judging each answer (gpuguard/netintel/pool_probe.h).
// Every probe and every skip is logged; each probe made or refused comes
// back as a pool_probe event, journaled and judged like any other. Private
// to the daemon room.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>

#include "gpuguard/common/unique_fd.h"
#include "gpuguard/daemon/config.h"
#include "gpuguard/detect/correlator.h"
#include "gpuguard/events/event.h"

namespace gpuguard::agent {

class PoolProber {
  public:
    // Called on the prober's thread with each probe's event (ts_ns unset).
    using Report = std::function<void(Event)>;

    // Starts the thread: construct it last, after what `report` uses.
    PoolProber(VerifyConfig config, std::string proc_root, Report report);
    ~PoolProber();  // stops and joins; probes queued are dropped
    PoolProber(const PoolProber&) = delete;
    PoolProber& operator=(const PoolProber&) = delete;

    // Queues a probe of `request`'s peer for `task`'s process, unless the
    // peer was probed within verify.peer_interval_s, verify.max_per_hour
    // probes were made in the last hour, or the queue is full (each logged).
    // `now_ns` is monotonic.
    void submit(const TaskInfo& task, const ProbeRequest& request, uint64_t now_ns);

    uint64_t probed() const;   // probes made or refused
    uint64_t skipped() const;  // by the rate limits or a full queue

  private:
    struct Job {
        TaskInfo task;
        ProbeRequest request;
        UniqueFd netns;  // the process's network namespace, taken at submit time
    };
    void loop();
    PoolProbe probe(Job& job);
    // The dialects over one connection each, until one decides.
    void speak(const Job& job, bool tls, PoolProbe& out) const;

    VerifyConfig config_;
    std::string proc_root_;
    Report report_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    std::deque<Job> queue_;
    std::map<std::string, uint64_t> last_probe_ns_;  // "ADDRESS:PORT" -> when, monotonic
    std::deque<uint64_t> recent_ns_;                 // probes of the last hour
    bool stopping_ = false;
    bool broken_ = false;  // the thread could not return to its own namespace: no more probes
    uint64_t probed_ = 0;
    uint64_t skipped_ = 0;
    std::thread thread_;  // last: starts after everything it uses
};

}  // namespace gpuguard::agent
