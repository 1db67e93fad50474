/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Helpers shared by gpuguard's programs: task identity, emission accounting. */
#ifndef GPUGUARD_BPF_COMMON_H
#define GPUGUARD_BPF_COMMON_H

#include "maps.h"

#define GG_MINORBITS 20
#define GG_MINORMASK ((1U << GG_MINORBITS) - 1)
#define GG_S_IFMT 00170000
#define GG_S_IFCHR 0020000

/* Atomic although the slot is this CPU's: fentry/fexit programs run with
 * only migration disabled, so on a preemptible kernel another program can
 * run on this CPU between a plain load and store, and a lost increment would
 * show as a record delivered but never counted. */
static __always_inline void counters__add(__u32 type, bool dropped)
{
	struct gg_counters *c = bpf_map_lookup_elem(&counters, &type);

	if (!c)
		return;
	if (dropped)
		__sync_fetch_and_add(&c->dropped, 1);
	else
		__sync_fetch_and_add(&c->emitted, 1);
}

static __always_inline void *event__reserve(__u32 type, __u32 size)
{
	struct gg_event_header *hdr = bpf_ringbuf_reserve(&events, size, 0);

	if (!hdr) {
		counters__add(type, true);
		return NULL;
	}
	hdr->type = type;
	hdr->abi_major = GG_ABI_MAJOR;
	hdr->size = size;
	hdr->ts_ns = bpf_ktime_get_ns();
	return hdr;
}

static __always_inline void event__submit(void *record, __u32 type)
{
	bpf_ringbuf_submit(record, 0);
	counters__add(type, false);
}

static __always_inline void task__fill(struct gg_task_info *info, struct task_struct *task)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u64 uid_gid = bpf_get_current_uid_gid();

	info->tgid = pid_tgid >> 32;
	info->pid = (__u32)pid_tgid;
	info->ppid = BPF_CORE_READ(task, real_parent, tgid);
	info->uid = (__u32)uid_gid;
	info->gid = uid_gid >> 32;
	info->_pad = 0;
	info->cgroup_id = bpf_get_current_cgroup_id();
	bpf_get_current_comm(info->comm, sizeof(info->comm));
}

/*
 * The struct file behind @fd in @task's descriptor table, or NULL.
 * @task is a BTF pointer (bpf_get_current_task_btf), so the walk down to the
 * fd array is plain loads, which the verifier turns into fault-safe
 * PROBE_MEM loads with CO-RE relocations: several times cheaper than one
 * bpf_probe_read_kernel() per field on a path every open(2) of the host takes.
 * The array slot itself is a pointer-to-pointer, which BTF does not type, so
 * it is the one helper read.
 */
/* The syscall number in a task's saved registers (at sys_exit: the one returning). */
static __always_inline long regs__syscall_nr(struct pt_regs *regs)
{
#if defined(__TARGET_ARCH_x86)
	return regs->orig_ax;
#elif defined(__TARGET_ARCH_arm64)
	return regs->syscallno;
#else
	return -1; /* the loader keeps the syscall tracepoints on other architectures */
#endif
}

static __always_inline struct file *task__fd_file(struct task_struct *task, int fd)
{
	struct fdtable *fdt = task->files->fdt;
	struct file *file = NULL;

	if (fd < 0 || (unsigned int)fd >= fdt->max_fds)
		return NULL;
	if (bpf_probe_read_kernel(&file, sizeof(file), &fdt->fd[fd]))
		return NULL;
	return file;
}

/* Is @file an inode whose device number is registered as a GPU? Fills major/minor. */
static __always_inline bool file__is_gpu(struct file *file, __u32 *major, __u32 *minor)
{
	struct inode *inode = BPF_CORE_READ(file, f_inode);
	struct gg_gpu_dev_key key;
	__u32 rdev;

	if (!inode || (BPF_CORE_READ(inode, i_mode) & GG_S_IFMT) != GG_S_IFCHR)
		return false;
	rdev = BPF_CORE_READ(inode, i_rdev);
	key.major = rdev >> GG_MINORBITS;
	key.minor = rdev & GG_MINORMASK;
	*major = key.major;
	*minor = key.minor;
	if (bpf_map_lookup_elem(&gpu_devices, &key))
		return true;
	key.minor = GG_GPU_DEV_ANY_MINOR;
	return bpf_map_lookup_elem(&gpu_devices, &key) != NULL;
}

/* Records that @tgid holds a GPU fd (first writer wins; flags are kept). */
static __always_inline void gpu_proc__mark(__u32 tgid, __u32 flags)
{
	struct gg_gpu_proc proc = {.since_ns = bpf_ktime_get_ns(), .flags = flags};
	__u8 on = 1;

	bpf_map_update_elem(&gpu_tgids, &tgid, &proc, BPF_NOEXIST);
	bpf_map_update_elem(&net_watch_tgids, &tgid, &on, BPF_ANY);
}

/* SIGKILL, from asm-generic/signal.h (the same on every Linux architecture). */
#define GG_SIGKILL 9

/*
 * Is the current process known-bad? Looks its executable's inode up in
 * known_bad_files, then its comm in known_bad_names, each only while armed.
 * Fills dev/ino (for the record) and the matching value.
 */
static __always_inline __u32 kill_now__match(struct task_struct *task, __u32 armed,
					     struct gg_file_key *file, __u32 *rule_id)
{
	struct gg_known_bad *bad;
	struct inode *inode;

	inode = BPF_CORE_READ(task, mm, exe_file, f_inode);
	if (inode) {
		file->dev = BPF_CORE_READ(inode, i_sb, s_dev);
		file->ino = BPF_CORE_READ(inode, i_ino);
	}
	if ((armed & GG_KILL_ARMED_FILES) && inode) {
		bad = bpf_map_lookup_elem(&known_bad_files, file);
		if (bad) {
			*rule_id = bad->rule_id;
			return GG_KILL_MATCH_FILE;
		}
	}
	if (armed & GG_KILL_ARMED_NAMES) {
		struct gg_name_key name = {};

		bpf_get_current_comm(name.comm, sizeof(name.comm));
		bad = bpf_map_lookup_elem(&known_bad_names, &name);
		if (bad) {
			*rule_id = bad->rule_id;
			return GG_KILL_MATCH_NAME;
		}
	}
	return 0;
}

/*
 * kill_now: SIGKILL the current process when it is known-bad, then tell user
 * space. The signal goes first, so a full ring buffer never saves a miner.
 * Returns true when it fired.
 */
static __always_inline bool kill_now__check(struct task_struct *task, __u32 trigger, __u32 major,
					    __u32 minor)
{
	struct gg_file_key file = {};
	struct gg_kill_now_event *e;
	__u32 armed = kill_now_armed;
	__u32 rule_id = 0, match;
	long ret;

	if (!armed)
		return false;
	match = kill_now__match(task, armed, &file, &rule_id);
	if (!match)
		return false;
	ret = bpf_send_signal(GG_SIGKILL);
	e = event__reserve(GG_EVENT_KILL_NOW, sizeof(*e));
	if (!e)
		return true;
	task__fill(&e->task, task);
	e->trigger = trigger;
	e->match = match;
	e->dev = file.dev;
	e->ino = file.ino;
	e->rule_id = rule_id;
	e->signal_ret = (__s32)ret;
	e->major = major;
	e->minor = minor;
	event__submit(e, GG_EVENT_KILL_NOW);
	return true;
}

#endif /* GPUGUARD_BPF_COMMON_H */
