#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-holds.sh - a user task that an update moved out of its way and
# holds (see test-moving.sh), where the hold meets what the task does
# itself.  kpatch_test_hold's read waits in kpatch_test_hold_wait_old()
# (replacement: _new) while "hold" is 1; what else the module makes a
# reader do is in its header.  The reader is a kpmove process; each update
# is one write with retries=0, but where said.
#
# - A kick that runs after the hold it was queued behind (the debug
#   kernel's KASAN sees it; elsewhere a use after free goes unnoticed):
#   the reader's wait, ended by the move (the fake signal), queues a task
#   work of its own, which the kernel runs before kpatch's hold (newest
#   first) and which waits in the old function again: the next run finds
#   the reader there, its hold taken off its list but not run yet, and
#   kicks it (the fake signal again, a task work of kpatch's queued after
#   the hold).  The work, its wait ended by the kick, then waits out of
#   the way, and the next run applies the patch: OK in one write.  Only
#   then does the test let the work go on: the hold, deferred once, runs
#   again, now before the kick, and drops its reference to the try's
#   gate, the last one but the kick's own (without that one, the kick runs
#   in freed memory).  The read answers "new", the log says whom the patch
#   moved, and no splat.
# - A held task still in the way: a patch that also changes
#   task_work_run(), in which every hold runs, with retries=1 (1 s
#   apart).  The first try moves the reader, finds it held in
#   task_work_run(), says so once ("moving stops") and fails; the second
#   moves nothing, as with move=N, and is refused by the reader asleep in
#   the old function again: the log, whole.  EBUSY, nothing changed, the
#   read answers "old".
# - A task that left the way before it was moved (the selftests' build of
#   kpatch.ko, where kpatch_test_hold installs its test hook): at the end
#   of the run that lists the reader asleep in the old function (the
#   first after which kpatch pins it), the hook lets the reader out of
#   that wait and waits until it sleeps again, interruptibly, in
#   kpatch_hold_away(), in no function of the update, a sleep a signal
#   ends with EINTR (as it ends epoll_wait(2)); only then does kpatch move
#   it.  kpatch looks again before the fake signal: the reader gets its
#   hold without one.  The patch applies in one write, the reader sleeps
#   on, and its read, once the test ends that sleep, answers "old" with no
#   EINTR; the log says what the hook did, whom the patch moved, and the
#   patch.
# - A task woken between kpatch's last look and its fake signal gets no
#   EINTR: the reader reads once, then epoll_wait(2)s 1 s on nothing
#   (kpmove readpoll), on CPU 1, the writer on CPU 0.  A kprobe on
#   task_work_add(), armed for the reader, stands in for a writer
#   preempted after its look at the reader asleep in the way: at kpatch's
#   first task work with TWA_SIGNAL for the reader, it lets the reader out
#   of its wait and holds the writer back until the reader sleeps again,
#   in kpatch's hold (queued before the signal: the reader is held at its
#   return to user space, before any other call) or, were the hold queued
#   only with the signal, in its epoll_wait(), which the signal ends with
#   EINTR.  The kprobe fired once (the window was there); the patch
#   applies in one write; the read answers "old" and epoll_wait() returns
#   0 after its full time; the log says where the kprobe found the
#   reader, whom the patch moved, and the patch.
#
# The cases wait for conditions (wait_until, the hook's wait, the
# kprobe's); from the clock they take kpatch's own: the reader, woken on a
# guest with nothing else to run, reaches its next wait well within a
# round of kpatch (KPATCH_MOVE_WAIT_MS, 500 ms) and within the retry delay
# (1 s); the kprobe waits 2 s at most (delay_ms).
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

MOD=kpatch_test_hold
KPMOVE=${KPMOVE:-kpmove}
READ=/sys/kernel/debug/$MOD/read
KPATCH_HOOKS=${KPATCH_HOOKS:-/kpatch/hooks}
readers=

# holds_cleanup: let every reader and its task work go
holds_cleanup() {
	for _hc in armed=N hold=0 work=N stay=N away=N release=N; do
		echo "${_hc#*=}" 2>/dev/null >"/sys/module/$MOD/parameters/${_hc%%=*}"
	done
	for _hc in $readers; do
		wait "$_hc" 2>/dev/null
	done
	readers=
}
KP_CLEANUP_HOOK=holds_cleanup

setup_modules kpatch "$MOD"
hsym() {
	sym "kpatch_test_hold_$1" "$MOD" || bail "setup: find kpatch_test_hold_$1"
}
old=$(hsym wait_old)
new=$(hsym wait_new)
retries=$(modparam kpatch retries)
delay=$(modparam kpatch retry_delay_ms)

mparam() {
	set_param "$MOD" "$1" "$2"
}

sleeping_is() {
	modparam_is "$MOD" sleeping "$1"
}

# reader NAME: a kpmove reading the read file in the background, its
# output in $KP_TMP/NAME; its pid in READER
reader() {
	log_command "kpmove read $READ > $1 &"
	"$KPMOVE" read "$READ" >"$KP_TMP/$1" 2>&1 &
	READER=$!
	readers="$readers $READER"
}

# write CMD: write CMD to the control file with kpmove, which says how
# long the write(2) took; KP_RESULT is OK or the errno's name
write() {
	log_kp "$1"
	_w=$("$KPMOVE" write "$KP_CONTROL" "$1")
	diag "$_w ms"
	KP_RESULT=${_w%% *}
}

# readers_done: wait until the readers are done
readers_done() {
	for _r in $readers; do
		wait "$_r"
	done
	readers=
}

# answer NAME: what the reader NAME read, without the milliseconds
answer() {
	cut -d' ' -f1-2 "$KP_TMP/$1" | sed 's/ [0-9]*$//'
}

start_test "a kick queued behind a hold that runs first"
log_mark
set_param kpatch retries 0
mparam hold 1
mparam work Y
mparam stay Y
reader r1
pid=$READER
check "the reader sleeps in kpatch_test_hold_wait_old" wait_until sleeping_is 1
write "patch h1 $old $new"
check_eq "patch h1 -> OK, in one write" OK "$KP_RESULT"
check "the task work's wait in the old function was ended by the kick" \
	wait_until modparam_is "$MOD" kicked 1
# The try is over, its reference to the gate dropped: the task work goes
# on, then the hold, then the kick.
mparam stay N
check "the task work ran to its end" wait_until modparam_is "$MOD" worked 1
mparam hold 0
readers_done
check_eq "the read restarted in the new function: its answer, no error" new \
	"$(answer r1)"
check_transcript "the log says whom it moved, then the patch" "$MOD" <<EOF
% echo 0 > /sys/module/kpatch/parameters/retries
% echo 1 > /sys/module/$MOD/parameters/hold
% echo Y > /sys/module/$MOD/parameters/work
% echo Y > /sys/module/$MOD/parameters/stay
% kpmove read $READ > r1 &
% echo 'patch h1 $old $new' > control
kpatch: patch 'h1' busy: moving 1 task out of the way: pid $pid (kpmove)
kpatch: tainting kernel with TAINT_LIVEPATCH
kpatch: patch 'h1' enabled (1 function)
% echo N > /sys/module/$MOD/parameters/stay
% echo 0 > /sys/module/$MOD/parameters/hold
EOF
expect_ok unpatch h1
set_param kpatch retries "$retries"
check_no_splat

start_test "a held task still in the way stops the moving, once"
if grep -qx task_work_run "$TRACEFS/available_filter_functions"; then
	twr=$(sym task_work_run vmlinux) || bail "setup: find task_work_run"
	twr_new=$(hsym task_work_run)
	exited=$(sym work_exited vmlinux) || bail "setup: find work_exited"
	mparam work_exited "0x$exited"
	log_mark
	set_param kpatch retries 1
	set_param kpatch retry_delay_ms 1000
	mparam hold 1
	reader r2
	pid=$READER
	check "the reader sleeps in kpatch_test_hold_wait_old" \
		wait_until sleeping_is 1
	save_state
	write "patch h2 $old $new $twr $twr_new"
	check_eq "patch h2 -> EBUSY" EBUSY "$KP_RESULT"
	check_state_unchanged
	mparam hold 0
	readers_done
	check_eq "the read returns the old function's answer, no error" old \
		"$(answer r2)"
	check_transcript "moved once, held in task_work_run(), said once; not moved again" "$MOD" <<EOF
% echo 1 > /sys/module/kpatch/parameters/retries
% echo 1000 > /sys/module/kpatch/parameters/retry_delay_ms
% echo 1 > /sys/module/$MOD/parameters/hold
% kpmove read $READ > r2 &
% echo 'patch h2 $old $new $twr $twr_new' > control
kpatch: patch 'h2' busy: moving 1 task out of the way: pid $pid (kpmove)
kpatch: patch 'h2': moving stops: pid $pid (kpmove) is held out of the way, yet at task_work_run+0x_/0x_: the update changes code the hold runs in
kpatch: patch 'h2' busy (try 1 of 2, again in 1000 ms): task_work_run+0x_/0x_ is on the stack of pid $pid (kpmove)
kpatch: patch 'h2' refused after 2 tries: kpatch_test_hold_wait_old+0x_/0x_ [$MOD] is on the stack of pid $pid (kpmove)
% echo 0 > /sys/module/$MOD/parameters/hold
EOF
	set_param kpatch retries "$retries"
	set_param kpatch retry_delay_ms "$delay"
	check_no_splat
else
	skip "task_work_run() cannot be traced on this kernel"
fi

start_test "a task that left the way before it was moved gets no signal"
# The selftests' build of kpatch.ko and of this module, which installs
# the test hook there.
unpatch_all || bail "setup: unpatch everything"
unload_mod "$MOD" || bail "setup: rmmod $MOD"
unload_kpatch || bail "setup: rmmod kpatch"
KPATCH_KO=$KPATCH_HOOKS/kpatch.ko
KPATCH_MODDIR=$KPATCH_HOOKS/test_modules
setup_modules kpatch "$MOD"
old=$(hsym wait_old)
new=$(hsym wait_new)
log_mark
set_param kpatch retries 0
mparam hold 1
mparam away Y
reader r3
pid=$READER
check "the reader sleeps in kpatch_test_hold_wait_old" wait_until sleeping_is 1
mparam release Y
write "patch h3 $old $new"
check_eq "patch h3 -> OK, in one write" OK "$KP_RESULT"
check "the reader sleeps on in kpatch_hold_away()" \
	modparam_is "$MOD" away_sleeping 1
# (should the hook not have acted, the reader is let go all the same)
check "the hook acted" modparam_is "$MOD" release N || mparam hold 0
mparam away N
readers_done
check_eq "the read returns the old function's answer, no EINTR" old \
	"$(answer r3)"
check_eq "no signal ended its sleep in kpatch_hold_away()" 0 \
	"$(modparam "$MOD" interrupted)"
check_transcript "the hook let it go, then kpatch moved it, and patched" "$MOD" <<EOF
% echo 0 > /sys/module/kpatch/parameters/retries
% echo 1 > /sys/module/$MOD/parameters/hold
% echo Y > /sys/module/$MOD/parameters/away
% kpmove read $READ > r3 &
% echo Y > /sys/module/$MOD/parameters/release
% echo 'patch h3 $old $new' > control
$MOD: a run listed the reader: hold 0; pid $pid left the way, asleep in kpatch_hold_away()
kpatch: patch 'h3' busy: moving 1 task out of the way: pid $pid (kpmove)
kpatch: tainting kernel with TAINT_LIVEPATCH
kpatch: patch 'h3' enabled (1 function)
% echo N > /sys/module/$MOD/parameters/away
EOF
expect_ok unpatch h3
set_param kpatch retries "$retries"
check_no_splat

start_test "a task woken between kpatch's last look and its fake signal gets no EINTR"
ms=1000
log_mark
set_param kpatch retries 0
mparam hold 1
log_command "taskset -c 1 kpmove readpoll $READ $ms > r4 &"
taskset -c 1 "$KPMOVE" readpoll "$READ" "$ms" >"$KP_TMP/r4" 2>&1 &
pid=$!
readers="$readers $pid"
check "the reader sleeps in kpatch_test_hold_wait_old" wait_until sleeping_is 1
mparam victim "$pid"
mparam armed Y
log_kp "patch h4 $old $new" "(on CPU 0)"
_w=$(taskset -c 0 "$KPMOVE" write "$KP_CONTROL" "patch h4 $old $new")
diag "$_w ms"
check_eq "patch h4 -> OK, in one write" OK "${_w%% *}"
# (should the kprobe not have fired, the reader is let go all the same)
check_eq "the kprobe held back kpatch's fake signal for the reader, once" 1 \
	"$(modparam "$MOD" fired)" || { mparam armed N; mparam hold 0; }
readers_done
diag "$(cat "$KP_TMP/r4")"
check_eq "the read ends normally, with the old function's answer" old \
	"$(sed -n 's/^read //p' "$KP_TMP/r4" | sed 's/ [0-9]*$//')"
check_eq "its epoll_wait(), out of the way, returns 0: no EINTR" 0 \
	"$(sed -n 's/^epoll_wait //p' "$KP_TMP/r4" | sed 's/ [0-9]*$//')"
waited=$(sed -n 's/^epoll_wait .* \([0-9][0-9]*\)$/\1/p' "$KP_TMP/r4")
check "its epoll_wait() waits its full $ms ms" [ "${waited:-0}" -ge "$ms" ]
check_transcript "the kprobe found the reader held, then kpatch moved it, and patched" "$MOD" <<EOF
% echo 0 > /sys/module/kpatch/parameters/retries
% echo 1 > /sys/module/$MOD/parameters/hold
% taskset -c 1 kpmove readpoll $READ $ms > r4 &
% echo $pid > /sys/module/$MOD/parameters/victim
% echo Y > /sys/module/$MOD/parameters/armed
% echo 'patch h4 $old $new' > control (on CPU 0)
$MOD: kpatch's fake signal for pid $pid, held back: hold 0; the reader is held before any other call
kpatch: patch 'h4' busy: moving 1 task out of the way: pid $pid (kpmove)
kpatch: patch 'h4' enabled (1 function)
EOF
expect_ok unpatch h4
set_param kpatch retries "$retries"
check_no_splat
