// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * GPU device opens: at the exit of openat, openat2, and where the ABI has
 * them open and creat -- from this file's sys_exit_* tracepoints or, through
 * gg_hook_open_exit, from the other attachments (bpf/syscalls.bpf.c). Not
 * seen: io_uring opens (IORING_OP_OPENAT) and 32-bit compat syscalls, which
 * no attachment reports.
 *
 * Everything is decided at syscall exit, where the outcome is known:
 *  - success: the returned fd is resolved through current->files to its
 *    inode; only character devices reach the gpu_devices lookup (exact
 *    major:minor, then the whole major), so opens of regular files cost a
 *    handful of CO-RE reads and no map lookup at all. A file opened for
 *    writing (f_mode FMODE_WRITE, one more load) goes on to the file-change
 *    watch list (files.bpf.c); read-only opens stop there.
 *  - failure: the path is compared with the GPU node prefixes and reported
 *    with its errno when it names one.
 *
 * The path and the other arguments are read at exit from the task's saved
 * user registers (bpf_task_pt_regs), not stashed at enter. By the time the
 * syscall returns, the kernel's getname() has copied the string, so its page
 * is resident: a non-sleepable bpf_probe_read_user_str() cannot fault a page
 * in, and reading at enter loses strings that were never touched (fresh
 * mmap, just-exec'ed binaries). Reading at exit also saves the enter program
 * and the per-thread stash map on every open of the system.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "common.bpf.h"
#include "hooks.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define GG_PREFIX_LEN 12
#define GG_AT_FDCWD -100
/* asm-generic/fcntl.h values, shared by x86-64 and arm64. */
#define GG_O_WRONLY 01
#define GG_O_CREAT 0100
#define GG_O_TRUNC 01000
/* linux/fs.h: the file was opened for writing (O_WRONLY, O_RDWR). */
#define GG_FMODE_WRITE 0x2

static __always_inline bool path__has_prefix(const char *s, const char *prefix, int len)
{
	for (int i = 0; i < len; i++)
		if (s[i] != prefix[i])
			return false;
	return true;
}

/* Does the path start with a GPU node directory or name? */
static __always_inline bool path__names_gpu(const char *user_path)
{
	char head[GG_PREFIX_LEN] = {};

	if (bpf_probe_read_user_str(head, sizeof(head), user_path) < 0)
		return false;
	return path__has_prefix(head, "/dev/nvidia", 11) ||
	       path__has_prefix(head, "/dev/dri/", 9) || path__has_prefix(head, "/dev/kfd", 8) ||
	       path__has_prefix(head, "/dev/accel/", 11);
}

/* Arguments of the open-family syscalls, from the saved user registers. */
struct open_args {
	const char *path;
	__s32 dirfd;
	__u64 open_flags;
};

static __always_inline void open__read_args(struct task_struct *task, __u16 syscall,
					    struct open_args *args)
{
	/* Only for opens that are reported: regular files never get here. */
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);

	switch (syscall) {
	case GG_SYS_OPEN: /* open(path, flags, mode) */
		args->path = (const char *)PT_REGS_PARM1_CORE_SYSCALL(regs);
		args->dirfd = GG_AT_FDCWD;
		args->open_flags = (__u32)PT_REGS_PARM2_CORE_SYSCALL(regs);
		break;
	case GG_SYS_CREAT: /* creat(path, mode) == open(path, O_CREAT|O_WRONLY|O_TRUNC, mode) */
		args->path = (const char *)PT_REGS_PARM1_CORE_SYSCALL(regs);
		args->dirfd = GG_AT_FDCWD;
		args->open_flags = GG_O_CREAT | GG_O_WRONLY | GG_O_TRUNC;
		break;
	case GG_SYS_OPENAT2: { /* openat2(dfd, path, how, size); how->flags is first */
		const void *how = (const void *)PT_REGS_PARM3_CORE_SYSCALL(regs);

		args->path = (const char *)PT_REGS_PARM2_CORE_SYSCALL(regs);
		args->dirfd = (__s32)PT_REGS_PARM1_CORE_SYSCALL(regs);
		if (bpf_probe_read_user(&args->open_flags, sizeof(args->open_flags), how))
			args->open_flags = 0;
		break;
	}
	default: /* openat(dfd, path, flags, mode) */
		args->path = (const char *)PT_REGS_PARM2_CORE_SYSCALL(regs);
		args->dirfd = (__s32)PT_REGS_PARM1_CORE_SYSCALL(regs);
		args->open_flags = (__u32)PT_REGS_PARM3_CORE_SYSCALL(regs);
		break;
	}
}

static __always_inline int open__handle_exit(long ret, __u16 syscall)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct gg_gpu_open_event *e;
	struct open_args args = {};
	__u32 major = 0, minor = 0;
	__u16 flags = 0;
	long len;

	if (ret >= 0) {
		struct file *file = task__fd_file(task, (int)ret);

		if (!file)
			return 0;
		if (!file__is_gpu(file, &major, &minor)) {
			/* Read-only opens stop at this one load of f_mode. */
			if (!cfg_watch_files || !(BPF_CORE_READ(file, f_mode) & GG_FMODE_WRITE))
				return 0;
			open__read_args(task, syscall, &args);
			return gg_hook_file_open(ret, syscall, (__u64)args.path, args.dirfd,
						 args.open_flags);
		}
		/* The agent's own: never a GPU user, so its ioctls, connects and
		 * children stay unmarked too. */
		if (cfg_ignore_tgid && (bpf_get_current_pid_tgid() >> 32) == cfg_ignore_tgid)
			return 0;
		kill_now__check(task, GG_KILL_AT_GPU_OPEN, major, minor);
		gpu_proc__mark(bpf_get_current_pid_tgid() >> 32, 0);
		open__read_args(task, syscall, &args);
	} else {
		if (!cfg_report_failed_opens)
			return 0;
		open__read_args(task, syscall, &args);
		if (!path__names_gpu(args.path))
			return 0;
		flags |= GG_OPEN_PATH_MATCH;
	}

	e = event__reserve(GG_EVENT_GPU_OPEN, sizeof(*e));
	if (!e)
		return 0;
	task__fill(&e->task, task);
	e->major = major;
	e->minor = minor;
	e->ret = (__s32)ret;
	e->dirfd = args.dirfd;
	e->open_flags = args.open_flags;
	e->syscall = syscall;
	len = bpf_probe_read_user_str(e->path, sizeof(e->path), args.path);
	if (len < 0) {
		e->path[0] = '\0';
		len = 0;
	} else if (len == sizeof(e->path)) {
		/* Full buffer: truncated unless the string ends exactly at its last byte. */
		char last = 0;

		bpf_probe_read_user(&last, 1, args.path + sizeof(e->path) - 1);
		if (last)
			flags |= GG_OPEN_PATH_TRUNCATED;
	}
	e->path_len = (__u32)len;
	e->flags = flags;
	event__submit(e, GG_EVENT_GPU_OPEN);
	return 0;
}

GG_HOOK int gg_hook_open_exit(long ret, __u32 syscall)
{
	return open__handle_exit(ret, (__u16)syscall);
}

SEC("tracepoint/syscalls/sys_exit_openat")
int gg_exit_openat(struct trace_event_raw_sys_exit *ctx)
{
	return open__handle_exit(ctx->ret, GG_SYS_OPENAT);
}

SEC("tracepoint/syscalls/sys_exit_openat2")
int gg_exit_openat2(struct trace_event_raw_sys_exit *ctx)
{
	return open__handle_exit(ctx->ret, GG_SYS_OPENAT2);
}

/* open(2) and creat(2) exist on x86-64 but not on arm64; the loader skips absent ones. */
SEC("tracepoint/syscalls/sys_exit_open")
int gg_exit_open(struct trace_event_raw_sys_exit *ctx)
{
	return open__handle_exit(ctx->ret, GG_SYS_OPEN);
}

SEC("tracepoint/syscalls/sys_exit_creat")
int gg_exit_creat(struct trace_event_raw_sys_exit *ctx)
{
	return open__handle_exit(ctx->ret, GG_SYS_CREAT);
}
