// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Kernel module loads: the module:module_load tracepoint, which load_module()
 * fires in the task that called init_module(2)/finit_module(2) (modprobe,
 * insmod, or a rootkit's own loader) once the module is laid out and its
 * signature checked, before its init runs. Not a syscall hook: one program
 * serves every attachment mode. A kernel without CONFIG_MODULES has no such
 * tracepoint (and loads no module); the loader leaves the program out.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "common.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/*
 * The tracepoint's record as its format file gives it (events/module/
 * module_load/format), declared here because vmlinux.h of a kernel without
 * CONFIG_MODULES lacks trace_event_raw_module_load. The layout is the
 * tracepoint's ABI: the common header, then the fields in TP_STRUCT__entry
 * order.
 */
struct gg_module_load_ctx {
	__u64 common; /* common_type, common_flags, common_preempt_count, common_pid */
	__u32 taints;
	__u32 data_loc_name; /* __data_loc char[]: offset in the low 16 bits */
};

SEC("tracepoint/module/module_load")
int gg_module_load(struct gg_module_load_ctx *ctx)
{
	struct gg_module_load_event *e;
	__u32 loc = ctx->data_loc_name;
	long n;

	e = event__reserve(GG_EVENT_MODULE_LOAD, sizeof(*e));
	if (!e)
		return 0;
	task__fill(&e->task, bpf_get_current_task_btf());
	e->taints = ctx->taints;
	n = bpf_probe_read_kernel_str(e->name, sizeof(e->name), (void *)ctx + (loc & 0xFFFF));
	if (n < 0) {
		e->name[0] = '\0';
		n = 0;
	}
	e->name_len = (__u32)n;
	event__submit(e, GG_EVENT_MODULE_LOAD);
	return 0;
}
