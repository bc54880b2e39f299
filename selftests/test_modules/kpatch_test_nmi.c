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
 * Generation N of f and g also works on data in version N, which every
 * call checks, and the module has the hooks of a patch to generation N,
 * whose stop hooks convert the data inside stop_machine(), a field at a
 * time (see "The versioned data" and "Patch hooks" below).  The callers
 * count every call of a new function of an update before its stop hooks
 * were all done or on data not converted, and every call of an old
 * function on converted data in an update that took effect; the hooks
 * count the updates rolled back, and check that those left the data
 * byte-identical.  force=stop makes the stop hook raise an NMI on the
 * other CPUs in the middle of a conversion, and wait for it.
 *
 * Everything stops, and the hook is removed, when the module is unloaded.
 * Needs the hooked kpatch.ko loaded first.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/atomic.h>
#include <linux/bitops.h>
#include <linux/cpumask.h>
#include <linux/delay.h>
#include <linux/err.h>
#include <linux/irqflags.h>
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

/* ------------------------------------------------------------------------
 * The versioned data
 *
 * Generation N of f and of g works on kpatch_nmi_data in version N: a
 * version word, N, and KPATCH_NMI_FIELDS payload words, each encoded as
 * version N encodes it (kpatch_nmi_encode()).  Every call of f or g, in
 * any generation, checks that the data is entirely in its version.  The
 * stop hooks of the patches convert it (see "Patch hooks" below) one field
 * at a time, meanwhile the version word is KPATCH_NMI_MIXED(from, to).
 */

#define KPATCH_NMI_FIELDS		4
#define KPATCH_NMI_MIXED(from, to)	(0x80000000u | (from) << 8 | (to))

struct kpatch_nmi_data {
	u32 version;
	u32 field[KPATCH_NMI_FIELDS];
};

/* What the fields mean, whatever the version. */
static const u32 kpatch_nmi_payload[KPATCH_NMI_FIELDS] = {
	0x00c0ffee, 0x12345678, 0xdeadbeef, 0x00000001,
};

static struct kpatch_nmi_data kpatch_nmi_data;

/* kpatch_nmi_expect[v][i]: field i in version v */
static u32 kpatch_nmi_expect[KPATCH_NMI_GENS][KPATCH_NMI_FIELDS];

static u32 kpatch_nmi_encode(unsigned int version, u32 x)
{
	switch (version) {
	case 1:
		return x ^ 0xa5a5a5a5;
	case 2:
		return rol32(x, 8);
	case 3:
		return x * 3 + 1;
	default:
		return x;
	}
}

static u32 kpatch_nmi_decode(unsigned int version, u32 x)
{
	switch (version) {
	case 1:
		return x ^ 0xa5a5a5a5;
	case 2:
		return ror32(x, 8);
	case 3:
		return (x - 1) * 0xaaaaaaab;	/* 3 * 0xaaaaaaab == 1 */
	default:
		return x;
	}
}

/*
 * The update (try) whose stop hooks converted the data, from its first
 * stop hook to the first post hook after them (0: none), the generation
 * in effect before it, and whether its stop hooks may still be running
 * (until the PUBLISHED test point).  Written by the hooks, read by every
 * caller of f and g, NMIs included.
 */
static unsigned long kpatch_nmi_flight;
static int kpatch_nmi_flight_old;
static bool kpatch_nmi_stopping;

/*
 * The update in which an old function saw converted data (0: none), and
 * the callers between reading the flight and setting that.
 */
static atomic_long_t kpatch_nmi_old_seen = ATOMIC_LONG_INIT(0);
static atomic_t kpatch_nmi_old_seeing = ATOMIC_INIT(0);

/* What the callers found; the violations must stay 0. */
static atomic_long_t kpatch_nmi_new_early = ATOMIC_LONG_INIT(0);
static atomic_long_t kpatch_nmi_new_unconverted = ATOMIC_LONG_INIT(0);
static atomic_long_t kpatch_nmi_old_converted = ATOMIC_LONG_INIT(0);
static atomic_long_t kpatch_nmi_old_converted_kept = ATOMIC_LONG_INIT(0);
static atomic_long_t kpatch_nmi_data_mismatch = ATOMIC_LONG_INIT(0);

/* The last violation, for the log of a failed test. */
enum kpatch_nmi_violation {
	KPATCH_NMI_V_NONE,
	KPATCH_NMI_V_NEW_EARLY,
	KPATCH_NMI_V_NEW_UNCONVERTED,
	KPATCH_NMI_V_OLD_KEPT,
	KPATCH_NMI_V_MISMATCH,
};

static const char * const kpatch_nmi_violation_names[] = {
	[KPATCH_NMI_V_NONE] = "none",
	[KPATCH_NMI_V_NEW_EARLY] = "new-before-stop-hooks-done",
	[KPATCH_NMI_V_NEW_UNCONVERTED] = "new-on-unconverted",
	[KPATCH_NMI_V_OLD_KEPT] = "old-on-converted-kept",
	[KPATCH_NMI_V_MISMATCH] = "mismatch",
};

static atomic_t kpatch_nmi_v_kind = ATOMIC_INIT(KPATCH_NMI_V_NONE);
static atomic_t kpatch_nmi_v_gen = ATOMIC_INIT(0);
static atomic_t kpatch_nmi_v_version = ATOMIC_INIT(0);
static atomic_long_t kpatch_nmi_v_flight = ATOMIC_LONG_INIT(0);

static void kpatch_nmi_violation(enum kpatch_nmi_violation kind,
				 atomic_long_t *count, int gen, u32 version,
				 unsigned long flight)
{
	atomic_set(&kpatch_nmi_v_gen, gen);
	atomic_set(&kpatch_nmi_v_version, version);
	atomic_long_set(&kpatch_nmi_v_flight, flight);
	atomic_set(&kpatch_nmi_v_kind, kind);
	atomic_long_inc(count);
}

/* Does the data look entirely like version @gen?  Any context. */
static notrace bool kpatch_nmi_data_is(int gen, u32 *version)
{
	bool ok;
	int i;

	*version = READ_ONCE(kpatch_nmi_data.version);
	ok = *version == gen;
	for (i = 0; i < KPATCH_NMI_FIELDS; i++)
		if (READ_ONCE(kpatch_nmi_data.field[i]) != kpatch_nmi_expect[gen][i])
			ok = false;
	return ok;
}

/*
 * Called by generation @gen of f and of g, in any context, NMIs included
 * (atomics and plain loads only).  The data is read before the flight:
 * the stop hook sets the flight before it changes the data, so a caller
 * that saw a changed field also sees the flight.
 */
static notrace void kpatch_nmi_data_check(int gen)
{
	unsigned long flight;
	u32 version;
	bool ok;
	int old;

	ok = kpatch_nmi_data_is(gen, &version);
	smp_rmb();	/* data before flight; pairs with the stop hook's */
	flight = READ_ONCE(kpatch_nmi_flight);
	smp_rmb();	/* the flight before its old generation */
	old = READ_ONCE(kpatch_nmi_flight_old);

	if (!flight) {
		if (!ok)
			kpatch_nmi_violation(KPATCH_NMI_V_MISMATCH,
					     &kpatch_nmi_data_mismatch,
					     gen, version, 0);
		return;
	}
	if (gen != old && READ_ONCE(kpatch_nmi_stopping)) {
		/* a new function before all stop hooks had finished */
		kpatch_nmi_violation(KPATCH_NMI_V_NEW_EARLY,
				     &kpatch_nmi_new_early, gen, version, flight);
		return;
	}
	if (ok)
		return;
	if (gen == old) {
		/*
		 * Allowed only if the update then rolls back.  The flight is
		 * read again once kpatch_nmi_close() is sure to wait for this.
		 */
		atomic_inc(&kpatch_nmi_old_seeing);	/* a full barrier */
		if (READ_ONCE(kpatch_nmi_flight) == flight) {
			atomic_long_set(&kpatch_nmi_old_seen, flight);
			atomic_long_inc(&kpatch_nmi_old_converted);
		} else {
			kpatch_nmi_violation(KPATCH_NMI_V_MISMATCH,
					     &kpatch_nmi_data_mismatch,
					     gen, version, 0);
		}
		atomic_dec(&kpatch_nmi_old_seeing);
		return;
	}
	kpatch_nmi_violation(KPATCH_NMI_V_NEW_UNCONVERTED,
			     &kpatch_nmi_new_unconverted, gen, version, flight);
}

/*
 * The functions.  Each checks the data it works on, which also keeps GCC
 * from taking them for pure functions (whose calls it could merge or hoist
 * out of a loop); the different results keep it from folding two of them
 * into one; noinline and kpatch_test_opaque() keep every call a real call
 * whose result the caller cannot know.  The replacements are only ever
 * reached through kpatch.
 */
static noinline int kpatch_test_nmi_f(void)
{
	kpatch_nmi_data_check(0);
	return kpatch_test_opaque(KPATCH_NMI_F(0));
}

static noinline int kpatch_test_nmi_g(void)
{
	kpatch_nmi_data_check(0);
	return kpatch_test_opaque(KPATCH_NMI_G(0));
}

static noinline __used int kpatch_test_nmi_f1(void)
{
	kpatch_nmi_data_check(1);
	return kpatch_test_opaque(KPATCH_NMI_F(1));
}

static noinline __used int kpatch_test_nmi_g1(void)
{
	kpatch_nmi_data_check(1);
	return kpatch_test_opaque(KPATCH_NMI_G(1));
}

static noinline __used int kpatch_test_nmi_f2(void)
{
	kpatch_nmi_data_check(2);
	return kpatch_test_opaque(KPATCH_NMI_F(2));
}

static noinline __used int kpatch_test_nmi_g2(void)
{
	kpatch_nmi_data_check(2);
	return kpatch_test_opaque(KPATCH_NMI_G(2));
}

static noinline __used int kpatch_test_nmi_f3(void)
{
	kpatch_nmi_data_check(3);
	return kpatch_test_opaque(KPATCH_NMI_F(3));
}

static noinline __used int kpatch_test_nmi_g3(void)
{
	kpatch_nmi_data_check(3);
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
	KPATCH_NMI_FORCE_STOP,
};

static const char * const kpatch_nmi_force_names[] = {
	[KPATCH_NMI_FORCE_OFF] = "off",
	[KPATCH_NMI_FORCE_UPDATING] = "updating",
	[KPATCH_NMI_FORCE_PUBLISHED] = "published",
	[KPATCH_NMI_FORCE_STRADDLE] = "straddle",
	[KPATCH_NMI_FORCE_STOP] = "stop",
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
MODULE_PARM_DESC(force, "make an NMI land during an update: off, updating (at UPDATING), published (entries published, before SUCCESS), straddle (from before UPDATING to after publishing) or stop (on the other CPUs, while a stop hook converts the data)");

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
 * Raise an NMI on every online CPU, this one first if @self_too, and
 * wait until all have landed.  Called inside the stop_machine() callback:
 * interrupts are off and the other CPUs spin in stop_machine(), with
 * interrupts off too, which NMIs ignore.
 */
static void kpatch_nmi_force(bool self_too)
{
	unsigned int self = smp_processor_id(), cpu;
	u64 end = ktime_get_mono_fast_ns() + KPATCH_NMI_WAIT_NS;
	long *seen = kpatch_nmi_seen;
	bool timeout = false;

	for_each_online_cpu(cpu)
		seen[cpu] = atomic_long_read(per_cpu_ptr(&kpatch_nmi_landed, cpu));
	if (self_too)
		kpatch_nmi_raise(self);
	for_each_online_cpu(cpu)
		if (cpu != self)
			kpatch_nmi_raise(cpu);

	for_each_online_cpu(cpu) {
		if (cpu == self && !self_too)
			continue;
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
			kpatch_nmi_force(true);
		} else if (kpatch_nmi_every(READ_ONCE(kick_every))) {
			self = smp_processor_id();
			for_each_online_cpu(cpu)
				if (cpu != self)
					kpatch_nmi_raise(cpu);
		}
		break;
	case KPATCH_TEST_PUBLISHED:
		/* the stop hooks ran before (see kpatch_nmi_stop_hook()) */
		WRITE_ONCE(kpatch_nmi_stopping, false);
		atomic_cmpxchg(&kpatch_nmi_straddle, KPATCH_NMI_STRADDLE_F_CALLED,
			       KPATCH_NMI_STRADDLE_RELEASED);
		if (kpatch_nmi_force_now && mode == KPATCH_NMI_FORCE_PUBLISHED)
			kpatch_nmi_force(true);
		break;
	case KPATCH_TEST_DONE:
		WRITE_ONCE(kpatch_nmi_stopping, false);
		WRITE_ONCE(kpatch_nmi_straddle_cpu, -1);
		atomic_set(&kpatch_nmi_straddle, KPATCH_NMI_STRADDLE_OFF);
		WRITE_ONCE(kpatch_nmi_updating, false);
		kpatch_nmi_force_now = false;
		atomic_long_inc(&kpatch_nmi_updates);
		break;
	case KPATCH_TEST_REFILL:	/* not an update */
		break;
	}
}

/* ------------------------------------------------------------------------
 * Patch hooks
 *
 * kpatch_test_nmi_<hook><N>(), for each hook of a patch (pre_patch,
 * stop_patch, ..., post_unpatch) and each generation N = 1..3, are the
 * hooks of a patch to generation N, given to kpatch in the control file
 * (HOOK=ADDR).  The stop hooks keep a model of kpatch's stack of patches
 * (kpatch_nmi_stack: the generation of each patch in effect, oldest
 * first) and convert the data to the version of the top one:
 *
 * - stop-patch N: from the version of the top patch (0: none) to N, and
 *   N goes on top;
 * - stop-unpatch N: N leaves the stack; if it was the top, the data goes
 *   from N to the version of the patch now on top (0: none);
 * - undo-patch and undo-unpatch: the reverse, which must be the last stop
 *   hook of the update not undone yet (kpatch undoes in reverse order).
 *
 * A replace of A and B by C thus converts 2 -> 1 -> 0 -> 3, all inside
 * the same stop_machine() callback.
 *
 * An update (a try of a command) opens at its first pre hook, which takes
 * a snapshot of the data, and closes at the first post hook after it,
 * which tells from which one it is whether the update took effect: a
 * post-patch hook of a patch part or a post-unpatch hook of an unpatch
 * part if it did, the other one (kpatch's "cancel" hook) if not.  Then:
 *
 * - it took effect: every stop hook ran and none was undone, the data is
 *   in the version of the top patch, and no old function saw converted
 *   data (else old_on_converted_kept);
 * - it did not: every stop hook that ran was undone (rollbacks counts
 *   those updates), and the data is byte-identical to the snapshot (else
 *   rollback_data_changed).
 *
 * Anything else, a hook called in the wrong context or order, counts in
 * hook_errors (the last one in last_hook_error).
 *
 * With force=stop, the first stop hook of an update that converts
 * anything raises an NMI on every other CPU once it has converted the
 * first field, and waits until they have landed (at every force_every-th
 * update, like the other force modes); with stop_kick_every=N, every N-th
 * conversion raises one there without waiting, and pauses for
 * convert_delay_us between two fields, for it to land half-way.  (The
 * other conversions do not pause: in QEMU's TCG, which runs the vCPUs in
 * turn, an NMI raised on another vCPU lands when this one pauses, and an
 * NMI raised at UPDATING (kick_every) would then make every update fail.)
 */

#define KPATCH_NMI_PARTS	8

static int kpatch_nmi_stack[KPATCH_NMI_PARTS];
static int kpatch_nmi_depth;

/* One stop hook that ran, for its undo hook. */
struct kpatch_nmi_step {
	bool unpatch;
	int gen;
	int pos;		/* where in the stack gen was or went */
	int from, to;		/* versions converted (from == to: none) */
};

/*
 * The update the hooks are in.  Only the hooks touch it, one at a time:
 * kpatch runs them under its mutex or inside stop_machine().
 */
static struct {
	bool open;
	unsigned long id;
	/* the parts, from the pre hooks */
	struct {
		bool unpatch;
		int gen;
	} parts[KPATCH_NMI_PARTS];
	int nr_parts;
	/* the stop hooks not undone */
	struct kpatch_nmi_step steps[KPATCH_NMI_PARTS];
	int nr_steps;
	int stops, undos;
	bool old_seen;		/* an old function saw converted data */
	bool forced;
	/* before its first hook */
	struct kpatch_nmi_data data;
	int stack[KPATCH_NMI_PARTS];
	int depth;
} kpatch_nmi_upd;

static unsigned long kpatch_nmi_upd_ids;

static atomic_long_t kpatch_nmi_rollbacks = ATOMIC_LONG_INIT(0);
static atomic_long_t kpatch_nmi_rollbacks_old = ATOMIC_LONG_INIT(0);
static atomic_long_t kpatch_nmi_rollback_changed = ATOMIC_LONG_INIT(0);
static atomic_long_t kpatch_nmi_conversions = ATOMIC_LONG_INIT(0);
static atomic_long_t kpatch_nmi_hook_errors = ATOMIC_LONG_INIT(0);
static atomic_long_t kpatch_nmi_hook_calls[KPATCH_NR_HOOKS];
static char kpatch_nmi_hook_error[128] = "none";

static const char * const kpatch_nmi_hook_names[] = {
	[KPATCH_PRE_PATCH] = "pre-patch",
	[KPATCH_STOP_PATCH] = "stop-patch",
	[KPATCH_UNDO_PATCH] = "undo-patch",
	[KPATCH_POST_PATCH] = "post-patch",
	[KPATCH_PRE_UNPATCH] = "pre-unpatch",
	[KPATCH_STOP_UNPATCH] = "stop-unpatch",
	[KPATCH_UNDO_UNPATCH] = "undo-unpatch",
	[KPATCH_POST_UNPATCH] = "post-unpatch",
};

static unsigned int convert_delay_us = 5;
module_param(convert_delay_us, uint, 0644);
MODULE_PARM_DESC(convert_delay_us, "with stop_kick_every, pause of the stop hook between two fields it converts (default 5)");

static unsigned int stop_kick_every;
module_param(stop_kick_every, uint, 0644);
MODULE_PARM_DESC(stop_kick_every, "at every N-th conversion, raise an NMI on the other CPUs after the first field, without waiting, and pause between fields (0: never)");

/* Not from an NMI. */
static __printf(3, 4) void kpatch_nmi_hook_error_at(enum kpatch_hook hook,
						   int gen, const char *fmt, ...)
{
	int len;
	va_list args;

	len = scnprintf(kpatch_nmi_hook_error, sizeof(kpatch_nmi_hook_error),
			"%s%d: ", kpatch_nmi_hook_names[hook], gen);
	va_start(args, fmt);
	vscnprintf(kpatch_nmi_hook_error + len,
		   sizeof(kpatch_nmi_hook_error) - len, fmt, args);
	va_end(args);
	atomic_long_inc(&kpatch_nmi_hook_errors);
}

static int kpatch_nmi_top(void)
{
	return kpatch_nmi_depth ? kpatch_nmi_stack[kpatch_nmi_depth - 1] : 0;
}

/*
 * Inside the stop hooks, once the first field is converted: NMIs on the
 * other CPUs, if asked for.  True if the hook should then pause between
 * the fields, for them to land (an emulator that runs the vCPUs in turn
 * may only switch to another one when this one pauses).
 */
static bool kpatch_nmi_stop_nmis(void)
{
	unsigned int self, cpu;
	long n = atomic_long_inc_return(&kpatch_nmi_conversions);
	unsigned int every = READ_ONCE(stop_kick_every);

	if (kpatch_nmi_force_now && !kpatch_nmi_upd.forced &&
	    READ_ONCE(kpatch_nmi_force_mode) == KPATCH_NMI_FORCE_STOP) {
		kpatch_nmi_upd.forced = true;
		kpatch_nmi_force(false);	/* waits until they landed */
	} else if (every && n % every == 0) {
		self = smp_processor_id();
		for_each_online_cpu(cpu)
			if (cpu != self)
				kpatch_nmi_raise(cpu);
		return true;
	}
	return false;
}

/*
 * Spin for @us microseconds, pausing: udelay() may not pause (the guests'
 * kernels fall back to a plain loop without a stable TSC), and QEMU's TCG
 * only lets another vCPU run, and take its NMI, when this one pauses.
 */
static void kpatch_nmi_pause(unsigned int us)
{
	u64 end = ktime_get_mono_fast_ns() + (u64)us * NSEC_PER_USEC;

	while (ktime_get_mono_fast_ns() < end)
		cpu_relax();
}

/* Convert the data from version @from to @to, a field at a time. */
static void kpatch_nmi_convert(int from, int to)
{
	unsigned int delay = 0;
	u32 x;
	int i;

	if (from == to)
		return;
	WRITE_ONCE(kpatch_nmi_data.version, KPATCH_NMI_MIXED(from, to));
	for (i = 0; i < KPATCH_NMI_FIELDS; i++) {
		x = kpatch_nmi_decode(from, READ_ONCE(kpatch_nmi_data.field[i]));
		WRITE_ONCE(kpatch_nmi_data.field[i], kpatch_nmi_encode(to, x));
		if (i == 0 && kpatch_nmi_stop_nmis())
			delay = READ_ONCE(convert_delay_us);
		if (delay && i < KPATCH_NMI_FIELDS - 1)
			kpatch_nmi_pause(delay);
	}
	WRITE_ONCE(kpatch_nmi_data.version, to);
}

/* Open an update: its first pre hook (or a stop hook, if none ran). */
static void kpatch_nmi_open(void)
{
	kpatch_nmi_upd.open = true;
	kpatch_nmi_upd.id = ++kpatch_nmi_upd_ids;
	kpatch_nmi_upd.nr_parts = 0;
	kpatch_nmi_upd.nr_steps = 0;
	kpatch_nmi_upd.stops = 0;
	kpatch_nmi_upd.undos = 0;
	kpatch_nmi_upd.old_seen = false;
	kpatch_nmi_upd.forced = false;
	kpatch_nmi_upd.data = kpatch_nmi_data;
	memcpy(kpatch_nmi_upd.stack, kpatch_nmi_stack, sizeof(kpatch_nmi_stack));
	kpatch_nmi_upd.depth = kpatch_nmi_depth;
}

/* Close it: @hook of @gen is its first post hook; see above. */
static void kpatch_nmi_close(enum kpatch_hook hook, int gen)
{
	unsigned long id = kpatch_nmi_upd.id;
	bool old_seen, took_effect;
	u32 version;
	int i;

	for (i = 0; i < kpatch_nmi_upd.nr_parts; i++)
		if (kpatch_nmi_upd.parts[i].gen == gen)
			break;
	if (i == kpatch_nmi_upd.nr_parts) {
		kpatch_nmi_hook_error_at(hook, gen, "no pre hook of this patch in update %lu",
					 id);
		took_effect = false;
	} else {
		took_effect = kpatch_nmi_upd.parts[i].unpatch ==
			      (hook == KPATCH_POST_UNPATCH);
	}

	/*
	 * No caller sets kpatch_nmi_old_seen for this update once the flight
	 * is 0 and those that read it before are done.
	 */
	WRITE_ONCE(kpatch_nmi_flight, 0);
	WRITE_ONCE(kpatch_nmi_stopping, false);
	smp_mb();	/* flight before kpatch_nmi_old_seeing */
	while (atomic_read(&kpatch_nmi_old_seeing))
		cpu_relax();
	old_seen = atomic_long_xchg(&kpatch_nmi_old_seen, 0) == id;
	old_seen |= kpatch_nmi_upd.old_seen;

	if (took_effect) {
		if (kpatch_nmi_upd.stops != kpatch_nmi_upd.nr_parts ||
		    kpatch_nmi_upd.undos)
			kpatch_nmi_hook_error_at(hook, gen,
						 "update %lu took effect, %d of %d stop hooks ran, %d undone",
						 id, kpatch_nmi_upd.stops,
						 kpatch_nmi_upd.nr_parts,
						 kpatch_nmi_upd.undos);
		if (old_seen)
			kpatch_nmi_violation(KPATCH_NMI_V_OLD_KEPT,
					     &kpatch_nmi_old_converted_kept,
					     kpatch_nmi_flight_old, 0, id);
		if (!kpatch_nmi_data_is(kpatch_nmi_top(), &version))
			kpatch_nmi_hook_error_at(hook, gen,
						 "update %lu took effect, data version %#x, top patch %d",
						 id, version, kpatch_nmi_top());
	} else {
		if (kpatch_nmi_upd.nr_steps)
			kpatch_nmi_hook_error_at(hook, gen,
						 "update %lu failed, %d of its stop hooks not undone",
						 id, kpatch_nmi_upd.nr_steps);
		if (kpatch_nmi_upd.undos) {
			atomic_long_inc(&kpatch_nmi_rollbacks);
			if (old_seen)
				atomic_long_inc(&kpatch_nmi_rollbacks_old);
		}
		if (memcmp(&kpatch_nmi_data, &kpatch_nmi_upd.data,
			   sizeof(kpatch_nmi_data)))
			atomic_long_inc(&kpatch_nmi_rollback_changed);
		if (kpatch_nmi_depth != kpatch_nmi_upd.depth ||
		    memcmp(kpatch_nmi_stack, kpatch_nmi_upd.stack,
			   sizeof(kpatch_nmi_stack)))
			kpatch_nmi_hook_error_at(hook, gen,
						 "update %lu failed, the stack of patches changed",
						 id);
	}
	kpatch_nmi_upd.open = false;
}

static void kpatch_nmi_pre(enum kpatch_hook hook, int gen)
{
	int i;

	might_sleep();
	if (kpatch_nmi_upd.open) {
		for (i = 0; i < kpatch_nmi_upd.nr_parts; i++)
			if (kpatch_nmi_upd.parts[i].gen == gen)
				break;
		if (kpatch_nmi_upd.stops || i < kpatch_nmi_upd.nr_parts) {
			kpatch_nmi_hook_error_at(hook, gen, "update %lu never closed",
						 kpatch_nmi_upd.id);
			kpatch_nmi_upd.open = false;
		}
	}
	if (!kpatch_nmi_upd.open)
		kpatch_nmi_open();
	if (kpatch_nmi_upd.nr_parts == KPATCH_NMI_PARTS) {
		kpatch_nmi_hook_error_at(hook, gen, "too many parts");
		return;
	}
	i = kpatch_nmi_upd.nr_parts++;
	kpatch_nmi_upd.parts[i].unpatch = hook == KPATCH_PRE_UNPATCH;
	kpatch_nmi_upd.parts[i].gen = gen;
}

static void kpatch_nmi_stop_hook(enum kpatch_hook hook, int gen)
{
	struct kpatch_nmi_step *step;
	int i;

	if (!irqs_disabled() || strncmp(current->comm, "migration/", 10))
		kpatch_nmi_hook_error_at(hook, gen, "not inside stop_machine() (%s)",
					 current->comm);
	if (!kpatch_nmi_upd.open) {
		kpatch_nmi_hook_error_at(hook, gen, "no pre hook ran");
		kpatch_nmi_open();
	}
	if (kpatch_nmi_upd.nr_steps == KPATCH_NMI_PARTS) {
		kpatch_nmi_hook_error_at(hook, gen, "too many stop hooks");
		return;
	}
	if (!kpatch_nmi_upd.stops) {
		/* the flight before the data changes; see kpatch_nmi_data_check() */
		WRITE_ONCE(kpatch_nmi_flight_old, kpatch_nmi_top());
		WRITE_ONCE(kpatch_nmi_stopping, true);
		smp_wmb();	/* old and stopping before the flight */
		WRITE_ONCE(kpatch_nmi_flight, kpatch_nmi_upd.id);
		smp_wmb();	/* the flight before the data */
	}
	kpatch_nmi_upd.stops++;
	step = &kpatch_nmi_upd.steps[kpatch_nmi_upd.nr_steps++];
	step->unpatch = hook == KPATCH_STOP_UNPATCH;
	step->gen = gen;
	step->from = kpatch_nmi_top();

	if (!step->unpatch) {
		if (kpatch_nmi_depth == KPATCH_NMI_PARTS) {
			kpatch_nmi_hook_error_at(hook, gen, "too many patches");
			step->pos = -1;
			step->to = step->from;
			return;
		}
		step->pos = kpatch_nmi_depth;
		kpatch_nmi_stack[kpatch_nmi_depth++] = gen;
	} else {
		for (i = kpatch_nmi_depth - 1; i >= 0; i--)
			if (kpatch_nmi_stack[i] == gen)
				break;
		step->pos = i;
		if (i < 0) {
			kpatch_nmi_hook_error_at(hook, gen, "not a patch in effect");
			step->to = step->from;
			return;
		}
		for (kpatch_nmi_depth--; i < kpatch_nmi_depth; i++)
			kpatch_nmi_stack[i] = kpatch_nmi_stack[i + 1];
		kpatch_nmi_stack[kpatch_nmi_depth] = 0;
	}
	step->to = kpatch_nmi_top();
	kpatch_nmi_convert(step->from, step->to);
}

static void kpatch_nmi_undo(enum kpatch_hook hook, int gen)
{
	struct kpatch_nmi_step *step;
	bool unpatch = hook == KPATCH_UNDO_UNPATCH;
	int i;

	if (!irqs_disabled() || strncmp(current->comm, "migration/", 10))
		kpatch_nmi_hook_error_at(hook, gen, "not inside stop_machine() (%s)",
					 current->comm);
	if (!kpatch_nmi_upd.open || !kpatch_nmi_upd.nr_steps) {
		kpatch_nmi_hook_error_at(hook, gen, "no stop hook to undo");
		return;
	}
	step = &kpatch_nmi_upd.steps[kpatch_nmi_upd.nr_steps - 1];
	if (step->unpatch != unpatch || step->gen != gen) {
		kpatch_nmi_hook_error_at(hook, gen, "the last stop hook is %s%d",
					 kpatch_nmi_hook_names[step->unpatch ?
							       KPATCH_STOP_UNPATCH :
							       KPATCH_STOP_PATCH],
					 step->gen);
		return;
	}
	kpatch_nmi_upd.nr_steps--;
	kpatch_nmi_upd.undos++;
	/* what an old function saw so far is rolled back now */
	if (atomic_long_xchg(&kpatch_nmi_old_seen, 0) == kpatch_nmi_upd.id)
		kpatch_nmi_upd.old_seen = true;
	if (step->pos < 0)
		return;
	kpatch_nmi_convert(step->to, step->from);
	if (!unpatch) {
		kpatch_nmi_stack[--kpatch_nmi_depth] = 0;
	} else {
		for (i = kpatch_nmi_depth++; i > step->pos; i--)
			kpatch_nmi_stack[i] = kpatch_nmi_stack[i - 1];
		kpatch_nmi_stack[step->pos] = gen;
	}
}

static void kpatch_nmi_post(enum kpatch_hook hook, int gen)
{
	might_sleep();
	/* Only the first post hook after an update closes it. */
	if (kpatch_nmi_upd.open)
		kpatch_nmi_close(hook, gen);
}

static int kpatch_nmi_patch_hook(enum kpatch_hook hook, int gen)
{
	atomic_long_inc(&kpatch_nmi_hook_calls[hook]);
	switch (hook) {
	case KPATCH_PRE_PATCH:
	case KPATCH_PRE_UNPATCH:
		kpatch_nmi_pre(hook, gen);
		break;
	case KPATCH_STOP_PATCH:
	case KPATCH_STOP_UNPATCH:
		kpatch_nmi_stop_hook(hook, gen);
		break;
	case KPATCH_UNDO_PATCH:
	case KPATCH_UNDO_UNPATCH:
		kpatch_nmi_undo(hook, gen);
		break;
	default:
		kpatch_nmi_post(hook, gen);
		break;
	}
	return 0;
}

static noinline int kpatch_test_nmi_pre_patch1(struct kpatch_module *kpmod)
{
	return kpatch_nmi_patch_hook(KPATCH_PRE_PATCH, 1);
}

static noinline int kpatch_test_nmi_stop_patch1(struct kpatch_module *kpmod)
{
	return kpatch_nmi_patch_hook(KPATCH_STOP_PATCH, 1);
}

static noinline int kpatch_test_nmi_undo_patch1(struct kpatch_module *kpmod)
{
	return kpatch_nmi_patch_hook(KPATCH_UNDO_PATCH, 1);
}

static noinline int kpatch_test_nmi_post_patch1(struct kpatch_module *kpmod)
{
	return kpatch_nmi_patch_hook(KPATCH_POST_PATCH, 1);
}

static noinline int kpatch_test_nmi_pre_unpatch1(struct kpatch_module *kpmod)
{
	return kpatch_nmi_patch_hook(KPATCH_PRE_UNPATCH, 1);
}

static noinline int kpatch_test_nmi_stop_unpatch1(struct kpatch_module *kpmod)
{
	return kpatch_nmi_patch_hook(KPATCH_STOP_UNPATCH, 1);
}

static noinline int kpatch_test_nmi_undo_unpatch1(struct kpatch_module *kpmod)
{
	return kpatch_nmi_patch_hook(KPATCH_UNDO_UNPATCH, 1);
}

static noinline int kpatch_test_nmi_post_unpatch1(struct kpatch_module *kpmod)
{
	return kpatch_nmi_patch_hook(KPATCH_POST_UNPATCH, 1);
}

static noinline int kpatch_test_nmi_pre_patch2(struct kpatch_module *kpmod)
{
	return kpatch_nmi_patch_hook(KPATCH_PRE_PATCH, 2);
}

static noinline int kpatch_test_nmi_stop_patch2(struct kpatch_module *kpmod)
{
	return kpatch_nmi_patch_hook(KPATCH_STOP_PATCH, 2);
}

static noinline int kpatch_test_nmi_undo_patch2(struct kpatch_module *kpmod)
{
	return kpatch_nmi_patch_hook(KPATCH_UNDO_PATCH, 2);
}

static noinline int kpatch_test_nmi_post_patch2(struct kpatch_module *kpmod)
{
	return kpatch_nmi_patch_hook(KPATCH_POST_PATCH, 2);
}

static noinline int kpatch_test_nmi_pre_unpatch2(struct kpatch_module *kpmod)
{
	return kpatch_nmi_patch_hook(KPATCH_PRE_UNPATCH, 2);
}

static noinline int kpatch_test_nmi_stop_unpatch2(struct kpatch_module *kpmod)
{
	return kpatch_nmi_patch_hook(KPATCH_STOP_UNPATCH, 2);
}

static noinline int kpatch_test_nmi_undo_unpatch2(struct kpatch_module *kpmod)
{
	return kpatch_nmi_patch_hook(KPATCH_UNDO_UNPATCH, 2);
}

static noinline int kpatch_test_nmi_post_unpatch2(struct kpatch_module *kpmod)
{
	return kpatch_nmi_patch_hook(KPATCH_POST_UNPATCH, 2);
}

static noinline int kpatch_test_nmi_pre_patch3(struct kpatch_module *kpmod)
{
	return kpatch_nmi_patch_hook(KPATCH_PRE_PATCH, 3);
}

static noinline int kpatch_test_nmi_stop_patch3(struct kpatch_module *kpmod)
{
	return kpatch_nmi_patch_hook(KPATCH_STOP_PATCH, 3);
}

static noinline int kpatch_test_nmi_undo_patch3(struct kpatch_module *kpmod)
{
	return kpatch_nmi_patch_hook(KPATCH_UNDO_PATCH, 3);
}

static noinline int kpatch_test_nmi_post_patch3(struct kpatch_module *kpmod)
{
	return kpatch_nmi_patch_hook(KPATCH_POST_PATCH, 3);
}

static noinline int kpatch_test_nmi_pre_unpatch3(struct kpatch_module *kpmod)
{
	return kpatch_nmi_patch_hook(KPATCH_PRE_UNPATCH, 3);
}

static noinline int kpatch_test_nmi_stop_unpatch3(struct kpatch_module *kpmod)
{
	return kpatch_nmi_patch_hook(KPATCH_STOP_UNPATCH, 3);
}

static noinline int kpatch_test_nmi_undo_unpatch3(struct kpatch_module *kpmod)
{
	return kpatch_nmi_patch_hook(KPATCH_UNDO_UNPATCH, 3);
}

static noinline int kpatch_test_nmi_post_unpatch3(struct kpatch_module *kpmod)
{
	return kpatch_nmi_patch_hook(KPATCH_POST_UNPATCH, 3);
}

module_param_cb(new_early, &kpatch_nmi_count_ops, &kpatch_nmi_new_early, 0444);
MODULE_PARM_DESC(new_early, "calls of a new function of an update before its stop hooks were all done (must stay 0)");
module_param_cb(new_unconverted, &kpatch_nmi_count_ops, &kpatch_nmi_new_unconverted, 0444);
MODULE_PARM_DESC(new_unconverted, "calls of a new function of an update on unconverted or partly converted data (must stay 0)");
module_param_cb(old_converted, &kpatch_nmi_count_ops, &kpatch_nmi_old_converted, 0444);
MODULE_PARM_DESC(old_converted, "calls of an old function of an update on converted or partly converted data");
module_param_cb(old_converted_kept, &kpatch_nmi_count_ops, &kpatch_nmi_old_converted_kept, 0444);
MODULE_PARM_DESC(old_converted_kept, "updates with such calls that took effect, not rolled back (must stay 0)");
module_param_cb(data_mismatch, &kpatch_nmi_count_ops, &kpatch_nmi_data_mismatch, 0444);
MODULE_PARM_DESC(data_mismatch, "calls, outside any update, of a function whose data was not in its version (must stay 0)");
module_param_cb(rollbacks, &kpatch_nmi_count_ops, &kpatch_nmi_rollbacks, 0444);
MODULE_PARM_DESC(rollbacks, "failed updates whose stop hooks ran and were undone");
module_param_cb(rollbacks_old_calls, &kpatch_nmi_count_ops, &kpatch_nmi_rollbacks_old, 0444);
MODULE_PARM_DESC(rollbacks_old_calls, "of those, updates in which an old function saw converted data");
module_param_cb(rollback_data_changed, &kpatch_nmi_count_ops, &kpatch_nmi_rollback_changed, 0444);
MODULE_PARM_DESC(rollback_data_changed, "failed updates after which the data differed from before (must stay 0)");
module_param_cb(conversions, &kpatch_nmi_count_ops, &kpatch_nmi_conversions, 0444);
MODULE_PARM_DESC(conversions, "conversions of the data by stop and undo hooks");
module_param_cb(hook_errors, &kpatch_nmi_count_ops, &kpatch_nmi_hook_errors, 0444);
MODULE_PARM_DESC(hook_errors, "hooks called out of order or context, or finding the data wrong (must stay 0)");

static int kpatch_nmi_str_get(char *buffer, const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE, "%s\n", (const char *)kp->arg);
}

static const struct kernel_param_ops kpatch_nmi_str_ops = {
	.set = kpatch_nmi_count_set,
	.get = kpatch_nmi_str_get,
};

module_param_cb(last_hook_error, &kpatch_nmi_str_ops, kpatch_nmi_hook_error, 0444);
MODULE_PARM_DESC(last_hook_error, "the last hook error");

static int kpatch_nmi_hook_calls_get(char *buffer, const struct kernel_param *kp)
{
	int i, len = 0;

	for (i = 0; i < KPATCH_NR_HOOKS; i++)
		len += scnprintf(buffer + len, PAGE_SIZE - len, "%s%s:%ld",
				 i ? " " : "", kpatch_nmi_hook_names[i],
				 atomic_long_read(&kpatch_nmi_hook_calls[i]));
	len += scnprintf(buffer + len, PAGE_SIZE - len, "\n");
	return len;
}

static const struct kernel_param_ops kpatch_nmi_hook_calls_ops = {
	.set = kpatch_nmi_count_set,
	.get = kpatch_nmi_hook_calls_get,
};

module_param_cb(hook_calls, &kpatch_nmi_hook_calls_ops, NULL, 0444);
MODULE_PARM_DESC(hook_calls, "calls of each patch hook (\"pre-patch:N stop-patch:N ...\")");

static int kpatch_nmi_last_violation_get(char *buffer, const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE, "%s gen=%d version=%#x update=%ld\n",
			 kpatch_nmi_violation_names[atomic_read(&kpatch_nmi_v_kind)],
			 atomic_read(&kpatch_nmi_v_gen),
			 atomic_read(&kpatch_nmi_v_version),
			 atomic_long_read(&kpatch_nmi_v_flight));
}

static const struct kernel_param_ops kpatch_nmi_last_violation_ops = {
	.set = kpatch_nmi_count_set,
	.get = kpatch_nmi_last_violation_get,
};

module_param_cb(last_violation, &kpatch_nmi_last_violation_ops, NULL, 0444);
MODULE_PARM_DESC(last_violation, "the last call that found the data wrong: kind, generation, version, update");

/* Reading "data": the version word and the fields, in hex. */
static int kpatch_nmi_data_get(char *buffer, const struct kernel_param *kp)
{
	struct kpatch_nmi_data d = kpatch_nmi_data;
	int i, len;

	len = scnprintf(buffer, PAGE_SIZE, "%08x", d.version);
	for (i = 0; i < KPATCH_NMI_FIELDS; i++)
		len += scnprintf(buffer + len, PAGE_SIZE - len, " %08x",
				 d.field[i]);
	len += scnprintf(buffer + len, PAGE_SIZE - len, "\n");
	return len;
}

static const struct kernel_param_ops kpatch_nmi_data_ops = {
	.set = kpatch_nmi_count_set,
	.get = kpatch_nmi_data_get,
};

module_param_cb(data, &kpatch_nmi_data_ops, NULL, 0444);
MODULE_PARM_DESC(data, "the data: version word and fields, in hex");

/*
 * Reading "data_version": the version the data is entirely in, "mixed" if
 * none, then the stack of patches the hooks keep (oldest first).
 */
static int kpatch_nmi_data_version_get(char *buffer, const struct kernel_param *kp)
{
	u32 version = READ_ONCE(kpatch_nmi_data.version);
	int i, len;

	if (version < KPATCH_NMI_GENS && kpatch_nmi_data_is(version, &version))
		len = scnprintf(buffer, PAGE_SIZE, "%u", version);
	else
		len = scnprintf(buffer, PAGE_SIZE, "mixed(%#x)", version);
	len += scnprintf(buffer + len, PAGE_SIZE - len, " [");
	for (i = 0; i < READ_ONCE(kpatch_nmi_depth) && i < KPATCH_NMI_PARTS; i++)
		len += scnprintf(buffer + len, PAGE_SIZE - len, "%s%d",
				 i ? " " : "", READ_ONCE(kpatch_nmi_stack[i]));
	len += scnprintf(buffer + len, PAGE_SIZE - len, "]\n");
	return len;
}

static const struct kernel_param_ops kpatch_nmi_data_version_ops = {
	.set = kpatch_nmi_count_set,
	.get = kpatch_nmi_data_version_get,
};

module_param_cb(data_version, &kpatch_nmi_data_version_ops, NULL, 0444);
MODULE_PARM_DESC(data_version, "the version of the data (\"mixed(..)\" if none) and the stack of patches the hooks keep, e.g. \"2 [1 2]\"");

/* At init: every field differs in every version, so a caller sees a half-converted one. */
static int kpatch_nmi_data_init(void)
{
	int v, w, i;

	for (v = 0; v < KPATCH_NMI_GENS; v++)
		for (i = 0; i < KPATCH_NMI_FIELDS; i++) {
			kpatch_nmi_expect[v][i] =
				kpatch_nmi_encode(v, kpatch_nmi_payload[i]);
			if (kpatch_nmi_decode(v, kpatch_nmi_expect[v][i]) !=
			    kpatch_nmi_payload[i])
				return -EINVAL;
			for (w = 0; w < v; w++)
				if (kpatch_nmi_expect[w][i] == kpatch_nmi_expect[v][i])
					return -EINVAL;
		}
	kpatch_nmi_data.version = 0;
	memcpy(kpatch_nmi_data.field, kpatch_nmi_expect[0],
	       sizeof(kpatch_nmi_data.field));
	return 0;
}

/* Their addresses are taken here: functions that can be called indirectly. */
static const kpatch_hook_t kpatch_nmi_patch_hooks[KPATCH_NMI_GENS][KPATCH_NR_HOOKS] __used = {
	[1] = {
		[KPATCH_PRE_PATCH] = kpatch_test_nmi_pre_patch1,
		[KPATCH_STOP_PATCH] = kpatch_test_nmi_stop_patch1,
		[KPATCH_UNDO_PATCH] = kpatch_test_nmi_undo_patch1,
		[KPATCH_POST_PATCH] = kpatch_test_nmi_post_patch1,
		[KPATCH_PRE_UNPATCH] = kpatch_test_nmi_pre_unpatch1,
		[KPATCH_STOP_UNPATCH] = kpatch_test_nmi_stop_unpatch1,
		[KPATCH_UNDO_UNPATCH] = kpatch_test_nmi_undo_unpatch1,
		[KPATCH_POST_UNPATCH] = kpatch_test_nmi_post_unpatch1,
	},
	[2] = {
		[KPATCH_PRE_PATCH] = kpatch_test_nmi_pre_patch2,
		[KPATCH_STOP_PATCH] = kpatch_test_nmi_stop_patch2,
		[KPATCH_UNDO_PATCH] = kpatch_test_nmi_undo_patch2,
		[KPATCH_POST_PATCH] = kpatch_test_nmi_post_patch2,
		[KPATCH_PRE_UNPATCH] = kpatch_test_nmi_pre_unpatch2,
		[KPATCH_STOP_UNPATCH] = kpatch_test_nmi_stop_unpatch2,
		[KPATCH_UNDO_UNPATCH] = kpatch_test_nmi_undo_unpatch2,
		[KPATCH_POST_UNPATCH] = kpatch_test_nmi_post_unpatch2,
	},
	[3] = {
		[KPATCH_PRE_PATCH] = kpatch_test_nmi_pre_patch3,
		[KPATCH_STOP_PATCH] = kpatch_test_nmi_stop_patch3,
		[KPATCH_UNDO_PATCH] = kpatch_test_nmi_undo_patch3,
		[KPATCH_POST_PATCH] = kpatch_test_nmi_post_patch3,
		[KPATCH_PRE_UNPATCH] = kpatch_test_nmi_pre_unpatch3,
		[KPATCH_STOP_UNPATCH] = kpatch_test_nmi_stop_unpatch3,
		[KPATCH_UNDO_UNPATCH] = kpatch_test_nmi_undo_unpatch3,
		[KPATCH_POST_UNPATCH] = kpatch_test_nmi_post_unpatch3,
	},
};

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

	ret = kpatch_nmi_data_init();
	if (ret) {
		pr_err("the versions of the data cannot be told apart\n");
		return ret;
	}

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
