// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_test_own - a module of new functions that also runs a kernel
 * thread and a work item of its own, for the kpatch selftests
 * (test-own.sh).
 *
 * New functions, for kpatch_test_target's kpatch_test_value_a() (1) and
 * kpatch_test_value_b() (2), given to kpatch by address:
 *
 *	kpatch_test_own_value_a()   returns 51 (C)
 *	kpatch_test_own_tail()      asm, "jmp kpatch_test_own_helper": a
 *				    sibling call.  The helper sleeps while
 *				    "hold_helper" is 1 and returns 53.
 *	kpatch_test_own_indirect()  asm, leaves by an indirect jump ("jmp
 *				    *%rax") to kpatch_test_own_target(),
 *				    which returns 54.  It starts at an odd
 *				    address, which kpatch redirects to as
 *				    to any other.
 *
 * The module's own code runs in two tasks that kpatch never sends there:
 *
 *  - the kernel thread "kpatch_own" (its pid in "pid"), whose thread
 *    function is in this module.  It counts its rounds in "thread_runs",
 *    20 a second; while "hold_thread" is 1 it sleeps in
 *    kpatch_test_own_thread_wait() instead ("thread_state" 1 there, 2
 *    once it left).  Writing 0 to "thread" stops it, 1 starts a new one.
 *  - a work item on system_wq, queued by writing 1 to "queue_work".  Its
 *    function kpatch_test_own_work() records the kworker that runs it
 *    ("work_pid", "work_comm"), sleeps there while "hold_work" is 1
 *    ("work_state" 1, then 2) and counts its runs in "work_runs".
 *
 * The helper records the task that came in likewise ("helper_pid",
 * "helper_comm"; "helper_state" 1 while it sleeps, then 2).
 *
 * The module's exit stops the thread, lets the work item and the helper
 * go and cancels the work item (waiting for it to finish): it can be
 * unloaded while both sleep in its code.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/compiler.h>
#include <linux/err.h>
#include <linux/kthread.h>
#include <linux/linkage.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/string.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <asm/ibt.h>
#include <asm/nospec-branch.h>

#include "kpatch_test.h"

#define KPATCH_OWN_IN	1	/* a *_state: asleep in the function */
#define KPATCH_OWN_LEFT	2	/* a *_state: left it */

static DECLARE_WAIT_QUEUE_HEAD(kpatch_own_wq);

/*
 * kpatch_own_lock orders the starts and stops of the thread, and the
 * queueing of the work item, against the module's exit ("stopping").
 */
static DEFINE_MUTEX(kpatch_own_lock);
static struct task_struct *kpatch_own_task;
static bool kpatch_own_ready;	/* the init ran: "thread" acts at once */
static bool kpatch_own_thread_on = true;
static bool stopping;

static bool hold_thread;
static bool hold_work;
static bool hold_helper;

/* Every hold_* parameter wakes the sleepers when it is written. */
static int kpatch_own_hold_set(const char *val, const struct kernel_param *kp)
{
	int ret = param_set_bool(val, kp);

	if (!ret)
		wake_up_all(&kpatch_own_wq);
	return ret;
}

static const struct kernel_param_ops kpatch_own_hold_ops = {
	.set = kpatch_own_hold_set,
	.get = param_get_bool,
};

module_param_cb(hold_thread, &kpatch_own_hold_ops, &hold_thread, 0644);
MODULE_PARM_DESC(hold_thread, "1 makes the thread sleep in kpatch_test_own_thread_wait() until it is 0");
module_param_cb(hold_work, &kpatch_own_hold_ops, &hold_work, 0644);
MODULE_PARM_DESC(hold_work, "1 makes the work item sleep in kpatch_test_own_work() until it is 0");
module_param_cb(hold_helper, &kpatch_own_hold_ops, &hold_helper, 0644);
MODULE_PARM_DESC(hold_helper, "1 makes kpatch_test_own_helper() sleep until it is 0");

static int pid;
module_param(pid, int, 0444);
MODULE_PARM_DESC(pid, "pid of the kpatch_own thread (0: not running)");

static int thread_state;
module_param(thread_state, int, 0444);
MODULE_PARM_DESC(thread_state, "1 while the thread sleeps in kpatch_test_own_thread_wait(), 2 once it left");

static int thread_runs;
module_param(thread_runs, int, 0444);
MODULE_PARM_DESC(thread_runs, "rounds of the thread's loop");

static int work_state;
module_param(work_state, int, 0444);
MODULE_PARM_DESC(work_state, "1 while the work item sleeps in kpatch_test_own_work(), 2 once it left");

static int work_runs;
module_param(work_runs, int, 0444);
MODULE_PARM_DESC(work_runs, "completed runs of the work item");

static int work_pid;
module_param(work_pid, int, 0444);
MODULE_PARM_DESC(work_pid, "pid of the kworker that last ran the work item");

static char work_comm[TASK_COMM_LEN];
module_param_string(work_comm, work_comm, sizeof(work_comm), 0444);
MODULE_PARM_DESC(work_comm, "name of the kworker that last ran the work item");

static int helper_state;
module_param(helper_state, int, 0444);
MODULE_PARM_DESC(helper_state, "1 while a task sleeps in kpatch_test_own_helper(), 2 once it left");

static int helper_pid;
module_param(helper_pid, int, 0444);
MODULE_PARM_DESC(helper_pid, "pid of the task that last entered kpatch_test_own_helper()");

static char helper_comm[TASK_COMM_LEN];
module_param_string(helper_comm, helper_comm, sizeof(helper_comm), 0444);
MODULE_PARM_DESC(helper_comm, "name of the task that last entered kpatch_test_own_helper()");

/* ---- the new functions ---- */

noinline int kpatch_test_own_value_a(void)
{
	barrier();
	return kpatch_test_opaque(51);
}

/* Reached from kpatch_test_own_tail() by a jmp; any task may come in. */
noinline int kpatch_test_own_helper(void)
{
	WRITE_ONCE(helper_pid, task_pid_nr(current));
	get_task_comm(helper_comm, current);
	WRITE_ONCE(helper_state, KPATCH_OWN_IN);
	wait_event_interruptible(kpatch_own_wq,
				 !READ_ONCE(hold_helper) || READ_ONCE(stopping));
	WRITE_ONCE(helper_state, KPATCH_OWN_LEFT);
	return kpatch_test_opaque(53);
}

/* Reached from kpatch_test_own_indirect() by "jmp *%rax". */
noinline int kpatch_test_own_target(void)
{
	barrier();
	return kpatch_test_opaque(54);
}

/*
 * Written in asm so that they are the same on every compiler.  Both are
 * entered from kpatch's redirect, never called from C here: an ENDBR, as
 * for any function whose address is taken, and no stack frame, so
 * nothing for objtool or ORC to describe.
 *
 * kpatch_test_own_tail(): the whole body is a sibling call, so a task in
 * the helper has no frame of the new function on its stack.
 *
 * kpatch_test_own_indirect(): the body loads the target's address and
 * jumps to it through a register, as "return fn();" compiles for a
 * function pointer fn on a kernel built without retpolines.  The target
 * is a C function whose address is taken here, so it keeps its ENDBR,
 * which the indirect jump needs on kernels with IBT.  The jump is
 * vouched for (ANNOTATE_RETPOLINE_SAFE) for objtool on kernels built
 * with retpolines, and followed by an INT3 for those built against
 * straight-line speculation.
 *
 * Neither is aligned beyond the first: kpatch_test_own_tail() is 5 bytes,
 * or 9 with an ENDBR, so kpatch_test_own_indirect() starts at an odd
 * address, as a hand-written asm function may: kpatch's redirect sets
 * the ip to any address.
 */
asm("	.pushsection	.text, \"ax\", @progbits\n"
"	.balign		16\n"
"	.globl		kpatch_test_own_tail\n"
"	.type		kpatch_test_own_tail, @function\n"
"kpatch_test_own_tail:\n"
	ASM_ENDBR
"	jmp		kpatch_test_own_helper\n"
"	.size		kpatch_test_own_tail, .-kpatch_test_own_tail\n"
"\n"
"	.globl		kpatch_test_own_indirect\n"
"	.type		kpatch_test_own_indirect, @function\n"
"kpatch_test_own_indirect:\n"
	ASM_ENDBR
"	leaq		kpatch_test_own_target(%rip), %rax\n"
	ANNOTATE_RETPOLINE_SAFE "\n"
"	jmp		*%rax\n"
"	int3\n"
"	.size		kpatch_test_own_indirect, .-kpatch_test_own_indirect\n"
"	.popsection\n"
);

/* ---- the module's own thread ---- */

static noinline void kpatch_test_own_thread_wait(void)
{
	WRITE_ONCE(thread_state, KPATCH_OWN_IN);
	wait_event_interruptible(kpatch_own_wq,
				 !READ_ONCE(hold_thread) || kthread_should_stop());
	WRITE_ONCE(thread_state, KPATCH_OWN_LEFT);
}

static int kpatch_test_own_thread(void *data)
{
	while (!kthread_should_stop()) {
		if (READ_ONCE(hold_thread))
			kpatch_test_own_thread_wait();
		WRITE_ONCE(thread_runs, thread_runs + 1);
		schedule_timeout_interruptible(HZ / 20);
	}
	return 0;
}

/* Start the thread unless it runs; kpatch_own_lock held. */
static int kpatch_own_start(void)
{
	struct task_struct *t;

	if (kpatch_own_task)
		return 0;
	t = kthread_run(kpatch_test_own_thread, NULL, "kpatch_own");
	if (IS_ERR(t))
		return PTR_ERR(t);
	kpatch_own_task = t;
	WRITE_ONCE(pid, task_pid_nr(t));
	return 0;
}

/* Stop the thread if it runs; kpatch_own_lock held. */
static void kpatch_own_stop(void)
{
	if (!kpatch_own_task)
		return;
	kthread_stop(kpatch_own_task);
	kpatch_own_task = NULL;
	WRITE_ONCE(pid, 0);
}

static int kpatch_own_thread_set(const char *val, const struct kernel_param *kp)
{
	bool on;
	int ret;

	ret = kstrtobool(val, &on);
	if (ret)
		return ret;
	mutex_lock(&kpatch_own_lock);
	if (READ_ONCE(stopping)) {
		ret = -ENODEV;
	} else {
		kpatch_own_thread_on = on;
		/* Before the init (insmod thread=0) only note it. */
		if (kpatch_own_ready && on)
			ret = kpatch_own_start();
		else if (kpatch_own_ready)
			kpatch_own_stop();
	}
	mutex_unlock(&kpatch_own_lock);
	return ret;
}

static int kpatch_own_thread_get(char *buffer, const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE, "%c\n", READ_ONCE(pid) ? 'Y' : 'N');
}

static const struct kernel_param_ops kpatch_own_thread_ops = {
	.set = kpatch_own_thread_set,
	.get = kpatch_own_thread_get,
};
module_param_cb(thread, &kpatch_own_thread_ops, NULL, 0644);
MODULE_PARM_DESC(thread, "Y while the thread runs; 0 stops it, 1 starts a new one");

/* ---- the module's own work item ---- */

static void kpatch_test_own_work(struct work_struct *work)
{
	WRITE_ONCE(work_pid, task_pid_nr(current));
	get_task_comm(work_comm, current);
	if (READ_ONCE(hold_work)) {
		WRITE_ONCE(work_state, KPATCH_OWN_IN);
		wait_event_interruptible(kpatch_own_wq,
					 !READ_ONCE(hold_work) ||
					 READ_ONCE(stopping));
		WRITE_ONCE(work_state, KPATCH_OWN_LEFT);
	}
	WRITE_ONCE(work_runs, work_runs + 1);
}

static DECLARE_WORK(kpatch_own_work_item, kpatch_test_own_work);

static int kpatch_own_queue_set(const char *val, const struct kernel_param *kp)
{
	bool queue;
	int ret;

	ret = kstrtobool(val, &queue);
	if (ret || !queue)
		return ret;
	mutex_lock(&kpatch_own_lock);
	if (READ_ONCE(stopping) || !kpatch_own_ready)
		ret = -ENODEV;
	else
		schedule_work(&kpatch_own_work_item);
	mutex_unlock(&kpatch_own_lock);
	return ret;
}

static const struct kernel_param_ops kpatch_own_queue_ops = {
	.set = kpatch_own_queue_set,
};
module_param_cb(queue_work, &kpatch_own_queue_ops, NULL, 0200);
MODULE_PARM_DESC(queue_work, "1 queues the work item on system_wq");

/* ---- load and unload ---- */

static int __init kpatch_test_own_init(void)
{
	int ret = 0;

	mutex_lock(&kpatch_own_lock);
	if (kpatch_own_thread_on)
		ret = kpatch_own_start();
	if (!ret)
		kpatch_own_ready = true;
	mutex_unlock(&kpatch_own_lock);
	return ret;
}

static void __exit kpatch_test_own_exit(void)
{
	mutex_lock(&kpatch_own_lock);
	WRITE_ONCE(stopping, true);
	mutex_unlock(&kpatch_own_lock);
	wake_up_all(&kpatch_own_wq);

	mutex_lock(&kpatch_own_lock);
	kpatch_own_stop();
	mutex_unlock(&kpatch_own_lock);
	cancel_work_sync(&kpatch_own_work_item);
}

module_init(kpatch_test_own_init);
module_exit(kpatch_test_own_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kpatch selftest: new functions in a module that runs a thread and a work item of its own");
