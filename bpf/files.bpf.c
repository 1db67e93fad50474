// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Changes of watched files (struct gg_file_change_event): a successful open
 * for writing (called from the open hook, open.bpf.c, after it found the
 * file is no GPU node and was opened with FMODE_WRITE: read-only opens never
 * get here), a rename onto a path (its target) and an unlink, at syscall
 * exit and only on success.
 *
 * The watch list is data the agent writes (sensor.watch_files): absolute
 * prefixes and whole paths in watch_paths, an LPM trie, so one lookup
 * matches any of them; basenames (.bashrc, authorized_keys) in watch_names.
 * A path that matches neither -- relative ones cannot match a prefix -- is
 * still reported when the process is in watched_tgids (a flagged process):
 * the agent resolves it through /proc/PID/cwd or the fd.
 *
 * The path is compared in a per-CPU scratch key, not on the stack: the raw
 * dispatcher, the open hook and this subprogram share one 512-byte stack.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "common.bpf.h"
#include "hooks.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define GG_AT_FDCWD -100

struct {
	__uint(type, BPF_MAP_TYPE_LPM_TRIE);
	__uint(max_entries, GG_MAX_WATCH_PATHS);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct gg_watch_path_key);
	__type(value, __u32); /* enum gg_file_category */
} watch_paths SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GG_MAX_WATCH_NAMES);
	__type(key, struct gg_watch_name_key);
	__type(value, __u32);
} watch_names SEC(".maps");

struct file_scratch {
	struct gg_watch_path_key key;
	struct gg_watch_name_key name;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct file_scratch);
} file_scratch SEC(".maps");

struct slash_scan {
	const char *path; /* the scratch key's path */
	__u32 after;	  /* index after the last '/' */
};

static long slash_scan__step(__u32 i, void *data)
{
	struct slash_scan *scan = data;
	char c;

	if (i >= GG_WATCH_PATH_LEN)
		return 1;
	c = scan->path[i];
	if (!c)
		return 1;
	if (c == '/')
		scan->after = i + 1;
	return 0;
}

/*
 * The watch category of @path (user memory), 0 when it matches nothing.
 * The last '/' is found with bpf_loop: an unrolled scan that remembers its
 * position forks the verifier's state at every byte.
 */
static __always_inline __u32 file__category(const char *path)
{
	struct slash_scan scan = {};
	struct file_scratch *s;
	__u32 zero = 0, *category;
	long len;

	s = bpf_map_lookup_elem(&file_scratch, &zero);
	if (!s)
		return 0;
	len = bpf_probe_read_user_str(s->key.path, sizeof(s->key.path), path);
	if (len <= 0)
		return 0;
	if (s->key.path[0] == '/') {
		/* The NUL counts: a whole-path entry matches only that path. */
		s->key.prefixlen = (__u32)len * 8;
		category = bpf_map_lookup_elem(&watch_paths, &s->key);
		if (category)
			return *category;
	}
	scan.path = s->key.path;
	bpf_loop(GG_WATCH_PATH_LEN, slash_scan__step, &scan, 0);
	__builtin_memset(&s->name, 0, sizeof(s->name));
	/* The path is NUL-terminated inside key.path, so the copy stops there. */
	len = bpf_probe_read_kernel_str(s->name.name, sizeof(s->name.name),
					s->key.path + (scan.after & (GG_WATCH_PATH_LEN - 1)));
	if (len <= 1 || len >= GG_WATCH_NAME_LEN)
		return 0; /* empty, or longer than any name on the list */
	category = bpf_map_lookup_elem(&watch_names, &s->name);
	return category ? *category : 0;
}

static __always_inline int file__report(__u64 path_addr, __s32 dirfd, __u64 op_flags, __u32 syscall,
					long ret)
{
	const char *path = (const char *)path_addr;
	struct task_struct *task;
	struct gg_file_change_event *e;
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	__u32 category;
	__u16 flags = 0;
	long len;

	if (cfg_ignore_tgid && tgid == cfg_ignore_tgid)
		return 0;
	category = file__category(path);
	if (!category) {
		if (!(net_watch_armed & GG_WATCH_ARMED_TGIDS) ||
		    !bpf_map_lookup_elem(&watched_tgids, &tgid))
			return 0;
		flags |= GG_FILE_WATCHED_TGID;
	}
	e = event__reserve(GG_EVENT_FILE_CHANGE, sizeof(*e));
	if (!e)
		return 0;
	task = bpf_get_current_task_btf();
	task__fill(&e->task, task);
	e->ret = (__s32)ret;
	e->dirfd = dirfd;
	e->open_flags = op_flags;
	e->syscall = (__u16)syscall;
	e->category = category;
	e->_pad = 0;
	len = bpf_probe_read_user_str(e->path, sizeof(e->path), path);
	if (len < 0) {
		e->path[0] = '\0';
		len = 0;
	} else if (len == sizeof(e->path)) {
		char last = 0;

		bpf_probe_read_user(&last, 1, path + sizeof(e->path) - 1);
		if (last)
			flags |= GG_FILE_PATH_TRUNCATED;
	}
	e->path_len = (__u32)len;
	e->flags = flags;
	event__submit(e, GG_EVENT_FILE_CHANGE);
	return 0;
}

GG_HOOK int gg_hook_file_open(long fd, __u32 syscall, __u64 path, __s32 dirfd, __u64 open_flags)
{
	return file__report(path, dirfd, open_flags, syscall, fd);
}

GG_HOOK int gg_hook_rename_exit(long ret, __u32 syscall)
{
	struct pt_regs *regs;
	__u64 path, flags = 0;
	__s32 dirfd = GG_AT_FDCWD;

	if (ret != 0 || !cfg_watch_files)
		return 0;
	regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	if (syscall == GG_FILE_SYS_RENAME) { /* rename(old, new) */
		path = PT_REGS_PARM2_CORE_SYSCALL(regs);
	} else { /* renameat(olddfd, old, newdfd, new[, flags]) */
		dirfd = (__s32)PT_REGS_PARM3_CORE_SYSCALL(regs);
		path = PT_REGS_PARM4_CORE_SYSCALL(regs);
		if (syscall == GG_FILE_SYS_RENAMEAT2)
			flags = (__u32)PT_REGS_PARM5_CORE_SYSCALL(regs);
	}
	return file__report(path, dirfd, flags, syscall, 0);
}

GG_HOOK int gg_hook_unlink_exit(long ret, __u32 syscall)
{
	struct pt_regs *regs;
	__u64 path, flags = 0;
	__s32 dirfd = GG_AT_FDCWD;

	if (ret != 0 || !cfg_watch_files)
		return 0;
	regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	if (syscall == GG_FILE_SYS_UNLINK) { /* unlink(path) */
		path = PT_REGS_PARM1_CORE_SYSCALL(regs);
	} else { /* unlinkat(dfd, path, flags) */
		dirfd = (__s32)PT_REGS_PARM1_CORE_SYSCALL(regs);
		path = PT_REGS_PARM2_CORE_SYSCALL(regs);
		flags = (__u32)PT_REGS_PARM3_CORE_SYSCALL(regs);
	}
	return file__report(path, dirfd, flags, syscall, 0);
}

/* Per-syscall tracepoints (sensor.attach syscall_tracepoints); rename and
 * unlink exist on x86-64 but not on arm64, the loader skips absent ones. */
SEC("tracepoint/syscalls/sys_exit_rename")
int gg_exit_rename(struct trace_event_raw_sys_exit *ctx)
{
	return gg_hook_rename_exit(ctx->ret, GG_FILE_SYS_RENAME);
}

SEC("tracepoint/syscalls/sys_exit_renameat")
int gg_exit_renameat(struct trace_event_raw_sys_exit *ctx)
{
	return gg_hook_rename_exit(ctx->ret, GG_FILE_SYS_RENAMEAT);
}

SEC("tracepoint/syscalls/sys_exit_renameat2")
int gg_exit_renameat2(struct trace_event_raw_sys_exit *ctx)
{
	return gg_hook_rename_exit(ctx->ret, GG_FILE_SYS_RENAMEAT2);
}

SEC("tracepoint/syscalls/sys_exit_unlink")
int gg_exit_unlink(struct trace_event_raw_sys_exit *ctx)
{
	return gg_hook_unlink_exit(ctx->ret, GG_FILE_SYS_UNLINK);
}

SEC("tracepoint/syscalls/sys_exit_unlinkat")
int gg_exit_unlinkat(struct trace_event_raw_sys_exit *ctx)
{
	return gg_hook_unlink_exit(ctx->ret, GG_FILE_SYS_UNLINKAT);
}
