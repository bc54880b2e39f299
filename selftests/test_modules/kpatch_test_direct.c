// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_test_direct - another user of an ftrace direct call, for the
 * kpatch selftests (test-bpf.sh).
 *
 * It attaches its own direct trampoline to the function at "addr" (taken
 * from /proc/kallsyms by the test: kallsyms_lookup_name() is not
 * exported), the way a BPF trampoline attaches to a traced function.  The
 * trampoline only counts its calls, in the read-only parameter "calls",
 * and returns into the function.
 *
 * Like a BPF trampoline, the ops_func below agrees to share the function
 * with an IPMODIFY ftrace_ops (kpatch's), whichever comes first.  ftrace
 * then calls the trampoline after the IPMODIFY handler, and the
 * trampoline returns to wherever the handler sent the call (the new
 * function).
 *
 * Writing N to "eagain" makes the ops_func answer the next N requests to
 * share the function with an IPMODIFY ops -EAGAIN, as a BPF trampoline
 * does while another task changes it (its mutex taken); -1: every one,
 * until 0 is written.  It reads how many are left.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/errno.h>
#include <linux/ftrace.h>
#include <linux/linkage.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <asm/ibt.h>
#include <asm/nospec-branch.h>

#include "kpatch_test.h"

#ifndef CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS
#error "kpatch_test_direct needs CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS"
#endif

/* The return-stack accounting of call depth tracking (from Linux 6.2). */
#ifndef CALL_DEPTH_ACCOUNT
#define CALL_DEPTH_ACCOUNT ""
#endif

static unsigned long addr;
module_param(addr, ulong, 0444);
MODULE_PARM_DESC(addr, "address of the function to attach to (required)");

static int eagain;
module_param(eagain, int, 0644);
MODULE_PARM_DESC(eagain, "requests to share the function to answer -EAGAIN (-1: all)");

static unsigned long kpatch_test_direct_calls;
module_param_named(calls, kpatch_test_direct_calls, ulong, 0444);
MODULE_PARM_DESC(calls, "number of calls of the direct trampoline");

/*
 * The trampoline, called from the function's fentry site (or, when an
 * IPMODIFY ops shares the function, entered by ftrace_regs_caller's
 * return): it counts and returns into the function, with every register
 * as it found it except the flags, which the compiler does not expect to
 * survive a call.
 */
asm("	.pushsection	.text, \"ax\", @progbits\n"
"	.type		kpatch_test_direct_tramp, @function\n"
"	.globl		kpatch_test_direct_tramp\n"
"kpatch_test_direct_tramp:\n"
	ASM_ENDBR
	CALL_DEPTH_ACCOUNT
"	lock incq	kpatch_test_direct_calls(%rip)\n"
	ASM_RET
"	.size		kpatch_test_direct_tramp, .-kpatch_test_direct_tramp\n"
"	.popsection\n"
);

/*
 * Share the function with an IPMODIFY ops (kpatch's), whichever comes
 * first: the trampoline does not care where the call goes next.
 */
static int kpatch_test_direct_share(struct ftrace_ops *ops,
				    enum ftrace_ops_cmd cmd)
{
	int n = READ_ONCE(eagain);

	if (cmd == FTRACE_OPS_CMD_ENABLE_SHARE_IPMODIFY_PEER && n) {
		if (n > 0)
			WRITE_ONCE(eagain, n - 1);
		return -EAGAIN;
	}
	switch (cmd) {
	case FTRACE_OPS_CMD_ENABLE_SHARE_IPMODIFY_SELF:
	case FTRACE_OPS_CMD_ENABLE_SHARE_IPMODIFY_PEER:
	case FTRACE_OPS_CMD_DISABLE_SHARE_IPMODIFY_PEER:
		return 0;
	}
	return -EINVAL;
}

/*
 * ftrace_ops_func_t gained the function's address as a second argument in
 * the 7.x cycle ("ftrace: Factor ftrace_ops ops_func interface"); the
 * type in the headers picks the ops_func.
 */
static int __maybe_unused
kpatch_test_direct_share_ip(struct ftrace_ops *ops, unsigned long ip,
			    enum ftrace_ops_cmd cmd)
{
	return kpatch_test_direct_share(ops, cmd);
}

#define KPATCH_TEST_OPS_FUNC_IP						\
	__builtin_types_compatible_p(ftrace_ops_func_t,			\
				     typeof(kpatch_test_direct_share_ip) *)

static struct ftrace_ops kpatch_test_direct_ops = {
	.ops_func = __builtin_choose_expr(KPATCH_TEST_OPS_FUNC_IP,
					  kpatch_test_direct_share_ip,
					  kpatch_test_direct_share),
};

static int __init kpatch_test_direct_init(void)
{
	unsigned long tramp = (unsigned long)kpatch_test_direct_tramp;
	int ret;

	if (!addr)
		return -EINVAL;
	/* A function start is mapped to its fentry site (after the ENDBR). */
	ret = ftrace_set_filter_ip(&kpatch_test_direct_ops, addr, 0, 0);
	if (ret) {
		pr_info("ftrace_set_filter_ip(%pS) failed: %d\n",
			(void *)addr, ret);
		return ret;
	}
/* 6.1: the _multi name (Kbuild: KPATCH_FTRACE_DIRECT_MULTI) */
#ifdef KPATCH_FTRACE_DIRECT_MULTI
	ret = register_ftrace_direct_multi(&kpatch_test_direct_ops, tramp);
#else
	ret = register_ftrace_direct(&kpatch_test_direct_ops, tramp);
#endif
	if (ret) {
		pr_info("register_ftrace_direct(%pS) failed: %d\n",
			(void *)addr, ret);
		ftrace_free_filter(&kpatch_test_direct_ops);
		return ret;
	}
	return 0;
}

static void __exit kpatch_test_direct_exit(void)
{
	unsigned long tramp = (unsigned long)kpatch_test_direct_tramp;

#ifdef KPATCH_FTRACE_DIRECT_MULTI
	unregister_ftrace_direct_multi(&kpatch_test_direct_ops, tramp);
	ftrace_free_filter(&kpatch_test_direct_ops);
#else
	unregister_ftrace_direct(&kpatch_test_direct_ops, tramp, true);
#endif
}

module_init(kpatch_test_direct_init);
module_exit(kpatch_test_direct_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kpatch selftest: a competing ftrace direct call");
