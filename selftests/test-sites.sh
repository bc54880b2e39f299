#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-sites.sh - kpatch's ftrace hook on a function (its site), as
# ftrace's enabled_functions shows it, on every kernel the same.
#
# - Every patched function has one IPMODIFY ftrace_ops of its own, whose
#   handler is kpatch_ftrace_handler, and no direct call: enabled_functions
#   lists the function with the IPMODIFY flag and names the handler.  A
#   patch stacked on a function uses the site the function has; the site
#   goes with the function's last patch.
# - Each site's ftrace_ops gets a trampoline of its own from ftrace
#   (/proc/kallsyms counts them), however many functions an update
#   patches: five functions at once are five trampolines, a patch stacked
#   on one of them makes none, and they go with their sites.
# - A site pins the function's module while it is there, and goes with
#   the function's last patch, whatever other patches stay.  After "patch
#   p1 cmd v1 a a1", "patch p2 cmd v2" and "unpatch p1",
#   kpatch_test_value_a is not patched any more: it returns 1 again and
#   is gone from enabled_functions at once, while cmdline_proc_show keeps
#   its site for p2.  kpatch_test_target, which holds
#   kpatch_test_value_a, is refused by rmmod while a is patched; once it
#   is not, the module unloads and loads again with no hook left on its
#   text (a hook on freed and reused module text would make ftrace
#   warn).  After "unpatch p2" no site is left and kpatch.ko unloads.
#
# Every patched function's result is checked at every step, and the
# kernel log of each case is compared whole: kpatch says nothing about
# its sites.
#
# Functions: vmlinux's cmdline_proc_show (kpatch_test_new's
# kpatch_test_cmdline_v1/v2: /proc/cmdline reads "kpatch-test v1"/"v2"),
# kpatch_test_target's kpatch_test_value_a() (1) and kpatch_test_value_b()
# (2), kpatch_test_new's _v1 (11, 21), _v2 (12, 22) and _v3 (13).
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
a2=$(sym kpatch_test_value_a_v2 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v2"
a3=$(sym kpatch_test_value_a_v3 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v3"
b=$(sym kpatch_test_value_b "$TARGET") || bail "setup: find kpatch_test_value_b"
b1=$(sym kpatch_test_value_b_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_b_v1"
b2=$(sym kpatch_test_value_b_v2 kpatch_test_new) || bail "setup: find kpatch_test_value_b_v2"
orig=$(cat /proc/cmdline)

# gone FUNC: FUNC is not in enabled_functions
gone() {
	! ftrace_enabled "$1"
}

# kpatch_site FUNC: enabled_functions lists FUNC with a site of kpatch's:
# kpatch's handler
kpatch_site() {
	site "$1" | grep -q 'kpatch_ftrace_handler'
}

# kpatch_sites: the functions enabled_functions lists with a site of
# kpatch's, but for kpatch's own functions (kpatch.ko keeps an ftrace_ops
# on one of them for as long as it is loaded)
kpatch_sites() {
	awk '
		function done() {
			if (name != "" && entry !~ /^[^ \t]* \[kpatch\]/ &&
			    entry ~ /kpatch_ftrace_handler/)
				print name
		}
		/^[^ \t]/ { done(); entry = $0; name = $1; next }
		{ entry = entry "\n" $0 }
		END { done() }
	' "$TRACEFS/enabled_functions"
}

# ipmodify FUNC: an ftrace_ops with IPMODIFY is on FUNC (the flags follow
# the count: " (1) R I")
ipmodify() {
	site "$1" | head -n 1 | grep -Eq '\([0-9]+\) [R ] I( |$)'
}

# any_direct FUNC: FUNC has a direct call ("direct-->", or on 7.x
# "direct(jmp)-->" where ftrace makes it a jmp), whoever's
any_direct() {
	site "$1" | grep -Eq 'direct(\(jmp\))?-->'
}

# check_own_ops FUNC: FUNC's site is an IPMODIFY ftrace_ops whose handler
# enabled_functions names (kpatch's is the only ftrace_ops on FUNC), and
# nothing else is there
check_own_ops() {
	check "$1: IPMODIFY ops" ipmodify "$1"
	check "$1: kpatch_ftrace_handler" kpatch_site "$1"
	check_not "$1: no direct call" any_direct "$1"
}

# trampolines: how many trampolines ftrace has made for ftrace_ops (each
# is a "ftrace_trampoline [__builtin__ftrace]" line of /proc/kallsyms)
trampolines() {
	grep -c '[[:space:]]ftrace_trampoline[[:space:]]*\[__builtin__ftrace\]' \
		/proc/kallsyms
}

# show_sites: the enabled_functions lines of the three functions
show_sites() {
	diag "enabled_functions:"
	diag "$(site cmdline_proc_show)"
	diag "$(site kpatch_test_value_a)"
	diag "$(site kpatch_test_value_b)"
}

cmdline() {
	cat /proc/cmdline
}

start_test "a site per function: an ftrace_ops of its own"
log_mark
check_eq "precondition: original values" "a=1 b=2" "$(target_values)"
expect_ok patch d1 "$a" "$a1" "$b" "$b1"
check_eq "d1: a runs _v1, b runs _v1" "a=11 b=21" "$(target_values)"
show_sites
check_own_ops kpatch_test_value_a
check_own_ops kpatch_test_value_b
expect_ok patch d2 "$a" "$a2"
check_eq "d2 stacked: a runs _v2, b still _v1" "a=12 b=21" "$(target_values)"
show_sites
check_own_ops kpatch_test_value_a
check_own_ops kpatch_test_value_b
expect_ok unpatch d2
check_eq "d2 gone: a back to _v1" "a=11 b=21" "$(target_values)"
check_own_ops kpatch_test_value_a
check_own_ops kpatch_test_value_b
expect_ok unpatch d1
check_eq "both restored" "a=1 b=2" "$(target_values)"
check "kpatch_test_value_a is gone from enabled_functions" \
	gone kpatch_test_value_a
check "kpatch_test_value_b is gone from enabled_functions" \
	gone kpatch_test_value_b
check_transcript "the log has the patches enabled and removed, nothing else" <<EOF
% echo 'patch d1 $a $a1 $b $b1' > control
kpatch: tainting kernel with TAINT_LIVEPATCH
kpatch: patch 'd1' enabled (2 functions)
% echo 'patch d2 $a $a2' > control
kpatch: patch 'd2' enabled (1 function)
% echo 'unpatch d2' > control
kpatch: patch 'd2' removed
% echo 'unpatch d1' > control
kpatch: patch 'd1' removed
EOF
check_no_splat

start_test "a trampoline per site, however many functions an update patches"
log_mark
tramps=$(trampolines)
diag "ftrace trampolines before: $tramps"
expect_ok patch o1 "$a" "$a1"
check_eq "o1: one trampoline more" "$((tramps + 1))" "$(trampolines)"
expect_ok patch o2 "$b" "$b1"
check_eq "o1, o2: a runs _v1, b runs _v1" "a=11 b=21" "$(target_values)"
check_eq "o2: a trampoline of its own" "$((tramps + 2))" "$(trampolines)"
expect_ok unpatch o1
expect_ok unpatch o2
check_eq "both restored" "a=1 b=2" "$(target_values)"
check "kpatch_test_value_a is gone from enabled_functions" \
	gone kpatch_test_value_a
check "kpatch_test_value_b is gone from enabled_functions" \
	gone kpatch_test_value_b
check_eq "the trampolines went with the sites" "$tramps" "$(trampolines)"
expect_ok patch sh1 "$a" "$a1" "$b" "$b1" "$a2" "$a1" "$a3" "$a1" "$b2" "$b1"
check_eq "sh1: a runs _v1, b runs _v1" "a=11 b=21" "$(target_values)"
show_sites
check_own_ops kpatch_test_value_a
check_own_ops kpatch_test_value_b
check_own_ops kpatch_test_value_a_v2
check_own_ops kpatch_test_value_a_v3
check_own_ops kpatch_test_value_b_v2
check_eq "sh1: five functions, five trampolines" "$((tramps + 5))" \
	"$(trampolines)"
expect_ok patch sh2 "$b" "$a1"
check_eq "sh2: b runs a's _v1 on the same site" "a=11 b=11" \
	"$(target_values)"
check_own_ops kpatch_test_value_b
check_eq "sh2 made no trampoline" "$((tramps + 5))" "$(trampolines)"
expect_ok unpatch sh2
check_eq "sh2 gone: b runs _v1" "a=11 b=21" "$(target_values)"
check_eq "sh2 gone: no trampoline went" "$((tramps + 5))" "$(trampolines)"
expect_ok unpatch sh1
check_eq "both restored" "a=1 b=2" "$(target_values)"
check "kpatch_test_value_b is gone from enabled_functions" \
	gone kpatch_test_value_b
check_eq "no site of kpatch's left" "" "$(kpatch_sites)"
check_eq "the trampolines went with the sites" "$tramps" "$(trampolines)"
check_transcript "the log has the patches enabled and removed, nothing else" <<EOF
% echo 'patch o1 $a $a1' > control
kpatch: patch 'o1' enabled (1 function)
% echo 'patch o2 $b $b1' > control
kpatch: patch 'o2' enabled (1 function)
% echo 'unpatch o1' > control
kpatch: patch 'o1' removed
% echo 'unpatch o2' > control
kpatch: patch 'o2' removed
% echo 'patch sh1 $a $a1 $b $b1 $a2 $a1 $a3 $a1 $b2 $b1' > control
kpatch: patch 'sh1' enabled (5 functions)
% echo 'patch sh2 $b $a1' > control
kpatch: patch 'sh2' enabled (1 function)
% echo 'unpatch sh2' > control
kpatch: patch 'sh2' removed
% echo 'unpatch sh1' > control
kpatch: patch 'sh1' removed
EOF
check_no_splat

start_test "a site goes with its function's last patch"
log_mark
expect_ok patch p1 "$cmd" "$cmd1" "$a" "$a1"
check_eq "p1: a runs _v1" "a=11 b=2" "$(target_values)"
check_eq "p1: /proc/cmdline from v1" "kpatch-test v1" "$(cmdline)"
show_sites
check_own_ops cmdline_proc_show
check_own_ops kpatch_test_value_a
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
check_own_ops cmdline_proc_show
check_transcript "the log has the patches enabled and p1 removed, nothing else" <<EOF
% echo 'patch p1 $cmd $cmd1 $a $a1' > control
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
