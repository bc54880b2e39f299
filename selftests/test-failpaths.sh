#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-failpaths.sh - every way an update of several functions can be
# refused, made to happen for real, and each leaves the patches file, the
# sysfs tree, ftrace's enabled_functions and the module reference counts
# byte-identical to before:
#   - ftrace cannot trace the k-th function (a notrace one), k = 1, 2, 3
#   - another IPMODIFY user (a kprobe with a post_handler) owns the first
#     and the last function, so ftrace refuses kpatch's ftrace_ops
#   - the stack check fails on the first and on the last function
#   - a replace fails (its new function is busy; a removed patch is busy)
#   - an unpatch fails because the new function is on a stack
#   - every memory allocation of a patch, replace and unpatch command fails
#     in turn (fail-nth; kernels with CONFIG_FAULT_INJECTION, that is the
#     test bed's debug kernel): ENOMEM and no change, or the command
#     succeeds in full; also for a patch of six functions
#     (kpatch_test_preoff's f0 .. f5), an ftrace_ops each, while five
#     other sites stay (f6 .. f9 and b), and its unpatch
#   - the same for a patch that ftrace refuses (a kprobe with a
#     post_handler on kpatch_test_preoff_f3) while another CPU calls f0
#     .. f9 with preemption off (kpatch_test_preoff's section): ftrace
#     may have put kpatch's ftrace_ops on its list before it refused it,
#     and when it could not allocate the ftrace_ops a trampoline it takes
#     it off again without waiting; so every refused try must return only
#     after that section, the tries where ftrace went on without its
#     trampoline among them.
# (An NMI forcing FAILURE during UPDATING is test-nmi.sh's.)
#
# A patch "base" (kpatch_test_value_b -> _v2) stays enabled throughout, so
# "unchanged" covers a non-empty state.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

setup_modules kpatch kpatch_test_target kpatch_test_new kpatch_test_busy \
	kpatch_test_preoff
a=$(sym kpatch_test_value_a kpatch_test_target) || bail "setup: find kpatch_test_value_a"
b=$(sym kpatch_test_value_b kpatch_test_target) || bail "setup: find kpatch_test_value_b"
a1=$(sym kpatch_test_value_a_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v1"
b1=$(sym kpatch_test_value_b_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_b_v1"
b2=$(sym kpatch_test_value_b_v2 kpatch_test_new) || bail "setup: find kpatch_test_value_b_v2"
cmd=$(sym cmdline_proc_show vmlinux) || bail "setup: find cmdline_proc_show"
cmd1=$(sym kpatch_test_cmdline_v1 kpatch_test_new) || bail "setup: find kpatch_test_cmdline_v1"
notrace=$(sym kpatch_test_value_notrace kpatch_test_target) ||
	bail "setup: find kpatch_test_value_notrace"
fn=$(sym kpatch_test_busy_fn kpatch_test_busy) || bail "setup: find kpatch_test_busy_fn"
fn_new=$(sym kpatch_test_busy_fn_new kpatch_test_busy) ||
	bail "setup: find kpatch_test_busy_fn_new"
wait_until modparam_is kpatch_test_busy state 1 ||
	bail "setup: kpatch_busy thread waits in kpatch_test_busy_fn"
busy_pid=$(modparam kpatch_test_busy pid)

# pairs N...: the words "OLD NEW" of kpatch_test_preoff_fN for each N
pairs() {
	for _pa_n in "$@"; do
		sym "kpatch_test_preoff_f$_pa_n" kpatch_test_preoff || return 1
		sym "kpatch_test_preoff_f${_pa_n}_new" kpatch_test_preoff || return 1
	done | tr '\n' ' '
}
p3=$(pairs 3) || bail "setup: find kpatch_test_preoff_f3"
p05=$(pairs 0 1 2 3 4 5) || bail "setup: find kpatch_test_preoff_f0 .. f5"
p69=$(pairs 6 7 8 9) || bail "setup: find kpatch_test_preoff_f6 .. f9"
orig_cmdline=$(cat /proc/cmdline)

busy_param() {
	set_param kpatch_test_busy "$1" "$2"
}

# refused_with_log ERRNO WHY CMD...: the command fails with ERRNO, changes
# nothing, kpatch's lines after it are WHY, and nothing new runs
refused_with_log() {
	_rwl_errno=$1
	_rwl_why=$2
	shift 2
	log_mark
	expect_refused "$_rwl_errno" "$@"
	check_transcript "the log says why" <<EOF
% echo '$(kp_logged "$*")' > control
$_rwl_why
EOF
	check_eq "values unchanged" "a=1 b=22" "$(target_values)"
	check_eq "/proc/cmdline unchanged" "$orig_cmdline" "$(cat /proc/cmdline)"
}

start_test "setup"
expect_ok patch base "$b" "$b2"
check_eq "base patch in effect" "a=1 b=22" "$(target_values)"

start_test "ftrace cannot trace the k-th function"
why="kpatch: fp: old function kpatch_test_value_notrace+0x_/0x_ [kpatch_test_target] cannot be traced by ftrace"
refused_with_log EINVAL "$why" \
	patch fp "$notrace" "$a1" "$a" "$a1" "$cmd" "$cmd1"
refused_with_log EINVAL "$why" \
	patch fp "$a" "$a1" "$notrace" "$b1" "$cmd" "$cmd1"
refused_with_log EINVAL "$why" \
	patch fp "$a" "$a1" "$cmd" "$cmd1" "$notrace" "$b1"

start_test "an IPMODIFY user owns the last function"
if load_mod kpatch_test_kprobe func=kpatch_test_value_a post=1; then
	ok "kprobe with a post_handler on kpatch_test_value_a"
	check "ftrace lists the kprobe's function" ftrace_enabled kpatch_test_value_a
	why="ftrace cannot redirect kpatch_test_value_a+0x_/0x_ [kpatch_test_target] (-16); is a kprobe or another live patch on it?"
	refused_with_log EBUSY "kpatch: patch 'fp' refused: $why" \
		patch fp "$cmd" "$cmd1" "$b" "$b1" "$a" "$a1"
	start_test "an IPMODIFY user owns the first function"
	refused_with_log EBUSY "kpatch: patch 'fp' refused: $why" \
		patch fp "$a" "$a1" "$cmd" "$cmd1" "$b" "$b1"
	start_test "a replace meets an IPMODIFY user"
	refused_with_log EBUSY "kpatch: replace 'fp' refused: $why" \
		replace fp "$cmd" "$cmd1" "$a" "$a1"
	check_patches "base still the only patch" \
		"$(pline base kpatch_test_target:kpatch_test_value_b "$b" \
			kpatch_test_new:kpatch_test_value_b_v2 "$b2" active)"
	unload_mod kpatch_test_kprobe || not_ok "unload kpatch_test_kprobe"
else
	not_ok "kprobe with a post_handler on kpatch_test_value_a"
	diag "$KP_OUT"
fi

start_test "the stack check fails on the first function"
why="kpatch_test_busy_fn+0x_/0x_ [kpatch_test_busy] is on the stack of pid $busy_pid (kpatch_busy)"
refused_with_log EBUSY "$(refused_lines patch fp "$why")" \
	patch fp "$fn" "$fn_new" "$a" "$a1" "$cmd" "$cmd1"
start_test "the stack check fails on the last function"
refused_with_log EBUSY "$(refused_lines patch fp "$why")" \
	patch fp "$a" "$a1" "$cmd" "$cmd1" "$fn" "$fn_new"
start_test "a replace fails the stack check"
refused_with_log EBUSY "$(refused_lines replace fp "$why")" \
	replace fp "$a" "$a1" "$fn" "$fn_new"
check_eq "the busy thread never ran the new function" 0 \
	"$(modparam kpatch_test_busy new_calls)"

start_test "unpatch of a function on a stack"
busy_param release 1
wait_until modparam_is kpatch_test_busy state 2 ||
	bail "setup: the busy thread leaves kpatch_test_busy_fn"
expect_ok patch held "$fn" "$fn_new" "$a" "$a1"
busy_param hold 1
busy_param again 1
if wait_until modparam_is kpatch_test_busy state 3; then
	ok "the busy thread waits in kpatch_test_busy_fn_new"
	log_mark
	expect_refused EBUSY unpatch held
	why="kpatch_test_busy_fn_new+0x_/0x_ [kpatch_test_busy] is on the stack of pid $busy_pid (kpatch_busy)"
	check_transcript "the log names the new function and the task" <<EOF
% echo 'unpatch held' > control
$(refused_lines unpatch held "$why")
EOF
	check_eq "held still in effect" "a=11 b=22" "$(target_values)"
	start_test "a replace that must remove a patch on a stack"
	log_mark
	expect_refused EBUSY replace fp "$cmd" "$cmd1"
	check_transcript "the log names the new function" <<EOF
% echo 'replace fp $cmd $cmd1' > control
$(refused_lines replace fp "$why")
EOF
	check_eq "held and base still in effect" "a=11 b=22" "$(target_values)"
else
	not_ok "the busy thread waits in kpatch_test_busy_fn_new"
fi
busy_param hold 0
wait_until modparam_is kpatch_test_busy state 2 ||
	not_ok "the busy thread leaves kpatch_test_busy_fn_new"
expect_ok unpatch held

# ---------------------------------------------------------------- ENOMEM --

FAIL_MAX=400

# fault_setup: let fail-nth fail sleeping allocations of any order too
# (failslab and fail_page_alloc ignore them by default)
fault_setup() {
	for _fs_d in /sys/kernel/debug/failslab /sys/kernel/debug/fail_page_alloc; do
		[ -d "$_fs_d" ] || continue
		echo N >"$_fs_d/ignore-gfp-wait" || return 1
		echo 1 >"$_fs_d/verbose" || return 1
		if [ -e "$_fs_d/min-order" ]; then
			echo 0 >"$_fs_d/min-order" || return 1
		fi
	done
}

# fail_nth N CMD: write CMD with the N-th allocation failing; sets
# KP_RESULT (OK or the errno) and FAIL_HIT (injected / not reached) from
# kpctl's two lines, without a fork each: the sweeps run this hundreds of
# times on the debug kernel
NL='
'
fail_nth() {
	_fn_out=$("$KPCTL" --fail-nth "$1" "$KP_CONTROL" "$2" 2>&1)
	KP_RESULT=${_fn_out%%"$NL"*}
	FAIL_HIT=
	case $_fn_out in
	*"$NL"'fail-nth: '*)
		FAIL_HIT=${_fn_out#*"$NL"fail-nth: }
		FAIL_HIT=${FAIL_HIT%%"$NL"*}
		;;
	esac
}

# fail_bad TEXT: count a failed try; show the state diff of the first few
fail_bad() {
	_fe_bad=$((_fe_bad + 1))
	diag "allocation $_fe_n failed: $1"
	[ "$_fe_bad" -gt 3 ] || show_diff "$2" "$3"
}

# fail_each DESC CMD UNDO REDO: run CMD with its 1st, 2nd, ... allocation
# failing until it no longer reaches the failing one.  Each try must end in
# ENOMEM with the state unchanged, or in OK with the same state as CMD
# without faults; UNDO then REDO (shell commands) restore the state before.
fail_each() {
	_fe_desc=$1
	_fe_cmd=$2
	save_state
	_fe_before=$KP_STATE
	# The state CMD leads to without faults.
	if ! kp_raw "$_fe_cmd"; then
		not_ok "$_fe_desc: runs without faults"
		return 1
	fi
	_fe_after=$(state_snapshot)
	eval "$3" && eval "$4"
	if [ "$(state_snapshot)" != "$_fe_before" ]; then
		not_ok "$_fe_desc: undone"
		return 1
	fi
	_fe_n=0 _fe_enomem=0 _fe_absorbed=0 _fe_bad=0
	while [ "$_fe_n" -lt "$FAIL_MAX" ]; do
		_fe_n=$((_fe_n + 1))
		fail_nth "$_fe_n" "$_fe_cmd"
		_fe_now=$(state_snapshot)
		case $KP_RESULT/$FAIL_HIT in
		ENOMEM/injected)
			_fe_enomem=$((_fe_enomem + 1))
			if [ "$_fe_now" != "$_fe_before" ]; then
				fail_bad "ENOMEM but the state changed" \
					"$_fe_before" "$_fe_now"
			fi
			;;
		OK/injected | OK/"not reached")
			if [ "$FAIL_HIT" = injected ]; then
				_fe_absorbed=$((_fe_absorbed + 1))
			fi
			if [ "$_fe_now" != "$_fe_after" ]; then
				fail_bad "OK, but not the state of a clean run" \
					"$_fe_after" "$_fe_now"
			fi
			eval "$3" && eval "$4"
			[ "$FAIL_HIT" = "not reached" ] && break
			;;
		*)
			fail_bad "$KP_RESULT ($FAIL_HIT)" "$_fe_before" "$_fe_now"
			[ "$_fe_now" = "$_fe_before" ] || { eval "$3" && eval "$4"; }
			;;
		esac
	done
	diag "$_fe_desc: $((_fe_n - 1)) allocations failed in turn:" \
		"$_fe_enomem ENOMEM, $_fe_absorbed absorbed"
	check "$_fe_desc: the command allocates" test "$_fe_n" -gt 1
	check_eq "$_fe_desc: the command gets to the end" "not reached" "$FAIL_HIT"
	check_eq "$_fe_desc: every failure ENOMEM and no change, or full success" \
		0 "$_fe_bad"
	check "$_fe_desc: some allocation failures ended in ENOMEM" \
		test "$_fe_enomem" -gt 0
	check_eq "$_fe_desc: state as before" "$_fe_before" "$(state_snapshot)"
}

start_test "memory allocations failing one by one"
log_mark
if [ ! -e /proc/self/fail-nth ]; then
	skip "fail-nth: this kernel has no CONFIG_FAULT_INJECTION (the debug kernel has)"
elif ! fault_setup; then
	not_ok "fault injection set up (/sys/kernel/debug/failslab)"
else
	fail_each "patch" "patch fp $a $a1 $cmd $cmd1 $b $b1" \
		"kp unpatch fp >/dev/null" ":"
	expect_ok patch other "$a" "$a1"
	fail_each "replace" "replace fp $cmd $cmd1" \
		"kp unpatch fp >/dev/null" \
		"kp patch base $b $b2 >/dev/null && kp patch other $a $a1 >/dev/null"
	fail_each "unpatch" "unpatch other" \
		"kp patch other $a $a1 >/dev/null" ":"
	expect_ok unpatch other
	# shellcheck disable=SC2086
	expect_ok patch keep $p69
	fail_each "patch of six functions, an ftrace_ops each" \
		"patch fm $p05" "kp unpatch fm >/dev/null" ":"
	# shellcheck disable=SC2086
	expect_ok patch fm $p05
	fail_each "unpatch of six functions" \
		"unpatch fm" "kp patch fm $p05 >/dev/null" ":"
	expect_ok unpatch fm
	expect_ok unpatch keep
	check_eq "kpatch_test_preoff's functions restored" \
		"0 1 2 3 4 5 6 7 8 9" "$(modparam kpatch_test_preoff values)"
	check_no_splat
fi

# The section of kpatch_test_preoff runs PREOFF_MS on another CPU with
# preemption off, begun before each try.
PREOFF_MS=600

start_test "ftrace refuses kpatch's ftrace_ops while another CPU calls"
if [ ! -e /proc/self/fail-nth ]; then
	skip "fail-nth: this kernel has no CONFIG_FAULT_INJECTION (the debug kernel has)"
elif [ "$(grep -c '^processor' /proc/cpuinfo)" -lt 2 ]; then
	skip "needs two CPUs"
elif ! fault_setup; then
	not_ok "fault injection set up (/sys/kernel/debug/failslab)"
elif ! load_mod kpatch_test_kprobe func=kpatch_test_preoff_f3 post=1; then
	not_ok "kprobe with a post_handler on kpatch_test_preoff_f3"
	diag "$KP_OUT"
else
	ok "kprobe with a post_handler on kpatch_test_preoff_f3"
	set_param kpatch_test_preoff hold_ms "$PREOFF_MS"
	save_state
	_pw_n=0 _pw_busy=0 _pw_absorbed=0 _pw_bad=0 _pw_changed=0
	_pw_sections=$(modparam kpatch_test_preoff sections)
	while [ "$_pw_n" -lt "$FAIL_MAX" ]; do
		_pw_n=$((_pw_n + 1))
		echo 1 >/sys/module/kpatch_test_preoff/parameters/start
		fail_nth "$_pw_n" "patch r3 ${p3% }"
		_pw_in=$(modparam kpatch_test_preoff in_section)
		case $KP_RESULT in
		EBUSY)
			_pw_busy=$((_pw_busy + 1))
			[ "$FAIL_HIT" != injected ] ||
				_pw_absorbed=$((_pw_absorbed + 1))
			if [ "$_pw_in" != N ]; then
				_pw_bad=$((_pw_bad + 1))
				diag "allocation $_pw_n failing ($FAIL_HIT): EBUSY while the section ran"
			fi
			;;
		ENOMEM) ;;
		*)
			_pw_bad=$((_pw_bad + 1))
			diag "allocation $_pw_n failing ($FAIL_HIT): $KP_RESULT"
			;;
		esac
		if [ "$(state_snapshot)" != "$KP_STATE" ]; then
			_pw_changed=$((_pw_changed + 1))
			[ "$_pw_changed" -gt 1 ] ||
				show_diff "$KP_STATE" "$(state_snapshot)"
		fi
		wait_until modparam_is kpatch_test_preoff in_section N ||
			bail "the section of kpatch_test_preoff ends"
		[ "$FAIL_HIT" != "not reached" ] || break
	done
	diag "$_pw_n tries: $_pw_busy EBUSY, $_pw_absorbed of them after an allocation failure"
	check_eq "a section ran during every try" "$((_pw_sections + _pw_n))" \
		"$(modparam kpatch_test_preoff sections)"
	check_eq "the command gets to the end" "not reached" "$FAIL_HIT"
	check "ftrace went on after some allocation failures, and refused" \
		test "$_pw_absorbed" -gt 0
	check_eq "every try ENOMEM, or EBUSY after the section with preemption off ended" \
		0 "$_pw_bad"
	check_eq "no try changed the state" 0 "$_pw_changed"
	check_eq "kpatch_test_preoff's functions unchanged" \
		"0 1 2 3 4 5 6 7 8 9" "$(modparam kpatch_test_preoff values)"
	check "rmmod kpatch_test_kprobe" unload_mod kpatch_test_kprobe
	check_no_splat
fi

start_test "after all"
expect_ok unpatch base
check_patches "no patch left"
check_eq "original values" "a=1 b=2" "$(target_values)"
check_eq "/proc/cmdline restored" "$orig_cmdline" "$(cat /proc/cmdline)"
check_no_splat "$KP_SCRIPT_MARK"
