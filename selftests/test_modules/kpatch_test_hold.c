// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_test_hold - a user task that kpatch moves out of an update's way
 * and holds, doing what the hold must cope with, for the kpatch selftests
 * (test-holds.sh).  Built twice: against kpatch.ko, and against the
 * selftests' build of kpatch.ko (KPATCH_TEST_HOOKS), where it also
 * installs the test hook ("release", below).
 *
 * A read of /sys/kernel/debug/kpatch_test_hold/read calls
 * kpatch_test_hold_wait_old() (replacement: _new), which waits
 * interruptibly while "hold" is 1, then answers "old\n" ("new\n"); a
 * signal, or kpatch's fake one, ends the wait with -ERESTARTSYS, and the
 * read restarts.  "sleeping" reads the tasks in that wait.  Then:
 *
 * - A task work of its own: a read whose wait a signal ended while "work"
 *   is Y sets "work" to N and queues a task work (TWA_RESUME) before it
 *   returns.  Queued after kpatch's hold, it runs before it (the kernel
 *   runs the works it takes newest first): it waits in
 *   kpatch_test_hold_wait_old() again, in the update's way, and counts in
 *   "kicked" a wait that a signal ended after it slept (none was pending
 *   when it began); then it waits, killable, in no function of the
 *   update, while "stay" is Y; then counts in "worked".
 * - A sleep elsewhere: a read whose wait ended with its answer while
 *   "away" is Y waits again, interruptibly, in kpatch_hold_away(), a
 *   function of no update, while "away" is Y.  A signal ends that wait
 *   with -EINTR, as one ends epoll_wait(2), which the read returns; it
 *   counts in "interrupted".  "away_sleeping" reads the tasks in that wait.
 * - A late fake signal: a kprobe on task_work_add().  While "armed" is Y,
 *   the first task work that another task queues with TWA_SIGNAL on the
 *   task whose pid "victim" names (kpatch's fake signal) sets "armed" to
 *   N, counts in "fired", sets "hold" to 0 and wakes that task, and holds
 *   the caller back, as a preemption or a vCPU steal would, until the
 *   task, its read done, sleeps again off its runqueue: interruptibly,
 *   out of the read's wait (as in epoll_wait(2)), or in kpatch's hold
 *   (killable, TASK_NOLOAD); "delay_ms" at most.  It logs which.
 *
 * kpatch_test_hold_task_work_run() is the kernel's task_work_run(), in
 * which every hold of kpatch runs, given the address of the kernel's
 * static work_exited in "work_exited".
 *
 * The selftests' build only: while "release" is Y, the hook looks at
 * each KPATCH_TEST_DONE, the end of a run of an update, after its stack
 * check and before kpatch moves the tasks it listed, for a reader in
 * kpatch_test_hold_wait_old() whose task has more references than when it
 * began to wait: one that the run listed in the way, which kpatch pins
 * until it has moved it.  At the first, it sets "release" to N and "hold"
 * to 0, wakes the readers, and waits, for 10 s at most, until one of them
 * sleeps in kpatch_hold_away(), off its runqueue; it logs which.  So a
 * task that a run found asleep in the way has left it, and sleeps
 * elsewhere, before kpatch moves it.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/fs.h>
#include <linux/jiffies.h>
#include <linux/kprobes.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/ptrace.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/task_work.h>
#include <linux/timekeeping.h>
#include <linux/wait.h>

#include "kpatch.h"
#include "kpatch_test.h"

static DECLARE_WAIT_QUEUE_HEAD(kpatch_hold_wq);
static DECLARE_WAIT_QUEUE_HEAD(kpatch_hold_stay_wq);
static DECLARE_WAIT_QUEUE_HEAD(kpatch_hold_away_wq);

static bool hold;
static bool stay;
static bool away;

/* A bool parameter that wakes its waiters when set. */
static int kpatch_hold_bool_set(const char *val, const struct kernel_param *kp)
{
	int ret = param_set_bool(val, kp);

	if (!ret) {
		wake_up_all(&kpatch_hold_wq);
		wake_up_all(&kpatch_hold_stay_wq);
		wake_up_all(&kpatch_hold_away_wq);
	}
	return ret;
}

static const struct kernel_param_ops kpatch_hold_bool_ops = {
	.set = kpatch_hold_bool_set,
	.get = param_get_bool,
};

module_param_cb(hold, &kpatch_hold_bool_ops, &hold, 0644);
MODULE_PARM_DESC(hold, "1 keeps a reader waiting in kpatch_test_hold_wait_old()");
module_param_cb(stay, &kpatch_hold_bool_ops, &stay, 0644);
MODULE_PARM_DESC(stay, "Y keeps the task work waiting after its wait in the way");
module_param_cb(away, &kpatch_hold_bool_ops, &away, 0644);
MODULE_PARM_DESC(away, "Y: a reader, its answer given, waits in kpatch_hold_away()");

static bool work;
module_param(work, bool, 0644);
MODULE_PARM_DESC(work, "Y: the next read whose wait a signal ends queues a task work");

static unsigned long work_exited;
module_param(work_exited, ulong, 0644);
MODULE_PARM_DESC(work_exited, "the address of the kernel's work_exited");

static atomic_t sleeping = ATOMIC_INIT(0);
static atomic_t kicked = ATOMIC_INIT(0);
static atomic_t worked = ATOMIC_INIT(0);
static atomic_t away_sleeping = ATOMIC_INIT(0);
static atomic_t interrupted = ATOMIC_INIT(0);
static atomic_t fired = ATOMIC_INIT(0);

static int kpatch_hold_atomic_get(char *buffer, const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE, "%d\n", atomic_read(kp->arg));
}

static const struct kernel_param_ops kpatch_hold_atomic_ops = {
	.get = kpatch_hold_atomic_get,
};

module_param_cb(sleeping, &kpatch_hold_atomic_ops, &sleeping, 0444);
module_param_cb(kicked, &kpatch_hold_atomic_ops, &kicked, 0444);
module_param_cb(worked, &kpatch_hold_atomic_ops, &worked, 0444);
module_param_cb(away_sleeping, &kpatch_hold_atomic_ops, &away_sleeping, 0444);
module_param_cb(interrupted, &kpatch_hold_atomic_ops, &interrupted, 0444);
module_param_cb(fired, &kpatch_hold_atomic_ops, &fired, 0444);

#ifdef KPATCH_TEST_HOOKS
/* The task references of the last reader to wait, as it began to. */
static unsigned int kpatch_hold_refs;

static void kpatch_hold_note_refs(void)
{
	WRITE_ONCE(kpatch_hold_refs, refcount_read(&current->usage));
}
#else
static void kpatch_hold_note_refs(void)
{
}
#endif

/* Wait interruptibly while "hold" is 1: 0, or -ERESTARTSYS for a signal. */
static int kpatch_hold_wait(void)
{
	DEFINE_WAIT(wait);
	int ret = 0;

	kpatch_hold_note_refs();
	atomic_inc(&sleeping);
	for (;;) {
		prepare_to_wait(&kpatch_hold_wq, &wait, TASK_INTERRUPTIBLE);
		if (!READ_ONCE(hold))
			break;
		if (signal_pending(current)) {
			ret = -ERESTARTSYS;
			break;
		}
		schedule();
	}
	finish_wait(&kpatch_hold_wq, &wait);
	atomic_dec(&sleeping);
	return ret;
}

noinline __attribute__((__noipa__))
ssize_t kpatch_test_hold_wait_old(char *buf)
{
	return kpatch_hold_wait() ?: scnprintf(buf, 8, "old\n");
}

noinline __attribute__((__noipa__))
ssize_t kpatch_test_hold_wait_new(char *buf)
{
	return kpatch_hold_wait() ?: scnprintf(buf, 8, "new\n");
}

/* Wait interruptibly while "away" is Y: 0, or -EINTR for a signal. */
static noinline int kpatch_hold_away(void)
{
	DEFINE_WAIT(wait);
	int ret = 0;

	atomic_inc(&away_sleeping);
	for (;;) {
		prepare_to_wait(&kpatch_hold_away_wq, &wait, TASK_INTERRUPTIBLE);
		if (!READ_ONCE(away))
			break;
		if (signal_pending(current)) {
			atomic_inc(&interrupted);
			ret = -EINTR;
			break;
		}
		schedule();
	}
	finish_wait(&kpatch_hold_away_wq, &wait);
	atomic_dec(&away_sleeping);
	return ret;
}

/* ---- the task work of the read ---- */

static struct callback_head kpatch_hold_work;

static void kpatch_hold_work_fn(struct callback_head *cb)
{
	bool pending = signal_pending(current);
	char buf[8];

	/* in the way, asleep interruptibly */
	if (kpatch_test_hold_wait_old(buf) == -ERESTARTSYS && !pending)
		atomic_inc(&kicked);
	/* out of it until the test lets it go */
	if (wait_event_killable(kpatch_hold_stay_wq, !READ_ONCE(stay)))
		pr_warn("the task work was killed\n");
	atomic_inc(&worked);
	/* the test unloads the module only after the reader has exited */
	module_put(THIS_MODULE);
}

static void kpatch_hold_queue_work(void)
{
	init_task_work(&kpatch_hold_work, kpatch_hold_work_fn);
	__module_get(THIS_MODULE);
	if (task_work_add(current, &kpatch_hold_work, TWA_RESUME))
		module_put(THIS_MODULE);
}

static ssize_t kpatch_hold_read(struct file *file, char __user *ubuf,
				size_t count, loff_t *ppos)
{
	char buf[8];
	ssize_t n;

	if (*ppos)
		return 0;
	n = kpatch_test_hold_wait_old(buf);
	if (n == -ERESTARTSYS && xchg(&work, false))
		kpatch_hold_queue_work();
	else if (n >= 0 && READ_ONCE(away))
		n = kpatch_hold_away() ?: n;
	if (n < 0)
		return n;
	return simple_read_from_buffer(ubuf, count, ppos, buf, n);
}

/* ---- task_work_run() ---- */

/* The kernel's task_work_run(). */
noinline __attribute__((__noipa__))
void kpatch_test_hold_task_work_run(void)
{
	struct callback_head *exited = (struct callback_head *)work_exited;
	struct callback_head *work, *head, *next;
	struct task_struct *task = current;

	for (;;) {
		work = READ_ONCE(task->task_works);
		do {
			head = NULL;
			if (!work) {
				if (task->flags & PF_EXITING)
					head = exited;
				else
					break;
			}
		} while (!try_cmpxchg(&task->task_works, &work, head));

		if (!work)
			break;
		/* as task_work_cancel_match() expects */
		raw_spin_lock_irq(&task->pi_lock);
		raw_spin_unlock_irq(&task->pi_lock);

		do {
			next = work->next;
			work->func(work);
			work = next;
			cond_resched();
		} while (work);
	}
}

/* ---- the late fake signal ---- */

static int victim;
module_param(victim, int, 0644);
MODULE_PARM_DESC(victim, "the pid of the task whose fake signal the kprobe holds back");

static bool armed;
module_param(armed, bool, 0644);
MODULE_PARM_DESC(armed, "Y: the kprobe holds back the next fake signal for \"victim\" (then N)");

static unsigned int delay_ms = 2000;
module_param(delay_ms, uint, 0644);
MODULE_PARM_DESC(delay_ms, "how long the kprobe holds back a fake signal at most (ms)");

enum { LATE_RUNNING, LATE_ELSEWHERE, LATE_HELD };

/* Where @t is: asleep off its runqueue out of the read's wait, or not. */
static int kpatch_hold_late_where(struct task_struct *t)
{
	unsigned int state = READ_ONCE(t->__state);

	if (READ_ONCE(t->on_rq) || atomic_read(&sleeping))
		return LATE_RUNNING;
	if (state & TASK_NOLOAD)	/* kpatch's hold */
		return LATE_HELD;
	return state & TASK_INTERRUPTIBLE ? LATE_ELSEWHERE : LATE_RUNNING;
}

/* task_work_add(task, work, mode); preemption off. */
static int kpatch_hold_late_pre(struct kprobe *p, struct pt_regs *regs)
{
	struct task_struct *t = (void *)regs_get_kernel_argument(regs, 0);
	int mode = regs_get_kernel_argument(regs, 2);
	u64 start, now;
	int where;

	if (mode != TWA_SIGNAL || t == current || !READ_ONCE(armed) ||
	    task_pid_nr(t) != READ_ONCE(victim) || !xchg(&armed, false))
		return 0;
	atomic_inc(&fired);
	WRITE_ONCE(hold, false);
	wake_up_process(t);
	start = ktime_get_mono_fast_ns();
	for (;;) {
		where = kpatch_hold_late_where(t);
		now = ktime_get_mono_fast_ns();
		if (where != LATE_RUNNING ||
		    now - start >= (u64)READ_ONCE(delay_ms) * NSEC_PER_MSEC)
			break;
		cpu_relax();
	}
	if (where == LATE_HELD)
		pr_info("kpatch's fake signal for pid %d, held back: hold 0; the reader is held before any other call\n",
			task_pid_nr(t));
	else if (where == LATE_ELSEWHERE)
		pr_info("kpatch's fake signal for pid %d, held back: hold 0; the reader left the way, asleep interruptibly elsewhere\n",
			task_pid_nr(t));
	else
		pr_warn("kpatch's fake signal for pid %d, held back: hold 0; the reader is not asleep after %u ms\n",
			task_pid_nr(t), READ_ONCE(delay_ms));
	return 0;
}

static struct kprobe kpatch_hold_late_kp = {
	.symbol_name	= "task_work_add",
	.pre_handler	= kpatch_hold_late_pre,
};

/* ---- the test hook ---- */

#ifdef KPATCH_TEST_HOOKS
static bool release;
module_param(release, bool, 0644);
MODULE_PARM_DESC(release, "Y: at the end of the run that lists a reader in the way, let it out of the way");

/* Has a reader in its wait more task references than when it began? */
static bool kpatch_hold_pinned(void)
{
	struct wait_queue_entry *entry;
	struct task_struct *t;
	bool ret = false;

	spin_lock_irq(&kpatch_hold_wq.lock);
	list_for_each_entry(entry, &kpatch_hold_wq.head, entry) {
		t = entry->private;
		if (refcount_read(&t->usage) > READ_ONCE(kpatch_hold_refs))
			ret = true;
	}
	spin_unlock_irq(&kpatch_hold_wq.lock);
	return ret;
}

/* The pid of a task asleep in kpatch_hold_away(), off its runqueue, or 0. */
static pid_t kpatch_hold_away_asleep(void)
{
	struct wait_queue_entry *entry;
	struct task_struct *t;
	pid_t pid = 0;

	spin_lock_irq(&kpatch_hold_away_wq.lock);
	list_for_each_entry(entry, &kpatch_hold_away_wq.head, entry) {
		t = entry->private;
		if (READ_ONCE(t->__state) == TASK_INTERRUPTIBLE &&
		    !READ_ONCE(t->on_rq))
			pid = task_pid_nr(t);
	}
	spin_unlock_irq(&kpatch_hold_away_wq.lock);
	return pid;
}

/* kpatch_mutex held: one update at a time. */
static void kpatch_hold_hook(enum kpatch_test_point point)
{
	unsigned long end = jiffies + 10 * HZ;
	pid_t pid;

	if (point != KPATCH_TEST_DONE || !READ_ONCE(release) ||
	    !kpatch_hold_pinned())
		return;
	WRITE_ONCE(release, false);
	WRITE_ONCE(hold, false);
	wake_up_all(&kpatch_hold_wq);
	for (;;) {
		pid = kpatch_hold_away_asleep();
		if (pid || time_after(jiffies, end))
			break;
		usleep_range(1000, 2000);
	}
	if (pid)
		pr_info("a run listed the reader: hold 0; pid %d left the way, asleep in kpatch_hold_away()\n",
			pid);
	else
		pr_warn("a run listed the reader: hold 0; none asleep in kpatch_hold_away() after 10 s\n");
}
#endif

static const struct file_operations kpatch_hold_fops = {
	.owner	= THIS_MODULE,
	.open	= simple_open,
	.read	= kpatch_hold_read,
	.llseek	= noop_llseek,
};

static struct dentry *kpatch_hold_dir;

static int __init kpatch_test_hold_init(void)
{
	int ret = register_kprobe(&kpatch_hold_late_kp);

	if (ret) {
		pr_err("register_kprobe(task_work_add) failed: %d\n", ret);
		return ret;
	}
#ifdef KPATCH_TEST_HOOKS
	ret = kpatch_test_set_hook(kpatch_hold_hook);
	if (ret) {
		unregister_kprobe(&kpatch_hold_late_kp);
		return ret;
	}
#endif
	kpatch_hold_dir = debugfs_create_dir(KBUILD_MODNAME, NULL);
	debugfs_create_file("read", 0444, kpatch_hold_dir, NULL,
			    &kpatch_hold_fops);
	return 0;
}

static void __exit kpatch_test_hold_exit(void)
{
#ifdef KPATCH_TEST_HOOKS
	kpatch_test_set_hook(NULL);
#endif
	debugfs_remove_recursive(kpatch_hold_dir);
	unregister_kprobe(&kpatch_hold_late_kp);
}

module_init(kpatch_test_hold_init);
module_exit(kpatch_test_hold_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kpatch selftest: tasks that kpatch moves out of an update's way and holds");
