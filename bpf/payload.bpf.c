// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Socket payload sampling for network intelligence (gpuguard/netintel/net_intel.h):
 * Stratum on the wire and DNS answers.
 *
 * Hooks, two variants chosen by the loader (fentry and kprobes are not
 * available on every supported kernel, `gpuguard probe`):
 *  - tp_btf/sock_send_length and tp_btf/sock_recv_length (kernels >= 6.3):
 *    fired inside sock_sendmsg/sock_recvmsg, so only socket I/O pays
 *    anything: a pipe or file write never reaches them. The socket comes
 *    typed from the tracepoint; which system call it was and where its user
 *    buffer is come from the task's saved registers (write/read, sendto/
 *    recvfrom, sendmsg/recvmsg; writev, sendmmsg, io_uring are skipped).
 *  - syscalls/sys_enter_write/sendto/sendmsg and sys_exit_read/recvfrom/
 *    recvmsg elsewhere: every such call of every process pays the tracepoint
 *    (~90 ns on 6.18, +30 % on a pipe write; bench/payload_bench.cpp).
 * Receives are read at exit, sends at entry or after the send: the buffer
 * holds the bytes either way, and no per-thread stash is needed.
 *
 * Cost: a process not in net_watch_tgids pays one lookup per traced call.
 * Only receives of unwatched processes go further (with cfg_payload_dns), to
 * see whether the peer is port 53.
 *
 * Traffic accounting: every send of a GPU process on an INET socket adds
 * its bytes and one call to the process's gpu_tgids entry, a watched
 * process's to its watched_tgids entry (both variants, before any sampling
 * budget), and so does every receive that returned data, so the agent can
 * tell a quiet process's small periodic writes from a data stream, and a
 * miner's trickle of jobs from a download (GG-CORR-0009, GG-CORR-0023).
 *
 * Flow shapes (ABI 1.9; both counts in payload_counts.bpf.h): each TCP
 * connection of such a process has its bytes, messages and the spacing of
 * its message bursts counted in flow_shapes (gg_flow_shape), so the agent
 * can recognise a mining session by its shape without reading it: one
 * long-lived flow, jobs pushed by the peer every few seconds to minutes,
 * small sends (docs/detections.md).
 *
 * Bounded: per (process, socket) the first cfg_payload_msgs messages of each
 * direction; a TCP flow whose first sent byte is '{' (JSON-RPC: Stratum v1
 * and its dialects) is followed for cfg_payload_follow_msgs messages, so
 * share submissions can be counted for a hash-rate estimate.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_endian.h>
#include "common.bpf.h"
#include "payload.h"
#include "hooks.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

#define GG_AF_INET 2
#define GG_AF_INET6 10
#define GG_S_IFSOCK 0140000
#define GG_SOCK_STREAM 1
#define GG_SOCK_DGRAM 2
#define GG_DNS_PORT 53
#define GG_MSG_PEEK 2

/* Sample every process's INET traffic, not only watched ones; 0 = off. */
const volatile __u8 cfg_payload_all = 0;
/* Report DNS answers (peer port 53) received by any process; 0 = off. */
const volatile __u8 cfg_payload_dns = 1;
/* Messages sampled per flow and direction. */
const volatile __u32 cfg_payload_msgs = 4;
/* ... for a flow whose first sent byte is '{'. */
const volatile __u32 cfg_payload_follow_msgs = 4096;
/* Count watched processes' flow shapes (flow_shapes); 0 = off. */
const volatile __u8 cfg_flow_shapes = 1;

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, GG_MAX_PAYLOAD_FLOWS);
	__type(key, struct gg_flow_key);
	__type(value, struct gg_flow_state);
} payload_flows SEC(".maps");

/*
 * Unconnected datagram sockets that sent to port 53, and to whom (sock_*
 * variant): the source of a datagram is copied to the caller only after
 * sock_recv_length fires, so the answer's peer is taken from the query.
 */
struct dns_query_peer {
	__u8 addr[16];
};

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64); /* struct sock address */
	__type(value, struct dns_query_peer);
} dns_query_socks SEC(".maps");

/* The prefix of sockaddr_in and sockaddr_in6. */
struct payload_sockaddr {
	__u16 family;
	__u16 port; /* network order */
};

struct payload_peer {
	struct sock *sk;
	__u16 family;
	__u16 type;
	__u16 local_port;
	__u16 remote_port;
	__u8 local_addr[16];
	__u8 remote_addr[16];
};

static __always_inline bool payload__sock(struct sock *sk, __u16 type, struct payload_peer *peer);

#include "payload_counts.bpf.h"

/* The INET socket behind @fd of the current task, with its addresses. */
static __always_inline bool payload__socket(int fd, struct payload_peer *peer)
{
	struct task_struct *task = bpf_get_current_task_btf();
	struct file *file = task__fd_file(task, fd);
	struct socket *sock;
	struct inode *inode;
	struct sock *sk;

	if (!file)
		return false;
	inode = BPF_CORE_READ(file, f_inode);
	if (!inode || (BPF_CORE_READ(inode, i_mode) & GG_S_IFMT) != GG_S_IFSOCK)
		return false;
	sock = BPF_CORE_READ(file, private_data);
	if (!sock)
		return false;
	sk = BPF_CORE_READ(sock, sk);
	if (!sk)
		return false;
	return payload__sock(sk, BPF_CORE_READ(sock, type), peer);
}

/* Family, type, ports and addresses of an INET socket; false for other families. */
static __always_inline bool payload__sock(struct sock *sk, __u16 type, struct payload_peer *peer)
{
	peer->family = BPF_CORE_READ(sk, __sk_common.skc_family);
	if (peer->family != GG_AF_INET && peer->family != GG_AF_INET6)
		return false;
	peer->sk = sk;
	peer->type = type;
	peer->local_port = BPF_CORE_READ(sk, __sk_common.skc_num);
	peer->remote_port = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
	if (peer->family == GG_AF_INET) {
		bpf_core_read(peer->local_addr, 4, &sk->__sk_common.skc_rcv_saddr);
		bpf_core_read(peer->remote_addr, 4, &sk->__sk_common.skc_daddr);
	} else {
		bpf_core_read(peer->local_addr, 16, &sk->__sk_common.skc_v6_rcv_saddr);
		bpf_core_read(peer->remote_addr, 16, &sk->__sk_common.skc_v6_daddr);
	}
	return true;
}

/* Peer of an unconnected socket, from the sockaddr argument (recvfrom, recvmsg). */
static __always_inline void payload__peer_from_user(struct payload_peer *peer, const void *uaddr)
{
	struct payload_sockaddr head;

	if (!uaddr || bpf_probe_read_user(&head, sizeof(head), uaddr))
		return;
	if (head.family == GG_AF_INET) {
		peer->remote_port = bpf_ntohs(head.port);
		bpf_probe_read_user(peer->remote_addr, 4, uaddr + 4);
	} else if (head.family == GG_AF_INET6) {
		peer->remote_port = bpf_ntohs(head.port);
		bpf_probe_read_user(peer->remote_addr, 16, uaddr + 8);
	}
}

/* Counts the message against its flow's budget; false when it is spent. */
static __always_inline bool payload__budget(struct payload_peer *peer, __u32 tgid, __u32 direction,
					    const char *buf, __u32 *seq, __u32 *flags)
{
	struct gg_flow_key key = {.sock = (__u64)peer->sk, .tgid = tgid};
	struct gg_flow_state fresh = {};
	struct gg_flow_state *state;
	__u32 limit, count;
	char first = 0;

	state = bpf_map_lookup_elem(&payload_flows, &key);
	if (!state) {
		bpf_map_update_elem(&payload_flows, &key, &fresh, BPF_NOEXIST);
		state = bpf_map_lookup_elem(&payload_flows, &key);
		if (!state)
			return false;
	}
	count = direction == GG_PAYLOAD_OUT ? state->sent : state->received;
	if (direction == GG_PAYLOAD_OUT && count == 0 && peer->type == GG_SOCK_STREAM &&
	    !bpf_probe_read_user(&first, 1, buf) && first == '{')
		state->flags |= GG_PAYLOAD_FOLLOWED;
	limit = (state->flags & GG_PAYLOAD_FOLLOWED) ? cfg_payload_follow_msgs : cfg_payload_msgs;
	if (count >= limit)
		return false;
	if (direction == GG_PAYLOAD_OUT)
		state->sent = count + 1;
	else
		state->received = count + 1;
	*seq = count;
	*flags |= state->flags & GG_PAYLOAD_FOLLOWED;
	return true;
}

/*
 * Reports one message of @len bytes at @buf on @fd, whose socket is @peer,
 * unless the flow's budget is spent. @dns_candidate: a receive that may
 * carry a DNS answer; such ones are reported for unwatched processes too.
 */
static __always_inline int payload__emit(struct payload_peer *peer, __u32 tgid, bool watched,
					 int fd, const char *buf, __u64 len, __u32 direction,
					 __u32 syscall, bool dns_candidate)
{
	struct gg_payload_event *e;
	__u32 flags = 0, seq = 0, n;
	bool dns;

	if (!len || !buf)
		return 0;
	dns = cfg_payload_dns && dns_candidate && peer->remote_port == GG_DNS_PORT;
	if (!watched && !dns)
		return 0;
	if (peer->type == GG_SOCK_DGRAM)
		flags |= GG_PAYLOAD_DGRAM;
	else if (peer->type != GG_SOCK_STREAM)
		return 0;
	if (dns) {
		/* Answers are small and few; every one feeds the IP -> name cache. */
		flags |= GG_PAYLOAD_DNS;
	} else {
		if (peer->type != GG_SOCK_STREAM)
			return 0; /* QUIC, RTP...: no mining protocol runs over plain UDP */
		if (!payload__budget(peer, tgid, direction, buf, &seq, &flags))
			return 0;
	}

	e = event__reserve(GG_EVENT_NET_PAYLOAD, sizeof(*e));
	if (!e)
		return 0;
	task__fill(&e->task, bpf_get_current_task_btf());
	n = len > GG_PAYLOAD_MAX ? GG_PAYLOAD_MAX : (__u32)len;
	if (len > GG_PAYLOAD_MAX)
		flags |= GG_PAYLOAD_TRUNCATED;
	if (bpf_probe_read_user(e->data, n, buf))
		n = 0;
	e->hdr.size = GG_PAYLOAD_FIXED_SIZE + n;
	e->fd = fd;
	e->len = len > 0xffffffffULL ? 0xffffffffU : (__u32)len;
	e->captured = n;
	e->seq = seq;
	e->flow = (__u64)peer->sk;
	e->family = peer->family;
	e->local_port = peer->local_port;
	e->remote_port = peer->remote_port;
	e->direction = direction;
	e->syscall = syscall;
	e->flags = flags;
	e->_pad = 0;
	__builtin_memcpy(e->local_addr, peer->local_addr, sizeof(e->local_addr));
	__builtin_memcpy(e->remote_addr, peer->remote_addr, sizeof(e->remote_addr));
	event__submit(e, GG_EVENT_NET_PAYLOAD);
	return 0;
}

/*
 * Syscall-tracepoint variant: one message on @fd. @uaddr: the sockaddr
 * argument of recvfrom/recvmsg (peer of an unconnected socket) or NULL.
 */
static __always_inline int payload__capture(int fd, const char *buf, __u64 len, __u32 direction,
					    __u32 syscall, bool dns_candidate, const void *uaddr)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct payload_peer peer = {};
	bool watched;

	if (!len || !buf)
		return 0;
	watched = cfg_payload_all || bpf_map_lookup_elem(&net_watch_tgids, &tgid);
	if (!watched && !(cfg_payload_dns && dns_candidate))
		return 0;
	if (!payload__socket(fd, &peer))
		return 0;
	if (watched) {
		payload__count(tgid, len, direction == GG_PAYLOAD_IN);
		if (peer.type == GG_SOCK_STREAM)
			payload__shape(peer.sk, tgid, len, direction == GG_PAYLOAD_IN);
	}
	if (!peer.remote_port && uaddr)
		payload__peer_from_user(&peer, uaddr);
	return payload__emit(&peer, tgid, watched, fd, buf, len, direction, syscall, dns_candidate);
}

/* The first iovec of a user msghdr: where sendmsg/recvmsg's bytes are. */
static __always_inline const char *payload__msg_buf(const struct user_msghdr *umsg, __u64 *len,
						    const void **name)
{
	struct user_msghdr msg;
	struct iovec iov;

	if (bpf_probe_read_user(&msg, sizeof(msg), umsg) || !msg.msg_iov || !msg.msg_iovlen)
		return NULL;
	if (bpf_probe_read_user(&iov, sizeof(iov), msg.msg_iov))
		return NULL;
	if (*len > iov.iov_len)
		*len = iov.iov_len;
	*name = msg.msg_name;
	return iov.iov_base;
}

static __always_inline int payload__sendmsg(int fd, const struct user_msghdr *umsg, __u64 sent)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	const void *name = NULL;
	const char *buf;
	__u64 len = sent;

	/* Outbound messages matter only for watched processes: stop before the msghdr read. */
	if (!cfg_payload_all && !bpf_map_lookup_elem(&net_watch_tgids, &tgid))
		return 0;
	buf = payload__msg_buf(umsg, &len, &name);
	return payload__capture(fd, buf, len, GG_PAYLOAD_OUT, GG_PSYS_SENDMSG, false, NULL);
}

static __always_inline int payload__recvmsg(int fd, const struct user_msghdr *umsg, __u64 len)
{
	const void *name = NULL;
	const char *buf = payload__msg_buf(umsg, &len, &name);

	return payload__capture(fd, buf, len, GG_PAYLOAD_IN, GG_PSYS_RECVMSG, true, name);
}

/*
 * sock_* variant: the system call behind a socket send or receive, from the
 * task's saved registers. Returns the syscall (enum gg_payload_syscall) or
 * -1 for calls this does not sample (writev, sendmmsg, io_uring, kernel).
 */
static __always_inline int payload__syscall_args(bool send, int *fd, const char **buf, __u64 *len,
						 const void **uaddr)
{
	struct pt_regs *regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	long id = regs__syscall_nr(regs);

	*fd = (int)PT_REGS_PARM1_CORE_SYSCALL(regs);
	if (id == (send ? cfg_nr_write : cfg_nr_read)) {
		*buf = (const char *)PT_REGS_PARM2_CORE_SYSCALL(regs);
		return send ? GG_PSYS_WRITE : GG_PSYS_READ;
	}
	if (id == (send ? cfg_nr_sendto : cfg_nr_recvfrom)) {
		*buf = (const char *)PT_REGS_PARM2_CORE_SYSCALL(regs);
		*uaddr = (const void *)PT_REGS_PARM5_CORE_SYSCALL(regs);
		return send ? GG_PSYS_SENDTO : GG_PSYS_RECVFROM;
	}
	if (id == (send ? cfg_nr_sendmsg : cfg_nr_recvmsg)) {
		*buf = payload__msg_buf(
			(const struct user_msghdr *)PT_REGS_PARM2_CORE_SYSCALL(regs), len, uaddr);
		return send ? GG_PSYS_SENDMSG : GG_PSYS_RECVMSG;
	}
	return -1;
}

SEC("tp_btf/sock_send_length")
int BPF_PROG(gg_sock_send, struct sock *sk, int ret, int flags)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct payload_peer peer = {};
	const void *uaddr = NULL;
	const char *buf = NULL;
	__u64 len = ret;
	bool watched, unconnected_dgram;
	int fd, syscall;

	if (ret <= 0)
		return 0;
	watched = cfg_payload_all || bpf_map_lookup_elem(&net_watch_tgids, &tgid);
	unconnected_dgram = sk->sk_type == GG_SOCK_DGRAM && !sk->__sk_common.skc_dport;
	/* Everyone else stops here: one lookup, two loads. */
	if (!watched && !(cfg_payload_dns && unconnected_dgram))
		return 0;
	if (watched &&
	    (sk->__sk_common.skc_family == GG_AF_INET || sk->__sk_common.skc_family == GG_AF_INET6)) {
		payload__count(tgid, len, false); /* writev, sendmmsg, io_uring too */
		if (sk->sk_type == GG_SOCK_STREAM)
			payload__shape(sk, tgid, len, false);
	}
	syscall = payload__syscall_args(true, &fd, &buf, &len, &uaddr);
	if (syscall < 0 || !payload__sock(sk, sk->sk_type, &peer))
		return 0;
	if (unconnected_dgram && uaddr) {
		payload__peer_from_user(&peer, uaddr);
		if (cfg_payload_dns && peer.remote_port == GG_DNS_PORT) {
			struct dns_query_peer query = {};
			__u64 key = (__u64)sk;

			__builtin_memcpy(query.addr, peer.remote_addr, sizeof(query.addr));
			bpf_map_update_elem(&dns_query_socks, &key, &query, BPF_ANY);
		}
	}
	if (!watched)
		return 0;
	return payload__emit(&peer, tgid, true, fd, buf, len, GG_PAYLOAD_OUT, syscall, false);
}

SEC("tp_btf/sock_recv_length")
int BPF_PROG(gg_sock_recv, struct sock *sk, int ret, int flags)
{
	__u32 tgid = bpf_get_current_pid_tgid() >> 32;
	struct dns_query_peer *asked = NULL;
	struct payload_peer peer = {};
	const void *uaddr = NULL;
	const char *buf = NULL;
	__u64 len = ret;
	int fd, syscall;
	bool watched;
	__u16 port;

	if (ret <= 0 || (flags & GG_MSG_PEEK)) /* a peek is read again */
		return 0;
	watched = cfg_payload_all || bpf_map_lookup_elem(&net_watch_tgids, &tgid);
	port = bpf_ntohs(sk->__sk_common.skc_dport);
	if (cfg_payload_dns && !port && sk->sk_type == GG_SOCK_DGRAM) {
		__u64 key = (__u64)sk;

		asked = bpf_map_lookup_elem(&dns_query_socks, &key);
	}
	/* Unwatched: DNS answers only (connected to port 53, or after a query). */
	if (!watched && !(cfg_payload_dns && (port == GG_DNS_PORT || asked)))
		return 0;
	if (watched &&
	    (sk->__sk_common.skc_family == GG_AF_INET || sk->__sk_common.skc_family == GG_AF_INET6)) {
		payload__count(tgid, len, true); /* readv, recvmmsg, io_uring too */
		if (sk->sk_type == GG_SOCK_STREAM)
			payload__shape(sk, tgid, len, true);
	}
	syscall = payload__syscall_args(false, &fd, &buf, &len, &uaddr);
	if (syscall < 0 || !payload__sock(sk, sk->sk_type, &peer))
		return 0;
	if (!peer.remote_port && asked) {
		peer.remote_port = GG_DNS_PORT;
		__builtin_memcpy(peer.remote_addr, asked->addr, sizeof(peer.remote_addr));
	}
	return payload__emit(&peer, tgid, watched, fd, buf, len, GG_PAYLOAD_IN, syscall, true);
}

/*
 * Sends at the syscall's exit, as receives: the bytes it took (ret), read
 * from the caller's buffer after the kernel copied them, so a page the
 * process never touched before (a fresh fork's string constant) is mapped by
 * then. At entry bpf_probe_read_user cannot fault it in, and the message
 * (often a miner's login) was lost.
 */
SEC("tracepoint/syscalls/sys_exit_write")
int gg_exit_write(struct trace_event_raw_sys_exit *ctx)
{
	return gg_hook_payload_exit(cfg_nr_write, ctx->ret);
}

SEC("tracepoint/syscalls/sys_exit_sendto")
int gg_exit_sendto(struct trace_event_raw_sys_exit *ctx)
{
	return gg_hook_payload_exit(cfg_nr_sendto, ctx->ret);
}

SEC("tracepoint/syscalls/sys_exit_sendmsg")
int gg_exit_sendmsg(struct trace_event_raw_sys_exit *ctx)
{
	return gg_hook_payload_exit(cfg_nr_sendmsg, ctx->ret);
}

SEC("tracepoint/syscalls/sys_exit_read")
int gg_exit_read(struct trace_event_raw_sys_exit *ctx)
{
	return gg_hook_payload_exit(cfg_nr_read, ctx->ret);
}

SEC("tracepoint/syscalls/sys_exit_recvfrom")
int gg_exit_recvfrom(struct trace_event_raw_sys_exit *ctx)
{
	return gg_hook_payload_exit(cfg_nr_recvfrom, ctx->ret);
}

SEC("tracepoint/syscalls/sys_exit_recvmsg")
int gg_exit_recvmsg(struct trace_event_raw_sys_exit *ctx)
{
	return gg_hook_payload_exit(cfg_nr_recvmsg, ctx->ret);
}

/* Every attachment's payload hook: these tracepoints, the raw dispatchers and
 * the syscall functions' fexit programs. */
GG_HOOK int gg_hook_payload_exit(long id, long ret)
{
	struct pt_regs *regs;
	const char *buf;
	int fd;

	if (ret <= 0)
		return 0;
	regs = (struct pt_regs *)bpf_task_pt_regs(bpf_get_current_task_btf());
	fd = (int)PT_REGS_PARM1_CORE_SYSCALL(regs);
	buf = (const char *)PT_REGS_PARM2_CORE_SYSCALL(regs);
	if (id == cfg_nr_write)
		return payload__capture(fd, buf, ret, GG_PAYLOAD_OUT, GG_PSYS_WRITE, false, NULL);
	if (id == cfg_nr_sendto)
		return payload__capture(fd, buf, ret, GG_PAYLOAD_OUT, GG_PSYS_SENDTO, false, NULL);
	if (id == cfg_nr_sendmsg)
		return payload__sendmsg(fd, (const struct user_msghdr *)buf, ret);
	if (id == cfg_nr_read)
		return payload__capture(fd, buf, ret, GG_PAYLOAD_IN, GG_PSYS_READ, false, NULL);
	if (id == cfg_nr_recvfrom)
		return payload__capture(fd, buf, ret, GG_PAYLOAD_IN, GG_PSYS_RECVFROM, true,
					(const void *)PT_REGS_PARM5_CORE_SYSCALL(regs));
	if (id == cfg_nr_recvmsg)
		return payload__recvmsg(fd, (const struct user_msghdr *)buf, ret);
	return 0;
}
