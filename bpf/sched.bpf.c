// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Process lifecycle: sched_process_exec, sched_process_fork (to tell
 * processes from threads), sched_process_exit. Feeds the agent's process
 * table and keeps gpu_tgids in step: children inherit their parent's mark
 * (they inherit its fds), exits remove it. All three are raw tracepoints:
 * attached with bpf(2) alone, where a classic tracepoint needs
 * perf_event_open(2), which Debian's kernels (perf_event_paranoid 3) refuse
 * without CAP_SYS_ADMIN, a capability the packaged unit does not grant.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "common.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* An exec record is too big for the BPF stack: built here, then copied out. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct gg_exec_event);
} exec_scratch SEC(".maps");

/* TP_PROTO(struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm) */
SEC("raw_tracepoint/sched_process_exec")
int gg_sched_exec(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct linux_binprm *bprm = (struct linux_binprm *)ctx->args[2];
	struct gg_exec_event *e;
	__u32 zero = 0, flags = 0;
	unsigned long arg_start, arg_end, want;
	__u64 len;
	long n;

	/* Before anything else: the new image has not run an instruction yet. */
	kill_now__check(task, GG_KILL_AT_EXEC, 0, 0);

	e = bpf_map_lookup_elem(&exec_scratch, &zero);
	if (!e)
		return 0;
	e->hdr.type = GG_EVENT_EXEC;
	e->hdr.abi_major = GG_ABI_MAJOR;
	e->hdr.ts_ns = bpf_ktime_get_ns();
	task__fill(&e->task, task);
	e->old_pid = (__u32)ctx->args[1];

	/* The name the exec was given, as the tracepoint's "filename" field. */
	n = bpf_probe_read_kernel_str(e->filename, sizeof(e->filename),
				      BPF_CORE_READ(bprm, filename));
	if (n < 0) {
		e->filename[0] = '\0';
		n = 0;
	} else if (n == sizeof(e->filename)) {
		flags |= GG_EXEC_FILENAME_TRUNCATED;
	}
	e->filename_len = (__u32)n;

	/* The new image's argv, just written by the kernel into its stack: resident. */
	arg_start = task->mm->arg_start;
	arg_end = task->mm->arg_end;
	want = arg_end > arg_start ? arg_end - arg_start : 0;
	len = want;
	if (len > cfg_argv_max)
		len = cfg_argv_max;
	if (len >= GG_ARGV_MAX)
		len = GG_ARGV_MAX - 1;
	if (len < want)
		flags |= GG_EXEC_ARGV_TRUNCATED;
	len &= GG_ARGV_MAX - 1; /* bound for the verifier */
	if (len && bpf_probe_read_user(e->argv, len, (const void *)arg_start))
		len = 0;
	e->argv_len = (__u32)len;
	e->flags = flags;
	e->hdr.size = GG_EXEC_FIXED_SIZE + (__u32)len;

	if (bpf_ringbuf_output(&events, e, GG_EXEC_FIXED_SIZE + len, 0))
		counters__add(GG_EVENT_EXEC, true);
	else
		counters__add(GG_EVENT_EXEC, false);
	return 0;
}

SEC("raw_tracepoint/sched_process_fork")
int gg_sched_fork(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *parent = (struct task_struct *)ctx->args[0];
	struct task_struct *child = (struct task_struct *)ctx->args[1];
	__u32 child_pid = BPF_CORE_READ(child, pid);
	__u32 child_tgid = BPF_CORE_READ(child, tgid);
	__u32 parent_tgid = BPF_CORE_READ(parent, tgid);
	struct gg_fork_event *e;
	__u32 flags = 0;

	if (child_pid != child_tgid) /* a new thread, not a process */
		return 0;
	if (bpf_map_lookup_elem(&gpu_tgids, &parent_tgid)) {
		gpu_proc__mark(child_tgid, GG_PROC_INHERITED);
		flags = GG_PROC_INHERITED;
	}
	e = event__reserve(GG_EVENT_FORK, sizeof(*e));
	if (!e)
		return 0;
	task__fill(&e->task, bpf_get_current_task_btf());
	e->child_pid = child_tgid;
	e->flags = flags;
	e->child_start_ns = BPF_CORE_READ(child, start_boottime);
	event__submit(e, GG_EVENT_FORK);
	return 0;
}

SEC("raw_tracepoint/sched_process_exit")
int gg_sched_exit(struct bpf_raw_tracepoint_args *ctx)
{
	struct task_struct *task = bpf_get_current_task_btf();
	__u32 tgid = task->tgid;
	struct gg_gpu_proc *proc;
	struct gg_exit_event *e;
	__u32 flags = 0;

	if (task->pid != tgid) /* a thread; the process ends with its leader */
		return 0;
	bpf_map_delete_elem(&net_watch_tgids, &tgid);
	if (net_watch_armed & GG_WATCH_ARMED_TGIDS)
		bpf_map_delete_elem(&watched_tgids, &tgid);
	proc = bpf_map_lookup_elem(&gpu_tgids, &tgid);
	if (proc) {
		flags = proc->flags | GG_PROC_HELD_GPU;
		bpf_map_delete_elem(&gpu_tgids, &tgid);
	}
	e = event__reserve(GG_EVENT_EXIT, sizeof(*e));
	if (!e)
		return 0;
	task__fill(&e->task, task);
	e->exit_status = (__u32)task->exit_code;
	e->flags = flags;
	event__submit(e, GG_EVENT_EXIT);
	return 0;
}
