// What the host says of the workload a process runs in (docs/events.md,
// "workload"): the Slurm job from slurmstepd's cgroup and the job's
// environment, a Kubernetes pod from its cgroup, and the GPUs allocated to
// it, turned into device numbers (docs/detections.md, "A GPU used outside
// its allocation", says how each source maps to minors).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gpuguard/common/detection.h"
#include "gpuguard/events/event.h"
#include "gpuguard/state/pod_allocation.h"

namespace gpuguard::agent {

// The job and step slurmstepd put the process in, from /proc/PID/cgroup's
// text (every line: cgroup v2's ".../slurmstepd.scope/job_<id>/step_<step>/"
// and cgroup v1's "/slurm/uid_<uid>/job_<id>/step_<step>/"); both "" when
// no line is a Slurm job's.
struct SlurmCgroup {
    std::string job_id;
    std::string step_id;
};
SlurmCgroup slurm_cgroup_of(std::string_view proc_cgroup);

// Whether /proc/PID/cgroup's text puts the process in a Kubernetes pod
// (a "kubepods" cgroup, under either cgroup manager).
bool in_kubepods(std::string_view proc_cgroup);

// "/dev/nvidia[0-1,3]" -> /dev/nvidia0, /dev/nvidia1, /dev/nvidia3: Slurm's
// hostlist brackets in a gres.conf File= value (one bracket group); a
// value without brackets is itself. Commas outside brackets separate files.
std::vector<std::string> expand_gres_files(std::string_view value);

// The node's `gpu` GRES in gres.conf's order (the order of Slurm's GRES
// indices), each as its device files: every file of a "Name=gpu ...
// File=..." line is a GRES of its own; a "MultipleFiles=..." line (a MIG
// device: its GPU's /dev/nvidiaN and its /dev/nvidia-caps access nodes)
// is one GRES of all its files. Lines whose NodeName (if any) is `node` or
// a hostlist expression this reader does not evaluate; comments and other
// GRES are skipped.
std::vector<std::vector<std::string>> gres_gpu_files(std::string_view gres_conf,
                                                     std::string_view node);

struct WorkloadReadOptions {
    std::string proc_root = "/proc";
    // Where the host's files are read (gres.conf, device nodes): the init
    // process's root, so that an agent in a container reads the host's.
    std::string host_root = "/proc/1/root";
    std::string node_name;   // this host's short name, for gres.conf's NodeName=
    KubeletSources kubelet;  // a pod's identity and the GPUs the kubelet gave it
};

// The options for the host under `proc_root`: its files through init's
// root (an agent in a container that shares the host's PID namespace),
// else the agent's own where that is refused (init in another user
// namespace).
WorkloadReadOptions host_workload_options(const std::string& proc_root);

// The workload event of process `pid`: its Slurm job or pod and its
// allocation; nullopt when it is in neither (a process outside any job) or
// is gone. A pod's allocation is the kubelet's where options.kubelet names
// the pod, else its environment's. `labels`: what the container runtime
// said of the process's container (its pod's namespace, name, container).
// Never fails otherwise: what cannot be read is left "".
std::optional<Workload> read_workload(uint32_t pid, const WorkloadReadOptions& options,
                                      const ContainerDetails& labels = {});

// "195:0" for a device node's path (stat'ed), "" when it is not one.
std::string device_number_of(const std::string& path);

}  // namespace gpuguard::agent
