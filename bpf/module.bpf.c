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
 * The fields of struct module the record takes, relocated against the
 * running kernel's BTF (CO-RE): a kernel without CONFIG_MODULES, whose
 * vmlinux.h lacks the struct, never loads this program.
 */
struct module___gg {
	char name[56];
	unsigned long taints;
} __attribute__((preserve_access_index));

/* TP_PROTO(struct module *mod), as tp_btf: attached with bpf(2) alone (a
 * classic tracepoint needs perf_event_open(2), which Debian's kernels
 * refuse without CAP_SYS_ADMIN). */
SEC("tp_btf/module_load")
int BPF_PROG(gg_module_load, struct module___gg *mod)
{
	struct gg_module_load_event *e;
	long n;

	e = event__reserve(GG_EVENT_MODULE_LOAD, sizeof(*e));
	if (!e)
		return 0;
	task__fill(&e->task, bpf_get_current_task_btf());
	e->taints = (__u32)BPF_CORE_READ(mod, taints);
	n = bpf_probe_read_kernel_str(e->name, sizeof(e->name), mod->name);
	if (n < 0) {
		e->name[0] = '\0';
		n = 0;
	}
	e->name_len = (__u32)n;
	event__submit(e, GG_EVENT_MODULE_LOAD);
	return 0;
}
