// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_bench - measure the cost of kpatch, in a guest run under icount
 *
 * Meant for a QEMU guest booted with -icount shift=0,sleep=off -smp 1: the
 * guest clock then advances one nanosecond per instruction, so every time
 * printed here is a count of guest instructions, repeatable from run to run.
 *
 * Commands are written to /sys/module/kpatch_bench/parameters/cmd; the
 * answer of the last one is read back from .../parameters/result:
 *
 *   calls old|new   ns per call of kpatch_bench_old() (returns x + 1) or
 *                   kpatch_bench_new() (x + 2) over @loops calls, printed
 *                   in thousandths ("9000" is 9.000 instructions per call).
 *                   The overhead of a redirect is its row minus the
 *                   unpatched row.
 *   kpatch 1|0      redirect kpatch_bench_old with kpatch_register():
 *                   an IPMODIFY ftrace_ops of kpatch's own, on its site
 *   ftrace 1|0      redirect it with a bare IPMODIFY ftrace_ops (below)
 *   tasks N         keep N kthreads sleeping in schedule()
 *   ran R           make the next windows wake the first R of those
 *                   kthreads between kpatch's pre-walk of the stacks and
 *                   its stop_machine() callback (0: stop doing it)
 *   window F        kpatch_register() F generated functions, unregister;
 *                   prints "WINDOW REGISTER RAN": ns spent in kpatch's
 *                   stop_machine() callback (kpatch_update_cb, timed by a
 *                   kretprobe), in the whole kpatch_register() call, and
 *                   how many kthreads ran between their wakeup and the
 *                   callback
 *   seed F          the seed's stack check for F functions (every return
 *                   address against every function, then the whole hash)
 *                   under stop_machine(); prints the ns it took
 *   hold F          kpatch_register() F generated functions (0: unregister)
 *   probes 1|0      time the ftrace calls that make and release kpatch's
 *                   sites, with kretprobes (see kpatch_bench_api)
 *   api             prints "CALLS NS" for each of those functions, in the
 *                   order of kpatch_bench_api_names[] (-1 -1 for one not
 *                   probed), since the last "api"; then starts again at 0
 *   cb              prints "RUNS SUM MAX WALKED DISTINCT MOST COMM": the
 *                   calls of kpatch's stop_machine() callback
 *                   (kpatch_update_cb, the kretprobe of "window") since
 *                   the last "cb", the sum and the largest of their ns,
 *                   and the stacks they checked (calls of
 *                   kpatch_check_task() inside them), of how many distinct
 *                   tasks (of the first KPATCH_BENCH_SEEN), how many
 *                   times the task checked most often was, and its name
 *                   (-1 -1 -1 - without "walks"); then starts again at 0
 *   walks 1|0       count those calls with a kprobe (which the windows
 *                   then include), or stop
 *   info            prints "sizeof(struct kpatch_func) nr_generated_funcs"
 *
 * Reading .../parameters/value calls kpatch_bench_old(1): 2 unpatched, 3
 * when redirected to kpatch_bench_new().
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/ftrace.h>
#include <linux/hashtable.h>
#include <linux/irqflags.h>
#include <linux/kprobes.h>
#include <linux/kthread.h>
#include <linux/math64.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/sched.h>
#include <linux/sched/signal.h>
#include <linux/sched/task_stack.h>
#include <linux/slab.h>
#include <linux/stop_machine.h>
#include <linux/timekeeping.h>
#include <asm/unwind.h>

#include "kpatch.h"
#include "kpatch_bench.h"

static unsigned long loops = 1000000;
module_param(loops, ulong, 0644);
MODULE_PARM_DESC(loops, "calls per 'calls' measurement (default 1000000)");

static char result[256];
module_param_string(result, result, sizeof(result), 0444);
MODULE_PARM_DESC(result, "answer of the last command");

noinline int kpatch_bench_old(int x)
{
	barrier();
	return x + 1;
}
EXPORT_SYMBOL_GPL(kpatch_bench_old);

noinline int kpatch_bench_new(int x)
{
	barrier();
	return x + 2;
}

/* ---- calls: the measuring loop ---- */

static int kpatch_bench_sink;

#define KPATCH_BENCH_LOOP(fn) ({					\
	unsigned long i, flags;						\
	u64 t0, t1;							\
	int sum = 0;							\
									\
	local_irq_save(flags);						\
	t0 = ktime_get_ns();						\
	for (i = 0; i < loops; i++)					\
		sum += fn(i);						\
	t1 = ktime_get_ns();						\
	local_irq_restore(flags);					\
	WRITE_ONCE(kpatch_bench_sink, sum);				\
	div64_u64((t1 - t0) * 1000, loops);				\
})

/* ---- the bare ftrace_ops reference redirect ---- */

#ifdef ftrace_regs_set_instruction_pointer
#define kpatch_bench_set_ip(fregs, addr) \
	ftrace_regs_set_instruction_pointer(fregs, addr)
#elif defined(CONFIG_DYNAMIC_FTRACE_WITH_ARGS)
#define kpatch_bench_set_ip(fregs, addr) \
	ftrace_instruction_pointer_set(fregs, addr)
#else
#define kpatch_bench_set_ip(fregs, addr) (ftrace_get_regs(fregs)->ip = (addr))
#endif

static void notrace kpatch_bench_ftrace_handler(unsigned long ip,
						unsigned long parent_ip,
						struct ftrace_ops *ops,
						struct ftrace_regs *fregs)
{
	kpatch_bench_set_ip(fregs, (unsigned long)kpatch_bench_new);
}

static struct ftrace_ops kpatch_bench_ops = {
	.func	= kpatch_bench_ftrace_handler,
#ifdef CONFIG_DYNAMIC_FTRACE_WITH_ARGS
	.flags	= FTRACE_OPS_FL_IPMODIFY,
#else
	.flags	= FTRACE_OPS_FL_IPMODIFY | FTRACE_OPS_FL_SAVE_REGS,
#endif
};

static bool kpatch_bench_ftrace_on;

static int kpatch_bench_ftrace(bool on)
{
	int ret;

	if (on == kpatch_bench_ftrace_on)
		return 0;
	if (!on) {
		unregister_ftrace_function(&kpatch_bench_ops);
		ftrace_free_filter(&kpatch_bench_ops);
		kpatch_bench_ftrace_on = false;
		return 0;
	}
	ret = ftrace_set_filter_ip(&kpatch_bench_ops,
				   (unsigned long)kpatch_bench_old, 0, 0);
	if (!ret)
		ret = register_ftrace_function(&kpatch_bench_ops);
	if (ret) {
		ftrace_free_filter(&kpatch_bench_ops);
		return ret;
	}
	kpatch_bench_ftrace_on = true;
	return 0;
}

/* ---- kpatch patches ---- */

static struct kpatch_func *kpatch_bench_funcs;

static struct kpatch_module kpatch_bench_kpmod = {
	.mod = THIS_MODULE,
};

/* Fill in the patch: optionally kpatch_bench_old, then @nr generated. */
static int kpatch_bench_fill(bool main, unsigned int nr)
{
	struct kpatch_func *f = kpatch_bench_funcs;
	unsigned int i;

	if (kpatch_bench_kpmod.enabled)
		return -EBUSY;
	if (nr > kpatch_bench_nr_pairs || (!main && !nr))
		return -EINVAL;
	memset(f, 0, (kpatch_bench_nr_pairs + 1) * sizeof(*f));
	if (main) {
		f->old_addr = (unsigned long)kpatch_bench_old;
		f->new_addr = (unsigned long)kpatch_bench_new;
		f++;
	}
	for (i = 0; i < nr; i++, f++) {
		f->old_addr = (unsigned long)kpatch_bench_pairs[i].old;
		f->new_addr = (unsigned long)kpatch_bench_pairs[i].new;
	}
	kpatch_bench_kpmod.funcs = kpatch_bench_funcs;
	kpatch_bench_kpmod.num_funcs = f - kpatch_bench_funcs;
	return 0;
}

static int kpatch_bench_patch(bool on, bool main, unsigned int nr)
{
	int ret;

	if (!on)
		return kpatch_bench_kpmod.enabled ?
		       kpatch_unregister(&kpatch_bench_kpmod) : 0;
	ret = kpatch_bench_fill(main, nr);
	return ret ? ret : kpatch_register(&kpatch_bench_kpmod, false);
}

/* ---- window: time kpatch_update_cb with a kretprobe ---- */

static u64 kpatch_bench_cb_t0, kpatch_bench_cb_ns;
/* "cb": the callbacks since the last "cb", their ns, the largest */
static u64 kpatch_bench_cb_runs, kpatch_bench_cb_sum, kpatch_bench_cb_max;
static u64 kpatch_bench_cb_walked;
static bool kpatch_bench_in_cb;
#define KPATCH_BENCH_SEEN	1024
static const void *kpatch_bench_seen[KPATCH_BENCH_SEEN];
static unsigned int kpatch_bench_seen_n[KPATCH_BENCH_SEEN];
static unsigned int kpatch_bench_nr_seen, kpatch_bench_seen_most;
static char kpatch_bench_most_comm[TASK_COMM_LEN];

static int kpatch_bench_cb_entry(struct kretprobe_instance *ri,
				 struct pt_regs *regs)
{
	WRITE_ONCE(kpatch_bench_in_cb, true);
	kpatch_bench_cb_t0 = ktime_get_ns();
	return 0;
}

static int kpatch_bench_cb_ret(struct kretprobe_instance *ri,
			       struct pt_regs *regs)
{
	kpatch_bench_cb_ns = ktime_get_ns() - kpatch_bench_cb_t0;
	kpatch_bench_cb_runs++;
	kpatch_bench_cb_sum += kpatch_bench_cb_ns;
	kpatch_bench_cb_max = max(kpatch_bench_cb_max, kpatch_bench_cb_ns);
	WRITE_ONCE(kpatch_bench_in_cb, false);
	return 0;
}

/*
 * walks: kpatch_check_task(try, task) called from the callback; each
 * distinct task (its second argument) counted
 */
static int kpatch_bench_walk_pre(struct kprobe *p, struct pt_regs *regs)
{
	const void *task = (const void *)regs->si;
	unsigned int i;

	if (!READ_ONCE(kpatch_bench_in_cb))
		return 0;
	kpatch_bench_cb_walked++;
	for (i = 0; i < kpatch_bench_nr_seen; i++)
		if (kpatch_bench_seen[i] == task)
			break;
	if (i == kpatch_bench_nr_seen) {
		if (i == KPATCH_BENCH_SEEN)
			return 0;
		kpatch_bench_seen[i] = task;
		kpatch_bench_seen_n[i] = 0;
		kpatch_bench_nr_seen++;
	}
	if (++kpatch_bench_seen_n[i] > kpatch_bench_seen_most) {
		kpatch_bench_seen_most = kpatch_bench_seen_n[i];
		memcpy(kpatch_bench_most_comm,
		       ((const struct task_struct *)task)->comm, TASK_COMM_LEN);
	}
	return 0;
}

static struct kprobe kpatch_bench_walk_kp;
static bool kpatch_bench_walk_on;

static int kpatch_bench_walks(bool on)
{
	int ret;

	if (on && !kpatch_bench_walk_on) {
		memset(&kpatch_bench_walk_kp, 0, sizeof(kpatch_bench_walk_kp));
		kpatch_bench_walk_kp.symbol_name = "kpatch_check_task";
		kpatch_bench_walk_kp.pre_handler = kpatch_bench_walk_pre;
		ret = register_kprobe(&kpatch_bench_walk_kp);
		if (ret)
			return ret;
		kpatch_bench_walk_on = true;
	} else if (!on && kpatch_bench_walk_on) {
		unregister_kprobe(&kpatch_bench_walk_kp);
		kpatch_bench_walk_on = false;
	}
	kpatch_bench_cb_walked = 0;
	kpatch_bench_nr_seen = 0;
	kpatch_bench_seen_most = 0;
	return 0;
}

static struct kretprobe kpatch_bench_krp = {
	.kp.symbol_name	= "kpatch_update_cb",
	.entry_handler	= kpatch_bench_cb_entry,
	.handler	= kpatch_bench_cb_ret,
	.maxactive	= 4,
};

static bool kpatch_bench_krp_on;

static unsigned int kpatch_bench_ran_count(void);
static void kpatch_bench_ran_arm(bool on);

static int kpatch_bench_window(unsigned int nr)
{
	u64 t0, t1, window;
	unsigned int ran;
	int ret;

	ret = kpatch_bench_fill(false, nr);
	if (ret)
		return ret;
	kpatch_bench_cb_ns = 0;
	kpatch_bench_ran_arm(true);
	t0 = ktime_get_ns();
	ret = kpatch_register(&kpatch_bench_kpmod, false);
	t1 = ktime_get_ns();
	kpatch_bench_ran_arm(false);
	/* Before kpatch_unregister() runs the callback again. */
	window = kpatch_bench_cb_ns;
	ran = kpatch_bench_ran_count();
	if (ret)
		return ret;
	ret = kpatch_unregister(&kpatch_bench_kpmod);
	snprintf(result, sizeof(result), "%lld %llu %u",
		 kpatch_bench_krp_on ? (s64)window : -1LL, t1 - t0, ran);
	return ret;
}

/* ---- seed: the original stack check, as the baseline ---- */

/*
 * The seed's function table, of the seed's entries (a function and its
 * link, as struct kpatch_func was in 2014); it holds what it would hold
 * here: nothing.
 */
struct kpatch_bench_seed_func {
	unsigned long new_addr, new_size, old_addr, old_size;
	struct hlist_node node;
	int op;
};

#define KPATCH_BENCH_SEED_OP_UNPATCH	2

static DEFINE_HASHTABLE(kpatch_bench_seed_hash, 10);

struct kpatch_bench_seed {
	struct kpatch_func *funcs;
	unsigned int nr;
	u64 ns;
	int ret;
};

static struct kpatch_bench_seed_func *kpatch_bench_seed_get(unsigned long ip)
{
	struct kpatch_bench_seed_func *f;

	hash_for_each_possible_rcu(kpatch_bench_seed_hash, f, node, ip)
		if (f->old_addr == ip)
			return f;
	return NULL;
}

static int kpatch_bench_seed_cmp(unsigned long addr, unsigned long start,
				 unsigned long size)
{
	return addr >= start && addr < start + size ? -EBUSY : 0;
}

/* For one stack address: every function of the patch, then the hash. */
static int kpatch_bench_seed_addr(struct kpatch_bench_seed *s,
				  unsigned long addr)
{
	struct kpatch_bench_seed_func *active, *sf;
	struct kpatch_func *f;
	unsigned int i;
	int bkt;

	for (i = 0; i < s->nr; i++) {
		f = &s->funcs[i];
		active = kpatch_bench_seed_get(f->old_addr);
		if (!active) {
			if (kpatch_bench_seed_cmp(addr, f->old_addr, f->old_size))
				return -EBUSY;
		} else if (kpatch_bench_seed_cmp(addr, active->new_addr,
						 active->new_size)) {
			return -EBUSY;
		}
	}
	hash_for_each_rcu(kpatch_bench_seed_hash, bkt, sf, node)
		if (sf->op == KPATCH_BENCH_SEED_OP_UNPATCH &&
		    kpatch_bench_seed_cmp(addr, sf->new_addr, sf->new_size))
			return -EBUSY;
	return 0;
}

static int kpatch_bench_seed_task(struct kpatch_bench_seed *s,
				  struct task_struct *task)
{
	struct unwind_state state;
	unsigned long addr;

	if (task != current && READ_ONCE(task->on_cpu))
		return 0;
	if (!task_stack_page(task) || !refcount_read(&task->stack_refcount))
		return 0;
	for (unwind_start(&state, task, NULL, NULL); !unwind_done(&state);
	     unwind_next_frame(&state)) {
		addr = unwind_get_return_address(&state);
		if (addr && kpatch_bench_seed_addr(s, addr))
			return -EBUSY;
	}
	return 0;
}

static int kpatch_bench_seed_cb(void *data)
{
	struct kpatch_bench_seed *s = data;
	struct task_struct *g, *t;
	u64 t0 = ktime_get_ns();

	rcu_read_lock();
	for_each_process_thread(g, t) {
		s->ret = kpatch_bench_seed_task(s, t);
		if (s->ret)
			goto out;
	}
	s->ret = kpatch_bench_seed_task(s, &init_task);
out:
	rcu_read_unlock();
	s->ns = ktime_get_ns() - t0;
	return 0;
}

/* The size of the function at @addr, from "name+0x0/0x1c [mod]"; or 0. */
static unsigned long kpatch_bench_size(unsigned long addr)
{
	char buf[KSYM_SYMBOL_LEN], *p;
	unsigned long size;

	sprint_symbol(buf, addr);
	p = strchr(buf, '/');
	if (!p)
		return 0;
	p[strcspn(p, " ")] = '\0';
	return kstrtoul(p + 1, 16, &size) ? 0 : size;
}

static int kpatch_bench_seed(unsigned int nr)
{
	struct kpatch_bench_seed s = { .funcs = kpatch_bench_funcs, .nr = nr };
	struct kpatch_func *f;
	unsigned int i;
	int ret;

	ret = kpatch_bench_fill(false, nr);
	if (ret)
		return ret;
	/* The seed had the sizes from the patch module. */
	for (i = 0; i < nr; i++) {
		f = &kpatch_bench_funcs[i];
		f->old_size = kpatch_bench_size(f->old_addr);
		f->new_size = kpatch_bench_size(f->new_addr);
		if (!f->old_size || !f->new_size)
			return -ENOENT;
	}
	ret = stop_machine(kpatch_bench_seed_cb, &s, NULL);
	if (ret)
		return ret;
	if (s.ret)
		return s.ret;
	snprintf(result, sizeof(result), "%llu", s.ns);
	return 0;
}

/* ---- tasks: kthreads sleeping in schedule() ---- */

static struct task_struct **kpatch_bench_threads;
static u64 *kpatch_bench_ran_at;	/* per thread: when it last woke up */
static unsigned int kpatch_bench_nr_threads;
#define KPATCH_BENCH_MAX_THREADS	8192

static int kpatch_bench_sleeper(void *data)
{
	u64 *ran_at = data;

	while (!kthread_should_stop()) {
		set_current_state(TASK_INTERRUPTIBLE);
		if (!kthread_should_stop())
			schedule();
		__set_current_state(TASK_RUNNING);
		WRITE_ONCE(*ran_at, ktime_get_ns());
	}
	return 0;
}

/*
 * The kthreads run SCHED_FIFO, so that those woken by "ran" preempt the
 * writer in kpatch_register() before its stop_machine() wakes the stopper
 * (see below); asleep, they are like any other sleeping task.
 */
static int kpatch_bench_tasks(unsigned int nr)
{
	struct task_struct *t;
	unsigned int i;

	if (nr > KPATCH_BENCH_MAX_THREADS)
		return -EINVAL;
	while (kpatch_bench_nr_threads > nr)
		kthread_stop(kpatch_bench_threads[--kpatch_bench_nr_threads]);
	while (kpatch_bench_nr_threads < nr) {
		i = kpatch_bench_nr_threads;
		t = kthread_create(kpatch_bench_sleeper,
				   &kpatch_bench_ran_at[i], "kpbench/%u", i);
		if (IS_ERR(t))
			return PTR_ERR(t);
		sched_set_fifo_low(t);
		wake_up_process(t);
		kpatch_bench_threads[kpatch_bench_nr_threads++] = t;
	}
	return 0;
}

/*
 * ---- ran: tasks that run between kpatch's pre-walk and stop_machine() ----
 *
 * kpatch walks the stacks of the sleeping tasks before it calls
 * stop_machine(), and inside stop_machine() walks again only the tasks
 * that ran since.  A kprobe on stop_machine() wakes the first
 * kpatch_bench_ran_req kthreads there.  On the guest's one CPU they
 * preempt the writer at its next preemption point (cpus_read_lock() at
 * the latest, before the stopper thread is woken: the kthreads are
 * SCHED_FIFO, the writer is not), run, and sleep again.  Each then counts
 * as a task that ran; kpatch_bench_ran_count() checks how many did, from
 * the time each one last woke up.
 */
static unsigned int kpatch_bench_ran_req;
static atomic_t kpatch_bench_ran_armed = ATOMIC_INIT(0);
static u64 kpatch_bench_ran_t0;
static struct kprobe kpatch_bench_kp;
static bool kpatch_bench_kp_on;

static int kpatch_bench_stop_machine_pre(struct kprobe *p,
					 struct pt_regs *regs)
{
	unsigned int i;

	if (!atomic_xchg(&kpatch_bench_ran_armed, 0))
		return 0;
	kpatch_bench_ran_t0 = ktime_get_ns();
	for (i = 0; i < kpatch_bench_ran_req && i < kpatch_bench_nr_threads; i++)
		wake_up_process(kpatch_bench_threads[i]);
	return 0;
}

static int kpatch_bench_ran(unsigned int nr)
{
	int ret;

	if (nr > kpatch_bench_nr_threads)
		return -EINVAL;
	kpatch_bench_ran_req = nr;
	if (nr && !kpatch_bench_kp_on) {
		memset(&kpatch_bench_kp, 0, sizeof(kpatch_bench_kp));
		kpatch_bench_kp.symbol_name = "stop_machine";
		kpatch_bench_kp.pre_handler = kpatch_bench_stop_machine_pre;
		ret = register_kprobe(&kpatch_bench_kp);
		if (ret)
			return ret;
		kpatch_bench_kp_on = true;
	} else if (!nr && kpatch_bench_kp_on) {
		unregister_kprobe(&kpatch_bench_kp);
		kpatch_bench_kp_on = false;
	}
	return 0;
}

/* Arm the kprobe for the next stop_machine() call, or disarm it. */
static void kpatch_bench_ran_arm(bool on)
{
	if (on)
		kpatch_bench_ran_t0 = 0;
	atomic_set(&kpatch_bench_ran_armed, on && kpatch_bench_ran_req);
}

/* How many woken kthreads ran before kpatch's stop_machine() callback. */
static unsigned int kpatch_bench_ran_count(void)
{
	unsigned int i, n = 0;
	u64 t;

	if (!kpatch_bench_ran_t0)
		return 0;
	for (i = 0; i < kpatch_bench_ran_req; i++) {
		t = READ_ONCE(kpatch_bench_ran_at[i]);
		if (t > kpatch_bench_ran_t0 && t < kpatch_bench_cb_t0)
			n++;
	}
	return n;
}

/*
 * ---- probes: what the ftrace calls that change kpatch's sites cost ----
 *
 * A kretprobe on each, counting its calls and the ns they took.  A call
 * made inside another of them is part of the outer one's time, not
 * counted on its own.  kpatch holds its mutex around them, so they do not
 * overlap otherwise.
 */
static const char * const kpatch_bench_api_names[] = {
	"ftrace_set_filter_ip",
	"register_ftrace_function",
	"unregister_ftrace_function",
};

#define KPATCH_BENCH_NR_API	ARRAY_SIZE(kpatch_bench_api_names)

struct kpatch_bench_api {
	struct kretprobe krp;
	bool on;
	unsigned long calls;
	u64 ns;
};

static struct kpatch_bench_api kpatch_bench_api[KPATCH_BENCH_NR_API];
static int kpatch_bench_api_depth;	/* probed calls in progress */

static int kpatch_bench_api_entry(struct kretprobe_instance *ri,
				  struct pt_regs *regs)
{
	/* 0: inside another, not counted */
	*(u64 *)ri->data = kpatch_bench_api_depth++ ? 0 : ktime_get_ns();
	return 0;
}

static int kpatch_bench_api_ret(struct kretprobe_instance *ri,
				struct pt_regs *regs)
{
	struct kpatch_bench_api *api = container_of(get_kretprobe(ri),
						    struct kpatch_bench_api, krp);
	u64 t0 = *(u64 *)ri->data;

	kpatch_bench_api_depth--;
	if (t0) {
		api->calls++;
		api->ns += ktime_get_ns() - t0;
	}
	return 0;
}

static int kpatch_bench_probes(bool on)
{
	struct kpatch_bench_api *api;
	unsigned int i;

	for (i = 0; i < KPATCH_BENCH_NR_API; i++) {
		api = &kpatch_bench_api[i];
		if (on && !api->on) {
			memset(&api->krp, 0, sizeof(api->krp));
			api->krp.kp.symbol_name = kpatch_bench_api_names[i];
			api->krp.entry_handler = kpatch_bench_api_entry;
			api->krp.handler = kpatch_bench_api_ret;
			api->krp.data_size = sizeof(u64);
			api->krp.maxactive = 4;
			/* not every kernel has every one */
			api->on = !register_kretprobe(&api->krp);
		} else if (!on && api->on) {
			unregister_kretprobe(&api->krp);
			api->on = false;
		}
		api->calls = 0;
		api->ns = 0;
	}
	kpatch_bench_api_depth = 0;
	return 0;
}

static void kpatch_bench_api_print(void)
{
	struct kpatch_bench_api *api;
	size_t len = 0;
	unsigned int i;

	for (i = 0; i < KPATCH_BENCH_NR_API; i++) {
		api = &kpatch_bench_api[i];
		if (api->on)
			len += scnprintf(result + len, sizeof(result) - len,
					 "%s%lu %llu", i ? " " : "",
					 api->calls, api->ns);
		else
			len += scnprintf(result + len, sizeof(result) - len,
					 "%s-1 -1", i ? " " : "");
		api->calls = 0;
		api->ns = 0;
	}
}

/* ---- the command parameter ---- */

static DEFINE_MUTEX(kpatch_bench_mutex);

static int kpatch_bench_run(const char *verb, unsigned int arg)
{
	if (!strcmp(verb, "calls")) {
		snprintf(result, sizeof(result), "%llu", arg ?
			 KPATCH_BENCH_LOOP(kpatch_bench_new) :
			 KPATCH_BENCH_LOOP(kpatch_bench_old));
		return 0;
	}
	snprintf(result, sizeof(result), "ok");
	if (!strcmp(verb, "kpatch"))
		return kpatch_bench_patch(arg, true, 0);
	if (!strcmp(verb, "hold"))
		return kpatch_bench_patch(arg, false, arg);
	if (!strcmp(verb, "probes"))
		return kpatch_bench_probes(arg);
	if (!strcmp(verb, "api")) {
		kpatch_bench_api_print();
		return 0;
	}
	if (!strcmp(verb, "cb")) {
		if (!kpatch_bench_walk_on || !kpatch_bench_seen_most)
			strscpy(kpatch_bench_most_comm, "-",
				sizeof(kpatch_bench_most_comm));
		kpatch_bench_most_comm[TASK_COMM_LEN - 1] = '\0';
		/* one word: a name may have spaces */
		strreplace(kpatch_bench_most_comm, ' ', '_');
		snprintf(result, sizeof(result), "%lld %llu %llu %lld %lld %lld %s",
			 kpatch_bench_krp_on ? (s64)kpatch_bench_cb_runs : -1LL,
			 kpatch_bench_cb_sum, kpatch_bench_cb_max,
			 kpatch_bench_walk_on ? (s64)kpatch_bench_cb_walked : -1LL,
			 kpatch_bench_walk_on ? (s64)kpatch_bench_nr_seen : -1LL,
			 kpatch_bench_walk_on ? (s64)kpatch_bench_seen_most : -1LL,
			 kpatch_bench_most_comm);
		kpatch_bench_cb_walked = 0;
		kpatch_bench_nr_seen = 0;
		kpatch_bench_seen_most = 0;
		kpatch_bench_cb_runs = 0;
		kpatch_bench_cb_sum = 0;
		kpatch_bench_cb_max = 0;
		return 0;
	}
	if (!strcmp(verb, "ftrace"))
		return kpatch_bench_ftrace(arg);
	if (!strcmp(verb, "walks"))
		return kpatch_bench_walks(arg);
	if (!strcmp(verb, "tasks"))
		return kpatch_bench_tasks(arg);
	if (!strcmp(verb, "ran"))
		return kpatch_bench_ran(arg);
	if (!strcmp(verb, "window"))
		return kpatch_bench_window(arg);
	if (!strcmp(verb, "seed"))
		return kpatch_bench_seed(arg);
	if (!strcmp(verb, "info")) {
		snprintf(result, sizeof(result), "%zu %u",
			 sizeof(struct kpatch_func), kpatch_bench_nr_pairs);
		return 0;
	}
	return -EINVAL;
}

static int kpatch_bench_cmd_set(const char *val, const struct kernel_param *kp)
{
	char verb[16], what[16];
	unsigned int arg = 0;
	int ret;

	if (sscanf(val, "%15s %15s", verb, what) < 1)
		return -EINVAL;
	if (!strcmp(verb, "calls"))
		arg = !strcmp(what, "new");
	else if (strcmp(verb, "info") && strcmp(verb, "api") &&
		 strcmp(verb, "cb") &&
		 kstrtouint(what, 10, &arg))
		return -EINVAL;

	mutex_lock(&kpatch_bench_mutex);
	ret = kpatch_bench_run(verb, arg);
	mutex_unlock(&kpatch_bench_mutex);
	if (ret)
		snprintf(result, sizeof(result), "error %d", ret);
	return ret;
}

static const struct kernel_param_ops kpatch_bench_cmd_ops = {
	.set = kpatch_bench_cmd_set,
};
module_param_cb(cmd, &kpatch_bench_cmd_ops, NULL, 0200);
MODULE_PARM_DESC(cmd, "command to run (see the comment at the top of the source)");

static int kpatch_bench_value_get(char *buf, const struct kernel_param *kp)
{
	return sprintf(buf, "%d\n", kpatch_bench_old(1));
}

static const struct kernel_param_ops kpatch_bench_value_ops = {
	.get = kpatch_bench_value_get,
};
module_param_cb(value, &kpatch_bench_value_ops, NULL, 0444);
MODULE_PARM_DESC(value, "kpatch_bench_old(1): 2 unpatched, 3 redirected");

static int __init kpatch_bench_init(void)
{
	kpatch_bench_funcs = kcalloc(kpatch_bench_nr_pairs + 1,
				     sizeof(*kpatch_bench_funcs), GFP_KERNEL);
	kpatch_bench_threads = kcalloc(KPATCH_BENCH_MAX_THREADS,
				       sizeof(*kpatch_bench_threads),
				       GFP_KERNEL);
	kpatch_bench_ran_at = kcalloc(KPATCH_BENCH_MAX_THREADS,
				      sizeof(*kpatch_bench_ran_at), GFP_KERNEL);
	if (!kpatch_bench_funcs || !kpatch_bench_threads ||
	    !kpatch_bench_ran_at) {
		kfree(kpatch_bench_funcs);
		kfree(kpatch_bench_threads);
		kfree(kpatch_bench_ran_at);
		return -ENOMEM;
	}
	if (register_kretprobe(&kpatch_bench_krp))
		pr_warn("cannot probe kpatch_update_cb: no window figures\n");
	else
		kpatch_bench_krp_on = true;
	return 0;
}

static void __exit kpatch_bench_exit(void)
{
	if (kpatch_bench_krp_on)
		unregister_kretprobe(&kpatch_bench_krp);
	kpatch_bench_probes(false);
	kpatch_bench_walks(false);
	kpatch_bench_ftrace(false);
	kpatch_bench_ran(0);
	kpatch_bench_tasks(0);
	kfree(kpatch_bench_ran_at);
	kfree(kpatch_bench_threads);
	kfree(kpatch_bench_funcs);
}

module_init(kpatch_bench_init);
module_exit(kpatch_bench_exit);
MODULE_DESCRIPTION("kpatch benchmark: redirect cost, stop_machine window");
MODULE_LICENSE("GPL");
