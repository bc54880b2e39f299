#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-busy.sh - the stack check.  kpatch_test_busy's kthread
# "kpatch_busy" sleeps inside kpatch_test_busy_fn(); patching that
# function fails with EBUSY, changes nothing, and logs one line per try
# naming the function and the task (kpatch tries "retries" more times,
# "retry_delay_ms" apart).  A patch that includes it among other
# functions fails as a whole.  A thread that leaves the function while
# kpatch retries lets the patch through.  Once the thread has left the
# function the same patch applies, and the thread's next call runs the
# new function.  A thread that enters the function after kpatch walked
# the sleeping tasks' stacks, just before stop_machine(), is caught by
# the check inside stop_machine().  A task in the way whose comm has a
# newline (kpatch_test_hooks's sleeper, named so) is named on one line,
# the newline escaped.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

setup_modules kpatch kpatch_test_target kpatch_test_new kpatch_test_busy
fn=$(sym kpatch_test_busy_fn kpatch_test_busy) || bail "setup: find kpatch_test_busy_fn"
fn_new=$(sym kpatch_test_busy_fn_new kpatch_test_busy) ||
	bail "setup: find kpatch_test_busy_fn_new"
a=$(sym kpatch_test_value_a kpatch_test_target) || bail "setup: find kpatch_test_value_a"
a1=$(sym kpatch_test_value_a_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v1"
wait_until modparam_is kpatch_test_busy state 1 ||
	bail "setup: kpatch_busy thread waits in kpatch_test_busy_fn"
pid=$(modparam kpatch_test_busy pid)

# busy_param NAME VALUE: write a kpatch_test_busy parameter
busy_param() {
	set_param kpatch_test_busy "$1" "$2"
}

# kpatch_param NAME VALUE: write a kpatch parameter (they are back to
# their defaults when the next script loads kpatch.ko)
kpatch_param() {
	set_param kpatch "$1" "$2"
}

# log_has TEXT: the kernel log since the last mark has a line with TEXT
log_has() {
	log_since_mark | grep -qF -- "$1"
}

# count_lines TEXT ERE: the number of lines of TEXT that match ERE
count_lines() {
	printf '%s\n' "$1" | grep -cE -- "$2"
}

retries=$(modparam kpatch retries)
delay=$(modparam kpatch retry_delay_ms)
tries=$((retries + 1))

# busy_log NAME: the log lines of patch NAME refused because the
# kpatch_busy thread sleeps in kpatch_test_busy_fn: one per try, $tries
# tries $delay ms apart (check_transcript reads "+0x_/0x_" as any %pS
# offset)
busy_log() {
	refused_lines patch "$1" \
		"kpatch_test_busy_fn+0x_/0x_ [kpatch_test_busy] is on the stack of pid $pid (kpatch_busy)"
}

start_test "function on a task's stack"
check_eq "precondition: the thread is kpatch_busy" kpatch_busy \
	"$(cat "/proc/$pid/comm" 2>&1)"
diag "kpatch tries $tries times, $delay ms apart"
log_mark
expect_refused EBUSY patch busy1 "$fn" "$fn_new"
msgs=$(log_since_mark)
diag "kernel log:" "$msgs"
check_grep "kernel log names the function and the task" \
	"kpatch_test_busy_fn[+].*pid $pid \\(kpatch_busy\\)|pid $pid \\(kpatch_busy\\).*kpatch_test_busy_fn[+]" \
	"$msgs"
check_eq "one log line per try names the task" "$tries" \
	"$(count_lines "$msgs" "pid $pid \\(kpatch_busy\\)")"
check_eq "all tries but the last say another one follows" "$retries" \
	"$(count_lines "$msgs" "patch 'busy1' busy \\(try [0-9]+ of $tries, again in $delay ms\\): kpatch_test_busy_fn[+]")"
check_grep "the last try says the patch is refused" \
	"patch 'busy1' refused after $tries tries: kpatch_test_busy_fn[+]" "$msgs"
check_eq "thread still in kpatch_test_busy_fn" 1 "$(modparam kpatch_test_busy state)"
check_eq "new function never ran" 0 "$(modparam kpatch_test_busy new_calls)"
check_transcript "the log has these lines, and no others" <<EOF
% echo 'patch busy1 $fn $fn_new' > control
$(busy_log busy1)
EOF
check_no_splat

start_test "no retries"
kpatch_param retries 0
log_mark
expect_refused EBUSY patch busy0 "$fn" "$fn_new"
msgs=$(log_since_mark)
diag "kernel log:" "$msgs"
check_eq "exactly one log line names the task" 1 \
	"$(count_lines "$msgs" "pid $pid \\(kpatch_busy\\)")"
check_grep "it says the patch is refused" \
	"patch 'busy0' refused: kpatch_test_busy_fn[+].*pid $pid \\(kpatch_busy\\)" "$msgs"
check_transcript "the log has this line, and no others" <<EOF
% echo 'patch busy0 $fn $fn_new' > control
kpatch: patch 'busy0' refused: kpatch_test_busy_fn+0x_/0x_ [kpatch_test_busy] is on the stack of pid $pid (kpatch_busy)
EOF
kpatch_param retries "$retries"
check_no_splat

start_test "busy function among others"
log_mark
expect_refused EBUSY patch busy2 "$a" "$a1" "$fn" "$fn_new"
check_eq "the other function is not patched either" "a=1 b=2" "$(target_values)"
check_transcript "the log names the busy function only" <<EOF
% echo 'patch busy2 $a $a1 $fn $fn_new' > control
$(busy_log busy2)
EOF
check_no_splat

start_test "the thread leaves the function while kpatch retries"
kpatch_param retries 100
kpatch_param retry_delay_ms 200
log_mark
kp_bg "$KP_TMP/busy4" "patch busy4 $fn $fn_new"
writer=$KP_BG
check "kpatch says it tries again" \
	wait_until log_has "patch 'busy4' busy (try 1 of 101, again in 200 ms)"
busy_param release 1
wait "$writer"
check_eq "patch busy4 -> OK" OK "$(cat "$KP_TMP/busy4")"
check "the thread left kpatch_test_busy_fn" \
	wait_until modparam_is kpatch_test_busy state 2
check_grep "patch listed as active" \
	"$(pline busy4 kpatch_test_busy:kpatch_test_busy_fn "$fn" \
		kpatch_test_busy:kpatch_test_busy_fn_new "$fn_new" active)" \
	"$(cat "$KP_PATCHES")"
check_no_grep "no try was refused for good" "refused" "$(log_since_mark)"
expect_ok unpatch busy4
# How many tries fail before the thread leaves is up to the scheduler:
# those lines are left out, the rest is compared whole.
check_transcript -x "^kpatch: patch 'busy4' busy [(]try [0-9]+ of 101, again in 200 ms[)]: kpatch_test_busy_fn[+]0x[0-9a-f]+/0x[0-9a-f]+ \\[kpatch_test_busy\\] is on the stack of pid $pid [(]kpatch_busy[)]\$" \
	"the log: busy until the thread left, then enabled and removed" <<EOF
% echo 'patch busy4 $fn $fn_new' > control &
% echo 1 > /sys/module/kpatch_test_busy/parameters/release
kpatch: tainting kernel with TAINT_LIVEPATCH
kpatch: patch 'busy4' enabled (1 function)
% echo 'unpatch busy4' > control
kpatch: patch 'busy4' removed
EOF
kpatch_param retries "$retries"
kpatch_param retry_delay_ms "$delay"
check_no_splat

start_test "after the thread left the function"
log_mark
busy_param release 1
check "the thread leaves kpatch_test_busy_fn" \
	wait_until modparam_is kpatch_test_busy state 2
expect_ok patch busy3 "$fn" "$fn_new"
check_patches "patch listed as active" \
	"$(pline busy3 kpatch_test_busy:kpatch_test_busy_fn "$fn" \
		kpatch_test_busy:kpatch_test_busy_fn_new "$fn_new" active)"
busy_param again 1
check "the thread calls kpatch_test_busy_fn again" \
	wait_until modparam_is kpatch_test_busy again N
check_eq "the call ran the new function" 1 "$(modparam kpatch_test_busy new_calls)"
check_eq "the old function did not run again" 1 "$(modparam kpatch_test_busy old_calls)"
expect_ok unpatch busy3
busy_param again 1
check "the thread calls kpatch_test_busy_fn once more" \
	wait_until modparam_is kpatch_test_busy again N
check_eq "after unpatch the old function runs" 2 "$(modparam kpatch_test_busy old_calls)"
check_eq "and the new one does not" 1 "$(modparam kpatch_test_busy new_calls)"
check_transcript "the log says enabled, then removed" <<EOF
% echo 1 > /sys/module/kpatch_test_busy/parameters/release
% echo 'patch busy3 $fn $fn_new' > control
kpatch: patch 'busy3' enabled (1 function)
% echo 1 > /sys/module/kpatch_test_busy/parameters/again
% echo 'unpatch busy3' > control
kpatch: patch 'busy3' removed
% echo 1 > /sys/module/kpatch_test_busy/parameters/again
EOF
check_no_splat

start_test "a task that enters the function after the pre-walk"
# The writer runs on CPU 0, where the ambush binds the thread: see
# kpatch_test_busy.c.  Without retries the one try must fail inside
# stop_machine(), whose check sees that the thread ran since kpatch first
# walked its (then clean) stack.
kpatch_param retries 0
busy_param ambush 1
log_mark
log_kp "patch busy5 $fn $fn_new" "(on CPU 0)"
KP_RESULT=$(taskset -c 0 "$KPCTL" "$KP_CONTROL" "patch busy5 $fn $fn_new" 2>&1)
diag "$KP_RESULT"
check_eq "the ambush went off" 0 "$(modparam kpatch_test_busy ambush)"
check_eq "patch busy5 -> EBUSY" EBUSY "$KP_RESULT"
check_eq "the thread is in kpatch_test_busy_fn" 1 "$(modparam kpatch_test_busy state)"
check_grep "kernel log names the function and the task" \
	"patch 'busy5' refused: kpatch_test_busy_fn[+].*pid $pid \\(kpatch_busy\\)" \
	"$(log_since_mark)"
check_patches "nothing patched"
check_transcript "the log has the one refusal, and no other line" <<EOF
% echo 'patch busy5 $fn $fn_new' > control (on CPU 0)
kpatch: patch 'busy5' refused: kpatch_test_busy_fn+0x_/0x_ [kpatch_test_busy] is on the stack of pid $pid (kpatch_busy)
EOF
busy_param ambush 0
busy_param release 1
check "the thread leaves kpatch_test_busy_fn" \
	wait_until modparam_is kpatch_test_busy state 2
kpatch_param retries "$retries"
check_no_splat

# A task names itself (prctl(PR_SET_NAME)), with any bytes but NUL; a
# kthread of kpatch_test_hooks stands in for such a task, with a newline
# in its comm and after it text that looks like a line of kpatch's.
# kpatch escapes a comm (%pE: the newline as a backslash and an n) in
# every log line that names the task: one task is one line, and no line
# of kpatch's starts with what the task chose.
start_test "a task whose comm has a newline"
setup_modules kpatch_test_hooks
sl=$(sym kpatch_test_hooks_sleep_fn kpatch_test_hooks) ||
	bail "setup: find kpatch_test_hooks_sleep_fn"
sl_new=$(sym kpatch_test_hooks_sleep_fn_new kpatch_test_hooks) ||
	bail "setup: find kpatch_test_hooks_sleep_fn_new"
comm_nl='kp
kpatch: fake'
log_command "printf 'kp\\nkpatch: fake' > /sys/module/kpatch_test_hooks/parameters/sleeper_comm"
printf '%s' "$comm_nl" >/sys/module/kpatch_test_hooks/parameters/sleeper_comm ||
	bail "setup: set sleeper_comm"
set_param kpatch_test_hooks sleepers 1
wait_until modparam_is kpatch_test_hooks sleepers 1 || bail "setup: the sleeper sleeps"
set_param kpatch_test_hooks sleeper_comm ""
nl_pid=$(modparam kpatch_test_hooks sleeper_pids)
check_eq "precondition: its comm has the newline" "$comm_nl" "$(cat "/proc/$nl_pid/comm")"

# kp_lines: kpatch's kernel log lines since the last mark, without the
# timestamps
kp_lines() {
	log_since_mark | sed 's/^\[[ 0-9.]*\] //; s/^\[ *[TC][0-9]*\] //' |
		grep '^kpatch: '
}

kpatch_param retries 0
log_mark
expect_refused EBUSY patch nl1 "$sl" "$sl_new"
check_transcript "the refusal names the task on one line, its newline escaped" kpatch_test_hooks <<EOF
% echo 'patch nl1 $sl $sl_new' > control
kpatch: patch 'nl1' refused: kpatch_test_hooks_sleep_fn+0x_/0x_ [kpatch_test_hooks] is on the stack of pid $nl_pid (kp\nkpatch: fake)
EOF
check_no_grep "no line of kpatch's starts with the comm's second line" \
	'^kpatch: fake' "$(kp_lines)"
kpatch_param retries "$retries"
set_param kpatch_test_hooks release 1
check "the sleeper left" wait_until modparam_is kpatch_test_hooks sleepers 0
check_no_splat
