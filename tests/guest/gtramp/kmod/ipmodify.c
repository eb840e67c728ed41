// SPDX-License-Identifier: GPL-2.0
/*
 * Test module for `gtramp ipmodify`: an IPMODIFY ftrace user on __x64_sys_getpgid, the way
 * livepatch redirects a function. Its handler sends every call to gtramp_getpgid(), which
 * returns GTRAMP_KMOD_RET instead of the process group.
 *
 * Parameters (/sys/module/gtramp_kmod/parameters/):
 *   tgid   (set at load) only calls from this process are counted; 0: every call
 *   calls  (read-only) calls of the replacement counted so far
 *
 * Loading fails with the errno of ftrace_set_filter() or register_ftrace_function(), e.g.
 * EBUSY when the function's ftrace site cannot be shared with an IPMODIFY user.
 */
#include <linux/atomic.h>
#include <linux/ftrace.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/ptrace.h>
#include <linux/sched.h>

#define GTRAMP_KMOD_RET 4242

static int tgid;
module_param(tgid, int, 0444);
MODULE_PARM_DESC(tgid, "count only this process's calls (0: all)");

static atomic_long_t calls = ATOMIC_LONG_INIT(0);

static int calls_get(char *buf, const struct kernel_param *kp)
{
	return sysfs_emit(buf, "%ld\n", atomic_long_read(&calls));
}

static const struct kernel_param_ops calls_ops = {
	.get = calls_get,
};
module_param_cb(calls, &calls_ops, NULL, 0444);
MODULE_PARM_DESC(calls, "calls of the replacement so far");

/* Entered instead of __x64_sys_getpgid(regs), with its caller's return address. */
static long gtramp_getpgid(const struct pt_regs *regs)
{
	if (!tgid || current->tgid == tgid)
		atomic_long_inc(&calls);
	return GTRAMP_KMOD_RET;
}

static void notrace gtramp_ipmodify(unsigned long ip, unsigned long parent_ip,
				    struct ftrace_ops *ops, struct ftrace_regs *fregs)
{
	ftrace_regs_set_instruction_pointer(fregs, (unsigned long)gtramp_getpgid);
}

static struct ftrace_ops gtramp_ops = {
	.func = gtramp_ipmodify,
	.flags = FTRACE_OPS_FL_SAVE_REGS | FTRACE_OPS_FL_IPMODIFY,
};

static int __init gtramp_kmod_init(void)
{
	static unsigned char name[] = "__x64_sys_getpgid";
	int err;

	err = ftrace_set_filter(&gtramp_ops, name, sizeof(name) - 1, 0);
	if (err) {
		pr_info("gtramp_kmod: ftrace_set_filter(%s): %d\n", name, err);
		return err;
	}
	err = register_ftrace_function(&gtramp_ops);
	if (err) {
		pr_info("gtramp_kmod: register_ftrace_function: %d\n", err);
		ftrace_free_filter(&gtramp_ops);
	}
	return err;
}

static void __exit gtramp_kmod_exit(void)
{
	unregister_ftrace_function(&gtramp_ops);
	ftrace_free_filter(&gtramp_ops);
}

module_init(gtramp_kmod_init);
module_exit(gtramp_kmod_exit);
MODULE_DESCRIPTION("bpfmux test: IPMODIFY ftrace user on __x64_sys_getpgid, like livepatch");
MODULE_LICENSE("GPL");
