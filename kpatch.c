// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * kpatch: replace whole kernel functions in a running kernel
 *
 * A patch is a set of (old function, new function) pairs that take effect
 * together, from a patch module's kpatch_register() (kpatch.h) or from a
 * command written to /sys/kernel/debug/kpatch/control.  An update -- patch,
 * replace or unpatch -- changes where the ftrace call sites of the old
 * functions send their calls, inside stop_machine(), at an instant when no
 * task is in code the update changes.
 *
 * The seed's five mechanisms are the core, and a first reading can follow
 * them alone: 1. the sites, found by address, one per patched function,
 * holding the entries of every patch that changes it (struct kpatch_site);
 * 2. the redirect, a site's ftrace_ops handler (kpatch_ftrace_handler());
 * 3. stop_machine(), whose callback alone changes entries, and where the
 * argument that no caller mixes versions is made (kpatch_update_cb());
 * 4. the stack check of every task (kpatch_check_stacks()); 5. the
 * NMI-safe state machine, for calls that run during the update all the
 * same (kpatch_state).  The file reads in the order an update lives: data
 * and redirect; the request; one try -- sites, the code no task may be
 * in, the run, the commit -- and a refused try; the API, the control
 * file, init and exit.  Each section comes after the first one that calls
 * into it; within a section callers come first, but for small helpers kept
 * beside their data.  Sections named "Layer" add a mechanism where the
 * core first needs it, opening with its price: a function's pieces, ways
 * into a module, hooks, the pre-walk, exiting tasks, moving busy tasks.
 * Documentation.txt ("How it works") has the long forms of the arguments.
 *
 * Words: an entry is one function of one patch; a site holds its entries,
 * newest first; its target is where it sends calls (a new function, 0 for
 * the old one, KPATCH_TARGET_SLOW through the state machine); the touched
 * entries are those an update publishes or takes out; the parts, the
 * patches it adds or removes; the ranges, the code no task may be in for
 * it to take effect; a pin, a module reference that keeps an address.
 *
 * Based on the kpatch core module by Seth Jennings and Josh Poimboeuf.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

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
#include <asm/pgtable.h>
#include <asm/text-patching.h>
#include <asm/unwind.h>
#include <trace/events/sched.h>

#include "kpatch.h"

/* What the kernel must provide; failing here beats a module that cannot patch. */
#if !defined(CONFIG_X86_64) || !defined(CONFIG_DYNAMIC_FTRACE) || \
	!defined(CONFIG_HAVE_FENTRY) || !defined(CONFIG_HAVE_RELIABLE_STACKTRACE) || \
	!(defined(CONFIG_DYNAMIC_FTRACE_WITH_ARGS) || defined(CONFIG_DYNAMIC_FTRACE_WITH_REGS)) || \
	!(defined(CONFIG_UNWINDER_ORC) || defined(CONFIG_UNWINDER_FRAME_POINTER)) || \
	!defined(CONFIG_KALLSYMS) || !defined(CONFIG_DEBUG_FS) || \
	!defined(CONFIG_SYSFS) || !defined(CONFIG_TRACEPOINTS)
#error "kpatch needs x86_64, fentry, FTRACE_WITH_ARGS or _REGS, ORC or frame pointers, \
reliable stack traces, KALLSYMS, DEBUG_FS, SYSFS and TRACEPOINTS"
#endif

/* What differs between kernels, chosen by what each provides (and Kbuild). */

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
 * Wait for every section with preemption off that began before (the slow
 * path, ftrace's list function): synchronize_rcu() where RCU watches, and
 * rude RCU tasks (maybe a no-op) where tracing runs while RCU does not.
 */
#ifdef CONFIG_TASKS_RUDE_RCU
#define kpatch_sync_preempt_off()	\
	do { synchronize_rcu(); synchronize_rcu_tasks_rude(); } while (0)
#else
#define kpatch_sync_preempt_off()	synchronize_rcu()
#endif

/* User threads that never return to user space; without it, io_uring's only. */
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
static inline bool kpatch_mod_rw(const struct module *mod, unsigned long addr)
{
	const struct module_layout *l = &mod->core_layout;

	return addr - (unsigned long)l->base - l->ro_after_init_size <
	       l->size - l->ro_after_init_size;
}
#endif

/* Return addresses that kretprobes and fprobes took from @t, to give back. */
static inline bool kpatch_rethooks(struct task_struct *t)
{
	bool ret = false;

#ifdef CONFIG_RETHOOK
	ret |= !llist_empty(&t->rethooks);
#endif
#ifdef CONFIG_KRETPROBES
	ret |= !llist_empty(&t->kretprobe_instances);
#endif
	return ret;
}

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
static void kpatch_test_at(enum kpatch_test_point point);
#else
#define kpatch_test_at(point) do { } while (0)
#endif

/* ------------------------------------------------------------------------
 * Parameters
 */

/* Longest name and command; a rejected word is echoed escaped, cut at 32. */
#define KPATCH_NAME_MAX		63
#define KPATCH_CMD_MAX		4096
#define kpatch_echo_len(word)	((int)strnlen(word, 32))

/*
 * A refused update is retried, kpatch_mutex held (Documentation.txt, 1.4);
 * no retry starts 60 s or more after the first try.
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
 * change only inside stop_machine() called with it held.
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

/* kpatch's record of a patch; @own: its kpatch_module is kpatch's. */
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
 * A site (Documentation.txt, 3.1): an ftrace call site, its own ftrace_ops,
 * its entries; @target: a new function, 0 (the old one runs), or
 * KPATCH_TARGET_SLOW while an update changes the site or a gate is on.
 * It pins its function's module and kpatch.  In kpatch_sites by ip, under kpatch_mutex; the
 * handler finds it as the container of its ftrace_ops.
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

/* Looked up on the control path only, under kpatch_mutex: small. */
static DEFINE_HASHTABLE(kpatch_sites, 4);

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
 * The state machine (Documentation.txt, 3.2), for the slow path, which
 * every call of a site an update changes takes while it runs:
 *
 *                     +---> SUCCESS ---+
 *   IDLE ---> UPDATING                 +---> IDLE
 *                     +---> FAILURE ---+
 *
 * The stop_machine() callback sets it, but for a caller's move from
 * UPDATING to FAILURE; beside it run NMIs, the other CPUs' stop_machine()
 * loops, and the stop and undo hooks on its own CPU.  A caller that finds
 * UPDATING (set before the stack check) moves it to FAILURE, naming its
 * function: a changed function ran during the update.  FAILURE: callers
 * skip entries being added; SUCCESS: those being taken out.  After
 * stop_machine() the writer returns to IDLE, waits with synchronize_rcu()
 * for the callers (NMIs) that read the state before, and only then clears
 * entry->op and frees what went out.
 */
enum {
	KPATCH_STATE_IDLE,
	KPATCH_STATE_UPDATING,
	KPATCH_STATE_SUCCESS,
	KPATCH_STATE_FAILURE,
};

static atomic_t kpatch_state = ATOMIC_INIT(KPATCH_STATE_IDLE);

/*
 * The function whose call moved UPDATING to FAILURE, for the log: from an
 * NMI, a stop or undo hook (on kpatch_hook_cpu), or else kpatch's own
 * update path (a stopper's loop, the stack check), never patchable.
 */
static unsigned long kpatch_failed_ip;
static bool kpatch_failed_nmi, kpatch_failed_hook;
static int kpatch_hook_cpu = -1;

/*
 * The gate of a try moving tasks out of its way, or NULL: set and cleared
 * under kpatch_mutex, read with preemption off, and freed only after
 * kpatch_sync_preempt_off() has waited for those reads.
 */
struct kpatch_gate;
static struct kpatch_gate *kpatch_gating;
static void kpatch_gate_pass(struct kpatch_gate *g);
static int kpatch_state_finish(int state, unsigned long ip);
static noinline void kpatch_redirect_slow(struct kpatch_site *site,
					  struct ftrace_regs *fregs);

/*
 * Each site's handler.  The site outlives every call in here:
 * kpatch_site_free() frees it only once unregister_ftrace_function() has
 * waited for the handler and trampoline.  It calls nothing traceable: no
 * recursion check.
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
 * The slow path: a call of @site while an update changes it or a gate is
 * on.  Any context, NMI included; calls nothing traceable but
 * get_task_struct() in kpatch_gate_pass().  Preemption off makes it an RCU
 * reader for the synchronize_rcu() after an update, and keeps this CPU's
 * stopper from answering the update's rendezvous meanwhile.
 */
static noinline __cold void notrace kpatch_redirect_slow(struct kpatch_site *site,
							 struct ftrace_regs *fregs)
{
	struct kpatch_gate *g;
	struct kpatch_entry *e;
	int state;

	preempt_disable_notrace();
	/* IDLE: no callback starts before we are done: it waits for our stopper */
	state = atomic_read(&kpatch_state);
	if (state != KPATCH_STATE_IDLE) {
		state = kpatch_state_finish(KPATCH_STATE_FAILURE, site->ip);
	} else {
		/* pairs with the release in kpatch_gate_on() */
		g = smp_load_acquire(&kpatch_gating);
		if (unlikely(g))
			kpatch_gate_pass(g);
	}
	/* entries after the state: pairs with the smp_wmb() before SUCCESS */
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
	unsigned long start;	/* first: sorted by kpatch_cmp_ulong() */
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
	KPATCH_KILLED,		/* its writer was killed */
};

struct kpatch_refused {
	enum kpatch_refusal why;
	unsigned long addr;		/* BUSY: where; AGAIN: the function */
	pid_t pid;			/* BUSY, UNRELIABLE: whose stack */
	char comm[TASK_COMM_LEN];
	/* Layer: hooks -- KPATCH_HOOK: which hook of which patch */
	struct kpatch_patch *hook_patch;
	enum kpatch_hook hook;
	int hook_ret;
};

/* What the caller asked for: the same at every try. */
struct kpatch_request {
	const char *verb;		/* "patch", "replace" or "unpatch" */
	struct kpatch_patch *add;	/* patch to publish, or NULL */
	struct kpatch_patch *remove;	/* patch to take out, or NULL */
	bool replace;			/* also take out every other patch */
	bool must;			/* whatever the writer's signals */
	unsigned long start;		/* jiffies at the first try */
	/* Layer: moving busy tasks */
	bool no_move;			/* moving stopped for it */
};

/*
 * One try of an update, from the request and the patches as they are
 * then: the parts (those removed, newest first, then the one added) and
 * their entries in that order (taken out before @first_add, published
 * after); their sites, each once; the ranges, sorted and disjoint.
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
	struct task_struct *writer;	/* the task that runs the update */
	atomic_t cpus_in, cpus_seen;
	struct kpatch_refused refused;
	/* Layer: ways into a module -- the modules checked whole */
	struct module **whole;
	unsigned int nr_whole;
	/* Layer: hooks */
	bool hooks;			/* a part has a hook */
	/* Layer: the pre-walk */
	struct kpatch_record *rec;
	/* Layer: moving busy tasks */
	struct kpatch_movers *movers;
};

/* ------------------------------------------------------------------------
 * Contents: the functions below by section, in the order a `patch` first
 * calls them in (but for the control file, at the end)
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
static int kpatch_resolve_hook(struct kpatch_patch *patch, int h);
static void kpatch_patch_free(struct kpatch_patch *patch);

/* An update, and one try of it */
static int kpatch_update(struct kpatch_request *req);
static int kpatch_try_once(struct kpatch_try *try);
static int kpatch_check_chain(struct kpatch_patch *patch, bool replace);
static int kpatch_collect(struct kpatch_try *try);
static int kpatch_sites_get(struct kpatch_try *try);
static struct kpatch_site *kpatch_site_new(struct kpatch_entry *e, int *err);
static void kpatch_site_free(struct kpatch_site *site);
static int kpatch_cmp_ulong(const void *a, const void *b);
static int kpatch_build_ranges(struct kpatch_try *try);
static int kpatch_add_code(struct kpatch_try *try, const struct kpatch_entry *e,
			   bool old);
static int kpatch_add_range(struct kpatch_try *try, unsigned long start,
			    unsigned long size);
static int kpatch_add_pieces(struct kpatch_try *try, unsigned int first,
			     struct module *mod, unsigned long fn);
static void kpatch_add_whole(struct kpatch_try *try);
static int kpatch_pre_hooks(struct kpatch_try *try);

/* The run: the pre-walk, stop_machine() and the stack check */
static void kpatch_record_start(struct kpatch_try *try);
static int kpatch_run(struct kpatch_try *try);
static bool kpatch_checks(const struct kpatch_try *try);
static int kpatch_prewalk(struct kpatch_try *try);
static void kpatch_forget(struct kpatch_try *try);
static void kpatch_record_stop(struct kpatch_try *try);
static int kpatch_walk_stack(struct task_struct *task, struct kpatch_try *try);
static void kpatch_set_op(struct kpatch_try *try, bool running);
static int kpatch_update_cb(void *data);
static int kpatch_check_stacks(struct kpatch_try *try);
static int kpatch_check_task(struct kpatch_try *try, struct task_struct *task);
static int kpatch_check_exiting(struct kpatch_try *try);
static int kpatch_update_publish(struct kpatch_try *try);
static void kpatch_final_targets(struct kpatch_try *try);

/* Then: released, committed, or refused */
static void kpatch_sites_release(struct kpatch_try *try);
static void kpatch_cancel_hooks(struct kpatch_try *try);
static void kpatch_commit(struct kpatch_try *try);
static void kpatch_kobj_remove(struct kobject **kobj);
static bool kpatch_retry(const struct kpatch_request *req,
			 const struct kpatch_refused *r, int ret,
			 unsigned int n);
static const char *kpatch_req_name(const struct kpatch_request *req);
static int kpatch_comm_len(const char *comm);

/* Layer: moving busy tasks */
static void kpatch_movers_new(struct kpatch_try *try, unsigned int max);
static bool kpatch_stop_at(struct kpatch_try *try, struct task_struct *task);
static int kpatch_listed(struct kpatch_try *try);
static bool kpatch_move_out(struct kpatch_try *try, int ret);
static void kpatch_let_go(struct kpatch_try *try);
static void kpatch_movers_free(struct kpatch_try *try);

/* ------------------------------------------------------------------------
 * The request: resolve, check and pin what a patch names
 */

/* Enable @kpmod's patch (@own: kpatch's kpmod, freed here unless enabled). */
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
			kfree(kpmod);
		return ret;
	}
	ret = kpatch_update(&req);
	if (ret)
		kpatch_patch_free(req.add);	/* and kpmod, if own */
	return ret;
}

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
 * @kpmod's patch, its functions and hooks checked and pinned with the patch
 * module and kpatch for every try (an address keeps naming its function).
 * @own: @kpmod is kpatch's, freed with it.  On failure NULL and *@err, and
 * @kpmod stays the caller's.
 */
static __cold struct kpatch_patch *
kpatch_patch_new(struct kpatch_module *kpmod, bool own, int *err)
{
	struct kpatch_func *f = kpmod->funcs;
	struct kpatch_patch *patch;
	int i, k, ret = -ENOMEM;

	patch = kzalloc(struct_size(patch, entries, kpmod->num_funcs),
			GFP_KERNEL);
	if (!patch)
		goto out;
	patch->kpmod = kpmod;
	patch->nr = kpmod->num_funcs;
	ret = -ENODEV;
	if (kpmod->mod && !try_module_get(kpmod->mod)) {
		pr_err("%s: patch module is going away\n", kpmod->name);
		goto out;
	}
	patch->pins[KPATCH_PIN_PATCH] = kpmod->mod;
	for (i = 0, ret = 0; i < kpmod->num_funcs && !ret; i++)
		ret = kpatch_resolve_entry(patch, i, &f[i]);
	for (i = 0; i < KPATCH_NR_HOOKS && !ret; i++)
		ret = kpatch_resolve_hook(patch, i);
	for (i = 0; i < kpmod->num_funcs && !ret; i++)
		for (k = 0; k < kpmod->num_funcs && !ret; k++)
			if (f[k].old_addr == f[i].new_addr) {
				pr_err("%s: new function %pS is also an old function of a patch\n",
				       kpmod->name, (void *)f[i].new_addr);
				ret = -EINVAL;
			} else if (k < i && f[k].old_addr == f[i].old_addr) {
				pr_err("%s: an old function appears twice\n",
				       kpmod->name);
				ret = -EINVAL;
			}
	if (!ret) {
		__module_get(THIS_MODULE);
		patch->pins[KPATCH_PIN_SELF] = THIS_MODULE;
		patch->own = own;
		return patch;
	}
out:
	if (patch)
		kpatch_patch_free(patch);	/* not own: kpmod stays */
	*err = ret;
	return NULL;
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
	e->old_size = func->old_size;
	e->new_size = func->new_size;
	ret = kpatch_resolve(name, "old function", e->old_addr, &e->old_size,
			     NULL, &e->old_mod) ?:
	      kpatch_resolve(name, "new function", e->new_addr, &e->new_size,
			     patch->kpmod->mod, &e->new_mod);
	/* the fentry call, which on IBT kernels comes after the ENDBR */
	if (!ret)
		e->ip = e->old_addr +
			(kpatch_endbr(e->old_addr, true) ? ENDBR_INSN_SIZE : 0);
	return ret;
}

/*
 * Check by kallsyms that @addr starts a function in vmlinux or module text,
 * of *@size bytes unless 0; sets *@size and, in a module, pins it in *@modp
 * (live, or @coming_ok).  An address from the control file is only looked
 * up, never read, until accepted.
 */
static __cold int kpatch_resolve(const char *patch, const char *what,
				 unsigned long addr, unsigned long *size,
				 struct module *coming_ok, struct module **modp)
{
	char sym[KSYM_SYMBOL_LEN], *modname;
	unsigned long start, want = *size;
	enum module_state state;
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
	if (want && want != *size) {
		pr_err("%s: %s %pS is %#lx bytes long, not %#lx\n", patch,
		       what, (void *)addr, *size, want);
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

/* kallsyms' "name+0xoff/0xsize [module]" of @addr, parsed; false: none. */
static __cold bool kpatch_symbol(unsigned long addr, char *buf, unsigned long *start,
				 unsigned long *size, char **mod)
{
	char *plus, *slash;
	unsigned long off;

	sprint_symbol(buf, addr);
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

static bool kpatch_kernel_text(unsigned long addr)
{
	unsigned int level;
	pte_t *pte = lookup_address(addr, &level);

	return pte && pte_present(*pte) && pte_exec(*pte);
}

/*
 * Find loaded module @name and pin it; its kobject keeps struct module
 * alive until try_module_get() decides.  A module in its init may fail it
 * and be freed whatever its refcount: only @coming_ok (a patch module
 * registering its own patch) may be coming.  Returns 0, -ENOENT, -EBUSY
 * (coming) or -EINVAL (going), the last two with *@state.
 */
static __cold int kpatch_get_module(const char *name, struct module *coming_ok,
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

static bool kpatch_module_text(const struct module *mod, unsigned long addr)
{
	return addr - kpatch_mod_text(mod) < kpatch_mod_text_size(mod);
}

/* ENDBR at @addr, or with @sealed_too its seal?  is_endbr(), not exported. */
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

/* Drop every pin of @patch, and free it (with its kpatch_module if own). */
static void kpatch_patch_free(struct kpatch_patch *patch)
{
	struct module **pin = patch->pins;
	unsigned int i;

	for (i = 0; i < patch->nr; i++) {
		module_put(patch->entries[i].old_mod);
		module_put(patch->entries[i].new_mod);
	}
	while (pin < patch->pins + ARRAY_SIZE(patch->pins))
		module_put(*pin++);
	if (patch->own)
		kfree(patch->kpmod);	/* its name and funcs with it */
	kfree(patch);
}

/* ------------------------------------------------------------------------
 * An update, and one try of it
 */

/* Run the update @req asks for, trying again while it is refused (busy). */
static __cold int kpatch_update(struct kpatch_request *req)
{
	struct kpatch_try try;
	unsigned int n;
	int ret;

	lockdep_assert_held(&kpatch_mutex);
	req->start = jiffies;
	for (n = 1;; n++) {
		memset(&try, 0, sizeof(try));
		try.req = req;
		try.writer = current;
		ret = kpatch_try_once(&try);
		if (!ret || !kpatch_retry(req, &try.refused, ret, n))
			return ret;
	}
}

/*
 * One try: prepare, run (again while it moves tasks), commit or undo.
 * noinline: inlined into kpatch_update(), GCC 12 makes the two 170 bytes
 * larger, and kpatch.ko over 40 KiB on 6.12.
 */
static noinline __cold int kpatch_try_once(struct kpatch_try *try)
{
	struct kpatch_patch *add = try->req->add;
	struct kernfs_node *kn;
	int ret;

	if (add) {
		ret = kpatch_check_chain(add, try->req->replace);
		if (ret)
			return ret;
		kn = sysfs_get_dirent(kpatch_patches_kobj->sd, add->kpmod->name);
		if (kn) {
			sysfs_put(kn);
			pr_err("%s '%s' refused: /sys/kernel/kpatch/patches/%s already exists; kpatch makes it itself, the patch module must not\n",
			       try->req->verb, add->kpmod->name, add->kpmod->name);
			return -EEXIST;
		}
		add->kobj = kobject_create_and_add(add->kpmod->name,
						   kpatch_patches_kobj);
		if (!add->kobj)
			return -ENOMEM;
	}
	ret = kpatch_collect(try) ?: kpatch_sites_get(try) ?:
	      kpatch_build_ranges(try);
	ret = ret ?: try->hooks ? kpatch_pre_hooks(try) : 0;
	if (!ret) {
		/* before any task is held: see kpatch_movers_new() */
		kpatch_record_start(try);
		if (kpatch_checks(try))
			kpatch_movers_new(try, 0);
		do
			ret = kpatch_run(try);
		while (ret && kpatch_move_out(try, ret));
		kpatch_movers_free(try);
		if (ret)
			kpatch_cancel_hooks(try);
	}
	kpatch_sites_release(try);	/* those left with no entry */
	if (!ret)
		kpatch_commit(try);
	else if (add)
		kpatch_kobj_remove(&add->kobj);
	kpatch_record_stop(try);	/* after the release: see there */
	kfree(try->whole);
	kfree(try->ranges);
	kfree(try->sites);
	kfree(try->touched);
	kfree(try->parts);
	return ret;
}

/* Would @patch make a redirect lead into another?  Each is one hop. */
static __cold int kpatch_check_chain(struct kpatch_patch *patch, bool replace)
{
	struct kpatch_entry *e, *f;
	struct kpatch_patch *p;
	unsigned int i, k;
	bool new;

	for (i = 0, e = patch->entries; i < patch->nr && !replace; i++, e++)
		list_for_each_entry(p, &kpatch_patches, list)
			for (k = 0, f = p->entries; k < p->nr; k++, f++) {
				new = e->new_addr == f->old_addr;
				if (new)
					pr_err("%s: new function %pS is also an old function of a patch\n",
					       patch->kpmod->name, (void *)e->new_addr);
				else if (e->old_addr == f->new_addr)
					pr_err("%s: old function %pS is the new function of a patch\n",
					       patch->kpmod->name, (void *)e->old_addr);
				if (new || e->old_addr == f->new_addr)
					return -EINVAL;
			}
	return 0;
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
	for (n = 0, i = 0; i < try->nr_parts; i++) {
		p = try->parts[i];
		try->hooks |= !!memchr_inv(p->kpmod->hooks, 0,
					   sizeof(p->kpmod->hooks));
		n += p->nr;
	}
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
 * Give each entry @try adds its function's site, or a new one (an ftrace
 * update each); then put the sites of all its entries in try->sites, each
 * once.  On failure no site made stays: the errno, or -EAGAIN (why in
 * try->refused).
 */
static __cold int kpatch_sites_get(struct kpatch_try *try)
{
	struct kpatch_entry *e = NULL, *f;
	unsigned int i, n;
	int ret = 0;

	for (i = try->first_add; i < try->nr_touched; i++)
		try->touched[i]->site = NULL;
	for (i = try->first_add; i < try->nr_touched && !ret; i++) {
		e = try->touched[i];
		e->site = kpatch_site_find(e->ip) ?: kpatch_site_new(e, &ret);
	}
	/* only a site made here has no entry: none is kept empty */
	for (i = try->first_add; i < try->nr_touched && ret; i++) {
		f = try->touched[i];
		if (f->site && hlist_empty(&f->site->entries))
			kpatch_site_free(f->site);
		f->site = NULL;
	}
	if (ret == -EAGAIN) {
		/* a direct call's owner (a BPF trampoline) is busy: retry */
		try->refused.why = KPATCH_AGAIN;
		try->refused.addr = e->old_addr;
		return ret;
	} else if (ret == -ENOMEM) {
		pr_err("%s '%s' refused: out of memory for the ftrace sites\n",
		       try->req->verb, try->req->add->kpmod->name);
		return ret;
	} else if (ret == -ENOENT) {
		pr_err("%s: old function %pS cannot be traced by ftrace\n",
		       try->req->add->kpmod->name, (void *)e->old_addr);
		return -EINVAL;
	} else if (ret) {
		pr_err("%s '%s' refused: ftrace cannot redirect %pS (%d); is a kprobe or another live patch on it?\n",
		       try->req->verb, try->req->add->kpmod->name,
		       (void *)e->old_addr, ret);
		return ret == -EBUSY ? ret : -EINVAL;
	}
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

/* A new site for @e, hooked, its target 0: calls go on into the old function. */
static struct kpatch_site *kpatch_site_new(struct kpatch_entry *e, int *err)
{
	struct kpatch_site *site = kzalloc(sizeof(*site), GFP_KERNEL);

	*err = -ENOMEM;
	if (!site)
		return NULL;
	site->ip = e->ip;
	site->ops.func = kpatch_ftrace_handler;
	site->ops.flags = KPATCH_FOPS_FLAGS;
	/* the filter refuses (-ENOENT here) an @ip that is no ftrace site */
	*err = ftrace_set_filter_ip(&site->ops, site->ip, 0, 0);
	if (*err == -EINVAL)
		*err = -ENOENT;
	*err = *err ?: register_ftrace_function(&site->ops);
	if (*err) {
		/*
		 * ftrace may have put the ops on its list and taken it off
		 * without waiting for the CPUs in its list function.
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
 * Unhook and free @site, which has no entry (unregister_ftrace_function()
 * waits for its handler and trampoline); if ftrace is dead it stays.
 */
static void kpatch_site_free(struct kpatch_site *site)
{
	lockdep_assert_held(&kpatch_mutex);
	hash_del(&site->node);
	if (WARN_ON_ONCE(unregister_ftrace_function(&site->ops)))
		return;
	ftrace_free_filter(&site->ops);
	module_put(site->mod);
	module_put(THIS_MODULE);
	kfree(site);
}

/* For sort(): unsigned longs, or pointers or ranges by their first field. */
static int kpatch_cmp_ulong(const void *a, const void *b)
{
	unsigned long x = *(const unsigned long *)a;
	unsigned long y = *(const unsigned long *)b;

	return x < y ? -1 : x > y;
}

/*
 * The code that must not run for @try (Documentation.txt, 3.5): for each
 * function whose visible version it changes, the code on top of its site
 * and the old function (a task preempted in the trampoline or handler has
 * its fentry return address on its stack), with pieces; kpatch_mutex keeps
 * it valid.
 */
static int kpatch_build_ranges(struct kpatch_try *try)
{
	struct kpatch_entry *e, *top;
	unsigned int i, n;
	int ret = 0;

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
		if (i >= try->first_add)
			ret = top ? kpatch_add_code(try, top, false) : 0;
		else if (top == e)
			ret = kpatch_add_code(try, e, false);
		else
			continue;	/* not visible: nothing changes */
		ret = ret ?: kpatch_add_code(try, e, true);
	}
	if (ret)
		return ret;
	kpatch_add_whole(try);
	/* Sort and merge, so that one binary search answers each address. */
	sort(try->ranges, try->nr_ranges, sizeof(*try->ranges),
	     kpatch_cmp_ulong, NULL);
	for (i = 1, n = try->nr_ranges ? 1 : 0; i < try->nr_ranges; i++) {
		if (try->ranges[i].start <= try->ranges[n - 1].end)
			try->ranges[n - 1].end = max(try->ranges[n - 1].end,
						     try->ranges[i].end);
		else
			try->ranges[n++] = try->ranges[i];
	}
	try->nr_ranges = n;
	return 0;
}

/* Add @e's old (@old) or new function to the ranges, with its pieces. */
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
	try->ranges[try->nr_ranges++].end = start + size;
	return 0;
}

/* ------------------------------------------------------------------------
 * Layer: a function's pieces
 *
 * What it adds: the compiler may move blocks of a function f into f.cold
 * and f.part.N, functions to kallsyms, that f jumps to: a task asleep in a
 * call from one has no return address in f, yet runs f's code when it
 * wakes.  So the stack check covers
 * each symbol of f's text that a jump of f or of a piece P leads into,
 * named "F.cold*" (F = f or P), or "*.cold*" or "*.part.*" if the jump
 * lands on its first byte.  The scan does not decode: a jump opcode at any
 * byte offset is taken as a jump, and an INT3 (a kprobe's) as each of them;
 * a false jump only
 * makes the check stricter; an optimized kprobe copies out no jump (x86
 * boosts none).  Not followed: vmlinux's static branches and fixups, and
 * indirect jumps (Documentation.txt, 3.7, "Pieces of a function").
 * Without it: a task asleep under f.cold would let an update take f away
 * under it.  Price: about 110 lines; per update a scan of each function
 * it changes, a page-table lookup per jump that leaves it, and a kallsyms
 * lookup per symbol such a jump lands in.
 */

/* Symbols a jump led into that are no piece, remembered to spare lookups. */
#define KPATCH_NOT_PIECES	8
struct kpatch_scan {
	struct kpatch_try *try;
	unsigned int first;		/* the range of f; its pieces after */
	struct module *mod;		/* f's, or NULL: vmlinux */
	unsigned int next;
	struct kpatch_range not[KPATCH_NOT_PIECES];
	/* f's name, the name of the range scanned, a jump's target's */
	char name[KSYM_SYMBOL_LEN], cur[KSYM_SYMBOL_LEN], sym[KSYM_SYMBOL_LEN];
};

static int kpatch_scan_range(struct kpatch_scan *sc, unsigned long start,
			     unsigned long end);
static int kpatch_scan_target(struct kpatch_scan *sc, unsigned long target);

/*
 * Add the pieces of @fn (in @mod, NULL: vmlinux; range @first), scanning
 * each in turn.  Pinned code, maybe changing: each range is a symbol.
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
	sc->name[strcspn(sc->name, " ")] = '\0';
	for (r = first; r < try->nr_ranges && !ret; r++) {
		sprint_symbol_no_offset(sc->cur, try->ranges[r].start);
		sc->cur[strcspn(sc->cur, " ")] = '\0';
		ret = kpatch_scan_range(sc, try->ranges[r].start,
					try->ranges[r].end);
	}
	kfree(sc);
	return ret;
}

/* Scan [@start, @end) for jumps, and @sc's module's tables for its code there. */
static __cold int kpatch_scan_range(struct kpatch_scan *sc, unsigned long start,
				    unsigned long end)
{
	const struct exception_table_entry *x;
	struct module *mod = sc->mod;
	unsigned long a, n;
	unsigned int i;
	int ret = 0;
	s32 rel;
	u8 p[6];

	for (a = start; a < end && !ret; a++) {
		/* each byte read once: a kprobe may change it meanwhile */
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
#ifdef CONFIG_JUMP_LABEL
	for (i = 0; mod && i < mod->num_jump_entries && !ret; i++)
		if (jump_entry_code(&mod->jump_entries[i]) - start < end - start)
			ret = kpatch_scan_target(sc, jump_entry_target(&mod->jump_entries[i]));
#endif
	for (i = 0; mod && i < mod->num_exentries && !ret; i++) {
		x = &mod->extable[i];
		if ((unsigned long)&x->insn + x->insn - start < end - start)
			ret = kpatch_scan_target(sc, (unsigned long)&x->fixup +
						     x->fixup);
	}
	return ret;
}

static __cold bool kpatch_cold_of(const char *sym, const char *fn)
{
	size_t n = strlen(fn);

	return !strncmp(sym, fn, n) && str_has_prefix(sym + n, ".cold");
}

/* A jump may lead to @target: if into a piece of f not yet found, add it. */
static __cold int kpatch_scan_target(struct kpatch_scan *sc, unsigned long target)
{
	struct kpatch_try *try = sc->try;
	struct kpatch_range *r;
	unsigned long start, size;
	unsigned int i;
	char *mod;

	for (i = sc->first; i < try->nr_ranges; i++)
		if (target - try->ranges[i].start <
		    try->ranges[i].end - try->ranges[i].start)
			return 0;	/* f, or a piece scanned or to scan */
	for (r = sc->not; r < sc->not + KPATCH_NOT_PIECES; r++)
		if (target - r->start < r->end - r->start)
			return 0;
	if (!(sc->mod ? kpatch_module_text(sc->mod, target) :
			kpatch_kernel_text(target)) ||
	    !kpatch_symbol(target, sc->sym, &start, &size, &mod) ||
	    !mod != !sc->mod)
		return 0;	/* out of f's text: no piece */
	if (!strstr(sc->sym, ".cold") && !strstr(sc->sym, ".part.")) {
		r = sc->not + sc->next++ % KPATCH_NOT_PIECES;
		r->start = start;
		r->end = start + size;
		return 0;	/* never a piece: remembered */
	}
	if (target == start || kpatch_cold_of(sc->sym, sc->name) ||
	    kpatch_cold_of(sc->sym, sc->cur))
		return kpatch_add_range(try, start, size);
	return 0;
}

/* ------------------------------------------------------------------------
 * Layer: ways into a module
 *
 * What it adds: a redirect into a module leads tasks into it, and by a
 * jump on into any of its code with no frame of the new function left;
 * with no redirect into it left, nothing of kpatch keeps it loaded.  So
 * the update that removes the last one checks its whole text, but for its
 * own kernel threads (Documentation.txt, 3.7).
 * Without it: a task could be left in a module nothing keeps loaded.
 * Price: about 60 lines; such an update is refused while another task is
 * in the module: a kworker in its work item, another module's thread in
 * its exports, a task asleep uninterruptibly in it.
 */

/* The module @e redirects calls into from outside (not itself), or NULL. */
static struct module *kpatch_way_in(const struct kpatch_entry *e)
{
	return e->new_mod == e->old_mod ? NULL : e->new_mod;
}

/* Does a patch that is enabled after @try redirect calls into @mod? */
static bool kpatch_redirected_after(const struct kpatch_try *try,
				    const struct module *mod)
{
	const struct kpatch_request *req = try->req;
	struct kpatch_patch *p;
	unsigned int i;

	list_for_each_entry(p, &kpatch_patches, list)
		for (i = 0; p != req->remove && !req->replace && i < p->nr; i++)
			if (kpatch_way_in(&p->entries[i]) == mod)
				return true;
	for (i = 0; req->add && i < req->add->nr; i++)
		if (kpatch_way_in(&req->add->entries[i]) == mod)
			return true;
	return false;
}

/* Each module that @try takes the last redirect into away from: checked whole. */
static __cold void kpatch_add_whole(struct kpatch_try *try)
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
}

/*
 * Is @addr in a module checked whole, and @task not a thread of it?  Its
 * threads end before it is freed: its exit's kthread_stop() waits for
 * exit_mm() in do_exit() (Documentation.txt, 3.7); an exiting one
 * (PF_EXITING) is checked like any task.
 */
static bool kpatch_in_whole(const struct kpatch_try *try,
			    struct task_struct *task, unsigned long addr)
{
	struct module *mod;
	unsigned int i;

	for (i = 0; i < try->nr_whole; i++) {
		mod = try->whole[i];
		if (within_module(addr, mod) &&
		    ((task->flags & PF_EXITING) ||
		     !within_module_core((unsigned long)kthread_func(task), mod)))
			return true;
	}
	return false;
}

/* ------------------------------------------------------------------------
 * Layer: hooks
 *
 * What it adds: each part of an update runs the hooks of its direction,
 * from kpatch_register(): pre hooks (may sleep, veto); in the callback
 * after the stack check, stop hooks, and on FAILURE the undo hooks of
 * those that ran, in reverse; post hooks on success, or after a later
 * failure the cancel hooks, the other direction's post hooks, in reverse
 * (Documentation.txt, 2.5 and 3.4).  A hook's module is pinned for the
 * whole request and every hook returns before the try ends.  Without it:
 * nobody converts data the new functions read differently.  Price: about
 * 140 lines; nothing for an update whose patches have no hook.
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

/* Part @i's hook of @stage (of its direction); 0 or a negative errno. */
static __cold int kpatch_part_hook(struct kpatch_try *try, unsigned int i,
				   enum kpatch_hook stage)
{
	struct kpatch_patch *patch = try->parts[i];
	enum kpatch_hook h = stage;
	kpatch_hook_t hook;
	int ret;

	if (patch != try->req->add)
		h += KPATCH_PRE_UNPATCH;
	hook = patch->kpmod->hooks[h];
	ret = hook ? hook(patch->kpmod) : 0;
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

static void kpatch_cancel_hook(struct kpatch_try *try, unsigned int i)
{
	struct kpatch_module *kpmod = try->parts[i]->kpmod;
	enum kpatch_hook h = try->parts[i] == try->req->add ?
			     KPATCH_POST_UNPATCH : KPATCH_POST_PATCH;

	if (kpmod->hooks[h])
		kpmod->hooks[h](kpmod);
}

/* After a failed run: the cancel hooks of every part, last first. */
static void kpatch_cancel_hooks(struct kpatch_try *try)
{
	const struct kpatch_refused *r = &try->refused;
	unsigned int i;

	if (r->why == KPATCH_HOOK)
		pr_err("%s '%s' refused: %s hook of '%s' failed (%d); rolled back\n",
		       try->req->verb, kpatch_req_name(try->req),
		       kpatch_hook_names[r->hook], r->hook_patch->kpmod->name,
		       r->hook_ret);
	for (i = try->nr_parts; try->hooks && i--; )
		kpatch_cancel_hook(try, i);
}

/*
 * From the callback: the stop hooks, or with @undo the undo hooks of the
 * first @n, last first; a failing stop hook (it must have changed nothing)
 * has those before it undone.
 * kpatch_hook_cpu tells a hook's call of a changed function from an NMI's.
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
	while ((undo || ret) && n--)
		kpatch_part_hook(try, n, KPATCH_UNDO_PATCH);
	WRITE_ONCE(kpatch_hook_cpu, -1);
	return ret;
}

/* Resolve hook @h: module text kpatch can pin, with ENDBR under IBT. */
static __cold int kpatch_resolve_hook(struct kpatch_patch *patch, int h)
{
	unsigned long addr = (unsigned long)patch->kpmod->hooks[h], size = 0;
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

/* A run: the pre-walk, then stop_machine(); 0, -EBUSY (why) or -ENOMEM. */
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
	if (!ret) {
		kpatch_set_op(try, true);
		WRITE_ONCE(kpatch_failed_ip, 0);
		WRITE_ONCE(kpatch_failed_hook, false);
		ret = stop_machine(kpatch_update_cb, try, cpu_online_mask);
		/* The callback always ends in SUCCESS or FAILURE. */
		old = atomic_xchg(&kpatch_state, KPATCH_STATE_IDLE);
		WARN_ON_ONCE(old != KPATCH_STATE_SUCCESS &&
			     old != KPATCH_STATE_FAILURE);
		if (!ret)
			kpatch_let_go(try);	/* before the grace period */
	}
	kpatch_forget(try);	/* and a grace period */
	kpatch_set_op(try, false);
	kpatch_test_at(KPATCH_TEST_DONE);
	return ret;
}

/* Does @try's stack check look for any code? */
static bool kpatch_checks(const struct kpatch_try *try)
{
	return try->nr_ranges || try->nr_whole;
}

/* ------------------------------------------------------------------------
 * Layer: the pre-walk
 *
 * What it adds: the stack check, before stop_machine(), of the tasks that
 * do not run; the callback then walks only those it could not walk and
 * those a CPU switched to since, recorded by a sched_switch probe
 * (Documentation.txt, 3.5).  Correctness never depends on it: with no
 * record, or one that overflowed, every task, as the seed's check does.  Price: about 140
 * lines; per context switch while a run's record is armed, the probe: 40
 * instructions or so, and for a task not recorded yet a compare-and-swap,
 * an atomic increment the CPUs share and a task reference; per try a
 * record of max(256, tasks / 8) tasks, and a hash of them twice as large.
 *
 * Why the callback may trust the pre-walk of a task T it does not walk:
 * 1. The walk saw T's stack as it was: T->pi_lock is held and T is
 *    blocked, not on a runqueue nor on a CPU, so T runs again only when
 *    woken, and try_to_wake_up() takes T->pi_lock first (get_wchan()'s
 *    rule; on_cpu covers a task still switching out).
 * 2. A task's kernel stack changes only while it runs (ptrace writes only
 *    the user register frame, where every walk stops).
 * 3. T runs again only after a CPU switches to it, and __schedule() calls
 *    the sched_switch tracepoint before it runs.  The probe was registered
 *    and the record armed before the walk, and the switch follows a
 *    wake-up that took T->pi_lock after the walk dropped it, then the
 *    runqueue's lock: so its probe sees the record armed, and records T.
 * 4. In the callback no CPU switches; a probe that recorded T returned
 *    before its CPU's stopper started, and the rendezvous (fully ordered
 *    atomics) orders its stores before the callback.
 * 5. The pre-walk meets every task on the task list (tasks are added at
 *    its end, or replace a leader in exec, running).  One it did not meet
 *    is new -- it ran, and is recorded, or has only the frame fork gave
 *    it -- or has left the list: exiting tasks are walked whole.
 * A recorded task is pinned until the run ends.
 */

/*
 * The tasks the callback walks, pinned, each once: those the pre-walk did
 * not walk, those switched to since.  @seen: the same, hashed; @last: each
 * CPU's last, sparing that lookup.  @n: taken; above @max, overflowed.
 */
struct kpatch_record {
	atomic_t n;
	unsigned int max, bits;
	bool armed;
	struct rcu_head rcu;
	struct task_struct **last, **seen;
	struct task_struct *task[];
};

/* The sched_switch tracepoint (the others: "Layer: exiting tasks"). */
static struct tracepoint *kpatch_switch_tp;

/*
 * Record @task, pinned, once; lock-free.  @seen has room for @max tasks and
 * one per CPU, the most that pass the first test before @n overflows.
 */
static void notrace kpatch_record_task(struct kpatch_record *rec,
				       struct task_struct *task)
{
	unsigned int h = hash_ptr(task, rec->bits), i;
	struct task_struct *t;

	for (i = 0; atomic_read(&rec->n) < rec->max && i < BIT(rec->bits);
	     i++, h = (h + 1) & (BIT(rec->bits) - 1)) {
		t = cmpxchg(&rec->seen[h], NULL, task);
		if (t == task)
			return;
		if (!t)
			break;
	}
	i = atomic_inc_return(&rec->n) - 1;
	if (i < rec->max)
		rec->task[i] = get_task_struct(task);
}

/* sched_switch, while a try runs: the task a CPU switches to, recorded. */
static void notrace kpatch_switch_probe(void *data, bool preempt,
					struct task_struct *prev,
					struct task_struct *next,
					unsigned int prev_state)
{
	struct kpatch_record *rec = data;
	struct task_struct **last;

	if (!READ_ONCE(rec->armed) || (next->flags & PF_IDLE))
		return;
	last = &rec->last[raw_smp_processor_id()];
	if (*last != next) {
		*last = next;
		kpatch_record_task(rec, next);
	}
}

/* A record for @try's runs, and its probe, if it can; before any hold. */
static __cold void kpatch_record_start(struct kpatch_try *try)
{
	struct kpatch_record *rec;
	struct task_struct *g, *t;
	unsigned int n = 0, i;

	if (!kpatch_checks(try) || !kpatch_switch_tp)
		return;
	rcu_read_lock();
	for_each_process_thread(g, t)
		n++;
	rcu_read_unlock();
	n = max(n / 8, 256U);
	i = order_base_2(2 * n + nr_cpu_ids);
	rec = kvzalloc(struct_size(rec, task, n + nr_cpu_ids + BIT(i)),
		       GFP_KERNEL);
	if (!rec)
		return;
	rec->max = n;
	rec->bits = i;
	rec->last = rec->task + n;
	rec->seen = rec->last + nr_cpu_ids;
	if (tracepoint_probe_register(kpatch_switch_tp, kpatch_switch_probe,
				      rec)) {
		kvfree(rec);
		return;
	}
	try->rec = rec;
}

static int kpatch_prewalk_task(struct task_struct *task,
			       struct kpatch_try *try);

/* Pre-walk every task: -EBUSY at a task it cannot move, or having listed all. */
static int kpatch_prewalk(struct kpatch_try *try)
{
	struct kpatch_record *rec = try->rec;
	struct task_struct *g, *t;
	int ret = 0;

	if (!kpatch_checks(try))
		return 0;
	if (rec) {
		memset(rec->last, 0,
		       (nr_cpu_ids + BIT(rec->bits)) * sizeof(*rec->last));
		atomic_set(&rec->n, 0);
		WRITE_ONCE(rec->armed, true);	/* before any walk: see 3. */
	}
	/* for_each_process_thread() is two loops: leave with goto. */
	rcu_read_lock();
	for_each_process_thread(g, t) {
		ret = kpatch_prewalk_task(t, try);
		if (ret)
			goto out;
	}
out:
	rcu_read_unlock();
	return ret ?: kpatch_listed(try);
}

/* Is @task, its pi_lock held, blocked (see 1. above)?  @state: its state. */
static bool kpatch_blocked(struct task_struct *task, unsigned int *state)
{
	*state = READ_ONCE(task->__state);
	/* on_rq after the state, as in try_to_wake_up() and get_wchan(). */
	smp_rmb();
	if (*state == TASK_RUNNING || *state == TASK_WAKING ||
	    *state == TASK_DEAD || READ_ONCE(task->on_rq))
		return false;
	/* on_cpu after on_rq, as in try_to_wake_up(). */
	smp_rmb();
	/* pairs with on_cpu's release in finish_task(): its stack is final */
	return !smp_load_acquire(&task->on_cpu) && task_stack_page(task) &&
	       refcount_read(&task->stack_refcount);
}

/*
 * Walk @task if kept from running, else record it; nonzero: in the way and
 * not to be moved (kpatch_stop_at()), and the pre-walk stops.
 */
static int kpatch_prewalk_task(struct task_struct *task,
			       struct kpatch_try *try)
{
	unsigned long flags;
	unsigned int state;
	int ret = 0;

	raw_spin_lock_irqsave(&task->pi_lock, flags);
	if (kpatch_blocked(task, &state))
		ret = kpatch_walk_stack(task, try) && kpatch_stop_at(try, task);
	else if (state != TASK_DEAD && try->rec)
		kpatch_record_task(try->rec, task);
	raw_spin_unlock_irqrestore(&task->pi_lock, flags);
	return ret ? -EBUSY : 0;
}

/*
 * The end of a run: the record disarmed, a grace period, what it recorded
 * dropped.  Callers that read a state other than IDLE may still look at
 * entry->op or an unlinked entry: only NMIs can (stop_machine() excluded
 * the rest), RCU readers like the probe.
 */
static __cold void kpatch_forget(struct kpatch_try *try)
{
	struct kpatch_record *rec = try->rec;
	unsigned int i;

	if (rec)
		WRITE_ONCE(rec->armed, false);
	synchronize_rcu();
	for (i = 0; rec && i < min_t(unsigned int, atomic_read(&rec->n),
				     rec->max); i++)
		put_task_struct(rec->task[i]);
}

/*
 * The try ends.  A probe may still run: the record is freed after a grace
 * period, and kpatch_exit() waits for the probe's code.  Called once the
 * sites are released: this wakes kthreads as its grace periods end, and a
 * task runnable when the RCU-tasks wait of unregister_ftrace_function()
 * looks at it is looked at again only HZ/10 later (6.12: 126 of 523 ms of
 * an unpatch at 100,000 tasks).
 */
static __cold void kpatch_record_stop(struct kpatch_try *try)
{
	if (!try->rec)
		return;
	tracepoint_probe_unregister(kpatch_switch_tp, kpatch_switch_probe,
				    try->rec);
	kvfree_rcu(try->rec, rcu);
}

/* ------------------------------------------------------------------------
 * The stack check
 */

static void kpatch_refuse(struct kpatch_try *try, enum kpatch_refusal why,
			  struct task_struct *task, unsigned long addr);

/* Walk @task's stack (it cannot run) by x86's reliable stacktrace rules. */
static int kpatch_walk_stack(struct task_struct *task, struct kpatch_try *try)
{
	unsigned int lo, hi, mid;
	struct unwind_state state;
	struct pt_regs *regs;
	unsigned long addr;

	/*
	 * The unwinder gives back what a kretprobe took only for current or
	 * a task that is not running (some kernels warn, others fail the
	 * walk): a preempted task with such a return address is unreliable.
	 */
	if (task != current && task_is_running(task) && kpatch_rethooks(task))
		goto unreliable;
	for (unwind_start(&state, task, NULL, NULL);
	     !unwind_done(&state) && !unwind_error(&state);
	     unwind_next_frame(&state)) {
		regs = unwind_get_entry_regs(&state, NULL);
		if (regs && user_mode(regs))
			return 0;
		/* an in-kernel interrupt frame: frame pointers cannot vouch */
		if (regs && IS_ENABLED(CONFIG_FRAME_POINTER))
			break;
		addr = unwind_get_return_address(&state);
		if (!addr)
			break;
		for (lo = 0, hi = try->nr_ranges; lo < hi; ) {
			mid = lo + (hi - lo) / 2;
			if (addr < try->ranges[mid].start)
				hi = mid;
			else if (addr >= try->ranges[mid].end)
				lo = mid + 1;
			else
				break;
		}
		if (lo < hi || (try->nr_whole && kpatch_in_whole(try, task, addr))) {
			kpatch_refuse(try, KPATCH_BUSY, task, addr);
			return -EBUSY;
		}
	}
	if (unwind_done(&state) && !unwind_error(&state))
		return 0;
unreliable:
	kpatch_refuse(try, KPATCH_UNRELIABLE, task, 0);
	return -EBUSY;
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

/*
 * The stop_machine() callback, interrupts off on every CPU: the only place
 * where entries change, and where sites change target during an update;
 * who may still call a changed function meanwhile: see kpatch_state.
 *
 * Why a caller never mixes versions, though the fast path looks at no
 * state: only the sites of @try change version, and the callback
 *  1. sets the target of each of its sites to KPATCH_TARGET_SLOW, so that
 *     their calls go through the state machine, then leaves IDLE;
 *  2. waits until every other CPU's stopper has seen that.  A caller that
 *     read an old target before step 1 either has the old function's
 *     fentry return address on its stack while preempted (which the stack
 *     check refuses), or runs with preemption or interrupts off, or in an
 *     NMI, and then holds up its CPU's stopper until it is done;
 *  3. checks the stacks, runs the stop hooks, changes the entries, then
 *     decides SUCCESS or FAILURE (or loses that race to a caller, which
 *     sets FAILURE; the undo hooks then roll the stop hooks back);
 *  4. writes the final targets, which give the version the state gives.
 * So every call after step 2 sees one version: the old one until the state
 * is decided, the decided one after, and the state never goes back from
 * SUCCESS or FAILURE while the callback runs.  The stop hooks' data
 * follows the same rule: see kpatch_update_publish().
 */
static int kpatch_update_cb(void *data)
{
	struct kpatch_try *try = data;
	unsigned int i;
	int ret;

	/*
	 * The first CPU updates; the others wait until the state has left
	 * IDLE and say so.  The acquire pairs with the release of UPDATING
	 * below; atomic_inc_return() is fully ordered, so whatever the CPU
	 * ran before (an NMI included) happens before its answer.
	 */
	if (atomic_inc_return(&try->cpus_in) != 1) {
		while (atomic_read_acquire(&kpatch_state) == KPATCH_STATE_IDLE)
			cpu_relax();
		atomic_inc_return(&try->cpus_seen);
		return 0;
	}
	kpatch_test_at(KPATCH_TEST_ENTER);

	/*
	 * Step 1.  entry->op, written before stop_machine(), is ordered before
	 * these stores by its rendezvous; the marks go before the state (the
	 * release), and no entry changes before step 2 has seen every other
	 * CPU answer after reading UPDATING: no barrier between the state and
	 * the entries.
	 */
	for (i = 0; i < try->nr_sites; i++)
		WRITE_ONCE(try->sites[i]->target, KPATCH_TARGET_SLOW);
	atomic_set_release(&kpatch_state, KPATCH_STATE_UPDATING);

	/* Step 2.  The acquire pairs with the other CPUs' answers. */
	while (atomic_read_acquire(&try->cpus_seen) < num_online_cpus() - 1)
		cpu_relax();
	kpatch_test_at(KPATCH_TEST_UPDATING);

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
 * The activeness safety check, from the callback (Documentation.txt, 3.5):
 * current, init_task, the tasks recorded or else every task (the list
 * changes under tasklist_lock, irqs off: not now), the exiting tasks.
 * Other CPUs' idle tasks are parked in init_task's idle-loop chain;
 * offline CPUs are not covered (Documentation.txt, 4).
 */
static int kpatch_check_stacks(struct kpatch_try *try)
{
	struct kpatch_record *rec = try->rec;
	struct task_struct *g, *t;
	unsigned int i, n;
	int ret;

	if (!kpatch_checks(try))
		return 0;
	ret = kpatch_check_task(try, current) ?:
	      kpatch_check_task(try, &init_task);
	n = rec ? atomic_read(&rec->n) : 0;
	if (rec && n <= rec->max) {
		for (i = 0; i < n && !ret; i++)
			ret = kpatch_check_task(try, rec->task[i]);
	} else if (!ret) {
		rcu_read_lock();
		for_each_process_thread(g, t) {
			ret = kpatch_check_task(try, t);
			if (ret)
				goto out;
		}
out:
		rcu_read_unlock();
	}
	return ret ?: kpatch_check_exiting(try) ?: kpatch_listed(try);
}

/* From the callback: check @task's stack; nonzero: stop (kpatch_stop_at()). */
static int kpatch_check_task(struct kpatch_try *try, struct task_struct *task)
{
	int ret;

	/*
	 * A task on another CPU is its stopper, with current's chain down to
	 * multi_cpu_stop(); what its loop calls, the state machine covers.
	 */
	if (task != current && READ_ONCE(task->on_cpu)) {
		WARN_ON_ONCE(!(task->flags & PF_KTHREAD));
		return 0;
	}
	/* exited for good: no stack left, and no reference moves meanwhile */
	if (!task_stack_page(task) || !refcount_read(&task->stack_refcount))
		return 0;
	ret = kpatch_walk_stack(task, try);
	return ret && kpatch_stop_at(try, task) ? ret : 0;
}

/* ------------------------------------------------------------------------
 * Layer: exiting tasks
 *
 * What it adds: a task leaves the task list in exit_notify() but runs the
 * tail of do_exit(), and may sleep there: kpatch keeps a set of the tasks
 * from sched_process_exit to sched_process_free, and of those exiting at
 * load, which the callback walks (Documentation.txt, 3.7).  Under
 * kpatch_exiting_lock, a raw spinlock taken with interrupts off (the
 * probes and the callback may not sleep, on PREEMPT_RT either): so no CPU
 * that stop_machine() stopped holds it when the callback takes it.  A
 * work item refills the records' free list (the exit probe allocates at a
 * burst, not on PREEMPT_RT); a task that finds none has every later
 * stack-checked update refused.
 * Without it: a task in an exit handler that an update changes goes
 * unchecked.  Price: about 200 lines, 64 records (512 on PREEMPT_RT); per
 * exit of a task two probes.
 */
#define KPATCH_EXITING_BITS	4	/* the tasks between exit and free: few */
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

/* From the callback: the exiting tasks that have left the task list. */
static int kpatch_check_exiting(struct kpatch_try *try)
{
	struct kpatch_exiting *e;
	int bkt, ret = 0;

	raw_spin_lock(&kpatch_exiting_lock);
	if (kpatch_exiting_lost) {	/* since kpatch_run() looked */
		try->refused.why = KPATCH_LOST;
		ret = -EBUSY;
	}
	hash_for_each(kpatch_exiting_hash, bkt, e, node)
		if (!ret && !pid_alive(e->task))
			ret = kpatch_check_task(try, e->task);
	raw_spin_unlock(&kpatch_exiting_lock);
	return ret;
}

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

/* Put @task into the set, once; whether the free list needs refilling. */
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

/* The free list to between @want and twice the reserve; false: no memory. */
static __cold bool kpatch_exiting_fill(unsigned int want)
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

static __cold void kpatch_exiting_refill(struct work_struct *work)
{
	kpatch_test_at(KPATCH_TEST_REFILL);
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

#define KPATCH_TPS_END	(kpatch_tps + ARRAY_SIZE(kpatch_tps))

/* Never called: type-checks each probe (its tracepoint is found by name). */
static inline void __maybe_unused kpatch_probe_types(void)
{
	register_trace_sched_switch(kpatch_switch_probe, NULL);
	register_trace_sched_process_exit(kpatch_exit_probe, NULL);
	register_trace_sched_process_free(kpatch_free_probe, NULL);
}

static __cold void kpatch_tp_find(struct tracepoint *tp, void *priv)
{
	struct kpatch_tp *t;

	for (t = kpatch_tps; t < KPATCH_TPS_END; t++)
		if (!strcmp(tp->name, t->name))
			t->tp = tp;
	if (!strcmp(tp->name, "sched_switch"))	/* "Layer: the pre-walk" */
		kpatch_switch_tp = tp;
}

static void kpatch_exiting_stop(struct kpatch_tp *end);

/* Follow exiting tasks, those already exiting too (Documentation.txt, 3.7). */
static __cold int kpatch_exiting_start(void)
{
	struct task_struct *g, *t;
	struct kpatch_tp *tp;
	unsigned long flags;
	unsigned int n = 0;
	int ret = 0;

	if (!kpatch_exiting_fill(KPATCH_EXITING_RESERVE)) {
		kpatch_exiting_stop(kpatch_tps);
		return -ENOMEM;
	}
	for_each_kernel_tracepoint(kpatch_tp_find, NULL);
	for (tp = kpatch_tps; tp < KPATCH_TPS_END; tp++) {
		ret = tp->tp ? tracepoint_probe_register(tp->tp, tp->probe, NULL) :
			       -ENOENT;
		if (ret) {
			pr_err("cannot follow exiting tasks: tracepoint %s (%d)\n",
			       tp->name, ret);
			kpatch_exiting_stop(tp);
			return ret;
		}
	}
	rcu_read_lock();
	for_each_process_thread(g, t)
		n += !!(READ_ONCE(t->flags) & PF_EXITING);
	rcu_read_unlock();
	if (!kpatch_exiting_fill(n + KPATCH_EXITING_RESERVE)) {
		kpatch_exiting_stop(KPATCH_TPS_END);
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

/* Unregister the probes before @end, newest first, and free every record. */
static __cold void kpatch_exiting_stop(struct kpatch_tp *end)
{
	struct kpatch_exiting *e;
	struct hlist_node *tmp;
	int bkt;

	while (end-- > kpatch_tps)
		tracepoint_probe_unregister(end->tp, end->probe, NULL);
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

/* SUCCESS or FAILURE from UPDATING; a call of @ip that fails it is logged. */
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
 * Step 3 of kpatch_update_cb(): the stop hooks convert the data, then the
 * new entries go first in their sites.  No new function runs before
 * SUCCESS (slow path, after the smp_wmb() below) or a final target (fast
 * path, a release): both after the hooks' stores.  A changed function
 * called meanwhile runs the old version, maybe on half-converted data, and
 * fails the update: the undo hooks roll the data back before any CPU is
 * released (Documentation.txt, 3.4).
 */
static int kpatch_update_publish(struct kpatch_try *try)
{
	unsigned int i;
	int state, ret;

	/* a killed writer's update must not take effect */
	if (!try->req->must && fatal_signal_pending(try->writer)) {
		try->refused.why = KPATCH_KILLED;
		ret = -EBUSY;
	} else {
		ret = try->hooks ? kpatch_stop_hooks(try, false, 0) : 0;
	}
	if (ret) {
		kpatch_state_finish(KPATCH_STATE_FAILURE, 0);
		return ret;
	}
	for (i = try->first_add; i < try->nr_touched; i++)
		hlist_add_head_rcu(&try->touched[i]->node,
				   &try->touched[i]->site->entries);
	/*
	 * Hooks and entries before SUCCESS: kpatch_redirect_slow() (the
	 * cmpxchg of a successful kpatch_state_finish() orders them too).
	 */
	smp_wmb();
	kpatch_test_at(KPATCH_TEST_PUBLISHED);
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
 * Step 4 of kpatch_update_cb(), and the end of a gate: the final targets.
 * Each a release, paired with the acquire in kpatch_ftrace_handler(): a
 * call that reads one sees the entries and the hooks' data.
 */
static void kpatch_final_targets(struct kpatch_try *try)
{
	struct kpatch_entry *top;
	unsigned int i;

	for (i = 0; i < try->nr_sites; i++) {
		top = kpatch_top(try->sites[i]);
		/* pairs with the handler's acquire: see above */
		smp_store_release(&try->sites[i]->target,
				  top ? top->new_addr : 0);
	}
}

/* ------------------------------------------------------------------------
 * After the run: the sites released, the update committed
 */

/* After the try's grace period: each site left with no entry released. */
static void kpatch_sites_release(struct kpatch_try *try)
{
	unsigned int i;

	for (i = 0; i < try->nr_sites; i++)
		if (hlist_empty(&try->sites[i]->entries))
			kpatch_site_free(try->sites[i]);
}

/*
 * @try took effect: the patches out and in, the post hooks, then the
 * removed patches' pins dropped (their hooks' modules may go) and freed.
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

/* Remove a patch's sysfs directory now, whoever else holds it. */
static void kpatch_kobj_remove(struct kobject **kobj)
{
	kobject_del(*kobj);
	kobject_put(*kobj);
	*kobj = NULL;
}

/* ------------------------------------------------------------------------
 * A refused try: tried again later
 */

static void kpatch_report(const struct kpatch_request *req,
			  const struct kpatch_refused *r, unsigned int n,
			  unsigned int tries, bool last, unsigned int delay);

/*
 * Try @n of @req failed with @ret, for @r: if busy, log why and sleep,
 * mutex held, unless last, signalled, or it can only be refused again.
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
	if (r->why != KPATCH_KILLED) {
		/* a real signal ends the retries, TIF_NOTIFY_SIGNAL alone not */
		last = n >= tries || task_sigpending(current) ||
		       fatal_signal_pending(current) ||
		       time_after(jiffies, req->start +
				  msecs_to_jiffies(KPATCH_RETRY_TOTAL_MS)) ||
		       (r->why == KPATCH_RAN && !READ_ONCE(kpatch_failed_nmi));
		kpatch_report(req, r, n, tries, last, delay);
		if (last)
			return false;
		/* not freezable: the write holds its file system's freeze protection */
		schedule_timeout_killable(msecs_to_jiffies(delay));
		if (!fatal_signal_pending(current))
			return true;
	}
	/* a killed writer's update must not take effect: no more tries */
	pr_err("%s '%s' refused after %u %s: its writer was killed\n",
	       req->verb, kpatch_req_name(req), n, n == 1 ? "try" : "tries");
	return false;
}

/* A task's name, for %*pE: it chooses its own, newlines included. */
static int kpatch_comm_len(const char *comm)
{
	return strnlen(comm, TASK_COMM_LEN);
}

/* Log why try @n was refused: an error if it was the @last, else a warning. */
static __cold void kpatch_report(const struct kpatch_request *req,
				 const struct kpatch_refused *r,
				 unsigned int n, unsigned int tries,
				 bool last, unsigned int delay)
{
	unsigned long ip = READ_ONCE(kpatch_failed_ip);
	char why[KSYM_SYMBOL_LEN + 128];

	if (r->why == KPATCH_BUSY)
		snprintf(why, sizeof(why), "%pS is on the stack of pid %d (%*pE)",
			 (void *)r->addr, r->pid, kpatch_comm_len(r->comm),
			 r->comm);
	else if (r->why == KPATCH_UNRELIABLE)
		snprintf(why, sizeof(why),
			 "the stack of pid %d (%*pE) cannot be walked reliably",
			 r->pid, kpatch_comm_len(r->comm), r->comm);
	else if (r->why == KPATCH_LOST)
		snprintf(why, sizeof(why), "an exiting task could not be recorded");
	else if (r->why == KPATCH_AGAIN)
		snprintf(why, sizeof(why),
			 "ftrace cannot redirect %pS now: the owner of a direct call there (a BPF trampoline) is busy",
			 (void *)r->addr);
	else if (!WARN_ON_ONCE(r->why != KPATCH_RAN))
		snprintf(why, sizeof(why), "%pS was called %s", (void *)ip,
			 READ_ONCE(kpatch_failed_hook) ?
			 "by a stop or undo hook, which must not call what its update changes" :
			 READ_ONCE(kpatch_failed_nmi) ?
			 "during the update, from an NMI; rolled back" :
			 "during the update (called by kpatch's own update path: stop_machine() or the stack check); it can never be patched");
	else
		return;
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

static const char *kpatch_req_name(const struct kpatch_request *req)
{
	return (req->add ?: req->remove)->kpmod->name;
}

/* ------------------------------------------------------------------------
 * Layer: moving busy tasks
 *
 * What it adds: an update takes effect only when no task is in the code it
 * changes, which a task asleep there never allows, nor, preemptible, a hot
 * function.  A run that finds user tasks in its way queues its hold on
 * each it can move (TWA_RESUME), kicks one asleep interruptibly there
 * (TWA_SIGNAL); turns the gate on, whose slow path claims each user task
 * that calls the try's functions, to hold it too; waits until they are
 * held at their return to user space, and runs again.  They go on when
 * the try ends (Documentation.txt, 3.6).  Without it (move=N): a try refused by a
 * sleeping or preempted task fails once the retries are spent.  Price:
 * about 350 lines; nothing per call but while a gate is on; per try the
 * list of the tasks in the way, and a gate if it moves any.
 */
static bool kpatch_move = true;
module_param_named(move, kpatch_move, bool, 0644);
MODULE_PARM_DESC(move,
		 "move user tasks that an update finds in its way out of it (default Y)");

/* Rounds of a try, a round's wait for the tasks it moved, the sweeps' period. */
#define KPATCH_MOVE_ROUNDS	8
#define KPATCH_MOVE_WAIT_MS	500
#define KPATCH_MOVE_SWEEP_MS	10

/*
 * A task the try moved or the gate caught: claimed by a cmpxchg of @task,
 * pinned until the try ends (no other task can have its address
 * meanwhile).  @queued: the mover's, under the mutex; @deferred, @out: the
 * task's.  @kick: two fake signals (Documentation.txt, 3.6); @kicking[i]:
 * kick[i] queued and not run yet, set by the mover, cleared by the kick.
 */
struct kpatch_slot {
	struct task_struct *task;
	bool queued, deferred, out, kicking[2];
	struct callback_head work, kick[2];
	struct kpatch_gate *gate;
};

/*
 * The gate of a try: @ref, the try's and one per queued hold; @mover, the
 * writer, never held; @claims, under @marks for the slow path; @done, the
 * tasks go on.  Slots hash by task pointer, probed linearly.
 */
struct kpatch_gate {
	refcount_t ref;
	struct task_struct *mover;
	atomic_t claims;
	unsigned int bits, marks;
	bool done;
	struct kpatch_slot slot[];
};

/* A task in the way, pinned, and how to move it (TWA_SIGNAL or TWA_RESUME). */
struct kpatch_blocker {
	struct task_struct *task;
	enum task_work_notify_mode how;
	struct kpatch_slot *slot;
};

/*
 * A try's tasks in the way (last run; @seen: listed or not), its gate, its
 * rounds; under kpatch_mutex.
 */
struct kpatch_movers {
	unsigned int nr, max, seen, rounds;
	bool stuck;			/* a task in the way cannot be moved */
	bool held;			/* ... being held: see kpatch_stop_at() */
	struct kpatch_gate *gate;
	struct kpatch_blocker blockers[];
};

/* Held tasks wait on kpatch_hold_wq, the mover on kpatch_out_wq. */
static DECLARE_WAIT_QUEUE_HEAD(kpatch_hold_wq);
static DECLARE_WAIT_QUEUE_HEAD(kpatch_out_wq);
static bool kpatch_held_ever;
static int kpatch_move_one(struct kpatch_try *try, struct kpatch_blocker *b);
static struct kpatch_slot *kpatch_gate_claim(struct kpatch_gate *g,
					     struct task_struct *task,
					     bool claim);
static bool kpatch_gate_queue(struct kpatch_gate *g, struct kpatch_slot *s);
static void kpatch_gate_sweep(struct kpatch_gate *g);
static void kpatch_gate_on(struct kpatch_try *try);
static bool kpatch_move_wait(struct kpatch_try *try);
static void kpatch_hold_fn(struct callback_head *work);
static void kpatch_kick0_fn(struct callback_head *work);
static void kpatch_kick1_fn(struct callback_head *work);
static void kpatch_gate_put(struct kpatch_gate *g);

/*
 * The movers of @try, for @max tasks in the way (0: the record's size):
 * before its first run, and again, keeping what they hold, when the first
 * run found more; never while a task is held, which reclaim may wait for
 * (a FUSE server).  None if it may not move tasks, or no memory.
 */
static __cold void kpatch_movers_new(struct kpatch_try *try, unsigned int max)
{
	struct kpatch_movers *m = try->movers;

	if (!READ_ONCE(kpatch_move) || try->req->no_move)
		return;
	max = max ?: try->rec ? try->rec->max : 256;
	try->movers = kvzalloc(struct_size(m, blockers, max), GFP_KERNEL);
	if (!try->movers) {
		try->movers = m;	/* a shorter list: more rounds */
		return;
	}
	if (m)
		memcpy(try->movers, m, struct_size(m, blockers, m->nr));
	try->movers->max = max;
	kvfree(m);
}

/* How @task, in the way and kept from running, can be moved, if at all. */
static __cold enum task_work_notify_mode kpatch_movable(const struct kpatch_try *try,
							struct task_struct *task)
{
	unsigned int state = READ_ONCE(task->__state);

	if (task == try->writer ||
	    (task->flags & (PF_EXITING | PF_KTHREAD | PF_IO_WORKER |
			    PF_USER_WORKER)))
		return TWA_NONE;
	if (state & TASK_INTERRUPTIBLE)
		return TWA_SIGNAL;
	return state == TASK_RUNNING && READ_ONCE(task->on_rq) ? TWA_RESUME :
								 TWA_NONE;
}

/*
 * @task, kept from running, is in the way: list it and go on, or stop
 * (true) and name it.  One held already (out) is in the way where the hold
 * sleeps: the update changes code the hold runs in, and moving stops.
 */
static __cold bool kpatch_stop_at(struct kpatch_try *try, struct task_struct *task)
{
	struct kpatch_movers *m = try->movers;
	struct kpatch_slot *s = NULL;
	enum task_work_notify_mode how;
	struct kpatch_blocker *b;

	how = kpatch_movable(try, task);
	if (m && m->gate)
		s = kpatch_gate_claim(m->gate, task, how != TWA_NONE);
	if (s && READ_ONCE(s->out) && !(task->flags & PF_EXITING)) {
		m->held = true;		/* an exiting task's hold only goes on */
		how = TWA_NONE;
	}
	if (!m || how == TWA_NONE) {
		if (m)
			m->stuck = true;	/* moving the others is no use */
		return true;
	}
	if (m->seen++ < m->max) {	/* else moved by a later round */
		b = &m->blockers[m->nr++];
		b->task = get_task_struct(task);
		b->how = how;
		b->slot = s;
	}
	return false;
}

/* At the end of a walk that listed tasks in the way: -EBUSY, for the last. */
static __cold int kpatch_listed(struct kpatch_try *try)
{
	return try->movers && try->movers->nr ? -EBUSY : 0;
}

/*
 * Run of @try refused with @ret: move the tasks listed out, say whom, turn
 * the gate on, wait, drop them.  Whether to run again: each was moved,
 * rounds are left, and the writer was not killed (its write then changes
 * nothing) unless @must.
 */
static __cold bool kpatch_move_out(struct kpatch_try *try, int ret)
{
	struct kpatch_request *req = try->req;
	struct kpatch_movers *m = try->movers;
	char who[8 * (TASK_COMM_LEN + 24)];
	unsigned int i, moved = 0;
	struct task_struct *t;
	size_t len = 0;
	int r = 0;
	bool go;

	lockdep_assert_held(&kpatch_mutex);
	go = ret == -EBUSY && (req->must || !fatal_signal_pending(current));
	if (m && m->held) {
		pr_err("%s '%s': moving stops: pid %d (%*pE) is held out of the way, yet at %pS: the update changes code the hold runs in\n",
		       req->verb, kpatch_req_name(req), try->refused.pid,
		       kpatch_comm_len(try->refused.comm), try->refused.comm,
		       (void *)try->refused.addr);
		req->no_move = true;
		m->held = false;
	}
	if (!m)
		return false;
	go = go && m->nr && !m->stuck && ++m->rounds <= KPATCH_MOVE_ROUNDS;
	if (go && !m->gate) {	/* the first round: sized from its tasks */
		if (m->seen > m->max) {
			kpatch_movers_new(try, m->seen);
			m = try->movers;
		}
		i = order_base_2(2 * m->seen + 128);
		m->gate = kvzalloc(struct_size(m->gate, slot, BIT(i)), GFP_KERNEL);
		if (m->gate) {
			refcount_set(&m->gate->ref, 1);
			m->gate->mover = try->writer;
			m->gate->bits = i;
			m->gate->marks = BIT(i - 1);
		}
	}
	go = go && m->gate;
	for (i = 0; i < m->nr && go && r >= 0; i++) {
		r = kpatch_move_one(try, &m->blockers[i]);
		t = m->blockers[i].task;
		if (r > 0 && moved++ < 8)
			len += scnprintf(who + len, sizeof(who) - len,
					 "%spid %d (%*pE)", moved > 1 ? ", " : "",
					 t->pid, kpatch_comm_len(t->comm), t->comm);
	}
	go = go && r >= 0;
	if (go) {
		if (moved > 8)
			scnprintf(who + len, sizeof(who) - len,
				  ", and %u more", moved - 8);
		if (moved)
			pr_notice("%s '%s' busy: moving %u task%s out of the way: %s\n",
				  req->verb, kpatch_req_name(req), moved,
				  moved == 1 ? "" : "s", who);
		kpatch_gate_on(try);
		go = kpatch_move_wait(try);
	}
	for (i = 0; i < m->nr; i++)
		put_task_struct(m->blockers[i].task);
	m->nr = 0;
	m->seen = 0;
	m->stuck = false;
	return go;
}

/* Still asleep in the way?  Else a kick would end a call not ours to end. */
static __cold bool kpatch_still_in_way(struct kpatch_try *try,
				       struct task_struct *task)
{
	struct kpatch_refused why = try->refused;	/* what the run says */
	unsigned long flags;
	unsigned int state;
	bool ret;

	raw_spin_lock_irqsave(&task->pi_lock, flags);
	ret = kpatch_blocked(task, &state) && (state & TASK_INTERRUPTIBLE) &&
	      kpatch_walk_stack(task, try);
	raw_spin_unlock_irqrestore(&task->pi_lock, flags);
	try->refused = why;
	return ret;
}

/*
 * Move @b's task: its hold queued, then, if still asleep in the way, the
 * kick.  The hold first: a task that leaves the way meanwhile is held
 * before any other call, and a late kick finds it in a sleep it does not
 * end.  1 if moved now, 0 if moving already, -1 if no slot is left.
 */
static __cold int kpatch_move_one(struct kpatch_try *try, struct kpatch_blocker *b)
{
	struct kpatch_gate *g = try->movers->gate;
	struct kpatch_slot *s = b->slot ?: kpatch_gate_claim(g, b->task, true);
	struct callback_head *kick;
	unsigned int i;
	int ret = 0;

	b->slot = s;
	if (!s)
		return -1;
	if (!s->queued) {
		if (!kpatch_gate_queue(g, s))
			return -1;
		ret = 1;
	}
	i = READ_ONCE(s->kicking[0]);
	if (b->how == TWA_SIGNAL && !READ_ONCE(*(s->kicking + i)) &&
	    !READ_ONCE(s->out) && kpatch_still_in_way(try, b->task)) {
		/* a kick holds a reference: it may run after the hold */
		WRITE_ONCE(*(s->kicking + i), true);
		kick = s->kick + i;
		init_task_work(kick, i ? kpatch_kick1_fn : kpatch_kick0_fn);
		refcount_inc(&g->ref);
		__module_get(THIS_MODULE);
		if (task_work_add(s->task, kick, TWA_SIGNAL)) {
			WRITE_ONCE(*(s->kicking + i), false);
			module_put(THIS_MODULE);
			kpatch_gate_put(g);
		}
	}
	return ret;
}

/* From the slow path, preemption off (which keeps @g alive): claim current. */
static noinline void notrace kpatch_gate_pass(struct kpatch_gate *g)
{
	struct task_struct *task = current;

	if (!in_task() || task == g->mover || task->prio < MAX_RT_PRIO ||
	    (task->flags & (PF_KTHREAD | PF_IO_WORKER | PF_USER_WORKER |
			    PF_EXITING)) ||
	    atomic_read(&g->claims) >= g->marks)
		return;
	kpatch_gate_claim(g, task, true);
}

/*
 * The slot of @task in @g, claimed if it had none and @claim, pinned; NULL
 * if full, or none.  Lock-free.  The reference is taken before the
 * cmpxchg, whose full barrier orders it before the pointer the sweep reads
 * with an acquire; one given back is never the last: @task is alive.
 */
static struct kpatch_slot *notrace kpatch_gate_claim(struct kpatch_gate *g,
						    struct task_struct *task,
						    bool claim)
{
	unsigned int h = hash_ptr(task, g->bits), n;
	struct task_struct *t;

	for (n = 0; n < BIT(g->bits); n++, h = (h + 1) & (BIT(g->bits) - 1)) {
		t = READ_ONCE(g->slot[h].task);
		if (!t && !claim)
			return NULL;
		if (!t) {
			get_task_struct(task);
			t = cmpxchg(&g->slot[h].task, NULL, task);
			if (t)
				put_task_struct(task);
			else
				atomic_inc(&g->claims);
		}
		if (!t || t == task)
			return &g->slot[h];
	}
	return NULL;
}

/* Queue the hold on slot @s's task: no wake-up; false if past task work. */
static bool kpatch_gate_queue(struct kpatch_gate *g, struct kpatch_slot *s)
{
	s->queued = true;
	s->gate = g;
	init_task_work(&s->work, kpatch_hold_fn);
	refcount_inc(&g->ref);
	__module_get(THIS_MODULE);
	if (!task_work_add(s->task, &s->work, TWA_RESUME))
		return true;
	module_put(THIS_MODULE);
	refcount_dec(&g->ref);
	return false;
}

/* Queue the hold on the tasks caught since. */
static __cold void kpatch_gate_sweep(struct kpatch_gate *g)
{
	struct kpatch_slot *s;

	lockdep_assert_held(&kpatch_mutex);
	for (s = g->slot; s < g->slot + BIT(g->bits); s++)
		/* pairs with kpatch_gate_claim()'s cmpxchg (full barrier) */
		if (!s->queued && smp_load_acquire(&s->task))
			kpatch_gate_queue(g, s);
}

/* Calls of @try's sites take the slow path, and with it the gate. */
static __cold void kpatch_gate_on(struct kpatch_try *try)
{
	unsigned int i;

	/* pairs with the acquire in kpatch_redirect_slow() */
	smp_store_release(&kpatch_gating, try->movers->gate);
	kpatch_held_ever = true;
	WARN_ON_ONCE(atomic_read(&kpatch_state) != KPATCH_STATE_IDLE);
	/* the gate before SLOW: a call that reads SLOW (an acquire) finds it */
	smp_wmb();
	for (i = 0; i < try->nr_sites; i++)
		WRITE_ONCE(try->sites[i]->target, KPATCH_TARGET_SLOW);
}

/* Is a task the gate caught on a runqueue, not out yet?  A racy hint. */
static bool kpatch_gate_running(struct kpatch_gate *g)
{
	struct kpatch_slot *s;

	for (s = g->slot; s < g->slot + BIT(g->bits); s++)
		if (s->queued && !READ_ONCE(s->out) && READ_ONCE(s->task->on_rq))
			return true;
	return false;
}

/*
 * Wait, sweeping the gate, until the tasks moved and those caught that run
 * are out, KPATCH_MOVE_WAIT_MS at most; false if the writer was killed
 * (never with @must).
 */
static __cold bool kpatch_move_wait(struct kpatch_try *try)
{
	unsigned long end = jiffies + msecs_to_jiffies(KPATCH_MOVE_WAIT_MS);
	struct kpatch_movers *m = try->movers;
	unsigned int i = 0;

	for (;;) {
		kpatch_gate_sweep(m->gate);
		while (i < m->nr && READ_ONCE(m->blockers[i].slot->out))
			i++;
		if (!try->req->must && fatal_signal_pending(current))
			return false;
		if ((i == m->nr && !kpatch_gate_running(m->gate)) ||
		    time_after(jiffies, end))
			return true;
		wait_event_idle_timeout(kpatch_out_wq, i < m->nr ?
					READ_ONCE(m->blockers[i].slot->out) :
					!kpatch_gate_running(m->gate),
					msecs_to_jiffies(KPATCH_MOVE_SWEEP_MS));
	}
}

/*
 * The hold; in do_exit() it only goes on.  It queues itself once more, to
 * run after the task work queued before it (a deferred close); then it is
 * out, and sleeps until the try ends: killable, no load, not freezable (a
 * lock may be held).  No old code runs after: the run that succeeds finds
 * it in the return path (found in the way, moving stops: kpatch_stop_at()),
 * and its call restarts in the version then in effect (Documentation.txt,
 * 3.7).  It pins kpatch until its last statement; kpatch_exit() waits with
 * synchronize_rcu_tasks() for a task still in the instructions after it.
 */
static __cold void kpatch_hold_fn(struct callback_head *work)
{
	struct kpatch_slot *s = container_of(work, struct kpatch_slot, work);
	struct kpatch_gate *g = s->gate;

	if (!s->deferred && !(current->flags & PF_EXITING)) {
		s->deferred = true;
		if (!task_work_add(current, work, TWA_RESUME))
			return;
	}
	WRITE_ONCE(s->out, true);
	wake_up(&kpatch_out_wq);
	if (!(current->flags & PF_EXITING))
		wait_event_state(kpatch_hold_wq, READ_ONCE(g->done),
				 (TASK_KILLABLE | TASK_NOLOAD));
	kpatch_gate_put(g);
	module_put(THIS_MODULE);	/* see above, on kpatch_exit() */
}

/* @try's held tasks go on: at its end, or once its run has succeeded. */
static __cold void kpatch_let_go(struct kpatch_try *try)
{
	if (try->movers && try->movers->gate) {
		WRITE_ONCE(try->movers->gate->done, true);
		wake_up_all(&kpatch_hold_wq);
	}
}

/* @try ends: the gate off, the tasks let go, their slots after a grace period. */
static __cold void kpatch_movers_free(struct kpatch_try *try)
{
	struct kpatch_movers *m = try->movers;
	struct kpatch_gate *g = m ? m->gate : NULL;
	unsigned int i;

	lockdep_assert_held(&kpatch_mutex);
	kpatch_let_go(try);
	if (g) {
		kpatch_final_targets(try);
		WRITE_ONCE(kpatch_gating, NULL);
		/* no slow path may still hold it: see kpatch_gating */
		kpatch_sync_preempt_off();
		for (i = 0; i < BIT(g->bits); i++)
			if (g->slot[i].task)
				put_task_struct(g->slot[i].task);
		kpatch_gate_put(g);
	}
	kvfree(m);
	try->movers = NULL;
}

/* A kick has run: it only woke the task.  Its bit before its reference. */
static __cold void kpatch_kick_done(struct kpatch_slot *s, unsigned int i)
{
	struct kpatch_gate *g = s->gate;

	WRITE_ONCE(*(s->kicking + i), false);
	kpatch_gate_put(g);
	module_put(THIS_MODULE);	/* see above, on kpatch_exit() */
}

static __cold void kpatch_kick0_fn(struct callback_head *work)
{
	kpatch_kick_done(container_of(work, struct kpatch_slot, kick[0]), 0);
}

static __cold void kpatch_kick1_fn(struct callback_head *work)
{
	kpatch_kick_done(container_of(work, struct kpatch_slot, kick[1]), 1);
}

static void kpatch_gate_put(struct kpatch_gate *g)
{
	if (refcount_dec_and_test(&g->ref))
		kvfree(g);
}

/* ------------------------------------------------------------------------
 * The API: patches from modules
 */

/* Disable @patch (@must: see kpatch_module_going()), kpatch_mutex held. */
static __cold int kpatch_disable(struct kpatch_patch *patch, bool must)
{
	struct kpatch_request req = {
		.verb = "unpatch",
		.remove = patch,
		.must = must,
	};

	lockdep_assert_held(&kpatch_mutex);
	return kpatch_update(&req);
}

/*
 * Patch modules that registered a patch while loading, until their LIVE
 * or GOING notification: only they can go with a patch enabled (a failed
 * load).  Own lock: the notifier reads it without waiting for kpatch_mutex.
 */
struct kpatch_loading {
	struct list_head list;
	struct module *mod;
};

static LIST_HEAD(kpatch_loading_list);
static DEFINE_SPINLOCK(kpatch_loading_lock);

/* Take @mod's entries off the list, and put @add on it; had it any? */
static __cold bool kpatch_loading_swap(struct module *mod, struct kpatch_loading *add)
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

/* May kpatch keep and write @p while a patch is enabled (not const, init, stack)? */
static bool kpatch_writable(const struct module *mod, const void *p,
			    size_t size)
{
	unsigned long addr = (unsigned long)p;
	unsigned int level;
	pte_t *pte;

	for (;; addr = (unsigned long)p + size - 1) {
		if (object_is_on_stack((void *)addr))
			return false;
		if (within_module(addr, mod)) {
			if (!kpatch_mod_rw(mod, addr))
				return false;
		} else {
			pte = lookup_address(addr, &level);
			if (!pte || !pte_present(*pte) || !pte_write(*pte))
				return false;
		}
		if (addr == (unsigned long)p + size - 1)
			return true;	/* the first byte and the last */
	}
}

/**
 * kpatch_register() - enable a patch provided by a patch module
 * @kpmod:   the patch; @kpmod->mod, ->funcs and ->num_funcs filled in, and
 *           in each function ->old_addr and ->new_addr (sizes optional);
 *           ->hooks as the patch needs them
 * @replace: also remove every other enabled patch, in the same step
 *
 * Redirects every old function of @kpmod to its new one inside
 * stop_machine(), after checking that no task has any affected function on
 * its stack, trying again as the retries and retry_delay_ms parameters
 * say.  The patch is named after its module, and pins the patch module,
 * the modules of its functions and hooks, and kpatch.  kpatch keeps
 * @kpmod and writes ->name and ->enabled: not in init memory, const,
 * __ro_after_init or on the stack.
 *
 * Context: process context; sleeps.
 * Return: 0; -EINVAL for a bad address, size or argument; -EEXIST when a
 * patch of that name or its sysfs directory exists; -EBUSY when a function
 * is still in use after the retries or ftrace refused it; -ENODEV when
 * @kpmod->mod is going away; -ENOMEM; or what a pre or stop hook returned.
 * On failure nothing has changed.
 */
__cold int kpatch_register(struct kpatch_module *kpmod, bool replace)
{
	struct kpatch_loading *loading;
	struct kpatch_patch *patch;
	const char *name;
	int ret = -EINVAL;

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
	if (!kpmod->enabled) {
		name = kpmod->name;
		kpmod->name = kpmod->mod->name;
		ret = kpatch_enable(kpmod, false, replace);
		if (ret)
			kpmod->name = name;
	}
	/*
	 * A loading module left with no patch enabled is taken off the list:
	 * its GOING notifier, run under the module notifiers' lock, then does
	 * not take kpatch_mutex, which hooks hold (Documentation.txt, 3.4).
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
 * stack check and retries, and drops its pins.
 *
 * Context: process context; sleeps.
 * Return: 0; -EINVAL if @kpmod is not enabled; -EBUSY when a function is
 * still in use after the retries; -ENOMEM.  On failure it stays enabled.
 */
__cold int kpatch_unregister(struct kpatch_module *kpmod)
{
	struct kpatch_patch *patch;
	int ret = -EINVAL;

	mutex_lock(&kpatch_mutex);
	list_for_each_entry(patch, &kpatch_patches, list)
		if (patch->kpmod == kpmod) {
			ret = kpatch_disable(patch, false);
			break;
		}
	mutex_unlock(&kpatch_mutex);
	return ret;
}
EXPORT_SYMBOL_GPL(kpatch_unregister);

/*
 * A module is going away.  The patch module of an enabled patch failed its
 * load and is freed after its GOING notifiers: the patch must be out first,
 * tried until it is (Documentation.txt, 3.8).  First (INT_MAX): the others
 * tear it down.  Any other module goes without waiting for kpatch_mutex.
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
		ret = kpatch_disable(patch, true);
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
static int kpatch_cmd_patch(char **tok, int ntok, bool replace);

static __cold ssize_t kpatch_control_write(struct file *file,
					   const char __user *ubuf,
					   size_t count, loff_t *ppos)
{
	char *cmd;
	size_t len;
	int ret = -EINVAL;

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
	if (len && len == count && cmd[len - 1] == '\n')
		cmd[len - 1] = '\0';	/* one final newline */
	if (len != count)
		pr_err("a command is text: no NUL bytes\n");
	else if (strchr(cmd, '\n'))
		pr_err("one command per write, on one line\n");
	else
		ret = kpatch_run_command(cmd);
	kfree(cmd);
	return ret ? ret : count;
}

/* `patch|replace NAME OLD NEW [OLD NEW ...]` or `unpatch NAME` */
static int kpatch_run_command(char *cmd)
{
	struct kpatch_patch *patch;
	char **tok, *p;
	int ntok = 0, ret = -EINVAL;

	tok = kmalloc_array(strlen(cmd) / 2 + 2, sizeof(*tok), GFP_KERNEL);
	if (!tok)
		return -ENOMEM;
	while ((p = strsep(&cmd, " \t")))
		if (*p)
			tok[ntok++] = p;
	/* p: past the name's A-Z a-z 0-9 _ - (the kernel's ctype is Latin-1) */
	for (p = ntok > 1 ? tok[1] : "";
	     (isascii(*p) && isalnum(*p)) || *p == '_' || *p == '-'; p++)
		;
	if (!ntok) {
		pr_err("empty command\n");
	} else if (strcmp(tok[0], "patch") && strcmp(tok[0], "replace") &&
		   strcmp(tok[0], "unpatch")) {
		pr_err("unknown command '%*pE' (expected patch, replace or unpatch)\n",
		       kpatch_echo_len(tok[0]), tok[0]);
	} else if (ntok < 2 || !tok[1][0] || strlen(tok[1]) > KPATCH_NAME_MAX ||
		   *p) {
		pr_err("%s: the name must be 1 to %d characters of A-Z a-z 0-9 _ -\n",
		       tok[0], KPATCH_NAME_MAX);
	} else if (strcmp(tok[0], "unpatch")) {
		ret = kpatch_cmd_patch(tok, ntok, !strcmp(tok[0], "replace"));
	} else if (ntok != 2) {
		pr_err("unpatch: expected exactly one NAME\n");
	} else {
		mutex_lock(&kpatch_mutex);
		patch = kpatch_find_patch(tok[1]);
		if (patch) {
			ret = kpatch_disable(patch, false);
		} else {
			pr_err("unpatch %s: no such patch\n", tok[1]);
			ret = -ENOENT;
		}
		mutex_unlock(&kpatch_mutex);
	}
	kfree(tok);
	return ret;
}

/* `patch|replace NAME OLD NEW ...`: kpmod, funcs and name in one allocation. */
static int kpatch_cmd_patch(char **tok, int ntok, bool replace)
{
	int i, nr = (ntok - 2) / 2, ret;
	struct kpatch_module *kpmod;
	struct kpatch_func *f;

	if (ntok < 4 || ntok % 2) {
		pr_err("%s: expected NAME and OLD NEW address pairs\n", tok[0]);
		return -EINVAL;
	}
	kpmod = kzalloc(sizeof(*kpmod) + nr * sizeof(*f) + strlen(tok[1]) + 1,
			GFP_KERNEL);
	if (!kpmod)
		return -ENOMEM;
	f = (struct kpatch_func *)(kpmod + 1);
	kpmod->funcs = f;
	kpmod->num_funcs = nr;
	kpmod->name = strcpy((char *)(f + nr), tok[1]);
	for (i = 0; i < nr; i++) {
		/* kstrtoul()'s hexadecimal, with or without 0x, but no + */
		if (*tok[2 + 2 * i] == '+' || *tok[3 + 2 * i] == '+' ||
		    kstrtoul(tok[2 + 2 * i], 16, &f[i].old_addr) ||
		    kstrtoul(tok[3 + 2 * i], 16, &f[i].new_addr)) {
			pr_err("%s %s: '%*pE %*pE' is not a pair of hexadecimal addresses\n",
			       tok[0], kpmod->name,
			       kpatch_echo_len(tok[2 + 2 * i]), tok[2 + 2 * i],
			       kpatch_echo_len(tok[3 + 2 * i]), tok[3 + 2 * i]);
			kfree(kpmod);
			return -EINVAL;
		}
	}
	mutex_lock(&kpatch_mutex);
	ret = kpatch_enable(kpmod, true, replace);	/* takes kpmod */
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

/* The patches file (Documentation.txt, 1.2). */
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

static struct notifier_block kpatch_module_nb = {
	.notifier_call = kpatch_module_going,
	.priority = INT_MAX,	/* first: see kpatch_module_going() */
};

/* Sites are FTRACE_OPS_FL_PERMANENT: no `sysctl kernel.ftrace_enabled=0` under a patch. */
static int __init kpatch_init(void)
{
	int ret = kpatch_exiting_start();

	if (ret)
		return ret;
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
	kpatch_exiting_stop(KPATCH_TPS_END);
	return ret;
}

static void __exit kpatch_exit(void)
{
	/* Every enabled patch and every site holds a reference on kpatch. */
	WARN_ON(!list_empty(&kpatch_patches));
	WARN_ON(!hash_empty(kpatch_sites));
	/* a task may still be in the last instructions of a hold */
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
	/* and the switch probe's last calls: see kpatch_record_stop() */
	kpatch_exiting_stop(KPATCH_TPS_END);
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
static kpatch_test_hook_t kpatch_test_hook;

static void kpatch_test_at(enum kpatch_test_point point)
{
	kpatch_test_hook_t hook = READ_ONCE(kpatch_test_hook);

	if (hook)
		hook(point);
}

/**
 * kpatch_test_set_hook() - install or remove the test hook
 * @hook: function called at each &enum kpatch_test_point, or NULL
 *
 * The hook runs with kpatch_mutex held (inside stop_machine() at the
 * callback's points), but at KPATCH_TEST_REFILL, from a work item; removing
 * it waits for that.  A module removes its hook before it is unloaded.
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
