#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-moving.sh - a user task in the way of an update is moved out of it,
# held at its return to user space until the write that moved it ends, and
# the update applies in that one write.  kpatch_test_move's read waits in
# kpatch_test_move_read_old() (replacement: _new) while "hold" is 1.  The
# module's own patch of the read, which it registers with
# kpatch_register() (its parameter "api"), has stop hooks that say which
# version is in effect, and the module counts an answer given by the
# version not in effect ("late": old code ran after the update took
# effect).  The readers are kpmove processes.
#
# - A reader asleep (interruptibly) in the old function: kpatch_register()
#   succeeds at once and the log says whom it moved; the read restarts,
#   waits in the new function, and returns its answer, "new", with no
#   error.  The same for kpatch_unregister() (asleep in the new function)
#   and for a kpatch_register() that replaces a patch of the control
#   file.  Never late.  Then the same for the first patch and unpatch
#   writes to the control file.
# - A poll(2): kpatch_test_move_hrtimeout() replaces the kernel's
#   schedule_hrtimeout_range_clock(), in which poll sleeps.  The first
#   write succeeds; the poll returns 0 after its whole timeout, with no
#   error; its restart sleeps in the new function.
# - An update that a task it cannot move is in the way of moves none:
#   with an interruptible and an uninterruptible reader in the way, the
#   patch (retries=0) fails with EBUSY and changes nothing, the log names
#   the second and says nothing of moving the first; both read the old
#   answer.
# - A reader in uninterruptible or killable sleep is not moved: EBUSY
#   after the retries, the task named as before, and no spurious wake-up.
# - A fatal signal ends a hold at once: a reader held while the try waits
#   for another one, moved but slow to come out, dies when killed.
# - With kpatch's parameter move=N, an interruptible sleeper refuses the
#   update as before.
# - A task that the gate catches inside __schedule() runs on: while a
#   patch waits 300 ms for the reader it moved ("linger"), three "kpnap"
#   processes block every millisecond, and a sched_switch probe calls a
#   function of the patch (kpatch_test_move_nap()) as each leaves its
#   runqueue; each napper ends when told to, and the probe calls the new
#   function.
# - The task that runs an update is not held by its own gate: a patch
#   that also replaces the kernel's finish_wait(), which the writer calls
#   while it waits for the task it moved, refused by an uninterruptible
#   reader, makes all its tries (retries=3) before it gives up.
# - The tasks a try moved are let go when the try ends: while the update
#   sleeps until its next try (refused: the reader it moved lingers 2 s in
#   the function, longer than a try waits for it), that reader is back in
#   its read; the update moves it again and applies at its second try.
# - A task that enters the function as the moved one comes out (woken by
#   it: "chain") is moved too: the patch applies in one write.
# - A task at the address of a moved task that was killed (a new reader
#   right after the kill, 4 rounds): moved like any, every patch applies.
# - A writer killed while it sleeps between tries applies nothing; nor
#   one killed as the task it moved comes out (the reader's wait, ended
#   by the move, sends it SIGKILL: "kill"), though that task is out.
# - An update of a function on the writer's own path (a
#   kpatch_register() of a patch of the function that calls it) is
#   refused and names the writer, never moved.
# - 1,000 readers asleep in the old function: one patch (retries=0)
#   applies, every read restarts into the new function.
# - A hot function: 8 processes (nice 10) call getpid(2), patched to
#   kpatch_test_move_getpid(), 3 times patched and unpatched: each write
#   succeeds, every answer is right.  (make bench measures 40 processes.)
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

MOD=kpatch_test_move
KPMOVE=${KPMOVE:-kpmove}
READ=/sys/kernel/debug/$MOD/read
CHAIN=/sys/kernel/debug/$MOD/chain
readers=
hot=

# moving_cleanup: let every reader go, stop the hot processes
moving_cleanup() {
	echo 0 >"/sys/module/$MOD/parameters/hold" 2>/dev/null
	echo N >"/sys/module/$MOD/parameters/nap" 2>/dev/null
	echo 0 >"/sys/module/$MOD/parameters/linger" 2>/dev/null
	: >"$KP_TMP/nap.stop"
	for _mc in $readers; do
		wait "$_mc" 2>/dev/null
	done
	readers=
	if [ -n "$hot" ]; then
		: >"$KP_TMP/hot.stop"
		wait "$hot" 2>/dev/null
		hot=
	fi
}
KP_CLEANUP_HOOK=moving_cleanup

setup_modules kpatch "$MOD"
msym() {
	sym "kpatch_test_move_$1" "$MOD" || bail "setup: find kpatch_test_move_$1"
}
old=$(msym read_old)
new=$(msym read_new)
sleeper=$(sym schedule_hrtimeout_range_clock vmlinux) ||
	bail "setup: find schedule_hrtimeout_range_clock"
sleeper_new=$(msym hrtimeout)
getpid=$(sym __do_sys_getpid vmlinux 2>/dev/null) ||
	getpid=$(sym __x64_sys_getpid vmlinux) || bail "setup: find getpid"
getpid_new=$(msym getpid)
retries=$(modparam kpatch retries)
delay=$(modparam kpatch retry_delay_ms)

mparam() {
	set_param "$MOD" "$1" "$2"
}

# reader NAME [FILE]: a kpmove reading FILE (the read file) in the
# background, its output in $KP_TMP/NAME; its pid in READER
reader() {
	log_command "kpmove read ${2:-$READ} > $1 &"
	"$KPMOVE" read "${2:-$READ}" >"$KP_TMP/$1" 2>&1 &
	READER=$!
	readers="$readers $READER"
}

sleeping_is() {
	modparam_is "$MOD" sleeping "$1"
}

# exited PID: the task has ended (a zombie, or reaped)
exited() {
	case $(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) in
	Z | '') return 0 ;;
	esac
	return 1
}

# asleep PID: the task is blocked (state S or D)
asleep() {
	case $(sed 's/^.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) in
	S | D) return 0 ;;
	esac
	return 1
}

# write CMD: write CMD to the control file with kpmove, which says how
# long the write(2) took; KP_RESULT is OK or the errno's name
write() {
	log_kp "$1"
	_w=$("$KPMOVE" write "$KP_CONTROL" "$1")
	diag "$_w ms"
	KP_RESULT=${_w%% *}
}

# release: let the readers out of the wait and wait until they are done
release() {
	mparam hold 0
	for _r in $readers; do
		wait "$_r"
	done
	readers=
}

# moved_in_log PID: the log says that an update moved PID
moved_in_log() {
	log_since_mark | grep -q "busy: moving .*pid $1 (kpmove)"
}

# answer NAME: what the reader NAME read, without the milliseconds
answer() {
	cut -d' ' -f1-2 "$KP_TMP/$1" | sed 's/ [0-9]*$//'
}

start_test "a reader asleep in the old function: kpatch_register() applies at once"
log_mark
mparam hold 1
reader r1
pid=$READER
check "the reader sleeps in kpatch_test_move_read_old" wait_until sleeping_is 1
check "kpatch_register() returns 0" mparam api 1
check "the reader is back in the wait, in the new function" \
	wait_until sleeping_is 1
check_eq "no answer yet" "old=0 new=0" "$(modparam "$MOD" answers)"
release
check_eq "the read returns the new function's answer, no error" new "$(answer r1)"
check_eq "the old function never answered" "old=0 new=1" "$(modparam "$MOD" answers)"
check_eq "nothing late" 0 "$(modparam "$MOD" late)"
check_transcript "the log says whom it moved, then the patch" "$MOD" <<EOF
% echo 1 > /sys/module/$MOD/parameters/hold
% kpmove read $READ > r1 &
% echo 1 > /sys/module/$MOD/parameters/api
kpatch: patch '$MOD' busy: moving 1 task out of the way: pid $pid (kpmove)
kpatch: tainting kernel with TAINT_LIVEPATCH
kpatch: patch '$MOD' enabled (1 function)
$MOD: kpatch_register() returned 0
% echo 0 > /sys/module/$MOD/parameters/hold
EOF
check_no_splat

start_test "a reader asleep in the new function: kpatch_unregister() applies at once"
log_mark
mparam hold 1
reader r2
pid=$READER
check "the reader sleeps in kpatch_test_move_read_new" wait_until sleeping_is 1
check "kpatch_unregister() returns 0" mparam api 0
release
check_eq "the read returns the old function's answer" old "$(answer r2)"
check_eq "answers" "old=1 new=1" "$(modparam "$MOD" answers)"
check_eq "nothing late" 0 "$(modparam "$MOD" late)"
check_transcript "the log says whom it moved, then the unpatch" "$MOD" <<EOF
% echo 1 > /sys/module/$MOD/parameters/hold
% kpmove read $READ > r2 &
% echo 0 > /sys/module/$MOD/parameters/api
kpatch: unpatch '$MOD' busy: moving 1 task out of the way: pid $pid (kpmove)
kpatch: patch '$MOD' removed
$MOD: kpatch_unregister() returned 0
% echo 0 > /sys/module/$MOD/parameters/hold
EOF
check_no_splat

# m2 comes from the control file, without hooks: nobody answers while it
# is in effect, and the stop hook of the replacing patch says "new".
start_test "a replace: kpatch_register() with replace applies at once"
log_mark
expect_ok patch m2 "$old" "$new"
mparam hold 1
reader r3
pid=$READER
check "the reader sleeps in kpatch_test_move_read_new" wait_until sleeping_is 1
check "kpatch_register() with replace returns 0" mparam api 2
release
check_eq "the read returns the new function's answer" new "$(answer r3)"
check_eq "nothing late" 0 "$(modparam "$MOD" late)"
check "kpatch_unregister() returns 0" mparam api 0
check_transcript "the log says whom it moved, then the replace" "$MOD" <<EOF
% echo 'patch m2 $old $new' > control
kpatch: patch 'm2' enabled (1 function)
% echo 1 > /sys/module/$MOD/parameters/hold
% kpmove read $READ > r3 &
% echo 2 > /sys/module/$MOD/parameters/api
kpatch: replace '$MOD' busy: moving 1 task out of the way: pid $pid (kpmove)
kpatch: patch 'm2' removed
kpatch: patch '$MOD' enabled (1 function)
$MOD: kpatch_register() returned 0
% echo 0 > /sys/module/$MOD/parameters/hold
% echo 0 > /sys/module/$MOD/parameters/api
kpatch: patch '$MOD' removed
$MOD: kpatch_unregister() returned 0
EOF
check_no_splat

# From here on the read is patched from the control file only, without
# the stop hooks that say which version is in effect: "late" is not read.
start_test "the same through the control file: the first patch and unpatch writes apply"
log_mark
answers=$(modparam "$MOD" answers)
mparam hold 1
reader r4
pid=$READER
check "the reader sleeps in kpatch_test_move_read_old" wait_until sleeping_is 1
write "patch m1 $old $new"
check_eq "patch m1 -> OK, the first write" OK "$KP_RESULT"
check "the reader is back in the wait, in the new function" \
	wait_until sleeping_is 1
check_eq "no answer yet" "$answers" "$(modparam "$MOD" answers)"
release
check_eq "the read returns the new function's answer, no error" new "$(answer r4)"
mparam hold 1
reader r5
pid5=$READER
check "the reader sleeps in kpatch_test_move_read_new" wait_until sleeping_is 1
write "unpatch m1"
check_eq "unpatch m1 -> OK, the first write" OK "$KP_RESULT"
release
check_eq "the read returns the old function's answer" old "$(answer r5)"
n_old=${answers#old=}
n_old=${n_old%% *}
check_eq "answers: one more of each" \
	"old=$((n_old + 1)) new=$((${answers##*=} + 1))" \
	"$(modparam "$MOD" answers)"
check_transcript "the log says whom each moved" <<EOF
% echo 1 > /sys/module/$MOD/parameters/hold
% kpmove read $READ > r4 &
% echo 'patch m1 $old $new' > control
kpatch: patch 'm1' busy: moving 1 task out of the way: pid $pid (kpmove)
kpatch: patch 'm1' enabled (1 function)
% echo 0 > /sys/module/$MOD/parameters/hold
% echo 1 > /sys/module/$MOD/parameters/hold
% kpmove read $READ > r5 &
% echo 'unpatch m1' > control
kpatch: unpatch 'm1' busy: moving 1 task out of the way: pid $pid5 (kpmove)
kpatch: patch 'm1' removed
% echo 0 > /sys/module/$MOD/parameters/hold
EOF
check_no_splat

start_test "a poll: the first patch write applies"
log_mark
calls=$(modparam "$MOD" hrtimeout_calls)
log_command "kpmove poll 3000 > p1 &"
"$KPMOVE" poll 3000 >"$KP_TMP/p1" 2>&1 &
poller=$!
check "the poll sleeps" wait_until asleep "$poller"
write "patch p1 $sleeper $sleeper_new"
check_eq "patch p1 -> OK, the first write" OK "$KP_RESULT"
wait "$poller"
check_eq "poll returns 0, no error" 0 "$(cut -d' ' -f1 "$KP_TMP/p1")"
check "poll waited its whole timeout" \
	test "$(cut -d' ' -f2 "$KP_TMP/p1")" -ge 3000
check "the new function ran" modparam_positive "$MOD" hrtimeout_calls
check "... for the poll too" test "$(modparam "$MOD" hrtimeout_calls)" -gt "$calls"
expect_ok unpatch p1
# Whoever else polls in the guest may be moved, or preempted for a moment:
# those lines are left out.
check_transcript -x "$(busy_re '(un)?patch' p1)" "the patch and the unpatch" <<EOF
% kpmove poll 3000 > p1 &
% echo 'patch p1 $sleeper $sleeper_new' > control
kpatch: patch 'p1' enabled (1 function)
% echo 'unpatch p1' > control
kpatch: patch 'p1' removed
EOF
check_grep "the poller was moved" "busy: moving .*pid $poller [(]kpmove[)]" \
	"$(log_since_mark)"
check_no_splat

start_test "an update that a task it cannot move is in the way of moves none"
log_mark
set_param kpatch retries 0
mparam hold 1
reader r6
check "the reader sleeps" wait_until sleeping_is 1
mparam sleep d
reader r7
pid7=$READER
check "the second reader sleeps, uninterruptibly" wait_until sleeping_is 2
save_state
write "patch c1 $old $new"
check_eq "patch c1 -> EBUSY" EBUSY "$KP_RESULT"
check_state_unchanged
release
mparam sleep s
check_eq "the moved reader read the old function's answer, no error" old \
	"$(answer r6)"
check_eq "the other one too" old "$(answer r7)"
check_transcript "the log: the second reader named, the first not moved" <<EOF
% echo 0 > /sys/module/kpatch/parameters/retries
% echo 1 > /sys/module/$MOD/parameters/hold
% kpmove read $READ > r6 &
% echo d > /sys/module/$MOD/parameters/sleep
% kpmove read $READ > r7 &
% echo 'patch c1 $old $new' > control
kpatch: patch 'c1' refused: kpatch_test_move_read_old+0x_/0x_ [$MOD] is on the stack of pid $pid7 (kpmove)
% echo 0 > /sys/module/$MOD/parameters/hold
% echo s > /sys/module/$MOD/parameters/sleep
EOF
set_param kpatch retries "$retries"
check_no_splat

for kind in d:uninterruptible k:killable; do
	start_test "a reader in $(echo "$kind" | cut -d: -f2) sleep stays in the way"
	log_mark
	mparam sleep "${kind%%:*}"
	mparam hold 1
	reader r8
	pid=$READER
	check "the reader sleeps" wait_until sleeping_is 1
	wakeups=$(modparam "$MOD" wakeups)
	save_state
	write "patch u1 $old $new"
	check_eq "patch u1 -> EBUSY" EBUSY "$KP_RESULT"
	check_state_unchanged
	check_eq "no wake-up of the reader" "$wakeups" "$(modparam "$MOD" wakeups)"
	check "the reader still sleeps" sleeping_is 1
	release
	check_eq "the read returns the old function's answer" old "$(answer r8)"
	mparam sleep s
	check_transcript "the log names the reader, at every try" <<EOF
% echo ${kind%%:*} > /sys/module/$MOD/parameters/sleep
% echo 1 > /sys/module/$MOD/parameters/hold
% kpmove read $READ > r8 &
% echo 'patch u1 $old $new' > control
$(refused_lines patch u1 "kpatch_test_move_read_old+0x_/0x_ [$MOD] is on the stack of pid $pid (kpmove)")
% echo 0 > /sys/module/$MOD/parameters/hold
% echo s > /sys/module/$MOD/parameters/sleep
EOF
	check_no_splat
done

start_test "a fatal signal ends a hold at once"
log_mark
set_param kpatch retries 100
set_param kpatch retry_delay_ms 100
# the second reader, once moved, stays 5 s in the kernel ("linger"): the
# try waits for it, 8 rounds of 500 ms, and holds the first meanwhile
mparam hold 1
reader r9
held=$READER
check "the first reader sleeps" wait_until sleeping_is 1
mparam linger 5000
reader r10
check "the second reader sleeps" wait_until sleeping_is 2
mparam linger 0
log_kp "patch f1 $old $new" "&"
"$KPMOVE" write "$KP_CONTROL" "patch f1 $old $new" >"$KP_TMP/f1" 2>&1 &
writer=$!
check "the first reader is moved" wait_until moved_in_log "$held"
log_command "kill -9 $held"
kill -9 "$held"
check "it is gone while the write still waits" wait_until test ! -e "/proc/$held"
check "the write still waits" test -e "/proc/$writer"
wait "$writer"
check_eq "patch f1 -> OK, once the other reader came out" OK \
	"$(cut -d' ' -f1 "$KP_TMP/f1")"
release
expect_ok unpatch f1
set_param kpatch retries "$retries"
set_param kpatch retry_delay_ms "$delay"
check_no_splat

start_test "move=N: an interruptible sleeper stays in the way"
log_mark
set_param kpatch move N
set_param kpatch retries 0
mparam hold 1
reader r11
pid=$READER
check "the reader sleeps" wait_until sleeping_is 1
save_state
write "patch n1 $old $new"
check_eq "patch n1 -> EBUSY" EBUSY "$KP_RESULT"
check_state_unchanged
release
check_eq "the read returns the old function's answer" old "$(answer r11)"
set_param kpatch move Y
set_param kpatch retries "$retries"
check_transcript "the log names the reader" <<EOF
% echo N > /sys/module/kpatch/parameters/move
% echo 0 > /sys/module/kpatch/parameters/retries
% echo 1 > /sys/module/$MOD/parameters/hold
% kpmove read $READ > r11 &
% echo 'patch n1 $old $new' > control
kpatch: patch 'n1' refused: kpatch_test_move_read_old+0x_/0x_ [$MOD] is on the stack of pid $pid (kpmove)
% echo 0 > /sys/module/$MOD/parameters/hold
% echo Y > /sys/module/kpatch/parameters/move
% echo $retries > /sys/module/kpatch/parameters/retries
EOF
check_no_splat

start_test "a task the gate catches inside __schedule() runs on"
log_mark
nap_old=$(msym nap)
nap_new=$(msym nap_new)
rm -f "$KP_TMP/nap.stop"
nappers=
for i in 1 2 3; do
	log_command "kpmove nap nap.stop > nap$i &"
	"$KPMOVE" nap "$KP_TMP/nap.stop" >"$KP_TMP/nap$i" 2>&1 &
	nappers="$nappers $!"
done
mparam nap Y
check "the probe calls kpatch_test_move_nap()" \
	wait_until modparam_positive "$MOD" nap_calls
mparam linger 300
mparam hold 1
reader r12
check "the reader sleeps" wait_until sleeping_is 1
write "patch g1 $old $new $nap_old $nap_new"
check_eq "patch g1 -> OK" OK "$KP_RESULT"
check "the probe calls the new function" \
	wait_until modparam_positive "$MOD" nap_new_calls
release
mparam linger 0
check_eq "the read returns the new function's answer" new "$(answer r12)"
log_command "touch nap.stop"
: >"$KP_TMP/nap.stop"
for p in $nappers; do
	# a task lost off its runqueue would never end: never wait for one
	if check "napper $p ends" wait_until exited "$p"; then
		wait "$p"
	fi
done
mparam nap N
expect_ok unpatch g1
check_no_splat

start_test "the task that runs an update is not held by its own gate"
log_mark
if grep -qx finish_wait "$TRACEFS/available_filter_functions"; then
	fw_old=$(sym finish_wait vmlinux) || bail "setup: find finish_wait"
	fw_new=$(msym finish_wait)
	set_param kpatch retries 3
	mparam hold 1
	reader r13
	check "the first reader sleeps" wait_until sleeping_is 1
	mparam sleep d
	reader r14
	check "the second reader sleeps, uninterruptibly" wait_until sleeping_is 2
	write "patch w1 $old $new $fw_old $fw_new"
	check_eq "patch w1 -> EBUSY" EBUSY "$KP_RESULT"
	mparam sleep s
	release
	check_grep "it made every try, the writer never held" \
		"patch 'w1' refused after 4 tries" "$(log_since_mark)"
	set_param kpatch retries "$retries"
	check_no_splat
else
	skip "finish_wait() cannot be traced on this kernel"
fi

start_test "an update of a function on the writer's own path names the writer"
log_mark
set_param kpatch retries 0
log_command "kpmove write /sys/module/$MOD/parameters/api 3 > wr &"
"$KPMOVE" write "/sys/module/$MOD/parameters/api" 3 >"$KP_TMP/wr" 2>&1 &
writer=$!
wait "$writer"
check_eq "kpatch_register() -> EBUSY" EBUSY "$(cut -d' ' -f1 "$KP_TMP/wr")"
check_transcript "the writer named, not moved" <<EOF
% echo 0 > /sys/module/kpatch/parameters/retries
% kpmove write /sys/module/$MOD/parameters/api 3 > wr &
kpatch: patch '$MOD' refused: kpatch_test_move_register+0x_/0x_ [$MOD] is on the stack of pid $writer (kpmove)
EOF
set_param kpatch retries "$retries"
check_no_splat

start_test "a task moved by an update that waits between its tries is let go meanwhile"
log_mark
set_param kpatch retries 1
set_param kpatch retry_delay_ms 5000
mparam hold 1
mparam linger 2000
reader r15
moved=$READER
check "a reader sleeps in read" wait_until sleeping_is 1
log_kp "patch da $old $new" "&"
"$KPMOVE" write "$KP_CONTROL" "patch da $old $new" >"$KP_TMP/da" 2>&1 &
da=$!
check "da moved the first reader, and waits between its tries" \
	wait_until sh -c "dmesg | grep -q \"patch 'da' busy (try 1 of 2\""
# the reader read "linger" as it entered its wait: this is for the next
mparam linger 0
check "the log named the reader it moved" moved_in_log "$moved"
# held until the try ended, then its read restarted: in the wait again,
# while da sleeps, not after da's last try
check "the moved reader is back in the wait" wait_until sleeping_is 1
check "... while da still waits" test ! -s "$KP_TMP/da"
wait "$da"
check_eq "da -> OK at its second try" OK "$(cut -d' ' -f1 "$KP_TMP/da")"
release
check_eq "the moved reader got the new function's answer" new "$(answer r15)"
expect_ok unpatch da
set_param kpatch retries "$retries"
set_param kpatch retry_delay_ms "$delay"
check_no_splat

start_test "a task that enters the function as a moved one comes out is moved too"
log_mark
set_param kpatch retries 0
mparam chained N
mparam linger 300
mparam hold 1
reader r18
check "the reader sleeps" wait_until sleeping_is 1
mparam linger 0
reader r19 "$CHAIN"
write "patch ch1 $old $new"
check_eq "patch ch1 -> OK, in one write" OK "$KP_RESULT"
release
check_eq "the first read returns the new function's answer" new "$(answer r18)"
check_eq "the second read too" new "$(answer r19)"
expect_ok unpatch ch1
set_param kpatch retries "$retries"
check_no_splat

start_test "a task at the address of a moved task that exited is moved too"
log_mark
# A try waits 500 ms for the tasks it moved; a guest starved by its host
# can take longer, and that try is refused: retries make the check one of
# kpatch, not of the host's load.  A task at a recycled address that was
# not moved would sleep in the way through every try.
set_param kpatch retries 3
refused=0
for round in 1 2 3 4; do
	mparam hold 1
	reader k1
	victim=$READER
	check "round $round: a reader sleeps" wait_until sleeping_is 1
	mparam linger 450
	reader k2
	check "round $round: a slow one too" wait_until sleeping_is 2
	mparam linger 0
	log_kp "patch k$round $old $new" "&"
	"$KPMOVE" write "$KP_CONTROL" "patch k$round $old $new" >"$KP_TMP/k" 2>&1 &
	writer=$!
	check "round $round: the readers are moved" wait_until moved_in_log "$victim"
	log_command "kill -9 $victim"
	kill -9 "$victim"
	wait "$victim" 2>/dev/null
	"$KPMOVE" poll 40 >/dev/null
	for i in 1 2 3 4 5 6 7 8; do
		reader "n$round$i"
	done
	wait "$writer"
	[ "$(cut -d' ' -f1 "$KP_TMP/k")" = OK ] || refused=$((refused + 1))
	release
	if grep -q "^k$round " "$KP_PATCHES"; then
		expect_ok unpatch "k$round"
	fi
done
check_eq "every patch applied" 0 "$refused"
set_param kpatch retries "$retries"
check_no_splat

start_test "a writer killed between tries applies nothing"
log_mark
set_param kpatch retries 100
set_param kpatch retry_delay_ms 10000
mparam sleep d
mparam hold 1
reader r20
check "the reader sleeps, uninterruptibly" wait_until sleeping_is 1
mparam sleep s
log_kp "patch x1 $old $new" "&"
"$KPMOVE" write "$KP_CONTROL" "patch x1 $old $new" >"$KP_TMP/x1" 2>&1 &
writer=$!
# retries=100 with 10 s between tries: 7 tries, the cap of 60 s of sleeps
check "the writer sleeps between tries" \
	wait_until sh -c "dmesg | grep -q \"patch 'x1' busy (try 1 of 7\""
release
log_command "kill -9 $writer"
kill -9 "$writer"
wait "$writer" 2>/dev/null
check "the killed writer's patch is not enabled" \
	sh -c "! grep -q '^x1 ' $KP_PATCHES"
if grep -q '^x1 ' "$KP_PATCHES"; then
	expect_ok unpatch x1
fi
set_param kpatch retries "$retries"
set_param kpatch retry_delay_ms "$delay"
check_no_splat

start_test "a writer killed as the task it moved comes out applies nothing"
log_mark
set_param kpatch retries 0
mparam hold 1
reader r21
check "the reader sleeps" wait_until sleeping_is 1
# the reader's wait, ended by the move, sends the writer SIGKILL: the
# writer is killed in its wait for the task, which is then out
log_kp "patch x2 $old $new"
st=0
sh -c "echo \$\$ >/sys/module/$MOD/parameters/kill &&
	exec $KPMOVE write $KP_CONTROL 'patch x2 $old $new'" >"$KP_TMP/x2" 2>&1 ||
	st=$?
diag "writer: exit status $st, output: $(cat "$KP_TMP/x2")"
check_eq "the writer was killed (SIGKILL)" 137 "$st"
check "the reader was moved" moved_in_log "$READER"
check "the killed writer's patch is not enabled" \
	sh -c "! grep -q '^x2 ' $KP_PATCHES"
if grep -q '^x2 ' "$KP_PATCHES"; then
	expect_ok unpatch x2
fi
release
check_eq "the reader read the old function's answer" old "$(answer r21)"
mparam kill 0
set_param kpatch retries "$retries"
check_no_splat

start_test "1,000 readers asleep in the function: one write applies"
log_mark
set_param kpatch retries 0
mparam hold 1
log_command "kpmove read $READ > m\$i & (1,000 times)"
mkdir -p "$KP_TMP/many"
i=0
while [ $i -lt 1000 ]; do
	"$KPMOVE" read "$READ" >"$KP_TMP/many/$i" 2>&1 &
	readers="$readers $!"
	i=$((i + 1))
done
check "the readers sleep" wait_until sleeping_is 1000
write "patch m1 $old $new"
check_eq "patch m1 -> OK, in one write" OK "$KP_RESULT"
release
check_eq "every read restarted into the new function" 1000 \
	"$(cat "$KP_TMP"/many/* | grep -c '^new ')"
check_eq "... and none returned an error" 0 \
	"$(cat "$KP_TMP"/many/* | grep -vc '^new ')"
expect_ok unpatch m1
rm -rf "$KP_TMP/many"
set_param kpatch retries "$retries"
check_no_splat

start_test "a hot function: 8 processes call getpid"
log_mark
rm -f "$KP_TMP/hot.stop"
log_command "kpmove hot 8 hot.stop 10 &"
"$KPMOVE" hot 8 "$KP_TMP/hot.stop" 10 >"$KP_TMP/hot.out" 2>&1 &
hot=$!
for round in 1 2 3; do
	write "patch hot$round $getpid $getpid_new"
	check_eq "patch hot$round -> OK" OK "$KP_RESULT"
	write "unpatch hot$round"
	check_eq "unpatch hot$round -> OK" OK "$KP_RESULT"
done
log_command "touch hot.stop"
: >"$KP_TMP/hot.stop"
wait "$hot"
hot=
diag "$(cat "$KP_TMP/hot.out")"
check_grep "every getpid answered right" 'wrong=0$' "$(cat "$KP_TMP/hot.out")"
check "the new function ran" modparam_positive "$MOD" getpid_calls
# Which caller is preempted in getpid when is the scheduler's: the lines
# of the tasks moved and of the tries are left out.
check_transcript -x "$(busy_re '(un)?patch' 'hot[123]')" "patched and unpatched, three times" <<EOF
% kpmove hot 8 hot.stop 10 &
% echo 'patch hot1 $getpid $getpid_new' > control
kpatch: patch 'hot1' enabled (1 function)
% echo 'unpatch hot1' > control
kpatch: patch 'hot1' removed
% echo 'patch hot2 $getpid $getpid_new' > control
kpatch: patch 'hot2' enabled (1 function)
% echo 'unpatch hot2' > control
kpatch: patch 'hot2' removed
% echo 'patch hot3 $getpid $getpid_new' > control
kpatch: patch 'hot3' enabled (1 function)
% echo 'unpatch hot3' > control
kpatch: patch 'hot3' removed
% touch hot.stop
EOF
check_no_splat
