// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_test_coming - a module that takes its time in its init, for the
 * kpatch selftests of modules that are still coming (test-modstate.sh).
 *
 * Its init sleeps until 1 or 2 is written to the "go" parameter (the
 * parameters of a module are in sysfs while its init runs): with 1 the
 * init returns 0 and the module goes live, with 2 (or any other value) it
 * returns -EINVAL and the module is freed again.  "loading" reads 1 while
 * the init waits.  Meanwhile the module is in MODULE_STATE_COMING: its
 * functions are in /proc/kallsyms and its text is mapped, but it may yet
 * fail and vanish, so a patch command naming kpatch_test_coming_fn() as
 * old or as new function must be refused and change nothing.  As an
 * insmod argument, go=1 loads the module at once.  After max_wait_s
 * seconds without a go the init gives up (-ETIMEDOUT).
 *
 * kpatch_test_coming_fn() has the prototype of kpatch_test_target's value
 * functions and returns 41; reading the "value" parameter calls it, so
 * once the module is live the shell sees whether a patch of it runs.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/compiler.h>
#include <linux/delay.h>
#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>

#include "kpatch_test.h"

static int go;
module_param(go, int, 0644);
MODULE_PARM_DESC(go, "0 init waits, 1 init succeeds, 2 init fails with -EINVAL");

static int loading;
module_param(loading, int, 0444);
MODULE_PARM_DESC(loading, "1 while the init waits for go");

static unsigned int max_wait_s = 120;
module_param(max_wait_s, uint, 0444);
MODULE_PARM_DESC(max_wait_s, "longest wait for go, in seconds (default 120)");

noinline int kpatch_test_coming_fn(void)
{
	barrier();
	return kpatch_test_opaque(41);
}
EXPORT_SYMBOL_GPL(kpatch_test_coming_fn);

static int value_get(char *buffer, const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE, "%d\n", kpatch_test_coming_fn());
}

static const struct kernel_param_ops value_ops = {
	.get = value_get,
};
module_param_cb(value, &value_ops, NULL, 0444);
MODULE_PARM_DESC(value, "calls kpatch_test_coming_fn()");

static int __init kpatch_test_coming_init(void)
{
	unsigned long end = jiffies + max_wait_s * HZ;
	int g;

	WRITE_ONCE(loading, 1);
	pr_info("init waits for go\n");
	for (;;) {
		g = READ_ONCE(go);
		if (g || time_after(jiffies, end))
			break;
		msleep(20);
	}
	WRITE_ONCE(loading, 0);

	switch (g) {
	case 0:
		pr_err("no go within %u s, giving up\n", max_wait_s);
		return -ETIMEDOUT;
	case 1:
		pr_info("init done\n");
		return 0;
	default:
		pr_info("go=%d: init fails\n", g);
		return -EINVAL;
	}
}

static void __exit kpatch_test_coming_exit(void)
{
}

module_init(kpatch_test_coming_init);
module_exit(kpatch_test_coming_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kpatch selftest: a module whose init waits to be told to finish");
