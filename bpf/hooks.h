/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What each hook family (open, ioctl, connect, payload) does for one system
 * call, callable from any attachment (bpf/syscalls.bpf.c): the per-syscall
 * tracepoints of each family's own file, the raw sys_enter/sys_exit
 * dispatchers, or fentry/fexit on the syscall functions. Every attachment
 * calls the same code, so the events are the same in every mode.
 *
 * Each reads its arguments from the task's saved user registers
 * (bpf_task_pt_regs), which hold them at entry and at exit alike. Hidden
 * globals: `bpftool gen object` links them across files and libbpf verifies
 * them as static subprograms of each program that calls them.
 */
#ifndef GPUGUARD_BPF_HOOKS_H
#define GPUGUARD_BPF_HOOKS_H

#define GG_HOOK __attribute__((visibility("hidden"))) __attribute__((noinline))

/* At exit of open/openat/openat2/creat; @syscall: enum gg_open_syscall. */
GG_HOOK int gg_hook_open_exit(long ret, __u32 syscall);
/* At entry of ioctl. */
GG_HOOK int gg_hook_ioctl_enter(void);
/* At exit of connect. */
GG_HOOK int gg_hook_connect_exit(long ret);
/* Payload sampling by syscall, at the exit of write/sendto/sendmsg and
 * read/recvfrom/recvmsg (@ret: the bytes moved); @id: the syscall number. */
GG_HOOK int gg_hook_payload_exit(long id, long ret);

/* File changes (files.bpf.c): a successful open for writing, from the open
 * hook (@fd: its result); renames and unlinks at their exit. */
GG_HOOK int gg_hook_file_open(long fd, __u32 syscall, __u64 path, __s32 dirfd, __u64 open_flags);
GG_HOOK int gg_hook_rename_exit(long ret, __u32 syscall);
GG_HOOK int gg_hook_unlink_exit(long ret, __u32 syscall);

/* bpf(2) detaches by another process (tamper.bpf.c), at its exit. */
GG_HOOK int gg_hook_bpf_exit(long ret);

#endif
