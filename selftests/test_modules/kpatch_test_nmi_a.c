// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_test_nmi_a - a patch module of two functions whose addresses and
 * hooks are given as parameters, for test-nmi.sh: a patch of
 * kpatch_test_nmi's f and g to one generation, with that generation's
 * hooks.  kpatch_test_nmi_b and kpatch_test_nmi_c are the same module
 * under other names (their sources include this file): a patch is named
 * after its module, and test-nmi.sh stacks two and replaces them with a
 * third.
 *
 * Parameters, each address in hexadecimal, as /proc/kallsyms prints it:
 *   old1, new1, old2, new2   the two functions to replace and their
 *                            replacements
 *   pre_patch, stop_patch, undo_patch, post_patch, pre_unpatch,
 *   stop_unpatch, undo_unpatch, post_unpatch
 *                            the hooks (struct kpatch_module.hooks); 0 or
 *                            not given: none
 *   replace                  1: kpatch_register(..., true), which removes
 *                            every other enabled patch in the same step
 *
 * The init registers nothing.  Writing 1 to "enable" calls
 * kpatch_register(), 0 kpatch_unregister(); the write fails with what
 * they returned.  The patch may also be removed with "unpatch <module
 * name>" on kpatch's control file, and registered again afterwards.
 *
 * The module takes no symbol from any other module but kpatch: the
 * module that holds the functions and hooks is pinned by kpatch alone,
 * while the patch is enabled.  Module exit unregisters the patch if it is
 * still enabled.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>

#include "kpatch.h"

static int kpatch_test_nmi_addr_set(const char *val,
				    const struct kernel_param *kp)
{
	return kstrtoul(val, 16, kp->arg);
}

static int kpatch_test_nmi_addr_get(char *buffer,
				    const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE, "%016lx\n",
			 *(unsigned long *)kp->arg);
}

static const struct kernel_param_ops kpatch_test_nmi_addr_ops = {
	.set = kpatch_test_nmi_addr_set,
	.get = kpatch_test_nmi_addr_get,
};

static unsigned long old1, new1, old2, new2;
module_param_cb(old1, &kpatch_test_nmi_addr_ops, &old1, 0444);
MODULE_PARM_DESC(old1, "address of the first function to replace");
module_param_cb(new1, &kpatch_test_nmi_addr_ops, &new1, 0444);
MODULE_PARM_DESC(new1, "address of its replacement");
module_param_cb(old2, &kpatch_test_nmi_addr_ops, &old2, 0444);
MODULE_PARM_DESC(old2, "address of the second function to replace");
module_param_cb(new2, &kpatch_test_nmi_addr_ops, &new2, 0444);
MODULE_PARM_DESC(new2, "address of its replacement");

static unsigned long kpatch_test_nmi_hooks[KPATCH_NR_HOOKS];

module_param_cb(pre_patch, &kpatch_test_nmi_addr_ops,
		&kpatch_test_nmi_hooks[KPATCH_PRE_PATCH], 0444);
MODULE_PARM_DESC(pre_patch, "address of the pre-patch hook");
module_param_cb(stop_patch, &kpatch_test_nmi_addr_ops,
		&kpatch_test_nmi_hooks[KPATCH_STOP_PATCH], 0444);
MODULE_PARM_DESC(stop_patch, "address of the stop-patch hook");
module_param_cb(undo_patch, &kpatch_test_nmi_addr_ops,
		&kpatch_test_nmi_hooks[KPATCH_UNDO_PATCH], 0444);
MODULE_PARM_DESC(undo_patch, "address of the undo-patch hook");
module_param_cb(post_patch, &kpatch_test_nmi_addr_ops,
		&kpatch_test_nmi_hooks[KPATCH_POST_PATCH], 0444);
MODULE_PARM_DESC(post_patch, "address of the post-patch hook");
module_param_cb(pre_unpatch, &kpatch_test_nmi_addr_ops,
		&kpatch_test_nmi_hooks[KPATCH_PRE_UNPATCH], 0444);
MODULE_PARM_DESC(pre_unpatch, "address of the pre-unpatch hook");
module_param_cb(stop_unpatch, &kpatch_test_nmi_addr_ops,
		&kpatch_test_nmi_hooks[KPATCH_STOP_UNPATCH], 0444);
MODULE_PARM_DESC(stop_unpatch, "address of the stop-unpatch hook");
module_param_cb(undo_unpatch, &kpatch_test_nmi_addr_ops,
		&kpatch_test_nmi_hooks[KPATCH_UNDO_UNPATCH], 0444);
MODULE_PARM_DESC(undo_unpatch, "address of the undo-unpatch hook");
module_param_cb(post_unpatch, &kpatch_test_nmi_addr_ops,
		&kpatch_test_nmi_hooks[KPATCH_POST_UNPATCH], 0444);
MODULE_PARM_DESC(post_unpatch, "address of the post-unpatch hook");

static bool replace;
module_param(replace, bool, 0444);
MODULE_PARM_DESC(replace, "replace every other enabled patch (default 0)");

static struct kpatch_func kpatch_test_nmi_funcs[2];

static struct kpatch_module kpatch_test_nmi_kpmod = {
	.mod = THIS_MODULE,
	.funcs = kpatch_test_nmi_funcs,
	.num_funcs = ARRAY_SIZE(kpatch_test_nmi_funcs),
};

/* 1: register the patch; 0: unregister it.  The write fails as they do. */
static int kpatch_test_nmi_enable_set(const char *val,
				      const struct kernel_param *kp)
{
	struct kpatch_module *kpmod = &kpatch_test_nmi_kpmod;
	bool on;
	int i, ret;

	ret = kstrtobool(val, &on);
	if (ret)
		return ret;
	if (!on)
		return kpatch_unregister(kpmod);
	kpatch_test_nmi_funcs[0].old_addr = old1;
	kpatch_test_nmi_funcs[0].new_addr = new1;
	kpatch_test_nmi_funcs[1].old_addr = old2;
	kpatch_test_nmi_funcs[1].new_addr = new2;
	for (i = 0; i < KPATCH_NR_HOOKS; i++)
		kpmod->hooks[i] = (kpatch_hook_t)kpatch_test_nmi_hooks[i];
	return kpatch_register(kpmod, replace);
}

static const struct kernel_param_ops kpatch_test_nmi_enable_ops = {
	.set = kpatch_test_nmi_enable_set,
};
module_param_cb(enable, &kpatch_test_nmi_enable_ops, NULL, 0200);
MODULE_PARM_DESC(enable, "write 1: kpatch_register() the patch; 0: kpatch_unregister() it");

static int __init kpatch_test_nmi_patch_init(void)
{
	return 0;
}

static void __exit kpatch_test_nmi_patch_exit(void)
{
	int ret;

	if (kpatch_test_nmi_kpmod.enabled) {
		ret = kpatch_unregister(&kpatch_test_nmi_kpmod);
		if (ret)
			pr_err("kpatch_unregister() failed: %d\n", ret);
	}
}

module_init(kpatch_test_nmi_patch_init);
module_exit(kpatch_test_nmi_patch_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kpatch selftest: a patch module of two functions, given with its hooks by address");
