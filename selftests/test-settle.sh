#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-settle.sh - a jmp site between its update and its jmp (7.x).
#
# An update moves each jmp site it changes onto kpatch_guard, and a work
# item of kpatch's moves it back to a jmp about 100 ms after the command
# has returned.  Meanwhile calls of the function take the guard, and with
# it kpatch's state machine.  These cases look at what else can run in
# that window:
#
# 1. Another update, of other functions only, made at once after one that
#    changed kpatch_test_nmi_f and _g, with an NMI that calls f and g while
#    the other update is in its stop_machine() callback (the hooked build:
#    kpatch_test_nmi's force=updating).  f and g are no functions of that
#    update, so their calls are no proof that a function it changes ran:
#    it must be accepted, as it is when f and g are jmps already (checked
#    first, the same update after the jmp).  kpatch.c's parameter retries
#    is 0 here, so that one refusal shows; then the same with the default
#    retries (3, 20 ms apart), where no try may be refused either.
# 2. The same with f's site on the guard for good: its new function,
#    kpatch_test_own_indirect(), starts at an odd address, which ftrace
#    cannot make a jmp to.
# 3. rmmod kpatch right after a patch and its unpatch: the work is still
#    queued when kpatch goes, and must not run after (the guest would
#    oops about 100 ms later); the kernel log stays clean.
#
# The commands of the races are written with the shell's own echo (no
# fork), so that the second comes well inside the 100 ms.
#
# Functions: kpatch_test_nmi_f/_g (100/200, generation N: 100+N/200+N),
# kpatch_test_target's kpatch_test_value_a() (1) and kpatch_test_new's
# kpatch_test_value_a_v1 (11).
#
KPATCH_HOOKS=${KPATCH_HOOKS:-/kpatch/hooks}
# (read by functions.sh)
# shellcheck disable=SC2034
KPATCH_KO=$KPATCH_HOOKS/kpatch.ko
# shellcheck disable=SC2034
KPATCH_MODDIR=$KPATCH_HOOKS/test_modules

# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

NMI_PARAMS=/sys/module/kpatch_test_nmi/parameters

setup_modules kpatch kpatch_test_nmi
# kpatch_test_target and _new use no hook: the ordinary build has them
KPATCH_MODDIR=${KPATCH_PLAIN_MODDIR:-/kpatch/test_modules}
setup_modules kpatch_test_target kpatch_test_new kpatch_test_own
case $(modparam kpatch_test_target ftrace_jmp) in
Y) JMP=1 ;;
N) JMP= ;;
*) bail "setup: kpatch_test_target's ftrace_jmp reads Y or N" ;;
esac
NO_JMP="ftrace cannot make a direct call a jmp on this kernel: no jmp site, no window"
set_param kpatch retries 0 || bail "setup: kpatch retries=0"
f=$(sym kpatch_test_nmi_f kpatch_test_nmi) || bail "setup: find kpatch_test_nmi_f"
g=$(sym kpatch_test_nmi_g kpatch_test_nmi) || bail "setup: find kpatch_test_nmi_g"
f1=$(sym kpatch_test_nmi_f1 kpatch_test_nmi) || bail "setup: find kpatch_test_nmi_f1"
g1=$(sym kpatch_test_nmi_g1 kpatch_test_nmi) || bail "setup: find kpatch_test_nmi_g1"
f2=$(sym kpatch_test_nmi_f2 kpatch_test_nmi) || bail "setup: find kpatch_test_nmi_f2"
g2=$(sym kpatch_test_nmi_g2 kpatch_test_nmi) || bail "setup: find kpatch_test_nmi_g2"
a=$(sym kpatch_test_value_a kpatch_test_target) || bail "setup: find kpatch_test_value_a"
a1=$(sym kpatch_test_value_a_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v1"
odd=$(sym kpatch_test_own_indirect kpatch_test_own) || bail "setup: find kpatch_test_own_indirect"

h1=$(nmi_hooks 1) || bail "setup: find the hooks of generation 1"
h2=$(nmi_hooks 2) || bail "setup: find the hooks of generation 2"

nmi() {
	modparam kpatch_test_nmi "$1"
}

nmi_stop() {
	[ ! -e "$NMI_PARAMS/force" ] || echo off >"$NMI_PARAMS/force"
}
KP_CLEANUP_HOOK=nmi_stop

# jmp_to FUNC NEW: FUNC's fentry is a jmp to the start of NEW
jmp_to() {
	site "$1" | grep -qF "direct(jmp)-->$2+0x0/"
}

# race_write FILE CMD: the builtin echo of CMD to the control file; the
# result (OK or the error text) into FILE
race_write() {
	if echo "$2" 2>"$1" >"$KP_CONTROL"; then
		echo OK >"$1"
	fi
}

# result FILE: OK, EBUSY or the error text race_write left in FILE
result() {
	case $(cat "$1") in
	OK) echo OK ;;
	*"resource busy"*) echo EBUSY ;;
	*) cat "$1" ;;
	esac
}

# --------------------------------------------------------------------- 1 --

start_test "an update of other functions while f and g wait for their jmp"
if [ -z "$JMP" ]; then
	skip "$NO_JMP"
else
	log_mark
	mark1=$KP_MARK
	echo 1 >"$NMI_PARAMS/force_every"
	# shellcheck disable=SC2086
	expect_ok patch P "$f" "$f1" "$g" "$g1" $h1
	check "f: a jmp to f1" wait_until jmp_to kpatch_test_nmi_f kpatch_test_nmi_f1
	check "g: a jmp to g1" wait_until jmp_to kpatch_test_nmi_g kpatch_test_nmi_g1

	diag "% echo updating > $NMI_PARAMS/force"
	echo updating >"$NMI_PARAMS/force"
	forced0=$(nmi forced)
	expect_ok patch U "$a" "$a1"
	check_eq "the NMI landed during patch U" $((forced0 + 1)) "$(nmi forced)"
	check_eq "a is a1" "a=11 b=2" "$(target_values)"
	expect_ok unpatch U
	echo off >"$NMI_PARAMS/force"
	check_eq "f and g at generation 1" 1 "$(nmi generation)"
	check "f: a jmp to f1 again" wait_until jmp_to kpatch_test_nmi_f kpatch_test_nmi_f1

	# Now the same right after an update of f and g: a stacked patch Q.
	log_mark
	diag "% echo 'patch Q f f2 g g2 ...' > control; echo updating > force; echo 'patch U a a1' > control"
	forced0=$(nmi forced)
	# shellcheck disable=SC2086
	race_write "$KP_TMP/q" "patch Q $f $f2 $g $g2 $h2"
	echo updating >"$NMI_PARAMS/force"
	race_write "$KP_TMP/u" "patch U $a $a1"
	echo off >"$NMI_PARAMS/force"
	check_eq "patch Q -> OK" OK "$(result "$KP_TMP/q")"
	check_eq "the NMI landed during patch U" $((forced0 + 1)) "$(nmi forced)"
	if ! check_eq "patch U, of a only, right after Q -> OK" OK \
		"$(result "$KP_TMP/u")"; then
		diag "kernel log:" "$(log_since_mark | grep 'kpatch: ')"
	fi
	check_no_grep "kpatch refused nothing" 'kpatch: .*refused' "$(log_since_mark)"
	check_eq "f and g at generation 2" 2 "$(nmi generation)"
	check_eq "no caller saw two generations" 0 "$(nmi inconsistent)"
	check "f: a jmp to f2" wait_until jmp_to kpatch_test_nmi_f kpatch_test_nmi_f2
	kp unpatch U >/dev/null

	# Once more with kpatch's default retries (3, 20 ms apart): unpatch Q
	# moves f and g onto the guard again.
	check "set retries 3" set_param kpatch retries 3
	check "set retry_delay_ms 20" set_param kpatch retry_delay_ms 20
	log_mark
	diag "% echo 'unpatch Q' > control; echo updating > force; echo 'patch U a a1' > control"
	race_write "$KP_TMP/q" "unpatch Q"
	echo updating >"$NMI_PARAMS/force"
	race_write "$KP_TMP/u" "patch U $a $a1"
	echo off >"$NMI_PARAMS/force"
	check_eq "unpatch Q -> OK" OK "$(result "$KP_TMP/q")"
	check_eq "patch U, right after, with retries -> OK" OK "$(result "$KP_TMP/u")"
	check_no_grep "no try of patch U was refused" 'kpatch: .*(refused|busy)' \
		"$(log_since_mark)"
	check_eq "f and g at generation 1" 1 "$(nmi generation)"
	check "set retries 0" set_param kpatch retries 0
	kp unpatch U >/dev/null
	expect_ok unpatch P
	check_eq "a is the original" "a=1 b=2" "$(target_values)"
	check_eq "f and g at generation 0" 0 "$(nmi generation)"
	check_no_splat "$mark1"
fi

# --------------------------------------------------------------------- 2 --

# on_guard FUNC: FUNC's fentry is a direct call of kpatch_guard
on_guard() {
	site "$1" | grep -qF 'direct-->kpatch_guard+0x0/'
}

start_test "an update of other functions while f stays on the guard"
if [ -z "$JMP" ]; then
	skip "$NO_JMP"
else
	log_mark
	mark2=$KP_MARK
	check "precondition: kpatch_test_own_indirect starts at an odd address ($odd)" \
		[ $((0x$odd & 1)) -eq 1 ]
	expect_ok patch O "$f" "$odd"
	sleep 1
	check "f: on kpatch_guard, after the work had its turn" on_guard kpatch_test_nmi_f
	diag "% echo updating > $NMI_PARAMS/force"
	echo updating >"$NMI_PARAMS/force"
	forced0=$(nmi forced)
	log_mark
	expect_ok patch U "$a" "$a1"
	echo off >"$NMI_PARAMS/force"
	check_eq "the NMI landed during patch U" $((forced0 + 1)) "$(nmi forced)"
	check_eq "a is a1" "a=11 b=2" "$(target_values)"
	kp unpatch U >/dev/null
	expect_ok unpatch O
	check_eq "f and g at generation 0" 0 "$(nmi generation)"
	check_no_splat "$mark2"
	check "rmmod kpatch_test_own" unload_mod kpatch_test_own
fi

# --------------------------------------------------------------------- 3 --

start_test "rmmod kpatch while the work that makes jmps is queued"
if [ -z "$JMP" ]; then
	skip "$NO_JMP"
else
	nmi_stop
	check "rmmod kpatch_test_nmi" unload_mod kpatch_test_nmi
	KPATCH_KO=${KPATCH_PLAIN_KO:-/kpatch/kpatch.ko}
	log_mark
	mark3=$KP_MARK
	diag "% echo 'patch R a a1' > control; echo 'unpatch R' > control; rmmod kpatch"
	race_write "$KP_TMP/r" "patch R $a $a1"
	race_write "$KP_TMP/ur" "unpatch R"
	rm_ok=0
	rmmod kpatch 2>"$KP_TMP/rm" && rm_ok=1
	kmsg "rmmod kpatch returned"
	diag "kernel log (the work is due 100 ms after patch R):" \
		"$(log_since_mark | grep -E 'kpatch(-selftest)?: ')"
	check_eq "patch R -> OK" OK "$(result "$KP_TMP/r")"
	check_eq "unpatch R -> OK" OK "$(result "$KP_TMP/ur")"
	if ! check_eq "rmmod kpatch" 1 "$rm_ok"; then
		diag "$(cat "$KP_TMP/rm")"
	fi
	sleep 1
	check_eq "a is the original" "a=1 b=2" "$(target_values)"
	check_no_splat "$mark3"
	check "kpatch loads again" load_kpatch
fi
