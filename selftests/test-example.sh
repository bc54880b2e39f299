#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-example.sh - the example patch module of Documentation.txt, "Writing
# a patch module" (selftests/example/kpatch_example.c).  testbed.sh builds it
# with its own Makefile against the kpatch.h and Module.symvers that `make
# install` put into a staging root, not against the source tree.  Loaded
# with cmdline_proc_show's address as /proc/kallsyms prints it, it replaces
# /proc/cmdline's handler; unpatch and rmmod bring the original back.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

new_text="kpatch example: cmdline_proc_show() replaced"
orig=$(cat /proc/cmdline)

# example_line STATE: the example's line in the patches file
example_line() {
	pline kpatch_example cmdline_proc_show "$old" \
		kpatch_example:kpatch_example_cmdline_show \
		"$(sym kpatch_example_cmdline_show kpatch_example)" "$1"
}

start_test "kpatch.ko first"
log_mark
check_not "precondition: kpatch is not loaded" mod_loaded kpatch
check_not "insmod kpatch_example fails without kpatch.ko" \
	load_mod kpatch_example old_addr=0
# Each line twice: busybox's insmod tries init_module() after
# finit_module() failed.
check_transcript "the log names the missing kpatch_register" kpatch_example <<EOF
% insmod kpatch_example.ko old_addr=0
kpatch_example: Unknown symbol kpatch_register (err -2)
kpatch_example: Unknown symbol kpatch_unregister (err -2)
kpatch_example: Unknown symbol kpatch_register (err -2)
kpatch_example: Unknown symbol kpatch_unregister (err -2)
EOF

setup_modules kpatch kpatch_test_new
# As Documentation.txt does it (sym, below, also checks for one address)
old=$(awk '$3 == "cmdline_proc_show" { print $1 }' /proc/kallsyms)
check_eq "one cmdline_proc_show in /proc/kallsyms" \
	"$(sym cmdline_proc_show vmlinux)" "$old" || bail "setup: find cmdline_proc_show"
cmd1=$(sym kpatch_test_cmdline_v1 kpatch_test_new) ||
	bail "setup: find kpatch_test_cmdline_v1"
other=$(sym version_proc_show vmlinux) || bail "setup: find version_proc_show"

start_test "patch and unpatch"
log_mark
check "insmod kpatch_example old_addr=<as /proc/kallsyms prints it>" \
	load_mod kpatch_example "old_addr=$old"
check_eq "/proc/cmdline comes from the new function" "$new_text" "$(cat /proc/cmdline)"
check "kpatch_example uses kpatch.ko's symbols" \
	test -e /sys/module/kpatch/holders/kpatch_example
check_patches "listed as kpatch_example" "$(example_line active)"
diag "$(cat "$KP_PATCHES")"
check_sysfs_patches "sysfs directory kpatch_example" kpatch_example
check_not "rmmod kpatch_example refused while the patch is enabled" \
	unload_mod kpatch_example
expect_ok unpatch kpatch_example
check_eq "/proc/cmdline is the original again" "$orig" "$(cat /proc/cmdline)"
check_patches "patches file is empty"
check "rmmod kpatch_example succeeds after unpatch" unload_mod kpatch_example
check_no_grep "its exit did not call kpatch_unregister()" \
	'kpatch_unregister\(\) failed' "$(log_since_mark)"
check_transcript "the log says enabled, then removed" kpatch_example <<EOF
% insmod kpatch_example.ko old_addr=$old
kpatch: tainting kernel with TAINT_LIVEPATCH
kpatch: patch 'kpatch_example' enabled (1 function)
% rmmod kpatch_example
% echo 'unpatch kpatch_example' > control
kpatch: patch 'kpatch_example' removed
% rmmod kpatch_example
EOF
check_no_splat

start_test "0x prefix, and removed by a replacing patch"
log_mark
check "insmod kpatch_example old_addr=0x<address>" \
	load_mod kpatch_example "old_addr=0x$old"
check_eq "/proc/cmdline comes from the new function" "$new_text" "$(cat /proc/cmdline)"
expect_ok replace other "$old" "$cmd1"
check_eq "the replacing patch is in effect" "kpatch-test v1" "$(cat /proc/cmdline)"
check "rmmod kpatch_example succeeds once replaced" unload_mod kpatch_example
check_no_grep "its exit did not call kpatch_unregister()" \
	'kpatch_unregister\(\) failed' "$(log_since_mark)"
expect_ok unpatch other
check_eq "/proc/cmdline is the original again" "$orig" "$(cat /proc/cmdline)"
check_transcript "the log says replaced by 'other', then 'other' removed" kpatch_example <<EOF
% insmod kpatch_example.ko old_addr=0x$old
kpatch: patch 'kpatch_example' enabled (1 function)
% echo 'replace other $old $cmd1' > control
kpatch: patch 'kpatch_example' removed
kpatch: patch 'other' enabled (1 function)
% rmmod kpatch_example
% echo 'unpatch other' > control
kpatch: patch 'other' removed
EOF
check_no_splat

start_test "refuses a wrong address"
log_mark
save_state
check_not "insmod kpatch_example without old_addr fails" load_mod kpatch_example
# Each line twice: when finit_module() fails, busybox's insmod tries
# init_module() with the same file, so a refused init runs, and logs, twice.
required="old_addr=<address of cmdline_proc_show in /proc/kallsyms> is required"
check_transcript "the log says old_addr is required" kpatch_example <<EOF
% insmod kpatch_example.ko
kpatch_example: $required
kpatch_example: $required
EOF
check_not "insmod kpatch_example old_addr=<version_proc_show> fails" \
	load_mod kpatch_example "old_addr=$other"
check_transcript "the log names the function at that address" kpatch_example <<EOF
% insmod kpatch_example.ko
kpatch_example: $required
kpatch_example: $required
% insmod kpatch_example.ko old_addr=$other
kpatch_example: old_addr=$other is version_proc_show, not cmdline_proc_show
kpatch_example: old_addr=$other is version_proc_show, not cmdline_proc_show
EOF
check_not "insmod kpatch_example old_addr=<not hex> fails" \
	load_mod kpatch_example old_addr=cmdline_proc_show
check_not "kpatch_example is not loaded" mod_loaded kpatch_example
check_state_unchanged
check_eq "/proc/cmdline is the original" "$orig" "$(cat /proc/cmdline)"
# The last two are the kernel's: old_addr is an unsigned long parameter.
check_transcript "the log says why; kpatch says nothing" kpatch_example <<EOF
% insmod kpatch_example.ko
kpatch_example: $required
kpatch_example: $required
% insmod kpatch_example.ko old_addr=$other
kpatch_example: old_addr=$other is version_proc_show, not cmdline_proc_show
kpatch_example: old_addr=$other is version_proc_show, not cmdline_proc_show
% insmod kpatch_example.ko old_addr=cmdline_proc_show
kpatch_example: \`cmdline_proc_show' invalid for parameter \`old_addr'
kpatch_example: \`cmdline_proc_show' invalid for parameter \`old_addr'
EOF
check_no_splat
