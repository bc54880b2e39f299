#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-kprobed.sh - kprobes on the code of a patched function, and on
# the code of a module that a patch redirects into.
#
# kpatch scans a function's code for jumps into its pieces (.part.N,
# .cold: test-pieces.sh).  A kprobe on an instruction writes an INT3
# over the instruction's first byte; on a jmp or jcc kprobes cannot
# optimize it away (a relative jump cannot run from a copy), so the INT3
# stays for as long as the kprobe is armed, and the jump still runs,
# emulated by kprobes, on every call.  With a kprobe on the jump into a
# piece, or on an instruction near it, patching the function must still
# fail with EBUSY while the kthread "kpatch_pc" sleeps in a call made
# from the piece, naming the piece and the thread (else the thread runs
# the rest of the old piece after the patch took effect: "tail" counts
# it):
#   - on the 32-bit jne of kpatch_test_pc_g() into g.part.0 (the INT3
#     on its 0f); on the short jmp (eb) of jmp8 and the short jne (75) of
#     jcc8 into their pieces;
#   - on a jmp into a piece that starts the block right after a return,
#     where a compiler may leave INT3s of its own (rj), and on one that
#     only the module's exception table leads to (xj);
#   - on the 32-bit jne of ch.part.0 into ch.part.0.cold, a piece that
#     only that piece leads to;
#   - two kprobes in one function, the second one through tracefs: an
#     optimized kprobe (a jmp out) before a jne; a probed "mov %ebx,
#     %eax" (8b c3, its second byte the opcode of ret) before a jmp; a
#     jmp after a return that only another probed jmp leads to; a probe
#     on the testl before a probed jne.  Each refusal names the piece.
#   - one kprobe on "xor %esi, %esi" (31 f6) that starts a block after a
#     return, before a jmp into a piece (f6 e9 also starts an
#     instruction, one that covers the jmp's opcode); the same after 35
#     jumps inside the function; the same where the jne leads to the
#     jmp, past the xor (the kprobe never fires); and a probed movl whose
#     bytes from the second on start a movabs that covers the jmp into
#     the piece and the jmp back to the movl.
#
# And a redirect into a module: kpatch_test_sc_near() is a jmp to
# kpatch_test_sc_near_helper(), the function right behind it, and
# kpatch_test_sc_near_rj() jumps over a return to a jmp to
# kpatch_test_sc_far_helper(); a reader redirected into either sleeps
# in kpatch_test_sc_slow(), called from the helper.  Unpatching the last
# patch that redirects into kpatch_test_sc checks the module's whole
# text, whatever the code there is and whether or not a kprobe sits on
# its jmp: the unpatch fails with EBUSY, naming the reader's innermost
# frame in the module, kpatch_test_sc_slow(), and the module cannot be
# unloaded meanwhile (else the reader wakes up in freed memory).
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

PC=kpatch_test_pc
SC=kpatch_test_sc
KPROBE=kpatch_test_kprobe
KPROBES_LIST=/sys/kernel/debug/kprobes/list

# asleep PID: the task is blocked (state S)
asleep() {
	_as=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
	[ "$_as" = S ]
}

pc_asleep() {
	modparam_is "$PC" state 1 && asleep "$pcpid"
}

is_patched() {
	grep -q "^$1 " "$KP_PATCHES"
}

# probe_on FUNC OFFSET: arm a kprobe OFFSET bytes past FUNC's ENDBR (its
# start without IBT), on the jump there, and check that kprobes lists it
probe_on() {
	check "insmod $KPROBE on $1, offset $2 past its ENDBR" \
		load_mod "$KPROBE" func="$1" offset="$2"
	check_grep "kprobes lists the probe in $1" "[[:space:]]$1[+]0x" \
		"$(cat "$KPROBES_LIST" 2>&1)"
}

# probe_at SYM AT: arm a kprobe AT bytes past SYM's start (a piece of a
# function, which has no ENDBR), on the jump there, and check that
# kprobes lists it
probe_at() {
	check "insmod $KPROBE on $1, at $2" \
		load_mod "$KPROBE" func="$1" at="$2"
	check_grep "kprobes lists the probe in $1" "[[:space:]]$1[+]0x" \
		"$(cat "$KPROBES_LIST" 2>&1)"
}

# release: let every sleeper go (also the cleanup hook)
release() {
	if mod_loaded "$PC"; then
		echo 0 >"/sys/module/$PC/parameters/hold" 2>/dev/null || :
		wait_until modparam_is "$PC" call none
	fi
	if mod_loaded "$SC"; then
		echo 0 >"/sys/module/$SC/parameters/hold" 2>/dev/null || :
	fi
	if [ -n "${reader:-}" ]; then
		wait "$reader" 2>/dev/null || :
		reader=
	fi
	if mod_loaded "$KPROBE"; then
		unload_mod "$KPROBE" || :
	fi
	echo 0 >"$TRACEFS/events/kprobes/enable" 2>/dev/null || :
	echo >"$TRACEFS/kprobe_events" 2>/dev/null || :
}
KP_CLEANUP_HOOK=release

setup_modules kpatch kpatch_test_target "$PC" "$SC"
# What the stack check finds where readers sleep is what this script
# checks: kpatch does not move them out of the way here (test-moving.sh).
set_param kpatch move N || bail "setup: kpatch's move=N"
g=$(sym kpatch_test_pc_g "$PC") || bail "setup: find kpatch_test_pc_g"
pg=$(sym kpatch_test_pc_plain_g "$PC") || bail "setup: find kpatch_test_pc_plain_g"
b=$(sym kpatch_test_value_b kpatch_test_target) || bail "setup: find kpatch_test_value_b"
near=$(sym kpatch_test_sc_near "$SC") || bail "setup: find kpatch_test_sc_near"
pcpid=$(modparam "$PC" pid)
reader=
# Every refusal here is a task asleep until released: no retries.
set_param kpatch retries 0

# piece_refused CALL KNAME OLD NEW [WHAT [PIECE]]: the thread calls
# kpatch_test_pc_CALL() and sleeps in a call made from its piece,
# kpatch_test_pc_PIECE (default: CALL.part.0); with WHAT,
# kpatch_test_kprobe fired on that instruction.  Patching OLD with NEW as
# KNAME is refused, naming the piece and the thread; had it applied, no
# old code may run after it took effect ("tail").
piece_refused() {
	_piece=kpatch_test_pc_${6:-$1.part.0}
	_tail0=$(modparam "$PC" tail)
	set_param "$PC" hold 1
	set_param "$PC" call "$1"
	check "the thread sleeps in a call made from $_piece" \
		wait_until pc_asleep
	if [ -n "${5:-}" ]; then
		check_grep "the kprobe fired on the $5" '^[1-9]' \
			"$(modparam "$KPROBE" hits)"
	fi
	diag "stack of pid $pcpid:" "$(cat "/proc/$pcpid/stack" 2>&1)"
	log_mark
	kp patch "$2" "$3" "$4" || :
	check_eq "patch $2 -> EBUSY" EBUSY "$KP_RESULT"
	check_transcript "the log names the piece and the thread" <<EOF
% echo 'patch $2 $3 $4' > control
kpatch: patch '$2' refused: $_piece+0x_/0x_ [$PC] is on the stack of pid $pcpid (kpatch_pc)
EOF
	_patched=no
	if is_patched "$2"; then
		_patched=yes
	fi
	set_param "$PC" hold 0
	check "the thread's call returned" wait_until modparam_is "$PC" call none
	if [ "$_patched" = yes ]; then
		check_eq "no old code ran after patch $2 took effect (tail)" \
			"$_tail0" "$(modparam "$PC" tail)"
		kp unpatch "$2" || :
	fi
}

start_test "a kprobe on the jump of an old function into its piece"
log_mark
# kpatch_test_pc_g: the fentry call (5 bytes), testl (2), then the jne.
probe_on kpatch_test_pc_g 7
piece_refused g k1 "$g" "$pg" jne
check "rmmod $KPROBE" unload_mod "$KPROBE"
check_no_splat

start_test "a kprobe on a short jmp into a piece"
log_mark
jmp8=$(sym kpatch_test_pc_jmp8 "$PC") || bail "setup: find kpatch_test_pc_jmp8"
# kpatch_test_pc_jmp8: the fentry call (5 bytes), testl (2), je (2), then
# the jmp (eb).
probe_on kpatch_test_pc_jmp8 9
piece_refused jmp8 k8 "$jmp8" "$pg" jmp
check_eq "the call finished in the piece (12)" 12 "$(modparam "$PC" result)"
check "rmmod $KPROBE" unload_mod "$KPROBE"
check_no_splat

start_test "a kprobe on a short jcc into a piece"
log_mark
jcc8=$(sym kpatch_test_pc_jcc8 "$PC") || bail "setup: find kpatch_test_pc_jcc8"
# kpatch_test_pc_jcc8: the fentry call (5 bytes), testl (2), then the
# jne (75).
probe_on kpatch_test_pc_jcc8 7
piece_refused jcc8 k9 "$jcc8" "$pg" jne
check_eq "the call finished in the piece (13)" 13 "$(modparam "$PC" result)"
check "rmmod $KPROBE" unload_mod "$KPROBE"
check_no_splat

start_test "a kprobe on the jump of a piece into a piece"
log_mark
ch=$(sym kpatch_test_pc_ch "$PC") || bail "setup: find kpatch_test_pc_ch"
probe_at kpatch_test_pc_ch.part.0 "$(modparam "$PC" ch_jne)"
piece_refused ch k10 "$ch" "$pg" jne ch.part.0.cold
check_eq "the call finished in the piece (24)" 24 "$(modparam "$PC" result)"
check "rmmod $KPROBE" unload_mod "$KPROBE"
check_no_splat

# near_enter: a reader of kpatch_test_target's values calls
# kpatch_test_value_b(), redirected to kpatch_test_sc_near(), which jumps
# to the helper; it sleeps in kpatch_test_sc_slow(), called from the
# helper.  Sets rpid and rcomm.
near_enter() {
	set_param "$SC" hold 1
	log_command "cat $TARGET_VALUES > $KP_TMP/values &"
	cat "$TARGET_VALUES" >"$KP_TMP/values" 2>&1 &
	reader=$!
	check "the reader sleeps in a call made from kpatch_test_sc_near_helper" \
		wait_until modparam_is "$SC" state 1
	rpid=$(modparam "$SC" pid)
	rcomm=$(modparam "$SC" comm)
	diag "stack of pid $rpid:" "$(cat "/proc/$rpid/stack" 2>&1)"
}

# near_leave NAME [B]: let the reader go; it ran the helper (B, default
# 63).  Then unpatch NAME if it is still in effect.
near_leave() {
	set_param "$SC" hold 0
	wait "$reader"
	reader=
	check_eq "the reader ran the new code (the helper's ${2:-63})" \
		"a=1 b=${2:-63}" "$(cat "$KP_TMP/values")"
	if is_patched "$1"; then
		expect_ok unpatch "$1"
	fi
}

start_test "a kprobe on the jump of a new function into a helper of its module"
log_mark
expect_ok patch k2 "$b" "$near"
near_enter
# kpatch_test_sc_near is a single jmp, right after its ENDBR.
probe_on kpatch_test_sc_near 0
log_mark
expect_refused EBUSY unpatch k2
# k2 is the last redirect into the module: its whole text is checked,
# and the log names the innermost of its frames on the reader's stack,
# the helper's callee, where the reader sleeps.
check_transcript "the log names the module's code and the reader" <<EOF
% echo 'unpatch k2' > control
kpatch: unpatch 'k2' refused: kpatch_test_sc_slow+0x_/0x_ [$SC] is on the stack of pid $rpid ($rcomm)
EOF
if is_patched k2; then
	check_not "rmmod $SC refused" unload_mod "$SC"
else
	not_ok "rmmod $SC refused"
	diag "not tried: k2 is gone, nothing would stop the rmmod" \
		"and the reader would wake up in freed memory"
fi
check "rmmod $KPROBE" unload_mod "$KPROBE"
near_leave k2
check_no_splat

start_test "without the kprobe, the same unpatch is refused"
log_mark
expect_ok patch k3 "$b" "$near"
near_enter
log_mark
expect_refused EBUSY unpatch k3
check_transcript "the log names the module's code and the reader" <<EOF
% echo 'unpatch k3' > control
kpatch: unpatch 'k3' refused: kpatch_test_sc_slow+0x_/0x_ [$SC] is on the stack of pid $rpid ($rcomm)
EOF
near_leave k3
check_no_splat

start_test "a kprobe on a jump into a piece that starts a block after a return"
log_mark
rj=$(sym kpatch_test_pc_rj "$PC") || bail "setup: find kpatch_test_pc_rj"
prj=$(sym kpatch_test_pc_plain_rj "$PC") || bail "setup: find kpatch_test_pc_plain_rj"
probe_on kpatch_test_pc_rj "$(modparam "$PC" rj_jmp)"
piece_refused rj k4 "$rj" "$prj" jmp
check_eq "the call finished in the piece (15)" 15 "$(modparam "$PC" result)"
check "rmmod $KPROBE" unload_mod "$KPROBE"
check_no_splat

start_test "a kprobe on a jump into a piece where only an exception fixup leads"
log_mark
xj=$(sym kpatch_test_pc_xj "$PC") || bail "setup: find kpatch_test_pc_xj"
pxj=$(sym kpatch_test_pc_plain_xj "$PC") || bail "setup: find kpatch_test_pc_plain_xj"
probe_on kpatch_test_pc_xj "$(modparam "$PC" xj_jmp)"
piece_refused xj k7 "$xj" "$pxj" jmp
check_eq "the call finished in the piece (16)" 16 "$(modparam "$PC" result)"
check "rmmod $KPROBE" unload_mod "$KPROBE"
check_no_splat

start_test "a kprobe on a jump into a helper that starts a block after a return"
log_mark
near_rj=$(sym kpatch_test_sc_near_rj "$SC") || bail "setup: find kpatch_test_sc_near_rj"
expect_ok patch k5 "$b" "$near_rj"
near_enter
probe_on kpatch_test_sc_near_rj "$(modparam "$SC" rj_jmp)"
log_mark
expect_refused EBUSY unpatch k5
# As for k2: the module's whole text is checked.
check_transcript "the log names the module's code and the reader" <<EOF
% echo 'unpatch k5' > control
kpatch: unpatch 'k5' refused: kpatch_test_sc_slow+0x_/0x_ [$SC] is on the stack of pid $rpid ($rcomm)
EOF
if is_patched k5; then
	check_not "rmmod $SC refused" unload_mod "$SC"
else
	not_ok "rmmod $SC refused"
	diag "not tried: k5 is gone, nothing would stop the rmmod" \
		"and the reader would wake up in freed memory"
fi
check "rmmod $KPROBE" unload_mod "$KPROBE"
near_leave k5 64
check_no_splat

start_test "without the kprobe, the same unpatch is refused"
log_mark
expect_ok patch k6 "$b" "$near_rj"
near_enter
log_mark
expect_refused EBUSY unpatch k6
check_transcript "the log names the module's code and the reader" <<EOF
% echo 'unpatch k6' > control
kpatch: unpatch 'k6' refused: kpatch_test_sc_slow+0x_/0x_ [$SC] is on the stack of pid $rpid ($rcomm)
EOF
near_leave k6 64
check_no_splat

# two_probes NAME OFF1 OFF2: kpatch_test_pc_NAME() with kpatch_test_kprobe
# at OFF1 past its ENDBR and a tracefs kprobe at OFF2; the thread sleeps
# in NAME.part.0; patching NAME must fail, naming the piece
two_probes() {
	_fn=kpatch_test_pc_$1
	_a=$(sym "$_fn" "$PC") || bail "setup: find $_fn"
	probe_on "$_fn" "$2"
	_l=$(grep "[[:space:]]$_fn+0x" "$KPROBES_LIST")
	_hex=${_l##*"$_fn"+0x}
	_hex=${_hex%% *}
	# kprobes lists the address itself: the ENDBR is the difference
	_off=$((0x$_hex - $2 + $3))
	log_command "echo 'p:kprobes/kpk$1 $_fn+$_off' >> kprobe_events"
	check "a second kprobe on $_fn+$_off, through tracefs" \
		sh -c "echo 'p:kprobes/kpk$1 $_fn+$_off' >>$TRACEFS/kprobe_events &&
			echo 1 >$TRACEFS/events/kprobes/kpk$1/enable"
	# an optimized kprobe is made so after a few jiffies
	sleep 1
	if [ "$1" = opt ]; then
		check "kprobes optimized the probe on the movl (a jmp out)" \
			wait_until grep -q \
			"[[:space:]]$_fn+0x$(printf %x "$_off")[[:space:]].*OPTIMIZED" \
			"$KPROBES_LIST"
	fi
	diag "kprobes:" "$(grep "$_fn" "$KPROBES_LIST")"
	piece_refused "$1" "k$1" "$_a" "$pg"
	check_eq "the call finished in the piece ($4)" "$4" "$(modparam "$PC" result)"
	echo 0 >"$TRACEFS/events/kprobes/kpk$1/enable"
	echo "-:kprobes/kpk$1" >>"$TRACEFS/kprobe_events"
	check "rmmod $KPROBE" unload_mod "$KPROBE"
	check_no_splat
}

# shellcheck disable=SC2046 # four numbers
set -- $(modparam "$PC" two_off)
opt_off=$1 d_off=$2 e1_off=$3 e3_off=$4

start_test "an optimized kprobe before a kprobed jne into a piece"
log_mark
two_probes opt $((opt_off + 5)) "$opt_off" 17

start_test "a kprobed 8b c3 before a kprobed jmp into a piece, after a return"
log_mark
two_probes d "$d_off" $((d_off + 2)) 18

start_test "a kprobed jmp into a piece that only another kprobed jmp leads to"
log_mark
two_probes e "$e3_off" "$e1_off" 19

start_test "a kprobe on the testl before a kprobed jne into a piece"
log_mark
two_probes g 5 7 11

start_test "a kprobe on the xor before a jmp into a piece, after a return"
log_mark
xs=$(sym kpatch_test_pc_xs "$PC") || bail "setup: find kpatch_test_pc_xs"
# shellcheck disable=SC2046 # four numbers
set -- $(modparam "$PC" xs_off)
xs_off=$1 xm_off=$2 xb_off=$3 xl_off=$4
probe_on kpatch_test_pc_xs "$xs_off"
piece_refused xs kxs "$xs" "$pg" xor
check_eq "the call finished in the piece (20)" 20 "$(modparam "$PC" result)"
check "rmmod $KPROBE" unload_mod "$KPROBE"
check_no_splat

start_test "the same after more jumps than kpatch tracks one by one"
log_mark
xm=$(sym kpatch_test_pc_xm "$PC") || bail "setup: find kpatch_test_pc_xm"
probe_on kpatch_test_pc_xm "$xm_off"
piece_refused xm kxm "$xm" "$pg" xor
check_eq "the call finished in the piece (21)" 21 "$(modparam "$PC" result)"
check "rmmod $KPROBE" unload_mod "$KPROBE"
check_no_splat

start_test "a kprobed movl after a return, reached only by a jmp back from behind it"
log_mark
xb=$(sym kpatch_test_pc_xb "$PC") || bail "setup: find kpatch_test_pc_xb"
probe_on kpatch_test_pc_xb "$xb_off"
piece_refused xb kxb "$xb" "$pg" movl
check_eq "the call finished in the piece (22)" 22 "$(modparam "$PC" result)"
check "rmmod $KPROBE" unload_mod "$KPROBE"
check_no_splat

# The kprobe never fires: only its INT3 matters.
start_test "a kprobe right before the jmp a jne lands on, after a return"
log_mark
xl=$(sym kpatch_test_pc_xl "$PC") || bail "setup: find kpatch_test_pc_xl"
probe_on kpatch_test_pc_xl "$xl_off"
piece_refused xl kxl "$xl" "$pg"
check_eq "the call finished in the piece (23)" 23 "$(modparam "$PC" result)"
check "rmmod $KPROBE" unload_mod "$KPROBE"
check_no_splat
