// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_bench_lp_getpid - the kernel's own livepatch on getpid(2)
 *
 * The livepatch half of make bench's hot function (guest-bench.sh,
 * hot_guest): it replaces the function named by the parameter "func" --
 * the one that selftests/test_modules/kpatch_test_move.c's getpid patch
 * replaces, __do_sys_getpid if the kernel has it, else __x64_sys_getpid;
 * the guest looks it up in /proc/kallsyms, as kpatch's command needs its
 * address -- with kpatch_bench_lp_getpid_new(), the same body as
 * kpatch_test_move_getpid().  Both take no argument: the pt_regs pointer
 * that the replaced function gets is left unread.
 *
 * Loading the module enables the patch (klp_enable_patch()); it is live
 * once /sys/kernel/livepatch/kpatch_bench_lp_getpid/transition reads 0.
 * Writing 0 to .../enabled disables it; once that transition is over the
 * kernel frees the patch, and the module can go.  "calls" counts the calls
 * of the new function.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/kernel.h>
#include <linux/livepatch.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/pid.h>
#include <linux/sched.h>

static char *func = "__do_sys_getpid";
module_param(func, charp, 0444);
MODULE_PARM_DESC(func, "the getpid function to replace (default __do_sys_getpid)");

static atomic_long_t kpatch_bench_lp_calls = ATOMIC_LONG_INIT(0);

static int kpatch_bench_lp_calls_get(char *buffer, const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE, "%ld\n",
			 atomic_long_read(&kpatch_bench_lp_calls));
}

static const struct kernel_param_ops kpatch_bench_lp_calls_ops = {
	.get = kpatch_bench_lp_calls_get,
};
module_param_cb(calls, &kpatch_bench_lp_calls_ops, NULL, 0444);
MODULE_PARM_DESC(calls, "calls of the new getpid");

static noinline long kpatch_bench_lp_getpid_new(void)
{
	atomic_long_inc(&kpatch_bench_lp_calls);
	return task_tgid_vnr(current);
}

static struct klp_func kpatch_bench_lp_getpid_funcs[] = {
	{
		/* .old_name: "func", set at init */
		.new_func = kpatch_bench_lp_getpid_new,
	},
	{ }
};

static struct klp_object kpatch_bench_lp_getpid_objs[] = {
	{
		/* .name NULL: vmlinux */
		.funcs = kpatch_bench_lp_getpid_funcs,
	},
	{ }
};

static struct klp_patch kpatch_bench_lp_getpid_patch = {
	.mod = THIS_MODULE,
	.objs = kpatch_bench_lp_getpid_objs,
};

static int __init kpatch_bench_lp_getpid_init(void)
{
	kpatch_bench_lp_getpid_funcs[0].old_name = func;
	return klp_enable_patch(&kpatch_bench_lp_getpid_patch);
}

static void __exit kpatch_bench_lp_getpid_exit(void)
{
}

module_init(kpatch_bench_lp_getpid_init);
module_exit(kpatch_bench_lp_getpid_exit);
MODULE_DESCRIPTION("kpatch benchmark: livepatch of getpid(2)");
MODULE_LICENSE("GPL");
MODULE_INFO(livepatch, "Y");
