/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Helpers shared by gpuguard's programs: task identity, emission accounting. */
#ifndef GPUGUARD_BPF_COMMON_H
#define GPUGUARD_BPF_COMMON_H

#include "maps.h"

#define GG_MINORBITS 20
#define GG_MINORMASK ((1U << GG_MINORBITS) - 1)
#define GG_S_IFMT 00170000
#define GG_S_IFCHR 0020000

static __always_inline void counters__add(__u32 type, bool dropped)
{
	struct gg_counters *c = bpf_map_lookup_elem(&counters, &type);

	if (!c)
		return;
	if (dropped)
		c->dropped++;
	else
		c->emitted++;
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

	bpf_map_update_elem(&gpu_tgids, &tgid, &proc, BPF_NOEXIST);
}

#endif /* GPUGUARD_BPF_COMMON_H */
