#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-vmlinux.sh - patch a function of the kernel image: vmlinux's
# cmdline_proc_show() is redirected to kpatch_test_new's
# kpatch_test_cmdline_v1(), so /proc/cmdline reads "kpatch-test v1"; the
# patches file, sysfs and ftrace show the patch; unpatch restores the
# original /proc/cmdline byte for byte.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

setup_modules kpatch kpatch_test_new
old=$(sym cmdline_proc_show vmlinux) || bail "setup: find cmdline_proc_show"
new=$(sym kpatch_test_cmdline_v1 kpatch_test_new) ||
	bail "setup: find kpatch_test_cmdline_v1"
orig=$(cat /proc/cmdline)
orig_sum=$(md5sum </proc/cmdline)
line=$(pline p_vmlinux cmdline_proc_show "$old" \
	kpatch_test_new:kpatch_test_cmdline_v1 "$new" active)

start_test "patch cmdline_proc_show"
log_mark
check_no_grep "precondition: /proc/cmdline is the kernel's" '^kpatch-test' "$orig"
check_not "precondition: cmdline_proc_show is not in enabled_functions" \
	ftrace_enabled cmdline_proc_show
expect_ok patch p_vmlinux "$old" "$new"
check_eq "/proc/cmdline shows the v1 line" "kpatch-test v1" "$(cat /proc/cmdline)"
check_patches "patches file line" "$line"
check_sysfs_patches "sysfs directory p_vmlinux" p_vmlinux
check "cmdline_proc_show is in enabled_functions" ftrace_enabled cmdline_proc_show
check_transcript "the log says enabled" <<EOF
% echo 'patch p_vmlinux $old $new' > control
kpatch: tainting kernel with TAINT_LIVEPATCH
kpatch: patch 'p_vmlinux' enabled (1 function)
EOF
check_no_splat

start_test "unpatch"
log_mark
expect_ok unpatch p_vmlinux
check_eq "/proc/cmdline text restored" "$orig" "$(cat /proc/cmdline)"
check_eq "/proc/cmdline restored byte for byte" "$orig_sum" "$(md5sum </proc/cmdline)"
check_patches "patches file is empty"
check_sysfs_patches "sysfs directory removed"
check_not "cmdline_proc_show is gone from enabled_functions" \
	ftrace_enabled cmdline_proc_show
check_transcript "the log says removed" <<EOF
% echo 'unpatch p_vmlinux' > control
kpatch: patch 'p_vmlinux' removed
EOF
check_no_splat

start_test "patch again under the same name"
log_mark
expect_ok patch p_vmlinux "$old" "$new"
check_eq "/proc/cmdline shows the v1 line" "kpatch-test v1" "$(cat /proc/cmdline)"
check_patches "patches file line" "$line"
expect_ok unpatch p_vmlinux
check_eq "/proc/cmdline restored" "$orig_sum" "$(md5sum </proc/cmdline)"
check_transcript "the log says enabled, then removed" <<EOF
% echo 'patch p_vmlinux $old $new' > control
kpatch: patch 'p_vmlinux' enabled (1 function)
% echo 'unpatch p_vmlinux' > control
kpatch: patch 'p_vmlinux' removed
EOF
check_no_splat
