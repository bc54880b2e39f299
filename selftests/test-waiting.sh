#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-waiting.sh - an update that sleeps between tries holds kpatch's
# mutex, and everything else that needs it waits until the update ends.
# With retries=100 and retry_delay_ms=1000, a patch of
# kpatch_test_busy_fn() (on the stack of kpatch_test_busy's thread) is
# refused by the stack check and sleeps a second between tries.  The
# first refusal says how many tries the update makes at most: 61, for no
# try is made after 60 s of sleeps (tries = 1 + min(retries, 100,
# 60000 / retry_delay_ms)).  Meanwhile, from another process, each of
# these waits for the update (the process is seen asleep in a
# mutex_lock() called by kpatch, while the update still sleeps), and
# completes only after it has ended, which shows in what it returns and
# in the order of the log lines, not in how long it took:
#
# - a read of the patches file: it lists the sleeping patch, enabled
#   once the thread let go;
# - a patch of another function: enabled after it, and works;
# - a patch module calling kpatch_register() from its init: loads after
#   it, and its patch works;
# - a second patch with the sleeping patch's name: EEXIST after it;
# - while an unpatch sleeps, a second unpatch of it (ENOENT after it,
#   nothing left to remove) and a replace (applies after it);
# - while a replace sleeps, an unpatch of a patch it removes (ENOENT
#   after it).
#
# The cap, for other values: the first refusal says "try 1 of M" with M
# from the formula, retry_delay_ms taken as at most 10000 ms; the writer,
# killed then, ends the update with "refused after N tries: its writer
# was killed" (or, killed during a try, as a last try ends), and nothing
# is patched.
#
# When /sys/kernel/kpatch/patches/NAME appears while a patch NAME sleeps
# (made by a patch module written for the 2014 core, whose load needs no
# kpatch mutex), its next try fails with EEXIST and the log line of that
# refusal.
#
# While an update waits to try again, the modules its addresses lie in
# stay pinned: the rmmod of the module of its new function
# (kpatch_test_going), of a hook (kpatch_test_hooks, the hook of a patch
# module that kpatch_test_patch_a registers from its init) and of its old
# function (kpatch_test_busy) fails with EAGAIN, and the update still
# sleeps; once it has ended, successful (the thread let go) or not (the
# writer killed: the log says so, nothing is patched), the rmmod
# succeeds.  Should such an rmmod succeed while the update waits, the
# script ends the update at once, before it loads anything again: a
# module loaded where the removed one was would have its function patched
# by the update's next try.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

BUSY_PARAMS=/sys/module/kpatch_test_busy/parameters
RETRIES=100
DELAY=1000
# 1 + min(RETRIES, 100, 60000 / DELAY)
TRIES=61

sleeper_pid=
sleeper_cmd=
sleeper_name=
sleeper_mark=
probe_pid=
probe_rc=
probe_out=

setup_modules kpatch kpatch_test_target kpatch_test_new kpatch_test_busy
fn=$(sym kpatch_test_busy_fn kpatch_test_busy) || bail "setup: find kpatch_test_busy_fn"
fn_new=$(sym kpatch_test_busy_fn_new kpatch_test_busy) ||
	bail "setup: find kpatch_test_busy_fn_new"
a=$(sym kpatch_test_value_a kpatch_test_target) || bail "setup: find kpatch_test_value_a"
a1=$(sym kpatch_test_value_a_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v1"
wait_until modparam_is kpatch_test_busy state 1 ||
	bail "setup: kpatch_busy thread waits in kpatch_test_busy_fn"
busy_pid=$(modparam kpatch_test_busy pid)
retries=$(modparam kpatch retries)
delay=$(modparam kpatch retry_delay_ms)
[ -r /proc/self/stack ] ||
	bail "setup: /proc/PID/stack can be read (it shows who waits for kpatch's mutex)"

# busy_param NAME VALUE: write a kpatch_test_busy parameter
busy_param() {
	set_param kpatch_test_busy "$1" "$2"
}

# kpatch_param NAME VALUE: write a kpatch parameter
kpatch_param() {
	set_param kpatch "$1" "$2"
}

# busy_again: put the thread back into kpatch_test_busy_fn()
busy_again() {
	busy_param release 0
	busy_param again 1
	wait_until modparam_is kpatch_test_busy state 1
}

# busy_in_new: with patch NAME of kpatch_test_busy_fn() enabled, the
# thread waits in kpatch_test_busy_fn_new()
busy_in_new() {
	busy_param hold 1
	busy_param again 1
	wait_until modparam_is kpatch_test_busy state 3
}

# task_state PID: the state letter of /proc/PID/stat (R, S, D, Z...)
task_state() {
	sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1
}

# exited PID: the task has ended (a zombie, or reaped)
exited() {
	case $(task_state "$1") in
	Z | '') return 0 ;;
	esac
	return 1
}

# parked PID: the task waits for a mutex that kpatch's code takes: asleep
# uninterruptibly, and the first frame of its stack below the scheduler's
# and the mutex's own is kpatch's
parked() {
	[ "$(task_state "$1")" = D ] || return 1
	awk '
		/schedule|mutex|lock/ && !/\[kpatch\]/ { next }
		{ found = /\[kpatch\]/; exit }
		END { exit !found }' "/proc/$1/stack" 2>/dev/null
}

# parked_or_done PID: parked, or ended already
parked_or_done() {
	parked "$1" || exited "$1"
}

# log_plain: the kernel log since the last mark, without timestamps
log_plain() {
	log_since_mark | sed 's/^\[[ 0-9.]*\] //; s/^\[ *[TC][0-9]*\] //'
}

# sleeper_tries: an ERE of the lines of the sleeping update's tries, which
# check_transcript leaves out: how many there are is up to the clock
# (one a second until the thread lets go or the test moves on)
sleeper_tries() {
	echo "^kpatch: [a-z]+ '$sleeper_name' busy [(]try [0-9]+ of $TRIES, again in $DELAY ms[)]: kpatch_test_busy_fn(_new)?[+]0x[0-9a-f]+/0x[0-9a-f]+ \\[kpatch_test_busy\\] is on the stack of pid $busy_pid [(]kpatch_busy[)]\$"
}

# sleeper_alive: is the sleeping writer still running?
sleeper_alive() {
	[ -n "$sleeper_pid" ] && ! exited "$sleeper_pid"
}

# sleeper_sleeps: has the sleeping writer's update been refused once, and
# said that it makes up to TRIES tries, DELAY ms apart?
sleeper_sleeps() {
	log_since_mark "$sleeper_mark" |
		grep -qF "'$sleeper_name' busy (try 1 of $TRIES, again in $DELAY ms)"
}

# sleeper_run NAME SHOWN CMD...: run CMD, the writer of update NAME, in
# the background (retries=100, retry_delay_ms=1000; SHOWN: its
# transcript line) and wait until its first try has been refused; the
# writer is then asleep until its next try.  Fails if that does not
# happen.
sleeper_run() {
	sleeper_name=$1
	sleeper_cmd=$2
	shift 2
	kpatch_param retries "$RETRIES"
	kpatch_param retry_delay_ms "$DELAY"
	log_mark
	sleeper_mark=$KP_MARK
	log_command "$sleeper_cmd"
	"$@" >"$KP_TMP/sleeper.out" 2>&1 &
	sleeper_pid=$!
	wait_until sleeper_sleeps && sleeper_alive
}

# sleeper_start CMD: sleeper_run for a write of CMD to the control file
sleeper_start() {
	sleeper_run "$(printf '%s\n' "$1" | awk '{ print $2 }')" \
		"echo '$(kp_logged "$1")' > control &" "$KPCTL" "$KP_CONTROL" "$1"
}

# sleeper_finish: wait for the sleeping writer to end (it has been let go,
# or killed); its exit status is then in sleeper_rc and its output (OK or
# an errno name, from kpctl) in KP_RESULT
sleeper_finish() {
	wait_until exited "$sleeper_pid" || return 1
	wait "$sleeper_pid"
	sleeper_rc=$?
	sleeper_pid=
	KP_RESULT=$(cat "$KP_TMP/sleeper.out")
	diag "\"$sleeper_cmd\": exit $sleeper_rc: $KP_RESULT"
}

# sleeper_kill: end the sleeping writer with SIGKILL, which ends kpatch's
# retries, and wait for it
sleeper_kill() {
	[ -n "$sleeper_pid" ] || return 0
	log_command "kill -KILL $sleeper_pid"
	kill -KILL "$sleeper_pid" 2>/dev/null
	wait "$sleeper_pid" 2>/dev/null
	sleeper_pid=
	[ ! -s "$KP_TMP/sleeper.out" ] || diag "$(cat "$KP_TMP/sleeper.out")"
}

# sleeper_stop: end the sleeping writer now (SIGKILL ends kpatch's retries;
# retries=0 makes any update that was blocked behind it try only once).
# The kill comes first: retries=0 first would let a writer that wakes in
# between end by its last try instead, however rarely the clock allows.
sleeper_stop() {
	[ -n "$sleeper_pid" ] || return 0
	sleeper_kill
	kpatch_param retries 0
}

# killed_ends VERB NAME: the log since the last mark ends update VERB
# 'NAME', whose writer was killed, as kpatch says it: after N tries logged
# "busy", "refused after N tries: its writer was killed" if the kill found
# it asleep between tries, or as a last try ends ("refused after N+1
# tries: WHY") if it found it in a try.  How many tries it made is up to
# the clock; that it logged a line for each is not.
killed_ends() {
	_ke_log=$(log_plain | grep "^kpatch: $1 '$2' ")
	_ke_n=$(printf '%s\n' "$_ke_log" | grep -c " busy (try ")
	_ke_tries=tries
	[ "$_ke_n" -ne 1 ] || _ke_tries=try
	_ke_last=$(printf '%s\n' "$_ke_log" | tail -n 1)
	diag "$_ke_n tries logged busy, then: $_ke_last"
	if [ "$_ke_last" = "kpatch: $1 '$2' refused after $_ke_n $_ke_tries: its writer was killed" ] ||
	   printf '%s\n' "$_ke_last" | grep -Eq "^kpatch: $1 '$2' refused after $((_ke_n + 1)) tries: [^ ]+ \\[[a-z_]+\\] is on the stack of pid [0-9]+ [(][^)]*[)]\$"; then
		ok "killed: $1 '$2' has ended, refused after its last try"
	else
		not_ok "killed: $1 '$2' has ended, refused after its last try"
		diag "its lines in the log:" "$_ke_log"
		return 1
	fi
}

# probe SHOWN CMD...: while the update sleeps, run CMD in the background
# (SHOWN: its transcript line, see log_command), and assert that it waits
# for kpatch's mutex, which the update holds (parked), before the update
# ends.  Should CMD end first, or not be seen waiting within the usual
# time, not ok; then the update is ended so that CMD can finish.
probe() {
	_pr_shown=$1
	shift
	rm -f "$KP_TMP/probe.out"
	log_command "$_pr_shown"
	"$@" >"$KP_TMP/probe.out" 2>&1 &
	probe_pid=$!
	wait_until parked_or_done "$probe_pid"
	if parked "$probe_pid" && sleeper_alive; then
		ok "\"${_pr_shown% &}\" waits for kpatch's mutex while the update sleeps"
	else
		not_ok "\"${_pr_shown% &}\" waits for kpatch's mutex while the update sleeps"
		diag "state $(task_state "$probe_pid"), its stack:" \
			"$(cat "/proc/$probe_pid/stack" 2>&1)"
		if ! exited "$probe_pid"; then
			diag "ending the sleeping update, for it to finish"
			sleeper_stop
			kpatch_param retries "$RETRIES"
		fi
	fi
	diag "its stack:" "$(cat "/proc/$probe_pid/stack" 2>&1)"
}

# probe_finish: wait for the probe to end; its exit status is then in
# probe_rc, its output in probe_out
probe_finish() {
	wait_until exited "$probe_pid" || return 1
	wait "$probe_pid"
	probe_rc=$?
	probe_pid=
	probe_out=$(cat "$KP_TMP/probe.out" 2>/dev/null)
	diag "exit $probe_rc${probe_out:+:}" "$probe_out"
}

# probe_kp CMD: probe a write of CMD to the control file (kpctl prints OK
# or the errno name: probe_out)
probe_kp() {
	probe "echo '$(kp_logged "$1")' > control &" "$KPCTL" "$KP_CONTROL" "$1"
}

# release_both PARAM VALUE: let the thread go (a kpatch_test_busy
# parameter); the sleeping update and then the probe end.  Their results
# are in KP_RESULT and probe_out.
release_both() {
	busy_param "$1" "$2"
	check "released: the sleeping \"${sleeper_cmd% &}\" returns" sleeper_finish
	check "then the probe returns" probe_finish
}

waiting_cleanup() {
	sleeper_stop
	if [ -n "$probe_pid" ]; then
		wait_until exited "$probe_pid"
		wait "$probe_pid"
	fi
	echo 0 >"$BUSY_PARAMS/hold" 2>/dev/null
	echo 1 >"$BUSY_PARAMS/release" 2>/dev/null
	kpatch_param retries "$retries"
	kpatch_param retry_delay_ms "$delay"
}
KP_CLEANUP_HOOK=waiting_cleanup

w_sleep_line=$(pline w_sleep kpatch_test_busy:kpatch_test_busy_fn "$fn" \
	kpatch_test_busy:kpatch_test_busy_fn_new "$fn_new" active)

start_test "a read of the patches file waits for a patch sleeping between tries"
check "precondition: patch w_sleep is refused and sleeps until its next try (try 1 of $TRIES)" \
	sleeper_start "patch w_sleep $fn $fn_new"
probe "cat $KP_PATCHES &" cat "$KP_PATCHES"
release_both release 1
check_eq "patch w_sleep -> OK" OK "$KP_RESULT"
check_eq "cat $KP_PATCHES exits 0" 0 "$probe_rc"
# Read after the update ended: the patch it enabled is there.
check_eq "the read lists w_sleep, active" 1 \
	"$(printf '%s\n' "$probe_out" | grep -Ec "$w_sleep_line")"
check_no_grep "no try was refused for good" "refused" "$(log_since_mark)"
check_transcript -x "$(sleeper_tries)" "the log: released, then w_sleep enabled" <<EOF
% echo 'patch w_sleep $fn $fn_new' > control &
% cat $KP_PATCHES &
% echo 1 > /sys/module/kpatch_test_busy/parameters/release
kpatch: tainting kernel with TAINT_LIVEPATCH
kpatch: patch 'w_sleep' enabled (1 function)
EOF
check "the thread left kpatch_test_busy_fn" \
	wait_until modparam_is kpatch_test_busy state 2
check_patches "w_sleep listed as active" "$w_sleep_line"
new_calls=$(modparam kpatch_test_busy new_calls)
busy_param again 1
check "the thread calls kpatch_test_busy_fn again" \
	wait_until modparam_is kpatch_test_busy again N
check_eq "the call ran the new function" $((new_calls + 1)) \
	"$(modparam kpatch_test_busy new_calls)"
expect_ok unpatch w_sleep
check_no_splat

start_test "a write to the control file waits for a patch sleeping between tries"
busy_again || bail "setup: the thread waits in kpatch_test_busy_fn again"
check "precondition: patch w_sleep is refused and sleeps until its next try" \
	sleeper_start "patch w_sleep $fn $fn_new"
probe_kp "patch w_other $a $a1"
release_both release 1
check_eq "patch w_sleep -> OK" OK "$KP_RESULT"
check_eq "then patch w_other -> OK" OK "$probe_out"
check_eq "kpatch_test_value_a_v1 runs" "a=11 b=2" "$(target_values)"
check_transcript -x "$(sleeper_tries)" "the log: w_sleep enabled, then w_other" <<EOF
% echo 'patch w_sleep $fn $fn_new' > control &
% echo 'patch w_other $a $a1' > control &
% echo 1 > /sys/module/kpatch_test_busy/parameters/release
kpatch: patch 'w_sleep' enabled (1 function)
kpatch: patch 'w_other' enabled (1 function)
EOF
expect_ok unpatch w_other
check_eq "kpatch_test_value_a runs again" "a=1 b=2" "$(target_values)"
expect_ok unpatch w_sleep
check_no_splat

start_test "kpatch_register() waits for a patch sleeping between tries"
busy_again || bail "setup: the thread waits in kpatch_test_busy_fn again"
check "precondition: patch w_sleep is refused and sleeps until its next try" \
	sleeper_start "patch w_sleep $fn $fn_new"
kallsyms_changed
probe "insmod kpatch_test_api.ko which=b &" \
	insmod "$KPATCH_MODDIR/kpatch_test_api.ko" which=b
release_both release 1
check_eq "patch w_sleep -> OK" OK "$KP_RESULT"
check_eq "then insmod kpatch_test_api which=b exits 0" 0 "$probe_rc"
check_eq "kpatch_test_api_value_b runs" "a=1 b=32" "$(target_values)"
check_transcript -x "$(sleeper_tries)" "the log: w_sleep enabled, then kpatch_test_api" <<EOF
% echo 'patch w_sleep $fn $fn_new' > control &
% insmod kpatch_test_api.ko which=b &
% echo 1 > /sys/module/kpatch_test_busy/parameters/release
kpatch: patch 'w_sleep' enabled (1 function)
kpatch: patch 'kpatch_test_api' enabled (1 function)
EOF
expect_ok unpatch kpatch_test_api
check_eq "kpatch_test_value_b runs again" "a=1 b=2" "$(target_values)"
if mod_loaded kpatch_test_api; then
	check "rmmod kpatch_test_api succeeds" unload_mod kpatch_test_api
fi
expect_ok unpatch w_sleep
check_no_splat

start_test "a second patch of the same name waits, then finds the name taken"
busy_again || bail "setup: the thread waits in kpatch_test_busy_fn again"
check "precondition: patch w_sleep is refused and sleeps until its next try" \
	sleeper_start "patch w_sleep $fn $fn_new"
probe_kp "patch w_sleep $a $a1"
release_both release 1
check_eq "patch w_sleep -> OK" OK "$KP_RESULT"
check_eq "then the second patch w_sleep -> EEXIST" EEXIST "$probe_out"
check_eq "it patched nothing" "a=1 b=2" "$(target_values)"
check_transcript -x "$(sleeper_tries)" "the log: w_sleep enabled, then the second one refused" <<EOF
% echo 'patch w_sleep $fn $fn_new' > control &
% echo 'patch w_sleep $a $a1' > control &
% echo 1 > /sys/module/kpatch_test_busy/parameters/release
kpatch: patch 'w_sleep' enabled (1 function)
kpatch: patch 'w_sleep' refused: a patch with that name exists
EOF
check_patches "only the first w_sleep" "$w_sleep_line"
expect_ok unpatch w_sleep
check_no_splat

start_test "a second unpatch waits for an unpatch sleeping between tries"
check "precondition: the thread is out of kpatch_test_busy_fn" \
	wait_until modparam_is kpatch_test_busy state 2
expect_ok patch w_unp "$fn" "$fn_new"
check "precondition: the thread waits in kpatch_test_busy_fn_new" busy_in_new
check "precondition: unpatch w_unp is refused and sleeps until its next try" \
	sleeper_start "unpatch w_unp"
probe_kp "unpatch w_unp"
old_calls=$(modparam kpatch_test_busy old_calls)
release_both hold 0
check_eq "unpatch w_unp -> OK" OK "$KP_RESULT"
check_eq "then the second unpatch w_unp -> ENOENT: removed already" ENOENT "$probe_out"
check_transcript -x "$(sleeper_tries)" "the log: w_unp removed, then no such patch" <<EOF
% echo 'unpatch w_unp' > control &
% echo 'unpatch w_unp' > control &
% echo 0 > /sys/module/kpatch_test_busy/parameters/hold
kpatch: patch 'w_unp' removed
kpatch: unpatch w_unp: no such patch
EOF
check_patches "nothing patched"
check "the thread left kpatch_test_busy_fn_new" \
	wait_until modparam_is kpatch_test_busy state 2
busy_param again 1
check "the thread calls kpatch_test_busy_fn again" \
	wait_until modparam_is kpatch_test_busy again N
check_eq "the call ran the old function" $((old_calls + 1)) \
	"$(modparam kpatch_test_busy old_calls)"
check_no_splat

start_test "a replace waits for an unpatch sleeping between tries"
expect_ok patch w_unp "$fn" "$fn_new"
check "precondition: the thread waits in kpatch_test_busy_fn_new" busy_in_new
check "precondition: unpatch w_unp is refused and sleeps until its next try" \
	sleeper_start "unpatch w_unp"
probe_kp "replace w_repl $a $a1"
release_both hold 0
check_eq "unpatch w_unp -> OK" OK "$KP_RESULT"
check_eq "then replace w_repl -> OK" OK "$probe_out"
check_eq "w_repl patched a" "a=11 b=2" "$(target_values)"
check_transcript -x "$(sleeper_tries)" "the log: w_unp removed, then w_repl enabled" <<EOF
% echo 'unpatch w_unp' > control &
% echo 'replace w_repl $a $a1' > control &
% echo 0 > /sys/module/kpatch_test_busy/parameters/hold
kpatch: patch 'w_unp' removed
kpatch: patch 'w_repl' enabled (1 function)
EOF
expect_ok unpatch w_repl
check_patches "nothing patched"
check "the thread left kpatch_test_busy_fn_new" \
	wait_until modparam_is kpatch_test_busy state 2
check_no_splat

# A replace removes every patch enabled when it runs: an unpatch of one
# of them waits for it, and then finds it gone.
start_test "an unpatch waits for a replace sleeping between tries"
expect_ok patch w_unp "$fn" "$fn_new"
check "precondition: the thread waits in kpatch_test_busy_fn_new" busy_in_new
check "precondition: replace w_repl2 is refused and sleeps until its next try" \
	sleeper_start "replace w_repl2 $a $a1"
probe_kp "unpatch w_unp"
release_both hold 0
check_eq "replace w_repl2 -> OK" OK "$KP_RESULT"
check_eq "then unpatch w_unp -> ENOENT: the replace removed it" ENOENT "$probe_out"
check_transcript -x "$(sleeper_tries)" "the log: w_unp removed and w_repl2 enabled, then no such patch" <<EOF
% echo 'replace w_repl2 $a $a1' > control &
% echo 'unpatch w_unp' > control &
% echo 0 > /sys/module/kpatch_test_busy/parameters/hold
kpatch: patch 'w_unp' removed
kpatch: patch 'w_repl2' enabled (1 function)
kpatch: unpatch w_unp: no such patch
EOF
check_eq "w_repl2 patched a" "a=11 b=2" "$(target_values)"
expect_ok unpatch w_repl2
check_patches "nothing patched"
check "the thread left kpatch_test_busy_fn_new" \
	wait_until modparam_is kpatch_test_busy state 2
check_no_splat

# cap_tried: patch w_cap has been refused once (since the last mark)
cap_tried() {
	log_since_mark | grep -qF "patch 'w_cap' busy (try 1 of "
}

# cap_case RETRIES DELAY TRIES SHOWN: with retries=RETRIES and
# retry_delay_ms=DELAY, the first refusal of patch w_cap says that it
# makes TRIES tries at most, SHOWN ms apart; the writer is killed then.
cap_case() {
	kpatch_param retries "$1"
	kpatch_param retry_delay_ms "$2"
	log_mark
	save_state
	rm -f "$KP_TMP/sleeper.out"
	kp_bg "$KP_TMP/sleeper.out" "patch w_cap $fn $fn_new"
	sleeper_pid=$KP_BG
	sleeper_cmd="patch w_cap"
	wait_until cap_tried
	check_grep "retries=$1 retry_delay_ms=$2: the first refusal says try 1 of $3, again in $4 ms" \
		"^kpatch: patch 'w_cap' busy [(]try 1 of $3, again in $4 ms[)]: kpatch_test_busy_fn[+]0x[0-9a-f]+/0x[0-9a-f]+ \\[kpatch_test_busy\\] is on the stack of pid $busy_pid [(]kpatch_busy[)]\$" \
		"$(log_plain)"
	sleeper_kill
	killed_ends patch w_cap
	check_state_unchanged
}

start_test "at most 100 retries, and no try after 60 s of sleeps"
busy_again || bail "setup: the thread waits in kpatch_test_busy_fn again"
cap_case 100 1000 61 1000
cap_case 100 10000 7 10000
cap_case 100 20000 7 10000
cap_case 5 1000 6 1000
cap_case 200 100 101 100
kpatch_param retries "$retries"
kpatch_param retry_delay_ms "$delay"
check_no_splat

# A patch module written for the 2014 core makes
# /sys/kernel/kpatch/patches/<its name> itself (kpatch_test_api own_kobj=1,
# here with no_register=1: it keeps the directory and registers nothing).
# When that directory appears while a patch of that name waits between
# tries, the patch's next try is refused as a first try would be: EEXIST,
# and the log line says why (not ENOMEM, from failing to make the
# directory).
start_test "the patch's sysfs directory appears while it sleeps between tries"
check "precondition: the thread waits in kpatch_test_busy_fn" \
	modparam_is kpatch_test_busy state 1
save_state
check "precondition: patch kpatch_test_api is refused and sleeps until its next try" \
	sleeper_start "patch kpatch_test_api $fn $fn_new"
check "insmod kpatch_test_api own_kobj=1 no_register=1 succeeds" \
	load_mod kpatch_test_api own_kobj=1 no_register=1
check_sysfs_patches "precondition: the module made patches/kpatch_test_api" \
	kpatch_test_api
check "the sleeping patch kpatch_test_api returns" sleeper_finish
check_eq "patch kpatch_test_api -> EEXIST" EEXIST "$KP_RESULT"
check_patches "nothing patched"
# The tries refused before the directory appeared, then the refusal.
tries=$(log_since_mark |
	grep -c "kpatch: patch 'kpatch_test_api' busy (try [0-9]* of $TRIES, ")
# How many tries were refused before the directory appeared is up to the
# clock: counted from the log, then compared line by line; and the
# transcript without them.
check_log "the log: busy until the directory appeared, then why not" <<EOF
$(_t=1
while [ "$_t" -le "$tries" ]; do
	echo "kpatch: patch 'kpatch_test_api' busy (try $_t of $TRIES, again in $DELAY ms): kpatch_test_busy_fn+0x_/0x_ [kpatch_test_busy] is on the stack of pid $busy_pid (kpatch_busy)"
	_t=$((_t + 1))
done)
kpatch: patch 'kpatch_test_api' refused: /sys/kernel/kpatch/patches/kpatch_test_api already exists; kpatch makes it itself, the patch module must not
EOF
check_transcript -x "$(sleeper_tries)" "the transcript: the patch, the module, the refusal" <<EOF
% echo 'patch kpatch_test_api $fn $fn_new' > control &
% insmod kpatch_test_api.ko own_kobj=1 no_register=1
kpatch: patch 'kpatch_test_api' refused: /sys/kernel/kpatch/patches/kpatch_test_api already exists; kpatch makes it itself, the patch module must not
EOF
check "rmmod kpatch_test_api succeeds" unload_mod kpatch_test_api
check_sysfs_patches "its directory went with it"
kpatch_param retries "$retries"
kpatch_param retry_delay_ms "$delay"
check_state_unchanged
check_no_splat

# pin_check MOD [PARAM...]: while the update sleeps between tries, rmmod
# MOD must fail with EAGAIN and leave MOD and the update as they were.
# Should the rmmod succeed, the update is ended at once, before MOD is
# loaded again (with PARAM...); pin_check then fails.
pin_check() {
	_pc_mod=$1
	shift
	if ! sleeper_alive; then
		not_ok "precondition: the update sleeps between tries"
		return 1
	fi
	if unload_mod "$_pc_mod"; then
		not_ok "rmmod $_pc_mod refused while the update waits"
		diag "rmmod succeeded: ending the waiting update before loading" \
			"$_pc_mod again"
		sleeper_stop
		kpatch_param retries "$RETRIES"
		load_mod "$_pc_mod" "$@" || bail "setup: load $_pc_mod again"
		return 1
	fi
	ok "rmmod $_pc_mod refused while the update waits"
	check_grep "rmmod fails with EAGAIN" "Resource temporarily unavailable" "$KP_OUT"
	check "$_pc_mod is still loaded" mod_loaded "$_pc_mod"
	check "the update still sleeps" sleeper_alive
}

start_test "a waiting update keeps the module of its new function"
load_mod kpatch_test_going exit_delay_ms=0 || bail "setup: load kpatch_test_going"
going_new=$(sym kpatch_test_going_fn_new kpatch_test_going) ||
	bail "setup: find kpatch_test_going_fn_new"
busy_again || bail "setup: the thread waits in kpatch_test_busy_fn again"
check "precondition: patch w_pin is refused and sleeps until its next try" \
	sleeper_start "patch w_pin $fn $going_new"
if pin_check kpatch_test_going exit_delay_ms=0; then
	log_mark
	busy_param release 1
	check "released: the sleeping patch w_pin returns" sleeper_finish
	check_eq "patch w_pin -> OK" OK "$KP_RESULT"
	check_patches "w_pin listed as active" \
		"$(pline w_pin kpatch_test_busy:kpatch_test_busy_fn "$fn" \
			kpatch_test_going:kpatch_test_going_fn_new "$going_new" active)"
	expect_ok unpatch w_pin
fi
check_patches "nothing patched"
check "the update has ended: rmmod kpatch_test_going succeeds" \
	unload_mod kpatch_test_going
check_no_splat

# The patch of a patch module: kpatch_test_patch_a registers it from its
# init, with a post-patch hook in kpatch_test_hooks; insmod is the writer.
start_test "a waiting update keeps the module of its hook"
load_mod kpatch_test_hooks || bail "setup: load kpatch_test_hooks"
h_post=$(sym kpatch_test_hooks_post_patch kpatch_test_hooks) ||
	bail "setup: find kpatch_test_hooks_post_patch"
busy_again || bail "setup: the thread waits in kpatch_test_busy_fn again"
save_state
kallsyms_changed
check "precondition: kpatch_test_patch_a's patch is refused and sleeps until its next try" \
	sleeper_run kpatch_test_patch_a \
	"insmod kpatch_test_patch_a.ko old=$fn new=$fn_new post_patch=$h_post &" \
	insmod "$KPATCH_MODDIR/kpatch_test_patch_a.ko" old="$fn" new="$fn_new" \
	post_patch="$h_post"
if pin_check kpatch_test_hooks; then
	sleeper_kill
	kpatch_param retries "$RETRIES"
	killed_ends patch kpatch_test_patch_a
fi
check_not "kpatch_test_patch_a did not load" mod_loaded kpatch_test_patch_a
check_patches "nothing patched"
check_state_unchanged
check "the update has ended: rmmod kpatch_test_hooks succeeds" \
	unload_mod kpatch_test_hooks
check_no_splat

start_test "a waiting update keeps the module of its old function"
check "precondition: the thread still waits in kpatch_test_busy_fn" \
	modparam_is kpatch_test_busy state 1
check "precondition: patch w_pin is refused and sleeps until its next try" \
	sleeper_start "patch w_pin $fn $a1"
if pin_check kpatch_test_busy; then
	sleeper_kill
	kpatch_param retries "$RETRIES"
	killed_ends patch w_pin
fi
check_patches "nothing patched"
check_eq "kpatch_test_value_a unchanged" "a=1 b=2" "$(target_values)"
check "the update has ended: rmmod kpatch_test_busy succeeds" \
	unload_mod kpatch_test_busy
load_mod kpatch_test_busy || bail "setup: load kpatch_test_busy again"
check_no_splat
