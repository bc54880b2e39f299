// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_test_notify - a module notifier of the default priority, as
 * other modules and the kernel itself have, for the kpatch selftests of
 * the module loader (test-modstate.sh, test-hooks.sh).
 *
 * On each GOING notification of the module named in "watch" (the name
 * written there; writing it also clears "seen"), the notifier calls
 * kpatch_test_target's kpatch_test_value_a() and appends what it returned
 * to "seen": one number per notification, separated by blanks.  When the
 * watched module is a patch module whose init failed after
 * kpatch_register() succeeded, kpatch takes that patch out from its own
 * GOING notifier, and that one must run before every other: "seen" must
 * then read the old value, 1, never the patch's.
 *
 * With "linger" set to 1, the notifier then waits, still in that GOING
 * notification, until "linger" is 0 again or max_wait_s seconds have
 * passed; "lingering" reads 1 meanwhile.  The rmmod (or failed insmod) of
 * the watched module is then in the kernel's chain of module notifiers,
 * and a register_module_notifier() elsewhere waits until it has left it.
 *
 * Needs kpatch_test_target.ko; does not need kpatch.ko, so it can be
 * loaded before it (its notifier then comes first among those of its
 * priority).
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/jiffies.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/notifier.h>
#include <linux/sched.h>
#include <linux/string.h>

#include "kpatch_test.h"

static bool linger;
module_param(linger, bool, 0644);
MODULE_PARM_DESC(linger, "1: wait in the GOING notification of the watched module until 0");

static int lingering;
module_param(lingering, int, 0444);
MODULE_PARM_DESC(lingering, "1 while the notifier waits (linger)");

static unsigned int max_wait_s = 60;
module_param(max_wait_s, uint, 0644);
MODULE_PARM_DESC(max_wait_s, "longest wait with linger, in seconds (default 60)");

/* The watched module and what the notifier saw, under the mutex. */
static DEFINE_MUTEX(kpatch_test_notify_mutex);
static char kpatch_test_notify_watch[MODULE_NAME_LEN];
static char kpatch_test_notify_seen[256];

static int kpatch_test_notify_watch_set(const char *val,
					const struct kernel_param *kp)
{
	char name[MODULE_NAME_LEN];

	if (strscpy(name, val, sizeof(name)) < 0)
		return -EINVAL;
	mutex_lock(&kpatch_test_notify_mutex);
	strscpy(kpatch_test_notify_watch, strim(name),
		sizeof(kpatch_test_notify_watch));
	kpatch_test_notify_seen[0] = '\0';
	mutex_unlock(&kpatch_test_notify_mutex);
	return 0;
}

static int kpatch_test_notify_watch_get(char *buffer,
					const struct kernel_param *kp)
{
	int len;

	mutex_lock(&kpatch_test_notify_mutex);
	len = scnprintf(buffer, PAGE_SIZE, "%s\n", kpatch_test_notify_watch);
	mutex_unlock(&kpatch_test_notify_mutex);
	return len;
}

static const struct kernel_param_ops kpatch_test_notify_watch_ops = {
	.set = kpatch_test_notify_watch_set,
	.get = kpatch_test_notify_watch_get,
};
module_param_cb(watch, &kpatch_test_notify_watch_ops, NULL, 0644);
MODULE_PARM_DESC(watch, "name of the module whose GOING notifications to watch (clears seen)");

static int kpatch_test_notify_seen_get(char *buffer,
				       const struct kernel_param *kp)
{
	int len;

	mutex_lock(&kpatch_test_notify_mutex);
	len = scnprintf(buffer, PAGE_SIZE, "%s\n", kpatch_test_notify_seen);
	mutex_unlock(&kpatch_test_notify_mutex);
	return len;
}

static const struct kernel_param_ops kpatch_test_notify_seen_ops = {
	.get = kpatch_test_notify_seen_get,
};
module_param_cb(seen, &kpatch_test_notify_seen_ops, NULL, 0444);
MODULE_PARM_DESC(seen, "what kpatch_test_value_a() returned in each GOING notification of the watched module");

static void kpatch_test_notify_linger(const char *name)
{
	unsigned long end = jiffies + max_wait_s * HZ;

	if (!READ_ONCE(linger))
		return;
	WRITE_ONCE(lingering, 1);
	pr_info("lingering in the GOING notification of %s\n", name);
	while (READ_ONCE(linger) && time_before(jiffies, end))
		schedule_timeout_idle(HZ / 20);
	if (READ_ONCE(linger))
		pr_err("still lingering after %u s, going on\n", max_wait_s);
	WRITE_ONCE(lingering, 0);
}

static int kpatch_test_notify_call(struct notifier_block *nb,
				   unsigned long action, void *data)
{
	struct module *mod = data;
	size_t len;
	bool hit;
	int v = 0;

	if (action != MODULE_STATE_GOING)
		return NOTIFY_DONE;
	mutex_lock(&kpatch_test_notify_mutex);
	hit = !strcmp(mod->name, kpatch_test_notify_watch);
	if (hit) {
		v = kpatch_test_value_a();
		len = strlen(kpatch_test_notify_seen);
		scnprintf(kpatch_test_notify_seen + len,
			  sizeof(kpatch_test_notify_seen) - len, "%s%d",
			  len ? " " : "", v);
	}
	mutex_unlock(&kpatch_test_notify_mutex);
	if (!hit)
		return NOTIFY_DONE;
	pr_info("%s going: kpatch_test_value_a() returned %d\n", mod->name, v);
	kpatch_test_notify_linger(mod->name);
	return NOTIFY_OK;
}

/* The default priority, 0: as most module notifiers have. */
static struct notifier_block kpatch_test_notify_nb = {
	.notifier_call = kpatch_test_notify_call,
};

static int __init kpatch_test_notify_init(void)
{
	return register_module_notifier(&kpatch_test_notify_nb);
}

static void __exit kpatch_test_notify_exit(void)
{
	unregister_module_notifier(&kpatch_test_notify_nb);
}

module_init(kpatch_test_notify_init);
module_exit(kpatch_test_notify_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kpatch selftest: a module notifier that calls a patched function when a module goes");
