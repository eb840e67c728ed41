// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * bpfmux's XDP dispatcher: one XDP program that calls up to
 * BPFMUX_XDP_SLOTS global functions in order. Each used slot is replaced at
 * run time by a user program loaded as BPF_PROG_TYPE_EXT (freplace), so the
 * user programs run as if attached directly, one after the other.
 *
 * After slot i returns action a, slot i+1 runs iff bit a of chain_on[i] is
 * set; otherwise a is the verdict. The configuration is read-only data,
 * frozen before load, so the verifier prunes every unused slot and every
 * impossible branch: a set of N programs costs N calls and N tests.
 *
 * A new set never edits a running dispatcher: userspace loads a new one with
 * the new configuration, attaches the programs to it, and swaps it in with
 * one bpf_link update, so a packet sees either the old set or the new one.
 */
#include "bpfmux_types.h"
#include <bpf/bpf_helpers.h>

/* Keep in sync with SLOTS in dispatcher.rs. */
#define BPFMUX_XDP_SLOTS 16

struct bpfmux_xdp_dispatcher_cfg {
	__u32 nr_slots;
	/* bit a set: continue with the next slot after action a */
	__u32 chain_on[BPFMUX_XDP_SLOTS];
};

const volatile struct bpfmux_xdp_dispatcher_cfg cfg = {};

/*
 * The replaceable slots. They must be global (freplace needs a BTF FUNC with
 * global linkage), noinline and opaque: the volatile keeps clang from
 * folding the return value into the caller. A slot that was never replaced
 * is never called (nr_slots stops before it); if it were, it would pass.
 */
#define BPFMUX_SLOT(n)                                                   \
	__attribute__((noinline)) int bpfmux_slot##n(struct xdp_md *ctx) \
	{                                                                \
		volatile int ret = XDP_PASS;                             \
									 \
		if (!ctx)                                                \
			return XDP_ABORTED;                              \
		return ret;                                              \
	}

BPFMUX_SLOT(0)
BPFMUX_SLOT(1)
BPFMUX_SLOT(2)
BPFMUX_SLOT(3)
BPFMUX_SLOT(4)
BPFMUX_SLOT(5)
BPFMUX_SLOT(6)
BPFMUX_SLOT(7)
BPFMUX_SLOT(8)
BPFMUX_SLOT(9)
BPFMUX_SLOT(10)
BPFMUX_SLOT(11)
BPFMUX_SLOT(12)
BPFMUX_SLOT(13)
BPFMUX_SLOT(14)
BPFMUX_SLOT(15)

/* Actions outside 0..31 never chain (and the shift stays defined). */
static __always_inline int chains(int ret, __u32 mask)
{
	return ret >= 0 && ret < 32 && ((1U << ret) & mask);
}

/* Run slot n if the set has it; return unless its action chains on. */
#define BPFMUX_RUN(n)                                           \
	do {                                                    \
		if (cfg.nr_slots <= n)                          \
			return ret;                             \
		ret = bpfmux_slot##n(ctx);                      \
		if (!chains(ret, cfg.chain_on[n]))              \
			return ret;                             \
	} while (0)

SEC("xdp")
int bpfmux_xdp_dispatcher(struct xdp_md *ctx)
{
	/* An empty set passes everything (never attached by bpfmux). */
	int ret = XDP_PASS;

	BPFMUX_RUN(0);
	BPFMUX_RUN(1);
	BPFMUX_RUN(2);
	BPFMUX_RUN(3);
	BPFMUX_RUN(4);
	BPFMUX_RUN(5);
	BPFMUX_RUN(6);
	BPFMUX_RUN(7);
	BPFMUX_RUN(8);
	BPFMUX_RUN(9);
	BPFMUX_RUN(10);
	BPFMUX_RUN(11);
	BPFMUX_RUN(12);
	BPFMUX_RUN(13);
	BPFMUX_RUN(14);
	BPFMUX_RUN(15);
	return ret;
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
