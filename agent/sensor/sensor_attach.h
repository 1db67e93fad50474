// Which programs of the sensor object attach in each mode (sensor.attach,
// bpf/syscalls.bpf.c), decided between open and load: the plan turns every
// other program's autoload off, points the kernel_functions programs at the
// ABI's syscall functions and sets the syscall numbers the dispatchers use.
#pragma once

#include <string>
#include <vector>

#include "gpuguard/common/result.h"
#include "gpuguard/sensor/sensor.h"

struct bpf_program;
struct gpuguard_bpf;

namespace gpuguard::agent {

struct HookProgram {
    bpf_program* program;
    std::string
        kind;  // tracefs category ("syscalls", "sched"), or "raw", "tp_btf", "fentry", "fexit"
    std::string target;  // tracepoint or kernel function
    bool required;       // the sensor cannot run without it
    // Outlives the agent when pinning is on: kill_now's checks (exec, GPU
    // open, first GPU ioctl) and the lifecycle hooks that keep their maps
    // clean. Connects and payloads are only seen, so they end with the agent
    // where they have programs of their own.
    bool pinned = false;

    std::string name() const { return kind + "/" + target; }
};

enum class PayloadHooks {
    kNone,         // sensor.payload_capture off
    kSocketLayer,  // tp_btf sock_send_length/sock_recv_length (6.3+)
    kSyscalls,     // the mode's own syscall hooks on write/read/sendto/...
};

struct AttachPlan {
    AttachMode mode = AttachMode::kSyscallTracepoints;
    std::vector<HookProgram> hooks;  // autoloaded, in attach order
};

struct AttachRequest {
    AttachMode mode;  // never kAuto
    bool raw_btf;     // raw_syscalls through tp_btf
    PayloadHooks payload;
    bool watch_files;  // file changes (bpf/files.bpf.c): renames and unlinks hooked
    std::string tracefs_dir;
    std::string btf_path;  // "" = the kernel's
};

// Before load. Hooks the kernel lacks are dropped when optional (one info
// line each); a missing required one is kUnsupported naming what the kernel
// needs.
Result<AttachPlan> plan_attachment(gpuguard_bpf* skel, const AttachRequest& request);

}  // namespace gpuguard::agent
