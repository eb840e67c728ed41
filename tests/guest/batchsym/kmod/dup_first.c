// SPDX-License-Identifier: GPL-2.0
/*
 * The first of two static bpfmux_batchsym_mod_dup() in this module, linked first and
 * built without an ftrace hook: the lookup must skip it for the second one.
 */
#include <linux/compiler.h>

static noinline notrace int bpfmux_batchsym_mod_dup(int x)
{
	return x + 4;
}

int bpfmux_batchsym_dup_first_addr(int x);
int bpfmux_batchsym_dup_first_addr(int x)
{
	int (*volatile f)(int) = bpfmux_batchsym_mod_dup;

	return f(x);
}
