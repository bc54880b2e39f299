// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_test_refill - hold back the work item that refills kpatch's free
 * list of exiting-task records, for the kpatch selftests
 * (test-exiting.sh).  Built only against the selftests' build of
 * kpatch.ko (KPATCH_TEST_HOOKS), whose test hook it installs.
 *
 * While the "hold" parameter is 1, the refill work item waits at
 * KPATCH_TEST_REFILL, before it allocates, for a minute at most; "held"
 * is 1 while it waits.  So exiting tasks can use up the free list.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/delay.h>
#include <linux/module.h>
#include <linux/moduleparam.h>

#include "kpatch.h"

static bool hold;
module_param(hold, bool, 0644);
MODULE_PARM_DESC(hold, "1 holds kpatch's refill work item back");

static bool held;
module_param(held, bool, 0444);
MODULE_PARM_DESC(held, "1 while the refill work item is held back");

static void kpatch_refill_hook(enum kpatch_test_point point)
{
	unsigned int i;

	if (point != KPATCH_TEST_REFILL)
		return;
	WRITE_ONCE(held, true);
	for (i = 0; READ_ONCE(hold) && i < 600; i++)
		msleep(100);
	WRITE_ONCE(held, false);
}

static int __init kpatch_test_refill_init(void)
{
	return kpatch_test_set_hook(kpatch_refill_hook);
}

static void __exit kpatch_test_refill_exit(void)
{
	WRITE_ONCE(hold, false);
	/* waits for a refill still in the hook */
	kpatch_test_set_hook(NULL);
}

module_init(kpatch_test_refill_init);
module_exit(kpatch_test_refill_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kpatch selftest: hold back the refill of exiting-task records");
