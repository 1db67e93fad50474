// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Outbound connects: at connect exit (sys_exit_connect, or gg_hook_connect_exit
 * from the other attachments), where the result (0, -EINPROGRESS, -errno) is
 * known. The sockaddr is read there from the
 * syscall's saved argument registers, as for opens: the kernel has copied it
 * (move_addr_to_kernel), so its page is resident, and no enter program or
 * per-thread stash is needed -- every connect(2) on the host pays one
 * tracepoint, not two.
 *
 * Filtered in the kernel: reported only when the process holds a GPU fd, is
 * in watched_tgids, the destination port is in watched_ports, the address is
 * in watched_addrs, or cfg_connect_all is set; loopback destinations only
 * with cfg_connect_loopback, or from a GPU holder or watched process (a
 * proxy on this host may carry its traffic: the agent reads the handshake). Everyone else pays one gpu_tgids lookup, a
 * 4-byte read of the sockaddr and a watched_ports lookup; while the agent's
 * watch lists hold entries (net_watch_armed), one watched_tgids lookup, and
 * a read of the address (4 or 16 bytes) with one watched_addrs lookup.
 *
 * watched_tgids and watched_addrs are plain hashes the agent manages (sizes
 * from sensor.watch_processes_max / watch_addresses_max): it evicts the
 * oldest entry itself when one is full, and counts it, which an LRU map
 * would do silently.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "common.bpf.h"
#include "hooks.h"

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

/* Addresses the host resolved from pool domains: connects to them from any process. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GG_MAX_WATCHED_ADDRS);
	__type(key, struct gg_watch_addr_key);
	__type(value, __u8);
} watched_addrs SEC(".maps");

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

/* Whether @addr (as read into a connect event) is in watched_addrs; a
 * v4-mapped address is looked up in its IPv4 form. */
static __always_inline bool addr__watched(const __u8 *addr, bool v4_mapped)
{
	struct gg_watch_addr_key key = {};

	if (v4_mapped)
		__builtin_memcpy(key.addr, addr + 12, 4);
	else
		__builtin_memcpy(key.addr, addr, sizeof(key.addr));
	return bpf_map_lookup_elem(&watched_addrs, &key) != NULL;
}

static __always_inline int connect__handle_exit(long ret)
{
	__u64 pid_tgid = bpf_get_current_pid_tgid();
	__u32 tgid = pid_tgid >> 32;
	struct task_struct *task = bpf_get_current_task_btf();
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(task);
	/* connect(fd, uservaddr, addrlen): the arguments are still in the saved registers. */
	const void *uaddr = (const void *)PT_REGS_PARM2_CORE_SYSCALL(regs);
	struct gg_connect_event *e;
	struct sockaddr_head head;
	__u8 addr[16] = {};
	__u32 flags = 0;
	__u32 armed;
	__u16 port;

	if (bpf_map_lookup_elem(&gpu_tgids, &tgid))
		flags |= GG_CONNECT_GPU_HOLDER;
	else if (cfg_connect_all)
		flags |= GG_CONNECT_ALL;
	armed = net_watch_armed;
	if ((armed & GG_WATCH_ARMED_TGIDS) && bpf_map_lookup_elem(&watched_tgids, &tgid))
		flags |= GG_CONNECT_WATCHED_TGID;

	if (bpf_probe_read_user(&head, sizeof(head), uaddr))
		return 0;
	if (head.family != GG_AF_INET && head.family != GG_AF_INET6)
		return 0;
	port = bpf_ntohs(head.port);
	if (bpf_map_lookup_elem(&watched_ports, &port))
		flags |= GG_CONNECT_WATCHED_PORT;
	/* The address is read only when the connect is reported or may be watched. */
	if (!flags && !(armed & GG_WATCH_ARMED_ADDRS))
		return 0;

	if (head.family == GG_AF_INET) {
		/* struct sockaddr_in: sin_addr at offset 4 */
		if (bpf_probe_read_user(addr, 4, uaddr + 4))
			return 0;
		if (addr__is_loopback_v4(addr))
			flags |= GG_CONNECT_LOOPBACK;
	} else {
		/* struct sockaddr_in6: sin6_addr at offset 8 */
		if (bpf_probe_read_user(addr, 16, uaddr + 8))
			return 0;
		if (addr__is_v4_mapped(addr)) {
			flags |= GG_CONNECT_V4_MAPPED;
			if (addr__is_loopback_v4(addr + 12))
				flags |= GG_CONNECT_LOOPBACK;
		} else if (addr__is_loopback_v6(addr)) {
			flags |= GG_CONNECT_LOOPBACK;
		}
	}
	if ((armed & GG_WATCH_ARMED_ADDRS) && addr__watched(addr, flags & GG_CONNECT_V4_MAPPED))
		flags |= GG_CONNECT_WATCHED_ADDR;
	if (!(flags & ~(GG_CONNECT_LOOPBACK | GG_CONNECT_V4_MAPPED)))
		return 0;
	if (flags & (GG_CONNECT_WATCHED_PORT | GG_CONNECT_WATCHED_TGID | GG_CONNECT_WATCHED_ADDR)) {
		__u8 on = 1;

		/* Its traffic is sampled from now on (payload.bpf.c), loopback included. */
		bpf_map_update_elem(&net_watch_tgids, &tgid, &on, BPF_ANY);
	}
	/* A GPU holder's or a watched process's loopback connects are reported:
	 * a local proxy may be where its traffic leaves the host. */
	if ((flags & GG_CONNECT_LOOPBACK) && !cfg_connect_loopback &&
	    !(flags & (GG_CONNECT_GPU_HOLDER | GG_CONNECT_WATCHED_TGID)))
		return 0;

	e = event__reserve(GG_EVENT_CONNECT, sizeof(*e));
	if (!e)
		return 0;
	task__fill(&e->task, task);
	e->fd = (__s32)PT_REGS_PARM1_CORE_SYSCALL(regs);
	e->ret = (__s32)ret;
	e->family = head.family;
	e->port = port;
	e->flags = flags;
	__builtin_memcpy(e->addr, addr, sizeof(e->addr));
	event__submit(e, GG_EVENT_CONNECT);
	return 0;
}

SEC("tracepoint/syscalls/sys_exit_connect")
int gg_exit_connect(struct trace_event_raw_sys_exit *ctx)
{
	return connect__handle_exit(ctx->ret);
}

GG_HOOK int gg_hook_connect_exit(long ret)
{
	return connect__handle_exit(ret);
}
