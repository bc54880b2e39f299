// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * kpatch: replace whole kernel functions in a running kernel
 *
 * A patch is a set of (old function, new function) pairs that take effect
 * together, from a patch module's kpatch_register() (kpatch.h) or from a
 * command written to /sys/kernel/debug/kpatch/control.  An update -- patch,
 * replace or unpatch -- changes what the ftrace call sites of the old
 * functions redirect to, inside stop_machine(), at an instant when no task
 * is in code the update changes; a call that runs during that instant
 * anyway (an NMI) makes it fail.  Why no caller ever mixes the versions of
 * two functions is argued once, at kpatch_update_cb().
 *
 * The file reads in the order an update lives, from the write of `patch`
 * to the first redirected call: what the data is and how a call is
 * redirected; the contents (prototypes, in that order); the request; one
 * try -- its sites, the code no task may be in, the run: pre-walk,
 * stop_machine(), stack check, entries published -- then commit, or what
 * a refused try does; the API, the control file, init and exit.  Each
 * function comes after the first one that calls it.
 *
 * Sections named "Layer" add a mechanism to that core where the core first
 * needs it, and open with what it adds, what the core does without it and
 * its price; a first reading can skip them: a function's pieces, ways into
 * a module, hooks, jmp sites and the shared ftrace_ops, exiting tasks, the
 * waiting list, moving busy tasks, the dry run.
 *
 * Words used throughout:
 *   entry      one function of one patch: its old and new function
 *   site       the ftrace call site of a patched function; it owns its
 *              entries, newest first (struct kpatch_site)
 *   target     where a site sends its calls: a new function, 0 for the old
 *              one, or SLOW, through the state machine
 *   touched    the entries an update publishes or takes out
 *   part       a patch an update adds or removes
 *   ranges     the code no task may be in for an update to take effect
 *   pin        a module reference that keeps an address an update uses
 *
 * __cold marks the control path, run a few times per command and never on
 * a call of a patched function; the redirect, the stop_machine() callback
 * and the stack check are compiled for speed.
 *
 * Based on the kpatch core module by Seth Jennings and Josh Poimboeuf.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bitmap.h>
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
#include <linux/kprobes.h>
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
#include <linux/stop_machine.h>
#include <linux/string.h>
#include <linux/string_helpers.h>
#include <linux/sysfs.h>
#include <linux/task_work.h>
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
 * ftrace's direct calls, where ftrace can make one a jmp (an odd direct
 * address): a jmp site's fentry jumps straight to its new function.
 */
#ifdef CONFIG_DYNAMIC_FTRACE_WITH_JMP
#define KPATCH_JMP			1
#define kpatch_direct_set(ops, addr)	register_ftrace_direct(ops, addr)
#define kpatch_direct_move(ops, addr)	modify_ftrace_direct(ops, addr)
#define kpatch_direct_clear(ops, addr)	unregister_ftrace_direct(ops, addr, false)
#define kpatch_jmp_to(addr)		ftrace_jmp_set(addr)
#else
#define KPATCH_JMP			0
#define kpatch_direct_set(ops, addr)	((void)(ops), (void)(addr), -EOPNOTSUPP)
#define kpatch_direct_move(ops, addr)	((void)(ops), (void)(addr), -EOPNOTSUPP)
#define kpatch_direct_clear(ops, addr)	((void)(ops), (void)(addr), -EOPNOTSUPP)
#define kpatch_jmp_to(addr)		(addr)
#endif

/* Call depth accounting in a trampoline, where the kernel tracks it. */
#ifndef CALL_DEPTH_ACCOUNT
#define CALL_DEPTH_ACCOUNT ""
#endif

/*
 * Wait until no CPU is in a section with preemption off that began before
 * (kpatch_fops_handler(), an NMI in it, ftrace's list function walking an
 * ftrace_ops).  Where RCU watches, such a section is an RCU read-side
 * critical section, and synchronize_rcu() waits for it.  Where tracing
 * may run while RCU does not watch, it does not, and ftrace uses the
 * "rude" flavour of RCU tasks, which waits for every CPU to schedule.
 * Where the architecture keeps tracing out of such code
 * (ARCH_WANTS_NO_INSTR), a kernel may make the rude wait a no-op: so
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

/* The core text of a module: memory split by type, or one layout. */
#ifdef for_each_mod_mem_type
#define kpatch_mod_text(mod)		((unsigned long)(mod)->mem[MOD_TEXT].base)
#define kpatch_mod_text_size(mod)	((mod)->mem[MOD_TEXT].size)
#else
#define kpatch_mod_text(mod)		((unsigned long)(mod)->core_layout.base)
#define kpatch_mod_text_size(mod)	((mod)->core_layout.text_size)
#endif

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
 * When the stack check refuses an update, kpatch sleeps and tries again,
 * up to kpatch_retries more times, before it fails with -EBUSY.  It holds
 * no lock while it sleeps; the values are capped all the same, so that a
 * typo cannot keep a command waiting for hours.  Both are read at each try.
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
 * Make jmp sites where the kernel allows them.  Read when a function is
 * first patched; a site keeps its way until no patch uses the function.
 */
static bool kpatch_direct = true;
module_param_named(direct, kpatch_direct, bool, 0644);
MODULE_PARM_DESC(direct,
		 "where ftrace makes direct calls jmps, jump straight to the new function (default Y); N: always the ftrace_ops path");

/* ------------------------------------------------------------------------
 * Patches, entries and sites
 */

/*
 * kpatch_mutex serialises every try of an update and every process-context
 * reader of the patches and the sites.  Entries are published into and
 * taken out of their sites only inside stop_machine() called with this
 * mutex held, so a holder of the mutex sees sites that nobody else
 * changes.  An update that waits between tries has dropped it (see
 * kpatch_retry()).
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
 * has a struct kpatch_module of kpatch's own (@own), for its hooks.
 */
struct kpatch_patch {
	struct list_head list;		/* in kpatch_patches while enabled */
	struct kpatch_module *kpmod;
	bool own;
	struct kobject *kobj;		/* /sys/kernel/kpatch/patches/NAME */
	struct module *pins[KPATCH_NR_HOOKS + 2];	/* patch module, hooks, kpatch */
	unsigned int nr;
	struct kpatch_entry entries[];
};

#define KPATCH_PIN_PATCH	KPATCH_NR_HOOKS
#define KPATCH_PIN_SELF		(KPATCH_NR_HOOKS + 1)

/* Enabled patches, oldest first.  Protected by kpatch_mutex. */
static LIST_HEAD(kpatch_patches);

/*
 * A site: the ftrace call site of a patched function, with its entries,
 * newest first, the first of which runs.  It is made before the update
 * that first patches its function, and released after the update that
 * leaves it no entry.  Its calls go where @target says: above
 * KPATCH_TARGET_SLOW to that new function; 0 on into the old function;
 * KPATCH_TARGET_SLOW through the state machine, while an update changes
 * the site.  Targets are written by the stop_machine() callback, and when
 * a site is made.  A site hooks its fentry with an ftrace_ops of its own
 * (@ops), whose handler sets the return address from @target; the layer
 * "jmp sites and the shared ftrace_ops" adds a jmp straight to the new
 * function (@jmp), and kpatch_fops for many sites at once.
 *
 * A site holds a reference on the module of its function and on kpatch
 * itself for as long as it hooks the function, so neither can be unloaded
 * while an fentry call leads into kpatch.  Sites are made, found and freed
 * under kpatch_mutex; the handlers and the guard also find them from any
 * context, under RCU (kpatch_site_find()).
 */
#define KPATCH_TARGET_SLOW	1UL

/* How a site hooks its function's fentry. */
enum kpatch_via {
	KPATCH_VIA_NONE,	/* not yet, or not any more */
	KPATCH_VIA_FOPS,	/* @ip is in kpatch_fops's filter */
	KPATCH_VIA_OPS,		/* its own ftrace_ops, @ops */
	KPATCH_VIA_DIRECT,	/* a direct call, @ops: a jmp site */
};

struct kpatch_site {
	struct hlist_node node;		/* in kpatch_sites; first: one test less */
	unsigned long ip;		/* for the handler, next to @node */
	unsigned long target;		/* see above */
	unsigned long jmp;		/* jmp site: its direct address; or 0 */
	struct hlist_head entries;	/* newest first */
	struct module *mod;		/* pinned: the module of @ip, or NULL */
	enum kpatch_via via;
	struct ftrace_ops ops;		/* filter: @ip; unused on kpatch_fops */
};

/*
 * An update that makes more new sites than this puts them on kpatch_fops
 * (kpatch_sites_add()).
 */
#define KPATCH_OWN_SITES	4

/*
 * The sites, hashed by ip: 1 << KPATCH_SITE_BITS chains, allocated by the
 * first update (under kpatch_mutex) and kept until kpatch is unloaded.
 * Every lookup comes after it: under the mutex, from an update; from a
 * handler or the guard, for a site hooked after it, and hooking one is an
 * ftrace update, which synchronizes every CPU.
 */
#define KPATCH_SITE_BITS	10
static struct hlist_head *kpatch_sites;

#define KPATCH_SITE_CHAINS	BIT(KPATCH_SITE_BITS)
#define kpatch_site_chain(ip)	(&kpatch_sites[hash_min(ip, KPATCH_SITE_BITS)])

/* The site at @ip, or NULL.  From any context: it only reads under RCU. */
static struct kpatch_site *notrace kpatch_site_find(unsigned long ip)
{
	struct kpatch_site *site;

	hlist_for_each_entry_rcu_notrace(site, kpatch_site_chain(ip), node)
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
 * The fast paths (an ftrace_ops site's target, a jmp site's jmp) look at no
 * state; the state machine guards the slow path, which the calls of every
 * site an update changes take while the update runs.  Outside
 * stop_machine() neither can change under a caller: the only writer is the
 * stop_machine() callback.  Inside it, three kinds of caller still run
 * next to the writer: NMIs on any CPU, the functions the other CPUs call
 * while they spin in the stop_machine() loop, and the stop and undo hooks
 * on the writer's own CPU.
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
static struct kpatch_gate *kpatch_gate;
static void kpatch_gate_pass(void);

static int kpatch_state_finish(int state, unsigned long ip);
static void kpatch_site_redirect(struct kpatch_site *site,
				 struct ftrace_regs *fregs);
static void kpatch_ftrace_slow(struct kpatch_site *site,
			       struct ftrace_regs *fregs);
static unsigned long kpatch_redirect_slow(struct kpatch_site *site);

/* In asm: see "Layer: jmp sites and the shared ftrace_ops". */
asmlinkage void kpatch_guard(void);

/*
 * The handler of a site with an ftrace_ops of its own: the site is the
 * ftrace_ops's container, so the fast path is a load and a compare more
 * than the least any IPMODIFY handler does.  The site outlives every call
 * in here: it is freed only after unregister_ftrace_function() of its
 * ftrace_ops has returned, which waits until no CPU is in the handler (an
 * ftrace_ops not in kpatch's data is dynamic to ftrace).
 */
static void notrace kpatch_ftrace_handler(unsigned long ip,
					  unsigned long parent_ip,
					  struct ftrace_ops *ops,
					  struct ftrace_regs *fregs)
{
	kpatch_site_redirect(container_of(ops, struct kpatch_site, ops), fregs);
}

/*
 * The fast path of both ftrace_ops handlers, for a call of @site: the
 * target's new function, the old function for 0, or the slow path.
 */
static __always_inline void kpatch_site_redirect(struct kpatch_site *site,
						 struct ftrace_regs *fregs)
{
	/* pairs with the release in kpatch_final_targets() */
	unsigned long target = smp_load_acquire(&site->target);

	if (likely(target > KPATCH_TARGET_SLOW))
		kpatch_set_ip(fregs, target);
	else if (target)
		kpatch_ftrace_slow(site, fregs);
}

/* The slow path of the handlers, out of their way. */
static noinline void notrace kpatch_ftrace_slow(struct kpatch_site *site,
						struct ftrace_regs *fregs)
{
	unsigned long target = kpatch_redirect_slow(site);

	if (target)
		kpatch_set_ip(fregs, target);
}

/*
 * The slow path of both redirects, for a call of @site whose fast path said
 * an update is changing it, or that its gate is on: the function to run,
 * or 0 for the old one.
 *
 * It runs in any context, NMI included, and calls nothing traceable but,
 * in a user task while the gate is on, get_task_struct() (kpatch_gate_pass()).
 * Disabling preemption makes it an RCU read-side section for the
 * synchronize_rcu() after an update, and keeps this CPU's stopper thread
 * from answering the update's rendezvous while it runs.
 */
static noinline unsigned long notrace kpatch_redirect_slow(struct kpatch_site *site)
{
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
	if (state != KPATCH_STATE_IDLE)
		state = kpatch_state_finish(KPATCH_STATE_FAILURE, site->ip);
	else if (unlikely(READ_ONCE(kpatch_gate)))
		kpatch_gate_pass();	/* see "Layer: moving busy tasks" */
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
	preempt_enable_notrace();
	return e ? e->new_addr : 0;
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

/* At most this many tasks in the way are listed by a try or a dry run. */
#define KPATCH_CHECK_MAX	64

/* What kpatch can do about a task in the way (kpatch_movable()). */
enum kpatch_how {
	KPATCH_STAYS,		/* nothing */
	KPATCH_MOVED,		/* a user task: moved out, and held */
	KPATCH_WOKEN,		/* a kernel thread asleep interruptibly: woken */
};

/*
 * A task in the way: @addr, or 0 if its stack is unreliable; @how, and for
 * a try that will move or wake it, a reference on it in @task.
 */
struct kpatch_blocker {
	struct task_struct *task;
	unsigned long addr;
	pid_t pid;
	enum kpatch_how how;
	char comm[TASK_COMM_LEN];
};

/*
 * The tasks in the way that a dry run (`check`), or a try that may move
 * them, found: the blockers it lists, and how many more.
 */
struct kpatch_check {
	struct kpatch_blocker *blockers;
	unsigned int nr, more;
};

/*
 * What a try that moves tasks keeps: the list of its runs, its gate, and
 * how many rounds it made.  Under kpatch_mutex.
 */
struct kpatch_movers {
	struct kpatch_check list;
	struct kpatch_blocker blockers[KPATCH_CHECK_MAX];
	struct kpatch_gate *gate;
	unsigned int rounds;
	bool gating;
};

/* What the caller asked for: the same at every try. */
struct kpatch_request {
	const char *verb;		/* "patch", "replace" or "unpatch" */
	struct kpatch_patch *add;	/* patch to publish, or NULL */
	struct kpatch_patch *remove;	/* patch to take out, or NULL */
	bool replace;			/* also take out every other patch */
	struct kpatch_check *check;	/* dry run: the caller's; or NULL */
};

/*
 * Updates that wait to be tried again.  Between tries an update holds no
 * lock: kpatch_mutex is free for readers, for kpatch_register() and for
 * other updates, which may change the patches meanwhile.  So every try is
 * prepared anew against the patches as they are then, and a waiting
 * update keeps for itself only what another update must not take: the
 * pins of the patch it adds (kpatch_patch_new()), its name, and the
 * patches it removes -- one, or for a replace every patch enabled when it
 * wakes.  Nobody else may remove (and so free) those meanwhile.
 * Protected by kpatch_mutex; entries live on the waiting task's stack.
 */
struct kpatch_waiting {
	struct list_head list;
	const char *name;		/* patch being added, or NULL */
	struct kpatch_patch *remove;	/* patch being removed, or NULL */
	bool replace;			/* removes every patch */
};

static LIST_HEAD(kpatch_waiting);

/*
 * A task whose stack the pre-walk found clean, walked while the task could
 * not run, and what it takes to trust that walk inside stop_machine(): the
 * same task (pointer, pid and start time) not switched out since (the same
 * nvcsw + nivcsw).  See the pre-walk.
 */
/* An exiting task went unrecorded: see "Layer: exiting tasks". */
static bool kpatch_exiting_lost;

struct kpatch_seen {
	struct task_struct *task;
	unsigned long switches;
	u64 start_time;
	pid_t pid;
};

/*
 * One try of an update, or its dry run: prepared by kpatch_try() (or
 * kpatch_dry_run()) from the request and the patches as they are then;
 * what it holds is freed before that returns, and @refused is read after.
 *  - the parts: the patches whose hooks run, in the order they run: those
 *    removed, newest first, then the one added; and their entries in the
 *    same order, those taken out before @first_add, those published after;
 *  - the sites of those entries, each once, and room for what the
 *    sites' ftrace updates take: sites to release and their ips;
 *  - the code no task may be in (kpatch_build_ranges()): sorted disjoint
 *    ranges, modules checked whole but for their own threads, new records
 *    of ways into modules;
 *  - the pre-walk's cache of clean tasks, in task list order and sorted;
 *  - the stop_machine() rendezvous, and why the try was refused.
 */
struct kpatch_try {
	struct kpatch_request *req;
	struct kpatch_patch **parts;
	unsigned int nr_parts;
	struct kpatch_entry **touched;
	unsigned int nr_touched, first_add;
	struct kpatch_site **sites, **gone;
	unsigned int nr_sites;
	unsigned long *ips;
	struct kpatch_range *ranges;
	unsigned int nr_ranges, max_ranges;
	struct module **whole;
	unsigned int nr_whole;
	struct kpatch_ways_in **ways;
	unsigned int nr_ways;
	struct kpatch_seen *seen, **seen_by_task;
	unsigned int nr_seen, max_seen;
	atomic_t cpus_in, cpus_seen;
	struct kpatch_check *list;	/* where blockers go, or NULL */
	struct kpatch_movers *movers;	/* tasks it moves, or NULL */
	bool hooks;			/* a part has a hook */
	struct kpatch_refused refused;
};

/* ------------------------------------------------------------------------
 * Contents: the functions below, under the title of their section, in the
 * file's order, which is the order a `patch` first calls them in -- but for
 * the control file, whose write starts it, at the end
 */

/* The request: resolve, check and pin what a patch names */
static bool kpatch_name_taken(const char *name);
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
static unsigned long kpatch_ftrace_ip(unsigned long addr);
static bool kpatch_endbr(unsigned long addr, bool sealed_too);
static int kpatch_check_ftrace_site(unsigned long ip);
static int kpatch_cmp_ulong(const void *a, const void *b);
static bool kpatch_sysfs_taken(const char *verb, const char *name);
static void kpatch_patch_free(struct kpatch_patch *patch);

/* An update, and one try of it */
static int kpatch_update(struct kpatch_request *req);
static int kpatch_try(struct kpatch_try *try);
static int kpatch_check_chain(struct kpatch_patch *patch, bool replace);
static bool kpatch_in_table(unsigned long addr, bool as_old);
static int kpatch_collect(struct kpatch_try *try);
static int kpatch_sites_add(struct kpatch_try *try);
static struct kpatch_site *kpatch_site_new(struct kpatch_entry *e);
static int kpatch_site_hook(struct kpatch_site *site, bool jmp);
static void kpatch_ftrace_gave_up(void);
static int kpatch_build_ranges(struct kpatch_try *try);
static int kpatch_add_code(struct kpatch_try *try, const struct kpatch_entry *e,
			   bool old);
static int kpatch_add_range(struct kpatch_try *try, unsigned long start,
			    unsigned long size);

/* Layer: a function's pieces */
static int kpatch_add_pieces(struct kpatch_try *try, unsigned int first,
			     struct module *mod, unsigned long fn);

/* Layer: ways into a module */
static int kpatch_add_reaches(struct kpatch_try *try);
static struct module *kpatch_way_in(const struct kpatch_entry *e);
static struct kpatch_ways_in *kpatch_ways_in_new(const struct kpatch_try *try,
						 struct module *mod);
static struct kpatch_ways_in *kpatch_ways_in_find(const struct module *mod);
static bool kpatch_redirected_after(const struct kpatch_try *try,
				    const struct module *mod);
static bool kpatch_redirects_into(const struct kpatch_patch *patch,
				  const struct module *mod);
static int kpatch_add_reach(struct kpatch_try *try, struct module *mod,
			    const unsigned long *addr, unsigned int n);

/* The ranges in order, and the sites of the try */
static int kpatch_cmp_range(const void *a, const void *b);
static void kpatch_free_ranges(struct kpatch_try *try);
static int kpatch_collect_sites(struct kpatch_try *try);

/* Layer: hooks */
static int kpatch_pre_hooks(struct kpatch_try *try);
static int kpatch_part_hook(struct kpatch_try *try, unsigned int i,
			    enum kpatch_hook stage);
static void kpatch_cancel_hook(struct kpatch_try *try, unsigned int i);
static void kpatch_cancel_hooks(struct kpatch_try *try);
static void kpatch_undo_hooks(struct kpatch_try *try, unsigned int n);
static int kpatch_resolve_hook(struct kpatch_patch *patch, int h);

/* Layer: jmp sites and the shared ftrace_ops */
static int kpatch_sites_guard(struct kpatch_try *try);
static unsigned long kpatch_guard_slow(unsigned long ret);
static void kpatch_fops_handler(unsigned long ip, unsigned long parent_ip,
				struct ftrace_ops *ops,
				struct ftrace_regs *fregs);
static int kpatch_fops_add(struct kpatch_try *try, unsigned int from,
			   unsigned int to);
static bool kpatch_fops_alone(const struct kpatch_site *site);
static int kpatch_fops_del(unsigned long *ips, unsigned int n);
static void kpatch_settle_fn(struct work_struct *work);
static int kpatch_site_drop(struct kpatch_site *site);

/* The run: the pre-walk, stop_machine() and the stack check */
static int kpatch_run(struct kpatch_try *try);
static bool kpatch_checks(const struct kpatch_try *try);
static int kpatch_prewalk(struct kpatch_try *try);
static void kpatch_forget(struct kpatch_try *try);
static int kpatch_prewalk_task(struct task_struct *task,
			       struct kpatch_try *try);
static int kpatch_walk_stack(struct task_struct *task, struct kpatch_try *try);
static bool kpatch_in_ranges(const struct kpatch_try *try, unsigned long addr);
static void kpatch_refuse(struct kpatch_try *try, enum kpatch_refusal why,
			  struct task_struct *task, unsigned long addr);
static void kpatch_seen_add(struct kpatch_try *try, struct task_struct *task);
static int kpatch_cmp_seen(const void *a, const void *b);
static void kpatch_set_op(struct kpatch_try *try, bool running);
static int kpatch_update_cb(void *data);
static int kpatch_update_answer(struct kpatch_try *try);
static int kpatch_check_stacks(struct kpatch_try *try);
static int kpatch_check_task(struct task_struct *task, struct kpatch_try *try);
static bool kpatch_seen_unchanged(const struct kpatch_seen *s,
				  const struct task_struct *task);
static struct kpatch_seen *kpatch_seen_search(const struct kpatch_try *try,
					      struct task_struct *task);

/* Layer: exiting tasks */
static int kpatch_check_exiting(struct kpatch_try *try);
static void kpatch_exiting_refill(struct work_struct *work);
static void kpatch_exiting_stop(int n);

/* The callback's last steps; then settle and commit */
static int kpatch_state_finish(int state, unsigned long ip);
static int kpatch_update_publish(struct kpatch_try *try);
static void kpatch_final_targets(struct kpatch_try *try);
static void kpatch_sites_settle(struct kpatch_try *try);
static unsigned long kpatch_site_jmp(struct kpatch_site *site);
static unsigned int kpatch_sites_release(struct kpatch_try *try,
					 unsigned int n);
static int kpatch_site_release(struct kpatch_site *site);
static void kpatch_site_free(struct kpatch_site *site);
static void kpatch_commit(struct kpatch_try *try);
static void kpatch_kobj_remove(struct kobject **kobj);
static void kpatch_uncollect(struct kpatch_try *try);

/* A refused try: undone, run again, or tried again later */
static void kpatch_sites_unmake(struct kpatch_try *try);
static void kpatch_run_again(struct kpatch_try *try);
static bool kpatch_retry(const struct kpatch_request *req,
			 const struct kpatch_refused *r, int ret,
			 unsigned int n);
static void kpatch_report(const struct kpatch_request *req,
			  const struct kpatch_refused *r, unsigned int n,
			  unsigned int tries, bool last, unsigned int delay);
static const char *kpatch_req_name(const struct kpatch_request *req);
static bool kpatch_removal_waits(const struct kpatch_patch *patch);

/* Layer: moving busy tasks */
static bool kpatch_move_out(struct kpatch_try *try, int ret);
static struct kpatch_movers *kpatch_movers_new(void);
static void kpatch_move_wait(struct kpatch_gate *g);
static unsigned int kpatch_gate_sweep(struct kpatch_gate *g);
static void kpatch_movers_free(struct kpatch_try *try);
static enum kpatch_how kpatch_movable(const struct kpatch_try *try,
				      struct task_struct *task);
static bool kpatch_move_one(struct kpatch_gate *g, struct task_struct *task,
			    enum kpatch_how how);
static void kpatch_gate_on(struct kpatch_movers *m, struct kpatch_try *try);
static void kpatch_gate_pass(void);
static struct kpatch_slot *kpatch_gate_claim(struct kpatch_gate *g,
					     struct task_struct *task);
static bool kpatch_gate_queue(struct kpatch_gate *g, struct kpatch_slot *s,
			      struct task_struct *task);
static void kpatch_hold_fn(struct callback_head *work);
static struct kpatch_slot *kpatch_gate_find(struct kpatch_gate *g,
					    const struct task_struct *task);
static void kpatch_gate_put(struct kpatch_gate *g);

/* Layer: the dry run */
static int kpatch_dry_run(struct kpatch_try *try);
static int kpatch_dry_cb(void *data);
static bool kpatch_all_moved(const struct kpatch_check *chk);
static void kpatch_sym_name(char *buf, unsigned long addr, bool offset);

/* The control file, debugfs and sysfs */
static int kpatch_run_command(char *cmd);
static bool kpatch_is_verb(const char *word);
static int kpatch_echo_len(const char *word);
static bool kpatch_valid_name(const char *name);
static int kpatch_cmd_patch(char **tok, int ntok, bool replace,
			    struct kpatch_check *chk);
static int kpatch_parse_addr(const char *tok, unsigned long *addr);
static int kpatch_parse_hook(struct kpatch_module *kpmod, const char *verb,
			     const char *word);
static int kpatch_cmd_unpatch(char **tok, int ntok, struct kpatch_check *chk);

/* ------------------------------------------------------------------------
 * The request: resolve, check and pin what a patch names
 */

/*
 * Enable the patch @kpmod describes, replacing every other patch if
 * @replace; or with @chk, only say whether that would work now.  @own:
 * @kpmod is kpatch's (the control file's), and it is freed here but when
 * the patch was enabled.  Caller holds kpatch_mutex; it is dropped while
 * the update waits between tries.
 */
static __cold int kpatch_enable(struct kpatch_module *kpmod, bool own,
				bool replace, struct kpatch_check *chk)
{
	struct kpatch_request req = {
		.verb = replace ? "replace" : "patch",
		.replace = replace,
		.check = chk,
	};
	int ret;

	lockdep_assert_held(&kpatch_mutex);
	if (kpatch_name_taken(kpmod->name)) {
		pr_err("%s '%s' refused: a patch with that name exists\n",
		       req.verb, kpmod->name);
		ret = -EEXIST;
	} else if (kpatch_sysfs_taken(req.verb, kpmod->name)) {
		ret = -EEXIST;
	} else if (replace && kpatch_removal_waits(NULL)) {
		pr_err("%s '%s' refused: an unpatch waits to try again\n",
		       req.verb, kpmod->name);
		ret = -EBUSY;
	} else {
		req.add = kpatch_patch_new(kpmod, own, &ret);
		if (req.add) {
			ret = kpatch_update(&req);
			if (ret || chk)
				kpatch_patch_free(req.add);	/* and kpmod */
			return ret;
		}
	}
	if (own) {
		kfree(kpmod->funcs);
		kfree(kpmod->name);
		kfree(kpmod);
	}
	return ret;
}

/* Is @name the name of an enabled patch or of one waiting to be added? */
static bool kpatch_name_taken(const char *name)
{
	struct kpatch_waiting *w;

	list_for_each_entry(w, &kpatch_waiting, list)
		if (w->name && !strcmp(w->name, name))
			return true;
	return kpatch_find_patch(name);
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
 * itself: once for a request, whose tries keep the pins, so that while it
 * waits between tries no module it names can go, and an address keeps
 * naming the function it named.  An old function may appear only once,
 * and a new one may not be an old one of the same patch.  @own: @kpmod is
 * kpatch's, and freed with the record.  On failure, the errno and NULL.
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
	patch->own = own;
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
	}
out:
	kfree(olds);
	if (ret && patch) {
		patch->own = false;	/* the caller frees its kpatch_module */
		kpatch_patch_free(patch);
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
	e->ip = kpatch_ftrace_ip(e->old_addr);
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
 * The ftrace location of the function starting at @addr: the fentry call,
 * which on IBT kernels comes after the ENDBR (or its sealed replacement).
 */
static unsigned long kpatch_ftrace_ip(unsigned long addr)
{
	return kpatch_endbr(addr, true) ? addr + ENDBR_INSN_SIZE : addr;
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

/*
 * Does /sys/kernel/kpatch/patches/@name exist?  kpatch makes it itself; a
 * patch module that makes it too (before kpatch_register(), or while an
 * update waits) is refused.
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
	if (patch->own) {
		kfree(patch->kpmod->funcs);
		kfree(patch->kpmod->name);
		kfree(patch->kpmod);
	}
	kfree(patch);
}

/* ------------------------------------------------------------------------
 * An update, and one try of it
 */

/*
 * Run the update @req asks for, or with @req->check only its dry run.
 * While the stack check refuses it, it waits and tries again
 * (kpatch_retry()); a try moves tasks out of its way first
 * (kpatch_move_out()).
 */
static __cold int kpatch_update(struct kpatch_request *req)
{
	struct kpatch_try try;
	unsigned int n = 1;
	int ret;

	lockdep_assert_held(&kpatch_mutex);
	if (!kpatch_sites) {	/* the first update: see kpatch_sites */
		kpatch_sites = kcalloc(KPATCH_SITE_CHAINS, sizeof(*kpatch_sites),
				       GFP_KERNEL);
		if (!kpatch_sites)
			return -ENOMEM;
	}
	memset(&try, 0, sizeof(try));
	try.req = req;
	if (req->check) {
		try.list = req->check;
		return kpatch_dry_run(&try);
	}
	for (;;) {
		memset(&try, 0, sizeof(try));
		try.req = req;
		ret = kpatch_try(&try);
		if (!ret)
			break;
		if (!kpatch_retry(req, &try.refused, ret, n++))
			break;
	}
	return ret;
}

/*
 * One try of @try->req: prepare it against the patches as they are now,
 * run it, and commit it or undo every step.  Caller holds kpatch_mutex
 * from the first step to the last, so the patches the try was prepared
 * for are those it changes.
 */
static __cold int kpatch_try(struct kpatch_try *try)
{
	const struct kpatch_request *req = try->req;
	struct kpatch_patch *add = req->add;
	int ret;

	lockdep_assert_held(&kpatch_mutex);
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
	ret = ret ?: add ? kpatch_sites_add(try) : 0;
	ret = ret ?: kpatch_build_ranges(try);
	ret = ret ?: kpatch_collect_sites(try);
	if (ret) {
		kpatch_sites_unmake(try);
		goto out;
	}
	ret = try->hooks ? kpatch_pre_hooks(try) : 0;
	if (!ret) {
		ret = kpatch_sites_guard(try);
		/* while it moves tasks out of its way, with the same sites */
		while (!ret) {
			ret = kpatch_run(try);
			if (!ret || !kpatch_move_out(try, ret))
				break;
			kpatch_run_again(try);
			ret = 0;
		}
		/* the gate's marks off, where no run cleared them */
		kpatch_final_targets(try);
		if (try->movers)
			kpatch_movers_free(try);
		if (ret)
			kpatch_cancel_hooks(try);
	}
	kpatch_sites_settle(try);
	if (!ret)
		kpatch_commit(try);
out:
	kpatch_free_ranges(try);
	kpatch_uncollect(try);
	if (ret && add)
		kpatch_kobj_remove(&add->kobj);
	return ret;
}

/*
 * Would @patch make a redirect lead into another one, with the patches
 * enabled now (none, if @replace takes them all out)?  A function may not
 * be both an old and a new function among the enabled patches, so every
 * redirect is exactly one hop.  Checked at every try: other updates may
 * run while one waits between tries.
 */
static __cold int kpatch_check_chain(struct kpatch_patch *patch, bool replace)
{
	struct kpatch_entry *e;
	unsigned int i;

	for (i = 0; i < patch->nr && !replace; i++) {
		e = &patch->entries[i];
		if (kpatch_in_table(e->new_addr, true)) {
			pr_err("%s: new function %pS is also an old function of a patch\n",
			       patch->kpmod->name, (void *)e->new_addr);
			return -EINVAL;
		}
		if (kpatch_in_table(e->old_addr, false)) {
			pr_err("%s: old function %pS is the new function of a patch\n",
			       patch->kpmod->name, (void *)e->old_addr);
			return -EINVAL;
		}
	}
	return 0;
}

/* Is @addr an old (@as_old) or a new function of an enabled patch? */
static bool kpatch_in_table(unsigned long addr, bool as_old)
{
	struct kpatch_patch *p;
	unsigned int i;

	list_for_each_entry(p, &kpatch_patches, list)
		for (i = 0; i < p->nr; i++)
			if (addr == (as_old ? p->entries[i].old_addr :
					      p->entries[i].new_addr))
				return true;
	return false;
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
	try->touched = kmalloc_array(n ?: 1, sizeof(*try->touched),
				     GFP_KERNEL);
	try->gone = kmalloc_array(n ?: 1, sizeof(*try->gone), GFP_KERNEL);
	try->ips = kmalloc_array(n ?: 1, sizeof(*try->ips), GFP_KERNEL);
	if (!try->touched || !try->gone || !try->ips)
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
 * one.  An update that makes at most KPATCH_OWN_SITES new sites hooks each
 * alone -- a jmp site where ftrace allows it and kpatch_direct says so,
 * else an ftrace_ops of its own -- so that a call costs no lookup; each
 * costs one ftrace update, and releasing an ftrace_ops waits for RCU-tasks
 * grace periods.  An update that makes more puts them all on kpatch_fops
 * in one ftrace update, and each call of them pays kpatch_site_find().  A
 * function that another ftrace user also hooks, or that ftrace refuses
 * kpatch_fops with the whole batch, gets an ftrace_ops of its own, so
 * that ftrace's error names it.  On failure, name that function and return
 * -EBUSY, -EINVAL or -ENOMEM, or -EAGAIN with try->refused saying why;
 * the caller releases what was made.
 */
static __cold int kpatch_sites_add(struct kpatch_try *try)
{
	struct kpatch_entry *e = NULL;
	unsigned int i, made = 0;
	bool own, jmp;
	int ret = 0;

	/*
	 * An earlier try of this request may have left a site pointer in an
	 * entry whose site is gone since; kpatch_sites_unmake() reads every
	 * entry from first_add on, also those this loop does not reach.
	 */
	for (i = try->first_add; i < try->nr_touched; i++)
		try->touched[i]->site = NULL;
	for (i = try->first_add; i < try->nr_touched && !ret; i++) {
		e = try->touched[i];
		e->site = kpatch_site_find(e->ip);
		/* a site with no entry is one kpatch kept: off with it first */
		if (e->site && !kpatch_top(e->site) &&
		    kpatch_site_drop(e->site)) {
			e->site = NULL;
			ret = -ENOMEM;
			break;
		}
		e->site = kpatch_site_find(e->ip);
		if (e->site)
			continue;
		if (!kpatch_site_new(e))
			ret = -ENOMEM;
		made++;
	}
	own = made <= KPATCH_OWN_SITES;
	/* kpatch_direct read once: one choice for the whole update */
	jmp = own && KPATCH_JMP && READ_ONCE(kpatch_direct);
	for (i = try->first_add; i < try->nr_touched && jmp && !ret; i++) {
		e = try->touched[i];
		if (e->site->via == KPATCH_VIA_NONE &&
		    kpatch_site_hook(e->site, true) == -ENOMEM)
			ret = -ENOMEM;
	}
	/*
	 * All at once; if ftrace refuses that, one at a time, and each it
	 * refuses then tries an ftrace_ops of its own, which names it.
	 */
	if (!own) {
		ret = ret ?: kpatch_fops_add(try, try->first_add,
					     try->nr_touched);
		for (i = try->first_add;
		     i < try->nr_touched && ret && ret != -ENOMEM; i++)
			if (kpatch_fops_add(try, i, i + 1) == -ENOMEM)
				ret = -ENOMEM;
		if (ret != -ENOMEM)
			ret = 0;
	}
	for (i = try->first_add; i < try->nr_touched && !ret; i++) {
		e = try->touched[i];
		if (e->site->via == KPATCH_VIA_NONE)
			ret = kpatch_site_hook(e->site, false);
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
	return ret == -ENOMEM || ret == -EBUSY || !ret ? ret : -EINVAL;
}

/*
 * A new site for entry @e, hooking nothing yet: its target is 0, and
 * calls go on unchanged until an update gives it one.  It is in
 * kpatch_sites from the start, where the guard and the handler find it,
 * and it pins the module of its function and kpatch (see struct
 * kpatch_site).
 */
static struct kpatch_site *kpatch_site_new(struct kpatch_entry *e)
{
	struct kpatch_site *site;

	lockdep_assert_held(&kpatch_mutex);
	site = kzalloc(sizeof(*site), GFP_KERNEL);
	if (!site)
		return NULL;
	site->ip = e->ip;
	site->mod = e->old_mod;
	INIT_HLIST_HEAD(&site->entries);
	if (site->mod)
		__module_get(site->mod);
	__module_get(THIS_MODULE);
	hlist_add_head_rcu(&site->node, kpatch_site_chain(site->ip));
	e->site = site;
	return site;
}

/*
 * Hook @site with a direct call of the guard (@jmp: a jmp site) or with
 * an ftrace_ops of its own.  On failure it hooks nothing, and its @ops is
 * as new, for another try.
 */
static int kpatch_site_hook(struct kpatch_site *site, bool jmp)
{
	int ret = ftrace_set_filter_ip(&site->ops, site->ip, 0, 0);

	if (ret)
		goto out;
	if (jmp) {
		site->jmp = (unsigned long)kpatch_guard;
		ret = kpatch_direct_set(&site->ops, site->jmp);
	} else {
		site->ops.func = kpatch_ftrace_handler;
		site->ops.flags = KPATCH_FOPS_FLAGS;
		ret = register_ftrace_function(&site->ops);
	}
	if (ret)
		kpatch_ftrace_gave_up();
out:
	if (ret) {
		ftrace_free_filter(&site->ops);
		memset(&site->ops, 0, sizeof(site->ops));
		site->jmp = 0;
		return ret;
	}
	site->via = jmp ? KPATCH_VIA_DIRECT : KPATCH_VIA_OPS;
	return 0;
}

/*
 * A registration with ftrace failed.  It may have failed after ftrace had
 * put the ops on its list (another IPMODIFY user or direct call owns the
 * function, say), and ftrace takes it off again without waiting: a CPU in
 * ftrace's list function, with preemption off, may still be reading the
 * ops and calling its handler.  So wait for those before the ops is freed.
 */
static __cold void kpatch_ftrace_gave_up(void)
{
	kpatch_sync_preempt_off();
}

/*
 * Build the table of code that must not be running for @try to be safe:
 * for every function whose visible version the update changes, the code
 * that runs for it now -- the new function of the entry on top of its
 * stack, if any -- and always the old function itself.  The old function
 * is on a stack not only when it runs unpatched: a task preempted inside
 * ftrace's trampoline, the ftrace_ops handler or kpatch's guard has
 * the return address of the old function's fentry call on its stack, and
 * resumes wherever the target it read pointed it.  Each function comes
 * with its pieces (kpatch_add_code()).  Removing an entry that is not on
 * top changes nothing visible and needs no check of its functions; the
 * modules the update stops redirecting into are another matter
 * (kpatch_add_reaches()).  Done before stop_machine(), under kpatch_mutex,
 * so the table cannot change between here and the callback.  On failure
 * nothing is left allocated.
 */
static int kpatch_build_ranges(struct kpatch_try *try)
{
	struct kpatch_entry *e, *top;
	struct kpatch_site *site;
	unsigned int i, n;
	int ret = 0;

	/* Room for two functions per entry and two modules; more if needed. */
	try->nr_ranges = 0;
	try->max_ranges = 4 * try->nr_touched + 4;
	try->ranges = kmalloc_array(try->max_ranges, sizeof(*try->ranges),
				    GFP_KERNEL);
	try->ways = kmalloc_array(try->nr_touched ?: 1, sizeof(*try->ways),
				  GFP_KERNEL);
	try->whole = kmalloc_array(try->nr_touched ?: 1, sizeof(*try->whole),
				   GFP_KERNEL);
	if (!try->ranges || !try->ways || !try->whole)
		ret = -ENOMEM;

	for (i = 0; i < try->nr_touched && !ret; i++) {
		e = try->touched[i];
		site = kpatch_site_find(e->ip);
		top = site ? kpatch_top(site) : NULL;
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
	/* only taking entries out can take the ways into a module away */
	ret = ret ?: try->first_add ? kpatch_add_reaches(try) : 0;
	if (ret) {
		kpatch_free_ranges(try);
		return ret;
	}

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
	int ret;

	ret = kpatch_add_range(try, fn, old ? e->old_size : e->new_size);
	return ret ?: kpatch_add_pieces(try, first,
					old ? e->old_mod : e->new_mod, fn);
}

static int kpatch_add_range(struct kpatch_try *try, unsigned long start,
			    unsigned long size)
{
	struct kpatch_range *r;

	if (!size)
		return 0;
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

/* ------------------------------------------------------------------------
 * Layer: a function's pieces
 *
 * What it adds: the compiler may move the unlikely blocks of a function f
 * into f.cold and part of its body into f.part.N, each elsewhere and listed
 * by kallsyms as a function of its own.  f jumps to such a piece, and a
 * .cold piece jumps back into f: a task asleep in a call made from a piece
 * has no return address in f, yet runs f's code when it wakes.  So to the
 * stack check the pieces are f: every symbol named like one ("f.cold",
 * "f.part.N", "f.part.N.cold", ...) that a jump of f or of its pieces leads
 * into, at any offset.  A jump to anything else is a tail call, whose
 * target is not f.  The next layer reads code the same way.
 * Without it: the stack check looks at [f, f + size) only, and a task
 * asleep under f.cold would let an update take f away under it.
 * Price: about 640 lines and 3.6 KiB of code; nothing per call; per update a
 * read of each changed function, byte by byte where it cannot be decoded.
 */

/*
 * Where a return jumps to where the kernel returns through a thunk (see
 * kpatch_init()), or 0.  Not a place a task can stay in: following a jump
 * there leads nowhere.
 */
static unsigned long kpatch_return_thunk;

/*
 * One reading: the code to read, in the update's ranges from @first on,
 * which grow as jumps lead further.  Jumps are followed only within the
 * text of @mod, or of vmlinux if it is NULL; with @fn set only into pieces
 * of the function at @fn (see kpatch_add_code()), else into any function
 * there (see kpatch_add_reach()).  @lost says that a jump could not be
 * followed: an indirect one, one that leaves @mod and is no return, or
 * code that could not be decoded.  @pad holds the runs of INT3 where
 * padding may be until kpatch_pads_follow() decides whether to follow
 * them: not if nothing can lead there (see kpatch_pad()); the first run
 * of a range has @starts, where an instruction read starts, from that run
 * to the range's end; @land the targets of the reading's jumps inside its
 * ranges, by address; @pads_all: the runs are followed, those found from
 * now on at once.
 */
#define KPATCH_PADS	16
#define KPATCH_LANDS	32

struct kpatch_reading {
	struct kpatch_try *try;
	unsigned int first;
	struct module *mod;
	unsigned long fn;
	char *name;		/* @fn's name, looked up when first needed */
	size_t nlen;
	char *sym;		/* room for kpatch_symbol() */
	bool lost;
	bool pads_all;
	unsigned int npad, nland;
	struct {
		unsigned long start, n, end;	/* n INT3s; its range's end */
		unsigned long *starts;		/* bit i: start + i */
	} pad[KPATCH_PADS];
	unsigned long land[KPATCH_LANDS];
};

enum kpatch_insn {
	KPATCH_INSN_SHORT,	/* not decoded: it would end past @avail */
	KPATCH_INSN_OTHER,
	KPATCH_INSN_JUMP,	/* jmp to an address given in the code */
	KPATCH_INSN_JCC,	/* jcc to an address given in the code */
	KPATCH_INSN_INDIRECT,	/* jmp through a register or memory */
	KPATCH_INSN_RET,
};

static int kpatch_read(struct kpatch_reading *rd);
static void kpatch_read_done(struct kpatch_reading *rd);
static void kpatch_read_done_pads(struct kpatch_reading *rd);
static int kpatch_read_range(struct kpatch_reading *rd, unsigned int r);
static int kpatch_read_code(struct kpatch_reading *rd, unsigned long start,
			    unsigned long end, bool bytewise);
static unsigned int kpatch_decode(const u8 *p, unsigned long avail,
				  unsigned long addr, enum kpatch_insn *kind,
				  unsigned long *target);
static bool kpatch_pad(struct kpatch_reading *rd, unsigned long addr,
		       unsigned long end);
static int kpatch_follow(struct kpatch_reading *rd, unsigned long target);
static void kpatch_land(struct kpatch_reading *rd, unsigned long target);
static int kpatch_follow_tables(struct kpatch_reading *rd, struct module *mod,
				unsigned long start, unsigned long end);
static int kpatch_pads_follow(struct kpatch_reading *rd);
static bool kpatch_pads_landed(const struct kpatch_reading *rd);
static int kpatch_follow_int3(struct kpatch_reading *rd, const u8 *p,
			      unsigned long avail, unsigned long addr,
			      bool padding);
static bool kpatch_kprobed(unsigned long addr);

/*
 * Add to @try's ranges the pieces of the function at @fn, in @mod (NULL:
 * vmlinux), whose own range, if any, is range @first.
 */
static __cold int kpatch_add_pieces(struct kpatch_try *try, unsigned int first,
				    struct module *mod, unsigned long fn)
{
	struct kpatch_reading rd = {
		.try = try,
		.first = first,
		.mod = mod,
		.fn = fn,
	};
	int ret = kpatch_read(&rd);

	kpatch_read_done(&rd);
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
 * the reading lost, as does an INT3 (kpatch_follow_int3()).  An INT3
 * where padding may be waits until the reading knows whether a jump
 * lands there (kpatch_pads_follow()).  A module's own tables are read
 * too (kpatch_follow_tables()); vmlinux's are not exported, and a static
 * branch of vmlinux leads only where it leads now (see Documentation.txt).
 * Without @fn, reading stops once it is lost: the whole module is checked
 * then.
 */
static int kpatch_read(struct kpatch_reading *rd)
{
	unsigned int r = rd->first;
	int ret;

	do {
		for (; r < rd->try->nr_ranges; r++) {
			ret = kpatch_read_range(rd, r);
			if (ret || (rd->lost && !rd->fn))
				return ret;
		}
		/* following a run may add ranges: read them too */
		ret = kpatch_pads_follow(rd);
		if (ret || (rd->lost && !rd->fn))
			return ret;
	} while (r < rd->try->nr_ranges);
	return 0;
}

/* Read range @r of @rd's try (see kpatch_read()). */
static int kpatch_read_range(struct kpatch_reading *rd, unsigned int r)
{
	unsigned long start = rd->try->ranges[r].start;
	unsigned long end = rd->try->ranges[r].end;

	return kpatch_read_code(rd, start, end, false) ?:
	       kpatch_follow_tables(rd, rd->mod, start, end);
}

/*
 * Read [@start, @end) of a range, from an instruction's start, or with
 * @bytewise each byte taken as one.
 */
static int kpatch_read_code(struct kpatch_reading *rd, unsigned long start,
			    unsigned long end, bool bytewise)
{
	unsigned long target, i, avail, *starts = NULL, base = 0;
	bool padding = false;
	enum kpatch_insn kind;
	unsigned int len;
	u8 p[16];
	int ret = 0;

	for (i = 0; start + i < end; i += bytewise ? 1 : len) {
		if (starts)
			__set_bit(start + i - base, starts);
		/*
		 * Each byte read once: a kprobe armed or taken off meanwhile
		 * must not show the decoder and the INT3 test two different
		 * instructions.
		 */
		avail = min(end - start - i, sizeof(p));
		memcpy(p, (const u8 *)start + i, avail);
		len = kpatch_decode(p, avail, start + i, &kind, &target);
		if (!len && kind == KPATCH_INSN_SHORT && !bytewise)
			break;
		if (*p == INT3_INSN_OPCODE) {
			/* byte by byte, any INT3 may hide a jump */
			padding &= !bytewise;
			if (!padding || !kpatch_pad(rd, start + i, end)) {
				ret = kpatch_follow_int3(rd, p, avail,
							 start + i, padding);
				/*
				 * A probe's INT3 puts what follows out of
				 * step.  The ways into a module ask kprobes
				 * and stop at a probe instead.
				 */
				bytewise |= !padding || rd->fn;
			} else if (!starts && rd->pad[rd->npad - 1].starts) {
				starts = rd->pad[rd->npad - 1].starts;
				base = rd->pad[rd->npad - 1].start;
			}
		} else {
			if (!len || kind == KPATCH_INSN_INDIRECT)
				rd->lost = true;
			bytewise |= !len;
			if (len && (kind == KPATCH_INSN_JUMP ||
				    kind == KPATCH_INSN_JCC)) {
				if (target < start || target >= end)
					ret = kpatch_follow(rd, target);
				else
					kpatch_land(rd, target);
			}
		}
		if (ret || (rd->lost && !rd->fn))
			return ret;
		/* after a ret or a jmp, INT3 is padding (SLS) */
		padding = kind == KPATCH_INSN_RET ||
			  kind == KPATCH_INSN_JUMP ||
			  kind == KPATCH_INSN_INDIRECT ||
			  (padding && *p == INT3_INSN_OPCODE);
	}
	return 0;
}

/*
 * Two questions need a function's code, not only its address: which
 * pieces it has, and where a redirect into a module can lead a task (this
 * layer and the next).  Both follow the jumps that leave the code
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

static char kpatch_opcode(const u8 *p, unsigned int n, unsigned int *i,
			  unsigned int *pfx);
static unsigned int kpatch_modrm_end(const u8 *p, unsigned int i,
				     unsigned int n);

/* The prefixes kpatch_decode() needs to know of. */
#define KPATCH_OPSIZE	1	/* 66: 16-bit operands */
#define KPATCH_ADDR32	2	/* 67: 32-bit addresses */
#define KPATCH_REXW	4	/* REX.W: 64-bit operands */

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
	unsigned int i, imm = 0, n = min(avail, 15UL), pfx = 0;
	bool imm16 = false;
	s32 rel32;
	u8 reg;
	char c;

	*kind = KPATCH_INSN_OTHER;
	c = kpatch_opcode(p, n, &i, &pfx);
	if (!c)
		goto truncated;
	imm16 = (pfx & (KPATCH_OPSIZE | KPATCH_REXW)) == KPATCH_OPSIZE;
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
		imm = islower(c) ? 1 : 4;
		break;
	case 'b':			/* imm8, imm16, imm16 + imm8, rel32 */
	case 'w':
	case 'e':
	case 'c':
		imm = strchr("bwec", c) - "bwec" + 1;
		break;
	case 'z':
		imm = imm16 ? 2 : 4;
		break;
	case 'v':
		imm = pfx & KPATCH_REXW ? 8 : imm16 ? 2 : 4;
		break;
	case 'o':
		imm = pfx & KPATCH_ADDR32 ? 4 : 8;
		break;
	default:			/* m B Z f F I: a ModRM byte first */
		if (i >= n)
			goto truncated;
		reg = (p[i] >> 3) & 7;
		i = kpatch_modrm_end(p, i, n);
		if (!i)
			goto truncated;
		if (c == 'B' || (c == 'f' && reg < 2))
			imm = 1;
		else if (c == 'Z' || (c == 'F' && reg < 2))
			imm = imm16 ? 2 : 4;
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
 * The letter of the opcode of the instruction at @p (see the maps above),
 * after its prefixes, which it adds to *@pfx: the opcode byte is p[*@i].
 * 0 if the opcode would be past p[@n - 1].
 */
static char kpatch_opcode(const u8 *p, unsigned int n, unsigned int *i,
			  unsigned int *pfx)
{
	u8 map;
	char c;

	for (*i = 0; *i < n; ++*i) {
		c = kpatch_op1[p[*i] >> 4][p[*i] & 15];
		if (c == 'R') {
			*pfx = (*pfx & ~KPATCH_REXW) | (p[*i] & 8 ? KPATCH_REXW : 0);
		} else if (c == 'p') {
			*pfx &= ~KPATCH_REXW;	/* a REX prefix counts only last */
			*pfx |= (p[*i] == 0x66 ? KPATCH_OPSIZE : 0) |
				(p[*i] == 0x67 ? KPATCH_ADDR32 : 0);
		} else {
			break;
		}
	}
	if (*i >= n)
		return 0;
	if (c == 'V') {			/* c5 RvvvvLpp, c4 RXBmmmmm WvvvvLpp */
		if (*i + 3 >= n)
			return 0;
		map = p[*i] == 0xc5 ? 1 : p[*i + 1] & 0x1f;
		*i += p[*i] == 0xc5 ? 2 : 3;
		c = map == 1 ? kpatch_op2[p[*i] >> 4][p[*i] & 15] :
		    map == 2 ? 'm' : map == 3 ? 'B' : 'x';
		return c == '.' || c == 'm' || c == 'B' ? c : 'x';
	}
	if (c != '0')
		return c;
	if (++*i >= n)
		return 0;
	c = kpatch_op2[p[*i] >> 4][p[*i] & 15];
	if (c == '3' || c == '4') {	/* 0f 38: ModRM; 0f 3a: ModRM, imm8 */
		++*i;
		return c == '3' ? 'm' : 'B';
	}
	return c;
}

/*
 * Where the operand that starts with the ModRM byte p[@i] ends: after its
 * SIB byte and displacement, if any.  0 if that is past p[@n - 1].
 */
static unsigned int kpatch_modrm_end(const u8 *p, unsigned int i,
				     unsigned int n)
{
	u8 modrm = p[i++];

	if (modrm >= 0xc0)		/* a register operand */
		return i;
	if ((modrm & 7) == 4) {		/* a SIB byte */
		if (i >= n)
			return 0;
		if (modrm < 0x40 && (p[i] & 7) == 5)
			i += 4;
		i++;
	} else if (modrm < 0x40 && (modrm & 7) == 5) {
		i += 4;			/* %rip-relative */
	}
	return i + (modrm >= 0x80 ? 4 : modrm >= 0x40 ? 1 : 0);
}

/*
 * INT3s where padding may be: after a ret, a jmp or another such INT3,
 * which the code before never runs on into.  Padding (of straight-line
 * speculation, of a return the kernel rewrote, between functions), or a
 * kprobe on the first instruction of a block -- which runs only if
 * something leads there: a jump landing on it, or on a probed
 * instruction before it in the same run that runs on into it, or code
 * the reading cannot see.  So the runs wait until the reading is done;
 * if then no jump of it landed in a run (@land), none left for code
 * it cannot know (@lost: an indirect jump, undecodable code, an
 * optimized kprobe's jmp out, a jump out of the module or of vmlinux,
 * a static call's tail), and the code is a module's, whose exception
 * table the reading has read (vmlinux's is not exported), nothing leads
 * into a run: whatever it hides never runs, and it is not followed.
 * Else every run is followed (kpatch_pads_follow()).  A probe's INT3 in
 * a run also puts the instructions read after it out of step, and a jump
 * among them can be lost, one that leads into the run included -- but
 * only if code there runs, which a jump of the reading must lead to.
 * Where it lands the code read is in step again, unless it lands inside
 * an instruction read: so that counts as landing in a run (@starts).
 * This spares the padding of nearly every function what following costs:
 * a kallsyms lookup for each false target (a module's kallsyms reads all
 * its symbols), or for the ways into a module a kprobes question.
 *
 * kpatch_pad() records the INT3 at @addr in its run (its range ends at
 * @end); false if the runs are followed already, or there is no room:
 * follow it now.
 */
static bool kpatch_pad(struct kpatch_reading *rd, unsigned long addr,
		       unsigned long end)
{
	unsigned int n = rd->npad;

	if (rd->pads_all)
		return false;
	if (n && rd->pad[n - 1].end == end &&
	    rd->pad[n - 1].start + rd->pad[n - 1].n == addr) {
		rd->pad[n - 1].n++;
		return true;
	}
	if (n == KPATCH_PADS) {
		rd->pads_all = true;
		return false;
	}
	rd->pad[n].starts = NULL;
	if (rd->mod && (!n || rd->pad[n - 1].end != end)) {
		/* a range's first run: where instructions start from here */
		rd->pad[n].starts = bitmap_zalloc(end - addr, GFP_KERNEL);
		if (!rd->pad[n].starts) {
			rd->pads_all = true;
			return false;
		}
	}
	rd->pad[n].start = addr;
	rd->pad[n].n = 1;
	rd->pad[n].end = end;
	rd->npad++;
	return true;
}

/* Follow a jump of @rd to @target. */
static int kpatch_follow(struct kpatch_reading *rd, unsigned long target)
{
	struct kpatch_try *try = rd->try;
	unsigned long start, size;
	unsigned int i;
	bool home;
	char *mod;

	for (i = rd->first; i < try->nr_ranges; i++)
		if (target >= try->ranges[i].start &&
		    target < try->ranges[i].end) {
			kpatch_land(rd, target);
			return 0;	/* read, or to be read */
		}
	if (target == kpatch_return_thunk)
		return 0;
	home = rd->mod ? kpatch_module_text(rd->mod, target) :
			 kpatch_kernel_text(target);
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
	if (kpatch_add_range(try, start, size))
		return -ENOMEM;
	kpatch_land(rd, target);
	return 0;
}

/*
 * A jump of the reading lands at @target, inside a range.  Kept by
 * address, not by what is there now: a kprobe armed or taken off while
 * the reading goes on must not hide that it lands in a run.
 */
static void kpatch_land(struct kpatch_reading *rd, unsigned long target)
{
	if (rd->nland < KPATCH_LANDS)
		rd->land[rd->nland++] = target;
	else
		rd->pads_all = true;
}

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
			rd->lost = true;
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

/*
 * Once the ranges are read: follow every run recorded (see kpatch_pad()),
 * unless nothing can lead into one.  For a function's pieces, where the
 * INT3 is not asked about, the code from the first run of a range to its
 * end is read again byte by byte: after a kprobe's INT3 the instructions
 * decoded were out of step, and may have swallowed a jump.  Following
 * may add ranges, which the caller reads, following their runs at once.
 * The ways into a module cannot read byte by byte (a false indirect jump
 * would lose every reading): a jump that leads into a run loses it, and
 * runs followed for another reason are asked of kprobes.
 */
static int kpatch_pads_follow(struct kpatch_reading *rd)
{
	unsigned long addr, end;
	unsigned int i;
	int ret = 0;

	if (rd->mod && !rd->lost && !rd->pads_all) {
		if (!kpatch_pads_landed(rd))
			return 0;
		/*
		 * The ways into a module: code there runs, and what was read
		 * after it may be out of step, whatever the INT3 is -- also
		 * one that kprobes does not know (a debugger's).
		 */
		if (!rd->fn) {
			rd->lost = true;
			return 0;
		}
	}
	rd->pads_all = true;
	for (i = 0; i < rd->npad && !ret; i++) {
		if (rd->fn) {
			/* runs of one range come in order: the first reads all */
			if (!i || rd->pad[i - 1].end != rd->pad[i].end)
				ret = kpatch_read_code(rd, rd->pad[i].start,
						       rd->pad[i].end, true);
			continue;
		}
		/* the ways into a module: a probe can hide anything */
		end = rd->pad[i].start + rd->pad[i].n;
		for (addr = rd->pad[i].start; addr < end && !rd->lost; addr++)
			rd->lost = kpatch_kprobed(addr);
	}
	kpatch_read_done_pads(rd);
	return ret;
}

/*
 * Does a jump of the reading land in a run, or after a range's first run
 * where no instruction read starts (inside one: the read went out of step
 * before it)?
 */
static bool kpatch_pads_landed(const struct kpatch_reading *rd)
{
	unsigned long off;
	unsigned int i, k;

	for (i = 0; i < rd->npad; i++)
		for (k = 0; k < rd->nland; k++) {
			if (rd->land[k] < rd->pad[i].start)
				continue;
			off = rd->land[k] - rd->pad[i].start;
			if (off < rd->pad[i].n ||
			    (rd->pad[i].starts && rd->land[k] < rd->pad[i].end &&
			     !test_bit(off, rd->pad[i].starts)))
				return true;
		}
	return false;
}

/* Forget the runs recorded (see kpatch_pad()). */
static void kpatch_read_done_pads(struct kpatch_reading *rd)
{
	unsigned int i;

	for (i = 0; i < rd->npad; i++)
		bitmap_free(rd->pad[i].starts);
	rd->npad = 0;
}

/* Free what a reading allocated. */
static void kpatch_read_done(struct kpatch_reading *rd)
{
	kpatch_read_done_pads(rd);
	kfree(rd->sym);
}

/*
 * An INT3 where an instruction starts: a kprobe (which keeps one on a jmp
 * or jcc it cannot optimize, and emulates the jump), code being rewritten,
 * or, after a ret or a jmp (@padding), the padding of straight-line
 * speculation or of a return the kernel rewrote -- which a kprobe on an
 * instruction that starts the next block looks exactly like.
 *
 * For a function's pieces, whatever jump it may hide is followed, as a
 * 1-byte opcode with a rel8 or a rel32 after it, or a jcc's 0f under the
 * INT3: a false target leads into no piece.  After one that is no padding
 * the code is read byte by byte (the caller).  For the ways into a module,
 * the instruction under an INT3 is unknown, so @rd is lost -- unless it
 * stands where padding may, and kprobes says it has no probe there.
 */
static int kpatch_follow_int3(struct kpatch_reading *rd, const u8 *p,
			      unsigned long avail, unsigned long addr,
			      bool padding)
{
	s32 rel32;
	int ret = 0;

	if (!rd->fn) {
		if (!padding || kpatch_kprobed(addr))
			rd->lost = true;
		return 0;
	}
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
 * Is there a kprobe at @addr, where the code has an INT3?  kprobes exports
 * no lookup, but registering a probe where one is joins it, and one where
 * none is fails on the INT3 (-EINVAL or -EILSEQ: kprobes does not probe
 * an INT3).  So register a disabled one, which changes no code, and take
 * it off again.  Any other error leaves the question open: true.
 */
#ifdef CONFIG_KPROBES
static __cold bool kpatch_kprobed(unsigned long addr)
{
	struct kprobe kp = {
		.addr	= (kprobe_opcode_t *)addr,
		.flags	= KPROBE_FLAG_DISABLED,
	};
	int ret = register_kprobe(&kp);

	if (!ret)
		unregister_kprobe(&kp);
	return ret != -EINVAL && ret != -EILSEQ;
}
#else
static bool kpatch_kprobed(unsigned long addr)
{
	return false;
}
#endif

/* ------------------------------------------------------------------------
 * Layer: ways into a module
 *
 * What it adds: the update that removes the last redirect into a module
 * also looks for tasks in the module's code that a redirect led them into
 * (below).  Without it: such a task could be left in a module that nothing
 * keeps loaded any more.  Price: about 230 lines and under 1 KiB of
 * code; nothing per call, nor for an update that takes nothing out.
 */

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

/*
 * For every module that @try takes redirects into away from: a new record
 * of its ways in, in try->ways (kpatch_ways_in_commit() keeps it if other
 * patches still redirect into the module); and if none will, the check of
 * where they can have led.
 */
static __cold int kpatch_add_reaches(struct kpatch_try *try)
{
	struct kpatch_ways_in *w;
	struct module *mod;
	unsigned int i, k;
	int ret = 0;

	for (i = 0; i < try->first_add && !ret; i++) {
		mod = kpatch_way_in(try->touched[i]);
		for (k = 0; mod && k < try->nr_ways; k++)
			if (try->ways[k]->mod == mod)
				mod = NULL;
		if (!mod)
			continue;
		w = kpatch_ways_in_new(try, mod);
		if (!w)
			return -ENOMEM;
		try->ways[try->nr_ways++] = w;
		if (!kpatch_redirected_after(try, mod))
			ret = kpatch_add_reach(try, mod, w->addr, w->nr);
	}
	return ret;
}

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

/* A new record of the ways into @mod: its record's, and those @try removes. */
static struct kpatch_ways_in *kpatch_ways_in_new(const struct kpatch_try *try,
						 struct module *mod)
{
	struct kpatch_ways_in *old = kpatch_ways_in_find(mod), *w;
	unsigned int i, n = old ? old->nr : 0;

	for (i = 0; i < try->first_add; i++)
		n += kpatch_way_in(try->touched[i]) == mod;
	w = kmalloc(struct_size(w, addr, n), GFP_KERNEL);
	if (!w)
		return NULL;
	w->mod = mod;
	w->nr = old ? old->nr : 0;
	if (old)
		memcpy(w->addr, old->addr, old->nr * sizeof(*w->addr));
	for (i = 0; i < try->first_add; i++)
		if (kpatch_way_in(try->touched[i]) == mod)
			w->addr[w->nr++] = try->touched[i]->new_addr;
	return w;
}

static struct kpatch_ways_in *kpatch_ways_in_find(const struct module *mod)
{
	struct kpatch_ways_in *w;

	lockdep_assert_held(&kpatch_mutex);
	list_for_each_entry(w, &kpatch_ways_in, list)
		if (w->mod == mod)
			return w;
	return NULL;
}

/* Does a patch that is enabled after @try redirect calls into @mod? */
static bool kpatch_redirected_after(const struct kpatch_try *try,
				    const struct module *mod)
{
	const struct kpatch_request *req = try->req;
	struct kpatch_patch *p;

	if (req->add && kpatch_redirects_into(req->add, mod))
		return true;
	if (req->replace)	/* every enabled patch goes */
		return false;
	list_for_each_entry(p, &kpatch_patches, list)
		if (p != req->remove && kpatch_redirects_into(p, mod))
			return true;
	return false;
}

/* Does @patch redirect calls into @mod? */
static bool kpatch_redirects_into(const struct kpatch_patch *patch,
				  const struct module *mod)
{
	unsigned int i;

	for (i = 0; i < patch->nr; i++)
		if (kpatch_way_in(&patch->entries[i]) == mod)
			return true;
	return false;
}

/*
 * Where the ways into @mod can have led a task: each new function at
 * @addr[@n] and whatever in @mod it reaches by jumps, as far as they go
 * (kpatch_read()).  Where a jump cannot be followed, the task can be
 * anywhere in @mod: then the whole module is checked instead, except for
 * its own kernel threads (kpatch_in_whole()).
 */
static __cold int kpatch_add_reach(struct kpatch_try *try, struct module *mod,
				   const unsigned long *addr, unsigned int n)
{
	struct kpatch_reading rd = {
		.try = try,
		.first = try->nr_ranges,
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
			ret = kpatch_add_range(try, start, size);
		else
			rd.lost = true;
	ret = ret ?: kpatch_read(&rd);
	kpatch_read_done(&rd);
	if (!ret && rd.lost) {
		try->nr_ranges = rd.first;
		try->whole[try->nr_whole++] = mod;
	}
	return ret;
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
static bool kpatch_in_whole(const struct kpatch_try *try,
			    struct task_struct *task, unsigned long addr)
{
	struct module *mod;
	unsigned int i;

	for (i = 0; i < try->nr_whole; i++) {
		mod = try->whole[i];
		if (!within_module(addr, mod))
			continue;
		if (!(task->flags & PF_EXITING) &&
		    within_module_core((unsigned long)kthread_func(task), mod))
			continue;
		return true;
	}
	return false;
}

/*
 * @try took effect: keep the new records of ways in for the modules that
 * patches still redirect into, and drop the old ones.
 */
static __cold void kpatch_ways_in_commit(struct kpatch_try *try)
{
	struct kpatch_ways_in *old, *w;
	struct kpatch_patch *p;
	bool kept = false;
	unsigned int k;

	for (k = 0; k < try->nr_ways; k++, kept = false) {
		w = try->ways[k];
		old = kpatch_ways_in_find(w->mod);
		if (old) {
			list_del(&old->list);
			kfree(old);
		}
		list_for_each_entry(p, &kpatch_patches, list)
			kept |= kpatch_redirects_into(p, w->mod);
		if (kept)
			list_add(&w->list, &kpatch_ways_in);
		else
			kfree(w);
		try->ways[k] = NULL;
	}
}

/* ------------------------------------------------------------------------
 * The ranges in order, and the sites of the try
 */

static int kpatch_cmp_range(const void *a, const void *b)
{
	const struct kpatch_range *ra = a, *rb = b;

	if (ra->start != rb->start)
		return ra->start < rb->start ? -1 : 1;
	return 0;
}

/* Free what kpatch_build_ranges() allocated, and records not kept. */
static void kpatch_free_ranges(struct kpatch_try *try)
{
	while (try->nr_ways)
		kfree(try->ways[--try->nr_ways]);
	kfree(try->ways);
	try->ways = NULL;
	kfree(try->whole);
	try->whole = NULL;
	try->nr_whole = 0;
	kfree(try->ranges);
	try->ranges = NULL;
	try->nr_ranges = 0;
}

/* The sites of @try's entries, each once. */
static int kpatch_collect_sites(struct kpatch_try *try)
{
	unsigned int i, n = 0;

	try->sites = kmalloc_array(try->nr_touched ?: 1, sizeof(*try->sites),
				   GFP_KERNEL);
	if (!try->sites)
		return -ENOMEM;
	for (i = 0; i < try->nr_touched; i++)
		if (!WARN_ON_ONCE(!try->touched[i]->site))
			try->sites[n++] = try->touched[i]->site;
	/* by address, a pointer read as the unsigned long it fits in */
	sort(try->sites, n, sizeof(*try->sites), kpatch_cmp_ulong, NULL);
	for (i = 0, try->nr_sites = 0; i < n; i++)
		if (!i || try->sites[i] != try->sites[i - 1])
			try->sites[try->nr_sites++] = try->sites[i];
	return 0;
}

/* ------------------------------------------------------------------------
 * Layer: hooks
 */

/*
 * Hooks.  Each part of an update (see struct kpatch_try) runs the hooks
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
 * (kpatch_patch_new()) and every hook returns before the try ends, so no
 * hook runs after its module could go.
 *
 * Without it: a patch changes code only; data that the new functions
 * read differently (shadow data, kpatch.h) has nobody to convert it.
 * Price: about 200 lines and 0.3 KiB of code; nothing per call, nor for an
 * update whose patches have no hook (try->hooks).
 */

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
			       try->req->verb,
			       try->parts[try->nr_parts - 1]->kpmod->name,
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

	if (r->why == KPATCH_HOOK)
		pr_err("%s '%s' refused: %s hook of '%s' failed (%d); rolled back\n",
		       try->req->verb, kpatch_req_name(try->req),
		       kpatch_hook_names[r->hook], r->hook_patch->kpmod->name,
		       r->hook_ret);
	for (i = try->nr_parts; i--; )
		kpatch_cancel_hook(try, i);
}

/*
 * From the callback, once the stack check has passed: run the stop hooks.
 * If one fails, undo those that ran before it and return its errno; it
 * must have changed nothing itself.
 */
static int kpatch_stop_hooks(struct kpatch_try *try)
{
	unsigned int i;
	int ret = 0;

	WRITE_ONCE(kpatch_hook_cpu, smp_processor_id());
	for (i = 0; i < try->nr_parts && !ret; i++)
		ret = kpatch_part_hook(try, i, KPATCH_STOP_PATCH);
	WRITE_ONCE(kpatch_hook_cpu, -1);
	if (ret) {
		try->refused.why = KPATCH_HOOK;
		kpatch_undo_hooks(try, i - 1);
	}
	return ret;
}

/*
 * From the callback: undo the first @n stop hooks of @try, last first.
 * kpatch_hook_cpu tells a call of a changed function from an undo or stop
 * hook apart from one from an NMI; only this CPU writes it.
 */
static void kpatch_undo_hooks(struct kpatch_try *try, unsigned int n)
{
	WRITE_ONCE(kpatch_hook_cpu, smp_processor_id());
	while (n--)
		kpatch_part_hook(try, n, KPATCH_UNDO_PATCH);
	WRITE_ONCE(kpatch_hook_cpu, -1);
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
 * Layer: jmp sites and the shared ftrace_ops
 *
 * What it adds, two other ways out of a site than its own ftrace_ops:
 *  - a jmp site, where ftrace makes a direct call a jmp (7.x): its fentry
 *    jumps straight to the newest new function, with no code of kpatch on
 *    the way.  Before an update's stop_machine() its jmp moves onto
 *    kpatch_guard, which takes the state machine as the handlers do, and
 *    a work item makes it a jmp again about 100 ms after the update;
 *  - kpatch_fops, one ftrace_ops that the sites of an update making more
 *    than KPATCH_OWN_SITES new ones share: one ftrace update for all of
 *    them instead of one each, and a lookup per call.
 * A site that ftrace could not release is kept, hooked and with no entry,
 * and the work item tries again (kept sites, below).
 * Without it: every site has an ftrace_ops of its own: per call +39 to +44
 * instructions on every kernel, and about 10 ms per function to apply.
 * Price: about 360 lines and 1.7 KiB of code, 0.6 KiB of data; per call a
 * jmp site costs +2 instructions over an unpatched call, a shared one +55
 * (README.md, Benchmarks).
 */

/*
 * Before stop_machine(): move @try's jmp sites that jump onto the guard,
 * one at a time.  Each gives on the guard the version its jmp gave (the
 * state is IDLE, and the first entry is the jmp's target), so no caller
 * sees two versions meanwhile.  On failure, the caller settles them back.
 */
static __cold int kpatch_sites_guard(struct kpatch_try *try)
{
	struct kpatch_site *site;
	unsigned int i;
	int ret;

	for (i = 0; i < try->nr_sites; i++) {
		site = try->sites[i];
		if (!site->jmp || site->jmp == (unsigned long)kpatch_guard)
			continue;
		ret = kpatch_direct_move(&site->ops, (unsigned long)kpatch_guard);
		if (ret) {
			pr_err("%s '%s' refused: ftrace cannot move %pS onto kpatch's guard (%d)\n",
			       try->req->verb,
			       try->parts[try->nr_parts - 1]->kpmod->name,
			       (void *)site->ip, ret);
			return ret == -ENOMEM ? ret : -EBUSY;
		}
		site->jmp = (unsigned long)kpatch_guard;
	}
	return 0;
}

/*
 * The guard: where a jmp site's fentry calls while an update changes it.
 * It is entered by the fentry call, so it finds on the stack the fentry
 * call's return address, which names the site, then the caller's return
 * address.  It saves the argument registers, asks the slow path, and
 * returns to the new function it names (overwriting its return address,
 * so that the new function runs as if the caller had called it) or, for
 * none, into the old function.  It is an ordinary function for objtool:
 * one return address on the stack on every path, so the unwinder and the
 * stack check walk through it; a task preempted in it has the old
 * function's fentry return address on its stack, which the stack check of
 * every update that changes the site refuses.  Aligned to 16 bytes, like
 * the compiler's functions: ftrace takes an odd direct address as a jmp.
 * It is used while an update runs and until kpatch_settle_fn() makes its
 * sites jmps again; the model in README.md's benchmarks says what its
 * return costs.
 */

asm(".pushsection .text, \"ax\", @progbits\n"
"	.balign	16\n"
"	.type	kpatch_guard, @function\n"
"kpatch_guard:\n"
	ASM_ENDBR
	CALL_DEPTH_ACCOUNT "\n"
"	pushq	%rdi\n"
"	pushq	%rsi\n"
"	pushq	%rdx\n"
"	pushq	%rcx\n"
"	pushq	%r8\n"
"	pushq	%r9\n"
"	pushq	%rax\n"
"	movq	56(%rsp), %rdi\n"
"	call	kpatch_guard_slow\n"
"	movq	%rax, %r11\n"
"	popq	%rax\n"
"	popq	%r9\n"
"	popq	%r8\n"
"	popq	%rcx\n"
"	popq	%rdx\n"
"	popq	%rsi\n"
"	popq	%rdi\n"
"	testq	%r11, %r11\n"
"	jz	1f\n"
"	movq	%r11, (%rsp)\n"
"1:\n"
	ASM_RET
"	.size	kpatch_guard, . - kpatch_guard\n"
"	.popsection\n"
);

/*
 * The guard's slow path; @ret is the fentry call's return address.  A jmp
 * site is in kpatch_sites for as long as its direct call can be made, and
 * freed only after kpatch_site_release() has waited for every CPU that
 * was in here with preemption off.
 *
 * A jmp site stays on the guard after its update until kpatch_settle_fn()
 * makes it a jmp, and for good with a new function at an odd address, so
 * a call of it may come while another update runs.  Only the sites the
 * running update marked (step 1 of kpatch_update_cb(): their target is
 * KPATCH_TARGET_SLOW) take the state machine; an unmarked site's entries
 * do not change under this update, and its first entry runs, without
 * touching the state.  A call that read the mark as not set before step 1
 * stored it reads the entries before that update changes any: its CPU's
 * stopper cannot answer the rendezvous while it runs.
 */
static unsigned long notrace __used kpatch_guard_slow(unsigned long ret)
{
	struct kpatch_site *site;
	struct kpatch_entry *top;
	unsigned long target = 0;

	preempt_disable_notrace();
	site = kpatch_site_find(ret - MCOUNT_INSN_SIZE);
	/* pairs with the release in kpatch_final_targets() */
	if (site && smp_load_acquire(&site->target) == KPATCH_TARGET_SLOW) {
		target = kpatch_redirect_slow(site);
	} else if (site) {
		top = kpatch_top(site);
		target = top ? top->new_addr : 0;
	}
	preempt_enable_notrace();
	return target;
}

/*
 * The ftrace_ops that kpatch's ftrace_ops sites share, but those that
 * have their own (see struct kpatch_site).  Its filter holds the ip of
 * each such site, and it is registered exactly while it has one: an
 * ftrace_ops registered with an empty filter would hook every function.
 * kpatch_fops_nr counts its sites; both change under kpatch_mutex.
 */
static struct ftrace_ops kpatch_fops = {
	.func	= kpatch_fops_handler,
	.flags	= KPATCH_FOPS_FLAGS,
};

static unsigned int kpatch_fops_nr;

/*
 * The handler of kpatch_fops (above), called by ftrace at the fentry call
 * @ip: it finds the site and sets the address ftrace returns to, so that
 * the call goes on in the new function.  The fast path is a lookup, a load
 * and a compare more than the least any IPMODIFY handler does.  A task
 * preempted in ftrace's trampoline around it has the old function's
 * fentry return address on its stack, which the stack check of every
 * update that changes this site refuses (kpatch_build_ranges()).
 *
 * Preemption is off from the lookup to the last use of the site: a site
 * leaves kpatch_sites before it is freed, and kpatch_sites_release() waits
 * for such sections (kpatch_sync_preempt_off()) before it frees a site
 * whose @ip may still reach this handler -- the rule of the guard's slow
 * path too.  A call that finds no site, or a site with target 0, goes on
 * in the old function: right for a site an update has not given an entry
 * yet, and for one whose last entry has gone.
 *
 * It runs in any context and calls nothing traceable, so it cannot
 * recurse: the ftrace_ops leave out FTRACE_OPS_FL_RECURSION.
 */
static void notrace kpatch_fops_handler(unsigned long ip,
					unsigned long parent_ip,
					struct ftrace_ops *ops,
					struct ftrace_regs *fregs)
{
	struct kpatch_site *site;

	preempt_disable_notrace();
	site = kpatch_site_find(ip);
	if (likely(site))
		kpatch_site_redirect(site, fregs);
	preempt_enable_notrace();
}

/*
 * Put the sites of @try's entries @from to @to that hook nothing yet on
 * kpatch_fops, in one ftrace update: their ips into its filter, or, if it
 * has no site, it registered with them.  Those where it is not alone then
 * leave it again, for an ftrace_ops of their own.  Returns ftrace's error,
 * and then none of them is on kpatch_fops; or -ENOMEM when those could not
 * leave it, and then they stay on it, kpatch's sites with no entry, which
 * the caller releases (kpatch_sites_unmake()).
 */
static int kpatch_fops_add(struct kpatch_try *try, unsigned int from,
			   unsigned int to)
{
	bool added = kpatch_fops.flags & FTRACE_OPS_FL_ENABLED;
	struct kpatch_site *site;
	unsigned int i, n = 0;
	int ret;

	lockdep_assert_held(&kpatch_mutex);
	for (i = from; i < to; i++)
		if (try->touched[i]->site->via == KPATCH_VIA_NONE)
			try->ips[n++] = try->touched[i]->ip;
	if (!n)
		return 0;
	if (added) {
		ret = ftrace_set_filter_ips(&kpatch_fops, try->ips, n, 0, 0);
	} else {
		/* reset: unregistering leaves the last ips in the filter */
		ret = ftrace_set_filter_ips(&kpatch_fops, try->ips, n, 0, 1) ?:
		      register_ftrace_function(&kpatch_fops);
		if (ret)
			kpatch_ftrace_gave_up();
	}
	if (ret)
		return ret;
	kpatch_fops_nr += n;
	for (i = from, n = 0; i < to; i++) {
		site = try->touched[i]->site;
		if (site->via != KPATCH_VIA_NONE)
			continue;
		if (!added || kpatch_fops_alone(site))
			site->via = KPATCH_VIA_FOPS;
		else
			try->ips[n++] = site->ip;
	}
	if (!n || !kpatch_fops_del(try->ips, n))
		return 0;
	for (i = from; i < to; i++)
		if (try->touched[i]->site->via == KPATCH_VIA_NONE)
			try->touched[i]->site->via = KPATCH_VIA_FOPS;
	return -ENOMEM;
}

/*
 * Is kpatch_fops alone on the fentry of @site: is it a call of
 * kpatch_fops's trampoline?  Not if another ftrace user hooks the function
 * too, a direct call say: adding an ip to a registered IPMODIFY ftrace_ops
 * does not ask a direct call there to share the function, as registering
 * one does.
 */
static bool kpatch_fops_alone(const struct kpatch_site *site)
{
	u8 insn[CALL_INSN_SIZE];
	s32 rel;

	if (copy_from_kernel_nofault(insn, (void *)site->ip, sizeof(insn)) ||
	    insn[0] != CALL_INSN_OPCODE || !kpatch_fops.trampoline)
		return false;
	memcpy(&rel, insn + 1, sizeof(rel));
	return site->ip + CALL_INSN_SIZE + rel == kpatch_fops.trampoline;
}

/*
 * Take @n ips out of kpatch_fops's filter, in one ftrace update, or
 * unregister kpatch_fops if they are its last: it is never left
 * registered with an empty filter.  A new filter takes ftrace an
 * allocation, so one that fails is tried again a few times.  Returns
 * ftrace's error, and then the filter and kpatch_fops_nr are as they were:
 * the caller keeps the sites of @ips, which kpatch then still owns (see
 * kpatch_sites_release()).
 */
static int kpatch_fops_del(unsigned long *ips, unsigned int n)
{
	bool last = n >= kpatch_fops_nr;
	int ret, tries = 5;

	lockdep_assert_held(&kpatch_mutex);
	do {
		if (!last)
			kpatch_test_point(KPATCH_TEST_FILTER);
		ret = last ? unregister_ftrace_function(&kpatch_fops) :
			     ftrace_set_filter_ips(&kpatch_fops, ips, n, 1, 0);
	} while (ret == -ENOMEM && --tries);
	if (!ret)
		kpatch_fops_nr -= last ? kpatch_fops_nr : n;
	return ret;
}

/*
 * Sites that kpatch could not release (ftrace failed to take them off),
 * under kpatch_mutex: each stays in kpatch_sites with no entry, target 0,
 * its hook and its pins, so that calls go on in the old function and
 * kpatch still owns what it left; the work item tries again
 * (kpatch_settle_fn()), and so does an update that needs the function.
 */
static unsigned int kpatch_sites_kept;

/*
 * The work item: the sites kpatch kept released, then every jmp site on
 * the guard back to a jmp, to the new function its first entry names, one
 * at a time: every caller already sees that version through the guard.
 * Each move is an ftrace code update (about 19 ms), so it runs from
 * kpatch_settle_work about 100 ms after the command that made the update
 * has returned (on a single CPU a work queued at once would still run
 * before the writer).  Under kpatch_mutex no update is in flight (the
 * state is IDLE between the tries of a waiting update too), and a site
 * with no entry is one kpatch kept.  A site whose jmp ftrace cannot set
 * stays on the guard: slower, but right.  Sites still kept are tried again
 * a second later.
 */
static void kpatch_settle_fn(struct work_struct *work);
static DECLARE_DELAYED_WORK(kpatch_settle_work, kpatch_settle_fn);

static void kpatch_settle_fn(struct work_struct *work)
{
	struct kpatch_site *site;
	struct hlist_node *tmp;
	unsigned long jmp;
	int bkt;

	mutex_lock(&kpatch_mutex);
	for (bkt = 0; kpatch_sites && bkt < KPATCH_SITE_CHAINS; bkt++) {
		hlist_for_each_entry_safe(site, tmp, &kpatch_sites[bkt], node) {
			jmp = kpatch_site_jmp(site);
			if (!kpatch_top(site)) {	/* a site kpatch kept */
				if (kpatch_sites_kept)
					kpatch_site_drop(site);
			} else if (site->jmp && site->jmp != jmp) {
				if (kpatch_direct_move(&site->ops, jmp))
					pr_warn_once("%pS stays on kpatch's guard: ftrace cannot make it a jmp\n",
						     (void *)site->ip);
				else
					site->jmp = jmp;
			}
		}
	}
	if (kpatch_sites_kept)
		schedule_delayed_work(&kpatch_settle_work, HZ);
	mutex_unlock(&kpatch_mutex);
}

static void kpatch_site_kept(struct kpatch_site *site)
{
	hlist_add_head_rcu(&site->node, kpatch_site_chain(site->ip));
	kpatch_sites_kept++;
}

/* Log that @n sites, the first at @ip, were kept: ftrace said @ret. */
static void kpatch_sites_kept_log(unsigned long ip, unsigned int n, int ret)
{
	if (n == 1)
		pr_warn("%pS keeps kpatch's ftrace hook for now (%d): it redirects nothing, and kpatch takes it off later\n",
			(void *)ip, ret);
	else if (n)
		pr_warn("%u functions keep kpatch's ftrace hook for now (%d): they redirect nothing, and kpatch takes them off later\n",
			n, ret);
}

/*
 * Try again to release @site, a site kpatch kept (kpatch_site_kept()), on
 * its own; 0 once it is gone.  As in kpatch_sites_release(), a site leaves
 * kpatch_fops's filter and is freed after the wait for calls that may have
 * found it.
 */
static int kpatch_site_drop(struct kpatch_site *site)
{
	int ret;

	lockdep_assert_held(&kpatch_mutex);
	if (WARN_ON_ONCE(!hlist_empty(&site->entries)))
		return -EBUSY;
	kpatch_sites_kept--;
	if (site->via != KPATCH_VIA_FOPS)
		return kpatch_site_release(site);
	hash_del_rcu(&site->node);
	ret = kpatch_fops_del(&site->ip, 1);
	if (ret) {
		kpatch_site_kept(site);
		return ret;
	}
	if (kpatch_fops.flags & FTRACE_OPS_FL_ENABLED)
		kpatch_sync_preempt_off();
	kpatch_site_free(site);
	return 0;
}

/* ------------------------------------------------------------------------
 * The run: the pre-walk, stop_machine() and the stack check
 */

/*
 * Run a prepared try: the pre-walk, stop_machine() and the grace period.
 * Returns 0, or -EBUSY with try->refused saying why, or -ENOMEM.
 */
static int kpatch_run(struct kpatch_try *try)
{
	int ret, old;

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

/*
 * The pre-walk, a layer of the run: most of the stack check, done before
 * stop_machine() so that the CPUs stop only for the tasks that ran since.
 * Correctness never depends on it: a task it did not remember is walked
 * by the callback, and with nothing remembered (no memory for the cache,
 * say) the callback walks every task.  Without it the window is the walk
 * of every task (README.md, Benchmarks: the window with 4,000 tasks).
 * Price: about 200 lines and 1.5 KiB of code; nothing per call; per
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

/*
 * Pre-walk every task (see above).  Returns -EBUSY if a stack refuses the
 * update.  Without memory for the cache nothing is remembered, and the
 * callback walks every task.  A try that lists the tasks in the way
 * (try->list: a dry run, or a try that may move them) goes on past a
 * refusal: the callback walks the task again, as it walks every task not
 * cached, and lists it.
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
		ret = kpatch_prewalk_task(t, try);
		if (ret && !try->list)
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

/* Drop what the pre-walk of one try learned. */
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
	if (!ret)
		kpatch_seen_add(try, task);
out:
	raw_spin_unlock_irqrestore(&task->pi_lock, flags);
	return ret;
}

/*
 * Walk the kernel stack of @task, which must not run meanwhile, and look
 * each return address up in the range table.  The walk follows the
 * reliable-stacktrace rules of the x86 arch code: a user-mode register
 * frame ends a task's kernel stack; any unwinder error, or a return
 * address outside known text, makes the stack unreliable.
 */
static int kpatch_walk_stack(struct task_struct *task,
			     struct kpatch_try *try)
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
				kpatch_refuse(try, KPATCH_UNRELIABLE, task, 0);
				return -EBUSY;
			}
		}
		addr = unwind_get_return_address(&state);
		if (!addr) {
			kpatch_refuse(try, KPATCH_UNRELIABLE, task, 0);
			return -EBUSY;
		}
		if (kpatch_in_ranges(try, addr) ||
		    (try->nr_whole && kpatch_in_whole(try, task, addr))) {
			kpatch_refuse(try, KPATCH_BUSY, task, addr);
			return -EBUSY;
		}
	}
	if (unwind_error(&state)) {
		kpatch_refuse(try, KPATCH_UNRELIABLE, task, 0);
		return -EBUSY;
	}
	return 0;
}

static bool kpatch_in_ranges(const struct kpatch_try *try,
			     unsigned long addr)
{
	unsigned int lo = 0, hi = try->nr_ranges;

	while (lo < hi) {
		unsigned int mid = lo + (hi - lo) / 2;

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

/*
 * A task's name, printed with %*pE: a task chooses its own name
 * (prctl(PR_SET_NAME)), and a newline in it must not start a line of the
 * log or of the check file.
 */
static int kpatch_comm_len(const char *comm)
{
	return strnlen(comm, TASK_COMM_LEN);
}

/*
 * @task, of the last refusal, is in the way.  A try that moves no task
 * stops at the first; a dry run, and a try that may move them, list it and
 * go on.  Returns whether to stop.  The task cannot run meanwhile: it is
 * blocked under its pi_lock (the pre-walk) or every CPU is stopped.
 */
static bool kpatch_stop_at(struct kpatch_try *try, struct task_struct *task)
{
	struct kpatch_check *list = try->list;
	struct kpatch_blocker *b;

	if (!list)
		return true;
	if (list->nr == KPATCH_CHECK_MAX) {
		list->more++;
		return false;
	}
	b = &list->blockers[list->nr++];
	b->addr = try->refused.why == KPATCH_BUSY ? try->refused.addr : 0;
	b->pid = try->refused.pid;
	memcpy(b->comm, try->refused.comm, sizeof(b->comm));
	b->how = kpatch_movable(try, task);
	b->task = NULL;
	if (b->how != KPATCH_STAYS && !try->req->check)
		b->task = get_task_struct(task);
	return false;
}

/* Remember that @task's stack is clean. */
static void kpatch_seen_add(struct kpatch_try *try,
			    struct task_struct *task)
{
	struct kpatch_seen *s = &try->seen[try->nr_seen++];

	lockdep_assert_held(&task->pi_lock);
	s->task = task;
	s->switches = task->nvcsw + task->nivcsw;
	s->start_time = task->start_time;
	s->pid = task->pid;
}

static int kpatch_cmp_seen(const void *a, const void *b)
{
	const struct kpatch_seen *x = *(const struct kpatch_seen **)a;
	const struct kpatch_seen *y = *(const struct kpatch_seen **)b;

	return x->task < y->task ? -1 : x->task > y->task;
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
 * The stop_machine() callback: the only place where entries are published
 * and taken out, and where sites change target.  Interrupts are off on
 * every CPU; who can still call a patched function meanwhile is listed at
 * kpatch_state.
 *
 * Why a caller never mixes versions, though the fast paths (an ftrace_ops
 * site's target, a jmp site's jmp) look at no state: only the sites of
 * @try change version.  Its jmp sites were moved onto the guard before
 * stop_machine(), one at a time, each giving the same version on the guard
 * as by its jmp.  Then the callback
 *  1. sets the target of each of its sites to KPATCH_TARGET_SLOW (on a jmp
 *     site the guard's mark), so that from then on their calls go through
 *     the state machine, and then leaves IDLE;
 *  2. waits until the stopper thread of every other CPU has seen that.  A
 *     caller that read an old target before step 1 either has the old
 *     function's fentry return address on its stack while it is preempted
 *     (which the stack check refuses), or runs with preemption or
 *     interrupts off, or in an NMI, and then holds up its CPU's stopper
 *     until it is done;
 *  3. checks the stacks, runs the stop hooks, changes the entries, then
 *     decides SUCCESS or FAILURE (or loses that race to a caller, which
 *     sets FAILURE; the undo hooks then roll the stop hooks back);
 *  4. writes the final targets, and clears the jmp sites' marks: the
 *     guard then gives their first entry.  A caller that reads one between
 *     step 3 and the end gets the version that the state, which it would
 *     read on the slow path, also gives.
 * So every call after step 2 sees one version: the old one until the state
 * is decided, the decided one after, and the state never goes back from
 * SUCCESS or FAILURE while the callback runs.  About 100 ms after the
 * update a work item makes the jmp sites jmps again, one at a time, to the
 * version decided (kpatch_settle_fn()).  The
 * data the stop hooks convert follows the same rule: no new function runs
 * before SUCCESS, which comes after the last hook, and an old function that
 * runs after the first hook began makes the update fail and be undone.
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
	struct kpatch_blocker *b;
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
	 * or gone since make it search.  for_each_process_thread() is two
	 * loops: leave with goto.
	 */
	rcu_read_lock();
	for_each_process_thread(g, t) {
		if (likely(next < end && next->task == t)) {
			if (likely(kpatch_seen_unchanged(next++, t)))
				continue;
		} else {
			s = kpatch_seen_search(try, t);
			if (s) {
				next = s + 1;
				if (kpatch_seen_unchanged(s, t))
					continue;
			}
		}
		ret = kpatch_check_task(t, try);
		if (ret && kpatch_stop_at(try, t))
			goto out;
		ret = 0;
	}
out:
	rcu_read_unlock();
	ret = ret ?: kpatch_check_exiting(try);
	if (!ret && try->list && try->list->nr) {
		/* the log names the first task in the way, as a try does */
		b = &try->list->blockers[0];
		try->refused.why = b->addr ? KPATCH_BUSY : KPATCH_UNRELIABLE;
		try->refused.addr = b->addr;
		try->refused.pid = b->pid;
		memcpy(try->refused.comm, b->comm, sizeof(b->comm));
		ret = -EBUSY;
	}
	return ret;
}

/*
 * Check one task's stack from the stop_machine() callback.  The task is not
 * running (see below for the exceptions), so its stack cannot change.
 */
static int kpatch_check_task(struct task_struct *task,
			     struct kpatch_try *try)
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
 * Layer: exiting tasks
 */

/*
 * What it adds: exiting tasks.  A task leaves the task list in exit_notify() -- at once
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
 *
 * Without it: a task in the tail of do_exit() inside a changed function
 * (an exit handler, say) goes unchecked.  Price: about 300 lines, 1.3 KiB
 * of code and 64 records (512 on PREEMPT_RT) kept; nothing per call of a
 * patched function; per exit of a task two tracepoint probes.
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
 * The callback's last steps; then settle and commit
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

	ret = try->hooks ? kpatch_stop_hooks(try) : 0;
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
		kpatch_undo_hooks(try, try->nr_parts);
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
 * Step 4 of kpatch_update_cb(): the targets of @try's sites once its
 * entries are final.  Each is a release, the pair of the acquire in
 * kpatch_site_redirect() and kpatch_guard_slow(): a call that reads a final
 * target also sees the entries and the data of the stop or undo hooks as
 * this CPU left them.
 */
static void kpatch_final_targets(struct kpatch_try *try)
{
	struct kpatch_entry *top;
	unsigned long target;
	unsigned int i;

	for (i = 0; i < try->nr_sites; i++) {
		/* a jmp site's target is only the guard's mark: cleared */
		top = try->sites[i]->jmp ? NULL : kpatch_top(try->sites[i]);
		target = top ? top->new_addr : 0;
		/* pairs with the acquire of the fast paths: see above */
		smp_store_release(&try->sites[i]->target, target);
	}
}

/*
 * After the grace period that ends an update, done or undone: each site of
 * @try without an entry released, and, for each jmp site of @try the
 * update left on the guard, kpatch_settle_work queued; so too for sites
 * kpatch had to keep.
 */
static void kpatch_sites_settle(struct kpatch_try *try)
{
	struct kpatch_site *site;
	unsigned int i, n = 0;
	bool move = false;

	for (i = 0; i < try->nr_sites; i++) {
		site = try->sites[i];
		if (!kpatch_top(site))
			try->gone[n++] = site;
		else if (site->jmp && site->jmp != kpatch_site_jmp(site))
			move = true;
	}
	if (kpatch_sites_release(try, n) || move)
		schedule_delayed_work(&kpatch_settle_work, HZ / 10);
}

/* The jmp @site should make now: to its newest new function, if it can. */
static unsigned long kpatch_site_jmp(struct kpatch_site *site)
{
	struct kpatch_entry *top = kpatch_top(site);

	/*
	 * A new function at an odd address (an asm function without
	 * alignment) stays on the guard: ftrace takes bit 0 of a direct
	 * address to mean "jmp" and clears it, and the jmp would land one
	 * byte early.
	 */
	if (!top || top->new_addr & 1)
		return (unsigned long)kpatch_guard;
	return kpatch_jmp_to(top->new_addr);
}

/*
 * Release the sites @try->gone[0..@n), whose last entry has gone (or
 * which never had one).  Each leaves kpatch_sites first, so that no call
 * finds it any more.  A site with an ftrace_ops of its own or a direct
 * call is then unhooked alone (kpatch_site_release()): unregistering an
 * ftrace_ops waits until no CPU is in its handler and no task in its
 * trampoline; for a direct call kpatch waits itself for the guard's slow
 * path (preemption off there).  Those on kpatch_fops leave its filter in one
 * ftrace update, and a call that found one of them before may still be in
 * kpatch_fops_handler(): the wait for it is the pair of the handler's
 * preempt_disable_notrace(), kpatch_sync_preempt_off() here, unless
 * kpatch_fops was unregistered, which waited.  That is all a site freed
 * while kpatch_fops stays registered needs; no RCU-tasks grace period,
 * which unregistering an ftrace_ops waits for because it frees the
 * ftrace_ops and its trampoline: both stay.  A task preempted in the
 * trampoline before the handler ran finds no site when it gets there and
 * goes on in the old function, the version the update that took the
 * site's last entry decided; one preempted after it has left with the
 * site's target, 0 since that update's stop_machine().  The update is
 * done or undone: where ftrace fails to unhook a site, kpatch keeps it
 * (kpatch_site_kept()).  Returns the number of sites kept.
 */
static unsigned int kpatch_sites_release(struct kpatch_try *try,
					 unsigned int n)
{
	struct kpatch_site *site;
	unsigned int i, m = 0, k = 0, kept = 0;
	int ret;

	lockdep_assert_held(&kpatch_mutex);
	for (i = 0; i < n; i++) {
		site = try->gone[i];
		if (WARN_ON_ONCE(!hlist_empty(&site->entries)) ||
		    site->via == KPATCH_VIA_OPS ||
		    site->via == KPATCH_VIA_DIRECT) {
			ret = hlist_empty(&site->entries) ?
			      kpatch_site_release(site) : 0;
			if (ret) {
				kpatch_sites_kept_log(site->ip, 1, ret);
				kept++;
			}
			try->gone[i] = NULL;
			continue;
		}
		hash_del_rcu(&site->node);
		if (site->via == KPATCH_VIA_FOPS)
			try->ips[m++] = site->ip;
		k++;
	}
	ret = m ? kpatch_fops_del(try->ips, m) : 0;
	if (k && (kpatch_fops.flags & FTRACE_OPS_FL_ENABLED))
		kpatch_sync_preempt_off();
	for (i = 0; i < n; i++) {
		site = try->gone[i];
		if (site && ret && site->via == KPATCH_VIA_FOPS)
			kpatch_site_kept(site);
		else if (site)
			kpatch_site_free(site);
	}
	if (ret)
		kpatch_sites_kept_log(try->ips[0], m, ret);
	return kept + (ret ? m : 0);
}

/* Release @site, on an ftrace_ops of its own or a direct call. */
static int kpatch_site_release(struct kpatch_site *site)
{
	int ret;

	hash_del_rcu(&site->node);
	ret = site->jmp ? kpatch_direct_clear(&site->ops, site->jmp) :
			  unregister_ftrace_function(&site->ops);
	if (ret) {
		kpatch_site_kept(site);
		return ret;
	}
	/*
	 * ftrace waits for its own trampolines and handlers, not for the
	 * target of a direct call: a CPU may still be in kpatch_guard_slow()
	 * with this site, preemption off.  Pairs with its
	 * preempt_disable_notrace().
	 */
	if (site->jmp)
		kpatch_sync_preempt_off();
	kpatch_site_free(site);
	return 0;
}

/* Free @site: out of kpatch_sites, it hooks nothing and no call holds it. */
static void kpatch_site_free(struct kpatch_site *site)
{
	ftrace_free_filter(&site->ops);
	module_put(site->mod);
	module_put(THIS_MODULE);
	kfree(site);
}

/*
 * @try took effect: the patches it removed out of the list, the one it
 * adds in, the post hooks, then the removed patches' pins dropped -- only
 * now may the modules of the hooks that ran go -- and their records
 * freed.  The sites are settled already.
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
	if (try->nr_ways)
		kpatch_ways_in_commit(try);
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

/* Free what kpatch_collect() and kpatch_collect_sites() allocated. */
static void kpatch_uncollect(struct kpatch_try *try)
{
	kfree(try->sites);
	kfree(try->ips);
	kfree(try->gone);
	kfree(try->touched);
	kfree(try->parts);
}

/* ------------------------------------------------------------------------
 * A refused try: undone, run again, or tried again later
 */

/*
 * Release the sites made for the entries @try adds (they have none yet):
 * the unwinding of kpatch_sites_add() before the sites were collected.
 */
static void kpatch_sites_unmake(struct kpatch_try *try)
{
	struct kpatch_entry *e;
	unsigned int i, n = 0;

	for (i = try->first_add; i < try->nr_touched; i++) {
		e = try->touched[i];
		if (e->site && hlist_empty(&e->site->entries))
			try->gone[n++] = e->site;
		e->site = NULL;
	}
	if (kpatch_sites_release(try, n))
		schedule_delayed_work(&kpatch_settle_work, HZ / 10);
}

/* Before @try runs again: what its last run left, cleared. */
static void kpatch_run_again(struct kpatch_try *try)
{
	if (try->list) {
		try->list->nr = 0;
		try->list->more = 0;
	}
	memset(&try->refused, 0, sizeof(try->refused));
	atomic_set(&try->cpus_in, 0);
	atomic_set(&try->cpus_seen, 0);
}

/*
 * The waiting list, a layer of the retry: between tries an update drops
 * kpatch_mutex and waits in kpatch_waiting (struct kpatch_waiting says
 * what it keeps), so that readers, other updates and kpatch_register() go
 * on while it sleeps.  Without it a retrying update holds the mutex for up
 * to retries * retry_delay_ms.  Price: about 50 lines; nothing per call.
 */

/*
 * Try number @n of @req failed with @ret, for @r.  If the stack check
 * refused it, or ftrace found the function busy (KPATCH_AGAIN), log the
 * culprit and, unless that was the last try
 * (kpatch_retries), a signal is pending or the refusal can only repeat,
 * sleep before the next one, with kpatch_mutex dropped and @req waiting
 * in kpatch_waiting.  Return whether to try again.
 */
static __cold bool kpatch_retry(const struct kpatch_request *req,
				const struct kpatch_refused *r, int ret,
				unsigned int n)
{
	unsigned int tries = 1 + min(READ_ONCE(kpatch_retries),
				     KPATCH_RETRIES_MAX);
	unsigned int delay = min(READ_ONCE(kpatch_retry_delay_ms),
				 KPATCH_RETRY_DELAY_MS_MAX);
	struct kpatch_waiting w = {
		.name = req->add ? req->add->kpmod->name : NULL,
		.remove = req->remove,
		.replace = req->replace,
	};
	bool last;

	lockdep_assert_held(&kpatch_mutex);
	if ((ret != -EBUSY && ret != -EAGAIN) || r->why == KPATCH_OK ||
	    r->why == KPATCH_HOOK)
		return false;	/* not busy: ftrace refused, a hook, say */
	/*
	 * A real signal ends the retries; TIF_NOTIFY_SIGNAL alone (the
	 * writer caught by another try's gate) does not, nor the sleep.
	 */
	last = n >= tries || task_sigpending(current) ||
	       fatal_signal_pending(current) ||
	       (r->why == KPATCH_RAN && !READ_ONCE(kpatch_failed_nmi));
	kpatch_report(req, r, n, tries, last, delay);
	if (last)
		return false;

	list_add(&w.list, &kpatch_waiting);
	mutex_unlock(&kpatch_mutex);
	/*
	 * Killable, not freezable: a write to the control file holds its
	 * file system's freeze protection (file_start_write()), which a
	 * frozen task must not hold.
	 */
	schedule_timeout_killable(msecs_to_jiffies(delay));
	mutex_lock(&kpatch_mutex);
	list_del(&w.list);
	if (!fatal_signal_pending(current))
		return true;
	/* a killed writer's update must not take effect: no more tries */
	pr_err("%s '%s' refused after %u %s: its writer was killed\n",
	       req->verb, kpatch_req_name(req), n, n == 1 ? "try" : "tries");
	return false;
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

/*
 * Does an update wait to remove @patch: an unpatch of it, or a replace?
 * For NULL: does an unpatch of any patch wait?
 */
static bool kpatch_removal_waits(const struct kpatch_patch *patch)
{
	struct kpatch_waiting *w;

	list_for_each_entry(w, &kpatch_waiting, list)
		if (patch ? w->remove == patch || w->replace : !!w->remove)
			return true;
	return false;
}

/* ------------------------------------------------------------------------
 * Layer: moving busy tasks
 */

/*
 * An update takes effect only at an instant when no task is in the code it
 * changes (kpatch_build_ranges()).  A task asleep in a read, a poll or a
 * futex wait there never gives one; on a fully preemptible kernel a hot
 * function rarely does, for some caller is always preempted in it.  When a
 * try is refused by such tasks, kpatch moves the user tasks among them out
 * of the way, holds them there, and runs the try again at once:
 *
 *   the try (kpatch_try())               a task it moves
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
 * The gate is for a hot function: the callers not yet in the way when a
 * run was refused would be in it at the next, one in some dozens of
 * calls preempted in it; held at the return from their first call, they
 * are out of it for good.  It takes the slow path of the try's sites
 * (their target KPATCH_TARGET_SLOW while the state is IDLE, which gives
 * the first entry as the fast path would) and kpatch_gate_pass() there.
 * That may run in any task context -- inside __schedule(), say, from a
 * probe that calls a patched function after its task left the runqueue --
 * so it only claims a slot and pins the task: no task_work_add(), which
 * would wake the task it runs on (lost, off its runqueue, if that task
 * had blocked already) or allocate.  The mover, in process context,
 * queues the callback on it.  The mover itself is never gated.
 *
 * Why a moved or held task runs no old code after the update takes
 * effect: it sleeps in kpatch_hold_fn() until the try that moved it has
 * ended, so it cannot go back in before the run that succeeds; that run
 * walks its stack inside stop_machine() like any other's (a task that ran
 * since the pre-walk is walked there) and finds it in the return path,
 * which is no code the update changes, or refuses.  Its interrupted call
 * restarts only after kpatch_hold_fn() has returned: in the version then
 * in effect.
 *
 * What the task sees, as with livepatch's fake signal: nothing is
 * delivered, TIF_NOTIFY_SIGNAL only ends an interruptible sleep; a call
 * that returns -ERESTARTSYS, -ERESTARTNOINTR, -ERESTARTNOHAND or
 * -ERESTART_RESTARTBLOCK is restarted by the kernel, as after a signal that
 * has no handler; a call that returns -EINTR on any signal (epoll_wait(),
 * for one) returns EINTR.  A preempted task finishes its call first.  A
 * fatal signal ends the hold at once; other signals wait for its end.
 *
 * Never moved, and still named when they refuse: kernel threads and the
 * user workers that never return to user space (PF_IO_WORKER,
 * PF_USER_WORKER); a kernel thread asleep interruptibly is woken, once per
 * try, as livepatch does, since it may be waiting to leave, but not held.
 * Tasks in uninterruptible or killable sleep, which a fake signal does not
 * wake; exiting, stopped or traced tasks; the task that writes the
 * command; a task moved already that is not out yet.
 *
 * Bounds: the gate is on only while its try runs, under kpatch_mutex, so
 * no other try or dry run ever meets it, and a task is held at most for
 * KPATCH_MOVE_ROUNDS rounds of KPATCH_MOVE_WAIT_MS and their runs, never
 * across the sleep between two tries.
 *
 * Without it (move=N): a try refused by a sleeping or preempted task
 * waits and tries again, and fails once the retries are spent.
 * Price: about 480 lines and 2 KiB of code; nothing per call but while
 * the gate is on: then per call of a gated site a hash probe, and once per
 * task a claimed slot; per try that finds a task in its way, the gate and
 * the list of a run (about 15 KiB, freed when the try ends).
 *
 * kpatch.ko cannot go while a task may still run kpatch_hold_fn(): each
 * queued callback holds a reference on kpatch from its task_work_add() to
 * the last statement of the callback, which drops it, and kpatch_exit()
 * then waits with synchronize_rcu_tasks() for a task still in the
 * instructions after that: preempted there or running them, it has neither
 * switched voluntarily nor returned to user space, which the wait waits
 * for.  The gate outlives its try for as long as a callback holds it.
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

/* Slots of the gate: tasks one try moves, holds or wakes, at most. */
#define KPATCH_GATE_BITS	8
#define KPATCH_GATE_SLOTS	BIT(KPATCH_GATE_BITS)

/*
 * A task the try moved, held, woke or marked: claimed by a cmpxchg of @task
 * from NULL, with a reference on it, and neither given back nor let go
 * until the try ends, so that the slot says "done already" and no other
 * task can come to have the same address meanwhile.  A slot the slow path
 * claimed is KPATCH_SLOT_CLAIMED until the mover queues @work on it
 * (KPATCH_SLOT_QUEUED); the mover's own claims go straight to
 * KPATCH_SLOT_QUEUED.
 */
enum { KPATCH_SLOT_FREE, KPATCH_SLOT_CLAIMED, KPATCH_SLOT_QUEUED };

struct kpatch_slot {
	struct task_struct *task;
	int state;
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

/*
 * kpatch_gate, the gate that the slow path passes tasks through, or NULL,
 * is set and cleared under kpatch_mutex, read with preemption off in the
 * slow path, and freed only after kpatch_sync_preempt_off() has waited
 * for those reads (kpatch_movers_free()).  The acquire in
 * kpatch_gate_pass() pairs with the release that publishes it, after its
 * slots were zeroed.
 */

/* Moved tasks wait on kpatch_hold_wq, the mover on kpatch_out_wq. */
static DECLARE_WAIT_QUEUE_HEAD(kpatch_hold_wq);
static DECLARE_WAIT_QUEUE_HEAD(kpatch_out_wq);
static bool kpatch_held_ever;

/*
 * Run of @try refused with @ret: move out the user tasks in its way that
 * can be moved, say whom, turn the gate on, and wait until every task held
 * is out, or for KPATCH_MOVE_WAIT_MS; wake the kernel threads that can be
 * woken, without a word: what happens next is up to each thread, and a
 * refusal names it as before.  The first refusal of a try only makes its
 * record, to list the tasks in the way at the next run.  Drops the
 * references the run took.  Returns whether to run again at once: some
 * task was moved, marked or came out since the run before, and the writer
 * was not killed (its write must then change nothing).
 */
static __cold bool kpatch_move_out(struct kpatch_try *try, int ret)
{
	const struct kpatch_request *req = try->req;
	struct kpatch_movers *m = try->movers;
	char who[8 * (TASK_COMM_LEN + 24)];
	unsigned int i, moved = 0, marked, arrived;
	struct kpatch_blocker *b;
	size_t len = 0;
	bool ok;

	lockdep_assert_held(&kpatch_mutex);
	/* only this try's gate can be on: it is freed before the try ends */
	WARN_ON_ONCE(kpatch_gate && (!m || kpatch_gate != m->gate));
	/* a killed writer's update must not take effect: no run after it */
	ok = ret == -EBUSY && (try->refused.why == KPATCH_BUSY ||
			       try->refused.why == KPATCH_UNRELIABLE) &&
	     !fatal_signal_pending(current);
	if (!m) {
		m = ok ? kpatch_movers_new() : NULL;
		try->movers = m;
		try->list = m ? &m->list : NULL;
		return m;
	}
	ok &= ++m->rounds <= KPATCH_MOVE_ROUNDS;
	for (i = 0; i < m->list.nr; i++) {
		b = &m->list.blockers[i];
		if (!b->task)
			continue;
		if (ok && kpatch_move_one(m->gate, b->task, b->how) &&
		    b->how == KPATCH_MOVED) {
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
	m->list.blockers = m->blockers;
	return m;
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
 * Queue the callback on each task the slow path marked (claimed a slot
 * for) since the last sweep; how many.  The acquire pairs with the release
 * in kpatch_gate_pass(): @task is set and pinned.  Only the mover, under
 * kpatch_mutex, moves a slot on from KPATCH_SLOT_CLAIMED.
 */
static unsigned int kpatch_gate_sweep(struct kpatch_gate *g)
{
	unsigned int n = 0;
	struct kpatch_slot *s;

	lockdep_assert_held(&kpatch_mutex);
	for (s = g->slot; s < g->slot + KPATCH_GATE_SLOTS; s++) {
		/* pairs with the release in kpatch_gate_pass() */
		if (smp_load_acquire(&s->state) != KPATCH_SLOT_CLAIMED)
			continue;
		WRITE_ONCE(s->state, KPATCH_SLOT_QUEUED);
		n += kpatch_gate_queue(g, s, s->task);
	}
	return n;
}

/*
 * @try ends: the gate off, the tasks it moved go on, and its record goes.
 * The gate itself goes with the last callback that holds it.
 */
static void kpatch_movers_free(struct kpatch_try *try)
{
	struct kpatch_movers *m = try->movers;
	unsigned int i;

	lockdep_assert_held(&kpatch_mutex);
	if (m->gating) {
		WRITE_ONCE(kpatch_gate, NULL);
		/* no slow path may still hold it: see kpatch_gate */
		kpatch_sync_preempt_off();
	}
	for (i = 0; i < KPATCH_GATE_SLOTS; i++)
		if (m->gate->slot[i].task)
			put_task_struct(m->gate->slot[i].task);
	WRITE_ONCE(m->gate->done, true);
	wake_up_all(&kpatch_hold_wq);
	kpatch_gate_put(m->gate);
	kfree(m);
	try->movers = NULL;
}

/*
 * What can be done about @task (see above)?  For a try and a dry run
 * alike; @task cannot run meanwhile (kpatch_stop_at()).
 */
static enum kpatch_how kpatch_movable(const struct kpatch_try *try,
				      struct task_struct *task)
{
	const struct kpatch_movers *m = try->movers;
	unsigned int state = READ_ONCE(task->__state);
	bool on_rq = READ_ONCE(task->on_rq);

	if (!READ_ONCE(kpatch_move) || task == current ||
	    (task->flags & PF_EXITING))
		return KPATCH_STAYS;
	/* moved, held, woken or marked already, and not out */
	if (m && kpatch_gate_find(m->gate, task))
		return KPATCH_STAYS;
	if (task->flags & (PF_KTHREAD | PF_IO_WORKER | PF_USER_WORKER))
		return !on_rq && (state & TASK_INTERRUPTIBLE) ?
		       KPATCH_WOKEN : KPATCH_STAYS;
	/* preempted, or asleep interruptibly: TWA_SIGNAL wakes only that */
	return on_rq || (state & TASK_INTERRUPTIBLE) ? KPATCH_MOVED :
						       KPATCH_STAYS;
}

/*
 * Move @task out of the way through a slot of @g: a user task gets
 * kpatch_hold_fn() queued; a kernel thread asleep interruptibly a wake-up
 * -- wake_up_state(task, TASK_INTERRUPTIBLE), which is not exported, as
 * the exported wake function of a wait queue entry does it -- which it
 * has to take as spurious, and may go back to sleep where it was.  True
 * if done.
 */
static bool kpatch_move_one(struct kpatch_gate *g, struct task_struct *task,
			    enum kpatch_how how)
{
	struct wait_queue_entry wait = { .private = task };
	struct kpatch_slot *s = kpatch_gate_claim(g, task);

	if (!s)
		return false;
	get_task_struct(task);
	WRITE_ONCE(s->state, KPATCH_SLOT_QUEUED);
	if (how == KPATCH_MOVED)
		return kpatch_gate_queue(g, s, task);
	default_wake_function(&wait, TASK_INTERRUPTIBLE, 0, NULL);
	return true;
}

/* Calls of @try's sites take the slow path, and with it the gate. */
static void kpatch_gate_on(struct kpatch_movers *m, struct kpatch_try *try)
{
	unsigned int i;

	if (!m->gating) {
		/* pairs with the acquire in kpatch_gate_pass() */
		smp_store_release(&kpatch_gate, m->gate);
		m->gating = true;
		kpatch_held_ever = true;
	}
	WARN_ON_ONCE(atomic_read(&kpatch_state) != KPATCH_STATE_IDLE);
	for (i = 0; i < try->nr_sites; i++)
		WRITE_ONCE(try->sites[i]->target, KPATCH_TARGET_SLOW);
}

/*
 * From the slow path, while the gate is on: claim a slot for the calling
 * user task, for the mover to hold it at its return to user space.  Any
 * task context, preemption off, which keeps @g alive (see kpatch_gate):
 * a cmpxchg and a reference taken, nothing that locks, wakes or
 * allocates.  The release pairs with the acquire in kpatch_gate_sweep().
 */
static noinline void notrace kpatch_gate_pass(void)
{
	/* pairs with the release in kpatch_gate_on() */
	struct kpatch_gate *g = smp_load_acquire(&kpatch_gate);
	struct kpatch_slot *s;

	if (!g || !in_task() || !current->mm || current == g->mover ||
	    (current->flags & (PF_KTHREAD | PF_IO_WORKER | PF_USER_WORKER |
			       PF_EXITING)) ||
	    atomic_read(&g->claims) >= KPATCH_GATE_SLOTS)
		return;
	s = kpatch_gate_claim(g, current);
	if (!s)
		return;
	get_task_struct(current);
	/* pairs with the acquire in kpatch_gate_sweep() */
	smp_store_release(&s->state, KPATCH_SLOT_CLAIMED);
}

/*
 * Claim a slot of @g for @task; NULL if it has one already, or none is
 * free.  Lock-free: from the slow path in any task as well.
 */
static struct kpatch_slot *notrace kpatch_gate_claim(struct kpatch_gate *g,
						    struct task_struct *task)
{
	unsigned int h = hash_ptr(task, KPATCH_GATE_BITS), n;
	struct task_struct *t;

	for (n = 0; n < KPATCH_GATE_SLOTS; n++, h = (h + 1) % KPATCH_GATE_SLOTS) {
		t = READ_ONCE(g->slot[h].task);
		if (!t)
			t = cmpxchg(&g->slot[h].task, NULL, task);
		if (!t) {
			atomic_inc(&g->claims);
			return &g->slot[h];
		}
		if (t == task)
			return NULL;
	}
	return NULL;
}

/*
 * Queue kpatch_hold_fn() on @task in slot @s of @g, from process context.
 * False if @task is past its last task work (exiting).
 */
static bool kpatch_gate_queue(struct kpatch_gate *g, struct kpatch_slot *s,
			      struct task_struct *task)
{
	s->gate = g;
	init_task_work(&s->work, kpatch_hold_fn);
	refcount_inc(&g->ref);
	atomic_inc(&g->pending);
	__module_get(THIS_MODULE);
	if (!task_work_add(task, &s->work, TWA_SIGNAL))
		return true;
	module_put(THIS_MODULE);
	atomic_dec(&g->pending);
	refcount_dec(&g->ref);
	return false;
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

/* The slot of @task in @g, or NULL. */
static struct kpatch_slot *kpatch_gate_find(struct kpatch_gate *g,
					    const struct task_struct *task)
{
	unsigned int h = hash_ptr(task, KPATCH_GATE_BITS), n;
	struct task_struct *t;

	for (n = 0; n < KPATCH_GATE_SLOTS; n++, h = (h + 1) % KPATCH_GATE_SLOTS) {
		t = READ_ONCE(g->slot[h].task);
		if (t == task)
			return &g->slot[h];
		if (!t)
			return NULL;
	}
	return NULL;
}

static void kpatch_gate_put(struct kpatch_gate *g)
{
	if (refcount_dec_and_test(&g->ref))
		kfree(g);
}

/* ------------------------------------------------------------------------
 * Layer: the dry run
 *
 * What it adds: `check patch|replace|unpatch ...`, which answers what the
 * command would do now, and lists every task in its way in the check file.
 * Without it: one learns only by trying.  Price: about 160 lines and
 * 1.1 KiB of code, and the text of the last answer; nothing per call.
 */

/*
 * A dry run of @try->req: the stack check a try makes, with the same
 * ranges, pre-walk and stop_machine(), listing every task in the way, and
 * nothing that changes the kernel: no sysfs directory, no ftrace site, no
 * hook, no state but the pre-walk's cache.  So it refuses what a try at
 * the same moment would refuse.  Caller holds kpatch_mutex.
 */
static __cold int kpatch_dry_run(struct kpatch_try *try)
{
	const struct kpatch_request *req = try->req;
	int ret;

	lockdep_assert_held(&kpatch_mutex);
	req->check->blockers = kcalloc(KPATCH_CHECK_MAX,
				       sizeof(*req->check->blockers),
				       GFP_KERNEL);
	if (!req->check->blockers)
		return -ENOMEM;
	ret = req->add ? kpatch_check_chain(req->add, req->replace) : 0;
	ret = ret ?: kpatch_collect(try) ?: kpatch_build_ranges(try);
	if (!ret && kpatch_checks(try) && READ_ONCE(kpatch_exiting_lost)) {
		pr_err("check %s '%s': out of memory recording an exiting task earlier, kpatch cannot check every stack any more\n",
		       req->verb, kpatch_req_name(req));
		ret = -ENOMEM;
	}
	ret = ret ?: kpatch_prewalk(try);
	if (!ret && kpatch_checks(try))
		ret = stop_machine(kpatch_dry_cb, try, cpu_online_mask);
	/* the update would apply once it has moved them all */
	if (ret == -EBUSY && req->check->nr && !req->check->more &&
	    kpatch_all_moved(req->check))
		ret = 0;
	kpatch_forget(try);
	kpatch_free_ranges(try);
	kpatch_uncollect(try);
	return ret;
}

/*
 * The stop_machine() callback of a dry run: the first CPU walks the
 * stacks a try would walk there, as kpatch_check_stacks() argues, and
 * lists every task in the way; nothing changes, so no CPU waits for
 * another.
 */
static int kpatch_dry_cb(void *data)
{
	struct kpatch_try *try = data;

	if (atomic_inc_return(&try->cpus_in) != 1)
		return 0;
	return kpatch_check_stacks(try);
}

/* Would an update move every task in @chk out of its way? */
static bool kpatch_all_moved(const struct kpatch_check *chk)
{
	unsigned int i;

	for (i = 0; i < chk->nr; i++)
		if (chk->blockers[i].how != KPATCH_MOVED)
			return false;
	return true;
}

/*
 * The check file: the result of the last `check`, written whole under
 * kpatch_mutex and freed at unload.
 */
static char *kpatch_check_text;

/*
 * Log the answer of `check VERB NAME ...` and keep it for the check file:
 * "VERB NAME ERRNO", then "PID WHERE COMM" for each task in the way, or
 * "moved PID WHERE COMM" for one the update would move out of it.  A
 * kernel thread it would wake is listed as one that stays: whether it
 * leaves is up to the thread.
 */
static __cold void kpatch_check_record(const char *verb, const char *name,
				       int ret, struct kpatch_check *chk)
{
	size_t size = 2 * KPATCH_NAME_MAX + 32 +
		      chk->nr * (KSYM_SYMBOL_LEN + 4 * TASK_COMM_LEN + 24);
	char where[KSYM_SYMBOL_LEN], *text;
	struct kpatch_blocker *b;
	unsigned int i;
	bool moved;
	int len;

	if (!ret && chk->nr)
		pr_info("check %s '%s': would apply, moving %u task%s out of the way\n",
			verb, name, chk->nr, chk->nr == 1 ? "" : "s");
	else if (!ret)
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
		moved = b->how == KPATCH_MOVED;
		if (b->addr) {
			pr_info("check %s '%s': pid %d (%*pE) in %pS%s\n", verb,
				name, b->pid, kpatch_comm_len(b->comm), b->comm,
				(void *)b->addr,
				moved ? ", which it would move out of the way" : "");
			kpatch_sym_name(where, b->addr, true);
		} else {
			pr_info("check %s '%s': pid %d (%*pE): stack cannot be walked reliably%s\n",
				verb, name, b->pid, kpatch_comm_len(b->comm),
				b->comm,
				moved ? ", which it would move out of the way" : "");
			strscpy(where, "unreliable", sizeof(where));
		}
		if (text)
			len += scnprintf(text + len, size - len,
					 "%s%d %s %*pE\n", moved ? "moved " : "",
					 b->pid, where,
					 kpatch_comm_len(b->comm), b->comm);
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

/*
 * "symbol+0xoff/0xsize", or "module:symbol+0xoff/0xsize" for a module
 * function; with @offset false, only the name ("symbol", "module:symbol").
 */
static __cold void kpatch_sym_name(char *buf, unsigned long addr, bool offset)
{
	char sym[KSYM_SYMBOL_LEN], *mod;
	unsigned long start, size;

	if (!kpatch_symbol(addr, sym, &start, &size, &mod))
		scnprintf(buf, KSYM_SYMBOL_LEN, "%#lx", addr);
	else if (offset)
		scnprintf(buf, KSYM_SYMBOL_LEN, "%s%s%s+%#lx/%#lx", mod ?: "",
			  mod ? ":" : "", sym, addr - start, size);
	else
		scnprintf(buf, KSYM_SYMBOL_LEN, "%s%s%s", mod ?: "",
			  mod ? ":" : "", sym);
}

/* ------------------------------------------------------------------------
 * The API: patches from modules
 */

/*
 * Disable @patch, or with @chk only say whether that would work now.
 * Caller holds kpatch_mutex; it is dropped while the update waits between
 * tries, and nobody else removes @patch meanwhile (kpatch_removal_waits()).
 * On success the record of @patch is freed.
 */
static __cold int kpatch_disable(struct kpatch_patch *patch,
				 struct kpatch_check *chk)
{
	struct kpatch_request req = {
		.verb = "unpatch",
		.remove = patch,
		.check = chk,
	};

	lockdep_assert_held(&kpatch_mutex);
	if (kpatch_removal_waits(patch)) {
		pr_err("unpatch '%s' refused: an unpatch of it or a replace waits to try again\n",
		       patch->kpmod->name);
		return -EBUSY;
	}
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

static LIST_HEAD(kpatch_loading);
static DEFINE_SPINLOCK(kpatch_loading_lock);

/* Take @mod's entries off the list, and put @add on it; had it any? */
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
 *           in each function ->old_addr and ->new_addr (sizes optional)
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
 * when a patch of that name is enabled or waits to be tried again, or
 * when /sys/kernel/kpatch/patches/<name> exists (kpatch makes it), -EBUSY
 * when a function is still in use after the retries or ftrace refused it,
 * -ENODEV when @kpmod->mod is going away, -ENOMEM, or what a pre or stop
 * hook returned.  On failure nothing has changed, neither in the kernel
 * nor in @kpmod and its functions.
 */
int kpatch_register(struct kpatch_module *kpmod, bool replace)
{
	struct kpatch_loading *loading;
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
		ret = kpatch_enable(kpmod, false, replace, NULL);
		if (ret)
			kpmod->name = name;
	}
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
 * the same patch or a `replace` waits between its tries; -ENOMEM.  On
 * failure the patch stays enabled.
 */
int kpatch_unregister(struct kpatch_module *kpmod)
{
	struct kpatch_patch *patch;
	int ret = -EINVAL;

	mutex_lock(&kpatch_mutex);
	list_for_each_entry(patch, &kpatch_patches, list)
		if (patch->kpmod == kpmod) {
			ret = kpatch_disable(patch, NULL);
			break;
		}
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
		ret = kpatch_disable(patch, NULL);
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

static bool kpatch_is_verb(const char *word)
{
	return !strcmp(word, "patch") || !strcmp(word, "replace") ||
	       !strcmp(word, "unpatch");
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
	ret = kpatch_enable(kpmod, true, replace, chk);	/* takes kpmod */
	mutex_unlock(&kpatch_mutex);
	return ret;
err:
	kfree(kpmod->funcs);
	kfree(kpmod->name);
	kfree(kpmod);
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

/* `unpatch NAME`, or with @chk its dry run */
static int kpatch_cmd_unpatch(char **tok, int ntok, struct kpatch_check *chk)
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
		ret = kpatch_disable(patch, chk);
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

	/*
	 * After a read of this file, ftrace's enabled_functions shows what
	 * the last update decided: jmp sites it left on the guard become
	 * jmps first (kpatch_settle_fn()).
	 */
	flush_delayed_work(&kpatch_settle_work);
	mutex_lock(&kpatch_mutex);
	list_for_each_entry(patch, &kpatch_patches, list) {
		kpmod = patch->kpmod;
		for (i = 0; i < patch->nr; i++) {
			e = &patch->entries[i];
			kpatch_sym_name(old, e->old_addr, false);
			kpatch_sym_name(new, e->new_addr, false);
			seq_printf(m, "%s %s+%#lx %016lx %s+%#lx %016lx %s\n",
				   kpmod->name, old, e->old_size, e->old_addr,
				   new, e->new_size, e->new_addr,
				   kpatch_top(e->site) == e ? "active" : "shadowed");
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

/*
 * Registered from load to unload on kpatch_ftrace_anchor(), which is never
 * called, only for its FTRACE_OPS_FL_PERMANENT: while it is there,
 * `sysctl kernel.ftrace_enabled=0` is refused instead of silently
 * unpatching the kernel, and kpatch does not load while ftrace is off.
 * Direct calls cannot carry that flag (ftrace sets their flags).
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
	debugfs_create_file("check", 0400, kpatch_debugfs_dir, NULL,
			    &kpatch_check_fops);
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
	int bkt;

	/*
	 * Every enabled patch and every site holds a reference on this
	 * module (see struct kpatch_site): none is left.
	 */
	WARN_ON(!list_empty(&kpatch_patches));
	for (bkt = 0; kpatch_sites && bkt < KPATCH_SITE_CHAINS; bkt++)
		WARN_ON(!hlist_empty(&kpatch_sites[bkt]));
	WARN_ON(kpatch_fops_nr);
	WARN_ON(!list_empty(&kpatch_ways_in));
	/* queued by an update whose sites are all gone since */
	cancel_delayed_work_sync(&kpatch_settle_work);
	/* a task may still be in the last instructions of kpatch_hold_fn() */
	if (kpatch_held_ever)
		synchronize_rcu_tasks();

	debugfs_remove_recursive(kpatch_debugfs_dir);
	kpatch_kobj_remove(&kpatch_patches_kobj);
	kpatch_kobj_remove(&kpatch_root_kobj);
	unregister_module_notifier(&kpatch_module_nb);
	/* a module still loading whose kpatch_register() failed */
	while (!list_empty(&kpatch_loading))
		kpatch_loading_swap(list_first_entry(&kpatch_loading,
						     struct kpatch_loading,
						     list)->mod, NULL);
	kpatch_exiting_stop(ARRAY_SIZE(kpatch_tps));
	unregister_ftrace_function(&kpatch_anchor_ops);
	ftrace_free_filter(&kpatch_anchor_ops);
	ftrace_free_filter(&kpatch_probe_ops);
	ftrace_free_filter(&kpatch_fops);
	kfree(kpatch_check_text);
	kfree(kpatch_sites);
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
