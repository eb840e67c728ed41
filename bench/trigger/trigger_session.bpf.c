// SPDX-License-Identifier: GPL-2.0
/*
 * fsession programs for the trigger benchmark, in their own object: they need the 7.3
 * bpf_session_is_return(ctx) kfunc, whose 6.12 namesake takes no argument, and a
 * mismatched kfunc would keep the whole object from loading there. A session program
 * runs at entry and at return; it counts at entry, so one call counts once.
 */
#include <stdbool.h>
#include "trigger.bpf.h"

char _license[] SEC("license") = "GPL";

extern bool bpf_session_is_return(void *ctx) __ksym;

SEC("?fsession")
int BPF_PROG(on_fsession)
{
	if (!bpf_session_is_return(ctx))
		count_if_target(bpf_get_func_ip(ctx));
	return 0;
}

SEC("?fsession.multi")
int BPF_PROG(on_fsession_multi)
{
	if (!bpf_session_is_return(ctx))
		count_if_target(bpf_get_func_ip(ctx));
	return 0;
}
