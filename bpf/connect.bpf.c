// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Outbound connects: sys_enter_connect captures the sockaddr,
 * sys_exit_connect adds the result (0, -EINPROGRESS, -errno) and emits.
 *
 * Filtered in the kernel: reported only when the process holds a GPU fd, the
 * destination port is in watched_ports, or cfg_connect_all is set; loopback
 * destinations only with cfg_connect_loopback. Everyone else pays one
 * gpu_tgids lookup, a 4-byte read of the sockaddr and a watched_ports lookup.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "common.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define GG_AF_INET 2
#define GG_AF_INET6 10

/* Destination ports (host order) whose connects are reported from any process. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GG_MAX_WATCHED_PORTS);
	__type(key, __u16);
	__type(value, __u8);
} watched_ports SEC(".maps");

/* sockaddr captured at enter, per thread, until the exit of the same call. */
struct connect_args {
	__s32 fd;
	__u16 family;
	__u16 port;
	__u32 flags;
	__u8 addr[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH); /* LRU: a thread killed mid-call cannot leak a slot */
	__uint(max_entries, 8192);
	__type(key, __u64);
	__type(value, struct connect_args);
} connect_args SEC(".maps");

/* The prefix of sockaddr_in and sockaddr_in6. */
struct sockaddr_head {
	__u16 family;
	__u16 port; /* network order */
};

static __always_inline bool addr__is_loopback_v4(const __u8 *a)
{
	return a[0] == 127;
}

static __always_inline bool addr__is_v4_mapped(const __u8 *a)
{
	for (int i = 0; i < 10; i++)
		if (a[i])
			return false;
	return a[10] == 0xff && a[11] == 0xff;
}

static __always_inline bool addr__is_loopback_v6(const __u8 *a)
{
	for (int i = 0; i < 15; i++)
		if (a[i])
			return false;
	return a[15] == 1;
}

SEC("tracepoint/syscalls/sys_enter_connect")
int gg_enter_connect(struct trace_event_raw_sys_enter *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32;
	const void *uaddr = (const void *)ctx->args[1];
	struct connect_args args = {};
	struct sockaddr_head head;
	__u16 port;

	if (bpf_map_lookup_elem(&gpu_tgids, &tgid))
		args.flags |= GG_CONNECT_GPU_HOLDER;
	else if (cfg_connect_all)
		args.flags |= GG_CONNECT_ALL;

	if (bpf_probe_read_user(&head, sizeof(head), uaddr))
		return 0;
	if (head.family != GG_AF_INET && head.family != GG_AF_INET6)
		return 0;
	port = bpf_ntohs(head.port);
	if (bpf_map_lookup_elem(&watched_ports, &port))
		args.flags |= GG_CONNECT_WATCHED_PORT;
	if (!args.flags)
		return 0;

	args.fd = (__s32)ctx->args[0];
	args.family = head.family;
	args.port = port;
	if (head.family == GG_AF_INET) {
		/* struct sockaddr_in: sin_addr at offset 4 */
		if (bpf_probe_read_user(args.addr, 4, uaddr + 4))
			return 0;
		if (addr__is_loopback_v4(args.addr))
			args.flags |= GG_CONNECT_LOOPBACK;
	} else {
		/* struct sockaddr_in6: sin6_addr at offset 8 */
		if (bpf_probe_read_user(args.addr, 16, uaddr + 8))
			return 0;
		if (addr__is_v4_mapped(args.addr)) {
			args.flags |= GG_CONNECT_V4_MAPPED;
			if (addr__is_loopback_v4(args.addr + 12))
				args.flags |= GG_CONNECT_LOOPBACK;
		} else if (addr__is_loopback_v6(args.addr)) {
			args.flags |= GG_CONNECT_LOOPBACK;
		}
	}
	if ((args.flags & GG_CONNECT_LOOPBACK) && !cfg_connect_loopback)
		return 0;
	bpf_map_update_elem(&connect_args, &pid_tgid, &args, BPF_ANY);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_connect")
int gg_exit_connect(struct trace_event_raw_sys_exit *ctx)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	struct connect_args *args = bpf_map_lookup_elem(&connect_args, &pid_tgid);
	struct gg_connect_event *e;

	if (!args)
		return 0;
	e = event__reserve(GG_EVENT_CONNECT, sizeof(*e));
	if (!e)
		goto cleanup;
	task__fill(&e->task, bpf_get_current_task_btf());
	e->fd = args->fd;
	e->ret = (__s32)ctx->ret;
	e->family = args->family;
	e->port = args->port;
	e->flags = args->flags;
	__builtin_memcpy(e->addr, args->addr, sizeof(e->addr));
	event__submit(e, GG_EVENT_CONNECT);
cleanup:
	bpf_map_delete_elem(&connect_args, &pid_tgid);
	return 0;
}
