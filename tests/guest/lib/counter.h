/* SPDX-License-Identifier: GPL-2.0 */
/* Loading smoke.bpf.o (call counters keyed by function address) and reading it back. */
#ifndef BPFMUX_TEST_COUNTER_H
#define BPFMUX_TEST_COUNTER_H

#include <linux/types.h>

struct bpf_object;
struct bpf_program;

/*
 * Open the object at @path (smoke.bpf.o) with only @prog_name enabled, count only process @tgid_filter
 * (0: every process), load it. Returns NULL with a message on stderr on failure.
 */
struct bpf_object *counter_load(const char *path, const char *prog_name, __u32 tgid_filter,
				 struct bpf_program **prog);

/* Calls counted for the function at @addr (programs may see addr or addr + endbr). */
__u64 counter_hits(struct bpf_object *obj, unsigned long addr);

#endif
