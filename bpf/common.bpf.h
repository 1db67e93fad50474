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

#endif /* GPUGUARD_BPF_COMMON_H */
