// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_test_move - functions that user tasks sleep or are preempted in,
 * for the kpatch selftests of moving tasks out of an update's way
 * (test-moving.sh) and for make bench.
 *
 * A read: /sys/kernel/debug/kpatch_test_move/read calls
 * kpatch_test_move_read_old(), whose replacement is
 * kpatch_test_move_read_new().  Each waits while "hold" is 1, then
 * returns its answer, "old\n" or "new\n", which the read returns.  The
 * wait is interruptible, as a read's is, and ends with -ERESTARTSYS when a
 * signal (or kpatch's fake one) is pending; with "sleep" set to "d" it is
 * uninterruptible, "k" killable.  "sleeping" reads the tasks in a wait,
 * "wakeups" how often a wait woke while "hold" was still 1 (counted when
 * it woke without a signal pending: "spurious").  A wait that began while
 * "linger" was set and that a signal ends first sleeps that many
 * milliseconds more, uninterruptibly: a moved task slow to come out.
 * Then any wait that a signal ended sets "chained" and wakes the readers
 * of /sys/kernel/debug/kpatch_test_move/chain, which wait (in no patched
 * function) until "chained" is set, then read as /read does: a task that
 * enters the function as a moved one comes out.  And if "kill" names a
 * pid, a wait that a signal ended sends that task SIGKILL (and sets
 * "kill" to 0): a writer killed as the task it moved comes out.
 *
 * The module patches its own read with kpatch_register(): writing 1 to
 * "api" registers kpatch_test_move_read_old() -> _new (the patch is named
 * after the module), 2 the same with replace (every other patch removed in
 * the same step); 0 takes it out with kpatch_unregister(); each logs what
 * it returned.  The patch has two stop hooks, which say which version is in
 * effect, inside stop_machine(): kpatch_test_move_stop_patch() "new",
 * kpatch_test_move_stop_unpatch() "old".  A function that returns its
 * answer while the other version is in effect counts in "late": a task ran
 * old code after the update took effect (meaningful while the read is
 * patched only by this module's patch).  "answers" reads how many answers
 * each gave: "old=N new=N".
 *
 * A poll: kpatch_test_move_hrtimeout() is the kernel's
 * schedule_hrtimeout_range_clock(), through which every poll(2),
 * select(2) and epoll_wait(2) sleeps, rebuilt from the exported hrtimer
 * interface, counting its calls in "hrtimeout_calls".
 *
 * A hot function: kpatch_test_move_getpid() answers getpid(2) as the
 * kernel does, counting its calls in "getpid_calls".
 *
 * A second read, /sys/kernel/debug/kpatch_test_move/read2, waits the same
 * way in kpatch_test_move_read2_old() (replacement _new), answering
 * "old2\n" or "new2\n": another function for another update.
 *
 * A function called inside __schedule(): while "nap" is Y, a probe of the
 * sched_switch tracepoint calls kpatch_test_move_nap() (replacement _new)
 * when a task named "kpnap" blocks, after it left its runqueue; each
 * counts its calls in "nap_calls" and "nap_new_calls".
 *
 * kpatch_test_move_finish_wait() is the kernel's finish_wait(), for an
 * update that changes a function the task running it calls.
 *
 * The writer's own path: "api" 3 registers, through
 * kpatch_test_move_register(), a patch that replaces that function
 * (replacement _new), so that the task running the update is in it.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/fs.h>
#include <linux/hrtimer.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/pid.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/tracepoint.h>
#include <linux/uaccess.h>
#include <linux/wait.h>

#include "kpatch.h"
#include "kpatch_test.h"

#define KPATCH_MOVE_OLD		0
#define KPATCH_MOVE_NEW		1

static DECLARE_WAIT_QUEUE_HEAD(kpatch_move_wq);

static bool hold;

static int kpatch_move_hold_set(const char *val, const struct kernel_param *kp)
{
	int ret = param_set_bool(val, kp);

	if (!ret)
		wake_up_all(&kpatch_move_wq);
	return ret;
}

static const struct kernel_param_ops kpatch_move_hold_ops = {
	.set = kpatch_move_hold_set,
	.get = param_get_bool,
};
module_param_cb(hold, &kpatch_move_hold_ops, &hold, 0644);
MODULE_PARM_DESC(hold, "1 keeps a reader waiting in the read's function");

static char sleep_kind[4] = "s";
module_param_string(sleep, sleep_kind, sizeof(sleep_kind), 0644);
MODULE_PARM_DESC(sleep, "how a reader waits: s interruptibly (default), d uninterruptibly, k killable");

static atomic_t sleeping = ATOMIC_INIT(0);
static atomic_t wakeups = ATOMIC_INIT(0);
static atomic_t late = ATOMIC_INIT(0);
static atomic_t answers[2] = { ATOMIC_INIT(0), ATOMIC_INIT(0) };
static atomic_long_t hrtimeout_calls = ATOMIC_LONG_INIT(0);
static atomic_long_t getpid_calls = ATOMIC_LONG_INIT(0);
static atomic_long_t nap_calls = ATOMIC_LONG_INIT(0);
static atomic_long_t nap_new_calls = ATOMIC_LONG_INIT(0);
static bool nap;
module_param(nap, bool, 0644);
static unsigned int linger;
module_param(linger, uint, 0644);
static bool chained;
module_param(chained, bool, 0644);
static int kill;
module_param(kill, int, 0644);
static DECLARE_WAIT_QUEUE_HEAD(kpatch_move_chain_wq);

static int kpatch_move_atomic_get(char *buffer, const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE, "%d\n", atomic_read(kp->arg));
}

static int kpatch_move_along_get(char *buffer, const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE, "%ld\n",
			 atomic_long_read(kp->arg));
}

static const struct kernel_param_ops kpatch_move_atomic_ops = {
	.get = kpatch_move_atomic_get,
};

static const struct kernel_param_ops kpatch_move_along_ops = {
	.get = kpatch_move_along_get,
};
module_param_cb(sleeping, &kpatch_move_atomic_ops, &sleeping, 0444);
module_param_cb(wakeups, &kpatch_move_atomic_ops, &wakeups, 0444);
module_param_cb(late, &kpatch_move_atomic_ops, &late, 0444);
module_param_cb(hrtimeout_calls, &kpatch_move_along_ops, &hrtimeout_calls, 0444);
module_param_cb(getpid_calls, &kpatch_move_along_ops, &getpid_calls, 0444);
module_param_cb(nap_calls, &kpatch_move_along_ops, &nap_calls, 0444);
module_param_cb(nap_new_calls, &kpatch_move_along_ops, &nap_new_calls, 0444);

static int kpatch_move_answers_get(char *buffer, const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE, "old=%d new=%d\n",
			 atomic_read(&answers[KPATCH_MOVE_OLD]),
			 atomic_read(&answers[KPATCH_MOVE_NEW]));
}

static const struct kernel_param_ops kpatch_move_answers_ops = {
	.get = kpatch_move_answers_get,
};
module_param_cb(answers, &kpatch_move_answers_ops, NULL, 0444);

/* The version the last update put in effect, set by the stop hooks. */
static int kpatch_move_in_effect = KPATCH_MOVE_OLD;

/* SIGKILL to the task "kill" names, once. */
static void kpatch_move_kill(void)
{
	int pid = xchg(&kill, 0);

	if (pid <= 0)
		return;
	rcu_read_lock();
	kill_pid(find_vpid(pid), SIGKILL, 1);
	rcu_read_unlock();
}

/*
 * Wait while "hold" is 1, as "sleep" says; -ERESTARTSYS if a signal, or
 * a fake one, ended an interruptible or killable wait.
 */
static int kpatch_move_wait(void)
{
	unsigned int state = sleep_kind[0] == 'd' ? TASK_UNINTERRUPTIBLE :
			     sleep_kind[0] == 'k' ? TASK_KILLABLE :
						    TASK_INTERRUPTIBLE;
	unsigned int lg = READ_ONCE(linger);
	DEFINE_WAIT(wait);
	int ret = 0;

	atomic_inc(&sleeping);
	for (;;) {
		prepare_to_wait(&kpatch_move_wq, &wait, state);
		if (!READ_ONCE(hold))
			break;
		if (signal_pending_state(state, current)) {
			ret = -ERESTARTSYS;
			break;
		}
		schedule();
		if (READ_ONCE(hold) && !signal_pending(current))
			atomic_inc(&wakeups);
	}
	finish_wait(&kpatch_move_wq, &wait);
	atomic_dec(&sleeping);
	if (ret && lg)
		msleep(lg);
	if (ret) {
		WRITE_ONCE(chained, true);
		wake_up_all(&kpatch_move_chain_wq);
		kpatch_move_kill();
	}
	return ret;
}

/* Give the answer of version @v, counting it late if the other is in effect. */
static ssize_t kpatch_move_answer(int v, char *buf)
{
	int ret = kpatch_move_wait();

	if (ret)
		return ret;
	if (READ_ONCE(kpatch_move_in_effect) != v)
		atomic_inc(&late);
	atomic_inc(&answers[v]);
	return scnprintf(buf, 8, "%s\n", v == KPATCH_MOVE_NEW ? "new" : "old");
}

noinline ssize_t kpatch_test_move_read_old(char *buf)
{
	return kpatch_move_answer(KPATCH_MOVE_OLD, buf);
}

noinline ssize_t kpatch_test_move_read_new(char *buf)
{
	return kpatch_move_answer(KPATCH_MOVE_NEW, buf);
}

noinline ssize_t kpatch_test_move_read2_old(char *buf)
{
	int ret = kpatch_move_wait();

	return ret ?: scnprintf(buf, 8, "old2\n");
}

noinline ssize_t kpatch_test_move_read2_new(char *buf)
{
	int ret = kpatch_move_wait();

	return ret ?: scnprintf(buf, 8, "new2\n");
}

noinline int kpatch_test_move_stop_patch(struct kpatch_module *kpmod)
{
	WRITE_ONCE(kpatch_move_in_effect, KPATCH_MOVE_NEW);
	return 0;
}

noinline int kpatch_test_move_stop_unpatch(struct kpatch_module *kpmod)
{
	WRITE_ONCE(kpatch_move_in_effect, KPATCH_MOVE_OLD);
	return 0;
}

static ssize_t kpatch_move_read(struct file *file, char __user *ubuf,
				size_t count, loff_t *ppos)
{
	char buf[8];
	ssize_t n;

	if (*ppos)
		return 0;
	if (file->private_data == (void *)2 &&
	    wait_event_interruptible(kpatch_move_chain_wq, READ_ONCE(chained)))
		return -ERESTARTSYS;
	n = file->private_data == (void *)1 ? kpatch_test_move_read2_old(buf) :
					      kpatch_test_move_read_old(buf);
	if (n < 0)
		return n;
	return simple_read_from_buffer(ubuf, count, ppos, buf, n);
}

static const struct file_operations kpatch_move_fops = {
	.owner	= THIS_MODULE,
	.open	= simple_open,
	.read	= kpatch_move_read,
	.llseek	= noop_llseek,
};

/* ---- kpatch_register() ---- */

static struct kpatch_func kpatch_move_funcs[] = {
	{
		.old_addr = (unsigned long)kpatch_test_move_read_old,
		.new_addr = (unsigned long)kpatch_test_move_read_new,
	},
};

static struct kpatch_module kpatch_move_kpmod = {
	.mod = THIS_MODULE,
	.funcs = kpatch_move_funcs,
	.num_funcs = ARRAY_SIZE(kpatch_move_funcs),
	.hooks = {
		[KPATCH_STOP_PATCH] = kpatch_test_move_stop_patch,
		[KPATCH_STOP_UNPATCH] = kpatch_test_move_stop_unpatch,
	},
};

/* The update's own path: these register a patch that replaces the first. */
noinline __attribute__((__noipa__))
int kpatch_test_move_register(struct kpatch_module *kpmod)
{
	int ret = kpatch_register(kpmod, false);

	/* after the call, not a tail call: this function is on the stack */
	pr_info("kpatch_register() of its own path returned %d\n", ret);
	return ret;
}

noinline __attribute__((__noipa__))
int kpatch_test_move_register_new(struct kpatch_module *kpmod)
{
	int ret = kpatch_register(kpmod, false);

	/* after the call, not a tail call: this function is on the stack */
	pr_info("kpatch_register() of its own path returned %d\n", ret);
	return ret;
}

static struct kpatch_func kpatch_move_self_funcs[] = {
	{
		.old_addr = (unsigned long)kpatch_test_move_register,
		.new_addr = (unsigned long)kpatch_test_move_register_new,
	},
};

static struct kpatch_module kpatch_move_self_kpmod = {
	.mod = THIS_MODULE,
	.funcs = kpatch_move_self_funcs,
	.num_funcs = ARRAY_SIZE(kpatch_move_self_funcs),
};

static int kpatch_move_register_set(const char *val,
				    const struct kernel_param *kp)
{
	unsigned int how;
	int ret = kstrtouint(val, 0, &how);

	if (ret)
		return ret;
	if (how > 3)
		return -EINVAL;
	if (how == 3) {
		ret = kpatch_test_move_register(&kpatch_move_self_kpmod);
		if (!ret)
			kpatch_unregister(&kpatch_move_self_kpmod);
	} else if (how) {
		ret = kpatch_register(&kpatch_move_kpmod, how == 2);
		pr_info("kpatch_register() returned %d\n", ret);
	} else {
		ret = kpatch_unregister(&kpatch_move_kpmod);
		pr_info("kpatch_unregister() returned %d\n", ret);
	}
	return ret;
}

static const struct kernel_param_ops kpatch_move_register_ops = {
	.set = kpatch_move_register_set,
};
module_param_cb(api, &kpatch_move_register_ops, NULL, 0200);
MODULE_PARM_DESC(api, "1: kpatch_register() the read's patch; 2: the same, replacing every other patch; 0: kpatch_unregister() it; 3: register a patch of the function that registers it");

/* ---- a poll ---- */

/* The kernel's schedule_hrtimeout_range_clock(), but for the count. */
noinline int kpatch_test_move_hrtimeout(ktime_t *expires, u64 delta,
					const enum hrtimer_mode mode,
					clockid_t clock_id)
{
	struct hrtimer_sleeper t;

	atomic_long_inc(&hrtimeout_calls);
	if (expires && *expires == 0) {
		__set_current_state(TASK_RUNNING);
		return 0;
	}
	if (!expires) {
		schedule();
		return -EINTR;
	}
#ifdef KPATCH_TEST_HRTIMER_SETUP
	hrtimer_setup_sleeper_on_stack(&t, clock_id, mode);
#else
	hrtimer_init_sleeper_on_stack(&t, clock_id, mode);
#endif
	hrtimer_set_expires_range_ns(&t.timer, *expires, delta);
	hrtimer_sleeper_start_expires(&t, mode);
	if (likely(t.task))
		schedule();
	hrtimer_cancel(&t.timer);
	destroy_hrtimer_on_stack(&t.timer);
	__set_current_state(TASK_RUNNING);
	return !t.task ? 0 : -EINTR;
}

/* ---- a hot function ---- */

noinline long kpatch_test_move_getpid(void)
{
	atomic_long_inc(&getpid_calls);
	return task_tgid_vnr(current);
}

/* ---- a function called inside __schedule() ---- */

noinline void kpatch_test_move_nap(void)
{
	atomic_long_inc(&nap_calls);
}

noinline void kpatch_test_move_nap_new(void)
{
	atomic_long_inc(&nap_new_calls);
}

static void kpatch_move_switch(void *data, bool preempt,
			       struct task_struct *prev,
			       struct task_struct *next,
			       unsigned int prev_state)
{
	if (READ_ONCE(nap) && !preempt && prev_state &&
	    !strncmp(prev->comm, "kpnap", TASK_COMM_LEN))
		kpatch_test_move_nap();
}

static struct tracepoint *kpatch_move_tp;

static void kpatch_move_tp_find(struct tracepoint *tp, void *priv)
{
	if (!strcmp(tp->name, "sched_switch"))
		kpatch_move_tp = tp;
}

/* ---- a function the task running an update calls ---- */

/* The kernel's finish_wait(). */
noinline void kpatch_test_move_finish_wait(struct wait_queue_head *wq_head,
					   struct wait_queue_entry *wq_entry)
{
	unsigned long flags;

	__set_current_state(TASK_RUNNING);
	if (!list_empty_careful(&wq_entry->entry)) {
		spin_lock_irqsave(&wq_head->lock, flags);
		list_del_init(&wq_entry->entry);
		spin_unlock_irqrestore(&wq_head->lock, flags);
	}
}

static struct dentry *kpatch_move_dir;

static int __init kpatch_test_move_init(void)
{
	int ret;

	for_each_kernel_tracepoint(kpatch_move_tp_find, NULL);
	if (!kpatch_move_tp)
		return -ENOENT;
	ret = tracepoint_probe_register(kpatch_move_tp,
					(void *)kpatch_move_switch, NULL);
	if (ret)
		return ret;
	kpatch_move_dir = debugfs_create_dir(KBUILD_MODNAME, NULL);
	debugfs_create_file("read", 0444, kpatch_move_dir, NULL,
			    &kpatch_move_fops);
	debugfs_create_file("read2", 0444, kpatch_move_dir, (void *)1,
			    &kpatch_move_fops);
	debugfs_create_file("chain", 0444, kpatch_move_dir, (void *)2,
			    &kpatch_move_fops);
	return 0;
}

/* The patch of "api" pins the module: it is out by now. */
static void __exit kpatch_test_move_exit(void)
{
	debugfs_remove_recursive(kpatch_move_dir);
	tracepoint_probe_unregister(kpatch_move_tp, (void *)kpatch_move_switch,
				    NULL);
	tracepoint_synchronize_unregister();
}

module_init(kpatch_test_move_init);
module_exit(kpatch_test_move_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kpatch selftest: functions that user tasks sleep or are preempted in");
