// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_test_going - a module that takes its time to go away, for the
 * kpatch selftests' hostile-input test (test-fuzz.sh).
 *
 * Its exit function sleeps for exit_delay_ms milliseconds (a module
 * parameter, 2000 by default).  While `rmmod kpatch_test_going` sleeps
 * there, the module is in MODULE_STATE_GOING: its functions are still in
 * /proc/kallsyms and its text is still mapped, but it can no longer be
 * pinned.  A patch command naming kpatch_test_going_fn() or
 * kpatch_test_going_fn_new() (as old or as new function) must then be
 * refused and change nothing.  /sys/module/kpatch_test_going/initstate
 * reads "going" during that window.
 *
 * The two functions have the prototype of kpatch_test_target's value
 * functions, so they can also be patched for real while the module is
 * live.  kpatch_test_going_data is a data object of the module.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/compiler.h>
#include <linux/delay.h>
#include <linux/module.h>
#include <linux/moduleparam.h>

#include "kpatch_test.h"

static unsigned int exit_delay_ms = 2000;
module_param(exit_delay_ms, uint, 0444);
MODULE_PARM_DESC(exit_delay_ms, "how long module exit sleeps, in ms");

static int kpatch_test_going_data __used = 0x4b50;

noinline int kpatch_test_going_fn(void)
{
	barrier();
	return 31;
}
EXPORT_SYMBOL_GPL(kpatch_test_going_fn);

noinline int kpatch_test_going_fn_new(void)
{
	barrier();
	return 32;
}
EXPORT_SYMBOL_GPL(kpatch_test_going_fn_new);

static void __exit kpatch_test_going_exit(void)
{
	pr_info("going: sleeping %u ms\n", exit_delay_ms);
	msleep(exit_delay_ms);
	pr_info("gone\n");
}
module_exit(kpatch_test_going_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kpatch selftest: a module that is slow to unload");
