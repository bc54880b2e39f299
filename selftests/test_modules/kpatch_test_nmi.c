// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_test_nmi - patched functions called from NMIs and from every CPU
 * while patches come and go.
 *
 * The module holds two "old" functions, kpatch_test_nmi_f() and
 * kpatch_test_nmi_g(), and three generations of replacements for them,
 * kpatch_test_nmi_f1()..f3() and kpatch_test_nmi_g1()..g3().  Generation N
 * of f returns 100 + N and generation N of g returns 200 + N (0: the
 * originals), so a caller that calls f and then g sees which version of a
 * two-function patch ran, and whether both calls saw the same one.  Every
 * such pair is checked; a pair from two generations (or any other value)
 * counts in "inconsistent", which must stay 0.
 *
 * Callers, all counted in the read-only parameters below:
 *
 * - with stress=1, one kthread per online CPU ("kpatch_nmi/N", nice 19)
 *   calls f and g with preemption disabled, so that no update can fall
 *   between the two calls, and a sender kthread ("kpatch_nmi_send") raises
 *   an NMI on every online CPU, itself included, every nmi_interval_us
 *   microseconds, through the APIC driver (apic->send_IPI_mask() on 6.1;
 *   the static call behind __apic_send_IPI_mask() from 6.6 on).  An
 *   NMI_LOCAL handler recognises these NMIs by a per-CPU count of NMIs
 *   sent and not yet handled, calls f and g, and returns NMI_DONE for
 *   every other NMI;
 * - reading the parameter "generation" calls f and g once and prints the
 *   generation both returned ("mixed f=.. g=.." if they differ).
 *
 * The module also installs kpatch's test hook (kpatch.ko built with
 * KPATCH_TEST_HOOKS=1, see kpatch.h), to count the NMIs that land while an
 * update is in progress (from the start of the stop_machine() callback to
 * the end of the update) and to raise NMIs in the middle of one:
 *
 * - kick_every=N: at every N-th update, the UPDATING hook raises an NMI on
 *   every other CPU and goes on without waiting for it;
 * - force=updating|published with force_every=N: at every N-th update the
 *   hook raises an NMI on every online CPU, this one first, when the state
 *   has just become UPDATING, or once the new entries are published, and
 *   waits (at most 200 ms) until they all have landed.  The NMI's call of
 *   f is a call of a patched function during the update, which must make
 *   kpatch refuse it (EBUSY) and roll it back;
 * - force=straddle: when the callback starts, still in state IDLE, the
 *   hook raises an NMI on another CPU, spinning in stop_machine(), and
 *   waits until it has called f; that NMI then waits until the update has
 *   published its entries (at most 200 ms, plus 1 ms) before it calls g.
 *   An NMI that long is rare on bare metal, but not in a guest whose vCPU
 *   the host preempts.  Its pair must still come from one generation.
 *
 * Everything stops, and the hook is removed, when the module is unloaded.
 * Needs the hooked kpatch.ko loaded first.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/cpumask.h>
#include <linux/delay.h>
#include <linux/err.h>
#include <linux/kernel.h>
#include <linux/kthread.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/percpu.h>
#include <linux/preempt.h>
#include <linux/rcupdate.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/string.h>
#include <linux/timekeeping.h>
#include <asm/apic.h>
#include <asm/irq_vectors.h>
#include <asm/nmi.h>

#include "kpatch.h"
#include "kpatch_test.h"

#ifndef KPATCH_TEST_HOOKS
#error "kpatch_test_nmi needs the hooked build (make KPATCH_TEST_HOOKS=1)"
#endif

/* What generation N of f and of g returns. */
#define KPATCH_NMI_F(gen)	(100 + (gen))
#define KPATCH_NMI_G(gen)	(200 + (gen))
#define KPATCH_NMI_GENS		4

/* Threads add their counts to the totals every this many calls. */
#define KPATCH_NMI_BATCH	1024

/* How long a forced NMI may take to land, and the pending NMIs on unload. */
#define KPATCH_NMI_WAIT_NS	(200 * NSEC_PER_MSEC)

/*
 * The functions.  barrier() keeps GCC from taking them for pure functions
 * (whose calls it could merge or hoist out of a loop); the different
 * results keep it from folding two of them into one; noinline and
 * kpatch_test_opaque() keep every call a real call whose result the caller
 * cannot know.  The replacements are only ever reached through kpatch.
 */
static noinline int kpatch_test_nmi_f(void)
{
	barrier();
	return kpatch_test_opaque(KPATCH_NMI_F(0));
}

static noinline int kpatch_test_nmi_g(void)
{
	barrier();
	return kpatch_test_opaque(KPATCH_NMI_G(0));
}

static noinline __used int kpatch_test_nmi_f1(void)
{
	barrier();
	return kpatch_test_opaque(KPATCH_NMI_F(1));
}

static noinline __used int kpatch_test_nmi_g1(void)
{
	barrier();
	return kpatch_test_opaque(KPATCH_NMI_G(1));
}

static noinline __used int kpatch_test_nmi_f2(void)
{
	barrier();
	return kpatch_test_opaque(KPATCH_NMI_F(2));
}

static noinline __used int kpatch_test_nmi_g2(void)
{
	barrier();
	return kpatch_test_opaque(KPATCH_NMI_G(2));
}

static noinline __used int kpatch_test_nmi_f3(void)
{
	barrier();
	return kpatch_test_opaque(KPATCH_NMI_F(3));
}

static noinline __used int kpatch_test_nmi_g3(void)
{
	barrier();
	return kpatch_test_opaque(KPATCH_NMI_G(3));
}

/* ------------------------------------------------------------------------
 * Counters, as read-only parameters
 */

static atomic_long_t kpatch_nmi_thread_calls = ATOMIC_LONG_INIT(0);
static atomic_long_t kpatch_nmi_nmi_calls = ATOMIC_LONG_INIT(0);
static atomic_long_t kpatch_nmi_sent = ATOMIC_LONG_INIT(0);
static atomic_long_t kpatch_nmi_in_update = ATOMIC_LONG_INIT(0);
static atomic_long_t kpatch_nmi_in_stop_machine = ATOMIC_LONG_INIT(0);
static atomic_long_t kpatch_nmi_inconsistent = ATOMIC_LONG_INIT(0);
static atomic_long_t kpatch_nmi_updates = ATOMIC_LONG_INIT(0);
static atomic_long_t kpatch_nmi_forced = ATOMIC_LONG_INIT(0);
static atomic_long_t kpatch_nmi_force_timeouts = ATOMIC_LONG_INIT(0);
static atomic_long_t kpatch_nmi_thread_gens[KPATCH_NMI_GENS];
static atomic_long_t kpatch_nmi_nmi_gens[KPATCH_NMI_GENS];

static int kpatch_nmi_count_set(const char *val, const struct kernel_param *kp)
{
	return -EPERM;
}

static int kpatch_nmi_count_get(char *buffer, const struct kernel_param *kp)
{
	atomic_long_t *count = kp->arg;

	return scnprintf(buffer, PAGE_SIZE, "%ld\n", atomic_long_read(count));
}

static const struct kernel_param_ops kpatch_nmi_count_ops = {
	.set = kpatch_nmi_count_set,
	.get = kpatch_nmi_count_get,
};

module_param_cb(thread_calls, &kpatch_nmi_count_ops, &kpatch_nmi_thread_calls, 0444);
MODULE_PARM_DESC(thread_calls, "f/g pairs called by the threads");
module_param_cb(nmi_calls, &kpatch_nmi_count_ops, &kpatch_nmi_nmi_calls, 0444);
MODULE_PARM_DESC(nmi_calls, "f/g pairs called by the NMI handler (one per NMI that landed)");
module_param_cb(nmis_sent, &kpatch_nmi_count_ops, &kpatch_nmi_sent, 0444);
MODULE_PARM_DESC(nmis_sent, "NMIs raised");
module_param_cb(nmis_in_update, &kpatch_nmi_count_ops, &kpatch_nmi_in_update, 0444);
MODULE_PARM_DESC(nmis_in_update, "NMIs that landed while an update was in progress");
module_param_cb(nmis_in_stop_machine, &kpatch_nmi_count_ops, &kpatch_nmi_in_stop_machine, 0444);
MODULE_PARM_DESC(nmis_in_stop_machine, "of those, NMIs that interrupted stop_machine()");
module_param_cb(inconsistent, &kpatch_nmi_count_ops, &kpatch_nmi_inconsistent, 0444);
MODULE_PARM_DESC(inconsistent, "f/g pairs from two generations (must stay 0)");
module_param_cb(updates, &kpatch_nmi_count_ops, &kpatch_nmi_updates, 0444);
MODULE_PARM_DESC(updates, "updates kpatch ran");
module_param_cb(forced, &kpatch_nmi_count_ops, &kpatch_nmi_forced, 0444);
MODULE_PARM_DESC(forced, "updates during which the hook made an NMI land");
module_param_cb(force_timeouts, &kpatch_nmi_count_ops, &kpatch_nmi_force_timeouts, 0444);
MODULE_PARM_DESC(force_timeouts, "forced NMIs that did not land in time");

static int kpatch_nmi_gens_get(char *buffer, const struct kernel_param *kp)
{
	atomic_long_t *gens = kp->arg;
	int i, len = 0;

	for (i = 0; i < KPATCH_NMI_GENS; i++)
		len += scnprintf(buffer + len, PAGE_SIZE - len, "%s%d:%ld",
				 i ? " " : "", i, atomic_long_read(&gens[i]));
	len += scnprintf(buffer + len, PAGE_SIZE - len, "\n");
	return len;
}

static const struct kernel_param_ops kpatch_nmi_gens_ops = {
	.set = kpatch_nmi_count_set,
	.get = kpatch_nmi_gens_get,
};

module_param_cb(thread_gens, &kpatch_nmi_gens_ops, kpatch_nmi_thread_gens, 0444);
MODULE_PARM_DESC(thread_gens, "pairs the threads saw, per generation (\"0:N 1:N ...\")");
module_param_cb(nmi_gens, &kpatch_nmi_gens_ops, kpatch_nmi_nmi_gens, 0444);
MODULE_PARM_DESC(nmi_gens, "pairs the NMI handler saw, per generation");

/* The last inconsistent pair, for the log of a failed test. */
enum kpatch_nmi_where { KPATCH_NMI_THREAD, KPATCH_NMI_NMI, KPATCH_NMI_PARAM };
static const char * const kpatch_nmi_where_names[] = { "thread", "nmi", "param" };
static atomic_t kpatch_nmi_bad_f = ATOMIC_INIT(0);
static atomic_t kpatch_nmi_bad_g = ATOMIC_INIT(0);
static atomic_t kpatch_nmi_bad_where = ATOMIC_INIT(-1);

static int kpatch_nmi_last_bad_get(char *buffer, const struct kernel_param *kp)
{
	int where = atomic_read(&kpatch_nmi_bad_where);

	if (where < 0)
		return scnprintf(buffer, PAGE_SIZE, "none\n");
	return scnprintf(buffer, PAGE_SIZE, "%s f=%d g=%d\n",
			 kpatch_nmi_where_names[where],
			 atomic_read(&kpatch_nmi_bad_f),
			 atomic_read(&kpatch_nmi_bad_g));
}

static const struct kernel_param_ops kpatch_nmi_last_bad_ops = {
	.set = kpatch_nmi_count_set,
	.get = kpatch_nmi_last_bad_get,
};

module_param_cb(last_inconsistent, &kpatch_nmi_last_bad_ops, NULL, 0444);
MODULE_PARM_DESC(last_inconsistent, "the last inconsistent pair: where, f, g");

/*
 * The generation of the pair (@f, @g) returned by one caller, or -1 if
 * they are not from the same generation; any context, NMI included.
 */
static int kpatch_nmi_check(int f, int g, enum kpatch_nmi_where where)
{
	int gen = f - KPATCH_NMI_F(0);

	if (gen >= 0 && gen < KPATCH_NMI_GENS && g == KPATCH_NMI_G(gen))
		return gen;
	atomic_set(&kpatch_nmi_bad_f, f);
	atomic_set(&kpatch_nmi_bad_g, g);
	atomic_set(&kpatch_nmi_bad_where, where);
	atomic_long_inc(&kpatch_nmi_inconsistent);
	return -1;
}

/* Reading "generation": one call of f and g, from process context. */
static int kpatch_nmi_generation_get(char *buffer, const struct kernel_param *kp)
{
	int f, g, gen;

	preempt_disable();
	f = kpatch_test_nmi_f();
	g = kpatch_test_nmi_g();
	preempt_enable();

	gen = kpatch_nmi_check(f, g, KPATCH_NMI_PARAM);
	if (gen < 0)
		return scnprintf(buffer, PAGE_SIZE, "mixed f=%d g=%d\n", f, g);
	return scnprintf(buffer, PAGE_SIZE, "%d\n", gen);
}

static const struct kernel_param_ops kpatch_nmi_generation_ops = {
	.set = kpatch_nmi_count_set,
	.get = kpatch_nmi_generation_get,
};

module_param_cb(generation, &kpatch_nmi_generation_ops, NULL, 0444);
MODULE_PARM_DESC(generation, "call f and g now: the generation they return");

/* ------------------------------------------------------------------------
 * NMIs
 */

/* NMIs raised on a CPU that its handler has not taken yet. */
static DEFINE_PER_CPU(atomic_t, kpatch_nmi_pending);

/* NMIs the handler took on a CPU. */
static DEFINE_PER_CPU(atomic_long_t, kpatch_nmi_landed);

/* From the ENTER hook to the DONE hook of each update. */
static bool kpatch_nmi_updating;

/*
 * force=straddle: the NMI raised on kpatch_nmi_straddle_cpu by the ENTER
 * hook calls f, says so, and calls g only once the update has published
 * its entries (or after KPATCH_NMI_WAIT_NS).
 */
enum {
	KPATCH_NMI_STRADDLE_OFF,
	KPATCH_NMI_STRADDLE_ARMED,	/* the NMI is on its way */
	KPATCH_NMI_STRADDLE_F_CALLED,	/* it called f, waits */
	KPATCH_NMI_STRADDLE_RELEASED,	/* entries published */
};

static atomic_t kpatch_nmi_straddle = ATOMIC_INIT(KPATCH_NMI_STRADDLE_OFF);
static int kpatch_nmi_straddle_cpu = -1;

static void kpatch_nmi_send(unsigned int cpu)
{
#ifdef DECLARE_APIC_CALL
	/* 6.6 on: the APIC callbacks are static calls, behind wrappers. */
	__apic_send_IPI_mask(cpumask_of(cpu), NMI_VECTOR);
#else
	apic->send_IPI_mask(cpumask_of(cpu), NMI_VECTOR);
#endif
}

/*
 * Raise an NMI on @cpu unless one raised earlier has not landed yet (a CPU
 * holds at most one pending NMI; a second one would be lost, and the
 * pending count with it).  Either way, an NMI of ours lands on @cpu after
 * this.  Call with preemption disabled.
 */
static void kpatch_nmi_raise(unsigned int cpu)
{
	if (atomic_cmpxchg(per_cpu_ptr(&kpatch_nmi_pending, cpu), 0, 1))
		return;
	atomic_long_inc(&kpatch_nmi_sent);
	kpatch_nmi_send(cpu);
}

/* The straddling NMI, between f and g: until the update has published. */
static void kpatch_nmi_straddle_wait(void)
{
	u64 end = ktime_get_mono_fast_ns() + KPATCH_NMI_WAIT_NS;

	while (atomic_read(&kpatch_nmi_straddle) != KPATCH_NMI_STRADDLE_RELEASED &&
	       ktime_get_mono_fast_ns() < end)
		cpu_relax();
	/* and a little longer, for the callback to get past SUCCESS */
	end = ktime_get_mono_fast_ns() + NSEC_PER_MSEC;
	while (ktime_get_mono_fast_ns() < end)
		cpu_relax();
}

static int kpatch_nmi_handler(unsigned int type, struct pt_regs *regs)
{
	int f, g, gen;

	if (atomic_dec_if_positive(this_cpu_ptr(&kpatch_nmi_pending)) < 0)
		return NMI_DONE;	/* not ours */

	f = kpatch_test_nmi_f();
	if (smp_processor_id() == READ_ONCE(kpatch_nmi_straddle_cpu) &&
	    atomic_cmpxchg(&kpatch_nmi_straddle, KPATCH_NMI_STRADDLE_ARMED,
			   KPATCH_NMI_STRADDLE_F_CALLED) ==
	    KPATCH_NMI_STRADDLE_ARMED)
		kpatch_nmi_straddle_wait();
	g = kpatch_test_nmi_g();

	if (READ_ONCE(kpatch_nmi_updating)) {
		atomic_long_inc(&kpatch_nmi_in_update);
		/* The stop_machine() threads are the "migration/N" stoppers. */
		if (!strncmp(current->comm, "migration/", 10))
			atomic_long_inc(&kpatch_nmi_in_stop_machine);
	}
	gen = kpatch_nmi_check(f, g, KPATCH_NMI_NMI);
	if (gen >= 0)
		atomic_long_inc(&kpatch_nmi_nmi_gens[gen]);
	atomic_long_inc(&kpatch_nmi_nmi_calls);
	atomic_long_inc(this_cpu_ptr(&kpatch_nmi_landed));
	return NMI_HANDLED;
}

/* Wait until no NMI of ours is pending anywhere; false after @ns. */
static bool kpatch_nmi_wait_pending(u64 ns)
{
	u64 end = ktime_get_mono_fast_ns() + ns;
	unsigned int cpu;

	for_each_possible_cpu(cpu) {
		while (atomic_read(per_cpu_ptr(&kpatch_nmi_pending, cpu))) {
			if (ktime_get_mono_fast_ns() > end)
				return false;
			usleep_range(100, 200);
		}
	}
	return true;
}

/* ------------------------------------------------------------------------
 * The test hook
 */

enum kpatch_nmi_force {
	KPATCH_NMI_FORCE_OFF,
	KPATCH_NMI_FORCE_UPDATING,
	KPATCH_NMI_FORCE_PUBLISHED,
	KPATCH_NMI_FORCE_STRADDLE,
};

static const char * const kpatch_nmi_force_names[] = {
	[KPATCH_NMI_FORCE_OFF] = "off",
	[KPATCH_NMI_FORCE_UPDATING] = "updating",
	[KPATCH_NMI_FORCE_PUBLISHED] = "published",
	[KPATCH_NMI_FORCE_STRADDLE] = "straddle",
};

static int kpatch_nmi_force_mode;

static int kpatch_nmi_force_set(const char *val, const struct kernel_param *kp)
{
	int i = sysfs_match_string(kpatch_nmi_force_names, val);

	if (i < 0)
		return i;
	WRITE_ONCE(kpatch_nmi_force_mode, i);
	return 0;
}

static int kpatch_nmi_force_get(char *buffer, const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE, "%s\n",
			 kpatch_nmi_force_names[READ_ONCE(kpatch_nmi_force_mode)]);
}

static const struct kernel_param_ops kpatch_nmi_force_ops = {
	.set = kpatch_nmi_force_set,
	.get = kpatch_nmi_force_get,
};

module_param_cb(force, &kpatch_nmi_force_ops, NULL, 0644);
MODULE_PARM_DESC(force, "make an NMI land during an update: off, updating (at UPDATING), published (entries published, before SUCCESS) or straddle (from before UPDATING to after publishing)");

static unsigned int force_every = 1;
module_param(force_every, uint, 0644);
MODULE_PARM_DESC(force_every, "with force: at every N-th update (default 1)");

static unsigned int kick_every;
module_param(kick_every, uint, 0644);
MODULE_PARM_DESC(kick_every, "at every N-th update, raise an NMI on the other CPUs at UPDATING without waiting (0: never)");

/* The hook's own state; only touched under kpatch_mutex. */
static unsigned long kpatch_nmi_seq;	/* updates seen */
static bool kpatch_nmi_force_now;	/* force this one */
static long *kpatch_nmi_seen;		/* per CPU: NMIs landed before */

/* 1 if this update is the N-th, for a parameter N (0: never). */
static bool kpatch_nmi_every(unsigned int n)
{
	return n && kpatch_nmi_seq % n == 0;
}

/*
 * Raise an NMI on every online CPU, this one first, and wait until all
 * have landed.  Called inside the stop_machine() callback: interrupts are
 * off and the other CPUs spin in stop_machine(), with interrupts off too,
 * which NMIs ignore.
 */
static void kpatch_nmi_force(void)
{
	unsigned int self = smp_processor_id(), cpu;
	u64 end = ktime_get_mono_fast_ns() + KPATCH_NMI_WAIT_NS;
	long *seen = kpatch_nmi_seen;
	bool timeout = false;

	for_each_online_cpu(cpu)
		seen[cpu] = atomic_long_read(per_cpu_ptr(&kpatch_nmi_landed, cpu));
	kpatch_nmi_raise(self);
	for_each_online_cpu(cpu)
		if (cpu != self)
			kpatch_nmi_raise(cpu);

	for_each_online_cpu(cpu) {
		while (atomic_long_read(per_cpu_ptr(&kpatch_nmi_landed, cpu)) ==
		       seen[cpu]) {
			if (ktime_get_mono_fast_ns() > end) {
				timeout = true;
				break;
			}
			cpu_relax();
		}
	}
	if (timeout)
		atomic_long_inc(&kpatch_nmi_force_timeouts);
	else
		atomic_long_inc(&kpatch_nmi_forced);
}

/*
 * Raise an NMI on another CPU that calls f now, while the state is still
 * IDLE, and g only after the update has published its entries, and wait
 * until it has called f.
 */
static void kpatch_nmi_straddle_start(void)
{
	unsigned int cpu = cpumask_any_but(cpu_online_mask, smp_processor_id());
	u64 end = ktime_get_mono_fast_ns() + KPATCH_NMI_WAIT_NS;

	if (cpu >= nr_cpu_ids)
		return;
	WRITE_ONCE(kpatch_nmi_straddle_cpu, cpu);
	atomic_set(&kpatch_nmi_straddle, KPATCH_NMI_STRADDLE_ARMED);
	kpatch_nmi_raise(cpu);
	while (atomic_read(&kpatch_nmi_straddle) == KPATCH_NMI_STRADDLE_ARMED) {
		if (ktime_get_mono_fast_ns() > end) {
			/* (if it lands after all, it does not wait) */
			atomic_cmpxchg(&kpatch_nmi_straddle,
				       KPATCH_NMI_STRADDLE_ARMED,
				       KPATCH_NMI_STRADDLE_OFF);
			atomic_long_inc(&kpatch_nmi_force_timeouts);
			return;
		}
		cpu_relax();
	}
	atomic_long_inc(&kpatch_nmi_forced);
}

static void kpatch_nmi_hook(enum kpatch_test_point point)
{
	unsigned int self, cpu;
	int mode = READ_ONCE(kpatch_nmi_force_mode);

	switch (point) {
	case KPATCH_TEST_ENTER:
		kpatch_nmi_seq++;
		WRITE_ONCE(kpatch_nmi_updating, true);
		kpatch_nmi_force_now = mode != KPATCH_NMI_FORCE_OFF &&
				       kpatch_nmi_every(READ_ONCE(force_every));
		if (kpatch_nmi_force_now && mode == KPATCH_NMI_FORCE_STRADDLE)
			kpatch_nmi_straddle_start();
		break;
	case KPATCH_TEST_UPDATING:
		if (kpatch_nmi_force_now && mode == KPATCH_NMI_FORCE_UPDATING) {
			kpatch_nmi_force();
		} else if (kpatch_nmi_every(READ_ONCE(kick_every))) {
			self = smp_processor_id();
			for_each_online_cpu(cpu)
				if (cpu != self)
					kpatch_nmi_raise(cpu);
		}
		break;
	case KPATCH_TEST_PUBLISHED:
		atomic_cmpxchg(&kpatch_nmi_straddle, KPATCH_NMI_STRADDLE_F_CALLED,
			       KPATCH_NMI_STRADDLE_RELEASED);
		if (kpatch_nmi_force_now && mode == KPATCH_NMI_FORCE_PUBLISHED)
			kpatch_nmi_force();
		break;
	case KPATCH_TEST_DONE:
		WRITE_ONCE(kpatch_nmi_straddle_cpu, -1);
		atomic_set(&kpatch_nmi_straddle, KPATCH_NMI_STRADDLE_OFF);
		WRITE_ONCE(kpatch_nmi_updating, false);
		kpatch_nmi_force_now = false;
		atomic_long_inc(&kpatch_nmi_updates);
		break;
	}
}

/* ------------------------------------------------------------------------
 * The threads
 */

static unsigned int threads;
module_param(threads, uint, 0444);
MODULE_PARM_DESC(threads, "number of calling threads running");

static unsigned int nmi_interval_us = 100;
module_param(nmi_interval_us, uint, 0644);
MODULE_PARM_DESC(nmi_interval_us, "pause of the NMI sender between two rounds (default 100)");

static int kpatch_nmi_caller(void *data)
{
	long calls = 0, gens[KPATCH_NMI_GENS] = { 0 };
	int f, g, gen, i;

	while (!kthread_should_stop()) {
		/* Nothing can update the patch between the two calls. */
		preempt_disable();
		f = kpatch_test_nmi_f();
		g = kpatch_test_nmi_g();
		preempt_enable();

		gen = kpatch_nmi_check(f, g, KPATCH_NMI_THREAD);
		if (gen >= 0)
			gens[gen]++;
		if (++calls == KPATCH_NMI_BATCH || kthread_should_stop()) {
			atomic_long_add(calls, &kpatch_nmi_thread_calls);
			for (i = 0; i < KPATCH_NMI_GENS; i++) {
				atomic_long_add(gens[i], &kpatch_nmi_thread_gens[i]);
				gens[i] = 0;
			}
			calls = 0;
		}
		/*
		 * A pause, so that the other vCPU of an emulator that runs
		 * them in turn (QEMU's round-robin TCG switches on PAUSE)
		 * runs alongside, as a real CPU would.
		 */
		cpu_relax();
		/* Never sleeps: see kpatch_test_stress.c. */
		cond_resched_tasks_rcu_qs();
	}
	return 0;
}

static int kpatch_nmi_sender(void *data)
{
	unsigned int cpu, us;

	while (!kthread_should_stop()) {
		preempt_disable();
		for_each_online_cpu(cpu)
			kpatch_nmi_raise(cpu);
		preempt_enable();

		us = READ_ONCE(nmi_interval_us);
		if (us)
			usleep_range(us, us + us / 2);
		else
			cond_resched_tasks_rcu_qs();
	}
	return 0;
}

/* Serialises starting and stopping the threads. */
static DEFINE_MUTEX(kpatch_nmi_lock);
static struct task_struct **kpatch_nmi_callers;
static struct task_struct *kpatch_nmi_sender_task;
static bool kpatch_nmi_running;
static bool kpatch_nmi_ready;	/* module_init done, module_exit not begun */
static bool kpatch_nmi_want;	/* stress=1 given before module_init */

static void kpatch_nmi_stop(void)
{
	unsigned int cpu;

	lockdep_assert_held(&kpatch_nmi_lock);
	if (kpatch_nmi_sender_task)
		kthread_stop(kpatch_nmi_sender_task);
	kpatch_nmi_sender_task = NULL;
	for_each_possible_cpu(cpu)
		if (kpatch_nmi_callers[cpu])
			kthread_stop(kpatch_nmi_callers[cpu]);
	memset(kpatch_nmi_callers, 0, nr_cpu_ids * sizeof(*kpatch_nmi_callers));
	threads = 0;
	kpatch_nmi_running = false;
}

static int kpatch_nmi_start(void)
{
	struct task_struct *t;
	unsigned int cpu;

	lockdep_assert_held(&kpatch_nmi_lock);
	for_each_online_cpu(cpu) {
		t = kthread_create(kpatch_nmi_caller, NULL, "kpatch_nmi/%u", cpu);
		if (IS_ERR(t))
			goto err;
		kthread_bind(t, cpu);
		set_user_nice(t, MAX_NICE);
		kpatch_nmi_callers[cpu] = t;
		wake_up_process(t);
		threads++;
	}
	t = kthread_run(kpatch_nmi_sender, NULL, "kpatch_nmi_send");
	if (IS_ERR(t))
		goto err;
	kpatch_nmi_sender_task = t;
	kpatch_nmi_running = true;
	return 0;
err:
	kpatch_nmi_stop();
	return PTR_ERR(t);
}

static int kpatch_nmi_stress_set(const char *val, const struct kernel_param *kp)
{
	bool on;
	int ret;

	ret = kstrtobool(val, &on);
	if (ret)
		return ret;
	mutex_lock(&kpatch_nmi_lock);
	if (!kpatch_nmi_ready)
		kpatch_nmi_want = on;	/* module_init starts them */
	else if (on && !kpatch_nmi_running)
		ret = kpatch_nmi_start();
	else if (!on && kpatch_nmi_running)
		kpatch_nmi_stop();
	mutex_unlock(&kpatch_nmi_lock);
	return ret;
}

static int kpatch_nmi_stress_get(char *buffer, const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE, "%d\n", READ_ONCE(kpatch_nmi_running));
}

static const struct kernel_param_ops kpatch_nmi_stress_ops = {
	.set = kpatch_nmi_stress_set,
	.get = kpatch_nmi_stress_get,
};

module_param_cb(stress, &kpatch_nmi_stress_ops, NULL, 0644);
MODULE_PARM_DESC(stress, "1: run the calling threads and the NMI sender; 0: stop them");

/* ------------------------------------------------------------------------
 * init/exit
 */

static int __init kpatch_test_nmi_init(void)
{
	int ret;

	kpatch_nmi_callers = kcalloc(nr_cpu_ids, sizeof(*kpatch_nmi_callers),
				     GFP_KERNEL);
	kpatch_nmi_seen = kcalloc(nr_cpu_ids, sizeof(*kpatch_nmi_seen),
				  GFP_KERNEL);
	if (!kpatch_nmi_callers || !kpatch_nmi_seen) {
		ret = -ENOMEM;
		goto err_free;
	}

	ret = register_nmi_handler(NMI_LOCAL, kpatch_nmi_handler, 0,
				   "kpatch_test_nmi");
	if (ret) {
		pr_err("cannot register the NMI handler (%d)\n", ret);
		goto err_free;
	}
	ret = kpatch_test_set_hook(kpatch_nmi_hook);
	if (ret) {
		pr_err("cannot install the kpatch test hook (%d)\n", ret);
		goto err_nmi;
	}

	mutex_lock(&kpatch_nmi_lock);
	kpatch_nmi_ready = true;
	ret = kpatch_nmi_want ? kpatch_nmi_start() : 0;
	if (ret)
		kpatch_nmi_ready = false;
	mutex_unlock(&kpatch_nmi_lock);
	if (ret)
		goto err_hook;
	return 0;

err_hook:
	kpatch_test_set_hook(NULL);
err_nmi:
	unregister_nmi_handler(NMI_LOCAL, "kpatch_test_nmi");
err_free:
	kfree(kpatch_nmi_seen);
	kfree(kpatch_nmi_callers);
	return ret;
}

static void __exit kpatch_test_nmi_exit(void)
{
	/* No update calls the hook once this returns (kpatch_mutex). */
	kpatch_test_set_hook(NULL);

	mutex_lock(&kpatch_nmi_lock);
	kpatch_nmi_ready = false;
	if (kpatch_nmi_running)
		kpatch_nmi_stop();
	mutex_unlock(&kpatch_nmi_lock);

	/* An NMI still on its way must find the handler. */
	if (!kpatch_nmi_wait_pending(KPATCH_NMI_WAIT_NS))
		pr_warn("an NMI raised by this module never landed\n");
	unregister_nmi_handler(NMI_LOCAL, "kpatch_test_nmi");
	kfree(kpatch_nmi_seen);
	kfree(kpatch_nmi_callers);
}

module_init(kpatch_test_nmi_init);
module_exit(kpatch_test_nmi_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kpatch selftest: patched functions called from NMIs and every CPU during updates");
