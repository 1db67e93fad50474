// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * GPU ioctls: at ioctl entry (sys_enter_ioctl, or gg_hook_ioctl_enter from
 * the other attachments, bpf/syscalls.bpf.c).
 *
 * Processes that never held a GPU fd stop at one gpu_tgids lookup. For the
 * others the fd is resolved to its device number as for opens, and calls on
 * GPU fds are counted in ioctl_stats per (tgid, device, cmd) with first/last
 * timestamps. Only the first GPU ioctl of a process is emitted; the agent
 * reads the aggregates periodically, so a CUDA program issuing millions of
 * ioctls costs one ring-buffer record.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "common.bpf.h"
#include "hooks.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, GG_MAX_IOCTL_STATS);
	__type(key, struct gg_ioctl_key);
	__type(value, struct gg_ioctl_stats);
} ioctl_stats SEC(".maps");

static __always_inline void ioctl__count(const struct gg_ioctl_key *key, __u64 now)
{
	struct gg_ioctl_stats *stats = bpf_map_lookup_elem(&ioctl_stats, key);
	struct gg_ioctl_stats fresh = {.count = 1, .first_ns = now, .last_ns = now};

	if (stats) {
		__sync_fetch_and_add(&stats->count, 1);
		stats->last_ns = now;
		return;
	}
	if (bpf_map_update_elem(&ioctl_stats, key, &fresh, BPF_NOEXIST) == 0)
		return;
	/* Another CPU inserted it first: count on its entry. */
	stats = bpf_map_lookup_elem(&ioctl_stats, key);
	if (stats) {
		__sync_fetch_and_add(&stats->count, 1);
		stats->last_ns = now;
	}
}

/* One ioctl of @tgid, a GPU holder (@proc: its gpu_tgids entry). */
static __always_inline int ioctl__handle(__u32 tgid, struct gg_gpu_proc *proc, int fd, __u32 cmd,
					 __u64 arg)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct gg_gpu_ioctl_event *e;
	struct gg_ioctl_key key = {};
	struct file *file;
	__u32 major, minor;
	__u64 now;

	file = task__fd_file(task, fd);
	if (!file || !file__is_gpu(file, &major, &minor))
		return 0;

	now = bpf_ktime_get_ns();
	key.tgid = tgid;
	key.dev = major << GG_MINORBITS | minor;
	key.cmd = cmd;
	ioctl__count(&key, now);

	if (proc->flags & GG_PROC_IOCTL_REPORTED)
		return 0;
	/* Racing threads may both see the flag clear; the agent tolerates a second record. */
	proc->flags |= GG_PROC_IOCTL_REPORTED;
	/* Catches processes that opened their GPU before being marked known-bad. */
	kill_now__check(task, GG_KILL_AT_GPU_IOCTL, major, minor);
	e = event__reserve(GG_EVENT_GPU_IOCTL, sizeof(*e));
	if (!e)
		return 0;
	task__fill(&e->task, task);
	e->major = major;
	e->minor = minor;
	e->fd = fd;
	e->cmd = cmd;
	e->arg = arg;
	event__submit(e, GG_EVENT_GPU_IOCTL);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_ioctl")
int gg_enter_ioctl(struct trace_event_raw_sys_enter *ctx)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct gg_gpu_proc *proc = bpf_map_lookup_elem(&gpu_tgids, &tgid);

	if (!proc)
		return 0;
	return ioctl__handle(tgid, proc, (int)ctx->args[0], (__u32)ctx->args[1], ctx->args[2]);
}

/* ioctl(fd, cmd, arg), the arguments from the saved registers. */
GG_HOOK int gg_hook_ioctl_enter(void)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct gg_gpu_proc *proc = bpf_map_lookup_elem(&gpu_tgids, &tgid);
	struct pt_regs *regs;

	if (!proc)
		return 0;
	regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	return ioctl__handle(tgid, proc, (int)PT_REGS_PARM1_CORE_SYSCALL(regs),
			     (__u32)PT_REGS_PARM2_CORE_SYSCALL(regs), PT_REGS_PARM3_CORE_SYSCALL(regs));
}
