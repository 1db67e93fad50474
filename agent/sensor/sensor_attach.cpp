#include "sensor_attach.h"

#include <filesystem>
#include <memory>

#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <sys/syscall.h>

#include "gpuguard/common/logging.h"
#include "gpuguard/sensor/sensor_support.h"
#include "gpuguard_bpf.skel.h"

namespace gpuguard::agent {
namespace {

#if defined(__x86_64__)
constexpr const char* kSyscallFunctionPrefix = "__x64_sys_";
#elif defined(__aarch64__)
constexpr const char* kSyscallFunctionPrefix = "__arm64_sys_";
#else
constexpr const char* kSyscallFunctionPrefix = "";
#endif

#ifdef SYS_open
constexpr long kNrOpen = SYS_open;
#else
constexpr long kNrOpen = -1;
#endif
#ifdef SYS_creat
constexpr long kNrCreat = SYS_creat;
#else
constexpr long kNrCreat = -1;
#endif
#ifdef SYS_rename
constexpr long kNrRename = SYS_rename;
#else
constexpr long kNrRename = -1;
#endif
#ifdef SYS_renameat
constexpr long kNrRenameat = SYS_renameat;
#else
constexpr long kNrRenameat = -1;
#endif
#ifdef SYS_unlink
constexpr long kNrUnlink = SYS_unlink;
#else
constexpr long kNrUnlink = -1;
#endif

struct BtfDeleter {
    void operator()(btf* handle) const { btf__free(handle); }
};

void set_syscall_numbers(gpuguard_bpf* skel) {
    auto* rodata = skel->rodata;
    rodata->cfg_nr_openat = SYS_openat;
    rodata->cfg_nr_openat2 = SYS_openat2;
    rodata->cfg_nr_open = kNrOpen;
    rodata->cfg_nr_creat = kNrCreat;
    rodata->cfg_nr_ioctl = SYS_ioctl;
    rodata->cfg_nr_connect = SYS_connect;
    rodata->cfg_nr_write = SYS_write;
    rodata->cfg_nr_sendto = SYS_sendto;
    rodata->cfg_nr_sendmsg = SYS_sendmsg;
    rodata->cfg_nr_read = SYS_read;
    rodata->cfg_nr_recvfrom = SYS_recvfrom;
    rodata->cfg_nr_recvmsg = SYS_recvmsg;
    rodata->cfg_nr_rename = kNrRename;
    rodata->cfg_nr_renameat = kNrRenameat;
    rodata->cfg_nr_renameat2 = SYS_renameat2;
    rodata->cfg_nr_unlink = kNrUnlink;
    rodata->cfg_nr_unlinkat = SYS_unlinkat;
    rodata->cfg_nr_bpf = SYS_bpf;
}

// The hooks of `mode` for opens, ioctls, connects, renames and unlinks (watch_files) and
// (kSyscalls) payloads. raw_syscalls dispatches them all from its two programs.
std::vector<HookProgram> syscall_hooks(gpuguard_bpf* skel, const AttachRequest& request) {
    auto& p = skel->progs;
    const bool payload = request.payload == PayloadHooks::kSyscalls;
    switch (request.mode) {
        case AttachMode::kKernelFunctions: {
            const std::string fn = kSyscallFunctionPrefix;
            std::vector<HookProgram> hooks = {
                {p.gg_fn_openat, "fexit", fn + "openat", true, true},
                {p.gg_fn_openat2, "fexit", fn + "openat2", false, true},
                {p.gg_fn_open, "fexit", fn + "open", false, true},
                {p.gg_fn_creat, "fexit", fn + "creat", false, true},
                {p.gg_fn_ioctl, "fentry", fn + "ioctl", true, true},
                {p.gg_fn_connect, "fexit", fn + "connect", true},
                {p.gg_fn_bpf, "fexit", fn + "bpf", false},
            };
            if (request.watch_files) {
                hooks.insert(hooks.end(), {{p.gg_fn_rename, "fexit", fn + "rename", false},
                                           {p.gg_fn_renameat, "fexit", fn + "renameat", false},
                                           {p.gg_fn_renameat2, "fexit", fn + "renameat2", true},
                                           {p.gg_fn_unlink, "fexit", fn + "unlink", false},
                                           {p.gg_fn_unlinkat, "fexit", fn + "unlinkat", true}});
            }
            if (payload) {
                hooks.insert(hooks.end(), {{p.gg_fn_write, "fexit", fn + "write", false},
                                           {p.gg_fn_sendto, "fexit", fn + "sendto", false},
                                           {p.gg_fn_sendmsg, "fexit", fn + "sendmsg", false},
                                           {p.gg_fn_read, "fexit", fn + "read", false},
                                           {p.gg_fn_recvfrom, "fexit", fn + "recvfrom", false},
                                           {p.gg_fn_recvmsg, "fexit", fn + "recvmsg", false}});
            }
            return hooks;
        }
        case AttachMode::kRawSyscalls:
            // Opens, ioctls and connects run in these two: pinned for kill_now.
            if (request.raw_btf) {
                return {{p.gg_btf_sys_enter, "tp_btf", "sys_enter", true, true},
                        {p.gg_btf_sys_exit, "tp_btf", "sys_exit", true, true}};
            }
            return {{p.gg_raw_sys_enter, "raw", "sys_enter", true, true},
                    {p.gg_raw_sys_exit, "raw", "sys_exit", true, true}};
        default: {
            std::vector<HookProgram> hooks = {
                {p.gg_exit_openat, "syscalls", "sys_exit_openat", true, true},
                {p.gg_exit_openat2, "syscalls", "sys_exit_openat2", false, true},
                {p.gg_exit_open, "syscalls", "sys_exit_open", false, true},
                {p.gg_exit_creat, "syscalls", "sys_exit_creat", false, true},
                {p.gg_enter_ioctl, "syscalls", "sys_enter_ioctl", true, true},
                {p.gg_exit_connect, "syscalls", "sys_exit_connect", true},
                {p.gg_exit_bpf, "syscalls", "sys_exit_bpf", false},
            };
            if (request.watch_files) {
                hooks.insert(hooks.end(),
                             {{p.gg_exit_rename, "syscalls", "sys_exit_rename", false},
                              {p.gg_exit_renameat, "syscalls", "sys_exit_renameat", false},
                              {p.gg_exit_renameat2, "syscalls", "sys_exit_renameat2", true},
                              {p.gg_exit_unlink, "syscalls", "sys_exit_unlink", false},
                              {p.gg_exit_unlinkat, "syscalls", "sys_exit_unlinkat", true}});
            }
            if (payload) {
                hooks.insert(hooks.end(),
                             {{p.gg_exit_write, "syscalls", "sys_exit_write", false},
                              {p.gg_exit_sendto, "syscalls", "sys_exit_sendto", false},
                              {p.gg_exit_sendmsg, "syscalls", "sys_exit_sendmsg", false},
                              {p.gg_exit_read, "syscalls", "sys_exit_read", false},
                              {p.gg_exit_recvfrom, "syscalls", "sys_exit_recvfrom", false},
                              {p.gg_exit_recvmsg, "syscalls", "sys_exit_recvmsg", false}});
            }
            return hooks;
        }
    }
}

// Whether the kernel has the hook's tracepoint or function.
bool hook_present(const HookProgram& hook, const AttachRequest& request, const btf* kernel) {
    if (hook.kind == "fentry" || hook.kind == "fexit") {
        return kernel && btf__find_by_name_kind(kernel, hook.target.c_str(), BTF_KIND_FUNC) >= 0;
    }
    if (hook.kind == "raw") return true;  // the probe attached one
    if (hook.kind == "tp_btf") {
        // Each BTF-enabled tracepoint has its btf_trace_<name> typedef.
        return !kernel || btf__find_by_name_kind(kernel, ("btf_trace_" + hook.target).c_str(),
                                                 BTF_KIND_TYPEDEF) >= 0;
    }
    std::error_code ec;
    return std::filesystem::exists(
               std::filesystem::path(request.tracefs_dir) / "events" / hook.kind / hook.target,
               ec) ||
           std::filesystem::exists(
               std::filesystem::path("/sys/kernel/debug/tracing/events") / hook.kind / hook.target,
               ec);
}

}  // namespace

Result<AttachPlan> plan_attachment(gpuguard_bpf* skel, const AttachRequest& request) {
    const auto log = logger("sensor");
    set_syscall_numbers(skel);
    skel->rodata->cfg_watch_files = request.watch_files ? 1 : 0;
    skel->rodata->cfg_dispatch_payload =
        request.mode == AttachMode::kRawSyscalls && request.payload == PayloadHooks::kSyscalls;

    AttachPlan plan;
    plan.mode = request.mode;
    auto& p = skel->progs;
    std::vector<HookProgram> wanted = syscall_hooks(skel, request);
    // Raw tracepoints and tp_btf attach with bpf(2) alone; classic ones
    // need perf_event_open(2), which Debian's kernels (perf_event_paranoid
    // 3) refuse without CAP_SYS_ADMIN: outside syscall_tracepoints mode the
    // sensor needs no perf event, and runs under the unit's capabilities.
    wanted.insert(wanted.end(), {{p.gg_sched_exec, "raw", "sched_process_exec", true, true},
                                 {p.gg_sched_fork, "raw", "sched_process_fork", true, true},
                                 {p.gg_sched_exit, "raw", "sched_process_exit", true, true}});
    // Not a syscall: the same program in every mode. Missing where the kernel
    // has no CONFIG_MODULES (and loads no module).
    wanted.push_back({p.gg_module_load, "tp_btf", "module_load", false});
    // Signals to the agent (tp_btf: the target task's tgid), every mode.
    wanted.push_back({p.gg_agent_signal, "tp_btf", "signal_generate", false});
    if (request.payload == PayloadHooks::kSocketLayer) {
        wanted.insert(wanted.end(), {{p.gg_sock_send, "tp_btf", "sock_send_length", false},
                                     {p.gg_sock_recv, "tp_btf", "sock_recv_length", false}});
    }

    // The kernel's BTF names the functions fentry/fexit attach to and the
    // BTF-enabled tracepoints (module_load is missing without CONFIG_MODULES).
    std::unique_ptr<btf, BtfDeleter> kernel(request.btf_path.empty()
                                                ? btf__load_vmlinux_btf()
                                                : btf__parse(request.btf_path.c_str(), nullptr));
    if (!kernel && request.mode == AttachMode::kKernelFunctions) {
        return Unexpected{libbpf_error("reading kernel BTF for fentry targets", -errno)};
    }
    bpf_program* program = nullptr;
    bpf_object__for_each_program(program, skel->obj) { bpf_program__set_autoload(program, false); }
    for (const auto& hook : wanted) {
        if (!hook_present(hook, request, kernel.get())) {
            if (hook.required) {
                const bool function = hook.kind == "fentry" || hook.kind == "fexit";
                return fail(
                    ErrorCode::kUnsupported,
                    (function ? "kernel function " : "tracepoint " + hook.kind + "/") +
                        hook.target + " is missing: " +
                        (function ? "sensor.attach kernel_functions needs it in the "
                                    "kernel's BTF"
                         : hook.kind == "syscalls" ? "the kernel needs CONFIG_FTRACE_SYSCALLS"
                                                   : "the kernel needs CONFIG_TRACEPOINTS"));
            }
            log->info(
                "{} not on this kernel: skipped{}", hook.name(),
                hook.target == "module_load" ? " (kernel module loads are not reported)" : "");
            continue;
        }
        if (hook.kind == "fentry" || hook.kind == "fexit") {
            if (int err = bpf_program__set_attach_target(hook.program, 0, hook.target.c_str());
                err) {
                return Unexpected{libbpf_error("targeting " + hook.name(), err)};
            }
        }
        bpf_program__set_autoload(hook.program, true);
        plan.hooks.push_back(hook);
    }
    return plan;
}

}  // namespace gpuguard::agent
