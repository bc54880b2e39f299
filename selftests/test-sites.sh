#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-sites.sh - kpatch's ftrace hook on a function (its site) pins the
# function's module while it is there, and goes with the function's last
# patch, whatever other patches stay.  After "patch p1 cmd v1 a a1",
# "patch p2 cmd v2" and "unpatch p1", kpatch_test_value_a is not patched
# any more: it returns 1 again and is gone from enabled_functions at once,
# while cmdline_proc_show keeps its site for p2.  kpatch_test_target,
# which holds kpatch_test_value_a, is refused by rmmod while a is
# patched; once it is not, the module unloads and loads again with no
# hook left on its text (a hook on freed and reused module text would
# make ftrace warn).  After "unpatch p2" no site is left and kpatch.ko
# unloads.
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
orig=$(cat /proc/cmdline)

# gone FUNC: FUNC is not in enabled_functions
gone() {
	! ftrace_enabled "$1"
}

# kpatch_site FUNC: enabled_functions lists FUNC with a site of kpatch's:
# a direct call (a jmp site, or one on kpatch_guard) or kpatch's handler
kpatch_site() {
	site "$1" | grep -Eq 'direct(\(jmp\))?-->|kpatch_(ftrace|fops)_handler'
}

# kpatch_sites: the functions enabled_functions lists with a site of
# kpatch's, but for kpatch's own functions (kpatch.ko keeps an ftrace_ops
# on one of them for as long as it is loaded)
kpatch_sites() {
	awk '
		function done() {
			if (name != "" && entry !~ /^[^ \t]* \[kpatch\]/ &&
			    entry ~ /direct(\(jmp\))?-->|kpatch_(ftrace|fops)_handler/)
				print name
		}
		/^[^ \t]/ { done(); entry = $0; name = $1; next }
		{ entry = entry "\n" $0 }
		END { done() }
	' "$TRACEFS/enabled_functions"
}

# show_sites: the enabled_functions lines of both functions
show_sites() {
	diag "enabled_functions:"
	diag "$(site cmdline_proc_show)"
	diag "$(site kpatch_test_value_a)"
}

cmdline() {
	cat /proc/cmdline
}

start_test "a site goes with its function's last patch"
log_mark
expect_ok patch p1 "$cmd" "$cmd1" "$a" "$a1"
check_eq "p1: a runs _v1" "a=11 b=2" "$(target_values)"
check_eq "p1: /proc/cmdline from v1" "kpatch-test v1" "$(cmdline)"
show_sites
check "cmdline_proc_show has a site of kpatch's" kpatch_site cmdline_proc_show
check "kpatch_test_value_a has a site of kpatch's" kpatch_site kpatch_test_value_a
expect_ok patch p2 "$cmd" "$cmd2"
check_eq "p2: /proc/cmdline from v2" "kpatch-test v2" "$(cmdline)"
check_eq "p2: a still runs _v1" "a=11 b=2" "$(target_values)"
expect_ok unpatch p1
check_eq "a restored" "a=1 b=2" "$(target_values)"
check_eq "/proc/cmdline still from v2" "kpatch-test v2" "$(cmdline)"
check_patches "only p2 left" \
	"$(pline p2 cmdline_proc_show "$cmd" \
		kpatch_test_new:kpatch_test_cmdline_v2 "$cmd2" active)"
show_sites
check "kpatch_test_value_a is gone from enabled_functions" \
	gone kpatch_test_value_a
check "cmdline_proc_show keeps its site for p2" kpatch_site cmdline_proc_show
check_transcript "the log has the patches enabled and p1 removed, nothing else" <<EOF
% echo 'patch p1 $cmd $cmd1 $a $a1' > control
kpatch: tainting kernel with TAINT_LIVEPATCH
kpatch: patch 'p1' enabled (2 functions)
% echo 'patch p2 $cmd $cmd2' > control
kpatch: patch 'p2' enabled (1 function)
% echo 'unpatch p1' > control
kpatch: patch 'p1' removed
EOF
check_no_splat

start_test "a hooked function's module is pinned"
log_mark
expect_ok patch p3 "$a" "$a1"
check_eq "p3: a runs _v1" "a=11 b=2" "$(target_values)"
check "kpatch_test_value_a has a site of kpatch's" kpatch_site kpatch_test_value_a
if unload_mod "$TARGET"; then
	not_ok "rmmod $TARGET refused while kpatch hooks kpatch_test_value_a"
	diag "the module is gone under kpatch's hook; loading it again"
	diag "kernel log:" "$(log_since_mark | tail -n 40)"
	kp unpatch p3 || :
	load_mod "$TARGET" || bail "setup: load $TARGET.ko again"
else
	ok "rmmod $TARGET refused while kpatch hooks kpatch_test_value_a"
	check "$TARGET still loaded" mod_loaded "$TARGET"
	check_eq "a still runs _v1" "a=11 b=2" "$(target_values)"
	check "kpatch_test_value_a still has its site" kpatch_site kpatch_test_value_a
	expect_ok unpatch p3
fi
check_eq "a restored" "a=1 b=2" "$(target_values)"
check "kpatch_test_value_a is gone from enabled_functions" \
	gone kpatch_test_value_a
check_no_splat

start_test "a module whose functions are not patched any more unloads"
log_mark
check "rmmod $TARGET succeeds while p2 stays" unload_mod "$TARGET"
check "insmod $TARGET succeeds" load_mod "$TARGET"
check_eq "a returns 1" "a=1 b=2" "$(target_values)"
check_not "kpatch_test_value_a is not in enabled_functions" \
	ftrace_enabled kpatch_test_value_a
check_eq "/proc/cmdline still from v2" "kpatch-test v2" "$(cmdline)"
check_not "rmmod kpatch refused while p2 hooks cmdline_proc_show" unload_kpatch
check_no_splat

start_test "the last site goes with the last patch"
log_mark
expect_ok unpatch p2
check_patches "nothing patched"
check_eq "/proc/cmdline restored" "$orig" "$(cmdline)"
check "cmdline_proc_show is gone from enabled_functions" \
	gone cmdline_proc_show
check_eq "no site of kpatch's left" "" "$(kpatch_sites)"
check "rmmod $TARGET succeeds" unload_mod "$TARGET"
check "rmmod kpatch succeeds" unload_kpatch
check_no_splat
