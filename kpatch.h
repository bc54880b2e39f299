/* SPDX-License-Identifier: GPL-2.0-or-later */
/*
 * API of the kpatch core module for patch modules
 *
 * A patch module fills in one struct kpatch_func per function it replaces
 * and one struct kpatch_module for the whole patch, then calls
 * kpatch_register() (usually from its module_init).  The core redirects
 * every old function to its new one in a single stop_machine() step, after
 * checking that no task has any of the affected code on its stack.
 *
 * See Documentation.txt for the rules a patch module has to follow.
 */

#ifndef _KPATCH_H_
#define _KPATCH_H_

#include <linux/types.h>
#include <linux/list.h>
#include <linux/module.h>

/**
 * struct kpatch_func - one function replaced by a patch
 * @new_addr: start address of the replacement function
 * @new_size: size of the replacement function in bytes; 0 lets the core
 *            take it from kallsyms, any other value must match kallsyms
 * @old_addr: start address of the function to replace, as kallsyms prints
 *            it (not the ftrace call site: the core finds that itself)
 * @old_size: size of the function to replace; 0 or the kallsyms size
 *
 * kpatch_register() reads these and keeps its own copy: the array is not
 * used after it returns, and may be const or in init memory.
 */
struct kpatch_func {
	unsigned long new_addr;
	unsigned long new_size;
	unsigned long old_addr;
	unsigned long old_size;
};

struct kpatch_module;

/**
 * enum kpatch_hook - when a hook of a patch runs
 * @KPATCH_PRE_PATCH:     before the patch is enabled; process context, may
 *                        sleep.  A negative errno vetoes the update.
 * @KPATCH_STOP_PATCH:    inside stop_machine(), interrupts off on every CPU,
 *                        after the stack check and before any new function
 *                        can run: converts data to what the new functions
 *                        expect.  Must not sleep.  A negative errno makes
 *                        the update fail (it must then have changed
 *                        nothing).
 * @KPATCH_UNDO_PATCH:    same context: undoes what the stop-patch hook did,
 *                        when the update rolls back after it had run.
 * @KPATCH_POST_PATCH:    after the patch took effect; process context.  Also
 *                        after an unpatch of the patch failed once its
 *                        pre-unpatch hook had run (it is in effect again).
 * @KPATCH_PRE_UNPATCH:   as @KPATCH_PRE_PATCH, before the patch is removed.
 * @KPATCH_STOP_UNPATCH:  as @KPATCH_STOP_PATCH, converts the data back.
 * @KPATCH_UNDO_UNPATCH:  undoes the stop-unpatch hook on a roll back.
 * @KPATCH_POST_UNPATCH:  after the patch was removed, when no task runs or
 *                        will run any of its new functions; also after a
 *                        patch failed once its pre-patch hook had run.
 * @KPATCH_NR_HOOKS:      number of hooks
 *
 * Every hook has the type &kpatch_hook_t; the return value of the undo and
 * post hooks is ignored.  See "Hooks" in Documentation.txt for the order
 * of the hooks of a replace and what a stop hook may do.
 */
enum kpatch_hook {
	KPATCH_PRE_PATCH,
	KPATCH_STOP_PATCH,
	KPATCH_UNDO_PATCH,
	KPATCH_POST_PATCH,
	KPATCH_PRE_UNPATCH,
	KPATCH_STOP_UNPATCH,
	KPATCH_UNDO_UNPATCH,
	KPATCH_POST_UNPATCH,
	KPATCH_NR_HOOKS,
};

/**
 * typedef kpatch_hook_t - a hook of a patch
 * @kpmod: the patch whose hook this is
 *
 * Return: 0, or a negative errno (pre and stop hooks only) to refuse.
 */
typedef int (*kpatch_hook_t)(struct kpatch_module *kpmod);

/**
 * struct kpatch_module - a patch: a set of functions replaced together
 * @mod:       the patch module that owns this structure (THIS_MODULE); it
 *             names the patch and is pinned while the patch is enabled
 * @funcs:     array of @num_funcs functions to replace
 * @num_funcs: number of entries in @funcs (at least one)
 * @hooks:     optional hooks, indexed by &enum kpatch_hook; each must be
 *             a function in module text (not vmlinux, not __init); its
 *             module is pinned while the patch is enabled
 * @enabled:   set by the core: true while the patch is in effect
 * @name:      set by the core while the patch is tried or enabled: the
 *             patch's name (the module's), for the hooks
 *
 * kpatch keeps a pointer to this structure while the patch is enabled,
 * and calls the hooks with it.
 */
struct kpatch_module {
	struct module *mod;
	struct kpatch_func *funcs;
	int num_funcs;
	kpatch_hook_t hooks[KPATCH_NR_HOOKS];

	bool enabled;
	const char *name;
};

extern struct kobject *kpatch_patches_kobj;

int kpatch_register(struct kpatch_module *kpmod, bool replace);
int kpatch_unregister(struct kpatch_module *kpmod);

#ifdef KPATCH_TEST_HOOKS
/*
 * Only in the selftests' build of kpatch.ko (make KPATCH_TEST_HOOKS=1):
 * points of an update where a test module may step in, to make things
 * happen that cannot be provoked from outside (an NMI in the middle of the
 * stop_machine() callback).  The shipped module has none of this.
 */
enum kpatch_test_point {
	KPATCH_TEST_ENTER,	/* callback: entered, state still IDLE */
	KPATCH_TEST_UPDATING,	/* callback: state just set to UPDATING */
	KPATCH_TEST_PUBLISHED,	/* callback: new entries in, before SUCCESS */
	KPATCH_TEST_DONE,	/* after stop_machine(), state IDLE again */
	/* the work item that refills the free list of exiting-task records,
	 * before it allocates; without kpatch_mutex held
	 */
	KPATCH_TEST_REFILL,
};

typedef void (*kpatch_test_hook_t)(enum kpatch_test_point point);

int kpatch_test_set_hook(kpatch_test_hook_t hook);
#endif

#endif /* _KPATCH_H_ */
