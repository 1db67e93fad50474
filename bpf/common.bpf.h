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
 * Read through CO-RE so the layout of files_struct/fdtable may move.
 */
static __always_inline struct file *task__fd_file(struct task_struct *task, int fd)
{
	struct fdtable *fdt = BPF_CORE_READ(task, files, fdt);
	struct file **fds;
	struct file *file = NULL;

	if (!fdt || fd < 0 || (unsigned int)fd >= BPF_CORE_READ(fdt, max_fds))
		return NULL;
	fds = BPF_CORE_READ(fdt, fd);
	if (bpf_probe_read_kernel(&file, sizeof(file), &fds[fd]))
		return NULL;
	return file;
}

#endif /* GPUGUARD_BPF_COMMON_H */
