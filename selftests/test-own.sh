#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-own.sh - a module's own threads and work items do not hold up the
# update that removes the last patch redirecting calls into it.
#
# kpatch_test_own holds new functions for kpatch_test_target's
# kpatch_test_value_a() (1) and kpatch_test_value_b() (2), and runs code
# of its own that no redirect sends anybody into: the kernel thread
# "kpatch_own" (its thread function is in the module) and a work item on
# system_wq, run by a kworker.  Each sleeps in a function of the module
# while a parameter holds it (see kpatch_test_own.c).
#
# The update that removes the last redirect into the module checks the
# code a redirect can lead to: the new functions, their pieces, and the
# module's functions they reach by jumps.  So:
#   - kpatch_test_own_value_a() (51) reaches nothing: with the thread and
#     the work item asleep in the module, unpatch and a replace that
#     removes the patch apply, and both go on running afterwards;
#   - kpatch_test_own_tail() jumps to kpatch_test_own_helper() (53): a
#     task that a redirected call left asleep in the helper refuses the
#     unpatch, and nobody else does;
#   - kpatch_test_own_indirect() leaves by "jmp *%rax" (to a function
#     returning 54): where a task went from there is unknowable, so the
#     whole module is checked, but for the kernel threads whose thread
#     function is in the module, which the module's exit stops: the
#     module's thread does not refuse the unpatch, its work item does.
# "check unpatch" answers what unpatch then does.  At the end the module
# unloads while its thread and work item sleep in its code: its exit
# stops the one and lets the other go.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

OWN=kpatch_test_own
KP_CHECK=$KP_DEBUGFS/check

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

check_file() {
	cat "$KP_CHECK" 2>&1
}

# blocker PID FUNC COMM: ERE of the check file's line for a task in FUNC
blocker() {
	printf '^%s %s:%s[+]0x[0-9a-f]+/0x[0-9a-f]+ %s$\n' "$1" "$OWN" "$2" "$3"
}

# check_result DESC LINE1 [ERE...]: the check file is LINE1, then one line
# matching each ERE, in any order, and nothing else
check_result() {
	_cr_desc=$1
	_cr_first=$2
	shift 2
	_cr_have=$(check_file)
	if [ "$(printf '%s\n' "$_cr_have" | head -n 1)" = "$_cr_first" ] &&
	   printf '%s\n' "$_cr_have" | tail -n +2 | lines_any_order "$@"; then
		ok "$_cr_desc"
	else
		not_ok "$_cr_desc"
		diag "expected line 1: $_cr_first" "then (any order):" \
			"$(printf '%s\n' "$@")"
		diag "actual:" "$_cr_have"
		return 1
	fi
}

# dry RESULT CMD...: "check CMD..." answers RESULT (OK or an errno name)
# and changes nothing
dry() {
	_dr_want=$1
	shift
	save_state
	kp check "$@" || :
	check_eq "check $1 $2 -> $_dr_want" "$_dr_want" "$KP_RESULT"
	check_state_unchanged
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
dry OK unpatch o1
check_result "check file: unpatch o1 would apply" "unpatch o1 0"
expect_ok unpatch o1
check_transcript "the log says it would apply, then removed" <<EOF
% echo 'check unpatch o1' > control
kpatch: check unpatch 'o1': would apply now
% echo 'unpatch o1' > control
kpatch: patch 'o1' removed
EOF
check_eq "a returns 1 again" "a=1 b=2" "$(target_values)"
check_eq "the thread still sleeps in its wait" 1 "$(own thread_state)"
check_eq "the work item still sleeps in its function" 1 "$(own work_state)"
release_thread
release_work
gone o1
check_no_splat

start_test "a replace takes the last redirect away"
log_mark
expect_ok patch o1 "$a" "$own_a"
hold_thread
hold_work
log_mark
dry OK replace o2 "$b" "$b1"
check_result "check file: replace o2 would apply" "replace o2 0"
expect_ok replace o2 "$b" "$b1"
check_transcript "the log says it would apply, o1 removed, o2 enabled" <<EOF
% echo 'check replace o2 $b $b1' > control
kpatch: check replace 'o2': would apply now
% echo 'replace o2 $b $b1' > control
kpatch: patch 'o1' removed
kpatch: patch 'o2' enabled (1 function)
EOF
check_eq "o2 alone in effect" "a=1 b=21" "$(target_values)"
check_patches "only o2 is listed" \
	"$(pline o2 kpatch_test_target:kpatch_test_value_b "$b" \
		kpatch_test_new:kpatch_test_value_b_v1 "$b1" active)"
check_eq "the thread still sleeps in its wait" 1 "$(own thread_state)"
check_eq "the work item still sleeps in its function" 1 "$(own work_state)"
release_thread
release_work
if is_patched o2; then
	expect_ok unpatch o2
fi
gone o1
check_no_splat

start_test "a task in a helper reached by a tail jump"
log_mark
expect_ok patch o3 "$b" "$own_tail"
hold_thread
hold_work
set_param "$OWN" hold_helper 1
# A reader of kpatch_test_target's values calls kpatch_test_value_b(),
# redirected to kpatch_test_own_tail(), which jumps to the helper.
log_command "cat $TARGET_VALUES > $KP_TMP/values &"
cat "$TARGET_VALUES" >"$KP_TMP/values" 2>&1 &
reader=$!
check "the reader sleeps in kpatch_test_own_helper" \
	wait_until sleeping_in helper
hpid=$(own helper_pid)
hcomm=$(own helper_comm)
diag "the reader is pid $hpid ($hcomm)"
log_mark
dry EBUSY unpatch o3
check_grep "check file lists the reader in the helper" \
	"$(blocker "$hpid" kpatch_test_own_helper "$hcomm")" "$(check_file)"
check_result "check file: the reader, and no other task" "unpatch o3 -16" \
	"$(blocker "$hpid" kpatch_test_own_helper "$hcomm")"
check_transcript "the dry run's log names the reader, and no other task" <<EOF
% echo 'check unpatch o3' > control
kpatch: check unpatch 'o3': would fail (-16): 1 task in the way
kpatch: check unpatch 'o3': pid $hpid ($hcomm) in kpatch_test_own_helper+0x_/0x_ [$OWN]
EOF
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
set_param "$OWN" hold_helper 0
wait "$reader"
reader=
check_eq "the reader ran the new code (the helper's 53)" "a=1 b=53" \
	"$(cat "$KP_TMP/values")"
log_mark
expect_ok unpatch o3
check_transcript "once the reader is out, o3 goes" <<EOF
% echo 'unpatch o3' > control
kpatch: patch 'o3' removed
EOF
check_eq "b returns 2 again" "a=1 b=2" "$(target_values)"
release_thread
release_work
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
dry OK unpatch o4
check_result "check file: unpatch o4 would apply" "unpatch o4 0"
expect_ok unpatch o4
check_transcript "the log says it would apply, then removed" <<EOF
% echo 'check unpatch o4' > control
kpatch: check unpatch 'o4': would apply now
% echo 'unpatch o4' > control
kpatch: patch 'o4' removed
EOF
check_eq "a returns 1 again" "a=1 b=2" "$(target_values)"
release_thread
gone o4
check_no_splat

start_test "an indirect jump, and the module's own work item"
log_mark
expect_ok patch o5 "$a" "$own_ind"
hold_thread
hold_work
log_mark
dry EBUSY unpatch o5
check_grep "check file lists the kworker in kpatch_test_own_work" \
	"$(blocker "$wpid" kpatch_test_own_work "$wcomm")" "$(check_file)"
check_result "check file: the kworker, and not the module's own thread" \
	"unpatch o5 -16" "$(blocker "$wpid" kpatch_test_own_work "$wcomm")"
check_transcript "the dry run's log names the kworker only" <<EOF
% echo 'check unpatch o5' > control
kpatch: check unpatch 'o5': would fail (-16): 1 task in the way
kpatch: check unpatch 'o5': pid $wpid ($wcomm) in kpatch_test_own_work+0x_/0x_ [$OWN]
EOF
log_mark
expect_refused EBUSY unpatch o5
check_transcript "the log names the work function and the kworker" <<EOF
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

start_test "the module unloads while its thread and work item sleep in its code"
log_mark
check_patches "nothing patched"
hold_thread
hold_work
check "rmmod $OWN succeeds" unload_mod "$OWN"
check "its thread is gone" wait_until test ! -e "/proc/$pid"
check_no_splat
