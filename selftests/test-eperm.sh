#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-eperm.sh - the control file needs CAP_SYS_MODULE.  Root without
# CAP_SYS_MODULE (kpctl --nocap) gets EPERM for patch, replace and
# unpatch, and nothing changes; the same commands with the capability
# work.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

setup_modules kpatch kpatch_test_new
cmd=$(sym cmdline_proc_show vmlinux) || bail "setup: find cmdline_proc_show"
cmd1=$(sym kpatch_test_cmdline_v1 kpatch_test_new) || bail "setup: find kpatch_test_cmdline_v1"
cmd2=$(sym kpatch_test_cmdline_v2 kpatch_test_new) || bail "setup: find kpatch_test_cmdline_v2"
orig=$(cat /proc/cmdline)

# nocap_refused CMD...: without CAP_SYS_MODULE CMD fails with EPERM and
# changes nothing
nocap_refused() {
	save_state
	kp_nocap "$@"
	check_eq "$(kp_what "$*") without CAP_SYS_MODULE -> EPERM" EPERM "$KP_RESULT"
	check_state_unchanged
}

start_test "patch"
log_mark
nocap_refused patch np1 "$cmd" "$cmd1"
check_eq "/proc/cmdline unchanged" "$orig" "$(cat /proc/cmdline)"
expect_ok patch np1 "$cmd" "$cmd1"
check_eq "with the capability the patch applies" "kpatch-test v1" "$(cat /proc/cmdline)"
# No line for a refusal for want of privilege: only those after it log.
check_transcript "the log: nothing for the refused write, then enabled" <<EOF
% echo 'patch np1 $cmd $cmd1' > control (without CAP_SYS_MODULE)
% echo 'patch np1 $cmd $cmd1' > control
kpatch: tainting kernel with TAINT_LIVEPATCH
kpatch: patch 'np1' enabled (1 function)
EOF
check_no_splat

start_test "replace"
log_mark
nocap_refused replace np2 "$cmd" "$cmd2"
check_eq "np1 still in effect" "kpatch-test v1" "$(cat /proc/cmdline)"
check_transcript "the log: nothing for the refused write" <<EOF
% echo 'replace np2 $cmd $cmd2' > control (without CAP_SYS_MODULE)
EOF
check_no_splat

start_test "unpatch"
log_mark
nocap_refused unpatch np1
check_eq "np1 still in effect" "kpatch-test v1" "$(cat /proc/cmdline)"
expect_ok unpatch np1
check_eq "with the capability unpatch works" "$orig" "$(cat /proc/cmdline)"
check_transcript "the log: nothing for the refused write, then removed" <<EOF
% echo 'unpatch np1' > control (without CAP_SYS_MODULE)
% echo 'unpatch np1' > control
kpatch: patch 'np1' removed
EOF
check_no_splat
