#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-retries.sh - what a refused try of a patch leaves for the next one.
# A patch of two functions, kpatch_test_value_a() and
# kpatch_test_busy_fn() (on the stack of kpatch_test_busy's thread), is
# refused by the stack check on its first try; kpatch has made an ftrace
# hook for each function, takes both down again and sleeps until the next
# try.  Meanwhile a kprobe with a post_handler (an IPMODIFY ftrace_ops,
# kpatch_test_kprobe) comes onto kpatch_test_value_a, so that the next
# try is refused by ftrace on the first function.  That try undoes what
# it made, and only that: the hook the first try made for
# kpatch_test_busy_fn is gone already.  The update fails with EBUSY and
# logs exactly its two refusals; nothing is left hooked; and once the
# kprobe is gone and the thread let go, kpatch_test_busy_fn and
# kpatch_test_value_a can be patched and run their new functions.
#
# The same with a function that another patch holds: a patch of
# kpatch_test_value_a(), kpatch_test_value_b() and kpatch_test_busy_fn(),
# while patch r_b holds kpatch_test_value_b; the kprobe is on
# kpatch_test_value_a, which comes first in the command.  The refused
# update leaves r_b as it was: listed, hooked, its function running.
#
# Functions: kpatch_test_target's kpatch_test_value_a() (1; _v1: 11) and
# kpatch_test_value_b() (2; _v1: 21), kpatch_test_busy's
# kpatch_test_busy_fn() and kpatch_test_busy_fn_new().
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

BUSY_PARAMS=/sys/module/kpatch_test_busy/parameters
PROBE=kpatch_test_kprobe
DELAY=5000

writer_pid=

setup_modules kpatch kpatch_test_target kpatch_test_new kpatch_test_busy
a=$(sym kpatch_test_value_a kpatch_test_target) || bail "setup: find kpatch_test_value_a"
a1=$(sym kpatch_test_value_a_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v1"
b=$(sym kpatch_test_value_b kpatch_test_target) || bail "setup: find kpatch_test_value_b"
b1=$(sym kpatch_test_value_b_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_b_v1"
fn=$(sym kpatch_test_busy_fn kpatch_test_busy) || bail "setup: find kpatch_test_busy_fn"
fn_new=$(sym kpatch_test_busy_fn_new kpatch_test_busy) ||
	bail "setup: find kpatch_test_busy_fn_new"
retries=$(modparam kpatch retries)
delay=$(modparam kpatch retry_delay_ms)

# kpatch_param NAME VALUE: write a kpatch parameter
kpatch_param() {
	set_param kpatch "$1" "$2"
}

# busy_param NAME VALUE: write a kpatch_test_busy parameter
busy_param() {
	set_param kpatch_test_busy "$1" "$2"
}

# thread_in_fn: the kpatch_busy thread sleeps in kpatch_test_busy_fn()
# (it is let go by "release", and sent back in by "again")
thread_in_fn() {
	busy_param release 0 && busy_param again 1 &&
		wait_until modparam_is kpatch_test_busy state 1
}

# thread_out: let the thread leave kpatch_test_busy_fn()
thread_out() {
	busy_param release 1 && wait_until modparam_is kpatch_test_busy state 2
}

# writer_start NAME CMD: write CMD to the control file in the background
# (one retry, DELAY ms later); succeeds once its first try was refused
writer_start() {
	rm -f "$KP_TMP/writer.out"
	kp_bg "$KP_TMP/writer.out" "$2"
	writer_pid=$KP_BG
	wait_until writer_waits "$1"
}

# writer_waits NAME: has the update NAME been refused once, and sleeps?
writer_waits() {
	log_since_mark | grep -qF "'$1' busy (try 1 of 2, again in $DELAY ms)"
}

# writer_finish: wait for the background writer; its result (OK or an
# errno name) is then in KP_RESULT
writer_finish() {
	wait "$writer_pid"
	writer_pid=
	KP_RESULT=$(cat "$KP_TMP/writer.out")
	diag "writer: $KP_RESULT"
}

# hooked FUNC: does ftrace list FUNC as hooked by anybody?
hooked() {
	ftrace_enabled "$1"
}

# new_runs: kpatch_test_busy_fn() is called once more; its replacement
# runs (new_calls goes up) and the old function does not
new_runs() {
	_nr_old=$(modparam kpatch_test_busy old_calls)
	_nr_new=$(modparam kpatch_test_busy new_calls)
	busy_param again 1 || return 1
	wait_until modparam_is kpatch_test_busy again N || return 1
	[ "$(modparam kpatch_test_busy old_calls)" = "$_nr_old" ] &&
		[ "$(modparam kpatch_test_busy new_calls)" = "$((_nr_new + 1))" ]
}

retries_cleanup() {
	if [ -n "$writer_pid" ]; then
		kill -KILL "$writer_pid" 2>/dev/null
		wait "$writer_pid" 2>/dev/null
	fi
	echo 1 >"$BUSY_PARAMS/release" 2>/dev/null
	kpatch_param retries "$retries"
	kpatch_param retry_delay_ms "$delay"
}
KP_CLEANUP_HOOK=retries_cleanup

pid=$(modparam kpatch_test_busy pid)
wait_until modparam_is kpatch_test_busy state 1 ||
	bail "setup: kpatch_busy thread waits in kpatch_test_busy_fn"
kpatch_param retries 1
kpatch_param retry_delay_ms "$DELAY"

start_test "a try refused by ftrace after a try refused by the stack check"
log_mark
check "precondition: patch r_ab is refused once and sleeps" \
	writer_start r_ab "patch r_ab $a $a1 $fn $fn_new"
check "insmod $PROBE func=kpatch_test_value_a (post_handler: IPMODIFY)" \
	load_mod "$PROBE" func=kpatch_test_value_a
writer_finish
check_eq "patch r_ab -> EBUSY" EBUSY "$KP_RESULT"
check_transcript "kpatch logs the two refusals, and nothing else" "$PROBE" <<EOF
% echo 'patch r_ab $a $a1 $fn $fn_new' > control &
kpatch: patch 'r_ab' busy (try 1 of 2, again in $DELAY ms): kpatch_test_busy_fn+0x0/0x0 [kpatch_test_busy] is on the stack of pid $pid (kpatch_busy)
% insmod $PROBE.ko func=kpatch_test_value_a
kpatch: patch 'r_ab' refused: ftrace cannot redirect kpatch_test_value_a+0x0/0x0 [kpatch_test_target] (-16); is a kprobe or another live patch on it?
EOF
check_no_splat
check_patches "nothing patched"
check_not "kpatch_test_busy_fn is not hooked" hooked kpatch_test_busy_fn
check "rmmod $PROBE" unload_mod "$PROBE"
check "the thread leaves kpatch_test_busy_fn" thread_out
expect_ok patch r_fn "$fn" "$fn_new"
check "kpatch_test_busy_fn_new runs" new_runs
expect_ok patch r_a "$a" "$a1"
check_eq "kpatch_test_value_a_v1 runs" "a=11 b=2" "$(target_values)"
expect_ok unpatch r_a
expect_ok unpatch r_fn
check_not "kpatch_test_busy_fn is not hooked any more" hooked kpatch_test_busy_fn
check_no_splat

start_test "the same, with a function another patch holds"
check "the thread sleeps in kpatch_test_busy_fn again" thread_in_fn
log_mark
expect_ok patch r_b "$b" "$b1"
check_eq "kpatch_test_value_b_v1 runs" "a=1 b=21" "$(target_values)"
r_b_line=$(pline r_b kpatch_test_target:kpatch_test_value_b "$b" \
	kpatch_test_new:kpatch_test_value_b_v1 "$b1" active)
check "precondition: patch r_ab2 is refused once and sleeps" \
	writer_start r_ab2 "patch r_ab2 $a $a1 $b $b1 $fn $fn_new"
check "insmod $PROBE func=kpatch_test_value_a (post_handler: IPMODIFY)" \
	load_mod "$PROBE" func=kpatch_test_value_a
writer_finish
check_eq "patch r_ab2 -> EBUSY" EBUSY "$KP_RESULT"
check_transcript "kpatch logs the two refusals, and nothing else" "$PROBE" <<EOF
% echo 'patch r_b $b $b1' > control
kpatch: patch 'r_b' enabled (1 function)
% echo 'patch r_ab2 $a $a1 $b $b1 $fn $fn_new' > control &
kpatch: patch 'r_ab2' busy (try 1 of 2, again in $DELAY ms): kpatch_test_busy_fn+0x0/0x0 [kpatch_test_busy] is on the stack of pid $pid (kpatch_busy)
% insmod $PROBE.ko func=kpatch_test_value_a
kpatch: patch 'r_ab2' refused: ftrace cannot redirect kpatch_test_value_a+0x0/0x0 [kpatch_test_target] (-16); is a kprobe or another live patch on it?
EOF
check_no_splat
check_patches "only r_b patched" "$r_b_line"
check_eq "r_b's kpatch_test_value_b_v1 still runs" "a=1 b=21" "$(target_values)"
check "kpatch_test_value_b is still hooked, by r_b" on_handler kpatch_test_value_b
check_not "kpatch_test_busy_fn is not hooked" hooked kpatch_test_busy_fn
check "rmmod $PROBE" unload_mod "$PROBE"
expect_ok unpatch r_b
check_not "kpatch_test_value_b is not hooked any more" hooked kpatch_test_value_b
expect_ok patch r_b2 "$b" "$b1"
check_eq "kpatch_test_value_b_v1 runs" "a=1 b=21" "$(target_values)"
expect_ok unpatch r_b2
check_eq "kpatch_test_value_b runs again" "a=1 b=2" "$(target_values)"
check "the thread leaves kpatch_test_busy_fn" thread_out
check_no_splat
