// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * kpatch: replace whole kernel functions in a running kernel
 *
 * A patch is a set of (old function, new function) pairs that take effect
 * together, from a patch module's kpatch_register() (kpatch.h) or from a
 * command written to /sys/kernel/debug/kpatch/control.  An update -- patch,
 * replace or unpatch -- changes where the ftrace call sites of the old
 * functions send their calls, inside stop_machine(), at an instant when no
 * task is in code the update changes; a call that runs during that instant
 * anyway (an NMI) makes it fail.
 *
 * The core is the seed's five mechanisms, and a first reading can follow
 * them alone:
 *  1. the sites, found by address: one per patched function, holding the
 *     entries of every patch that changes it (struct kpatch_site);
 *  2. the redirect: a site's ftrace_ops handler sends the call on to the
 *     new function (kpatch_ftrace_handler());
 *  3. stop_machine(): entries change only in its callback, where the
 *     argument that no caller mixes versions is made (kpatch_update_cb());
 *  4. the stack check of every task, in that callback
 *     (kpatch_check_stacks());
 *  5. the NMI-safe state machine, for the calls that run during the update
 *     all the same (kpatch_state).
 * The file reads in the order an update lives: the data and the redirect;
 * the request; one try -- its sites, the code no task may be in, the run,
 * the commit -- and what a refused try does; the API, the control file,
 * init and exit.  Each function comes after the first one that calls it.
 * Sections named "Layer" add a mechanism where the core first needs it,
 * and open with what it adds and its price: a function's pieces, ways into
 * a module, hooks, the pre-walk, exiting tasks, moving busy tasks.
 * Documentation.txt ("How it works") has the long forms of the arguments.
 *
 * Words used throughout:
 *   entry      one function of one patch: its old and new function
 *   site       the ftrace call site of a patched function and kpatch's
 *              ftrace_ops on it; it holds its entries, newest first
 *   target     where a site sends its calls: a new function, 0 for the old
 *              one, or KPATCH_TARGET_SLOW, through the state machine
 *   touched    the entries an update publishes or takes out
 *   part       a patch an update adds or removes
 *   ranges     the code no task may be in for an update to take effect
 *   pin        a module reference that keeps an address an update uses
 *
 * Based on the kpatch core module by Seth Jennings and Josh Poimboeuf.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bsearch.h>
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
#include <linux/stop_machine.h>
#include <linux/string.h>
#include <linux/sysfs.h>
#include <linux/task_work.h>
#include <linux/tracepoint.h>
#include <linux/uaccess.h>
#include <linux/vmalloc.h>
#include <linux/workqueue.h>
#include <asm/ibt.h>
#include <asm/nops.h>
#include <asm/pgtable.h>
#include <asm/text-patching.h>
#include <asm/unwind.h>

#include "kpatch.h"

/* What the kernel must provide: failing here beats a module that cannot patch. */
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
#if !defined(CONFIG_KALLSYMS) || !defined(CONFIG_DEBUG_FS) || \
	!defined(CONFIG_SYSFS) || !defined(CONFIG_TRACEPOINTS)
#error "kpatch needs KALLSYMS, DEBUG_FS, SYSFS and TRACEPOINTS"
#endif

/*
 * What differs between the kernels kpatch builds for, in one place, chosen
 * by what each kernel provides, so that the code below reads the same on
 * all of them.  Kbuild tells one difference from the headers
 * (KPATCH_EXIT_GROUP_DEAD); Documentation.txt lists which kernel has what.
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
 * Wait until no CPU is in a section with preemption off that began before
 * (the slow path, an NMI in it, ftrace's list function walking an
 * ftrace_ops).  Where RCU watches, such a section is an RCU read-side
 * critical section, and synchronize_rcu() waits for it.  Where tracing
 * may run while RCU does not watch, ftrace uses the "rude" flavour of RCU
 * tasks, which waits for every CPU to schedule; a kernel whose
 * architecture keeps tracing out of such code may make that a no-op: so
 * both, each waiting where the other may not.
 */
#ifdef CONFIG_TASKS_RUDE_RCU
#define kpatch_sync_preempt_off()	\
	do { synchronize_rcu(); synchronize_rcu_tasks_rude(); } while (0)
#else
#define kpatch_sync_preempt_off()	synchronize_rcu()
#endif

/* User threads that never return to user space: before 6.4, io_uring's only. */
#ifndef PF_USER_WORKER
#define PF_USER_WORKER		0
#endif

/* The sched_process_exit probe's arguments after the tracepoint's data. */
#ifdef KPATCH_EXIT_GROUP_DEAD
#define KPATCH_EXIT_PROBE_ARGS	struct task_struct *task, bool group_dead
#else
#define KPATCH_EXIT_PROBE_ARGS	struct task_struct *task
#endif

/* The core text of a module, and its data that stays writable after init. */
#ifdef for_each_mod_mem_type
#define kpatch_mod_text(mod)		((unsigned long)(mod)->mem[MOD_TEXT].base)
#define kpatch_mod_text_size(mod)	((mod)->mem[MOD_TEXT].size)
#define kpatch_mod_rw(mod, addr)	within_module_mem_type(addr, mod, MOD_DATA)
#else
#define kpatch_mod_text(mod)		((unsigned long)(mod)->core_layout.base)
#define kpatch_mod_text_size(mod)	((mod)->core_layout.text_size)
#define kpatch_mod_rw(mod, addr)					\
	((addr) - (unsigned long)(mod)->core_layout.base -		\
	 (mod)->core_layout.ro_after_init_size <			\
	 (mod)->core_layout.size - (mod)->core_layout.ro_after_init_size)
#endif

/* ENDBR and the kernel's sealed replacement; none without IBT. */
#ifdef CONFIG_X86_KERNEL_IBT
#define kpatch_gen_endbr()		gen_endbr()
#define kpatch_gen_endbr_poison()	gen_endbr_poison()
#else
#define kpatch_gen_endbr()		0U
#define kpatch_gen_endbr_poison()	0U
#endif

/* Test builds call a hook at points of an update; see the end of the file. */
#ifdef KPATCH_TEST_HOOKS
static void kpatch_test_point(enum kpatch_test_point point);
#else
#define kpatch_test_point(point) do { } while (0)
#endif

/* ------------------------------------------------------------------------
 * Parameters
 */

/* Longest patch name, and longest command accepted by the control file. */
#define KPATCH_NAME_MAX		63
#define KPATCH_CMD_MAX		4096
/* At most this many bytes of a rejected word are echoed, escaped, to the log. */
#define KPATCH_ECHO_MAX		32

/*
 * When the stack check refuses an update, kpatch sleeps and tries again, up
 * to kpatch_retries more times, before it fails with -EBUSY.  It holds
 * kpatch_mutex while it sleeps, so every other command waits for it: no
 * try is made after KPATCH_RETRY_TOTAL_MS of sleeps, whatever the values.
 * Both are read at each try.
 */
#define KPATCH_RETRIES_MAX		100U
#define KPATCH_RETRY_DELAY_MS_MAX	10000U
#define KPATCH_RETRY_TOTAL_MS		60000U

static unsigned int kpatch_retries = 3;
module_param_named(retries, kpatch_retries, uint, 0644);
MODULE_PARM_DESC(retries,
		 "tries after the first when the stack check refuses an update (default 3, at most 100; at most 60 s of retry_delay_ms in all)");

static unsigned int kpatch_retry_delay_ms = 20;
module_param_named(retry_delay_ms, kpatch_retry_delay_ms, uint, 0644);
MODULE_PARM_DESC(retry_delay_ms,
		 "milliseconds to sleep before each retry (default 20, at most 10000)");

/* ------------------------------------------------------------------------
 * Patches, entries and sites
 */

/*
 * kpatch_mutex serialises every update, from its first try to its last,
 * and every process-context reader of the patches and the sites.  Entries
 * are published into and taken out of their sites only inside
 * stop_machine() called with this mutex held, so a holder of the mutex
 * sees sites that nobody else changes.
 */
static DEFINE_MUTEX(kpatch_mutex);

/* What an update in flight does to an entry (see the state machine). */
enum kpatch_op {
	KPATCH_OP_NONE,
	KPATCH_OP_PATCH,	/* being added */
	KPATCH_OP_UNPATCH,	/* being taken out */
};

/* One function of a patch: its old and new function, and its site. */
struct kpatch_entry {
	struct hlist_node node;		/* in site->entries while published */
	struct kpatch_site *site;	/* while the patch is tried or enabled */
	unsigned long old_addr, old_size, new_addr, new_size;
	unsigned long ip;		/* the old function's ftrace call site */
	struct module *old_mod, *new_mod;	/* pinned; NULL: vmlinux */
	enum kpatch_op op;
};

/*
 * kpatch's record of a patch, from its request to its removal.  A patch
 * module's struct kpatch_module is only read, but for ->name while the
 * patch is tried or enabled and ->enabled; a patch from the control file
 * has a struct kpatch_module of kpatch's own (@own).
 */
struct kpatch_patch {
	struct list_head list;		/* in kpatch_patches while enabled */
	struct kpatch_module *kpmod;
	bool own;
	struct kobject *kobj;		/* /sys/kernel/kpatch/patches/NAME */
	struct module *pins[KPATCH_NR_HOOKS + 2];	/* hooks, patch module, kpatch */
	unsigned int nr;
	struct kpatch_entry entries[];
};

#define KPATCH_PIN_PATCH	KPATCH_NR_HOOKS
#define KPATCH_PIN_SELF		(KPATCH_NR_HOOKS + 1)

/* Enabled patches, oldest first.  Protected by kpatch_mutex. */
static LIST_HEAD(kpatch_patches);

/*
 * A site: the ftrace call site of a patched function, hooked by an
 * ftrace_ops of its own, with its entries, newest first, the first of
 * which runs.  It is made and hooked before the update that first patches
 * its function, and unhooked and freed after the update that leaves it no
 * entry.  Its calls go where @target says: above KPATCH_TARGET_SLOW to
 * that new function; 0 on into the old function; KPATCH_TARGET_SLOW
 * through the state machine, while an update changes the site.  Targets
 * are written by the stop_machine() callback, and by the mover of busy
 * tasks (see there) while no update runs.
 *
 * A site pins the module of its function and kpatch itself for as long as
 * it hooks the function, so neither can be unloaded while an fentry call
 * leads into kpatch.  Sites are made, found and freed under kpatch_mutex,
 * in kpatch_sites, by ip (the seed's hash of patched functions); the
 * handler finds its site as the container of its ftrace_ops.
 */
#define KPATCH_TARGET_SLOW	1UL

struct kpatch_site {
	struct ftrace_ops ops;		/* filter: @ip */
	unsigned long target;		/* see above */
	struct hlist_head entries;	/* newest first */
	struct hlist_node node;		/* in kpatch_sites */
	unsigned long ip;
	struct module *mod;		/* pinned: the module of @ip, or NULL */
};

static DEFINE_HASHTABLE(kpatch_sites, 7);

/* The site at @ip, or NULL. */
static struct kpatch_site *kpatch_site_find(unsigned long ip)
{
	struct kpatch_site *site;

	lockdep_assert_held(&kpatch_mutex);
	hash_for_each_possible(kpatch_sites, site, node, ip)
		if (site->ip == ip)
			return site;
	return NULL;
}

/* The entry that runs for @site when no update is in flight, or NULL. */
static struct kpatch_entry *kpatch_top(struct kpatch_site *site)
{
	return hlist_entry_safe(rcu_dereference_raw(hlist_first_rcu(&site->entries)),
				struct kpatch_entry, node);
}

/* ------------------------------------------------------------------------
 * The redirect and the state machine
 */

/*
 * The state machine that keeps the redirect consistent while an update
 * changes the entries under it.
 *
 *                     +---> SUCCESS ---+
 *   IDLE ---> UPDATING                 +---> IDLE
 *                     +---> FAILURE ---+
 *
 * The fast path (a site's target) looks at no state; the state machine
 * guards the slow path, which the calls of every site an update changes
 * take while the update runs.  Outside stop_machine() neither can change
 * under a caller: the only writer is the stop_machine() callback.  Inside
 * it, three kinds of caller still run next to the writer: NMIs on any CPU,
 * the functions the other CPUs call while they spin in the stop_machine()
 * loop, and the stop and undo hooks on the writer's own CPU.
 *
 * IDLE: no update changes the entries; the first entry of a site runs, and
 * entry->op is ignored.
 * UPDATING: set by the callback before the stack check; the update may
 * have published part of its entries.  A caller that finds it moves it to
 * FAILURE (and records which function it called), which makes the update
 * roll back: the caller is proof that a function the update changes ran
 * during it, which is what the stack check refuses.
 * FAILURE: the update will not take effect.  Entries being added are
 * skipped, those being taken out still count: every caller sees the old
 * version.
 * SUCCESS: the update has published all its entries and wins.  Entries
 * being taken out are skipped even before they are unlinked: every caller
 * sees the new version.
 *
 * After stop_machine() the writer returns to IDLE, waits with
 * synchronize_rcu() for the callers (NMIs) that read the state before,
 * and only then clears entry->op and frees what went out.
 */
enum {
	KPATCH_STATE_IDLE,
	KPATCH_STATE_UPDATING,
	KPATCH_STATE_SUCCESS,
	KPATCH_STATE_FAILURE,
};

static atomic_t kpatch_state = ATOMIC_INIT(KPATCH_STATE_IDLE);

/*
 * The function whose call moved UPDATING to FAILURE, and whether that call
 * came from an NMI or from a stop or undo hook (run on kpatch_hook_cpu),
 * for the log.  Interrupts are off on every CPU inside stop_machine(), so
 * any other such call came from kpatch's own update path: a stopper's loop
 * or the stack check itself, and that function can never be patched.
 */
static unsigned long kpatch_failed_ip;
static bool kpatch_failed_nmi, kpatch_failed_hook;
static int kpatch_hook_cpu = -1;

/* The gate of a try moving tasks out of its way, or NULL: see there. */
struct kpatch_gate;
static struct kpatch_gate *kpatch_gating;
static void kpatch_gate_pass(struct kpatch_gate *g);

static int kpatch_state_finish(int state, unsigned long ip);
static noinline void kpatch_redirect_slow(struct kpatch_site *site,
					  struct ftrace_regs *fregs);

/*
 * The handler of every site: the redirect.  Its fast path is a load and a
 * compare more than the least any IPMODIFY handler does.  The site
 * outlives every call in here: it is freed only after
 * unregister_ftrace_function() of its ftrace_ops has returned, which waits
 * until no CPU is in the handler and no task in ftrace's trampoline.  It
 * runs in any context and calls nothing traceable, so it cannot recurse:
 * the ftrace_ops leave out FTRACE_OPS_FL_RECURSION.
 */
static void notrace kpatch_ftrace_handler(unsigned long ip,
					  unsigned long parent_ip,
					  struct ftrace_ops *ops,
					  struct ftrace_regs *fregs)
{
	struct kpatch_site *site = container_of(ops, struct kpatch_site, ops);
	/* pairs with the release in kpatch_final_targets() */
	unsigned long target = smp_load_acquire(&site->target);

	if (likely(target > KPATCH_TARGET_SLOW))
		kpatch_set_ip(fregs, target);
	else if (target)
		kpatch_redirect_slow(site, fregs);
}

/*
 * The slow path, for a call of @site while an update changes it, or while
 * a gate is on: the function the state gives.  It runs in any context, NMI
 * included, and calls nothing traceable but, in a user task while a gate
 * is on, get_task_struct() (kpatch_gate_pass()).  Disabling preemption
 * makes it an RCU read-side section for the synchronize_rcu() after an
 * update, and keeps this CPU's stopper thread from answering the update's
 * rendezvous while it runs.
 */
static noinline void notrace kpatch_redirect_slow(struct kpatch_site *site,
						  struct ftrace_regs *fregs)
{
	struct kpatch_gate *g;
	struct kpatch_entry *e;
	int state;

	preempt_disable_notrace();
	/*
	 * IDLE: no update runs, or it finished and every site it changed is
	 * final, or it has marked its sites but not yet left IDLE; the first
	 * entry runs.  No update can change the entries before we are done:
	 * its callback waits for this CPU's stopper (kpatch_update_cb()).
	 */
	state = atomic_read(&kpatch_state);
	if (state != KPATCH_STATE_IDLE) {
		state = kpatch_state_finish(KPATCH_STATE_FAILURE, site->ip);
	} else {
		/* pairs with the release in kpatch_gate_on() */
		g = smp_load_acquire(&kpatch_gating);
		if (unlikely(g))
			kpatch_gate_pass(g);
	}
	/*
	 * Read entry->op and the entries only after the state.  Pairs with
	 * the smp_wmb() before SUCCESS in kpatch_update_publish(): a call
	 * that reads SUCCESS sees the entries published.  One that read IDLE
	 * reads entries no update has changed yet: see above.
	 */
	smp_rmb();
	hlist_for_each_entry_rcu_notrace(e, &site->entries, node)
		if (!(state == KPATCH_STATE_FAILURE && e->op == KPATCH_OP_PATCH) &&
		    !(state == KPATCH_STATE_SUCCESS && e->op == KPATCH_OP_UNPATCH))
			break;
	if (e)
		kpatch_set_ip(fregs, e->new_addr);
	preempt_enable_notrace();
}

/* ------------------------------------------------------------------------
 * An update's records: the request, a try, and why a try was refused
 */

/* A code range [start, end) that must not be on any stack. */
struct kpatch_range {
	unsigned long start;
	unsigned long end;
};

/* Why a try was refused, for the log (kpatch_report()). */
enum kpatch_refusal {
	KPATCH_OK,
	KPATCH_BUSY,		/* code the update takes away is on a stack */
	KPATCH_UNRELIABLE,	/* a stack could not be walked reliably */
	KPATCH_RAN,		/* a function the update changes ran meanwhile */
	KPATCH_LOST,		/* an exiting task could not be recorded */
	KPATCH_HOOK,		/* a pre or stop hook refused */
	KPATCH_AGAIN,		/* ftrace: a direct call's owner was busy */
};

struct kpatch_refused {
	enum kpatch_refusal why;
	unsigned long addr;		/* BUSY: where; AGAIN: the function */
	pid_t pid;			/* BUSY, UNRELIABLE: whose stack */
	char comm[TASK_COMM_LEN];
	struct kpatch_patch *hook_patch;	/* KPATCH_HOOK: whose hook */
	enum kpatch_hook hook;
	int hook_ret;
};

/* What the caller asked for: the same at every try. */
struct kpatch_request {
	const char *verb;		/* "patch", "replace" or "unpatch" */
	struct kpatch_patch *add;	/* patch to publish, or NULL */
	struct kpatch_patch *remove;	/* patch to take out, or NULL */
	bool replace;			/* also take out every other patch */
};

/*
 * A task whose stack the pre-walk found clean, and what it takes to trust
 * that walk inside stop_machine(): see "Layer: the pre-walk".
 */
struct kpatch_seen {
	struct task_struct *task;
	unsigned long switches;
	u64 start_time;
	pid_t pid;
};

/*
 * One try of an update, prepared by kpatch_try_once() from the request and
 * the patches as they are then; what it holds is freed before that
 * returns, and @refused is read after.
 *  - the parts: the patches whose hooks run, in the order they run: those
 *    removed, newest first, then the one added; and their entries in the
 *    same order, those taken out before @first_add, those published after;
 *  - the sites of those entries, each once;
 *  - the code no task may be in (kpatch_build_ranges()): sorted disjoint
 *    ranges, and modules checked whole but for their own threads;
 *  - the pre-walk's cache of clean tasks, in task list order and sorted;
 *  - the stop_machine() rendezvous, and why the try was refused.
 */
struct kpatch_try {
	struct kpatch_request *req;
	struct kpatch_patch **parts;
	unsigned int nr_parts;
	struct kpatch_entry **touched;
	unsigned int nr_touched, first_add;
	struct kpatch_site **sites;
	unsigned int nr_sites;
	struct kpatch_range *ranges;
	unsigned int nr_ranges, max_ranges;
	struct module **whole;
	unsigned int nr_whole;
	bool hooks;			/* a part has a hook */
	/* Layer: the pre-walk */
	struct kpatch_seen *seen, **seen_by_task;
	unsigned int nr_seen, max_seen;
	atomic_t cpus_in, cpus_seen;
	/* Layer: moving busy tasks */
	struct kpatch_movers *movers;	/* tasks it moves, or NULL */
	struct kpatch_refused refused;
};

/* ------------------------------------------------------------------------
 * Contents: the functions below, under the title of their section, in the
 * file's order, which is the order a `patch` first calls them in -- but for
 * the control file, whose write starts it, at the end
 */

/* The request: resolve, check and pin what a patch names */
static struct kpatch_patch *kpatch_find_patch(const char *name);
static struct kpatch_patch *kpatch_patch_new(struct kpatch_module *kpmod,
					     bool own, int *err);
static int kpatch_resolve_entry(struct kpatch_patch *patch, int i,
				const struct kpatch_func *func);
static int kpatch_resolve(const char *patch, const char *what,
			  unsigned long addr, unsigned long *size,
			  struct module *coming_ok, struct module **modp);
static bool kpatch_symbol(unsigned long addr, char *buf, unsigned long *start,
			  unsigned long *size, char **mod);
static bool kpatch_kernel_text(unsigned long addr);
static int kpatch_get_module(const char *name, struct module *coming_ok,
			     struct module **modp, enum module_state *state);
static bool kpatch_module_text(const struct module *mod, unsigned long addr);
static bool kpatch_endbr(unsigned long addr, bool sealed_too);
static int kpatch_check_ftrace_site(unsigned long ip);
static int kpatch_cmp_ulong(const void *a, const void *b);
static void kpatch_patch_free(struct kpatch_patch *patch);
static void kpatch_own_free(struct kpatch_module *kpmod);
static int kpatch_resolve_hook(struct kpatch_patch *patch, int h);

/* An update, and one try of it */
static int kpatch_update(struct kpatch_request *req);
static int kpatch_try_once(struct kpatch_try *try);
static int kpatch_check_chain(struct kpatch_patch *patch, bool replace);
static bool kpatch_sysfs_taken(const char *verb, const char *name);
static int kpatch_collect(struct kpatch_try *try);
static int kpatch_sites_get(struct kpatch_try *try);
static struct kpatch_site *kpatch_site_new(struct kpatch_entry *e, int *err);
static void kpatch_site_free(struct kpatch_site *site);
static int kpatch_build_ranges(struct kpatch_try *try);
static int kpatch_add_code(struct kpatch_try *try, const struct kpatch_entry *e,
			   bool old);
static int kpatch_add_range(struct kpatch_try *try, unsigned long start,
			    unsigned long size);

/* Layer: a function's pieces */
static int kpatch_add_pieces(struct kpatch_try *try, unsigned int first,
			     struct module *mod, unsigned long fn);

/* Layer: ways into a module */
static int kpatch_add_whole(struct kpatch_try *try);

/* The ranges in order */
static int kpatch_cmp_range(const void *a, const void *b);

/* Layer: hooks */
static int kpatch_pre_hooks(struct kpatch_try *try);
static void kpatch_cancel_hooks(struct kpatch_try *try);

/* The run: stop_machine() and the stack check */
static int kpatch_run(struct kpatch_try *try);
static bool kpatch_checks(const struct kpatch_try *try);
static int kpatch_prewalk(struct kpatch_try *try);
static void kpatch_forget(struct kpatch_try *try);
static int kpatch_walk_stack(struct task_struct *task, struct kpatch_try *try);
static void kpatch_set_op(struct kpatch_try *try, bool running);
static int kpatch_update_cb(void *data);
static int kpatch_check_stacks(struct kpatch_try *try);
static int kpatch_check_task(struct task_struct *task, struct kpatch_try *try);
static int kpatch_check_exiting(struct kpatch_try *try);
static int kpatch_update_publish(struct kpatch_try *try);
static void kpatch_final_targets(struct kpatch_try *try);

/* Then: released, committed, or refused */
static void kpatch_sites_release(struct kpatch_try *try);
static void kpatch_commit(struct kpatch_try *try);
static void kpatch_kobj_remove(struct kobject **kobj);
static void kpatch_uncollect(struct kpatch_try *try);
static bool kpatch_retry(const struct kpatch_request *req,
			 const struct kpatch_refused *r, int ret,
			 unsigned int n);
static const char *kpatch_req_name(const struct kpatch_request *req);

/* Layer: moving busy tasks */
static bool kpatch_move_out(struct kpatch_try *try, int ret);
static void kpatch_movers_free(struct kpatch_try *try);
static bool kpatch_stop_at(struct kpatch_try *try, struct task_struct *task);

/* The control file */
static int kpatch_cmd_patch(char **tok, int ntok, bool replace);
static int kpatch_cmd_unpatch(char **tok, int ntok);

/* ------------------------------------------------------------------------
 * The request: resolve, check and pin what a patch names
 */

/*
 * Enable the patch @kpmod describes, replacing every other patch if
 * @replace.  @own: @kpmod is kpatch's (the control file's), and it is
 * freed here but when the patch was enabled.  Caller holds kpatch_mutex.
 */
static __cold int kpatch_enable(struct kpatch_module *kpmod, bool own,
				bool replace)
{
	struct kpatch_request req = {
		.verb = replace ? "replace" : "patch",
		.replace = replace,
	};
	int ret;

	lockdep_assert_held(&kpatch_mutex);
	if (kpatch_find_patch(kpmod->name)) {
		pr_err("%s '%s' refused: a patch with that name exists\n",
		       req.verb, kpmod->name);
		ret = -EEXIST;
	} else {
		req.add = kpatch_patch_new(kpmod, own, &ret);
	}
	if (!req.add) {
		if (own)
			kpatch_own_free(kpmod);
		return ret;
	}
	ret = kpatch_update(&req);
	if (ret)
		kpatch_patch_free(req.add);	/* and kpmod, if own */
	return ret;
}

/* The enabled patch called @name, or NULL. */
static struct kpatch_patch *kpatch_find_patch(const char *name)
{
	struct kpatch_patch *patch;

	lockdep_assert_held(&kpatch_mutex);
	list_for_each_entry(patch, &kpatch_patches, list)
		if (!strcmp(patch->kpmod->name, name))
			return patch;
	return NULL;
}

/*
 * kpatch's record of the patch @kpmod describes, with every function and
 * hook checked and pinned, together with the patch module and kpatch
 * itself: once for a request, whose tries keep the pins, so that an
 * address keeps naming the function it named.  An old function may appear
 * only once, and a new one may not be an old one of the same patch.
 * @own: @kpmod is kpatch's, and freed with the record.  On failure, the
 * errno and NULL, and @kpmod is the caller's.
 */
static __cold struct kpatch_patch *
kpatch_patch_new(struct kpatch_module *kpmod, bool own, int *err)
{
	struct kpatch_patch *patch;
	unsigned long *olds;
	int i, ret;

	patch = kzalloc(struct_size(patch, entries, kpmod->num_funcs),
			GFP_KERNEL);
	olds = kmalloc_array(kpmod->num_funcs, sizeof(*olds), GFP_KERNEL);
	ret = -ENOMEM;
	if (!patch || !olds)
		goto out;
	INIT_LIST_HEAD(&patch->list);
	patch->kpmod = kpmod;
	patch->nr = kpmod->num_funcs;
	if (kpmod->mod && !try_module_get(kpmod->mod)) {
		pr_err("%s: patch module is going away\n", kpmod->name);
		ret = -ENODEV;
		goto out;
	}
	patch->pins[KPATCH_PIN_PATCH] = kpmod->mod;
	for (i = 0, ret = 0; i < kpmod->num_funcs && !ret; i++) {
		ret = kpatch_resolve_entry(patch, i, &kpmod->funcs[i]);
		olds[i] = kpmod->funcs[i].old_addr;
	}
	for (i = 0; i < KPATCH_NR_HOOKS && !ret; i++)
		ret = kpatch_resolve_hook(patch, i);
	if (ret)
		goto out;

	sort(olds, kpmod->num_funcs, sizeof(*olds), kpatch_cmp_ulong, NULL);
	for (i = 1; i < kpmod->num_funcs && !ret; i++)
		if (olds[i] == olds[i - 1]) {
			pr_err("%s: an old function appears twice\n",
			       kpmod->name);
			ret = -EINVAL;
		}
	for (i = 0; i < kpmod->num_funcs && !ret; i++)
		if (bsearch(&kpmod->funcs[i].new_addr, olds, kpmod->num_funcs,
			    sizeof(*olds), kpatch_cmp_ulong)) {
			pr_err("%s: new function %pS is also an old function of a patch\n",
			       kpmod->name, (void *)kpmod->funcs[i].new_addr);
			ret = -EINVAL;
		}
	if (!ret) {
		__module_get(THIS_MODULE);
		patch->pins[KPATCH_PIN_SELF] = THIS_MODULE;
		patch->own = own;
	}
out:
	kfree(olds);
	if (ret && patch) {
		kpatch_patch_free(patch);	/* not own: kpmod stays */
		patch = NULL;
	}
	*err = ret;
	return patch;
}

/* Resolve entry @i of @patch, from @func, and pin the modules it lives in. */
static __cold int kpatch_resolve_entry(struct kpatch_patch *patch, int i,
				       const struct kpatch_func *func)
{
	struct kpatch_entry *e = &patch->entries[i];
	const char *name = patch->kpmod->name;
	int ret;

	e->old_addr = func->old_addr;
	e->new_addr = func->new_addr;
	ret = kpatch_resolve(name, "old function", e->old_addr, &e->old_size,
			     NULL, &e->old_mod);
	if (!ret && func->old_size && func->old_size != e->old_size) {
		pr_err("%s: old function %pS is %#lx bytes long, not %#lx\n",
		       name, (void *)e->old_addr, e->old_size, func->old_size);
		ret = -EINVAL;
	}
	ret = ret ?: kpatch_resolve(name, "new function", e->new_addr,
				    &e->new_size, patch->kpmod->mod,
				    &e->new_mod);
	if (!ret && func->new_size && func->new_size != e->new_size) {
		pr_err("%s: new function %pS is %#lx bytes long, not %#lx\n",
		       name, (void *)e->new_addr, e->new_size, func->new_size);
		ret = -EINVAL;
	}
	if (ret)
		return ret;
	/* the fentry call, which on IBT kernels comes after the ENDBR */
	e->ip = e->old_addr + (kpatch_endbr(e->old_addr, true) ? ENDBR_INSN_SIZE : 0);
	ret = kpatch_check_ftrace_site(e->ip);
	if (ret == -ENOMEM)
		pr_err("%s: out of memory checking %pS with ftrace\n", name,
		       (void *)e->old_addr);
	else if (ret)
		pr_err("%s: old function %pS cannot be traced by ftrace\n",
		       name, (void *)e->old_addr);
	return ret;
}

/*
 * Check that @addr is the start of a function in vmlinux or module text,
 * through kallsyms.  Returns the function's size in *@size and, for a
 * module function, a reference on the module in *@modp.  The module must
 * be live, or be @coming_ok (see kpatch_get_module()).  Logs why on
 * failure.  The addresses come from the control file, that is from the
 * user: until this has accepted one, it is only looked up (kallsyms,
 * module text, page tables), never read.
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
		if (kpatch_kernel_text(addr))
			return 0;
		goto not_text;
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
	if (kpatch_module_text(mod, addr)) {
		*modp = mod;
		return 0;
	}
	module_put(mod);
not_text:
	pr_err("%s: %s %lx (%s) is not in kernel or module text\n",
	       patch, what, addr, sym);
	return -EINVAL;
}

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
	if (kstrtoul(plus + 1, 16, &off) || kstrtoul(slash + 1, 16, size))
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
		/* With our reference a live module stays live. */
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

/* Is @addr in the core text of @mod? */
static bool kpatch_module_text(const struct module *mod, unsigned long addr)
{
	return addr - kpatch_mod_text(mod) < kpatch_mod_text_size(mod);
}

/*
 * Is there an ENDBR at @addr: a live one, or with @sealed_too also the
 * kernel's sealed replacement?  The test of is_endbr(), open-coded: it is
 * not exported everywhere, and takes the instruction on some kernels, a
 * pointer on others.
 */
static bool kpatch_endbr(unsigned long addr, bool sealed_too)
{
	u32 insn;

	if (!kpatch_gen_endbr() ||
	    copy_from_kernel_nofault(&insn, (void *)addr, sizeof(insn)))
		return false;
	if ((insn & ~0x01000000U) == kpatch_gen_endbr())	/* ENDBR32 -> 64 */
		return sealed_too || insn == kpatch_gen_endbr();
	return sealed_too && insn == kpatch_gen_endbr_poison();
}

/*
 * Never registered: its filter only asks ftrace whether an address is one
 * of its call sites, without touching any code.
 */
static struct ftrace_ops kpatch_probe_ops;

/*
 * Is @ip an ftrace call site?  Ask ftrace, then make sure the instruction
 * there is what ftrace puts at its sites (a 5-byte NOP or a call or jmp,
 * or the INT3 of a site being rewritten), so that @ip is the site itself.
 * Returns 0 if it is, -EINVAL if it is not, -ENOMEM if ftrace had no
 * memory to answer.
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
	if (!memcmp(insn, nop5, sizeof(nop5)) || insn[0] == CALL_INSN_OPCODE ||
	    insn[0] == JMP32_INSN_OPCODE || insn[0] == INT3_INSN_OPCODE)
		return 0;
	return -EINVAL;
}

static int kpatch_cmp_ulong(const void *a, const void *b)
{
	unsigned long x = *(const unsigned long *)a;
	unsigned long y = *(const unsigned long *)b;

	return x < y ? -1 : x > y;
}

/* Drop every pin of @patch, and free it (with its kpatch_module if own). */
static void kpatch_patch_free(struct kpatch_patch *patch)
{
	unsigned int i;

	for (i = 0; i < patch->nr; i++) {
		module_put(patch->entries[i].old_mod);
		module_put(patch->entries[i].new_mod);
	}
	for (i = 0; i < ARRAY_SIZE(patch->pins); i++)
		module_put(patch->pins[i]);
	if (patch->own)
		kpatch_own_free(patch->kpmod);
	kfree(patch);
}

/* Free a kpatch_module of kpatch's own, the control file's. */
static void kpatch_own_free(struct kpatch_module *kpmod)
{
	kfree(kpmod->funcs);
	kfree(kpmod->name);
	kfree(kpmod);
}

/* ------------------------------------------------------------------------
 * An update, and one try of it
 */

/*
 * Run the update @req asks for.  While the stack check refuses it, it
 * waits and tries again (kpatch_retry()), holding kpatch_mutex: the
 * patches it was asked to change are those it changes.
 */
static __cold int kpatch_update(struct kpatch_request *req)
{
	struct kpatch_try try;
	unsigned int n;
	int ret;

	lockdep_assert_held(&kpatch_mutex);
	for (n = 1;; n++) {
		memset(&try, 0, sizeof(try));
		try.req = req;
		ret = kpatch_try_once(&try);
		if (!ret || !kpatch_retry(req, &try.refused, ret, n))
			return ret;
	}
}

/*
 * One try of @try->req: prepare it, run it -- again while it moves tasks
 * out of its way (kpatch_move_out()) -- and commit it or undo every step.
 */
static __cold int kpatch_try_once(struct kpatch_try *try)
{
	const struct kpatch_request *req = try->req;
	struct kpatch_patch *add = req->add;
	int ret;

	if (add) {
		ret = kpatch_check_chain(add, req->replace);
		if (ret)
			return ret;
		if (kpatch_sysfs_taken(req->verb, add->kpmod->name))
			return -EEXIST;
		add->kobj = kobject_create_and_add(add->kpmod->name,
						   kpatch_patches_kobj);
		if (!add->kobj)
			return -ENOMEM;
	}
	ret = kpatch_collect(try);
	ret = ret ?: kpatch_sites_get(try);
	ret = ret ?: kpatch_build_ranges(try);
	ret = ret ?: try->hooks ? kpatch_pre_hooks(try) : 0;
	if (!ret) {
		do
			ret = kpatch_run(try);
		while (ret && kpatch_move_out(try, ret));
		if (try->movers)
			kpatch_movers_free(try);
		if (ret)
			kpatch_cancel_hooks(try);
	}
	kpatch_sites_release(try);	/* those left with no entry */
	if (!ret)
		kpatch_commit(try);
	kpatch_uncollect(try);
	if (ret && add)
		kpatch_kobj_remove(&add->kobj);
	return ret;
}

/*
 * Would @patch make a redirect lead into another one, with the patches
 * enabled now (none, if @replace takes them all out)?  A function may not
 * be both an old and a new function among the enabled patches, so every
 * redirect is exactly one hop.
 */
static __cold int kpatch_check_chain(struct kpatch_patch *patch, bool replace)
{
	struct kpatch_entry *e, *f;
	struct kpatch_patch *p;
	unsigned int i, k;

	for (i = 0; i < patch->nr && !replace; i++) {
		e = &patch->entries[i];
		list_for_each_entry(p, &kpatch_patches, list) {
			for (k = 0, f = p->entries; k < p->nr; k++, f++) {
				if (e->new_addr == f->old_addr) {
					pr_err("%s: new function %pS is also an old function of a patch\n",
					       patch->kpmod->name,
					       (void *)e->new_addr);
					return -EINVAL;
				}
				if (e->old_addr == f->new_addr) {
					pr_err("%s: old function %pS is the new function of a patch\n",
					       patch->kpmod->name,
					       (void *)e->old_addr);
					return -EINVAL;
				}
			}
		}
	}
	return 0;
}

/*
 * Does /sys/kernel/kpatch/patches/@name exist?  kpatch makes it itself; a
 * patch module that makes it too is refused.
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

/* The parts of @try and their entries (see struct kpatch_try). */
static __cold int kpatch_collect(struct kpatch_try *try)
{
	const struct kpatch_request *req = try->req;
	struct kpatch_patch *p;
	unsigned int n = 2, i;

	list_for_each_entry(p, &kpatch_patches, list)
		n++;
	try->parts = kmalloc_array(n, sizeof(*try->parts), GFP_KERNEL);
	if (!try->parts)
		return -ENOMEM;
	if (req->remove)
		try->parts[try->nr_parts++] = req->remove;
	if (req->replace)
		list_for_each_entry_reverse(p, &kpatch_patches, list)
			try->parts[try->nr_parts++] = p;
	if (req->add)
		try->parts[try->nr_parts++] = req->add;
	for (i = 0; i < try->nr_parts; i++)
		for (n = 0; n < KPATCH_NR_HOOKS; n++)
			try->hooks |= !!try->parts[i]->kpmod->hooks[n];

	for (n = 0, i = 0; i < try->nr_parts; i++)
		n += try->parts[i]->nr;
	try->touched = kmalloc_array(n, sizeof(*try->touched), GFP_KERNEL);
	try->sites = kmalloc_array(n, sizeof(*try->sites), GFP_KERNEL);
	if (!try->touched || !try->sites)
		return -ENOMEM;
	for (i = 0; i < try->nr_parts; i++)
		for (n = 0; n < try->parts[i]->nr; n++)
			try->touched[try->nr_touched++] =
				&try->parts[i]->entries[n];
	try->first_add = try->nr_touched - (req->add ? req->add->nr : 0);
	return 0;
}

/*
 * Give every entry @try adds a site: the site its function has, or a new
 * one, hooked by an ftrace_ops of its own (an ftrace update each).  Then
 * the sites of all the entries, each once, in try->sites.  On failure,
 * the sites made are gone again; name the function and return -EBUSY,
 * -EINVAL or -ENOMEM, or -EAGAIN with try->refused saying why.
 */
static __cold int kpatch_sites_get(struct kpatch_try *try)
{
	struct kpatch_entry *e = NULL;
	unsigned int i, n;
	int ret = 0;

	for (i = try->first_add; i < try->nr_touched; i++)
		try->touched[i]->site = NULL;
	for (i = try->first_add; i < try->nr_touched && !ret; i++) {
		e = try->touched[i];
		e->site = kpatch_site_find(e->ip) ?: kpatch_site_new(e, &ret);
	}
	if (ret) {
		/* only a site made here has no entry: no site is kept empty */
		for (i = try->first_add; i < try->nr_touched; i++)
			if (try->touched[i]->site &&
			    hlist_empty(&try->touched[i]->site->entries))
				kpatch_site_free(try->touched[i]->site);
	}
	if (ret == -EAGAIN) {
		/*
		 * The owner of a direct call there (a BPF trampoline being
		 * changed) cannot answer ftrace now: busy, as a function on a
		 * stack is (kpatch_retry()).
		 */
		try->refused.why = KPATCH_AGAIN;
		try->refused.addr = e->old_addr;
		return ret;
	}
	if (ret == -ENOMEM)
		pr_err("%s '%s' refused: out of memory for the ftrace sites\n",
		       try->req->verb, try->req->add->kpmod->name);
	else if (ret)
		pr_err("%s '%s' refused: ftrace cannot redirect %pS (%d); is a kprobe or another live patch on it?\n",
		       try->req->verb, try->req->add->kpmod->name,
		       (void *)e->old_addr, ret);
	if (ret)
		return ret == -ENOMEM || ret == -EBUSY ? ret : -EINVAL;

	/* by address, a pointer read as the unsigned long it fits in */
	for (i = 0; i < try->nr_touched; i++)
		try->sites[i] = try->touched[i]->site;
	sort(try->sites, try->nr_touched, sizeof(*try->sites),
	     kpatch_cmp_ulong, NULL);
	for (i = 0, n = 0; i < try->nr_touched; i++)
		if (!n || try->sites[i] != try->sites[n - 1])
			try->sites[n++] = try->sites[i];
	try->nr_sites = n;
	return 0;
}

/*
 * A new site for entry @e, hooked by its ftrace_ops: its target is 0, and
 * calls go on unchanged until an update gives it one.  It pins the module
 * of its function and kpatch (see struct kpatch_site).
 */
static struct kpatch_site *kpatch_site_new(struct kpatch_entry *e, int *err)
{
	struct kpatch_site *site;

	lockdep_assert_held(&kpatch_mutex);
	site = kzalloc(sizeof(*site), GFP_KERNEL);
	if (!site) {
		*err = -ENOMEM;
		return NULL;
	}
	site->ip = e->ip;
	site->ops.func = kpatch_ftrace_handler;
	site->ops.flags = KPATCH_FOPS_FLAGS;
	INIT_HLIST_HEAD(&site->entries);
	*err = ftrace_set_filter_ip(&site->ops, site->ip, 0, 0) ?:
	       register_ftrace_function(&site->ops);
	if (*err) {
		/*
		 * ftrace may have put the ops on its list before it failed
		 * (another IPMODIFY user or a direct call owns the function)
		 * and taken it off without waiting for the CPUs in its list
		 * function, with preemption off: wait for them.
		 */
		kpatch_sync_preempt_off();
		ftrace_free_filter(&site->ops);
		kfree(site);
		return NULL;
	}
	site->mod = e->old_mod;
	if (site->mod)
		__module_get(site->mod);
	__module_get(THIS_MODULE);
	hash_add(kpatch_sites, &site->node, site->ip);
	return site;
}

/*
 * Build the table of code that must not be running for @try to be safe:
 * for every function whose visible version the update changes, the code
 * that runs for it now -- the new function of the entry on top of its
 * stack, if any -- and always the old function itself.  The old function
 * is on a stack not only when it runs unpatched: a task preempted inside
 * ftrace's trampoline or kpatch's handler has the return address of the
 * old function's fentry call on its stack, and resumes wherever the target
 * it read pointed it.  Each function comes with its pieces
 * (kpatch_add_code()).  Removing an entry that is not on top changes
 * nothing visible and needs no check of its functions; the modules the
 * update stops redirecting into are another matter (kpatch_add_whole()).
 * Done before stop_machine(), under kpatch_mutex, so the table cannot
 * change between here and the callback.
 */
static int kpatch_build_ranges(struct kpatch_try *try)
{
	struct kpatch_entry *e, *top;
	unsigned int i, n;
	int ret = 0;

	/* Room for two functions per entry and two pieces; more if needed. */
	try->max_ranges = 4 * try->nr_touched;
	try->ranges = kmalloc_array(try->max_ranges, sizeof(*try->ranges),
				    GFP_KERNEL);
	try->whole = kmalloc_array(try->nr_touched, sizeof(*try->whole),
				   GFP_KERNEL);
	if (!try->ranges || !try->whole)
		return -ENOMEM;

	for (i = 0; i < try->nr_touched && !ret; i++) {
		e = try->touched[i];
		top = kpatch_top(e->site);
		if (i >= try->first_add) {
			if (top)
				ret = kpatch_add_code(try, top, false);
		} else if (top == e) {
			ret = kpatch_add_code(try, e, false);
		} else {
			continue;	/* not visible: nothing changes */
		}
		ret = ret ?: kpatch_add_code(try, e, true);
	}
	ret = ret ?: kpatch_add_whole(try);
	if (ret)
		return ret;

	/* Sort and merge, so that one binary search answers each address. */
	sort(try->ranges, try->nr_ranges, sizeof(*try->ranges),
	     kpatch_cmp_range, NULL);
	for (i = 1, n = try->nr_ranges ? 1 : 0; i < try->nr_ranges; i++) {
		struct kpatch_range *last = &try->ranges[n - 1];

		if (try->ranges[i].start <= last->end)
			last->end = max(last->end, try->ranges[i].end);
		else
			try->ranges[n++] = try->ranges[i];
	}
	try->nr_ranges = n;
	return 0;
}

/* Add the old function of @e (@old) or its new one to the ranges, with its pieces. */
static __cold int kpatch_add_code(struct kpatch_try *try,
				  const struct kpatch_entry *e, bool old)
{
	unsigned long fn = old ? e->old_addr : e->new_addr;
	unsigned int first = try->nr_ranges;

	return kpatch_add_range(try, fn, old ? e->old_size : e->new_size) ?:
	       kpatch_add_pieces(try, first, old ? e->old_mod : e->new_mod, fn);
}

static int kpatch_add_range(struct kpatch_try *try, unsigned long start,
			    unsigned long size)
{
	struct kpatch_range *r;

	if (try->nr_ranges == try->max_ranges) {
		r = krealloc_array(try->ranges, 2 * try->max_ranges, sizeof(*r),
				   GFP_KERNEL);
		if (!r)
			return -ENOMEM;
		try->ranges = r;
		try->max_ranges *= 2;
	}
	try->ranges[try->nr_ranges].start = start;
	try->ranges[try->nr_ranges].end = start + size;
	try->nr_ranges++;
	return 0;
}

static int kpatch_cmp_range(const void *a, const void *b)
{
	const struct kpatch_range *ra = a, *rb = b;

	return ra->start < rb->start ? -1 : ra->start > rb->start;
}

/* ------------------------------------------------------------------------
 * Layer: a function's pieces
 *
 * What it adds: the compiler may move the unlikely blocks of a function f
 * into f.cold and part of its body into f.part.N, each elsewhere and listed
 * by kallsyms as a function of its own.  f jumps to such a piece, and a
 * .cold piece jumps back into f: a task asleep in a call made from a piece
 * has no return address in f, yet runs f's code when it wakes.  So to the
 * stack check the pieces are f: every symbol of the same text named like
 * one ("f.cold", "f.part.N", "f.part.N.cold", ...) that a jump of f or of
 * its pieces may lead into.  A jump to anything else is a tail call, whose
 * target is not f.
 * Without it: the stack check looks at [f, f + size) only, and a task
 * asleep under f.cold would let an update take f away under it.
 * Price: about 110 lines; nothing per call; per update a scan of each
 * changed function, a page-table lookup per possible jump that leaves it,
 * and a kallsyms lookup per symbol such a jump lands in.
 *
 * The scan does not decode: at every byte offset, each jmp or jcc opcode
 * (EB, 70-7F, E0-E3, E9, 0F 80-8F) is taken as a jump, and so is an INT3 read as
 * each of them -- a kprobe's INT3 hides the first byte of the instruction
 * it probes, and code being rewritten shows one too.  A false jump can only
 * add a genuine piece of f: the scan errs on the side of refusing, and no
 * notion of "in step" is needed, so no INT3 can put it out of step.  An
 * optimized kprobe copies out no jump (x86 boosts none), and its own jmp
 * leads out of the text.  A module's static branches and exception fixups
 * are followed through its tables; vmlinux's are not exported, so a static
 * branch of vmlinux that is a NOP now leads nowhere the scan sees
 * (Documentation.txt, "Limitations").
 */

/* Symbols a jump led into that are no piece, remembered to spare lookups. */
#define KPATCH_NOT_PIECES	8

struct kpatch_scan {
	struct kpatch_try *try;
	unsigned int first;		/* the range of f; its pieces after */
	struct module *mod;		/* f's, or NULL: vmlinux */
	size_t nlen;			/* of f's name, in @name */
	unsigned int next;
	struct kpatch_range not[KPATCH_NOT_PIECES];
	char name[KSYM_SYMBOL_LEN], sym[KSYM_SYMBOL_LEN];
};

static int kpatch_scan_range(struct kpatch_scan *sc, unsigned long start,
			     unsigned long end);
static int kpatch_scan_target(struct kpatch_scan *sc, unsigned long target);
static int kpatch_scan_tables(struct kpatch_scan *sc, unsigned long start,
			      unsigned long end);

/*
 * Add to @try's ranges the pieces of the function at @fn, in @mod (NULL:
 * vmlinux), whose own range is range @first, and scan each piece in turn.
 * The code is pinned (vmlinux, or a module that a pin of the patch holds),
 * so it can be read; it may be changing meanwhile (ftrace, static keys,
 * kprobes), and whatever it reads as, each range added is a whole symbol.
 */
static __cold int kpatch_add_pieces(struct kpatch_try *try, unsigned int first,
				    struct module *mod, unsigned long fn)
{
	struct kpatch_scan *sc = kzalloc(sizeof(*sc), GFP_KERNEL);
	unsigned int r;
	int ret = 0;

	if (!sc)
		return -ENOMEM;
	sc->try = try;
	sc->first = first;
	sc->mod = mod;
	sprint_symbol_no_offset(sc->name, fn);
	sc->nlen = strcspn(sc->name, " ");
	for (r = first; r < try->nr_ranges && !ret; r++)
		ret = kpatch_scan_range(sc, try->ranges[r].start,
					try->ranges[r].end);
	kfree(sc);
	return ret;
}

/* Scan [@start, @end) for jumps, and the module's tables there. */
static int kpatch_scan_range(struct kpatch_scan *sc, unsigned long start,
			     unsigned long end)
{
	unsigned long a, n;
	int ret = 0;
	s32 rel;
	u8 p[6];

	for (a = start; a < end && !ret; a++) {
		/* each byte read once: what a kprobe changes meanwhile too */
		n = min(end - a, sizeof(p));
		memcpy(p, (const u8 *)a, n);
		if (n >= 2 && (p[0] == 0xeb || (p[0] & 0xf0) == 0x70 ||
			       (p[0] & 0xfc) == 0xe0 || p[0] == INT3_INSN_OPCODE))
			ret = kpatch_scan_target(sc, a + 2 + (s8)p[1]);
		if (n >= 5 && !ret && (p[0] == JMP32_INSN_OPCODE ||
				       p[0] == INT3_INSN_OPCODE)) {
			memcpy(&rel, p + 1, sizeof(rel));
			ret = kpatch_scan_target(sc, a + 5 + rel);
		}
		if (n >= 6 && !ret && (p[0] == 0x0f || p[0] == INT3_INSN_OPCODE) &&
		    (p[1] & 0xf0) == 0x80) {
			memcpy(&rel, p + 2, sizeof(rel));
			ret = kpatch_scan_target(sc, a + 6 + rel);
		}
	}
	return ret ?: kpatch_scan_tables(sc, start, end);
}

/*
 * A jump of f or of its pieces may lead to @target: if that is in a piece
 * of f not yet found, add it.
 */
static int kpatch_scan_target(struct kpatch_scan *sc, unsigned long target)
{
	struct kpatch_try *try = sc->try;
	unsigned long start, size;
	unsigned int i;
	char *mod;

	for (i = sc->first; i < try->nr_ranges; i++)
		if (target - try->ranges[i].start <
		    try->ranges[i].end - try->ranges[i].start)
			return 0;	/* f, or a piece scanned or to scan */
	for (i = 0; i < KPATCH_NOT_PIECES; i++)
		if (target - sc->not[i].start < sc->not[i].end - sc->not[i].start)
			return 0;
	if (!(sc->mod ? kpatch_module_text(sc->mod, target) :
			kpatch_kernel_text(target)) ||
	    !kpatch_symbol(target, sc->sym, &start, &size, &mod) ||
	    !mod != !sc->mod)
		return 0;	/* out of f's text: no piece */
	if (!strncmp(sc->sym, sc->name, sc->nlen) &&
	    (str_has_prefix(sc->sym + sc->nlen, ".cold") ||
	     str_has_prefix(sc->sym + sc->nlen, ".part.")))
		return kpatch_add_range(try, start, size);
	sc->not[sc->next].start = start;
	sc->not[sc->next].end = start + size;
	sc->next = (sc->next + 1) % KPATCH_NOT_PIECES;
	return 0;
}

/* The targets of @sc's module's static branches and fixups in [@start, @end). */
static int kpatch_scan_tables(struct kpatch_scan *sc, unsigned long start,
			      unsigned long end)
{
	const struct exception_table_entry *x;
	struct module *mod = sc->mod;
	unsigned long addr;
	unsigned int i;
	int ret = 0;

	if (!mod)
		return 0;
#ifdef CONFIG_JUMP_LABEL
	for (i = 0; i < mod->num_jump_entries && !ret; i++) {
		struct jump_entry *j = &mod->jump_entries[i];

		if (jump_entry_code(j) - start < end - start)
			ret = kpatch_scan_target(sc, jump_entry_target(j));
	}
#endif
	for (i = 0; i < mod->num_exentries && !ret; i++) {
		x = &mod->extable[i];
		addr = (unsigned long)&x->insn + x->insn;
		if (addr - start < end - start)
			ret = kpatch_scan_target(sc, (unsigned long)&x->fixup +
						     x->fixup);
	}
	return ret;
}

/* ------------------------------------------------------------------------
 * Layer: ways into a module
 *
 * What it adds: a redirect into a module (a new function there whose old
 * function is elsewhere) leads tasks from outside into the module's code,
 * and not only into the new function: by a jump (a sibling call, `return
 * helper(x)`) a task goes on into any of its code with no frame of the new
 * function left on its stack.  Once no patch redirects into the module,
 * nothing of kpatch keeps it loaded.  So the update that removes the last
 * redirect into a module checks the module's whole text: no task may have
 * a return address anywhere in it, but the module's own kernel threads
 * (kpatch_in_whole()).
 * Without it: a task led in could be left in a module that nothing keeps
 * loaded any more.  Price: about 60 lines; nothing per call; such an
 * update is refused while any other task is in the module: a kworker in
 * one of its work items, another module's thread in its exports, a task
 * asleep uninterruptibly in it (Documentation.txt, "Limitations").
 */

static bool kpatch_redirected_after(const struct kpatch_try *try,
				    const struct module *mod);

/*
 * The module that @e redirects calls into from outside: that of its new
 * function, if it is in a module and its old function is not in the same
 * one; else NULL.  A module that patches itself sends no task in: its
 * callers are its own, and its own code decides when it may go.
 */
static struct module *kpatch_way_in(const struct kpatch_entry *e)
{
	return e->new_mod == e->old_mod ? NULL : e->new_mod;
}

/* Each module that @try takes the last redirect into away from: checked whole. */
static __cold int kpatch_add_whole(struct kpatch_try *try)
{
	struct module *mod;
	unsigned int i, k;

	for (i = 0; i < try->first_add; i++) {
		mod = kpatch_way_in(try->touched[i]);
		for (k = 0; mod && k < try->nr_whole; k++)
			if (try->whole[k] == mod)
				mod = NULL;
		if (mod && !kpatch_redirected_after(try, mod))
			try->whole[try->nr_whole++] = mod;
	}
	return 0;
}

/* Does a patch that is enabled after @try redirect calls into @mod? */
static bool kpatch_redirected_after(const struct kpatch_try *try,
				    const struct module *mod)
{
	const struct kpatch_request *req = try->req;
	struct kpatch_patch *p;
	unsigned int i;

	list_for_each_entry(p, &kpatch_patches, list) {
		if (p == req->remove || req->replace)
			continue;
		for (i = 0; i < p->nr; i++)
			if (kpatch_way_in(&p->entries[i]) == mod)
				return true;
	}
	for (i = 0; req->add && i < req->add->nr; i++)
		if (kpatch_way_in(&req->add->entries[i]) == mod)
			return true;
	return false;
}

/*
 * Is @addr in a module checked whole, and @task not a kernel thread of
 * that module?  A kernel thread whose function is in the module runs the
 * module's code until the module's exit stops it, and kthread_stop()
 * returns only once the thread has left its function and reached
 * exit_mm() in do_exit(): whatever the thread runs inside the module,
 * however it got there, ends before the module can be freed.  From
 * do_exit() on (PF_EXITING) that no longer holds, and such a thread counts
 * like any task.  kthread_func() reads only the task.
 */
static bool kpatch_in_whole(const struct kpatch_try *try,
			    struct task_struct *task, unsigned long addr)
{
	struct module *mod;
	unsigned int i;

	for (i = 0; i < try->nr_whole; i++) {
		mod = try->whole[i];
		if (!within_module(addr, mod))
			continue;
		if (!(task->flags & PF_EXITING) && (task->flags & PF_KTHREAD) &&
		    within_module_core((unsigned long)kthread_func(task), mod))
			continue;
		return true;
	}
	return false;
}

/* ------------------------------------------------------------------------
 * Layer: hooks
 *
 * What it adds: each part of an update (see struct kpatch_try) runs the
 * hooks of its direction: a patch added runs its patch hooks, a patch
 * removed its unpatch hooks.  Within one try of an update:
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
 * Hooks that may sleep (pre, post, cancel) run only from process context,
 * with kpatch_mutex held and nothing else.  Stop and undo hooks run in the
 * stop_machine() callback with interrupts off on every CPU.  A hook's
 * module is pinned for the whole request (kpatch_patch_new()) and every
 * hook returns before the try ends, so no hook runs after its module
 * could go.  Hooks come from kpatch_register() only.
 * Without it: a patch changes code only; data that the new functions read
 * differently has nobody to convert it.  Price: about 150 lines; nothing
 * per call, nor for an update whose patches have no hook (try->hooks).
 */

/* The names of the hooks, in the patches file and the log. */
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

static int kpatch_part_hook(struct kpatch_try *try, unsigned int i,
			    enum kpatch_hook stage);
static void kpatch_cancel_hook(struct kpatch_try *try, unsigned int i);

/* Run the pre hooks of @try; if one vetoes, cancel those that ran. */
static int kpatch_pre_hooks(struct kpatch_try *try)
{
	unsigned int i;
	int ret;

	might_sleep();
	for (i = 0; i < try->nr_parts; i++) {
		ret = kpatch_part_hook(try, i, KPATCH_PRE_PATCH);
		if (ret) {
			pr_err("%s '%s' refused: %s hook of '%s' returned %d\n",
			       try->req->verb, kpatch_req_name(try->req),
			       kpatch_hook_names[try->refused.hook],
			       try->refused.hook_patch->kpmod->name,
			       try->refused.hook_ret);
			while (i--)
				kpatch_cancel_hook(try, i);
			return ret;
		}
	}
	return 0;
}

/*
 * Run the hook of part @i of @try for @stage, a patch hook
 * (KPATCH_PRE_PATCH .. KPATCH_POST_PATCH) that stands for the same hook of
 * the part's direction.  A hook's return becomes 0 or a negative errno.
 */
static int kpatch_part_hook(struct kpatch_try *try, unsigned int i,
			    enum kpatch_hook stage)
{
	struct kpatch_patch *patch = try->parts[i];
	enum kpatch_hook h = stage;
	kpatch_hook_t hook;
	int ret;

	if (patch != try->req->add)
		h += KPATCH_PRE_UNPATCH;
	hook = patch->kpmod->hooks[h];
	if (!hook)
		return 0;
	ret = hook(patch->kpmod);
	if (!ret || stage == KPATCH_UNDO_PATCH || stage == KPATCH_POST_PATCH)
		return 0;
	try->refused.hook_patch = patch;
	try->refused.hook = h;
	try->refused.hook_ret = ret;
	if (ret > 0 || ret < -MAX_ERRNO)
		return -EINVAL;
	/* Kernel-internal errnos must not reach write(2) or insmod. */
	if (ret == -ERESTARTSYS || ret == -ERESTARTNOINTR ||
	    ret == -ERESTARTNOHAND || ret == -ERESTART_RESTARTBLOCK)
		return -EINTR;
	return ret <= -ERESTARTSYS ? -EINVAL : ret;
}

/* The hook that ends what the pre hook of part @i began, see above. */
static void kpatch_cancel_hook(struct kpatch_try *try, unsigned int i)
{
	struct kpatch_module *kpmod = try->parts[i]->kpmod;
	enum kpatch_hook h = try->parts[i] == try->req->add ?
			     KPATCH_POST_UNPATCH : KPATCH_POST_PATCH;

	if (kpmod->hooks[h])
		kpmod->hooks[h](kpmod);
}

/*
 * The cancel hooks of every part of @try, last first, after a run that
 * failed (a stop hook's refusal logged first).
 */
static void kpatch_cancel_hooks(struct kpatch_try *try)
{
	const struct kpatch_refused *r = &try->refused;
	unsigned int i;

	if (!try->hooks)
		return;
	if (r->why == KPATCH_HOOK)
		pr_err("%s '%s' refused: %s hook of '%s' failed (%d); rolled back\n",
		       try->req->verb, kpatch_req_name(try->req),
		       kpatch_hook_names[r->hook], r->hook_patch->kpmod->name,
		       r->hook_ret);
	for (i = try->nr_parts; i--; )
		kpatch_cancel_hook(try, i);
}

/*
 * From the callback: run the stop hooks, or with @undo the undo hooks of
 * the first @n stop hooks, last first.  A stop hook that fails has the
 * hooks before it undone, and its errno is returned; it must have changed
 * nothing itself.  kpatch_hook_cpu tells a call of a changed function from
 * a hook apart from one from an NMI; only this CPU writes it.
 */
static int kpatch_stop_hooks(struct kpatch_try *try, bool undo, unsigned int n)
{
	unsigned int i;
	int ret = 0;

	WRITE_ONCE(kpatch_hook_cpu, smp_processor_id());
	for (i = 0; !undo && i < try->nr_parts && !ret; i++)
		ret = kpatch_part_hook(try, i, KPATCH_STOP_PATCH);
	if (ret) {
		try->refused.why = KPATCH_HOOK;
		n = i - 1;
	}
	if (undo || ret)
		while (n--)
			kpatch_part_hook(try, n, KPATCH_UNDO_PATCH);
	WRITE_ONCE(kpatch_hook_cpu, -1);
	return ret;
}

/*
 * Resolve hook @h of @patch and pin its module.  A hook runs from kpatch
 * at times its module does not choose, so it must be in a module that
 * kpatch can pin: not vmlinux, and not init text.  On a kernel with
 * Indirect Branch Tracking an indirect call must land on ENDBR, and a
 * function whose address nothing takes has none (or a sealed one).
 */
static __cold int kpatch_resolve_hook(struct kpatch_patch *patch, int h)
{
	unsigned long addr = (unsigned long)patch->kpmod->hooks[h], size;
	const char *name = patch->kpmod->name;
	struct module **pin = &patch->pins[h];
	char what[32];
	int ret;

	if (!addr)
		return 0;
	snprintf(what, sizeof(what), "%s hook", kpatch_hook_names[h]);
	ret = kpatch_resolve(name, what, addr, &size, patch->kpmod->mod, pin);
	if (ret)
		return ret;
	if (!*pin) {
		pr_err("%s: %s %pS is not in a module\n", name, what,
		       (void *)addr);
		return -EINVAL;
	}
	if (IS_ENABLED(CONFIG_X86_KERNEL_IBT) && !kpatch_endbr(addr, false)) {
		pr_err("%s: %s %pS does not start with ENDBR: it cannot be called indirectly\n",
		       name, what, (void *)addr);
		return -EINVAL;
	}
	return 0;
}

/* ------------------------------------------------------------------------
 * The run: the pre-walk, stop_machine() and the stack check
 */

/* An exiting task went unrecorded: see "Layer: exiting tasks". */
static bool kpatch_exiting_lost;

/*
 * Run a prepared try: the pre-walk, stop_machine() and the grace period.
 * Returns 0, or -EBUSY with try->refused saying why, or -ENOMEM.
 */
static int kpatch_run(struct kpatch_try *try)
{
	int ret, old;

	memset(&try->refused, 0, sizeof(try->refused));
	atomic_set(&try->cpus_in, 0);
	atomic_set(&try->cpus_seen, 0);
	if (kpatch_checks(try) && READ_ONCE(kpatch_exiting_lost)) {
		pr_err("%s '%s' refused: out of memory recording an exiting task earlier, kpatch cannot check every stack any more\n",
		       try->req->verb, kpatch_req_name(try->req));
		return -ENOMEM;
	}
	ret = kpatch_prewalk(try);
	if (ret)
		return ret;

	kpatch_set_op(try, true);
	WRITE_ONCE(kpatch_failed_ip, 0);
	WRITE_ONCE(kpatch_failed_hook, false);
	ret = stop_machine(kpatch_update_cb, try, cpu_online_mask);

	/* The callback always ends in SUCCESS or FAILURE. */
	old = atomic_xchg(&kpatch_state, KPATCH_STATE_IDLE);
	WARN_ON_ONCE(old != KPATCH_STATE_SUCCESS && old != KPATCH_STATE_FAILURE);

	/*
	 * Callers that read a state other than IDLE may still be looking at
	 * entry->op, or at an entry just unlinked.  Only NMIs can be such
	 * callers now (stop_machine() excluded everybody else), and an NMI
	 * is an RCU read-side section.
	 */
	synchronize_rcu();
	kpatch_set_op(try, false);
	kpatch_test_point(KPATCH_TEST_DONE);
	kpatch_forget(try);
	return ret;
}

/* Is there any code that @try's stack check looks for? */
static bool kpatch_checks(const struct kpatch_try *try)
{
	return try->nr_ranges || try->nr_whole;
}

/* ------------------------------------------------------------------------
 * Layer: the pre-walk
 *
 * What it adds: most of the stack check, done before stop_machine() so
 * that the CPUs stop only for the tasks that ran since.  Correctness never
 * depends on it: a task it did not remember is walked by the callback, and
 * with nothing remembered (no memory for the cache, say) the callback
 * walks every task.  Without it the window is the walk of every task
 * (README.md, Benchmarks).  Price: about 150 lines; nothing per call; per
 * update, memory for one record per task while it runs.
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
 *    nor goes away.  get_wchan() walks other tasks' stacks under the same
 *    rule; the test of on_cpu covers a task that has dequeued itself but
 *    is still switching out.
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
 *
 * The callback sees the counts written on other CPUs: a switch-out on a
 * CPU comes before its stopper starts, and the stop_machine() rendezvous
 * (acknowledged with fully ordered atomics) comes before the callback.
 */

static int kpatch_prewalk_task(struct task_struct *task,
			       struct kpatch_try *try);
static int kpatch_cmp_seen(const void *a, const void *b);

/*
 * Pre-walk every task (see above).  Returns -EBUSY if a stack refuses the
 * update, unless the try lists the tasks in its way (to move them): then
 * the callback walks such a task again, as it walks every task not cached,
 * and lists it.
 */
static int kpatch_prewalk(struct kpatch_try *try)
{
	struct task_struct *g, *t;
	unsigned int i, n = 0;
	int ret = 0;

	if (!kpatch_checks(try))
		return 0;

	/* Room for the tasks there are now and some that may come. */
	rcu_read_lock();
	for_each_process_thread(g, t)
		n++;
	rcu_read_unlock();
	n += n / 16 + 16;
	try->seen = kvmalloc_array(n, sizeof(*try->seen), GFP_KERNEL);
	try->seen_by_task = kvmalloc_array(n, sizeof(*try->seen_by_task),
					   GFP_KERNEL);
	if (!try->seen || !try->seen_by_task) {
		kpatch_forget(try);
		return 0;
	}
	try->max_seen = n;

	/* for_each_process_thread() is two loops: leave with goto. */
	rcu_read_lock();
	for_each_process_thread(g, t) {
		/* one in the way: listed by the callback, which walks it */
		ret = kpatch_prewalk_task(t, try);
		if (ret && !try->movers)
			goto out;
		ret = 0;
	}
out:
	rcu_read_unlock();
	if (ret) {
		kpatch_forget(try);
		return ret;
	}

	for (i = 0; i < try->nr_seen; i++)
		try->seen_by_task[i] = &try->seen[i];
	sort(try->seen_by_task, try->nr_seen, sizeof(*try->seen_by_task),
	     kpatch_cmp_seen, NULL);
	return 0;
}

/* Drop what the pre-walk of one run learned. */
static void kpatch_forget(struct kpatch_try *try)
{
	kvfree(try->seen);
	kvfree(try->seen_by_task);
	try->seen = NULL;
	try->seen_by_task = NULL;
	try->nr_seen = 0;
	try->max_seen = 0;
}

/*
 * Pre-walk @task if it can be kept from running meanwhile, and cache it if
 * its stack is clean.  Returns -EBUSY when the stack refuses the update;
 * a task that cannot be walked now is left to the callback.
 */
static int kpatch_prewalk_task(struct task_struct *task,
			       struct kpatch_try *try)
{
	struct kpatch_seen *s;
	unsigned long flags;
	unsigned int state;
	int ret = 0;

	if (task == current || try->nr_seen == try->max_seen)
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

	ret = kpatch_walk_stack(task, try);
	if (!ret) {
		s = &try->seen[try->nr_seen++];
		s->task = task;
		s->switches = task->nvcsw + task->nivcsw;
		s->start_time = task->start_time;
		s->pid = task->pid;
	}
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

/* Is @task the task of @s, not switched out since its pre-walk? */
static __always_inline bool kpatch_seen_unchanged(const struct kpatch_seen *s,
						  const struct task_struct *task)
{
	return s->switches == task->nvcsw + task->nivcsw &&
	       s->pid == task->pid && s->start_time == task->start_time;
}

/*
 * The cache entry of @task, or NULL, when it is not the next one in task
 * list order (see kpatch_check_stacks()).  Kept out of line: the key on
 * the stack would cost every task of the callback's loop.
 */
static noinline struct kpatch_seen *
kpatch_seen_search(const struct kpatch_try *try, struct task_struct *task)
{
	struct kpatch_seen key = { .task = task }, *keyp = &key, **found;

	found = bsearch(&keyp, try->seen_by_task, try->nr_seen,
			sizeof(*try->seen_by_task), kpatch_cmp_seen);
	return found ? *found : NULL;
}

/* ------------------------------------------------------------------------
 * The stack check
 */

static void kpatch_refuse(struct kpatch_try *try, enum kpatch_refusal why,
			  struct task_struct *task, unsigned long addr);
static bool kpatch_in_ranges(const struct kpatch_try *try, unsigned long addr);

/*
 * Walk the kernel stack of @task, which must not run meanwhile, and look
 * each return address up in the ranges.  The walk follows the
 * reliable-stacktrace rules of the x86 arch code: a user-mode register
 * frame ends a task's kernel stack; any unwinder error, or a return
 * address outside known text, makes the stack unreliable.
 */
static int kpatch_walk_stack(struct task_struct *task, struct kpatch_try *try)
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
			if (IS_ENABLED(CONFIG_FRAME_POINTER))
				break;
		}
		addr = unwind_get_return_address(&state);
		if (!addr)
			break;
		if (kpatch_in_ranges(try, addr) ||
		    (try->nr_whole && kpatch_in_whole(try, task, addr))) {
			kpatch_refuse(try, KPATCH_BUSY, task, addr);
			return -EBUSY;
		}
	}
	if (unwind_done(&state) && !unwind_error(&state))
		return 0;
	kpatch_refuse(try, KPATCH_UNRELIABLE, task, 0);
	return -EBUSY;
}

static bool kpatch_in_ranges(const struct kpatch_try *try, unsigned long addr)
{
	unsigned int lo = 0, hi = try->nr_ranges, mid;

	while (lo < hi) {
		mid = lo + (hi - lo) / 2;
		if (addr < try->ranges[mid].start)
			hi = mid;
		else if (addr >= try->ranges[mid].end)
			lo = mid + 1;
		else
			return true;
	}
	return false;
}

static __cold void kpatch_refuse(struct kpatch_try *try,
				 enum kpatch_refusal why,
				 struct task_struct *task, unsigned long addr)
{
	try->refused.why = why;
	try->refused.addr = addr;
	try->refused.pid = task->pid;
	strscpy(try->refused.comm, task->comm, sizeof(try->refused.comm));
}

/* The role of each entry of @try while it runs, or none. */
static void kpatch_set_op(struct kpatch_try *try, bool running)
{
	unsigned int i;

	/* callers ignore entry->op while the state is IDLE */
	WARN_ON_ONCE(atomic_read(&kpatch_state) != KPATCH_STATE_IDLE);
	for (i = 0; i < try->nr_touched; i++)
		try->touched[i]->op = !running ? KPATCH_OP_NONE :
				      i >= try->first_add ? KPATCH_OP_PATCH :
							    KPATCH_OP_UNPATCH;
}

static int kpatch_update_answer(struct kpatch_try *try);

/*
 * The stop_machine() callback: the only place where entries are published
 * and taken out, and where sites change target during an update.
 * Interrupts are off on every CPU; who can still call a patched function
 * meanwhile is listed at kpatch_state.
 *
 * Why a caller never mixes versions, though the fast path (a site's
 * target) looks at no state: only the sites of @try change version, and
 * the callback
 *  1. sets the target of each of its sites to KPATCH_TARGET_SLOW, so that
 *     from then on their calls go through the state machine, and then
 *     leaves IDLE;
 *  2. waits until the stopper thread of every other CPU has seen that.  A
 *     caller that read an old target before step 1 either has the old
 *     function's fentry return address on its stack while it is preempted
 *     (which the stack check refuses), or runs with preemption or
 *     interrupts off, or in an NMI, and then holds up its CPU's stopper
 *     until it is done;
 *  3. checks the stacks, runs the stop hooks, changes the entries, then
 *     decides SUCCESS or FAILURE (or loses that race to a caller, which
 *     sets FAILURE; the undo hooks then roll the stop hooks back);
 *  4. writes the final targets.  A caller that reads one between step 3
 *     and the end gets the version that the state, which it would read on
 *     the slow path, also gives.
 * So every call after step 2 sees one version: the old one until the state
 * is decided, the decided one after, and the state never goes back from
 * SUCCESS or FAILURE while the callback runs.  The data the stop hooks
 * convert follows the same rule: no new function runs before SUCCESS,
 * which comes after the last hook, and an old function that runs after
 * the first hook began makes the update fail and be undone.
 */
static int kpatch_update_cb(void *data)
{
	struct kpatch_try *try = data;
	unsigned int i;
	int ret;

	/* stop_machine() runs this on every online CPU: the first updates. */
	if (atomic_inc_return(&try->cpus_in) != 1)
		return kpatch_update_answer(try);
	kpatch_test_point(KPATCH_TEST_ENTER);

	/*
	 * Step 1.  entry->op was written before stop_machine(), whose
	 * rendezvous orders it before these stores.  The marks go before
	 * the state (the release).  No entry changes before step 2 has seen
	 * every other CPU answer after it read UPDATING, so no barrier is
	 * needed between the state and the entries.
	 */
	for (i = 0; i < try->nr_sites; i++)
		WRITE_ONCE(try->sites[i]->target, KPATCH_TARGET_SLOW);
	atomic_set_release(&kpatch_state, KPATCH_STATE_UPDATING);

	/*
	 * Step 2.  The number of online CPUs cannot change inside
	 * stop_machine().  The acquire pairs with the other CPUs' answers.
	 */
	while (atomic_read_acquire(&try->cpus_seen) < num_online_cpus() - 1)
		cpu_relax();
	kpatch_test_point(KPATCH_TEST_UPDATING);

	if (kpatch_check_stacks(try)) {
		kpatch_state_finish(KPATCH_STATE_FAILURE, 0);
		ret = -EBUSY;
	} else {
		ret = kpatch_update_publish(try);
	}
	kpatch_final_targets(try);	/* step 4 */
	return ret;
}

/*
 * The other CPUs in kpatch_update_cb(): wait until the state has left IDLE
 * and say so.  The acquire pairs with the release of UPDATING there: a CPU
 * that answers sees every mark.  atomic_inc_return() is fully ordered:
 * whatever this CPU ran before (an NMI that returned into this loop
 * included) happens before its answer.
 */
static int kpatch_update_answer(struct kpatch_try *try)
{
	while (atomic_read_acquire(&kpatch_state) == KPATCH_STATE_IDLE)
		cpu_relax();
	atomic_inc_return(&try->cpus_seen);
	return 0;
}

static int kpatch_listed(struct kpatch_try *try);

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
static int kpatch_check_stacks(struct kpatch_try *try)
{
	struct kpatch_seen *next = try->seen, *end = next + try->nr_seen, *s;
	struct task_struct *g, *t;
	int ret;

	if (!kpatch_checks(try))
		return 0;

	/* Running now, or idle: whatever their switch counts say. */
	ret = kpatch_check_task(current, try);
	if (ret && kpatch_stop_at(try, current))
		return ret;
	ret = kpatch_check_task(&init_task, try);
	if (ret && kpatch_stop_at(try, &init_task))
		return ret;

	/*
	 * The loop runs once per task with every CPU stopped: keep it short.
	 * The pre-walk went through the same list in the same order, so a
	 * task's entry, if it has one, is almost always @next; tasks created
	 * or gone since make it search.
	 */
	rcu_read_lock();
	for_each_process_thread(g, t) {
		s = likely(next < end && next->task == t) ? next :
		    kpatch_seen_search(try, t);
		if (s)
			next = s + 1;
		if (likely(s) && kpatch_seen_unchanged(s, t))
			continue;
		ret = kpatch_check_task(t, try);
		if (ret && kpatch_stop_at(try, t))
			goto out;
		ret = 0;
	}
out:
	rcu_read_unlock();
	return ret ?: kpatch_check_exiting(try) ?: kpatch_listed(try);
}

/*
 * Check one task's stack from the stop_machine() callback.  The task is not
 * running (see below for the exceptions), so its stack cannot change.
 */
static int kpatch_check_task(struct task_struct *task, struct kpatch_try *try)
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
	return kpatch_walk_stack(task, try);
}

/* ------------------------------------------------------------------------
 * Layer: exiting tasks
 *
 * What it adds: a task leaves the task list in exit_notify() -- at once if
 * it is autoreaped, as kernel threads are, else when its parent reaps it
 * -- but then goes on running the tail of do_exit() until its last
 * switch-out, and may sleep or be preempted there, in any function that
 * tail calls.  for_each_process_thread() does not find it any more.  So
 * kpatch keeps a set of its own: every task from its sched_process_exit
 * tracepoint, which do_exit() passes before exit_notify(), until its
 * sched_process_free tracepoint, which comes an RCU grace period after the
 * task's last switch-out; and, at load, every task that is exiting already
 * and still on the task list (kpatch_exiting_start()).  The stop_machine()
 * callback walks the tasks of the set that the pre-walk did not see clean;
 * one that is dead has no stack left and costs a test.
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
 *
 * Without it: a task in the tail of do_exit() inside a changed function
 * (an exit handler, say) goes unchecked.  Price: about 230 lines and 64
 * records (512 on PREEMPT_RT) kept; nothing per call of a patched
 * function; per exit of a task two tracepoint probes.
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

static void kpatch_exiting_refill(struct work_struct *work);
static DECLARE_WORK(kpatch_exiting_work, kpatch_exiting_refill);

/*
 * From the stop_machine() callback: walk the exiting tasks that the
 * pre-walk did not find clean (it walked those still on the task list).
 */
static int kpatch_check_exiting(struct kpatch_try *try)
{
	struct kpatch_exiting *e;
	struct kpatch_seen *s;
	int bkt, ret = 0;

	raw_spin_lock(&kpatch_exiting_lock);
	if (kpatch_exiting_lost) {	/* since kpatch_run() looked */
		try->refused.why = KPATCH_LOST;
		ret = -EBUSY;
		goto out;
	}
	hash_for_each(kpatch_exiting_hash, bkt, e, node) {
		/* still on the task list: walked there */
		if (pid_alive(e->task))
			continue;
		s = kpatch_seen_search(try, e->task);
		if (s && kpatch_seen_unchanged(s, e->task))
			continue;
		ret = kpatch_check_task(e->task, try);
		if (ret && kpatch_stop_at(try, e->task))
			break;
		ret = 0;
	}
out:
	raw_spin_unlock(&kpatch_exiting_lock);
	return ret;
}

/* The record of @task, or NULL. */
static struct kpatch_exiting *kpatch_exiting_find(struct task_struct *task)
{
	struct kpatch_exiting *e;

	lockdep_assert_held(&kpatch_exiting_lock);
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

/* The tracepoints of this layer, registered from load to unload. */
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

static void kpatch_exiting_stop(int n);

/*
 * Follow exiting tasks: records, the probes, then the tasks that are
 * exiting already (PF_EXITING, set before sched_process_exit) and still on
 * the task list, which may have passed the tracepoint before the probe was
 * there.  A task found both ways is recorded once.  Those found here stay
 * in the set until their sched_process_free, which cannot come before the
 * RCU read section that found them on the list ends.  A task that has left
 * the task list before kpatch was loaded is not followed; see
 * Documentation.txt.
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

/* ------------------------------------------------------------------------
 * The callback's last steps
 */

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
 * Step 3 of kpatch_update_cb().  The stop hooks convert the data, then the
 * new entries are published (hlist_add_head_rcu() puts them first).
 * Nobody runs a new function before the state is SUCCESS (slow path) or a
 * final target is written (fast path, step 4), and both come after the
 * hooks' stores: SUCCESS after the smp_wmb() below, a target by its
 * release.  A caller of a changed function meanwhile (an NMI, another
 * CPU's stop_machine() loop or a stop hook: see kpatch_state) runs the
 * old function, maybe on data half converted; the first such call makes
 * the update fail, and the undo hooks roll the data back before any CPU
 * is released.
 */
static int kpatch_update_publish(struct kpatch_try *try)
{
	unsigned int i;
	int state, ret;

	ret = try->hooks ? kpatch_stop_hooks(try, false, 0) : 0;
	if (ret) {
		kpatch_state_finish(KPATCH_STATE_FAILURE, 0);
		return ret;
	}
	for (i = try->first_add; i < try->nr_touched; i++)
		hlist_add_head_rcu(&try->touched[i]->node,
				   &try->touched[i]->site->entries);
	smp_wmb();	/* hooks and entries before SUCCESS: kpatch_redirect_slow() */
	kpatch_test_point(KPATCH_TEST_PUBLISHED);

	state = kpatch_state_finish(KPATCH_STATE_SUCCESS, 0);
	if (state == KPATCH_STATE_FAILURE) {
		/* A changed function ran meanwhile and saw the old version. */
		for (i = try->first_add; i < try->nr_touched; i++)
			hlist_del_init_rcu(&try->touched[i]->node);
		if (try->hooks)
			kpatch_stop_hooks(try, true, try->nr_parts);
		try->refused.why = KPATCH_RAN;
		return -EBUSY;
	}
	WARN_ON_ONCE(state != KPATCH_STATE_SUCCESS);

	/* SUCCESS makes callers skip these already; now unlink them. */
	for (i = 0; i < try->first_add; i++)
		hlist_del_init_rcu(&try->touched[i]->node);
	return 0;
}

/*
 * Step 4 of kpatch_update_cb(), and the end of a gate: the targets of
 * @try's sites once its entries are final.  Each is a release, the pair
 * of the acquire in kpatch_ftrace_handler(): a call that reads a final
 * target also sees the entries and the data of the stop or undo hooks as
 * this CPU left them.
 */
static void kpatch_final_targets(struct kpatch_try *try)
{
	struct kpatch_entry *top;
	unsigned int i;

	for (i = 0; i < try->nr_sites; i++) {
		top = kpatch_top(try->sites[i]);
		smp_store_release(&try->sites[i]->target,
				  top ? top->new_addr : 0);
	}
}

/* ------------------------------------------------------------------------
 * After the run: the sites released, the update committed
 */

/*
 * After the grace period that ends a try, done or undone: each site of
 * @try left with no entry is released.
 */
static void kpatch_sites_release(struct kpatch_try *try)
{
	unsigned int i;

	for (i = 0; i < try->nr_sites; i++)
		if (hlist_empty(&try->sites[i]->entries))
			kpatch_site_free(try->sites[i]);
}

/*
 * Unhook and free @site, which has no entry.  unregister_ftrace_function()
 * returns once no CPU is in its handler and no task in its trampoline: no
 * call holds the site any more.  If ftrace cannot (it has shut down after
 * an error of its own), the site stays, hooked, and with it its pins.
 */
static void kpatch_site_free(struct kpatch_site *site)
{
	lockdep_assert_held(&kpatch_mutex);
	if (WARN_ON_ONCE(!hlist_empty(&site->entries)))
		return;
	hash_del(&site->node);
	if (WARN_ON_ONCE(unregister_ftrace_function(&site->ops)))
		return;
	ftrace_free_filter(&site->ops);
	module_put(site->mod);
	module_put(THIS_MODULE);
	kfree(site);
}

/*
 * @try took effect: the patches it removed out of the list, the one it
 * adds in, the post hooks, then the removed patches' pins dropped -- only
 * now may the modules of the hooks that ran go -- and their records
 * freed.  The sites are released already.
 */
static __cold void kpatch_commit(struct kpatch_try *try)
{
	struct kpatch_patch *add = try->req->add, *p;
	unsigned int i;

	for (i = 0; i < try->nr_parts; i++) {
		p = try->parts[i];
		if (p == add)
			continue;
		list_del_init(&p->list);
		kpatch_kobj_remove(&p->kobj);
		p->kpmod->enabled = false;
		pr_notice("patch '%s' removed\n", p->kpmod->name);
	}
	if (add) {
		list_add_tail(&add->list, &kpatch_patches);
		add->kpmod->enabled = true;
		pr_notice_once("tainting kernel with TAINT_LIVEPATCH\n");
		add_taint(TAINT_LIVEPATCH, LOCKDEP_STILL_OK);
		pr_notice("patch '%s' enabled (%d function%s)\n",
			  add->kpmod->name, add->nr, add->nr == 1 ? "" : "s");
	}
	for (i = 0; i < try->nr_parts && try->hooks; i++)
		kpatch_part_hook(try, i, KPATCH_POST_PATCH);
	for (i = 0; i < try->nr_parts; i++)
		if (try->parts[i] != add)
			kpatch_patch_free(try->parts[i]);
}

/*
 * Remove a patch's directory, /sys/kernel/kpatch/patches/NAME, now, and
 * drop kpatch's reference: another reference (a directory a patch module
 * made in it, a release the kernel delays) must not keep the name taken
 * from the next patch of that name.
 */
static void kpatch_kobj_remove(struct kobject **kobj)
{
	kobject_del(*kobj);
	kobject_put(*kobj);
	*kobj = NULL;
}

/* Free what kpatch_collect() and kpatch_build_ranges() allocated. */
static void kpatch_uncollect(struct kpatch_try *try)
{
	kfree(try->whole);
	kfree(try->ranges);
	kfree(try->sites);
	kfree(try->touched);
	kfree(try->parts);
}

/* ------------------------------------------------------------------------
 * A refused try: tried again later
 */

static void kpatch_report(const struct kpatch_request *req,
			  const struct kpatch_refused *r, unsigned int n,
			  unsigned int tries, bool last, unsigned int delay);

/*
 * Try number @n of @req failed with @ret, for @r.  If the stack check
 * refused it, or ftrace found the function busy (KPATCH_AGAIN), log the
 * culprit and, unless that was the last try, a signal is pending or the
 * refusal can only repeat, sleep before the next one, kpatch_mutex held.
 * Return whether to try again.
 */
static __cold bool kpatch_retry(const struct kpatch_request *req,
				const struct kpatch_refused *r, int ret,
				unsigned int n)
{
	unsigned int delay = min(READ_ONCE(kpatch_retry_delay_ms),
				 KPATCH_RETRY_DELAY_MS_MAX);
	unsigned int tries = 1 + min3(READ_ONCE(kpatch_retries),
				      KPATCH_RETRIES_MAX,
				      KPATCH_RETRY_TOTAL_MS / max(delay, 1U));
	bool last;

	lockdep_assert_held(&kpatch_mutex);
	if ((ret != -EBUSY && ret != -EAGAIN) || r->why == KPATCH_OK ||
	    r->why == KPATCH_HOOK)
		return false;	/* not busy: ftrace refused, a hook, say */
	/*
	 * A real signal ends the retries; TIF_NOTIFY_SIGNAL alone (a
	 * task_work of somebody's) does not, nor the sleep.
	 */
	last = n >= tries || task_sigpending(current) ||
	       fatal_signal_pending(current) ||
	       (r->why == KPATCH_RAN && !READ_ONCE(kpatch_failed_nmi));
	kpatch_report(req, r, n, tries, last, delay);
	if (last)
		return false;
	/*
	 * Killable, not freezable: a write to the control file holds its
	 * file system's freeze protection (file_start_write()), which a
	 * frozen task must not hold.
	 */
	schedule_timeout_killable(msecs_to_jiffies(delay));
	if (!fatal_signal_pending(current))
		return true;
	/* a killed writer's update must not take effect: no more tries */
	pr_err("%s '%s' refused after %u %s: its writer was killed\n",
	       req->verb, kpatch_req_name(req), n, n == 1 ? "try" : "tries");
	return false;
}

/*
 * A task's name, printed with %*pE: a task chooses its own name
 * (prctl(PR_SET_NAME)), and a newline in it must not start a line of the
 * log.
 */
static int kpatch_comm_len(const char *comm)
{
	return strnlen(comm, TASK_COMM_LEN);
}

/*
 * Log why try number @n of an update was refused: as an error if the
 * update fails now (@last), else as a warning saying that it is tried
 * again in @delay ms.
 */
static __cold void kpatch_report(const struct kpatch_request *req,
				 const struct kpatch_refused *r,
				 unsigned int n, unsigned int tries,
				 bool last, unsigned int delay)
{
	unsigned long ip = READ_ONCE(kpatch_failed_ip);
	char why[KSYM_SYMBOL_LEN + 128];

	switch (r->why) {
	case KPATCH_BUSY:
		snprintf(why, sizeof(why), "%pS is on the stack of pid %d (%*pE)",
			 (void *)r->addr, r->pid, kpatch_comm_len(r->comm),
			 r->comm);
		break;
	case KPATCH_UNRELIABLE:
		snprintf(why, sizeof(why),
			 "the stack of pid %d (%*pE) cannot be walked reliably",
			 r->pid, kpatch_comm_len(r->comm), r->comm);
		break;
	case KPATCH_LOST:
		snprintf(why, sizeof(why), "an exiting task could not be recorded");
		break;
	case KPATCH_AGAIN:
		snprintf(why, sizeof(why),
			 "ftrace cannot redirect %pS now: the owner of a direct call there (a BPF trampoline) is busy",
			 (void *)r->addr);
		break;
	case KPATCH_RAN:
		if (READ_ONCE(kpatch_failed_hook))
			snprintf(why, sizeof(why),
				 "%pS was called by a stop or undo hook; a hook must not call the functions its update changes",
				 (void *)ip);
		else if (READ_ONCE(kpatch_failed_nmi))
			snprintf(why, sizeof(why),
				 "%pS was called during the update, from an NMI; rolled back",
				 (void *)ip);
		else
			snprintf(why, sizeof(why),
				 "%pS was called during the update (called by kpatch's own update path: stop_machine() or the stack check); it can never be patched",
				 (void *)ip);
		break;
	default:
		WARN_ON_ONCE(1);
		return;
	}
	if (!last)
		pr_warn("%s '%s' busy (try %u of %u, again in %u ms): %s\n",
			req->verb, kpatch_req_name(req), n, tries, delay, why);
	else if (n > 1)
		pr_err("%s '%s' refused after %u tries: %s\n", req->verb,
		       kpatch_req_name(req), n, why);
	else
		pr_err("%s '%s' refused: %s\n", req->verb,
		       kpatch_req_name(req), why);
}

/* The name an update goes by in the log. */
static const char *kpatch_req_name(const struct kpatch_request *req)
{
	return (req->add ?: req->remove)->kpmod->name;
}

/* ------------------------------------------------------------------------
 * Layer: moving busy tasks
 *
 * What it adds: an update takes effect only at an instant when no task is
 * in the code it changes.  A task asleep in a read, a poll or a futex wait
 * there never gives one; on a fully preemptible kernel a hot function
 * rarely does, for some caller is always preempted in it.  When a run is
 * refused by such tasks, kpatch moves the user tasks among them out of the
 * way, holds them there, and runs the try again at once:
 *
 *   the try (kpatch_try_once())          a task it moves
 *
 *   run: refused, the tasks in the
 *   way listed (kpatch_stop_at())
 *   each one it can move: a slot of   -> TIF_NOTIFY_SIGNAL set; if asleep
 *     the gate, task_work_add() of        interruptibly, woken: the call
 *     kpatch_hold_fn(), TWA_SIGNAL        ends (-ERESTARTSYS or the like);
 *   the gate on: a user task that         if preempted, it runs on to the
 *     calls a function of the try's       end of its call; returning to
 *     sites claims a slot; every 10 ms -> user space, kpatch_hold_fn():
 *     the mover queues the same on it     out; it sleeps (killable)
 *   wait until they are all out <------
 *   run again, the same sites
 *   ...
 *   the try done or given up: the     -> its call restarts, or it returns
 *     gate off, the tasks let go          to user space
 *
 * The gate is for a hot function: held at the return from their first
 * call, its callers are out of it for good.  It takes the slow path of the
 * try's sites (their target KPATCH_TARGET_SLOW while the state is IDLE,
 * which gives the first entry as the fast path would), and
 * kpatch_gate_pass() there.  That may run in any task context -- inside
 * __schedule(), say -- so it only claims a slot and pins the task; the
 * mover, in process context, queues the callback on it.
 *
 * Why a moved or held task runs no old code after the update takes effect:
 * it sleeps in kpatch_hold_fn() until the try that moved it has ended, so
 * it cannot go back in before the run that succeeds; that run walks its
 * stack inside stop_machine() like any other's and finds it in the return
 * path, which is no code the update changes, or refuses.  Its interrupted
 * call restarts only after kpatch_hold_fn() has returned: in the version
 * then in effect.  What the task sees, as with livepatch's fake signal, is
 * in Documentation.txt ("Moving busy tasks").
 *
 * Never moved, and still named when they refuse: kernel threads and the
 * user workers that never return to user space (PF_IO_WORKER,
 * PF_USER_WORKER); tasks in uninterruptible or killable sleep, which a
 * fake signal does not wake; exiting, stopped or traced tasks; the task
 * that writes the command; a task moved already that is not out yet.
 * Bounds: the gate is on only while its try runs, under kpatch_mutex; a
 * task is held at most for KPATCH_MOVE_ROUNDS rounds of
 * KPATCH_MOVE_WAIT_MS and their runs, never across the sleep between two
 * tries.
 *
 * kpatch.ko cannot go while a task may still run kpatch_hold_fn(): each
 * queued callback holds a reference on kpatch from its task_work_add() to
 * the last statement of the callback, which drops it, and kpatch_exit()
 * then waits with synchronize_rcu_tasks() for a task still in the
 * instructions after that.  The gate outlives its try for as long as a
 * callback holds it.
 *
 * Without it (move=N): a try refused by a sleeping or preempted task
 * waits and tries again, and fails once the retries are spent.
 * Price: about 300 lines; nothing per call but while the gate is on: then
 * per call of a gated site the slow path, and once per task a claimed
 * slot; per try that finds a task in its way, the gate and the list of a
 * run (about 15 KiB, freed when the try ends).
 */
static bool kpatch_move = true;
module_param_named(move, kpatch_move, bool, 0644);
MODULE_PARM_DESC(move,
		 "move user tasks that an update finds in its way out of it (default Y)");

/*
 * How long a round waits for the tasks it moved to be out, how often it
 * queues the callback on the tasks the gate caught meanwhile, and how many
 * rounds a try makes at most.
 */
#define KPATCH_MOVE_WAIT_MS	500
#define KPATCH_MOVE_SWEEP_MS	10
#define KPATCH_MOVE_ROUNDS	8

/* Tasks in the way that a run lists, at most. */
#define KPATCH_BLOCKERS		64

/* Slots of the gate: tasks one try moves or holds, at most. */
#define KPATCH_GATE_BITS	8
#define KPATCH_GATE_SLOTS	BIT(KPATCH_GATE_BITS)

/*
 * A task the try moved or the gate caught: claimed by a cmpxchg of @task
 * from NULL, after a reference on it was taken, and neither given back nor
 * let go until the try ends, so that the slot says "done already" and no
 * other task can come to have the same address meanwhile.  @queued is the
 * mover's own: the callback is queued on the task.
 */
struct kpatch_slot {
	struct task_struct *task;
	bool queued;
	struct callback_head work;
	struct kpatch_gate *gate;
};

/*
 * The gate of a try.  @ref: the try's, and one per queued callback.
 * @mover: the task that runs the try.  @claims: slots claimed.  @pending:
 * callbacks queued whose task is not out yet; @arrived: those that came
 * out.  @done: the try has ended, the tasks go on.  Slots hash by task
 * pointer, probed linearly.
 */
struct kpatch_gate {
	refcount_t ref;
	struct task_struct *mover;
	atomic_t claims, pending, arrived;
	bool done;
	struct kpatch_slot slot[KPATCH_GATE_SLOTS];
};

/* A task in the way: @addr, or 0 if its stack is unreliable. */
struct kpatch_blocker {
	struct task_struct *task;	/* pinned, if it can be moved */
	unsigned long addr;
	pid_t pid;
	char comm[TASK_COMM_LEN];
};

/*
 * What a try that moves tasks keeps, under kpatch_mutex: the tasks in the
 * way its last run listed, and how many more; its gate; its rounds.
 */
struct kpatch_movers {
	struct kpatch_blocker blockers[KPATCH_BLOCKERS];
	unsigned int nr, more;
	struct kpatch_gate *gate;
	unsigned int rounds;
	bool gating;
};

/*
 * kpatch_gating, the gate that the slow path passes tasks through, or NULL,
 * is set and cleared under kpatch_mutex, read with preemption off in the
 * slow path, and freed only after kpatch_sync_preempt_off() has waited
 * for those reads (kpatch_movers_free()).
 */

/* Moved tasks wait on kpatch_hold_wq, the mover on kpatch_out_wq. */
static DECLARE_WAIT_QUEUE_HEAD(kpatch_hold_wq);
static DECLARE_WAIT_QUEUE_HEAD(kpatch_out_wq);
static bool kpatch_held_ever;

static struct kpatch_movers *kpatch_movers_new(void);
static bool kpatch_movable(struct task_struct *task);
static void kpatch_hold_fn(struct callback_head *work);
static struct kpatch_slot *kpatch_gate_claim(struct kpatch_gate *g,
					     struct task_struct *task);
static bool kpatch_gate_queue(struct kpatch_gate *g, struct kpatch_slot *s);
static unsigned int kpatch_gate_sweep(struct kpatch_gate *g);
static void kpatch_gate_on(struct kpatch_movers *m, struct kpatch_try *try);
static void kpatch_move_wait(struct kpatch_gate *g);
static void kpatch_gate_put(struct kpatch_gate *g);

/*
 * Run of @try refused with @ret: move out the user tasks in its way that
 * can be moved, say whom, turn the gate on, and wait until every task held
 * is out, or for KPATCH_MOVE_WAIT_MS.  The first refusal of a try only
 * makes its record, to list the tasks in the way at the next run.  Drops
 * the references the run took.  Returns whether to run again at once:
 * some task was moved, marked or came out since the run before, and the
 * writer was not killed (its write must then change nothing).
 */
static __cold bool kpatch_move_out(struct kpatch_try *try, int ret)
{
	const struct kpatch_request *req = try->req;
	struct kpatch_movers *m = try->movers;
	char who[8 * (TASK_COMM_LEN + 24)];
	unsigned int i, moved = 0, marked, arrived;
	struct kpatch_blocker *b;
	struct kpatch_slot *s;
	size_t len = 0;
	bool ok;

	lockdep_assert_held(&kpatch_mutex);
	ok = ret == -EBUSY && (try->refused.why == KPATCH_BUSY ||
			       try->refused.why == KPATCH_UNRELIABLE) &&
	     !fatal_signal_pending(current);
	if (!m) {
		try->movers = ok ? kpatch_movers_new() : NULL;
		return try->movers;
	}
	ok &= ++m->rounds <= KPATCH_MOVE_ROUNDS;
	for (i = 0; i < m->nr; i++) {
		b = &m->blockers[i];
		if (!b->task)
			continue;
		s = ok ? kpatch_gate_claim(m->gate, b->task) : NULL;
		if (s && kpatch_gate_queue(m->gate, s)) {
			if (moved < 8)
				len += scnprintf(who + len, sizeof(who) - len,
						 "%spid %d (%*pE)",
						 moved ? ", " : "", b->pid,
						 kpatch_comm_len(b->comm),
						 b->comm);
			moved++;
		}
		put_task_struct(b->task);
		b->task = NULL;
	}
	m->nr = 0;
	m->more = 0;
	/* the tasks the gate marked since the last sweep: held, not named */
	marked = ok ? kpatch_gate_sweep(m->gate) : 0;
	if (!ok || (!moved && !marked && !atomic_read(&m->gate->pending)))
		return false;
	if (moved > 8)
		scnprintf(who + len, sizeof(who) - len, ", and %u more",
			  moved - 8);
	if (moved)
		pr_notice("%s '%s' busy: moving %u task%s out of the way: %s\n",
			  req->verb, kpatch_req_name(req), moved,
			  moved == 1 ? "" : "s", who);
	kpatch_gate_on(m, try);
	arrived = atomic_read(&m->gate->arrived);
	kpatch_move_wait(m->gate);
	return (moved || marked || atomic_read(&m->gate->arrived) != arrived) &&
	       !fatal_signal_pending(current);
}

/* A record for a try, if it may move tasks; NULL if not, or no memory. */
static struct kpatch_movers *kpatch_movers_new(void)
{
	struct kpatch_movers *m;

	if (!READ_ONCE(kpatch_move))
		return NULL;
	m = kzalloc(sizeof(*m), GFP_KERNEL);
	if (!m)
		return NULL;
	m->gate = kzalloc(sizeof(*m->gate), GFP_KERNEL);
	if (!m->gate) {
		kfree(m);
		return NULL;
	}
	refcount_set(&m->gate->ref, 1);
	m->gate->mover = current;
	return m;
}

/*
 * @task, of the last refusal, is in the way.  A try that moves no task
 * stops at the first; one that may move them lists it and goes on.
 * Returns whether to stop.  The task cannot run meanwhile: it is blocked
 * under its pi_lock (the pre-walk) or every CPU is stopped.
 */
static bool kpatch_stop_at(struct kpatch_try *try, struct task_struct *task)
{
	struct kpatch_movers *m = try->movers;
	struct kpatch_blocker *b;

	if (!m)
		return true;
	if (m->nr == KPATCH_BLOCKERS) {
		m->more++;
		return false;
	}
	b = &m->blockers[m->nr++];
	b->addr = try->refused.why == KPATCH_BUSY ? try->refused.addr : 0;
	b->pid = try->refused.pid;
	memcpy(b->comm, try->refused.comm, sizeof(b->comm));
	b->task = kpatch_movable(task) ? get_task_struct(task) : NULL;
	return false;
}

/* At the end of a run's stack check: -EBUSY for the first task listed. */
static int kpatch_listed(struct kpatch_try *try)
{
	struct kpatch_movers *m = try->movers;
	struct kpatch_blocker *b;

	if (!m || !m->nr)
		return 0;
	b = &m->blockers[0];
	try->refused.why = b->addr ? KPATCH_BUSY : KPATCH_UNRELIABLE;
	try->refused.addr = b->addr;
	try->refused.pid = b->pid;
	memcpy(try->refused.comm, b->comm, sizeof(b->comm));
	return -EBUSY;
}

/*
 * Can @task be moved (see above)?  A user task, preempted or asleep
 * interruptibly: TWA_SIGNAL wakes only that.  It cannot run meanwhile
 * (kpatch_stop_at()).
 */
static bool kpatch_movable(struct task_struct *task)
{
	if (task == current ||
	    (task->flags & (PF_EXITING | PF_KTHREAD | PF_IO_WORKER |
			    PF_USER_WORKER)))
		return false;
	return READ_ONCE(task->on_rq) ||
	       (READ_ONCE(task->__state) & TASK_INTERRUPTIBLE);
}

/*
 * From the slow path, while the gate is on: claim a slot for the calling
 * user task, for the mover to hold it at its return to user space.  Any
 * task context, preemption off, which keeps @g alive (see kpatch_gating):
 * a cmpxchg and a reference taken, nothing that locks, wakes or
 * allocates.
 */
static noinline void notrace kpatch_gate_pass(struct kpatch_gate *g)
{
	struct task_struct *task = current;

	if (!in_task() || !task->mm || task == g->mover ||
	    (task->flags & (PF_KTHREAD | PF_IO_WORKER | PF_USER_WORKER |
			    PF_EXITING)) ||
	    atomic_read(&g->claims) >= KPATCH_GATE_SLOTS)
		return;
	kpatch_gate_claim(g, task);
}

/*
 * Claim a slot of @g for @task, pinned; NULL if it has one already, or
 * none is free.  Lock-free: from the slow path in any task as well.  The
 * reference is taken before the cmpxchg, whose full barrier orders it
 * before the pointer that the sweep reads with an acquire.
 */
static struct kpatch_slot *notrace kpatch_gate_claim(struct kpatch_gate *g,
						    struct task_struct *task)
{
	unsigned int h = hash_ptr(task, KPATCH_GATE_BITS), n;
	struct task_struct *t;

	get_task_struct(task);
	for (n = 0; n < KPATCH_GATE_SLOTS; n++, h = (h + 1) % KPATCH_GATE_SLOTS) {
		t = READ_ONCE(g->slot[h].task) ?:
		    cmpxchg(&g->slot[h].task, NULL, task);
		if (!t) {
			atomic_inc(&g->claims);
			return &g->slot[h];
		}
		if (t == task)
			break;
	}
	put_task_struct(task);	/* never the last: @task is alive */
	return NULL;
}

/*
 * Queue kpatch_hold_fn() on the task of slot @s of @g, from process
 * context.  False if it is past its last task work (exiting).
 */
static bool kpatch_gate_queue(struct kpatch_gate *g, struct kpatch_slot *s)
{
	s->queued = true;
	s->gate = g;
	init_task_work(&s->work, kpatch_hold_fn);
	refcount_inc(&g->ref);
	atomic_inc(&g->pending);
	__module_get(THIS_MODULE);
	if (!task_work_add(s->task, &s->work, TWA_SIGNAL))
		return true;
	module_put(THIS_MODULE);
	atomic_dec(&g->pending);
	refcount_dec(&g->ref);
	return false;
}

/*
 * Queue the callback on each task the slow path marked since the last
 * sweep; how many.  The acquire pairs with the cmpxchg in
 * kpatch_gate_claim(): @task is set and pinned.
 */
static unsigned int kpatch_gate_sweep(struct kpatch_gate *g)
{
	struct kpatch_slot *s;
	unsigned int n = 0;

	lockdep_assert_held(&kpatch_mutex);
	for (s = g->slot; s < g->slot + KPATCH_GATE_SLOTS; s++)
		if (!s->queued && smp_load_acquire(&s->task))
			n += kpatch_gate_queue(g, s);
	return n;
}

/* Calls of @try's sites take the slow path, and with it the gate. */
static void kpatch_gate_on(struct kpatch_movers *m, struct kpatch_try *try)
{
	unsigned int i;

	if (!m->gating) {
		/* pairs with the acquire in kpatch_redirect_slow() */
		smp_store_release(&kpatch_gating, m->gate);
		m->gating = true;
		kpatch_held_ever = true;
	}
	WARN_ON_ONCE(atomic_read(&kpatch_state) != KPATCH_STATE_IDLE);
	for (i = 0; i < try->nr_sites; i++)
		WRITE_ONCE(try->sites[i]->target, KPATCH_TARGET_SLOW);
}

/*
 * Wait until every task held by @g is out and a sweep finds no task the
 * slow path marked meanwhile, for KPATCH_MOVE_WAIT_MS at most; one marked
 * later is swept at the next refusal (kpatch_move_out()).  Killable only:
 * a pending TIF_NOTIFY_SIGNAL must not cut the wait short.
 */
static void kpatch_move_wait(struct kpatch_gate *g)
{
	unsigned long end = jiffies + msecs_to_jiffies(KPATCH_MOVE_WAIT_MS);

	while ((kpatch_gate_sweep(g) || atomic_read(&g->pending)) &&
	       time_before(jiffies, end) && !fatal_signal_pending(current))
		wait_event_killable_timeout(kpatch_out_wq,
					    !atomic_read(&g->pending),
					    msecs_to_jiffies(KPATCH_MOVE_SWEEP_MS));
}

/*
 * The callback of a moved or held task, on its way back to user space (or
 * in do_exit(), where it only goes on).  It is out: it tells the mover,
 * then sleeps until the try that moved it has ended.
 */
static void kpatch_hold_fn(struct callback_head *work)
{
	struct kpatch_slot *s = container_of(work, struct kpatch_slot, work);
	struct kpatch_gate *g = s->gate;

	atomic_inc(&g->arrived);
	atomic_dec(&g->pending);
	wake_up(&kpatch_out_wq);
	if (!(current->flags & PF_EXITING))
		wait_event_state(kpatch_hold_wq, READ_ONCE(g->done),
				 (TASK_KILLABLE | TASK_FREEZABLE));
	kpatch_gate_put(g);
	module_put(THIS_MODULE);	/* see above, on kpatch_exit() */
}

/*
 * @try ends: the gate off and its sites' targets final again, the tasks it
 * moved go on, and its record goes.  The gate itself goes with the last
 * callback that holds it.
 */
static void kpatch_movers_free(struct kpatch_try *try)
{
	struct kpatch_movers *m = try->movers;
	struct kpatch_gate *g = m->gate;
	unsigned int i;

	lockdep_assert_held(&kpatch_mutex);
	for (i = 0; i < m->nr; i++)
		if (m->blockers[i].task)
			put_task_struct(m->blockers[i].task);
	if (m->gating) {
		kpatch_final_targets(try);
		WRITE_ONCE(kpatch_gating, NULL);
		/* no slow path may still hold it: see kpatch_gating */
		kpatch_sync_preempt_off();
	}
	for (i = 0; i < KPATCH_GATE_SLOTS; i++)
		if (g->slot[i].task)
			put_task_struct(g->slot[i].task);
	WRITE_ONCE(g->done, true);
	wake_up_all(&kpatch_hold_wq);
	kpatch_gate_put(g);
	kfree(m);
	try->movers = NULL;
}

static void kpatch_gate_put(struct kpatch_gate *g)
{
	if (refcount_dec_and_test(&g->ref))
		kfree(g);
}

/* ------------------------------------------------------------------------
 * The API: patches from modules
 */

/*
 * Disable @patch.  Caller holds kpatch_mutex.  On success the record of
 * @patch is freed.
 */
static __cold int kpatch_disable(struct kpatch_patch *patch)
{
	struct kpatch_request req = {
		.verb = "unpatch",
		.remove = patch,
	};

	lockdep_assert_held(&kpatch_mutex);
	return kpatch_update(&req);
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

static LIST_HEAD(kpatch_loading_list);
static DEFINE_SPINLOCK(kpatch_loading_lock);

/* Take @mod's entries off the list, and put @add on it; had it any? */
static bool kpatch_loading_swap(struct module *mod, struct kpatch_loading *add)
{
	struct kpatch_loading *l, *tmp;
	LIST_HEAD(gone);
	bool had;

	spin_lock(&kpatch_loading_lock);
	list_for_each_entry_safe(l, tmp, &kpatch_loading_list, list)
		if (l->mod == mod)
			list_move(&l->list, &gone);
	if (add)
		list_add(&add->list, &kpatch_loading_list);
	spin_unlock(&kpatch_loading_lock);
	had = !list_empty(&gone);
	list_for_each_entry_safe(l, tmp, &gone, list)
		kfree(l);
	return had;
}

/*
 * May kpatch keep a pointer to the @size bytes at @p, and write there, for
 * as long as a patch is enabled?  Memory of @mod must be data that stays
 * writable after its init (const and __ro_after_init data turn read-only
 * when the init returns, init memory is freed); other memory must be
 * mapped writable now, and not be the stack of the caller, which is gone
 * once it returns.
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
 *           in each function ->old_addr and ->new_addr (sizes optional);
 *           ->hooks as the patch needs them
 * @replace: also remove every other enabled patch, in the same step
 *
 * Redirects every old function of @kpmod to its new function, atomically
 * with respect to every task: inside stop_machine(), after checking that no
 * task has any affected function on its stack.  While the check refuses,
 * the update is tried again, as the retries and retry_delay_ms module
 * parameters say.  The patch is named after its module.  While it is
 * enabled, the patch module, the modules holding its old and new
 * functions and its hooks, and kpatch itself cannot be unloaded.  kpatch
 * reads the functions only here; it keeps a pointer to @kpmod and writes
 * ->name and ->enabled while the patch is enabled, so @kpmod may not be in
 * the module's init memory (__initdata), be const or __ro_after_init, or
 * be on the stack.
 *
 * Context: process context; sleeps.
 * Return: 0 on success; -EINVAL for a bad address, size or argument
 * (@kpmod in init memory, read-only or on the stack included), -EEXIST
 * when a patch of that name is enabled, or when
 * /sys/kernel/kpatch/patches/<name> exists (kpatch makes it), -EBUSY when
 * a function is still in use after the retries or ftrace refused it,
 * -ENODEV when @kpmod->mod is going away, -ENOMEM, or what a pre or stop
 * hook returned.  On failure nothing has changed, neither in the kernel
 * nor in @kpmod and its functions.
 */
int kpatch_register(struct kpatch_module *kpmod, bool replace)
{
	struct kpatch_loading *loading;
	struct kpatch_patch *patch;
	const char *name;
	int ret;

	if (!kpmod || !kpmod->mod || !kpmod->funcs || kpmod->num_funcs <= 0)
		return -EINVAL;
	if (within_module_init((unsigned long)kpmod, kpmod->mod)) {
		pr_err("%s: the kpatch_module is in init memory (__initdata), which is freed after the module's init\n",
		       kpmod->mod->name);
		return -EINVAL;
	}
	if (!kpatch_writable(kpmod->mod, kpmod, sizeof(*kpmod))) {
		pr_err("%s: the kpatch_module is not in writable memory (const, __ro_after_init or on the stack)\n",
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
	ret = -EINVAL;
	if (!kpmod->enabled) {
		name = kpmod->name;
		kpmod->name = kpmod->mod->name;
		ret = kpatch_enable(kpmod, false, replace);
		if (ret)
			kpmod->name = name;
	}
	/*
	 * A loading module with no patch enabled goes without waiting for
	 * kpatch_mutex, which a hook may hold while it takes the module
	 * notifiers' lock (Documentation.txt, "Rules").
	 */
	list_for_each_entry(patch, &kpatch_patches, list)
		if (patch->kpmod->mod == kpmod->mod)
			break;
	if (ret && &patch->list == &kpatch_patches)
		kpatch_loading_swap(kpmod->mod, NULL);
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
 * a function is still in use after the retries; -ENOMEM.  On failure the
 * patch stays enabled.
 */
int kpatch_unregister(struct kpatch_module *kpmod)
{
	struct kpatch_patch *patch;
	int ret = -EINVAL;

	mutex_lock(&kpatch_mutex);
	list_for_each_entry(patch, &kpatch_patches, list)
		if (patch->kpmod == kpmod) {
			ret = kpatch_disable(patch);
			break;
		}
	mutex_unlock(&kpatch_mutex);
	return ret;
}
EXPORT_SYMBOL_GPL(kpatch_unregister);

/*
 * A module is going away.  If it is the patch module of an enabled patch,
 * its load failed after it registered the patch (kpatch_loading_list).
 * The kernel frees such a module right after its GOING notifiers, whatever
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
	struct kpatch_module *told = NULL;
	struct kpatch_patch *patch, *p;
	struct module *mod = data;
	int ret;

	if ((action != MODULE_STATE_GOING && action != MODULE_STATE_LIVE) ||
	    !kpatch_loading_swap(mod, NULL) || action == MODULE_STATE_LIVE)
		return NOTIFY_DONE;
	mutex_lock(&kpatch_mutex);
	for (;;) {
		/* Found anew each time: the mutex is dropped in between. */
		patch = NULL;
		list_for_each_entry(p, &kpatch_patches, list)
			if (p->kpmod->mod == mod) {
				patch = p;
				break;
			}
		if (!patch)
			break;
		if (patch->kpmod != told)
			pr_warn("module %s is going away with its patch enabled (its init failed): taking the patch out\n",
				mod->name);
		told = patch->kpmod;
		ret = kpatch_disable(patch);
		if (!ret)
			continue;
		pr_err("cannot take patch '%s' out (%d); trying again in 1 s, its module is freed after that\n",
		       told->name, ret);
		mutex_unlock(&kpatch_mutex);
		msleep(1000);
		mutex_lock(&kpatch_mutex);
	}
	mutex_unlock(&kpatch_mutex);
	return NOTIFY_OK;
}

/* ------------------------------------------------------------------------
 * The control file, debugfs and sysfs
 */

static struct kobject *kpatch_root_kobj;
struct kobject *kpatch_patches_kobj;
EXPORT_SYMBOL_GPL(kpatch_patches_kobj);

static struct dentry *kpatch_debugfs_dir;

static int kpatch_run_command(char *cmd);

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

/*
 * How much of a rejected word from the user to echo to the log: it is
 * printed with %*pE (non-printing bytes escaped), cut at KPATCH_ECHO_MAX.
 */
static int kpatch_echo_len(const char *word)
{
	return strnlen(word, KPATCH_ECHO_MAX);
}

/* A patch name: 1 to KPATCH_NAME_MAX of A-Z a-z 0-9 _ - */
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

static int kpatch_run_command(char *cmd)
{
	char **tok, *p;
	int ntok = 0, ret = -EINVAL;

	tok = kmalloc_array(strlen(cmd) / 2 + 2, sizeof(*tok), GFP_KERNEL);
	if (!tok)
		return -ENOMEM;
	while ((p = strsep(&cmd, " \t")))
		if (*p)
			tok[ntok++] = p;

	if (!ntok) {
		pr_err("empty command\n");
	} else if (strcmp(tok[0], "patch") && strcmp(tok[0], "replace") &&
		   strcmp(tok[0], "unpatch")) {
		pr_err("unknown command '%*pE' (expected patch, replace or unpatch)\n",
		       kpatch_echo_len(tok[0]), tok[0]);
	} else if (ntok < 2 || !kpatch_valid_name(tok[1])) {
		pr_err("%s: the name must be 1 to %d characters of A-Z a-z 0-9 _ -\n",
		       tok[0], KPATCH_NAME_MAX);
	} else if (!strcmp(tok[0], "unpatch")) {
		ret = kpatch_cmd_unpatch(tok, ntok);
	} else {
		ret = kpatch_cmd_patch(tok, ntok, !strcmp(tok[0], "replace"));
	}
	kfree(tok);
	return ret;
}

/*
 * Parse a hexadecimal address, with or without 0x: kstrtoul()'s syntax,
 * but for the leading + it takes.
 */
static __cold int kpatch_parse_addr(const char *tok, unsigned long *addr)
{
	return *tok == '+' || kstrtoul(tok, 16, addr) ? -EINVAL : 0;
}

/* `patch|replace NAME OLD NEW [OLD NEW ...]` */
static int kpatch_cmd_patch(char **tok, int ntok, bool replace)
{
	const char *verb = tok[0], *old, *new;
	struct kpatch_module *kpmod;
	int i, ret;

	if (ntok < 4 || ntok % 2) {
		pr_err("%s: expected NAME and OLD NEW address pairs\n", verb);
		return -EINVAL;
	}
	kpmod = kzalloc(sizeof(*kpmod), GFP_KERNEL);
	if (!kpmod)
		return -ENOMEM;
	kpmod->num_funcs = (ntok - 2) / 2;
	kpmod->name = kstrdup(tok[1], GFP_KERNEL);
	kpmod->funcs = kcalloc(kpmod->num_funcs, sizeof(*kpmod->funcs),
			       GFP_KERNEL);
	ret = -ENOMEM;
	if (!kpmod->name || !kpmod->funcs)
		goto err;

	for (i = 0; i < kpmod->num_funcs; i++) {
		old = tok[2 + 2 * i];
		new = tok[3 + 2 * i];
		ret = -EINVAL;
		if (kpatch_parse_addr(old, &kpmod->funcs[i].old_addr) ||
		    kpatch_parse_addr(new, &kpmod->funcs[i].new_addr)) {
			pr_err("%s %s: '%*pE %*pE' is not a pair of hexadecimal addresses\n",
			       verb, kpmod->name, kpatch_echo_len(old), old,
			       kpatch_echo_len(new), new);
			goto err;
		}
	}

	mutex_lock(&kpatch_mutex);
	ret = kpatch_enable(kpmod, true, replace);	/* takes kpmod */
	mutex_unlock(&kpatch_mutex);
	return ret;
err:
	kpatch_own_free(kpmod);
	return ret;
}

/* `unpatch NAME` */
static int kpatch_cmd_unpatch(char **tok, int ntok)
{
	struct kpatch_patch *patch;
	int ret;

	if (ntok != 2) {
		pr_err("unpatch: expected exactly one NAME\n");
		return -EINVAL;
	}

	mutex_lock(&kpatch_mutex);
	patch = kpatch_find_patch(tok[1]);
	if (!patch) {
		pr_err("unpatch %s: no such patch\n", tok[1]);
		ret = -ENOENT;
	} else {
		ret = kpatch_disable(patch);
	}
	mutex_unlock(&kpatch_mutex);
	return ret;
}

static const struct file_operations kpatch_control_fops = {
	.owner	= THIS_MODULE,
	.open	= simple_open,
	.write	= kpatch_control_write,
	.llseek	= noop_llseek,
};

/* The name of the function at @addr: "symbol", or "module:symbol". */
static __cold void kpatch_sym_name(char *buf, unsigned long addr)
{
	char sym[KSYM_SYMBOL_LEN], *mod;
	unsigned long start, size;

	if (!kpatch_symbol(addr, sym, &start, &size, &mod))
		scnprintf(buf, KSYM_SYMBOL_LEN, "%#lx", addr);
	else
		scnprintf(buf, KSYM_SYMBOL_LEN, "%s%s%s", mod ?: "",
			  mod ? ":" : "", sym);
}

/*
 * One line per patched function, oldest patch first:
 * NAME OLDSYM+0xSIZE OLDADDR NEWSYM+0xSIZE NEWADDR active|shadowed
 * and after a patch's functions one line per hook it has:
 * NAME HOOK SYM ADDR
 */
static __cold int kpatch_patches_show(struct seq_file *m, void *v)
{
	char old[KSYM_SYMBOL_LEN], new[KSYM_SYMBOL_LEN];
	struct kpatch_patch *patch;
	struct kpatch_module *kpmod;
	struct kpatch_entry *e;
	unsigned int i;

	mutex_lock(&kpatch_mutex);
	list_for_each_entry(patch, &kpatch_patches, list) {
		kpmod = patch->kpmod;
		for (i = 0; i < patch->nr; i++) {
			e = &patch->entries[i];
			kpatch_sym_name(old, e->old_addr);
			kpatch_sym_name(new, e->new_addr);
			seq_printf(m, "%s %s+%#lx %016lx %s+%#lx %016lx %s\n",
				   kpmod->name, old, e->old_size, e->old_addr,
				   new, e->new_size, e->new_addr,
				   kpatch_top(e->site) == e ? "active" : "shadowed");
		}
		for (i = 0; i < KPATCH_NR_HOOKS; i++) {
			if (!kpmod->hooks[i])
				continue;
			kpatch_sym_name(new, (unsigned long)kpmod->hooks[i]);
			seq_printf(m, "%s %s %s %016lx\n", kpmod->name,
				   kpatch_hook_names[i], new,
				   (unsigned long)kpmod->hooks[i]);
		}
	}
	mutex_unlock(&kpatch_mutex);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(kpatch_patches);

/* ------------------------------------------------------------------------
 * init and exit
 */

/*
 * Registered from load to unload on kpatch_ftrace_anchor(), which is never
 * called, only for its FTRACE_OPS_FL_PERMANENT: while it is there,
 * `sysctl kernel.ftrace_enabled=0` is refused instead of silently
 * unpatching the kernel, and kpatch does not load while ftrace is off.
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

static struct notifier_block kpatch_module_nb = {
	.notifier_call = kpatch_module_going,
	.priority = INT_MAX,	/* first: see kpatch_module_going() */
};

static int __init kpatch_init(void)
{
	int ret;

	ret = ftrace_set_filter_ip(&kpatch_anchor_ops,
				   (unsigned long)kpatch_ftrace_anchor, 0, 1);
	if (!ret)
		ret = register_ftrace_function(&kpatch_anchor_ops);
	if (ret) {
		pr_err("cannot register with ftrace (%d); is it off (sysctl kernel.ftrace_enabled)?\n",
		       ret);
		goto err_filter;
	}
	ret = kpatch_exiting_start();
	if (ret)
		goto err_anchor_ops;
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
	return 0;

err_notifier:
	unregister_module_notifier(&kpatch_module_nb);
err_exiting:
	kpatch_exiting_stop(ARRAY_SIZE(kpatch_tps));
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
	WARN_ON(!hash_empty(kpatch_sites));
	/* a task may still be in the last instructions of kpatch_hold_fn() */
	if (kpatch_held_ever)
		synchronize_rcu_tasks();

	debugfs_remove_recursive(kpatch_debugfs_dir);
	kpatch_kobj_remove(&kpatch_patches_kobj);
	kpatch_kobj_remove(&kpatch_root_kobj);
	unregister_module_notifier(&kpatch_module_nb);
	/* a module still loading whose kpatch_register() failed */
	while (!list_empty(&kpatch_loading_list))
		kpatch_loading_swap(list_first_entry(&kpatch_loading_list,
						     struct kpatch_loading,
						     list)->mod, NULL);
	kpatch_exiting_stop(ARRAY_SIZE(kpatch_tps));
	unregister_ftrace_function(&kpatch_anchor_ops);
	ftrace_free_filter(&kpatch_anchor_ops);
	ftrace_free_filter(&kpatch_probe_ops);
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
