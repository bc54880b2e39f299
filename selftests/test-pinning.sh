#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-pinning.sh - while a patch is enabled, neither the module holding
# its new function, nor the module holding its old function, nor kpatch
# itself can be unloaded; after unpatch all three can.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

setup_modules kpatch kpatch_test_target kpatch_test_new
a=$(sym kpatch_test_value_a kpatch_test_target) || bail "setup: find kpatch_test_value_a"
a1=$(sym kpatch_test_value_a_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v1"
line=$(pline pin1 kpatch_test_target:kpatch_test_value_a "$a" \
	kpatch_test_new:kpatch_test_value_a_v1 "$a1" active)

start_test "module functions patched"
log_mark
expect_ok patch pin1 "$a" "$a1"
check_not "rmmod kpatch_test_new (new function) refused" unload_mod kpatch_test_new
check_not "rmmod kpatch refused" unload_kpatch
check_not "rmmod kpatch_test_target (old function) refused" unload_mod kpatch_test_target
check "kpatch_test_new still loaded" mod_loaded kpatch_test_new
check "kpatch_test_target still loaded" mod_loaded kpatch_test_target
check "kpatch still loaded" mod_loaded kpatch
check_eq "patch still in effect" "a=11 b=2" "$(target_values)"
check_patches "patch still listed" "$line"
check_transcript "the log: the patch, the refused rmmods, nothing else" <<EOF
% echo 'patch pin1 $a $a1' > control
kpatch: tainting kernel with TAINT_LIVEPATCH
kpatch: patch 'pin1' enabled (1 function)
% rmmod kpatch_test_new
% rmmod kpatch
% rmmod kpatch_test_target
EOF
check_no_splat

start_test "after unpatch"
log_mark
expect_ok unpatch pin1
check "rmmod kpatch_test_new succeeds" unload_mod kpatch_test_new
check "rmmod kpatch_test_target succeeds" unload_mod kpatch_test_target
check "rmmod kpatch succeeds" unload_kpatch
check_transcript "the log: removed, then the modules unloaded" <<EOF
% echo 'unpatch pin1' > control
kpatch: patch 'pin1' removed
% rmmod kpatch_test_new
% rmmod kpatch_test_target
% rmmod kpatch
EOF
check_no_splat

start_test "vmlinux function patched"
log_mark
setup_modules kpatch kpatch_test_new
cmd=$(sym cmdline_proc_show vmlinux) || bail "setup: find cmdline_proc_show"
cmd1=$(sym kpatch_test_cmdline_v1 kpatch_test_new) || bail "setup: find kpatch_test_cmdline_v1"
expect_ok patch pin2 "$cmd" "$cmd1"
check_not "rmmod kpatch_test_new (new function) refused" unload_mod kpatch_test_new
check_not "rmmod kpatch refused" unload_kpatch
check_eq "patch still in effect" "kpatch-test v1" "$(cat /proc/cmdline)"
expect_ok unpatch pin2
check "rmmod kpatch_test_new succeeds after unpatch" unload_mod kpatch_test_new
check "rmmod kpatch succeeds after unpatch" unload_kpatch
check_transcript "the log: a fresh kpatch.ko, the patch, refused and then clean rmmods" <<EOF
% insmod kpatch.ko
% insmod kpatch_test_new.ko
% echo 'patch pin2 $cmd $cmd1' > control
kpatch: tainting kernel with TAINT_LIVEPATCH
kpatch: patch 'pin2' enabled (1 function)
% rmmod kpatch_test_new
% rmmod kpatch
% echo 'unpatch pin2' > control
kpatch: patch 'pin2' removed
% rmmod kpatch_test_new
% rmmod kpatch
EOF
check_no_splat
