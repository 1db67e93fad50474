// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The floor of each attachment mode for tracer_overhead_bench: empty
 * programs attached exactly as the sensor attaches its own in that mode
 * (bpf/syscalls.bpf.c, open/ioctl/connect.bpf.c). What a mode costs before
 * any program logic runs.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

SEC("tracepoint/syscalls/sys_exit_openat")
int floor_tp_openat(void *ctx)
{
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_ioctl")
int floor_tp_ioctl(void *ctx)
{
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_connect")
int floor_tp_connect(void *ctx)
{
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(floor_btf_enter, struct pt_regs *regs, long id)
{
	return 0;
}

SEC("tp_btf/sys_exit")
int BPF_PROG(floor_btf_exit, struct pt_regs *regs, long ret)
{
	return 0;
}

SEC("raw_tracepoint/sys_enter")
int floor_raw_enter(void *ctx)
{
	return 0;
}

SEC("raw_tracepoint/sys_exit")
int floor_raw_exit(void *ctx)
{
	return 0;
}

SEC("fexit/__x64_sys_openat")
int BPF_PROG(floor_fn_openat, struct pt_regs *regs, long ret)
{
	return 0;
}

SEC("fentry/__x64_sys_ioctl")
int BPF_PROG(floor_fn_ioctl, struct pt_regs *regs)
{
	return 0;
}

SEC("fexit/__x64_sys_connect")
int BPF_PROG(floor_fn_connect, struct pt_regs *regs, long ret)
{
	return 0;
}
