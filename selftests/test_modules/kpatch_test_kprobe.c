// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_test_kprobe - a kprobe on the function named by "func", for the
 * kpatch selftests' ftrace IPMODIFY conflict tests.
 *
 * With post=1 (the default) the kprobe has a post_handler, so kprobes
 * arms it through an ftrace_ops with FTRACE_OPS_FL_IPMODIFY, which cannot
 * share a function with kpatch's redirection: whichever comes second is
 * refused with EBUSY.  Module init returns register_kprobe()'s error, so
 * insmod fails with EBUSY when kpatch already redirects the function.
 * With post=0 the kprobe only has a pre_handler and coexists with kpatch.
 * "hits" counts pre_handler calls.
 *
 * With offset=N the kprobe is not at the function's entry but N bytes
 * past its ENDBR (past its start where the kernel has no IBT): on an
 * instruction inside the function, where kprobes writes an INT3 over the
 * instruction's first byte (test-kprobed.sh).  With at=N it is N bytes
 * past the symbol's start, whether or not the symbol has an ENDBR: for a
 * piece of a function (a .part.N or .cold symbol), which has none.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/compiler.h>
#include <linux/kprobes.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <asm/ibt.h>

static char *func = "cmdline_proc_show";
module_param(func, charp, 0444);
MODULE_PARM_DESC(func, "symbol to probe (default cmdline_proc_show)");

static bool post = true;
module_param(post, bool, 0444);
MODULE_PARM_DESC(post, "give the kprobe a post_handler (default 1)");

static int offset = -1;
module_param(offset, int, 0444);
MODULE_PARM_DESC(offset, "-1: probe the function's entry (default); N: N bytes past its ENDBR");

static int at = -1;
module_param(at, int, 0444);
MODULE_PARM_DESC(at, "-1: see offset (default); N: N bytes past the symbol's start");

static unsigned long hits;
module_param(hits, ulong, 0444);
MODULE_PARM_DESC(hits, "number of pre_handler calls");

static int kpatch_test_kprobe_pre(struct kprobe *p, struct pt_regs *regs)
{
	WRITE_ONCE(hits, READ_ONCE(hits) + 1);
	return 0;
}

static void kpatch_test_kprobe_post(struct kprobe *p, struct pt_regs *regs,
				    unsigned long flags)
{
}

static struct kprobe kpatch_test_kp = {
	.pre_handler = kpatch_test_kprobe_pre,
};

static int __init kpatch_test_kprobe_init(void)
{
	int ret;

	kpatch_test_kp.symbol_name = func;
	if (offset >= 0)
		kpatch_test_kp.offset = ENDBR_INSN_SIZE + offset;
	if (at >= 0)
		kpatch_test_kp.offset = at;
	if (post)
		kpatch_test_kp.post_handler = kpatch_test_kprobe_post;

	ret = register_kprobe(&kpatch_test_kp);
	if (ret) {
		pr_info("register_kprobe(%s) failed: %d\n", func, ret);
		return ret;
	}
	return 0;
}

static void __exit kpatch_test_kprobe_exit(void)
{
	unregister_kprobe(&kpatch_test_kp);
}

module_init(kpatch_test_kprobe_init);
module_exit(kpatch_test_kprobe_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kpatch selftest: kprobe for ftrace IPMODIFY conflicts");
