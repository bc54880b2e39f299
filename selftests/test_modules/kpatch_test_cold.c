// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_test_cold - an old function split by the compiler into a hot
 * part and a .cold piece, for the kpatch selftests (test-cold.sh).
 *
 * kpatch_test_cold_fn(slow) returns 1, or with @slow set 11: it then
 * calls kpatch_test_cold_wait(), a cold function, and GCC moves that call
 * into kpatch_test_cold_fn.cold, which kallsyms lists as a function of
 * its own.  kpatch_test_cold_wait() sleeps while "hold" is 1.  After the
 * call the .cold piece jumps back into kpatch_test_cold_fn, whose tail
 * counts its runs in "old_tail".  The replacement,
 * kpatch_test_cold_fn_new(), returns 100 and counts nothing.
 *
 * On load a kthread named "kpatch_cold" (its pid is in the "pid"
 * parameter) waits.  Writing 1 to "call" makes it call
 * kpatch_test_cold_fn(1) once, store what the call returned in "result"
 * and clear "call" again.  So while "hold" is 1 the thread sleeps with a
 * return address in kpatch_test_cold_fn.cold, and none in
 * kpatch_test_cold_fn itself; it wakes every 20 ms to look, and with
 * "spin" set to 1 every jiffy, then runs for a jiffy (calling
 * cond_resched()): running, runnable or asleep in turn.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/cache.h>
#include <linux/compiler.h>
#include <linux/err.h>
#include <linux/jiffies.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/sched.h>

#include "kpatch_test.h"

static bool call;
module_param(call, bool, 0644);
MODULE_PARM_DESC(call, "1 makes the thread call kpatch_test_cold_fn(1) once");

static bool hold;
module_param(hold, bool, 0644);
MODULE_PARM_DESC(hold, "1 keeps the thread sleeping in kpatch_test_cold_wait()");

static int state;
module_param(state, int, 0444);
MODULE_PARM_DESC(state, "1 while the thread sleeps in kpatch_test_cold_wait(), 2 once it left");

static int result;
module_param(result, int, 0444);
MODULE_PARM_DESC(result, "what the last call of kpatch_test_cold_fn() returned");

static int old_tail;
module_param(old_tail, int, 0444);
MODULE_PARM_DESC(old_tail, "runs of the tail of the old kpatch_test_cold_fn()");

static int pid;
module_param(pid, int, 0444);
MODULE_PARM_DESC(pid, "pid of the kpatch_cold thread");

static struct task_struct *kpatch_cold_task;

/*
 * The compiler's cold attribute, not the kernel's __cold, which is empty
 * where the compiler would drop a cold function's alignment (call padding
 * built by GCC 12): the split of kpatch_test_cold_fn() into a .cold piece
 * needs it on every kernel, and this function's alignment does not
 * matter.  (Spelled through a macro, as checkpatch would have __cold.)
 */
#define KPATCH_TEST_ATTR(a)	__attribute__((a))

static bool spin;
module_param(spin, bool, 0644);
MODULE_PARM_DESC(spin, "1: the wait wakes every jiffy and runs a jiffy");

static noinline KPATCH_TEST_ATTR(__cold__) int kpatch_test_cold_wait(void)
{
	unsigned long end;

	WRITE_ONCE(state, 1);
	while (READ_ONCE(hold) && !kthread_should_stop()) {
		schedule_timeout_interruptible(READ_ONCE(spin) ? 1 : HZ / 50);
		end = jiffies + 1;
		while (READ_ONCE(spin) && READ_ONCE(hold) &&
		       time_before_eq(jiffies, end) && !kthread_should_stop())
			cond_resched();
	}
	WRITE_ONCE(state, 2);
	return kpatch_test_opaque(10);
}

noinline int kpatch_test_cold_fn(int slow)
{
	int ret = kpatch_test_opaque(1);

	if (slow)
		ret += kpatch_test_cold_wait();
	WRITE_ONCE(old_tail, old_tail + 1);
	return ret;
}
EXPORT_SYMBOL_GPL(kpatch_test_cold_fn);

noinline int kpatch_test_cold_fn_new(int slow)
{
	barrier();
	return kpatch_test_opaque(100);
}
EXPORT_SYMBOL_GPL(kpatch_test_cold_fn_new);

static int kpatch_cold_thread(void *data)
{
	while (!kthread_should_stop()) {
		if (READ_ONCE(call)) {
			WRITE_ONCE(result, kpatch_test_cold_fn(1));
			WRITE_ONCE(call, false);
		}
		schedule_timeout_interruptible(HZ / 20);
	}
	return 0;
}

static int __init kpatch_test_cold_init(void)
{
	struct task_struct *t;

	t = kthread_run(kpatch_cold_thread, NULL, "kpatch_cold");
	if (IS_ERR(t))
		return PTR_ERR(t);
	kpatch_cold_task = t;
	pid = task_pid_nr(t);
	return 0;
}

static void __exit kpatch_test_cold_exit(void)
{
	kthread_stop(kpatch_cold_task);
}

module_init(kpatch_test_cold_init);
module_exit(kpatch_test_cold_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kpatch selftest: an old function with a .cold piece");
