#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-exiting.sh - the stack check covers tasks that are exiting.
# kpatch_test_exit's kpatch_test_exit_connector() replaces the kernel's
# proc_exit_connector(), which do_exit() calls after exit_notify().  Its
# trap thread, a kthread and so reaped at once, has left the task list
# (and /proc) by then, and sleeps in the replacement: unpatching must
# still fail with EBUSY, name the thread in the log, change nothing, and
# keep kpatch_test_exit pinned; once the thread has left, the unpatch
# goes through.  First, as a plain sanity check, patching and unpatching
# proc_exit_connector() works while many short-lived processes exit.
#
# Then a task that began to exit before kpatch.ko was loaded, and so
# passed the sched_process_exit tracepoint before kpatch's probe was
# there: with kpatch.ko not loaded, a shell exits with
# /dev/kpatch_test_exit open, and its last close sleeps in the device's
# release, in exit_task_work(), before exit_notify().  kpatch.ko is loaded
# and proc_exit_connector() patched; the task is let go, leaves the task
# list (its parent reaps it) and sleeps in kpatch_test_exit_connector().
# The unpatch must fail with EBUSY, name it in the log and change
# nothing; once it has left, the unpatch goes through and the modules
# unload.
#
# On kernels whose RCU Tasks waits for exiting tasks (6.1), an unpatch
# that wrongly goes ahead blocks in ftrace until the thread is released,
# so the test runs it in the background and releases the thread if it
# has not returned after a while.
#
# Last, with the selftests' build of kpatch.ko: when more processes exit
# at once than kpatch has records ready, kpatch_test_refill holds back
# the work item that makes more, and (but on PREEMPT_RT, where the exit
# probe never allocates) the processes' own allocations fail, kpatch no
# longer knows every exiting task, and refuses the next patch, and the
# one after it, with ENOMEM, saying why, and changes nothing.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

EXIT_PARAMS=/sys/module/kpatch_test_exit/parameters
KP_RETRIES=/sys/module/kpatch/parameters/retries
churn=
writer=
retries=
closer=

setup_modules kpatch kpatch_test_exit
old=$(sym proc_exit_connector vmlinux) || bail "setup: find proc_exit_connector"
new=$(sym kpatch_test_exit_connector kpatch_test_exit) ||
	bail "setup: find kpatch_test_exit_connector"

# exit_param NAME VALUE: write a kpatch_test_exit parameter
exit_param() {
	set_param kpatch_test_exit "$1" "$2"
}

# kpatch_param NAME VALUE: write a kpatch parameter (they are back to
# their defaults when the next script loads kpatch.ko)
kpatch_param() {
	set_param kpatch "$1" "$2"
}

# calls: calls of the replacement by tasks other than the trap thread
calls() {
	modparam kpatch_test_exit calls
}

# calls_above N: has the replacement been called more than N times?
calls_above() {
	[ "$(calls)" -gt "$1" ] 2>/dev/null
}

# churn_start / churn_stop: a background loop of short-lived processes
churn_start() {
	rm -f "$KP_TMP/churn.stop"
	log_command "while :; do sh -c :; done &"
	(
		n=0
		while [ ! -e "$KP_TMP/churn.stop" ]; do
			sh -c : 2>/dev/null
			n=$((n + 1))
		done
		echo "$n" >"$KP_TMP/churn.count"
	) &
	churn=$!
}

churn_stop() {
	[ -n "$churn" ] || return 0
	: >"$KP_TMP/churn.stop"
	wait "$churn"
	churn=
	diag "$(cat "$KP_TMP/churn.count" 2>/dev/null || echo "?") processes exited"
}

# writer_done: has the background control file writer finished?
writer_done() {
	[ -e "$KP_TMP/writer.done" ]
}

# The free list of exit records kpatch keeps (KPATCH_EXITING_RESERVE)
if uname -v | grep -q PREEMPT_RT; then
	RT=1
	RESERVE=512
else
	RT=0
	RESERVE=64
fi
KPATCH_HOOKS=${KPATCH_HOOKS:-/kpatch/hooks}
FAILSLAB=/sys/kernel/debug/failslab
failslab_saved=
parent=

# failslab_set: fail every slab allocation, atomic ones included, of the
# tasks that ask for it (/proc/PID/make-it-fail), and of no other task
failslab_set() {
	failslab_saved=$(for f in probability interval times verbose task-filter; do
		printf '%s=%s ' "$f" "$(cat "$FAILSLAB/$f")"
	done) || return 1
	diag "failslab was: $failslab_saved"
	echo Y >"$FAILSLAB/task-filter" && echo 0 >"$FAILSLAB/verbose" &&
		echo 1 >"$FAILSLAB/interval" && echo -1 >"$FAILSLAB/times" &&
		echo 100 >"$FAILSLAB/probability"
}

# failslab_restore: the settings before failslab_set, probability first
failslab_restore() {
	for f in $failslab_saved; do
		echo "${f#*=}" >"$FAILSLAB/${f%%=*}"
	done
	failslab_saved=
}

# children N TEST: $parent has N children, and TEST /proc/PID holds for
# each of them
children() {
	_ch_n=0
	for _ch_s in /proc/[0-9]*/status; do
		grep -q "^PPid:[[:space:]]*$parent\$" "$_ch_s" 2>/dev/null || continue
		"$2" "${_ch_s%/status}" || return 1
		_ch_n=$((_ch_n + 1))
	done
	[ "$_ch_n" -eq "$1" ]
}

# zombie /proc/PID: the task has exited and waits to be reaped
zombie() {
	grep -q '^State:[[:space:]]*Z' "$1/status"
}

# exiting_cleanup: stop what may still run, before the cleanup unpatches
exiting_cleanup() {
	echo 0 >/sys/module/kpatch_test_refill/parameters/hold 2>/dev/null
	[ -z "$failslab_saved" ] || failslab_restore
	[ -z "$parent" ] || { kill "$parent"; wait "$parent"; } 2>/dev/null
	churn_stop >/dev/null
	if modparam_is kpatch_test_exit closing 1; then
		echo 1 >"$EXIT_PARAMS/close_go"
		wait_until modparam_is kpatch_test_exit closing 2 >/dev/null
	fi
	if [ -n "$closer" ]; then
		echo 1 >"$EXIT_PARAMS/release"
		wait "$closer" 2>/dev/null
	fi
	if modparam_is kpatch_test_exit state 1; then
		echo 1 >"$EXIT_PARAMS/release"
		wait_until modparam_is kpatch_test_exit state 2 >/dev/null
	fi
	[ -z "$writer" ] || wait "$writer"
	[ -z "$retries" ] || echo "$retries" >"$KP_RETRIES" 2>/dev/null || :
}
KP_CLEANUP_HOOK=exiting_cleanup

# unpatch_trapped NAME WHO: with retries=0, unpatch NAME in the
# background while WHO sleeps in kpatch_test_exit_connector(): it must
# return at once (WHO is let go if it does not, see the top), fail with
# EBUSY and change nothing.  KP_RESULT is what it returned.
unpatch_trapped() {
	retries=$(cat "$KP_RETRIES")
	kpatch_param retries 0
	save_state
	log_mark
	log_kp "unpatch $1" "&"
	rm -f "$KP_TMP/writer.done"
	{
		"$KPCTL" "$KP_CONTROL" "unpatch $1" >"$KP_TMP/writer.out" 2>&1
		: >"$KP_TMP/writer.done"
	} &
	writer=$!
	tries=$KP_WAIT_TRIES
	KP_WAIT_TRIES=200
	if ! check "unpatch $1 returns while $2 sleeps" wait_until writer_done; then
		diag "the writer is stuck (on 6.1 RCU Tasks waits for the exiting" \
			"task once the unpatch goes ahead); its stack:"
		for p in $(pidof "$(basename "$KPCTL")"); do
			diag "$(cat "/proc/$p/stack" 2>&1)"
		done
		diag "releasing $2"
		exit_param release 1
	fi
	KP_WAIT_TRIES=$tries
	wait "$writer"
	writer=
	KP_RESULT=$(cat "$KP_TMP/writer.out")
	diag "$KP_RESULT"
	check_eq "unpatch $1 -> EBUSY" EBUSY "$KP_RESULT"
	check_state_unchanged
}

start_test "patch and unpatch while processes exit"
log_mark
churn_start
for round in 1 2 3; do
	expect_ok patch "churn$round" "$old" "$new"
	n=$(calls)
	check "exiting processes run the replacement (round $round)" \
		wait_until calls_above "$n"
	expect_ok unpatch "churn$round"
done
n=$(calls)
sleep 1
check_eq "after unpatch exiting processes run the old function" "$n" "$(calls)"
churn_stop
# A patch may find an exiting process preempted in the old function, an
# unpatch one in the replacement, and try again: how often is up to the
# scheduler, so those lines are left out.
check_transcript -x "$(busy_re '(un)?patch' 'churn[123]')" \
	"the log says enabled, then removed, three times" <<EOF
% while :; do sh -c :; done &
% echo 'patch churn1 $old $new' > control
kpatch: tainting kernel with TAINT_LIVEPATCH
kpatch: patch 'churn1' enabled (1 function)
% echo 'unpatch churn1' > control
kpatch: patch 'churn1' removed
% echo 'patch churn2 $old $new' > control
kpatch: patch 'churn2' enabled (1 function)
% echo 'unpatch churn2' > control
kpatch: patch 'churn2' removed
% echo 'patch churn3 $old $new' > control
kpatch: patch 'churn3' enabled (1 function)
% echo 'unpatch churn3' > control
kpatch: patch 'churn3' removed
EOF
check_patches "nothing patched"
check_no_splat

start_test "a task sleeping in a patched function after it left the task list"
log_mark
expect_ok patch exit1 "$old" "$new" || bail "setup: patch proc_exit_connector"
exit_param trap 1
pid=$(modparam kpatch_test_exit pid)
wait_until modparam_is kpatch_test_exit state 1 ||
	bail "setup: the trap thread sleeps in kpatch_test_exit_connector"
ok "the trap thread (pid $pid) sleeps in kpatch_test_exit_connector"
check "the thread has left the task list: /proc/$pid is gone" test ! -e "/proc/$pid"

unpatch_trapped exit1 "the thread"
check_transcript "kernel log names the function, the pid and the comm" <<EOF
% echo 'unpatch exit1' > control &
kpatch: unpatch 'exit1' refused: kpatch_test_exit_connector+0x_/0x_ [kpatch_test_exit] is on the stack of pid $pid (kpatch_exit)
EOF
check_eq "the thread still sleeps in kpatch_test_exit_connector" 1 \
	"$(modparam kpatch_test_exit state)"
check_not "rmmod kpatch_test_exit refused" unload_mod kpatch_test_exit
kpatch_param retries "$retries"
retries=

if mod_loaded kpatch_test_exit; then
	exit_param release 1
	check "the thread leaves kpatch_test_exit_connector" \
		wait_until modparam_is kpatch_test_exit state 2
	check "the thread is dead" wait_until modparam_is kpatch_test_exit dead 1
	expect_ok unpatch exit1
	check_patches "nothing patched"
	check "rmmod kpatch_test_exit succeeds" unload_mod kpatch_test_exit
else
	skip "release the thread, unpatch, rmmod: kpatch_test_exit is gone already"
fi
check_no_splat

start_test "a task that began to exit before kpatch.ko was loaded"
unpatch_all || bail "setup: unpatch everything"
unload_kpatch || bail "setup: rmmod kpatch"
mod_loaded kpatch_test_exit || load_mod kpatch_test_exit ||
	bail "setup: load kpatch_test_exit"
exit_param close_go 0
log_command "sh -c 'exec 3</dev/kpatch_test_exit; exit 0' &"
sh -c 'exec 3</dev/kpatch_test_exit; exit 0' &
closer=$!
wait_until modparam_is kpatch_test_exit closing 1 ||
	bail "setup: the exiting shell sleeps in the release of /dev/kpatch_test_exit"
check_eq "pid $closer sleeps in the device's release" "$closer" \
	"$(modparam kpatch_test_exit pid)"
# /proc/PID/stat, field 9: the task's flags; PF_EXITING is 0x4
flags=$(awk '{ print $9 }' "/proc/$closer/stat" 2>/dev/null)
case $flags in
"" | *[!0-9]*) flags=0 ;;
esac
check "precondition: pid $closer is exiting (PF_EXITING), on the task list" \
	test $((flags & 4)) -ne 0
load_kpatch || bail "setup: load kpatch.ko"
old=$(sym proc_exit_connector vmlinux) || bail "setup: find proc_exit_connector"
new=$(sym kpatch_test_exit_connector kpatch_test_exit) ||
	bail "setup: find kpatch_test_exit_connector"
log_mark
expect_ok patch pre1 "$old" "$new" || bail "setup: patch proc_exit_connector"
exit_param close_go 1
check "pid $closer leaves the device's release" \
	wait_until modparam_is kpatch_test_exit closing 2
diag "% wait $closer"
wait "$closer"
closer_pid=$closer
closer=
check "pid $closer_pid sleeps in kpatch_test_exit_connector" \
	wait_until modparam_is kpatch_test_exit state 1
check "it has left the task list: /proc/$closer_pid is gone" \
	test ! -e "/proc/$closer_pid"

unpatch_trapped pre1 "the task"
check_transcript "kernel log names the function, the pid and the comm" <<EOF
% echo 'unpatch pre1' > control &
kpatch: unpatch 'pre1' refused: kpatch_test_exit_connector+0x_/0x_ [kpatch_test_exit] is on the stack of pid $closer_pid (sh)
EOF
check_eq "the task still sleeps in kpatch_test_exit_connector" 1 \
	"$(modparam kpatch_test_exit state)"
if grep -q '^pre1 ' "$KP_PATCHES"; then
	check_not "rmmod kpatch_test_exit refused" unload_mod kpatch_test_exit
else
	diag "pre1 is gone: no rmmod of kpatch_test_exit while the task is in it"
fi
kpatch_param retries "$retries"
retries=

if mod_loaded kpatch_test_exit; then
	exit_param release 1
	check "the task leaves kpatch_test_exit_connector" \
		wait_until modparam_is kpatch_test_exit state 2
	check "the task is dead" wait_until modparam_is kpatch_test_exit dead 1
	if grep -q '^pre1 ' "$KP_PATCHES"; then
		expect_ok unpatch pre1
	else
		diag "pre1 is unpatched already"
	fi
	check_patches "nothing patched"
	check "rmmod kpatch_test_exit succeeds" unload_mod kpatch_test_exit
	check "rmmod kpatch succeeds" unload_kpatch
else
	skip "release the task, unpatch, rmmod: kpatch_test_exit is gone already"
fi
check_no_splat

start_test "more exiting tasks than kpatch can record"
# kpatch's probes take their records from a free list, which a work item
# refills; the selftests' build of kpatch.ko lets kpatch_test_refill hold
# that work item back, so that exiting tasks can use the list up.  When
# the list runs low, the exit probe allocates records with GFP_ATOMIC,
# except on PREEMPT_RT: elsewhere the exiting processes make their
# allocations fail (fault injection, which the debug kernel has).
if [ "$RT" = 0 ] && { [ ! -d "$FAILSLAB" ] || [ ! -e /proc/self/make-it-fail ]; }; then
	skip "the exit probe allocates here, and no CONFIG_FAILSLAB makes that fail (the debug kernel has it)"
	exit 0
fi
if mod_loaded kpatch; then
	unpatch_all || bail "setup: unpatch everything"
	unload_kpatch || bail "setup: rmmod kpatch"
fi
KPATCH_KO=$KPATCH_HOOKS/kpatch.ko
load_kpatch || bail "setup: load the selftests' build of kpatch.ko"
KPATCH_MODDIR=$KPATCH_HOOKS/test_modules load_mod kpatch_test_refill ||
	bail "setup: load kpatch_test_refill"
mod_loaded kpatch_test_exit || load_mod kpatch_test_exit ||
	bail "setup: load kpatch_test_exit"
old=$(sym proc_exit_connector vmlinux) || bail "setup: find proc_exit_connector"
new=$(sym kpatch_test_exit_connector kpatch_test_exit) ||
	bail "setup: find kpatch_test_exit_connector"
set_param kpatch_test_refill hold 1
[ "$RT" = 1 ] || failslab_set || bail "setup: failslab set up ($FAILSLAB)"
n=$((RESERVE + 16))
# N processes hold a fifo open and wait for a line; their parent then
# becomes a sleep, which never reaps them.  So all their records are in
# use at once, and the free list runs dry.
rm -f "$KP_TMP/go"
mkfifo "$KP_TMP/go"
diag "% $n processes exit, unreaped"
sh -c '
	i=0
	while [ "$i" -lt "$2" ]; do
		(exec 3<>"$1"; [ "$3" = 1 ] || echo 1 >/proc/self/make-it-fail;
		 read -r _ <&3) &
		i=$((i + 1))
	done
	exec sleep 600' sh "$KP_TMP/go" "$n" "$RT" &
parent=$!
wait_until children "$n" true || bail "setup: $n processes"
seq "$n" >"$KP_TMP/go"
check "the $n processes have exited, unreaped" \
	wait_until children "$n" zombie
check "the refill of the free list is held back" \
	modparam_is kpatch_test_refill held Y
[ "$RT" = 1 ] || failslab_restore
log_mark
expect_refused ENOMEM patch lost "$old" "$new"
# and every update after it, until kpatch.ko is unloaded
expect_refused ENOMEM patch lost2 "$old" "$new"
check_transcript "the log says why, for each" <<-EOF
	% echo 'patch lost $old $new' > control
	kpatch: patch 'lost' refused: out of memory recording an exiting task earlier, kpatch cannot check every stack any more
	% echo 'patch lost2 $old $new' > control
	kpatch: patch 'lost2' refused: out of memory recording an exiting task earlier, kpatch cannot check every stack any more
EOF
check_eq "proc_exit_connector not patched: the next exit runs it" \
	"$(calls)" "$(sh -c : && calls)"
echo 0 >/sys/module/kpatch_test_refill/parameters/hold
kill "$parent"
wait "$parent" 2>/dev/null || :
parent=
check_no_splat
