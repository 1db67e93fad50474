// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The attachments other than per-syscall tracepoints (sensor.attach,
 * docs/configuration.md). Each calls the hook families' entry points
 * (hooks.h), so the events do not depend on the mode.
 *
 * raw_syscalls: one program at sys_enter and one at sys_exit, dispatching on
 * the syscall number. They skip the perf record each syscall tracepoint
 * builds, but enabling them still moves every syscall of every process onto
 * the syscall-work slow path, and both run for every syscall: an unhooked one
 * pays two program calls and the compares below before returning. BTF-typed
 * (tp_btf) where the kernel has BTF for them, plain raw tracepoints else.
 *
 * kernel_functions: fentry/fexit on the syscalls' own functions
 * (__x64_sys_openat, ...; the loader sets each target for the ABI). Only the
 * hooked syscalls pay anything; others run as if nothing were attached.
 *
 * 32-bit compat syscalls are skipped in every mode, as the syscall
 * tracepoints skip them (their numbers mean other calls).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "common.bpf.h"
#include "hooks.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define GG_TS_COMPAT 0x0002 /* arch/x86/include/asm/thread_info.h */

/* A 32-bit task's syscall: numbered by another table. Asked only after a
 * number matched one of ours, so other syscalls never pay for it. */
static __always_inline bool task__in_compat_syscall(void)
{
#if defined(__TARGET_ARCH_x86)
	struct task_struct *task = bpf_get_current_task_btf();

	return task->thread_info.status & GG_TS_COMPAT;
#else
	return false; /* arm64's compat tasks do not enter through these numbers' table */
#endif
}

static __always_inline int dispatch__enter(long id)
{
	if (id == cfg_nr_ioctl) {
		if (task__in_compat_syscall())
			return 0;
		return gg_hook_ioctl_enter();
	}
	return 0;
}

static __always_inline int dispatch__exit(long id, long ret)
{
	__u32 open_syscall;

	if (id == cfg_nr_openat)
		open_syscall = GG_SYS_OPENAT;
	else if (id == cfg_nr_connect) {
		if (task__in_compat_syscall())
			return 0;
		return gg_hook_connect_exit(ret);
	} else if (id == cfg_nr_openat2)
		open_syscall = GG_SYS_OPENAT2;
	else if (id == cfg_nr_open)
		open_syscall = GG_SYS_OPEN;
	else if (id == cfg_nr_creat)
		open_syscall = GG_SYS_CREAT;
	else if (cfg_watch_files &&
		 (id == cfg_nr_renameat2 || id == cfg_nr_renameat || id == cfg_nr_rename ||
		  id == cfg_nr_unlinkat || id == cfg_nr_unlink)) {
		if (task__in_compat_syscall())
			return 0;
		if (id == cfg_nr_unlinkat)
			return gg_hook_unlink_exit(ret, GG_FILE_SYS_UNLINKAT);
		if (id == cfg_nr_unlink)
			return gg_hook_unlink_exit(ret, GG_FILE_SYS_UNLINK);
		return gg_hook_rename_exit(ret, id == cfg_nr_renameat2	? GG_FILE_SYS_RENAMEAT2
						: id == cfg_nr_renameat ? GG_FILE_SYS_RENAMEAT
									: GG_FILE_SYS_RENAME);
	} else if (id == cfg_nr_bpf) {
		if (task__in_compat_syscall())
			return 0;
		return gg_hook_bpf_exit(ret);
	} else {
		if (cfg_dispatch_payload &&
		    (id == cfg_nr_write || id == cfg_nr_sendto || id == cfg_nr_sendmsg ||
		     id == cfg_nr_read || id == cfg_nr_recvfrom || id == cfg_nr_recvmsg) &&
		    !task__in_compat_syscall())
			return gg_hook_payload_exit(id, ret);
		return 0;
	}
	if (task__in_compat_syscall())
		return 0;
	return gg_hook_open_exit(ret, open_syscall);
}

SEC("tp_btf/sys_enter")
int BPF_PROG(gg_btf_sys_enter, struct pt_regs *regs, long id)
{
	return dispatch__enter(id);
}

SEC("tp_btf/sys_exit")
int BPF_PROG(gg_btf_sys_exit, struct pt_regs *regs, long ret)
{
	return dispatch__exit(regs__syscall_nr(regs), ret);
}

/* Kernels without BTF for the raw tracepoints: the same through plain ones. */
SEC("raw_tracepoint/sys_enter")
int gg_raw_sys_enter(struct bpf_raw_tracepoint_args *ctx)
{
	return dispatch__enter((long)ctx->args[1]);
}

SEC("raw_tracepoint/sys_exit")
int gg_raw_sys_exit(struct bpf_raw_tracepoint_args *ctx)
{
	struct pt_regs *regs = (struct pt_regs *)ctx->args[0];
#if defined(__TARGET_ARCH_x86)
	long id = BPF_CORE_READ(regs, orig_ax);
#elif defined(__TARGET_ARCH_arm64)
	long id = BPF_CORE_READ(regs, syscallno);
#else
	long id = -1;
#endif

	return dispatch__exit(id, (long)ctx->args[1]);
}

/*
 * kernel_functions. The section names carry the x86-64 functions; the
 * loader retargets them for the ABI it runs on (arm64: __arm64_sys_*) and
 * skips the ones the kernel lacks (open and creat on arm64). The syscall
 * functions take the user registers; the hooks read them from the task.
 */
SEC("fexit/__x64_sys_openat")
int BPF_PROG(gg_fn_openat, struct pt_regs *regs, long ret)
{
	return gg_hook_open_exit(ret, GG_SYS_OPENAT);
}

SEC("fexit/__x64_sys_openat2")
int BPF_PROG(gg_fn_openat2, struct pt_regs *regs, long ret)
{
	return gg_hook_open_exit(ret, GG_SYS_OPENAT2);
}

SEC("fexit/__x64_sys_open")
int BPF_PROG(gg_fn_open, struct pt_regs *regs, long ret)
{
	return gg_hook_open_exit(ret, GG_SYS_OPEN);
}

SEC("fexit/__x64_sys_creat")
int BPF_PROG(gg_fn_creat, struct pt_regs *regs, long ret)
{
	return gg_hook_open_exit(ret, GG_SYS_CREAT);
}

SEC("fexit/__x64_sys_rename")
int BPF_PROG(gg_fn_rename, struct pt_regs *regs, long ret)
{
	return gg_hook_rename_exit(ret, GG_FILE_SYS_RENAME);
}

SEC("fexit/__x64_sys_renameat")
int BPF_PROG(gg_fn_renameat, struct pt_regs *regs, long ret)
{
	return gg_hook_rename_exit(ret, GG_FILE_SYS_RENAMEAT);
}

SEC("fexit/__x64_sys_renameat2")
int BPF_PROG(gg_fn_renameat2, struct pt_regs *regs, long ret)
{
	return gg_hook_rename_exit(ret, GG_FILE_SYS_RENAMEAT2);
}

SEC("fexit/__x64_sys_unlink")
int BPF_PROG(gg_fn_unlink, struct pt_regs *regs, long ret)
{
	return gg_hook_unlink_exit(ret, GG_FILE_SYS_UNLINK);
}

SEC("fexit/__x64_sys_unlinkat")
int BPF_PROG(gg_fn_unlinkat, struct pt_regs *regs, long ret)
{
	return gg_hook_unlink_exit(ret, GG_FILE_SYS_UNLINKAT);
}

SEC("fentry/__x64_sys_ioctl")
int BPF_PROG(gg_fn_ioctl, struct pt_regs *regs)
{
	return gg_hook_ioctl_enter();
}

SEC("fexit/__x64_sys_connect")
int BPF_PROG(gg_fn_connect, struct pt_regs *regs, long ret)
{
	return gg_hook_connect_exit(ret);
}

SEC("fexit/__x64_sys_write")
int BPF_PROG(gg_fn_write, struct pt_regs *regs, long ret)
{
	return gg_hook_payload_exit(cfg_nr_write, ret);
}

SEC("fexit/__x64_sys_sendto")
int BPF_PROG(gg_fn_sendto, struct pt_regs *regs, long ret)
{
	return gg_hook_payload_exit(cfg_nr_sendto, ret);
}

SEC("fexit/__x64_sys_sendmsg")
int BPF_PROG(gg_fn_sendmsg, struct pt_regs *regs, long ret)
{
	return gg_hook_payload_exit(cfg_nr_sendmsg, ret);
}

SEC("fexit/__x64_sys_read")
int BPF_PROG(gg_fn_read, struct pt_regs *regs, long ret)
{
	return gg_hook_payload_exit(cfg_nr_read, ret);
}

SEC("fexit/__x64_sys_recvfrom")
int BPF_PROG(gg_fn_recvfrom, struct pt_regs *regs, long ret)
{
	return gg_hook_payload_exit(cfg_nr_recvfrom, ret);
}

SEC("fexit/__x64_sys_recvmsg")
int BPF_PROG(gg_fn_recvmsg, struct pt_regs *regs, long ret)
{
	return gg_hook_payload_exit(cfg_nr_recvmsg, ret);
}

SEC("fexit/__x64_sys_bpf")
int BPF_PROG(gg_fn_bpf, struct pt_regs *regs, long ret)
{
	return gg_hook_bpf_exit(ret);
}
