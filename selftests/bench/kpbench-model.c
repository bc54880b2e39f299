// SPDX-License-Identifier: GPL-2.0
/*
 * kpbench-model - the redirects of kpatch, ftrace and livepatch, replicated
 * in user space and timed with the TSC of the host's CPU (x86_64)
 *
 * Usage: taskset -c CPU kpbench-model [CSV]
 *
 * A model of the CPU, not a measurement of the kernel.  icount (the guest
 * tables of bench.sh) counts instructions and knows nothing of branch
 * prediction, while a real CPU pays most for a RET whose target is not the
 * one its return stack buffer (RSB) predicts.  Here a tiny function,
 * kpbench_f() (f(x) = x + 1; its replacement kpbench_new() returns x + 2),
 * is reached through each of these shapes, with the instructions the
 * kernel runs for them:
 *
 *  1. unpatched: f's fentry slot is the 5-byte NOP of a disabled ftrace
 *     call (x86_nops[5]), then its body;
 *  2. kpatch's site, an IPMODIFY ftrace_ops of its own with
 *     kpatch_ftrace_handler(), the only redirect kpatch has, on every
 *     kernel: the slot calls the ops' own trampoline, the copy of
 *     ftrace_caller (arch/x86/kernel/ftrace_64.S) that create_trampoline()
 *     (arch/x86/kernel/ftrace.c) makes when one ops is attached: it loads
 *     the ops from the end of the copy and calls the handler directly (the
 *     ops sets neither FTRACE_OPS_FL_RECURSION nor FTRACE_OPS_FL_RCU:
 *     ftrace_ops_get_func() in kernel/trace/ftrace.c), then RETs to the
 *     address the handler set.  The test bed's kernels have
 *     DYNAMIC_FTRACE_WITH_ARGS, so an IPMODIFY ops without SAVE_REGS gets
 *     ftrace_caller and its ftrace_regs, not ftrace_regs_caller;
 *  3. the same with the bare handler of kpatch_bench (it only sets the
 *     address): the floor of that path;
 *  4. the same with livepatch's klp_ftrace_handler()
 *     (kernel/livepatch/patch.c) and its recursion lock
 *     (include/linux/trace_recursion.h), one patch, no transition.
 *
 * ftrace_caller and klp_ftrace_handler() are the same in Linux 6.1, 6.12
 * and 7.1, apart from CALL_DEPTH_ACCOUNT (6.2 on), which is empty unless
 * the kernel does call depth tracking.  The handlers are C copies built
 * with the host's gcc -O2; %fs-relative thread-local variables stand in
 * for the %gs-relative per-CPU preempt count and current task.
 *
 * User space has no return thunk, no IBT and no call depth tracking.  So
 * every RET here is "ret; int3", the kernel's RET on a CPU that needs no
 * return thunk: where a retbleed or SRSO mitigation sends every RET
 * through a thunk (SRSO's "Safe RET" on AMD Zen 3 and 4 makes each one
 * mispredict by design), each RET of a shape costs that, whatever the
 * RSB holds.  The ENDBR that IBT puts at each function entry and
 * trampoline is left out (a NOP where IBT is off), and so are the RSB
 * stuffing and the depth accounting of call depth tracking (retbleed=stuff
 * on Intel Skylake and its kin).
 *
 * The call of kpbench_f() is made from the innermost of D nested functions
 * (D = 0, 2, 4, 8, 16), each of which returns normally afterwards, so that
 * a shape that leaves the RSB misaligned pays for it in the returns above
 * it.  A sample is the TSC ticks of KPBENCH_CALLS such calls, between
 * "lfence; rdtsc; lfence" and "rdtscp; lfence", after as many untimed
 * ones.  Each shape in turn is written into f's fentry slot; the samples
 * of all shapes and depths interleave, each sample with the stack at
 * another offset in a 4 KiB range (against 4K aliasing of the stack with
 * the data the shapes read).  Printed: the median ticks per call, minus
 * that of the unpatched f at the same depth, for three runs; the CSV, if
 * given, gets every median.
 *
 * Exit 1 if a shape gives the wrong result or anything else fails.
 */

#define _GNU_SOURCE
#include <assert.h>
#include <sched.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define KPBENCH_RUNS		3
#define KPBENCH_SAMPLES		1001	/* per shape, depth and run */
#define KPBENCH_CALLS		256	/* per sample */
#define KPBENCH_NR_DEPTHS	5

static const int kpbench_depths[KPBENCH_NR_DEPTHS] = { 0, 2, 4, 8, 16 };

#define asmlinkage		/* defined in the asm below */
#define likely(x)		__builtin_expect(!!(x), 1)
#define unlikely(x)		__builtin_expect(!!(x), 0)
#define READ_ONCE(x)		__atomic_load_n(&(x), __ATOMIC_RELAXED)
#define container_of(p, type, member) \
	((type *)((char *)(p) - offsetof(type, member)))

static inline void barrier(void)
{
	asm volatile("" : : : "memory");
}

asmlinkage int kpbench_f(int x);
asmlinkage int kpbench_new(int x);
asmlinkage void kpbench_tramp_kpatch(void);
asmlinkage void kpbench_tramp_bare(void);
asmlinkage void kpbench_tramp_klp(void);
asmlinkage void kpbench_nest2(void);
asmlinkage void kpbench_nest4(void);
asmlinkage void kpbench_nest8(void);
asmlinkage void kpbench_nest16(void);
asmlinkage unsigned long kpbench_loop(void *entry, unsigned long n, int x,
				      unsigned long shift);
/* __preempt_schedule_notrace(): never called */
asmlinkage void kpbench_preempt_schedule(void);

/* struct pt_regs: what ftrace_caller saves is its ftrace_regs */
struct kpbench_regs {
	unsigned long r15, r14, r13, r12, bp, bx, r11, r10, r9, r8;
	unsigned long ax, cx, dx, si, di, orig_ax, ip, cs, flags, sp, ss;
};

struct kpbench_ftrace_ops {		/* struct ftrace_ops, its head */
	void *func;
	struct kpbench_ftrace_ops *next;
	unsigned long flags;
	void *private;
	unsigned long rest[16];
};

struct kpbench_hlist_node {
	struct kpbench_hlist_node *next, **pprev;
};

/* ---- 2: kpatch's sites, entries and state ---- */

struct kpbench_site {			/* struct kpatch_site */
	struct kpbench_ftrace_ops ops;
	unsigned long target;
	struct kpbench_hlist_node *entries;
	struct kpbench_hlist_node node;
	unsigned long ip;
	void *mod;
};

struct kpbench_entry {			/* struct kpatch_entry */
	struct kpbench_hlist_node node;
	struct kpbench_site *site;
	unsigned long old_addr, old_size, new_addr, new_size;
	unsigned long ip;
	void *old_mod, *new_mod;
	int op;
};

#define KPATCH_TARGET_SLOW	1UL
#define KPATCH_OP_PATCH		1
#define KPATCH_OP_UNPATCH	2
#define KPATCH_STATE_IDLE	0
#define KPATCH_STATE_SUCCESS	2
#define KPATCH_STATE_FAILURE	3

struct kpbench_site kpbench_site;
static struct kpbench_entry kpbench_the_entry;
static int kpbench_state;		/* kpatch_state, an atomic_t */

static inline void preempt_disable_notrace(void);
static inline void preempt_enable_notrace(void);

/* kpatch_redirect_slow(), out of line as there (noinline) */
__attribute__((noipa)) unsigned long kpbench_redirect_slow(struct kpbench_site *site)
{
	struct kpbench_hlist_node *n;
	struct kpbench_entry *e = NULL;
	int state;

	preempt_disable_notrace();
	state = READ_ONCE(kpbench_state);
	if (state != KPATCH_STATE_IDLE)
		__builtin_trap();	/* kpatch_state_finish(): not modelled */
	barrier();			/* smp_rmb() */
	for (n = READ_ONCE(site->entries); n; n = READ_ONCE(n->next)) {
		e = container_of(n, struct kpbench_entry, node);
		if (!(state == KPATCH_STATE_FAILURE && e->op == KPATCH_OP_PATCH) &&
		    !(state == KPATCH_STATE_SUCCESS && e->op == KPATCH_OP_UNPATCH))
			break;
		e = NULL;
	}
	preempt_enable_notrace();
	return e ? e->new_addr : 0;
}

/* kpatch_ftrace_handler() */
void kpbench_kpatch_handler(unsigned long ip, unsigned long parent_ip,
			    struct kpbench_ftrace_ops *ops,
			    struct kpbench_regs *fregs)
{
	struct kpbench_site *site = container_of(ops, struct kpbench_site, ops);
	unsigned long target = READ_ONCE(site->target);	/* smp_load_acquire() */

	barrier();
	if (likely(target > KPATCH_TARGET_SLOW)) {
		fregs->ip = target;
		return;
	}
	if (target) {
		target = kpbench_redirect_slow(site);
		if (target)
			fregs->ip = target;
	}
}

/* ---- 3: the bare handler of kpatch_bench ---- */

struct kpbench_ftrace_ops kpbench_bare_ops;

void kpbench_bare_handler(unsigned long ip, unsigned long parent_ip,
			  struct kpbench_ftrace_ops *ops,
			  struct kpbench_regs *fregs)
{
	fregs->ip = (unsigned long)kpbench_new;
}

/* ---- 4: klp_ftrace_handler() and what it inlines ---- */

struct kpbench_list {
	struct kpbench_list *next, *prev;
};

struct kpbench_klp_func {		/* struct klp_func */
	const char *old_name;
	void *new_func;
	unsigned long old_sympos;
	void *old_func;
	unsigned long kobj[8];		/* struct kobject */
	struct kpbench_list node;
	struct kpbench_list stack_node;
	unsigned long old_size, new_size;
	bool nop;
	bool patched;
	bool transition;
};

struct kpbench_klp_ops {		/* struct klp_ops */
	struct kpbench_list node;
	struct kpbench_list func_stack;
	struct kpbench_ftrace_ops fops;
};

/* the asm gives the trampoline &kpbench_klp_ops.fops as kpbench_klp_ops+32 */
static_assert(offsetof(struct kpbench_klp_ops, fops) == 32, "klp_ops");

struct kpbench_task {			/* what it uses of task_struct */
	unsigned int trace_recursion;
	int patch_state;
};

#define KLP_TRANSITION_IDLE		-1
#define KLP_TRANSITION_UNPATCHED	0
#define TRACE_FTRACE_START		0	/* TRACE_FTRACE_BIT */
#define TRACE_CTX_NORMAL		3
#define TRACE_CTX_TRANSITION		4
#define NMI_MASK			0x00f00000
#define HARDIRQ_MASK			0x000f0000
#define SOFTIRQ_OFFSET			0x00000100
#define PREEMPT_NEED_RESCHED		0x80000000

struct kpbench_klp_ops kpbench_klp_ops;
static struct kpbench_klp_func kpbench_klp_func;
static struct kpbench_task kpbench_task;
static __thread struct kpbench_task *kpbench_current_task;
static __thread unsigned int kpbench_preempt_count = PREEMPT_NEED_RESCHED;

/* this_cpu_read_stable(current_task) */
static inline struct kpbench_task *kpbench_current(void)
{
	struct kpbench_task *t;

	asm("movq %1, %0" : "=r" (t) : "m" (kpbench_current_task));
	return t;
}

#define current kpbench_current()

static inline int preempt_count(void)
{
	unsigned int pc;

	asm volatile("movl %1, %0" : "=r" (pc) : "m" (kpbench_preempt_count));
	return pc & ~PREEMPT_NEED_RESCHED;
}

static inline void preempt_disable_notrace(void)
{
	asm volatile("incl %0" : "+m" (kpbench_preempt_count));
	barrier();
}

static inline void preempt_enable_notrace(void)
{
	bool zero;

	barrier();
	asm volatile("decl %0" : "+m" (kpbench_preempt_count), "=@cce" (zero));
	if (unlikely(zero))
		kpbench_preempt_schedule();
}

static inline unsigned char interrupt_context_level(void)
{
	unsigned long pc = preempt_count();
	unsigned char level = 0;

	level += !!(pc & (NMI_MASK));
	level += !!(pc & (NMI_MASK | HARDIRQ_MASK));
	level += !!(pc & (NMI_MASK | HARDIRQ_MASK | SOFTIRQ_OFFSET));
	return level;
}

static inline int ftrace_test_recursion_trylock(unsigned long ip,
						unsigned long pip)
{
	unsigned int val = READ_ONCE(current->trace_recursion);
	int bit;

	bit = TRACE_CTX_NORMAL - interrupt_context_level() + TRACE_FTRACE_START;
	if (unlikely(val & (1 << bit))) {
		bit = TRACE_CTX_TRANSITION + TRACE_FTRACE_START;
		if (val & (1 << bit))
			return -1;
	}
	val |= 1 << bit;
	current->trace_recursion = val;
	barrier();
	preempt_disable_notrace();
	return bit;
}

static inline void ftrace_test_recursion_unlock(int bit)
{
	preempt_enable_notrace();
	barrier();
	current->trace_recursion &= ~(1 << bit);
}

/* WARN_ON_ONCE(): a UD2 out of line, never reached here */
static inline bool kpbench_warn_on(bool cond)
{
	if (unlikely(cond))
		__builtin_trap();
	return false;
}

void kpbench_klp_handler(unsigned long ip, unsigned long parent_ip,
			 struct kpbench_ftrace_ops *fops,
			 struct kpbench_regs *fregs)
{
	struct kpbench_klp_ops *ops;
	struct kpbench_klp_func *func;
	struct kpbench_list *first;
	int patch_state;
	int bit;

	ops = container_of(fops, struct kpbench_klp_ops, fops);
	bit = ftrace_test_recursion_trylock(ip, parent_ip);
	if (kpbench_warn_on(bit < 0))
		return;
	/* list_first_or_null_rcu() */
	first = READ_ONCE(ops->func_stack.next);
	func = first == &ops->func_stack ? NULL :
	       container_of(first, struct kpbench_klp_func, stack_node);
	if (kpbench_warn_on(!func))
		goto unlock;
	barrier();			/* smp_rmb() */
	if (unlikely(func->transition)) {
		barrier();
		patch_state = current->patch_state;
		kpbench_warn_on(patch_state == KLP_TRANSITION_IDLE);
		if (patch_state == KLP_TRANSITION_UNPATCHED) {
			first = READ_ONCE(func->stack_node.next);
			func = container_of(first, struct kpbench_klp_func,
					    stack_node);
			if (&func->stack_node == &ops->func_stack)
				goto unlock;
		}
	}
	if (func->nop)
		goto unlock;
	fregs->ip = (unsigned long)func->new_func;
unlock:
	ftrace_test_recursion_unlock(bit);
}

/*
 * The code.  kpbench_f has a page of its own, made writable, so that its
 * fentry slot can be written like the kernel's.
 */
#define KPBENCH_STR(x)	#x
#define KPBENCH_XSTR(x)	KPBENCH_STR(x)

asm(".pushsection .text, \"ax\", @progbits\n"
"	.balign	4096\n"
"	.globl	kpbench_f\n"
"kpbench_f:\n"
"	.byte	0x0f, 0x1f, 0x44, 0x00, 0x00\n"	/* the fentry slot */
"	leal	1(%rdi), %eax\n"
"	ret\n"
"	int3\n"
"	.balign	4096\n"
"	.globl	kpbench_new\n"
"kpbench_new:\n"
"	.byte	0x0f, 0x1f, 0x44, 0x00, 0x00\n"
"	leal	2(%rdi), %eax\n"
"	ret\n"
"	int3\n"

/*
 * 2, 3, 4: an ftrace_ops' trampoline, what create_trampoline() copies of
 * ftrace_caller (up to ftrace_caller_end) and adds: save_mcount_regs
 * without frame pointer (FRAME_SIZE 168, the offsets of pt_regs), the ops
 * loaded from the end of the copy, the call of the handler, the RIP it
 * set written over the return address, restore_mcount_regs, RET.
 */
"	.macro	KPBENCH_FTRACE_TRAMP name, handler, ops\n"
"	.balign	16\n"
"	.globl	\\name\n"
"\\name:\n"
"	subq	$168, %rsp\n"
"	movq	%rax, 80(%rsp)\n"
"	movq	%rcx, 88(%rsp)\n"
"	movq	%rdx, 96(%rsp)\n"
"	movq	%rsi, 104(%rsp)\n"
"	movq	%rdi, 112(%rsp)\n"
"	movq	%r8, 72(%rsp)\n"
"	movq	%r9, 64(%rsp)\n"
"	movq	$0, 120(%rsp)\n"
"	movq	%rbp, %rdx\n"
"	movq	%rdx, 32(%rsp)\n"
"	movq	176(%rsp), %rsi\n"
"	movq	168(%rsp), %rdi\n"
"	movq	%rdi, 128(%rsp)\n"
"	subq	$5, %rdi\n"
"	leaq	176(%rsp), %rcx\n"
"	movq	%rcx, 152(%rsp)\n"
"	movq	9f(%rip), %rdx\n"
"	leaq	(%rsp), %rcx\n"
"	movq	$0, 136(%rsp)\n"
"	call	\\handler\n"
"	movq	128(%rsp), %rax\n"
"	movq	%rax, 168(%rsp)\n"
"	movq	32(%rsp), %rbp\n"
"	movq	64(%rsp), %r9\n"
"	movq	72(%rsp), %r8\n"
"	movq	112(%rsp), %rdi\n"
"	movq	104(%rsp), %rsi\n"
"	movq	96(%rsp), %rdx\n"
"	movq	88(%rsp), %rcx\n"
"	movq	80(%rsp), %rax\n"
"	addq	$168, %rsp\n"
"	ret\n"
"	int3\n"
"9:	.quad	\\ops\n"
"	.endm\n"
"	KPBENCH_FTRACE_TRAMP kpbench_tramp_kpatch, kpbench_kpatch_handler, kpbench_site\n"
"	KPBENCH_FTRACE_TRAMP kpbench_tramp_bare, kpbench_bare_handler, kpbench_bare_ops\n"
"	KPBENCH_FTRACE_TRAMP kpbench_tramp_klp, kpbench_klp_handler, kpbench_klp_ops + 32\n"

/* the slow path of preempt_enable_notrace(), never taken */
"	.balign	16\n"
"	.globl	kpbench_preempt_schedule\n"
"kpbench_preempt_schedule:\n"
"	xorl	%eax, %eax\n"
"	ret\n"
"	int3\n"

/* D nested functions, each its own: kpbench_nestD calls ... kpbench_f */
"	.macro	KPBENCH_NEST name, callee\n"
"	.balign	16\n"
"	.globl	\\name\n"
"\\name:\n"
"	call	\\callee\n"
"	ret\n"
"	int3\n"
"	.endm\n"
"	KPBENCH_NEST kpbench_nest1, kpbench_f\n"
"	KPBENCH_NEST kpbench_nest2, kpbench_nest1\n"
"	KPBENCH_NEST kpbench_nest3, kpbench_nest2\n"
"	KPBENCH_NEST kpbench_nest4, kpbench_nest3\n"
"	KPBENCH_NEST kpbench_nest5, kpbench_nest4\n"
"	KPBENCH_NEST kpbench_nest6, kpbench_nest5\n"
"	KPBENCH_NEST kpbench_nest7, kpbench_nest6\n"
"	KPBENCH_NEST kpbench_nest8, kpbench_nest7\n"
"	KPBENCH_NEST kpbench_nest9, kpbench_nest8\n"
"	KPBENCH_NEST kpbench_nest10, kpbench_nest9\n"
"	KPBENCH_NEST kpbench_nest11, kpbench_nest10\n"
"	KPBENCH_NEST kpbench_nest12, kpbench_nest11\n"
"	KPBENCH_NEST kpbench_nest13, kpbench_nest12\n"
"	KPBENCH_NEST kpbench_nest14, kpbench_nest13\n"
"	KPBENCH_NEST kpbench_nest15, kpbench_nest14\n"
"	KPBENCH_NEST kpbench_nest16, kpbench_nest15\n"

/*
 * kpbench_loop(entry, n, x, shift): n calls of entry(x), the sum of the
 * results, with the stack moved down by shift bytes (a multiple of 16)
 */
"	.balign	16\n"
"	.globl	kpbench_loop\n"
"kpbench_loop:\n"
"	pushq	%rbx\n"
"	pushq	%r12\n"
"	pushq	%r13\n"
"	pushq	%r14\n"
"	pushq	%r15\n"
"	movq	%rdi, %rbx\n"
"	movq	%rsi, %r12\n"
"	movl	%edx, %r13d\n"
"	xorl	%r14d, %r14d\n"
"	movq	%rcx, %r15\n"
"	subq	%r15, %rsp\n"
"1:	movl	%r13d, %edi\n"
"	call	*%rbx\n"
"	movslq	%eax, %rax\n"
"	addq	%rax, %r14\n"
"	decq	%r12\n"
"	jnz	1b\n"
"	addq	%r15, %rsp\n"
"	movq	%r14, %rax\n"
"	popq	%r15\n"
"	popq	%r14\n"
"	popq	%r13\n"
"	popq	%r12\n"
"	popq	%rbx\n"
"	ret\n"
"	.popsection\n");

/* ---- the shapes ---- */

enum {
	KPBENCH_UNPATCHED,
	KPBENCH_FTRACE_KPATCH,
	KPBENCH_FTRACE_BARE,
	KPBENCH_FTRACE_KLP,
	KPBENCH_NR_SHAPES
};

struct kpbench_shape {
	const char *name;		/* in the CSV */
	const char *label;		/* in the table */
	unsigned char op;		/* the fentry slot: 0 NOP, 0xe8 call */
	void *dest;
};

static const struct kpbench_shape kpbench_shapes[KPBENCH_NR_SHAPES] = {
	[KPBENCH_UNPATCHED] = { "unpatched",
		"1. unpatched: NOP at fentry (ticks)", 0, NULL },
	[KPBENCH_FTRACE_KPATCH] = { "ftrace_kpatch",
		"2. kpatch, its own ftrace_ops", 0xe8,
		kpbench_tramp_kpatch },
	[KPBENCH_FTRACE_BARE] = { "ftrace_bare",
		"3. ftrace_ops, bare IPMODIFY handler", 0xe8,
		kpbench_tramp_bare },
	[KPBENCH_FTRACE_KLP] = { "ftrace_klp",
		"4. livepatch, klp_ftrace_handler", 0xe8,
		kpbench_tramp_klp },
};

static void *kpbench_entry(int depth)
{
	switch (depth) {
	case 0:
		return kpbench_f;
	case 2:
		return kpbench_nest2;
	case 4:
		return kpbench_nest4;
	case 8:
		return kpbench_nest8;
	default:
		return kpbench_nest16;
	}
}

/* Write f's fentry slot for shape @s, as ftrace does. */
static void kpbench_patch(const struct kpbench_shape *s)
{
	static const unsigned char nop5[] = { 0x0f, 0x1f, 0x44, 0x00, 0x00 };
	unsigned char *ip = (unsigned char *)kpbench_f;
	int rel;

	if (!s->op) {
		memcpy(ip, nop5, sizeof(nop5));
	} else {
		rel = (int)((unsigned long)s->dest - (unsigned long)ip - 5);
		ip[0] = s->op;
		memcpy(ip + 1, &rel, sizeof(rel));
	}
	/* serialise before the new code runs */
	asm volatile("cpuid" : : "a" (0) : "rbx", "rcx", "rdx", "memory");
}

static void kpbench_setup(void)
{
	unsigned long ip = (unsigned long)kpbench_f;

	/* one site, one entry */
	kpbench_site.ops.func = kpbench_kpatch_handler;
	kpbench_site.ip = ip;
	kpbench_site.target = (unsigned long)kpbench_new;
	kpbench_the_entry.site = &kpbench_site;
	kpbench_the_entry.new_addr = (unsigned long)kpbench_new;
	kpbench_the_entry.old_addr = ip;
	kpbench_the_entry.ip = ip;
	kpbench_the_entry.node.pprev = &kpbench_site.entries;
	kpbench_site.entries = &kpbench_the_entry.node;
	kpbench_state = KPATCH_STATE_IDLE;

	kpbench_bare_ops.func = kpbench_bare_handler;

	/* one patch, not in transition: one klp_func on the func_stack */
	kpbench_klp_ops.fops.func = kpbench_klp_handler;
	kpbench_klp_func.new_func = kpbench_new;
	kpbench_klp_func.old_func = kpbench_f;
	kpbench_klp_ops.func_stack.next = &kpbench_klp_func.stack_node;
	kpbench_klp_ops.func_stack.prev = &kpbench_klp_func.stack_node;
	kpbench_klp_func.stack_node.next = &kpbench_klp_ops.func_stack;
	kpbench_klp_func.stack_node.prev = &kpbench_klp_ops.func_stack;
	kpbench_task.patch_state = KLP_TRANSITION_IDLE;
	kpbench_current_task = &kpbench_task;
}

static inline unsigned long kpbench_tsc_begin(void)
{
	unsigned int lo, hi;

	asm volatile("lfence; rdtsc; lfence" : "=a" (lo), "=d" (hi) : : "memory");
	return (unsigned long)hi << 32 | lo;
}

static inline unsigned long kpbench_tsc_end(void)
{
	unsigned int lo, hi;

	asm volatile("rdtscp; lfence" : "=a" (lo), "=d" (hi) : : "rcx", "memory");
	return (unsigned long)hi << 32 | lo;
}

/* The step of the TSC as rdtsc shows it: the GCD of successive deltas */
static unsigned long kpbench_tsc_step(void)
{
	unsigned long a, b, d, t, step = 0;
	int i;

	a = kpbench_tsc_begin();
	for (i = 0; i < 10000; i++) {
		b = kpbench_tsc_begin();
		for (d = b - a; d; d = t) {
			t = step % d;
			step = d;
		}
		a = b;
	}
	return step;
}

static int kpbench_cmp(const void *a, const void *b)
{
	unsigned long x = *(const unsigned long *)a;
	unsigned long y = *(const unsigned long *)b;

	return x < y ? -1 : x > y;
}

static unsigned long kpbench_samples[KPBENCH_NR_SHAPES][KPBENCH_NR_DEPTHS][KPBENCH_SAMPLES];
/* median ticks per call, by run, shape and depth */
static double kpbench_ticks[KPBENCH_RUNS][KPBENCH_NR_SHAPES][KPBENCH_NR_DEPTHS];

static void kpbench_run(int run)
{
	unsigned long sum, want, shift, t0, t1;
	const struct kpbench_shape *s;
	unsigned int i, j, k;
	void *entry;

	for (k = 0; k < KPBENCH_SAMPLES; k++) {
		shift = k * 16 % 4096;
		for (i = 0; i < KPBENCH_NR_SHAPES; i++) {
			s = &kpbench_shapes[i];
			kpbench_patch(s);
			want = KPBENCH_CALLS * (k + (s->op ? 2UL : 1UL));
			for (j = 0; j < KPBENCH_NR_DEPTHS; j++) {
				entry = kpbench_entry(kpbench_depths[j]);
				kpbench_loop(entry, KPBENCH_CALLS, k, shift);
				t0 = kpbench_tsc_begin();
				sum = kpbench_loop(entry, KPBENCH_CALLS, k, shift);
				t1 = kpbench_tsc_end();
				if (sum != want) {
					fprintf(stderr, "%s, D=%d: sum %lu, not %lu\n",
						s->name, kpbench_depths[j],
						sum, want);
					exit(1);
				}
				kpbench_samples[i][j][k] = t1 - t0;
			}
		}
	}
	for (i = 0; i < KPBENCH_NR_SHAPES; i++)
		for (j = 0; j < KPBENCH_NR_DEPTHS; j++) {
			qsort(kpbench_samples[i][j], KPBENCH_SAMPLES,
			      sizeof(unsigned long), kpbench_cmp);
			kpbench_ticks[run][i][j] =
				(double)kpbench_samples[i][j][KPBENCH_SAMPLES / 2] /
				KPBENCH_CALLS;
		}
}

/* Run @r's ticks per call (unpatched) or overhead over unpatched */
static double kpbench_value(int r, unsigned int i, unsigned int j)
{
	double v = kpbench_ticks[r][i][j];

	if (i == KPBENCH_UNPATCHED)
		return v;
	return v - kpbench_ticks[r][KPBENCH_UNPATCHED][j];
}

/* The median of @n values (n small), sorted in place */
static double kpbench_median(double *v, int n)
{
	double t;
	int a, b;

	for (a = 1; a < n; a++)
		for (b = a; b > 0 && v[b - 1] > v[b]; b--) {
			t = v[b];
			v[b] = v[b - 1];
			v[b - 1] = t;
		}
	return v[n / 2];
}

/* The median of the runs' values */
static double kpbench_mid(unsigned int i, unsigned int j)
{
	double v[KPBENCH_RUNS];
	int r;

	for (r = 0; r < KPBENCH_RUNS; r++)
		v[r] = kpbench_value(r, i, j);
	return kpbench_median(v, KPBENCH_RUNS);
}

/* "model name (family F model M)" from /proc/cpuinfo, without commas */
static void kpbench_cpu_model(char *buf, size_t size)
{
	char line[256], name[128] = "unknown", *p;
	int family = -1, model = -1;
	FILE *f;

	f = fopen("/proc/cpuinfo", "r");
	while (f && fgets(line, sizeof(line), f) && line[0] != '\n') {
		p = strchr(line, ':');
		if (!p)
			continue;
		p += strspn(p + 1, " \t") + 1;
		p[strcspn(p, "\n")] = '\0';
		if (!strncmp(line, "model name", 10))
			snprintf(name, sizeof(name), "%s", p);
		else if (!strncmp(line, "cpu family", 10))
			family = atoi(p);
		else if (!strncmp(line, "model\t", 6))
			model = atoi(p);
	}
	if (f)
		fclose(f);
	snprintf(buf, size, "%s (family %d model %d)", name, family, model);
	for (p = buf; *p; p++)
		if (*p == ',')
			*p = ' ';
}

static void kpbench_table(void)
{
	unsigned int i, j;
	int r;

	printf("| shape |");
	for (j = 0; j < KPBENCH_NR_DEPTHS; j++)
		printf(" D=%d |", kpbench_depths[j]);
	printf("\n|---|");
	for (j = 0; j < KPBENCH_NR_DEPTHS; j++)
		printf("---:|");
	printf("\n");
	for (i = 0; i < KPBENCH_NR_SHAPES; i++) {
		printf("| %s |", kpbench_shapes[i].label);
		for (j = 0; j < KPBENCH_NR_DEPTHS; j++) {
			for (r = 0; r < KPBENCH_RUNS; r++)
				printf(i == KPBENCH_UNPATCHED ? "%s%.1f" : "%s%+.1f",
				       r ? " / " : " ", kpbench_value(r, i, j));
			printf(" |");
		}
		printf("\n");
	}
}

/*
 * Per depth, the medians of the runs; then the target: 2 (kpatch's own
 * ftrace_ops) within 10 % of 3 (a bare IPMODIFY ftrace_ops) over the
 * unpatched call, at every depth (medians of the runs)
 */
static void kpbench_verdict(void)
{
	double k, b, d, far = 0;
	bool close = true;
	unsigned int j;

	printf("\nPer depth, the median of the runs:\n\n");
	for (j = 0; j < KPBENCH_NR_DEPTHS; j++) {
		k = kpbench_mid(KPBENCH_FTRACE_KPATCH, j);
		b = kpbench_mid(KPBENCH_FTRACE_BARE, j);
		printf("- D=%d: kpatch ftrace_ops %+.1f, bare ftrace_ops %+.1f, livepatch %+.1f\n",
		       kpbench_depths[j], k, b,
		       kpbench_mid(KPBENCH_FTRACE_KLP, j));
		d = b > 0 ? 100 * (k - b) / b : 0;
		close = close && b > 0 && d <= 10 && d >= -10;
		if (d * d > far * far)
			far = d;
	}
	printf("\n2 within 10 %% of 3, every depth (medians): %s (furthest: %+.1f %%)\n",
	       close ? "yes" : "no", far);
}

static int kpbench_csv(const char *path, const char *model)
{
	unsigned int i, j;
	FILE *csv;
	int r;

	csv = fopen(path, "w");
	if (!csv) {
		perror(path);
		return 1;
	}
	fprintf(csv, "cpu,shape,depth,run,ticks_per_call,overhead\n");
	for (r = 0; r < KPBENCH_RUNS; r++)
		for (i = 0; i < KPBENCH_NR_SHAPES; i++)
			for (j = 0; j < KPBENCH_NR_DEPTHS; j++)
				fprintf(csv, "%s,%s,%d,%d,%.3f,%.3f\n", model,
					kpbench_shapes[i].name, kpbench_depths[j],
					r + 1, kpbench_ticks[r][i][j],
					kpbench_ticks[r][i][j] -
					kpbench_ticks[r][KPBENCH_UNPATCHED][j]);
	if (fclose(csv)) {
		perror(path);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	unsigned long page = (unsigned long)kpbench_f & ~4095UL;
	double load[3] = { 0 };
	char model[192];
	cpu_set_t set;
	int r;

	if (argc > 2) {
		fprintf(stderr, "usage: %s [CSV]\n", argv[0]);
		return 1;
	}
	if (mprotect((void *)page, 4096, PROT_READ | PROT_WRITE | PROT_EXEC)) {
		perror("mprotect");
		return 1;
	}
	kpbench_cpu_model(model, sizeof(model));
	if (sched_getaffinity(0, sizeof(set), &set) || CPU_COUNT(&set) != 1)
		fprintf(stderr, "kpbench-model: not pinned to one CPU (taskset -c CPU)\n");
	getloadavg(load, 3);
	printf("%s; CPU %d of %ld; TSC step %lu ticks; load average %.2f %.2f %.2f\n\n",
	       model, sched_getcpu(), sysconf(_SC_NPROCESSORS_ONLN),
	       kpbench_tsc_step(), load[0], load[1], load[2]);

	kpbench_setup();
	for (r = 0; r < KPBENCH_RUNS; r++)
		kpbench_run(r);
	kpbench_patch(&kpbench_shapes[KPBENCH_UNPATCHED]);

	printf("TSC ticks per call of f(x) = x + 1 from the innermost of D nested\n");
	printf("functions, median of %d samples of %d calls, minus unpatched at\n",
	       KPBENCH_SAMPLES, KPBENCH_CALLS);
	printf("the same depth; runs 1 / 2 / 3:\n\n");
	kpbench_table();
	kpbench_verdict();
	getloadavg(load, 3);
	printf("\nload average after: %.2f %.2f %.2f\n", load[0], load[1], load[2]);
	return argc == 2 ? kpbench_csv(argv[1], model) : 0;
}
