/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Socket payload samples (payload.bpf.c <-> agent/sensor*): the first bytes
 * of the first messages of each INET connection of a watched process, and
 * DNS answers of every process. Same ABI rules as events.h.
 */
#ifndef GPUGUARD_BPF_PAYLOAD_H
#define GPUGUARD_BPF_PAYLOAD_H

#include "events.h"

/* Bytes copied per message: enough for a Stratum login/job line. */
#define GG_PAYLOAD_MAX 512
/* Flows tracked for the per-connection message budget (LRU). */
#define GG_MAX_PAYLOAD_FLOWS 65536

enum gg_payload_direction {
	GG_PAYLOAD_OUT = 0, /* the process sent it */
	GG_PAYLOAD_IN = 1,  /* the process received it */
};

/* Which system call a struct gg_payload_event comes from. */
enum gg_payload_syscall {
	GG_PSYS_WRITE = 0,
	GG_PSYS_SENDTO = 1,
	GG_PSYS_SENDMSG = 2,
	GG_PSYS_READ = 3,
	GG_PSYS_RECVFROM = 4,
	GG_PSYS_RECVMSG = 5,
};

/* Flags of struct gg_payload_event. */
enum gg_payload_flags {
	GG_PAYLOAD_TRUNCATED = 1 << 0, /* the message was longer than GG_PAYLOAD_MAX */
	GG_PAYLOAD_DNS = 1 << 1,      /* peer port 53: reported for any process (cfg_payload_dns) */
	GG_PAYLOAD_FOLLOWED = 1 << 2, /* flow opened with '{': sampled past cfg_payload_msgs */
	GG_PAYLOAD_DGRAM = 1 << 3,    /* SOCK_DGRAM socket (else SOCK_STREAM) */
};

/*
 * One message (one system call's buffer) on an AF_INET/AF_INET6 socket.
 * Variable length: hdr.size = GG_PAYLOAD_FIXED_SIZE + captured.
 */
struct gg_payload_event {
	struct gg_event_header hdr;
	struct gg_task_info task;
	__s32 fd;
	__u32 len;	   /* bytes the call moved (send: asked, receive: returned) */
	__u32 captured;	   /* bytes in data[], at most GG_PAYLOAD_MAX */
	__u32 seq;	   /* 0-based number of this message in its flow and direction */
	__u64 flow;	   /* identity of the connection: the kernel's struct sock address */
	__u16 family;	   /* AF_INET (2) or AF_INET6 (10) */
	__u16 local_port;  /* host order */
	__u16 remote_port; /* host order; from the sockaddr argument for unconnected sockets */
	__u8 direction;	   /* enum gg_payload_direction */
	__u8 syscall;	   /* enum gg_payload_syscall */
	__u32 flags;	   /* enum gg_payload_flags */
	__u32 _pad;
	__u8 local_addr[16]; /* network order; IPv4 in the first 4 bytes */
	__u8 remote_addr[16];
	char data[GG_PAYLOAD_MAX];
};
#define GG_PAYLOAD_FIXED_SIZE (16 + 48 + 40 + 32)
GG_STATIC_ASSERT(sizeof(struct gg_payload_event) == GG_PAYLOAD_FIXED_SIZE + GG_PAYLOAD_MAX,
		 "gg_payload_event ABI");

/* Key of payload_flows: one connection of one process. */
struct gg_flow_key {
	__u64 sock; /* struct sock address */
	__u32 tgid;
	__u32 _pad;
};
GG_STATIC_ASSERT(sizeof(struct gg_flow_key) == 16, "gg_flow_key ABI");

/* Value of payload_flows: messages sampled so far, per direction. */
struct gg_flow_state {
	__u32 sent;
	__u32 received;
	__u32 flags; /* GG_PAYLOAD_FOLLOWED once the first sent byte was '{' */
	__u32 _pad;
};
GG_STATIC_ASSERT(sizeof(struct gg_flow_state) == 16, "gg_flow_state ABI");

/* Flows whose traffic shape is accounted (LRU): a watched process's TCP connections. */
#define GG_MAX_ACCOUNTED_FLOWS 8192
/* Receives (sends) closer together than this are one burst: one message read in parts. */
#define GG_FLOW_BURST_NS 1000000000ULL
/* Gap histograms: [1,2) s, [2,4) s ... [64,128) s, 128 s and more. */
#define GG_FLOW_GAP_BUCKETS 8

/*
 * Value of flow_shapes (ABI 1.9): the shape of one TCP connection of a
 * watched process (a GPU holder, a busy or flagged one), keyed as
 * payload_flows and counted at every send and every receive that returned
 * data, past any sampling budget: how long it lives, bytes and messages
 * both ways, and the spacing of its messages. The agent reads it with its
 * process samples (flow events); nothing goes through the ring buffer.
 */
struct gg_flow_shape {
	__u64 first_ns;	   /* CLOCK_MONOTONIC of its first message either way */
	__u64 last_out_ns; /* of its latest send */
	__u64 last_in_ns;  /* of its latest receive */
	__u64 bytes_out;
	__u64 bytes_in;
	__u32 sends;	   /* send calls */
	__u32 receives;	   /* receive calls that returned data */
	__u32 send_bursts; /* sends GG_FLOW_BURST_NS or more after the previous one (or first) */
	__u32 receive_bursts;
	/* Receive bursts that came GG_FLOW_BURST_NS or more after the latest
	 * send: the peer spoke unprompted (a job pushed), not an answer. */
	__u32 pushes;
	/* Send bursts that came less than GG_FLOW_BURST_NS after the latest
	 * receive: the process answered (a long poll asks again, a consumer
	 * acknowledges; a miner's shares do not follow its jobs). */
	__u32 replies;
	__u16 family;	   /* AF_INET (2) or AF_INET6 (10) */
	__u16 remote_port; /* host order */
	__u8 remote_addr[16];
	__u32 send_gaps[GG_FLOW_GAP_BUCKETS];	 /* gaps between send bursts */
	__u32 receive_gaps[GG_FLOW_GAP_BUCKETS]; /* gaps between receive bursts */
	__u32 _pad;
};
GG_STATIC_ASSERT(sizeof(struct gg_flow_shape) == 40 + 24 + 4 + 16 + 64 + 4, "gg_flow_shape ABI");

#endif /* GPUGUARD_BPF_PAYLOAD_H */
