// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_test_shadow - a patch that adds a field to a structure, as
 * livepatch's shadow data, for the kpatch selftests (test-shadow.sh), the
 * README's "A patch that changes data" and the fuzzer (test-fuzz.sh).
 *
 * The module has three objects of struct kpatch_test_shadow_obj and an
 * "old" function, kpatch_test_shadow_touch(), that counts calls in the
 * object's own field.  Writing an index (0, 1 or 2) to the parameter
 * "touch" calls it on that object.
 *
 * The "new" function, kpatch_test_shadow_touch_new(), does the same and
 * also counts the calls it handled in a field the structure does not have:
 * an int attached to the object with klp_shadow_get_or_alloc() (the
 * kernel's livepatch shadow variables, CONFIG_LIVEPATCH).  Nothing in this
 * module calls it directly; a test patches the old function with it.
 *
 * The post-unpatch hook, kpatch_test_shadow_post_unpatch(), frees every
 * shadow variable with klp_shadow_free_all(): it runs once no task runs
 * or can run the new function any more.  Its destructor counts what it
 * frees.
 *
 * Parameters (read):
 *   values  the objects' own counts, "v0 v1 v2"
 *   shadow  the shadow counts, "s0 s1 s2", "-" for an object without a
 *           shadow variable (klp_shadow_get() returned NULL)
 *   allocs  shadow variables allocated so far (by the constructor)
 *   frees   shadow variables freed so far (by the destructor)
 *   hooks   calls of this module's hooks: "pre-patch=N post-unpatch=N
 *           nop=N veto=N"
 *
 * kpatch_test_shadow_hook_nop() returns 0 and kpatch_test_shadow_hook_veto()
 * returns -EINVAL; they only count their calls.  The fuzzer writes their
 * addresses in the words that once gave a patch hooks on the control
 * file (HOOK=ADDR), and test-errors.sh in one such word: no call may
 * come of them.  kpatch_test_shadow_pre_patch() only logs.
 *
 * A patch module gives the hooks to kpatch (test-shadow.sh and the demo
 * load kpatch_test_patch_a with their addresses).
 */

#include <linux/atomic.h>
#include <linux/kernel.h>
#include <linux/livepatch.h>
#include <linux/module.h>
#include <linux/moduleparam.h>

#include "kpatch.h"
#include "kpatch_test.h"

#define KPATCH_TEST_SHADOW_ID	0x6b703133	/* "kp13" */
#define KPATCH_TEST_SHADOW_NOBJ	3

struct kpatch_test_shadow_obj {
	int id;
	int calls;
};

static struct kpatch_test_shadow_obj objs[KPATCH_TEST_SHADOW_NOBJ] = {
	{ .id = 0 }, { .id = 1 }, { .id = 2 },
};

static atomic_t shadow_allocs = ATOMIC_INIT(0);
static atomic_t shadow_frees = ATOMIC_INIT(0);
static atomic_t calls_pre_patch = ATOMIC_INIT(0);
static atomic_t calls_post_unpatch = ATOMIC_INIT(0);
static atomic_t calls_nop = ATOMIC_INIT(0);
static atomic_t calls_veto = ATOMIC_INIT(0);

/* The old function: counts in the object itself. */
noinline int kpatch_test_shadow_touch(struct kpatch_test_shadow_obj *obj)
{
	barrier();
	return ++obj->calls;
}

static int shadow_ctor(void *obj, void *shadow_data, void *ctor_data)
{
	int *count = shadow_data;

	*count = 0;
	atomic_inc(&shadow_allocs);
	return 0;
}

static void shadow_dtor(void *obj, void *shadow_data)
{
	atomic_inc(&shadow_frees);
}

/*
 * The new function: the old one's work, and a count of its own calls in
 * a shadow variable.  GFP_KERNEL: its only caller is touch_set() (process
 * context); a new function that may run in atomic context allocates with
 * GFP_ATOMIC or in a pre-patch hook.  Without memory it does the old
 * function's work only.
 */
noinline int kpatch_test_shadow_touch_new(struct kpatch_test_shadow_obj *obj)
{
	int *count;

	count = klp_shadow_get_or_alloc(obj, KPATCH_TEST_SHADOW_ID,
					sizeof(*count), GFP_KERNEL,
					shadow_ctor, NULL);
	if (count)
		++*count;
	return ++obj->calls;
}

noinline int kpatch_test_shadow_pre_patch(struct kpatch_module *kpmod)
{
	atomic_inc(&calls_pre_patch);
	pr_info("kpatch_test_shadow: pre-patch hook of '%s'\n", kpmod->name);
	return 0;
}

/*
 * The post-unpatch hook: no task runs kpatch_test_shadow_touch_new() now,
 * and none can start to, so nothing uses the shadow variables any more.
 */
noinline int kpatch_test_shadow_post_unpatch(struct kpatch_module *kpmod)
{
	int before = atomic_read(&shadow_frees);

	atomic_inc(&calls_post_unpatch);
	klp_shadow_free_all(KPATCH_TEST_SHADOW_ID, shadow_dtor);
	pr_info("kpatch_test_shadow: post-unpatch hook of '%s': %d shadow variable(s) freed\n",
		kpmod->name, atomic_read(&shadow_frees) - before);
	return 0;
}

noinline int kpatch_test_shadow_hook_nop(struct kpatch_module *kpmod)
{
	atomic_inc(&calls_nop);
	return 0;
}

noinline int kpatch_test_shadow_hook_veto(struct kpatch_module *kpmod)
{
	atomic_inc(&calls_veto);
	return -EINVAL;
}

/*
 * The hooks are called through pointers: taking their addresses here
 * keeps their ENDBR on kernels with Indirect Branch Tracking.
 */
static const kpatch_hook_t kpatch_test_shadow_hooks[] __used = {
	kpatch_test_shadow_pre_patch, kpatch_test_shadow_post_unpatch,
	kpatch_test_shadow_hook_nop, kpatch_test_shadow_hook_veto,
};

static int touch_set(const char *val, const struct kernel_param *kp)
{
	unsigned int i;
	int ret;

	ret = kstrtouint(val, 0, &i);
	if (ret)
		return ret;
	if (i >= KPATCH_TEST_SHADOW_NOBJ)
		return -EINVAL;
	kpatch_test_shadow_touch(&objs[i]);
	return 0;
}

static const struct kernel_param_ops touch_ops = {
	.set = touch_set,
};

module_param_cb(touch, &touch_ops, NULL, 0200);
MODULE_PARM_DESC(touch, "write an object's index: call kpatch_test_shadow_touch() on it");

static int values_get(char *buffer, const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE, "%d %d %d\n", objs[0].calls,
			 objs[1].calls, objs[2].calls);
}

static const struct kernel_param_ops values_ops = {
	.get = values_get,
};

module_param_cb(values, &values_ops, NULL, 0444);
MODULE_PARM_DESC(values, "the objects' own call counts");

static int shadow_get(char *buffer, const struct kernel_param *kp)
{
	int len = 0, i;

	for (i = 0; i < KPATCH_TEST_SHADOW_NOBJ; i++) {
		int *count = klp_shadow_get(&objs[i], KPATCH_TEST_SHADOW_ID);

		if (count)
			len += scnprintf(buffer + len, PAGE_SIZE - len, "%s%d",
					 i ? " " : "", *count);
		else
			len += scnprintf(buffer + len, PAGE_SIZE - len, "%s-",
					 i ? " " : "");
	}
	len += scnprintf(buffer + len, PAGE_SIZE - len, "\n");
	return len;
}

static const struct kernel_param_ops shadow_ops = {
	.get = shadow_get,
};

module_param_cb(shadow, &shadow_ops, NULL, 0444);
MODULE_PARM_DESC(shadow, "the shadow counts; - where klp_shadow_get() finds none");

static int atomic_param_get(char *buffer, const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE, "%d\n",
			 atomic_read((atomic_t *)kp->arg));
}

static const struct kernel_param_ops atomic_param_ops = {
	.get = atomic_param_get,
};

module_param_cb(allocs, &atomic_param_ops, &shadow_allocs, 0444);
MODULE_PARM_DESC(allocs, "shadow variables allocated");
module_param_cb(frees, &atomic_param_ops, &shadow_frees, 0444);
MODULE_PARM_DESC(frees, "shadow variables freed");

static int hooks_get(char *buffer, const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE,
			 "pre-patch=%d post-unpatch=%d nop=%d veto=%d\n",
			 atomic_read(&calls_pre_patch),
			 atomic_read(&calls_post_unpatch),
			 atomic_read(&calls_nop), atomic_read(&calls_veto));
}

static const struct kernel_param_ops hooks_ops = {
	.get = hooks_get,
};

module_param_cb(hooks, &hooks_ops, NULL, 0444);
MODULE_PARM_DESC(hooks, "calls of the hooks");

/*
 * Shadow variables left when the module goes (the new function ran, and
 * the patch was never removed, or without the post-unpatch hook) would
 * point at objects that no longer exist.
 */
static void __exit kpatch_test_shadow_exit(void)
{
	klp_shadow_free_all(KPATCH_TEST_SHADOW_ID, shadow_dtor);
}
module_exit(kpatch_test_shadow_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kpatch selftest: shadow data freed by a post-unpatch hook");
