// Detection and EnforcementOutcome: what the correlator concludes and what the
// enforcer did about it — the records every output (SIEM formats, replay,
// journal, metrics) is made from. Plain data, no behaviour: the correlator
// (agent/) fills them, siem/ formats them, the journal stores them.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "gpuguard/common/severity.h"

namespace gpuguard {

// What a container runtime's own state says about a container (podman's
// database, docker's config.v2.json, containerd's OCI bundle annotations):
// all "" when unknown. The id and runtime come from the cgroup path
// (DetectionProcess::container_id/container_runtime).
struct ContainerDetails {
    std::string name;
    std::string image;           // "registry/repo:tag" as the runtime names it
    std::string image_id;        // the image's digest or id ("sha256:..." or 64 hex)
    std::string pod_name;        // label io.kubernetes.pod.name
    std::string pod_namespace;   // label io.kubernetes.pod.namespace
    std::string pod_uid;         // label io.kubernetes.pod.uid (or the kubepods cgroup)
    std::string kube_container;  // label io.kubernetes.container.name

    bool empty() const { return name.empty() && image.empty() && image_id.empty() && !in_pod(); }
    bool in_pod() const { return !pod_name.empty() || !pod_namespace.empty(); }
    bool operator==(const ContainerDetails&) const = default;
};

// The Slurm job a process runs in: from slurmstepd's cgroup (job_<id>,
// step_<step>) and the job's environment (SLURM_JOB_ID, SLURM_STEP_ID,
// SLURM_JOB_USER, SLURM_JOB_ACCOUNT, SLURM_JOB_PARTITION), read at its
// first GPU use; all "" outside a job.
struct SlurmJob {
    std::string job_id;     // "4242"
    std::string step_id;    // "0", "batch", "extern", "interactive"
    std::string user;       // the job's owner as Slurm names it
    std::string account;    // the account it is charged to
    std::string partition;  // the partition it runs in
    // The GPUs Slurm gave it, as its environment says (SLURM_STEP_GPUS, else
    // SLURM_JOB_GPUS: GRES indices on the node, "0,2"); "" when none.
    std::string gpus;

    bool empty() const { return job_id.empty(); }
    bool operator==(const SlurmJob&) const = default;
};

// The process a detection is about, as the agent knew it at the time.
struct DetectionProcess {
    uint32_t pid = 0;
    uint32_t ppid = 0;
    uint32_t uid = 0;
    uint32_t gid = 0;
    uint64_t start_time_ns = 0;  // CLOCK_BOOTTIME-based start (from /proc stat), 0 if unknown
    std::string comm;            // kernel task name (15 chars)
    std::string executable;      // resolved exe path ("" if unknown)
    std::vector<std::string> argv;
    std::string command_line;       // argv joined by single spaces
    std::string user;               // user name, "" if unknown
    std::string cgroup_path;        // cgroup v2 path, "" if unknown
    std::string container_id;       // 64 hex digits, "" on the host
    std::string container_runtime;  // docker, containerd, cri-o, podman
    ContainerDetails container;     // from the runtime's state; empty on the host
    SlurmJob slurm;                 // the Slurm job it runs in; empty outside one
    std::string sha256;             // of the executable, "" if not hashed
};

// A GPU the process holds, with the latest telemetry for it.
struct DetectionGpu {
    uint32_t major = 0;
    uint32_t minor = 0;
    std::string device;  // "/dev/nvidia0", "/dev/dri/renderD128", or "" if unknown
    int index = -1;      // backend GPU index, -1 if unknown
    std::string vendor;  // "nvidia", "amd", "intel", ... or ""
    std::optional<double> utilization_percent;          // whole GPU
    std::optional<uint64_t> memory_used_bytes;          // by this process
    std::optional<double> process_utilization_percent;  // by this process
    // On a GPU in MIG mode, the GPU instance (GI id) the process runs in
    // (NVML's, or the one whose access node it holds), or this node's.
    std::optional<uint32_t> mig_gpu_instance;
};

// The network peer the detection concerns (a connect or a stratum session).
struct DetectionPeer {
    std::string ip;
    uint16_t port = 0;
    std::string domain;    // observed DNS name for ip, "" when unknown
    std::string protocol;  // "stratum1", "stratum2", ... or ""
};

// One piece of evidence: an event, a signature match, a telemetry sample.
struct Evidence {
    uint64_t ts_ns = 0;        // CLOCK_MONOTONIC (virtual clock in replay)
    std::string kind;          // "event", "signature", "yara", "telemetry", "policy"
    std::string event_type;    // "gpu_open", "connect", "exec", ... for kind "event"
    std::string signature_id;  // for kind "signature" and "yara"
    std::string field;         // what matched: "cmdline", "process", "domain", "port", ...
    std::string detail;        // human-readable: the matched value, the threshold crossed
};

// One correlated finding about one process, updated (not repeated) while
// new evidence arrives within the rule's window.
struct Detection {
    std::string id;  // unique per agent run and host, stable across updates
    std::string rule_id;
    std::string rule_name;
    std::string ruleset;      // "gpuguard-correlation", "gpuguard-guard", ...
    std::string description;  // why it fired, one sentence
    Severity severity = Severity::kWarning;
    double confidence = 0.0;           // 0..1, combined from the evidence
    std::string mitre_technique_id;    // "T1496"
    std::string mitre_technique_name;  // "Resource Hijacking"
    std::string mitre_tactic;          // "Impact"
    uint64_t first_seen_ns = 0;        // CLOCK_MONOTONIC of the first evidence
    uint64_t last_seen_ns = 0;         // ... of the latest
    int64_t time_unix_ns = 0;          // wall clock of the latest update (0 in replay)
    uint32_t update = 0;               // 0 for the first report, then 1, 2, ...
    DetectionProcess process;
    std::vector<DetectionGpu> gpus;
    std::optional<DetectionPeer> peer;
    std::vector<std::string> signature_ids;  // every signature that contributed, sorted
    std::vector<Evidence> evidence;          // oldest first, bounded
    std::string action;  // what the rule asks for: "alert", "kill", "kill_now", ...
    bool dry_run = false;
};

// What the enforcer did about a detection (taken, withheld, failed).
struct EnforcementOutcome {
    std::string id;            // unique, like Detection::id
    std::string detection_id;  // the detection that asked for it
    std::string rule_id;
    std::string action;  // "kill", "kill_now", "block_ip", "deny_gpu", "pause", "resume"
    // "success", "failure", "withheld", "dry_run", or "already_exited": the
    // process was gone before the action (ended by the kill of
    // `linked_detection_id` when that is set)
    std::string outcome;
    std::string reason;  // why withheld/failed, or what was done ("SIGKILL after 5 s")
    Severity severity = Severity::kWarning;
    uint64_t ts_ns = 0;
    int64_t time_unix_ns = 0;
    DetectionProcess process;           // target process (pid 0 for block_ip on an address only)
    std::optional<DetectionPeer> peer;  // for block_ip
    uint64_t latency_ns = 0;            // detection to effect, 0 if none
    std::string linked_detection_id;    // already_exited: the detection whose kill ended it
};

// Where the agent runs: filled once at start, attached to every output.
struct HostInfo {
    std::string hostname;
    std::string boot_id;
    std::string kernel;  // uname release
    std::string agent_version;
};

}  // namespace gpuguard
