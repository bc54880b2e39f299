// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_bench_lp - the kernel's own livepatch on kpatch_bench_old()
 *
 * Loading this module redirects kpatch_bench_old() in kpatch_bench.ko to
 * kpatch_bench_lp_new() (returns x + 2) with klp_enable_patch(), for the
 * "livepatch" row of the call-cost table.  The patch is live once
 * /sys/kernel/livepatch/kpatch_bench_lp/transition reads 0; disable it by
 * writing 0 to .../enabled, wait for transition 0 again, then rmmod.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/compiler.h>
#include <linux/livepatch.h>
#include <linux/module.h>

static noinline int kpatch_bench_lp_new(int x)
{
	barrier();
	return x + 2;
}

static struct klp_func kpatch_bench_lp_funcs[] = {
	{
		.old_name = "kpatch_bench_old",
		.new_func = kpatch_bench_lp_new,
	},
	{ }
};

static struct klp_object kpatch_bench_lp_objs[] = {
	{
		.name = "kpatch_bench",
		.funcs = kpatch_bench_lp_funcs,
	},
	{ }
};

static struct klp_patch kpatch_bench_lp_patch = {
	.mod = THIS_MODULE,
	.objs = kpatch_bench_lp_objs,
};

static int __init kpatch_bench_lp_init(void)
{
	return klp_enable_patch(&kpatch_bench_lp_patch);
}

static void __exit kpatch_bench_lp_exit(void)
{
}

module_init(kpatch_bench_lp_init);
module_exit(kpatch_bench_lp_exit);
MODULE_DESCRIPTION("kpatch benchmark: livepatch of kpatch_bench_old()");
MODULE_LICENSE("GPL");
MODULE_INFO(livepatch, "Y");
