#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-sites.sh - every ftrace hook kpatch has on a function pins the
# function's module until the hook is removed.  kpatch makes the direct
# calls of one patch command as one group and removes a group only once
# none of its functions is patched any more.  So after "patch p1 cmd v1
# a a1", "patch p2 cmd v2" and "unpatch p1", kpatch_test_value_a is not
# patched any more (it returns 1 again), but enabled_functions still
# lists it with kpatch_direct_tramp (the direct call stays, with no
# target, while p2 keeps cmdline_proc_show and with it the group).  Then
# kpatch_test_target, which holds kpatch_test_value_a, must not be
# unloaded: a hook on freed (and later reused) module text would make
# ftrace warn when the module comes back and the group's removal touch
# what is gone.  After "unpatch p2" the group is removed, the module can
# be unloaded and loaded again, and kpatch.ko unloads.
#
# Functions: vmlinux's cmdline_proc_show (kpatch_test_new's
# kpatch_test_cmdline_v1/v2: /proc/cmdline reads "kpatch-test v1"/"v2")
# and kpatch_test_target's kpatch_test_value_a() (1; _v1: 11).
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

TARGET=kpatch_test_target

setup_modules kpatch "$TARGET" kpatch_test_new
cmd=$(sym cmdline_proc_show vmlinux) || bail "setup: find cmdline_proc_show"
cmd1=$(sym kpatch_test_cmdline_v1 kpatch_test_new) || bail "setup: find kpatch_test_cmdline_v1"
cmd2=$(sym kpatch_test_cmdline_v2 kpatch_test_new) || bail "setup: find kpatch_test_cmdline_v2"
a=$(sym kpatch_test_value_a "$TARGET") || bail "setup: find kpatch_test_value_a"
a1=$(sym kpatch_test_value_a_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v1"

# gone FUNC: FUNC is not in enabled_functions
gone() {
	! ftrace_enabled "$1"
}

# tramp_users: the functions enabled_functions lists with kpatch's direct
# trampoline, but for kpatch's own anchor functions (kpatch.ko keeps one
# on the trampoline for as long as it is loaded)
tramp_users() {
	awk '
		/^[^ \t]/ { entry = $0; name = $1; next }
		/direct-->kpatch_direct_tramp/ && entry !~ /\[kpatch\]/ { print name }
	' "$TRACEFS/enabled_functions"
}

# show_sites: the enabled_functions lines of both functions
show_sites() {
	diag "enabled_functions:"
	diag "$(site cmdline_proc_show)"
	diag "$(site kpatch_test_value_a)"
}

# is_patched NAME: is patch NAME in the patches file?
is_patched() {
	grep -q "^$1 " "$KP_PATCHES"
}

cmdline() {
	cat /proc/cmdline
}

start_test "one group, one function of it still patched"
log_mark
expect_ok patch p1 "$cmd" "$cmd1" "$a" "$a1"
check_eq "p1: a runs _v1" "a=11 b=2" "$(target_values)"
check_eq "p1: /proc/cmdline from v1" "kpatch-test v1" "$(cmdline)"
check "cmdline_proc_show on the direct path" on_direct cmdline_proc_show
check "kpatch_test_value_a on the direct path" on_direct kpatch_test_value_a
expect_ok patch p2 "$cmd" "$cmd2"
check_eq "p2: /proc/cmdline from v2" "kpatch-test v2" "$(cmdline)"
expect_ok unpatch p1
check_eq "a restored" "a=1 b=2" "$(target_values)"
check_eq "/proc/cmdline still from v2" "kpatch-test v2" "$(cmdline)"
check_patches "only p2 left" \
	"$(pline p2 cmdline_proc_show "$cmd" \
		kpatch_test_new:kpatch_test_cmdline_v2 "$cmd2" active)"
show_sites
check "kpatch_test_value_a still hooked: direct-->kpatch_direct_tramp (its group stays)" \
	on_direct kpatch_test_value_a
check_no_splat

start_test "the hook pins the module"
log_mark
if unload_mod "$TARGET"; then
	not_ok "rmmod $TARGET refused while kpatch hooks kpatch_test_value_a"
	diag "the module is gone under kpatch's hook; unpatch p2 first, then reload"
	show_sites
	kp unpatch p2 || :
	diag "after unpatch p2:" "$(grep kpatch "$TRACEFS/enabled_functions")"
	diag "kernel log:" "$(log_since_mark | tail -n 40)"
	load_mod "$TARGET" || bail "setup: load $TARGET.ko again"
	diag "after reload:" "$(grep kpatch "$TRACEFS/enabled_functions")"
	diag "kernel log:" "$(log_since_mark | tail -n 40)"
else
	ok "rmmod $TARGET refused while kpatch hooks kpatch_test_value_a"
	check "$TARGET still loaded" mod_loaded "$TARGET"
	check_eq "a still returns 1" "a=1 b=2" "$(target_values)"
	check "kpatch_test_value_a still hooked" on_direct kpatch_test_value_a
fi
check_no_splat

start_test "the group goes with its last patch"
log_mark
if is_patched p2; then
	expect_ok unpatch p2
fi
check_patches "nothing patched"
check "kpatch_test_value_a is gone from enabled_functions" \
	wait_until gone kpatch_test_value_a
check "cmdline_proc_show is gone from enabled_functions" \
	wait_until gone cmdline_proc_show
check_eq "no function but kpatch's anchor on kpatch_direct_tramp" "" "$(tramp_users)"
check "rmmod $TARGET succeeds" unload_mod "$TARGET"
check "insmod $TARGET succeeds" load_mod "$TARGET"
check_eq "a returns 1" "a=1 b=2" "$(target_values)"
check_not "kpatch_test_value_a is not in enabled_functions" \
	ftrace_enabled kpatch_test_value_a
check "rmmod $TARGET succeeds again" unload_mod "$TARGET"
check "rmmod kpatch succeeds" unload_kpatch
check_no_splat
