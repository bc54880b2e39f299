// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_bench_lp_move - the kernel's own livepatch on the read of
 * kpatch_test_move
 *
 * The livepatch half of make bench's busy tasks and many tasks
 * (guest-bench.sh): it replaces kpatch_test_move_read_old() in
 * kpatch_test_move.ko (selftests/test_modules/kpatch_test_move.c) with the
 * function at the address "new_addr", which the guest takes from
 * /proc/kallsyms: kpatch_test_move_read_new(), the same new function as
 * kpatch's patch of that read, so that a reader waits in it, and answers,
 * as under kpatch.
 *
 * Loading the module enables the patch (klp_enable_patch()); it is live
 * once /sys/kernel/livepatch/kpatch_bench_lp_move/transition reads 0.
 * Writing 0 to .../enabled disables it; once that transition is over the
 * kernel frees the patch, and the module can go.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/livepatch.h>
#include <linux/module.h>
#include <linux/moduleparam.h>

static unsigned long new_addr;
module_param(new_addr, ulong, 0444);
MODULE_PARM_DESC(new_addr, "address of kpatch_test_move_read_new() (from /proc/kallsyms)");

static struct klp_func kpatch_bench_lp_move_funcs[] = {
	{
		.old_name = "kpatch_test_move_read_old",
		/* .new_func: "new_addr", set at init */
	},
	{ }
};

static struct klp_object kpatch_bench_lp_move_objs[] = {
	{
		.name = "kpatch_test_move",
		.funcs = kpatch_bench_lp_move_funcs,
	},
	{ }
};

static struct klp_patch kpatch_bench_lp_move_patch = {
	.mod = THIS_MODULE,
	.objs = kpatch_bench_lp_move_objs,
};

static int __init kpatch_bench_lp_move_init(void)
{
	if (!new_addr)
		return -EINVAL;
	kpatch_bench_lp_move_funcs[0].new_func = (void *)new_addr;
	return klp_enable_patch(&kpatch_bench_lp_move_patch);
}

static void __exit kpatch_bench_lp_move_exit(void)
{
}

module_init(kpatch_bench_lp_move_init);
module_exit(kpatch_bench_lp_move_exit);
MODULE_DESCRIPTION("kpatch benchmark: livepatch of kpatch_test_move's read");
MODULE_LICENSE("GPL");
MODULE_INFO(livepatch, "Y");
