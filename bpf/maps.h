/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Maps and load-time settings shared by every gpuguard *.bpf.c. Declared
 * __weak so each object compiles alone and `bpftool gen object` merges them
 * into one map per name.
 */
#ifndef GPUGUARD_BPF_MAPS_H
#define GPUGUARD_BPF_MAPS_H

#include "events.h"

/* ABI of this object, read by the sensor between open and load. */
const volatile __u32 gg_abi_major __weak = GG_ABI_MAJOR;
const volatile __u32 gg_abi_minor __weak = GG_ABI_MINOR;

/* Report failed opens whose path names a GPU node; 0 = off. */
const volatile __u8 cfg_report_failed_opens __weak = 1;
/* Report every INET connect, not only GPU holders' and watched ports'; 0 = off. */
const volatile __u8 cfg_connect_all __weak = 0;
/* Report connects to loopback addresses too; 0 = off. */
const volatile __u8 cfg_connect_loopback __weak = 0;
/* A process whose GPU opens are not reported nor marked: the agent's own
 * (NVML opens the NVIDIA nodes it samples); 0 = none. */
const volatile __u32 cfg_ignore_tgid __weak = 0;
/* Bytes of argv copied per exec, at most GG_ARGV_MAX - 1; 0 = none. */
const volatile __u32 cfg_argv_max __weak = 1024;

/* System call numbers of this ABI (from <sys/syscall.h>, -1 where the ABI
 * lacks the call): the raw sys_enter/sys_exit programs dispatch on them, the
 * socket-layer payload programs tell sends and receives apart by them. */
const volatile __s64 cfg_nr_openat __weak = -1;
const volatile __s64 cfg_nr_openat2 __weak = -1;
const volatile __s64 cfg_nr_open __weak = -1;
const volatile __s64 cfg_nr_creat __weak = -1;
const volatile __s64 cfg_nr_ioctl __weak = -1;
const volatile __s64 cfg_nr_connect __weak = -1;
const volatile __s64 cfg_nr_write __weak = -1;
const volatile __s64 cfg_nr_sendto __weak = -1;
const volatile __s64 cfg_nr_sendmsg __weak = -1;
const volatile __s64 cfg_nr_read __weak = -1;
const volatile __s64 cfg_nr_recvfrom __weak = -1;
const volatile __s64 cfg_nr_recvmsg __weak = -1;
const volatile __s64 cfg_nr_rename __weak = -1;
const volatile __s64 cfg_nr_renameat __weak = -1;
const volatile __s64 cfg_nr_renameat2 __weak = -1;
const volatile __s64 cfg_nr_unlink __weak = -1;
const volatile __s64 cfg_nr_unlinkat __weak = -1;
const volatile __s64 cfg_nr_bpf __weak = -1;
/* Report changes of watched files (files.bpf.c); 0 = off. */
const volatile __u8 cfg_watch_files __weak = 0;
/* The raw dispatchers also sample payloads by syscall (the socket layer's
 * tracepoints are missing); 0 = no. */
const volatile __u8 cfg_dispatch_payload __weak = 0;

/* Device numbers the agent treats as GPUs; filled from /proc/devices, backends, config. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GG_MAX_GPU_DEVICES);
	__type(key, struct gg_gpu_dev_key);
	__type(value, struct gg_gpu_dev_val);
} gpu_devices SEC(".maps") __weak;

/*
 * Processes holding a GPU fd: set by the open program and by the agent at
 * bootstrap, inherited at fork, removed at exit. Gates the ioctl and
 * connect programs, so processes that never touch a GPU pay one lookup.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GG_MAX_GPU_PROCESSES);
	__type(key, __u32);
	__type(value, struct gg_gpu_proc);
} gpu_tgids SEC(".maps") __weak;

/*
 * Processes whose socket traffic the payload programs sample: GPU holders
 * (gpu_proc__mark, the agent's bootstrap) and processes that connected to a
 * watched port. One map, so an unwatched write(2) pays one lookup. LRU: a
 * full map forgets the oldest instead of refusing new miners.
 */
struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, GG_MAX_NET_WATCH);
	__type(key, __u32);
	__type(value, __u8);
} net_watch_tgids SEC(".maps") __weak;

/*
 * Processes the agent watches (a miner signature matched, agent/daemon): their
 * connects are reported on any port and their payloads sampled. A plain hash
 * the agent manages (oldest out first, counted); an exit removes its entry
 * here (sched.bpf.c) before the agent forgets it, so a recycled pid is never
 * watched. Sized by sensor.watch_processes_max.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GG_MAX_WATCHED_TGIDS);
	__type(key, __u32);
	__type(value, struct gg_watched_proc);
} watched_tgids SEC(".maps") __weak;

/* enum gg_net_watch_armed bits, written by the agent through the skeleton's
 * bss: empty watch lists cost no lookup. */
volatile __u32 net_watch_armed __weak;

/*
 * kill_now: executables (by inode) and task names the agent marked
 * known-bad. Checked at exec, at a successful GPU open and at the first GPU
 * ioctl, only while kill_now_armed says the map holds entries, so a host
 * without kill_now targets pays no lookup at all.
 */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GG_MAX_KNOWN_BAD);
	__type(key, struct gg_file_key);
	__type(value, struct gg_known_bad);
} known_bad_files SEC(".maps") __weak;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GG_MAX_KNOWN_BAD);
	__type(key, struct gg_name_key);
	__type(value, struct gg_known_bad);
} known_bad_names SEC(".maps") __weak;

/* enum gg_kill_now_armed bits, written by the agent through the skeleton's bss. */
volatile __u32 kill_now_armed __weak;

/* All records to user space. Size set by the loader (sensor.ring_buffer_kb). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} events SEC(".maps") __weak;

/* Emitted/dropped records per event type, per CPU; summed by the agent. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, GG_EVENT_TYPE_MAX);
	__type(key, __u32);
	__type(value, struct gg_counters);
} counters SEC(".maps") __weak;

#endif /* GPUGUARD_BPF_MAPS_H */
