/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Functions shared between the kpatch selftest modules.
 *
 * kpatch_test_target.ko holds the "old" functions the selftests patch;
 * kpatch_test_new.ko holds their replacements; kpatch_test_busy.ko holds
 * a function kept on a kthread's stack and its replacement.  Every version
 * of the value functions returns a distinct value, so the shell sees which
 * one runs:
 *
 *	kpatch_test_value_a:  1   (v1: 11, v2: 12, v3: 13)
 *	kpatch_test_value_b:  2   (v1: 21, v2: 22)
 */
#ifndef _KPATCH_TEST_H
#define _KPATCH_TEST_H

#include <linux/compiler.h>
#include <linux/hrtimer.h>
#include <linux/jump_label.h>

struct kpatch_module;
struct kpatch_test_shadow_obj;
struct seq_file;
struct task_struct;

/*
 * Return @v from a value function so that its callers cannot know it.
 * noinline alone does not stop GCC (16, the 7.x kernel's compiler) from
 * propagating a constant return value into a caller in the same file,
 * which then prints the old value whichever version ran.
 */
static __always_inline int kpatch_test_opaque(int v)
{
	OPTIMIZER_HIDE_VAR(v);
	return v;
}

/* kpatch_test_target.ko */
int kpatch_test_value_a(void);
int kpatch_test_value_b(void);
int kpatch_test_value_notrace(void);

/* kpatch_test_new.ko */
int kpatch_test_cmdline_v1(struct seq_file *m, void *v);
int kpatch_test_cmdline_v2(struct seq_file *m, void *v);
int kpatch_test_cmdline_v3(struct seq_file *m, void *v);
int kpatch_test_value_a_v1(void);
int kpatch_test_value_a_v2(void);
int kpatch_test_value_a_v3(void);
int kpatch_test_value_b_v1(void);
int kpatch_test_value_b_v2(void);

/* kpatch_test_busy.ko */
void kpatch_test_busy_fn(void);
void kpatch_test_busy_fn_new(void);

/* kpatch_test_going.ko */
int kpatch_test_going_fn(void);
int kpatch_test_going_fn_new(void);

/* kpatch_test_exit.ko: replacement for proc_exit_connector() */
void kpatch_test_exit_connector(struct task_struct *task);

/* kpatch_test_coming.ko */
int kpatch_test_coming_fn(void);

/* kpatch_test_direct.ko: its direct trampoline (asm, not called from C) */
void kpatch_test_direct_tramp(void);

/* kpatch_test_sib.ko */
int kpatch_test_sib_fn(void);

/* kpatch_test_sib_new.ko: kpatch_test_sib_fn_new() is asm, a sibling call */
int kpatch_test_sib_fn_new(void);
int kpatch_test_sib_helper(void);
int kpatch_test_sib_other(void);
int kpatch_test_sib_hook(struct kpatch_module *kpmod);

/*
 * kpatch_test_own.ko: new functions (kpatch_test_own_tail() and
 * kpatch_test_own_indirect() are asm) and where they lead
 */
int kpatch_test_own_value_a(void);
int kpatch_test_own_tail(void);
int kpatch_test_own_helper(void);
int kpatch_test_own_indirect(void);
int kpatch_test_own_target(void);

/*
 * kpatch_test_sc.ko: new functions whose jumps the kernel rewrites (asm),
 * and the static call's two targets
 */
int kpatch_test_sc_tail(void);
int kpatch_test_sc_near(void);
int kpatch_test_sc_near_rj(void);
int kpatch_test_sc_slow(void);
int kpatch_test_sc_quick(void);
extern const u32 kpatch_test_sc_near_rj_off;	/* its jmp, from its start */

/* kpatch_test_cold.ko */
int kpatch_test_cold_fn(int slow);
int kpatch_test_cold_fn_new(int slow);

/*
 * kpatch_test_pc.ko: functions with pieces (asm; the pieces have no C
 * names), their twins in C, and what the pieces call and count
 */
int kpatch_test_pc_f(int x);
int kpatch_test_pc_g(int x);
int kpatch_test_pc_jmp8(int x);
int kpatch_test_pc_jcc8(int x);
int kpatch_test_pc_mid(int x);
int kpatch_test_pc_rj(int x);
int kpatch_test_pc_xj(int x);
int kpatch_test_pc_opt(int x);
int kpatch_test_pc_d(int x);
int kpatch_test_pc_e(int x);
int kpatch_test_pc_xs(int x);
int kpatch_test_pc_xm(int x);
int kpatch_test_pc_xb(int x);
int kpatch_test_pc_xl(int x);
int kpatch_test_pc_ch(int x);
int kpatch_test_pc_sk(int x);
int kpatch_test_pc_jcx(int x);
int kpatch_test_pc_lp(int x);
int kpatch_test_pc_al(int x);
int kpatch_test_pc_am(int x);
int kpatch_test_pc_plain_f(int x);
int kpatch_test_pc_plain_g(int x);
int kpatch_test_pc_plain_jmp8(int x);
int kpatch_test_pc_plain_jcc8(int x);
int kpatch_test_pc_plain_mid(int x);
int kpatch_test_pc_plain_rj(int x);
int kpatch_test_pc_plain_xj(int x);
int kpatch_test_pc_wait(void);
extern int kpatch_test_pc_tail;
extern const u32 kpatch_test_pc_rj_off;	/* its jmp, from its start */
extern const u32 kpatch_test_pc_xj_off;	/* its jmp, from its start */
extern const u32 kpatch_test_pc_two_off[4];	/* opt, d, e (two) */
extern const u32 kpatch_test_pc_xs_off[4];	/* xs, xm, xb, xl */
extern const u32 kpatch_test_pc_ch_off;	/* ch.part.0's jne, from its start */
DECLARE_STATIC_KEY_FALSE(kpatch_test_pc_key);	/* sk's static branch */

/* kpatch_test_hooks.ko: the value functions return 100 (f1: 101, ...) */
int kpatch_test_hooks_f(void);
int kpatch_test_hooks_f1(void);
int kpatch_test_hooks_f2(void);
int kpatch_test_hooks_f3(void);
int kpatch_test_hooks_pre_patch(struct kpatch_module *kpmod);
int kpatch_test_hooks_stop_patch(struct kpatch_module *kpmod);
int kpatch_test_hooks_undo_patch(struct kpatch_module *kpmod);
int kpatch_test_hooks_post_patch(struct kpatch_module *kpmod);
int kpatch_test_hooks_pre_unpatch(struct kpatch_module *kpmod);
int kpatch_test_hooks_stop_unpatch(struct kpatch_module *kpmod);
int kpatch_test_hooks_undo_unpatch(struct kpatch_module *kpmod);
int kpatch_test_hooks_post_unpatch(struct kpatch_module *kpmod);
void kpatch_test_hooks_sleep_fn(void);
void kpatch_test_hooks_sleep_fn_new(void);

/* kpatch_test_shadow.ko: old and new function, hooks */
int kpatch_test_shadow_touch(struct kpatch_test_shadow_obj *obj);
int kpatch_test_shadow_touch_new(struct kpatch_test_shadow_obj *obj);
int kpatch_test_shadow_pre_patch(struct kpatch_module *kpmod);
int kpatch_test_shadow_post_unpatch(struct kpatch_module *kpmod);
int kpatch_test_shadow_hook_nop(struct kpatch_module *kpmod);
int kpatch_test_shadow_hook_veto(struct kpatch_module *kpmod);

/* kpatch_test_move.ko */
struct wait_queue_head;
struct wait_queue_entry;
ssize_t kpatch_test_move_read_old(char *buf);
ssize_t kpatch_test_move_read_new(char *buf);
int kpatch_test_move_stop_patch(struct kpatch_module *kpmod);
int kpatch_test_move_stop_unpatch(struct kpatch_module *kpmod);
long kpatch_test_move_getpid(void);
ssize_t kpatch_test_move_read2_old(char *buf);
ssize_t kpatch_test_move_read2_new(char *buf);
void kpatch_test_move_nap(void);
void kpatch_test_move_nap_new(void);
void kpatch_test_move_finish_wait(struct wait_queue_head *wq_head,
				  struct wait_queue_entry *wq_entry);
int kpatch_test_move_register(struct kpatch_module *kpmod);
int kpatch_test_move_register_new(struct kpatch_module *kpmod);
int kpatch_test_move_hrtimeout(ktime_t *expires, u64 delta,
			       const enum hrtimer_mode mode, clockid_t clock_id);

/* kpatch_test_hold.ko */
ssize_t kpatch_test_hold_wait_old(char *buf);
ssize_t kpatch_test_hold_wait_new(char *buf);
void kpatch_test_hold_task_work_run(void);

#endif /* _KPATCH_TEST_H */
