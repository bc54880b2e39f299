// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_test_sib - an old function whose replacement reaches a sleeping
 * helper by a sibling call, for the kpatch selftests (test-sibling.sh).
 *
 * kpatch_test_sib_fn() returns 1.  Its replacement,
 * kpatch_test_sib_fn_new() in kpatch_test_sib_new.ko, jumps to
 * kpatch_test_sib_helper() there, which may sleep and then returns 2.
 *
 * On load a kthread named "kpatch_sib" (its pid is in the "pid"
 * parameter) waits.  Writing 1 to "call" makes it call
 * kpatch_test_sib_fn() once, store what the call returned in "result" and
 * clear "call" again; "calls" counts the completed calls.  So while the
 * patch is enabled and kpatch_test_sib_new's "hold" is 1, the thread
 * sleeps in kpatch_test_sib_helper() with no frame of
 * kpatch_test_sib_fn_new() on its stack.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/compiler.h>
#include <linux/err.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/sched.h>

#include "kpatch_test.h"

static bool call;
module_param(call, bool, 0644);
MODULE_PARM_DESC(call, "1 makes the thread call kpatch_test_sib_fn() once");

static int result;
module_param(result, int, 0444);
MODULE_PARM_DESC(result, "what the last call of kpatch_test_sib_fn() returned");

static int calls;
module_param(calls, int, 0444);
MODULE_PARM_DESC(calls, "completed calls of kpatch_test_sib_fn()");

static int pid;
module_param(pid, int, 0444);
MODULE_PARM_DESC(pid, "pid of the kpatch_sib thread");

static struct task_struct *kpatch_sib_task;

noinline int kpatch_test_sib_fn(void)
{
	barrier();
	return kpatch_test_opaque(1);
}
EXPORT_SYMBOL_GPL(kpatch_test_sib_fn);

static int kpatch_sib_thread(void *data)
{
	while (!kthread_should_stop()) {
		if (READ_ONCE(call)) {
			WRITE_ONCE(result, kpatch_test_sib_fn());
			WRITE_ONCE(calls, calls + 1);
			WRITE_ONCE(call, false);
		}
		schedule_timeout_interruptible(HZ / 20);
	}
	return 0;
}

static int __init kpatch_test_sib_init(void)
{
	struct task_struct *t;

	t = kthread_run(kpatch_sib_thread, NULL, "kpatch_sib");
	if (IS_ERR(t))
		return PTR_ERR(t);
	kpatch_sib_task = t;
	pid = task_pid_nr(t);
	return 0;
}

static void __exit kpatch_test_sib_exit(void)
{
	kthread_stop(kpatch_sib_task);
}

module_init(kpatch_test_sib_init);
module_exit(kpatch_test_sib_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kpatch selftest: an old function whose replacement makes a sibling call");
