#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-fopsmix.sh - updates of more than four functions, whose sites share
# kpatch_fops, mixed with sites of the other kinds and with other ftrace
# users, on kpatch_test_preoff's f0 .. f9 (0 .. 9; replacements 100 ..
# 109).  After every step each function must run the version of the
# newest patch that changes it, and when the last patch is gone no
# function may be left in enabled_functions.
#
# 1. Another direct call (kpatch_test_direct, standing in for a BPF
#    trampoline) owns f0 before a patch of f0 .. f4 registers kpatch_fops:
#    the call goes on to the new f0, through the other trampoline.
# 2. The same while kpatch_fops is registered already (by f5 .. f9): f0
#    is added to it with ftrace_set_filter_ips(), which does not ask the
#    direct call to share the function.
# 3. The other direct call comes after the patch of f0 .. f4.
# 4. A kprobe with a post handler (an IPMODIFY ftrace_ops) on f3: a patch
#    of f0 .. f4 is refused with EBUSY naming f3, leaves nothing behind,
#    and goes through once the kprobe is gone.
# 5. A patch of f0 alone (a jmp site where ftrace allows one, else an
#    ftrace_ops of its own), then one of f0 .. f5 (five new sites on
#    kpatch_fops, f0 keeps its kind), then a replace of both by f0 .. f9
#    (four new sites, each of its own), then unpatch.
# 6. The stack check refuses a patch of six functions (kpatch_test_busy's
#    kpatch_test_busy_fn() is on its thread's stack) in both tries: the
#    sites made on kpatch_fops for each try go again, nothing is left;
#    once the thread has left the function the patch goes through.
#
# The kernel log of each case is compared whole.

# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

MOD=kpatch_test_preoff
OWNER=kpatch_test_direct
KPROBE=kpatch_test_kprobe

setup_modules kpatch kpatch_test_target kpatch_test_busy "$MOD"
case $(modparam kpatch_test_target ftrace_jmp) in
Y) JMP=1 ;;
N) JMP= ;;
*) bail "setup: kpatch_test_target's ftrace_jmp reads Y or N" ;;
esac
diag "jmp sites: $([ -n "$JMP" ] && echo yes || echo no)"

# pairs N...: the words "OLD NEW" of kpatch_test_preoff_fN for each N,
# one space between words, as kp joins them (the transcript's expected
# text uses the same string)
pairs() {
	_pa=
	for _pa_n in "$@"; do
		_pa_old=$(sym "${MOD}_f$_pa_n" "$MOD") || return 1
		_pa_new=$(sym "${MOD}_f${_pa_n}_new" "$MOD") || return 1
		_pa="$_pa${_pa:+ }$_pa_old $_pa_new"
	done
	echo "$_pa"
}
f0=$(sym "${MOD}_f0" "$MOD") || bail "setup: find ${MOD}_f0"
p0=$(pairs 0) || bail "setup: find f0 and its replacement"
p04=$(pairs 0 1 2 3 4) || bail "setup: find f0 .. f4 and their replacements"
p59=$(pairs 5 6 7 8 9) || bail "setup: find f5 .. f9 and their replacements"
p05=$(pairs 0 1 2 3 4 5) || bail "setup: find f0 .. f5 and their replacements"
p09=$(pairs 0 1 2 3 4 5 6 7 8 9) || bail "setup: find f0 .. f9 and their replacements"
fn=$(sym kpatch_test_busy_fn kpatch_test_busy) || bail "setup: find kpatch_test_busy_fn"
fn_new=$(sym kpatch_test_busy_fn_new kpatch_test_busy) ||
	bail "setup: find kpatch_test_busy_fn_new"
wait_until modparam_is kpatch_test_busy state 1 ||
	bail "setup: kpatch_busy thread waits in kpatch_test_busy_fn"
busy_pid=$(modparam kpatch_test_busy pid)
# (each is a list of words, split on purpose below)
OLD="0 1 2 3 4 5 6 7 8 9"

values() {
	modparam "$MOD" values
}

# ipmodify FUNC: an ftrace_ops with IPMODIFY is on FUNC
# shellcheck disable=SC2317
ipmodify() {
	site "$1" | head -n 1 | grep -Eq '\([0-9]+\) [R ] I( |$)'
}

# owner_on FUNC: kpatch_test_direct's trampoline is FUNC's direct call
# shellcheck disable=SC2317
owner_on() {
	site "$1" | grep -q 'direct-->kpatch_test_direct_tramp'
}

# handler_is FUNC HANDLER: enabled_functions names HANDLER for FUNC
# shellcheck disable=SC2317
handler_is() {
	site "$1" | grep -q "$2"
}

# gone FUNC: FUNC is not in enabled_functions
# shellcheck disable=SC2317
gone() {
	! ftrace_enabled "$1"
}

# all_gone: none of f0 .. f9 is in enabled_functions
# shellcheck disable=SC2317
all_gone() {
	for _ag_n in 0 1 2 3 4 5 6 7 8 9; do
		gone "${MOD}_f$_ag_n" || return 1
	done
}

# check_values DESC VALUES: f0 .. f9 return VALUES, and each of three
# reads (one call of f0 each) went through kpatch_test_direct's
# trampoline if it is loaded
check_values() {
	if mod_loaded "$OWNER"; then
		_cv_before=$(modparam "$OWNER" calls)
		_cv_v1=$(values)
		_cv_v2=$(values)
		_cv_v3=$(values)
		_cv_after=$(modparam "$OWNER" calls)
		check_eq "$1: kpatch_test_direct counted 3 calls of f0" 3 \
			"$((_cv_after - _cv_before))"
		check_eq "$1" "$2" "$_cv_v1"
		check_eq "$1: three reads agree" "$_cv_v1 $_cv_v1" \
			"$_cv_v2 $_cv_v3"
	else
		check_eq "$1" "$2" "$(values)"
	fi
}

# load_owner: kpatch_test_direct on f0
# shellcheck disable=SC2317
load_owner() {
	load_mod "$OWNER" "addr=0x$f0"
}

start_test "another direct call owns f0 before kpatch_fops is registered"
log_mark
check "insmod $OWNER addr=f0" load_owner
check_values "unpatched" "$OLD"
# shellcheck disable=SC2086
expect_ok patch m1 $p04
check_values "m1: f0 .. f4 new" "100 101 102 103 104 5 6 7 8 9"
diag "$(site "${MOD}_f0")"
check "f0: IPMODIFY ops" ipmodify "${MOD}_f0"
check "f0: $OWNER's trampoline still there" owner_on "${MOD}_f0"
check "f1: kpatch_fops_handler" handler_is "${MOD}_f1" kpatch_fops_handler
expect_ok unpatch m1
check_values "m1 removed" "$OLD"
check_not "f0: no IPMODIFY ops left" ipmodify "${MOD}_f0"
check "f0: $OWNER's trampoline still there" owner_on "${MOD}_f0"
check "rmmod $OWNER" unload_mod "$OWNER"
check "nothing left in enabled_functions" wait_until all_gone
check_transcript "the log has the patch enabled and removed, nothing else" <<EOF
% insmod $OWNER.ko addr=0x$f0
% echo 'patch m1 $p04' > control
kpatch: tainting kernel with TAINT_LIVEPATCH
kpatch: patch 'm1' enabled (5 functions)
% echo 'unpatch m1' > control
kpatch: patch 'm1' removed
% rmmod $OWNER
EOF
check_no_splat

start_test "another direct call owns f0 while kpatch_fops is registered"
log_mark
# shellcheck disable=SC2086
expect_ok patch k1 $p59
check "insmod $OWNER addr=f0" load_owner
check_values "k1: f5 .. f9 new" "0 1 2 3 4 105 106 107 108 109"
# shellcheck disable=SC2086
expect_ok patch m2 $p04
check_values "k1, m2: all new" "100 101 102 103 104 105 106 107 108 109"
diag "$(site "${MOD}_f0")"
check "f0: IPMODIFY ops" ipmodify "${MOD}_f0"
check "f0: $OWNER's trampoline still there" owner_on "${MOD}_f0"
check "f1: kpatch_fops_handler" handler_is "${MOD}_f1" kpatch_fops_handler
expect_ok unpatch m2
check_values "m2 removed" "0 1 2 3 4 105 106 107 108 109"
check_not "f0: no IPMODIFY ops left" ipmodify "${MOD}_f0"
check "f0: $OWNER's trampoline still there" owner_on "${MOD}_f0"
expect_ok unpatch k1
check_values "k1 removed" "$OLD"
check "rmmod $OWNER" unload_mod "$OWNER"
check "nothing left in enabled_functions" wait_until all_gone
check_transcript "the log has the patches enabled and removed, nothing else" <<EOF
% echo 'patch k1 $p59' > control
kpatch: patch 'k1' enabled (5 functions)
% insmod $OWNER.ko addr=0x$f0
% echo 'patch m2 $p04' > control
kpatch: patch 'm2' enabled (5 functions)
% echo 'unpatch m2' > control
kpatch: patch 'm2' removed
% echo 'unpatch k1' > control
kpatch: patch 'k1' removed
% rmmod $OWNER
EOF
check_no_splat

start_test "another direct call comes to f0 after the patch"
log_mark
# shellcheck disable=SC2086
expect_ok patch m3 $p04
check "f0: kpatch_fops_handler" handler_is "${MOD}_f0" kpatch_fops_handler
check "insmod $OWNER addr=f0 (shares f0 with kpatch_fops)" load_owner
check_values "m3, then $OWNER: f0 .. f4 new" "100 101 102 103 104 5 6 7 8 9"
check "f0: $OWNER's trampoline there" owner_on "${MOD}_f0"
expect_ok unpatch m3
check_values "m3 removed" "$OLD"
check "rmmod $OWNER" unload_mod "$OWNER"
check "nothing left in enabled_functions" wait_until all_gone
check_transcript "the log has the patch enabled and removed, nothing else" <<EOF
% echo 'patch m3 $p04' > control
kpatch: patch 'm3' enabled (5 functions)
% insmod $OWNER.ko addr=0x$f0
% echo 'unpatch m3' > control
kpatch: patch 'm3' removed
% rmmod $OWNER
EOF
check_no_splat

start_test "a kprobe with a post handler on f3 refuses the batch, which leaves nothing"
log_mark
check "insmod $KPROBE func=${MOD}_f3" load_mod "$KPROBE" "func=${MOD}_f3"
# shellcheck disable=SC2086
expect_errno EBUSY patch m4 $p04
check_values "m4 refused: all old" "$OLD"
check "f0 is not in enabled_functions" gone "${MOD}_f0"
check "f4 is not in enabled_functions" gone "${MOD}_f4"
check_patches "no patch"
check "rmmod $KPROBE" unload_mod "$KPROBE"
check "nothing left in enabled_functions" wait_until all_gone
# shellcheck disable=SC2086
expect_ok patch m4 $p04
check_values "m4: f0 .. f4 new" "100 101 102 103 104 5 6 7 8 9"
expect_ok unpatch m4
check "nothing left in enabled_functions" wait_until all_gone
check_transcript "the log names f3" <<EOF
% insmod $KPROBE.ko func=${MOD}_f3
% echo 'patch m4 $p04' > control
kpatch: patch 'm4' refused: ftrace cannot redirect ${MOD}_f3+0x0/0x0 [$MOD] (-16); is a kprobe or another live patch on it?
% rmmod $KPROBE
% echo 'patch m4 $p04' > control
kpatch: patch 'm4' enabled (5 functions)
% echo 'unpatch m4' > control
kpatch: patch 'm4' removed
EOF
check_no_splat

start_test "a site of its own, a batch around it, a replace of both"
log_mark
# shellcheck disable=SC2086
expect_ok patch j1 $p0
check_values "j1: f0 new" "100 1 2 3 4 5 6 7 8 9"
if [ -n "$JMP" ]; then
	check "f0: a jmp site" wait_until handler_is "${MOD}_f0" 'direct(jmp)-->'
else
	check "f0: kpatch_ftrace_handler" handler_is "${MOD}_f0" \
		kpatch_ftrace_handler
fi
# shellcheck disable=SC2086
expect_ok patch j2 $p05
check_values "j1, j2: f0 .. f5 new" "100 101 102 103 104 105 6 7 8 9"
check "f1: kpatch_fops_handler" handler_is "${MOD}_f1" kpatch_fops_handler
check_not "f0: not on kpatch_fops" handler_is "${MOD}_f0" kpatch_fops_handler
expect_ok unpatch j1
check_values "j1 removed under j2: f0 .. f5 new" \
	"100 101 102 103 104 105 6 7 8 9"
# shellcheck disable=SC2086
expect_ok patch j1 $p0
# shellcheck disable=SC2086
expect_ok replace j3 $p09
check_values "j3 replaced j1 and j2: all new" \
	"100 101 102 103 104 105 106 107 108 109"
check_eq "only j3 left" "j3" "$(awk '{ print $1 }' "$KP_PATCHES" | sort -u)"
expect_ok unpatch j3
check_values "j3 removed" "$OLD"
check "nothing left in enabled_functions" wait_until all_gone
check_transcript "the log has the patches enabled and removed, nothing else" <<EOF
% echo 'patch j1 $p0' > control
kpatch: patch 'j1' enabled (1 function)
% echo 'patch j2 $p05' > control
kpatch: patch 'j2' enabled (6 functions)
% echo 'unpatch j1' > control
kpatch: patch 'j1' removed
% echo 'patch j1 $p0' > control
kpatch: patch 'j1' enabled (1 function)
% echo 'replace j3 $p09' > control
kpatch: patch 'j1' removed
kpatch: patch 'j2' removed
kpatch: patch 'j3' enabled (10 functions)
% echo 'unpatch j3' > control
kpatch: patch 'j3' removed
EOF
check_no_splat

start_test "the stack check refuses a batch twice, which leaves nothing"
log_mark
set_param kpatch retries 1 || bail "set kpatch retries=1"
# shellcheck disable=SC2086
expect_errno EBUSY patch m6 "$fn" "$fn_new" $p04
set_param kpatch retries 3 || bail "set kpatch retries=3"
check_values "m6 refused: all old" "$OLD"
check_patches "no patch"
check "nothing left in enabled_functions" wait_until all_gone
check "kpatch_test_busy_fn is not in enabled_functions" gone kpatch_test_busy_fn
set_param kpatch_test_busy release 1 || bail "release kpatch_busy"
check "the thread left kpatch_test_busy_fn" \
	wait_until modparam_is kpatch_test_busy state 2
# shellcheck disable=SC2086
expect_ok patch m6 "$fn" "$fn_new" $p04
check_values "m6: f0 .. f4 new" "100 101 102 103 104 5 6 7 8 9"
check "kpatch_test_busy_fn: kpatch_fops_handler" handler_is \
	kpatch_test_busy_fn kpatch_fops_handler
expect_ok unpatch m6
check_values "m6 removed" "$OLD"
check "nothing left in enabled_functions" wait_until all_gone
check_transcript "the log has both tries, then the patch enabled and removed" <<EOF
% echo 1 > /sys/module/kpatch/parameters/retries
% echo 'patch m6 $fn $fn_new $p04' > control
kpatch: patch 'm6' busy (try 1 of 2, again in 20 ms): kpatch_test_busy_fn+0x0/0x0 [kpatch_test_busy] is on the stack of pid $busy_pid (kpatch_busy)
kpatch: patch 'm6' refused after 2 tries: kpatch_test_busy_fn+0x0/0x0 [kpatch_test_busy] is on the stack of pid $busy_pid (kpatch_busy)
% echo 3 > /sys/module/kpatch/parameters/retries
% echo 1 > /sys/module/kpatch_test_busy/parameters/release
% echo 'patch m6 $fn $fn_new $p04' > control
kpatch: patch 'm6' enabled (6 functions)
% echo 'unpatch m6' > control
kpatch: patch 'm6' removed
EOF
check_no_splat

kp_exit
