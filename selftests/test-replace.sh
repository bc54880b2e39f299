#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-replace.sh - "replace" applies a patch and removes every other
# enabled patch in the same step, whether they patch other functions or
# the same ones.  A refused replace removes nothing.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

setup_modules kpatch kpatch_test_target kpatch_test_new
cmd=$(sym cmdline_proc_show vmlinux) || bail "setup: find cmdline_proc_show"
cmd1=$(sym kpatch_test_cmdline_v1 kpatch_test_new) || bail "setup: find kpatch_test_cmdline_v1"
cmd2=$(sym kpatch_test_cmdline_v2 kpatch_test_new) || bail "setup: find kpatch_test_cmdline_v2"
a=$(sym kpatch_test_value_a kpatch_test_target) || bail "setup: find kpatch_test_value_a"
b=$(sym kpatch_test_value_b kpatch_test_target) || bail "setup: find kpatch_test_value_b"
a1=$(sym kpatch_test_value_a_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v1"
a2=$(sym kpatch_test_value_a_v2 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v2"
a3=$(sym kpatch_test_value_a_v3 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v3"
b1=$(sym kpatch_test_value_b_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_b_v1"
b2=$(sym kpatch_test_value_b_v2 kpatch_test_new) || bail "setup: find kpatch_test_value_b_v2"
orig=$(cat /proc/cmdline)

a_line() {
	pline "$1" kpatch_test_target:kpatch_test_value_a "$a" \
		"kpatch_test_new:kpatch_test_value_a_v$2" "$3" active
}
b_line() {
	pline "$1" kpatch_test_target:kpatch_test_value_b "$b" \
		"kpatch_test_new:kpatch_test_value_b_v$2" "$3" active
}

start_test "replace patches of other functions"
log_mark
expect_ok patch r1 "$cmd" "$cmd1"
expect_ok patch r2 "$a" "$a1"
check_eq "precondition: r1 in effect" "kpatch-test v1" "$(cat /proc/cmdline)"
check_eq "precondition: r2 in effect" "a=11 b=2" "$(target_values)"
expect_ok replace r3 "$b" "$b1"
check_eq "r3 in effect, r2's function back to original" "a=1 b=21" "$(target_values)"
check_eq "r1's function back to original" "$orig" "$(cat /proc/cmdline)"
check_patches "only r3 is listed" "$(b_line r3 1 "$b1")"
check_sysfs_patches "only r3 in sysfs" r3
check_not "cmdline_proc_show is gone from enabled_functions" \
	ftrace_enabled cmdline_proc_show
check_transcript "the log says r3 enabled once r1 and r2 were removed" <<EOF
% echo 'patch r1 $cmd $cmd1' > control
kpatch: tainting kernel with TAINT_LIVEPATCH
kpatch: patch 'r1' enabled (1 function)
% echo 'patch r2 $a $a1' > control
kpatch: patch 'r2' enabled (1 function)
% echo 'replace r3 $b $b1' > control
kpatch: patch 'r2' removed
kpatch: patch 'r1' removed
kpatch: patch 'r3' enabled (1 function)
EOF
check_no_splat

start_test "replace patches of the same functions"
log_mark
expect_ok patch r4 "$a" "$a2"
check_eq "precondition: r3 and r4 in effect" "a=12 b=21" "$(target_values)"
expect_ok replace r5 "$a" "$a3" "$b" "$b2"
check_eq "r5 in effect" "a=13 b=22" "$(target_values)"
check_patches_any_order "only r5 is listed" \
	"$(a_line r5 3 "$a3")" "$(b_line r5 2 "$b2")"
check_sysfs_patches "only r5 in sysfs" r5
check_transcript "the log says r5 enabled once r3 and r4 were removed" <<EOF
% echo 'patch r4 $a $a2' > control
kpatch: patch 'r4' enabled (1 function)
% echo 'replace r5 $a $a3 $b $b2' > control
kpatch: patch 'r4' removed
kpatch: patch 'r3' removed
kpatch: patch 'r5' enabled (2 functions)
EOF
check_no_splat

start_test "replace when nothing else is enabled"
log_mark
expect_ok unpatch r5
check_patches "precondition: no patches"
expect_ok replace r6 "$cmd" "$cmd2"
check_eq "r6 in effect" "kpatch-test v2" "$(cat /proc/cmdline)"
check_patches "only r6 is listed" \
	"$(pline r6 cmdline_proc_show "$cmd" kpatch_test_new:kpatch_test_cmdline_v2 "$cmd2" active)"
expect_ok unpatch r6
check_eq "original /proc/cmdline" "$orig" "$(cat /proc/cmdline)"
check_eq "original values" "a=1 b=2" "$(target_values)"
check_transcript "the log says enabled and removed, nothing else" <<EOF
% echo 'unpatch r5' > control
kpatch: patch 'r5' removed
% echo 'replace r6 $cmd $cmd2' > control
kpatch: patch 'r6' enabled (1 function)
% echo 'unpatch r6' > control
kpatch: patch 'r6' removed
EOF
check_no_splat

start_test "a replace refused with EINVAL removes nothing"
log_mark
expect_ok patch r7 "$a" "$a1"
expect_refused EINVAL replace r8 "$a" "$a2" "$a" "$a3"
check_eq "r7 still in effect" "a=11 b=2" "$(target_values)"
check_patches "r7 still listed" "$(a_line r7 1 "$a1")"
check_transcript "the log says why r8 is refused, and removes nothing" <<EOF
% echo 'patch r7 $a $a1' > control
kpatch: patch 'r7' enabled (1 function)
% echo 'replace r8 $a $a2 $a $a3' > control
kpatch: r8: an old function appears twice
EOF
check_no_splat

start_test "a replace refused with EEXIST removes nothing"
log_mark
expect_refused EEXIST replace r7 "$b" "$b1"
check_eq "r7 still in effect" "a=11 b=2" "$(target_values)"
check_patches "r7 still listed" "$(a_line r7 1 "$a1")"
expect_ok unpatch r7
check_eq "original values" "a=1 b=2" "$(target_values)"
check_transcript "the log says the name is in use, then r7 removed" <<EOF
% echo 'replace r7 $b $b1' > control
kpatch: replace 'r7' refused: a patch with that name exists
% echo 'unpatch r7' > control
kpatch: patch 'r7' removed
EOF
check_no_splat
