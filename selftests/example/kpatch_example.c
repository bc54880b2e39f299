// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_example - a complete patch module: the example of Documentation.txt,
 * "Writing a patch module".
 *
 * It replaces cmdline_proc_show(), the kernel function that prints
 * /proc/cmdline, with kpatch_example_cmdline_show().  While the patch is
 * enabled, /proc/cmdline reads "kpatch example: cmdline_proc_show() replaced".
 *
 * cmdline_proc_show() is static in vmlinux: no module can name it, so its
 * address comes from /proc/kallsyms, read as root, in a module parameter:
 *
 *   modprobe kpatch
 *   insmod kpatch_example.ko \
 *       old_addr=$(awk '$3 == "cmdline_proc_show" { print $1 }' /proc/kallsyms)
 *   cat /proc/cmdline
 *   echo unpatch kpatch_example > /sys/kernel/debug/kpatch/control
 *   rmmod kpatch_example
 *
 * Build it with `make` against an installed kpatch (see Makefile).
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/seq_file.h>
#include <linux/string.h>

#include "kpatch.h"

/*
 * Where cmdline_proc_show() starts in this boot: KASLR moves it at every
 * boot, so it cannot be compiled in.  /proc/kallsyms prints it in hex
 * without "0x".  A plain ulong parameter, module_param(old_addr, ulong, 0),
 * would read that as a decimal number and refuse it (it needs the "0x");
 * this one reads hex, with or without "0x".
 */
static unsigned long old_addr;

static int old_addr_set(const char *val, const struct kernel_param *kp)
{
	return kstrtoul(val, 16, kp->arg);
}

static const struct kernel_param_ops old_addr_ops = {
	.set = old_addr_set,
};

module_param_cb(old_addr, &old_addr_ops, &old_addr, 0);
MODULE_PARM_DESC(old_addr,
		 "address of cmdline_proc_show in /proc/kallsyms (hex, 0x optional)");

/*
 * The new function.  It must have exactly the prototype of the old one
 * (kpatch cannot check that), and it can only use what a module can link
 * against: exported symbols, like seq_puts() here, or addresses it is given.
 *
 * noinline: kpatch sends every call of the old function to new_addr, and
 * takes the new function's size from kallsyms to know which return
 * addresses on a stack are inside it.  Taking its address below already
 * makes the compiler emit it out of line, but without noinline GCC may
 * still inline it into other callers in this module, or split it into an
 * inlinable head and a foo.part.N tail (partial inlining), which kallsyms
 * counts as another function.  noinline keeps all of it in the one symbol
 * that the patches file names.
 */
static noinline int kpatch_example_cmdline_show(struct seq_file *m, void *v)
{
	seq_puts(m, "kpatch example: cmdline_proc_show() replaced\n");
	return 0;
}

static struct kpatch_func kpatch_example_funcs[] = {
	{
		.new_addr = (unsigned long)kpatch_example_cmdline_show,
		/* .old_addr: from the parameter, in kpatch_example_init() */
	},
};

/* The patch is named after the module: "kpatch_example". */
static struct kpatch_module kpatch_example_kpmod = {
	.mod = THIS_MODULE,
	.funcs = kpatch_example_funcs,
	.num_funcs = ARRAY_SIZE(kpatch_example_funcs),
};

static int __init kpatch_example_init(void)
{
	char name[32];
	int ret;

	if (!old_addr) {
		pr_err("old_addr=<address of cmdline_proc_show in /proc/kallsyms> is required\n");
		return -EINVAL;
	}
	/*
	 * kpatch checks that old_addr is the start of a function ftrace can
	 * trace, but not which function: calls of any other function would
	 * land in a function of the wrong prototype.  So refuse anything but
	 * the one this patch was written for.
	 */
	snprintf(name, sizeof(name), "%ps", (void *)old_addr);
	if (strcmp(name, "cmdline_proc_show")) {
		pr_err("old_addr=%lx is %ps, not cmdline_proc_show\n",
		       old_addr, (void *)old_addr);
		return -EINVAL;
	}
	kpatch_example_funcs[0].old_addr = old_addr;

	/* false: leave other enabled patches alone (true replaces them) */
	ret = kpatch_register(&kpatch_example_kpmod, false);
	if (ret)
		pr_err("kpatch_register() failed: %d\n", ret);
	return ret;
}

static void __exit kpatch_example_exit(void)
{
	int ret;

	/*
	 * kpatch holds a reference on this module while its patch is
	 * enabled, so rmmod gets here once the patch is gone: removed with
	 * "unpatch kpatch_example", or by a later patch that replaced it.
	 * kpatch_unregister() of a patch that is not enabled fails, so
	 * unregister only if it is still enabled.
	 */
	if (!kpatch_example_kpmod.enabled)
		return;
	ret = kpatch_unregister(&kpatch_example_kpmod);
	if (ret)
		pr_err("kpatch_unregister() failed: %d\n", ret);
}

module_init(kpatch_example_init);
module_exit(kpatch_example_exit);

/* kpatch_register() and kpatch_unregister() are exported GPL-only */
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kpatch example: a patch module that replaces cmdline_proc_show()");
