// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_test_sc - new functions whose jumps the kernel rewrites while
 * they are in use, for the kpatch selftests (test-staticcall.sh,
 * test-kprobed.sh).
 *
 * New functions for kpatch_test_target's kpatch_test_value_b() (2):
 *
 *	kpatch_test_sc_tail()	"return static_call(kpatch_test_sc_call)();":
 *				a sibling call of the module's static call,
 *				which the compiler emits as a jmp to the
 *				static call's trampoline and objtool records
 *				as a tail-call site, so that the kernel
 *				rewrites it into a jmp to the static call's
 *				target, and again on every
 *				static_call_update().  Both targets are in
 *				this module.
 *	kpatch_test_sc_near()	a jmp to kpatch_test_sc_near_helper(), the
 *				function right behind it: a short jmp (eb 00),
 *				on which a kprobe writes an INT3.  The helper
 *				calls kpatch_test_sc_slow() and returns what
 *				it returned plus 2 (63).
 *
 *	kpatch_test_sc_near_rj() jumps, always, over a return to the
 *				block right behind it, which is only "jmp
 *				kpatch_test_sc_far_helper" (32-bit): a
 *				kprobe there keeps an INT3 where padding may
 *				be ("rj_jmp" reads its offset, past the
 *				ENDBR).  The helper calls
 *				kpatch_test_sc_slow() and returns what it
 *				returned plus 3 (64).
 *
 *	kpatch_test_sc_slow()	sleeps while "hold" is 1, returns 61
 *	kpatch_test_sc_quick()	returns 62
 *
 * "target" reads and sets the static call's target ("slow", the default,
 * or "quick").  kpatch_test_sc_slow() records the task that came in
 * ("pid", "comm"; "state" 1 while it sleeps, 2 once it left).  Like a
 * patch module, the module does not know who came in: its exit lets no
 * sleeper go (kpatch must keep it loaded while one can be in its code).
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/compiler.h>
#include <linux/kernel.h>
#include <linux/linkage.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/static_call.h>
#include <linux/string.h>
#include <linux/wait.h>
#include <asm/ibt.h>

#include "kpatch_test.h"

#define KPATCH_SC_IN	1
#define KPATCH_SC_LEFT	2

static DECLARE_WAIT_QUEUE_HEAD(kpatch_sc_wq);

static bool hold;

static int kpatch_sc_hold_set(const char *val, const struct kernel_param *kp)
{
	int ret = param_set_bool(val, kp);

	if (!ret)
		wake_up_all(&kpatch_sc_wq);
	return ret;
}

static const struct kernel_param_ops kpatch_sc_hold_ops = {
	.set = kpatch_sc_hold_set,
	.get = param_get_bool,
};
module_param_cb(hold, &kpatch_sc_hold_ops, &hold, 0644);
MODULE_PARM_DESC(hold, "1 makes kpatch_test_sc_slow() sleep until it is 0");

static int state;
module_param(state, int, 0444);
MODULE_PARM_DESC(state, "1 while a task sleeps in kpatch_test_sc_slow(), 2 once it left");

static int pid;
module_param(pid, int, 0444);
MODULE_PARM_DESC(pid, "pid of the task that last entered kpatch_test_sc_slow()");

static char comm[TASK_COMM_LEN];
module_param_string(comm, comm, sizeof(comm), 0444);
MODULE_PARM_DESC(comm, "name of the task that last entered kpatch_test_sc_slow()");

noinline int kpatch_test_sc_slow(void)
{
	WRITE_ONCE(pid, task_pid_nr(current));
	get_task_comm(comm, current);
	WRITE_ONCE(state, KPATCH_SC_IN);
	wait_event_interruptible(kpatch_sc_wq, !READ_ONCE(hold));
	WRITE_ONCE(state, KPATCH_SC_LEFT);
	return kpatch_test_opaque(61);
}

noinline int kpatch_test_sc_quick(void)
{
	barrier();
	return kpatch_test_opaque(62);
}

DEFINE_STATIC_CALL(kpatch_test_sc_call, kpatch_test_sc_slow);

/* kpatch_test_sc_near_rj() takes its jump while this is not 0: always. */
static int __used kpatch_test_sc_rj_go = 1;

/*
 * Written in asm so that they are the same on every compiler: an ENDBR,
 * as for any function whose address is taken, then for
 * kpatch_test_sc_tail() the sibling call as GCC emits it for "return
 * static_call(kpatch_test_sc_call)();", for kpatch_test_sc_near() a
 * sibling call of the function right behind it, local to this file as a
 * static function is.  They are entered from kpatch's redirect, never
 * called from C here.
 */
asm("	.pushsection	.text, \"ax\", @progbits\n"
"	.globl		kpatch_test_sc_tail\n"
"	.type		kpatch_test_sc_tail, @function\n"
"kpatch_test_sc_tail:\n"
	ASM_ENDBR
"	jmp		" STATIC_CALL_TRAMP_STR(kpatch_test_sc_call) "\n"
"	.size		kpatch_test_sc_tail, .-kpatch_test_sc_tail\n"
"\n"
"	.globl		kpatch_test_sc_near\n"
"	.type		kpatch_test_sc_near, @function\n"
"kpatch_test_sc_near:\n"
	ASM_ENDBR
"	jmp		kpatch_test_sc_near_helper\n"
"	.size		kpatch_test_sc_near, .-kpatch_test_sc_near\n"
"\n"
"	.type		kpatch_test_sc_near_helper, @function\n"
"kpatch_test_sc_near_helper:\n"
"	call		kpatch_test_sc_slow\n"
"	addl		$2, %eax\n"
	ASM_RET
"	.size		kpatch_test_sc_near_helper, .-kpatch_test_sc_near_helper\n"
"\n"
"	.globl		kpatch_test_sc_near_rj\n"
"	.type		kpatch_test_sc_near_rj, @function\n"
"kpatch_test_sc_near_rj:\n"
	ASM_ENDBR
"	cmpl		$0, kpatch_test_sc_rj_go(%rip)\n"
"	jne		2f\n"
"	xorl		%eax, %eax\n"
	ASM_RET
"2:	{disp32} jmp	kpatch_test_sc_far_helper\n"
"	.size		kpatch_test_sc_near_rj, .-kpatch_test_sc_near_rj\n"
"	.pushsection	.rodata, \"a\", @progbits\n"
"	.balign		4\n"
"kpatch_test_sc_near_rj_off:\n"
"	.long		2b - kpatch_test_sc_near_rj\n"
"	.popsection\n"
"\n"
"	.type		kpatch_test_sc_far_helper, @function\n"
"kpatch_test_sc_far_helper:\n"
"	call		kpatch_test_sc_slow\n"
"	addl		$3, %eax\n"
	ASM_RET
"	.size		kpatch_test_sc_far_helper, .-kpatch_test_sc_far_helper\n"
"	.popsection\n"
);

static int kpatch_sc_rj_jmp_get(char *buffer, const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE, "%u\n",
			 kpatch_test_sc_near_rj_off - ENDBR_INSN_SIZE);
}

static const struct kernel_param_ops kpatch_sc_rj_jmp_ops = {
	.get = kpatch_sc_rj_jmp_get,
};
module_param_cb(rj_jmp, &kpatch_sc_rj_jmp_ops, NULL, 0444);
MODULE_PARM_DESC(rj_jmp, "offset of near_rj's jmp to the far helper, past its ENDBR");

static DEFINE_MUTEX(kpatch_sc_lock);
static bool kpatch_sc_quick_on;

static int kpatch_sc_target_set(const char *val, const struct kernel_param *kp)
{
	bool quick;

	if (sysfs_streq(val, "quick"))
		quick = true;
	else if (sysfs_streq(val, "slow"))
		quick = false;
	else
		return -EINVAL;
	mutex_lock(&kpatch_sc_lock);
	if (quick)
		static_call_update(kpatch_test_sc_call, kpatch_test_sc_quick);
	else
		static_call_update(kpatch_test_sc_call, kpatch_test_sc_slow);
	kpatch_sc_quick_on = quick;
	mutex_unlock(&kpatch_sc_lock);
	return 0;
}

static int kpatch_sc_target_get(char *buffer, const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE, "%s\n",
			 READ_ONCE(kpatch_sc_quick_on) ? "quick" : "slow");
}

static const struct kernel_param_ops kpatch_sc_target_ops = {
	.set = kpatch_sc_target_set,
	.get = kpatch_sc_target_get,
};
module_param_cb(target, &kpatch_sc_target_ops, NULL, 0644);
MODULE_PARM_DESC(target, "the static call's target: slow (default) or quick");

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kpatch selftest: new functions whose jumps the kernel rewrites while they are in use");
