// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_test_many - thousands of small functions for the kpatch
 * selftests (test-tombstones.sh): enough distinct functions to fill
 * kpatch's direct-call table.
 *
 * kpatch_test_many_funcs.c is written at build time (see Kbuild): it holds
 * the functions kpatch_test_many_f0000() ... kpatch_test_many_f<N-1>(),
 * where f<i> returns i, and the table kpatch_test_many_funcs[] of them.
 * They are static, so their names are in /proc/kallsyms with type t, and
 * address-taken, so they keep their ENDBR on IBT kernels.
 * kpatch_test_many_new() (KPATCH_TEST_MANY_NEW, 1000000) replaces any of
 * them.
 *
 * Parameters: count, the number of functions; index, a list of up to
 * KPATCH_TEST_MANY_SPOT indices ("0,37,99"); values, which calls the
 * functions at those indices and prints what they return ("0 37 99", or
 * "1000000 1000000 1000000" while they are patched).
 */

#include <linux/compiler.h>
#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>

#include "kpatch_test.h"

#define KPATCH_TEST_MANY_SPOT	16

noinline int kpatch_test_many_new(void)
{
	barrier();
	return KPATCH_TEST_MANY_NEW;
}

static unsigned int count;
module_param(count, uint, 0444);
MODULE_PARM_DESC(count, "number of functions kpatch_test_many_f<i>");

static int spot[KPATCH_TEST_MANY_SPOT];
static unsigned int nr_spot;
module_param_array_named(index, spot, int, &nr_spot, 0644);
MODULE_PARM_DESC(index, "indices of the functions that values calls");

static int values_set(const char *val, const struct kernel_param *kp)
{
	return -EPERM;
}

/* Called with the module's parameter lock held, as index is written. */
static int values_get(char *buffer, const struct kernel_param *kp)
{
	unsigned int i;
	int len = 0;

	for (i = 0; i < nr_spot; i++) {
		if (spot[i] < 0 || spot[i] >= kpatch_test_many_nr)
			return -EINVAL;
		len += scnprintf(buffer + len, PAGE_SIZE - len, "%s%d",
				 i ? " " : "", kpatch_test_many_funcs[spot[i]]());
	}
	len += scnprintf(buffer + len, PAGE_SIZE - len, "\n");
	return len;
}

static const struct kernel_param_ops values_ops = {
	.set = values_set,
	.get = values_get,
};

module_param_cb(values, &values_ops, NULL, 0444);
MODULE_PARM_DESC(values, "calls the functions at index: what they return");

static int __init kpatch_test_many_init(void)
{
	count = kpatch_test_many_nr;
	return 0;
}
module_init(kpatch_test_many_init);

static void __exit kpatch_test_many_exit(void)
{
}
module_exit(kpatch_test_many_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kpatch selftest: thousands of functions to patch");
