#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-direct.sh - the two kinds of site kpatch gives a patched function,
# as ftrace's enabled_functions shows them.
#
# - A jmp site, where ftrace can make a direct call a jmp (the 7.x
#   kernel; kpatch_test_target's ftrace_jmp says so) and kpatch's
#   parameter direct is Y (the default): while no update runs, the
#   function's fentry is a jmp straight to its newest new function
#   ("direct(jmp)-->NEW+0x0/..."), with no ftrace_ops of kpatch's on it.
#   Stacking a patch moves the jmp to the newer function, unpatching
#   that moves it back, unpatching the last patch removes the site.
# - An ftrace_ops site: an IPMODIFY ftrace_ops whose handler is
#   kpatch_ftrace_handler, and no direct call of kpatch's.  Every site on
#   6.1 and 6.12; on 7.x the sites made while direct is N, and those of
#   functions another direct call owns (kpatch_test_direct, standing in
#   for a BPF trampoline), which kpatch falls back to without a word.
#   The other user's trampoline keeps running in front of the patched
#   function, whether it came before kpatch or after.
# - An update that makes at most four sites gives each an ftrace_ops of
#   its own (a trampoline each: /proc/kallsyms counts them); one that
#   makes more puts them all on one shared ftrace_ops, never a jmp site,
#   and the shared one goes with the last site.
# - A site keeps its kind while it has entries, whatever direct says
#   meanwhile; a new site takes the kind direct says when it is made.
# - While kpatch's jmp site owns a function, another direct call on it is
#   refused with EBUSY (7.x).
# - A new function at an odd address (kpatch_test_own_indirect(), asm
#   without alignment) cannot be jumped to: ftrace takes bit 0 of a direct
#   address as its jmp flag.  Its site stays on kpatch_guard
#   ("direct-->kpatch_guard", no "(jmp)") and calls of it are right; a
#   newer patch at an even address gets the jmp, and its removal puts the
#   site back on the guard (7.x; elsewhere the ftrace_ops site).
#
# Every patched function's result is checked at every step, and the
# kernel log of each case is compared whole: kpatch says nothing about
# the kind of site it makes, nor about a fallback.
#
# Functions: kpatch_test_target's kpatch_test_value_a() (1) and
# kpatch_test_value_b() (2), kpatch_test_new's _v1 (11, 21) and _v2 (12,
# 22), kpatch_test_own's kpatch_test_own_indirect() (54).
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

KP_DIRECT_PARAM=/sys/module/kpatch/parameters/direct
OWNER=kpatch_test_direct
OWN=kpatch_test_own

setup_modules kpatch kpatch_test_target kpatch_test_new "$OWN"
[ -e "$KP_DIRECT_PARAM" ] || bail "setup: kpatch has the parameter direct"
a=$(sym kpatch_test_value_a kpatch_test_target) || bail "setup: find kpatch_test_value_a"
b=$(sym kpatch_test_value_b kpatch_test_target) || bail "setup: find kpatch_test_value_b"
a1=$(sym kpatch_test_value_a_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v1"
a2=$(sym kpatch_test_value_a_v2 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v2"
a3=$(sym kpatch_test_value_a_v3 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v3"
b1=$(sym kpatch_test_value_b_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_b_v1"
b2=$(sym kpatch_test_value_b_v2 kpatch_test_new) || bail "setup: find kpatch_test_value_b_v2"
odd=$(sym kpatch_test_own_indirect "$OWN") || bail "setup: find kpatch_test_own_indirect"
case $(modparam kpatch_test_target ftrace_jmp) in
Y) JMP=1 ;;
N) JMP= ;;
*) bail "setup: kpatch_test_target's ftrace_jmp reads Y or N" ;;
esac
NO_JMP="ftrace cannot make a direct call a jmp on this kernel (no CONFIG_DYNAMIC_FTRACE_WITH_JMP): every site of kpatch is an ftrace_ops site"
diag "jmp sites: $([ -n "$JMP" ] && echo yes || echo no)"

# set_direct Y|N: write kpatch's parameter direct
set_direct() {
	set_param kpatch direct "$1"
}

restore_direct() {
	[ ! -e "$KP_DIRECT_PARAM" ] || echo Y >"$KP_DIRECT_PARAM" 2>/dev/null || :
}
KP_CLEANUP_HOOK=restore_direct

# ipmodify FUNC: an ftrace_ops with IPMODIFY is on FUNC (the flags follow
# the count: " (1) R I"); the other direct user has none
ipmodify() {
	site "$1" | head -n 1 | grep -Eq '\([0-9]+\) [R ] I( |$)'
}

# jmp_to FUNC NEW: FUNC's fentry is a direct call that ftrace makes a jmp,
# to the start of NEW
jmp_to() {
	site "$1" | grep -qF "direct(jmp)-->$2+0x0/"
}

# on_guard FUNC: FUNC's fentry is a direct call of kpatch_guard (a call,
# not a jmp)
on_guard() {
	site "$1" | grep -qF 'direct-->kpatch_guard+0x0/'
}

# kpatch_direct FUNC: FUNC has a direct call other than kpatch_test_direct's
kpatch_direct() {
	site "$1" | grep -E 'direct(\(jmp\))?-->' |
		grep -qv 'direct-->kpatch_test_direct_tramp'
}

# owner_on FUNC: kpatch_test_direct's trampoline is FUNC's direct call
owner_on() {
	site "$1" | grep -q 'direct-->kpatch_test_direct_tramp'
}

# gone FUNC: FUNC is not in enabled_functions
gone() {
	! ftrace_enabled "$1"
}

# show_sites: the enabled_functions lines of a and b, as diagnostics
show_sites() {
	diag "enabled_functions:"
	diag "$(site kpatch_test_value_a)"
	diag "$(site kpatch_test_value_b)"
}

# check_jmp FUNC NEW: FUNC is a jmp site, jumping to NEW
check_jmp() {
	check "$1: direct(jmp)-->$2" wait_until jmp_to "$1" "$2"
	check_not "$1: no IPMODIFY ops" ipmodify "$1"
	check_not "$1: no kpatch_ftrace_handler" on_handler "$1"
}

# check_ops FUNC: FUNC is an ftrace_ops site (IPMODIFY, no direct call of
# kpatch's; kpatch_test_direct's may be there)
check_ops() {
	check "$1: IPMODIFY ops (an ftrace_ops site)" ipmodify "$1"
	check_not "$1: no direct call of kpatch's" kpatch_direct "$1"
}

# check_own_ops FUNC: FUNC is an ftrace_ops site and kpatch's is the only
# ops on it, so enabled_functions names its handler
check_own_ops() {
	check_ops "$1"
	check "$1: kpatch_ftrace_handler" on_handler "$1"
}

# check_new_site FUNC NEW: FUNC has the kind of site a new one gets with
# direct=Y: a jmp to NEW where ftrace can make one, else ftrace_ops
check_new_site() {
	if [ -n "$JMP" ]; then
		check_jmp "$1" "$2"
	else
		check_own_ops "$1"
	fi
}

# calls: kpatch_test_direct's trampoline count
calls() {
	modparam "$OWNER" calls
}

# check_owner_counts N: N reads of the target values (each one calls a
# once) bump kpatch_test_direct's count by N; VALUES: what they read
check_owner_counts() {
	_oc_before=$(calls)
	_oc_i=0
	while [ "$_oc_i" -lt "$1" ]; do
		VALUES=$(target_values)
		_oc_i=$((_oc_i + 1))
	done
	_oc_after=$(calls)
	case $_oc_before$_oc_after in
	*[!0-9]*)
		not_ok "kpatch_test_direct counted $1 calls of a"
		diag "calls: '$_oc_before' then '$_oc_after'"
		return 1
		;;
	esac
	check_eq "kpatch_test_direct counted $1 calls of a" "$1" \
		"$((_oc_after - _oc_before))"
}

# load_owner: kpatch_test_direct on kpatch_test_value_a
load_owner() {
	load_mod "$OWNER" "addr=0x$a"
}

# check_owner_refused WHEN: insmod kpatch_test_direct addr=a fails with
# EBUSY and changes nothing
check_owner_refused() {
	save_state
	if load_owner; then
		not_ok "$1: insmod $OWNER addr=a fails"
		unload_mod "$OWNER" || :
	else
		ok "$1: insmod $OWNER addr=a fails"
		check_grep "$1: insmod reports EBUSY" '[Bb]usy' "$KP_OUT"
	fi
	check_not "$1: $OWNER is not loaded" mod_loaded "$OWNER"
	check_state_unchanged
}

# check_odd_site: b's site while its newest new function is at an odd
# address: on kpatch_guard where there are jmp sites
check_odd_site() {
	if [ -n "$JMP" ]; then
		kp_settle
		check "kpatch_test_value_b: direct-->kpatch_guard (no jmp to an odd address)" \
			on_guard kpatch_test_value_b
		check_not "kpatch_test_value_b: no direct(jmp)" \
			jmp_to kpatch_test_value_b kpatch_test_own_indirect
		check_not "kpatch_test_value_b: no IPMODIFY ops" \
			ipmodify kpatch_test_value_b
	else
		check_own_ops kpatch_test_value_b
	fi
}

# check_values_n N DESC VALUES: target_values reads VALUES N times in a row
check_values_n() {
	_cv_i=0
	_cv_seen=
	while [ "$_cv_i" -lt "$1" ]; do
		_cv_seen="$_cv_seen${_cv_seen:+, }$(target_values)"
		_cv_i=$((_cv_i + 1))
	done
	_cv_want=$(repeat_list "$1" "$3")
	check_eq "$2 ($1 reads)" "$_cv_want" "$_cv_seen"
}

# repeat_list N WORDS: WORDS N times, separated by ", "
repeat_list() {
	_rl_i=0
	_rl_out=
	while [ "$_rl_i" -lt "$1" ]; do
		_rl_out="$_rl_out${_rl_out:+, }$2"
		_rl_i=$((_rl_i + 1))
	done
	echo "$_rl_out"
}

start_test "default: a site per function, on its newest new function"
log_mark
check_eq "precondition: direct is Y" Y "$(modparam kpatch direct)"
check_eq "precondition: original values" "a=1 b=2" "$(target_values)"
expect_ok patch d1 "$a" "$a1" "$b" "$b1"
check_eq "d1: a runs _v1, b runs _v1" "a=11 b=21" "$(target_values)"
show_sites
check_new_site kpatch_test_value_a kpatch_test_value_a_v1
check_new_site kpatch_test_value_b kpatch_test_value_b_v1
expect_ok patch d2 "$a" "$a2"
check_eq "d2 stacked: a runs _v2, b still _v1" "a=12 b=21" "$(target_values)"
show_sites
check_new_site kpatch_test_value_a kpatch_test_value_a_v2
check_new_site kpatch_test_value_b kpatch_test_value_b_v1
expect_ok unpatch d2
check_eq "d2 gone: a back to _v1" "a=11 b=21" "$(target_values)"
check_new_site kpatch_test_value_a kpatch_test_value_a_v1
check_new_site kpatch_test_value_b kpatch_test_value_b_v1
expect_ok unpatch d1
check_eq "both restored" "a=1 b=2" "$(target_values)"
check "kpatch_test_value_a is gone from enabled_functions" \
	wait_until gone kpatch_test_value_a
check "kpatch_test_value_b is gone from enabled_functions" \
	wait_until gone kpatch_test_value_b
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

start_test "direct=N: ftrace_ops sites"
log_mark
check "set direct=N" set_direct N
expect_ok patch f1 "$a" "$a1" "$b" "$b1"
check_eq "f1: a runs _v1, b runs _v1" "a=11 b=21" "$(target_values)"
show_sites
check_own_ops kpatch_test_value_a
check_own_ops kpatch_test_value_b
expect_ok patch f2 "$a" "$a2"
check_eq "f2 stacked: a runs _v2" "a=12 b=21" "$(target_values)"
check_own_ops kpatch_test_value_a
expect_ok unpatch f2
check_eq "a back to _v1" "a=11 b=21" "$(target_values)"
check_own_ops kpatch_test_value_a
expect_ok unpatch f1
check_eq "both restored" "a=1 b=2" "$(target_values)"
check "kpatch_test_value_a is gone from enabled_functions" \
	wait_until gone kpatch_test_value_a
check "kpatch_test_value_b is gone from enabled_functions" \
	wait_until gone kpatch_test_value_b
check "set direct=Y" set_direct Y
check_transcript "the log has the patches enabled and removed, nothing else" <<EOF
% echo N > /sys/module/kpatch/parameters/direct
% echo 'patch f1 $a $a1 $b $b1' > control
kpatch: patch 'f1' enabled (2 functions)
% echo 'patch f2 $a $a2' > control
kpatch: patch 'f2' enabled (1 function)
% echo 'unpatch f2' > control
kpatch: patch 'f2' removed
% echo 'unpatch f1' > control
kpatch: patch 'f1' removed
% echo Y > /sys/module/kpatch/parameters/direct
EOF
check_no_splat

# trampolines: how many trampolines ftrace has made for ftrace_ops (each
# is a "ftrace_trampoline [__builtin__ftrace]" line of /proc/kallsyms)
trampolines() {
	grep -c '[[:space:]]ftrace_trampoline[[:space:]]*\[__builtin__ftrace\]' \
		/proc/kallsyms
}

# handler_is FUNC HANDLER: enabled_functions names HANDLER for FUNC
handler_is() {
	site "$1" | grep -q "$2"
}

start_test "a few functions patched at once: an ftrace_ops each, no lookup"
log_mark
check "set direct=N" set_direct N
tramps=$(trampolines)
diag "ftrace trampolines before: $tramps"
expect_ok patch o1 "$a" "$a1"
check_eq "o1: one trampoline more" "$((tramps + 1))" "$(trampolines)"
expect_ok patch o2 "$b" "$b1"
check_eq "o1, o2: a runs _v1, b runs _v1" "a=11 b=21" "$(target_values)"
show_sites
check "a: kpatch_ftrace_handler" handler_is kpatch_test_value_a \
	kpatch_ftrace_handler
check "b: kpatch_ftrace_handler" handler_is kpatch_test_value_b \
	kpatch_ftrace_handler
check_eq "o2: a trampoline of its own" "$((tramps + 2))" "$(trampolines)"
expect_ok unpatch o1
expect_ok unpatch o2
check_eq "both restored" "a=1 b=2" "$(target_values)"
check "kpatch_test_value_b is gone from enabled_functions" \
	wait_until gone kpatch_test_value_b
check_eq "the trampolines went with the sites" "$tramps" "$(trampolines)"
check "set direct=Y" set_direct Y
check_transcript "the log has the patches enabled and removed, nothing else" <<EOF
% echo N > /sys/module/kpatch/parameters/direct
% echo 'patch o1 $a $a1' > control
kpatch: patch 'o1' enabled (1 function)
% echo 'patch o2 $b $b1' > control
kpatch: patch 'o2' enabled (1 function)
% echo 'unpatch o1' > control
kpatch: patch 'o1' removed
% echo 'unpatch o2' > control
kpatch: patch 'o2' removed
% echo Y > /sys/module/kpatch/parameters/direct
EOF
check_no_splat

start_test "more than four functions patched at once share one ftrace_ops"
log_mark
tramps=$(trampolines)
diag "ftrace trampolines before: $tramps"
expect_ok patch sh1 "$a" "$a1" "$b" "$b1" "$a2" "$a1" "$a3" "$a1" "$b2" "$b1"
check_eq "sh1: a runs _v1, b runs _v1" "a=11 b=21" "$(target_values)"
show_sites
check "a: kpatch_fops_handler, not a jmp site" handler_is \
	kpatch_test_value_a kpatch_fops_handler
check "b: kpatch_fops_handler, not a jmp site" handler_is \
	kpatch_test_value_b kpatch_fops_handler
check_eq "sh1: one trampoline for five functions" "$((tramps + 1))" \
	"$(trampolines)"
expect_ok patch sh2 "$b" "$a1"
check_eq "sh2: b runs a's _v1 on the same site" "a=11 b=11" \
	"$(target_values)"
check "b: still kpatch_fops_handler" handler_is kpatch_test_value_b \
	kpatch_fops_handler
check_eq "sh2 made no trampoline" "$((tramps + 1))" "$(trampolines)"
expect_ok unpatch sh2
check_eq "sh2 gone: b runs _v1" "a=11 b=21" "$(target_values)"
expect_ok unpatch sh1
check_eq "both restored" "a=1 b=2" "$(target_values)"
check "kpatch_test_value_b is gone from enabled_functions" \
	wait_until gone kpatch_test_value_b
check_eq "the shared trampoline went with the last site" "$tramps" \
	"$(trampolines)"
check_transcript "the log has the patches enabled and removed, nothing else" <<EOF
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

start_test "a site keeps its kind while it has entries"
log_mark
expect_ok patch k1 "$a" "$a1"
check_new_site kpatch_test_value_a kpatch_test_value_a_v1
check "set direct=N" set_direct N
expect_ok patch k2 "$a" "$a2" "$b" "$b1"
check_eq "k2 stacked: a runs _v2, b runs _v1" "a=12 b=21" "$(target_values)"
show_sites
# a's site was made with direct=Y, b's with direct=N
check_new_site kpatch_test_value_a kpatch_test_value_a_v2
check_own_ops kpatch_test_value_b
check "set direct=Y" set_direct Y
expect_ok patch k3 "$a" "$a1" "$b" "$b2"
check_eq "k3 stacked: a runs _v1, b runs _v2" "a=11 b=22" "$(target_values)"
show_sites
check_new_site kpatch_test_value_a kpatch_test_value_a_v1
check_own_ops kpatch_test_value_b
expect_ok unpatch k3
check_eq "k3 gone: a runs _v2, b runs _v1" "a=12 b=21" "$(target_values)"
check_new_site kpatch_test_value_a kpatch_test_value_a_v2
check_own_ops kpatch_test_value_b
expect_ok unpatch k2
check_eq "k2 gone: a back to _v1, b restored" "a=11 b=2" "$(target_values)"
check_new_site kpatch_test_value_a kpatch_test_value_a_v1
check "kpatch_test_value_b is gone from enabled_functions" \
	wait_until gone kpatch_test_value_b
# b's site went with its last entry: the next one is made as direct says
expect_ok patch k4 "$b" "$b1"
check_eq "k4: b runs _v1" "a=11 b=21" "$(target_values)"
check_new_site kpatch_test_value_b kpatch_test_value_b_v1
expect_ok unpatch k4
expect_ok unpatch k1
check_eq "both restored" "a=1 b=2" "$(target_values)"
check "kpatch_test_value_a is gone from enabled_functions" \
	wait_until gone kpatch_test_value_a
check "kpatch_test_value_b is gone from enabled_functions" \
	wait_until gone kpatch_test_value_b
check_transcript "the log has the patches enabled and removed, nothing else" <<EOF
% echo 'patch k1 $a $a1' > control
kpatch: patch 'k1' enabled (1 function)
% echo N > /sys/module/kpatch/parameters/direct
% echo 'patch k2 $a $a2 $b $b1' > control
kpatch: patch 'k2' enabled (2 functions)
% echo Y > /sys/module/kpatch/parameters/direct
% echo 'patch k3 $a $a1 $b $b2' > control
kpatch: patch 'k3' enabled (2 functions)
% echo 'unpatch k3' > control
kpatch: patch 'k3' removed
% echo 'unpatch k2' > control
kpatch: patch 'k2' removed
% echo 'patch k4 $b $b1' > control
kpatch: patch 'k4' enabled (1 function)
% echo 'unpatch k4' > control
kpatch: patch 'k4' removed
% echo 'unpatch k1' > control
kpatch: patch 'k1' removed
EOF
check_no_splat

start_test "automatic fallback: another direct call owns a"
log_mark
check "insmod $OWNER addr=a succeeds" load_owner
check "precondition: $OWNER's trampoline is a's direct call" \
	owner_on kpatch_test_value_a
check_owner_counts 3
check_eq "unpatched values through $OWNER" "a=1 b=2" "$VALUES"
expect_ok patch o_ab "$a" "$a1" "$b" "$b1"
check_owner_counts 3
check_eq "both functions changed" "a=11 b=21" "$VALUES"
show_sites
check_ops kpatch_test_value_a
check "kpatch_test_value_a: $OWNER's trampoline still there" \
	owner_on kpatch_test_value_a
check_new_site kpatch_test_value_b kpatch_test_value_b_v1
expect_ok unpatch o_ab
check_owner_counts 3
check_eq "both restored" "a=1 b=2" "$VALUES"
show_sites
check_not "kpatch_test_value_a: no IPMODIFY ops left" ipmodify kpatch_test_value_a
check "kpatch_test_value_a: $OWNER's trampoline still there" \
	owner_on kpatch_test_value_a
check "kpatch_test_value_b is gone from enabled_functions" \
	wait_until gone kpatch_test_value_b
check "rmmod $OWNER succeeds" unload_mod "$OWNER"
check "kpatch_test_value_a is gone from enabled_functions" \
	wait_until gone kpatch_test_value_a
check_eq "values without $OWNER" "a=1 b=2" "$(target_values)"
check_transcript "the log has the patch enabled and removed, nothing else" <<EOF
% insmod $OWNER.ko addr=0x$a
% echo 'patch o_ab $a $a1 $b $b1' > control
kpatch: patch 'o_ab' enabled (2 functions)
% echo 'unpatch o_ab' > control
kpatch: patch 'o_ab' removed
% rmmod $OWNER
EOF
check_no_splat

start_test "the other user cannot answer for a moment: kpatch tries again"
log_mark
check "insmod $OWNER addr=a succeeds" load_owner
set_param "$OWNER" eagain 2
expect_ok patch e1 "$a" "$a1"
check_eq "$OWNER was asked three times" 0 "$(modparam "$OWNER" eagain)"
check_owner_counts 3
check_eq "a changed" "a=11 b=2" "$VALUES"
expect_ok unpatch e1
set_param "$OWNER" eagain -1
expect_refused EAGAIN patch e2 "$a" "$a1"
check_owner_counts 3
check_eq "nothing changed" "a=1 b=2" "$VALUES"
set_param "$OWNER" eagain 0
check "rmmod $OWNER succeeds" unload_mod "$OWNER"
why="ftrace cannot redirect kpatch_test_value_a+0x0/0x0 [kpatch_test_target] now: the owner of a direct call there (a BPF trampoline) is busy"
delay=$(modparam kpatch retry_delay_ms)
tries=$(($(modparam kpatch retries) + 1))
check_transcript "the log says ftrace was busy, at each try" <<EOF
% insmod $OWNER.ko addr=0x$a
% echo 2 > /sys/module/$OWNER/parameters/eagain
% echo 'patch e1 $a $a1' > control
kpatch: patch 'e1' busy (try 1 of $tries, again in $delay ms): $why
kpatch: patch 'e1' busy (try 2 of $tries, again in $delay ms): $why
kpatch: patch 'e1' enabled (1 function)
% echo 'unpatch e1' > control
kpatch: patch 'e1' removed
% echo -1 > /sys/module/$OWNER/parameters/eagain
% echo 'patch e2 $a $a1' > control
$(refused_lines patch e2 "$why")
% echo 0 > /sys/module/$OWNER/parameters/eagain
% rmmod $OWNER
EOF
check_no_splat

start_test "stacking on the fallback, then a new site once the other user is gone"
log_mark
check "insmod $OWNER addr=a succeeds" load_owner
expect_ok patch s1 "$a" "$a1"
check_owner_counts 2
check_eq "a runs _v1" "a=11 b=2" "$VALUES"
check_ops kpatch_test_value_a
expect_ok patch s2 "$a" "$a2"
check_owner_counts 2
check_eq "stacked: a runs _v2" "a=12 b=2" "$VALUES"
show_sites
check_ops kpatch_test_value_a
expect_ok unpatch s2
check_owner_counts 2
check_eq "a back to _v1" "a=11 b=2" "$VALUES"
check_ops kpatch_test_value_a
expect_ok unpatch s1
check_owner_counts 2
check_eq "a restored" "a=1 b=2" "$VALUES"
check "rmmod $OWNER succeeds" unload_mod "$OWNER"
check "kpatch_test_value_a is gone from enabled_functions" \
	wait_until gone kpatch_test_value_a
expect_ok patch s3 "$a" "$a1"
check_eq "a runs _v1" "a=11 b=2" "$(target_values)"
show_sites
check_new_site kpatch_test_value_a kpatch_test_value_a_v1
expect_ok unpatch s3
check_eq "a restored" "a=1 b=2" "$(target_values)"
check_no_splat

start_test "the other user leaves while kpatch is on the fallback"
log_mark
check "insmod $OWNER addr=a succeeds" load_owner
expect_ok patch l1 "$a" "$a1"
check_ops kpatch_test_value_a
check "rmmod $OWNER succeeds" unload_mod "$OWNER"
check_eq "a still runs _v1" "a=11 b=2" "$(target_values)"
show_sites
check_own_ops kpatch_test_value_a
check_not "kpatch_test_value_a: $OWNER's trampoline gone" \
	owner_on kpatch_test_value_a
expect_ok unpatch l1
check_eq "a restored" "a=1 b=2" "$(target_values)"
check "kpatch_test_value_a is gone from enabled_functions" \
	wait_until gone kpatch_test_value_a
check_no_splat

start_test "the other user comes after an ftrace_ops site"
log_mark
check "set direct=N" set_direct N
expect_ok patch c1 "$a" "$a1"
check "set direct=Y" set_direct Y
check_own_ops kpatch_test_value_a
check "insmod $OWNER addr=a succeeds (shares a with kpatch's IPMODIFY ops)" \
	load_owner
check_owner_counts 3
check_eq "a still runs _v1" "a=11 b=2" "$VALUES"
show_sites
check_ops kpatch_test_value_a
check "kpatch_test_value_a: $OWNER's trampoline is there" \
	owner_on kpatch_test_value_a
expect_ok unpatch c1
check_owner_counts 1
check_eq "a restored" "a=1 b=2" "$VALUES"
check "rmmod $OWNER succeeds" unload_mod "$OWNER"
check "kpatch_test_value_a is gone from enabled_functions" \
	wait_until gone kpatch_test_value_a
check_no_splat

start_test "kpatch's jmp site owns a: the other user is refused"
if [ -z "$JMP" ]; then
	skip "insmod $OWNER addr=a fails with EBUSY while kpatch's jmp site owns a: $NO_JMP"
else
	log_mark
	expect_ok patch r1 "$a" "$a1"
	check_jmp kpatch_test_value_a kpatch_test_value_a_v1
	check_owner_refused "r1"
	check_eq "a still runs _v1" "a=11 b=2" "$(target_values)"
	check_jmp kpatch_test_value_a kpatch_test_value_a_v1
	expect_ok patch r2 "$a" "$a2"
	check_jmp kpatch_test_value_a kpatch_test_value_a_v2
	check_owner_refused "r2 stacked"
	check_eq "a still runs _v2" "a=12 b=2" "$(target_values)"
	check_jmp kpatch_test_value_a kpatch_test_value_a_v2
	expect_ok unpatch r2
	expect_ok unpatch r1
	check_eq "a restored" "a=1 b=2" "$(target_values)"
	check "kpatch_test_value_a is gone from enabled_functions" \
		wait_until gone kpatch_test_value_a
	check "now insmod $OWNER addr=a succeeds" load_owner
	check_owner_counts 1
	check_eq "a restored" "a=1 b=2" "$VALUES"
	check "rmmod $OWNER succeeds" unload_mod "$OWNER"
	# Twice: when finit_module() fails, busybox's insmod tries
	# init_module() with the same file, so a refused init runs twice.
	check_transcript "the log has ftrace's EBUSY for $OWNER, once per try of insmod" \
		"$OWNER" <<EOF
% echo 'patch r1 $a $a1' > control
kpatch: patch 'r1' enabled (1 function)
% insmod $OWNER.ko addr=0x$a
$OWNER: register_ftrace_direct(kpatch_test_value_a+0x0/0x_ [kpatch_test_target]) failed: -16
$OWNER: register_ftrace_direct(kpatch_test_value_a+0x0/0x_ [kpatch_test_target]) failed: -16
% echo 'patch r2 $a $a2' > control
kpatch: patch 'r2' enabled (1 function)
% insmod $OWNER.ko addr=0x$a
$OWNER: register_ftrace_direct(kpatch_test_value_a+0x0/0x_ [kpatch_test_target]) failed: -16
$OWNER: register_ftrace_direct(kpatch_test_value_a+0x0/0x_ [kpatch_test_target]) failed: -16
% echo 'unpatch r2' > control
kpatch: patch 'r2' removed
% echo 'unpatch r1' > control
kpatch: patch 'r1' removed
% insmod $OWNER.ko addr=0x$a
% rmmod $OWNER
EOF
	check_no_splat
fi

start_test "a new function at an odd address"
log_mark
if [ -z "$JMP" ]; then
	skip "the site stays on kpatch_guard: $NO_JMP"
fi
check "precondition: kpatch_test_own_indirect starts at an odd address ($odd)" \
	[ $((0x$odd & 1)) -eq 1 ]
expect_ok patch od1 "$b" "$odd"
check_values_n 5 "od1: b runs kpatch_test_own_indirect" "a=1 b=54"
show_sites
check_odd_site
expect_ok patch od2 "$b" "$b1"
check_values_n 5 "od2 stacked: b runs _v1" "a=1 b=21"
show_sites
check_new_site kpatch_test_value_b kpatch_test_value_b_v1
expect_ok unpatch od2
check_values_n 5 "od2 gone: b runs kpatch_test_own_indirect again" "a=1 b=54"
show_sites
check_odd_site
expect_ok unpatch od1
check_eq "b restored" "a=1 b=2" "$(target_values)"
check "kpatch_test_value_b is gone from enabled_functions" \
	wait_until gone kpatch_test_value_b
check_transcript "the log has the patches enabled and removed, nothing else" <<EOF
% echo 'patch od1 $b $odd' > control
kpatch: patch 'od1' enabled (1 function)
% echo 'patch od2 $b $b1' > control
kpatch: patch 'od2' enabled (1 function)
% echo 'unpatch od2' > control
kpatch: patch 'od2' removed
% echo 'unpatch od1' > control
kpatch: patch 'od1' removed
EOF
check_no_splat
