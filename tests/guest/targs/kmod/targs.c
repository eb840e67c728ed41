// SPDX-License-Identifier: GPL-2.0
/*
 * Test module for `check.py args-types` (bpfmux trace --args): traceable functions with
 * known prototypes, called with known values each time a process writes to
 * /proc/bpfmux_targs. One write calls, in this order:
 *
 *   bpfmux_targs_nine(-1, 4000000000, -5000000000, 0xfedcba9876543210, -7, 200,
 *                     -123456789012, -9, 0x1122334455667788)       returns -EINVAL
 *       nine scalar arguments of every size and sign, the last three on the stack
 *   bpfmux_targs_strings(TARGS_KSTR, BUF, TARGS_MODE_B, true, targs_cb, NULL,
 *                        bpfmux_targs_nine)                          returns -ENOENT
 *       a kernel string, the writer's buffer as a user string, an enum, a bool, a function
 *       pointer, NULL and a kernel text address (the 7th argument: on the stack)
 *   bpfmux_targs_long(TARGS_LONG)                                    returns 100
 *       a kernel string of 100 characters, longer than the default bound of 64
 *   bpfmux_targs_pair({ 0x11, 0x22 }, 5)                             returns 0x33
 *       a 16-byte struct passed by value (two slots), then an int
 *   bpfmux_targs_errptr(0), bpfmux_targs_errptr(1)    return ERR_PTR(-EINVAL), NULL
 *   bpfmux_targs_struct(&OUTER, "alpha"), (&OUTER, "alpha-2"), (&OUTER, "beta")
 *                                                    return 43, 43, 42
 *       a pointer to a struct (for --args-depth) whose fields are known, among them a
 *       pointer to another struct, and a kernel string (for string filters): OUTER is
 *       { a = -5, b = 7, mode = TARGS_MODE_B, inner = &{ id = 42, tag = "inner" },
 *         pair = { 0x11, 0x22 }, flags = 5, more = -15 } (two bitfields)
 *
 * The writer's buffer must end in a NUL (write the terminating byte too): the function
 * reads it as a string. Each function is called through a volatile pointer, so the
 * compiler neither inlines it nor calls a specialised copy under another name.
 */
#include <linux/err.h>
#include <linux/module.h>
#include <linux/proc_fs.h>

#define TARGS_KSTR "kernel string"
#define TARGS_LONG                                                                         \
	"0123456789abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789" \
	"-_-_-_-_-_-_-_-_-_"

enum targs_mode {
	TARGS_MODE_A = 1,
	TARGS_MODE_B = 7,
	TARGS_MODE_NEG = -3,
};

struct targs_pair {
	long a;
	long b;
};

struct targs_inner {
	int id;
	char tag[8];
};

/* 48 bytes: a 0, b 8, mode 12, inner 16, pair 24, flags and more in the word at 40 */
struct targs_outer {
	long a;
	unsigned short b;
	enum targs_mode mode;
	struct targs_inner *inner;
	struct targs_pair pair;
	unsigned int flags : 3;
	int more : 5;
};

static noinline int targs_cb(int x)
{
	return x + 1;
}

static noinline long bpfmux_targs_nine(int a, unsigned int b, long c, unsigned long d,
				       short e, unsigned char f, long g, int h, unsigned long i)
{
	/* every argument used, so none is dropped from the prototype */
	if (a + b + c + d + e + f + g + h + i == 42)
		return 42;
	return -EINVAL;
}

static noinline int bpfmux_targs_strings(const char *kname, const char __user *uname,
					 enum targs_mode mode, bool flag, int (*cb)(int),
					 void *nothing, unsigned long ip)
{
	if (!kname || !uname || mode == TARGS_MODE_NEG || !flag || !cb || nothing || !ip)
		return -EFAULT;
	return -ENOENT;
}

static noinline int bpfmux_targs_long(const char *s)
{
	return strlen(s);
}

static noinline long bpfmux_targs_pair(struct targs_pair p, int after)
{
	return after == 5 ? p.a + p.b : 0;
}

static noinline void *bpfmux_targs_errptr(int null)
{
	return null ? NULL : ERR_PTR(-EINVAL);
}

static noinline int bpfmux_targs_struct(struct targs_outer *o, const char *name)
{
	return o->inner->id + (name[0] == 'a');
}

static long (*volatile nine)(int, unsigned int, long, unsigned long, short, unsigned char, long,
			     int, unsigned long) = bpfmux_targs_nine;
static int (*volatile strings)(const char *, const char __user *, enum targs_mode, bool,
			       int (*)(int), void *, unsigned long) = bpfmux_targs_strings;
static int (*volatile long_string)(const char *) = bpfmux_targs_long;
static long (*volatile pair)(struct targs_pair, int) = bpfmux_targs_pair;
static void *(*volatile errptr)(int) = bpfmux_targs_errptr;
static int (*volatile structs)(struct targs_outer *, const char *) = bpfmux_targs_struct;
static int (*volatile cb_fn)(int) = targs_cb;

static ssize_t targs_write(struct file *file, const char __user *buf, size_t len, loff_t *pos)
{
	struct targs_pair p = { 0x11, 0x22 };
	struct targs_inner in = { .id = 42, .tag = "inner" };
	struct targs_outer out = {
		.a = -5, .b = 7, .mode = TARGS_MODE_B, .inner = &in, .pair = { 0x11, 0x22 },
		.flags = 5, .more = -15,
	};

	nine(-1, 4000000000U, -5000000000L, 0xfedcba9876543210UL, -7, 200, -123456789012L, -9,
	     0x1122334455667788UL);
	strings(TARGS_KSTR, buf, TARGS_MODE_B, true, cb_fn, NULL, (unsigned long)nine);
	long_string(TARGS_LONG);
	pair(p, 5);
	errptr(0);
	errptr(1);
	structs(&out, "alpha");
	structs(&out, "alpha-2");
	structs(&out, "beta");
	return len;
}

static const struct proc_ops targs_ops = {
	.proc_write = targs_write,
};

static struct proc_dir_entry *targs_entry;

static int __init targs_init(void)
{
	targs_entry = proc_create("bpfmux_targs", 0222, NULL, &targs_ops);
	return targs_entry ? 0 : -ENOMEM;
}

static void __exit targs_exit(void)
{
	proc_remove(targs_entry);
}

module_init(targs_init);
module_exit(targs_exit);
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("bpfmux test: functions with known arguments for trace --args");
