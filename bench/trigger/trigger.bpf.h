/* SPDX-License-Identifier: GPL-2.0 */
/* What every trigger benchmark object shares: the per-CPU counter and the target check. */
#ifndef BPFMUX_BENCH_TRIGGER_BPF_H
#define BPFMUX_BENCH_TRIGGER_BPF_H

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#define BATCH 100
#define INSN_CALLS 25	/* --insn: calls per counted driver run (and twice that) */
#define NR_SLOTS 64

/* Address of the target (kallsyms); the ftrace site may sit a few bytes in (endbr). */
const volatile __u64 target_ip;

/* One cache line per CPU so the CPUs never share a counter line. */
struct slot {
	__u64 value;
} __attribute__((aligned(128)));

struct slot hits[NR_SLOTS];

static __always_inline void count(void)
{
	__sync_fetch_and_add(&hits[bpf_get_smp_processor_id() & (NR_SLOTS - 1)].value, 1);
}

static __always_inline void count_if_target(__u64 ip)
{
	if (ip - target_ip < 16)
		count();
}

#endif
