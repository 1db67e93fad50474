// HostReads: what the live agent reads from the host for the pipeline
// before an event is journaled, so that a recording carries it and replay,
// which has no host to read, judges the same. The pipeline is given one
// live and none in replay (gpuguard/detect/pipeline.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include "gpuguard/events/event.h"
#include "gpuguard/events/file_watch.h"
#include "gpuguard/state/pod_allocation.h"
#include "gpuguard/state/process_table.h"

namespace gpuguard::agent {

struct HostReadOptions {
    std::string proc_root = "/proc";
    // Names a file_change whose path was relative once it is absolute.
    const std::vector<WatchPattern>* watch_files = nullptr;
    // A process's first GPU use puts a process_snapshot (what /proc says of
    // it) into the stream before the event, so the journal carries the
    // identity the live correlator sees: with a journal only.
    bool snapshot_new_gpu_holders = false;
    // A pod's identity and the GPUs the kubelet gave it, for workload_of.
    KubeletSources kubelet{};
};

class HostReads {
  public:
    HostReads(ProcessTable& table, HostReadOptions options);

    // Completes `event` from /proc: a file_change's relative path made
    // absolute (and named), the libraries an ld.so.preload names; an exec's
    // real executable (gpuguard/state/file_context.h). Others are left.
    void complete(Event& event) const;
    // The process_env event of `event`'s process (LD_PRELOAD, LD_LIBRARY_PATH
    // and what the disk says of each), at `event`'s time.
    Event environment_of(const Event& event) const;
    // The workload event of `event`'s process (its Slurm job or pod and the
    // GPUs allocated to it, gpuguard/state/workload.h), at its time;
    // nullopt outside a job or pod. A pod's process whose pod the kubelet's
    // last answer lacked (a pod newer than it) is `unresolved`, not judged,
    // until the kubelet's next answer (workloads_after_refresh): its
    // environment alone would call a pod the kubelet gave a GPU "given none".
    std::optional<Event> workload_of(const Event& event);
    // The workload events, at `now_ns`, of the processes workload_of left
    // waiting, once the kubelet has answered since: by its allocation where
    // it names the pod now, else by their environment. Empty until then.
    std::vector<Event> workloads_after_refresh(uint64_t now_ns);
    // The gpu_libraries event of `event`'s process (/proc/PID/maps), at its time.
    Event gpu_libraries_of(const Event& event) const;
    // Connect events (reason established, as a GPU holder's) for the TCP
    // connections off the host `event`'s process has open already: a miner
    // that reached its pool before it opened the GPU.
    std::vector<Event> established_connects_of(const Event& event) const;
    // For an exec whose argv the kernel cut short (argv_truncated, some of
    // it copied), the cmdline event of its process (/proc/PID/cmdline read
    // again, up to kMaxCmdlineBytes), at its time; nullopt for any other
    // event and when the process is gone.
    std::optional<Event> full_cmdline_of(const Event& exec) const;
    // For a change of one of the agent's trusted files (a file_change of
    // kind agent_config), the trust_change event "write" naming the writer:
    // its executable and command line, and whether it is the package
    // manager or systemctl (gpuguard/state/writer_origin.h), read at once;
    // nullopt for any other event.
    std::optional<Event> trusted_write_of(const Event& change) const;
    // The container event of an exec's cgroup, the first time the cgroup is
    // seen (one /proc read per cgroup, not per exec).
    std::optional<Event> container_of_new_cgroup(const Event& exec);
    bool snapshots_new_gpu_holders() const { return options_.snapshot_new_gpu_holders; }

  private:
    ProcessTable& table_;
    HostReadOptions options_;
    std::unordered_set<uint64_t> cgroups_seen_;  // bounded: cleared past kMaxCgroupsSeen
    std::optional<Workload> read_workload_of(uint32_t pid) const;
    // Processes of pods the kubelet had not named, with its answer count then.
    struct WaitingPod {
        TaskInfo task;
        uint64_t answers = 0;
    };
    std::vector<WaitingPod> waiting_pods_;  // bounded: kMaxWaitingPods
};

}  // namespace gpuguard::agent
