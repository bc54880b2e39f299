#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-cold.sh - the stack check covers the .cold piece of an old
# function.  GCC moves the unlikely path of kpatch_test_cold_fn()
# (kpatch_test_cold) into kpatch_test_cold_fn.cold, which kallsyms lists
# as a function of its own; that piece calls kpatch_test_cold_wait() and
# then jumps back into kpatch_test_cold_fn().  While the kthread
# "kpatch_cold" sleeps in kpatch_test_cold_wait(), its only return
# address in the old function is in the .cold piece.  Patching the
# function must then fail with EBUSY, naming the thread: accepted, the
# thread would run the rest of the old kpatch_test_cold_fn() after the
# patch took effect (its tail counts its runs in old_tail).
#
# Functions: kpatch_test_cold_fn(1) returns 11 (1 + the wait's 10),
# kpatch_test_cold_fn_new() 100.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

COLD=kpatch_test_cold

# param NAME VALUE: write a parameter of kpatch_test_cold
param() {
	diag "% echo $2 > /sys/module/$COLD/parameters/$1"
	echo "$2" >"/sys/module/$COLD/parameters/$1"
}

# release: let the thread out of the wait and wait until its call is done
# (also the cleanup hook)
release() {
	if mod_loaded "$COLD"; then
		echo 0 >"/sys/module/$COLD/parameters/hold" 2>/dev/null || :
		wait_until modparam_is "$COLD" call N
	fi
}
KP_CLEANUP_HOOK=release

is_patched() {
	grep -q "^$1 " "$KP_PATCHES"
}

setup_modules kpatch "$COLD"
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
	diag "% echo $1 > /sys/module/kpatch/parameters/retries"
	echo "$1" >/sys/module/kpatch/parameters/retries
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
check_grep "log: patch 'c1' refused, naming kpatch_test_cold_fn.cold and pid $pid" \
	"patch 'c1' refused.*kpatch_test_cold_fn[.]cold[+]0x[0-9a-f]+/0x[0-9a-f]+ \\[$COLD\\].*pid $pid \\(kpatch_cold\\)" \
	"$(log_since_mark)"
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
