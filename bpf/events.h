/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Kernel <-> user-space records of gpuguard. Included by the BPF programs
 * (with vmlinux.h) and by agent/sensor* (with <linux/types.h>).
 *
 * ABI rules: fixed-width types, explicit padding, a size assert per struct.
 * Appending a field bumps GG_ABI_MINOR; reordering, resizing or removing one
 * bumps GG_ABI_MAJOR. The sensor refuses an object whose major differs.
 */
#ifndef GPUGUARD_BPF_EVENTS_H
#define GPUGUARD_BPF_EVENTS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#ifdef __cplusplus
#define GG_STATIC_ASSERT static_assert
#else
#define GG_STATIC_ASSERT _Static_assert
#endif

#define GG_ABI_MAJOR 1
#define GG_ABI_MINOR 0

#define GG_COMM_LEN 16
/* Bounded copy of the path argument of open*(2), NUL included. */
#define GG_PATH_LEN 256

/* Map sizes shared by the programs and the loader. */
#define GG_MAX_GPU_DEVICES 256
/* GG_GPU_DEV_ANY_MINOR in a key's minor field matches every minor of a major. */
#define GG_GPU_DEV_ANY_MINOR 0xffffffffu

enum gg_event_type {
	GG_EVENT_GPU_OPEN = 1,
	GG_EVENT_TYPE_MAX, /* size of per-type arrays */
};

/* Which system call a struct gg_gpu_open_event comes from. */
enum gg_open_syscall {
	GG_SYS_OPENAT = 0,
	GG_SYS_OPENAT2 = 1,
	GG_SYS_OPEN = 2,  /* legacy open(2), x86-64 and other pre-openat ABIs only */
	GG_SYS_CREAT = 3, /* creat(2), same */
};

/* Flags of struct gg_gpu_open_event. */
enum gg_gpu_open_flags {
	GG_OPEN_PATH_TRUNCATED = 1 << 0, /* path longer than GG_PATH_LEN - 1 bytes */
	GG_OPEN_PATH_MATCH = 1 << 1, /* failed open reported because the path names a GPU node */
};

/* Common header: every record on the ring buffer starts with it. */
struct gg_event_header {
	__u16 type;	 /* enum gg_event_type */
	__u16 abi_major; /* GG_ABI_MAJOR of the emitting object */
	__u32 size;	 /* bytes of the whole record, header included */
	__u64 ts_ns;	 /* CLOCK_MONOTONIC, bpf_ktime_get_ns() */
};
GG_STATIC_ASSERT(sizeof(struct gg_event_header) == 16, "gg_event_header ABI");

/* Identity of the calling task, filled in the kernel for every record. */
struct gg_task_info {
	__u32 tgid; /* user-space process id */
	__u32 pid;  /* user-space thread id */
	__u32 ppid; /* tgid of real_parent */
	__u32 uid;
	__u32 gid;
	__u32 _pad;
	__u64 cgroup_id; /* cgroup v2 id of the task (1 = root of the v2 hierarchy) */
	char comm[GG_COMM_LEN];
};
GG_STATIC_ASSERT(sizeof(struct gg_task_info) == 48, "gg_task_info ABI");

/*
 * One open of a GPU device node: either a successful open whose inode's
 * device number is in the gpu_devices map, or a failed open whose path names
 * a GPU node (/dev/nvidia*, /dev/dri/..., /dev/kfd, /dev/accel/...).
 */
struct gg_gpu_open_event {
	struct gg_event_header hdr;
	struct gg_task_info task;
	__u32 major; /* 0 for a failed open */
	__u32 minor;
	__s32 ret;	  /* fd on success, -errno on failure */
	__s32 dirfd;	  /* dfd argument (AT_FDCWD = -100) */
	__u64 open_flags; /* O_* flags as passed (creat(2): O_CREAT|O_WRONLY|O_TRUNC) */
	__u16 syscall;	  /* enum gg_open_syscall */
	__u16 flags;	  /* enum gg_gpu_open_flags */
	__u32 path_len;	  /* bytes in path including the NUL, 0 if unreadable */
	char path[GG_PATH_LEN];
};
GG_STATIC_ASSERT(sizeof(struct gg_gpu_open_event) == 16 + 48 + 32 + GG_PATH_LEN,
		 "gg_gpu_open_event ABI");

/* Key of the gpu_devices map: (major, minor) or (major, GG_GPU_DEV_ANY_MINOR). */
struct gg_gpu_dev_key {
	__u32 major;
	__u32 minor;
};
GG_STATIC_ASSERT(sizeof(struct gg_gpu_dev_key) == 8, "gg_gpu_dev_key ABI");

/* Value of the gpu_devices map. */
struct gg_gpu_dev_val {
	__u32 kind; /* free-form tag from user space (driver family) */
	__u32 _pad;
};
GG_STATIC_ASSERT(sizeof(struct gg_gpu_dev_val) == 8, "gg_gpu_dev_val ABI");

/* Per-CPU counters, indexed by enum gg_event_type. */
struct gg_counters {
	__u64 emitted; /* records submitted to the ring buffer */
	__u64 dropped; /* bpf_ringbuf_reserve() failed */
};
GG_STATIC_ASSERT(sizeof(struct gg_counters) == 16, "gg_counters ABI");

#endif /* GPUGUARD_BPF_EVENTS_H */
