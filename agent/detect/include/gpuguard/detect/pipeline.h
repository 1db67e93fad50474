// The one pipeline every event takes, live and in replay: network
// intelligence -> (a snapshot of a new GPU holder) -> journal -> process
// table -> correlator -> what the caller does with it. The live agent feeds
// it from the sensor, replay from JSON Lines or a journal; the stages and
// their order are the same, so the same events give the same detections.
//
//   sensor / replay ──▶ NetIntel ──▶ [snapshot] ──▶ journal ──▶ ProcessTable
//                       (connect.domain,                         │
//                        stratum events)          on_applied ◀──┤
//                                                                ▼
//                                               Correlator ──▶ emit ──▶ on_judged
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <unordered_set>
#include <vector>

#include "gpuguard/common/detection.h"
#include "gpuguard/detect/correlator.h"
#include "gpuguard/events/event.h"
#include "gpuguard/events/file_watch.h"
#include "gpuguard/journal/journal.h"
#include "gpuguard/netintel/net_intel.h"
#include "gpuguard/state/process_table.h"

namespace gpuguard::agent {

struct PipelineStages {
    ProcessTable* table = nullptr;              // required
    NetIntel* net_intel = nullptr;              // null: events pass unannotated
    journal::JournalWriter* journal = nullptr;  // null: nothing is written
    Correlator* correlator = nullptr;           // null: nothing is judged
    // A process's first GPU use puts a process_snapshot (what /proc says
    // about it) into the stream before the event, so the journal carries
    // the identity the live correlator sees. Live with a journal only: a
    // recorded stream already holds the snapshots it was given.
    bool snapshot_new_gpu_holders = false;
    // Live only (a recording carries what live read): complete each
    // file_change from /proc (a relative path made absolute and named with
    // `watch_files`, the libraries ld.so.preload names) and each exec whose
    // filename is an fd path (its exe from /proc/PID/exe) before it is
    // journaled, put a process_env event (LD_PRELOAD, LD_LIBRARY_PATH)
    // into the stream before a process's first GPU event and before each
    // exec of a process that holds a GPU, and a container event before the
    // first exec seen in each container's cgroup.
    bool read_proc_context = false;
    const std::vector<WatchPattern>* watch_files = nullptr;
    std::string proc_root = "/proc";
};

struct PipelineHooks {
    // Each detection the correlator raises.
    std::function<void(const Detection&)> emit;
    // After the table took the event, before it is judged (the live agent
    // reports in-kernel kills here).
    std::function<void(const Event&)> on_applied;
    // After it was judged (scans, the priority guard, --print-events).
    std::function<void(const Event&)> on_judged;
};

struct PipelineStats {
    uint64_t events = 0;     // passed through every stage, derived ones included
    uint64_t derived = 0;    // stratum events network intelligence derived
    uint64_t rederived = 0;  // recorded stratum events dropped: derived again from their payload
};

class Pipeline {
  public:
    Pipeline(PipelineStages stages, PipelineHooks hooks);

    // One event from the kernel (or a recording of it), judged. The rvalue
    // form lets the table take an exec's strings instead of copying them
    // (replay's hot path) when no hook is there to read the event after.
    void feed(const Event& event);
    void feed(Event&& event);
    // State only, not judged: what replay reads before --since. Network
    // intelligence and the table still learn from it.
    void learn(const Event& event);
    // Only judges `event`: the table is not told (a replay window's opening
    // snapshot of the table's own processes).
    void judge_only(const Event& event);

    // Wall clock minus the events' monotonic clock: journal records and detections.
    void set_realtime_offset(int64_t offset_ns);
    const PipelineStats& stats() const { return stats_; }

  private:
    // Network intelligence on one input event (payloads and exits; connects
    // are named by the caller): fills derived_; false when the input is a
    // recorded stratum event it just derived again (a journal or
    // --print-events stream holds both).
    bool note_derived(const Event& event);
    template <typename AnEvent>
    void feed_event(AnEvent&& event, bool judge_it);
    template <typename AnEvent>
    void pass(AnEvent&& event, bool judge);
    void judge(const Event& event);
    // Live: the container of an exec's cgroup, the first time the cgroup is
    // seen (one /proc read per cgroup, not per exec).
    std::optional<Event> container_of_new_cgroup(const Event& exec);

    PipelineStages stages_;
    PipelineHooks hooks_;
    PipelineStats stats_;
    int64_t realtime_offset_ns_ = 0;
    std::vector<Event> derived_;           // from the latest input event
    std::vector<Event> recently_derived_;  // not yet matched by a recorded copy
    std::vector<const Detection*> raised_;
    std::unordered_set<uint64_t> cgroups_seen_;  // bounded: cleared past kMaxCgroupsSeen
};

}  // namespace gpuguard::agent
