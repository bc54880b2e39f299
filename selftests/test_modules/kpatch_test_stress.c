// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_test_stress - concurrency smoke test for kpatch.
 *
 * On load one kthread per online CPU ("kpatch_stress/N", nice 19) calls
 * kpatch_test_target's kpatch_test_value_a() in a loop and counts the
 * results equal to old_value (default 1, the original function), equal to
 * new_value (default 11, kpatch_test_value_a_v1) and anything else.  The
 * counters are read-only parameters count_old, count_new and count_other;
 * they are updated every 1024 calls.  While the shell patches and unpatches
 * the function underneath, count_other must stay 0.  The threads stop on
 * module unload.
 *
 * Needs kpatch_test_target.ko loaded first.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/cpumask.h>
#include <linux/err.h>
#include <linux/kernel.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/preempt.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/slab.h>

#include "kpatch_test.h"

#define KPATCH_STRESS_BATCH	1024

static int old_value = 1;
module_param(old_value, int, 0444);
MODULE_PARM_DESC(old_value, "result of the original function (default 1)");

static int new_value = 11;
module_param(new_value, int, 0444);
MODULE_PARM_DESC(new_value, "result of the replacement (default 11)");

static unsigned int threads;
module_param(threads, uint, 0444);
MODULE_PARM_DESC(threads, "number of threads started");

static atomic_long_t kpatch_stress_old = ATOMIC_LONG_INIT(0);
static atomic_long_t kpatch_stress_new = ATOMIC_LONG_INIT(0);
static atomic_long_t kpatch_stress_other = ATOMIC_LONG_INIT(0);

static int count_set(const char *val, const struct kernel_param *kp)
{
	return -EPERM;
}

static int count_get(char *buffer, const struct kernel_param *kp)
{
	atomic_long_t *count = kp->arg;

	return scnprintf(buffer, PAGE_SIZE, "%ld\n", atomic_long_read(count));
}

static const struct kernel_param_ops count_ops = {
	.set = count_set,
	.get = count_get,
};

module_param_cb(count_old, &count_ops, &kpatch_stress_old, 0444);
MODULE_PARM_DESC(count_old, "calls that returned old_value");
module_param_cb(count_new, &count_ops, &kpatch_stress_new, 0444);
MODULE_PARM_DESC(count_new, "calls that returned new_value");
module_param_cb(count_other, &count_ops, &kpatch_stress_other, 0444);
MODULE_PARM_DESC(count_other, "calls that returned anything else");

static struct task_struct **kpatch_stress_tasks;

static int kpatch_stress_thread(void *data)
{
	long n_old = 0, n_new = 0, n_other = 0;
	unsigned int i = 0;

	while (!kthread_should_stop()) {
		int v;

		/*
		 * Only preemptible outside the call, as on a kernel with
		 * voluntary preemption (6.1, 6.12): on a fully preemptible one
		 * (7.x, PREEMPT_LAZY) stop_machine() would find this thread
		 * inside the function or the ftrace trampoline so often that an
		 * unpatch is refused (EBUSY) for many tries in a row.
		 */
		preempt_disable();
		v = kpatch_test_value_a();
		preempt_enable();

		if (v == old_value)
			n_old++;
		else if (v == new_value)
			n_new++;
		else
			n_other++;

		if (++i % KPATCH_STRESS_BATCH == 0) {
			atomic_long_add(n_old, &kpatch_stress_old);
			atomic_long_add(n_new, &kpatch_stress_new);
			atomic_long_add(n_other, &kpatch_stress_other);
			n_old = 0;
			n_new = 0;
			n_other = 0;
		}
		/*
		 * A kernel loop that never sleeps must say when it is outside
		 * any traced code, or removing an ftrace callback (kpatch's
		 * unpatch, livepatch, a BPF detach) waits for it forever.
		 */
		cond_resched_tasks_rcu_qs();
	}
	atomic_long_add(n_old, &kpatch_stress_old);
	atomic_long_add(n_new, &kpatch_stress_new);
	atomic_long_add(n_other, &kpatch_stress_other);
	return 0;
}

static void kpatch_stress_stop(void)
{
	unsigned int cpu;

	for_each_possible_cpu(cpu) {
		if (kpatch_stress_tasks[cpu])
			kthread_stop(kpatch_stress_tasks[cpu]);
	}
	kfree(kpatch_stress_tasks);
}

static int __init kpatch_test_stress_init(void)
{
	struct task_struct *t;
	unsigned int cpu;

	kpatch_stress_tasks = kcalloc(nr_cpu_ids, sizeof(*kpatch_stress_tasks),
				      GFP_KERNEL);
	if (!kpatch_stress_tasks)
		return -ENOMEM;

	for_each_online_cpu(cpu) {
		t = kthread_create(kpatch_stress_thread, NULL,
				   "kpatch_stress/%u", cpu);
		if (IS_ERR(t)) {
			kpatch_stress_stop();
			return PTR_ERR(t);
		}
		kthread_bind(t, cpu);
		set_user_nice(t, MAX_NICE);
		kpatch_stress_tasks[cpu] = t;
		wake_up_process(t);
		threads++;
	}
	return 0;
}

static void __exit kpatch_test_stress_exit(void)
{
	kpatch_stress_stop();
}

module_init(kpatch_test_stress_init);
module_exit(kpatch_test_stress_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kpatch selftest: call a patched function on every CPU");
