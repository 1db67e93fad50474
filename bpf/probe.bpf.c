// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Tiny programs loaded one at a time by `gpuguard probe` to learn what this
 * kernel really allows (a feature flag in /boot/config says little when an
 * LSM or lockdown policy refuses the load). Each returns at once; none emits.
 * Names stay under 16 bytes, the kernel's limit, and start with gg_ so
 * `bpftool prog list` tells them apart.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

char LICENSE[] SEC("license") = "Dual BSD/GPL";

struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} probe_ringbuf SEC(".maps");

SEC("tracepoint/syscalls/sys_enter_getppid")
int gg_probe_tp(void *ctx)
{
	return 0;
}

SEC("raw_tracepoint/sys_enter")
int gg_probe_rawtp(void *ctx)
{
	return 0;
}

SEC("tp_btf/sys_enter")
int BPF_PROG(gg_probe_tpbtf, struct pt_regs *regs, long id)
{
	return 0;
}

/* The socket layer's tracepoints (6.3+) that the payload programs prefer. */
SEC("tp_btf/sock_send_length")
int BPF_PROG(gg_probe_sksend, struct sock *sk, int ret, int flags)
{
	return 0;
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(gg_probe_skrecv, struct sock *sk, int ret, int flags)
{
	return 0;
}

SEC("fentry/do_nanosleep")
int BPF_PROG(gg_probe_fentry)
{
	return 0;
}

SEC("lsm/file_open")
int BPF_PROG(gg_probe_lsm, struct file *file)
{
	return 0;
}

SEC("cgroup/dev")
int gg_probe_cgdev(struct bpf_cgroup_dev_ctx *ctx)
{
	return 1;
}

SEC("cgroup/connect4")
int gg_probe_conn4(struct bpf_sock_addr *ctx)
{
	return 1;
}

SEC("tracepoint/syscalls/sys_enter_getppid")
int gg_probe_signal(void *ctx)
{
	/* Never true at run time: only the verifier's acceptance of the helper matters. */
	if (bpf_get_current_pid_tgid() == 0)
		bpf_send_signal(0);
	return 0;
}

SEC("tracepoint/syscalls/sys_enter_getppid")
int gg_probe_rb(void *ctx)
{
	__u32 *slot = bpf_ringbuf_reserve(&probe_ringbuf, sizeof(*slot), 0);

	if (slot)
		bpf_ringbuf_discard(slot, 0);
	return 0;
}

SEC("tp_btf/module_load")
int BPF_PROG(gg_probe_module, void *mod)
{
	return 0;
}
