// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_test_sib_new - a new function that leaves by a sibling call, for
 * the kpatch selftests (test-sibling.sh).
 *
 * kpatch_test_sib_fn_new() replaces kpatch_test_sib.ko's
 * kpatch_test_sib_fn().  It is written in asm so that it is the same on
 * every kernel and compiler: its whole body is "jmp
 * kpatch_test_sib_helper", so once a task is in kpatch_test_sib_helper()
 * no frame of kpatch_test_sib_fn_new() is on its stack; the helper
 * returns straight to the caller of the patched function.  The stack
 * check can see that the task still runs this module's code only by
 * looking at the whole module text.
 *
 * kpatch_test_sib_helper() sets "state" to 1, sleeps while the "hold"
 * parameter is 1 (or until its kthread is told to stop), sets "state" to
 * 2 and returns 2 (kpatch_test_sib_fn() returns 1).
 *
 * kpatch_test_sib_other() returns 41; it is a second new function in
 * this module, for kpatch_test_target's kpatch_test_value_b() (2), so
 * that two patches can pin the module.  It is also an old function, for a
 * patch that pins this module only as the module of an old function
 * (test-sibling.sh).
 *
 * kpatch_test_sib_hook() does nothing and returns 0: a hook, for a patch
 * that pins this module only as the module of a hook (test-sibling.sh).
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/compiler.h>
#include <linux/kthread.h>
#include <linux/linkage.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/sched.h>
#include <asm/ibt.h>

#include "kpatch_test.h"

#define KPATCH_SIB_IN_HELPER	1
#define KPATCH_SIB_LEFT_HELPER	2

static bool hold;
module_param(hold, bool, 0644);
MODULE_PARM_DESC(hold, "1 makes kpatch_test_sib_helper() wait until it is 0");

static int state;
module_param(state, int, 0444);
MODULE_PARM_DESC(state, "0 never called, 1 in kpatch_test_sib_helper(), 2 left it");

/*
 * Only ever called by kpatch_sib's kthread (kthread_should_stop() wants a
 * kthread), through kpatch_test_sib_fn_new().
 */
noinline int kpatch_test_sib_helper(void)
{
	WRITE_ONCE(state, KPATCH_SIB_IN_HELPER);
	while (READ_ONCE(hold) && !kthread_should_stop())
		schedule_timeout_interruptible(HZ / 20);
	WRITE_ONCE(state, KPATCH_SIB_LEFT_HELPER);
	return kpatch_test_opaque(2);
}

/*
 * The new function, entered (never called) from kpatch's redirect: an
 * ENDBR, as for any function whose address is taken, then the sibling
 * call.  No stack frame, so nothing for objtool or ORC to describe.
 */
asm("	.pushsection	.text, \"ax\", @progbits\n"
"	.globl		kpatch_test_sib_fn_new\n"
"	.type		kpatch_test_sib_fn_new, @function\n"
"kpatch_test_sib_fn_new:\n"
	ASM_ENDBR
"	jmp		kpatch_test_sib_helper\n"
"	.size		kpatch_test_sib_fn_new, .-kpatch_test_sib_fn_new\n"
"	.popsection\n"
);

noinline int kpatch_test_sib_other(void)
{
	barrier();
	return kpatch_test_opaque(41);
}

/*
 * Exported, so that its address is taken and it keeps its ENDBR on
 * kernels with IBT: kpatch calls hooks through a pointer.
 */
noinline int kpatch_test_sib_hook(struct kpatch_module *kpmod)
{
	barrier();
	return kpatch_test_opaque(0);
}
EXPORT_SYMBOL_GPL(kpatch_test_sib_hook);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kpatch selftest: a new function that makes a sibling call");
