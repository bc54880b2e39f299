#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-concurrency.sh - smoke test of patching a function that every CPU
# is calling.  kpatch_test_stress runs one thread per CPU calling
# kpatch_test_value_a() in a loop, while 50 patch/unpatch cycles of
# kpatch_test_value_a -> kpatch_test_value_a_v1 run.  Every call must
# return either the old value (1) or the new one (11), and both must be
# seen.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

CYCLES=50

setup_modules kpatch kpatch_test_target kpatch_test_new kpatch_test_stress
a=$(sym kpatch_test_value_a kpatch_test_target) || bail "setup: find kpatch_test_value_a"
a1=$(sym kpatch_test_value_a_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v1"

stress() {
	modparam kpatch_test_stress "count_$1"
}

# quiet_kp CMD...: kp without the diagnostics (there are hundreds);
# retries EBUSY (a thread preempted inside the function) a few times
quiet_kp() {
	_qk_try=0
	while :; do
		KP_RESULT=$("$KPCTL" "$KP_CONTROL" "$*" 2>&1)
		if [ "$KP_RESULT" != EBUSY ] || [ "$_qk_try" -ge 20 ]; then
			break
		fi
		_qk_try=$((_qk_try + 1))
		busy_retries=$((busy_retries + 1))
		nap
	done
	[ "$KP_RESULT" = OK ]
}

start_test "stress threads"
log_mark
threads=$(modparam kpatch_test_stress threads)
diag "$threads threads, $(nproc) CPUs"
check "one thread per online CPU" test "$threads" -eq "$(nproc)"
check "the threads call kpatch_test_value_a" \
	wait_until modparam_positive kpatch_test_stress count_old

start_test "$CYCLES patch/unpatch cycles"
diag "% for i in \$(seq $CYCLES); do echo \"patch c $a $a1\" > control;" \
	"echo \"unpatch c\" > control; done"
busy_retries=0
failed=0
i=0
while [ "$i" -lt "$CYCLES" ]; do
	i=$((i + 1))
	if ! quiet_kp patch c "$a" "$a1"; then
		diag "cycle $i: patch: $KP_RESULT"
		failed=$((failed + 1))
		continue
	fi
	# Now and then leave the patch in place for a moment.
	[ $((i % 10)) -ne 0 ] || nap
	if ! quiet_kp unpatch c; then
		diag "cycle $i: unpatch: $KP_RESULT"
		failed=$((failed + 1))
		break
	fi
done
diag "$busy_retries EBUSY retries"
check_eq "every cycle patched and unpatched" 0 "$failed"
check_patches "no patch left"
check_eq "original values" "a=1 b=2" "$(target_values)"
# Let every thread pass its next counter update.
sleep 1
old=$(stress old)
new=$(stress new)
other=$(stress other)
diag "calls: $old old, $new new, $other other"
check_eq "no call returned anything else" 0 "$other"
check "calls returned the old value" test "$old" -gt 0
check "calls returned the new value" test "$new" -gt 0
check_no_splat
