#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-tombstones.sh - the direct-call table does not fill up with the keys
# of functions that are no longer patched.  kpatch's direct trampoline
# looks its caller up in a table of 4096 slots, of which at most
# KPATCH_DIRECT_MAX (2048) may be used; a key removed while other keys are
# live used to stay behind as a tombstone until no key at all was live.
# With one long-lived patch (p0, on kpatch_test_value_a) that never
# happened, so after about 2,048 distinct functions had been patched and
# unpatched, every new function silently took the slower ftrace_ops path.
#
# 1. "churn": with p0 patched throughout, 26 batches of 100 distinct
#    functions (2,600 in all), each one patch command, then unpatched.
#    Every batch must get the direct trampoline, return the new value while
#    patched and the old one after, and leave enabled_functions when it is
#    unpatched; nothing may be logged about a full table.
# 2. "fill": 2,049 functions patched at once besides p0 (20 patches of
#    100, one of 47, then two of 1), more than the table holds.  Every
#    command succeeds, every function returns the new value, each one is on
#    one of the two paths, some are on the ftrace_ops path (kpatch's
#    handler), and the kernel log says "direct-call table full" exactly
#    once, although two patches fall back.  Unpatched again, with p0 still
#    there, the next patch of 10 functions is on the direct path again.
#
# How soon the old table filled up depended on the layout of the keys: on
# 6.1, kpatch_test_many's functions are 16 bytes apart, every key of the
# churn hashed to a slot of its own and batch b20 fell back; on 6.12 and
# 7.x (48 bytes apart: ENDBR and call padding) many keys probed into a
# tombstone and reused it, and 2,600 functions were not enough.  The fill,
# which leaves 2,048 tombstones behind, showed it on every kernel.
#
# Each batch is a command of its own (a command is at most 4096 bytes: 100
# address pairs take 3,400).  Only a few functions of each batch are called
# and looked up in enabled_functions, to keep the time down.  Should a
# batch of the churn fall back, the later ones would too, at the cost of
# an RCU-tasks grace period per function to unpatch; so the churn stops
# there, and p0 is patched anew (which empties the table of a kpatch.ko
# that only clears it when no key is live) so that the fill still tests
# what it is for.
#
# Functions: kpatch_test_many's kpatch_test_many_f0000 ... f2699 (f<i>
# returns i; kpatch_test_many_new returns 1000000) and kpatch_test_target's
# kpatch_test_value_a() (1; kpatch_test_new's _v1: 11).
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

MANY=kpatch_test_many
MANY_PARAMS=/sys/module/$MANY/parameters
NEW=1000000
BATCH=100
BATCHES=26
FULL_RE='direct-call table full'

setup_modules kpatch kpatch_test_target kpatch_test_new "$MANY"
a=$(sym kpatch_test_value_a kpatch_test_target) || bail "setup: find kpatch_test_value_a"
a1=$(sym kpatch_test_value_a_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v1"
new=$(sym kpatch_test_many_new "$MANY") || bail "setup: find kpatch_test_many_new"

# $ADDRS: "i address" of kpatch_test_many_f<i>, one a line, by i (one pass
# over kallsyms instead of a lookup per function; the zeros go first, as
# busybox awk reads "0010" as octal)
ADDRS=$KP_TMP/many.addrs
awk -v m="[$MANY]" '
	$4 == m && $3 ~ /^kpatch_test_many_f[0-9]+$/ {
		i = substr($3, 19)
		sub(/^0+/, "", i)
		print (i == "" ? 0 : i), $1
	}' "$(kallsyms)" | sort -n >"$ADDRS"
NFUNCS=$(modparam "$MANY" count)
awk -v n="$NFUNCS" '$1 != NR - 1 { exit 1 } END { exit NR != n }' "$ADDRS" ||
	bail "setup: /proc/kallsyms has the $NFUNCS functions of $MANY"
! grep -q ' 0000000000000000$' "$ADDRS" || bail "setup: addresses not hidden"
[ "$NFUNCS" -ge $((BATCH * BATCHES + 10)) ] ||
	bail "setup: $MANY has at least $((BATCH * BATCHES + 10)) functions"

# fname I: the name of kpatch_test_many_f<I>
fname() {
	printf 'kpatch_test_many_f%04d' "$1"
}

# patch_cmd NAME FIRST N: "patch NAME" with f<FIRST> ... f<FIRST+N-1>, each
# replaced by kpatch_test_many_new
patch_cmd() {
	awk -v name="$1" -v lo="$2" -v n="$3" -v new="$new" '
		BEGIN { printf "patch %s", name }
		$1 >= lo && $1 < lo + n { printf " %s %s", $2, new; c++ }
		END { print ""; exit c != n }' "$ADDRS"
}

# many_patch NAME FIRST N: patch them (an assertion)
many_patch() {
	_mp_cmd=$(patch_cmd "$@") || bail "setup: addresses of f$2 ... for $1"
	expect_ok "$_mp_cmd"
}

# values I...: what f<I>... return, separated by spaces
values() {
	echo "$*" | tr ' ' ',' >"$MANY_PARAMS/index" &&
		cat "$MANY_PARAMS/values"
}

# repeat N WORD: WORD N times, separated by spaces
repeat() {
	_rp_i=0
	_rp_out=
	while [ "$_rp_i" -lt "$1" ]; do
		_rp_out="$_rp_out${_rp_out:+ }$2"
		_rp_i=$((_rp_i + 1))
	done
	echo "$_rp_out"
}

# check_direct WHAT I...: assert f<I>... are on the direct path; the site
# of the first one that is not is shown
check_direct() {
	_cd_what=$1
	shift
	for _cd_i in "$@"; do
		_cd_f=$(fname "$_cd_i")
		if ! check "$_cd_what: $_cd_f on direct-->kpatch_direct_tramp" \
			on_direct "$_cd_f"; then
			diag "its enabled_functions entry:" "$(site "$_cd_f")"
			return 1
		fi
	done
}

# gone FUNC: FUNC is not in enabled_functions
gone() {
	! ftrace_enabled "$1"
}

# paths: "DIRECT HANDLER OTHER", how many of kpatch_test_many's functions
# enabled_functions lists with kpatch's direct trampoline, with kpatch's
# ftrace_ops handler, and with neither
paths() {
	awk '
		function count() {
			if (name !~ /^kpatch_test_many_f[0-9]+$/)
				return
			if (text ~ /direct-->kpatch_direct_tramp/)
				d++
			else if (text ~ /kpatch_ftrace_handler/)
				h++
			else
				o++
		}
		/^[^ \t]/ { count(); name = $1; text = $0; next }
		{ text = text "\n" $0 }
		END { count(); printf "%d %d %d\n", d, h, o }' \
		"$TRACEFS/enabled_functions"
}

# paths_are "DIRECT HANDLER OTHER": is that what paths prints?
paths_are() {
	[ "$(paths)" = "$1" ]
}

# full_lines: how many lines of the kernel log since the mark say that the
# direct-call table is full
full_lines() {
	log_since_mark | grep -c -- "$FULL_RE"
}

now() {
	date +%s
}

start_test "setup: p0 stays patched"
log_mark
T0=$(now)
expect_ok patch p0 "$a" "$a1" || bail "setup: patch p0"
check_eq "p0: a runs kpatch_test_value_a_v1" "a=11 b=2" "$(target_values)"
check "p0: kpatch_test_value_a on direct-->kpatch_direct_tramp" \
	on_direct kpatch_test_value_a
check_eq "$MANY's functions return their index" "0 1 2699" "$(values 0 1 2699)"

start_test "churn: $BATCHES batches of $BATCH distinct functions"
log_mark
FELL_BACK=
b=0
while [ "$b" -lt "$BATCHES" ]; do
	name=$(printf 'b%02d' "$b")
	lo=$((b * BATCH))
	mid=$((lo + 37 + b))
	hi=$((lo + BATCH - 1))
	many_patch "$name" "$lo" "$BATCH" || bail "setup: $name"
	check_eq "$name: f$lo, f$mid, f$hi return $NEW" "$NEW $NEW $NEW" \
		"$(values "$lo" "$mid" "$hi")"
	check_direct "$name" "$lo" "$hi" || FELL_BACK=$name
	expect_ok unpatch "$name" || bail "setup: unpatch $name"
	check_eq "$name unpatched: f$lo, f$mid, f$hi return their index" \
		"$lo $mid $hi" "$(values "$lo" "$mid" "$hi")"
	check "$name unpatched: $(fname "$lo") gone from enabled_functions" \
		wait_until gone "$(fname "$lo")"
	if [ -n "$FELL_BACK" ] && [ "$b" -lt $((BATCHES - 1)) ]; then
		diag "$name fell back to ftrace_ops after $b batches ($lo functions);" \
			"skipping the other $((BATCHES - b - 1)) batches: they would fall back too"
		break
	fi
	b=$((b + 1))
done
check_eq "p0 still there: a runs _v1" "a=11 b=2" "$(target_values)"
check_eq "no '$FULL_RE' in the kernel log" 0 "$(full_lines)"
check_no_splat
diag "churn: $(($(now) - T0)) s so far"

if [ -n "$FELL_BACK" ]; then
	diag "the churn fell back: patching p0 anew, which empties the table" \
		"of a kpatch.ko that only clears it when no key is live, for the fill"
	if ! kp unpatch p0 || ! kp patch p0 "$a" "$a1"; then
		bail "setup: p0 anew"
	fi
fi

start_test "fill: more functions than the table holds"
log_mark
# 20 x 100, then 47: 2,048 keys with p0's; then 1 and 1: 2,050
n=0
while [ "$n" -lt 20 ]; do
	name=$(printf 'fill%02d' "$n")
	lo=$((n * BATCH))
	many_patch "$name" "$lo" "$BATCH" || bail "setup: $name"
	# 2,001 keys at most: there is room
	check_direct "$name" "$lo" || break
	n=$((n + 1))
done
if [ "$n" -lt 20 ]; then
	diag "fill: $name fell back with only $((n * BATCH + 1)) keys live;" \
		"not patching more (each function on ftrace_ops costs a grace period)"
	LAST=$((n * BATCH + BATCH - 1))
	SPOT="0 $LAST"
else
	many_patch fill20 2000 47
	many_patch over1 2047 1
	many_patch over2 2048 1
	LAST=2048
	SPOT="0 999 1999 2000 2046 2047 2048"
	check_eq "23 patches and p0 in the patches file" \
		"fill00 fill01 fill02 fill03 fill04 fill05 fill06 fill07 fill08 fill09 fill10 fill11 fill12 fill13 fill14 fill15 fill16 fill17 fill18 fill19 fill20 over1 over2 p0" \
		"$(awk '{ print $1 }' "$KP_PATCHES" | sort -u | tr '\n' ' ' | sed 's/ $//')"
	check_eq "2,050 functions patched" 2050 "$(wc -l <"$KP_PATCHES")"
fi
# shellcheck disable=SC2086 # SPOT: numbers
check_eq "$(echo $SPOT | sed 's/^/f/; s/ /, f/g') return $NEW" \
	"$(repeat "$(echo $SPOT | wc -w)" "$NEW")" "$(values $SPOT)"
check_eq "p0 still there: a runs _v1" "a=11 b=2" "$(target_values)"
PATHS=$(paths)
diag "kpatch_test_many's functions on the direct path, on the ftrace_ops" \
	"handler, on neither: $PATHS"
DIRECT=$(echo "$PATHS" | awk '{ print $1 }')
HANDLER=$(echo "$PATHS" | awk '{ print $2 }')
check_eq "all $((LAST + 1)) functions on one path or the other" \
	"$((LAST + 1)) 0" "$((DIRECT + HANDLER)) $(echo "$PATHS" | awk '{ print $3 }')"
check "some on kpatch's ftrace_ops handler (the table is full)" \
	[ "$HANDLER" -gt 0 ]
FULL=$(full_lines)
if check_eq "'$FULL_RE' logged exactly once" 1 "$FULL"; then
	diag "$(log_since_mark | grep -- "$FULL_RE")"
else
	diag "kernel log:" "$(log_since_mark | tail -n 8)"
fi
check_no_splat
diag "fill: $(($(now) - T0)) s so far"

start_test "fill undone: the next patch is direct again"
log_mark
# Patch names are single words; newest first.
# shellcheck disable=SC2013
for name in $(awk '$1 != "p0" && !($1 in s) { s[$1] = 1; a[++n] = $1 }
		END { for (i = n; i > 0; i--) print a[i] }' "$KP_PATCHES"); do
	expect_ok unpatch "$name"
done
check_patches "only p0 left" \
	"$(pline p0 kpatch_test_target:kpatch_test_value_a "$a" \
		kpatch_test_new:kpatch_test_value_a_v1 "$a1" active)"
# shellcheck disable=SC2086 # SPOT: numbers
check_eq "$(echo $SPOT | sed 's/^/f/; s/ /, f/g') return their index" \
	"$SPOT" "$(values $SPOT)"
check "none of $MANY's functions left in enabled_functions" \
	wait_until paths_are "0 0 0"
AGAIN=$((BATCH * BATCHES))
many_patch again "$AGAIN" 10
check_eq "f$AGAIN, f$((AGAIN + 9)) return $NEW" "$NEW $NEW" \
	"$(values "$AGAIN" $((AGAIN + 9)))"
check_direct again "$AGAIN" $((AGAIN + 9))
check_eq "all 10 on the direct path" "10 0 0" "$(paths)"
expect_ok unpatch again
check_eq "f$AGAIN, f$((AGAIN + 9)) return their index" \
	"$AGAIN $((AGAIN + 9))" "$(values "$AGAIN" $((AGAIN + 9)))"
expect_ok unpatch p0
check_eq "a restored" "a=1 b=2" "$(target_values)"
check_no_splat
diag "total: $(($(now) - T0)) s"
