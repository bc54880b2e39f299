// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_test_patch_a - a patch module whose function and hooks are given
 * by address, for the kpatch selftests (test-hooks.sh, test-shadow.sh,
 * test-sibling.sh, demo.sh).  kpatch_test_patch_b and kpatch_test_patch_c
 * are the same module under other names (their sources include this
 * file): a patch is named after its module, and a test that needs
 * several patches at once loads several of them.
 *
 * Parameters, each address in hexadecimal (with or without 0x), as
 * /proc/kallsyms prints it:
 *   old, new      the function to replace and its replacement
 *   pre-patch, stop-patch, undo-patch, post-patch, pre-unpatch,
 *   stop-unpatch, undo-unpatch, post-unpatch
 *                 the hooks (struct kpatch_module.hooks); 0 or not given:
 *                 none.  The kernel takes "-" and "_" alike in a
 *                 parameter's name, so "pre-patch=ADDR" and
 *                 "pre_patch=ADDR" are the same.
 *   replace       1: kpatch_register(..., true), which removes every other
 *                 enabled patch in the same step
 *   defer         1: the init registers nothing; writing 1 to "enable"
 *                 calls kpatch_register() then, and the write fails with
 *                 its errno (for an address that must stay what it is
 *                 between the load and the register: a function of a
 *                 module unloaded after this one was loaded)
 *
 * The module takes no symbol from any other module but kpatch: the
 * modules that hold the functions and hooks are pinned by kpatch alone,
 * while the patch is enabled.
 *
 * If kpatch_register() fails, the module compares the struct kpatch_module
 * and its funcs array with copies made before the call, logs
 * "kpatch_register() failed: N" and "structures intact after failed
 * register (err N)" or "structures changed after failed register (err
 * N)", and the init (or the write to "enable") fails with N.
 *
 * kpatch pins the module while its patch is enabled: remove the patch
 * with "echo unpatch kpatch_test_patch_a > /sys/kernel/debug/kpatch/control",
 * then rmmod.  Module exit unregisters the patch if it is still enabled.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/string.h>

#include "kpatch.h"

static int kpatch_test_patch_addr_set(const char *val,
				      const struct kernel_param *kp)
{
	return kstrtoul(val, 16, kp->arg);
}

static int kpatch_test_patch_addr_get(char *buffer,
				      const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE, "%016lx\n",
			 *(unsigned long *)kp->arg);
}

static const struct kernel_param_ops kpatch_test_patch_addr_ops = {
	.set = kpatch_test_patch_addr_set,
	.get = kpatch_test_patch_addr_get,
};

static unsigned long old, new;
module_param_cb(old, &kpatch_test_patch_addr_ops, &old, 0444);
MODULE_PARM_DESC(old, "address of the function to replace");
module_param_cb(new, &kpatch_test_patch_addr_ops, &new, 0444);
MODULE_PARM_DESC(new, "address of its replacement");

static unsigned long kpatch_test_patch_hooks[KPATCH_NR_HOOKS];

module_param_cb(pre_patch, &kpatch_test_patch_addr_ops,
		&kpatch_test_patch_hooks[KPATCH_PRE_PATCH], 0444);
MODULE_PARM_DESC(pre_patch, "address of the pre-patch hook");
module_param_cb(stop_patch, &kpatch_test_patch_addr_ops,
		&kpatch_test_patch_hooks[KPATCH_STOP_PATCH], 0444);
MODULE_PARM_DESC(stop_patch, "address of the stop-patch hook");
module_param_cb(undo_patch, &kpatch_test_patch_addr_ops,
		&kpatch_test_patch_hooks[KPATCH_UNDO_PATCH], 0444);
MODULE_PARM_DESC(undo_patch, "address of the undo-patch hook");
module_param_cb(post_patch, &kpatch_test_patch_addr_ops,
		&kpatch_test_patch_hooks[KPATCH_POST_PATCH], 0444);
MODULE_PARM_DESC(post_patch, "address of the post-patch hook");
module_param_cb(pre_unpatch, &kpatch_test_patch_addr_ops,
		&kpatch_test_patch_hooks[KPATCH_PRE_UNPATCH], 0444);
MODULE_PARM_DESC(pre_unpatch, "address of the pre-unpatch hook");
module_param_cb(stop_unpatch, &kpatch_test_patch_addr_ops,
		&kpatch_test_patch_hooks[KPATCH_STOP_UNPATCH], 0444);
MODULE_PARM_DESC(stop_unpatch, "address of the stop-unpatch hook");
module_param_cb(undo_unpatch, &kpatch_test_patch_addr_ops,
		&kpatch_test_patch_hooks[KPATCH_UNDO_UNPATCH], 0444);
MODULE_PARM_DESC(undo_unpatch, "address of the undo-unpatch hook");
module_param_cb(post_unpatch, &kpatch_test_patch_addr_ops,
		&kpatch_test_patch_hooks[KPATCH_POST_UNPATCH], 0444);
MODULE_PARM_DESC(post_unpatch, "address of the post-unpatch hook");

static bool replace;
module_param(replace, bool, 0444);
MODULE_PARM_DESC(replace, "replace every other enabled patch (default 0)");

static bool defer;
module_param(defer, bool, 0444);
MODULE_PARM_DESC(defer, "register when 1 is written to enable, not in the init (default 0)");

static struct kpatch_func kpatch_test_patch_funcs[1];

static struct kpatch_module kpatch_test_patch_kpmod = {
	.mod = THIS_MODULE,
	.funcs = kpatch_test_patch_funcs,
	.num_funcs = ARRAY_SIZE(kpatch_test_patch_funcs),
};

/* The copies a failed kpatch_register() is compared with. */
static struct kpatch_module kpatch_test_patch_kpmod_before;
static struct kpatch_func
kpatch_test_patch_funcs_before[ARRAY_SIZE(kpatch_test_patch_funcs)];

static int kpatch_test_patch_register(void)
{
	struct kpatch_module *kpmod = &kpatch_test_patch_kpmod;
	int i, ret;

	kpatch_test_patch_funcs[0].old_addr = old;
	kpatch_test_patch_funcs[0].new_addr = new;
	for (i = 0; i < KPATCH_NR_HOOKS; i++)
		kpmod->hooks[i] = (kpatch_hook_t)kpatch_test_patch_hooks[i];

	memcpy(&kpatch_test_patch_kpmod_before, kpmod, sizeof(*kpmod));
	memcpy(kpatch_test_patch_funcs_before, kpatch_test_patch_funcs,
	       sizeof(kpatch_test_patch_funcs));
	ret = kpatch_register(kpmod, replace);
	if (!ret)
		return 0;
	pr_info("kpatch_register() failed: %d\n", ret);
	if (!memcmp(&kpatch_test_patch_kpmod_before, kpmod, sizeof(*kpmod)) &&
	    !memcmp(kpatch_test_patch_funcs_before, kpatch_test_patch_funcs,
		    sizeof(kpatch_test_patch_funcs)))
		pr_info("structures intact after failed register (err %d)\n",
			ret);
	else
		pr_err("structures changed after failed register (err %d)\n",
		       ret);
	return ret;
}

/* defer=1: writing 1 registers the patch; the write returns its errno. */
static int kpatch_test_patch_enable_set(const char *val,
					const struct kernel_param *kp)
{
	bool on;
	int ret;

	ret = kstrtobool(val, &on);
	if (ret)
		return ret;
	if (!on || !defer)
		return -EINVAL;
	return kpatch_test_patch_register();
}

static const struct kernel_param_ops kpatch_test_patch_enable_ops = {
	.set = kpatch_test_patch_enable_set,
};
module_param_cb(enable, &kpatch_test_patch_enable_ops, NULL, 0200);
MODULE_PARM_DESC(enable, "with defer=1, write 1: register the patch now");

static int __init kpatch_test_patch_init(void)
{
	return defer ? 0 : kpatch_test_patch_register();
}

static void __exit kpatch_test_patch_exit(void)
{
	int ret;

	if (kpatch_test_patch_kpmod.enabled) {
		ret = kpatch_unregister(&kpatch_test_patch_kpmod);
		if (ret)
			pr_err("kpatch_unregister() failed: %d\n", ret);
	}
}

module_init(kpatch_test_patch_init);
module_exit(kpatch_test_patch_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kpatch selftest: a patch module whose function and hooks are given by address");
