// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_test_preoff - ten functions to patch at once, and a section with
 * preemption off on another CPU that calls them, for the kpatch selftests
 * (test-failpaths.sh).
 *
 * Functions to patch: kpatch_test_preoff_f0() .. _f9() return 0 .. 9;
 * their replacements kpatch_test_preoff_f0_new() .. _f9_new() return 100
 * .. 109.  The read-only parameter "values" reads what f0 .. f9 return
 * now, one number each, separated by spaces.
 *
 * Writing 1 to "start" starts a kthread on a CPU other than the writer's
 * and waits until it is in a section with preemption off: the shape of a
 * call of f0 .. f9 that is inside an ftrace handler.  The section calls
 * f0 .. f9 in a loop for hold_ms milliseconds (default 4000);
 * "in_section" is 1 while it runs, "sections" counts the sections begun.
 * When ftrace refuses to register kpatch's ftrace_ops for one of them, it
 * may have put the ftrace_ops on its list before, and takes it off
 * without waiting for such calls: kpatch must wait for them before it
 * frees the ftrace_ops, so "in_section" must read 0 as soon as the
 * refused update has returned.
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

static unsigned int hold_ms = 4000;
module_param(hold_ms, uint, 0644);
MODULE_PARM_DESC(hold_ms, "length of a section with preemption off, in ms (default 4000)");

static bool in_section;
module_param(in_section, bool, 0444);
MODULE_PARM_DESC(in_section, "1 while the section runs");

static unsigned int sections;
module_param(sections, uint, 0444);
MODULE_PARM_DESC(sections, "sections begun");

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

static void __exit kpatch_test_preoff_exit(void)
{
	mutex_lock(&kpatch_preoff_mutex);
	if (kpatch_preoff_task) {
		kthread_stop(kpatch_preoff_task);
		put_task_struct(kpatch_preoff_task);
		kpatch_preoff_task = NULL;
	}
	mutex_unlock(&kpatch_preoff_mutex);
}

module_exit(kpatch_test_preoff_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kpatch selftest: ten functions, and a section with preemption off that calls them");
