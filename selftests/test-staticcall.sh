#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-staticcall.sh - a redirect into a module whose new function leaves
# by a static call of the module, retargeted after a task went through.
#
# kpatch_test_sc_tail() (see kpatch_test_sc.c) replaces kpatch_test_value_b()
# and is "return static_call(kpatch_test_sc_call)();": a jmp that the
# kernel rewrites to the static call's target, kpatch_test_sc_slow() or
# kpatch_test_sc_quick(), both in the module.  A reader of
# kpatch_test_target's values is redirected into it while the target is
# kpatch_test_sc_slow(), and sleeps there with no frame of the new
# function on its stack.  Then the module sets the target to
# kpatch_test_sc_quick(): the jmp now leads there, but the reader is
# still in kpatch_test_sc_slow().  The unpatch that removes the last
# redirect into the module checks the module's whole text, and must
# refuse (EBUSY, naming kpatch_test_sc_slow and the reader): accepted,
# the module can be unloaded under the reader.  Once the reader is out,
# it applies.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

SC=kpatch_test_sc

# param NAME VALUE: write a parameter of kpatch_test_sc
param() {
	set_param "$SC" "$1" "$2"
}

is_patched() {
	grep -q "^$1 " "$KP_PATCHES"
}

reader=

# cleanup hook: let the reader go
release() {
	if mod_loaded "$SC"; then
		echo 0 >"/sys/module/$SC/parameters/hold" 2>/dev/null || :
	fi
	if [ -n "$reader" ]; then
		wait "$reader" 2>/dev/null || :
		reader=
	fi
}
KP_CLEANUP_HOOK=release

setup_modules kpatch kpatch_test_target "$SC"
# What the stack check finds where readers sleep is what this script
# checks: kpatch does not move them out of the way here (test-moving.sh).
set_param kpatch move N || bail "setup: kpatch's move=N"
b=$(sym kpatch_test_value_b kpatch_test_target) || bail "setup: find kpatch_test_value_b"
tail=$(sym kpatch_test_sc_tail "$SC") || bail "setup: find kpatch_test_sc_tail"
set_param kpatch retries 0

start_test "the static call's target as the new function runs it"
log_mark
expect_ok patch s1 "$b" "$tail"
check_eq "b returns kpatch_test_sc_slow's 61" "a=1 b=61" "$(target_values)"
param target quick
check_eq "b returns kpatch_test_sc_quick's 62" "a=1 b=62" "$(target_values)"
param target slow
expect_ok unpatch s1
check_transcript "the log says enabled, then removed" <<EOF
% echo 'patch s1 $b $tail' > control
kpatch: tainting kernel with TAINT_LIVEPATCH
kpatch: patch 's1' enabled (1 function)
% echo quick > /sys/module/$SC/parameters/target
% echo slow > /sys/module/$SC/parameters/target
% echo 'unpatch s1' > control
kpatch: patch 's1' removed
EOF
check_no_splat

start_test "a task in the static call's old target"
log_mark
expect_ok patch s2 "$b" "$tail"
param hold 1
log_command "cat $TARGET_VALUES > $KP_TMP/values &"
cat "$TARGET_VALUES" >"$KP_TMP/values" 2>&1 &
reader=$!
check "the reader sleeps in kpatch_test_sc_slow" \
	wait_until modparam_is "$SC" state 1
rpid=$(modparam "$SC" pid)
rcomm=$(modparam "$SC" comm)
param target quick
log_mark
expect_refused EBUSY unpatch s2
check_transcript "the log names kpatch_test_sc_slow and the reader" <<EOF
% echo 'unpatch s2' > control
kpatch: unpatch 's2' refused: kpatch_test_sc_slow+0x_/0x_ [$SC] is on the stack of pid $rpid ($rcomm)
EOF
if is_patched s2; then
	check_not "rmmod $SC refused" unload_mod "$SC"
else
	not_ok "rmmod $SC refused"
	diag "not tried: s2 is gone, nothing would stop the rmmod" \
		"and the reader would wake up in freed memory"
fi
param hold 0
wait "$reader"
reader=
check_eq "the reader ran the static call's old target (61)" "a=1 b=61" \
	"$(cat "$KP_TMP/values")"
if is_patched s2; then
	log_mark
	expect_ok unpatch s2
	check_transcript "once the reader is out, s2 goes" <<EOF
% echo 'unpatch s2' > control
kpatch: patch 's2' removed
EOF
fi
param target slow
check_no_splat
