#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-direct.sh - the two ways kpatch redirects a function.  By default a
# patched function gets an ftrace direct call into kpatch_direct_tramp
# (enabled_functions: "direct-->kpatch_direct_tramp").  With the module
# parameter direct=N, or when another user already has the function's
# direct call (kpatch_test_direct, standing in for a BPF trampoline),
# kpatch falls back to an IPMODIFY ftrace_ops with kpatch_ftrace_handler.
# The other user's trampoline keeps running in front of the patched
# function, whether it came before kpatch or after; a function keeps its
# path while a patch uses it; and once the other user is gone, the next
# patch takes the direct call again.  While kpatch has the direct call,
# the other user is refused with EBUSY.
#
# Functions: kpatch_test_target's kpatch_test_value_a() (1) and
# kpatch_test_value_b() (2), kpatch_test_new's _v1 (11, 21) and _v2 (12).
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

KP_DIRECT_PARAM=/sys/module/kpatch/parameters/direct
OWNER=kpatch_test_direct

setup_modules kpatch kpatch_test_target kpatch_test_new
[ -e "$KP_DIRECT_PARAM" ] || bail "setup: kpatch has the parameter direct"
a=$(sym kpatch_test_value_a kpatch_test_target) || bail "setup: find kpatch_test_value_a"
b=$(sym kpatch_test_value_b kpatch_test_target) || bail "setup: find kpatch_test_value_b"
a1=$(sym kpatch_test_value_a_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v1"
a2=$(sym kpatch_test_value_a_v2 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v2"
b1=$(sym kpatch_test_value_b_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_b_v1"

# set_direct Y|N: write kpatch's parameter direct
set_direct() {
	diag "% echo $1 > $KP_DIRECT_PARAM"
	echo "$1" >"$KP_DIRECT_PARAM"
}

restore_direct() {
	[ ! -e "$KP_DIRECT_PARAM" ] || echo Y >"$KP_DIRECT_PARAM" 2>/dev/null || :
}
KP_CLEANUP_HOOK=restore_direct

# ipmodify FUNC: an ftrace_ops with IPMODIFY (kpatch's fallback: the other
# direct user has none) is on FUNC; the flags follow the count: " (1) R I"
ipmodify() {
	site "$1" | head -n 1 | grep -Eq '\([0-9]+\) [R ] I( |$)'
}

# owner_on FUNC: kpatch_test_direct's trampoline is FUNC's direct call
owner_on() {
	site "$1" | grep -q 'direct-->kpatch_test_direct_tramp'
}

# show_sites: the enabled_functions lines of a and b, as diagnostics
show_sites() {
	diag "enabled_functions:"
	diag "$(site kpatch_test_value_a)"
	diag "$(site kpatch_test_value_b)"
}

# check_direct_path FUNC / check_fallback_path FUNC: the path FUNC is on
check_direct_path() {
	check "$1: direct-->kpatch_direct_tramp" on_direct "$1"
	check_not "$1: no kpatch_ftrace_handler" on_handler "$1"
	check_not "$1: no IPMODIFY ops" ipmodify "$1"
}

check_fallback_path() {
	check "$1: IPMODIFY ops (kpatch's fallback)" ipmodify "$1"
	check_not "$1: no direct-->kpatch_direct_tramp" on_direct "$1"
}

# gone FUNC: FUNC is not in enabled_functions
gone() {
	! ftrace_enabled "$1"
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

start_test "default: the direct call"
log_mark
check_eq "precondition: direct is Y" Y "$(modparam kpatch direct)"
check_eq "precondition: original values" "a=1 b=2" "$(target_values)"
expect_ok patch d_a "$a" "$a1"
check_eq "a runs kpatch_test_value_a_v1" "a=11 b=2" "$(target_values)"
show_sites
check_direct_path kpatch_test_value_a
expect_ok unpatch d_a
check_eq "a restored" "a=1 b=2" "$(target_values)"
check "kpatch_test_value_a is gone from enabled_functions" \
	wait_until gone kpatch_test_value_a
check_no_splat

start_test "direct=N: the ftrace_ops fallback"
log_mark
check "set direct=N" set_direct N
expect_ok patch f_a "$a" "$a1"
check_eq "a runs kpatch_test_value_a_v1" "a=11 b=2" "$(target_values)"
show_sites
check_fallback_path kpatch_test_value_a
check "kpatch_test_value_a: kpatch_ftrace_handler" on_handler kpatch_test_value_a
expect_ok unpatch f_a
check_eq "a restored" "a=1 b=2" "$(target_values)"
check "kpatch_test_value_a is gone from enabled_functions" \
	wait_until gone kpatch_test_value_a
check "set direct=Y" set_direct Y
check_no_splat

start_test "a function keeps its path while a patch uses it"
log_mark
expect_ok patch k1 "$a" "$a1"
check "a is on the direct path" on_direct kpatch_test_value_a
check "set direct=N" set_direct N
expect_ok patch k2 "$a" "$a2" "$b" "$b1"
check_eq "stacked: a runs _v2, b runs _v1" "a=12 b=21" "$(target_values)"
show_sites
check_direct_path kpatch_test_value_a
check_fallback_path kpatch_test_value_b
check "kpatch_test_value_b: kpatch_ftrace_handler" on_handler kpatch_test_value_b
check "set direct=Y" set_direct Y
expect_ok unpatch k2
check_eq "a back to _v1, b restored" "a=11 b=2" "$(target_values)"
check_direct_path kpatch_test_value_a
expect_ok unpatch k1
check_eq "both restored" "a=1 b=2" "$(target_values)"
check "kpatch_test_value_a is gone from enabled_functions" \
	wait_until gone kpatch_test_value_a
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
check_fallback_path kpatch_test_value_a
check "kpatch_test_value_a: $OWNER's trampoline still there" \
	owner_on kpatch_test_value_a
check_direct_path kpatch_test_value_b
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
check_no_splat

start_test "stacking on the fallback, then the switch back"
log_mark
check "insmod $OWNER addr=a succeeds" load_owner
expect_ok patch s1 "$a" "$a1"
check_owner_counts 2
check_eq "a runs _v1" "a=11 b=2" "$VALUES"
check_fallback_path kpatch_test_value_a
expect_ok patch s2 "$a" "$a2"
check_owner_counts 2
check_eq "stacked: a runs _v2" "a=12 b=2" "$VALUES"
show_sites
check_fallback_path kpatch_test_value_a
expect_ok unpatch s2
check_owner_counts 2
check_eq "a back to _v1" "a=11 b=2" "$VALUES"
check_fallback_path kpatch_test_value_a
expect_ok unpatch s1
check_owner_counts 2
check_eq "a restored" "a=1 b=2" "$VALUES"
check "rmmod $OWNER succeeds" unload_mod "$OWNER"
check "kpatch_test_value_a is gone from enabled_functions" \
	wait_until gone kpatch_test_value_a
expect_ok patch s3 "$a" "$a1"
check_eq "a runs _v1" "a=11 b=2" "$(target_values)"
show_sites
check_direct_path kpatch_test_value_a
expect_ok unpatch s3
check_eq "a restored" "a=1 b=2" "$(target_values)"
check_no_splat

start_test "the other user leaves while kpatch is on the fallback"
log_mark
check "insmod $OWNER addr=a succeeds" load_owner
expect_ok patch l1 "$a" "$a1"
check_fallback_path kpatch_test_value_a
check "rmmod $OWNER succeeds" unload_mod "$OWNER"
check_eq "a still runs _v1" "a=11 b=2" "$(target_values)"
show_sites
check_fallback_path kpatch_test_value_a
check "kpatch_test_value_a: kpatch_ftrace_handler" on_handler kpatch_test_value_a
check_not "kpatch_test_value_a: $OWNER's trampoline gone" \
	owner_on kpatch_test_value_a
expect_ok unpatch l1
check_eq "a restored" "a=1 b=2" "$(target_values)"
check "kpatch_test_value_a is gone from enabled_functions" \
	wait_until gone kpatch_test_value_a
check_no_splat

start_test "the other user comes after the fallback"
log_mark
check "set direct=N" set_direct N
expect_ok patch c1 "$a" "$a1"
check "set direct=Y" set_direct Y
check_fallback_path kpatch_test_value_a
check "insmod $OWNER addr=a succeeds (shares a with kpatch's IPMODIFY ops)" \
	load_owner
check_owner_counts 3
check_eq "a still runs _v1" "a=11 b=2" "$VALUES"
show_sites
check_fallback_path kpatch_test_value_a
check "kpatch_test_value_a: $OWNER's trampoline is there" \
	owner_on kpatch_test_value_a
expect_ok unpatch c1
check_owner_counts 1
check_eq "a restored" "a=1 b=2" "$VALUES"
check "rmmod $OWNER succeeds" unload_mod "$OWNER"
check "kpatch_test_value_a is gone from enabled_functions" \
	wait_until gone kpatch_test_value_a
check_no_splat

start_test "kpatch has the direct call: the other user is refused"
log_mark
expect_ok patch r1 "$a" "$a1"
check "a is on the direct path" on_direct kpatch_test_value_a
save_state
if load_owner; then
	not_ok "insmod $OWNER addr=a fails"
	unload_mod "$OWNER" || :
else
	ok "insmod $OWNER addr=a fails"
	check_grep "insmod reports EBUSY" '[Bb]usy' "$KP_OUT"
	check_grep "$OWNER logged ftrace's -16 (EBUSY)" \
		'register_ftrace_direct.*failed: -16' "$(log_since_mark)"
fi
check_not "$OWNER is not loaded" mod_loaded "$OWNER"
check_state_unchanged
check_eq "a still runs _v1" "a=11 b=2" "$(target_values)"
check_direct_path kpatch_test_value_a
expect_ok unpatch r1
check_eq "a restored" "a=1 b=2" "$(target_values)"
check "kpatch_test_value_a is gone from enabled_functions" \
	wait_until gone kpatch_test_value_a
check "now insmod $OWNER addr=a succeeds" load_owner
check_owner_counts 1
check "rmmod $OWNER succeeds" unload_mod "$OWNER"
check_no_splat
