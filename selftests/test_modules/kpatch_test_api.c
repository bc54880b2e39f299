// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_test_api - a patch module that uses kpatch's in-kernel API.
 *
 * On load it registers, with kpatch_register(), a patch that redirects
 * kpatch_test_target's kpatch_test_value_a() (returns 1) to
 * kpatch_test_api_value_a() (returns 31) and, with which=ab or which=b,
 * kpatch_test_value_b() (returns 2) to kpatch_test_api_value_b() (32).
 * With replace=1 every other enabled patch is removed in the same step.
 *
 * With fail_init=1 the init fails (-EINVAL) after kpatch_register() has
 * succeeded: the module is freed right away, and kpatch must take the
 * patch out as the module goes, or the patch points into freed memory.
 *
 * kpatch pins this module while the patch is enabled; remove it with
 * "echo unpatch kpatch_test_api > /sys/kernel/debug/kpatch/control",
 * then rmmod.  Module exit unregisters the patch only if it is still
 * enabled.
 *
 * Needs kpatch.ko and kpatch_test_target.ko loaded first.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/compiler.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/string.h>

#include "kpatch.h"
#include "kpatch_test.h"

static bool replace;
module_param(replace, bool, 0444);
MODULE_PARM_DESC(replace, "replace all other enabled patches (default 0)");

static char *which = "a";
module_param(which, charp, 0444);
MODULE_PARM_DESC(which, "functions to patch: a, b or ab (default a)");

static bool fail_init;
module_param(fail_init, bool, 0444);
MODULE_PARM_DESC(fail_init, "fail the init after a successful kpatch_register() (default 0)");

static noinline int kpatch_test_api_value_a(void)
{
	barrier();
	return 31;
}

static noinline int kpatch_test_api_value_b(void)
{
	barrier();
	return 32;
}

static struct kpatch_func kpatch_test_api_funcs[2];

static struct kpatch_module kpatch_test_api_kpmod = {
	.mod = THIS_MODULE,
	.funcs = kpatch_test_api_funcs,
};

static int __init kpatch_test_api_init(void)
{
	struct kpatch_func *f = kpatch_test_api_funcs;
	int ret;

	if (strcmp(which, "a") && strcmp(which, "b") && strcmp(which, "ab")) {
		pr_err("which=%s: must be a, b or ab\n", which);
		return -EINVAL;
	}

	if (strchr(which, 'a')) {
		f->old_addr = (unsigned long)kpatch_test_value_a;
		f->new_addr = (unsigned long)kpatch_test_api_value_a;
		f++;
	}
	if (strchr(which, 'b')) {
		f->old_addr = (unsigned long)kpatch_test_value_b;
		f->new_addr = (unsigned long)kpatch_test_api_value_b;
		f++;
	}
	kpatch_test_api_kpmod.num_funcs = f - kpatch_test_api_funcs;

	ret = kpatch_register(&kpatch_test_api_kpmod, replace);
	if (ret) {
		pr_info("kpatch_register() failed: %d\n", ret);
		return ret;
	}
	if (fail_init) {
		pr_info("fail_init=1: init fails after kpatch_register()\n");
		return -EINVAL;
	}
	return 0;
}

static void __exit kpatch_test_api_exit(void)
{
	int ret;

	if (!kpatch_test_api_kpmod.enabled)
		return;

	ret = kpatch_unregister(&kpatch_test_api_kpmod);
	if (ret)
		pr_err("kpatch_unregister() failed: %d\n", ret);
}

module_init(kpatch_test_api_init);
module_exit(kpatch_test_api_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kpatch selftest: patch module using kpatch_register()");
