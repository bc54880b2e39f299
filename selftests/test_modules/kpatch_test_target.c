// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_test_target - module-resident "old" functions for the kpatch
 * selftests.
 *
 * kpatch_test_value_a() returns 1 and kpatch_test_value_b() returns 2.
 * They are ordinary traceable functions, so kpatch can redirect them, and
 * exported, so kpatch_test_api can name them as old functions and
 * kpatch_test_stress can call them.  Reading the module parameter
 * /sys/module/kpatch_test_target/parameters/values calls both and prints
 * "a=<a> b=<b>", which shows the shell which version of each one runs.
 *
 * kpatch_test_value_notrace() is a function start that ftrace cannot
 * attach to; the error tests use it as an invalid old function.
 *
 * kpatch_test_target_data is a plain data object, used as an address
 * that is not text.
 */

#include <linux/compiler.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>

#include "kpatch_test.h"

static int kpatch_test_target_data __used = 0x4b50;

/*
 * The barrier() keeps the compiler from treating these functions as
 * const and folding or hoisting calls to them: every call must reach
 * the function entry, where ftrace can redirect it.  kpatch_test_opaque()
 * keeps values_get() from using the constant instead of what the call
 * returned.
 */
noinline int kpatch_test_value_a(void)
{
	barrier();
	return kpatch_test_opaque(1);
}
EXPORT_SYMBOL_GPL(kpatch_test_value_a);

noinline int kpatch_test_value_b(void)
{
	barrier();
	return kpatch_test_opaque(2);
}
EXPORT_SYMBOL_GPL(kpatch_test_value_b);

noinline notrace int kpatch_test_value_notrace(void)
{
	barrier();
	return kpatch_test_opaque(3);
}
EXPORT_SYMBOL_GPL(kpatch_test_value_notrace);

static int values_set(const char *val, const struct kernel_param *kp)
{
	return -EPERM;
}

static int values_get(char *buffer, const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE, "a=%d b=%d\n",
			 kpatch_test_value_a(), kpatch_test_value_b());
}

static const struct kernel_param_ops values_ops = {
	.set = values_set,
	.get = values_get,
};

module_param_cb(values, &values_ops, NULL, 0444);
MODULE_PARM_DESC(values, "calls the test functions: \"a=<a> b=<b>\"");

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kpatch selftest: old functions in a module");
