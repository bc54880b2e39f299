#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-bystanders.sh - a task that merely calls a function an update
# changes, and is not in its way, does not notice the update.  Four
# "kpmove pipe" processes each loop { getpid(2); one write(2) of 1 MiB to
# a pipe that a child drains slowly } and three "kpmove epoll" processes
# loop { getpid(2); epoll_wait(2) 50 ms }, while 8 "kpmove hot" processes
# (nice 10) call getpid(2) in a loop, and __do_sys_getpid() is patched to
# kpatch_test_move_getpid() and unpatched 8 times with kpatch's parameter
# move=Y, then 4 times with move=N (where a write that a hot caller
# refuses makes all its tries).  With move=Y each write succeeds (with
# move=N a caller preempted in getpid may refuse one).  In either mode no pipe
# write is short, no write or epoll_wait fails with EINTR, and every
# getpid answers right.  Tasks that an update's gate holds are held at their
# return to user space, by task work that neither wakes them nor makes a
# signal pending (Documentation.txt, "Moving tasks out of the way").
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

MOD=kpatch_test_move
KPMOVE=${KPMOVE:-kpmove}
by=

# bystanders_stop: end the bystanders and the hot processes, if running
bystanders_stop() {
	: >"$KP_TMP/by.stop"
	for _bs in $by; do
		wait "$_bs" 2>/dev/null
	done
	by=
}
KP_CLEANUP_HOOK=bystanders_stop

setup_modules kpatch "$MOD"
getpid=$(sym __do_sys_getpid vmlinux 2>/dev/null) ||
	getpid=$(sym __x64_sys_getpid vmlinux) || bail "setup: find getpid"
getpid_new=$(sym kpatch_test_move_getpid "$MOD") ||
	bail "setup: find kpatch_test_move_getpid"
retries=$(modparam kpatch retries)

for move in Y N; do
	start_test "bystanders of getpid, move=$move"
	log_mark
	set_param kpatch move "$move"
	set_param kpatch retries 20
	rm -f "$KP_TMP/by.stop"
	log_command "kpmove hot 8 by.stop 10 &"
	"$KPMOVE" hot 8 "$KP_TMP/by.stop" 10 >"$KP_TMP/hot" 2>&1 &
	by="$by $!"
	for i in 1 2 3 4; do
		log_command "kpmove pipe by.stop > pipe$i &"
		"$KPMOVE" pipe "$KP_TMP/by.stop" >"$KP_TMP/pipe$i" 2>&1 &
		by="$by $!"
	done
	for i in 1 2 3; do
		log_command "kpmove epoll by.stop > epoll$i &"
		"$KPMOVE" epoll "$KP_TMP/by.stop" >"$KP_TMP/epoll$i" 2>&1 &
		by="$by $!"
	done
	failed=0
	rounds="1 2 3 4 5 6 7 8"
	[ "$move" = Y ] || rounds="1 2 3 4"
	for round in $rounds; do
		kp patch "by$round" "$getpid" "$getpid_new" ||
			failed=$((failed + 1))
		# with move=N, a hot caller preempted in getpid may refuse
		# every try: then unpatch again, so that the next round
		# does not stack on this one
		for _t in 1 2 3 4 5; do
			grep -q "^by$round " "$KP_PATCHES" || break
			kp unpatch "by$round" && break
			failed=$((failed + 1))
		done
	done
	if [ "$move" = Y ]; then
		check_eq "every patch and unpatch -> OK" 0 "$failed"
	else
		diag "$failed writes refused by a hot caller (move=N)"
	fi
	log_command "touch by.stop"
	bystanders_stop
	for i in 1 2 3 4; do
		out=$(cat "$KP_TMP/pipe$i")
		diag "pipe$i: $out"
		check_grep "pipe$i wrote, never short, never EINTR" \
			'^writes=[1-9][0-9]* short=0 eintr=0$' "$out"
	done
	for i in 1 2 3; do
		out=$(cat "$KP_TMP/epoll$i")
		diag "epoll$i: $out"
		check_grep "epoll$i waited, never EINTR" \
			'^waits=[1-9][0-9]* eintr=0$' "$out"
	done
	diag "hot: $(cat "$KP_TMP/hot")"
	check_grep "every getpid answered right" 'wrong=0$' "$(cat "$KP_TMP/hot")"
	set_param kpatch retries "$retries"
	set_param kpatch move Y
	check_no_splat
done
