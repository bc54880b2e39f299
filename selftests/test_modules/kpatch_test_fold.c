// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_test_fold - the callers of a patched function may rely on what
 * the compiler learned about it, for the kpatch selftests (test-fold.sh;
 * Documentation.txt, "Writing a patch module", the rules).
 *
 * kpatch_test_fold_quick() writes "quick\n" and returns 6.  It is noinline
 * but not noipa, as a function of the kernel a patch replaces is: GCC may
 * see that it always returns 6 and build its callers with the 6, not with
 * what a call returns (GCC 16 does; GCC 12 does not).  Its caller
 * kpatch_test_fold_show() copies as many bytes as the callee says it
 * wrote.  kpatch_test_fold_slower(), a replacement of the callee, writes
 * "slower\n" and returns 7; kpatch_test_fold_show_new(), a replacement of
 * the caller, calls the callee as a patch module calls a function of the
 * kernel, through an address the compiler knows nothing of.
 *
 * Parameters (read-only): "show" calls the caller and reads "N TEXT" (N:
 * what it returned, TEXT: the bytes it copied, escaped); "gcc" is the
 * major version of the compiler that built this module.
 */

#include <linux/kernel.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/string.h>

static noinline int kpatch_test_fold_quick(char *buf)
{
	return sprintf(buf, "quick\n");
}

static noinline __used int kpatch_test_fold_slower(char *buf)
{
	return sprintf(buf, "slower\n");
}

static noinline int kpatch_test_fold_show(char *out)
{
	char buf[16];
	int n = kpatch_test_fold_quick(buf);

	memcpy(out, buf, n);
	return n;
}

/*
 * The callee as a patch module reaches it: by an address, not a body.
 * OPTIMIZER_HIDE_VAR() hides which function the pointer holds, so that
 * GCC cannot call, or fold, kpatch_test_fold_quick() directly.
 */
static noinline __used int kpatch_test_fold_show_new(char *out)
{
	int (*fn)(char *buf) = kpatch_test_fold_quick;
	char buf[16];
	int n;

	OPTIMIZER_HIDE_VAR(fn);
	n = fn(buf);

	memcpy(out, buf, n);
	return n;
}

static int kpatch_test_fold_get(char *buffer, const struct kernel_param *kp)
{
	int (*show)(char *out) = kpatch_test_fold_show;
	char out[16];
	int n;

	/* Not what show() was built with: the 6, if GCC folded it, is in show(). */
	OPTIMIZER_HIDE_VAR(show);
	n = show(out);

	return sysfs_emit(buffer, "%d %*pE\n", n, n, out);
}

static const struct kernel_param_ops kpatch_test_fold_ops = {
	.get = kpatch_test_fold_get,
};
module_param_cb(show, &kpatch_test_fold_ops, NULL, 0444);
MODULE_PARM_DESC(show, "what the caller copies: \"N TEXT\"");

static int gcc = __GNUC__;
module_param(gcc, int, 0444);
MODULE_PARM_DESC(gcc, "the compiler's major version");

MODULE_DESCRIPTION("kpatch selftests: a caller that relies on its callee's result");
MODULE_LICENSE("GPL");
