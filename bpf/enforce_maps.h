/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Maps of the enforcement object (gpuguard_enforce_bpf): cgroup/dev,
 * cgroup/connect4/6 and the BPF LSM file_open program. A separate object from
 * the sensor's because its programs attach to cgroups the agent flags, on
 * demand, and the LSM program loads only where the kernel allows BPF LSM.
 * Declared __weak so each object compiles alone and `bpftool gen object`
 * merges them.
 */
#ifndef GPUGUARD_BPF_ENFORCE_MAPS_H
#define GPUGUARD_BPF_ENFORCE_MAPS_H

#include "events.h"

/* Device numbers denied by cgroup/dev and lsm/file_open (exact or GG_GPU_DEV_ANY_MINOR). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GG_MAX_GPU_DEVICES);
	__type(key, struct gg_gpu_dev_key);
	__type(value, struct gg_gpu_dev_val);
} deny_devices SEC(".maps") __weak;

/* Destinations refused by cgroup/connect4/6, with an optional expiry. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GG_MAX_BLOCKED_ADDRS);
	__type(key, struct gg_addr_key);
	__type(value, struct gg_blocked_addr);
} blocked_addrs SEC(".maps") __weak;

/* cgroup v2 ids whose processes the LSM program refuses GPU opens. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GG_MAX_DENY_CGROUPS);
	__type(key, __u64);
	__type(value, __u8);
} deny_cgroups SEC(".maps") __weak;

/* Processes (tgid) the LSM program refuses GPU opens. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GG_MAX_DENY_CGROUPS);
	__type(key, __u32);
	__type(value, __u8);
} deny_tgids SEC(".maps") __weak;

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, GG_DENIED_MAX);
	__type(key, __u32);
	__type(value, __u64);
} enforce_counters SEC(".maps") __weak;

static __always_inline void enforce__count(__u32 slot)
{
	__u64 *count = bpf_map_lookup_elem(&enforce_counters, &slot);

	if (count)
		__sync_fetch_and_add(count, 1); /* see counters__add */
}

/* Is major:minor in deny_devices (exactly, or its whole major)? */
static __always_inline bool enforce__device_denied(__u32 major, __u32 minor)
{
	struct gg_gpu_dev_key key = {.major = major, .minor = minor};

	if (bpf_map_lookup_elem(&deny_devices, &key))
		return true;
	key.minor = GG_GPU_DEV_ANY_MINOR;
	return bpf_map_lookup_elem(&deny_devices, &key) != NULL;
}

#endif /* GPUGUARD_BPF_ENFORCE_MAPS_H */
