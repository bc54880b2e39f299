#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-module.sh - patch functions that live in a module:
# kpatch_test_target's kpatch_test_value_a() (returns 1) and
# kpatch_test_value_b() (returns 2), redirected to kpatch_test_new's
# versions (11 and 21).  A patch of both functions changes and restores
# them together, and a patch with one bad pair changes neither.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

setup_modules kpatch kpatch_test_target kpatch_test_new
a=$(sym kpatch_test_value_a kpatch_test_target) || bail "setup: find kpatch_test_value_a"
b=$(sym kpatch_test_value_b kpatch_test_target) || bail "setup: find kpatch_test_value_b"
a1=$(sym kpatch_test_value_a_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v1"
b1=$(sym kpatch_test_value_b_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_b_v1"
line_a() {
	pline "$1" kpatch_test_target:kpatch_test_value_a "$a" \
		kpatch_test_new:kpatch_test_value_a_v1 "$a1" active
}
line_b() {
	pline "$1" kpatch_test_target:kpatch_test_value_b "$b" \
		kpatch_test_new:kpatch_test_value_b_v1 "$b1" active
}

start_test "one function"
log_mark
check_eq "precondition: original values" "a=1 b=2" "$(target_values)"
expect_ok patch p_a "$a" "$a1"
check_eq "a runs kpatch_test_value_a_v1, b unchanged" "a=11 b=2" "$(target_values)"
check_patches "patches file line" "$(line_a p_a)"
check_sysfs_patches "sysfs directory p_a" p_a
check "kpatch_test_value_a is in enabled_functions" ftrace_enabled kpatch_test_value_a
expect_ok unpatch p_a
check_eq "a restored" "a=1 b=2" "$(target_values)"
check_patches "patches file is empty"
check_sysfs_patches "sysfs directory removed"
check_not "kpatch_test_value_a is gone from enabled_functions" \
	ftrace_enabled kpatch_test_value_a
check_transcript "the log says enabled, then removed" <<EOF
% echo 'patch p_a $a $a1' > control
kpatch: tainting kernel with TAINT_LIVEPATCH
kpatch: patch 'p_a' enabled (1 function)
% echo 'unpatch p_a' > control
kpatch: patch 'p_a' removed
EOF
check_no_splat

start_test "two functions in one patch"
log_mark
expect_ok patch p_ab "$a" "$a1" "$b" "$b1"
check_eq "both functions changed" "a=11 b=21" "$(target_values)"
check_patches_any_order "one line per function" "$(line_a p_ab)" "$(line_b p_ab)"
check_sysfs_patches "one sysfs directory" p_ab
expect_ok unpatch p_ab
check_eq "both functions restored" "a=1 b=2" "$(target_values)"
check_patches "patches file is empty"
check_sysfs_patches "sysfs directory removed"
check_transcript "the log counts two functions" <<EOF
% echo 'patch p_ab $a $a1 $b $b1' > control
kpatch: patch 'p_ab' enabled (2 functions)
% echo 'unpatch p_ab' > control
kpatch: patch 'p_ab' removed
EOF
check_no_splat

start_test "bad second pair refuses the whole patch"
log_mark
expect_refused EINVAL patch p_half "$a" "$a1" "$b" "$(addr_add "$b1" 1)"
check_eq "neither function changed" "a=1 b=2" "$(target_values)"
check_transcript "the log names the bad address, and nothing else" <<EOF
% echo 'patch p_half $a $a1 $b $(addr_add "$b1" 1)' > control
kpatch: p_half: new function $(addr_add "$b1" 1) is not the start of a function (kpatch_test_value_b_v1+0x1)
EOF
check_no_splat

start_test "bad first pair refuses the whole patch"
log_mark
expect_refused EINVAL patch p_half "$(addr_add "$a" 1)" "$a1" "$b" "$b1"
check_eq "neither function changed" "a=1 b=2" "$(target_values)"
check_transcript "the log names the bad address, and nothing else" <<EOF
% echo 'patch p_half $(addr_add "$a" 1) $a1 $b $b1' > control
kpatch: p_half: old function $(addr_add "$a" 1) is not the start of a function (kpatch_test_value_a+0x1)
EOF
check_no_splat
