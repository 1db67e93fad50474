// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Kernel-side enforcement on cgroups the agent flags: cgroup/dev refuses GPU
 * device numbers (deny_gpu), cgroup/connect4 and cgroup/connect6 refuse
 * connects to blocked addresses (the block_ip fallback where nftables is not
 * usable). Each is attached only to the cgroups it should act on, so every
 * other process on the host runs none of this.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include "enforce_maps.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* include/uapi/linux/bpf.h: access_type = (BPF_DEVCG_ACC_* << 16) | BPF_DEVCG_DEV_*. */
#define GG_DEVCG_DEV_CHAR 2

static __always_inline bool addr__blocked(const struct gg_addr_key *key)
{
	struct gg_blocked_addr *blocked = bpf_map_lookup_elem(&blocked_addrs, key);

	if (!blocked)
		return false;
	return !blocked->expires_ns || bpf_ktime_get_ns() < blocked->expires_ns;
}

SEC("cgroup/dev")
int gg_cgroup_dev(struct bpf_cgroup_dev_ctx *ctx)
{
	if ((ctx->access_type & 0xffff) != GG_DEVCG_DEV_CHAR)
		return 1;
	if (!enforce__device_denied(ctx->major, ctx->minor))
		return 1;
	enforce__count(GG_DENIED_DEVICE);
	return 0;
}

SEC("cgroup/connect4")
int gg_cgroup_connect4(struct bpf_sock_addr *ctx)
{
	struct gg_addr_key key = {};
	__u32 ip = ctx->user_ip4; /* network order */

	key.addr[10] = 0xff;
	key.addr[11] = 0xff;
	__builtin_memcpy(&key.addr[12], &ip, 4);
	if (!addr__blocked(&key))
		return 1;
	enforce__count(GG_DENIED_CONNECT4);
	return 0;
}

SEC("cgroup/connect6")
int gg_cgroup_connect6(struct bpf_sock_addr *ctx)
{
	struct gg_addr_key key = {};
	__u32 word;

	/* Word by word: the verifier allows only 4-byte loads of user_ip6. */
	word = ctx->user_ip6[0];
	__builtin_memcpy(&key.addr[0], &word, 4);
	word = ctx->user_ip6[1];
	__builtin_memcpy(&key.addr[4], &word, 4);
	word = ctx->user_ip6[2];
	__builtin_memcpy(&key.addr[8], &word, 4);
	word = ctx->user_ip6[3];
	__builtin_memcpy(&key.addr[12], &word, 4);
	if (!addr__blocked(&key))
		return 1;
	enforce__count(GG_DENIED_CONNECT6);
	return 0;
}
