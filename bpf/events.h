/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Kernel <-> user-space records of gpuguard. Included by the BPF programs
 * (with vmlinux.h) and by agent/sensor* (with <linux/types.h>).
 *
 * ABI rules: fixed-width types, explicit padding, a size assert per struct.
 * Appending a field bumps GG_ABI_MINOR; reordering, resizing or removing one
 * bumps GG_ABI_MAJOR. The sensor refuses an object whose major differs.
 */
#ifndef GPUGUARD_BPF_EVENTS_H
#define GPUGUARD_BPF_EVENTS_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#ifdef __cplusplus
#define GG_STATIC_ASSERT static_assert
#else
#define GG_STATIC_ASSERT _Static_assert
#endif

#define GG_ABI_MAJOR 1
#define GG_ABI_MINOR 9

#define GG_COMM_LEN 16
/* Bounded copy of the path argument of open*(2), NUL included. */
#define GG_PATH_LEN 256

/* Compile-time cap of the argv copy of an exec (sensor.argv_max_bytes). */
#define GG_ARGV_MAX 4096

/* Map sizes shared by the programs and the loader. */
#define GG_MAX_GPU_DEVICES 256
#define GG_MAX_GPU_PROCESSES 16384 /* gpu_tgids: processes holding a GPU fd */
#define GG_MAX_IOCTL_STATS 65536   /* ioctl_stats: (tgid, device, cmd) aggregates */
#define GG_MAX_WATCHED_PORTS 1024
#define GG_MAX_KNOWN_BAD 4096	   /* known_bad_files, known_bad_names: kill_now targets */
#define GG_MAX_BLOCKED_ADDRS 16384 /* blocked_addrs: cgroup/connect fallback of block_ip */
#define GG_MAX_DENY_CGROUPS 1024   /* deny_cgroups: GPU denied by the LSM program */
#define GG_MAX_NET_WATCH 16384 /* net_watch_tgids: processes whose socket payloads are sampled */
/* Default sizes of the agent-fed watch lists (sensor.watch_processes_max, watch_addresses_max). */
#define GG_MAX_WATCHED_TGIDS 4096
#define GG_MAX_WATCHED_ADDRS 4096
/* watch_paths / watch_names: the file-change watch list (sensor.watch_files). */
#define GG_MAX_WATCH_PATHS 256
#define GG_MAX_WATCH_NAMES 64
#define GG_WATCH_PATH_LEN 128 /* bytes of a path compared with watch_paths */
#define GG_WATCH_NAME_LEN 32  /* bytes of a basename compared with watch_names */
/* GG_GPU_DEV_ANY_MINOR in a key's minor field matches every minor of a major. */
#define GG_GPU_DEV_ANY_MINOR 0xffffffffu

enum gg_event_type {
	GG_EVENT_GPU_OPEN = 1,
	GG_EVENT_GPU_IOCTL = 2, /* first GPU ioctl of a process; the rest are aggregated */
	GG_EVENT_CONNECT = 3,
	GG_EVENT_EXEC = 4,
	GG_EVENT_FORK = 5,
	GG_EVENT_EXIT = 6,
	GG_EVENT_KILL_NOW = 7,	   /* bpf_send_signal(SIGKILL) sent to a known-bad executable */
	GG_EVENT_NET_PAYLOAD = 8,  /* first bytes of socket traffic (bpf/payload.h) */
	GG_EVENT_FILE_CHANGE = 9,  /* a watched file changed (ABI 1.5) */
	GG_EVENT_MODULE_LOAD = 10, /* a kernel module was loaded (module:module_load), ABI 1.5 */
	GG_EVENT_AGENT_SIGNAL =
		11, /* another process signalled the agent (signal_generate), ABI 1.6 */
	GG_EVENT_BPF_COMMAND = 12, /* another process detached BPF programs (bpf(2)), ABI 1.6 */
	GG_EVENT_TYPE_MAX,	   /* size of per-type arrays */
};

/* Which system call a struct gg_gpu_open_event comes from. */
enum gg_open_syscall {
	GG_SYS_OPENAT = 0,
	GG_SYS_OPENAT2 = 1,
	GG_SYS_OPEN = 2,  /* legacy open(2), x86-64 and other pre-openat ABIs only */
	GG_SYS_CREAT = 3, /* creat(2), same */
};

/* Flags of struct gg_gpu_open_event. */
enum gg_gpu_open_flags {
	GG_OPEN_PATH_TRUNCATED = 1 << 0, /* path longer than GG_PATH_LEN - 1 bytes */
	GG_OPEN_PATH_MATCH = 1 << 1, /* failed open reported because the path names a GPU node */
};

/* Common header: every record on the ring buffer starts with it. */
struct gg_event_header {
	__u16 type;	 /* enum gg_event_type */
	__u16 abi_major; /* GG_ABI_MAJOR of the emitting object */
	__u32 size;	 /* bytes of the whole record, header included */
	__u64 ts_ns;	 /* CLOCK_MONOTONIC, bpf_ktime_get_ns() */
};
GG_STATIC_ASSERT(sizeof(struct gg_event_header) == 16, "gg_event_header ABI");

/* Identity of the calling task, filled in the kernel for every record. */
struct gg_task_info {
	__u32 tgid; /* user-space process id */
	__u32 pid;  /* user-space thread id */
	__u32 ppid; /* tgid of real_parent */
	__u32 uid;
	__u32 gid;
	__u32 _pad;
	__u64 cgroup_id; /* cgroup v2 id of the task (1 = root of the v2 hierarchy) */
	char comm[GG_COMM_LEN];
};
GG_STATIC_ASSERT(sizeof(struct gg_task_info) == 48, "gg_task_info ABI");

/*
 * One open of a GPU device node: either a successful open whose inode's
 * device number is in the gpu_devices map, or a failed open whose path names
 * a GPU node (/dev/nvidia*, /dev/dri/..., /dev/kfd, /dev/accel/...).
 */
struct gg_gpu_open_event {
	struct gg_event_header hdr;
	struct gg_task_info task;
	__u32 major; /* 0 for a failed open */
	__u32 minor;
	__s32 ret;	  /* fd on success, -errno on failure */
	__s32 dirfd;	  /* dfd argument (AT_FDCWD = -100) */
	__u64 open_flags; /* O_* flags as passed (creat(2): O_CREAT|O_WRONLY|O_TRUNC) */
	__u16 syscall;	  /* enum gg_open_syscall */
	__u16 flags;	  /* enum gg_gpu_open_flags */
	__u32 path_len;	  /* bytes in path including the NUL, 0 if unreadable */
	char path[GG_PATH_LEN];
};
GG_STATIC_ASSERT(sizeof(struct gg_gpu_open_event) == 16 + 48 + 32 + GG_PATH_LEN,
		 "gg_gpu_open_event ABI");

/* Key of the gpu_devices map: (major, minor) or (major, GG_GPU_DEV_ANY_MINOR). */
struct gg_gpu_dev_key {
	__u32 major;
	__u32 minor;
};
GG_STATIC_ASSERT(sizeof(struct gg_gpu_dev_key) == 8, "gg_gpu_dev_key ABI");

/* Value of the gpu_devices map. */
struct gg_gpu_dev_val {
	__u32 kind; /* free-form tag from user space (driver family) */
	__u32 _pad;
};
GG_STATIC_ASSERT(sizeof(struct gg_gpu_dev_val) == 8, "gg_gpu_dev_val ABI");

/*
 * First ioctl on a GPU fd by a process. Later ones only bump the in-kernel
 * aggregate (struct gg_ioctl_key -> struct gg_ioctl_stats), which the agent
 * reads periodically: no per-ioctl record crosses the ring buffer.
 */
struct gg_gpu_ioctl_event {
	struct gg_event_header hdr;
	struct gg_task_info task;
	__u32 major;
	__u32 minor;
	__s32 fd;
	__u32 cmd; /* full request number: _IOC-encoded for DRM/KFD/nvidia, plain for nvidia-uvm */
	__u64 arg;
};
GG_STATIC_ASSERT(sizeof(struct gg_gpu_ioctl_event) == 16 + 48 + 24, "gg_gpu_ioctl_event ABI");

/*
 * Aggregate key: keyed by the full cmd, not only _IOC type+nr, because
 * nvidia-uvm's request numbers are not _IOC-encoded (UVM_INITIALIZE is
 * 0x30000001) and would collide on type+nr.
 */
struct gg_ioctl_key {
	__u32 tgid;
	__u32 dev; /* kernel encoding: major << 20 | minor */
	__u32 cmd;
	__u32 _pad;
};
GG_STATIC_ASSERT(sizeof(struct gg_ioctl_key) == 16, "gg_ioctl_key ABI");

struct gg_ioctl_stats {
	__u64 count;
	__u64 first_ns; /* CLOCK_MONOTONIC of the first call */
	__u64 last_ns;	/* of the latest call */
};
GG_STATIC_ASSERT(sizeof(struct gg_ioctl_stats) == 24, "gg_ioctl_stats ABI");

/*
 * Value of gpu_tgids: a process that holds (or held) a GPU fd. The payload
 * programs count its sends on INET sockets here (ABI 1.3), and its
 * receives (ABI 1.8), so the agent reads a GPU process's network traffic
 * without a map of its own.
 */
struct gg_gpu_proc {
	__u64 since_ns; /* when it was first seen holding one; 0 when found by the bootstrap */
	__u32 flags;	/* enum gg_gpu_proc_flags */
	__u32 _pad;
	__u64 net_send_bytes; /* bytes sent on INET sockets since it was marked */
	__u64 net_sends;      /* send calls on INET sockets since it was marked */
	__u64 net_recv_bytes; /* bytes received on INET sockets since it was marked (ABI 1.8) */
	__u64 net_recvs;      /* receive calls returning data since it was marked (ABI 1.8) */
};
GG_STATIC_ASSERT(sizeof(struct gg_gpu_proc) == 48, "gg_gpu_proc ABI");

/* Value of watched_tgids: its traffic, counted as gg_gpu_proc counts a GPU process's. */
struct gg_watched_proc {
	__u64 net_send_bytes; /* bytes sent on INET sockets since it was watched */
	__u64 net_sends;      /* send calls on INET sockets since it was watched */
	__u64 net_recv_bytes; /* bytes received on INET sockets since it was watched (ABI 1.8) */
	__u64 net_recvs;      /* receive calls returning data since it was watched (ABI 1.8) */
};
GG_STATIC_ASSERT(sizeof(struct gg_watched_proc) == 32, "gg_watched_proc ABI");

enum gg_gpu_proc_flags {
	GG_PROC_IOCTL_REPORTED = 1 << 0, /* its first GPU ioctl was emitted */
	GG_PROC_INHERITED = 1 << 1,	 /* marked because its parent held a GPU fd at fork */
	GG_PROC_BOOTSTRAP = 1 << 2,	 /* marked by the agent's /proc scan at start */
	GG_PROC_HELD_GPU = 1u << 31,	 /* in gg_exit_event.flags: it was in gpu_tgids */
};

/* Flags of struct gg_connect_event: why it was reported, and the address form. */
enum gg_connect_flags {
	GG_CONNECT_GPU_HOLDER = 1 << 0,	  /* the process holds a GPU fd */
	GG_CONNECT_WATCHED_PORT = 1 << 1, /* the port is in watched_ports */
	GG_CONNECT_ALL = 1 << 2,	  /* reported because cfg_connect_all is on */
	GG_CONNECT_V4_MAPPED = 1 << 3,	  /* AF_INET6 socket, ::ffff:a.b.c.d address */
	GG_CONNECT_LOOPBACK = 1 << 4,	  /* destination is loopback */
	GG_CONNECT_WATCHED_TGID = 1 << 5, /* the process is in watched_tgids (ABI 1.4) */
	GG_CONNECT_WATCHED_ADDR = 1 << 6, /* the address is in watched_addrs (ABI 1.4) */
};

/*
 * Key of watched_addrs: an address as gg_connect_event.addr holds it. IPv4
 * in the first 4 bytes, the rest zero; a v4-mapped IPv6 destination is looked
 * up in that IPv4 form, so one entry covers both socket families.
 */
struct gg_watch_addr_key {
	__u8 addr[16];
};
GG_STATIC_ASSERT(sizeof(struct gg_watch_addr_key) == 16, "gg_watch_addr_key ABI");

/* Bits of net_watch_armed: which watch list holds entries (the agent keeps it in step). */
enum gg_net_watch_armed {
	GG_WATCH_ARMED_TGIDS = 1 << 0,
	GG_WATCH_ARMED_ADDRS = 1 << 1,
};

/* connect(2) of an AF_INET/AF_INET6 socket, with its result. */
struct gg_connect_event {
	struct gg_event_header hdr;
	struct gg_task_info task;
	__s32 fd;
	__s32 ret;     /* 0, -EINPROGRESS for non-blocking sockets, or -errno */
	__u16 family;  /* AF_INET (2) or AF_INET6 (10) */
	__u16 port;    /* destination port, host byte order */
	__u32 flags;   /* enum gg_connect_flags */
	__u8 addr[16]; /* network order; IPv4 in the first 4 bytes */
};
GG_STATIC_ASSERT(sizeof(struct gg_connect_event) == 16 + 48 + 32, "gg_connect_event ABI");

enum gg_exec_flags {
	GG_EXEC_ARGV_TRUNCATED = 1 << 0,     /* argv longer than cfg_argv_max */
	GG_EXEC_FILENAME_TRUNCATED = 1 << 1, /* filename longer than GG_PATH_LEN - 1 */
};

/*
 * A successful execve: variable length, hdr.size = offsetof(argv) +
 * argv_len. argv[] holds the arguments NUL-separated, as in
 * /proc/PID/cmdline, up to cfg_argv_max bytes.
 */
struct gg_exec_event {
	struct gg_event_header hdr;
	struct gg_task_info task; /* comm is the new one */
	__u32 old_pid; /* thread id that called execve (a non-leader thread is renamed) */
	__u32 argv_len;
	__u32 flags; /* enum gg_exec_flags */
	__u32 filename_len;
	char filename[GG_PATH_LEN]; /* as passed to execve, resolved by the kernel's bprm */
	char argv[GG_ARGV_MAX];
};
#define GG_EXEC_FIXED_SIZE (16 + 48 + 16 + GG_PATH_LEN)
GG_STATIC_ASSERT(sizeof(struct gg_exec_event) == GG_EXEC_FIXED_SIZE + GG_ARGV_MAX,
		 "gg_exec_event ABI");

/* A new process (not a thread): task is the parent. */
struct gg_fork_event {
	struct gg_event_header hdr;
	struct gg_task_info task;
	__u32 child_pid; /* tgid of the new process */
	__u32 flags;	 /* GG_PROC_INHERITED when the parent held a GPU fd */
	/* ABI 1.7: the child's task->start_boottime (ns), which /proc/PID/stat's
	 * starttime counts in clock ticks: who a pid named, when it is reused. */
	__u64 child_start_ns;
};
GG_STATIC_ASSERT(sizeof(struct gg_fork_event) == 16 + 48 + 16, "gg_fork_event ABI");

/* A process ended (its thread-group leader exited). */
struct gg_exit_event {
	struct gg_event_header hdr;
	struct gg_task_info task;
	__u32 exit_status; /* wait(2)-style status: exit code << 8 | terminating signal */
	__u32 flags;	   /* its gpu_tgids flags | GG_PROC_HELD_GPU, 0 if it never held a GPU */
};
GG_STATIC_ASSERT(sizeof(struct gg_exit_event) == 16 + 48 + 8, "gg_exit_event ABI");

/* Where the kernel killed a known-bad process (struct gg_kill_now_event.trigger). */
enum gg_kill_now_trigger {
	GG_KILL_AT_EXEC = 1,	  /* sched_process_exec: before its first instruction */
	GG_KILL_AT_GPU_OPEN = 2,  /* successful open of a GPU device node */
	GG_KILL_AT_GPU_IOCTL = 3, /* first ioctl on a GPU fd */
};

/* What matched (struct gg_kill_now_event.match). */
enum gg_kill_now_match {
	GG_KILL_MATCH_FILE = 1, /* the executable's (dev, ino) is in known_bad_files */
	GG_KILL_MATCH_NAME = 2, /* the task's comm is in known_bad_names */
};

/* Bits of the kill_now_armed global: which known-bad maps hold entries. */
enum gg_kill_now_armed {
	GG_KILL_ARMED_FILES = 1 << 0,
	GG_KILL_ARMED_NAMES = 1 << 1,
};

/* Key of known_bad_files: the executable's inode, as the kernel numbers it. */
struct gg_file_key {
	__u64 dev; /* super_block s_dev, kernel encoding: major << 20 | minor */
	__u64 ino;
};
GG_STATIC_ASSERT(sizeof(struct gg_file_key) == 16, "gg_file_key ABI");

/* Key of known_bad_names: the task's comm, NUL-padded to GG_COMM_LEN. */
struct gg_name_key {
	char comm[GG_COMM_LEN];
};
GG_STATIC_ASSERT(sizeof(struct gg_name_key) == 16, "gg_name_key ABI");

/* Value of known_bad_files and known_bad_names. */
struct gg_known_bad {
	__u32 rule_id; /* user-space tag (index of the registration), echoed in the event */
	__u32 _pad;
};
GG_STATIC_ASSERT(sizeof(struct gg_known_bad) == 8, "gg_known_bad ABI");

/*
 * The kernel sent SIGKILL to the calling process because its executable or
 * name is known-bad. The process dies on its way back to user space.
 */
struct gg_kill_now_event {
	struct gg_event_header hdr;
	struct gg_task_info task;
	__u32 trigger; /* enum gg_kill_now_trigger */
	__u32 match;   /* enum gg_kill_now_match */
	__u64 dev;     /* executable inode: s_dev (kernel encoding), 0 if unknown */
	__u64 ino;
	__u32 rule_id;	  /* from the matching map value */
	__s32 signal_ret; /* bpf_send_signal() result: 0, or -errno (-EBUSY, -EPERM) */
	__u32 major;	  /* GPU device for GPU triggers, else 0 */
	__u32 minor;
};
GG_STATIC_ASSERT(sizeof(struct gg_kill_now_event) == 16 + 48 + 40, "gg_kill_now_event ABI");

/* Key of blocked_addrs (cgroup/connect4/6): IPv6, or IPv4 as ::ffff:a.b.c.d. */
struct gg_addr_key {
	__u8 addr[16];
};
GG_STATIC_ASSERT(sizeof(struct gg_addr_key) == 16, "gg_addr_key ABI");

/* Value of blocked_addrs. */
struct gg_blocked_addr {
	__u64 expires_ns; /* CLOCK_MONOTONIC after which the entry no longer blocks; 0 = never */
};
GG_STATIC_ASSERT(sizeof(struct gg_blocked_addr) == 8, "gg_blocked_addr ABI");

/* Slots of the enforcement object's enforce_counters (per CPU, __u64 each). */
enum gg_enforce_counter {
	GG_DENIED_DEVICE = 0,	/* cgroup/dev refused a GPU device */
	GG_DENIED_CONNECT4 = 1, /* cgroup/connect4 refused a blocked address */
	GG_DENIED_CONNECT6 = 2, /* cgroup/connect6 refused a blocked address */
	GG_DENIED_LSM_OPEN = 3, /* lsm/file_open refused a GPU open */
	GG_DENIED_MAX,
};

/* The kernel's MODULE_NAME_LEN is 64 - sizeof(unsigned long): 56 on 64-bit. */
#define GG_MODULE_NAME_LEN 64

/*
 * A kernel module was loaded (tracepoint module:module_load, in load_module()
 * of the init_module(2)/finit_module(2) caller): task is the loader.
 */
struct gg_module_load_event {
	struct gg_event_header hdr;
	struct gg_task_info task;
	__u32 taints; /* the module's taint bits (TAINT_*: 1 << 12 out-of-tree, 1 << 13 unsigned) */
	__u32 name_len; /* bytes in name including the NUL, 0 if unreadable */
	char name[GG_MODULE_NAME_LEN];
};
GG_STATIC_ASSERT(sizeof(struct gg_module_load_event) == 16 + 48 + 8 + GG_MODULE_NAME_LEN,
		 "gg_module_load_event ABI");

/*
 * Another process generated a signal for the agent (tp_btf/signal_generate, ABI 1.6,
 * filtered in the kernel to cfg_ignore_tgid, the agent's own tgid): task is
 * the sender. Signals the agent sends itself and those the kernel generates
 * (si_code > 0: SIGCHLD of its children, faults, timers) are not reported.
 */
struct gg_agent_signal_event {
	struct gg_event_header hdr;
	struct gg_task_info task;
	__s32 sig;
	__s32 code;	   /* si_code: SI_USER (kill), SI_TKILL (tgkill), SI_QUEUE (sigqueue) */
	__s32 result;	   /* TRACE_SIGNAL_*: 0 delivered, 1 ignored, 2 already pending, ... */
	__u32 target_tgid; /* the agent */
	__u32 target_pid;  /* the agent's thread it was generated for */
	__u32 _pad;
};
GG_STATIC_ASSERT(sizeof(struct gg_agent_signal_event) == 16 + 48 + 24, "gg_agent_signal_event ABI");

/*
 * Another process than the agent called bpf(2) with BPF_LINK_DETACH or
 * BPF_LINK_UPDATE on one of the agent's links, or BPF_PROG_DETACH naming one
 * of its programs (at the call's exit, whatever the result): task is the
 * caller. The fd it passed is resolved in the kernel to the object's id and
 * looked up in agent_bpf_objects, which the agent fills with its own.
 */
struct gg_bpf_command_event {
	struct gg_event_header hdr;
	struct gg_task_info task;
	__u32 cmd;	   /* BPF_LINK_DETACH, BPF_LINK_UPDATE or BPF_PROG_DETACH */
	__s32 ret;	   /* 0 or -errno */
	__u32 fd;	   /* the link fd; prog detach: the program's fd (attach_bpf_fd) */
	__u32 attach_type; /* prog detach: attach_type; 0 for a link */
	__u32 agent_tgid;  /* the agent (cfg_ignore_tgid) */
	__u32 object_id;   /* the agent's link id (link commands) or program id */
};
GG_STATIC_ASSERT(sizeof(struct gg_bpf_command_event) == 16 + 48 + 24, "gg_bpf_command_event ABI");

/*
 * Value of the agent_kills map (key: the killed agent's tgid): the last
 * SIGKILL another process sent it. Pinned with the enforcement pins, so the
 * next agent names the killer of the previous one (ABI 1.6).
 */
/* Key of agent_bpf_objects: the agent's own links and programs by id. */
enum gg_bpf_object_kind {
	GG_BPF_OBJECT_LINK = 1,
	GG_BPF_OBJECT_PROG = 2,
};
struct gg_bpf_object_key {
	__u32 id;
	__u32 kind; /* enum gg_bpf_object_kind */
};

struct gg_agent_kill {
	struct gg_task_info sender;
	__s32 sig;
	__u32 _pad;
	__u64 ts_ns; /* CLOCK_MONOTONIC of the signal */
};
GG_STATIC_ASSERT(sizeof(struct gg_agent_kill) == 48 + 16, "gg_agent_kill ABI");

/* Which system call a struct gg_file_change_event comes from (the opens as gg_open_syscall). */
enum gg_file_syscall {
	GG_FILE_SYS_OPENAT = 0,
	GG_FILE_SYS_OPENAT2 = 1,
	GG_FILE_SYS_OPEN = 2,
	GG_FILE_SYS_CREAT = 3,
	GG_FILE_SYS_RENAME = 4,
	GG_FILE_SYS_RENAMEAT = 5,
	GG_FILE_SYS_RENAMEAT2 = 6,
	GG_FILE_SYS_UNLINK = 7,
	GG_FILE_SYS_UNLINKAT = 8,
};

/* Kind of watched path (value of watch_paths and watch_names). */
enum gg_file_category {
	GG_FILE_CAT_NONE = 0, /* not on the watch list: reported for a watched process */
	GG_FILE_CAT_PRELOAD = 1,
	GG_FILE_CAT_CRON = 2,
	GG_FILE_CAT_SYSTEMD = 3,
	GG_FILE_CAT_SHELL_RC = 4,
	GG_FILE_CAT_SSH_KEYS = 5,
	GG_FILE_CAT_AGENT_PINS = 6,
	GG_FILE_CAT_OTHER = 7, /* a user-given pattern without a kind */
	/* the agent's own configuration, rules, unit file and executable */
	GG_FILE_CAT_AGENT_CONFIG = 8,
};

/* Flags of struct gg_file_change_event. */
enum gg_file_change_flags {
	GG_FILE_PATH_TRUNCATED = 1 << 0, /* path longer than GG_PATH_LEN - 1 bytes */
	GG_FILE_WATCHED_TGID = 1 << 1,	 /* the process is in watched_tgids */
};

/*
 * Key of watch_paths (an LPM trie over path bytes): a directory prefix
 * ("/etc/cron.d/", prefixlen = 8 * its length) or a whole path with its NUL
 * ("/etc/ld.so.preload", prefixlen = 8 * (length + 1)).
 */
struct gg_watch_path_key {
	__u32 prefixlen; /* bits */
	char path[GG_WATCH_PATH_LEN];
};
GG_STATIC_ASSERT(sizeof(struct gg_watch_path_key) == 4 + GG_WATCH_PATH_LEN,
		 "gg_watch_path_key ABI");

/* Key of watch_names: a basename (".bashrc", "authorized_keys"), NUL-padded. */
struct gg_watch_name_key {
	char name[GG_WATCH_NAME_LEN];
};
GG_STATIC_ASSERT(sizeof(struct gg_watch_name_key) == GG_WATCH_NAME_LEN, "gg_watch_name_key ABI");

/*
 * A successful change of a watched file: an open for writing
 * (FMODE_WRITE: O_WRONLY/O_RDWR, which O_CREAT/O_TRUNC/O_APPEND writers
 * use), a rename onto it (the target path) or an unlink of it. Reported when
 * the path matches watch_paths (absolute paths) or watch_names (the
 * basename), or whatever the path when the process is in watched_tgids.
 */
struct gg_file_change_event {
	struct gg_event_header hdr;
	struct gg_task_info task;
	__s32 ret;	  /* the fd of an open, 0 for a rename or unlink */
	__s32 dirfd;	  /* dfd the path is relative to (AT_FDCWD = -100) */
	__u64 open_flags; /* O_* flags of an open, renameat2 flags, unlinkat flags */
	__u16 syscall;	  /* enum gg_file_syscall */
	__u16 flags;	  /* enum gg_file_change_flags */
	__u32 category;	  /* enum gg_file_category of the match */
	__u32 path_len;	  /* bytes in path including the NUL, 0 if unreadable */
	__u32 _pad;
	char path[GG_PATH_LEN]; /* as passed (a rename: the new path) */
};
GG_STATIC_ASSERT(sizeof(struct gg_file_change_event) == 16 + 48 + 32 + GG_PATH_LEN,
		 "gg_file_change_event ABI");

/* Per-CPU counters, indexed by enum gg_event_type. */
struct gg_counters {
	__u64 emitted; /* records submitted to the ring buffer */
	__u64 dropped; /* bpf_ringbuf_reserve() failed */
};
GG_STATIC_ASSERT(sizeof(struct gg_counters) == 16, "gg_counters ABI");

#endif /* GPUGUARD_BPF_EVENTS_H */
