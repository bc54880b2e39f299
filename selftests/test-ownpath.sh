#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-ownpath.sh - functions that kpatch's own update path calls can
# never be patched.  Inside the stop_machine() callback kpatch walks
# stacks with the ORC unwinder, so a patch of __unwind_start(),
# unwind_next_frame() or unwind_get_return_address() sees its function
# called during every try, and every try is rolled back.  With retries=0
# the patch fails with EBUSY and changes nothing, and the log line says
# that the function is called by kpatch's own update path and can never
# be patched (not the NMI wording, "was called during the update (NMI or
# stop_machine loop)").  The new function, kpatch_test_value_a_v1(), never
# runs: callers see the old version while the update is being rolled back.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

OWN_FUNCS="__unwind_start unwind_next_frame unwind_get_return_address"

setup_modules kpatch kpatch_test_target kpatch_test_new
a1=$(sym kpatch_test_value_a_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v1"
retries=$(modparam kpatch retries)

# kpatch_param NAME VALUE: write a kpatch parameter
kpatch_param() {
	set_param kpatch "$1" "$2"
}

ownpath_cleanup() {
	echo "$retries" >/sys/module/kpatch/parameters/retries 2>/dev/null
}
KP_CLEANUP_HOOK=ownpath_cleanup

# own_path: what kpatch says of a function its own update path calls
own_path="was called during the update (called by kpatch's own update path: stop_machine() or the stack check); it can never be patched"

kpatch_param retries 0
n=0
for f in $OWN_FUNCS; do
	n=$((n + 1))
	start_test "$f"
	check "precondition: ftrace can trace $f" \
		grep -qx -- "$f" "$TRACEFS/available_filter_functions"
	old=$(sym "$f" vmlinux) || bail "setup: find $f"
	log_mark
	expect_refused EBUSY patch "own$n" "$old" "$a1"
	msgs=$(log_since_mark)
	check_transcript "the log says $f is called by kpatch's own update path and can never be patched" <<EOF
% echo 'patch own$n $old $a1' > control
kpatch: patch 'own$n' refused: $f+0x_/0x_ $own_path
EOF
	check_no_grep "one try only (retries=0)" "'own$n' busy [(]try" "$msgs"
	check_no_splat
done
