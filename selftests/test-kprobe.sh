#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-kprobe.sh - conflicts with other ftrace users that modify the
# instruction pointer.  A kprobe with a post_handler on an ftrace site is
# armed with FTRACE_OPS_FL_IPMODIFY, like kpatch's redirection; the two
# cannot share a function.  Kprobe first: the patch fails with EBUSY.
# Patch first: loading kpatch_test_kprobe fails with EBUSY.  Nothing
# changes either way.  A kprobe without a post_handler coexists with the
# patch and still fires.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

setup_modules kpatch kpatch_test_new
cmd=$(sym cmdline_proc_show vmlinux) || bail "setup: find cmdline_proc_show"
cmd1=$(sym kpatch_test_cmdline_v1 kpatch_test_new) || bail "setup: find kpatch_test_cmdline_v1"
orig=$(cat /proc/cmdline)

start_test "kprobe first"
log_mark
check "insmod kpatch_test_kprobe succeeds" load_mod kpatch_test_kprobe func=cmdline_proc_show
check "precondition: cmdline_proc_show is in enabled_functions" \
	ftrace_enabled cmdline_proc_show
expect_refused EBUSY patch kp1 "$cmd" "$cmd1"
check_eq "/proc/cmdline unchanged" "$orig" "$(cat /proc/cmdline)"
check_transcript "the log says ftrace refused, and suggests why" <<EOF
% insmod kpatch_test_kprobe.ko func=cmdline_proc_show
% echo 'patch kp1 $cmd $cmd1' > control
kpatch: patch 'kp1' refused: ftrace cannot redirect cmdline_proc_show+0x_/0x_ (-16); is a kprobe or another live patch on it?
EOF
check "rmmod kpatch_test_kprobe succeeds" unload_mod kpatch_test_kprobe
expect_ok patch kp1 "$cmd" "$cmd1"
check_eq "without the kprobe the patch applies" "kpatch-test v1" "$(cat /proc/cmdline)"
check_no_splat

start_test "patch first"
log_mark
save_state
if ! load_mod kpatch_test_kprobe func=cmdline_proc_show; then
	ok "insmod kpatch_test_kprobe fails"
	check_grep "insmod reports EBUSY" '[Bb]usy' "$KP_OUT"
	check_not "kpatch_test_kprobe is not loaded" mod_loaded kpatch_test_kprobe
else
	# Linux 7.2 accepts this kprobe without arming it: it is not in
	# kprobes/list and never fires.  The patch does not lose either,
	# which is what the EBUSY protects; assert that, and skip the errno.
	diag "kernel $(uname -r) accepted the kprobe; checking it is not armed"
	cat /proc/cmdline >/dev/null
	check_eq "the accepted kprobe never fired" 0 \
		"$(modparam kpatch_test_kprobe hits)"
	check_not "the accepted kprobe is not armed" grep -q cmdline_proc_show \
		/sys/kernel/debug/kprobes/list
	skip "insmod reports EBUSY (this kernel accepts the kprobe unarmed)"
	check "rmmod kpatch_test_kprobe succeeds" unload_mod kpatch_test_kprobe
fi
check_state_unchanged
check_eq "patch still in effect" "kpatch-test v1" "$(cat /proc/cmdline)"
check_no_splat

start_test "kprobe without post_handler after the patch"
log_mark
check "insmod kpatch_test_kprobe post=0 succeeds" \
	load_mod kpatch_test_kprobe func=cmdline_proc_show post=0
check_eq "patch still in effect" "kpatch-test v1" "$(cat /proc/cmdline)"
check_grep "the kprobe fired" '^[1-9]' "$(modparam kpatch_test_kprobe hits)"
check "rmmod kpatch_test_kprobe succeeds" unload_mod kpatch_test_kprobe
expect_ok unpatch kp1
check_eq "/proc/cmdline restored" "$orig" "$(cat /proc/cmdline)"
check_no_splat

start_test "kprobe without post_handler before the patch"
log_mark
check "insmod kpatch_test_kprobe post=0 succeeds" \
	load_mod kpatch_test_kprobe func=cmdline_proc_show post=0
expect_ok patch kp2 "$cmd" "$cmd1"
check_eq "patch in effect" "kpatch-test v1" "$(cat /proc/cmdline)"
check_grep "the kprobe fired" '^[1-9]' "$(modparam kpatch_test_kprobe hits)"
expect_ok unpatch kp2
check_eq "/proc/cmdline restored" "$orig" "$(cat /proc/cmdline)"
check "rmmod kpatch_test_kprobe succeeds" unload_mod kpatch_test_kprobe
check_no_splat

# The unwinder gives back the return addresses a kretprobe took only for
# a task that is not running: a preempted one with such an address is
# "cannot be walked reliably", never a kernel warning.  The thread of
# kpatch_test_cold sleeps in kpatch_test_cold_wait(), called from a .cold
# piece, waking every jiffy to run one ("spin"): preempted there at some
# of the 30 tries.
COLD=kpatch_test_cold
kretprobe_cleanup() {
	if mod_loaded "$COLD"; then
		echo 0 >"/sys/module/$COLD/parameters/hold" 2>/dev/null
		wait_until modparam_is "$COLD" call N
		echo 0 >"/sys/module/$COLD/parameters/spin" 2>/dev/null
		unload_mod "$COLD"
	fi
	echo 0 >"$TRACEFS/events/kprobes/enable" 2>/dev/null
	echo >"$TRACEFS/kprobe_events" 2>/dev/null
}
KP_CLEANUP_HOOK=kretprobe_cleanup

start_test "a kretprobe on the function a preempted task is in"
log_mark
if [ -w "$TRACEFS/kprobe_events" ]; then
	check "insmod $COLD succeeds" load_mod "$COLD"
	cfn=$(sym kpatch_test_cold_fn "$COLD") || bail "setup: find kpatch_test_cold_fn"
	cnew=$(sym kpatch_test_cold_fn_new "$COLD") ||
		bail "setup: find kpatch_test_cold_fn_new"
	retries=$(modparam kpatch retries)
	set_param kpatch retries 0
	log_command "echo 'r:kpret kpatch_test_cold_wait' > kprobe_events"
	echo 'r:kpret kpatch_test_cold_wait' >"$TRACEFS/kprobe_events" ||
		bail "setup: the kretprobe"
	echo 1 >"$TRACEFS/events/kprobes/kpret/enable" ||
		bail "setup: enable the kretprobe"
	set_param "$COLD" spin 1
	set_param "$COLD" hold 1
	set_param "$COLD" call 1
	check "the thread is in kpatch_test_cold_wait()" \
		wait_until modparam_is "$COLD" state 1
	other=0
	for round in $(seq 30); do
		kp patch kr1 "$cfn" "$cnew" && kp unpatch kr1
		[ "$KP_RESULT" = EBUSY ] || other=$((other + 1))
	done
	diag "$(log_since_mark | grep -c 'refused: kpatch_test_cold_fn.cold') named the piece," \
		"$(log_since_mark | grep -c 'cannot be walked reliably') unreliable, of $round"
	check_eq "every try refused" 0 "$other"
	set_param kpatch retries "$retries"
	kretprobe_cleanup
	check_no_splat
else
	skip "no kprobe_events on this kernel"
fi
