// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_test_hooks - hooks of a patch, for the kpatch selftests
 * (test-hooks.sh; its sleepers: test-busy.sh).
 *
 * Functions to patch: kpatch_test_hooks_f() returns 100, its replacements
 * kpatch_test_hooks_f1/f2/f3() return 101, 102, 103; the "value"
 * parameter reads what kpatch_test_hooks_f() returns now.
 *
 * Hooks, one function per kind, named after it (a patch module gets
 * them by address: kpatch_test_patch_a's parameters):
 * kpatch_test_hooks_pre_patch(), ..._stop_patch(), ..._undo_patch(),
 * ..._post_patch(), ..._pre_unpatch(), ..._stop_unpatch(),
 * ..._undo_unpatch(), ..._post_unpatch().  Each logs
 * "kpatch_test_hooks: <hook> <patch name>" (the hook as the patches file
 * spells it), so that a test reads the order of the calls from the
 * kernel log, and counts its call in "calls".  The pre and post hooks
 * sleep (usleep_range()) and allocate with GFP_KERNEL, which the debug kernel
 * checks is allowed there; the stop and undo hooks must run with
 * interrupts off (inside stop_machine()), the others with interrupts on:
 * every call in the wrong context is logged and counted in "errors".
 *
 * "fail" makes a hook return an error: write "HOOK NAME ERRNO" (e.g.
 * "pre-unpatch hB -13", or with commas for the blanks; NAME "*" for any
 * patch), "none" to clear it.  A hook that fails logs "<hook> <name>
 * returns <errno>".
 *
 * "hold" makes a hook that may sleep (pre or post) wait, with kpatch's
 * mutex held, as a hook that takes its time does: write "HOOK NAME" (as
 * for "fail"), "none" to clear it.  The hook then waits until 1 is
 * written to "proceed" (writing "hold" clears it), or for max_wait_s
 * seconds (default 60), after which it gives up and returns -ETIMEDOUT;
 * "waiting" reads 1 meanwhile.  With "notify" set to 1, a hook that was
 * held then registers a module notifier and unregisters it again, as a
 * hook that sets something up might; "waiting" reads 2 while it is in
 * register_module_notifier().  A held hook logs "hold: <hook> <name>
 * waits" when it starts to wait.
 *
 * With api=1 the init registers, with kpatch_register(), a patch that
 * redirects kpatch_test_target's kpatch_test_value_a() (1) to
 * kpatch_test_hooks_f1() (101) and has all eight hooks (patch name:
 * kpatch_test_hooks; fail= applies as above, given on the insmod line,
 * with commas).  (The old function cannot be one of this module's: kpatch
 * refuses a module whose init is running.)  The module needs
 * kpatch_test_target, which it takes kpatch_test_value_a() from.
 * api_bad= gives it one bad hook instead of its pre-patch hook: "vmlinux"
 * (a function of the kernel), "init" (a function of this module's __init
 * text), "mid" (one byte into a hook); or passes a copy of its struct
 * kpatch_module ("initdata", refused) or of its funcs array ("initfuncs",
 * which kpatch copies: accepted) in __initdata, which the kernel frees
 * after the init.
 * If kpatch_register() fails, the init compares the struct
 * kpatch_module and the funcs array with copies made before the call and
 * logs "kpatch_register() failed: N" and either "structures intact after
 * failed register (err N)" (the init then succeeds, nothing patched) or
 * "structures changed ..." (the init fails).
 *
 * Sleepers, tasks for the stack check: writing N (1 to 80) to "sleepers"
 * starts N kthreads named "kp sleeper <i>" (with blanks, as comm may
 * have) that call kpatch_test_hooks_sleep_fn(), which sleeps until 1 is
 * written to "release"; kpatch_test_hooks_sleep_fn_new(), its
 * replacement, sleeps the same way.  Reading "sleepers" gives the number
 * of them inside either function, "sleeper_pids" their pids (of the last
 * batch started), "sleep_calls" "old=<n> new=<n>".  Writing "sleepers"
 * clears "release".  The threads stay until module exit.  With
 * "sleeper_comm" set, every thread of the next batches is named that
 * instead, byte for byte: a comm with a newline, say, as any task may
 * give itself (prctl(PR_SET_NAME)); a newline alone restores the default.
 *
 * With "keep_dir" set to 1, the post-patch hook takes a reference on the
 * kobject of its patch's directory, /sys/kernel/kpatch/patches/NAME, as a
 * directory the patch module made in it, or a release the kernel delays
 * (CONFIG_DEBUG_KOBJECT_RELEASE), would hold one: kept until 0 is written
 * to "keep_dir", or the module goes.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/compiler.h>
#include <linux/delay.h>
#include <linux/err.h>
#include <linux/irqflags.h>
#include <linux/kernel.h>
#include <linux/kernfs.h>
#include <linux/kobject.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/notifier.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/sysfs.h>
#include <linux/wait.h>

#include "kpatch.h"
#include "kpatch_test.h"

/* ---- functions to patch ---- */

noinline int kpatch_test_hooks_f(void)
{
	barrier();
	return kpatch_test_opaque(100);
}
EXPORT_SYMBOL_GPL(kpatch_test_hooks_f);

noinline int kpatch_test_hooks_f1(void)
{
	barrier();
	return kpatch_test_opaque(101);
}
EXPORT_SYMBOL_GPL(kpatch_test_hooks_f1);

noinline int kpatch_test_hooks_f2(void)
{
	barrier();
	return kpatch_test_opaque(102);
}
EXPORT_SYMBOL_GPL(kpatch_test_hooks_f2);

noinline int kpatch_test_hooks_f3(void)
{
	barrier();
	return kpatch_test_opaque(103);
}
EXPORT_SYMBOL_GPL(kpatch_test_hooks_f3);

static int kpatch_test_hooks_value_get(char *buffer,
				       const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE, "%d\n", kpatch_test_hooks_f());
}

static const struct kernel_param_ops kpatch_test_hooks_value_ops = {
	.get = kpatch_test_hooks_value_get,
};
module_param_cb(value, &kpatch_test_hooks_value_ops, NULL, 0444);
MODULE_PARM_DESC(value, "what kpatch_test_hooks_f() returns now");

/*
 * ---- hooks ----
 *
 * Exported, so that they stay out of line, address-taken (ENDBR on IBT
 * kernels) and in /proc/kallsyms under their names.
 */

static const char *const kpatch_test_hooks_names[KPATCH_NR_HOOKS] = {
	[KPATCH_PRE_PATCH] = "pre-patch",
	[KPATCH_STOP_PATCH] = "stop-patch",
	[KPATCH_UNDO_PATCH] = "undo-patch",
	[KPATCH_POST_PATCH] = "post-patch",
	[KPATCH_PRE_UNPATCH] = "pre-unpatch",
	[KPATCH_STOP_UNPATCH] = "stop-unpatch",
	[KPATCH_UNDO_UNPATCH] = "undo-unpatch",
	[KPATCH_POST_UNPATCH] = "post-unpatch",
};

static atomic_t kpatch_test_hooks_calls = ATOMIC_INIT(0);
static atomic_t kpatch_test_hooks_errors = ATOMIC_INIT(0);

/* "fail": the hook (-1: none), the patch name ("*": any), the errno */
static int kpatch_test_hooks_fail_hook = -1;
static char kpatch_test_hooks_fail_name[64];
static int kpatch_test_hooks_fail_err;

static int kpatch_test_hooks_fail_set(const char *val,
				      const struct kernel_param *kp)
{
	char buf[96], hook[16], name[64];
	int i, err;

	if (sysfs_streq(val, "none") || sysfs_streq(val, "")) {
		WRITE_ONCE(kpatch_test_hooks_fail_hook, -1);
		return 0;
	}
	/* commas for blanks: easier to pass on an insmod line */
	strscpy(buf, val, sizeof(buf));
	strreplace(buf, ',', ' ');
	if (sscanf(buf, "%15s %63s %d", hook, name, &err) != 3)
		return -EINVAL;
	for (i = 0; i < KPATCH_NR_HOOKS; i++)
		if (!strcmp(hook, kpatch_test_hooks_names[i]))
			break;
	if (i == KPATCH_NR_HOOKS)
		return -EINVAL;
	WRITE_ONCE(kpatch_test_hooks_fail_hook, -1);
	strscpy(kpatch_test_hooks_fail_name, name,
		sizeof(kpatch_test_hooks_fail_name));
	kpatch_test_hooks_fail_err = err;
	WRITE_ONCE(kpatch_test_hooks_fail_hook, i);
	return 0;
}

static int kpatch_test_hooks_fail_get(char *buffer,
				      const struct kernel_param *kp)
{
	int i = READ_ONCE(kpatch_test_hooks_fail_hook);

	if (i < 0)
		return scnprintf(buffer, PAGE_SIZE, "none\n");
	return scnprintf(buffer, PAGE_SIZE, "%s %s %d\n",
			 kpatch_test_hooks_names[i],
			 kpatch_test_hooks_fail_name,
			 kpatch_test_hooks_fail_err);
}

static const struct kernel_param_ops kpatch_test_hooks_fail_ops = {
	.set = kpatch_test_hooks_fail_set,
	.get = kpatch_test_hooks_fail_get,
};
module_param_cb(fail, &kpatch_test_hooks_fail_ops, NULL, 0644);
MODULE_PARM_DESC(fail, "\"HOOK NAME ERRNO\": that hook returns ERRNO for patch NAME (* any); \"none\"");

static int kpatch_test_hooks_atomic_get(char *buffer,
					const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE, "%d\n",
			 atomic_read((atomic_t *)kp->arg));
}

static const struct kernel_param_ops kpatch_test_hooks_atomic_ops = {
	.get = kpatch_test_hooks_atomic_get,
};
module_param_cb(calls, &kpatch_test_hooks_atomic_ops,
		&kpatch_test_hooks_calls, 0444);
MODULE_PARM_DESC(calls, "number of hook calls so far");
module_param_cb(errors, &kpatch_test_hooks_atomic_ops,
		&kpatch_test_hooks_errors, 0444);
MODULE_PARM_DESC(errors, "hook calls in the wrong context (interrupts on in a stop/undo hook, off in the others)");

static bool kpatch_test_hooks_atomic(enum kpatch_hook hook)
{
	return hook == KPATCH_STOP_PATCH || hook == KPATCH_UNDO_PATCH ||
	       hook == KPATCH_STOP_UNPATCH || hook == KPATCH_UNDO_UNPATCH;
}

/* "hold": the hook (-1: none) and the patch name ("*": any) */
static int kpatch_test_hooks_hold_hook = -1;
static char kpatch_test_hooks_hold_name[64];
static bool proceed;
static int waiting;
static bool notify;
static unsigned int max_wait_s = 60;
static DECLARE_WAIT_QUEUE_HEAD(kpatch_test_hooks_hold_wq);

static int kpatch_test_hooks_hold_set(const char *val,
				      const struct kernel_param *kp)
{
	char buf[96], hook[16], name[64];
	int i;

	WRITE_ONCE(proceed, false);
	if (sysfs_streq(val, "none") || sysfs_streq(val, "")) {
		WRITE_ONCE(kpatch_test_hooks_hold_hook, -1);
		return 0;
	}
	strscpy(buf, val, sizeof(buf));
	strreplace(buf, ',', ' ');
	if (sscanf(buf, "%15s %63s", hook, name) != 2)
		return -EINVAL;
	for (i = 0; i < KPATCH_NR_HOOKS; i++)
		if (!strcmp(hook, kpatch_test_hooks_names[i]))
			break;
	/* only the hooks that may sleep */
	if (i == KPATCH_NR_HOOKS || kpatch_test_hooks_atomic(i))
		return -EINVAL;
	WRITE_ONCE(kpatch_test_hooks_hold_hook, -1);
	strscpy(kpatch_test_hooks_hold_name, name,
		sizeof(kpatch_test_hooks_hold_name));
	WRITE_ONCE(kpatch_test_hooks_hold_hook, i);
	return 0;
}

static int kpatch_test_hooks_hold_get(char *buffer,
				      const struct kernel_param *kp)
{
	int i = READ_ONCE(kpatch_test_hooks_hold_hook);

	if (i < 0)
		return scnprintf(buffer, PAGE_SIZE, "none\n");
	return scnprintf(buffer, PAGE_SIZE, "%s %s\n",
			 kpatch_test_hooks_names[i],
			 kpatch_test_hooks_hold_name);
}

static const struct kernel_param_ops kpatch_test_hooks_hold_ops = {
	.set = kpatch_test_hooks_hold_set,
	.get = kpatch_test_hooks_hold_get,
};
module_param_cb(hold, &kpatch_test_hooks_hold_ops, NULL, 0644);
MODULE_PARM_DESC(hold, "\"HOOK NAME\": that pre or post hook waits for proceed (NAME * any); \"none\"");

static int kpatch_test_hooks_proceed_set(const char *val,
					 const struct kernel_param *kp)
{
	int ret = param_set_bool(val, kp);

	if (!ret)
		wake_up_all(&kpatch_test_hooks_hold_wq);
	return ret;
}

static const struct kernel_param_ops kpatch_test_hooks_proceed_ops = {
	.set = kpatch_test_hooks_proceed_set,
	.get = param_get_bool,
};
module_param_cb(proceed, &kpatch_test_hooks_proceed_ops, &proceed, 0644);
MODULE_PARM_DESC(proceed, "1 lets a held hook go on");
module_param(waiting, int, 0444);
MODULE_PARM_DESC(waiting, "1 while a held hook waits, 2 while it registers a module notifier");
module_param(notify, bool, 0644);
MODULE_PARM_DESC(notify, "1: a held hook registers and unregisters a module notifier once let go");
module_param(max_wait_s, uint, 0644);
MODULE_PARM_DESC(max_wait_s, "longest wait of a held hook, in seconds (default 60)");

static int kpatch_test_hooks_notifier_call(struct notifier_block *nb,
					   unsigned long action, void *data)
{
	return NOTIFY_DONE;
}

static struct notifier_block kpatch_test_hooks_nb = {
	.notifier_call = kpatch_test_hooks_notifier_call,
};

/* A held hook: wait for "proceed", then maybe (un)register a notifier. */
static int kpatch_test_hooks_wait(const char *what, const char *name)
{
	long left;
	int ret;

	WRITE_ONCE(waiting, 1);
	pr_info("hold: %s %s waits\n", what, name);
	left = wait_event_idle_timeout(kpatch_test_hooks_hold_wq,
				       READ_ONCE(proceed),
				       (long)max_wait_s * HZ);
	if (!left) {
		WRITE_ONCE(waiting, 0);
		pr_err("hold: %s %s: no proceed within %u s, giving up\n",
		       what, name, max_wait_s);
		return -ETIMEDOUT;
	}
	if (READ_ONCE(notify)) {
		WRITE_ONCE(waiting, 2);
		ret = register_module_notifier(&kpatch_test_hooks_nb);
		if (!ret)
			unregister_module_notifier(&kpatch_test_hooks_nb);
		pr_info("hold: %s %s: register_module_notifier() returned %d\n",
			what, name, ret);
	}
	WRITE_ONCE(waiting, 0);
	return 0;
}

static int kpatch_test_hooks_run(struct kpatch_module *kpmod,
				 enum kpatch_hook hook)
{
	const char *what = kpatch_test_hooks_names[hook];
	const char *name = kpmod->name ?: "(null)";
	void *p;
	int ret = 0;

	atomic_inc(&kpatch_test_hooks_calls);
	if (kpatch_test_hooks_atomic(hook)) {
		if (!irqs_disabled()) {
			atomic_inc(&kpatch_test_hooks_errors);
			pr_err("%s %s: called with interrupts on\n", what,
			       name);
		}
	} else {
		if (irqs_disabled()) {
			atomic_inc(&kpatch_test_hooks_errors);
			pr_err("%s %s: called with interrupts off\n", what,
			       name);
		} else {
			/* allowed here; the debug kernel checks that */
			usleep_range(1000, 2000);
			p = kmalloc(64, GFP_KERNEL);
			if (!p) {
				atomic_inc(&kpatch_test_hooks_errors);
				pr_err("%s %s: kmalloc failed\n", what, name);
			}
			kfree(p);
			if (READ_ONCE(kpatch_test_hooks_hold_hook) == hook &&
			    (!strcmp(kpatch_test_hooks_hold_name, "*") ||
			     !strcmp(kpatch_test_hooks_hold_name, name)))
				ret = kpatch_test_hooks_wait(what, name);
		}
	}

	if (!ret && READ_ONCE(kpatch_test_hooks_fail_hook) == hook &&
	    (!strcmp(kpatch_test_hooks_fail_name, "*") ||
	     !strcmp(kpatch_test_hooks_fail_name, name)))
		ret = kpatch_test_hooks_fail_err;
	if (ret)
		pr_info("%s %s returns %d\n", what, name, ret);
	else
		pr_info("%s %s\n", what, name);
	return ret;
}

noinline int kpatch_test_hooks_pre_patch(struct kpatch_module *kpmod)
{
	return kpatch_test_hooks_run(kpmod, KPATCH_PRE_PATCH);
}
EXPORT_SYMBOL_GPL(kpatch_test_hooks_pre_patch);

noinline int kpatch_test_hooks_stop_patch(struct kpatch_module *kpmod)
{
	return kpatch_test_hooks_run(kpmod, KPATCH_STOP_PATCH);
}
EXPORT_SYMBOL_GPL(kpatch_test_hooks_stop_patch);

noinline int kpatch_test_hooks_undo_patch(struct kpatch_module *kpmod)
{
	return kpatch_test_hooks_run(kpmod, KPATCH_UNDO_PATCH);
}
EXPORT_SYMBOL_GPL(kpatch_test_hooks_undo_patch);

/* keep_dir: the reference on a patch's directory, see the top */
static struct kobject *kpatch_test_hooks_dir;
static DEFINE_MUTEX(kpatch_test_hooks_dir_lock);
static bool keep_dir;

static void kpatch_test_hooks_dir_put(void)
{
	mutex_lock(&kpatch_test_hooks_dir_lock);
	kobject_put(kpatch_test_hooks_dir);
	kpatch_test_hooks_dir = NULL;
	mutex_unlock(&kpatch_test_hooks_dir_lock);
}

static int kpatch_test_hooks_keep_dir_set(const char *val,
					  const struct kernel_param *kp)
{
	int ret = param_set_bool(val, kp);

	if (!ret && !keep_dir)
		kpatch_test_hooks_dir_put();
	return ret;
}

static const struct kernel_param_ops kpatch_test_hooks_keep_dir_ops = {
	.set = kpatch_test_hooks_keep_dir_set,
	.get = param_get_bool,
};
module_param_cb(keep_dir, &kpatch_test_hooks_keep_dir_ops, &keep_dir, 0644);
MODULE_PARM_DESC(keep_dir, "1: the post-patch hook keeps a reference on its patch's directory");

/* The patch is enabled and kpatch holds its mutex: the directory is there. */
static void kpatch_test_hooks_keep(struct kpatch_module *kpmod)
{
	struct kernfs_node *kn;

	if (!READ_ONCE(keep_dir))
		return;
	kn = sysfs_get_dirent(kpatch_patches_kobj->sd, kpmod->name);
	if (!kn)
		return;
	mutex_lock(&kpatch_test_hooks_dir_lock);
	if (!kpatch_test_hooks_dir) {
		kpatch_test_hooks_dir = kobject_get(kn->priv);
		pr_info("keep_dir: a reference on patches/%s\n", kpmod->name);
	}
	mutex_unlock(&kpatch_test_hooks_dir_lock);
	sysfs_put(kn);
}

noinline int kpatch_test_hooks_post_patch(struct kpatch_module *kpmod)
{
	kpatch_test_hooks_keep(kpmod);
	return kpatch_test_hooks_run(kpmod, KPATCH_POST_PATCH);
}
EXPORT_SYMBOL_GPL(kpatch_test_hooks_post_patch);

noinline int kpatch_test_hooks_pre_unpatch(struct kpatch_module *kpmod)
{
	return kpatch_test_hooks_run(kpmod, KPATCH_PRE_UNPATCH);
}
EXPORT_SYMBOL_GPL(kpatch_test_hooks_pre_unpatch);

noinline int kpatch_test_hooks_stop_unpatch(struct kpatch_module *kpmod)
{
	return kpatch_test_hooks_run(kpmod, KPATCH_STOP_UNPATCH);
}
EXPORT_SYMBOL_GPL(kpatch_test_hooks_stop_unpatch);

noinline int kpatch_test_hooks_undo_unpatch(struct kpatch_module *kpmod)
{
	return kpatch_test_hooks_run(kpmod, KPATCH_UNDO_UNPATCH);
}
EXPORT_SYMBOL_GPL(kpatch_test_hooks_undo_unpatch);

noinline int kpatch_test_hooks_post_unpatch(struct kpatch_module *kpmod)
{
	return kpatch_test_hooks_run(kpmod, KPATCH_POST_UNPATCH);
}
EXPORT_SYMBOL_GPL(kpatch_test_hooks_post_unpatch);

/* ---- sleepers ---- */

/* Batches of up to 80 threads, 96 in all. */
#define KPATCH_TEST_HOOKS_MAX_SLEEPERS	96
#define KPATCH_TEST_HOOKS_BATCH		80

static bool release;
static DECLARE_WAIT_QUEUE_HEAD(kpatch_test_hooks_wq);

/* The sleepers wait on a queue, not in a polling loop: cheap on TCG. */
static int kpatch_test_hooks_release_set(const char *val,
					 const struct kernel_param *kp)
{
	int ret = param_set_bool(val, kp);

	if (!ret)
		wake_up_all(&kpatch_test_hooks_wq);
	return ret;
}

static const struct kernel_param_ops kpatch_test_hooks_release_ops = {
	.set = kpatch_test_hooks_release_set,
	.get = param_get_bool,
};
module_param_cb(release, &kpatch_test_hooks_release_ops, &release, 0644);
MODULE_PARM_DESC(release, "1 lets the sleepers leave the sleep functions");

/*
 * Read only by the "sleepers" setter: a module's parameters are set under
 * one lock, so it never sees a value being replaced.
 */
static char *sleeper_comm = "";
module_param(sleeper_comm, charp, 0644);
MODULE_PARM_DESC(sleeper_comm, "the comm of the sleepers started next (default, or a newline: \"kp sleeper <i>\")");

static atomic_t kpatch_test_hooks_sleeping = ATOMIC_INIT(0);
static atomic_t kpatch_test_hooks_old_calls = ATOMIC_INIT(0);
static atomic_t kpatch_test_hooks_new_calls = ATOMIC_INIT(0);
static struct task_struct *kpatch_test_hooks_threads[KPATCH_TEST_HOOKS_MAX_SLEEPERS];
static int kpatch_test_hooks_nthreads;
static int kpatch_test_hooks_batch_start, kpatch_test_hooks_batch_n;
static DEFINE_MUTEX(kpatch_test_hooks_mutex);

static void kpatch_test_hooks_sleep(void)
{
	wait_event_interruptible(kpatch_test_hooks_wq,
				 READ_ONCE(release) || kthread_should_stop());
}

noinline void kpatch_test_hooks_sleep_fn(void)
{
	atomic_inc(&kpatch_test_hooks_sleeping);
	kpatch_test_hooks_sleep();
	atomic_dec(&kpatch_test_hooks_sleeping);
	atomic_inc(&kpatch_test_hooks_old_calls);
}
EXPORT_SYMBOL_GPL(kpatch_test_hooks_sleep_fn);

noinline void kpatch_test_hooks_sleep_fn_new(void)
{
	atomic_inc(&kpatch_test_hooks_sleeping);
	kpatch_test_hooks_sleep();
	atomic_dec(&kpatch_test_hooks_sleeping);
	atomic_inc(&kpatch_test_hooks_new_calls);
}
EXPORT_SYMBOL_GPL(kpatch_test_hooks_sleep_fn_new);

static int kpatch_test_hooks_sleeper(void *data)
{
	kpatch_test_hooks_sleep_fn();
	wait_event_interruptible(kpatch_test_hooks_wq, kthread_should_stop());
	return 0;
}

static int kpatch_test_hooks_sleepers_set(const char *val,
					  const struct kernel_param *kp)
{
	struct task_struct *t;
	unsigned int n, i;
	int ret;

	ret = kstrtouint(val, 0, &n);
	if (ret)
		return ret;
	if (!n || n > KPATCH_TEST_HOOKS_BATCH)
		return -EINVAL;

	mutex_lock(&kpatch_test_hooks_mutex);
	if (kpatch_test_hooks_nthreads + n > KPATCH_TEST_HOOKS_MAX_SLEEPERS) {
		ret = -ENOSPC;
		goto out;
	}
	WRITE_ONCE(release, false);
	kpatch_test_hooks_batch_start = kpatch_test_hooks_nthreads;
	kpatch_test_hooks_batch_n = 0;
	for (i = 0; i < n; i++) {
		if (sysfs_streq(sleeper_comm, ""))
			t = kthread_run(kpatch_test_hooks_sleeper, NULL,
					"kp sleeper %u", i);
		else
			t = kthread_run(kpatch_test_hooks_sleeper, NULL, "%s",
					sleeper_comm);
		if (IS_ERR(t)) {
			ret = PTR_ERR(t);
			goto out;
		}
		kpatch_test_hooks_threads[kpatch_test_hooks_nthreads++] = t;
		kpatch_test_hooks_batch_n++;
	}
out:
	mutex_unlock(&kpatch_test_hooks_mutex);
	return ret;
}

static int kpatch_test_hooks_sleepers_get(char *buffer,
					  const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE, "%d\n",
			 atomic_read(&kpatch_test_hooks_sleeping));
}

static const struct kernel_param_ops kpatch_test_hooks_sleepers_ops = {
	.set = kpatch_test_hooks_sleepers_set,
	.get = kpatch_test_hooks_sleepers_get,
};
module_param_cb(sleepers, &kpatch_test_hooks_sleepers_ops, NULL, 0644);
MODULE_PARM_DESC(sleepers, "write N: start N threads sleeping in kpatch_test_hooks_sleep_fn(); read: how many sleep in it or its replacement");

static int kpatch_test_hooks_pids_get(char *buffer,
				      const struct kernel_param *kp)
{
	struct task_struct *t;
	int len = 0, i;

	mutex_lock(&kpatch_test_hooks_mutex);
	for (i = 0; i < kpatch_test_hooks_batch_n; i++) {
		t = kpatch_test_hooks_threads[kpatch_test_hooks_batch_start + i];
		len += scnprintf(buffer + len, PAGE_SIZE - len, "%s%d",
				 i ? " " : "", task_pid_nr(t));
	}
	len += scnprintf(buffer + len, PAGE_SIZE - len, "\n");
	mutex_unlock(&kpatch_test_hooks_mutex);
	return len;
}

static const struct kernel_param_ops kpatch_test_hooks_pids_ops = {
	.get = kpatch_test_hooks_pids_get,
};
module_param_cb(sleeper_pids, &kpatch_test_hooks_pids_ops, NULL, 0444);
MODULE_PARM_DESC(sleeper_pids, "pids of the last batch of sleepers");

static int kpatch_test_hooks_sleep_calls_get(char *buffer,
					     const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE, "old=%d new=%d\n",
			 atomic_read(&kpatch_test_hooks_old_calls),
			 atomic_read(&kpatch_test_hooks_new_calls));
}

static const struct kernel_param_ops kpatch_test_hooks_sleep_calls_ops = {
	.get = kpatch_test_hooks_sleep_calls_get,
};
module_param_cb(sleep_calls, &kpatch_test_hooks_sleep_calls_ops, NULL, 0444);
MODULE_PARM_DESC(sleep_calls, "\"old=<n> new=<n>\": completed calls of the sleep functions");

/* ---- api=1: kpatch_register() with hooks ---- */

static bool api;
module_param(api, bool, 0444);
MODULE_PARM_DESC(api, "register a patch with all hooks through kpatch_register() (default 0)");

static char *api_bad = "";
module_param(api_bad, charp, 0444);
MODULE_PARM_DESC(api_bad, "with api=1, a bad pre-patch hook (vmlinux, init or mid) or a struct kpatch_module or funcs array in init memory (initdata, initfuncs)");

static struct kpatch_func kpatch_test_hooks_funcs[1];

static struct kpatch_module kpatch_test_hooks_kpmod = {
	.mod = THIS_MODULE,
	.funcs = kpatch_test_hooks_funcs,
	.num_funcs = ARRAY_SIZE(kpatch_test_hooks_funcs),
	.hooks = {
		[KPATCH_PRE_PATCH] = kpatch_test_hooks_pre_patch,
		[KPATCH_STOP_PATCH] = kpatch_test_hooks_stop_patch,
		[KPATCH_UNDO_PATCH] = kpatch_test_hooks_undo_patch,
		[KPATCH_POST_PATCH] = kpatch_test_hooks_post_patch,
		[KPATCH_PRE_UNPATCH] = kpatch_test_hooks_pre_unpatch,
		[KPATCH_STOP_UNPATCH] = kpatch_test_hooks_stop_unpatch,
		[KPATCH_UNDO_UNPATCH] = kpatch_test_hooks_undo_unpatch,
		[KPATCH_POST_UNPATCH] = kpatch_test_hooks_post_unpatch,
	},
};

/*
 * A function that nothing calls through a pointer: static, not
 * address-taken, so on kernels with Indirect Branch Tracking it has no
 * ENDBR, and kpatch must refuse it as a hook (an indirect call to it would
 * fault).  The module's init calls it once, directly, so that it exists;
 * __noclone keeps its name in /proc/kallsyms.  "ibt" says whether the
 * kernel tracks indirect branches.
 */
static bool kpatch_test_hooks_plain_ran;

static noinline __noclone int kpatch_test_hooks_plain(struct kpatch_module *kpmod)
{
	WRITE_ONCE(kpatch_test_hooks_plain_ran, true);
	return kpmod ? kpatch_test_hooks_run(kpmod, KPATCH_PRE_PATCH) : 0;
}

static bool ibt = IS_ENABLED(CONFIG_X86_KERNEL_IBT);
module_param(ibt, bool, 0444);
MODULE_PARM_DESC(ibt, "whether the kernel has Indirect Branch Tracking (read-only)");

/*
 * copies in init memory: kpatch must refuse to keep a pointer to the
 * struct kpatch_module there, and may read the funcs array only while
 * kpatch_register() runs
 */
static struct kpatch_module kpatch_test_hooks_init_kpmod __initdata;
static struct kpatch_func
kpatch_test_hooks_init_funcs[ARRAY_SIZE(kpatch_test_hooks_funcs)] __initdata;

/* a hook in __init text, which kpatch must refuse */
static int __init kpatch_test_hooks_init_hook(struct kpatch_module *kpmod)
{
	return kpatch_test_hooks_run(kpmod, KPATCH_PRE_PATCH);
}

static int __init kpatch_test_hooks_api(void)
{
	static struct kpatch_module kpmod_before;
	static struct kpatch_func funcs_before[ARRAY_SIZE(kpatch_test_hooks_funcs)];
	struct kpatch_module *kpmod = &kpatch_test_hooks_kpmod;
	int ret;

	kpatch_test_hooks_funcs[0].old_addr = (unsigned long)kpatch_test_value_a;
	kpatch_test_hooks_funcs[0].new_addr = (unsigned long)kpatch_test_hooks_f1;

	if (!strcmp(api_bad, "vmlinux")) {
		kpmod->hooks[KPATCH_PRE_PATCH] =
			(kpatch_hook_t)(unsigned long)kthread_should_stop;
	} else if (!strcmp(api_bad, "init")) {
		kpmod->hooks[KPATCH_PRE_PATCH] = kpatch_test_hooks_init_hook;
	} else if (!strcmp(api_bad, "mid")) {
		kpmod->hooks[KPATCH_PRE_PATCH] = (kpatch_hook_t)
			((unsigned long)kpatch_test_hooks_pre_patch + 1);
	} else if (!strcmp(api_bad, "initdata")) {
		kpatch_test_hooks_init_kpmod = *kpmod;
		kpmod = &kpatch_test_hooks_init_kpmod;
	} else if (!strcmp(api_bad, "initfuncs")) {
		memcpy(kpatch_test_hooks_init_funcs, kpatch_test_hooks_funcs,
		       sizeof(kpatch_test_hooks_funcs));
		kpmod->funcs = kpatch_test_hooks_init_funcs;
	} else if (*api_bad) {
		pr_err("api_bad=%s: must be vmlinux, init, mid, initdata or initfuncs\n",
		       api_bad);
		return -EINVAL;
	}
	if (*api_bad)
		pr_info("api_bad=%s: pre-patch hook %pS\n", api_bad,
			kpmod->hooks[KPATCH_PRE_PATCH]);

	memcpy(&kpmod_before, kpmod, sizeof(kpmod_before));
	memcpy(funcs_before, kpmod->funcs, sizeof(funcs_before));
	ret = kpatch_register(kpmod, false);
	if (!ret) {
		pr_info("kpatch_register() succeeded\n");
		return 0;
	}
	pr_info("kpatch_register() failed: %d\n", ret);
	if (!memcmp(&kpmod_before, kpmod, sizeof(kpmod_before)) &&
	    !memcmp(funcs_before, kpmod->funcs, sizeof(funcs_before))) {
		pr_info("structures intact after failed register (err %d)\n",
			ret);
		kpatch_test_hooks_kpmod.funcs = kpatch_test_hooks_funcs;
		return 0;
	}
	pr_err("structures changed after failed register (err %d)\n", ret);
	return -EINVAL;
}

static int __init kpatch_test_hooks_init(void)
{
	kpatch_test_hooks_plain(NULL);
	if (api)
		return kpatch_test_hooks_api();
	return 0;
}

static void __exit kpatch_test_hooks_exit(void)
{
	int i, ret;

	if (kpatch_test_hooks_kpmod.enabled) {
		ret = kpatch_unregister(&kpatch_test_hooks_kpmod);
		if (ret)
			pr_err("kpatch_unregister() failed: %d\n", ret);
	}
	WRITE_ONCE(release, true);
	for (i = 0; i < kpatch_test_hooks_nthreads; i++)
		kthread_stop(kpatch_test_hooks_threads[i]);
	kpatch_test_hooks_dir_put();
}

module_init(kpatch_test_hooks_init);
module_exit(kpatch_test_hooks_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kpatch selftest: hooks of a patch, and sleepers for the stack check");
