// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_test_pc - functions split into pieces the way compilers split
 * them, for the kpatch selftests (test-pieces.sh, test-kprobed.sh).
 *
 * Each function below has a piece: code of its own that kallsyms lists
 * as a function of its own, named as GCC names them (NAME.part.N for a
 * part of the body split off by partial inlining, NAME.cold for unlikely
 * blocks moved to .text.unlikely), and reached by a jump.  Every piece
 * calls kpatch_test_pc_wait(), which sleeps while "hold" is 1 and returns
 * 10; the piece then adds a number of its own, counts its run in "tail"
 * and returns.  So a task asleep in the wait has a return address in the
 * piece and none in the function.
 *
 *   kpatch_test_pc_g(x)	if (!x) return 0; return g.part.0(x) by a
 *				jcc with a 32-bit displacement.
 *				kpatch_test_pc_g.part.0 returns 11.
 *   kpatch_test_pc_f(x)	return g(x & 1), g's head inlined: it jumps
 *				(32-bit jcc) into kpatch_test_pc_g.part.0
 *				too.  kallsyms knows that piece as g's only.
 *   kpatch_test_pc_jmp8(x)	ends "jmp kpatch_test_pc_jmp8.part.0", the
 *				piece right behind it: a short jmp (eb).
 *				The piece returns 12.
 *   kpatch_test_pc_jcc8(x)	"jne kpatch_test_pc_jcc8.part.0", the piece
 *				right behind it: a short jcc (75).  13.
 *   kpatch_test_pc_mid(x)	jumps to a block inside kpatch_test_pc_mid.cold,
 *				not to its start: the piece's first block
 *				is reached only from that one, and jumps
 *				back into the function.  14.
 *   kpatch_test_pc_rj(x)	returns 0 for !x; else jumps to a block that
 *				comes right after that return and is only
 *				"jmp kpatch_test_pc_rj.part.0" (32-bit): a
 *				kprobe there puts its INT3 right behind a
 *				return, where a compiler may leave INT3s of
 *				its own.  "rj_jmp" reads that jmp's offset
 *				from the function's start, past its ENDBR.
 *				15.
 *   kpatch_test_pc_xj(x)	the same block and jmp (into
 *				kpatch_test_pc_xj.part.0), but no jump of
 *				the function leads there: for x != 0 it runs
 *				into a ud2, whose entry in the module's
 *				exception table sends it there.  "xj_jmp"
 *				reads the jmp's offset as "rj_jmp" does.  16.
 *
 * And for kprobes whose INT3s stand on or near a jump into a piece
 * (test-kprobed.sh), each jumping into its NAME.part.0, which returns 10
 * plus the number given; "two_off" reads "OPT D E1 E3", offsets past the
 * ENDBR:
 *   kpatch_test_pc_opt(x)	testl; a 5-byte movl at OPT (an optimized
 *				kprobe makes it a jmp out); jne into the
 *				piece at OPT + 5.  17.
 *   kpatch_test_pc_d(x)	after a return, a block at D that is
 *				"mov %ebx, %eax" (8b c3: its second byte is
 *				the opcode of ret), then a jmp into the
 *				piece at D + 2.  18.
 *   kpatch_test_pc_e(x)	after a return, a jmp into the piece at E1,
 *				which only the jmp at E3 (a block of its own
 *				after a jmp, reached by a jne) leads to.  19.
 *   kpatch_test_pc_xs(x)	after a return, a block at XS (reached by a
 *				jne) that is "xor %esi, %esi" (31 f6), then a
 *				jmp into the piece: the bytes f6 e9 also
 *				start an instruction, one that covers the
 *				jmp's opcode.  20.
 *   kpatch_test_pc_xm(x)	xs after 17 blocks that each jump to its
 *				return unless x: 35 jumps inside the
 *				function, all before its first return.  21.
 *   kpatch_test_pc_xb(x)	after a return, a block at XB that is a movl
 *				(b8 48 b8 00 00) whose bytes from the second
 *				on start a movabs (48 b8, eight bytes of
 *				immediate) that covers the jmp into the piece
 *				behind it and the jmp back to XB after
 *				that, which the jne leads to.  22.
 *   kpatch_test_pc_xl(x)	after a return, "xor %esi, %esi" at XL that
 *				no jump leads to, then a jmp into the piece
 *				that the jne leads to: f6 e9 as in xs.  23.
 *   "xs_off" reads "XS XM XB XL".
 *
 * And pieces reached in the other ways a jump can lead into one
 * (test-pieces.sh, test-kprobed.sh), old side only:
 *   kpatch_test_pc_ch(x)	jne (32-bit) into kpatch_test_pc_ch.part.0,
 *				which jne's on into
 *				kpatch_test_pc_ch.part.0.cold, where the
 *				wait is: a piece that only another piece
 *				leads to.  "ch_jne" reads the offset of the
 *				jne in ch.part.0 from its start.  24.
 *   kpatch_test_pc_sk(x)	a static branch (jump label, a 5-byte NOP
 *				while "key" is 0) into
 *				kpatch_test_pc_sk.cold in .text.unlikely:
 *				no jump in the code leads there while the
 *				key is off, only the module's jump table.
 *				With the key off it returns 0.  25.
 *   kpatch_test_pc_jcx(x)	"jrcxz kpatch_test_pc_jcx.part.0" (e3), with
 *				%rcx = x - 1: for x = 1 it jumps.  26.
 *   kpatch_test_pc_lp(x)	"loop kpatch_test_pc_lp.part.0" (e2), with
 *				%rcx = x + 1: for x = 1 it jumps.  27.
 *   kpatch_test_pc_al(x), kpatch_test_pc_am(x)
 *				each jne (32-bit) into its part,
 *				kpatch_test_pc_al.part.0 and
 *				kpatch_test_pc_am.part.0: one piece with
 *				two names, as GCC's identical code folding
 *				leaves two equal parts.  kallsyms names it
 *				by the first, al.part.0, for am too.  28.
 *
 * They are written in asm, so that the pieces, their names and the
 * jumps are the same on every compiler, and so are traceable functions
 * like any other: ENDBR where the kernel has IBT, then the fentry call,
 * recorded in __mcount_loc as GCC's -mrecord-mcount does, so that ftrace
 * (and kpatch) can attach to them.  Only caller-saved registers are used.
 *
 * Each of the first five has a twin in C, kpatch_test_pc_plain_NAME(),
 * returning 100 (f), 101 (g), 102 (jmp8), 103 (jcc8) or 104 (mid); rj and
 * xj have one too, returning 105 and 106: the twin replaces the function
 * with the pieces (the old side), or the function with the pieces
 * replaces its twin (the new side).  The other functions are replaced by
 * any twin (the old side).
 *
 * On load a kthread named "kpatch_pc" (its pid is in "pid") waits.
 * Writing a NAME above (f, g, jmp8, ..., ind, or plain_f ...) to "call"
 * makes it call that function with x = 1, store what the call returned
 * in "result" and set "call" back to "none".  "state" reads 1 while the
 * thread sleeps in kpatch_test_pc_wait(), 2 once it left.  With "spin"
 * set to 1, the wait wakes every jiffy and then runs for a jiffy (calling
 * cond_resched()), until "hold" is 0: the thread is inside the piece's
 * call all the time, running, runnable or asleep in turn.
 */

#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/compiler.h>
#include <linux/err.h>
#include <linux/jiffies.h>
#include <linux/jump_label.h>
#include <linux/kernel.h>
#include <linux/kthread.h>
#include <linux/linkage.h>
#include <linux/module.h>
#include <linux/moduleparam.h>
#include <linux/objtool.h>
#include <linux/sched.h>
#include <linux/string.h>
#include <linux/wait.h>
#include <asm/asm.h>
#include <asm/ibt.h>
#include <asm/nospec-branch.h>

#include "kpatch_test.h"

#define KPATCH_PC_IN_WAIT	1
#define KPATCH_PC_LEFT_WAIT	2

static DECLARE_WAIT_QUEUE_HEAD(kpatch_pc_wq);

static bool hold;

static int kpatch_pc_hold_set(const char *val, const struct kernel_param *kp)
{
	int ret = param_set_bool(val, kp);

	if (!ret)
		wake_up_all(&kpatch_pc_wq);
	return ret;
}

static const struct kernel_param_ops kpatch_pc_hold_ops = {
	.set = kpatch_pc_hold_set,
	.get = param_get_bool,
};
module_param_cb(hold, &kpatch_pc_hold_ops, &hold, 0644);
MODULE_PARM_DESC(hold, "1 keeps the thread asleep in kpatch_test_pc_wait()");

static int state;
module_param(state, int, 0444);
MODULE_PARM_DESC(state, "1 while the thread sleeps in kpatch_test_pc_wait(), 2 once it left");

static int result;
module_param(result, int, 0444);
MODULE_PARM_DESC(result, "what the last call returned");

static int calls;
module_param(calls, int, 0444);
MODULE_PARM_DESC(calls, "completed calls");

int kpatch_test_pc_tail;
module_param_named(tail, kpatch_test_pc_tail, int, 0444);
MODULE_PARM_DESC(tail, "runs of the pieces' code after kpatch_test_pc_wait()");

static int pid;
module_param(pid, int, 0444);
MODULE_PARM_DESC(pid, "pid of the kpatch_pc thread");

static struct task_struct *kpatch_pc_task;

static bool spin;
module_param(spin, bool, 0644);
MODULE_PARM_DESC(spin, "1: the wait wakes every jiffy and runs a jiffy");

/* Run for a jiffy, or until released, with a point to be preempted at. */
static void kpatch_test_pc_run(void)
{
	unsigned long end = jiffies + 1;

	while (time_before_eq(jiffies, end) && READ_ONCE(hold) &&
	       !kthread_should_stop())
		cond_resched();
}

/*
 * Called from the pieces, only ever in the kpatch_pc thread
 * (kthread_should_stop() wants a kthread).
 */
noinline int kpatch_test_pc_wait(void)
{
	WRITE_ONCE(state, KPATCH_PC_IN_WAIT);
	while (READ_ONCE(spin) && READ_ONCE(hold) && !kthread_should_stop()) {
		schedule_timeout_interruptible(1);
		kpatch_test_pc_run();
	}
	wait_event_interruptible(kpatch_pc_wq,
				 !READ_ONCE(hold) || kthread_should_stop());
	WRITE_ONCE(state, KPATCH_PC_LEFT_WAIT);
	return kpatch_test_opaque(10);
}

/* The fentry call of a traceable function, and its __mcount_loc entry. */
#define KPATCH_PC_FENTRY					\
"1:	call		__fentry__\n"				\
"	.pushsection	__mcount_loc, \"a\", @progbits\n"	\
"	.quad		1b\n"					\
"	.popsection\n"

/* What every piece does: wait, add @n to the result, count its run. */
#define KPATCH_PC_PIECE_BODY(n)					\
"	call		kpatch_test_pc_wait\n"			\
"	addl		$" #n ", %eax\n"			\
"	lock incl	kpatch_test_pc_tail(%rip)\n"

/*
 * g and f, and g's piece g.part.0.  The jumps into g.part.0 are written
 * with a 32-bit displacement ({disp32}), as a compiler's are when the
 * piece is further away than a short jump reaches.
 */
asm("	.pushsection	.text, \"ax\", @progbits\n"
"	.globl		kpatch_test_pc_g\n"
"	.type		kpatch_test_pc_g, @function\n"
"kpatch_test_pc_g:\n"
	ASM_ENDBR
	KPATCH_PC_FENTRY
"	testl		%edi, %edi\n"
"	{disp32} jne	kpatch_test_pc_g.part.0\n"
"	xorl		%eax, %eax\n"
	ASM_RET
"	.size		kpatch_test_pc_g, .-kpatch_test_pc_g\n"
"\n"
"	.globl		kpatch_test_pc_f\n"
"	.type		kpatch_test_pc_f, @function\n"
"kpatch_test_pc_f:\n"
	ASM_ENDBR
	KPATCH_PC_FENTRY
"	andl		$1, %edi\n"
"	{disp32} jne	kpatch_test_pc_g.part.0\n"
"	xorl		%eax, %eax\n"
	ASM_RET
"	.size		kpatch_test_pc_f, .-kpatch_test_pc_f\n"
"\n"
"	.type		kpatch_test_pc_g.part.0, @function\n"
"kpatch_test_pc_g.part.0:\n"
	KPATCH_PC_PIECE_BODY(1)
	ASM_RET
"	.size		kpatch_test_pc_g.part.0, .-kpatch_test_pc_g.part.0\n"
"	.popsection\n"
);

/*
 * jmp8 and jcc8: each piece right behind its function, in the same
 * section, so that the assembler makes the jump to it a short one.
 */
asm("	.pushsection	.text, \"ax\", @progbits\n"
"	.globl		kpatch_test_pc_jmp8\n"
"	.type		kpatch_test_pc_jmp8, @function\n"
"kpatch_test_pc_jmp8:\n"
	ASM_ENDBR
	KPATCH_PC_FENTRY
"	testl		%edi, %edi\n"
"	je		2f\n"
"	jmp		kpatch_test_pc_jmp8.part.0\n"
"2:	xorl		%eax, %eax\n"
	ASM_RET
"	.size		kpatch_test_pc_jmp8, .-kpatch_test_pc_jmp8\n"
"\n"
"	.type		kpatch_test_pc_jmp8.part.0, @function\n"
"kpatch_test_pc_jmp8.part.0:\n"
	KPATCH_PC_PIECE_BODY(2)
	ASM_RET
"	.size		kpatch_test_pc_jmp8.part.0, .-kpatch_test_pc_jmp8.part.0\n"
"\n"
"	.globl		kpatch_test_pc_jcc8\n"
"	.type		kpatch_test_pc_jcc8, @function\n"
"kpatch_test_pc_jcc8:\n"
	ASM_ENDBR
	KPATCH_PC_FENTRY
"	testl		%edi, %edi\n"
"	jne		kpatch_test_pc_jcc8.part.0\n"
"	xorl		%eax, %eax\n"
	ASM_RET
"	.size		kpatch_test_pc_jcc8, .-kpatch_test_pc_jcc8\n"
"\n"
"	.type		kpatch_test_pc_jcc8.part.0, @function\n"
"kpatch_test_pc_jcc8.part.0:\n"
	KPATCH_PC_PIECE_BODY(3)
	ASM_RET
"	.size		kpatch_test_pc_jcc8.part.0, .-kpatch_test_pc_jcc8.part.0\n"
"	.popsection\n"
);

/*
 * mid and mid.cold.  mid enters its piece at .Lkpatch_test_pc_mid_slow,
 * the piece's second block, which waits and goes on to the first; that
 * one counts and jumps back into mid.
 */
asm("	.pushsection	.text, \"ax\", @progbits\n"
"	.globl		kpatch_test_pc_mid\n"
"	.type		kpatch_test_pc_mid, @function\n"
"kpatch_test_pc_mid:\n"
	ASM_ENDBR
	KPATCH_PC_FENTRY
"	xorl		%eax, %eax\n"
"	testl		%edi, %edi\n"
"	jne		.Lkpatch_test_pc_mid_slow\n"
".Lkpatch_test_pc_mid_back:\n"
	ASM_RET
"	.size		kpatch_test_pc_mid, .-kpatch_test_pc_mid\n"
"	.popsection\n"
"\n"
"	.pushsection	.text.unlikely, \"ax\", @progbits\n"
"	.type		kpatch_test_pc_mid.cold, @function\n"
"kpatch_test_pc_mid.cold:\n"
"3:	addl		$4, %eax\n"
"	lock incl	kpatch_test_pc_tail(%rip)\n"
"	jmp		.Lkpatch_test_pc_mid_back\n"
".Lkpatch_test_pc_mid_slow:\n"
"	call		kpatch_test_pc_wait\n"
"	jmp		3b\n"
"	.size		kpatch_test_pc_mid.cold, .-kpatch_test_pc_mid.cold\n"
"	.popsection\n"
);

/*
 * rj and rj.part.0: the jmp into the piece starts the block right behind
 * the return of the other path (a ret, which may be followed by INT3s of
 * straight-line speculation, or the jmp to the return thunk).
 */
asm("	.pushsection	.text, \"ax\", @progbits\n"
"	.globl		kpatch_test_pc_rj\n"
"	.type		kpatch_test_pc_rj, @function\n"
"kpatch_test_pc_rj:\n"
	ASM_ENDBR
	KPATCH_PC_FENTRY
"	testl		%edi, %edi\n"
"	jne		2f\n"
"	xorl		%eax, %eax\n"
	ASM_RET
"2:	{disp32} jmp	kpatch_test_pc_rj.part.0\n"
"	.size		kpatch_test_pc_rj, .-kpatch_test_pc_rj\n"
"	.pushsection	.rodata, \"a\", @progbits\n"
"	.balign		4\n"
"kpatch_test_pc_rj_off:\n"
"	.long		2b - kpatch_test_pc_rj\n"
"	.popsection\n"
"\n"
"	.type		kpatch_test_pc_rj.part.0, @function\n"
"kpatch_test_pc_rj.part.0:\n"
	KPATCH_PC_PIECE_BODY(5)
	ASM_RET
"	.size		kpatch_test_pc_rj.part.0, .-kpatch_test_pc_rj.part.0\n"
"	.popsection\n"
);

/*
 * xj and xj.part.0: as rj, but only the module's exception table leads to
 * the block with the jmp: it is the fixup of the ud2 that x != 0 runs
 * into.
 */
asm("	.pushsection	.text, \"ax\", @progbits\n"
"	.globl		kpatch_test_pc_xj\n"
"	.type		kpatch_test_pc_xj, @function\n"
"kpatch_test_pc_xj:\n"
	ASM_ENDBR
	KPATCH_PC_FENTRY
"	testl		%edi, %edi\n"
"	je		.Lkpatch_test_pc_xj_zero\n"
"8:	ud2\n"
".Lkpatch_test_pc_xj_zero:\n"
"	xorl		%eax, %eax\n"
	ASM_RET
"9:	{disp32} jmp	kpatch_test_pc_xj.part.0\n"
"	.size		kpatch_test_pc_xj, .-kpatch_test_pc_xj\n"
	_ASM_EXTABLE(8b, 9b)
"	.pushsection	.rodata, \"a\", @progbits\n"
"	.balign		4\n"
"kpatch_test_pc_xj_off:\n"
"	.long		9b - kpatch_test_pc_xj\n"
"	.popsection\n"
"\n"
"	.type		kpatch_test_pc_xj.part.0, @function\n"
"kpatch_test_pc_xj.part.0:\n"
	KPATCH_PC_PIECE_BODY(6)
	ASM_RET
"	.size		kpatch_test_pc_xj.part.0, .-kpatch_test_pc_xj.part.0\n"
"	.popsection\n"
);

/* opt, d and e: see the top of the file */
asm("	.pushsection	.text, \"ax\", @progbits\n"
"	.globl		kpatch_test_pc_opt\n"
"	.type		kpatch_test_pc_opt, @function\n"
"kpatch_test_pc_opt:\n"
	ASM_ENDBR
	KPATCH_PC_FENTRY
"	testl		%edi, %edi\n"
"4:	.byte		0xb8, 0, 0, 0, 0\n"
"	{disp32} jne	kpatch_test_pc_opt.part.0\n"
	ASM_RET
"	.size		kpatch_test_pc_opt, .-kpatch_test_pc_opt\n"
"	.type		kpatch_test_pc_opt.part.0, @function\n"
"kpatch_test_pc_opt.part.0:\n"
	KPATCH_PC_PIECE_BODY(7)
	ASM_RET
"	.size		kpatch_test_pc_opt.part.0, .-kpatch_test_pc_opt.part.0\n"
"\n"
"	.globl		kpatch_test_pc_d\n"
"	.type		kpatch_test_pc_d, @function\n"
"kpatch_test_pc_d:\n"
	ASM_ENDBR
	KPATCH_PC_FENTRY
"	testl		%edi, %edi\n"
"	jne		5f\n"
"	xorl		%eax, %eax\n"
	ASM_RET
"5:	.byte		0x8b, 0xc3\n"
"	{disp32} jmp	kpatch_test_pc_d.part.0\n"
"	.size		kpatch_test_pc_d, .-kpatch_test_pc_d\n"
"	.type		kpatch_test_pc_d.part.0, @function\n"
"kpatch_test_pc_d.part.0:\n"
	KPATCH_PC_PIECE_BODY(8)
	ASM_RET
"	.size		kpatch_test_pc_d.part.0, .-kpatch_test_pc_d.part.0\n"
"\n"
"	.globl		kpatch_test_pc_e\n"
"	.type		kpatch_test_pc_e, @function\n"
"kpatch_test_pc_e:\n"
	ASM_ENDBR
	KPATCH_PC_FENTRY
"	cmpl		$7, %edi\n"
"	je		2f\n"
"	testl		%edi, %edi\n"
"	jne		3f\n"
"0:	xorl		%eax, %eax\n"
	ASM_RET
"1:	{disp32} jmp	kpatch_test_pc_e.part.0\n"
"2:	jmp		0b\n"
"3:	jmp		1b\n"
"	.size		kpatch_test_pc_e, .-kpatch_test_pc_e\n"
"	.type		kpatch_test_pc_e.part.0, @function\n"
"kpatch_test_pc_e.part.0:\n"
	KPATCH_PC_PIECE_BODY(9)
	ASM_RET
"	.size		kpatch_test_pc_e.part.0, .-kpatch_test_pc_e.part.0\n"
"\n"
"	.pushsection	.rodata, \"a\", @progbits\n"
"	.balign		4\n"
"kpatch_test_pc_two_off:\n"
"	.long		4b - kpatch_test_pc_opt, 5b - kpatch_test_pc_d\n"
"	.long		1b - kpatch_test_pc_e, 3b - kpatch_test_pc_e\n"
"	.popsection\n"
"\n"
"	.globl		kpatch_test_pc_xs\n"
"	.type		kpatch_test_pc_xs, @function\n"
"kpatch_test_pc_xs:\n"
	ASM_ENDBR
	KPATCH_PC_FENTRY
"	testl		%edi, %edi\n"
"	jne		.Lkpatch_pc_xs\n"
"	xorl		%eax, %eax\n"
	ASM_RET
".Lkpatch_pc_xs:	.byte	0x31, 0xf6\n"
"	{disp32} jmp	kpatch_test_pc_xs.part.0\n"
"	.size		kpatch_test_pc_xs, .-kpatch_test_pc_xs\n"
"	.type		kpatch_test_pc_xs.part.0, @function\n"
"kpatch_test_pc_xs.part.0:\n"
	KPATCH_PC_PIECE_BODY(10)
	ASM_RET
"	.size		kpatch_test_pc_xs.part.0, .-kpatch_test_pc_xs.part.0\n"
"\n"
"	.globl		kpatch_test_pc_xm\n"
"	.type		kpatch_test_pc_xm, @function\n"
"kpatch_test_pc_xm:\n"
	ASM_ENDBR
	KPATCH_PC_FENTRY
"	.rept		17\n"
"	testl		%edi, %edi\n"
"	jne		7f\n"
"	jmp		9f\n"
"7:\n"
"	.endr\n"
"	testl		%edi, %edi\n"
"	jne		.Lkpatch_pc_xm\n"
"9:	xorl		%eax, %eax\n"
	ASM_RET
".Lkpatch_pc_xm:	.byte	0x31, 0xf6\n"
"	{disp32} jmp	kpatch_test_pc_xm.part.0\n"
"	.size		kpatch_test_pc_xm, .-kpatch_test_pc_xm\n"
"	.type		kpatch_test_pc_xm.part.0, @function\n"
"kpatch_test_pc_xm.part.0:\n"
	KPATCH_PC_PIECE_BODY(11)
	ASM_RET
"	.size		kpatch_test_pc_xm.part.0, .-kpatch_test_pc_xm.part.0\n"
"\n"
"	.globl		kpatch_test_pc_xb\n"
"	.type		kpatch_test_pc_xb, @function\n"
"kpatch_test_pc_xb:\n"
	ASM_ENDBR
	KPATCH_PC_FENTRY
"	testl		%edi, %edi\n"
"	jne		7f\n"
"	xorl		%eax, %eax\n"
	ASM_RET
".Lkpatch_pc_xb:	.byte	0xb8, 0x48, 0xb8, 0, 0\n"
"	{disp32} jmp	kpatch_test_pc_xb.part.0\n"
"7:	jmp		.Lkpatch_pc_xb\n"
"	.size		kpatch_test_pc_xb, .-kpatch_test_pc_xb\n"
"	.type		kpatch_test_pc_xb.part.0, @function\n"
"kpatch_test_pc_xb.part.0:\n"
	KPATCH_PC_PIECE_BODY(12)
	ASM_RET
"	.size		kpatch_test_pc_xb.part.0, .-kpatch_test_pc_xb.part.0\n"
"\n"
"	.globl		kpatch_test_pc_xl\n"
"	.type		kpatch_test_pc_xl, @function\n"
"kpatch_test_pc_xl:\n"
	ASM_ENDBR
	KPATCH_PC_FENTRY
"	testl		%edi, %edi\n"
"	jne		9f\n"
"	xorl		%eax, %eax\n"
	ASM_RET
".Lkpatch_pc_xl:	.byte	0x31, 0xf6\n"
"9:	{disp32} jmp	kpatch_test_pc_xl.part.0\n"
"	.size		kpatch_test_pc_xl, .-kpatch_test_pc_xl\n"
"	.type		kpatch_test_pc_xl.part.0, @function\n"
"kpatch_test_pc_xl.part.0:\n"
	KPATCH_PC_PIECE_BODY(13)
	ASM_RET
"	.size		kpatch_test_pc_xl.part.0, .-kpatch_test_pc_xl.part.0\n"
"	.pushsection	.rodata, \"a\", @progbits\n"
"	.balign		4\n"
"kpatch_test_pc_xs_off:\n"
"	.long		.Lkpatch_pc_xs - kpatch_test_pc_xs\n"
"	.long		.Lkpatch_pc_xm - kpatch_test_pc_xm\n"
"	.long		.Lkpatch_pc_xb - kpatch_test_pc_xb\n"
"	.long		.Lkpatch_pc_xl - kpatch_test_pc_xl\n"
"	.popsection\n"
"	.popsection\n"
);

/*
 * ch, ch.part.0 and ch.part.0.cold: ch jumps into ch.part.0, which jumps
 * on into ch.part.0.cold, where the wait is.  That piece is far away, in
 * .text.unlikely: no jump of ch itself can lead there.
 */
asm("	.pushsection	.text, \"ax\", @progbits\n"
"	.globl		kpatch_test_pc_ch\n"
"	.type		kpatch_test_pc_ch, @function\n"
"kpatch_test_pc_ch:\n"
	ASM_ENDBR
	KPATCH_PC_FENTRY
"	testl		%edi, %edi\n"
"	{disp32} jne	kpatch_test_pc_ch.part.0\n"
"	xorl		%eax, %eax\n"
	ASM_RET
"	.size		kpatch_test_pc_ch, .-kpatch_test_pc_ch\n"
"\n"
"	.type		kpatch_test_pc_ch.part.0, @function\n"
"kpatch_test_pc_ch.part.0:\n"
"	testl		%edi, %edi\n"
"1:	{disp32} jne	kpatch_test_pc_ch.part.0.cold\n"
"	xorl		%eax, %eax\n"
	ASM_RET
"	.size		kpatch_test_pc_ch.part.0, .-kpatch_test_pc_ch.part.0\n"
"	.pushsection	.rodata, \"a\", @progbits\n"
"	.balign		4\n"
"kpatch_test_pc_ch_off:\n"
"	.long		1b - kpatch_test_pc_ch.part.0\n"
"	.popsection\n"
"	.popsection\n"
"\n"
"	.pushsection	.text.unlikely, \"ax\", @progbits\n"
"	.type		kpatch_test_pc_ch.part.0.cold, @function\n"
"kpatch_test_pc_ch.part.0.cold:\n"
	KPATCH_PC_PIECE_BODY(14)
	ASM_RET
"	.size		kpatch_test_pc_ch.part.0.cold, .-kpatch_test_pc_ch.part.0.cold\n"
"	.popsection\n"
);

/*
 * sk and sk.cold: the static branch as arch_static_branch() writes it
 * for static_branch_unlikely() (a 5-byte NOP and its entry in
 * __jump_table: code, target, key), the target a piece in
 * .text.unlikely.
 */
#ifndef ANNOTATE_DATA_SPECIAL
#define ANNOTATE_DATA_SPECIAL ""
#endif

DEFINE_STATIC_KEY_FALSE(kpatch_test_pc_key);

asm("	.pushsection	.text, \"ax\", @progbits\n"
"	.globl		kpatch_test_pc_sk\n"
"	.type		kpatch_test_pc_sk, @function\n"
"kpatch_test_pc_sk:\n"
	ASM_ENDBR
	KPATCH_PC_FENTRY
"1:	.byte		0x0f, 0x1f, 0x44, 0x00, 0x00\n"
"	xorl		%eax, %eax\n"
	ASM_RET
"	.size		kpatch_test_pc_sk, .-kpatch_test_pc_sk\n"
"	.pushsection	__jump_table, \"aw\"\n"
"	.balign		8\n"
	ANNOTATE_DATA_SPECIAL "\n"
"	.long		1b - ., kpatch_test_pc_sk.cold - .\n"
"	.quad		kpatch_test_pc_key - .\n"
"	.popsection\n"
"	.popsection\n"
"\n"
"	.pushsection	.text.unlikely, \"ax\", @progbits\n"
"	.type		kpatch_test_pc_sk.cold, @function\n"
"kpatch_test_pc_sk.cold:\n"
	KPATCH_PC_PIECE_BODY(15)
	ASM_RET
"	.size		kpatch_test_pc_sk.cold, .-kpatch_test_pc_sk.cold\n"
"	.popsection\n"
);

/*
 * jcx and lp: a jrcxz (e3) and a loop (e2), each into the piece right
 * behind its function (both take an 8-bit displacement only).
 */
asm("	.pushsection	.text, \"ax\", @progbits\n"
"	.globl		kpatch_test_pc_jcx\n"
"	.type		kpatch_test_pc_jcx, @function\n"
"kpatch_test_pc_jcx:\n"
	ASM_ENDBR
	KPATCH_PC_FENTRY
"	leal		-1(%rdi), %ecx\n"
"	jrcxz		kpatch_test_pc_jcx.part.0\n"
"	xorl		%eax, %eax\n"
	ASM_RET
"	.size		kpatch_test_pc_jcx, .-kpatch_test_pc_jcx\n"
"	.type		kpatch_test_pc_jcx.part.0, @function\n"
"kpatch_test_pc_jcx.part.0:\n"
	KPATCH_PC_PIECE_BODY(16)
	ASM_RET
"	.size		kpatch_test_pc_jcx.part.0, .-kpatch_test_pc_jcx.part.0\n"
"\n"
"	.globl		kpatch_test_pc_lp\n"
"	.type		kpatch_test_pc_lp, @function\n"
"kpatch_test_pc_lp:\n"
	ASM_ENDBR
	KPATCH_PC_FENTRY
"	leal		1(%rdi), %ecx\n"
"	loop		kpatch_test_pc_lp.part.0\n"
"	xorl		%eax, %eax\n"
	ASM_RET
"	.size		kpatch_test_pc_lp, .-kpatch_test_pc_lp\n"
"	.type		kpatch_test_pc_lp.part.0, @function\n"
"kpatch_test_pc_lp.part.0:\n"
	KPATCH_PC_PIECE_BODY(17)
	ASM_RET
"	.size		kpatch_test_pc_lp.part.0, .-kpatch_test_pc_lp.part.0\n"
"	.popsection\n"
);

/*
 * al and am, and their one part with two names: the first one in the
 * symbol table, al.part.0, is what kallsyms answers for the address.
 */
asm("	.pushsection	.text, \"ax\", @progbits\n"
"	.globl		kpatch_test_pc_al\n"
"	.type		kpatch_test_pc_al, @function\n"
"kpatch_test_pc_al:\n"
	ASM_ENDBR
	KPATCH_PC_FENTRY
"	testl		%edi, %edi\n"
"	{disp32} jne	kpatch_test_pc_al.part.0\n"
"	xorl		%eax, %eax\n"
	ASM_RET
"	.size		kpatch_test_pc_al, .-kpatch_test_pc_al\n"
"\n"
"	.globl		kpatch_test_pc_am\n"
"	.type		kpatch_test_pc_am, @function\n"
"kpatch_test_pc_am:\n"
	ASM_ENDBR
	KPATCH_PC_FENTRY
"	testl		%edi, %edi\n"
"	{disp32} jne	kpatch_test_pc_am.part.0\n"
"	xorl		%eax, %eax\n"
	ASM_RET
"	.size		kpatch_test_pc_am, .-kpatch_test_pc_am\n"
"\n"
"	.type		kpatch_test_pc_al.part.0, @function\n"
"	.type		kpatch_test_pc_am.part.0, @function\n"
"kpatch_test_pc_al.part.0:\n"
"kpatch_test_pc_am.part.0:\n"
	KPATCH_PC_PIECE_BODY(18)
	ASM_RET
"	.size		kpatch_test_pc_al.part.0, .-kpatch_test_pc_al.part.0\n"
"	.size		kpatch_test_pc_am.part.0, .-kpatch_test_pc_am.part.0\n"
"	.popsection\n"
);

/* xl's xor is reached by no jump: objtool would call it unreachable */
STACK_FRAME_NON_STANDARD(kpatch_test_pc_xl);

/* Four offsets from the table at kp->arg, each less the ENDBR. */
static int kpatch_pc_offs_get(char *buffer, const struct kernel_param *kp)
{
	const u32 *off = kp->arg;

	return scnprintf(buffer, PAGE_SIZE, "%u %u %u %u\n",
			 off[0] - ENDBR_INSN_SIZE, off[1] - ENDBR_INSN_SIZE,
			 off[2] - ENDBR_INSN_SIZE, off[3] - ENDBR_INSN_SIZE);
}

static const struct kernel_param_ops kpatch_pc_offs_ops = {
	.get = kpatch_pc_offs_get,
};
module_param_cb(xs_off, &kpatch_pc_offs_ops, (void *)kpatch_test_pc_xs_off,
		0444);
MODULE_PARM_DESC(xs_off, "offsets of xs's, xm's xor, xb's movl, xl's xor, past the ENDBR");
module_param_cb(two_off, &kpatch_pc_offs_ops, (void *)kpatch_test_pc_two_off,
		0444);
MODULE_PARM_DESC(two_off, "offsets of opt's movl, d's mov, e's two jmps, past the ENDBR");

static int kpatch_pc_xj_jmp_get(char *buffer, const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE, "%u\n",
			 kpatch_test_pc_xj_off - ENDBR_INSN_SIZE);
}

static const struct kernel_param_ops kpatch_pc_xj_jmp_ops = {
	.get = kpatch_pc_xj_jmp_get,
};
module_param_cb(xj_jmp, &kpatch_pc_xj_jmp_ops, NULL, 0444);
MODULE_PARM_DESC(xj_jmp, "offset of xj's jmp into its piece, past its ENDBR");

static int kpatch_pc_rj_jmp_get(char *buffer, const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE, "%u\n",
			 kpatch_test_pc_rj_off - ENDBR_INSN_SIZE);
}

static const struct kernel_param_ops kpatch_pc_rj_jmp_ops = {
	.get = kpatch_pc_rj_jmp_get,
};
module_param_cb(rj_jmp, &kpatch_pc_rj_jmp_ops, NULL, 0444);
MODULE_PARM_DESC(rj_jmp, "offset of rj's jmp into its piece, past its ENDBR");

static int kpatch_pc_ch_jne_get(char *buffer, const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE, "%u\n", kpatch_test_pc_ch_off);
}

static const struct kernel_param_ops kpatch_pc_ch_jne_ops = {
	.get = kpatch_pc_ch_jne_get,
};
module_param_cb(ch_jne, &kpatch_pc_ch_jne_ops, NULL, 0444);
MODULE_PARM_DESC(ch_jne, "offset of ch.part.0's jne into its .cold, from its start");

/* "key": sk's static branch, on (1) or off (0, the default) */
static int kpatch_pc_key_set(const char *val, const struct kernel_param *kp)
{
	bool on;
	int ret = kstrtobool(val, &on);

	if (ret)
		return ret;
	if (on)
		static_branch_enable(&kpatch_test_pc_key);
	else
		static_branch_disable(&kpatch_test_pc_key);
	return 0;
}

static int kpatch_pc_key_get(char *buffer, const struct kernel_param *kp)
{
	return scnprintf(buffer, PAGE_SIZE, "%d\n",
			 static_key_enabled(&kpatch_test_pc_key));
}

static const struct kernel_param_ops kpatch_pc_key_ops = {
	.set = kpatch_pc_key_set,
	.get = kpatch_pc_key_get,
};
module_param_cb(key, &kpatch_pc_key_ops, NULL, 0644);
MODULE_PARM_DESC(key, "1 turns sk's static branch into kpatch_test_pc_sk.cold on, 0 off");

noinline int kpatch_test_pc_plain_rj(int x)
{
	barrier();
	return kpatch_test_opaque(105);
}

noinline int kpatch_test_pc_plain_xj(int x)
{
	barrier();
	return kpatch_test_opaque(106);
}

noinline int kpatch_test_pc_plain_f(int x)
{
	barrier();
	return kpatch_test_opaque(100);
}

noinline int kpatch_test_pc_plain_g(int x)
{
	barrier();
	return kpatch_test_opaque(101);
}

noinline int kpatch_test_pc_plain_jmp8(int x)
{
	barrier();
	return kpatch_test_opaque(102);
}

noinline int kpatch_test_pc_plain_jcc8(int x)
{
	barrier();
	return kpatch_test_opaque(103);
}

noinline int kpatch_test_pc_plain_mid(int x)
{
	barrier();
	return kpatch_test_opaque(104);
}

static const struct {
	const char *name;
	int (*fn)(int x);
} kpatch_pc_fns[] = {
	{ "f", kpatch_test_pc_f },
	{ "g", kpatch_test_pc_g },
	{ "jmp8", kpatch_test_pc_jmp8 },
	{ "jcc8", kpatch_test_pc_jcc8 },
	{ "mid", kpatch_test_pc_mid },
	{ "rj", kpatch_test_pc_rj },
	{ "xj", kpatch_test_pc_xj },
	{ "opt", kpatch_test_pc_opt },
	{ "d", kpatch_test_pc_d },
	{ "e", kpatch_test_pc_e },
	{ "xs", kpatch_test_pc_xs },
	{ "xm", kpatch_test_pc_xm },
	{ "xb", kpatch_test_pc_xb },
	{ "xl", kpatch_test_pc_xl },
	{ "ch", kpatch_test_pc_ch },
	{ "sk", kpatch_test_pc_sk },
	{ "jcx", kpatch_test_pc_jcx },
	{ "lp", kpatch_test_pc_lp },
	{ "al", kpatch_test_pc_al },
	{ "am", kpatch_test_pc_am },
	{ "plain_f", kpatch_test_pc_plain_f },
	{ "plain_g", kpatch_test_pc_plain_g },
	{ "plain_jmp8", kpatch_test_pc_plain_jmp8 },
	{ "plain_jcc8", kpatch_test_pc_plain_jcc8 },
	{ "plain_mid", kpatch_test_pc_plain_mid },
	{ "plain_rj", kpatch_test_pc_plain_rj },
	{ "plain_xj", kpatch_test_pc_plain_xj },
};

/* 1 + the index in kpatch_pc_fns of the function to call; 0: none. */
static unsigned int kpatch_pc_call;

static int kpatch_pc_call_set(const char *val, const struct kernel_param *kp)
{
	unsigned int i;

	for (i = 0; i < ARRAY_SIZE(kpatch_pc_fns); i++) {
		if (sysfs_streq(val, kpatch_pc_fns[i].name)) {
			WRITE_ONCE(kpatch_pc_call, i + 1);
			wake_up_all(&kpatch_pc_wq);
			return 0;
		}
	}
	return -EINVAL;
}

static int kpatch_pc_call_get(char *buffer, const struct kernel_param *kp)
{
	unsigned int i = READ_ONCE(kpatch_pc_call);

	return scnprintf(buffer, PAGE_SIZE, "%s\n",
			 i ? kpatch_pc_fns[i - 1].name : "none");
}

static const struct kernel_param_ops kpatch_pc_call_ops = {
	.set = kpatch_pc_call_set,
	.get = kpatch_pc_call_get,
};
module_param_cb(call, &kpatch_pc_call_ops, NULL, 0644);
MODULE_PARM_DESC(call, "a NAME makes the thread call that function once; \"none\" once it returned");

static int kpatch_pc_thread(void *data)
{
	unsigned int i;

	while (!kthread_should_stop()) {
		wait_event_interruptible(kpatch_pc_wq,
					 READ_ONCE(kpatch_pc_call) ||
					 kthread_should_stop());
		i = READ_ONCE(kpatch_pc_call);
		if (!i)
			continue;
		WRITE_ONCE(result, kpatch_pc_fns[i - 1].fn(1));
		WRITE_ONCE(calls, calls + 1);
		WRITE_ONCE(kpatch_pc_call, 0);
	}
	return 0;
}

static int __init kpatch_test_pc_init(void)
{
	struct task_struct *t;

	t = kthread_run(kpatch_pc_thread, NULL, "kpatch_pc");
	if (IS_ERR(t))
		return PTR_ERR(t);
	kpatch_pc_task = t;
	pid = task_pid_nr(t);
	return 0;
}

static void __exit kpatch_test_pc_exit(void)
{
	kthread_stop(kpatch_pc_task);
}

module_init(kpatch_test_pc_init);
module_exit(kpatch_test_pc_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("kpatch selftest: functions with pieces (.part.N, .cold) reached by every kind of jump");
