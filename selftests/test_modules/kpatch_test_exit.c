// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_test_exit - a task that sleeps in a patched function after it has
 * left the task list, for the kpatch selftests' stack check of exiting
 * tasks (test-exiting.sh).
 *
 * kpatch_test_exit_connector() is a replacement for the kernel's
 * proc_exit_connector(struct task_struct *task), which do_exit() calls
 * right after exit_notify(): an autoreaped task, such as a kthread, has
 * been taken off the task list (and /proc) by then.  For every task but
 * the trap thread the replacement only counts the call (the "calls"
 * parameter) and sends no proc event.
 *
 * Writing 1 to "trap" starts a kthread named "kpatch_exit" (its pid is in
 * the "pid" parameter) that returns at once, so it goes through do_exit().
 * If proc_exit_connector() is patched to kpatch_test_exit_connector() by
 * then, the thread stops in the replacement: "state" reads 1 while it
 * sleeps there, until 1 is written to "release"; then "state" reads 2 and
 * the thread goes on to die.  "dead" reads 1 once the trap thread has
 * finished do_exit() (it can no longer be in this module's code).  While
 * the thread sleeps in the replacement, unpatching it must fail with
 * EBUSY, although no walk of the task list finds the thread.
 *
 * The misc device /dev/kpatch_test_exit traps a user process the same
 * way, for a task that began to exit before kpatch.ko was loaded: a task
 * that closes it while exiting (the last close of a file it left open,
 * in exit_task_work(), after do_exit() has passed the sched_process_exit
 * tracepoint but before exit_notify()) sleeps in the device's release
 * until 1 is written to "close_go" (or close_max_s seconds have passed);
 * "closing" reads 1 meanwhile, 2 once it left.  It becomes the trap task
 * ("pid" is its pid, "state" and "dead" are about it): once it has left
 * the task list, it sleeps in kpatch_test_exit_connector() if that
 * replaces proc_exit_connector() by then, until "release".  A close by a
 * task that is not exiting, or while the last trap task lives, traps
 * nothing and does not wait.
 *
 * Module exit releases the thread and waits until it is dead.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/compiler.h>
#include <linux/delay.h>
#include <linux/err.h>
#include <linux/fs.h>
#include <linux/jiffies.h>
#include <linux/kthread.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/sched/task.h>

#include "kpatch_test.h"

#define KPATCH_EXIT_TRAPPED	1
#define KPATCH_EXIT_LEFT	2

static bool release;
module_param(release, bool, 0644);
MODULE_PARM_DESC(release, "1 lets the trap thread leave kpatch_test_exit_connector()");

static int state;
module_param(state, int, 0444);
MODULE_PARM_DESC(state,
		 "0 no trap yet, 1 trap thread in kpatch_test_exit_connector(), 2 it left");

static int pid;
module_param(pid, int, 0444);
MODULE_PARM_DESC(pid, "pid of the last trap thread");

static atomic_t kpatch_exit_calls = ATOMIC_INIT(0);

/* The trap thread, with a reference held, or NULL. */
static struct task_struct *kpatch_exit_task;
static DEFINE_MUTEX(kpatch_exit_mutex);

/* Replacement for proc_exit_connector(); see the comment at the top. */
noinline void kpatch_test_exit_connector(struct task_struct *task)
{
	if (task != READ_ONCE(kpatch_exit_task)) {
		atomic_inc(&kpatch_exit_calls);
		return;
	}

	/* No printk here: GCC would move this path to a .cold part. */
	WRITE_ONCE(state, KPATCH_EXIT_TRAPPED);
	/* TASK_IDLE: no signals to care about, no hung task warning. */
	while (!READ_ONCE(release))
		schedule_timeout_idle(HZ / 20);
	WRITE_ONCE(state, KPATCH_EXIT_LEFT);
}
EXPORT_SYMBOL_GPL(kpatch_test_exit_connector);

static int kpatch_exit_thread(void *data)
{
	return 0;
}

/* Has @t finished do_exit()?  (TASK_DEAD is set in do_task_dead().) */
static bool kpatch_exit_dead(struct task_struct *t)
{
	return READ_ONCE(t->__state) == TASK_DEAD;
}

/* Release the trap thread, wait until it is dead, drop it; mutex held. */
static void kpatch_exit_reap(void)
{
	struct task_struct *t = kpatch_exit_task;

	if (!t)
		return;
	WRITE_ONCE(release, true);
	while (!kpatch_exit_dead(t))
		msleep(20);
	WRITE_ONCE(kpatch_exit_task, NULL);
	put_task_struct(t);
}

static int kpatch_exit_trap_set(const char *val, const struct kernel_param *kp)
{
	struct task_struct *t;
	bool on;
	int ret;

	ret = kstrtobool(val, &on);
	if (ret || !on)
		return ret;

	mutex_lock(&kpatch_exit_mutex);
	if (kpatch_exit_task) {
		ret = -EBUSY;
		if (!kpatch_exit_dead(kpatch_exit_task))
			goto out;
		kpatch_exit_reap();
	}

	t = kthread_create(kpatch_exit_thread, NULL, "kpatch_exit");
	if (IS_ERR(t)) {
		ret = PTR_ERR(t);
		goto out;
	}
	get_task_struct(t);
	WRITE_ONCE(release, false);
	WRITE_ONCE(state, 0);
	WRITE_ONCE(pid, task_pid_nr(t));
	WRITE_ONCE(kpatch_exit_task, t);
	pr_info("trap thread %d starts\n", pid);
	wake_up_process(t);
	ret = 0;
out:
	mutex_unlock(&kpatch_exit_mutex);
	return ret;
}

static int kpatch_exit_trap_get(char *buf, const struct kernel_param *kp)
{
	return sprintf(buf, "0\n");
}

static const struct kernel_param_ops kpatch_exit_trap_ops = {
	.set = kpatch_exit_trap_set,
	.get = kpatch_exit_trap_get,
};
module_param_cb(trap, &kpatch_exit_trap_ops, NULL, 0644);
MODULE_PARM_DESC(trap, "1 starts a trap thread (refused while the last one lives)");

static int kpatch_exit_dead_get(char *buf, const struct kernel_param *kp)
{
	int dead;

	mutex_lock(&kpatch_exit_mutex);
	dead = kpatch_exit_task && kpatch_exit_dead(kpatch_exit_task);
	mutex_unlock(&kpatch_exit_mutex);
	return sprintf(buf, "%d\n", dead);
}

static const struct kernel_param_ops kpatch_exit_dead_ops = {
	.get = kpatch_exit_dead_get,
};
module_param_cb(dead, &kpatch_exit_dead_ops, NULL, 0444);
MODULE_PARM_DESC(dead, "1 once the last trap thread has finished do_exit()");

static int kpatch_exit_calls_get(char *buf, const struct kernel_param *kp)
{
	return sprintf(buf, "%d\n", atomic_read(&kpatch_exit_calls));
}

static const struct kernel_param_ops kpatch_exit_calls_ops = {
	.get = kpatch_exit_calls_get,
};
module_param_cb(calls, &kpatch_exit_calls_ops, NULL, 0444);
MODULE_PARM_DESC(calls, "calls of kpatch_test_exit_connector() by other tasks");

/* ---- the device ---- */

#define KPATCH_EXIT_CLOSING	1
#define KPATCH_EXIT_CLOSED	2

static bool close_go;
module_param(close_go, bool, 0644);
MODULE_PARM_DESC(close_go, "1 lets an exiting task leave the device's release");

static int closing;
module_param(closing, int, 0444);
MODULE_PARM_DESC(closing,
		 "0 no exiting task closed the device yet, 1 one sleeps in its release, 2 it left");

static unsigned int close_max_s = 120;
module_param(close_max_s, uint, 0644);
MODULE_PARM_DESC(close_max_s, "longest sleep in the device's release, in seconds (default 120)");

/* Make current, an exiting task, the trap task; false if one lives. */
static bool kpatch_exit_trap_current(void)
{
	bool ok = true;

	mutex_lock(&kpatch_exit_mutex);
	if (kpatch_exit_task) {
		ok = kpatch_exit_dead(kpatch_exit_task);
		if (ok)
			kpatch_exit_reap();
	}
	if (ok) {
		get_task_struct(current);
		WRITE_ONCE(release, false);
		WRITE_ONCE(state, 0);
		WRITE_ONCE(pid, task_pid_nr(current));
		WRITE_ONCE(kpatch_exit_task, current);
	}
	mutex_unlock(&kpatch_exit_mutex);
	return ok;
}

static int kpatch_exit_dev_release(struct inode *inode, struct file *file)
{
	unsigned long end = jiffies + close_max_s * HZ;

	if (!(current->flags & PF_EXITING) || !kpatch_exit_trap_current())
		return 0;

	pr_info("exiting task %d sleeps in the device's release\n", pid);
	WRITE_ONCE(closing, KPATCH_EXIT_CLOSING);
	while (!READ_ONCE(close_go) && time_before(jiffies, end))
		schedule_timeout_idle(HZ / 20);
	if (!READ_ONCE(close_go))
		pr_err("no close_go within %u s, going on\n", close_max_s);
	WRITE_ONCE(closing, KPATCH_EXIT_CLOSED);
	return 0;
}

static const struct file_operations kpatch_exit_dev_fops = {
	.owner = THIS_MODULE,
	.release = kpatch_exit_dev_release,
};

static struct miscdevice kpatch_exit_dev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = "kpatch_test_exit",
	.fops = &kpatch_exit_dev_fops,
};

static int __init kpatch_test_exit_init(void)
{
	return misc_register(&kpatch_exit_dev);
}

static void __exit kpatch_test_exit_exit(void)
{
	misc_deregister(&kpatch_exit_dev);
	mutex_lock(&kpatch_exit_mutex);
	kpatch_exit_reap();
	mutex_unlock(&kpatch_exit_mutex);
}

module_init(kpatch_test_exit_init);
module_exit(kpatch_test_exit_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kpatch selftest: a task sleeping in a patched function after exit_notify()");
