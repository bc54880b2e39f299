#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-ftrace.sh - kpatch shares its functions with the function tracer.
# With set_ftrace_filter on the patched cmdline_proc_show and the
# function tracer on, /proc/cmdline still shows the patched text and the
# trace shows cmdline_proc_show being called; in either order of turning
# the tracer on and patching.  The tracer is turned off afterwards.
# While kpatch is loaded, kernel.ftrace_enabled cannot be set to 0 (which
# would silently unpatch every function): the write fails.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

# tr_write FILE VALUE: write VALUE to a tracefs FILE
tr_write() {
	diag "% echo $2 > $TRACEFS/$1"
	echo "$2" >"$TRACEFS/$1"
}

tracer_off() {
	tr_write current_tracer nop
	tr_write set_ftrace_filter ""
	tr_write trace ""
}

tracer_on() {
	tr_write current_tracer nop
	tr_write trace ""
	tr_write set_ftrace_filter cmdline_proc_show &&
		tr_write current_tracer function &&
		tr_write tracing_on 1
}

# trace_shows: /proc/cmdline has been read since the trace was cleared
trace_shows() {
	grep -q 'cmdline_proc_show' "$TRACEFS/trace"
}

KP_CLEANUP_HOOK=tracer_off

setup_modules kpatch kpatch_test_new
cmd=$(sym cmdline_proc_show vmlinux) || bail "setup: find cmdline_proc_show"
cmd1=$(sym kpatch_test_cmdline_v1 kpatch_test_new) || bail "setup: find kpatch_test_cmdline_v1"
orig=$(cat /proc/cmdline)
grep -qw function "$TRACEFS/available_tracers" ||
	bail "setup: the function tracer is available"

start_test "tracer on a patched function"
log_mark
expect_ok patch ft1 "$cmd" "$cmd1"
check "function tracer on, filtered to cmdline_proc_show" tracer_on
check_eq "/proc/cmdline still patched" "kpatch-test v1" "$(cat /proc/cmdline)"
check "trace shows cmdline_proc_show" trace_shows
diag "$(grep cmdline_proc_show "$TRACEFS/trace")"
tracer_off
check_eq "still patched with the tracer off" "kpatch-test v1" "$(cat /proc/cmdline)"
check_patches "patch listed as active" \
	"$(pline ft1 cmdline_proc_show "$cmd" kpatch_test_new:kpatch_test_cmdline_v1 "$cmd1" active)"
expect_ok unpatch ft1
check_eq "/proc/cmdline restored" "$orig" "$(cat /proc/cmdline)"
check_no_splat

# ftrace_off: try to turn ftrace off (kernel.ftrace_enabled=0)
ftrace_off() {
	diag "% echo 0 > $FTRACE_SYSCTL"
	echo 0 >"$FTRACE_SYSCTL"
}

ftrace_back_on() {
	echo 1 >"$FTRACE_SYSCTL" 2>/dev/null || :
}

FTRACE_SYSCTL=/proc/sys/kernel/ftrace_enabled
start_test "ftrace cannot be turned off under a patch"
log_mark
expect_ok patch ft3 "$cmd" "$cmd1"
if check_not "echo 0 > $FTRACE_SYSCTL is refused" ftrace_off; then
	:
else
	ftrace_back_on
fi
check_eq "ftrace_enabled is still 1" 1 "$(cat "$FTRACE_SYSCTL")"
check_eq "/proc/cmdline still patched" "kpatch-test v1" "$(cat /proc/cmdline)"
expect_ok unpatch ft3
check_no_splat

start_test "patch a traced function"
log_mark
check "function tracer on, filtered to cmdline_proc_show" tracer_on
cat /proc/cmdline >/dev/null
check "trace shows cmdline_proc_show before the patch" trace_shows
expect_ok patch ft2 "$cmd" "$cmd1"
tr_write trace ""
check_eq "/proc/cmdline patched while traced" "kpatch-test v1" "$(cat /proc/cmdline)"
check "trace shows cmdline_proc_show while patched" trace_shows
expect_ok unpatch ft2
tr_write trace ""
check_eq "/proc/cmdline restored while traced" "$orig" "$(cat /proc/cmdline)"
check "trace shows cmdline_proc_show after unpatch" trace_shows
tracer_off
check "cmdline_proc_show is gone from enabled_functions" \
	test -z "$(grep '^cmdline_proc_show[ 	]' "$TRACEFS/enabled_functions")"
check_no_splat
