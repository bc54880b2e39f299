#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-check.sh - the dry run: "check patch|replace NAME OLD NEW ..." and
# "check unpatch NAME" validate like the real command, change nothing
# (patches file, sysfs, ftrace, module reference counts), run no hook,
# and answer 0 if the update would apply now, else the errno it would get:
# EBUSY when tasks are in an affected function.  The result of the last
# check is in /sys/kernel/debug/kpatch/check: "VERB NAME ERRNO", then one
# "PID WHERE COMM" line per blocking task; the kernel log has a summary
# line and one line per blocker, 64 at most, then how many more.
#
# The blockers are kpatch_test_hooks's sleepers ("kp sleeper <i>", a comm
# with blanks), in kpatch_test_hooks_sleep_fn() or, once it is patched,
# in its replacement, and kpatch_test_busy's thread "kpatch_busy" in
# kpatch_test_busy_fn().  What check says must agree with what the real
# command then does (kpatch's retries set to 0 to keep it quick).
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

KP_CHECK=$KP_DEBUGFS/check

setup_modules kpatch kpatch_test_target kpatch_test_new kpatch_test_hooks kpatch_test_busy
# kpatch_test_hooks's symbols, in one pass over kallsyms
grep -F '[kpatch_test_hooks]' "$(kallsyms)" >"$KP_TMP/hsyms" ||
	bail "setup: kpatch_test_hooks's symbols"
hsym() {
	awk -v n="kpatch_test_hooks_$1" '$3 == n { print $1; exit }' "$KP_TMP/hsyms"
}
f=$(hsym f)
f1=$(hsym f1)
f2=$(hsym f2)
sl=$(hsym sleep_fn)
sl_new=$(hsym sleep_fn_new)
h_pre=$(hsym pre_patch)
h_stop=$(hsym stop_patch)
h_post_un=$(hsym post_unpatch)
h_pre_un=$(hsym pre_unpatch)
for v in "$f" "$f1" "$f2" "$sl" "$sl_new" "$h_pre" "$h_stop" "$h_post_un" "$h_pre_un"; do
	[ -n "$v" ] || bail "setup: find the functions of kpatch_test_hooks"
done
busy=$(sym kpatch_test_busy_fn kpatch_test_busy) || bail "setup: find kpatch_test_busy_fn"
busy_new=$(sym kpatch_test_busy_fn_new kpatch_test_busy) ||
	bail "setup: find kpatch_test_busy_fn_new"
cmd=$(sym cmdline_proc_show vmlinux) || bail "setup: find cmdline_proc_show"
HOOKS="pre-patch=$h_pre stop-patch=$h_stop post-unpatch=$h_post_un pre-unpatch=$h_pre_un"
wait_until modparam_is kpatch_test_busy state 1 ||
	bail "setup: kpatch_busy thread waits in kpatch_test_busy_fn"
busy_pid=$(modparam kpatch_test_busy pid)

retries=$(modparam kpatch retries)
set_param kpatch retries 0

# hook_calls: kpatch_test_hooks's count of hook calls
hook_calls() {
	modparam kpatch_test_hooks calls
}

# hook_log: the hook calls logged since the last mark
hook_log() {
	log_since_mark | awk '{
		i = index($0, "kpatch_test_hooks: ")
		if (!i)
			next
		s = substr($0, i + 19)
		if (s ~ /^(pre|stop|undo|post)-(un)?patch /)
			print s
	}'
}

# hook_seq: hook_log on one line, commas between the calls
hook_seq() {
	hook_log | awk '{ printf "%s%s", (NR > 1 ? "," : ""), $0 }'
}

check_file() {
	cat "$KP_CHECK" 2>&1
}

# check_result DESC LINE1 [ERE...]: the check file is LINE1 and then one
# line matching each ERE, in any order, and nothing else
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

# blocker PID FUNC MOD COMM: ERE of the check file line for one blocker
blocker() {
	printf '^%s %s:%s[+]0x[0-9a-f]+/0x[0-9a-f]+ %s$\n' "$1" "$3" "$2" "$4"
}

# blocker_log VERB NAME PID COMM FUNC MOD: ERE of its kernel log line
blocker_log() {
	printf "check %s '%s': pid %s [(]%s[)] in %s[+]0x[0-9a-f]+/0x[0-9a-f]+ \\\\[%s\\\\]" \
		"$1" "$2" "$3" "$4" "$5" "$6"
}

# dry_ok CMD...: run "check CMD...", expecting 0, with no change, no hook
dry_ok() {
	save_state
	_do_calls=$(hook_calls)
	expect_ok check "$@"
	check_state_unchanged
	check_eq "no hook ran" "$_do_calls" "$(hook_calls)"
}

# dry_busy CMD...: run "check CMD...", expecting EBUSY, with no change
dry_busy() {
	save_state
	_db_calls=$(hook_calls)
	expect_errno EBUSY check "$@"
	check_state_unchanged
	check_eq "no hook ran" "$_db_calls" "$(hook_calls)"
}

# start_sleepers N: N new sleepers in kpatch_test_hooks_sleep_fn (or its
# replacement); sets pid0, pid1
start_sleepers() {
	set_param kpatch_test_hooks sleepers "$1"
	wait_until modparam_is kpatch_test_hooks sleepers "$1" ||
		bail "setup: $1 sleepers asleep"
	# shellcheck disable=SC2046 # two numbers
	set -- $(modparam kpatch_test_hooks sleeper_pids)
	pid0=$1
	pid1=$2
	check_eq "precondition: the sleepers are kp sleeper 0 and 1" \
		"kp sleeper 0,kp sleeper 1" \
		"$(cat "/proc/$pid0/comm"),$(cat "/proc/$pid1/comm")"
}

release_sleepers() {
	set_param kpatch_test_hooks release 1
	check "the sleepers left" wait_until modparam_is kpatch_test_hooks sleepers 0
}

start_test "the check file"
check_eq "mode 0400" 400 "$(stat -c %a "$KP_CHECK" 2>&1)"
check_eq "empty before the first check" "" "$(check_file)"

start_test "check patch of an idle function"
log_mark
# shellcheck disable=SC2086 # HOOKS: several words
dry_ok patch c1 "$f" "$f1" $HOOKS
check_result "check file: patch c1 0" "patch c1 0"
check_transcript "log: would apply now" kpatch_test_hooks <<EOF
% echo 'check patch c1 $f $f1 $HOOKS' > control
kpatch: check patch 'c1': would apply now
EOF
check_sysfs_patches "no sysfs directory"
check_eq "kpatch_test_hooks_f not patched" 100 "$(modparam kpatch_test_hooks value)"
# shellcheck disable=SC2086 # HOOKS: several words
expect_ok patch c1 "$f" "$f1" $HOOKS
check_eq "the real patch applies" 101 "$(modparam kpatch_test_hooks value)"
check_eq "its hooks ran" "pre-patch c1,stop-patch c1" "$(hook_seq)"
check_no_splat

start_test "check unpatch and check replace of an idle patch"
log_mark
dry_ok unpatch c1
check_result "check file: unpatch c1 0" "unpatch c1 0"
check_transcript "log: would apply now" kpatch_test_hooks <<EOF
% echo 'check unpatch c1' > control
kpatch: check unpatch 'c1': would apply now
EOF
dry_ok replace c2 "$f" "$f2"
check_result "check file: replace c2 0" "replace c2 0"
check_transcript "log: would apply now" kpatch_test_hooks <<EOF
% echo 'check unpatch c1' > control
kpatch: check unpatch 'c1': would apply now
% echo 'check replace c2 $f $f2' > control
kpatch: check replace 'c2': would apply now
EOF
expect_ok replace c2 "$f" "$f2"
check_eq "the real replace applies" 102 "$(modparam kpatch_test_hooks value)"
check_patches "only c2 is listed" \
	"$(pline c2 kpatch_test_hooks:kpatch_test_hooks_f "$f" \
		kpatch_test_hooks:kpatch_test_hooks_f2 "$f2" active)"
check_no_splat

start_test "check patch of a function two tasks sleep in"
start_sleepers 2
log_mark
# shellcheck disable=SC2086
dry_busy patch s1 "$sl" "$sl_new" $HOOKS
check_result "check file: EBUSY and both sleepers" "patch s1 -16" \
	"$(blocker "$pid0" kpatch_test_hooks_sleep_fn kpatch_test_hooks "kp sleeper 0")" \
	"$(blocker "$pid1" kpatch_test_hooks_sleep_fn kpatch_test_hooks "kp sleeper 1")"
msgs=$(log_since_mark)
check_transcript "log: would fail, 2 tasks" kpatch_test_hooks <<EOF
% echo 'check patch s1 $sl $sl_new $HOOKS' > control
kpatch: check patch 's1': would fail (-16): 2 tasks in the way
kpatch: check patch 's1': pid $pid0 (kp sleeper 0) in kpatch_test_hooks_sleep_fn+0x_/0x_ [kpatch_test_hooks]
kpatch: check patch 's1': pid $pid1 (kp sleeper 1) in kpatch_test_hooks_sleep_fn+0x_/0x_ [kpatch_test_hooks]
EOF
check_grep "log: sleeper 0" \
	"$(blocker_log patch s1 "$pid0" "kp sleeper 0" kpatch_test_hooks_sleep_fn kpatch_test_hooks)" "$msgs"
check_grep "log: sleeper 1" \
	"$(blocker_log patch s1 "$pid1" "kp sleeper 1" kpatch_test_hooks_sleep_fn kpatch_test_hooks)" "$msgs"
check_no_grep "log: no hook ran" "kpatch_test_hooks: (pre|stop|undo|post)-" "$msgs"

# kpatch_busy wakes every 50 ms to poll, and a dry run walks only the
# tasks it can keep still (Documentation.txt): a check that comes while
# the thread is awake does not list it.  So check again, up to 20 times,
# until a check finds it asleep, and assert on that check.
_cb_try=0
while :; do
	_cb_try=$((_cb_try + 1))
	log_mark
	save_state
	_db_calls=$(hook_calls)
	kp check patch s1 "$busy" "$busy_new" "$sl" "$sl_new" || true
	if grep -q "^$busy_pid " "$KP_CHECK" || [ "$_cb_try" -ge 20 ]; then
		break
	fi
	diag "kpatch_busy was awake during check $_cb_try; again"
done
check_eq "check patch s1 (two functions) -> EBUSY" EBUSY "$KP_RESULT"
check_state_unchanged
check_eq "no hook ran" "$_db_calls" "$(hook_calls)"
check_result "check file: two functions, three blockers" "patch s1 -16" \
	"$(blocker "$pid0" kpatch_test_hooks_sleep_fn kpatch_test_hooks "kp sleeper 0")" \
	"$(blocker "$pid1" kpatch_test_hooks_sleep_fn kpatch_test_hooks "kp sleeper 1")" \
	"$(blocker "$busy_pid" kpatch_test_busy_fn kpatch_test_busy kpatch_busy)"
# The last check only: the checks before it found kpatch_busy awake.
# kpatch_busy was started before the sleepers: it comes first in the
# task list, which the dry run walks in order.
check_transcript "log: would fail, 3 tasks" kpatch_test_hooks <<EOF
% echo 'check patch s1 $busy $busy_new $sl $sl_new' > control
kpatch: check patch 's1': would fail (-16): 3 tasks in the way
kpatch: check patch 's1': pid $busy_pid (kpatch_busy) in kpatch_test_busy_fn+0x_/0x_ [kpatch_test_busy]
kpatch: check patch 's1': pid $pid0 (kp sleeper 0) in kpatch_test_hooks_sleep_fn+0x_/0x_ [kpatch_test_hooks]
kpatch: check patch 's1': pid $pid1 (kp sleeper 1) in kpatch_test_hooks_sleep_fn+0x_/0x_ [kpatch_test_hooks]
EOF
check_grep "log: kpatch_busy" \
	"$(blocker_log patch s1 "$busy_pid" kpatch_busy kpatch_test_busy_fn kpatch_test_busy)" \
	"$(log_since_mark)"
# kpatch_busy polls; no need to keep it running
check "rmmod kpatch_test_busy" unload_mod kpatch_test_busy

log_mark
# shellcheck disable=SC2086
expect_refused EBUSY patch s1 "$sl" "$sl_new" $HOOKS
check_eq "the real patch ran pre-patch, then its cancel hook" \
	"pre-patch s1,post-unpatch s1" "$(hook_seq)"
check_transcript "log: the hooks, then the refusal names a sleeper" kpatch_test_hooks <<EOF
% echo 'patch s1 $sl $sl_new $HOOKS' > control
kpatch_test_hooks: pre-patch s1
kpatch_test_hooks: post-unpatch s1
kpatch: patch 's1' refused: kpatch_test_hooks_sleep_fn+0x_/0x_ [kpatch_test_hooks] is on the stack of pid $pid0 (kp sleeper 0)
EOF
check_eq "both sleepers still asleep" 2 "$(modparam kpatch_test_hooks sleepers)"
release_sleepers
log_mark
# shellcheck disable=SC2086
dry_ok patch s1 "$sl" "$sl_new" $HOOKS
check_result "check file: patch s1 0" "patch s1 0"
check_transcript "log: would apply now" kpatch_test_hooks <<EOF
% echo 'check patch s1 $sl $sl_new $HOOKS' > control
kpatch: check patch 's1': would apply now
EOF
check_no_splat

start_test "check unpatch and check replace of a function two tasks sleep in"
log_mark
expect_ok patch s1 "$sl" "$sl_new"
start_sleepers 2
check_eq "precondition: the sleepers run the new function" "old=2 new=0" \
	"$(modparam kpatch_test_hooks sleep_calls)"
dry_busy unpatch s1
check_result "check file: unpatch s1, EBUSY, both sleepers" "unpatch s1 -16" \
	"$(blocker "$pid0" kpatch_test_hooks_sleep_fn_new kpatch_test_hooks "kp sleeper 0")" \
	"$(blocker "$pid1" kpatch_test_hooks_sleep_fn_new kpatch_test_hooks "kp sleeper 1")"
msgs=$(log_since_mark)
check_transcript "log: would fail, 2 tasks" kpatch_test_hooks <<EOF
% echo 'patch s1 $sl $sl_new' > control
kpatch: patch 's1' enabled (1 function)
% echo 2 > /sys/module/kpatch_test_hooks/parameters/sleepers
% echo 'check unpatch s1' > control
kpatch: check unpatch 's1': would fail (-16): 2 tasks in the way
kpatch: check unpatch 's1': pid $pid0 (kp sleeper 0) in kpatch_test_hooks_sleep_fn_new+0x_/0x_ [kpatch_test_hooks]
kpatch: check unpatch 's1': pid $pid1 (kp sleeper 1) in kpatch_test_hooks_sleep_fn_new+0x_/0x_ [kpatch_test_hooks]
EOF
check_grep "log: sleeper 1" \
	"$(blocker_log unpatch s1 "$pid1" "kp sleeper 1" kpatch_test_hooks_sleep_fn_new kpatch_test_hooks)" "$msgs"
expect_refused EBUSY unpatch s1
log_mark
dry_busy replace c3 "$f" "$f1"
check_result "check file: replace c3 (removes s1), EBUSY" "replace c3 -16" \
	"$(blocker "$pid0" kpatch_test_hooks_sleep_fn_new kpatch_test_hooks "kp sleeper 0")" \
	"$(blocker "$pid1" kpatch_test_hooks_sleep_fn_new kpatch_test_hooks "kp sleeper 1")"
check_transcript "log: would fail, 2 tasks" kpatch_test_hooks <<EOF
% echo 'check replace c3 $f $f1' > control
kpatch: check replace 'c3': would fail (-16): 2 tasks in the way
kpatch: check replace 'c3': pid $pid0 (kp sleeper 0) in kpatch_test_hooks_sleep_fn_new+0x_/0x_ [kpatch_test_hooks]
kpatch: check replace 'c3': pid $pid1 (kp sleeper 1) in kpatch_test_hooks_sleep_fn_new+0x_/0x_ [kpatch_test_hooks]
EOF
expect_refused EBUSY replace c3 "$f" "$f1"
release_sleepers
dry_ok unpatch s1
check_result "check file: unpatch s1 0" "unpatch s1 0"
dry_ok replace c3 "$f" "$f1"
check_result "check file: replace c3 0" "replace c3 0"
expect_ok unpatch s1
check_no_splat

# same_errno ERRNO LINE1 CMD WHY: the command CMD and "check CMD" both
# fail with ERRNO and change nothing; the check file's first line is
# LINE1; kpatch logs WHY for each, and for the check its answer
same_errno() {
	start_test "check $(kp_what "$3") with bad input: $1"
	log_mark
	save_state
	expect_errno_raw "$1" "$3"
	expect_errno_raw "$1" "check $3"
	check_result "check file: $2" "$2"
	check_state_unchanged
	# shellcheck disable=SC2086 # LINE1: VERB NAME ERRNO
	set -- "$1" "$2" "$3" "$4" $2
	check_transcript "log: the same line for both, then the check's answer" <<EOF
% echo '$3' > control
kpatch: $4
% echo 'check $3' > control
kpatch: $4
kpatch: check $5 '$6': would fail ($7)
EOF
}

same_errno EEXIST "patch c2 -17" "patch c2 $f $f1" \
	"patch 'c2' refused: a patch with that name exists"
same_errno EEXIST "replace c2 -17" "replace c2 $f $f1" \
	"replace 'c2' refused: a patch with that name exists"
same_errno ENOENT "unpatch nosuch -2" "unpatch nosuch" "unpatch nosuch: no such patch"
same_errno EINVAL "patch e1 -22" "patch e1 $f" \
	"patch: expected NAME and OLD NEW address pairs"
same_errno EINVAL "patch e1 -22" "patch e1 $f $(addr_add "$f1" 1)" \
	"e1: new function $(addr_add "$f1" 1) is not the start of a function (kpatch_test_hooks_f1+0x1)"
same_errno EINVAL "patch e1 -22" "patch e1 $f $f1 pre-patch=$cmd" \
	"e1: pre-patch hook cmdline_proc_show+0x0/0x0 is not in a module"
same_errno EINVAL "replace e1 -22" "replace e1 $f $f1 pre-patch=$h_pre pre-patch=$h_pre" \
	"replace e1: the pre-patch hook is given twice"

start_test "check without a mode or with an unknown one"
log_mark
save_state
expect_errno EINVAL check
expect_errno EINVAL check c1 "$f" "$f1"
expect_errno EINVAL check frob c1 "$f" "$f1"
expect_errno EINVAL check check patch c1 "$f" "$f1"
expect_errno EINVAL check PATCH c1 "$f" "$f1"
expect_errno EINVAL check unpatch
expect_errno EINVAL check unpatch c2 extra
check_state_unchanged
msgs=$(log_since_mark)
check_no_grep "kpatch knows the command check" "kpatch: unknown command" "$msgs"
check_transcript "kpatch says what check expects" <<EOF
% echo 'check' > control
kpatch: check: expected patch, replace or unpatch, then its arguments
% echo 'check c1 $f $f1' > control
kpatch: check: expected patch, replace or unpatch, then its arguments
% echo 'check frob c1 $f $f1' > control
kpatch: check: expected patch, replace or unpatch, then its arguments
% echo 'check check patch c1 $f $f1' > control
kpatch: check: expected patch, replace or unpatch, then its arguments
% echo 'check PATCH c1 $f $f1' > control
kpatch: check: expected patch, replace or unpatch, then its arguments
% echo 'check unpatch' > control
kpatch: unpatch: the name must be 1 to 63 characters of A-Z a-z 0-9 _ -
% echo 'check unpatch c2 extra' > control
kpatch: unpatch: expected exactly one NAME
kpatch: check unpatch 'c2': would fail (-22)
EOF

# kpatch keeps room for 64 blockers: the 65th and later are counted only
start_test "check with more tasks in the way than it lists"
start_sleepers 70
log_mark
dry_busy patch s1 "$sl" "$sl_new"
check_eq "check file: the first line, 64 blockers, then how many more" \
	"patch s1 -16,64,+6 more" \
	"$(check_file | head -n 1),$(check_file | grep -c "^[0-9]* kpatch_test_hooks:kpatch_test_hooks_sleep_fn[+].* kp sleeper [0-9]*$"),$(check_file | tail -n 1)"
check_eq "check file: nothing else" 66 "$(check_file | wc -l)"
msgs=$(log_since_mark)
# The first 64 in the task list, which the dry run walks in order: the
# sleepers in the order they were started.
check_transcript "log: would fail, 70 tasks, 64 of them named" kpatch_test_hooks <<EOF
% echo 'check patch s1 $sl $sl_new' > control
kpatch: check patch 's1': would fail (-16): 70 tasks in the way
$(_i=0
for _p in $(modparam kpatch_test_hooks sleeper_pids); do
	[ "$_i" -lt 64 ] || break
	echo "kpatch: check patch 's1': pid $_p (kp sleeper $_i) in kpatch_test_hooks_sleep_fn+0x_/0x_ [kpatch_test_hooks]"
	_i=$((_i + 1))
done)
kpatch: check patch 's1': and 6 more
EOF
check_eq "log: 64 blockers" 64 \
	"$(printf '%s\n' "$msgs" | grep -c "kpatch: check patch 's1': pid [0-9]* [(]kp sleeper [0-9]*[)] in kpatch_test_hooks_sleep_fn[+]")"
check_grep "log: and 6 more" "kpatch: check patch 's1': and 6 more$" "$msgs"
release_sleepers
dry_ok patch s1 "$sl" "$sl_new"
check_no_splat

# A task names itself (prctl(PR_SET_NAME)), with any bytes but NUL; a
# kthread of kpatch_test_hooks stands in for such a task, with a newline
# in its comm and after it text that looks like a line of kpatch's.
# kpatch escapes a comm (%pE: the newline as a backslash and an n) in the
# check file and in every log line that names the task: one task is one
# line, and no line of kpatch's starts with what the task chose.
start_test "a task whose comm has a newline"
comm_nl='kp
kpatch: fake'
comm_esc='kp\nkpatch: fake'
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

log_mark
dry_busy patch nl1 "$sl" "$sl_new"
check_eq "check file: the task on one line, its newline escaped" \
	"$(printf 'patch nl1 -16\n%s kpatch_test_hooks:kpatch_test_hooks_sleep_fn+0x_/0x_ %s' \
		"$nl_pid" "$comm_esc")" \
	"$(check_file | sed 's/0x[0-9a-f][0-9a-f]*/0x_/g')"
check_transcript "log: the task on one line, its newline escaped" kpatch_test_hooks <<EOF
% echo 'check patch nl1 $sl $sl_new' > control
kpatch: check patch 'nl1': would fail (-16): 1 task in the way
kpatch: check patch 'nl1': pid $nl_pid (kp\nkpatch: fake) in kpatch_test_hooks_sleep_fn+0x_/0x_ [kpatch_test_hooks]
EOF
check_no_grep "log: no line of kpatch's starts with the comm's second line" \
	'^kpatch: fake' "$(kp_lines)"

log_mark
expect_refused EBUSY patch nl1 "$sl" "$sl_new"
check_transcript "log: the refusal names the task on one line" kpatch_test_hooks <<EOF
% echo 'patch nl1 $sl $sl_new' > control
kpatch: patch 'nl1' refused: kpatch_test_hooks_sleep_fn+0x_/0x_ [kpatch_test_hooks] is on the stack of pid $nl_pid (kp\nkpatch: fake)
EOF
check_no_grep "log: no line of kpatch's starts with the comm's second line" \
	'^kpatch: fake' "$(kp_lines)"
release_sleepers
check_no_splat

set_param kpatch retries "$retries"
