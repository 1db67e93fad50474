// Kernel feature probe: loads (and where cheap, attaches) one tiny program
// per mechanism, so later features choose the best hook and say clearly when
// one is missing. Backs `gpuguard probe`.
#pragma once

#include <string>
#include <vector>

#include "gpuguard/sensor/sensor.h"

namespace gpuguard::agent {

struct FeatureStatus {
    std::string name;         // "ring_buffer", "fentry", ...
    std::string description;  // what the feature is for, one line
    bool available = false;
    bool required = false;  // the sensor cannot run without it
    std::string detail;     // how it was decided, or why it failed (errno name)
};

struct ProbeOptions {
    std::string tracefs_dir = "/sys/kernel/tracing";
    bool allow_mount_tracefs = true;  // sensor.mount_tracefs
    std::string btf_path;             // sensor.btf; "" = the kernel's
    AttachMode attach =
        AttachMode::kAuto;  // sensor.attach: the "attach_mode" row says what it gives
};

// Runs every probe. Never fails as a whole: each unavailable feature carries
// its reason. Mounts tracefs when missing and allowed. Needs root (or
// CAP_BPF+CAP_PERFMON) to say anything useful; callers check first.
std::vector<FeatureStatus> probe_kernel_features(const ProbeOptions& options);

// Only the "bpf_lsm" probe of probe_kernel_features(): whether this kernel
// loads and runs a BPF LSM program (the agent asks before loading deny_gpu's
// lsm/file_open). `btf_path`: sensor.btf, "" = the kernel's.
FeatureStatus probe_bpf_lsm(const std::string& btf_path);

// Only the "sock_send_length" probe: whether tp_btf programs on the socket
// layer's sock_send_length and sock_recv_length tracepoints (6.3+) load and
// attach, and the payload programs can read the system call behind them
// (x86-64, arm64). The sensor picks the payload variant from it
// (docs/network.md). `btf_path`: sensor.btf, "" = the kernel's.
FeatureStatus probe_socket_layer(const std::string& btf_path);

// Which attachment mode the sensor uses for `wanted` (sensor.attach) on this
// kernel, decided by test programs: kernel_functions needs fentry/fexit
// (trampolines), raw_syscalls a BTF-typed (tp_btf) or plain raw tracepoint
// on sys_enter. kAuto takes the first of kernel_functions, raw_syscalls,
// syscall_tracepoints that loads and attaches; a named mode the kernel
// refuses is an error (mode kAuto returned, `reason` says why).
struct AttachDecision {
    AttachMode mode = AttachMode::kAuto;
    bool raw_btf = false;  // raw_syscalls through tp_btf (else plain raw tracepoints)
    std::string reason;    // one line: what the probes found
};
AttachDecision decide_attach_mode(AttachMode wanted, const std::string& btf_path);

}  // namespace gpuguard::agent
