// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * deny_gpu through BPF LSM: file_open refuses GPU device opens to flagged
 * processes (deny_tgids) and cgroups (deny_cgroups), wherever they run.
 * Loaded only when the kernel allows BPF LSM (`gpuguard probe`: bpf_lsm);
 * elsewhere the cgroup/dev program in cgroup.bpf.c is the deny path.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include "enforce_maps.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define GG_EPERM 1
#define GG_MINORBITS 20
#define GG_MINORMASK ((1U << GG_MINORBITS) - 1)
#define GG_S_IFMT 00170000
#define GG_S_IFCHR 0020000

SEC("lsm/file_open")
int BPF_PROG(gg_lsm_file_open, struct file *file, int ret)
{
	__u64 cgroup_id = bpf_get_current_cgroup_id();
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct inode *inode;
	__u32 rdev;

	if (ret)
		return ret; /* an earlier LSM already refused */
	if (!bpf_map_lookup_elem(&deny_tgids, &tgid) &&
	    !bpf_map_lookup_elem(&deny_cgroups, &cgroup_id))
		return 0;
	inode = file->f_inode;
	if (!inode || (inode->i_mode & GG_S_IFMT) != GG_S_IFCHR)
		return 0;
	rdev = inode->i_rdev;
	if (!enforce__device_denied(rdev >> GG_MINORBITS, rdev & GG_MINORMASK))
		return 0;
	enforce__count(GG_DENIED_LSM_OPEN);
	return -GG_EPERM;
}
