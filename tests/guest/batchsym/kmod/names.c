// SPDX-License-Identifier: GPL-2.0
/*
 * Test module for the batchsym guest test: functions whose names send kprobe.multi's
 * lookup by name past vmlinux into a module's symbols, each case with a known answer.
 * Every function has its address taken so the compiler neither drops, inlines nor
 * clones it under another name.
 */
#include <linux/module.h>

/* Only this module has this name: found by the module pass alone. */
static noinline int bpfmux_batchsym_mod_only(int x)
{
	return x + 1;
}

/*
 * vmlinux has a static ftrace_cmp_recs() in kernel/trace/, which is built without ftrace
 * hooks: only this copy is traceable, so the lookup must pass over vmlinux's.
 */
static noinline int ftrace_cmp_recs(int x)
{
	return x + 2;
}

/* vmlinux has a traceable static version_proc_show(): it must win over this copy. */
static noinline int version_proc_show(int x)
{
	return x + 3;
}

int bpfmux_batchsym_dup_first_addr(int x);
int bpfmux_batchsym_dup_second_addr(int x);

static int (*const batchsym_funcs[])(int) __used = {
	bpfmux_batchsym_mod_only, ftrace_cmp_recs, version_proc_show,
};

static int __init batchsym_kmod_init(void)
{
	int x = 0;

	for (int i = 0; i < ARRAY_SIZE(batchsym_funcs); i++)
		x += batchsym_funcs[i](i);
	x += bpfmux_batchsym_dup_first_addr(x) + bpfmux_batchsym_dup_second_addr(x);
	pr_debug("batchsym_kmod: loaded (%d)\n", x);
	return 0;
}

static void __exit batchsym_kmod_exit(void)
{
}

module_init(batchsym_kmod_init);
module_exit(batchsym_kmod_exit);
MODULE_DESCRIPTION("bpfmux test: module symbols for kprobe.multi lookup by name");
MODULE_LICENSE("GPL");
