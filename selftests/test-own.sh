#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-own.sh - the update that removes the last patch redirecting
# calls into a module checks the module's whole text: a module's own
# kernel threads do not hold it up, its work items do.
#
# kpatch_test_own holds new functions for kpatch_test_target's
# kpatch_test_value_a() (1) and kpatch_test_value_b() (2), and runs code
# of its own that no redirect sends anybody into: the kernel thread
# "kpatch_own" (its thread function is in the module) and a work item on
# system_wq, run by a kworker.  Each sleeps in a function of the module
# while a parameter holds it (see kpatch_test_own.c).
#
# Once no patch redirects into the module, nothing of kpatch keeps it
# loaded.  So the update that removes the last redirect into it refuses
# while any task has a return address anywhere in the module, except
# the module's own kernel threads (a thread whose thread function is in
# the module, which the module's exit stops before it can be freed):
#   - kpatch_test_own_value_a() (51) reaches no other code of the module,
#     yet with the work item asleep in the module, unpatch, and a
#     replace that removes the patch, are refused, naming the kworker;
#     with the thread alone asleep there, both apply, and the thread goes
#     on running afterwards;
#   - kpatch_test_own_tail() jumps to kpatch_test_own_helper() (53): a
#     task that a redirected call left asleep in the helper refuses the
#     unpatch, and once it left, the unpatch applies (the thread still
#     asleep in the module);
#   - kpatch_test_own_indirect() leaves by "jmp *%rax" (to a function
#     returning 54): the same as for any other new function: the thread
#     does not refuse the unpatch, the work item does;
#   - the whole module is checked only when the last redirect into it
#     goes: with two patches redirecting into it and a reader asleep in
#     the helper, the first unpatch applies, the second is refused.
# At the end the module unloads while its thread and work item sleep in
# its code: its exit stops the one and lets the other go.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

OWN=kpatch_test_own

# own NAME: a parameter of kpatch_test_own
own() {
	modparam "$OWN" "$1"
}

# asleep PID: the task is blocked (state S)
asleep() {
	_as=$(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
	[ "$_as" = S ]
}

# sleeping_in WHO: the thread, the work item or the helper's task
# (thread, work, helper) has come to its wait and is asleep there
sleeping_in() {
	case $1 in
	thread) _si_pid=$(own pid) ;;
	*) _si_pid=$(own "$1_pid") ;;
	esac
	modparam_is "$OWN" "$1_state" 1 && asleep "$_si_pid"
}

# above PARAM N: kpatch_test_own's PARAM is more than N
above() {
	[ "$(own "$1")" -gt "$2" ]
}

hold_thread() {
	set_param "$OWN" hold_thread 1
	check "the thread sleeps in kpatch_test_own_thread_wait" \
		wait_until sleeping_in thread
}

# hold_work: the work item sleeps in kpatch_test_own_work; sets wpid
# and wcomm, the kworker that runs it
hold_work() {
	set_param "$OWN" hold_work 1
	set_param "$OWN" queue_work 1
	check "the work item sleeps in kpatch_test_own_work" \
		wait_until sleeping_in work
	wpid=$(own work_pid)
	wcomm=$(own work_comm)
	diag "the work item runs in pid $wpid ($wcomm)"
}

release_thread() {
	_rt_runs=$(own thread_runs)
	set_param "$OWN" hold_thread 0
	check "the thread runs on" wait_until above thread_runs "$_rt_runs"
}

# run_work: queue the work item (not held) and wait for its run
run_work() {
	_rn_runs=$(own work_runs)
	set_param "$OWN" queue_work 1
	check "the work item runs" wait_until above work_runs "$_rn_runs"
}

release_work() {
	_rw_runs=$(own work_runs)
	set_param "$OWN" hold_work 0
	check "the work item finishes" wait_until above work_runs "$_rw_runs"
	run_work
}

is_patched() {
	grep -q "^$1 " "$KP_PATCHES"
}

# reader_in_helper: a reader of kpatch_test_target's values calls
# kpatch_test_value_b(), redirected to kpatch_test_own_tail(), which
# jumps to the helper, where it sleeps; sets reader, hpid and hcomm
reader_in_helper() {
	set_param "$OWN" hold_helper 1
	log_command "cat $TARGET_VALUES > $KP_TMP/values &"
	cat "$TARGET_VALUES" >"$KP_TMP/values" 2>&1 &
	reader=$!
	check "the reader sleeps in kpatch_test_own_helper" \
		wait_until sleeping_in helper
	hpid=$(own helper_pid)
	hcomm=$(own helper_comm)
	diag "the reader is pid $hpid ($hcomm)"
}

# reader_out VALUES: let the reader go; it read VALUES
reader_out() {
	set_param "$OWN" hold_helper 0
	wait "$reader"
	reader=
	check_eq "the reader ran the new code ($1)" "$1" "$(cat "$KP_TMP/values")"
}

# gone NAME: patch NAME must be out before the next case.  Everything is
# released by now; should kpatch still refuse (a module's own thread
# holding up its last redirect), stop the thread for the unpatch and
# start a new one.
gone() {
	is_patched "$1" || return 0
	diag "patch $1 is still enabled; unpatching it"
	kp unpatch "$1" && return 0
	diag "stopping the module's thread to take $1 out"
	set_param "$OWN" thread 0
	kp unpatch "$1" || :
	set_param "$OWN" thread 1
	pid=$(own pid)
}

# cleanup hook: release every sleeper, and stop the thread, so that
# every patch can go and the module can be unloaded
release_all() {
	if mod_loaded "$OWN"; then
		for _ra in hold_thread hold_work hold_helper; do
			echo 0 >"/sys/module/$OWN/parameters/$_ra" 2>/dev/null || :
		done
		echo 0 >"/sys/module/$OWN/parameters/thread" 2>/dev/null || :
	fi
	if [ -n "${reader:-}" ]; then
		wait "$reader" 2>/dev/null || :
		reader=
	fi
}
KP_CLEANUP_HOOK=release_all

setup_modules kpatch kpatch_test_target kpatch_test_new "$OWN"
# What the stack check finds where readers sleep is what this script
# checks: kpatch does not move them out of the way here (test-moving.sh).
set_param kpatch move N || bail "setup: kpatch's move=N"
a=$(sym kpatch_test_value_a kpatch_test_target) || bail "setup: find kpatch_test_value_a"
b=$(sym kpatch_test_value_b kpatch_test_target) || bail "setup: find kpatch_test_value_b"
b1=$(sym kpatch_test_value_b_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_b_v1"
own_a=$(sym kpatch_test_own_value_a "$OWN") || bail "setup: find kpatch_test_own_value_a"
own_tail=$(sym kpatch_test_own_tail "$OWN") || bail "setup: find kpatch_test_own_tail"
own_ind=$(sym kpatch_test_own_indirect "$OWN") || bail "setup: find kpatch_test_own_indirect"
pid=$(own pid)
reader=
# Every refusal here is a task asleep until released: no retries.
set_param kpatch retries 0

start_test "the module's thread and work item run"
log_mark
check_eq "precondition: the thread is kpatch_own" kpatch_own \
	"$(cat "/proc/$pid/comm" 2>&1)"
check "the thread counts its rounds" wait_until above thread_runs 0
run_work
check_no_splat

start_test "the module's own thread and work item asleep in its code"
log_mark
expect_ok patch o1 "$a" "$own_a"
check_eq "o1 in effect: a returns 51" "a=51 b=2" "$(target_values)"
hold_thread
hold_work
log_mark
expect_refused EBUSY unpatch o1
check_transcript "the log names the work function and the kworker, not the thread" <<EOF
% echo 'unpatch o1' > control
kpatch: unpatch 'o1' refused: kpatch_test_own_work+0x_/0x_ [$OWN] is on the stack of pid $wpid ($wcomm)
EOF
check_eq "o1 still in effect" "a=51 b=2" "$(target_values)"
release_work
log_mark
expect_ok unpatch o1
check_transcript "once the work item is out, o1 goes, the thread still asleep in the module" <<EOF
% echo 'unpatch o1' > control
kpatch: patch 'o1' removed
EOF
check_eq "a returns 1 again" "a=1 b=2" "$(target_values)"
check_eq "the thread still sleeps in its wait" 1 "$(own thread_state)"
release_thread
gone o1
check_no_splat

start_test "a replace takes the last redirect away"
log_mark
expect_ok patch o1 "$a" "$own_a"
hold_thread
hold_work
log_mark
expect_refused EBUSY replace o2 "$b" "$b1"
check_transcript "the log names the work function and the kworker, not the thread" <<EOF
% echo 'replace o2 $b $b1' > control
kpatch: replace 'o2' refused: kpatch_test_own_work+0x_/0x_ [$OWN] is on the stack of pid $wpid ($wcomm)
EOF
check_eq "o1 still in effect" "a=51 b=2" "$(target_values)"
release_work
log_mark
expect_ok replace o2 "$b" "$b1"
check_transcript "once the work item is out, o1 removed, o2 enabled" <<EOF
% echo 'replace o2 $b $b1' > control
kpatch: patch 'o1' removed
kpatch: patch 'o2' enabled (1 function)
EOF
check_eq "o2 alone in effect" "a=1 b=21" "$(target_values)"
check_patches "only o2 is listed" \
	"$(pline o2 kpatch_test_target:kpatch_test_value_b "$b" \
		kpatch_test_new:kpatch_test_value_b_v1 "$b1" active)"
check_eq "the thread still sleeps in its wait" 1 "$(own thread_state)"
release_thread
if is_patched o2; then
	expect_ok unpatch o2
fi
gone o1
check_no_splat

start_test "a task in a helper reached by a tail jump"
log_mark
expect_ok patch o3 "$b" "$own_tail"
hold_thread
check_not "precondition: the work item is not running" \
	modparam_is "$OWN" work_state 1
reader_in_helper
log_mark
expect_refused EBUSY unpatch o3
check_transcript "the log names the helper and the reader" <<EOF
% echo 'unpatch o3' > control
kpatch: unpatch 'o3' refused: kpatch_test_own_helper+0x_/0x_ [$OWN] is on the stack of pid $hpid ($hcomm)
EOF
if is_patched o3; then
	check_not "rmmod $OWN refused" unload_mod "$OWN"
else
	not_ok "rmmod $OWN refused"
	diag "not tried: o3 is gone, nothing would stop the rmmod" \
		"and the reader would wake up in freed memory"
fi
reader_out "a=1 b=53"
log_mark
expect_ok unpatch o3
check_transcript "once the reader is out, o3 goes, the thread still asleep in the module" <<EOF
% echo 'unpatch o3' > control
kpatch: patch 'o3' removed
EOF
check_eq "b returns 2 again" "a=1 b=2" "$(target_values)"
check_eq "the thread still sleeps in its wait" 1 "$(own thread_state)"
release_thread
gone o3
check_no_splat

start_test "an indirect jump, and the module's own thread"
log_mark
expect_ok patch o4 "$a" "$own_ind"
check_eq "o4 in effect: a returns 54 (the jump's target)" "a=54 b=2" \
	"$(target_values)"
hold_thread
check_not "precondition: the work item is not running" \
	modparam_is "$OWN" work_state 1
log_mark
expect_ok unpatch o4
check_transcript "the log says removed" <<EOF
% echo 'unpatch o4' > control
kpatch: patch 'o4' removed
EOF
check_eq "a returns 1 again" "a=1 b=2" "$(target_values)"
check_eq "the thread still sleeps in its wait" 1 "$(own thread_state)"
release_thread
gone o4
check_no_splat

start_test "an indirect jump, and the module's own work item"
log_mark
expect_ok patch o5 "$a" "$own_ind"
hold_thread
hold_work
log_mark
expect_refused EBUSY unpatch o5
check_transcript "the log names the work function and the kworker, not the thread" <<EOF
% echo 'unpatch o5' > control
kpatch: unpatch 'o5' refused: kpatch_test_own_work+0x_/0x_ [$OWN] is on the stack of pid $wpid ($wcomm)
EOF
check_eq "o5 still in effect" "a=54 b=2" "$(target_values)"
release_work
log_mark
expect_ok unpatch o5
check_transcript "once the work item is out, o5 goes" <<EOF
% echo 'unpatch o5' > control
kpatch: patch 'o5' removed
EOF
check_eq "the thread still sleeps in its wait" 1 "$(own thread_state)"
release_thread
gone o5
check_no_splat

start_test "the whole module is checked only when the last redirect into it goes"
log_mark
expect_ok patch o6 "$a" "$own_a"
expect_ok patch o7 "$b" "$own_tail"
check_eq "o6 and o7 in effect" "a=51 b=53" "$(target_values)"
reader_in_helper
log_mark
# o6 still redirects into the module and keeps it loaded: the reader in
# the helper, which o7 led there, is no danger to it.
expect_ok unpatch o7
check_transcript "with o6 left, o7 goes while the reader sleeps in the module" <<EOF
% echo 'unpatch o7' > control
kpatch: patch 'o7' removed
EOF
log_mark
expect_refused EBUSY unpatch o6
check_transcript "o6, the last redirect, is refused: the log names the helper and the reader" <<EOF
% echo 'unpatch o6' > control
kpatch: unpatch 'o6' refused: kpatch_test_own_helper+0x_/0x_ [$OWN] is on the stack of pid $hpid ($hcomm)
EOF
if is_patched o6; then
	check_not "rmmod $OWN refused" unload_mod "$OWN"
else
	not_ok "rmmod $OWN refused"
	diag "not tried: o6 is gone, nothing would stop the rmmod" \
		"and the reader would wake up in freed memory"
fi
reader_out "a=51 b=53"
log_mark
expect_ok unpatch o6
check_transcript "once the reader is out, o6 goes" <<EOF
% echo 'unpatch o6' > control
kpatch: patch 'o6' removed
EOF
check_eq "a and b return 1 and 2 again" "a=1 b=2" "$(target_values)"
gone o6
gone o7
check_no_splat

start_test "the module unloads while its thread and work item sleep in its code"
log_mark
check_patches "nothing patched"
hold_thread
hold_work
check "rmmod $OWN succeeds" unload_mod "$OWN"
check "its thread is gone" wait_until test ! -e "/proc/$pid"
check_no_splat
