#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-pieces.sh - the stack check covers every piece of a function it
# covers: the .cold and .part.N code that a compiler splits off a
# function, which kallsyms lists as functions of their own, reached by
# jumps.  A task asleep in a call made from a piece has no return
# address in the function, yet runs the function's code when it wakes.
#
# kpatch_test_cold: GCC moves the unlikely path of kpatch_test_cold_fn()
# into kpatch_test_cold_fn.cold; that piece calls kpatch_test_cold_wait()
# and then jumps back into kpatch_test_cold_fn().  While the kthread
# "kpatch_cold" sleeps in kpatch_test_cold_wait(), its only return
# address in the old function is in the .cold piece.  Patching the
# function must then fail with EBUSY, naming the thread: accepted, the
# thread would run the rest of the old kpatch_test_cold_fn() after the
# patch took effect (its tail counts its runs in old_tail).
# Functions: kpatch_test_cold_fn(1) returns 11 (1 + the wait's 10),
# kpatch_test_cold_fn_new() 100.
#
# kpatch_test_pc: functions with pieces in the shapes compilers make,
# written in asm (see kpatch_test_pc.c), each with a twin in C:
#   - g and f, where f is a caller with g's head inlined: both jump into
#     g.part.0, which kallsyms names as g's piece only.  Patched together,
#     in either order, with a task asleep in a call made from g.part.0;
#   - jmp8: its piece reached only by a short jmp (eb);
#   - jcc8: its piece reached only by a short jne (75);
#   - mid: it enters mid.cold at a block inside it, not at its start.
# The kthread "kpatch_pc" calls a function and sleeps in a call made from
# its piece.  Old side: patching the function (to its twin) must fail
# with EBUSY naming the piece and the thread, and change nothing;
# accepted, the thread would run the rest of the piece, old code, after
# the patch took effect ("tail" counts those runs).  New side: the twin
# patched to the function with the piece, the thread's call redirected
# into it: unpatching must fail likewise; accepted, the thread would run
# new code after the unpatch.  With the thread waking every jiffy and
# running, runnable or asleep in turn inside the piece's call, every
# patch and unpatch must fail the same.  Once the thread is out, each
# applies.
#
# Then the other ways a jump leads into a piece, old side: a piece that
# only another piece leads to (ch -> ch.part.0 -> ch.part.0.cold); a
# static branch into sk.cold, turned off again while the thread sleeps
# there, so that only the module's jump table still leads there; a jrcxz
# and a loop (8-bit jumps of their own opcodes, e3 and e2).  An indirect
# jump into a piece is not followed (Documentation.txt, "Limitations"):
# a jump table, which the kernel's builds with retpolines or IBT do not
# make.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

COLD=kpatch_test_cold

# param NAME VALUE: write a parameter of kpatch_test_cold
param() {
	set_param "$COLD" "$1" "$2"
}

PC=kpatch_test_pc

# release: let the threads out of their waits and wait until their calls
# are done (also the cleanup hook)
release() {
	if mod_loaded "$COLD"; then
		echo 0 >"/sys/module/$COLD/parameters/hold" 2>/dev/null || :
		wait_until modparam_is "$COLD" call N
	fi
	if mod_loaded "$PC"; then
		echo 0 >"/sys/module/$PC/parameters/hold" 2>/dev/null || :
		wait_until modparam_is "$PC" call none
		echo 0 >"/sys/module/$PC/parameters/key" 2>/dev/null || :
	fi
}
KP_CLEANUP_HOOK=release

is_patched() {
	grep -q "^$1 " "$KP_PATCHES"
}

# refused_often DESC VERB NAME [WORDS...]: "VERB NAME WORDS..." answers
# EBUSY while the thread, woken every jiffy, is running, runnable or
# asleep inside the piece's call (one try: retries=0); a patch accepted
# after all is taken out again
refused_often() {
	_ro_desc=$1
	shift
	kp "$@" || :
	check_eq "$_ro_desc: $1 $2 -> EBUSY" EBUSY "$KP_RESULT"
	[ "$1" = unpatch ] || [ "$KP_RESULT" != OK ] || kp unpatch "$2" || :
}

setup_modules kpatch "$COLD" "$PC"
fn=$(sym kpatch_test_cold_fn "$COLD") || bail "setup: find kpatch_test_cold_fn"
fn_new=$(sym kpatch_test_cold_fn_new "$COLD") || bail "setup: find kpatch_test_cold_fn_new"
pid=$(modparam "$COLD" pid)
retries=$(modparam kpatch retries)

start_test "the old function has a .cold piece"
check "kallsyms lists kpatch_test_cold_fn.cold" \
	sym kpatch_test_cold_fn.cold "$COLD"
diag "functions with a .cold piece in this kernel and its modules:" \
	"$(grep -c '[.]cold$' "$(kallsyms)")"
param call 1
check "the thread called kpatch_test_cold_fn" wait_until modparam_is "$COLD" call N
check_eq "kpatch_test_cold_fn(1) returned 11" 11 "$(modparam "$COLD" result)"
check_eq "its tail ran once" 1 "$(modparam "$COLD" old_tail)"
check_no_splat

start_test "a task in a call made from the .cold piece"
log_mark
param hold 1
param call 1
check "the thread sleeps in kpatch_test_cold_wait" \
	wait_until modparam_is "$COLD" state 1
diag "stack of pid $pid:" "$(cat "/proc/$pid/stack" 2>&1)"
param_retries() {
	set_param kpatch retries "$1"
}
# The thread sleeps until released: every try would fail the same.
param_retries 0
kp patch c1 "$fn" "$fn_new"
if [ "$KP_RESULT" = EBUSY ]; then
	ok "patch c1 -> EBUSY"
else
	not_ok "patch c1 -> EBUSY"
	diag "expected EBUSY, got $KP_RESULT"
fi
param_retries "$retries"
check_transcript "log: patch 'c1' refused, naming kpatch_test_cold_fn.cold and pid $pid" <<EOF
% echo 1 > /sys/module/$COLD/parameters/hold
% echo 1 > /sys/module/$COLD/parameters/call
% echo 0 > /sys/module/kpatch/parameters/retries
% echo 'patch c1 $fn $fn_new' > control
kpatch: patch 'c1' refused: kpatch_test_cold_fn.cold+0x_/0x_ [$COLD] is on the stack of pid $pid (kpatch_cold)
% echo $retries > /sys/module/kpatch/parameters/retries
EOF
patched=no
if is_patched c1; then
	patched=yes
fi
tail_before=$(modparam "$COLD" old_tail)
param hold 0
check "the thread left kpatch_test_cold_wait" \
	wait_until modparam_is "$COLD" call N
# With c1 in effect no part of the old function may run any more.
if [ "$patched" = yes ]; then
	check_eq "no old code ran after patch c1 took effect (old_tail)" \
		"$tail_before" "$(modparam "$COLD" old_tail)"
	kp unpatch c1 || :
fi
check_eq "the call finished in the old function (11)" 11 \
	"$(modparam "$COLD" result)"
check_no_splat

start_test "the patch is refused every time, the thread waking often"
param_retries 0
param spin 1
param hold 1
param call 1
check "the thread is in kpatch_test_cold_wait" \
	wait_until modparam_is "$COLD" state 1
for round in 1 2 3 4 5; do
	refused_often "cold, round $round" patch c2 "$fn" "$fn_new"
done
param hold 0
check "the thread left kpatch_test_cold_wait" \
	wait_until modparam_is "$COLD" call N
param spin 0
param_retries "$retries"
check_patches "nothing patched"
check_no_splat

start_test "once the thread is out, the patch applies"
log_mark
expect_ok patch c1 "$fn" "$fn_new"
tail_before=$(modparam "$COLD" old_tail)
param call 1
check "the thread called kpatch_test_cold_fn" wait_until modparam_is "$COLD" call N
check_eq "the new function ran (100)" 100 "$(modparam "$COLD" result)"
check_eq "the old tail did not run" "$tail_before" \
	"$(modparam "$COLD" old_tail)"
expect_ok unpatch c1
check "rmmod $COLD succeeds" unload_mod "$COLD"
check_no_splat

# ---- kpatch_test_pc ----

# pc_param NAME VALUE: write a parameter of kpatch_test_pc
pc_param() {
	set_param "$PC" "$1" "$2"
}

pc() {
	modparam "$PC" "$1"
}

# pcsym NAME: the address of kpatch_test_pc_NAME
pcsym() {
	sym "kpatch_test_pc_$1" "$PC" || bail "setup: find kpatch_test_pc_$1"
}

# asleep PID: the task is blocked (state S)
asleep() {
	_as=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
	[ "$_as" = S ]
}

pc_asleep() {
	modparam_is "$PC" state 1 && asleep "$pcpid"
}

# pc_call NAME: the thread calls kpatch_test_pc_NAME(1) and returns
pc_call() {
	pc_param call "$1"
	check "the thread's call of kpatch_test_pc_$1 returned" \
		wait_until modparam_is "$PC" call none
}

# pc_enter NAME: the thread calls kpatch_test_pc_NAME(1) and sleeps in
# kpatch_test_pc_wait(), called from a piece; tail0: the pieces' runs
# before
pc_enter() {
	tail0=$(pc tail)
	pc_param hold 1
	pc_param call "$1"
	check "the thread sleeps in a call made from a piece" wait_until pc_asleep
	diag "stack of pid $pcpid:" "$(cat "/proc/$pcpid/stack" 2>&1)"
}

# pc_leave RESULT: let the thread out; its call returns RESULT
pc_leave() {
	pc_param hold 0
	check "the thread's call returned" wait_until modparam_is "$PC" call none
	check_eq "the call finished in the piece ($1)" "$1" "$(pc result)"
}

# refused VERB NAME PIECE [WORDS...]: with the thread asleep in a call
# made from kpatch_test_pc_PIECE, "VERB NAME WORDS..." answers EBUSY
# (one try: retries=0), changes nothing, and the log names the piece and
# the thread
refused() {
	_rf_verb=$1
	_rf_name=$2
	_rf_where=kpatch_test_pc_$3
	shift 3
	log_mark
	save_state
	kp "$_rf_verb" "$_rf_name" "$@" || :
	check_eq "$_rf_verb $_rf_name -> EBUSY" EBUSY "$KP_RESULT"
	check_state_unchanged
	check_transcript "the log names $_rf_where and the thread" <<EOF
% echo '$_rf_verb $_rf_name${*:+ $*}' > control
kpatch: $_rf_verb '$_rf_name' refused: $_rf_where+0x_/0x_ [$PC] is on the stack of pid $pcpid (kpatch_pc)
EOF
}

# old_side_done NAME...: the thread has left the piece; a patch NAME
# accepted while it slept there had it run old code after the patch took
# effect.  Take such a patch out again.
old_side_done() {
	for _od in "$@"; do
		is_patched "$_od" || continue
		check_eq "no old code ran after patch $_od took effect (tail)" \
			"$tail0" "$(pc tail)"
		kp unpatch "$_od" || :
	done
}

# new_side_done NAME: the thread has left the piece; had patch NAME been
# removed while it slept there, it ran new code after the unpatch took
# effect.  Else unpatch NAME now.
new_side_done() {
	if is_patched "$1"; then
		expect_ok unpatch "$1"
	else
		check_eq "no new code ran after unpatch $1 took effect (tail)" \
			"$tail0" "$(pc tail)"
	fi
}

pcpid=$(pc pid)
f=$(pcsym f)
g=$(pcsym g)
jmp8=$(pcsym jmp8)
jcc8=$(pcsym jcc8)
mid=$(pcsym mid)
pf=$(pcsym plain_f)
pg=$(pcsym plain_g)
pjmp8=$(pcsym plain_jmp8)
pjcc8=$(pcsym plain_jcc8)
pmid=$(pcsym plain_mid)
# The thread sleeps until released: every try would fail the same.
param_retries 0

start_test "kallsyms lists the pieces by the compiler's names"
log_mark
check_eq "precondition: the thread is kpatch_pc" kpatch_pc \
	"$(cat "/proc/$pcpid/comm" 2>&1)"
for p in g.part.0 jmp8.part.0 jcc8.part.0 mid.cold; do
	check_eq "kallsyms lists kpatch_test_pc_$p, a local function" t \
		"$(sym_type "kpatch_test_pc_$p" "$PC")"
done
tail0=$(pc tail)
for fn in f:11 g:11 jmp8:12 jcc8:13 mid:14 plain_f:100 plain_g:101 \
	plain_jmp8:102 plain_jcc8:103 plain_mid:104; do
	pc_call "${fn%:*}"
	check_eq "kpatch_test_pc_${fn%:*}(1) returns ${fn#*:}" "${fn#*:}" \
		"$(pc result)"
done
check_eq "each piece ran once" "$((tail0 + 5))" "$(pc tail)"
check_no_splat

start_test "f and g patched together, in either order"
log_mark
pc_enter f
refused patch p1 g.part.0 "$f" "$pf" "$g" "$pg"
refused patch p2 g.part.0 "$g" "$pg" "$f" "$pf"
pc_leave 11
old_side_done p1 p2
check_no_splat

start_test "a piece reached by a short jmp"
log_mark
pc_enter jmp8
refused patch p3 jmp8.part.0 "$jmp8" "$pjmp8"
pc_leave 12
old_side_done p3
check_no_splat

start_test "a piece reached by a short jcc"
log_mark
pc_enter jcc8
refused patch p4 jcc8.part.0 "$jcc8" "$pjcc8"
pc_leave 13
old_side_done p4
check_no_splat

start_test "a piece entered at a block inside it"
log_mark
pc_enter mid
refused patch p5 mid.cold "$mid" "$pmid"
pc_leave 14
old_side_done p5
check_no_splat

start_test "once the thread is out, the functions with pieces are patched"
log_mark
check_patches "nothing patched"
expect_ok patch p6 "$f" "$pf" "$g" "$pg" "$jmp8" "$pjmp8" "$jcc8" "$pjcc8" \
	"$mid" "$pmid"
tail0=$(pc tail)
for fn in f:100 g:101 jmp8:102 jcc8:103 mid:104; do
	pc_call "${fn%:*}"
	check_eq "kpatch_test_pc_${fn%:*}(1) runs its twin (${fn#*:})" \
		"${fn#*:}" "$(pc result)"
done
check_eq "no piece ran" "$tail0" "$(pc tail)"
expect_ok unpatch p6
check_no_splat

start_test "new side: f and g patched together, f listed first"
log_mark
expect_ok patch q1 "$pf" "$f" "$pg" "$g"
pc_enter plain_f
refused unpatch q1 g.part.0
pc_leave 11
new_side_done q1
check_no_splat

start_test "new side: f and g patched together, g listed first"
log_mark
expect_ok patch q2 "$pg" "$g" "$pf" "$f"
pc_enter plain_f
refused unpatch q2 g.part.0
pc_leave 11
new_side_done q2
check_no_splat

start_test "new side: a piece reached by a short jmp"
log_mark
expect_ok patch q3 "$pjmp8" "$jmp8"
pc_enter plain_jmp8
refused unpatch q3 jmp8.part.0
pc_leave 12
new_side_done q3
check_no_splat

start_test "new side: a piece reached by a short jcc"
log_mark
expect_ok patch q4 "$pjcc8" "$jcc8"
pc_enter plain_jcc8
refused unpatch q4 jcc8.part.0
pc_leave 13
new_side_done q4
check_no_splat

start_test "new side: a piece entered at a block inside it"
log_mark
expect_ok patch q5 "$pmid" "$mid"
pc_enter plain_mid
refused unpatch q5 mid.cold
pc_leave 14
new_side_done q5
check_no_splat

# ---- the patch and unpatch, while the thread wakes often ----

# spin_enter NAME: as pc_enter, with the thread waking often
spin_enter() {
	pc_param spin 1
	pc_param hold 1
	pc_param call "$1"
	check "the thread is in a call made from a piece" \
		wait_until modparam_is "$PC" state 1
}

spin_leave() {
	pc_param hold 0
	check "the thread's call returned" wait_until modparam_is "$PC" call none
	pc_param spin 0
}

start_test "every patch and unpatch is refused, the thread waking often"
for round in 1 2 3; do
	spin_enter f
	refused_often "f and g, round $round" patch p1 "$f" "$pf" "$g" "$pg"
	spin_leave
	spin_enter jmp8
	refused_often "jmp8, round $round" patch p3 "$jmp8" "$pjmp8"
	spin_leave
	spin_enter jcc8
	refused_often "jcc8, round $round" patch p4 "$jcc8" "$pjcc8"
	spin_leave
	spin_enter mid
	refused_often "mid, round $round" patch p5 "$mid" "$pmid"
	spin_leave
	for q in "q1 plain_f $pf $f $pg $g" "q3 plain_jmp8 $pjmp8 $jmp8" \
		"q4 plain_jcc8 $pjcc8 $jcc8" "q5 plain_mid $pmid $mid"; do
		# shellcheck disable=SC2086 # the words of the patch
		set -- $q
		_q=$1 _call=$2
		shift 2
		expect_ok patch "$_q" "$@"
		spin_enter "$_call"
		refused_often "new side $_call, round $round" unpatch "$_q"
		spin_leave
		is_patched "$_q" && expect_ok unpatch "$_q"
	done
done
check_patches "nothing patched"
check_no_splat

# ---- the other ways into a piece, old side ----

ch=$(pcsym ch)
sk=$(pcsym sk)
jcx=$(pcsym jcx)
lp=$(pcsym lp)

start_test "the other shapes: their pieces, and what they return"
log_mark
for p in ch.part.0 ch.part.0.cold sk.cold jcx.part.0 lp.part.0; do
	check_eq "kallsyms lists kpatch_test_pc_$p, a local function" t \
		"$(sym_type "kpatch_test_pc_$p" "$PC")"
done
check_eq "precondition: sk's static branch is off" 0 "$(pc key)"
pc_call sk
check_eq "kpatch_test_pc_sk(1) returns 0 with the branch off" 0 "$(pc result)"
pc_param key 1
tail0=$(pc tail)
for fn in ch:24 sk:25 jcx:26 lp:27 al:28 am:28; do
	pc_call "${fn%:*}"
	check_eq "kpatch_test_pc_${fn%:*}(1) returns ${fn#*:}" "${fn#*:}" \
		"$(pc result)"
done
pc_param key 0
check_eq "each piece ran once" "$((tail0 + 6))" "$(pc tail)"
check_no_splat

start_test "a piece that only another piece leads to"
log_mark
pc_enter ch
refused patch p7 ch.part.0.cold "$ch" "$pg"
pc_leave 24
old_side_done p7
check_no_splat

start_test "a piece a static branch leads to, on and then off"
log_mark
pc_param key 1
pc_enter sk
refused patch p8 sk.cold "$sk" "$pg"
# Off, the branch is a NOP: only the module's jump table leads there.
pc_param key 0
check_eq "the static branch is off" 0 "$(pc key)"
refused patch p9 sk.cold "$sk" "$pg"
pc_leave 25
old_side_done p8 p9
check_no_splat

start_test "a piece reached by a jrcxz"
log_mark
pc_enter jcx
refused patch p10 jcx.part.0 "$jcx" "$pg"
pc_leave 26
old_side_done p10
check_no_splat

start_test "a piece reached by a loop"
log_mark
pc_enter lp
refused patch p11 lp.part.0 "$lp" "$pg"
pc_leave 27
old_side_done p11
check_no_splat

al=$(pcsym al)
am=$(pcsym am)

start_test "a piece with two names, kallsyms giving the other"
log_mark
for p in al.part.0 am.part.0; do
	check_eq "kallsyms lists kpatch_test_pc_$p, a local function" t \
		"$(sym_type "kpatch_test_pc_$p" "$PC")"
done
check_eq "both at one address" "$(pcsym al.part.0)" "$(pcsym am.part.0)"
pc_enter am
refused patch p12 al.part.0 "$am" "$pg"
pc_leave 28
old_side_done p12
pc_enter al
refused patch p13 al.part.0 "$al" "$pg"
pc_leave 28
old_side_done p13
check_no_splat

start_test "a piece of another function, reached from an inlined head"
log_mark
# f has g's head inlined and jumps into g.part.0, at its start
pc_enter f
refused patch p14 g.part.0 "$f" "$pf"
pc_leave 11
old_side_done p14
check_no_splat

start_test "once the thread is out, each of them is patched"
log_mark
check_patches "nothing patched"
for fn in ch sk jcx lp al am; do
	expect_ok patch "p_$fn" "$(pcsym "$fn")" "$pg"
	pc_call "$fn"
	check_eq "kpatch_test_pc_$fn(1) runs kpatch_test_pc_plain_g (101)" 101 \
		"$(pc result)"
	expect_ok unpatch "p_$fn"
done
check_no_splat

start_test "the functions run their own code again"
log_mark
check_patches "nothing patched"
pc_call plain_f
check_eq "kpatch_test_pc_plain_f(1) returns 100" 100 "$(pc result)"
pc_call f
check_eq "kpatch_test_pc_f(1) returns 11" 11 "$(pc result)"
check "rmmod $PC succeeds" unload_mod "$PC"
check_no_splat
