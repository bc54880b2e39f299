#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-burst.sh - many processes that exit at once, as any user can make
# them, do not cost kpatch its knowledge of the exiting tasks.
#
# kpatch records every exiting task from a free list of records that a
# work item refills in process context.  N processes block in the open of
# a FIFO, then one write lets them all go at once: they exit together and
# stay unreaped (zombies, each keeping its record) until the shell waits
# for them.  Afterwards a patch and its unpatch, which need the stack
# check, must still be answered as usual (OK), not refused with ENOMEM
# ("out of memory recording an exiting task earlier"), which kpatch would
# then say for every update until it is unloaded -- with a patch enabled,
# which keeps kpatch.ko loaded, until the next reboot: the patch could no
# longer be taken out.  Any user can make such a burst.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

setup_modules kpatch kpatch_test_target kpatch_test_new
a=$(sym kpatch_test_value_a kpatch_test_target) || bail "setup: find kpatch_test_value_a"
a1=$(sym kpatch_test_value_a_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v1"

# burst N: N processes exit at once
burst() {
	_bu_fifo=$KP_TMP/burst.fifo
	rm -f "$_bu_fifo"
	mkfifo "$_bu_fifo" || return 1
	_bu_i=0
	while [ "$_bu_i" -lt "$1" ]; do
		cat "$_bu_fifo" >/dev/null 2>&1 &
		_bu_i=$((_bu_i + 1))
	done
	# Let every reader reach its open of the FIFO.
	sleep 2
	log_command "echo > $_bu_fifo  ($1 readers exit at once)"
	echo >"$_bu_fifo"
	sleep 1
	wait
	rm -f "$_bu_fifo"
}

# Each case with a fresh kpatch.ko: once kpatch has lost an exiting task,
# it refuses every update until it is unloaded.
for n in 50 100 200 400; do
	start_test "$n processes exit at once"
	log_mark
	if mod_loaded kpatch; then
		unload_kpatch || bail "setup: rmmod kpatch"
	fi
	load_kpatch || bail "setup: load kpatch.ko"
	burst "$n"
	kp patch x1 "$a" "$a1" || :
	check_eq "patch x1 -> OK" OK "$KP_RESULT"
	if [ "$KP_RESULT" = OK ]; then
		expect_ok unpatch x1
	fi
	check_no_grep "kpatch still knows every exiting task" \
		"out of memory recording an exiting task" "$(log_since_mark)"
	check_transcript "the log: a fresh kpatch.ko, the burst, then as usual" <<EOF
% rmmod kpatch
% insmod kpatch.ko
% echo > $KP_TMP/burst.fifo  ($n readers exit at once)
% echo 'patch x1 $a $a1' > control
kpatch: tainting kernel with TAINT_LIVEPATCH
kpatch: patch 'x1' enabled (1 function)
% echo 'unpatch x1' > control
kpatch: patch 'x1' removed
EOF
	check_no_splat
done
