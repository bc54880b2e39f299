// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * kpatch: replace whole kernel functions in a running kernel
 *
 * A patch is a set of (old function, new function) pairs that take effect
 * together.  Patches come from two places: a patch module calling
 * kpatch_register() (see kpatch.h), or a command written to
 * /sys/kernel/debug/kpatch/control.  Either way an update -- patch,
 * replace or unpatch -- lives the same way, under kpatch_mutex:
 *
 *   prepare        resolve and check every address, pin the modules, make
 *                  an ftrace site for each function not patched yet,
 *                  collect what the update touches, and build the sorted
 *                  ranges of code that no task may be executing; pre hooks
 *   pre-walk       walk every blocked task's stack and remember the clean
 *                  ones with their switch count (a cache: with nothing
 *                  remembered, the callback walks every task itself)
 *   stop_machine() on one CPU, while every other CPU spins:
 *     mark         the touched sites' targets to SLOW, the state UPDATING
 *     rendezvous   every other CPU has seen UPDATING
 *     check        walk every task that ran since its pre-walk, is new,
 *                  exiting, idle or a stopper: no return address in the
 *                  ranges, or the update is refused (-EBUSY)
 *     publish      stop hooks, then the new entries into the table
 *     decide       SUCCESS; FAILURE if a changed function ran meanwhile
 *     settle       each touched site's final target
 *   IDLE           the state back to IDLE
 *   grace period   synchronize_rcu(): NMIs that read the old state are done
 *   release        post hooks; retire what went out; release unused sites;
 *                  unpin
 *
 * A refused try undoes every step and is tried again a few times (the
 * retries and retry_delay_ms parameters), prepared anew, with no lock held
 * in between.
 *
 * Calls to a patched function leave it at its fentry call, through an
 * ftrace direct call of kpatch's trampoline or, where the kernel does not
 * allow one, through an ftrace_ops handler; either "returns" into the
 * newest replacement instead.  Why no caller ever mixes versions is argued
 * in one place, at kpatch_update_cb().
 *
 * The file reads in that order: what differs between kernels; patches and
 * updates; the redirect (sites, targets, the state machine, the function
 * table, the slow path); the stop_machine() callback; what an update
 * touches; the stack check and the pre-walk; sites (ftrace_ops, then the
 * direct path); resolve, validate and pin; hooks; enable, disable, retry
 * and the API; debugfs and sysfs; init and exit; test hooks.
 *
 * Functions marked __cold are the control path: parsing, resolving,
 * preparing, reporting, each run a few times per command and never on a
 * call of a patched function; inside stop_machine() only the refusal of a
 * busy update is one.  The compiler optimizes them for size, and the paths
 * that lead to them as unlikely; the redirect, the callback and the stack
 * check are compiled for speed.  (Where the compiler would drop a cold
 * function's alignment, which call padding needs, the kernel defines
 * __cold as nothing.)
 *
 * Based on the kpatch core module by Seth Jennings and Josh Poimboeuf.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bsearch.h>
#include <linux/capability.h>
#include <linux/ctype.h>
#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/ftrace.h>
#include <linux/hashtable.h>
#include <linux/jump_label.h>
#include <linux/kallsyms.h>
#include <linux/kobject.h>
#include <linux/kthread.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/sched/task.h>
#include <linux/sched/task_stack.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/sort.h>
#include <linux/static_call.h>
#include <linux/sysfs.h>
#include <linux/stop_machine.h>
#include <linux/string.h>
#include <linux/tracepoint.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include <linux/workqueue.h>
#include <asm/ibt.h>
#include <asm/linkage.h>
#include <asm/nops.h>
#include <asm/nospec-branch.h>
#include <asm/pgtable.h>
#include <asm/text-patching.h>
#include <asm/unwind.h>
#include <asm/unwind_hints.h>

#include "kpatch.h"

/*
 * What the kernel must provide.  Each of these is needed by a step above;
 * failing here is kinder than a module that loads and then cannot patch.
 */
#ifndef CONFIG_X86_64
#error "kpatch needs x86_64: it walks stacks with the x86 unwinder"
#endif
#ifndef CONFIG_DYNAMIC_FTRACE
#error "kpatch needs CONFIG_DYNAMIC_FTRACE to redirect functions"
#endif
#if !defined(CONFIG_DYNAMIC_FTRACE_WITH_ARGS) && \
	!defined(CONFIG_DYNAMIC_FTRACE_WITH_REGS)
#error "kpatch needs DYNAMIC_FTRACE_WITH_ARGS or _WITH_REGS to set the return address"
#endif
#ifndef CONFIG_HAVE_FENTRY
#error "kpatch needs fentry (-mfentry): the ftrace call must come first in every function"
#endif
#if !defined(CONFIG_UNWINDER_ORC) && !defined(CONFIG_UNWINDER_FRAME_POINTER)
#error "kpatch needs the ORC or frame pointer unwinder to check stacks"
#endif
#ifndef CONFIG_HAVE_RELIABLE_STACKTRACE
#error "kpatch needs reliable stack traces (CONFIG_HAVE_RELIABLE_STACKTRACE)"
#endif
#ifndef CONFIG_KALLSYMS
#error "kpatch needs CONFIG_KALLSYMS to check addresses"
#endif
#ifndef CONFIG_DEBUG_FS
#error "kpatch needs CONFIG_DEBUG_FS for its control file"
#endif
#ifndef CONFIG_SYSFS
#error "kpatch needs CONFIG_SYSFS for /sys/kernel/kpatch"
#endif
#ifndef CONFIG_TRACEPOINTS
#error "kpatch needs CONFIG_TRACEPOINTS to follow exiting tasks"
#endif

/*
 * What differs between the kernels kpatch builds for, in one place, so
 * that the code below reads the same on all of them.  Kbuild tells two
 * differences from the headers (KPATCH_FTRACE_DIRECT_MULTI,
 * KPATCH_EXIT_GROUP_DEAD); Documentation.txt lists which kernel has what.
 */

/* Set the return address of an ftrace call: the redirect itself. */
#ifdef ftrace_regs_set_instruction_pointer
#define kpatch_set_ip(fregs, addr) ftrace_regs_set_instruction_pointer(fregs, addr)
#elif defined(CONFIG_DYNAMIC_FTRACE_WITH_ARGS)
#define kpatch_set_ip(fregs, addr) ftrace_instruction_pointer_set(fregs, addr)
#else
/* Only full pt_regs are saved (KPATCH_FOPS_FLAGS asks for them). */
#define kpatch_set_ip(fregs, addr) (ftrace_get_regs(fregs)->ip = (addr))
#endif

#ifdef CONFIG_DYNAMIC_FTRACE_WITH_ARGS
#define KPATCH_FOPS_FLAGS	(FTRACE_OPS_FL_IPMODIFY | FTRACE_OPS_FL_PERMANENT)
#else
#define KPATCH_FOPS_FLAGS	(FTRACE_OPS_FL_IPMODIFY | FTRACE_OPS_FL_PERMANENT | \
				 FTRACE_OPS_FL_SAVE_REGS)
#endif

/*
 * The executable memory of @mod: its core text, or with @init its init
 * text.  Module memory is either split by type or one layout per lifetime.
 */
static void kpatch_mod_text(const struct module *mod, bool init,
			    unsigned long *start, unsigned long *end)
{
#ifdef for_each_mod_mem_type
	const struct module_memory *mem = &mod->mem[init ? MOD_INIT_TEXT :
							    MOD_TEXT];

	*start = (unsigned long)mem->base;
	*end = *start + mem->size;
#else
	const struct module_layout *layout = init ? &mod->init_layout :
						    &mod->core_layout;

	*start = (unsigned long)layout->base;
	*end = *start + layout->text_size;
#endif
}

/*
 * Is @addr in the data of @mod that stays writable after its init (not
 * text, read-only or __ro_after_init data, nor init memory)?
 */
static bool kpatch_mod_rw(const struct module *mod, unsigned long addr)
{
#ifdef for_each_mod_mem_type
	return within_module_mem_type(addr, mod, MOD_DATA);
#else
	const struct module_layout *l = &mod->core_layout;

	return addr >= (unsigned long)l->base + l->ro_after_init_size &&
	       addr < (unsigned long)l->base + l->size;
#endif
}

/*
 * Follow, in reading @rd, what the tables of @mod (NULL: vmlinux, whose
 * tables are not exported) say of its code in [@start, @end): where each
 * static branch there jumps when on, on or off now, since it may have
 * been on when a task passed it; where each instruction that may fault
 * there goes on after the fault (its fixup).  A static call there that is
 * a tail call may have led wherever its key ever pointed: @rd is lost.
 */
struct kpatch_reading;
static int kpatch_follow(struct kpatch_reading *rd, unsigned long target);
static void kpatch_reading_lost(struct kpatch_reading *rd);

static int kpatch_follow_tables(struct kpatch_reading *rd, struct module *mod,
				unsigned long start, unsigned long end)
{
	const struct exception_table_entry *x;
	unsigned long addr;
	unsigned int i;
	int ret = 0;

	if (!mod)
		return 0;
#ifdef CONFIG_JUMP_LABEL
	for (i = 0; i < mod->num_jump_entries && !ret; i++) {
		struct jump_entry *e = &mod->jump_entries[i];

		if (jump_entry_code(e) >= start && jump_entry_code(e) < end)
			ret = kpatch_follow(rd, jump_entry_target(e));
	}
#endif
#ifdef CONFIG_HAVE_STATIC_CALL_INLINE
	for (i = 0; i < mod->num_static_call_sites; i++) {
		struct static_call_site *site = &mod->static_call_sites[i];

		addr = (unsigned long)&site->addr + site->addr;
		if (addr >= start && addr < end &&
		    (((unsigned long)&site->key + site->key) &
		     STATIC_CALL_SITE_TAIL))
			kpatch_reading_lost(rd);
	}
#endif
	for (i = 0; i < mod->num_exentries && !ret; i++) {
		x = &mod->extable[i];
		addr = (unsigned long)&x->insn + x->insn;
		if (addr >= start && addr < end)
			ret = kpatch_follow(rd, (unsigned long)&x->fixup +
						x->fixup);
	}
	return ret;
}

/* The sched_process_exit probe's arguments after the tracepoint's data. */
#ifdef KPATCH_EXIT_GROUP_DEAD
#define KPATCH_EXIT_PROBE_ARGS	struct task_struct *task, bool group_dead
#else
#define KPATCH_EXIT_PROBE_ARGS	struct task_struct *task
#endif

/*
 * Is there an ENDBR at @addr: a live one, or with @sealed_too also the
 * kernel's sealed replacement?  The test of is_endbr(), open-coded: it is
 * not exported everywhere, and takes the instruction on some kernels, a
 * pointer on others; gen_endbr() and gen_endbr_poison() are inline.
 * Without IBT there is none, and ENDBR_INSN_SIZE is 0.
 */
#ifdef CONFIG_X86_KERNEL_IBT
static bool kpatch_endbr(unsigned long addr, bool sealed_too)
{
	u32 insn;

	if (copy_from_kernel_nofault(&insn, (void *)addr, sizeof(insn)))
		return false;
	if ((insn & ~0x01000000U) == gen_endbr())	/* ENDBR32 -> ENDBR64 */
		return sealed_too || insn == gen_endbr();
	return sealed_too && insn == gen_endbr_poison();
}
#else
static bool kpatch_endbr(unsigned long addr, bool sealed_too)
{
	return false;
}
#endif

/*
 * Wait until no CPU is in a section with preemption off that began before:
 * where tracing may run while RCU does not watch, plain RCU does not wait
 * for those, and ftrace uses the "rude" flavour of RCU tasks.
 */
#ifdef CONFIG_TASKS_RUDE_RCU
#define kpatch_sync_preempt_off()	synchronize_rcu_tasks_rude()
#else
#define kpatch_sync_preempt_off()	synchronize_rcu()
#endif

/* Call depth accounting in a trampoline, where the kernel tracks it. */
#ifndef CALL_DEPTH_ACCOUNT
#define CALL_DEPTH_ACCOUNT ""
#endif

/*
 * The ftrace_ops-based direct-call API, and whether kpatch must keep one
 * direct call registered from load to unload (see kpatch_direct_anchor()).
 */
#ifdef KPATCH_FTRACE_DIRECT_MULTI
#define kpatch_direct_ops_register(ops) \
	register_ftrace_direct_multi(ops, (unsigned long)kpatch_direct_tramp)
#define kpatch_direct_ops_unregister(ops) \
	unregister_ftrace_direct_multi(ops, (unsigned long)kpatch_direct_tramp)
#define KPATCH_DIRECT_ANCHOR	1
#else
#define kpatch_direct_ops_register(ops) \
	register_ftrace_direct(ops, (unsigned long)kpatch_direct_tramp)
#define kpatch_direct_ops_unregister(ops) \
	unregister_ftrace_direct(ops, (unsigned long)kpatch_direct_tramp, false)
#define KPATCH_DIRECT_ANCHOR	0
#endif

/* Test builds call a hook at points of an update; see the end of the file. */
#ifdef KPATCH_TEST_HOOKS
static void kpatch_test_point(enum kpatch_test_point point);
#else
#define kpatch_test_point(point) do { } while (0)
#endif

/* Longest patch name, and longest command accepted by the control file. */
#define KPATCH_NAME_MAX		63
#define KPATCH_CMD_MAX		4096
/* At most this many bytes of a rejected word are echoed, escaped, to the log. */
#define KPATCH_ECHO_MAX		32

/*
 * When the stack check refuses an update (a function in use, a stack that
 * cannot be walked, a patched function called during the update), kpatch
 * sleeps and tries again, up to kpatch_retries more times, before it fails
 * with -EBUSY.  It holds no lock while it sleeps (see kpatch_retry()); the
 * values are capped all the same, so that a typo cannot keep a command
 * waiting for hours.  Both are read at each try.
 */
#define KPATCH_RETRIES_MAX		100U
#define KPATCH_RETRY_DELAY_MS_MAX	10000U

static unsigned int kpatch_retries = 3;
module_param_named(retries, kpatch_retries, uint, 0644);
MODULE_PARM_DESC(retries,
		 "tries after the first when the stack check refuses an update (default 3, at most 100)");

static unsigned int kpatch_retry_delay_ms = 20;
module_param_named(retry_delay_ms, kpatch_retry_delay_ms, uint, 0644);
MODULE_PARM_DESC(retry_delay_ms,
		 "milliseconds to sleep before each retry (default 20, at most 10000)");

/*
 * Redirect through an ftrace direct call where the kernel allows it (see
 * "The ftrace redirect").  Read when a function is first patched; a site
 * keeps its way until no patch uses the function any more.
 */
static bool kpatch_direct = true;
module_param_named(direct, kpatch_direct, bool, 0644);
MODULE_PARM_DESC(direct,
		 "redirect through ftrace direct calls where possible (default Y); N: always the ftrace_ops path");

/* ------------------------------------------------------------------------
 * Patches and updates
 */

/*
 * kpatch_mutex serialises every try of an update and every process-context
 * reader of the patch list and the function table.  The function table is
 * only ever written inside stop_machine() called with this mutex held, so a
 * holder of the mutex sees a table that nobody else can change.  An update
 * that waits between tries has dropped it (see kpatch_retry()).
 */
static DEFINE_MUTEX(kpatch_mutex);

/* Enabled patches, oldest first.  Protected by kpatch_mutex. */
static LIST_HEAD(kpatch_patches);

/*
 * A patch's pins, one slot each, NULL where nothing is pinned (vmlinux):
 * the patch module, then the modules of each function's old and new
 * function, then kpatch itself, then the module of each hook.  The slots
 * say which module holds which function: the sites and the stack check of
 * an unpatch need that.
 */
#define KPATCH_PIN_OLD(i)	(1 + 2 * (i))
#define KPATCH_PIN_NEW(i)	(2 + 2 * (i))
#define KPATCH_PIN_SELF(n)	(1 + 2 * (n))
#define KPATCH_PIN_HOOK(n, h)	(2 + 2 * (n) + (h))

/* The names of the hooks, in the control file, the patches file and the log. */
static const char * const kpatch_hook_names[KPATCH_NR_HOOKS] = {
	[KPATCH_PRE_PATCH]	= "pre-patch",
	[KPATCH_STOP_PATCH]	= "stop-patch",
	[KPATCH_UNDO_PATCH]	= "undo-patch",
	[KPATCH_POST_PATCH]	= "post-patch",
	[KPATCH_PRE_UNPATCH]	= "pre-unpatch",
	[KPATCH_STOP_UNPATCH]	= "stop-unpatch",
	[KPATCH_UNDO_UNPATCH]	= "undo-unpatch",
	[KPATCH_POST_UNPATCH]	= "post-unpatch",
};

/* A code range [start, end) that must not be on any stack. */
struct kpatch_range {
	unsigned long start;
	unsigned long end;
};

/* Why the stack check refused an update. */
enum kpatch_refusal {
	KPATCH_OK,
	KPATCH_BUSY,		/* an affected function is on a stack */
	KPATCH_UNRELIABLE,	/* a stack could not be walked reliably */
	KPATCH_RAN,		/* a patched function ran during the update */
	KPATCH_LOST,		/* an exiting task could not be recorded */
	KPATCH_HOOK,		/* a stop hook failed */
};

/* At most this many tasks that block an update are listed by `check`. */
#define KPATCH_CHECK_MAX	64

/* A task in the way of a dry run: @addr, or 0 if its stack is unreliable. */
struct kpatch_blocker {
	unsigned long addr;
	pid_t pid;
	char comm[TASK_COMM_LEN];
};

/* What a dry run (`check`) found: the blockers it lists, and how many more. */
struct kpatch_check {
	struct kpatch_blocker *blockers;
	unsigned int nr, more;
};

/*
 * A task whose stack the pre-walk found clean, walked while the task could
 * not run, and what it takes to trust that walk inside stop_machine(): the
 * same task (pointer, pid and start time: a task_struct freed and reused
 * has another pid or start time) that has not been switched out since
 * (the same nvcsw + nivcsw).  See the pre-walk, below.
 */
struct kpatch_seen {
	struct task_struct *task;
	unsigned long switches;		/* nvcsw + nivcsw at the walk */
	u64 start_time;
	pid_t pid;
};

/*
 * One update, on the stack of kpatch_enable() or kpatch_disable(), and
 * handed to the stop_machine() callback, which only checks stacks and
 * relinks what was prepared beforehand.  Its members have three
 * lifetimes, and each group says who owns it:
 *
 *  - the request, set by the caller for the whole update (every try);
 *  - one try's arrays, allocated by kpatch_try() or kpatch_dry_run() and
 *    freed before it returns, on success and on every failure;
 *  - what the stop_machine() callback writes during one try, for the
 *    caller to read after it.
 */
struct kpatch_update {
	/* The request.  The caller owns the patches (see kpatch_enable()). */
	const char *verb;		/* "patch", "replace" or "unpatch" */
	struct kpatch_module *add;	/* patch to publish, or NULL */
	struct kpatch_module *remove;	/* patch to take out, or NULL */
	bool replace;			/* also take out every other patch */
	struct kpatch_check *check;	/* dry run: the caller's; or NULL */

	/*
	 * One try, from kpatch_collect(), freed by kpatch_uncollect(): the
	 * parts (the patches whose hooks the update runs, in the order they
	 * run: those it removes, newest first, then the one it adds), and
	 * the functions of the parts in the same order: those taken out,
	 * then from touched[first_add] on those published.
	 */
	struct kpatch_module **parts;
	unsigned int nr_parts;
	struct kpatch_func **touched;
	unsigned int nr_touched;
	unsigned int first_add;

	/*
	 * One try, from kpatch_build_ranges(), freed by kpatch_free_ranges():
	 * the code no task may be in, sorted and disjoint; the modules checked
	 * whole but for their own kernel threads; new records of ways into
	 * modules (kpatch_add_reaches()), kept if the update takes effect.
	 */
	struct kpatch_range *ranges;
	unsigned int nr_ranges, max_ranges;
	struct module **whole;
	unsigned int nr_whole;
	struct kpatch_ways_in **ways;
	unsigned int nr_ways;

	/*
	 * One pre-walk, from kpatch_prewalk(), freed by kpatch_forget():
	 * clean tasks in task list order, and the same entries sorted by
	 * task pointer.  nr_seen is 0 when nothing is known.
	 */
	struct kpatch_seen *seen;
	struct kpatch_seen **seen_by_task;
	unsigned int nr_seen, max_seen;

	/*
	 * One try, from kpatch_collect_sites(), freed by kpatch_try() after
	 * the callback: the sites whose version the update may change.
	 */
	struct kpatch_site **sites;
	unsigned int nr_sites;

	/* The rendezvous at the start of the callback, see there. */
	atomic_t cpus_in;		/* CPUs that entered the callback */
	atomic_t cpus_seen;		/* other CPUs that saw UPDATING */

	/* Written by the callback when it refuses; read by the caller. */
	enum kpatch_refusal refusal;
	unsigned long busy_addr;
	pid_t busy_pid;
	char busy_comm[TASK_COMM_LEN];
	struct kpatch_module *hook_patch;	/* KPATCH_HOOK: whose hook */
	enum kpatch_hook hook;			/* which one */
	int hook_ret;				/* and what it returned */
};

static struct kobject *kpatch_root_kobj;
struct kobject *kpatch_patches_kobj;
EXPORT_SYMBOL_GPL(kpatch_patches_kobj);

static struct dentry *kpatch_debugfs_dir;

/* ------------------------------------------------------------------------
 * The redirect: sites, targets and the state machine
 */

/*
 * A site is the fentry call of one patched function, and the way its calls
 * reach the replacement: an ftrace direct call into kpatch_direct_tramp
 * (a direct site), or an IPMODIFY ftrace_ops of its own whose handler sets
 * the return address (an ftrace_ops site).  A site is made before the
 * update that first patches its function, and released after the update
 * that leaves no entry for it.  Sites are made, found and freed under
 * kpatch_mutex, in kpatch_site_hash.
 *
 * A site holds a reference on the module of its function and on kpatch
 * itself for as long as it hooks the function (kpatch_site_alloc() and
 * kpatch_site_free()), whatever the patches do: a direct site can outlive
 * the last patch of its function (see struct kpatch_group), and a site
 * whose removal failed stays for good.  So no module is unloaded, and
 * neither is kpatch.ko, while an fentry call still leads into kpatch.
 *
 * Each site has a target, which the fast paths read without any lock:
 *  - an address above KPATCH_TARGET_SLOW: the new function to run;
 *  - 0: no entry; the old function runs;
 *  - KPATCH_TARGET_SLOW: an update is changing this function; the call
 *    goes through the state machine below (kpatch_redirect_slow()).
 * Targets are written only by the stop_machine() callback, and when a site
 * is made (0, before any call can reach it).  A direct site's target is in
 * its slot of kpatch_direct_table, next to its key, in the form the
 * trampoline returns to (see kpatch_site_settle()); an ftrace_ops site's is
 * next to its ftrace_ops (struct kpatch_fops), where the handler finds it.
 */
#define KPATCH_TARGET_SLOW	1UL

struct kpatch_fops {
	struct ftrace_ops ops;		/* filter: the site's ip */
	unsigned long target;
};

/*
 * Direct sites are made in groups, one per update, that share one direct
 * ftrace_ops: registering and unregistering an ftrace_ops costs a code
 * update and an RCU-tasks grace period, and a patch of a thousand
 * functions should not pay that a thousand times.  A site whose function
 * is no longer patched stays in its group with target 0 (its calls go on
 * to the old function after a few instructions in the trampoline) until
 * every site of the group is unused; then the group goes.
 */
struct kpatch_group {
	struct ftrace_ops ops;
	struct list_head sites;
};

struct kpatch_site {
	struct hlist_node node;		/* in kpatch_site_hash */
	unsigned long ip;
	struct module *mod;		/* pinned: the module of ip, or NULL */
	struct kpatch_group *grp;	/* direct site: its group */
	struct list_head grp_node;	/* direct site: in grp->sites */
	struct kpatch_direct_slot *slot; /* direct site: in kpatch_direct_table */
	struct kpatch_fops *fops;	/* ftrace_ops site */
};

/*
 * The state machine that keeps the redirect consistent while an update
 * changes the table under it.
 *
 *         +-----------------------------------------------------+
 *         |                                                     |
 *         |                                                     +
 *         v                                     +---> KPATCH_STATE_SUCCESS
 * KPATCH_STATE_IDLE +---> KPATCH_STATE_UPDATING |
 *         ^                                     +---> KPATCH_STATE_FAILURE
 *         |                                                     +
 *         |                                                     |
 *         +-----------------------------------------------------+
 *
 * The fast paths of the redirect read only a site's target (see struct
 * kpatch_site); the state machine guards the slow path, which the calls of
 * every function an update changes take while the update runs (the
 * update sets their targets to KPATCH_TARGET_SLOW first).  Outside
 * stop_machine() neither can change under a caller: the only writer is the
 * stop_machine() callback.  Inside it, two kinds of caller can still run
 * concurrently with the writer: NMIs on any CPU, and the functions the
 * other CPUs call while they spin in the stop_machine() loop.
 *
 * A caller that calls several changed functions (an NMI handler calling
 * f, then g) gets them all from one version: the whole argument is at
 * kpatch_update_cb(), after the slow path.
 *
 * KPATCH_STATE_IDLE: no update is changing the table.  The first entry for a
 * function is the one that runs; func->op is ignored.
 *
 * KPATCH_STATE_UPDATING: set by the callback when it starts, before the
 * stack check; the update may have published part of its entries.  A caller that
 * finds this state moves it to FAILURE (and records which function it
 * called), which makes the update roll back: the caller is proof that a
 * patched function ran during the update, the same thing the stack check
 * refuses.
 *
 * KPATCH_STATE_FAILURE: the update will not take effect.  Entries with
 * op == KPATCH_OP_PATCH are skipped; entries being removed (KPATCH_OP_UNPATCH)
 * are still in the table and still count.  Every caller sees the old version.
 *
 * KPATCH_STATE_SUCCESS: the update has published all its entries and wins.
 * Entries with op == KPATCH_OP_UNPATCH are skipped even before they are
 * unlinked.  Every caller sees the new version.
 *
 * After stop_machine() the writer returns to IDLE, then waits with
 * synchronize_rcu() for callers (NMIs) that read the state before that,
 * and only then clears func->op and frees unlinked entries.
 */
enum {
	KPATCH_STATE_IDLE,
	KPATCH_STATE_UPDATING,
	KPATCH_STATE_SUCCESS,
	KPATCH_STATE_FAILURE,
};

static atomic_t kpatch_state = ATOMIC_INIT(KPATCH_STATE_IDLE);

/*
 * The function whose call moved UPDATING to FAILURE, and whether the call
 * came from an NMI, for the log.  Interrupts are off on every CPU inside
 * stop_machine(), so any other such call came from kpatch's own update
 * path: a stopper's loop or the stack check itself.  That function is
 * called during every try, and can never be patched.
 */
static unsigned long kpatch_failed_ip;
static bool kpatch_failed_nmi;

/*
 * The CPU on which the callback runs a stop or undo hook, or -1; and
 * whether the call that moved UPDATING to FAILURE came from such a hook
 * (it called a function that its own update changes).
 */
static int kpatch_hook_cpu = -1;
static bool kpatch_failed_hook;

/* ------------------------------------------------------------------------
 * The function table
 */

/*
 * The function table: every enabled kpatch_func, hashed by ftrace location.
 * Entries for the same function are chained newest first, so the first
 * match is the one that runs.  Writers: only the stop_machine() callback.
 * Readers: the slow path of the redirect, in any context including NMI
 * (see the state machine above), and holders of kpatch_mutex.
 */
#define KPATCH_HASH_BITS	10
static DEFINE_HASHTABLE(kpatch_func_hash, KPATCH_HASH_BITS);

/*
 * Find the entry that runs for a call of @ip, given the @state read by the
 * caller.  Runs in the redirect's slow path, in any context: notrace, lockless.
 */
static struct kpatch_func *notrace kpatch_find_func(unsigned long ip, int state)
{
	struct kpatch_func *func;

	hash_for_each_possible_rcu_notrace(kpatch_func_hash, func, node, ip) {
		if (func->ip != ip)
			continue;
		if (state == KPATCH_STATE_FAILURE && func->op == KPATCH_OP_PATCH)
			continue;
		if (state == KPATCH_STATE_SUCCESS && func->op == KPATCH_OP_UNPATCH)
			continue;
		return func;
	}
	return NULL;
}

/*
 * The first entry for @ip: the one that runs when no update is in flight.
 * For the holder of kpatch_mutex, and for the stop_machine() callback,
 * which runs on its behalf.
 */
static struct kpatch_func *kpatch_first_func(unsigned long ip)
{
	struct kpatch_func *func;

	hash_for_each_possible(kpatch_func_hash, func, node, ip)
		if (func->ip == ip)
			return func;
	return NULL;
}

/* The entry that currently runs for @ip.  Caller holds kpatch_mutex. */
static struct kpatch_func *kpatch_top_func(unsigned long ip)
{
	lockdep_assert_held(&kpatch_mutex);
	return kpatch_first_func(ip);
}

static struct kpatch_module *kpatch_find_patch(const char *name)
{
	struct kpatch_module *kpmod;

	list_for_each_entry(kpmod, &kpatch_patches, list)
		if (!strcmp(kpmod->name, name))
			return kpmod;
	return NULL;
}

/* Is @addr the start of an old or new function of any enabled patch? */
static bool kpatch_in_table(unsigned long addr, bool as_old, bool replace)
{
	struct kpatch_module *kpmod;
	int i;

	if (replace)	/* every enabled patch is about to go */
		return false;
	list_for_each_entry(kpmod, &kpatch_patches, list)
		for (i = 0; i < kpmod->num_funcs; i++)
			if (addr == (as_old ? kpmod->funcs[i].old_addr :
					      kpmod->funcs[i].new_addr))
				return true;
	return false;
}

/*
 * Set the state to SUCCESS or FAILURE if it is UPDATING, and return the
 * resulting state.  A caller of a patched function (@ip != 0) that makes
 * the transition to FAILURE records its function for the log.
 */
static int notrace kpatch_state_finish(int state, unsigned long ip)
{
	int old = atomic_cmpxchg(&kpatch_state, KPATCH_STATE_UPDATING, state);

	if (old != KPATCH_STATE_UPDATING)
		return old;
	if (state == KPATCH_STATE_FAILURE && ip) {
		WRITE_ONCE(kpatch_failed_ip, ip);
		WRITE_ONCE(kpatch_failed_nmi, in_nmi());
		WRITE_ONCE(kpatch_failed_hook, !in_nmi() &&
			   READ_ONCE(kpatch_hook_cpu) == raw_smp_processor_id());
	}
	return state;
}

/*
 * The slow path of both redirects, for a call of the site at @ip whose
 * target said KPATCH_TARGET_SLOW: the seed's state machine.  Returns the
 * function to run, or 0 for the old one.
 *
 * It runs in any context, NMI included, and calls nothing traceable.
 * Disabling preemption makes it an RCU read-side section for the
 * synchronize_rcu() after an update, and keeps this CPU's stopper thread
 * from answering the update's rendezvous while it runs.
 */
static noinline unsigned long notrace kpatch_redirect_slow(unsigned long ip)
{
	struct kpatch_func *func;
	int state;

	preempt_disable_notrace();
	/*
	 * IDLE: no update runs, or it finished and every target it changed
	 * is final, or it has marked its sites but not yet left IDLE; the
	 * first entry runs.  No update can start changing the table before
	 * we are done: its callback waits for this CPU's stopper (see
	 * kpatch_update_cb()).  Otherwise an update is in flight: UPDATING
	 * becomes FAILURE, and the state picks the version.
	 */
	state = atomic_read(&kpatch_state);
	if (state != KPATCH_STATE_IDLE)
		state = kpatch_state_finish(KPATCH_STATE_FAILURE, ip);
	/*
	 * Read func->op and the table only after the state.  Pairs with the
	 * smp_wmb() after KPATCH_STATE_UPDATING and the one before
	 * KPATCH_STATE_SUCCESS in kpatch_update_cb().
	 */
	smp_rmb();
	func = kpatch_find_func(ip, state);
	preempt_enable_notrace();
	return func ? func->new_addr : 0;
}

/*
 * The ftrace_ops path: called by ftrace at the fentry call of an
 * ftrace_ops site, it sets the address ftrace returns to, so that the call
 * continues in the replacement.  The fast path is a load and a compare more
 * than the least any IPMODIFY handler does.  It may be preempted between
 * reading the target and using it; the task then has the old function's
 * fentry return address on its stack, which the stack check of every
 * update that changes this function refuses (see kpatch_build_ranges()).
 *
 * It runs in any context, NMI included, and calls nothing traceable, so it
 * cannot recurse: the ftrace_ops leaves out FTRACE_OPS_FL_RECURSION, which
 * would make ftrace wrap it in a recursion guard.
 */
static void notrace kpatch_ftrace_handler(unsigned long ip,
					  unsigned long parent_ip,
					  struct ftrace_ops *ops,
					  struct ftrace_regs *fregs)
{
	struct kpatch_fops *fops = container_of(ops, struct kpatch_fops, ops);
	unsigned long target = READ_ONCE(fops->target);

	if (likely(target > KPATCH_TARGET_SLOW)) {
		kpatch_set_ip(fregs, target);
		return;
	}
	if (target) {
		target = kpatch_redirect_slow(ip);
		if (target)
			kpatch_set_ip(fregs, target);
	}
}

/* ------------------------------------------------------------------------
 * The update: the stop_machine() callback
 */

static int kpatch_check_stacks(struct kpatch_update *upd);
static int kpatch_stop_hooks(struct kpatch_update *upd);
static void kpatch_undo_hooks(struct kpatch_update *upd, unsigned int n);
static void kpatch_site_mark(struct kpatch_site *site);
static void kpatch_settle_sites(struct kpatch_update *upd);

/*
 * The stop_machine() callback: the only place the function table and the
 * site targets change.  Interrupts are off on every CPU; only NMIs and the
 * stop_machine() loops of the other CPUs can call a patched function
 * meanwhile.
 *
 * Why a caller never mixes versions, though the fast paths (the direct
 * trampoline and the ftrace_ops handler) read one site's target and look
 * at no state: only the sites of @upd change version, and the callback
 *  1. sets each of them to KPATCH_TARGET_SLOW, so that from then on their
 *     calls go through the state machine, and then leaves IDLE;
 *  2. waits until the stopper thread of every other CPU has seen that.  A
 *     caller that read an old target before step 1 either has the old
 *     function's fentry return address on its stack while it is preempted
 *     (which the stack check refuses), or runs on some CPU with preemption
 *     or interrupts off, or in an NMI, and then holds up that CPU's
 *     stopper until it is done;
 *  3. checks the stacks, runs the stop hooks, changes the table, then
 *     decides SUCCESS or FAILURE (or loses that race to a caller, which
 *     sets FAILURE; the undo hooks then roll the stop hooks back);
 *  4. writes the final targets.  A caller that reads one between steps 3
 *     and the end gets the version that the state, which it would read on
 *     the slow path, also gives.
 * So every call after step 2 sees one version: the old one until the state
 * is decided, the decided one after, and the state never goes back from
 * SUCCESS or FAILURE while the callback runs.  A caller that made step 3
 * fail saw the old version, as will everything after it.  The data the
 * stop hooks convert follows the same rule: no new function runs before
 * SUCCESS, which comes after the last hook, and an old function that runs
 * after the first hook began makes the update fail and be undone.
 */
static int kpatch_update_cb(void *data)
{
	struct kpatch_update *upd = data;
	struct kpatch_func *func;
	unsigned int i;
	int state, ret;

	/*
	 * stop_machine() runs this on every online CPU, with interrupts off.
	 * The first CPU to get here makes the update; each other one waits
	 * until the state has left IDLE, says that it saw it, and goes back
	 * to the stop_machine() loop.  atomic_inc() is a full barrier on
	 * x86: it orders everything this CPU did before (an NMI that returned
	 * into this loop included) before the answer.
	 */
	if (atomic_inc_return(&upd->cpus_in) != 1) {
		while (atomic_read(&kpatch_state) == KPATCH_STATE_IDLE)
			cpu_relax();
		atomic_inc(&upd->cpus_seen);
		return 0;
	}

	kpatch_test_point(KPATCH_TEST_ENTER);

	/*
	 * Step 1.  func->op was written before stop_machine(), whose
	 * rendezvous orders it before these stores.  The marks go before the
	 * state: a CPU that sees UPDATING (and so may answer below) then sees
	 * every mark too, so no caller on it can read an old target after its
	 * answer.  A caller that reads a mark but still IDLE runs on a CPU
	 * that has not answered yet, and is done before it does.  The state
	 * goes before the table changes, for the smp_rmb() in
	 * kpatch_redirect_slow().
	 */
	for (i = 0; i < upd->nr_sites; i++)
		kpatch_site_mark(upd->sites[i]);
	smp_wmb();	/* marks before state; see above */
	atomic_set(&kpatch_state, KPATCH_STATE_UPDATING);
	smp_wmb();	/* state before table; see above */

	/*
	 * Step 2.  The number of online CPUs cannot change inside
	 * stop_machine().  On this CPU, an NMI that read an old target ended
	 * before we got here.
	 */
	while (atomic_read(&upd->cpus_seen) < num_online_cpus() - 1)
		cpu_relax();
	kpatch_test_point(KPATCH_TEST_UPDATING);

	if (kpatch_check_stacks(upd)) {
		kpatch_state_finish(KPATCH_STATE_FAILURE, 0);
		kpatch_settle_sites(upd);
		return -EBUSY;
	}

	/*
	 * Step 3.  The stop hooks convert the data, then the new entries are
	 * published.  Nobody runs a new function before the state is
	 * SUCCESS (slow path) or a final target is written (fast paths), and
	 * both come after the atomic_cmpxchg() in kpatch_state_finish(), a
	 * full barrier after the hooks' stores: a caller that gets the new
	 * version sees the converted data (x86 keeps its loads in order).  A
	 * caller of a changed function meanwhile can only be an NMI (every
	 * other CPU is stopped, this one runs the hooks): it runs the old
	 * function, maybe on data half converted, and makes the update fail,
	 * which the undo hooks then roll back before any CPU is released.
	 */
	ret = kpatch_stop_hooks(upd);
	if (ret) {
		kpatch_state_finish(KPATCH_STATE_FAILURE, 0);
		kpatch_settle_sites(upd);
		return ret;
	}

	/* hash_add_rcu() puts the new entries first. */
	for (i = upd->first_add; i < upd->nr_touched; i++) {
		func = upd->touched[i];
		hash_add_rcu(kpatch_func_hash, &func->node, func->ip);
	}

	/*
	 * All entries are in before the state says SUCCESS.  Pairs with the
	 * smp_rmb() in kpatch_redirect_slow().
	 */
	smp_wmb();
	kpatch_test_point(KPATCH_TEST_PUBLISHED);

	state = kpatch_state_finish(KPATCH_STATE_SUCCESS, 0);
	if (state == KPATCH_STATE_FAILURE) {
		/* A patched function ran meanwhile and saw the old version. */
		for (i = upd->first_add; i < upd->nr_touched; i++)
			hash_del_rcu(&upd->touched[i]->node);
		kpatch_undo_hooks(upd, upd->nr_parts);
		kpatch_settle_sites(upd);	/* step 4 */
		upd->refusal = KPATCH_RAN;
		return -EBUSY;
	}
	WARN_ON_ONCE(state != KPATCH_STATE_SUCCESS);

	/* SUCCESS makes callers skip these already; now unlink them. */
	for (i = 0; i < upd->first_add; i++)
		hash_del_rcu(&upd->touched[i]->node);
	kpatch_settle_sites(upd);	/* step 4 */
	return 0;
}

/* ------------------------------------------------------------------------
 * What an update touches
 */

/* Compare two unsigned longs (or pointers: they have the same size). */
static int kpatch_cmp_ulong(const void *a, const void *b)
{
	unsigned long x = *(const unsigned long *)a;
	unsigned long y = *(const unsigned long *)b;

	return x < y ? -1 : x > y;
}

/* Sort the @n elements at @base and drop duplicates; returns the new count. */
static unsigned int kpatch_sort_uniq(void *base, unsigned int n, size_t size,
				     cmp_func_t cmp)
{
	char *p = base;
	unsigned int i, k;

	sort(base, n, size, cmp, NULL);
	for (i = 1, k = n ? 1 : 0; i < n; i++)
		if (cmp(p + i * size, p + (k - 1) * size))
			memcpy(p + k++ * size, p + i * size, size);
	return k;
}

/*
 * The parts of @upd and the functions it touches, computed once per try
 * (see struct kpatch_update): the patches it removes, newest first, then
 * the one it adds; and the functions of those parts in the same order,
 * so that those taken out come first and first_add says where the
 * published ones start.  Every later step iterates these two arrays.
 */
static __cold int kpatch_collect(struct kpatch_update *upd)
{
	struct kpatch_module *kpmod;
	unsigned int n = 2, p, i;

	upd->nr_parts = 0;
	upd->nr_touched = 0;
	/* Not list_count_nodes(): Debian 12's point-release 6.1 lacks it. */
	list_for_each_entry(kpmod, &kpatch_patches, list)
		n++;
	upd->parts = kmalloc_array(n, sizeof(*upd->parts), GFP_KERNEL);
	if (!upd->parts)
		return -ENOMEM;
	if (upd->remove)
		upd->parts[upd->nr_parts++] = upd->remove;
	if (upd->replace)
		list_for_each_entry_reverse(kpmod, &kpatch_patches, list)
			upd->parts[upd->nr_parts++] = kpmod;
	if (upd->add)
		upd->parts[upd->nr_parts++] = upd->add;

	for (n = 0, p = 0; p < upd->nr_parts; p++)
		n += upd->parts[p]->num_funcs;
	upd->touched = kmalloc_array(n ?: 1, sizeof(*upd->touched),
				     GFP_KERNEL);
	if (!upd->touched) {
		kfree(upd->parts);
		upd->parts = NULL;
		return -ENOMEM;
	}
	for (p = 0; p < upd->nr_parts; p++) {
		kpmod = upd->parts[p];
		for (i = 0; i < kpmod->num_funcs; i++)
			upd->touched[upd->nr_touched++] = &kpmod->funcs[i];
	}
	/* The patch it adds is the last part. */
	upd->first_add = upd->nr_touched - (upd->add ? upd->add->num_funcs : 0);
	return 0;
}

/* Free what kpatch_collect() allocated. */
static void kpatch_uncollect(struct kpatch_update *upd)
{
	kfree(upd->touched);
	upd->touched = NULL;
	kfree(upd->parts);
	upd->parts = NULL;
}

/* ------------------------------------------------------------------------
 * What the stack check looks for: code ranges
 */

static int kpatch_cmp_range(const void *a, const void *b)
{
	const struct kpatch_range *ra = a, *rb = b;

	if (ra->start != rb->start)
		return ra->start < rb->start ? -1 : 1;
	return 0;
}

static int kpatch_add_range(struct kpatch_update *upd, unsigned long start,
			    unsigned long size)
{
	struct kpatch_range *r;

	if (!size)
		return 0;
	if (upd->nr_ranges == upd->max_ranges) {
		r = krealloc_array(upd->ranges, 2 * upd->max_ranges, sizeof(*r),
				   GFP_KERNEL);
		if (!r)
			return -ENOMEM;
		upd->ranges = r;
		upd->max_ranges *= 2;
	}
	upd->ranges[upd->nr_ranges].start = start;
	upd->ranges[upd->nr_ranges].end = start + size;
	upd->nr_ranges++;
	return 0;
}

/* ------------------------------------------------------------------------
 * Reading code
 */

/*
 * Two questions need a function's code, not only its address: which
 * pieces it has, and where a redirect into a module can lead a task (both
 * in "The stack check", below).  Both follow the jumps that leave the code
 * read so far; only jumps, since a call leaves a return address in the
 * caller, which the stack check sees anyway.
 *
 * Code is read instruction by instruction, by length, with the one- and
 * two-byte opcode maps of the x86 manuals reduced to what decides an
 * instruction's length, one letter per opcode:
 *
 *   .  nothing follows          p  a prefix     R  a REX prefix
 *   m  a ModRM byte             B  ModRM, imm8  Z  ModRM, imm16/32
 *   b  an imm8                  w  an imm16     z  an imm16/32
 *   e  imm16, imm8 (enter)      v  imm16/32/64 (mov reg, imm)
 *   o  a 64-bit address (mov to or from an absolute address)
 *   f  group 3 of bytes: ModRM, an imm8 for test; F: ModRM, imm16/32
 *   j  a jcc, rel8  k  a jmp, rel8  J  a jmp, rel32  K  a jcc, rel32
 *   c  a call, rel32
 *   I  group 5: ModRM; indirect calls and jumps    r  ret
 *   0  escape to the two-byte map;  3 and 4: to the three-byte maps
 *      0f 38 (ModRM) and 0f 3a (ModRM, imm8)
 *   V  a VEX prefix: its map is one of those three
 *   x  what kernel C code has not here (EVEX, opcodes invalid in 64-bit
 *      mode): the code is not decoded further
 *
 * selftests/harness/lint.sh checks this decoder against objdump on every
 * function of the debug kernel's vmlinux and of the test modules.
 */
static const char kpatch_op1[16][17] = {
	"mmmmbzxxmmmmbzx0", "mmmmbzxxmmmmbzxx",	/* 00, 10 */
	"mmmmbzpxmmmmbzpx", "mmmmbzpxmmmmbzpx",	/* 20, 30 */
	"RRRRRRRRRRRRRRRR", "................",	/* 40, 50 */
	"xxxmppppzZbB....", "jjjjjjjjjjjjjjjj",	/* 60, 70 */
	"BZxBmmmmmmmmmmmm", "..........x.....",	/* 80, 90 */
	"oooo....bz......", "bbbbbbbbvvvvvvvv",	/* a0, b0 */
	"BBwrVVBZe.w..bx.", "mmmmxxx.mmmmmmmm",	/* c0, d0 */
	"jjjjbbbbcJxk....", "p.pp..fF......mI",	/* e0, f0 */
};

static const char kpatch_op2[16][17] = {
	"mmmmx.....x.xm.x", "mmmmmmmmmmmmmmmm",	/* 00, 10 */
	"mmmmxxxxmmmmmmmm", "......x.3x4xxxxx",	/* 20, 30 */
	"mmmmmmmmmmmmmmmm", "mmmmmmmmmmmmmmmm",	/* 40, 50 */
	"mmmmmmmmmmmmmmmm", "BBBBmmm.mmxxmmmm",	/* 60, 70 */
	"KKKKKKKKKKKKKKKK", "mmmmmmmmmmmmmmmm",	/* 80, 90 */
	"...mBmmm...mBmmm", "mmmmmmmmmmBmmmmm",	/* a0, b0 */
	"mmBmBBBm........", "mmmmmmmmmmmmmmmm",	/* c0, d0 */
	"mmmmmmmmmmmmmmmm", "mmmmmmmmmmmmmmmm",	/* e0, f0 */
};

enum kpatch_insn {
	KPATCH_INSN_SHORT,	/* not decoded: it would end past @avail */
	KPATCH_INSN_OTHER,
	KPATCH_INSN_JUMP,	/* jmp to an address given in the code */
	KPATCH_INSN_JCC,	/* jcc to an address given in the code */
	KPATCH_INSN_INDIRECT,	/* jmp through a register or memory */
	KPATCH_INSN_RET,
};

/*
 * The instruction at @p, which is at @addr and has @avail bytes after it
 * that may be read: its length, or 0 if it cannot be decoded (with
 * KPATCH_INSN_SHORT if it would need more bytes than @avail); what it is
 * in *@kind, and for a jump its target in *@target.
 */
static unsigned int kpatch_decode(const u8 *p, unsigned long avail,
				  unsigned long addr, enum kpatch_insn *kind,
				  unsigned long *target)
{
	unsigned int i, imm = 0, n = min(avail, 15UL);
	bool opsize = false, addr32 = false, rexw = false;
	u8 modrm, reg, map;
	s32 rel32;
	char c;

	*kind = KPATCH_INSN_OTHER;
	for (i = 0; ; i++) {
		if (i >= n)
			goto truncated;
		c = kpatch_op1[p[i] >> 4][p[i] & 15];
		if (c == 'R') {
			rexw = p[i] & 8;
		} else if (c == 'p') {
			rexw = false;	/* a REX prefix counts only last */
			opsize |= p[i] == 0x66;
			addr32 |= p[i] == 0x67;
		} else {
			break;
		}
	}
	if (c == 'V') {			/* c5 RvvvvLpp, c4 RXBmmmmm WvvvvLpp */
		if (i + 3 >= n)
			goto truncated;
		map = p[i] == 0xc5 ? 1 : p[i + 1] & 0x1f;
		i += p[i] == 0xc5 ? 2 : 3;
		c = map == 1 ? kpatch_op2[p[i] >> 4][p[i] & 15] :
		    map == 2 ? 'm' :
		    map == 3 ? 'B' : 'x';
		if (c != '.' && c != 'm' && c != 'B')
			return 0;
	} else if (c == '0') {
		if (++i >= n)
			goto truncated;
		c = kpatch_op2[p[i] >> 4][p[i] & 15];
		if (c == '3' || c == '4') {
			c = c == '3' ? 'm' : 'B';
			i++;
		}
	}
	i++;				/* the opcode */
	switch (c) {
	case 'x':
		return 0;
	case '.':
		break;
	case 'r':
		*kind = KPATCH_INSN_RET;
		break;
	case 'j':
	case 'k':
	case 'J':
	case 'K':
		*kind = c == 'k' || c == 'J' ? KPATCH_INSN_JUMP : KPATCH_INSN_JCC;
		imm = c == 'j' || c == 'k' ? 1 : 4;
		break;
	case 'c':
		imm = 4;
		break;
	case 'b':
		imm = 1;
		break;
	case 'w':
		imm = 2;
		break;
	case 'e':
		imm = 3;
		break;
	case 'z':
		imm = opsize && !rexw ? 2 : 4;
		break;
	case 'v':
		imm = rexw ? 8 : opsize ? 2 : 4;
		break;
	case 'o':
		imm = addr32 ? 4 : 8;
		break;
	default:			/* m B Z f F I: a ModRM byte first */
		if (i >= n)
			goto truncated;
		modrm = p[i++];
		reg = (modrm >> 3) & 7;
		if (modrm < 0xc0) {	/* a memory operand */
			if ((modrm & 7) == 4) {		/* a SIB byte */
				if (i >= n)
					goto truncated;
				if (modrm < 0x40 && (p[i] & 7) == 5)
					i += 4;
				i++;
			} else if (modrm < 0x40 && (modrm & 7) == 5) {
				i += 4;			/* %rip-relative */
			}
			i += modrm >= 0x80 ? 4 : modrm >= 0x40 ? 1 : 0;
		}
		if (c == 'B' || (c == 'f' && reg < 2))
			imm = 1;
		else if (c == 'Z' || (c == 'F' && reg < 2))
			imm = opsize && !rexw ? 2 : 4;
		else if (c == 'I' && (reg == 4 || reg == 5))
			*kind = KPATCH_INSN_INDIRECT;
	}
	i += imm;
	if (i > n)
		goto truncated;
	if (*kind == KPATCH_INSN_JUMP || *kind == KPATCH_INSN_JCC) {
		if (imm == 1) {
			*target = addr + i + (s8)p[i - 1];
		} else {
			memcpy(&rel32, p + i - 4, sizeof(rel32));
			*target = addr + i + rel32;
		}
	}
	return i;
truncated:
	if (avail < 15)		/* else it is too long */
		*kind = KPATCH_INSN_SHORT;
	return 0;
}

/*
 * Where a return jumps to where the kernel returns through a thunk (see
 * kpatch_init()), or 0.  Not a place a task can stay in: following a jump
 * there leads nowhere.
 */
static unsigned long kpatch_return_thunk;

/*
 * kallsyms' answer for @addr, parsed (the only parser of it): the symbol's
 * name is left in @buf (KSYM_SYMBOL_LEN bytes), *@start and *@size say
 * where it is, *@mod names its module or is NULL for vmlinux.  False if
 * @addr is in no symbol kallsyms knows.
 */
static bool kpatch_symbol(unsigned long addr, char *buf, unsigned long *start,
			  unsigned long *size, char **mod)
{
	char *plus, *slash;
	unsigned long off;

	sprint_symbol(buf, addr);	/* "name+0xoff/0xsize [module]" */
	*mod = strchr(buf, ' ');
	if (*mod) {
		*(*mod)++ = '\0';
		if (*(*mod)++ != '[')
			return false;
		(*mod)[strcspn(*mod, " ]")] = '\0';
	}
	plus = strrchr(buf, '+');
	slash = strrchr(buf, '/');
	if (!plus || !slash || slash < plus)
		return false;
	*slash = '\0';
	*plus = '\0';
	if (kstrtoul(plus + 1, 16, &off) || kstrtoul(slash + 1, 16, size) ||
	    off >= *size)
		return false;
	*start = addr - off;
	return true;
}

/* Does vmlinux map @addr as executable text? */
static bool kpatch_kernel_text(unsigned long addr)
{
	unsigned int level;
	pte_t *pte = lookup_address(addr, &level);

	return pte && pte_present(*pte) && pte_exec(*pte);
}

/*
 * One reading: the code to read, in the update's ranges from @first on,
 * which grow as jumps lead further.  Jumps are followed only within the
 * text of @mod, or of vmlinux if it is NULL; with @fn set only into pieces
 * of the function at @fn (see kpatch_add_code()), else into any function
 * there (see kpatch_add_reach()).  @lost says that a jump could not be
 * followed: an indirect one, one that leaves @mod and is no return, or
 * code that could not be decoded.
 */
struct kpatch_reading {
	struct kpatch_update *upd;
	unsigned int first;
	struct module *mod;
	unsigned long fn;
	char *name;		/* @fn's name, looked up when first needed */
	size_t nlen;
	char *sym;		/* room for kpatch_symbol() */
	bool lost;
};

static void kpatch_reading_lost(struct kpatch_reading *rd)
{
	rd->lost = true;
}

/* Follow a jump of @rd to @target. */
static int kpatch_follow(struct kpatch_reading *rd, unsigned long target)
{
	struct kpatch_update *upd = rd->upd;
	unsigned long start, size, lo, hi;
	unsigned int i;
	bool home;
	char *mod;

	for (i = rd->first; i < upd->nr_ranges; i++)
		if (target >= upd->ranges[i].start &&
		    target < upd->ranges[i].end)
			return 0;	/* read, or to be read */
	if (target == kpatch_return_thunk)
		return 0;
	if (rd->mod) {
		kpatch_mod_text(rd->mod, false, &lo, &hi);
		home = target >= lo && target < hi;
	} else {
		home = kpatch_kernel_text(target);
	}
	if (!rd->sym) {
		rd->sym = kmalloc(2 * KSYM_SYMBOL_LEN, GFP_KERNEL);
		if (!rd->sym)
			return -ENOMEM;
	}
	if (!home || !kpatch_symbol(target, rd->sym, &start, &size, &mod) ||
	    !mod != !rd->mod) {
		rd->lost = true;
		return 0;
	}
	if (rd->fn) {
		if (!rd->name) {
			rd->name = rd->sym + KSYM_SYMBOL_LEN;
			sprint_symbol_no_offset(rd->name, rd->fn);
			rd->nlen = strcspn(rd->name, " ");
		}
		if (strncmp(rd->sym, rd->name, rd->nlen) ||
		    (!str_has_prefix(rd->sym + rd->nlen, ".cold") &&
		     !str_has_prefix(rd->sym + rd->nlen, ".part.")))
			return 0;	/* a tail call: the function ends */
	}
	return kpatch_add_range(upd, start, size);
}

/*
 * An INT3 where an instruction starts, other than the padding after a ret
 * or a jmp: a kprobe (which keeps one on a jmp or jcc it cannot optimize,
 * and emulates the jump), or code being rewritten.  The instruction under
 * it is unknown, so @rd is lost; for a function's pieces, whatever jump it
 * may be is followed (a 1-byte opcode with a rel8 or a rel32 after it, or
 * a jcc's 0f under the INT3), and the code after it is read byte by byte.
 */
static int kpatch_follow_int3(struct kpatch_reading *rd, const u8 *p,
			      unsigned long avail, unsigned long addr)
{
	s32 rel32;
	int ret = 0;

	rd->lost = true;
	if (!rd->fn)
		return 0;
	if (avail >= 2)
		ret = kpatch_follow(rd, addr + 2 + (s8)p[1]);
	if (avail >= 5 && !ret) {
		memcpy(&rel32, p + 1, sizeof(rel32));
		ret = kpatch_follow(rd, addr + 5 + rel32);
	}
	if (avail >= 6 && (p[1] & 0xf0) == 0x80 && !ret) {
		memcpy(&rel32, p + 2, sizeof(rel32));
		ret = kpatch_follow(rd, addr + 6 + rel32);
	}
	return ret;
}

/*
 * Read the ranges of @rd to the end, adding what their jumps lead to.  The
 * code is pinned (vmlinux, or a module that a pin or the patch being
 * prepared holds), so it can be read.  It may be changing meanwhile
 * (ftrace, static keys, kprobes); whatever it reads as, each range added
 * is a whole symbol.  An instruction that would end past the symbol ends
 * its code: kallsyms counts the padding up to the next symbol into a
 * symbol's size.  Other code that cannot be decoded is read on byte by
 * byte, each byte taken as the start of a jump, so that no jump is
 * missed: a false one leads into a function that is no piece, or makes
 * the reading lost, as does an INT3 (kpatch_follow_int3()).  A module's own
 * tables are read too (kpatch_follow_tables()); vmlinux's are not
 * exported, and a static branch of vmlinux leads only where it leads now
 * (see Documentation.txt).  Without @fn, reading stops once it is lost:
 * the whole module is checked then.
 */
static int kpatch_read(struct kpatch_reading *rd)
{
	struct kpatch_update *upd = rd->upd;
	unsigned long start, end, target, i;
	bool bytewise, padding;
	enum kpatch_insn kind;
	unsigned int r, len;
	const u8 *p;
	int ret = 0;

	for (r = rd->first; r < upd->nr_ranges; r++) {
		start = upd->ranges[r].start;
		end = upd->ranges[r].end;
		bytewise = false;
		padding = false;
		for (i = 0; start + i < end; i += bytewise ? 1 : len) {
			p = (const u8 *)start + i;
			len = kpatch_decode(p, end - start - i, start + i, &kind,
					    &target);
			if (!len && kind == KPATCH_INSN_SHORT && !bytewise)
				break;
			if (!bytewise && *p == INT3_INSN_OPCODE && !padding) {
				ret = kpatch_follow_int3(rd, p, end - start - i,
							 start + i);
				bytewise = true;
			} else {
				if (!len || kind == KPATCH_INSN_INDIRECT)
					rd->lost = true;
				bytewise |= !len;
				if (len && (kind == KPATCH_INSN_JUMP ||
					    kind == KPATCH_INSN_JCC) &&
				    (target < start || target >= end))
					ret = kpatch_follow(rd, target);
			}
			if (ret || (rd->lost && !rd->fn))
				return ret;
			/* after a ret or a jmp, INT3 is padding (SLS) */
			padding = kind == KPATCH_INSN_RET ||
				  kind == KPATCH_INSN_JUMP ||
				  kind == KPATCH_INSN_INDIRECT ||
				  (padding && *p == INT3_INSN_OPCODE);
		}
		ret = kpatch_follow_tables(rd, rd->mod, start, end);
		if (ret || (rd->lost && !rd->fn))
			return ret;
	}
	return 0;
}

/* ------------------------------------------------------------------------
 * The stack check
 */

/*
 * A function's pieces.  The compiler may move the unlikely blocks of a
 * function f into f.cold, and a part of its body into f.part.N, each in
 * another place and listed by kallsyms as a function of its own.  f goes
 * to such a piece by a jump, and a .cold piece jumps back into f; so a
 * task that sleeps in a call made from a piece has no return address in
 * f, yet runs f's code when it wakes.  To the stack check, the pieces are
 * f: add @func's old function (@old) or its new one to the ranges, with
 * every symbol named like one of its pieces ("f.cold", "f.part.N",
 * "f.part.N.cold", ...) that its jumps, or its pieces' jumps, lead into,
 * at any offset.  A jump to anything else is a tail call, whose target
 * does not belong to f.
 */
static __cold int kpatch_add_code(struct kpatch_update *upd,
				  const struct kpatch_func *func, bool old)
{
	const struct kpatch_module *kpmod = func->kpmod;
	unsigned int i = func - kpmod->funcs;
	struct kpatch_reading rd = {
		.upd = upd,
		.first = upd->nr_ranges,
		.mod = kpmod->pins[old ? KPATCH_PIN_OLD(i) : KPATCH_PIN_NEW(i)],
		.fn = old ? func->old_addr : func->new_addr,
	};
	int ret;

	ret = kpatch_add_range(upd, rd.fn, old ? func->old_size :
						 func->new_size);
	ret = ret ?: kpatch_read(&rd);
	kfree(rd.sym);
	return ret;
}

/*
 * The module that function @i of @kpmod redirects calls into from
 * outside: that of its new function, if it is in a module and its old
 * function is not in the same one; else NULL.  A module that patches
 * itself sends no task in: its callers are its own, and its own code
 * decides when it may go.
 */
static struct module *kpatch_way_in(const struct kpatch_module *kpmod,
				    int i)
{
	struct module *mod = kpmod->pins[KPATCH_PIN_NEW(i)];

	return mod == kpmod->pins[KPATCH_PIN_OLD(i)] ? NULL : mod;
}

/* Does @kpmod redirect calls into @mod? */
static bool kpatch_redirects_into(const struct kpatch_module *kpmod,
				  const struct module *mod)
{
	int i;

	for (i = 0; i < kpmod->num_funcs; i++)
		if (kpatch_way_in(kpmod, i) == mod)
			return true;
	return false;
}

/* Does a patch that is enabled after @upd redirect calls into @mod? */
static bool kpatch_redirected_after(const struct kpatch_update *upd,
				    const struct module *mod)
{
	struct kpatch_module *kpmod;

	if (upd->add && kpatch_redirects_into(upd->add, mod))
		return true;
	if (upd->replace)	/* every enabled patch goes */
		return false;
	list_for_each_entry(kpmod, &kpatch_patches, list)
		if (kpmod != upd->remove && kpatch_redirects_into(kpmod, mod))
			return true;
	return false;
}

/*
 * Ways into a module.  A redirect into a module (a new function there
 * whose old function is elsewhere) leads tasks from outside into the
 * module's code, and not only into the new function: by a jump (a sibling
 * call, `return helper(x)`) a task goes on into a helper with no frame of
 * the new function left on its stack.  Once no patch redirects into the
 * module any more, nothing of kpatch keeps it loaded: another patch's pin
 * on it, for an old function or a hook, goes with that patch, whose
 * update does not look for tasks that this one sent in.  So the update
 * that removes the last redirect into a module checks where every way in
 * can have led (kpatch_add_reach()), including the ways in of patches
 * removed while other patches still redirected into it: those are kept
 * here, one record per module, from such a removal until the last
 * redirect goes.  Under kpatch_mutex; the module is pinned while it has a
 * record (by the patches that still redirect into it).
 */
struct kpatch_ways_in {
	struct list_head list;
	struct module *mod;
	unsigned int nr;
	unsigned long addr[];	/* the new functions */
};

static LIST_HEAD(kpatch_ways_in);

static struct kpatch_ways_in *kpatch_ways_in_find(const struct module *mod)
{
	struct kpatch_ways_in *w;

	lockdep_assert_held(&kpatch_mutex);
	list_for_each_entry(w, &kpatch_ways_in, list)
		if (w->mod == mod)
			return w;
	return NULL;
}

/*
 * Where the ways into @mod can have led a task: each new function at
 * @addr[@n] and whatever in @mod it reaches by jumps, as far as they go
 * (kpatch_read()).  Where a jump cannot be followed, the task can be
 * anywhere in @mod: then the whole module is checked instead, except for
 * its own kernel threads (kpatch_in_whole()).
 */
static __cold int kpatch_add_reach(struct kpatch_update *upd,
				   struct module *mod,
				   const unsigned long *addr, unsigned int n)
{
	struct kpatch_reading rd = {
		.upd = upd,
		.first = upd->nr_ranges,
		.mod = mod,
	};
	unsigned long start, size;
	unsigned int i;
	char *modname;
	int ret = 0;

	rd.sym = kmalloc(2 * KSYM_SYMBOL_LEN, GFP_KERNEL);
	if (!rd.sym)
		return -ENOMEM;
	for (i = 0; i < n && !ret; i++)
		if (kpatch_symbol(addr[i], rd.sym, &start, &size, &modname))
			ret = kpatch_add_range(upd, start, size);
		else
			rd.lost = true;
	ret = ret ?: kpatch_read(&rd);
	kfree(rd.sym);
	if (!ret && rd.lost) {
		upd->nr_ranges = rd.first;
		upd->whole[upd->nr_whole++] = mod;
	}
	return ret;
}

/*
 * For every module that a patch @upd removes redirects into: a new record
 * of its ways in, those of the record it has and those the update
 * removes, in upd->ways (kpatch_ways_in_commit() keeps it if other patches
 * still redirect into the module); and if none will, the check of where
 * they can have led.
 */
static __cold int kpatch_add_reaches(struct kpatch_update *upd)
{
	struct kpatch_ways_in *old, *w;
	struct kpatch_module *kpmod;
	unsigned int p, q, k, n;
	struct module *mod;
	int i, j, ret = 0;

	for (p = 0; p < upd->nr_parts && !ret; p++) {
		kpmod = upd->parts[p];
		for (i = 0; kpmod != upd->add && i < kpmod->num_funcs && !ret;
		     i++) {
			mod = kpatch_way_in(kpmod, i);
			for (k = 0; mod && k < upd->nr_ways; k++)
				if (upd->ways[k]->mod == mod)
					mod = NULL;
			if (!mod)
				continue;

			old = kpatch_ways_in_find(mod);
			n = old ? old->nr : 0;
			for (q = p; q < upd->nr_parts; q++)
				for (j = 0; upd->parts[q] != upd->add &&
				     j < upd->parts[q]->num_funcs; j++)
					n += kpatch_way_in(upd->parts[q], j) == mod;
			w = kmalloc(struct_size(w, addr, n), GFP_KERNEL);
			if (!w) {
				ret = -ENOMEM;
				break;
			}
			w->mod = mod;
			w->nr = old ? old->nr : 0;
			if (old)
				memcpy(w->addr, old->addr,
				       old->nr * sizeof(*w->addr));
			for (q = p; q < upd->nr_parts; q++)
				for (j = 0; upd->parts[q] != upd->add &&
				     j < upd->parts[q]->num_funcs; j++)
					if (kpatch_way_in(upd->parts[q], j) == mod)
						w->addr[w->nr++] =
							upd->parts[q]->funcs[j].new_addr;
			upd->ways[upd->nr_ways++] = w;
			if (!kpatch_redirected_after(upd, mod))
				ret = kpatch_add_reach(upd, mod, w->addr, w->nr);
		}
	}
	return ret;
}

/*
 * @upd took effect: keep the new records of ways in for the modules that
 * patches still redirect into, and drop the old ones.
 */
static __cold void kpatch_ways_in_commit(struct kpatch_update *upd)
{
	struct kpatch_ways_in *old, *w;
	struct kpatch_module *kpmod;
	bool kept;
	unsigned int k;

	for (k = 0; k < upd->nr_ways; k++) {
		w = upd->ways[k];
		old = kpatch_ways_in_find(w->mod);
		if (old) {
			list_del(&old->list);
			kfree(old);
		}
		kept = false;
		list_for_each_entry(kpmod, &kpatch_patches, list)
			kept |= kpatch_redirects_into(kpmod, w->mod);
		if (kept)
			list_add(&w->list, &kpatch_ways_in);
		else
			kfree(w);
		upd->ways[k] = NULL;
	}
}

/*
 * Is @addr in a module checked whole (see kpatch_add_reach()), and @task
 * not a kernel thread of that module?  A kernel thread whose function is
 * in the module runs the module's code until the module's exit stops it,
 * and kthread_stop() returns only once the thread has left its function
 * and reached exit_mm() in do_exit(): whatever the thread runs inside the
 * module, however it got there, ends before the module can be freed.  From
 * do_exit() on (PF_EXITING) that no longer holds, and such a thread counts
 * like any task.  kthread_func() reads only the task.
 */
static bool kpatch_in_whole(const struct kpatch_update *upd,
			    struct task_struct *task, unsigned long addr)
{
	struct module *mod;
	unsigned int i;

	for (i = 0; i < upd->nr_whole; i++) {
		mod = upd->whole[i];
		if (!within_module(addr, mod))
			continue;
		if (!(task->flags & PF_EXITING) &&
		    within_module_core((unsigned long)kthread_func(task), mod))
			continue;
		return true;
	}
	return false;
}

/* Free what kpatch_build_ranges() allocated, and records not kept. */
static void kpatch_free_ranges(struct kpatch_update *upd)
{
	while (upd->nr_ways)
		kfree(upd->ways[--upd->nr_ways]);
	kfree(upd->ways);
	upd->ways = NULL;
	kfree(upd->whole);
	upd->whole = NULL;
	upd->nr_whole = 0;
	kfree(upd->ranges);
	upd->ranges = NULL;
	upd->nr_ranges = 0;
}

/*
 * Build the table of code that must not be running for @upd to be safe:
 * for every function whose visible version the update changes, the code
 * that runs for it now -- the new function of the entry on top of its
 * stack, if any -- and always the old function itself.  The old function
 * is on a stack not only when it runs unpatched: a task preempted inside
 * ftrace's trampoline, the ftrace_ops handler or kpatch's trampoline has
 * the return address of the old function's fentry call on its stack, and
 * resumes wherever the target it read pointed it.  Each function comes
 * with its pieces (kpatch_add_code()).  Removing an entry that is not on
 * top changes nothing visible and needs no check of its functions; the
 * modules the update stops redirecting into are another matter
 * (kpatch_add_reaches()).  Done before stop_machine(), under kpatch_mutex,
 * so the table cannot change between here and the callback.  On failure
 * nothing is left allocated.
 */
static int kpatch_build_ranges(struct kpatch_update *upd)
{
	struct kpatch_func *func, *top;
	unsigned int i, n;
	int ret = 0;

	/* Room for two functions per entry and two modules; more if needed. */
	upd->nr_ranges = 0;
	upd->max_ranges = 4 * upd->nr_touched + 4;
	upd->ranges = kmalloc_array(upd->max_ranges, sizeof(*upd->ranges),
				    GFP_KERNEL);
	upd->ways = kmalloc_array(upd->nr_touched ?: 1, sizeof(*upd->ways),
				  GFP_KERNEL);
	upd->whole = kmalloc_array(upd->nr_touched ?: 1, sizeof(*upd->whole),
				   GFP_KERNEL);
	if (!upd->ranges || !upd->ways || !upd->whole)
		ret = -ENOMEM;

	for (i = 0; i < upd->nr_touched && !ret; i++) {
		func = upd->touched[i];
		top = kpatch_top_func(func->ip);
		if (i >= upd->first_add) {
			if (top)
				ret = kpatch_add_code(upd, top, false);
		} else if (top == func) {
			ret = kpatch_add_code(upd, func, false);
		} else {
			continue;	/* not visible: nothing changes */
		}
		ret = ret ?: kpatch_add_code(upd, func, true);
	}
	ret = ret ?: kpatch_add_reaches(upd);
	if (ret) {
		kpatch_free_ranges(upd);
		return ret;
	}

	/* Sort and merge, so that one binary search answers each address. */
	sort(upd->ranges, upd->nr_ranges, sizeof(*upd->ranges),
	     kpatch_cmp_range, NULL);
	for (i = 1, n = upd->nr_ranges ? 1 : 0; i < upd->nr_ranges; i++) {
		struct kpatch_range *last = &upd->ranges[n - 1];

		if (upd->ranges[i].start <= last->end)
			last->end = max(last->end, upd->ranges[i].end);
		else
			upd->ranges[n++] = upd->ranges[i];
	}
	upd->nr_ranges = n;
	return 0;
}

/* Is there any code that @upd's stack check looks for? */
static bool kpatch_checks(const struct kpatch_update *upd)
{
	return upd->nr_ranges || upd->nr_whole;
}

static bool kpatch_in_ranges(const struct kpatch_update *upd,
			     unsigned long addr)
{
	unsigned int lo = 0, hi = upd->nr_ranges;

	while (lo < hi) {
		unsigned int mid = lo + (hi - lo) / 2;

		if (addr < upd->ranges[mid].start)
			hi = mid;
		else if (addr >= upd->ranges[mid].end)
			lo = mid + 1;
		else
			return true;
	}
	return false;
}

/*
 * A task's name, printed with %*pE: a task chooses its own name
 * (prctl(PR_SET_NAME)), and a newline in it must not start a line of the
 * log or of the check file.
 */
static int kpatch_comm_len(const char *comm)
{
	return strnlen(comm, TASK_COMM_LEN);
}

static __cold void kpatch_refuse(struct kpatch_update *upd,
				 enum kpatch_refusal why,
				 struct task_struct *task, unsigned long addr)
{
	upd->refusal = why;
	upd->busy_addr = addr;
	upd->busy_pid = task->pid;
	strscpy(upd->busy_comm, task->comm, sizeof(upd->busy_comm));
}

/*
 * Walk the kernel stack of @task, which must not run meanwhile, and look
 * each return address up in the range table.  The walk follows the
 * reliable-stacktrace rules of the x86 arch code: a user-mode register
 * frame ends a task's kernel stack; any unwinder error, or a return
 * address outside known text, makes the stack unreliable.
 */
static int kpatch_walk_stack(struct task_struct *task,
			     struct kpatch_update *upd)
{
	struct unwind_state state;
	struct pt_regs *regs;
	unsigned long addr;

	for (unwind_start(&state, task, NULL, NULL);
	     !unwind_done(&state) && !unwind_error(&state);
	     unwind_next_frame(&state)) {
		regs = unwind_get_entry_regs(&state, NULL);
		if (regs) {
			if (user_mode(regs))
				return 0;
			/*
			 * An in-kernel interrupt frame: ORC unwinds through it
			 * reliably, frame pointers do not.
			 */
			if (IS_ENABLED(CONFIG_FRAME_POINTER)) {
				kpatch_refuse(upd, KPATCH_UNRELIABLE, task, 0);
				return -EBUSY;
			}
		}
		addr = unwind_get_return_address(&state);
		if (!addr) {
			kpatch_refuse(upd, KPATCH_UNRELIABLE, task, 0);
			return -EBUSY;
		}
		if (kpatch_in_ranges(upd, addr) ||
		    (upd->nr_whole && kpatch_in_whole(upd, task, addr))) {
			kpatch_refuse(upd, KPATCH_BUSY, task, addr);
			return -EBUSY;
		}
	}
	if (unwind_error(&state)) {
		kpatch_refuse(upd, KPATCH_UNRELIABLE, task, 0);
		return -EBUSY;
	}
	return 0;
}

/*
 * Check one task's stack from the stop_machine() callback.  The task is not
 * running (see below for the exceptions), so its stack cannot change.
 */
static int kpatch_check_task(struct task_struct *task,
			     struct kpatch_update *upd)
{
	/*
	 * Every online CPU other than this one is running its stopper thread
	 * in the stop_machine() loop with interrupts off, so a task that is
	 * on a CPU and is not current is one of those threads.  Its stack is
	 * live and cannot be walked, but it is the same call chain as
	 * current's down to multi_cpu_stop(), which is walked.  The functions
	 * that loop calls are covered by the state machine: calling a patched
	 * one during the update forces KPATCH_STATE_FAILURE.
	 */
	if (task != current && READ_ONCE(task->on_cpu)) {
		WARN_ON_ONCE(!(task->flags & PF_KTHREAD));
		return 0;
	}

	/*
	 * A task that has exited for good has no stack left (and nothing on
	 * it).  Nobody can drop or take a stack reference while we run.
	 */
	if (!task_stack_page(task) || !refcount_read(&task->stack_refcount))
		return 0;

	return kpatch_walk_stack(task, upd);
}

/*
 * The pre-walk, an optional cache: most of the stack check, done before
 * stop_machine() so that the CPUs stop only for the tasks that ran since.
 * Correctness never depends on it: a task it did not remember is walked
 * by the callback, and with nothing remembered (no memory for the cache,
 * say) the callback walks every task.
 *
 *   before stop_machine(), kpatch_mutex held     in the callback
 *
 *   for each task T on the task list:            walk current and init_task
 *     lock T->pi_lock                            for each task T on the list:
 *     T blocked, off CPU? ---no---> leave T        T cached, same pid, start
 *       | yes                   to the callback    time, nvcsw + nivcsw?
 *       v                                            | yes         | no
 *     walk T's stack: in use? ---yes---> refuse      v             v
 *       | clean                                    trust the    walk T's
 *       v                                          pre-walk     stack
 *     cache T: pointer, pid, start time, nvcsw + nivcsw
 *     unlock T->pi_lock
 *
 * Why the callback may trust a cached walk of T:
 *
 * 1. The walk saw T's stack as it was.  T->pi_lock is held and T is
 *    blocked (not TASK_RUNNING, TASK_WAKING or TASK_DEAD), not on a
 *    runqueue and not on a CPU.  Such a task runs again only when woken,
 *    and try_to_wake_up() and wake_up_new_task() take T->pi_lock first:
 *    until the lock is dropped T cannot run, so its stack neither changes
 *    nor goes away (a stack is freed after its task's last switch-out).
 *    get_wchan() walks other tasks' stacks under the same rule; the test
 *    of on_cpu covers a task that has dequeued itself but is still
 *    switching out.
 * 2. A task's kernel stack changes only while the task runs.  Nobody else
 *    writes there, but ptrace into the user register frame, where every
 *    walk stops.
 * 3. Each time __schedule() takes a task off a CPU (prev != next) it
 *    increments prev->nvcsw (the task blocked) or prev->nivcsw (it was
 *    preempted, or switched out while running).  No other path switches
 *    a task out, and the counts never go down.
 * 4. In the callback every online CPU runs its stopper thread, so no other
 *    task is on a CPU: a task that ran at any time after its pre-walk has
 *    been switched out since, and its count is higher.  An equal count
 *    means that T did not run -- its stack is the one walked -- or that T
 *    is a stopper thread, running now.  The callback walks current (this
 *    CPU's stopper) itself; the other stoppers are in the stop_machine()
 *    loop, covered as kpatch_check_task() explains.
 * 5. Pointer, pid and start time name one task: a task_struct freed after
 *    the pre-walk and reused for a new task has another pid or start time.
 *    Tasks without a cache entry (new ones, those running, runnable or
 *    exiting at the pre-walk) and the idle task are walked in the
 *    callback, as are tasks that ran.
 *
 * The callback sees the counts written on other CPUs: a switch-out on a
 * CPU comes before its stopper starts, and the stop_machine() rendezvous
 * (acknowledged with fully ordered atomics) comes before the callback.
 */

/* Remember that @task's stack is clean; its pi_lock is held. */
static void kpatch_seen_add(struct kpatch_update *upd,
			    struct task_struct *task)
{
	struct kpatch_seen *s = &upd->seen[upd->nr_seen++];

	s->task = task;
	s->switches = task->nvcsw + task->nivcsw;
	s->start_time = task->start_time;
	s->pid = task->pid;
}

/*
 * Pre-walk @task if it can be kept from running meanwhile, and cache it if
 * its stack is clean.  Returns -EBUSY when the stack refuses the update;
 * a task that cannot be walked now is left to the callback.
 */
static int kpatch_prewalk_task(struct task_struct *task,
			       struct kpatch_update *upd)
{
	unsigned long flags;
	unsigned int state;
	int ret = 0;

	if (task == current || (!upd->check && upd->nr_seen == upd->max_seen))
		return 0;

	raw_spin_lock_irqsave(&task->pi_lock, flags);
	state = READ_ONCE(task->__state);
	/* on_rq after the state, as in try_to_wake_up() and get_wchan(). */
	smp_rmb();
	if (state == TASK_RUNNING || state == TASK_WAKING ||
	    state == TASK_DEAD || READ_ONCE(task->on_rq))
		goto out;
	/* on_cpu after on_rq, as in try_to_wake_up(). */
	smp_rmb();
	/*
	 * A task that has dequeued itself may still be switching out.  The
	 * acquire pairs with the release that clears on_cpu in the scheduler's
	 * finish_task(): once on_cpu reads 0, the stack is visible as the
	 * switch-out left it.
	 */
	if (smp_load_acquire(&task->on_cpu))
		goto out;
	if (!task_stack_page(task) || !refcount_read(&task->stack_refcount))
		goto out;

	ret = kpatch_walk_stack(task, upd);
	if (!ret && !upd->check)
		kpatch_seen_add(upd, task);
out:
	raw_spin_unlock_irqrestore(&task->pi_lock, flags);
	return ret;
}

static int kpatch_cmp_seen(const void *a, const void *b)
{
	const struct kpatch_seen *x = *(const struct kpatch_seen **)a;
	const struct kpatch_seen *y = *(const struct kpatch_seen **)b;

	return x->task < y->task ? -1 : x->task > y->task;
}

/* Drop what the pre-walk of one try learned. */
static void kpatch_forget(struct kpatch_update *upd)
{
	kvfree(upd->seen);
	kvfree(upd->seen_by_task);
	upd->seen = NULL;
	upd->seen_by_task = NULL;
	upd->nr_seen = 0;
	upd->max_seen = 0;
}

/* A dry run found the task of the last refusal in the way: list it. */
static void kpatch_blocker_add(struct kpatch_update *upd)
{
	struct kpatch_check *chk = upd->check;
	struct kpatch_blocker *b;

	if (chk->nr == KPATCH_CHECK_MAX) {
		chk->more++;
		return;
	}
	b = &chk->blockers[chk->nr++];
	b->addr = upd->refusal == KPATCH_BUSY ? upd->busy_addr : 0;
	b->pid = upd->busy_pid;
	memcpy(b->comm, upd->busy_comm, sizeof(b->comm));
}

/*
 * A dry run also walks the exiting tasks that have left the task list
 * (see "Exiting tasks" below), under the same rule as the pre-walk.  The
 * set's lock keeps each task_struct in it alive; it nests outside the
 * tasks' pi_lock, and no path takes them the other way round.
 */
static int kpatch_check_exiting_dry(struct kpatch_update *upd);

/*
 * Pre-walk every task (see above).  Returns -EBUSY if a stack refuses the
 * update.  Without memory for the cache nothing is remembered, and the
 * callback walks every task.  A dry run (upd->check) caches nothing, goes
 * on past a refusal to list every task in the way, and walks the exiting
 * tasks too.
 */
static int kpatch_prewalk(struct kpatch_update *upd)
{
	struct task_struct *g, *t;
	unsigned int i, n = 0;
	int ret = 0, busy = 0;

	if (!kpatch_checks(upd))
		return 0;
	if (upd->check) {
		rcu_read_lock();
		for_each_process_thread(g, t)
			if (kpatch_prewalk_task(t, upd)) {
				kpatch_blocker_add(upd);
				busy = -EBUSY;
			}
		rcu_read_unlock();
		return kpatch_check_exiting_dry(upd) ?: busy;
	}

	/* Room for the tasks there are now and some that may come. */
	rcu_read_lock();
	for_each_process_thread(g, t)
		n++;
	rcu_read_unlock();
	n += n / 16 + 16;
	upd->seen = kvmalloc_array(n, sizeof(*upd->seen), GFP_KERNEL);
	upd->seen_by_task = kvmalloc_array(n, sizeof(*upd->seen_by_task),
					   GFP_KERNEL);
	if (!upd->seen || !upd->seen_by_task) {
		kpatch_forget(upd);
		return 0;
	}
	upd->max_seen = n;

	/* for_each_process_thread() is two loops: leave with goto. */
	rcu_read_lock();
	for_each_process_thread(g, t) {
		ret = kpatch_prewalk_task(t, upd);
		if (ret)
			goto out;
	}
out:
	rcu_read_unlock();
	if (ret) {
		kpatch_forget(upd);
		return ret;
	}

	for (i = 0; i < upd->nr_seen; i++)
		upd->seen_by_task[i] = &upd->seen[i];
	sort(upd->seen_by_task, upd->nr_seen, sizeof(*upd->seen_by_task),
	     kpatch_cmp_seen, NULL);
	return 0;
}

/*
 * The cache entry of @task, or NULL, when it is not the next one in task
 * list order (see kpatch_check_stacks()).  Kept out of line: the key on
 * the stack would cost every task of the callback's loop.
 */
static noinline struct kpatch_seen *
kpatch_seen_search(const struct kpatch_update *upd, struct task_struct *task)
{
	struct kpatch_seen key = { .task = task }, *keyp = &key, **found;

	found = bsearch(&keyp, upd->seen_by_task, upd->nr_seen,
			sizeof(*upd->seen_by_task), kpatch_cmp_seen);
	return found ? *found : NULL;
}

/* Is @task the task of @s, not switched out since its pre-walk? */
static __always_inline bool kpatch_seen_unchanged(const struct kpatch_seen *s,
						  const struct task_struct *task)
{
	return s->switches == task->nvcsw + task->nivcsw &&
	       s->pid == task->pid && s->start_time == task->start_time;
}

/*
 * Exiting tasks.  A task leaves the task list in exit_notify() -- at once
 * if it is autoreaped, as kernel threads are, else when its parent reaps
 * it -- but then goes on running the tail of do_exit() until its last
 * switch-out, and may sleep or be preempted there, in any function that
 * tail calls.  for_each_process_thread() does not find it any more.  So
 * kpatch keeps a set of its own: every task from its sched_process_exit
 * tracepoint, which do_exit() passes before exit_notify(), until its
 * sched_process_free tracepoint, which comes an RCU grace period after
 * the task's last switch-out (when the last of its task_struct's RCU
 * users is gone); and, at load, every task that is exiting already and
 * still on the task list (kpatch_exiting_start()).  The stop_machine()
 * callback walks the tasks of the set that the pre-walk did not see
 * clean; one that is dead has no stack left and costs a test.  Nothing of
 * this touches the redirect.
 *
 * The set is a hash table under kpatch_exiting_lock, a raw spinlock taken
 * with interrupts off: the exit probe runs with preemption off, the free
 * probe from an RCU callback, and the stop_machine() callback reads the
 * set, none of which may sleep, on PREEMPT_RT either.  Inside
 * stop_machine() nobody holds the lock (a holder has interrupts off, so
 * the stopper of its CPU cannot start before it lets go) and no probe
 * runs.  Records come from a free list, which a work item keeps
 * KPATCH_EXITING_RESERVE long, in process context; when a burst of exits
 * has nearly emptied it, the exit probe allocates one with GFP_ATOMIC,
 * except on PREEMPT_RT, where the slab allocator may not be called with
 * preemption off (there the reserve is larger instead).  Should a task
 * exit while the list is empty all the same, kpatch no longer knows every
 * exiting task, and refuses every update that needs the stack check from
 * then on (kpatch_exiting_lost).
 */
#define KPATCH_EXITING_BITS	6
#define KPATCH_EXITING_RESERVE	(IS_ENABLED(CONFIG_PREEMPT_RT) ? 512 : 64)

struct kpatch_exiting {
	struct hlist_node node;		/* in the set, or in the free list */
	struct task_struct *task;
};

static DEFINE_HASHTABLE(kpatch_exiting_hash, KPATCH_EXITING_BITS);
static HLIST_HEAD(kpatch_exiting_free);
static unsigned int kpatch_exiting_nfree;
static DEFINE_RAW_SPINLOCK(kpatch_exiting_lock);
static bool kpatch_exiting_lost;

static void kpatch_exiting_refill(struct work_struct *work);
static DECLARE_WORK(kpatch_exiting_work, kpatch_exiting_refill);

/* The record of @task, or NULL.  Caller holds kpatch_exiting_lock. */
static struct kpatch_exiting *kpatch_exiting_find(struct task_struct *task)
{
	struct kpatch_exiting *e;

	hash_for_each_possible(kpatch_exiting_hash, e, node,
			       (unsigned long)task)
		if (e->task == task)
			return e;
	return NULL;
}

/*
 * Put @task into the set, once, with a record from the free list.  Caller
 * holds kpatch_exiting_lock.  Returns whether the list needs refilling.
 */
static bool kpatch_exiting_add(struct task_struct *task)
{
	struct kpatch_exiting *e;

	lockdep_assert_held(&kpatch_exiting_lock);
	if (kpatch_exiting_find(task))
		return false;
	if (hlist_empty(&kpatch_exiting_free)) {
		WRITE_ONCE(kpatch_exiting_lost, true);
		return true;
	}
	e = hlist_entry(kpatch_exiting_free.first, struct kpatch_exiting,
			node);
	hlist_del(&e->node);
	e->task = task;
	hash_add(kpatch_exiting_hash, &e->node, (unsigned long)task);
	return --kpatch_exiting_nfree < KPATCH_EXITING_RESERVE / 2;
}

/* sched_process_exit: @task is current, still on the task list. */
static void kpatch_exit_probe(void *data, KPATCH_EXIT_PROBE_ARGS)
{
	struct kpatch_exiting *spare = NULL;
	unsigned long flags;
	bool refill;

	if (!IS_ENABLED(CONFIG_PREEMPT_RT) &&
	    READ_ONCE(kpatch_exiting_nfree) < KPATCH_EXITING_RESERVE / 4)
		spare = kmalloc(sizeof(*spare), GFP_ATOMIC | __GFP_NOWARN);
	raw_spin_lock_irqsave(&kpatch_exiting_lock, flags);
	if (spare) {
		hlist_add_head(&spare->node, &kpatch_exiting_free);
		kpatch_exiting_nfree++;
	}
	refill = kpatch_exiting_add(task);
	raw_spin_unlock_irqrestore(&kpatch_exiting_lock, flags);
	if (refill)
		queue_work(system_highpri_wq, &kpatch_exiting_work);
}

/* sched_process_free: @task will never run again. */
static void kpatch_free_probe(void *data, struct task_struct *task)
{
	struct kpatch_exiting *e;
	unsigned long flags;
	bool trim = false;

	raw_spin_lock_irqsave(&kpatch_exiting_lock, flags);
	e = kpatch_exiting_find(task);
	if (e) {
		hash_del(&e->node);
		hlist_add_head(&e->node, &kpatch_exiting_free);
		trim = ++kpatch_exiting_nfree > 4 * KPATCH_EXITING_RESERVE;
	}
	raw_spin_unlock_irqrestore(&kpatch_exiting_lock, flags);
	if (trim)
		queue_work(system_highpri_wq, &kpatch_exiting_work);
}

/*
 * Bring the free list to between @want and twice KPATCH_EXITING_RESERVE
 * records, or more if @want is more; false if memory ran out.
 */
static bool kpatch_exiting_fill(unsigned int want)
{
	struct kpatch_exiting *e, *spare = NULL;
	unsigned long flags;
	unsigned int n;

	for (;;) {
		e = NULL;
		raw_spin_lock_irqsave(&kpatch_exiting_lock, flags);
		if (spare) {
			hlist_add_head(&spare->node, &kpatch_exiting_free);
			kpatch_exiting_nfree++;
			spare = NULL;
		}
		n = kpatch_exiting_nfree;
		if (n > max(want, 2 * KPATCH_EXITING_RESERVE)) {
			e = hlist_entry(kpatch_exiting_free.first,
					struct kpatch_exiting, node);
			hlist_del(&e->node);
			kpatch_exiting_nfree--;
		}
		raw_spin_unlock_irqrestore(&kpatch_exiting_lock, flags);
		kfree(e);
		if (e)
			continue;	/* trimming */
		if (n >= want)
			return true;
		spare = kmalloc(sizeof(*spare), GFP_KERNEL);
		if (!spare)
			return false;
	}
}

static void kpatch_exiting_refill(struct work_struct *work)
{
	kpatch_test_point(KPATCH_TEST_REFILL);
	kpatch_exiting_fill(KPATCH_EXITING_RESERVE);
}

/*
 * From the stop_machine() callback: walk the exiting tasks that the
 * pre-walk did not find clean (it walked those still on the task list).
 */
static int kpatch_check_exiting(struct kpatch_update *upd)
{
	struct kpatch_exiting *e;
	struct kpatch_seen *s;
	int bkt, ret = 0;

	raw_spin_lock(&kpatch_exiting_lock);
	if (kpatch_exiting_lost) {	/* since kpatch_try_update() looked */
		upd->refusal = KPATCH_LOST;
		ret = -EBUSY;
		goto out;
	}
	hash_for_each(kpatch_exiting_hash, bkt, e, node) {
		s = kpatch_seen_search(upd, e->task);
		if (s && kpatch_seen_unchanged(s, e->task))
			continue;
		ret = kpatch_check_task(e->task, upd);
		if (ret)
			break;
	}
out:
	raw_spin_unlock(&kpatch_exiting_lock);
	return ret;
}

/*
 * For a dry run: walk the exiting tasks that have left the task list (an
 * exiting task still on it has a pid, and the pre-walk listed it already)
 * and can be kept from running meanwhile.
 */
static int kpatch_check_exiting_dry(struct kpatch_update *upd)
{
	struct kpatch_exiting *e;
	unsigned long flags;
	int bkt, ret = 0;

	raw_spin_lock_irqsave(&kpatch_exiting_lock, flags);
	hash_for_each(kpatch_exiting_hash, bkt, e, node) {
		if (pid_alive(e->task))
			continue;
		if (kpatch_prewalk_task(e->task, upd)) {
			kpatch_blocker_add(upd);
			ret = -EBUSY;
		}
	}
	raw_spin_unlock_irqrestore(&kpatch_exiting_lock, flags);
	return ret;
}

/*
 * The activeness safety check: no task may be executing, or be about to
 * return into, code that the update makes unreachable.
 *
 * Called from the stop_machine() callback, after the pre-walk.  The task
 * list cannot change: it is only modified under tasklist_lock with
 * interrupts disabled, and every CPU is in the stop_machine() loop with
 * interrupts disabled, so no such section is in progress.  Walked here:
 * current, init_task and every task that the pre-walk did not cache or
 * that was switched out since (see the pre-walk for why that is enough),
 * then the exiting tasks, which may have left the task list.
 *
 * The idle tasks are not on the task list.  init_task (the boot CPU's idle
 * task) is checked; the other online CPUs' idle tasks are not reachable
 * through exported symbols, but each of them is parked in the same
 * idle-loop call chain as init_task, so checking init_task covers those
 * functions.  CPUs that are offline are not covered (see
 * Documentation.txt).
 */
static int kpatch_check_stacks(struct kpatch_update *upd)
{
	struct kpatch_seen *next = upd->seen, *end = next + upd->nr_seen, *s;
	struct task_struct *g, *t;
	int ret;

	if (!kpatch_checks(upd))
		return 0;

	/* Running now, or idle: whatever their switch counts say. */
	ret = kpatch_check_task(current, upd);
	if (!ret)
		ret = kpatch_check_task(&init_task, upd);
	if (ret)
		return ret;

	/*
	 * The loop runs once per task with every CPU stopped: keep it short.
	 * The pre-walk went through the same list in the same order, so a
	 * task's entry, if it has one, is almost always @next; tasks created
	 * or gone since make it search.  for_each_process_thread() is two
	 * loops: leave with goto.
	 */
	rcu_read_lock();
	for_each_process_thread(g, t) {
		if (likely(next < end && next->task == t)) {
			if (likely(kpatch_seen_unchanged(next++, t)))
				continue;
		} else {
			s = kpatch_seen_search(upd, t);
			if (s) {
				next = s + 1;
				if (kpatch_seen_unchanged(s, t))
					continue;
			}
		}
		ret = kpatch_check_task(t, upd);
		if (ret)
			goto out;
	}
out:
	rcu_read_unlock();
	return ret ?: kpatch_check_exiting(upd);
}

/* ------------------------------------------------------------------------
 * Sites: ftrace_ops sites, then direct sites
 */

/*
 * Only looked at under kpatch_mutex, when an update makes or drops its
 * sites, never on a call: a small table keeps kpatch.ko small, and a
 * lookup walks a chain of a few dozen sites at worst.
 */
#define KPATCH_SITE_BITS	7
static DEFINE_HASHTABLE(kpatch_site_hash, KPATCH_SITE_BITS);

/*
 * Never registered: its filter is only used to ask ftrace whether an
 * address is one of its call sites, without touching any code.
 */
static struct ftrace_ops kpatch_probe_ops;

/*
 * Registered from load to unload on kpatch_ftrace_anchor(), which is never
 * called, only for its FTRACE_OPS_FL_PERMANENT: while it is there,
 * `sysctl kernel.ftrace_enabled=0` is refused instead of silently
 * unpatching the kernel, and kpatch does not load while ftrace is off.
 * The direct ftrace_ops cannot carry that flag (ftrace sets their flags).
 */
static void notrace kpatch_anchor_handler(unsigned long ip,
					  unsigned long parent_ip,
					  struct ftrace_ops *ops,
					  struct ftrace_regs *fregs)
{
}

static struct ftrace_ops kpatch_anchor_ops = {
	.func	= kpatch_anchor_handler,
	.flags	= FTRACE_OPS_FL_PERMANENT,
};

static noinline void kpatch_ftrace_anchor(void)
{
	barrier();
}

/*
 * The ftrace location of the function starting at @addr: the fentry call,
 * which on IBT kernels comes after the ENDBR (or its sealed replacement).
 */
static unsigned long kpatch_ftrace_ip(unsigned long addr)
{
	return kpatch_endbr(addr, true) ? addr + ENDBR_INSN_SIZE : addr;
}

/*
 * Is @ip an ftrace call site?  Ask ftrace, then make sure the instruction
 * there is what ftrace puts at its sites (a 5-byte NOP or a CALL, or the
 * INT3 of a site being rewritten), so that @ip is the site itself and not
 * an address inside it.  Returns 0 if it is, -EINVAL if it is not, or
 * -ENOMEM if ftrace had no memory to answer.
 */
static int kpatch_check_ftrace_site(unsigned long ip)
{
	static const u8 nop5[] = { BYTES_NOP5 };
	u8 insn[MCOUNT_INSN_SIZE];
	int ret;

	ret = ftrace_set_filter_ip(&kpatch_probe_ops, ip, 0, 1);
	if (ret)
		return ret == -ENOMEM ? -ENOMEM : -EINVAL;
	if (copy_from_kernel_nofault(insn, (void *)ip, sizeof(insn)))
		return -EINVAL;
	if (!memcmp(insn, nop5, sizeof(nop5)) ||
	    insn[0] == CALL_INSN_OPCODE || insn[0] == INT3_INSN_OPCODE)
		return 0;
	return -EINVAL;
}

/*
 * A new site for the call site @ip of a function in @mod (NULL: vmlinux).
 * The patch being enabled pins @mod and kpatch already; the site takes
 * references of its own, see struct kpatch_site.
 */
static struct kpatch_site *kpatch_site_alloc(unsigned long ip,
					     struct module *mod)
{
	struct kpatch_site *site = kzalloc(sizeof(*site), GFP_KERNEL);

	if (!site)
		return NULL;
	site->ip = ip;
	site->mod = mod;
	if (mod)
		__module_get(mod);
	__module_get(THIS_MODULE);
	return site;
}

/* Free @site, which hooks nothing any more. */
static void kpatch_site_free(struct kpatch_site *site)
{
	module_put(site->mod);
	module_put(THIS_MODULE);
	kfree(site);
}

/* The site at @ip, or NULL.  Caller holds kpatch_mutex. */
static struct kpatch_site *kpatch_site_find(unsigned long ip)
{
	struct kpatch_site *site;

	lockdep_assert_held(&kpatch_mutex);
	hash_for_each_possible(kpatch_site_hash, site, node, ip)
		if (site->ip == ip)
			return site;
	return NULL;
}

/*
 * A registration of an ftrace_ops failed.  It may have failed after ftrace
 * had put the ops on its list (another IPMODIFY user or direct call owns a
 * function, say), and ftrace takes it off again without waiting: a CPU in
 * ftrace's list function, which walks the list with preemption off, may
 * still be reading the ops and its filter, and calling its handler.  So
 * wait for those before the ops is freed.  Only on this failure path.
 */
static __cold void kpatch_ftrace_gave_up(void)
{
	kpatch_sync_preempt_off();
}

/* Make an ftrace_ops site for the call site @ip of a function in @mod. */
static int kpatch_fops_add(unsigned long ip, struct module *mod)
{
	struct kpatch_site *site;
	struct kpatch_fops *fops;
	int ret;

	site = kpatch_site_alloc(ip, mod);
	fops = kzalloc(sizeof(*fops), GFP_KERNEL);
	if (!site || !fops) {
		ret = -ENOMEM;
		goto err_free;
	}
	fops->ops.func = kpatch_ftrace_handler;
	fops->ops.flags = KPATCH_FOPS_FLAGS;
	ret = ftrace_set_filter_ip(&fops->ops, ip, 0, 0);
	if (!ret) {
		ret = register_ftrace_function(&fops->ops);
		if (ret)
			kpatch_ftrace_gave_up();
	}
	if (ret) {
		ftrace_free_filter(&fops->ops);
		goto err_free;
	}
	site->fops = fops;
	hash_add(kpatch_site_hash, &site->node, ip);
	return 0;

err_free:
	kfree(fops);
	if (site)
		kpatch_site_free(site);
	return ret;
}

#ifdef CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS
/*
 * The direct path.  Each direct site's fentry call is an ftrace direct
 * call of kpatch_direct_tramp, so a call of a patched function f goes
 *
 *   caller: call f  ->  f: call kpatch_direct_tramp  ->  trampoline
 *
 * and finds on the stack f's fentry return address, then the caller's
 * return address.  The trampoline looks the first up in
 * kpatch_direct_table, overwrites that return address with the slot's
 * target and returns.  The target is always an address to return to, so
 * that the trampoline tests nothing but the key (see kpatch_site_settle()):
 * the replacement, which then runs exactly as if the caller had called
 * it; the key itself, to go on in f; or kpatch_direct_slowpath, which
 * asks kpatch_redirect_slow(), saving the argument registers around the
 * call.  Only %r10 and %r11, which carry no argument at a function's
 * entry, are used on the fast path, and %r11 still holds the key when the
 * trampoline returns into kpatch_direct_slowpath.
 *
 * The trampoline is an ordinary function for objtool: one return address
 * on the stack on every path, no frame, so the ORC data objtool writes for
 * it lets the unwinder and the stack check walk through it (a task can be
 * interrupted and preempted inside it; its stack then shows the trampoline
 * and f's fentry return address, or, for the two instructions after the
 * overwrite, the replacement's address -- both are in the ranges that the
 * stack check of any update changing f refuses).  It ends in RET, the
 * kernel's return thunk where the kernel uses one, and accounts for its
 * call where the kernel tracks call depth, like ftrace's own trampolines.
 *
 * The consistency of one call sequence (an NMI that calls f and then g must
 * see one version of the patch) is argued at kpatch_update_cb().
 */
void kpatch_direct_tramp(void);

/*
 * The table the direct trampoline looks its caller up in: open addressing
 * with linear probing, keyed by the return address of the fentry call
 * (ip + MCOUNT_INSN_SIZE), hashed by a multiply of its low 32 bits.
 * A slot is 16 bytes, the key and the address the trampoline returns to,
 * so that the trampoline reaches both from one pointer.
 *
 * The table is allocated with the first direct site and freed when the
 * last one goes (kpatch_direct_table_get() and kpatch_direct_table_put()):
 * 64 KiB that kpatch does not hold while it has no direct site.
 *
 * Written under kpatch_mutex, read by the trampoline without any lock.  A
 * key is added (its target first, then the key) before its direct call is
 * registered, and removed (replaced by KPATCH_DIRECT_GONE, which a lookup
 * steps over) only after the call is unregistered, which waits for every
 * task inside the trampoline.  Live entries never move, and a slot
 * becomes empty again only where no lookup for a live key can pass it
 * (see kpatch_direct_remove()), so a lookup always reaches its key before
 * an empty slot.  At most KPATCH_DIRECT_MAX slots are used (live or
 * gone), which keeps lookups short; beyond that, new sites take the
 * ftrace_ops path, and the update says so in the log.
 */
#define KPATCH_DIRECT_BITS	12
#define KPATCH_DIRECT_SLOTS	4096	/* 2^KPATCH_DIRECT_BITS, for the asm */
#define KPATCH_DIRECT_MAX	(KPATCH_DIRECT_SLOTS / 2)
#define KPATCH_DIRECT_GONE	1UL
#define KPATCH_DIRECT_MUL	0x61c88647	/* 2^32 / golden ratio */

struct kpatch_direct_slot {
	unsigned long key;		/* offset 0, for the asm */
	unsigned long target;		/* offset 8, for the asm */
};

/*
 * The trampoline loads this pointer on every call.  It is set before the
 * first direct call is registered and cleared only after the last one is
 * unregistered, so a trampoline never finds it NULL (the direct call of
 * kpatch_direct_anchor() is never made).
 */
static struct kpatch_direct_slot *kpatch_direct_table __used;
static unsigned int kpatch_direct_used;	/* slots live or gone */
static unsigned int kpatch_direct_live;
static bool kpatch_direct_full_logged;	/* until there is room again */

/* The trampoline's slow path; @ret is the fentry call's return address. */
static unsigned long notrace __used kpatch_direct_slow(unsigned long ret)
{
	return kpatch_redirect_slow(ret - MCOUNT_INSN_SIZE);
}

#define KPATCH_STR(x)	__stringify(x)

/*
 * Aligned to 16 bytes like every function the compiler emits: ftrace takes
 * the low bit of a direct call's address as a flag on kernels with
 * DYNAMIC_FTRACE_WITH_JMP (an odd address means "jump there, do not
 * call"), so the address must be even, and the test bed's build checks
 * that it is a multiple of 16.
 */
asm(".pushsection .text, \"ax\", @progbits\n"
"	.balign	16\n"
"	.type	kpatch_direct_tramp, @function\n"
"kpatch_direct_tramp:\n"
	ASM_ENDBR
	CALL_DEPTH_ACCOUNT "\n"
"	movq	(%rsp), %r11\n"
"	imull	$" KPATCH_STR(KPATCH_DIRECT_MUL) ", %r11d, %r10d\n"
"	shrl	$(32 - " KPATCH_STR(KPATCH_DIRECT_BITS) "), %r10d\n"
"	shll	$4, %r10d\n"
"	addq	kpatch_direct_table(%rip), %r10\n"
"1:	cmpq	%r11, (%r10)\n"
"	jne	2f\n"
"	movq	8(%r10), %r10\n"
"	movq	%r10, (%rsp)\n"
	ASM_RET
"2:	cmpq	$0, (%r10)\n"
"	je	3f\n"
"	subq	kpatch_direct_table(%rip), %r10\n"
"	addl	$16, %r10d\n"
"	andl	$(" KPATCH_STR(KPATCH_DIRECT_SLOTS) " * 16 - 1), %r10d\n"
"	addq	kpatch_direct_table(%rip), %r10\n"
"	jmp	1b\n"
"3:\n"
	ASM_RET
"	.size	kpatch_direct_tramp, . - kpatch_direct_tramp\n"
"	.popsection\n"
);

/*
 * The target of a direct site whose calls take the slow path.  The
 * trampoline returns into it with the caller's return address on the
 * stack, as if the caller had called it, and the key, f's fentry return
 * address, in %r11.  Pushing the key rebuilds the stack of the
 * trampoline's entry, which the unwind hint tells objtool, so that from
 * there on the unwinder and the stack check see f's fentry return address
 * as in the trampoline.  Before the push the task is, for them, about to
 * call f, and the lookup it then makes sees the table as it is by then.
 * The second return (a push and a RET) is accounted for where the kernel
 * tracks call depth.  Entered by RET, not by a call, it has an ENDBR only
 * because its address is taken.
 */
asmlinkage void kpatch_direct_slowpath(void);

asm(".pushsection .text, \"ax\", @progbits\n"
"	.balign	16\n"
"	.type	kpatch_direct_slowpath, @function\n"
"kpatch_direct_slowpath:\n"
	ASM_ENDBR
	CALL_DEPTH_ACCOUNT "\n"
"	pushq	%r11\n"
	UNWIND_HINT_FUNC
"	pushq	%rdi\n"
"	pushq	%rsi\n"
"	pushq	%rdx\n"
"	pushq	%rcx\n"
"	pushq	%r8\n"
"	pushq	%r9\n"
"	pushq	%rax\n"
"	movq	%r11, %rdi\n"
"	call	kpatch_direct_slow\n"
"	movq	%rax, %r10\n"
"	popq	%rax\n"
"	popq	%r9\n"
"	popq	%r8\n"
"	popq	%rcx\n"
"	popq	%rdx\n"
"	popq	%rsi\n"
"	popq	%rdi\n"
"	testq	%r10, %r10\n"
"	jz	1f\n"
"	movq	%r10, (%rsp)\n"
"1:\n"
	ASM_RET
"	.size	kpatch_direct_slowpath, . - kpatch_direct_slowpath\n"
"	.popsection\n"
);

/*
 * Where ftrace waits for an RCU-tasks grace period whenever it registers a
 * direct call while it has none (KPATCH_DIRECT_ANCHOR), kpatch keeps one,
 * on kpatch_direct_anchor() (never called), from load to unload, so that
 * an update does not wait.  The calls that set up one direct call at a
 * time without a grace period are not used: they corrupt ftrace's state
 * when memory runs out while one is dropped.  Where no anchor is needed,
 * the compiler drops all of it.
 */
static noinline void kpatch_direct_anchor(void)
{
	barrier();
}

static struct ftrace_ops kpatch_direct_anchor_ops;

static int kpatch_direct_anchor_set(void)
{
	int ret;

	if (!KPATCH_DIRECT_ANCHOR)
		return 0;
	ret = ftrace_set_filter_ip(&kpatch_direct_anchor_ops,
				   (unsigned long)kpatch_direct_anchor, 0, 1);
	if (!ret)
		ret = kpatch_direct_ops_register(&kpatch_direct_anchor_ops);
	if (ret) {
		ftrace_free_filter(&kpatch_direct_anchor_ops);
		pr_err("cannot set up the direct call anchor (%d)\n", ret);
	}
	return ret;
}

/* Drop the anchor; waits for an RCU-tasks grace period. */
static void kpatch_direct_unanchor(void)
{
	if (!KPATCH_DIRECT_ANCHOR)
		return;
	kpatch_direct_ops_unregister(&kpatch_direct_anchor_ops);
	ftrace_free_filter(&kpatch_direct_anchor_ops);
}

/* Set up the direct calls of the new group @grp, for @ips[@n]. */
static int kpatch_group_register(struct kpatch_group *grp, unsigned long *ips,
				 unsigned int n)
{
	int ret = ftrace_set_filter_ips(&grp->ops, ips, n, 0, 1);

	if (!ret) {
		ret = kpatch_direct_ops_register(&grp->ops);
		if (ret)
			kpatch_ftrace_gave_up();
	}
	return ret;
}

/* The first slot to try for @key; the trampoline computes the same. */
static unsigned int kpatch_direct_hash(unsigned long key)
{
	BUILD_BUG_ON(KPATCH_DIRECT_SLOTS != 1U << KPATCH_DIRECT_BITS);
	BUILD_BUG_ON(sizeof(struct kpatch_direct_slot) != 16 ||
		     offsetof(struct kpatch_direct_slot, target) != 8);
	return ((u32)key * KPATCH_DIRECT_MUL) >> (32 - KPATCH_DIRECT_BITS);
}

/*
 * Add @key with the target of no entry (the key itself), and return its
 * slot.  There is room.
 */
static struct kpatch_direct_slot *kpatch_direct_insert(unsigned long key)
{
	struct kpatch_direct_slot *tab = kpatch_direct_table;
	unsigned int i = kpatch_direct_hash(key);

	while (tab[i].key > KPATCH_DIRECT_GONE)
		i = (i + 1) & (KPATCH_DIRECT_SLOTS - 1);
	if (!tab[i].key)
		kpatch_direct_used++;
	kpatch_direct_live++;
	WRITE_ONCE(tab[i].target, key);
	/*
	 * The target before the key, for a trampoline that finds the key
	 * (x86 keeps the trampoline's two loads in order).  No call can reach
	 * the key before its direct call is registered anyway.
	 */
	smp_wmb();
	WRITE_ONCE(tab[i].key, key);
	return &tab[i];
}

/*
 * Remove the key in @slot; its direct call is unregistered, so no lookup
 * is for it any more.  The slot becomes a tombstone, and tombstones that
 * end a run of used slots become empty again, from the last one back.
 * That is safe for the lookups of the trampoline, which run without any
 * lock: a slot is emptied only when the next one is empty, so no lookup
 * for a live key passes it (a live key lies before the first empty slot
 * after its hash slot: true when it was inserted, and kept by emptying
 * only slots that an empty slot follows).  Tombstones followed by a used
 * slot stay, and insertion reuses them.  So no tombstone is ever followed
 * by an empty slot, and a table without live keys is empty.
 */
static __cold void kpatch_direct_remove(struct kpatch_direct_slot *s)
{
	const unsigned int mask = KPATCH_DIRECT_SLOTS - 1;
	struct kpatch_direct_slot *tab = kpatch_direct_table;
	unsigned int slot = s - tab;

	WRITE_ONCE(tab[slot].key, KPATCH_DIRECT_GONE);
	kpatch_direct_live--;
	while (tab[slot].key == KPATCH_DIRECT_GONE &&
	       !tab[(slot + 1) & mask].key) {
		WRITE_ONCE(tab[slot].key, 0);
		kpatch_direct_used--;
		kpatch_direct_full_logged = false;
		slot = (slot - 1) & mask;
	}
	WARN_ON_ONCE(!kpatch_direct_live && kpatch_direct_used);
}

/*
 * The table exists while kpatch has a direct site.  kpatch_direct_add()
 * gets it before it inserts the first key, so the pointer is set before
 * any direct call of kpatch_direct_tramp can be made.
 */
static int kpatch_direct_table_get(void)
{
	struct kpatch_direct_slot *tab;

	if (kpatch_direct_table)
		return 0;
	tab = vzalloc(array_size(KPATCH_DIRECT_SLOTS, sizeof(*tab)));
	if (!tab)
		return -ENOMEM;
	WRITE_ONCE(kpatch_direct_table, tab);
	return 0;
}

/*
 * Free the table once no direct site is left.  Who could still read it:
 * only a task in kpatch_direct_tramp, which loads the pointer and reads
 * slots, because kpatch_direct_slowpath and the functions it returns to
 * do not.  A task reaches the trampoline only through a direct call of a
 * group, and the caller has just unregistered the last group: ftrace's
 * unregister (ftrace_shutdown() of a module's ftrace_ops, which ftrace
 * flags FTRACE_OPS_FL_DYNAMIC) waits for synchronize_rcu_tasks_rude() and,
 * on preemptible kernels, synchronize_rcu_tasks(), that is for every task
 * that was in the trampoline, even preempted there.  The calls of a group
 * that failed to register are covered by kpatch_direct_table_release().
 */
static void kpatch_direct_table_put(void)
{
	struct kpatch_direct_slot *tab = kpatch_direct_table;

	if (kpatch_direct_live)
		return;
	WRITE_ONCE(kpatch_direct_table, NULL);
	vfree(tab);
}

/*
 * At unload: a table is left only if the group that would have been its
 * first failed to register.  ftrace may have let a call into the
 * trampoline while it tried (its list function, for a function that
 * another ftrace_ops also hooks), and did not wait for it when it gave
 * up, so wait here for every task to leave the trampoline.
 */
static void kpatch_direct_table_release(void)
{
	if (!kpatch_direct_table)
		return;
	synchronize_rcu_tasks();
	vfree(kpatch_direct_table);
	kpatch_direct_table = NULL;
}

static __cold void kpatch_group_free(struct kpatch_group *grp)
{
	struct kpatch_site *site, *tmp;

	ftrace_free_filter(&grp->ops);
	list_for_each_entry_safe(site, tmp, &grp->sites, grp_node)
		kpatch_site_free(site);
	kfree(grp);
}

/*
 * Make direct sites for the @n call sites @ips, in one group.  Returns
 * -ENOSPC when direct calls are switched off or the table is full, or
 * what ftrace says: most often -EBUSY, when another direct call (a BPF
 * trampoline) or an IPMODIFY user (a kprobe with a post_handler, a live
 * patch) owns one of the functions.
 */
static __cold int kpatch_direct_add(unsigned long *ips, struct module **mods,
				    unsigned int n)
{
	struct kpatch_group *grp;
	struct kpatch_site *site;
	unsigned int i;
	int ret;

	if (!READ_ONCE(kpatch_direct) ||
	    kpatch_direct_used + n > KPATCH_DIRECT_MAX)
		return -ENOSPC;
	ret = kpatch_direct_table_get();
	if (ret)
		return ret;
	grp = kzalloc(sizeof(*grp), GFP_KERNEL);
	if (!grp)
		return -ENOMEM;
	INIT_LIST_HEAD(&grp->sites);
	for (i = 0; i < n; i++) {
		site = kpatch_site_alloc(ips[i], mods[i]);
		if (!site) {
			kpatch_group_free(grp);
			return -ENOMEM;
		}
		site->grp = grp;
		list_add_tail(&site->grp_node, &grp->sites);
	}
	list_for_each_entry(site, &grp->sites, grp_node)
		site->slot = kpatch_direct_insert(site->ip + MCOUNT_INSN_SIZE);
	ret = kpatch_group_register(grp, ips, n);
	if (ret) {
		list_for_each_entry(site, &grp->sites, grp_node)
			kpatch_direct_remove(site->slot);
		kpatch_group_free(grp);
		return ret;
	}
	list_for_each_entry(site, &grp->sites, grp_node)
		hash_add(kpatch_site_hash, &site->node, site->ip);
	return 0;
}

/* Release the group of @site if none of its sites is used any more. */
static void kpatch_group_put(struct kpatch_site *site)
{
	struct kpatch_group *grp = site->grp;
	int ret;

	list_for_each_entry(site, &grp->sites, grp_node)
		if (kpatch_top_func(site->ip))
			return;
	/*
	 * This waits for an RCU-tasks grace period, so that no task is
	 * still inside the trampoline for these sites (see Limitations in
	 * Documentation.txt for what that can cost).
	 */
	ret = kpatch_direct_ops_unregister(&grp->ops);
	if (ret) {
		/* Its targets are 0: the calls go on unchanged. */
		pr_warn("cannot drop a direct call group (%d); its functions keep a few extra instructions per call\n",
			ret);
		return;
	}
	list_for_each_entry(site, &grp->sites, grp_node) {
		kpatch_direct_remove(site->slot);
		hash_del(&site->node);
	}
	kpatch_group_free(grp);
	kpatch_direct_table_put();
}

#else
static __cold int kpatch_direct_add(unsigned long *ips, struct module **mods,
				    unsigned int n)
{
	return -ENOSPC;
}

static void kpatch_group_put(struct kpatch_site *site)
{
}

static int kpatch_direct_anchor_set(void)
{
	return 0;
}

static void kpatch_direct_unanchor(void)
{
}

static void kpatch_direct_table_release(void)
{
}

#endif /* CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS */

/*
 * The targets of @site, see struct kpatch_site.  A direct site's is the
 * address its trampoline returns to: kpatch_direct_slowpath for the slow
 * path, the new function, or the key (f's fentry return address) for no
 * entry, so that the call goes on in f.  Both run in the stop_machine()
 * callback, once per changed function.
 */
static void kpatch_site_mark(struct kpatch_site *site)
{
#ifdef CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS
	if (site->grp) {
		WRITE_ONCE(site->slot->target,
			   (unsigned long)kpatch_direct_slowpath);
		return;
	}
#endif
	WRITE_ONCE(site->fops->target, KPATCH_TARGET_SLOW);
}

/* The final target of @site: @func's new function, or none if NULL. */
static void kpatch_site_settle(struct kpatch_site *site,
			       struct kpatch_func *func)
{
#ifdef CONFIG_DYNAMIC_FTRACE_WITH_DIRECT_CALLS
	if (site->grp) {
		WRITE_ONCE(site->slot->target, func ? func->new_addr :
			   site->ip + MCOUNT_INSN_SIZE);
		return;
	}
#endif
	WRITE_ONCE(site->fops->target, func ? func->new_addr : 0);
}

/*
 * Give every site of @upd its final target: the new function of the first
 * entry for it, or 0.  Called by the callback once the table is final for
 * this update, whether it took effect or not.
 */
static void kpatch_settle_sites(struct kpatch_update *upd)
{
	struct kpatch_func *func;
	unsigned int i;

	for (i = 0; i < upd->nr_sites; i++) {
		func = kpatch_first_func(upd->sites[i]->ip);
		kpatch_site_settle(upd->sites[i], func);
	}
}

/*
 * After an update, or one that failed: release the site at @ip if no
 * entry of the table uses it.  Its target is 0 already.  This must not
 * fail: the update is done or undone.
 */
static void kpatch_site_put(unsigned long ip)
{
	struct kpatch_site *site = kpatch_site_find(ip);
	int ret;

	if (!site || kpatch_top_func(ip))
		return;
	if (site->grp) {
		kpatch_group_put(site);
		return;
	}
	/* As for a group: this waits until no task is inside the handler. */
	ret = unregister_ftrace_function(&site->fops->ops);
	if (ret) {
		pr_warn("%pS keeps its ftrace_ops (%d); harmless, it only costs a handler call\n",
			(void *)ip, ret);
		return;
	}
	ftrace_free_filter(&site->fops->ops);
	hash_del(&site->node);
	kfree(site->fops);
	kpatch_site_free(site);
}

/* Release the sites of @kpmod's functions that no entry uses. */
static __cold void kpatch_sites_put(struct kpatch_module *kpmod)
{
	int i;

	for (i = 0; i < kpmod->num_funcs; i++)
		kpatch_site_put(kpmod->funcs[i].ip);
}

/*
 * Make sites for the functions of @upd->add that have none: all in one
 * direct group if possible.  If not, each on its own: a direct site, or
 * else an ftrace_ops site.  Until the update gives them a target, calls go
 * on unchanged.  On failure, name the function ftrace refused, release
 * what was made, and return -EBUSY, -EINVAL or -ENOMEM.
 */
static int kpatch_sites_add(struct kpatch_update *upd)
{
	struct kpatch_module *kpmod = upd->add;
	struct module **mods;
	unsigned long *ips;
	unsigned int i, n = 0, full = 0;
	int ret = -ENOMEM;

	ips = kmalloc_array(kpmod->num_funcs, sizeof(*ips), GFP_KERNEL);
	mods = kmalloc_array(kpmod->num_funcs, sizeof(*mods), GFP_KERNEL);
	if (!ips || !mods)
		goto out;
	for (i = 0; i < kpmod->num_funcs; i++) {
		if (kpatch_site_find(kpmod->funcs[i].ip))
			continue;
		mods[n] = kpmod->pins[KPATCH_PIN_OLD(i)];
		ips[n++] = kpmod->funcs[i].ip;
	}

	i = 0;
	ret = n ? kpatch_direct_add(ips, mods, n) : 0;
	if (ret && ret != -ENOMEM) {
		for (i = 0; i < n; i++) {
			ret = n > 1 ? kpatch_direct_add(&ips[i], &mods[i], 1) :
				      ret;
			if (ret == -ENOSPC && READ_ONCE(kpatch_direct))
				full++;
			if (ret && ret != -ENOMEM)
				ret = kpatch_fops_add(ips[i], mods[i]);
			if (ret)
				break;
		}
	}
	/* Once each time the table fills up, not for every patch after. */
	if (!ret && full && !kpatch_direct_full_logged) {
		pr_warn("%s '%s': direct-call table full (%u slots): %u of its functions take the slower ftrace_ops path, as will new ones until patches go\n",
			upd->verb, kpmod->name, KPATCH_DIRECT_MAX, full);
		kpatch_direct_full_logged = true;
	}
	if (ret) {
		if (ret == -ENOMEM)
			pr_err("%s '%s' refused: out of memory for the ftrace sites\n",
			       upd->verb, kpmod->name);
		else
			pr_err("%s '%s' refused: ftrace cannot redirect %pS (%d); is a kprobe or another live patch on it?\n",
			       upd->verb, kpmod->name,
			       (void *)ips[i], ret);
		kpatch_sites_put(kpmod);
		ret = ret == -ENOMEM || ret == -EBUSY ? ret : -EINVAL;
	}
out:
	kfree(mods);
	kfree(ips);
	return ret;
}

/*
 * The sites whose version @upd may change: those of the functions it
 * touches, each once.
 */
static int kpatch_collect_sites(struct kpatch_update *upd)
{
	struct kpatch_site *site;
	unsigned int i;

	upd->sites = kmalloc_array(upd->nr_touched ?: 1, sizeof(*upd->sites),
				   GFP_KERNEL);
	if (!upd->sites)
		return -ENOMEM;
	upd->nr_sites = 0;
	for (i = 0; i < upd->nr_touched; i++) {
		site = kpatch_site_find(upd->touched[i]->ip);
		if (!WARN_ON_ONCE(!site))
			upd->sites[upd->nr_sites++] = site;
	}
	upd->nr_sites = kpatch_sort_uniq(upd->sites, upd->nr_sites,
					 sizeof(*upd->sites), kpatch_cmp_ulong);
	return 0;
}

/* ------------------------------------------------------------------------
 * Resolve, validate and pin
 */

static bool kpatch_module_text(struct module *mod, unsigned long addr)
{
	unsigned long start, end;

	kpatch_mod_text(mod, false, &start, &end);
	return addr >= start && addr < end;
}

/*
 * Find the loaded module called @name and take a reference on it.  The
 * module kset is the one our own kobject belongs to; holding the kobject
 * keeps struct module alive until try_module_get() has decided, and its
 * state readable.  A module that is going away cannot be pinned; one that
 * is still in its init can, but its init may fail, and then the kernel
 * frees it whatever its reference count: so only @coming_ok (a patch
 * module registering its own patch, see kpatch_module_going()) may be in
 * its init.  Returns 0 with the reference in *@modp, -ENOENT if there is
 * no such module, or -EBUSY (coming) / -EINVAL (going) with *@state.
 */
static int kpatch_get_module(const char *name, struct module *coming_ok,
			     struct module **modp, enum module_state *state)
{
	struct kobject *kobj;
	struct module *mod;
	int ret = 0;

	kobj = kset_find_obj(THIS_MODULE->mkobj.kobj.kset, name);
	if (!kobj)
		return -ENOENT;
	mod = container_of(kobj, struct module_kobject, kobj)->mod;
	if (!mod) {
		ret = -ENOENT;
	} else if (!try_module_get(mod)) {
		*state = MODULE_STATE_GOING;
		ret = -EINVAL;
	} else {
		/*
		 * With our reference a live module stays live: it can only
		 * go through delete_module(), which refuses while we hold it.
		 */
		*state = READ_ONCE(mod->state);
		if (*state != MODULE_STATE_LIVE &&
		    !(*state == MODULE_STATE_COMING && mod == coming_ok)) {
			module_put(mod);
			ret = *state == MODULE_STATE_COMING ? -EBUSY : -EINVAL;
		}
	}
	kobject_put(kobj);
	*modp = ret ? NULL : mod;
	return ret;
}

/*
 * Check that @addr is the start of a function in vmlinux or module text,
 * through kallsyms (sprint_symbol() prints "name+off/size [module]").
 * Returns the function's size in *@size and, for a module function, a
 * reference on the module in *@modp.  The module must be live, or be
 * @coming_ok (see kpatch_get_module()).  Logs why on failure.
 *
 * The addresses come from the control file, that is from the user: until
 * this has accepted one, it is only looked up (kallsyms, module text
 * ranges, page tables), never read.  The first read of the code it names
 * is kpatch_ftrace_ip(), and that goes through copy_from_kernel_nofault().
 */
static __cold int kpatch_resolve(const char *patch, const char *what,
				 unsigned long addr, unsigned long *size,
				 struct module *coming_ok, struct module **modp)
{
	char sym[KSYM_SYMBOL_LEN], *modname;
	enum module_state state;
	unsigned long start;
	struct module *mod;
	int ret;

	*modp = NULL;
	if (!kpatch_symbol(addr, sym, &start, size, &modname)) {
		pr_err("%s: %s %lx is not a kernel function\n", patch, what,
		       addr);
		return -EINVAL;
	}
	if (addr != start) {
		pr_err("%s: %s %lx is not the start of a function (%s+%#lx)\n",
		       patch, what, addr, sym, addr - start);
		return -EINVAL;
	}
	/* Its own code runs kpatch's update: it cannot redirect itself. */
	if (within_module(addr, THIS_MODULE)) {
		pr_err("%s: %s %lx (%s) is in kpatch itself\n", patch, what,
		       addr, sym);
		return -EINVAL;
	}

	if (!modname) {
		if (!kpatch_kernel_text(addr))
			goto not_text;
		return 0;
	}
	ret = kpatch_get_module(modname, coming_ok, &mod, &state);
	if (ret == -ENOENT)
		goto not_text;
	if (ret) {
		pr_err("%s: %s %lx (%s) is in module %s, which is %s\n",
		       patch, what, addr, sym, modname,
		       state == MODULE_STATE_COMING ?
		       "coming (its init has not finished)" : "going away");
		return ret;
	}
	if (!kpatch_module_text(mod, addr)) {
		module_put(mod);
		goto not_text;
	}
	*modp = mod;
	return 0;

not_text:
	pr_err("%s: %s %lx (%s) is not in kernel or module text\n",
	       patch, what, addr, sym);
	return -EINVAL;
}

static void kpatch_unpin(struct kpatch_module *kpmod)
{
	while (kpmod->num_pins)
		if (kpmod->pins[--kpmod->num_pins])
			module_put(kpmod->pins[kpmod->num_pins]);
	kfree(kpmod->pins);
	kpmod->pins = NULL;
}

/* Resolve function @i of a patch and pin the modules it lives in. */
static __cold int kpatch_resolve_func(struct kpatch_module *kpmod, int i)
{
	struct kpatch_func *func = &kpmod->funcs[i];
	unsigned long size;
	int ret;

	ret = kpatch_resolve(kpmod->name, "old function", func->old_addr,
			     &size, NULL, &kpmod->pins[KPATCH_PIN_OLD(i)]);
	if (ret)
		return ret;
	if (func->old_size && func->old_size != size) {
		pr_err("%s: old function %pS is %#lx bytes long, not %#lx\n",
		       kpmod->name, (void *)func->old_addr, size,
		       func->old_size);
		return -EINVAL;
	}
	func->old_size = size;

	ret = kpatch_resolve(kpmod->name, "new function", func->new_addr,
			     &size, kpmod->mod, &kpmod->pins[KPATCH_PIN_NEW(i)]);
	if (ret)
		return ret;
	if (func->new_size && func->new_size != size) {
		pr_err("%s: new function %pS is %#lx bytes long, not %#lx\n",
		       kpmod->name, (void *)func->new_addr, size,
		       func->new_size);
		return -EINVAL;
	}
	func->new_size = size;

	func->ip = kpatch_ftrace_ip(func->old_addr);
	ret = kpatch_check_ftrace_site(func->ip);
	if (ret == -ENOMEM) {
		pr_err("%s: out of memory checking %pS with ftrace\n",
		       kpmod->name, (void *)func->old_addr);
		return ret;
	}
	if (ret) {
		pr_err("%s: old function %pS cannot be traced by ftrace\n",
		       kpmod->name, (void *)func->old_addr);
		return ret;
	}
	func->kpmod = kpmod;
	func->op = KPATCH_OP_NONE;
	return 0;
}

/*
 * Can a hook at @addr be called through a pointer?  On kernels with
 * Indirect Branch Tracking an indirect call must land on ENDBR, and a
 * function whose address nothing takes has none (or a sealed one).
 */
static bool kpatch_callable(unsigned long addr)
{
	return !IS_ENABLED(CONFIG_X86_KERNEL_IBT) || kpatch_endbr(addr, false);
}

/*
 * Resolve hook @h of a patch and pin its module.  A hook runs from kpatch
 * at times its module does not choose, so it must be in a module that
 * kpatch can pin: not vmlinux, and not init text (kpatch_resolve() takes
 * core text only).
 */
static __cold int kpatch_resolve_hook(struct kpatch_module *kpmod, int h)
{
	struct module **pin = &kpmod->pins[KPATCH_PIN_HOOK(kpmod->num_funcs, h)];
	unsigned long addr = (unsigned long)kpmod->hooks[h], size;
	char what[32];
	int ret;

	if (!addr)
		return 0;
	snprintf(what, sizeof(what), "%s hook", kpatch_hook_names[h]);
	ret = kpatch_resolve(kpmod->name, what, addr, &size, kpmod->mod, pin);
	if (ret)
		return ret;
	if (!*pin) {
		pr_err("%s: %s %pS is not in a module\n", kpmod->name, what,
		       (void *)addr);
		return -EINVAL;
	}
	if (!kpatch_callable(addr)) {
		pr_err("%s: %s %pS does not start with ENDBR: it cannot be called indirectly\n",
		       kpmod->name, what, (void *)addr);
		return -EINVAL;
	}
	return 0;
}

/*
 * Check every function and hook of @kpmod and pin what it needs: the patch
 * module, the modules holding its old and new functions and its hooks,
 * and this module.  Done once for an update, whose tries keep the pins:
 * while it waits between tries, no module it names can go, and an address
 * keeps naming the function it named.
 */
static __cold int kpatch_prepare(struct kpatch_module *kpmod)
{
	unsigned long *olds;
	int i, ret;

	kpmod->num_pins = KPATCH_PIN_HOOK(kpmod->num_funcs, KPATCH_NR_HOOKS);
	kpmod->pins = kcalloc(kpmod->num_pins, sizeof(*kpmod->pins),
			      GFP_KERNEL);
	olds = kmalloc_array(kpmod->num_funcs, sizeof(*olds), GFP_KERNEL);
	if (!kpmod->pins || !olds) {
		kpmod->num_pins = 0;
		ret = -ENOMEM;
		goto out;
	}
	if (kpmod->mod) {
		if (!try_module_get(kpmod->mod)) {
			pr_err("%s: patch module is going away\n", kpmod->name);
			ret = -ENODEV;
			goto out;
		}
		kpmod->pins[0] = kpmod->mod;
	}

	for (i = 0; i < kpmod->num_funcs; i++) {
		ret = kpatch_resolve_func(kpmod, i);
		if (ret)
			goto out;
		olds[i] = kpmod->funcs[i].old_addr;
	}
	for (i = 0; i < KPATCH_NR_HOOKS; i++) {
		ret = kpatch_resolve_hook(kpmod, i);
		if (ret)
			goto out;
	}

	if (kpatch_sort_uniq(olds, kpmod->num_funcs, sizeof(*olds),
			     kpatch_cmp_ulong) != kpmod->num_funcs) {
		pr_err("%s: an old function appears twice\n", kpmod->name);
		ret = -EINVAL;
		goto out;
	}
	for (i = 0; i < kpmod->num_funcs; i++) {
		unsigned long new = kpmod->funcs[i].new_addr;

		if (bsearch(&new, olds, kpmod->num_funcs, sizeof(*olds),
			    kpatch_cmp_ulong)) {
			pr_err("%s: new function %pS is also an old function of a patch\n",
			       kpmod->name, (void *)new);
			ret = -EINVAL;
			goto out;
		}
	}

	__module_get(THIS_MODULE);
	kpmod->pins[KPATCH_PIN_SELF(kpmod->num_funcs)] = THIS_MODULE;
	ret = 0;
out:
	kfree(olds);
	if (ret)
		kpatch_unpin(kpmod);
	return ret;
}

/*
 * Would @kpmod make a redirect lead into another one, with the patches
 * enabled now (but for all of them if @replace)?  A function may not be
 * both an old and a new function among the enabled patches, so every
 * redirect is exactly one hop.  Checked at every try: other updates may
 * run while one waits between tries.
 */
static __cold int kpatch_check_chain(struct kpatch_module *kpmod, bool replace)
{
	struct kpatch_func *func;
	int i;

	for (i = 0; i < kpmod->num_funcs; i++) {
		func = &kpmod->funcs[i];
		if (kpatch_in_table(func->new_addr, true, replace)) {
			pr_err("%s: new function %pS is also an old function of a patch\n",
			       kpmod->name, (void *)func->new_addr);
			return -EINVAL;
		}
		if (kpatch_in_table(func->old_addr, false, replace)) {
			pr_err("%s: old function %pS is the new function of a patch\n",
			       kpmod->name, (void *)func->old_addr);
			return -EINVAL;
		}
	}
	return 0;
}

/* ------------------------------------------------------------------------
 * Hooks
 */

/*
 * Hooks.  Each part of an update (see struct kpatch_update) runs the hooks
 * of its direction: a patch added runs its patch hooks, a patch removed
 * its unpatch hooks.  Within one try of an update:
 *
 *   pre hooks, in part order             process context, may sleep, veto
 *   stop_machine():
 *     stack check
 *     stop hooks, in part order          every CPU stopped, irqs off
 *     publish; SUCCESS or FAILURE
 *     on FAILURE: undo hooks of the stop hooks that ran, in reverse order
 *   post hooks, in part order            on success
 *   or cancel hooks, in reverse order    on a failure after the pre hooks
 *
 * The cancel hook of a part ends the state its pre hook began: for a patch
 * that is not in effect after all, its post-unpatch hook; for a patch that
 * stays in effect, its post-patch hook.  So post-patch .. pre-unpatch and
 * pre-patch .. post-unpatch always come in pairs.
 *
 * Hooks that may sleep (pre, post, cancel) have slots of their own and run
 * only from process context, with kpatch_mutex held and nothing else: no
 * sleeping hook can ever be called in atomic context.  Stop and undo hooks
 * run in the stop_machine() callback with interrupts off on every CPU,
 * where a sleep is a bug the kernel itself reports (might_sleep() under
 * CONFIG_DEBUG_ATOMIC_SLEEP).  A hook's module is pinned for the whole try
 * (kpatch_prepare()) and every hook returns before the try ends, so no
 * hook runs after its module could go.
 */

/*
 * Run the hook of part @i of @upd for @stage, a patch hook
 * (KPATCH_PRE_PATCH .. KPATCH_POST_PATCH) that stands for the same hook of
 * the part's direction.  A hook's return becomes 0 or a negative errno.
 */
static int kpatch_part_hook(struct kpatch_update *upd, unsigned int i,
			    enum kpatch_hook stage)
{
	struct kpatch_module *kpmod = upd->parts[i];
	enum kpatch_hook h = stage;
	kpatch_hook_t hook;
	int ret;

	if (kpmod != upd->add)
		h += KPATCH_PRE_UNPATCH;
	hook = kpmod->hooks[h];
	if (!hook)
		return 0;
	ret = hook(kpmod);
	if (!ret || stage == KPATCH_UNDO_PATCH || stage == KPATCH_POST_PATCH)
		return 0;
	upd->hook_patch = kpmod;
	upd->hook = h;
	upd->hook_ret = ret;
	if (ret > 0 || ret < -MAX_ERRNO)
		return -EINVAL;
	/* Kernel-internal errnos must not reach write(2) or insmod. */
	if (ret == -ERESTARTSYS || ret == -ERESTARTNOINTR ||
	    ret == -ERESTARTNOHAND || ret == -ERESTART_RESTARTBLOCK)
		return -EINTR;
	return ret <= -ERESTARTSYS ? -EINVAL : ret;
}

/* The hook that ends what the pre hook of part @i began, see above. */
static void kpatch_cancel_hook(struct kpatch_update *upd, unsigned int i)
{
	struct kpatch_module *kpmod = upd->parts[i];
	enum kpatch_hook h = kpmod == upd->add ? KPATCH_POST_UNPATCH :
						  KPATCH_POST_PATCH;

	if (kpmod->hooks[h])
		kpmod->hooks[h](kpmod);
}

/* Run the pre hooks of @upd; if one vetoes, cancel those that ran. */
static int kpatch_pre_hooks(struct kpatch_update *upd)
{
	unsigned int i;
	int ret;

	might_sleep();
	for (i = 0; i < upd->nr_parts; i++) {
		ret = kpatch_part_hook(upd, i, KPATCH_PRE_PATCH);
		if (ret) {
			pr_err("%s '%s' refused: %s hook of '%s' returned %d\n",
			       upd->verb, upd->parts[upd->nr_parts - 1]->name,
			       kpatch_hook_names[upd->hook],
			       upd->hook_patch->name, upd->hook_ret);
			while (i--)
				kpatch_cancel_hook(upd, i);
			return ret;
		}
	}
	return 0;
}

/*
 * From the callback: undo the first @n stop hooks of @upd, last first.
 * kpatch_hook_cpu tells a call of a changed function from an undo or stop
 * hook apart from one from an NMI; only this CPU writes it.
 */
static void kpatch_undo_hooks(struct kpatch_update *upd, unsigned int n)
{
	WRITE_ONCE(kpatch_hook_cpu, smp_processor_id());
	while (n--)
		kpatch_part_hook(upd, n, KPATCH_UNDO_PATCH);
	WRITE_ONCE(kpatch_hook_cpu, -1);
}

/*
 * From the callback, once the stack check has passed: run the stop hooks.
 * If one fails, undo those that ran before it and return its errno; it
 * must have changed nothing itself.
 */
static int kpatch_stop_hooks(struct kpatch_update *upd)
{
	unsigned int i;
	int ret = 0;

	WRITE_ONCE(kpatch_hook_cpu, smp_processor_id());
	for (i = 0; i < upd->nr_parts && !ret; i++)
		ret = kpatch_part_hook(upd, i, KPATCH_STOP_PATCH);
	WRITE_ONCE(kpatch_hook_cpu, -1);
	if (ret) {
		upd->refusal = KPATCH_HOOK;
		kpatch_undo_hooks(upd, i - 1);
	}
	return ret;
}

/* ------------------------------------------------------------------------
 * Enable, disable, retry and report; the API
 */

static void kpatch_set_op(struct kpatch_update *upd, enum kpatch_op add,
			  enum kpatch_op remove)
{
	unsigned int i;

	for (i = 0; i < upd->nr_touched; i++)
		upd->touched[i]->op = i >= upd->first_add ? add : remove;
}

/*
 * One try of a prepared update: the pre-walk, then the state machine and
 * stop_machine().  Returns 0, or -EBUSY with upd->refusal saying why.
 */
static int kpatch_try_update(struct kpatch_update *upd)
{
	int ret, old;

	upd->refusal = KPATCH_OK;
	if (kpatch_checks(upd) && READ_ONCE(kpatch_exiting_lost)) {
		pr_err("%s '%s' refused: out of memory recording an exiting task earlier, kpatch cannot check every stack any more\n",
		       upd->verb, upd->add ? upd->add->name : upd->remove->name);
		return -ENOMEM;
	}
	ret = kpatch_prewalk(upd);
	if (ret)
		return ret;

	/* Callers ignore func->op while the state is IDLE. */
	kpatch_set_op(upd, KPATCH_OP_PATCH, KPATCH_OP_UNPATCH);
	WRITE_ONCE(kpatch_failed_ip, 0);
	WRITE_ONCE(kpatch_failed_hook, false);

	atomic_set(&upd->cpus_in, 0);
	atomic_set(&upd->cpus_seen, 0);
	ret = stop_machine(kpatch_update_cb, upd, cpu_online_mask);

	/* The callback always ends in SUCCESS or FAILURE. */
	old = atomic_xchg(&kpatch_state, KPATCH_STATE_IDLE);
	WARN_ON_ONCE(old != KPATCH_STATE_SUCCESS && old != KPATCH_STATE_FAILURE);

	/*
	 * Callers that read a state other than IDLE may still be walking the
	 * table and looking at func->op, or hold an entry just unlinked.  Only
	 * NMIs can be such callers now (everybody else was excluded by
	 * stop_machine() itself), and an NMI is an RCU read-side section.
	 */
	synchronize_rcu();
	kpatch_set_op(upd, KPATCH_OP_NONE, KPATCH_OP_NONE);
	kpatch_test_point(KPATCH_TEST_DONE);
	kpatch_forget(upd);
	return ret;
}

/*
 * Log why try number @try of @upd was refused, naming the culprit: as an
 * error if the update fails now (@last), else as a warning saying that it
 * is tried again in @delay ms.
 */
static __cold void kpatch_report(const struct kpatch_update *upd,
				 unsigned int try, unsigned int tries,
				 bool last, unsigned int delay)
{
	const char *name = upd->add ? upd->add->name : upd->remove->name;
	char why[KSYM_SYMBOL_LEN + 64];

	switch (upd->refusal) {
	case KPATCH_BUSY:
		snprintf(why, sizeof(why), "%pS is on the stack of pid %d (%*pE)",
			 (void *)upd->busy_addr, upd->busy_pid,
			 kpatch_comm_len(upd->busy_comm), upd->busy_comm);
		break;
	case KPATCH_UNRELIABLE:
		snprintf(why, sizeof(why),
			 "the stack of pid %d (%*pE) cannot be walked reliably",
			 upd->busy_pid, kpatch_comm_len(upd->busy_comm),
			 upd->busy_comm);
		break;
	case KPATCH_LOST:
		snprintf(why, sizeof(why), "an exiting task could not be recorded");
		break;
	case KPATCH_RAN:
		if (READ_ONCE(kpatch_failed_hook))
			snprintf(why, sizeof(why),
				 "%pS was called by a stop or undo hook; a hook must not call the functions its update changes",
				 (void *)READ_ONCE(kpatch_failed_ip));
		else if (READ_ONCE(kpatch_failed_nmi))
			snprintf(why, sizeof(why),
				 "%pS was called during the update, from an NMI; rolled back",
				 (void *)READ_ONCE(kpatch_failed_ip));
		else
			snprintf(why, sizeof(why),
				 "%pS was called during the update (called by kpatch's own update path: stop_machine() or the stack check); it can never be patched",
				 (void *)READ_ONCE(kpatch_failed_ip));
		break;
	default:
		WARN_ON_ONCE(1);
		return;
	}

	if (!last)
		pr_warn("%s '%s' busy (try %u of %u, again in %u ms): %s\n",
			upd->verb, name, try, tries, delay, why);
	else if (try > 1)
		pr_err("%s '%s' refused after %u tries: %s\n", upd->verb, name,
		       try, why);
	else
		pr_err("%s '%s' refused: %s\n", upd->verb, name, why);
}

/*
 * Tear down what kpatch_try() set up for a patch that is now out, but its
 * pins: its post-unpatch hook is still to run.
 */
static void kpatch_retire(struct kpatch_module *kpmod)
{
	list_del(&kpmod->list);
	kpatch_sites_put(kpmod);
	kobject_put(kpmod->kobj);
	kpmod->kobj = NULL;
	kpmod->enabled = false;
	pr_notice("patch '%s' removed\n", kpmod->name);
}

static void kpatch_free(struct kpatch_module *kpmod)
{
	kfree(kpmod->funcs);
	kfree(kpmod->name);
	kfree(kpmod);
}

static bool kpatch_valid_name(const char *name)
{
	size_t len;

	for (len = 0; name[len]; len++) {
		char c = name[len];

		/* isalnum() alone would also take Latin-1 letters. */
		if (!isascii(c) || (!isalnum(c) && c != '_' && c != '-'))
			return false;
	}
	return len >= 1 && len <= KPATCH_NAME_MAX;
}

/*
 * Updates that wait to be tried again.  Between tries an update holds no
 * lock: kpatch_mutex is free for readers, for kpatch_register() and for
 * other updates, which may change the table meanwhile.  So every try is
 * prepared anew against the table as it is then (kpatch_try()), and a
 * waiting update keeps for itself only what another update must not take:
 * the pins of the patch it adds (kpatch_prepare()), its name, and the
 * patches it removes -- one, or for a replace every patch enabled when it
 * wakes.  Nobody else may
 * remove (and so free) those meanwhile.  Protected by kpatch_mutex;
 * entries live on the waiting task's stack.
 */
struct kpatch_waiting {
	struct list_head list;
	const char *name;		/* patch being added, or NULL */
	struct kpatch_module *remove;	/* patch being removed, or NULL */
	bool replace;			/* removes every patch */
};

static LIST_HEAD(kpatch_waiting);

/* Is @name the name of an enabled patch or of one waiting to be added? */
static bool kpatch_name_taken(const char *name)
{
	struct kpatch_waiting *w;

	list_for_each_entry(w, &kpatch_waiting, list)
		if (w->name && !strcmp(w->name, name))
			return true;
	return kpatch_find_patch(name);
}

/*
 * Does an update wait to remove @kpmod: an unpatch of it, or a replace?
 * For NULL: does an unpatch of any patch wait?
 */
static bool kpatch_removal_waits(const struct kpatch_module *kpmod)
{
	struct kpatch_waiting *w;

	list_for_each_entry(w, &kpatch_waiting, list)
		if (kpmod ? w->remove == kpmod || w->replace : !!w->remove)
			return true;
	return false;
}

/*
 * Does /sys/kernel/kpatch/patches/@name exist?  kpatch makes it itself.  A
 * patch module written for the 2014 core made it before it called
 * kpatch_register(); it may also appear while an update waits.
 */
static __cold bool kpatch_sysfs_taken(const char *verb, const char *name)
{
	struct kernfs_node *kn = sysfs_get_dirent(kpatch_patches_kobj->sd, name);

	if (!kn)
		return false;
	sysfs_put(kn);
	pr_err("%s '%s' refused: /sys/kernel/kpatch/patches/%s already exists; kpatch makes it itself, the patch module must not\n",
	       verb, name, name);
	return true;
}

/*
 * One try of @upd: prepare it against the table as it is now, run it
 * once, and either make it permanent or undo every step of the
 * preparation.  Caller holds kpatch_mutex, from preparation to commit,
 * so the table the update was prepared for is the one it changes.
 */
static __cold int kpatch_try(struct kpatch_update *upd)
{
	struct kpatch_module *kpmod = upd->add, *old;
	unsigned int i;
	int ret;

	upd->refusal = KPATCH_OK;
	if (kpmod) {
		ret = kpatch_check_chain(kpmod, upd->replace);
		if (ret)
			return ret;
		if (kpatch_sysfs_taken(upd->verb, kpmod->name))
			return -EEXIST;
		kpmod->kobj = kobject_create_and_add(kpmod->name,
						     kpatch_patches_kobj);
		if (!kpmod->kobj)
			return -ENOMEM;
	}

	ret = kpatch_collect(upd);
	if (ret)
		goto err_kobj;
	ret = kpatch_build_ranges(upd);
	if (ret)
		goto err_collect;
	ret = kpmod ? kpatch_sites_add(upd) : 0;
	if (ret)
		goto err_ranges;
	ret = kpatch_collect_sites(upd);
	if (!ret)
		ret = kpatch_pre_hooks(upd);
	if (!ret) {
		ret = kpatch_try_update(upd);
		if (ret) {
			if (upd->refusal == KPATCH_HOOK)
				pr_err("%s '%s' refused: %s hook of '%s' failed (%d); rolled back\n",
				       upd->verb, upd->parts[upd->nr_parts - 1]->name,
				       kpatch_hook_names[upd->hook],
				       upd->hook_patch->name, upd->hook_ret);
			for (i = upd->nr_parts; i--; )
				kpatch_cancel_hook(upd, i);
		}
	}
	kfree(upd->sites);
	upd->sites = NULL;
	if (ret)
		goto err_sites;

	/* In effect.  The parts that went out go first, newest first. */
	for (i = 0; i < upd->nr_parts; i++)
		if (upd->parts[i] != kpmod)
			kpatch_retire(upd->parts[i]);
	if (kpmod) {
		list_add_tail(&kpmod->list, &kpatch_patches);
		kpmod->enabled = true;
		pr_notice_once("tainting kernel with TAINT_LIVEPATCH\n");
		add_taint(TAINT_LIVEPATCH, LOCKDEP_STILL_OK);
		pr_notice("patch '%s' enabled (%d function%s)\n", kpmod->name,
			  kpmod->num_funcs, kpmod->num_funcs == 1 ? "" : "s");
	}
	kpatch_ways_in_commit(upd);
	kpatch_free_ranges(upd);
	for (i = 0; i < upd->nr_parts; i++)
		kpatch_part_hook(upd, i, KPATCH_POST_PATCH);
	/* Only now may the modules of the hooks that ran go. */
	for (i = 0; i < upd->nr_parts; i++) {
		old = upd->parts[i];
		if (old == kpmod)
			continue;
		kpatch_unpin(old);
		if (old != upd->remove && !old->mod)
			kpatch_free(old);	/* replaced, from the control file */
	}
	kpatch_uncollect(upd);
	return 0;

err_sites:
	if (kpmod)
		kpatch_sites_put(kpmod);
err_ranges:
	kpatch_free_ranges(upd);
err_collect:
	kpatch_uncollect(upd);
err_kobj:
	if (kpmod) {
		kobject_put(kpmod->kobj);
		kpmod->kobj = NULL;
	}
	return ret;
}

/*
 * A dry run of @upd: what a try prepares and checks before it changes
 * anything -- the addresses, the modules, the ranges, and a walk of every
 * task that can be kept from running meanwhile -- and nothing after it:
 * no sysfs directory, no ftrace site, no hook, no stop_machine().  Caller
 * holds kpatch_mutex.
 */
static __cold int kpatch_dry_run(struct kpatch_update *upd)
{
	struct kpatch_module *kpmod = upd->add;
	int ret;

	upd->check->blockers = kcalloc(KPATCH_CHECK_MAX,
				       sizeof(*upd->check->blockers),
				       GFP_KERNEL);
	if (!upd->check->blockers)
		return -ENOMEM;
	ret = kpmod ? kpatch_check_chain(kpmod, upd->replace) : 0;
	ret = ret ?: kpatch_collect(upd) ?: kpatch_build_ranges(upd);
	if (!ret && kpatch_checks(upd) && READ_ONCE(kpatch_exiting_lost)) {
		pr_err("check %s '%s': out of memory recording an exiting task earlier, kpatch cannot check every stack any more\n",
		       upd->verb, kpmod ? kpmod->name : upd->remove->name);
		ret = -ENOMEM;
	}
	if (!ret)
		ret = kpatch_prewalk(upd);
	kpatch_free_ranges(upd);
	kpatch_uncollect(upd);
	return ret;
}

/*
 * Try number @try of @upd failed with @ret.  If the stack check refused
 * it, log the culprit and, unless that was the last try (kpatch_retries),
 * a signal is pending or the refusal can only repeat, sleep before the
 * next one, with kpatch_mutex dropped and @upd waiting in kpatch_waiting.
 * Return whether to try again.
 */
static __cold bool kpatch_retry(struct kpatch_update *upd, int ret,
				unsigned int try)
{
	unsigned int tries = 1 + min(READ_ONCE(kpatch_retries),
				     KPATCH_RETRIES_MAX);
	unsigned int delay = min(READ_ONCE(kpatch_retry_delay_ms),
				 KPATCH_RETRY_DELAY_MS_MAX);
	struct kpatch_waiting w = {
		.name = upd->add ? upd->add->name : NULL,
		.remove = upd->remove,
		.replace = upd->replace,
	};
	bool last;

	if (ret != -EBUSY || upd->refusal == KPATCH_OK ||
	    upd->refusal == KPATCH_HOOK)
		return false;	/* not the stack check: ftrace, a hook, say */
	last = try >= tries || signal_pending(current) ||
	       (upd->refusal == KPATCH_RAN && !READ_ONCE(kpatch_failed_nmi));
	kpatch_report(upd, try, tries, last, delay);
	if (last)
		return false;

	list_add(&w.list, &kpatch_waiting);
	mutex_unlock(&kpatch_mutex);
	msleep_interruptible(delay);
	mutex_lock(&kpatch_mutex);
	list_del(&w.list);
	return true;
}

/*
 * Enable @kpmod, optionally replacing every other patch; or with @chk,
 * only say whether that would work now (a dry run).  Caller holds
 * kpatch_mutex; it is dropped while the update waits between tries.  On
 * failure nothing has changed, @kpmod->funcs included.
 */
static __cold int kpatch_enable(struct kpatch_module *kpmod, bool replace,
				struct kpatch_check *chk)
{
	struct kpatch_update upd = {
		.verb = replace ? "replace" : "patch",
		.add = kpmod,
		.replace = replace,
		.check = chk,
	};
	size_t size = kpmod->num_funcs * sizeof(*kpmod->funcs);
	struct kpatch_func *funcs;
	unsigned int try;
	int ret;

	lockdep_assert_held(&kpatch_mutex);

	if (kpatch_name_taken(kpmod->name)) {
		pr_err("%s '%s' refused: a patch with that name exists\n",
		       upd.verb, kpmod->name);
		return -EEXIST;
	}
	if (kpatch_sysfs_taken(upd.verb, kpmod->name))
		return -EEXIST;
	if (replace && kpatch_removal_waits(NULL)) {
		pr_err("%s '%s' refused: an unpatch waits to try again\n",
		       upd.verb, kpmod->name);
		return -EBUSY;
	}

	/* On failure the funcs are put back as they came. */
	funcs = kmemdup(kpmod->funcs, size, GFP_KERNEL);
	if (!funcs)
		return -ENOMEM;
	ret = kpatch_prepare(kpmod);
	for (try = 1; !ret; try++) {
		ret = chk ? kpatch_dry_run(&upd) : kpatch_try(&upd);
		if (!ret || chk || !kpatch_retry(&upd, ret, try))
			break;
		ret = 0;	/* try again */
	}
	if (ret || chk) {
		kpatch_unpin(kpmod);
		memcpy(kpmod->funcs, funcs, size);
	}
	kfree(funcs);
	return ret;
}

/*
 * Disable @kpmod, or with @chk only say whether that would work now.
 * Caller holds kpatch_mutex; it is dropped while the update waits between
 * tries, and nobody else removes @kpmod meanwhile (kpatch_removal_waits()).
 * On failure nothing has changed.
 */
static __cold int kpatch_disable(struct kpatch_module *kpmod,
				 struct kpatch_check *chk)
{
	struct kpatch_update upd = {
		.verb = "unpatch",
		.remove = kpmod,
		.check = chk,
	};
	unsigned int try;
	int ret;

	lockdep_assert_held(&kpatch_mutex);

	if (kpatch_removal_waits(kpmod)) {
		pr_err("unpatch '%s' refused: an unpatch of it or a replace waits to try again\n",
		       kpmod->name);
		return -EBUSY;
	}
	if (chk)
		return kpatch_dry_run(&upd);
	for (try = 1; ; try++) {
		ret = kpatch_try(&upd);
		if (!ret || !kpatch_retry(&upd, ret, try))
			return ret;
	}
}

/*
 * Patch modules that registered a patch while they were still loading
 * (from their init, or a parameter's callback): of every module, only
 * those can go away with a patch enabled (their load failed; a live patch
 * module cannot go, its patch pins it).  An entry stays until the
 * module's LIVE or GOING notification.  Under kpatch_loading_lock, so
 * that the notifier need not wait for kpatch_mutex to read it.
 */
struct kpatch_loading {
	struct list_head list;
	struct module *mod;
};

static LIST_HEAD(kpatch_loading);
static DEFINE_SPINLOCK(kpatch_loading_lock);

/*
 * Take the entries of @mod off the list; did it have any?  @add: an entry
 * to put on it instead.
 */
static bool kpatch_loading_swap(struct module *mod, struct kpatch_loading *add)
{
	struct kpatch_loading *l, *tmp;
	LIST_HEAD(gone);
	bool had;

	spin_lock(&kpatch_loading_lock);
	list_for_each_entry_safe(l, tmp, &kpatch_loading, list)
		if (l->mod == mod)
			list_move(&l->list, &gone);
	if (add)
		list_add(&add->list, &kpatch_loading);
	spin_unlock(&kpatch_loading_lock);
	had = !list_empty(&gone);
	list_for_each_entry_safe(l, tmp, &gone, list)
		kfree(l);
	return had;
}

/*
 * May kpatch write to the @size bytes at @p for as long as a patch is
 * enabled?  kpatch links the patch and its functions into its lists and
 * fills in their private fields.  Memory of @mod must be data that stays
 * writable after the module's init (const and __ro_after_init data turn
 * read-only when the init returns); other memory must be mapped writable
 * now, and not be the stack of the caller, which is gone once it returns.
 */
static bool kpatch_writable(const struct module *mod, const void *p,
			    size_t size)
{
	unsigned long addr[2] = { (unsigned long)p,
				  (unsigned long)p + size - 1 };
	unsigned int level, i;
	pte_t *pte;

	for (i = 0; i < ARRAY_SIZE(addr); i++) {
		if (object_is_on_stack((void *)addr[i]))
			return false;
		if (within_module(addr[i], mod)) {
			if (!kpatch_mod_rw(mod, addr[i]))
				return false;
			continue;
		}
		pte = lookup_address(addr[i], &level);
		if (!pte || !pte_present(*pte) || !pte_write(*pte))
			return false;
	}
	return true;
}

/**
 * kpatch_register() - enable a patch provided by a patch module
 * @kpmod:   the patch; @kpmod->mod, ->funcs and ->num_funcs filled in, and
 *           in each function ->old_addr and ->new_addr (sizes optional)
 * @replace: also remove every other enabled patch, in the same step
 *
 * Redirects every old function of @kpmod to its new function, atomically
 * with respect to every task: inside stop_machine(), after checking that no
 * task has any affected function on its stack.  While the check refuses,
 * the update is tried again, as the retries and retry_delay_ms module
 * parameters say.  The patch is named after its module.  While it is
 * enabled, the patch module, the modules holding its old and new
 * functions, and kpatch itself cannot be unloaded.  kpatch keeps pointers
 * to @kpmod and its functions, and writes to them, while the patch is
 * enabled: neither may be in the module's init memory (__initdata), be
 * const or __ro_after_init, or be on the stack.
 *
 * Context: process context; sleeps.
 * Return: 0 on success; -EINVAL for a bad address, size or argument
 * (@kpmod or its functions in init memory, read-only or on the stack
 * included),
 * -EEXIST when a patch of that name is enabled or waits to be tried again,
 * or when /sys/kernel/kpatch/patches/<name> exists already (kpatch makes
 * it), -EBUSY when a function is still in use after the retries or ftrace
 * refused it, -ENODEV when @kpmod->mod is going away, -ENOMEM.  On failure
 * nothing has changed, neither in the kernel nor in @kpmod and its
 * functions.
 */
int kpatch_register(struct kpatch_module *kpmod, bool replace)
{
	struct kpatch_loading *loading;
	struct kpatch_module saved;
	int ret;

	if (!kpmod || !kpmod->mod || !kpmod->funcs || kpmod->num_funcs <= 0)
		return -EINVAL;
	/* The kernel frees init memory once the module's init succeeded. */
	if (within_module_init((unsigned long)kpmod, kpmod->mod) ||
	    within_module_init((unsigned long)kpmod->funcs, kpmod->mod) ||
	    within_module_init((unsigned long)&kpmod->funcs[kpmod->num_funcs] - 1,
			       kpmod->mod)) {
		pr_err("%s: the kpatch_module or its functions are in init memory (__initdata), which is freed after the module's init\n",
		       kpmod->mod->name);
		return -EINVAL;
	}

	if (!kpatch_writable(kpmod->mod, kpmod, sizeof(*kpmod)) ||
	    !kpatch_writable(kpmod->mod, kpmod->funcs,
			     kpmod->num_funcs * sizeof(*kpmod->funcs))) {
		pr_err("%s: the kpatch_module or its functions are not in writable memory (const, __ro_after_init or on the stack)\n",
		       kpmod->mod->name);
		return -EINVAL;
	}

	/* From a module still loading: see kpatch_module_going(). */
	if (kpmod->mod->state != MODULE_STATE_LIVE) {
		loading = kmalloc(sizeof(*loading), GFP_KERNEL);
		if (!loading)
			return -ENOMEM;
		loading->mod = kpmod->mod;
		kpatch_loading_swap(kpmod->mod, loading);
	}

	mutex_lock(&kpatch_mutex);
	if (kpmod->enabled) {
		ret = -EINVAL;
		goto out;
	}
	saved = *kpmod;
	kpmod->name = kpmod->mod->name;
	INIT_LIST_HEAD(&kpmod->list);
	ret = kpatch_enable(kpmod, replace, NULL);
	if (ret)
		*kpmod = saved;		/* kpatch_enable() restored ->funcs */
out:
	mutex_unlock(&kpatch_mutex);
	return ret;
}
EXPORT_SYMBOL_GPL(kpatch_register);

/**
 * kpatch_unregister() - disable a patch provided by a patch module
 * @kpmod: a patch enabled by kpatch_register()
 *
 * Restores the previous version of every function of @kpmod, with the same
 * stack check and retries as kpatch_register(), and releases its module
 * references.
 *
 * Context: process context; sleeps.
 * Return: 0 on success; -EINVAL if @kpmod is not enabled (for instance
 * because `unpatch` or a replacing patch already removed it); -EBUSY when
 * a function is still in use after the retries, or when an `unpatch` of
 * the same patch or a `replace` waits between its tries; -ENOMEM.  On failure the patch
 * stays enabled.
 */
int kpatch_unregister(struct kpatch_module *kpmod)
{
	int ret = -EINVAL;

	mutex_lock(&kpatch_mutex);
	if (kpmod && kpmod->enabled)
		ret = kpatch_disable(kpmod, NULL);
	mutex_unlock(&kpatch_mutex);
	return ret;
}
EXPORT_SYMBOL_GPL(kpatch_unregister);

/*
 * A module is going away.  If it is the patch module of an enabled patch,
 * its load failed after it registered the patch (kpatch_loading).  The
 * kernel frees such a module right after its GOING notifiers, whatever
 * its reference count, so the patch must be out before this returns:
 * kpatch tries until the stack check lets it, however long that takes
 * (see Documentation.txt).  This notifier runs first (INT_MAX): the
 * others tear the module down (its static SRCU structures, its
 * tracepoints, its static keys), and its new functions must not run after
 * that.  Any other module goes without waiting for kpatch_mutex, which an
 * update holds while it runs its hooks: the module loader never waits for
 * an update but for such a module's own patch.
 */
static __cold int kpatch_module_going(struct notifier_block *nb,
				      unsigned long action, void *data)
{
	struct module *mod = data;
	struct kpatch_module *kpmod;
	int ret;

	if ((action != MODULE_STATE_GOING && action != MODULE_STATE_LIVE) ||
	    !kpatch_loading_swap(mod, NULL) || action == MODULE_STATE_LIVE)
		return NOTIFY_DONE;
	mutex_lock(&kpatch_mutex);
again:
	list_for_each_entry(kpmod, &kpatch_patches, list) {
		if (kpmod->mod != mod)
			continue;
		pr_warn("module %s is going away with its patch enabled (its init failed): taking the patch out\n",
			mod->name);
		while ((ret = kpatch_disable(kpmod, NULL))) {
			pr_err("cannot take patch '%s' out (%d); trying again in 1 s, its module is freed after that\n",
			       kpmod->name, ret);
			mutex_unlock(&kpatch_mutex);
			msleep(1000);
			mutex_lock(&kpatch_mutex);
			if (!kpmod->enabled)	/* unpatched meanwhile */
				break;
		}
		goto again;
	}
	mutex_unlock(&kpatch_mutex);
	return NOTIFY_OK;
}

/* ------------------------------------------------------------------------
 * debugfs and sysfs
 */

/*
 * How much of a rejected word from the user to echo to the log: it is
 * printed with %*pE (non-printing bytes escaped), cut at KPATCH_ECHO_MAX.
 */
static int kpatch_echo_len(const char *word)
{
	return strnlen(word, KPATCH_ECHO_MAX);
}

/* Parse a hexadecimal address, with or without 0x, nothing else. */
static __cold int kpatch_parse_addr(const char *tok, unsigned long *addr)
{
	const char *digits = tok;

	if (digits[0] == '0' && (digits[1] == 'x' || digits[1] == 'X'))
		digits += 2;
	if (!*digits || strspn(digits, "0123456789abcdefABCDEF") != strlen(digits))
		return -EINVAL;
	return kstrtoul(digits, 16, addr) ? -EINVAL : 0;
}

/* Parse the word `HOOK=ADDR` into @kpmod->hooks. */
static int kpatch_parse_hook(struct kpatch_module *kpmod, const char *verb,
			     const char *word)
{
	size_t len = strchr(word, '=') - word;
	unsigned long addr;
	int h;

	for (h = 0; h < KPATCH_NR_HOOKS; h++)
		if (strlen(kpatch_hook_names[h]) == len &&
		    !strncmp(word, kpatch_hook_names[h], len))
			break;
	if (h == KPATCH_NR_HOOKS) {
		pr_err("%s %s: '%*pE' names no hook (pre-, stop-, undo- or post-, then patch or unpatch)\n",
		       verb, kpmod->name, kpatch_echo_len(word), word);
		return -EINVAL;
	}
	if (kpmod->hooks[h]) {
		pr_err("%s %s: the %s hook is given twice\n", verb, kpmod->name,
		       kpatch_hook_names[h]);
		return -EINVAL;
	}
	if (kpatch_parse_addr(word + len + 1, &addr) || !addr) {
		pr_err("%s %s: '%*pE' is not %s=ADDRESS (hexadecimal, not 0)\n",
		       verb, kpmod->name, kpatch_echo_len(word), word,
		       kpatch_hook_names[h]);
		return -EINVAL;
	}
	kpmod->hooks[h] = (kpatch_hook_t)addr;
	return 0;
}

/*
 * `patch|replace NAME OLD NEW [OLD NEW ...] [HOOK=ADDR ...]`, or with @chk
 * its dry run.  A word with '=' is a hook, wherever it stands after NAME;
 * the other words are the address pairs, in order.
 */
static int kpatch_cmd_patch(char **tok, int ntok, bool replace,
			    struct kpatch_check *chk)
{
	const char *verb = tok[0];
	struct kpatch_module *kpmod;
	int i, nwords = 0, ret = -ENOMEM;

	kpmod = kzalloc(sizeof(*kpmod), GFP_KERNEL);
	if (!kpmod)
		return -ENOMEM;
	INIT_LIST_HEAD(&kpmod->list);
	kpmod->name = kstrdup(tok[1], GFP_KERNEL);
	if (!kpmod->name)
		goto err;
	/* Hooks out; the pairs move up in place, behind NAME. */
	for (i = 2; i < ntok; i++) {
		if (!strchr(tok[i], '=')) {
			tok[2 + nwords++] = tok[i];
			continue;
		}
		ret = kpatch_parse_hook(kpmod, verb, tok[i]);
		if (ret)
			goto err;
	}
	ret = -EINVAL;
	if (nwords < 2 || nwords % 2) {
		pr_err("%s: expected NAME and OLD NEW address pairs\n", verb);
		goto err;
	}

	kpmod->num_funcs = nwords / 2;
	kpmod->funcs = kcalloc(kpmod->num_funcs, sizeof(*kpmod->funcs),
			       GFP_KERNEL);
	ret = -ENOMEM;
	if (!kpmod->funcs)
		goto err;

	for (i = 0; i < kpmod->num_funcs; i++) {
		struct kpatch_func *func = &kpmod->funcs[i];
		const char *old = tok[2 + 2 * i], *new = tok[3 + 2 * i];

		ret = -EINVAL;
		if (kpatch_parse_addr(old, &func->old_addr) ||
		    kpatch_parse_addr(new, &func->new_addr)) {
			pr_err("%s %s: '%*pE %*pE' is not a pair of hexadecimal addresses\n",
			       verb, kpmod->name, kpatch_echo_len(old), old,
			       kpatch_echo_len(new), new);
			goto err;
		}
	}

	mutex_lock(&kpatch_mutex);
	ret = kpatch_enable(kpmod, replace, chk);
	mutex_unlock(&kpatch_mutex);
	if (ret || chk)
		goto err;
	return 0;
err:
	kpatch_free(kpmod);
	return ret;
}

/* `unpatch NAME`, or with @chk its dry run */
static int kpatch_cmd_unpatch(char **tok, int ntok, struct kpatch_check *chk)
{
	struct kpatch_module *kpmod;
	int ret;

	if (ntok != 2) {
		pr_err("unpatch: expected exactly one NAME\n");
		return -EINVAL;
	}

	mutex_lock(&kpatch_mutex);
	kpmod = kpatch_find_patch(tok[1]);
	if (!kpmod) {
		pr_err("unpatch %s: no such patch\n", tok[1]);
		ret = -ENOENT;
	} else {
		ret = kpatch_disable(kpmod, chk);
		if (!ret && !chk && !kpmod->mod)
			kpatch_free(kpmod);
	}
	mutex_unlock(&kpatch_mutex);
	return ret;
}

/*
 * The check file: the result of the last `check`, written whole under
 * kpatch_mutex and freed at unload.
 */
static char *kpatch_check_text;

/*
 * "symbol+0xoff/0xsize", or "module:symbol+0xoff/0xsize" for a module
 * function; with @offset false, only the name ("symbol", "module:symbol").
 */
static __cold void kpatch_sym_name(char *buf, unsigned long addr, bool offset)
{
	char sym[KSYM_SYMBOL_LEN];
	char *mod;

	if (offset)
		sprint_symbol(sym, addr);
	else
		sprint_symbol_no_offset(sym, addr);
	mod = strstr(sym, " [");
	if (!mod) {
		strscpy(buf, sym, KSYM_SYMBOL_LEN);
		return;
	}
	*mod = '\0';
	mod += 2;
	mod[strcspn(mod, " ]")] = '\0';
	scnprintf(buf, KSYM_SYMBOL_LEN, "%s:%s", mod, sym);
}

/*
 * Log the answer of `check VERB NAME ...` and keep it for the check file:
 * "VERB NAME ERRNO", then "PID WHERE COMM" for each task in the way.
 */
static __cold void kpatch_check_record(const char *verb, const char *name,
				       int ret, struct kpatch_check *chk)
{
	size_t size = 2 * KPATCH_NAME_MAX + 32 +
		      chk->nr * (KSYM_SYMBOL_LEN + 4 * TASK_COMM_LEN + 16);
	char where[KSYM_SYMBOL_LEN], *text;
	struct kpatch_blocker *b;
	unsigned int i;
	int len;

	if (!ret)
		pr_info("check %s '%s': would apply now\n", verb, name);
	else if (chk->nr)
		pr_info("check %s '%s': would fail (%d): %u task%s in the way\n",
			verb, name, ret, chk->nr + chk->more,
			chk->nr + chk->more == 1 ? "" : "s");
	else
		pr_info("check %s '%s': would fail (%d)\n", verb, name, ret);

	text = kmalloc(size, GFP_KERNEL);
	len = text ? scnprintf(text, size, "%s %s %d\n", verb, name, ret) : 0;
	for (i = 0; i < chk->nr; i++) {
		b = &chk->blockers[i];
		if (b->addr) {
			pr_info("check %s '%s': pid %d (%*pE) in %pS\n", verb,
				name, b->pid, kpatch_comm_len(b->comm), b->comm,
				(void *)b->addr);
			kpatch_sym_name(where, b->addr, true);
		} else {
			pr_info("check %s '%s': pid %d (%*pE): stack cannot be walked reliably\n",
				verb, name, b->pid, kpatch_comm_len(b->comm),
				b->comm);
			strscpy(where, "unreliable", sizeof(where));
		}
		if (text)
			len += scnprintf(text + len, size - len, "%d %s %*pE\n",
					 b->pid, where, kpatch_comm_len(b->comm),
					 b->comm);
	}
	if (chk->more) {
		pr_info("check %s '%s': and %u more\n", verb, name, chk->more);
		if (text)
			scnprintf(text + len, size - len, "+%u more\n",
				  chk->more);
	}
	kfree(chk->blockers);

	mutex_lock(&kpatch_mutex);
	kfree(kpatch_check_text);
	kpatch_check_text = text;
	mutex_unlock(&kpatch_mutex);
}

static bool kpatch_is_verb(const char *word)
{
	return !strcmp(word, "patch") || !strcmp(word, "replace") ||
	       !strcmp(word, "unpatch");
}

static int kpatch_run_command(char *cmd)
{
	struct kpatch_check check = {}, *chk = NULL;
	char **tok, **t, *p;
	int ntok = 0, n, ret;

	tok = kmalloc_array(strlen(cmd) / 2 + 2, sizeof(*tok), GFP_KERNEL);
	if (!tok)
		return -ENOMEM;
	while ((p = strsep(&cmd, " \t")))
		if (*p)
			tok[ntok++] = p;

	/* `check VERB ...` is VERB ... as a dry run. */
	t = tok;
	n = ntok;
	if (n && !strcmp(t[0], "check")) {
		chk = &check;
		t++;
		n--;
	}

	ret = -EINVAL;
	if (!ntok) {
		pr_err("empty command\n");
	} else if (chk && (!n || !kpatch_is_verb(t[0]))) {
		pr_err("check: expected patch, replace or unpatch, then its arguments\n");
	} else if (!kpatch_is_verb(t[0])) {
		pr_err("unknown command '%*pE' (expected patch, replace, unpatch or check)\n",
		       kpatch_echo_len(t[0]), t[0]);
	} else if (n < 2 || !kpatch_valid_name(t[1])) {
		pr_err("%s: the name must be 1 to %d characters of A-Z a-z 0-9 _ -\n",
		       t[0], KPATCH_NAME_MAX);
	} else {
		if (!strcmp(t[0], "unpatch"))
			ret = kpatch_cmd_unpatch(t, n, chk);
		else
			ret = kpatch_cmd_patch(t, n, !strcmp(t[0], "replace"),
					       chk);
		if (chk)
			kpatch_check_record(t[0], t[1], ret, chk);
	}
	kfree(tok);
	return ret;
}

static __cold ssize_t kpatch_control_write(struct file *file,
					   const char __user *ubuf,
					   size_t count, loff_t *ppos)
{
	char *cmd;
	size_t len;
	int ret;

	if (!capable(CAP_SYS_MODULE))
		return -EPERM;
	if (count > KPATCH_CMD_MAX) {
		pr_err("command longer than %d bytes\n", KPATCH_CMD_MAX);
		return -EINVAL;
	}

	cmd = memdup_user_nul(ubuf, count);
	if (IS_ERR(cmd))
		return PTR_ERR(cmd);
	len = strlen(cmd);
	if (len != count) {
		pr_err("a command is text: no NUL bytes\n");
		ret = -EINVAL;
		goto out;
	}
	if (len && cmd[len - 1] == '\n')
		cmd[--len] = '\0';
	if (len != strcspn(cmd, "\n")) {
		pr_err("one command per write, on one line\n");
		ret = -EINVAL;
	} else {
		ret = kpatch_run_command(cmd);
	}
out:
	kfree(cmd);
	return ret ? ret : count;
}

static const struct file_operations kpatch_control_fops = {
	.owner	= THIS_MODULE,
	.open	= simple_open,
	.write	= kpatch_control_write,
	.llseek	= noop_llseek,
};

/*
 * One line per patched function, oldest patch first:
 * NAME OLDSYM+0xSIZE OLDADDR NEWSYM+0xSIZE NEWADDR active|shadowed
 * and after a patch's functions one line per hook it has:
 * NAME HOOK SYM ADDR
 */
static __cold int kpatch_patches_show(struct seq_file *m, void *v)
{
	char old[KSYM_SYMBOL_LEN], new[KSYM_SYMBOL_LEN];
	struct kpatch_module *kpmod;
	struct kpatch_func *func;
	int i;

	mutex_lock(&kpatch_mutex);
	list_for_each_entry(kpmod, &kpatch_patches, list) {
		for (i = 0; i < kpmod->num_funcs; i++) {
			func = &kpmod->funcs[i];
			kpatch_sym_name(old, func->old_addr, false);
			kpatch_sym_name(new, func->new_addr, false);
			seq_printf(m, "%s %s+%#lx %016lx %s+%#lx %016lx %s\n",
				   kpmod->name, old, func->old_size,
				   func->old_addr, new, func->new_size,
				   func->new_addr,
				   kpatch_top_func(func->ip) == func ?
				   "active" : "shadowed");
		}
		for (i = 0; i < KPATCH_NR_HOOKS; i++) {
			if (!kpmod->hooks[i])
				continue;
			kpatch_sym_name(new, (unsigned long)kpmod->hooks[i],
					false);
			seq_printf(m, "%s %s %s %016lx\n", kpmod->name,
				   kpatch_hook_names[i], new,
				   (unsigned long)kpmod->hooks[i]);
		}
	}
	mutex_unlock(&kpatch_mutex);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(kpatch_patches);

/* The result of the last `check`: see kpatch_check_record(). */
static __cold int kpatch_check_show(struct seq_file *m, void *v)
{
	mutex_lock(&kpatch_mutex);
	if (kpatch_check_text)
		seq_puts(m, kpatch_check_text);
	mutex_unlock(&kpatch_mutex);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(kpatch_check);

/* ------------------------------------------------------------------------
 * init and exit
 */

/* The tracepoints of "Exiting tasks", registered from load to unload. */
static struct kpatch_tp {
	const char *name;
	void *probe;
	struct tracepoint *tp;
} kpatch_tps[] = {
	/* The free probe first: no task enters the set without it. */
	{ "sched_process_free", kpatch_free_probe },
	{ "sched_process_exit", kpatch_exit_probe },
};

static void kpatch_tp_find(struct tracepoint *tp, void *priv)
{
	int i;

	for (i = 0; i < ARRAY_SIZE(kpatch_tps); i++)
		if (!strcmp(tp->name, kpatch_tps[i].name))
			kpatch_tps[i].tp = tp;
}

/* Unregister the first @n probes, newest first, and free every record. */
static void kpatch_exiting_stop(int n)
{
	struct kpatch_exiting *e;
	struct hlist_node *tmp;
	int bkt;

	while (n--)
		tracepoint_probe_unregister(kpatch_tps[n].tp,
					    kpatch_tps[n].probe, NULL);
	/* No probe runs any more once this returns, and so no refill starts. */
	tracepoint_synchronize_unregister();
	cancel_work_sync(&kpatch_exiting_work);
	hash_for_each_safe(kpatch_exiting_hash, bkt, tmp, e, node) {
		hash_del(&e->node);
		kfree(e);
	}
	hlist_for_each_entry_safe(e, tmp, &kpatch_exiting_free, node)
		kfree(e);
	INIT_HLIST_HEAD(&kpatch_exiting_free);
	kpatch_exiting_nfree = 0;
}

/*
 * Follow exiting tasks: records, the probes, then the tasks that are exiting already
 * (PF_EXITING, set before sched_process_exit) and still on the task list,
 * which may have passed the tracepoint before the probe was there.  A task
 * found both ways is recorded once.  Those found here stay in the set
 * until their sched_process_free, which cannot come before the RCU read
 * section that found them on the list ends.  A task that has left the
 * task list before kpatch was loaded is not followed; see Documentation.txt.
 */
static int kpatch_exiting_start(void)
{
	struct task_struct *g, *t;
	unsigned long flags;
	unsigned int n = 0;
	int i, ret = 0;

	if (!kpatch_exiting_fill(KPATCH_EXITING_RESERVE)) {
		kpatch_exiting_stop(0);
		return -ENOMEM;
	}
	for_each_kernel_tracepoint(kpatch_tp_find, NULL);
	for (i = 0; i < ARRAY_SIZE(kpatch_tps); i++) {
		ret = kpatch_tps[i].tp ?
		      tracepoint_probe_register(kpatch_tps[i].tp,
						kpatch_tps[i].probe, NULL) :
		      -ENOENT;
		if (ret) {
			pr_err("cannot follow exiting tasks: tracepoint %s (%d)\n",
			       kpatch_tps[i].name, ret);
			kpatch_exiting_stop(i);
			return ret;
		}
	}

	rcu_read_lock();
	for_each_process_thread(g, t)
		n += !!(READ_ONCE(t->flags) & PF_EXITING);
	rcu_read_unlock();
	if (!kpatch_exiting_fill(n + KPATCH_EXITING_RESERVE)) {
		kpatch_exiting_stop(ARRAY_SIZE(kpatch_tps));
		return -ENOMEM;
	}
	rcu_read_lock();
	for_each_process_thread(g, t) {
		if (!(READ_ONCE(t->flags) & PF_EXITING))
			continue;
		raw_spin_lock_irqsave(&kpatch_exiting_lock, flags);
		kpatch_exiting_add(t);
		raw_spin_unlock_irqrestore(&kpatch_exiting_lock, flags);
	}
	rcu_read_unlock();
	return 0;
}

/*
 * Where the kernel's returns jump, if they are jumps to a return thunk:
 * the alternatives make every return of vmlinux and of every module the
 * same at boot and at load, so a function of kpatch's own tells.
 */
static void kpatch_find_return_thunk(void)
{
	const u8 *p = (const u8 *)kpatch_ftrace_anchor;
	enum kpatch_insn kind;
	unsigned long target;
	unsigned int i, len;

	for (i = 0; i < 64; i += len) {
		len = kpatch_decode(p + i, 64 - i, (unsigned long)p + i, &kind,
				    &target);
		if (!len || kind == KPATCH_INSN_RET)
			return;
		if (kind == KPATCH_INSN_JUMP) {
			kpatch_return_thunk = target;
			return;
		}
	}
}

static struct notifier_block kpatch_module_nb = {
	.notifier_call = kpatch_module_going,
	.priority = INT_MAX,	/* first: see kpatch_module_going() */
};

static int __init kpatch_init(void)
{
	int ret;

	kpatch_find_return_thunk();
	ret = ftrace_set_filter_ip(&kpatch_anchor_ops,
				   (unsigned long)kpatch_ftrace_anchor, 0, 1);
	if (!ret)
		ret = register_ftrace_function(&kpatch_anchor_ops);
	if (ret) {
		pr_err("cannot register with ftrace (%d); is it off (sysctl kernel.ftrace_enabled)?\n",
		       ret);
		goto err_filter;
	}
	ret = kpatch_direct_anchor_set();
	if (ret)
		goto err_anchor_ops;
	ret = kpatch_exiting_start();
	if (ret)
		goto err_anchor;
	ret = register_module_notifier(&kpatch_module_nb);
	if (ret)
		goto err_exiting;
	ret = -ENOMEM;
	kpatch_root_kobj = kobject_create_and_add("kpatch", kernel_kobj);
	if (!kpatch_root_kobj)
		goto err_notifier;
	kpatch_patches_kobj = kobject_create_and_add("patches",
						     kpatch_root_kobj);
	if (!kpatch_patches_kobj) {
		kobject_put(kpatch_root_kobj);
		goto err_notifier;
	}

	kpatch_debugfs_dir = debugfs_create_dir("kpatch", NULL);
	debugfs_create_file("control", 0200, kpatch_debugfs_dir, NULL,
			    &kpatch_control_fops);
	debugfs_create_file("patches", 0400, kpatch_debugfs_dir, NULL,
			    &kpatch_patches_fops);
	debugfs_create_file("check", 0400, kpatch_debugfs_dir, NULL,
			    &kpatch_check_fops);
	return 0;

err_notifier:
	unregister_module_notifier(&kpatch_module_nb);
err_exiting:
	kpatch_exiting_stop(ARRAY_SIZE(kpatch_tps));
err_anchor:
	kpatch_direct_unanchor();
err_anchor_ops:
	unregister_ftrace_function(&kpatch_anchor_ops);
err_filter:
	ftrace_free_filter(&kpatch_anchor_ops);
	return ret;
}

static void __exit kpatch_exit(void)
{
	/*
	 * Every enabled patch and every site holds a reference on this
	 * module (see struct kpatch_site): none is left.
	 */
	WARN_ON(!list_empty(&kpatch_patches));
	WARN_ON(!hash_empty(kpatch_site_hash));
	WARN_ON(!list_empty(&kpatch_ways_in));

	debugfs_remove_recursive(kpatch_debugfs_dir);
	kobject_put(kpatch_patches_kobj);
	kobject_put(kpatch_root_kobj);
	unregister_module_notifier(&kpatch_module_nb);
	/* a module still loading whose kpatch_register() failed */
	while (!list_empty(&kpatch_loading))
		kpatch_loading_swap(list_first_entry(&kpatch_loading,
						     struct kpatch_loading,
						     list)->mod, NULL);
	kpatch_exiting_stop(ARRAY_SIZE(kpatch_tps));
	kpatch_direct_unanchor();
	kpatch_direct_table_release();
	unregister_ftrace_function(&kpatch_anchor_ops);
	ftrace_free_filter(&kpatch_anchor_ops);
	ftrace_free_filter(&kpatch_probe_ops);
	kfree(kpatch_check_text);
}

module_init(kpatch_init);
module_exit(kpatch_exit);
MODULE_DESCRIPTION("kpatch: replace kernel functions in a running kernel");
MODULE_VERSION("0.1.0");
MODULE_AUTHOR("kpatch developers");
MODULE_LICENSE("GPL");

/* ------------------------------------------------------------------------
 * Test hooks
 */

#ifdef KPATCH_TEST_HOOKS
/*
 * Test builds only, see kpatch.h.  Set with kpatch_mutex held, and called
 * with it held (the stop_machine() callback runs on behalf of the mutex
 * holder), so the hook cannot change or go away during an update; but for
 * KPATCH_TEST_REFILL, which the refill work item reaches without it, and
 * which kpatch_test_set_hook() waits out when it removes the hook.
 */
static kpatch_test_hook_t kpatch_test_hook;

static void kpatch_test_point(enum kpatch_test_point point)
{
	kpatch_test_hook_t hook = READ_ONCE(kpatch_test_hook);

	if (hook)
		hook(point);
}

/**
 * kpatch_test_set_hook() - install or remove the test hook
 * @hook: function called at each &enum kpatch_test_point, or NULL
 *
 * The hook runs with kpatch_mutex held; at the callback points inside
 * stop_machine(), with interrupts off; at KPATCH_TEST_REFILL from a work
 * item, without the mutex.  A module that installs a hook must remove it
 * before it is unloaded, and let a hook that waits at KPATCH_TEST_REFILL
 * return first: removing the hook waits for it.
 *
 * Context: process context; sleeps.
 * Return: 0, or -EBUSY if another hook is installed.
 */
int kpatch_test_set_hook(kpatch_test_hook_t hook)
{
	int ret = 0;

	mutex_lock(&kpatch_mutex);
	if (hook && kpatch_test_hook)
		ret = -EBUSY;
	else
		WRITE_ONCE(kpatch_test_hook, hook);
	mutex_unlock(&kpatch_mutex);
	if (!hook)
		flush_work(&kpatch_exiting_work);
	return ret;
}
EXPORT_SYMBOL_GPL(kpatch_test_set_hook);

#endif
