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
#include "gpuguard/detect/host_reads.h"
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
    // Live only (a recording carries what live read; replay has none): each
    // file_change and exec completed from /proc before it is journaled, a
    // process_env event put into the stream before a process's first GPU
    // event and before each exec of a process that holds a GPU, a container
    // event before the first exec seen in each container's cgroup, a
    // cmdline event after an exec whose argv the kernel cut short, and
    // (with a journal) a process_snapshot before a process's first GPU use.
    HostReads* host = nullptr;
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

    // One event from the kernel (or a recording of it), judged as it came:
    // nothing is moved out of it before the correlator has read it.
    void feed(const Event& event);
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
    void feed_event(const Event& event, bool judge_it);
    void pass(const Event& event, bool judge);
    void judge(const Event& event);

    PipelineStages stages_;
    PipelineHooks hooks_;
    PipelineStats stats_;
    int64_t realtime_offset_ns_ = 0;
    std::vector<Event> derived_;           // from the latest input event
    std::vector<Event> recently_derived_;  // not yet matched by a recorded copy
    std::vector<const Detection*> raised_;
};

}  // namespace gpuguard::agent
