// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_test_busy - a function that stays on a task's stack, for the
 * kpatch selftests' stack check.
 *
 * On load a kthread named "kpatch_busy" (its pid is in the "pid"
 * parameter) calls kpatch_test_busy_fn(), which sleeps in a loop until 1
 * is written to the "release" parameter.  While it waits, patching
 * kpatch_test_busy_fn must fail with EBUSY.  The "state" parameter reads
 * 1 while the thread is inside kpatch_test_busy_fn() and 2 once it has
 * left it; the thread then sleeps in its main loop until module exit.
 *
 * Writing 1 to "again" makes the thread call kpatch_test_busy_fn() once
 * more (it returns at once, "release" being set) and then clear "again".
 * "old_calls" and "new_calls" count the calls that ran
 * kpatch_test_busy_fn() and its replacement kpatch_test_busy_fn_new(), so
 * after a successful patch "again" shows that the new function runs.
 *
 * Writing 1 to "ambush" sets a trap for the next update: a kprobe on
 * stop_machine() clears "release", sets "again" and wakes the thread, so
 * that it enters kpatch_test_busy_fn() after kpatch has walked the stacks
 * of the sleeping tasks (before stop_machine()) and before the update's
 * stop_machine() callback.  The callback must notice that the thread ran
 * since and walk its stack again.  While the trap is set the thread is
 * bound to CPU 0 and runs SCHED_FIFO: woken on CPU 0, where the test runs
 * the writer (taskset), it preempts the writer at its next preemption
 * point, in cpus_read_lock() at the latest, before stop_machine() wakes
 * the stopper threads, and runs until it sleeps in the function.
 * "ambush" reads 1 while the trap is set, 0 once it went off; writing 0
 * removes it.
 *
 * With "hold" set to 1, kpatch_test_busy_fn_new() sleeps too, until
 * "hold" is 0 again ("state" reads 3 meanwhile): the replacement is then
 * on the thread's stack, which must make unpatching it fail with EBUSY.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/compiler.h>
#include <linux/cpumask.h>
#include <linux/err.h>
#include <linux/kprobes.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/sched.h>

#include "kpatch_test.h"

#define KPATCH_BUSY_IN_FN	1
#define KPATCH_BUSY_LEFT_FN	2
#define KPATCH_BUSY_IN_NEW	3

static bool release;
module_param(release, bool, 0644);
MODULE_PARM_DESC(release, "1 lets the thread leave kpatch_test_busy_fn()");

static bool again;
module_param(again, bool, 0644);
MODULE_PARM_DESC(again, "1 makes the thread call kpatch_test_busy_fn() again");

static bool hold;
module_param(hold, bool, 0644);
MODULE_PARM_DESC(hold, "1 makes kpatch_test_busy_fn_new() wait until it is 0");

static int state;
module_param(state, int, 0444);
MODULE_PARM_DESC(state,
		 "0 starting, 1 in kpatch_test_busy_fn(), 2 left it, 3 in kpatch_test_busy_fn_new()");

static int pid;
module_param(pid, int, 0444);
MODULE_PARM_DESC(pid, "pid of the kpatch_busy thread");

static int old_calls;
module_param(old_calls, int, 0444);
MODULE_PARM_DESC(old_calls, "completed calls of kpatch_test_busy_fn()");

static int new_calls;
module_param(new_calls, int, 0444);
MODULE_PARM_DESC(new_calls, "calls of kpatch_test_busy_fn_new()");

static struct task_struct *kpatch_busy_task;

noinline void kpatch_test_busy_fn(void)
{
	WRITE_ONCE(state, KPATCH_BUSY_IN_FN);
	while (!READ_ONCE(release) && !kthread_should_stop())
		schedule_timeout_interruptible(HZ / 20);
	WRITE_ONCE(old_calls, old_calls + 1);
}
EXPORT_SYMBOL_GPL(kpatch_test_busy_fn);

noinline void kpatch_test_busy_fn_new(void)
{
	WRITE_ONCE(new_calls, new_calls + 1);
	if (!READ_ONCE(hold))
		return;
	WRITE_ONCE(state, KPATCH_BUSY_IN_NEW);
	while (READ_ONCE(hold) && !kthread_should_stop())
		schedule_timeout_interruptible(HZ / 20);
}
EXPORT_SYMBOL_GPL(kpatch_test_busy_fn_new);

/* ---- the ambush ---- */

static atomic_t kpatch_busy_ambush_armed = ATOMIC_INIT(0);
static struct kprobe kpatch_busy_kp;
static bool kpatch_busy_kp_on;
static DEFINE_MUTEX(kpatch_busy_ambush_mutex);

static int kpatch_busy_ambush_pre(struct kprobe *p, struct pt_regs *regs)
{
	if (!atomic_xchg(&kpatch_busy_ambush_armed, 0))
		return 0;
	WRITE_ONCE(release, false);
	WRITE_ONCE(again, true);
	wake_up_process(kpatch_busy_task);
	return 0;
}

static int kpatch_busy_ambush_set(const char *val,
				  const struct kernel_param *kp)
{
	bool on;
	int ret;

	ret = kstrtobool(val, &on);
	if (ret)
		return ret;
	if (!kpatch_busy_task)	/* as an insmod argument: no thread yet */
		return -EINVAL;

	mutex_lock(&kpatch_busy_ambush_mutex);
	atomic_set(&kpatch_busy_ambush_armed, 0);
	if (on && !kpatch_busy_kp_on) {
		ret = set_cpus_allowed_ptr(kpatch_busy_task, cpumask_of(0));
		if (ret)
			goto out;
		sched_set_fifo_low(kpatch_busy_task);
		memset(&kpatch_busy_kp, 0, sizeof(kpatch_busy_kp));
		kpatch_busy_kp.symbol_name = "stop_machine";
		kpatch_busy_kp.pre_handler = kpatch_busy_ambush_pre;
		ret = register_kprobe(&kpatch_busy_kp);
		if (ret) {
			pr_err("cannot probe stop_machine (%d)\n", ret);
			goto restore;
		}
		kpatch_busy_kp_on = true;
	} else if (!on && kpatch_busy_kp_on) {
		unregister_kprobe(&kpatch_busy_kp);
		kpatch_busy_kp_on = false;
		goto restore;
	}
	atomic_set(&kpatch_busy_ambush_armed, on);
	goto out;

restore:
	sched_set_normal(kpatch_busy_task, 0);
	set_cpus_allowed_ptr(kpatch_busy_task, cpu_possible_mask);
out:
	mutex_unlock(&kpatch_busy_ambush_mutex);
	return ret;
}

static int kpatch_busy_ambush_get(char *buf, const struct kernel_param *kp)
{
	return sprintf(buf, "%d\n", atomic_read(&kpatch_busy_ambush_armed));
}

static const struct kernel_param_ops kpatch_busy_ambush_ops = {
	.set = kpatch_busy_ambush_set,
	.get = kpatch_busy_ambush_get,
};
module_param_cb(ambush, &kpatch_busy_ambush_ops, NULL, 0644);
MODULE_PARM_DESC(ambush, "1: enter kpatch_test_busy_fn() when the next update calls stop_machine()");

/* ---- the thread ---- */

static int kpatch_busy_thread(void *data)
{
	kpatch_test_busy_fn();
	WRITE_ONCE(state, KPATCH_BUSY_LEFT_FN);

	while (!kthread_should_stop()) {
		if (READ_ONCE(again)) {
			kpatch_test_busy_fn();
			WRITE_ONCE(state, KPATCH_BUSY_LEFT_FN);
			WRITE_ONCE(again, false);
		}
		schedule_timeout_interruptible(HZ / 20);
	}
	return 0;
}

static int __init kpatch_test_busy_init(void)
{
	struct task_struct *t;

	t = kthread_run(kpatch_busy_thread, NULL, "kpatch_busy");
	if (IS_ERR(t))
		return PTR_ERR(t);
	kpatch_busy_task = t;
	pid = task_pid_nr(t);
	return 0;
}

static void __exit kpatch_test_busy_exit(void)
{
	kpatch_busy_ambush_set("0", NULL);
	WRITE_ONCE(release, true);
	WRITE_ONCE(hold, false);
	kthread_stop(kpatch_busy_task);
}

module_init(kpatch_test_busy_init);
module_exit(kpatch_test_busy_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kpatch selftest: a function kept on a kthread's stack");
