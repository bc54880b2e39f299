#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-waiting.sh - an update that sleeps between tries holds nothing.
# With retries=100 and retry_delay_ms=1000, a patch of
# kpatch_test_busy_fn() (on the stack of kpatch_test_busy's thread) is
# refused by the stack check and sleeps a second between tries for up to
# 100 s.  Meanwhile, from other processes:
#
# - the patches file can be read at once, and does not list the sleeping
#   patch;
# - a patch of another function, and its unpatch, succeed and work;
# - a patch module calling kpatch_register() from its init loads;
# - a second patch with the sleeping patch's name fails with EEXIST.
#
# While an unpatch of a patch whose new function is in use sleeps, a
# second unpatch of it and a replace (which would remove it too) fail with
# EBUSY, and each refusal logs a line.  Once the function is free, the
# sleeping update succeeds on its next try.
#
# When /sys/kernel/kpatch/patches/NAME appears while a patch NAME sleeps
# (made by a patch module written for the 2014 core), its next try fails
# with EEXIST and the log line of that refusal.
# While an update waits to try again, the modules its addresses lie in
# stay pinned: the rmmod of the module of its new function
# (kpatch_test_going), of a hook (kpatch_test_hooks) and of its old
# function (kpatch_test_busy) fails with EAGAIN, and the update still
# sleeps; once it has ended, successful (the thread let go) or not (the
# writer killed), the rmmod succeeds.  Should such an rmmod succeed while
# the update waits, the script ends the update at once, before it loads
# anything again: a module loaded where the removed one was would have
# its function patched by the update's next try.
#
# Each of these commands runs in the background and must return within a
# few seconds.  Should one block (kpatch holding its mutex while it
# sleeps), the script says so, ends the sleeping update with a signal
# (retries set to 0 first, so that the blocked command does not sleep in
# turn), lets the command finish and goes on.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

BUSY_PARAMS=/sys/module/kpatch_test_busy/parameters
RETRIES=100
DELAY=1000

sleeper_pid=
sleeper_cmd=
sleeper_name=
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
retries=$(modparam kpatch retries)
delay=$(modparam kpatch retry_delay_ms)

# busy_param NAME VALUE: write a kpatch_test_busy parameter
busy_param() {
	set_param kpatch_test_busy "$1" "$2"
}

# kpatch_param NAME VALUE: write a kpatch parameter
kpatch_param() {
	set_param kpatch "$1" "$2"
}

# sleeper_tries: an ERE of the lines of the sleeping update's tries, which
# check_transcript leaves out: how many there are is up to the clock
# (one a second until the thread lets go or the test moves on)
sleeper_tries() {
	echo "^kpatch: [a-z]+ '$sleeper_name' busy [(]try [0-9]+ of $((RETRIES + 1)), again in $DELAY ms[)]: kpatch_test_busy_fn(_new)?[+]0x[0-9a-f]+/0x[0-9a-f]+ \\[kpatch_test_busy\\] is on the stack of pid [0-9]+ [(]kpatch_busy[)]\$"
}

# sleeper_alive: is the sleeping writer still running?
sleeper_alive() {
	[ -n "$sleeper_pid" ] && kill -0 "$sleeper_pid" 2>/dev/null &&
		[ ! -s "$KP_TMP/sleeper.out" ]
}

# sleeper_sleeps: has the sleeping writer's update been refused once and
# is it waiting for its next try?
sleeper_sleeps() {
	log_since_mark "$sleeper_mark" |
		grep -qF "'$sleeper_name' busy (try 1 of $((RETRIES + 1)), again in $DELAY ms)"
}

# sleeper_start CMD: write CMD to the control file in the background
# (retries=100, retry_delay_ms=1000) and wait until its first try has been
# refused; the writer is then asleep until its next try.  Fails if that
# does not happen.
sleeper_start() {
	sleeper_cmd=$1
	sleeper_name=$(printf '%s\n' "$1" | awk '{ print $2 }')
	kpatch_param retries "$RETRIES"
	kpatch_param retry_delay_ms "$DELAY"
	log_mark
	sleeper_mark=$KP_MARK
	rm -f "$KP_TMP/sleeper.out"
	kp_bg "$KP_TMP/sleeper.out" "$sleeper_cmd"
	sleeper_pid=$KP_BG
	wait_until sleeper_sleeps && sleeper_alive
}

# sleeper_ensure: start the sleeping writer again if probe ended it
sleeper_ensure() {
	sleeper_alive && return 0
	diag "starting the sleeping update again"
	[ -z "$sleeper_pid" ] || wait "$sleeper_pid"
	sleeper_start "$sleeper_cmd" ||
		bail "setup: \"$sleeper_cmd\" sleeps between tries again"
}

# sleeper_finish SECS: wait up to SECS seconds for the sleeping writer to
# return; its result (OK or an errno name) is then in KP_RESULT
sleeper_finish() {
	_sf_i=0
	while [ ! -s "$KP_TMP/sleeper.out" ] && [ "$_sf_i" -lt $(($1 * 10)) ]; do
		_sf_i=$((_sf_i + 1))
		nap
	done
	[ -s "$KP_TMP/sleeper.out" ] || return 1
	wait "$sleeper_pid"
	sleeper_pid=
	KP_RESULT=$(cat "$KP_TMP/sleeper.out")
	diag "\"$sleeper_cmd\": $KP_RESULT"
}

# sleeper_stop: end the sleeping writer now (SIGKILL ends kpatch's retries;
# retries=0 makes any update that was blocked behind it try only once).
# The kill comes first: retries=0 first would let a writer that wakes in
# between end by its last try instead, however rarely the clock allows.
sleeper_stop() {
	[ -n "$sleeper_pid" ] || return 0
	log_command "kill -KILL $sleeper_pid  (\"$sleeper_cmd\")"
	kill -KILL "$sleeper_pid" 2>/dev/null
	kpatch_param retries 0
	wait "$sleeper_pid" 2>/dev/null
	sleeper_pid=
	[ ! -s "$KP_TMP/sleeper.out" ] || diag "$(cat "$KP_TMP/sleeper.out")"
}

# probe_done: has the probe command returned?
probe_done() {
	[ -s "$KP_TMP/probe.rc" ]
}

# probe SECS DESC SHOWN CMD...: while the update sleeps, run CMD in the
# background (SHOWN: its transcript line, see log_command); ok if it
# returns within SECS seconds.  If it is still
# blocked then, not ok, and the sleeping update is ended so that CMD can
# finish (sleeper_ensure starts it again).  Then CMD's exit status is in
# probe_rc, its output in probe_out.
probe() {
	_pr_secs=$1
	_pr_desc=$2
	_pr_shown=$3
	shift 3
	sleeper_ensure
	rm -f "$KP_TMP/probe.out" "$KP_TMP/probe.rc"
	log_command "$_pr_shown"
	{
		"$@" >"$KP_TMP/probe.out" 2>&1
		echo $? >"$KP_TMP/probe.rc"
	} &
	probe_pid=$!
	_pr_i=0
	while ! probe_done && [ "$_pr_i" -lt $((_pr_secs * 10)) ]; do
		_pr_i=$((_pr_i + 1))
		nap
	done
	if probe_done; then
		ok "$_pr_desc returns within $_pr_secs s"
	else
		not_ok "$_pr_desc returns within $_pr_secs s"
		diag "still blocked after $_pr_secs s, while \"$sleeper_cmd\" sleeps" \
			"between tries; ending that update"
		sleeper_stop
		wait_until probe_done
		kpatch_param retries "$RETRIES"
	fi
	wait "$probe_pid"
	probe_pid=
	probe_rc=$(cat "$KP_TMP/probe.rc" 2>/dev/null || echo "?")
	probe_out=$(cat "$KP_TMP/probe.out" 2>/dev/null)
	diag "exit $probe_rc${probe_out:+:}" "$probe_out"
}

# probe_kp SECS CMD: probe a write of CMD to the control file (kpctl
# prints OK or the errno name: probe_out)
probe_kp() {
	probe "$1" "\"$(kp_what "$2")\"" "echo '$(kp_logged "$2")' > control &" \
		"$KPCTL" "$KP_CONTROL" "$2"
}

waiting_cleanup() {
	sleeper_stop
	if [ -n "$probe_pid" ]; then
		wait_until probe_done
		wait "$probe_pid"
	fi
	echo 0 >"$BUSY_PARAMS/hold" 2>/dev/null
	echo 1 >"$BUSY_PARAMS/release" 2>/dev/null
	kpatch_param retries "$retries"
	kpatch_param retry_delay_ms "$delay"
}
KP_CLEANUP_HOOK=waiting_cleanup

start_test "a patch sleeping between tries"
check "precondition: patch w_sleep is refused and sleeps until its next try" \
	sleeper_start "patch w_sleep $fn $fn_new"

probe 8 "timeout 5 cat $KP_PATCHES" "timeout 5 cat $KP_PATCHES &" \
	timeout 5 cat "$KP_PATCHES"
check_eq "timeout 5 cat $KP_PATCHES exits 0" 0 "$probe_rc"
check_no_grep "the patches file does not list w_sleep" "^w_sleep " "$probe_out"

probe_kp 10 "patch w_other $a $a1"
check_eq "patch w_other -> OK" OK "$probe_out"
check_eq "kpatch_test_value_a_v1 runs" "a=11 b=2" "$(target_values)"
probe_kp 10 "unpatch w_other"
check_eq "unpatch w_other -> OK" OK "$probe_out"
check_eq "kpatch_test_value_a runs again" "a=1 b=2" "$(target_values)"

kallsyms_changed
probe 10 "insmod kpatch_test_api which=b (kpatch_register())" \
	"insmod kpatch_test_api.ko which=b &" insmod "$KPATCH_MODDIR/kpatch_test_api.ko" which=b
check_eq "insmod kpatch_test_api which=b exits 0" 0 "$probe_rc"
check_eq "kpatch_test_api_value_b runs" "a=1 b=32" "$(target_values)"
probe_kp 10 "unpatch kpatch_test_api"
check_eq "unpatch kpatch_test_api -> OK" OK "$probe_out"
check_eq "kpatch_test_value_b runs again" "a=1 b=2" "$(target_values)"
if mod_loaded kpatch_test_api; then
	check "rmmod kpatch_test_api succeeds" unload_mod kpatch_test_api
fi

probe_kp 10 "patch w_sleep $a $a1"
check_eq "a second patch w_sleep -> EEXIST" EEXIST "$probe_out"
check_eq "it patched nothing" "a=1 b=2" "$(target_values)"
if [ "$probe_out" = OK ]; then
	diag "undoing the accepted command"
	kp unpatch w_sleep >/dev/null
fi

sleeper_ensure
check "the update still sleeps" sleeper_alive
log_mark
busy_param release 1
check "released: the sleeping patch w_sleep returns within 10 s" sleeper_finish 10
check_eq "patch w_sleep -> OK" OK "$KP_RESULT"
check_no_grep "no try was refused for good" "refused" "$(log_since_mark)"
check_transcript -x "$(sleeper_tries)" "the log: released, then w_sleep enabled" <<EOF
% echo 1 > /sys/module/kpatch_test_busy/parameters/release
kpatch: patch 'w_sleep' enabled (1 function)
EOF
check "the thread left kpatch_test_busy_fn" \
	wait_until modparam_is kpatch_test_busy state 2
check_patches "w_sleep listed as active" \
	"$(pline w_sleep kpatch_test_busy:kpatch_test_busy_fn "$fn" \
		kpatch_test_busy:kpatch_test_busy_fn_new "$fn_new" active)"
new_calls=$(modparam kpatch_test_busy new_calls)
busy_param again 1
check "the thread calls kpatch_test_busy_fn again" \
	wait_until modparam_is kpatch_test_busy again N
check_eq "the call ran the new function" $((new_calls + 1)) \
	"$(modparam kpatch_test_busy new_calls)"
expect_ok unpatch w_sleep
check_no_splat

start_test "an unpatch sleeping between tries"
log_mark
expect_ok patch w_unp "$fn" "$fn_new"
busy_param hold 1
busy_param again 1
check "precondition: the thread waits in kpatch_test_busy_fn_new" \
	wait_until modparam_is kpatch_test_busy state 3
check "precondition: unpatch w_unp is refused and sleeps until its next try" \
	sleeper_start "unpatch w_unp"

log_mark
probe_kp 10 "unpatch w_unp"
check_eq "a second unpatch w_unp -> EBUSY" EBUSY "$probe_out"
check_transcript -x "$(sleeper_tries)" "a log line names w_unp for the refusal" <<EOF
% echo 'unpatch w_unp' > control &
kpatch: unpatch 'w_unp' refused: an unpatch of it or a replace waits to try again
EOF

log_mark
probe_kp 10 "replace w_repl $a $a1"
check_eq "replace w_repl (would remove w_unp) -> EBUSY" EBUSY "$probe_out"
check_transcript -x "$(sleeper_tries)" "a log line names w_repl for the refusal" <<EOF
% echo 'replace w_repl $a $a1' > control &
kpatch: replace 'w_repl' refused: an unpatch waits to try again
EOF
check_eq "it replaced nothing" "a=1 b=2" "$(target_values)"
if [ "$probe_out" = OK ]; then
	diag "undoing the accepted command"
	kp unpatch w_repl >/dev/null
fi

sleeper_ensure
check "the update still sleeps" sleeper_alive
log_mark
old_calls=$(modparam kpatch_test_busy old_calls)
busy_param hold 0
check "released: the sleeping unpatch w_unp returns within 10 s" sleeper_finish 10
check_eq "unpatch w_unp -> OK" OK "$KP_RESULT"
check_no_grep "no try was refused for good" "refused" "$(log_since_mark)"
check_transcript -x "$(sleeper_tries)" "the log: let go, then w_unp removed" <<EOF
% echo 0 > /sys/module/kpatch_test_busy/parameters/hold
kpatch: patch 'w_unp' removed
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

# A waiting replace removes, when it wakes, every patch enabled then: no
# unpatch may take (and free) one of them meanwhile.
start_test "a replace sleeping between tries"
log_mark
expect_ok patch w_unp "$fn" "$fn_new"
busy_param hold 1
busy_param again 1
check "precondition: the thread waits in kpatch_test_busy_fn_new" \
	wait_until modparam_is kpatch_test_busy state 3
check "precondition: replace w_repl2 is refused and sleeps until its next try" \
	sleeper_start "replace w_repl2 $a $a1"

log_mark
probe_kp 10 "unpatch w_unp"
check_eq "unpatch w_unp (the replace will remove it) -> EBUSY" EBUSY "$probe_out"
check_transcript -x "$(sleeper_tries)" "a log line names w_unp for the refusal" <<EOF
% echo 'unpatch w_unp' > control &
kpatch: unpatch 'w_unp' refused: an unpatch of it or a replace waits to try again
EOF
check_eq "nothing replaced yet" "a=1 b=2" "$(target_values)"

sleeper_ensure
log_mark
busy_param hold 0
check "released: the sleeping replace w_repl2 returns within 10 s" sleeper_finish 10
check_eq "replace w_repl2 -> OK" OK "$KP_RESULT"
check_transcript -x "$(sleeper_tries)" "the log: let go, then w_unp removed and w_repl2 enabled" <<EOF
% echo 0 > /sys/module/kpatch_test_busy/parameters/hold
kpatch: patch 'w_unp' removed
kpatch: patch 'w_repl2' enabled (1 function)
EOF
check_eq "w_repl2 patched a" "a=11 b=2" "$(target_values)"
expect_errno ENOENT unpatch w_unp
expect_ok unpatch w_repl2
check_patches "nothing patched"
check_no_splat

# A patch module written for the 2014 core makes
# /sys/kernel/kpatch/patches/<its name> itself (kpatch_test_api own_kobj=1,
# here with no_register=1: it keeps the directory and registers nothing).
# When that directory appears while a patch of that name waits between
# tries, the patch's next try is refused as a first try would be: EEXIST,
# and the log line says why (not ENOMEM, from failing to make the
# directory).
start_test "the patch's sysfs directory appears while it sleeps between tries"
busy_param release 0
busy_param again 1
check "precondition: the thread waits in kpatch_test_busy_fn again" \
	wait_until modparam_is kpatch_test_busy state 1
busy_pid=$(modparam kpatch_test_busy pid)
save_state
check "precondition: patch kpatch_test_api is refused and sleeps until its next try" \
	sleeper_start "patch kpatch_test_api $fn $fn_new"
check "insmod kpatch_test_api own_kobj=1 no_register=1 succeeds" \
	load_mod kpatch_test_api own_kobj=1 no_register=1
check_sysfs_patches "precondition: the module made patches/kpatch_test_api" \
	kpatch_test_api
check "the sleeping patch kpatch_test_api returns within 10 s" sleeper_finish 10
check_eq "patch kpatch_test_api -> EEXIST" EEXIST "$KP_RESULT"
check_patches "nothing patched"
# The tries refused before the directory appeared, then the refusal.
tries=$(log_since_mark |
	grep -c "kpatch: patch 'kpatch_test_api' busy (try [0-9]* of $((RETRIES + 1)), ")
# How many tries were refused before the directory appeared is up to the
# clock: counted from the log, then compared line by line; and the
# transcript without them.
check_log "the log: busy until the directory appeared, then why not" <<EOF
$(_t=1
while [ "$_t" -le "$tries" ]; do
	echo "kpatch: patch 'kpatch_test_api' busy (try $_t of $((RETRIES + 1)), again in $DELAY ms): kpatch_test_busy_fn+0x_/0x_ [kpatch_test_busy] is on the stack of pid $busy_pid (kpatch_busy)"
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
busy_param release 1
check "the thread left kpatch_test_busy_fn" \
	wait_until modparam_is kpatch_test_busy state 2
# busy_again: put the thread back into kpatch_test_busy_fn()
busy_again() {
	busy_param release 0
	busy_param again 1
	wait_until modparam_is kpatch_test_busy state 1
}

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
load_mod kpatch_test_hooks || bail "setup: load kpatch_test_hooks"
going_new=$(sym kpatch_test_going_fn_new kpatch_test_going) ||
	bail "setup: find kpatch_test_going_fn_new"
h_post=$(sym kpatch_test_hooks_post_patch kpatch_test_hooks) ||
	bail "setup: find kpatch_test_hooks_post_patch"
busy_again || bail "setup: the thread waits in kpatch_test_busy_fn again"
check "precondition: patch w_pin is refused and sleeps until its next try" \
	sleeper_start "patch w_pin $fn $going_new"
if pin_check kpatch_test_going exit_delay_ms=0; then
	log_mark
	busy_param release 1
	check "released: the sleeping patch w_pin returns within 10 s" sleeper_finish 10
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

# The end of a writer killed while its update waits between tries, or
# during a try.
KILLED_RE="kpatch: patch 'w_pin' refused after [0-9]+ tr(y|ies): (its writer was killed|kpatch_test_busy_fn\+0x[0-9a-f]+/0x[0-9a-f]+ \[kpatch_test_busy\] is on the stack of pid [0-9]+ \(kpatch_busy\))\$"

start_test "a waiting update keeps the module of its hook"
log_mark
busy_again || bail "setup: the thread waits in kpatch_test_busy_fn again"
check "precondition: patch w_pin is refused and sleeps until its next try" \
	sleeper_start "patch w_pin $fn $fn_new post-patch=$h_post"
if pin_check kpatch_test_hooks; then
	sleeper_stop
	kpatch_param retries "$RETRIES"
	# How many tries it made before the kill is up to the clock, and
	# so is whether the kill found it asleep (then the log says so) or
	# in a try (which ends the update as a last try does): the line is
	# grepped for, not the log compared whole.
	check_grep "killed: patch w_pin has ended, refused" \
		"$KILLED_RE" "$(log_since_mark)"
fi
check_patches "nothing patched"
check "the update has ended: rmmod kpatch_test_hooks succeeds" \
	unload_mod kpatch_test_hooks
check_no_splat

start_test "a waiting update keeps the module of its old function"
log_mark
check "precondition: the thread still waits in kpatch_test_busy_fn" \
	modparam_is kpatch_test_busy state 1
check "precondition: patch w_pin is refused and sleeps until its next try" \
	sleeper_start "patch w_pin $fn $a1"
if pin_check kpatch_test_busy; then
	sleeper_stop
	kpatch_param retries "$RETRIES"
	# As above: the number of tries and where the kill found it are up
	# to the clock.
	check_grep "killed: patch w_pin has ended, refused" \
		"$KILLED_RE" "$(log_since_mark)"
fi
check_patches "nothing patched"
check_eq "kpatch_test_value_a unchanged" "a=1 b=2" "$(target_values)"
check "the update has ended: rmmod kpatch_test_busy succeeds" \
	unload_mod kpatch_test_busy
load_mod kpatch_test_busy || bail "setup: load kpatch_test_busy again"
check_no_splat
