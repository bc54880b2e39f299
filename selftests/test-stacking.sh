#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-stacking.sh - several patches on the same function.  The newest
# patch wins ("active"), older ones are "shadowed"; removing a patch from
# the middle or the bottom of the stack changes nothing visible, removing
# the top one uncovers the next, removing the last restores the original.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

setup_modules kpatch kpatch_test_target kpatch_test_new
cmd=$(sym cmdline_proc_show vmlinux) || bail "setup: find cmdline_proc_show"
cmd1=$(sym kpatch_test_cmdline_v1 kpatch_test_new) || bail "setup: find kpatch_test_cmdline_v1"
cmd2=$(sym kpatch_test_cmdline_v2 kpatch_test_new) || bail "setup: find kpatch_test_cmdline_v2"
cmd3=$(sym kpatch_test_cmdline_v3 kpatch_test_new) || bail "setup: find kpatch_test_cmdline_v3"
a=$(sym kpatch_test_value_a kpatch_test_target) || bail "setup: find kpatch_test_value_a"
a1=$(sym kpatch_test_value_a_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v1"
a2=$(sym kpatch_test_value_a_v2 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v2"
a3=$(sym kpatch_test_value_a_v3 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v3"
b=$(sym kpatch_test_value_b kpatch_test_target) || bail "setup: find kpatch_test_value_b"
b1=$(sym kpatch_test_value_b_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_b_v1"
orig=$(cat /proc/cmdline)

# cmd_line NAME VERSION STATE / a_line NAME VERSION STATE: patches file
# lines for cmdline_proc_show and kpatch_test_value_a
cmd_line() {
	case $2 in
	1) _new=$cmd1 ;;
	2) _new=$cmd2 ;;
	*) _new=$cmd3 ;;
	esac
	pline "$1" cmdline_proc_show "$cmd" \
		"kpatch_test_new:kpatch_test_cmdline_v$2" "$_new" "$3"
}
a_line() {
	case $2 in
	1) _new=$a1 ;;
	2) _new=$a2 ;;
	*) _new=$a3 ;;
	esac
	pline "$1" kpatch_test_target:kpatch_test_value_a "$a" \
		"kpatch_test_new:kpatch_test_value_a_v$2" "$_new" "$3"
}
cmdline() {
	cat /proc/cmdline
}

start_test "three patches on cmdline_proc_show"
log_mark
expect_ok patch s1 "$cmd" "$cmd1"
check_eq "s1 applied: v1" "kpatch-test v1" "$(cmdline)"
expect_ok patch s2 "$cmd" "$cmd2"
check_eq "s2 applied: v2" "kpatch-test v2" "$(cmdline)"
expect_ok patch s3 "$cmd" "$cmd3"
check_eq "newest patch wins: v3" "kpatch-test v3" "$(cmdline)"
check_patches "s1 and s2 shadowed, s3 active" \
	"$(cmd_line s1 1 shadowed)" "$(cmd_line s2 2 shadowed)" \
	"$(cmd_line s3 3 active)"
check_sysfs_patches "sysfs directories s1 s2 s3" s1 s2 s3

start_test "remove the middle patch"
expect_ok unpatch s2
check_eq "still v3" "kpatch-test v3" "$(cmdline)"
check_patches "s1 shadowed, s3 active" \
	"$(cmd_line s1 1 shadowed)" "$(cmd_line s3 3 active)"
check_sysfs_patches "sysfs directories s1 s3" s1 s3

start_test "remove the top patch"
expect_ok unpatch s3
check_eq "v1 uncovered" "kpatch-test v1" "$(cmdline)"
check_patches "s1 active" "$(cmd_line s1 1 active)"
check_sysfs_patches "sysfs directory s1" s1

start_test "remove the last patch"
expect_ok unpatch s1
check_eq "original /proc/cmdline" "$orig" "$(cmdline)"
check_patches "patches file is empty"
check_sysfs_patches "no sysfs directories"
check_not "cmdline_proc_show is gone from enabled_functions" \
	ftrace_enabled cmdline_proc_show
check_transcript "the log says s1 s2 s3 enabled, removed as unpatched" <<EOF
% echo 'patch s1 $cmd $cmd1' > control
kpatch: tainting kernel with TAINT_LIVEPATCH
kpatch: patch 's1' enabled (1 function)
% echo 'patch s2 $cmd $cmd2' > control
kpatch: patch 's2' enabled (1 function)
% echo 'patch s3 $cmd $cmd3' > control
kpatch: patch 's3' enabled (1 function)
% echo 'unpatch s2' > control
kpatch: patch 's2' removed
% echo 'unpatch s3' > control
kpatch: patch 's3' removed
% echo 'unpatch s1' > control
kpatch: patch 's1' removed
EOF
check_no_splat

start_test "remove the bottom patch first"
log_mark
expect_ok patch t1 "$a" "$a1"
expect_ok patch t2 "$a" "$a2"
expect_ok patch t3 "$a" "$a3"
check_eq "newest patch wins: 13" "a=13 b=2" "$(target_values)"
expect_ok unpatch t1
check_eq "still 13" "a=13 b=2" "$(target_values)"
check_patches "t2 shadowed, t3 active" \
	"$(a_line t2 2 shadowed)" "$(a_line t3 3 active)"
expect_ok unpatch t3
check_eq "t2 uncovered: 12" "a=12 b=2" "$(target_values)"
check_patches "t2 active" "$(a_line t2 2 active)"
expect_ok unpatch t2
check_eq "original values" "a=1 b=2" "$(target_values)"
check_patches "patches file is empty"
check_transcript "the log says t1 t2 t3 enabled, removed as unpatched" <<EOF
% echo 'patch t1 $a $a1' > control
kpatch: patch 't1' enabled (1 function)
% echo 'patch t2 $a $a2' > control
kpatch: patch 't2' enabled (1 function)
% echo 'patch t3 $a $a3' > control
kpatch: patch 't3' enabled (1 function)
% echo 'unpatch t1' > control
kpatch: patch 't1' removed
% echo 'unpatch t3' > control
kpatch: patch 't3' removed
% echo 'unpatch t2' > control
kpatch: patch 't2' removed
EOF
check_no_splat

start_test "stacking is per function"
log_mark
expect_ok patch m1 "$a" "$a1" "$b" "$b1"
expect_ok patch m2 "$a" "$a2"
check_eq "a from m2, b from m1" "a=12 b=21" "$(target_values)"
check_patches_any_order "m1's a shadowed, m1's b active, m2's a active" \
	"$(a_line m1 1 shadowed)" \
	"$(pline m1 kpatch_test_target:kpatch_test_value_b "$b" \
		kpatch_test_new:kpatch_test_value_b_v1 "$b1" active)" \
	"$(a_line m2 2 active)"
check_grep "m2's line comes after m1's" '^m2 ' "$(tail -n 1 "$KP_PATCHES")"
expect_ok unpatch m1
check_eq "a still from m2, b restored" "a=12 b=2" "$(target_values)"
check_patches "m2 active" "$(a_line m2 2 active)"
expect_ok unpatch m2
check_eq "original values" "a=1 b=2" "$(target_values)"
check_transcript "the log counts m1's two functions, m2's one" <<EOF
% echo 'patch m1 $a $a1 $b $b1' > control
kpatch: patch 'm1' enabled (2 functions)
% echo 'patch m2 $a $a2' > control
kpatch: patch 'm2' enabled (1 function)
% echo 'unpatch m1' > control
kpatch: patch 'm1' removed
% echo 'unpatch m2' > control
kpatch: patch 'm2' removed
EOF
check_no_splat
