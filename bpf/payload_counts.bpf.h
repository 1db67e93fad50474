// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Traffic accounting of the payload programs (payload.bpf.c), included by
 * it alone: per process (its gpu_tgids or watched_tgids entry) and per TCP
 * flow (flow_shapes, gg_flow_shape in payload.h), at every send and every
 * receive that returned data of a process in net_watch_tgids, before any
 * sampling budget. Nothing here reaches the ring buffer: the agent reads
 * the maps.
 */
#ifndef GPUGUARD_BPF_PAYLOAD_COUNTS_H
#define GPUGUARD_BPF_PAYLOAD_COUNTS_H

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, GG_MAX_ACCOUNTED_FLOWS);
	__type(key, struct gg_flow_key);
	__type(value, struct gg_flow_shape);
} flow_shapes SEC(".maps");

/*
 * Counts a send (or, with @in, a receive) of @len bytes on an INET socket,
 * if @tgid is a GPU process or one the agent watches (a busy or flagged
 * process). Only processes in net_watch_tgids get here.
 */
static __always_inline void payload__count(__u32 tgid, __u64 len, bool in)
{
	struct gg_gpu_proc *proc = bpf_map_lookup_elem(&gpu_tgids, &tgid);
	struct gg_watched_proc *watched;
	__u64 *bytes, *calls;

	if (proc) {
		bytes = in ? &proc->net_recv_bytes : &proc->net_send_bytes;
		calls = in ? &proc->net_recvs : &proc->net_sends;
	} else {
		watched = bpf_map_lookup_elem(&watched_tgids, &tgid);
		if (!watched)
			return;
		bytes = in ? &watched->net_recv_bytes : &watched->net_send_bytes;
		calls = in ? &watched->net_recvs : &watched->net_sends;
	}
	__sync_fetch_and_add(bytes, len);
	__sync_fetch_and_add(calls, 1);
}

/* The histogram bucket of a gap between bursts (GG_FLOW_GAP_BUCKETS). */
static __always_inline __u32 payload__gap_bucket(__u64 gap_ns)
{
	__u64 seconds = gap_ns / GG_FLOW_BURST_NS;
	__u32 bucket = 0;

	if (seconds >= 2)
		bucket = 1;
	if (seconds >= 4)
		bucket = 2;
	if (seconds >= 8)
		bucket = 3;
	if (seconds >= 16)
		bucket = 4;
	if (seconds >= 32)
		bucket = 5;
	if (seconds >= 64)
		bucket = 6;
	if (seconds >= 128)
		bucket = 7;
	return bucket;
}

/*
 * Adds a send (or, with @in, a receive) of @len bytes to the shape of @sk's
 * flow, a SOCK_STREAM INET socket of @tgid, a process in net_watch_tgids. Racing
 * threads of one process may lose a timestamp, never a count.
 */
static __always_inline void payload__shape(struct sock *sk, __u32 tgid, __u64 len, bool in)
{
	struct gg_flow_key key = {.sock = (__u64)sk, .tgid = tgid};
	struct gg_flow_shape *shape;
	__u64 now = bpf_ktime_get_ns(), last;
	__u16 family;

	if (!cfg_flow_shapes)
		return;
	shape = bpf_map_lookup_elem(&flow_shapes, &key);
	if (!shape) {
		struct gg_flow_shape fresh = {};

		family = BPF_CORE_READ(sk, __sk_common.skc_family);
		fresh.first_ns = now;
		fresh.family = family;
		fresh.remote_port = bpf_ntohs(BPF_CORE_READ(sk, __sk_common.skc_dport));
		if (family == GG_AF_INET)
			bpf_core_read(fresh.remote_addr, 4, &sk->__sk_common.skc_daddr);
		else
			bpf_core_read(fresh.remote_addr, 16, &sk->__sk_common.skc_v6_daddr);
		bpf_map_update_elem(&flow_shapes, &key, &fresh, BPF_NOEXIST);
		shape = bpf_map_lookup_elem(&flow_shapes, &key);
		if (!shape)
			return;
	}
	if (in) {
		__sync_fetch_and_add(&shape->bytes_in, len);
		__sync_fetch_and_add(&shape->receives, 1);
		last = shape->last_in_ns;
		if (!last || now - last >= GG_FLOW_BURST_NS) {
			__sync_fetch_and_add(&shape->receive_bursts, 1);
			if (last)
				__sync_fetch_and_add(
					&shape->receive_gaps[payload__gap_bucket(now - last) &
							     (GG_FLOW_GAP_BUCKETS - 1)],
					1);
			if (now - shape->last_out_ns >= GG_FLOW_BURST_NS)
				__sync_fetch_and_add(&shape->pushes, 1);
		}
		shape->last_in_ns = now;
	} else {
		__sync_fetch_and_add(&shape->bytes_out, len);
		__sync_fetch_and_add(&shape->sends, 1);
		last = shape->last_out_ns;
		if (!last || now - last >= GG_FLOW_BURST_NS) {
			__sync_fetch_and_add(&shape->send_bursts, 1);
			if (shape->last_in_ns && now - shape->last_in_ns < GG_FLOW_BURST_NS)
				__sync_fetch_and_add(&shape->replies, 1);
			if (last)
				__sync_fetch_and_add(
					&shape->send_gaps[payload__gap_bucket(now - last) &
							  (GG_FLOW_GAP_BUCKETS - 1)],
					1);
		}
		shape->last_out_ns = now;
	}
}

#endif /* GPUGUARD_BPF_PAYLOAD_COUNTS_H */
