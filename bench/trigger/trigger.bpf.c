// SPDX-License-Identifier: GPL-2.0
/*
 * bench_trigger-style programs: a raw_tp driver that calls the target kernel function
 * BATCH times per BPF_PROG_TEST_RUN, and one program per attach mechanism that bumps a
 * per-CPU counter when the target runs. Every tracing program makes the same
 * bpf_get_func_ip() check, so a program attached to many functions counts only the
 * target's calls and the rows differ only in the attach mechanism.
 *
 * The target is bpf_modify_return_test_tp(): a kfunc (so the driver can call it), with an
 * ftrace site, allowed for fmod_ret, and it fires the bpf_trigger_tp tracepoint, so the
 * tp and raw_tp rows count the very same calls.
 */
#include "trigger.bpf.h"

char _license[] SEC("license") = "GPL";

extern int bpf_modify_return_test_tp(int nonce) __ksym;

/* The driver: the producer thread test-runs this in a loop. */
SEC("?raw_tp")
int driver(void *ctx)
{
	for (int i = 0; i < BATCH; i++)
		bpf_modify_return_test_tp(0);
	return 0;
}

/*
 * --long-runs: the driver making BATCH × BATCH calls per test run. Each run also goes
 * through the bpf() syscall, whose kernel functions an -all row traces too: one run per
 * 100 calls puts those hooks into every call's time, one per 10,000 calls (almost) not.
 */
SEC("?raw_tp")
int driver_long(void *ctx)
{
	for (int i = 0; i < BATCH; i++)
		for (int j = 0; j < BATCH; j++)
			bpf_modify_return_test_tp(0);
	return 0;
}

/*
 * --insn: drivers making INSN_CALLS and 2 × INSN_CALLS calls. Windows around one run of
 * each differ only in INSN_CALLS target calls: the syscall path (and the hooks an -all
 * row puts on the functions along it) cancels. Fewer calls than BATCH keep the windows
 * short, so fewer of them catch a timer tick. Constant loops: the verifier rejects a loop
 * bounded by a variable this long.
 */
SEC("?raw_tp")
int insn_driver(void *ctx)
{
	/* the same loop in both, not unrolled: their difference is INSN_CALLS iterations */
#pragma clang loop unroll(disable)
	for (int i = 0; i < INSN_CALLS; i++)
		bpf_modify_return_test_tp(0);
	return 0;
}

SEC("?raw_tp")
int insn_driver2(void *ctx)
{
#pragma clang loop unroll(disable)
	for (int i = 0; i < 2 * INSN_CALLS; i++)
		bpf_modify_return_test_tp(0);
	return 0;
}

/* kernel-count baseline: the driver's loop counting in place, nothing attached. */
SEC("?raw_tp")
int kernel_count(void *ctx)
{
	for (int i = 0; i < BATCH; i++) {
		count();
		bpf_modify_return_test_tp(0);
	}
	return 0;
}

SEC("?fentry")
int BPF_PROG(on_fentry)
{
	count_if_target(bpf_get_func_ip(ctx));
	return 0;
}

SEC("?fexit")
int BPF_PROG(on_fexit)
{
	count_if_target(bpf_get_func_ip(ctx));
	return 0;
}

/* Like the upstream bench: a non-zero return skips the target's body. */
SEC("?fmod_ret")
int BPF_PROG(on_fmodret)
{
	count_if_target(bpf_get_func_ip(ctx));
	return -22;
}

SEC("?fentry.multi")
int BPF_PROG(on_fentry_multi)
{
	count_if_target(bpf_get_func_ip(ctx));
	return 0;
}

SEC("?fexit.multi")
int BPF_PROG(on_fexit_multi)
{
	count_if_target(bpf_get_func_ip(ctx));
	return 0;
}

/*
 * fmod_ret.multi (the series' BPF_MODIFY_RETURN_MULTI): loaded from this section with
 * the attach type switched at run time, so the object also loads with a libbpf that
 * does not know the new section name. Returns what on_fmodret returns.
 */
SEC("?fentry.multi")
int BPF_PROG(on_fmodret_multi)
{
	count_if_target(bpf_get_func_ip(ctx));
	return -22;
}

SEC("?raw_tp/bpf_trigger_tp")
int on_rawtp(void *ctx)
{
	count();
	return 0;
}

SEC("?tp/bpf_test_run/bpf_trigger_tp")
int on_tp(void *ctx)
{
	count();
	return 0;
}

SEC("?kprobe")
int on_kprobe(struct pt_regs *ctx)
{
	count_if_target(bpf_get_func_ip(ctx));
	return 0;
}

SEC("?kretprobe")
int on_kretprobe(struct pt_regs *ctx)
{
	count_if_target(bpf_get_func_ip(ctx));
	return 0;
}

SEC("?kprobe.multi")
int on_kprobe_multi(struct pt_regs *ctx)
{
	count_if_target(bpf_get_func_ip(ctx));
	return 0;
}

SEC("?kretprobe.multi")
int on_kretprobe_multi(struct pt_regs *ctx)
{
	count_if_target(bpf_get_func_ip(ctx));
	return 0;
}
