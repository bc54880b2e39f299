// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_test_new - replacement ("new") functions for the kpatch
 * selftests.
 *
 * kpatch_test_cmdline_v1/v2/v3() replace vmlinux's cmdline_proc_show():
 * with one of them active, /proc/cmdline reads "kpatch-test v1" (v2, v3).
 *
 * kpatch_test_value_a_v1/v2/v3() (returning 11, 12, 13) and
 * kpatch_test_value_b_v1/v2() (21, 22) replace kpatch_test_target's
 * kpatch_test_value_a() (1) and kpatch_test_value_b() (2).
 *
 * All of them are exported, which keeps them out of line, in
 * /proc/kallsyms and address-taken (so they keep their ENDBR on IBT
 * kernels).  kpatch_test_new_data is a data object, used as a new
 * address that is not text.
 */

#include <linux/compiler.h>
#include <linux/module.h>
#include <linux/seq_file.h>

#include "kpatch_test.h"

static int kpatch_test_new_data __used = 0x4b50;

noinline int kpatch_test_cmdline_v1(struct seq_file *m, void *v)
{
	seq_puts(m, "kpatch-test v1\n");
	return 0;
}
EXPORT_SYMBOL_GPL(kpatch_test_cmdline_v1);

noinline int kpatch_test_cmdline_v2(struct seq_file *m, void *v)
{
	seq_puts(m, "kpatch-test v2\n");
	return 0;
}
EXPORT_SYMBOL_GPL(kpatch_test_cmdline_v2);

noinline int kpatch_test_cmdline_v3(struct seq_file *m, void *v)
{
	seq_puts(m, "kpatch-test v3\n");
	return 0;
}
EXPORT_SYMBOL_GPL(kpatch_test_cmdline_v3);

noinline int kpatch_test_value_a_v1(void)
{
	barrier();
	return 11;
}
EXPORT_SYMBOL_GPL(kpatch_test_value_a_v1);

noinline int kpatch_test_value_a_v2(void)
{
	barrier();
	return 12;
}
EXPORT_SYMBOL_GPL(kpatch_test_value_a_v2);

noinline int kpatch_test_value_a_v3(void)
{
	barrier();
	return 13;
}
EXPORT_SYMBOL_GPL(kpatch_test_value_a_v3);

noinline int kpatch_test_value_b_v1(void)
{
	barrier();
	return 21;
}
EXPORT_SYMBOL_GPL(kpatch_test_value_b_v1);

noinline int kpatch_test_value_b_v2(void)
{
	barrier();
	return 22;
}
EXPORT_SYMBOL_GPL(kpatch_test_value_b_v2);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kpatch selftest: replacement functions");
