#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# functions.sh - verbs shared by the kpatch selftests.
#
# Every test-*.sh sources this file.  It runs in the test guest under
# busybox ash (POSIX sh: no "local", so each function's variables carry a
# prefix of their own).
#
# Protocol: one line per assertion on stdout, "@@ ok DESC", "@@ not ok
# DESC" or "@@ skip DESC", and diagnostic lines starting with "# " (the
# commands run, shown as "# % ...", and on failure what was expected and
# what was seen).  A failed assertion never stops the script; only a
# failed setup step does (bail), and the EXIT trap then still cleans up:
# it unpatches everything in the patches file, unloads the test modules
# and kpatch.ko, and checks the kernel log of the whole script for splats.
#
# A test reads as a transcript, as the kernel's livepatch selftests do:
# each verb that changes what the kernel sees first writes its command,
# as a shell would show it, into the kernel log (and as "# % ..." into
# the output), and check_transcript compares the log since the test's
# canary (log_mark) whole, those command lines included, where the text
# is the contract.  The command lines, one form each:
#
#   % insmod NAME.ko [PARAM=VALUE...]             load_mod, load_kpatch
#   % rmmod NAME                                  unload_mod
#   % echo 'COMMAND' > control                    kp, kp_raw, expect_*
#   % echo 'COMMAND' > control &                  kp_bg (in the background)
#   % echo 'COMMAND' > control (WHO)              kp_nocap, or a test that
#                                                 writes it another way
#   % echo VALUE > /sys/module/MOD/parameters/P   set_param
#
# "control" is /sys/kernel/debug/kpatch/control; a module file is named
# without its directory.  COMMAND is what the test wrote: its addresses as
# the test passed them (16 hex digits, "0x" if the test gave one), so the
# expected text gets the same words from the test's own variables; a tab
# shows as \t, a newline as \n, any other byte outside printable ASCII
# as "?", and a command longer than 400 bytes is cut there and ends in
# "...(N bytes)".  check_transcript then normalises "0x..." numbers as
# check_log does, in the command lines too.
#
# Environment (set by the guest init): KPATCH_KO, KPATCH_MODDIR,
# KPATCH_SELFTESTS; KPCTL may name the kpctl helper (default: kpctl in
# $PATH).

set -u

KPATCH_KO=${KPATCH_KO:-/kpatch/kpatch.ko}
KPATCH_MODDIR=${KPATCH_MODDIR:-/kpatch/test_modules}
KPATCH_SELFTESTS=${KPATCH_SELFTESTS:-/kpatch/selftests}
KPCTL=${KPCTL:-kpctl}

KP_DEBUGFS=/sys/kernel/debug/kpatch
KP_CONTROL=$KP_DEBUGFS/control
KP_PATCHES=$KP_DEBUGFS/patches
KP_SYSFS=/sys/kernel/kpatch
KP_SYSFS_PATCHES=$KP_SYSFS/patches
TRACEFS=/sys/kernel/tracing
if [ ! -e "$TRACEFS/enabled_functions" ] &&
   [ -e /sys/kernel/debug/tracing/enabled_functions ]; then
	TRACEFS=/sys/kernel/debug/tracing
fi
TARGET_VALUES=/sys/module/kpatch_test_target/parameters/values

# KP_SPLAT_RE: the kernel log lines that mean something went badly wrong,
# the same pattern the host scans the console with.
# shellcheck source-path=SCRIPTDIR source=splat.sh
. "$KPATCH_SELFTESTS/splat.sh"

# Test modules, in an order in which they can be unloaded.
KP_TEST_MODULES="kpatch_example kpatch_test_patch_a kpatch_test_patch_b kpatch_test_patch_c"
KP_TEST_MODULES="$KP_TEST_MODULES kpatch_test_notify kpatch_test_hooks kpatch_test_shadow"
KP_TEST_MODULES="$KP_TEST_MODULES kpatch_test_sib kpatch_test_sib_new kpatch_test_own"
KP_TEST_MODULES="$KP_TEST_MODULES kpatch_test_sc"
KP_TEST_MODULES="$KP_TEST_MODULES kpatch_test_cold kpatch_test_pc kpatch_test_refill"
KP_TEST_MODULES="$KP_TEST_MODULES kpatch_test_nmi_a kpatch_test_nmi_b kpatch_test_nmi_c"
KP_TEST_MODULES="$KP_TEST_MODULES kpatch_test_direct kpatch_test_nmi kpatch_test_preoff"
KP_TEST_MODULES="$KP_TEST_MODULES kpatch_test_going kpatch_test_fold"
KP_TEST_MODULES="$KP_TEST_MODULES kpatch_test_stress"
KP_TEST_MODULES="$KP_TEST_MODULES kpatch_test_kprobe kpatch_test_api kpatch_test_exit"
KP_TEST_MODULES="$KP_TEST_MODULES kpatch_test_coming kpatch_test_many"
KP_TEST_MODULES="$KP_TEST_MODULES kpatch_test_busy kpatch_test_move kpatch_test_hold"
KP_TEST_MODULES="$KP_TEST_MODULES kpatch_test_new kpatch_test_target"

KP_SUITE=$(basename "$0" .sh | sed 's/^test-//; s/^[0-9]*-//')
KP_TEST=
KP_NPASS=0
KP_NFAIL=0
KP_NSKIP=0
KP_MARK=
KP_MARK_N=0
KP_SCRIPT_MARK=
KP_RESULT=
KP_OUT=
KP_STATE=
KP_CLEANUP_HOOK=
KP_BG=
KP_WAIT_TRIES=${KP_WAIT_TRIES:-300}
KP_TMP=$(mktemp -d 2>/dev/null || echo /tmp/kpatch-selftest.$$)
mkdir -p "$KP_TMP" 2>/dev/null

# ------------------------------------------------------------ reporting --

# diag TEXT...: print TEXT as diagnostic lines ("# " before every line)
diag() {
	printf '%s\n' "$*" | sed 's/^/# /'
}

# kmsg TEXT...: write TEXT to the kernel log (KERN_INFO)
kmsg() {
	echo "<6>kpatch-selftest: $*" >/dev/kmsg 2>/dev/null || :
}

# log_command TEXT: the transcript line "% TEXT", into the kernel log and
# the output (see the top of this file for the forms TEXT takes)
log_command() {
	diag "% $1"
	echo "<6>% $1" >/dev/kmsg 2>/dev/null || :
}

# kp_desc TEXT: full one-line description "suite: test case: TEXT"
kp_desc() {
	if [ -n "$KP_TEST" ]; then
		printf '%s: %s: %s' "$KP_SUITE" "$KP_TEST" "$1" | tr '\n\t' '  '
	else
		printf '%s: %s' "$KP_SUITE" "$1" | tr '\n\t' '  '
	fi
}

# ok DESC / not_ok DESC / skip DESC: report one assertion
ok() {
	KP_NPASS=$((KP_NPASS + 1))
	echo "@@ ok $(kp_desc "$1")"
	return 0
}

not_ok() {
	KP_NFAIL=$((KP_NFAIL + 1))
	echo "@@ not ok $(kp_desc "$1")"
	return 1
}

skip() {
	KP_NSKIP=$((KP_NSKIP + 1))
	echo "@@ skip $(kp_desc "$1")"
	return 0
}

# bail DESC: a setup step failed; report it and end the script (the EXIT
# trap cleans up)
bail() {
	not_ok "$1"
	diag "cannot go on without this; giving up on $KP_SUITE"
	exit 1
}

# start_test DESC: begin a test case; DESC prefixes its assertions
start_test() {
	KP_TEST=$1
	diag "----- $KP_SUITE: $1"
	kmsg "$KP_SUITE: $1"
}

# show_diff EXPECTED ACTUAL: print both, as a diff where possible
show_diff() {
	printf '%s\n' "$1" >"$KP_TMP/expected" 2>/dev/null &&
		printf '%s\n' "$2" >"$KP_TMP/actual" 2>/dev/null &&
		diff -u "$KP_TMP/expected" "$KP_TMP/actual" >"$KP_TMP/diff" 2>&1
	if [ -s "$KP_TMP/diff" ]; then
		diag "$(cat "$KP_TMP/diff")"
	else
		diag "expected:" "$1"
		diag "actual:" "$2"
	fi
	rm -f "$KP_TMP/expected" "$KP_TMP/actual" "$KP_TMP/diff"
}

# check DESC CMD...: ok if CMD succeeds
check() {
	_ck_desc=$1
	shift
	if "$@"; then
		ok "$_ck_desc"
	else
		not_ok "$_ck_desc"
		diag "failed: $*"
		return 1
	fi
}

# check_not DESC CMD...: ok if CMD fails
check_not() {
	_ckn_desc=$1
	shift
	if "$@"; then
		not_ok "$_ckn_desc"
		diag "unexpectedly succeeded: $*"
		return 1
	else
		ok "$_ckn_desc"
	fi
}

# check_eq DESC EXPECTED ACTUAL: ok if the two strings are equal
check_eq() {
	if [ "$2" = "$3" ]; then
		ok "$1"
	else
		not_ok "$1"
		diag "expected: '$2'"
		diag "actual:   '$3'"
		return 1
	fi
}

# check_grep DESC ERE TEXT: ok if a line of TEXT matches ERE
check_grep() {
	if printf '%s\n' "$3" | grep -Eq -- "$2"; then
		ok "$1"
	else
		not_ok "$1"
		diag "no line matches: $2" "in:" "$3"
		return 1
	fi
}

# check_no_grep DESC ERE TEXT: ok if no line of TEXT matches ERE
check_no_grep() {
	if printf '%s\n' "$3" | grep -Eq -- "$2"; then
		not_ok "$1"
		diag "unexpected match for: $2" "in:" "$3"
		return 1
	else
		ok "$1"
	fi
}

# nap: sleep a tenth of a second (a second where sleep takes integers only)
nap() {
	sleep 0.1 2>/dev/null || sleep 1
}

# wait_until CMD...: run CMD until it succeeds; fails after
# KP_WAIT_TRIES tenths of a second
wait_until() {
	_wu_i=0
	while ! "$@"; do
		_wu_i=$((_wu_i + 1))
		if [ "$_wu_i" -ge "$KP_WAIT_TRIES" ]; then
			diag "timed out waiting for: $*"
			return 1
		fi
		nap
	done
	return 0
}

# ----------------------------------------------------------- kernel log --

# log_mark: write a new canary to the kernel log; log_since_mark prints
# what was logged after it
log_mark() {
	KP_MARK_N=$((KP_MARK_N + 1))
	KP_MARK="kpatch-selftest-mark:$KP_SUITE:$$:$KP_MARK_N:"
	kmsg "$KP_MARK"
}

# log_since_mark [MARK]: kernel log lines after the last MARK (default:
# the latest log_mark)
log_since_mark() {
	dmesg | awk -v m="${1:-$KP_MARK}" '
		index($0, m) { n = 0; found = 1; next }
		found { line[n++] = $0 }
		END { for (i = 0; i < n; i++) print line[i] }'
}

# check_no_splat [MARK]: no BUG/WARNING/Oops/... in the kernel log since
# MARK (default: the latest log_mark)
check_no_splat() {
	_cns_log=$(log_since_mark "${1:-$KP_MARK}")
	_cns_bad=$(printf '%s\n' "$_cns_log" | grep -E -- "$KP_SPLAT_RE")
	if [ -z "$_cns_bad" ]; then
		ok "no kernel splat in the log"
	else
		not_ok "no kernel splat in the log"
		diag "$_cns_log"
		return 1
	fi
}

# check_transcript [-x ERE] DESC [MODULE...] <<EOF ... EOF: the kernel
# log since the last log_mark is exactly the text on stdin, line for line
# and in this order: the command lines of the verbs ("% ..."), kpatch's
# own lines and those of each MODULE.  What kpatch logs is what an
# administrator reads after a patch, unpatch, replace or refusal, and the
# commands say what each line answers, so the text is compared whole, not
# grepped for.
#
# Kept are the lines that start with "% ", "kpatch: " or "MODULE: ",
# timestamps ("[  12.345678] ", and a "[T123] " caller id) stripped;
# everything else in the log (other modules, lockdep, the selftest's own
# marks) is left out.  Also left out are the two lines the module loader
# writes about the first out-of-tree or unsigned module of a boot, which
# may be any of them ("NAME: loading out-of-tree module taints kernel.",
# "NAME: module verification failed: ...").  Hexadecimal numbers written
# "0x..." become "0x_" in both texts: these are the offsets and sizes of
# %pS ("func+0x1c/0x40 [mod]"), which differ between kernels and builds.
# Any other value that varies (a pid, an address) the caller puts into the
# expected text itself.
#
# -x ERE also leaves out the kept lines that match ERE (after the
# timestamps went): for the few places where timing decides how many of
# some line there are (a retry logged once per try while another task
# runs); the caller says why, and the rest is still compared whole.
check_transcript() {
	_ct_drop=
	if [ "$1" = -x ]; then
		_ct_drop=$2
		shift 2
	fi
	_ct_desc=$1
	shift
	_ct_want=$(sed 's/0x[0-9a-fA-F][0-9a-fA-F]*/0x_/g')
	_ct_seen=$(kp_log_lines transcript "$_ct_drop" "$@")
	if [ "$_ct_seen" = "$_ct_want" ]; then
		ok "$_ct_desc"
	else
		not_ok "$_ct_desc"
		diag "the log since the mark (commands, kpatch${*:+ $*}${_ct_drop:+; without /$_ct_drop/}), - expected, + seen:"
		show_diff "$_ct_want" "$_ct_seen"
		return 1
	fi
}

# check_log DESC [MODULE...] <<EOF ... EOF: check_transcript without the
# command lines: kpatch's own lines and those of each MODULE since the
# last log_mark are exactly the text on stdin.  Of the loader's two lines
# about the first module of a boot, only kpatch.ko's are left out.  Only
# for lines whose count the clock decides: counted from the log, then
# compared in order while the commands fall between them anywhere, beside
# a check_transcript -x of the same log without them (test-waiting.sh).
check_log() {
	_clg_desc=$1
	shift
	_clg_want=$(sed 's/0x[0-9a-fA-F][0-9a-fA-F]*/0x_/g')
	_clg_seen=$(kp_log_lines log "" "$@")
	if [ "$_clg_seen" = "$_clg_want" ]; then
		ok "$_clg_desc"
	else
		not_ok "$_clg_desc"
		diag "kpatch's log lines (kpatch${*:+ $*}), - expected, + seen:"
		show_diff "$_clg_want" "$_clg_seen"
		return 1
	fi
}

# refused_lines VERB NAME WHY: the lines kpatch logs when every try of
# VERB 'NAME' is refused for WHY (the stack check), one per try, as
# kpatch's retries and retry_delay_ms parameters are now: for the
# expected text of check_transcript
refused_lines() {
	_rl_tries=$(($(modparam kpatch retries) + 1))
	_rl_delay=$(modparam kpatch retry_delay_ms)
	_rl_try=1
	while [ "$_rl_try" -lt "$_rl_tries" ]; do
		echo "kpatch: $1 '$2' busy (try $_rl_try of $_rl_tries, again in $_rl_delay ms): $3"
		_rl_try=$((_rl_try + 1))
	done
	if [ "$_rl_tries" -gt 1 ]; then
		echo "kpatch: $1 '$2' refused after $_rl_tries tries: $3"
	else
		echo "kpatch: $1 '$2' refused: $3"
	fi
}

# busy_re VERB NAME: an ERE for check_transcript -x that matches the lines
# kpatch logs when a try of VERB 'NAME' found a task in the way for a
# moment and tried again: one preempted in a function the update changes
# (any task, on a preemptible kernel), or one it moved out of the way.
# VERB and NAME are EREs themselves ('(un)?patch', 'churn[123]').  For a
# transcript where a task the test does not hold may be in the function
# when the update runs; where the test holds one there, the busy lines
# are the contract and are compared.
busy_re() {
	printf "^kpatch: %s '%s' busy( [(]try [0-9]+ of [0-9]+, again in [0-9]+ ms[)]|: moving [0-9]+ tasks? out of the way): " \
		"$1" "$2"
}

# kp_log_lines transcript|log DROP [MODULE...]: the lines check_transcript
# (or check_log) compares, from the log since the last log_mark
kp_log_lines() {
	_kl_mode=$1
	_kl_drop=$2
	shift 2
	log_since_mark |
		sed 's/^\[[ 0-9.]*\] //; s/^\[ *[TC][0-9]*\] //' |
		KP_DROP=$_kl_drop awk -v keep="kpatch $*" -v mode="$_kl_mode" '
			BEGIN { n = split(keep, k, " "); drop = ENVIRON["KP_DROP"] }
			mode == "log" && /^kpatch: (loading out-of-tree module taints kernel[.]|module verification failed: )/ { next }
			mode != "log" && /^[^ ]*: (loading out-of-tree module taints kernel[.]|module verification failed: )/ { next }
			drop != "" && $0 ~ drop { next }
			mode != "log" && index($0, "% ") == 1 { print; next }
			{
				for (i = 1; i <= n; i++)
					if (index($0, k[i] ": ") == 1) {
						print
						next
					}
			}' |
		sed 's/0x[0-9a-fA-F][0-9a-fA-F]*/0x_/g'
}

# -------------------------------------------------------------- modules --

# mod_loaded NAME: is module NAME loaded?
mod_loaded() {
	grep -q "^$1 " /proc/modules
}

# load_mod NAME [PARAM=VALUE...]: insmod $KPATCH_MODDIR/NAME.ko; the
# output of insmod is in KP_OUT
load_mod() {
	_lm_name=$1
	shift
	kallsyms_changed
	log_command "insmod $_lm_name.ko${*:+ $*}"
	if KP_OUT=$(insmod "$KPATCH_MODDIR/$_lm_name.ko" "$@" 2>&1); then
		[ -z "$KP_OUT" ] || diag "$KP_OUT"
		return 0
	fi
	diag "$KP_OUT"
	return 1
}

# unload_mod NAME: rmmod NAME (one try); the output of rmmod is in KP_OUT
unload_mod() {
	kallsyms_changed
	log_command "rmmod $1"
	if KP_OUT=$(rmmod "$1" 2>&1); then
		[ -z "$KP_OUT" ] || diag "$KP_OUT"
		return 0
	fi
	diag "$KP_OUT"
	return 1
}

# load_kpatch: insmod kpatch.ko (unless loaded) and wait for its control file
load_kpatch() {
	kallsyms_changed
	if ! mod_loaded kpatch; then
		log_command "insmod $(basename "$KPATCH_KO")"
		if ! KP_OUT=$(insmod "$KPATCH_KO" 2>&1); then
			diag "$KP_OUT"
			return 1
		fi
	fi
	wait_until test -e "$KP_CONTROL"
}

# unload_kpatch: rmmod kpatch
unload_kpatch() {
	unload_mod kpatch
}

# setup_modules MOD...: load kpatch.ko ("kpatch") and the named test
# modules in this order; bail if one fails
setup_modules() {
	for _sm_mod in "$@"; do
		if [ "$_sm_mod" = kpatch ]; then
			load_kpatch || bail "setup: load kpatch.ko"
		else
			load_mod "$_sm_mod" || bail "setup: load $_sm_mod.ko"
		fi
	done
}

# ------------------------------------------------------------- symbols --

# kallsyms: path of a copy of /proc/kallsyms, made on first use after
# each module load or unload (the kernel formats /proc/kallsyms slowly in
# an emulated guest)
kallsyms() {
	if [ ! -s "$KP_TMP/kallsyms" ]; then
		cat /proc/kallsyms >"$KP_TMP/kallsyms.new" &&
			mv "$KP_TMP/kallsyms.new" "$KP_TMP/kallsyms"
	fi
	echo "$KP_TMP/kallsyms"
}

# kallsyms_changed: forget the copy of /proc/kallsyms
kallsyms_changed() {
	rm -f "$KP_TMP/kallsyms"
}

# sym NAME [MODULE]: address of NAME from /proc/kallsyms (16 hex digits),
# from MODULE's symbols if given ("vmlinux": the kernel's own); fails if
# not found, hidden or ambiguous
sym() {
	_sy_name=$1
	_sy_mod=${2:-}
	_sy_addr=$(grep -F -- " $_sy_name" "$(kallsyms)" | awk -v n="$_sy_name" -v m="$_sy_mod" '
		$3 != n { next }
		m == "" { print $1; next }
		m == "vmlinux" { if (NF == 3) print $1; next }
		$4 == "[" m "]" { print $1 }' | sort -u)
	_sy_where="$_sy_name${_sy_mod:+ [$_sy_mod]}"
	case $_sy_addr in
	"")
		diag "sym: $_sy_where not in /proc/kallsyms" >&2
		return 1
		;;
	*[!0-9a-f]*)
		diag "sym: $_sy_where is ambiguous:" "$_sy_addr" >&2
		return 1
		;;
	0000000000000000)
		diag "sym: $_sy_where: address hidden (kptr_restrict?)" >&2
		return 1
		;;
	esac
	echo "$_sy_addr"
}

# kp_settle: wait until the jmp sites that the last update left on
# kpatch_guard are jmps again: a read of the patches file runs kpatch's
# work item first, where it is due (Documentation.txt, The redirect)
kp_settle() {
	cat "$KP_PATCHES" >/dev/null
}

# nmi_hooks N: the HOOK=ADDR words of kpatch_test_nmi's patch to
# generation N (its hook functions kpatch_test_nmi_pre_patchN ...)
nmi_hooks() {
	_nh=
	for _nh_k in pre-patch stop-patch undo-patch post-patch \
		pre-unpatch stop-unpatch undo-unpatch post-unpatch; do
		_nh_a=$(sym "kpatch_test_nmi_$(echo "$_nh_k" | tr - _)$1" \
			kpatch_test_nmi) || return 1
		_nh="$_nh $_nh_k=$_nh_a"
	done
	echo "${_nh# }"
}

# sym_type NAME [MODULE]: the kallsyms type letter of NAME
sym_type() {
	grep -F -- " $1" "$(kallsyms)" | awk -v n="$1" -v m="${2:-}" '
		$3 != n { next }
		m == "" || (m == "vmlinux" && NF == 3) || $4 == "[" m "]" { print $2; exit }'
}

# addr_add ADDR N: ADDR + N, as 16 lower-case hex digits
addr_add() {
	printf '%016x\n' "$((0x$1 + $2))"
}

# ------------------------------------------------------ control file --

# kp_show STRING [MAX]: STRING for display: tabs and newlines escaped,
# strings longer than MAX bytes (default 150) shortened
kp_show() {
	printf '%s' "$1" | awk -v max="${2:-150}" 'BEGIN { RS = "\001" } {
		gsub(/\t/, "\\t"); gsub(/\n/, "\\n")
		n = length($0)
		if (n > max)
			$0 = substr($0, 1, max) "...(" n " bytes)"
		printf "%s", $0
	}'
}

# kp_logged STRING: STRING as a transcript shows a command (see the top
# of this file): kp_show's up to 400 bytes, and "?" for any other byte
# that does not print
kp_logged() {
	kp_show "$1" 400 | LC_ALL=C sed 's/[^ -~]/?/g'
}

# log_kp STRING [WHO]: the transcript line of writing STRING to the control
# file ("&" or "(WHO)" after it: in the background, or from whom)
log_kp() {
	log_command "echo '$(kp_logged "$1")' > control${2:+ $2}"
}

# kp_raw STRING: write STRING, exactly, to the control file in one write;
# KP_RESULT is "OK" or the errno name; succeeds if it is OK
kp_raw() {
	log_kp "$1"
	KP_RESULT=$("$KPCTL" "$KP_CONTROL" "$1" 2>&1)
	diag "$KP_RESULT"
	[ "$KP_RESULT" = OK ]
}

# kp CMD...: write the words of CMD, joined by spaces, to the control file
kp() {
	kp_raw "$*"
}

# kp_nocap CMD...: like kp, but without CAP_SYS_MODULE
kp_nocap() {
	log_kp "$*" "(without CAP_SYS_MODULE)"
	KP_RESULT=$("$KPCTL" --nocap "$KP_CONTROL" "$*" 2>&1)
	diag "$KP_RESULT"
	[ "$KP_RESULT" = OK ]
}

# kp_bg FILE STRING: write STRING to the control file in the background;
# what kpctl prints (OK or the errno name) goes to FILE, the writer's pid
# is in KP_BG
kp_bg() {
	log_kp "$2" "&"
	"$KPCTL" "$KP_CONTROL" "$2" >"$1" 2>&1 &
	# shellcheck disable=SC2034 # for the caller
	KP_BG=$!
}

# kp_what STRING: short name of a command for descriptions ("patch p1")
kp_what() {
	_kw=$(printf '%s' "$1" | tr '\t\n' '  ' | awk '{ print $1, $2 }')
	_kw=${_kw% }
	if [ -z "$_kw" ]; then
		_kw="(empty)"
	fi
	kp_show "$_kw"
}

# expect_ok CMD...: assert that the command is accepted
expect_ok() {
	if kp "$@"; then
		ok "$(kp_what "$*") -> OK"
	else
		not_ok "$(kp_what "$*") -> OK"
		diag "expected OK, got $KP_RESULT"
		diag "kernel log:" "$(log_since_mark | tail -n 5)"
		return 1
	fi
}

# expect_errno ERRNO CMD...: assert that the command fails with ERRNO
expect_errno() {
	_ee_want=$1
	shift
	expect_errno_raw "$_ee_want" "$*"
}

# expect_errno_raw ERRNO STRING: same for an exact STRING
expect_errno_raw() {
	kp_raw "$2"
	if [ "$KP_RESULT" = "$1" ]; then
		ok "$(kp_what "$2") -> $1"
	else
		not_ok "$(kp_what "$2") -> $1"
		diag "expected $1, got $KP_RESULT"
		diag "kernel log:" "$(log_since_mark | tail -n 5)"
		return 1
	fi
}

# unpatch_all: unpatch every patch in the patches file, newest first
unpatch_all() {
	[ -r "$KP_PATCHES" ] || return 0
	# Patch names are single words.
	# shellcheck disable=SC2013
	for _ua_name in $(awk '!($1 in s) { s[$1] = 1; a[++n] = $1 }
			END { for (i = n; i > 0; i--) print a[i] }' "$KP_PATCHES"); do
		_ua_try=0
		while ! kp unpatch "$_ua_name" && [ "$KP_RESULT" = EBUSY ] &&
		      [ "$_ua_try" -lt 20 ]; do
			_ua_try=$((_ua_try + 1))
			nap
		done
	done
	[ ! -s "$KP_PATCHES" ]
}

# ---------------------------------------------------------------- state --

# state_snapshot: everything a refused command must leave unchanged: the
# patches file, the sysfs tree, ftrace's enabled functions and the
# reference counts of kpatch and the test modules.  How ftrace calls an
# ftrace_ops is its own choice and not kpatch's state: a per-ops trampoline
# ("tramp: ADDR ..."), or the list function when it could not allocate one
# (an allocation failure it absorbs); the snapshot leaves both out.
state_snapshot() {
	echo "== $KP_PATCHES"
	cat "$KP_PATCHES" 2>&1
	echo "== ls -R $KP_SYSFS"
	ls -R "$KP_SYSFS" 2>&1
	echo "== $TRACEFS/enabled_functions"
	sed -E 's/[[:space:]]+(tramp: |->arch_ftrace_ops_list_func).*$//' \
		"$TRACEFS/enabled_functions" 2>&1
	echo "== module refcounts"
	awk '$1 ~ /^kpatch/ { print $1, $3 }' /proc/modules
}

# save_state: remember state_snapshot for check_state_unchanged
save_state() {
	KP_STATE=$(state_snapshot)
}

# check_state_unchanged: assert the state equals the one save_state saw
check_state_unchanged() {
	_csu_now=$(state_snapshot)
	if [ "$_csu_now" = "$KP_STATE" ]; then
		ok "state unchanged"
	else
		not_ok "state unchanged"
		show_diff "$KP_STATE" "$_csu_now"
		return 1
	fi
}

# expect_refused ERRNO CMD...: the command fails with ERRNO and changes
# nothing
expect_refused() {
	_er_want=$1
	shift
	expect_refused_raw "$_er_want" "$*"
}

# expect_refused_raw ERRNO STRING: same for an exact STRING.  Should the
# command be accepted after all, its patch is removed again, so that one
# failure does not spoil the cases after it.
expect_refused_raw() {
	save_state
	expect_errno_raw "$1" "$2"
	check_state_unchanged
	if [ "$KP_RESULT" = OK ]; then
		_err_name=$(printf '%s' "$2" | awk '{ print $2; exit }')
		diag "undoing the accepted command"
		kp_raw "unpatch $_err_name" >/dev/null
	fi
}

# pline NAME OLDSYM OLDADDR NEWSYM NEWADDR STATE: an ERE matching the
# patches file line for one function (sizes: any non-zero hex number)
pline() {
	_pl_size='[+]0x0*[1-9a-f][0-9a-f]*'
	printf '^%s %s%s %s %s%s %s %s$\n' "$1" \
		"$(printf '%s' "$2" | sed 's/[.]/[.]/g')" "$_pl_size" "$3" \
		"$(printf '%s' "$4" | sed 's/[.]/[.]/g')" "$_pl_size" "$5" "$6"
}

# check_patches DESC [ERE...]: the patches file has exactly one line per
# ERE, in this order, each matching its ERE (see pline)
check_patches() {
	_cp_desc=$1
	shift
	_cp_actual=$(cat "$KP_PATCHES" 2>&1)
	if printf '%s' "$_cp_actual" | awk '
		BEGIN { for (i = 1; i < ARGC; i++) { p[i] = ARGV[i]; ARGV[i] = "" }
			n = ARGC - 1; bad = 0 }
		NR > n || $0 !~ p[NR] { bad = 1 }
		END { exit (bad || NR != n) }' "$@"; then
		ok "$_cp_desc"
	else
		not_ok "$_cp_desc"
		if [ $# -eq 0 ]; then
			diag "expected an empty patches file"
		else
			diag "expected lines matching:" "$(printf '%s\n' "$@")"
		fi
		diag "actual:" "$_cp_actual"
		return 1
	fi
}

# lines_any_order [ERE...]: true if the lines on stdin match the EREs one
# to one, in any order (as many lines as EREs)
lines_any_order() {
	awk '
		BEGIN { for (i = 1; i < ARGC; i++) { p[i] = ARGV[i]; ARGV[i] = "" }
			n = ARGC - 1; bad = 0 }
		{
			hit = 0
			for (i = 1; i <= n; i++)
				if (!used[i] && $0 ~ p[i]) { used[i] = 1; hit = 1; break }
			if (!hit)
				bad = 1
		}
		END { exit (bad || NR != n) }' "$@"
}

# check_patches_any_order DESC [ERE...]: like check_patches, but the
# lines may come in any order (the functions of one patch)
check_patches_any_order() {
	_cpa_desc=$1
	shift
	_cpa_actual=$(cat "$KP_PATCHES" 2>&1)
	if printf '%s' "$_cpa_actual" | lines_any_order "$@"; then
		ok "$_cpa_desc"
	else
		not_ok "$_cpa_desc"
		diag "expected lines (any order) matching:" "$(printf '%s\n' "$@")"
		diag "actual:" "$_cpa_actual"
		return 1
	fi
}

# check_sysfs_patches DESC [NAME...]: /sys/kernel/kpatch/patches holds
# exactly the directories NAME...
check_sysfs_patches() {
	_csp_desc=$1
	shift
	_csp_want=$(for _csp_n in "$@"; do echo "$_csp_n"; done | sort)
	_csp_have=$(for _csp_d in "$KP_SYSFS_PATCHES"/*; do
		[ -e "$_csp_d" ] && basename "$_csp_d"
	done | sort)
	if [ "$_csp_want" = "$_csp_have" ]; then
		for _csp_n in "$@"; do
			if [ ! -d "$KP_SYSFS_PATCHES/$_csp_n" ]; then
				not_ok "$_csp_desc"
				diag "$KP_SYSFS_PATCHES/$_csp_n is not a directory"
				return 1
			fi
		done
		ok "$_csp_desc"
	else
		not_ok "$_csp_desc"
		show_diff "$_csp_want" "$_csp_have"
		return 1
	fi
}

# ftrace_enabled FUNC: does ftrace's enabled_functions list FUNC?
ftrace_enabled() {
	grep -q "^$1[ 	]" "$TRACEFS/enabled_functions"
}

# target_values: what kpatch_test_target's functions return ("a=1 b=2")
target_values() {
	cat "$TARGET_VALUES" 2>&1
}

# modparam MOD PARAM: value of a module parameter
modparam() {
	cat "/sys/module/$1/parameters/$2" 2>&1
}

# set_param MOD PARAM VALUE: write a module parameter
set_param() {
	log_command "echo $3 > /sys/module/$1/parameters/$2"
	echo "$3" >"/sys/module/$1/parameters/$2"
}

# modparam_is MOD PARAM VALUE: is the module parameter VALUE?
modparam_is() {
	[ "$(modparam "$1" "$2")" = "$3" ]
}

# modparam_positive MOD PARAM: is the module parameter a number > 0?
modparam_positive() {
	_mp_v=$(modparam "$1" "$2")
	case $_mp_v in
	"" | *[!0-9]*) return 1 ;;
	esac
	[ "$_mp_v" -gt 0 ]
}

# site FUNC: FUNC's line in enabled_functions and the lines ftrace
# continues it on (those start with a tab: "\tdirect-->...")
site() {
	awk -v f="$1" '
		found && /^[ \t]/ { print; next }
		found { exit }
		index($0, f) == 1 && substr($0, length(f) + 1, 1) ~ /[ \t]/ {
			found = 1
			print
		}' "$TRACEFS/enabled_functions"
}

# on_handler FUNC: enabled_functions names a handler of kpatch's for FUNC
on_handler() {
	site "$1" | grep -Eq 'kpatch_(ftrace|fops)_handler'
}

# taint_value: /proc/sys/kernel/tainted
taint_value() {
	cat /proc/sys/kernel/tainted
}

# taint_livepatch_set: is TAINT_LIVEPATCH (bit 15, 32768, 'K') set?
taint_livepatch_set() {
	[ $(($(taint_value) & 32768)) -ne 0 ]
}

# -------------------------------------------------------------- cleanup --

# cleanup: unpatch everything and unload the test modules and kpatch.ko;
# a not-ok line for whatever could not be cleaned up (the next script
# expects a clean slate)
cleanup() {
	_cl_bad=0
	if ! unpatch_all; then
		not_ok "cleanup: every patch removed"
		diag "left over:" "$(cat "$KP_PATCHES" 2>&1)"
		_cl_bad=1
	fi
	_cl_pass=0
	while [ "$_cl_pass" -lt 20 ]; do
		_cl_left=
		for _cl_mod in $KP_TEST_MODULES kpatch; do
			mod_loaded "$_cl_mod" || continue
			unload_mod "$_cl_mod" >/dev/null 2>&1 ||
				_cl_left="$_cl_left $_cl_mod"
		done
		[ -n "$_cl_left" ] || break
		_cl_pass=$((_cl_pass + 1))
		nap
	done
	if [ -n "$_cl_left" ]; then
		not_ok "cleanup: modules unloaded"
		diag "still loaded:$_cl_left"
		diag "$(grep '^kpatch' /proc/modules)"
		_cl_bad=1
	fi
	return "$_cl_bad"
}

kp_exit() {
	_ke_rc=$?
	trap - EXIT
	KP_TEST=
	if [ -n "$KP_CLEANUP_HOOK" ]; then
		$KP_CLEANUP_HOOK
	fi
	diag "----- $KP_SUITE: cleanup"
	cleanup
	check_no_splat "$KP_SCRIPT_MARK"
	rm -rf "$KP_TMP"
	diag "$KP_SUITE: done ($KP_NPASS ok, $KP_NFAIL not ok, $KP_NSKIP skipped)"
	if [ "$KP_NFAIL" -ne 0 ]; then
		exit 1
	fi
	exit "$_ke_rc"
}

trap kp_exit EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

log_mark
KP_SCRIPT_MARK=$KP_MARK

# A script that died without cleaning up leaves its mess to the next one.
if mod_loaded kpatch || grep -q '^kpatch_test_' /proc/modules; then
	diag "modules left loaded by an earlier script:" \
		"$(grep '^kpatch' /proc/modules)"
	cleanup >/dev/null 2>&1
fi
command -v "$KPCTL" >/dev/null 2>&1 || [ -x "$KPCTL" ] ||
	bail "setup: kpctl helper ($KPCTL) exists"
