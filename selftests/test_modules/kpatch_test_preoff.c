// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_test_preoff - ten functions to patch at once, and a section with
 * preemption off on another CPU, begun after an update's stop_machine()
 * and grace period but before its sites are released, for the kpatch
 * selftests (test-preoff.sh, test-fopsmix.sh).
 *
 * Functions to patch: kpatch_test_preoff_f0() .. _f9() return 0 .. 9;
 * their replacements kpatch_test_preoff_f0_new() .. _f9_new() return 100
 * .. 109.  The read-only parameter "values" reads what f0 .. f9 return
 * now, one number each, separated by spaces.
 *
 * Only in the build against the selftests' build of kpatch.ko
 * (KPATCH_TEST_HOOKS), whose test hook it installs: when 1 is written to
 * "armed", the next update that reaches KPATCH_TEST_DONE (after its
 * stop_machine() and RCU grace period, before kpatch releases the sites
 * it leaves without an entry) starts a kthread on another CPU and waits
 * until it is in a section with preemption off: the shape of a call of a
 * patched function that is inside kpatch's ftrace handler, which holds a
 * site it found in kpatch_sites.  The section calls f0 .. f9 in a loop
 * for hold_ms milliseconds (default 4000); "in_section" is 1 while it
 * runs, "sections" counts the sections begun.  kpatch must not free a
 * site such a call may hold before the section is over, so "in_section"
 * must read 0 as soon as the update has returned.  Writing 1 to "start"
 * starts a section at once, on a CPU other than the writer's: for an
 * update refused before its stop_machine(), whose sites must outlive
 * the calls that may have reached them as well.
 *
 * Also only there: writing N to "fail_filter" makes the next N tries of
 * kpatch to take ips out of kpatch_fops's filter fail (KPATCH_TEST_FILTER:
 * the first allocation after it fails, through the task's fail-nth; a
 * kernel with CONFIG_FAULT_INJECTION, failslab set to fail allocations
 * that may sleep); -1: every one, until 0 is written.  It reads how many
 * are left.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/completion.h>
#include <linux/cpumask.h>
#include <linux/err.h>
#include <linux/kernel.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/preempt.h>
#include <linux/sched.h>
#include <linux/sched/clock.h>
#include <linux/sched/task.h>
#include <linux/smp.h>

#include "kpatch.h"

#ifdef KPATCH_TEST_HOOKS
static bool armed;
module_param(armed, bool, 0644);
MODULE_PARM_DESC(armed, "1: the next update's KPATCH_TEST_DONE starts a section");

static unsigned int hold_ms = 4000;
module_param(hold_ms, uint, 0644);
MODULE_PARM_DESC(hold_ms, "length of a section with preemption off, in ms (default 4000)");

static bool in_section;
module_param(in_section, bool, 0444);
MODULE_PARM_DESC(in_section, "1 while the section runs");

static unsigned int sections;
module_param(sections, uint, 0444);
MODULE_PARM_DESC(sections, "sections begun");

static int fail_filter;
module_param(fail_filter, int, 0644);
MODULE_PARM_DESC(fail_filter, "tries to shrink kpatch_fops's filter to fail (-1: all)");
#endif

static noinline __used int kpatch_test_preoff_f0(void) { return 0; }
static noinline __used int kpatch_test_preoff_f1(void) { return 1; }
static noinline __used int kpatch_test_preoff_f2(void) { return 2; }
static noinline __used int kpatch_test_preoff_f3(void) { return 3; }
static noinline __used int kpatch_test_preoff_f4(void) { return 4; }
static noinline __used int kpatch_test_preoff_f5(void) { return 5; }
static noinline __used int kpatch_test_preoff_f6(void) { return 6; }
static noinline __used int kpatch_test_preoff_f7(void) { return 7; }
static noinline __used int kpatch_test_preoff_f8(void) { return 8; }
static noinline __used int kpatch_test_preoff_f9(void) { return 9; }

static noinline __used int kpatch_test_preoff_f0_new(void) { return 100; }
static noinline __used int kpatch_test_preoff_f1_new(void) { return 101; }
static noinline __used int kpatch_test_preoff_f2_new(void) { return 102; }
static noinline __used int kpatch_test_preoff_f3_new(void) { return 103; }
static noinline __used int kpatch_test_preoff_f4_new(void) { return 104; }
static noinline __used int kpatch_test_preoff_f5_new(void) { return 105; }
static noinline __used int kpatch_test_preoff_f6_new(void) { return 106; }
static noinline __used int kpatch_test_preoff_f7_new(void) { return 107; }
static noinline __used int kpatch_test_preoff_f8_new(void) { return 108; }
static noinline __used int kpatch_test_preoff_f9_new(void) { return 109; }

static int (*const kpatch_preoff_fns[])(void) = {
	kpatch_test_preoff_f0, kpatch_test_preoff_f1, kpatch_test_preoff_f2,
	kpatch_test_preoff_f3, kpatch_test_preoff_f4, kpatch_test_preoff_f5,
	kpatch_test_preoff_f6, kpatch_test_preoff_f7, kpatch_test_preoff_f8,
	kpatch_test_preoff_f9,
};

static int values_get(char *buffer, const struct kernel_param *kp)
{
	int (*fn)(void);
	unsigned int i;
	int n = 0;

	for (i = 0; i < ARRAY_SIZE(kpatch_preoff_fns); i++) {
		fn = READ_ONCE(kpatch_preoff_fns[i]);
		n += scnprintf(buffer + n, PAGE_SIZE - n, "%s%d",
			       i ? " " : "", fn());
	}
	return n + scnprintf(buffer + n, PAGE_SIZE - n, "\n");
}

static const struct kernel_param_ops values_ops = {
	.get = values_get,
};
module_param_cb(values, &values_ops, NULL, 0444);
MODULE_PARM_DESC(values, "what kpatch_test_preoff_f0 .. _f9 return now");

#ifdef KPATCH_TEST_HOOKS
static int kpatch_preoff_sink;
static DECLARE_COMPLETION(kpatch_preoff_entered);
static struct task_struct *kpatch_preoff_task;

static int kpatch_preoff_thread(void *arg)
{
	int (*fn)(void);
	unsigned int i;
	u64 end;

	preempt_disable();
	WRITE_ONCE(in_section, true);
	complete(&kpatch_preoff_entered);
	end = local_clock() + (u64)READ_ONCE(hold_ms) * NSEC_PER_MSEC;
	while (local_clock() < end)
		for (i = 0; i < ARRAY_SIZE(kpatch_preoff_fns); i++) {
			fn = READ_ONCE(kpatch_preoff_fns[i]);
			WRITE_ONCE(kpatch_preoff_sink, fn());
		}
	WRITE_ONCE(in_section, false);
	preempt_enable();

	while (!kthread_should_stop())
		schedule_timeout_interruptible(HZ);
	return 0;
}

/* Start the section on a CPU other than this one, and wait until it runs. */
static void kpatch_preoff_start(void)
{
	struct task_struct *t;
	unsigned int cpu, self = raw_smp_processor_id();

	for_each_online_cpu(cpu)
		if (cpu != self)
			break;
	if (cpu >= nr_cpu_ids) {
		pr_err("no other CPU online\n");
		return;
	}
	t = kthread_create(kpatch_preoff_thread, NULL, "kpatch_preoff/%u", cpu);
	if (IS_ERR(t)) {
		pr_err("kthread_create: %ld\n", PTR_ERR(t));
		return;
	}
	kthread_bind(t, cpu);
	get_task_struct(t);
	kpatch_preoff_task = t;
	reinit_completion(&kpatch_preoff_entered);
	wake_up_process(t);
	wait_for_completion(&kpatch_preoff_entered);
	sections++;
}

static DEFINE_MUTEX(kpatch_preoff_mutex);

/* A new section; the last one is over (it was checked) or is waited for. */
static void kpatch_preoff_again(void)
{
	mutex_lock(&kpatch_preoff_mutex);
	if (kpatch_preoff_task) {
		kthread_stop(kpatch_preoff_task);
		put_task_struct(kpatch_preoff_task);
		kpatch_preoff_task = NULL;
	}
	kpatch_preoff_start();
	mutex_unlock(&kpatch_preoff_mutex);
}

/* KPATCH_TEST_FILTER: the allocation that comes next fails, see the top. */
static void kpatch_preoff_fail(void)
{
#ifdef CONFIG_FAULT_INJECTION
	int n = READ_ONCE(fail_filter);

	if (!n)
		return;
	if (n > 0)
		WRITE_ONCE(fail_filter, n - 1);
	current->fail_nth = 1;
#endif
}

static void kpatch_preoff_hook(enum kpatch_test_point point)
{
	if (point == KPATCH_TEST_FILTER)
		kpatch_preoff_fail();
	if (point != KPATCH_TEST_DONE || !READ_ONCE(armed))
		return;
	WRITE_ONCE(armed, false);
	kpatch_preoff_again();
}

static int start_set(const char *val, const struct kernel_param *kp)
{
	bool start;
	int ret = kstrtobool(val, &start);

	if (ret)
		return ret;
	if (start)
		kpatch_preoff_again();
	return 0;
}

static const struct kernel_param_ops start_ops = {
	.set = start_set,
};
module_param_cb(start, &start_ops, NULL, 0200);
MODULE_PARM_DESC(start, "1: start a section now");

static int __init kpatch_test_preoff_init(void)
{
	return kpatch_test_set_hook(kpatch_preoff_hook);
}

static void __exit kpatch_test_preoff_exit(void)
{
	kpatch_test_set_hook(NULL);
	mutex_lock(&kpatch_preoff_mutex);
	if (kpatch_preoff_task) {
		kthread_stop(kpatch_preoff_task);
		put_task_struct(kpatch_preoff_task);
		kpatch_preoff_task = NULL;
	}
	mutex_unlock(&kpatch_preoff_mutex);
}

module_init(kpatch_test_preoff_init);
module_exit(kpatch_test_preoff_exit);
#endif

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kpatch selftest: a section with preemption off while sites are released");
