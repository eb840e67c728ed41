// SPDX-License-Identifier: GPL-2.0
/* The second static bpfmux_batchsym_mod_dup() of this module: traceable, so it is the answer. */
#include <linux/compiler.h>

static noinline int bpfmux_batchsym_mod_dup(int x)
{
	return x + 5;
}

int bpfmux_batchsym_dup_second_addr(int x);
int bpfmux_batchsym_dup_second_addr(int x)
{
	int (*volatile f)(int) = bpfmux_batchsym_mod_dup;

	return f(x);
}
