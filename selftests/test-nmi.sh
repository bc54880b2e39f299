#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-nmi.sh - patched functions called from NMIs and from every CPU while
# patches come and go, and updates made to fail by an NMI in the middle of
# the stop_machine() callback.  Uses the hooked build of kpatch.ko and
# kpatch_test_nmi.ko (see that module's header): kpatch_test_nmi_f and
# kpatch_test_nmi_g return 100 + N and 200 + N in generation N (0: the
# originals, 1-3: the replacements f1/g1 .. f3/g3), and every caller checks
# that the pair it got comes from one generation.  Generation N of f and g
# also works on data in version N (a version word and four fields, each
# encoded differently in each version), and checks it at every call.
# Every patch to generation N is the patch of a patch module, which
# kpatch_register() enables (a write of 1 to the module's parameter
# "enable") and "unpatch NAME" on the control file removes:
# kpatch_test_nmi_a (generation 1), kpatch_test_nmi_b (2) or
# kpatch_test_nmi_c (3, a replace), each loaded with the addresses of f
# and g, of their generation-N versions and of the hooks
# kpatch_test_nmi_*N.  The stop-patch hook converts the data to version
# N, field by field, inside stop_machine(); stop-unpatch converts it back
# to the patch below (or 0); the undo hooks reverse them on a roll back;
# the pre and post hooks take a snapshot before each update and check it
# after (see the module's header and "Patch hooks").  The module counts
# the calls of a new function of an update before its stop hooks were all
# done or on data not (fully) converted, and of an old function on data
# converted in an update that then took effect: all must stay 0.
#
# 1. Stress: one thread per CPU calls f and g, a sender raises NMIs on
#    every CPU whose handler calls f and g, and the update hook raises an
#    NMI on the other CPUs at every update, while cycles each go from no
#    patch back to no patch, in four shapes:
#      patch A, stack B, unpatch B, unpatch A
#      patch A, stack B, unpatch A, unpatch B
#      patch A, replace with C, unpatch C
#      patch A, stack B, replace with C, unpatch C
#    (A: f->f1 g->g1, kpatch_test_nmi_a; B: f2/g2, kpatch_test_nmi_b;
#    C: f3/g3, kpatch_test_nmi_c).  An NMI that calls f or g while
#    an update is in progress makes kpatch refuse it (EBUSY); that is
#    retried up to 20 times.  Every few conversions (KPATCH_NMI_STOP_KICK,
#    default 10) the stop hook itself raises an NMI on the other CPUs after
#    converting the first field, and pauses between fields.  After every
#    step a call of f and g from the shell must see the top patch, and the
#    data must be in its version; no caller may ever see two generations;
#    every update refused because an NMI ran must have run its undo hooks.
#    KPATCH_NMI_CYCLES (default 50) cycles run, and then more, up to
#    KPATCH_NMI_MAX_CYCLES (default 1000), until the run has seen all it
#    checks: NMIs inside stop_machine(), updates refused because of one
#    (and rolled back), and, with stop kicks, an NMI's old function on
#    half-converted data.  A run that still lacks one of them fails.
# 2. Failure paths, without the threads: an NMI that lands at UPDATING,
#    while a stop hook converts (raised by the hook on the other CPUs, and
#    waited for) or once the entries are published makes patch, stack,
#    replace and unpatch fail with EBUSY, the kernel log names the
#    function called, the undo hooks run, the data is byte-identical, and
#    the patches file, the sysfs tree, enabled_functions and the module
#    reference counts are exactly as before.
# 3. An NMI on another CPU calls f when the stop_machine() callback starts
#    (state still IDLE) and g only after the update has published its
#    entries (or after 200 ms).  Whether kpatch then refuses the update or
#    lets it through, that NMI's f and g must come from one generation.
#    (kpatch's callback waits for every CPU to see UPDATING, so the NMI
#    times out and gets both from before the update.)

KPATCH_HOOKS=${KPATCH_HOOKS:-/kpatch/hooks}
# (read by functions.sh)
# shellcheck disable=SC2034
KPATCH_KO=$KPATCH_HOOKS/kpatch.ko
# shellcheck disable=SC2034
KPATCH_MODDIR=$KPATCH_HOOKS/test_modules

# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

CYCLES=${KPATCH_NMI_CYCLES:-50}
MAX_CYCLES=${KPATCH_NMI_MAX_CYCLES:-1000}
STRADDLE=${KPATCH_NMI_STRADDLE:-1}
STOP_KICK=${KPATCH_NMI_STOP_KICK:-10}
NMI_PARAMS=/sys/module/kpatch_test_nmi/parameters
MAX_TRIES=20

setup_modules kpatch kpatch_test_nmi
# One try per command: this test counts tries and retries EBUSY itself.
if [ -w /sys/module/kpatch/parameters/retries ]; then
	set_param kpatch retries 0 || bail "setup: kpatch retries=0"
fi
f=$(sym kpatch_test_nmi_f kpatch_test_nmi) || bail "setup: find kpatch_test_nmi_f"
g=$(sym kpatch_test_nmi_g kpatch_test_nmi) || bail "setup: find kpatch_test_nmi_g"

# gen_params N: the parameters of a patch module's patch to generation N:
# f and g, their versions N and the hooks kpatch_test_nmi_*N
gen_params() {
	_gp="old1=$f new1=$(sym "kpatch_test_nmi_f$1" kpatch_test_nmi)" || return 1
	_gp="$_gp old2=$g new2=$(sym "kpatch_test_nmi_g$1" kpatch_test_nmi)" || return 1
	for _gp_k in pre_patch stop_patch undo_patch post_patch \
		pre_unpatch stop_unpatch undo_unpatch post_unpatch; do
		_gp_a=$(sym "kpatch_test_nmi_$_gp_k$1" kpatch_test_nmi) || return 1
		_gp="$_gp $_gp_k=$_gp_a"
	done
	echo "$_gp"
}

# The patch modules, one per generation: A, B and C (a replace).
A=kpatch_test_nmi_a
B=kpatch_test_nmi_b
C=kpatch_test_nmi_c
p1=$(gen_params 1) || bail "setup: find the functions and hooks of generation 1"
p2=$(gen_params 2) || bail "setup: find the functions and hooks of generation 2"
p3=$(gen_params 3) || bail "setup: find the functions and hooks of generation 3"
# (each $pN is twelve words, split on purpose)
# shellcheck disable=SC2086
load_mod "$A" $p1 || bail "setup: load $A"
# shellcheck disable=SC2086
load_mod "$B" $p2 || bail "setup: load $B"
# shellcheck disable=SC2086
load_mod "$C" $p3 replace=1 || bail "setup: load $C"

# nmi NAME: value of kpatch_test_nmi's parameter NAME
nmi() {
	modparam kpatch_test_nmi "$1"
}

# nmi_read NAME: the same into NMI_VAL, without a fork (the stress loop
# reads parameters thousands of times)
nmi_read() {
	read -r NMI_VAL <"$NMI_PARAMS/$1"
}

# nmi_set NAME VALUE: set kpatch_test_nmi's parameter NAME
nmi_set() {
	echo "$2" >"$NMI_PARAMS/$1"
}

# nmi_stop: stop the threads and every NMI source of the module
nmi_stop() {
	nmi_set stress 0
	nmi_set kick_every 0
	nmi_set stop_kick_every 0
	nmi_set force off
}
KP_CLEANUP_HOOK=nmi_stop

# nmi_sent_all_landed: every NMI the module raised has landed
nmi_sent_all_landed() {
	[ "$(nmi nmis_sent)" = "$(nmi nmi_calls)" ]
}

# ---------------------------------------------------------------- stress --

# fast_kp VERB NAME: patch or replace NAME (a write of 1 to its module's
# enable: kpatch_register()), or unpatch it (the control file), with the
# shell's own echo (no fork), retrying EBUSY up to MAX_TRIES times;
# KP_RESULT is OK, EBUSY or the error text.  Counts the retries in
# busy_retries.
fast_kp() {
	_fk_try=0
	if [ "$1" = unpatch ]; then
		_fk_file=$KP_CONTROL
		_fk_str="unpatch $2"
	else
		_fk_file=/sys/module/$2/parameters/enable
		_fk_str=1
	fi
	while :; do
		if echo "$_fk_str" 2>"$KP_TMP/err" >"$_fk_file"; then
			KP_RESULT=OK
		else
			read -r KP_RESULT <"$KP_TMP/err" || KP_RESULT="(no message)"
			case $KP_RESULT in
			*"resource busy"*) KP_RESULT=EBUSY ;;
			esac
		fi
		if [ "$KP_RESULT" != EBUSY ] || [ "$_fk_try" -ge "$MAX_TRIES" ]; then
			break
		fi
		_fk_try=$((_fk_try + 1))
		busy_retries=$((busy_retries + 1))
	done
	[ "$KP_RESULT" = OK ]
}

# step GEN VERB NAME: one update of a cycle; then f and g called from the
# shell must return generation GEN, and the data must be in version GEN
step() {
	_st_gen=$1
	shift
	steps=$((steps + 1))
	if ! fast_kp "$@"; then
		failed=$((failed + 1))
		[ "$failed" -gt 5 ] || diag "cycle $i: $1 $2: $KP_RESULT"
		return 1
	fi
	nmi_read generation
	if [ "$NMI_VAL" != "$_st_gen" ]; then
		wrong=$((wrong + 1))
		[ "$wrong" -gt 5 ] ||
			diag "cycle $i: after $1 $2: generation $NMI_VAL, expected $_st_gen"
	fi
	nmi_read data_version
	case $NMI_VAL in
	"$_st_gen "*) ;;
	*)
		wrong_data=$((wrong_data + 1))
		[ "$wrong_data" -gt 5 ] ||
			diag "cycle $i: after $1 $2: data $NMI_VAL, expected version $_st_gen"
		;;
	esac
	return 0
}

# cycle N: one cycle, of shape N % 4; fails at the first step that fails
cycle() {
	step 1 patch "$A" || return 1
	case $(($1 % 4)) in
	0)
		step 2 patch "$B" &&
			step 1 unpatch "$B" &&
			step 0 unpatch "$A"
		;;
	1)
		step 2 patch "$B" &&
			step 2 unpatch "$A" &&
			step 0 unpatch "$B"
		;;
	2)
		step 3 replace "$C" &&
			step 0 unpatch "$C"
		;;
	3)
		step 2 patch "$B" &&
			step 3 replace "$C" &&
			step 0 unpatch "$C"
		;;
	esac
}

# scan_log: go through the kernel log since the last log_mark, then set a
# new mark (the log holds only a few hundred cycles' worth): add the
# refusals to refused_nmi (a patched function ran during the update) and
# refused_other (any other reason), and the lines that show a splat or an
# NMI nobody claimed to bad_log
scan_log() {
	_sl_log=$(log_since_mark)
	log_mark
	_sl_bad=$(printf '%s\n' "$_sl_log" |
		grep -E -- "$KP_SPLAT_RE|NMI received for unknown reason")
	[ -z "$_sl_bad" ] || bad_log="$bad_log$_sl_bad
"
	_sl_log=$(printf '%s\n' "$_sl_log" | grep 'kpatch: .* refused: ')
	[ -n "$_sl_log" ] || return 0
	_sl_n=$(printf '%s\n' "$_sl_log" | grep -c 'was called during the update')
	refused_nmi=$((refused_nmi + _sl_n))
	_sl_n=$(printf '%s\n' "$_sl_log" | grep -vc 'was called during the update')
	if [ "$_sl_n" -gt 0 ]; then
		[ "$refused_other" -gt 0 ] ||
			diag "other refusals:" "$(printf '%s\n' "$_sl_log" |
				grep -v 'was called during the update' | head -n 3)"
		refused_other=$((refused_other + _sl_n))
	fi
}

start_test "threads and NMIs"
log_mark
nmi_set stress 1
threads=$(nmi threads)
diag "$threads calling threads, $(nproc) CPUs"
check "one thread per online CPU" test "$threads" -eq "$(nproc)"
check "the threads call f and g" wait_until modparam_positive kpatch_test_nmi thread_calls
check "NMIs call f and g" wait_until modparam_positive kpatch_test_nmi nmi_calls
check_eq "f and g unpatched: generation 0" 0 "$(nmi generation)"
check_eq "the data in version 0, no patch" "0 []" "$(nmi data_version)"

# data_violations: assert that the module's data checks found nothing
data_violations() {
	check_eq "no new function ran before the stop hooks were done" \
		0 "$(nmi new_early)"
	check_eq "no new function ran on unconverted or partly converted data" \
		0 "$(nmi new_unconverted)"
	check_eq "every old function that saw converted data was in an update rolled back" \
		0 "$(nmi old_converted_kept)"
	check_eq "outside updates, every function found its data in its version" \
		0 "$(nmi data_mismatch)"
	check_eq "every update rolled back left the data byte-identical" \
		0 "$(nmi rollback_data_changed)"
	if ! check_eq "the hooks ran in order, in their context" \
		0 "$(nmi hook_errors)"; then
		diag "last hook error: $(nmi last_hook_error)"
	fi
	diag "last violation: $(nmi last_violation)"
}

# exercised: the cycles so far have seen every event the checks below
# need to mean something: NMIs inside stop_machine() (which implies during
# an update), updates refused because an NMI ran (the count compared with
# the roll backs), and, with stop kicks, an update rolled back after an
# NMI's old function saw half-converted data.  Reads the counts without a
# fork; refused_nmi is as of the last scan_log.
exercised() {
	[ "$refused_nmi" -gt 0 ] || return 1
	nmi_read nmis_in_stop_machine
	[ "$NMI_VAL" -gt 0 ] || return 1
	[ "$STOP_KICK" -gt 0 ] || return 0
	nmi_read rollbacks_old_calls
	[ "$NMI_VAL" -gt 0 ]
}

start_test "$CYCLES to $MAX_CYCLES cycles of patch, stack, replace and unpatch"
diag "% for i in \$(seq $CYCLES); do patch A, stack B, replace with C," \
	"unpatch, ...; done  (EBUSY retried up to $MAX_TRIES times)," \
	"then more, up to $MAX_CYCLES, until every event checked below was seen"
nmi_set kick_every 1
nmi_set stop_kick_every "$STOP_KICK"
busy_retries=0
refused_nmi=0
refused_other=0
bad_log=
steps=0
failed=0
wrong=0
wrong_data=0
updates0=$(nmi updates)
rollbacks0=$(nmi rollbacks)
start=$(date +%s)
i=0
while [ "$i" -lt "$MAX_CYCLES" ]; do
	i=$((i + 1))
	if ! cycle "$i"; then
		for _n in "$C" "$B" "$A"; do
			fast_kp unpatch "$_n" 2>/dev/null
		done
	fi
	# Past the minimum, stop at the first scan (every 4 cycles: each shape
	# as often as the others) once everything was seen.
	if [ "$i" -lt "$CYCLES" ]; then
		[ $((i % 100)) -ne 0 ] || scan_log
	elif [ $((i % 4)) -eq 0 ]; then
		scan_log
		! exercised || break
	fi
done
scan_log
secs=$(($(date +%s) - start))
nmi_stop
updates=$(($(nmi updates) - updates0))

check_eq "every step of every cycle succeeded" 0 "$failed"
check_patches "no patch left"
check_eq "after every step, f and g returned the top patch's generation" 0 "$wrong"
check_eq "after every step, the data was in the top patch's version" 0 "$wrong_data"
check_eq "the data in version 0, no patch" "0 []" "$(nmi data_version)"
check "every NMI raised landed and was handled" wait_until nmi_sent_all_landed
thread_calls=$(nmi thread_calls)
nmi_calls=$(nmi nmi_calls)
in_update=$(nmi nmis_in_update)
in_stop=$(nmi nmis_in_stop_machine)
inconsistent=$(nmi inconsistent)
diag "cycles done: $i in ${secs}s ($steps steps, $updates updates," \
	"$busy_retries EBUSY retries)"
diag "calls made (f/g pairs): $thread_calls by threads, $nmi_calls by NMIs"
diag "generations seen: threads $(nmi thread_gens); NMIs $(nmi nmi_gens)"
diag "NMIs raised: $(nmi nmis_sent); landed during an update: $in_update" \
	"(in stop_machine: $in_stop)"
diag "updates refused because an NMI ran: $refused_nmi;" \
	"refused otherwise: $refused_other"
diag "inconsistencies: $inconsistent (last: $(nmi last_inconsistent))"
rollbacks=$(($(nmi rollbacks) - rollbacks0))
diag "hooks: $(nmi hook_calls)"
diag "conversions: $(nmi conversions); updates rolled back: $rollbacks" \
	"($(nmi rollbacks_old_calls) with an old function on converted data," \
	"$(nmi old_converted) such calls)"
check_eq "no caller saw two generations" 0 "$inconsistent"
check "the threads called f and g" test "$thread_calls" -gt 0
check "NMIs called f and g" test "$nmi_calls" -gt 0
check "NMIs landed during updates" test "$in_update" -gt 0
check "NMIs landed inside stop_machine" test "$in_stop" -gt 0
if [ -z "$bad_log" ]; then
	ok "no kernel splat and no unclaimed NMI in the log"
else
	not_ok "no kernel splat and no unclaimed NMI in the log"
	diag "$bad_log"
fi
check "the stop hooks converted the data" modparam_positive kpatch_test_nmi conversions
check "NMIs made updates fail" test "$refused_nmi" -gt 0
check_eq "every update an NMI made fail ran its undo hooks" "$refused_nmi" "$rollbacks"
if [ "$STOP_KICK" -gt 0 ]; then
	check "NMIs landed while a stop hook converted, and rolled the update back" \
		modparam_positive kpatch_test_nmi rollbacks_old_calls
fi
data_violations

# ---------------------------------------------------------- failure paths --

# upd_shown VERB NAME: the transcript line of upd VERB NAME
upd_shown() {
	if [ "$1" = unpatch ]; then
		echo "echo 'unpatch $2' > control"
	else
		echo "echo 1 > /sys/module/$2/parameters/enable"
	fi
}

# upd VERB NAME: patch or replace NAME (kpatch_register(), by a write of
# 1 to its module's enable), or unpatch it (the control file); KP_RESULT
# is OK or the errno name; succeeds if it is OK
upd() {
	log_command "$(upd_shown "$@")"
	if [ "$1" = unpatch ]; then
		KP_RESULT=$("$KPCTL" "$KP_CONTROL" "unpatch $2" 2>&1)
	else
		KP_RESULT=$("$KPCTL" "/sys/module/$2/parameters/enable" 1 2>&1)
	fi
	diag "$KP_RESULT"
	[ "$KP_RESULT" = OK ]
}

# upd_ok VERB NAME: assert that upd VERB NAME succeeds
upd_ok() {
	upd "$@"
	check_eq "$1 $2 -> OK" OK "$KP_RESULT"
}

# refused_by_nmi VERB NAME: an NMI made that update fail with EBUSY, and
# the log after the command says f was called
refused_by_nmi() {
	check_transcript "the log names the function the NMI called" <<EOF
% $(upd_shown "$@")
kpatch: $1 '$2' refused: kpatch_test_nmi_f+0x_/0x_ [kpatch_test_nmi] was called during the update, from an NMI; rolled back
EOF
}

# forced VERB NAME: with the hook armed, the update fails with EBUSY,
# changes nothing (the data included), its undo hooks ran, and the log
# says why
forced() {
	log_mark
	_fo_n=$(nmi forced)
	_fo_rb=$(nmi rollbacks)
	_fo_old=$(nmi old_converted)
	_fo_data=$(nmi data)
	_fo_ver=$(nmi data_version)
	save_state
	upd "$@"
	check_eq "$1 $2 -> EBUSY" EBUSY "$KP_RESULT"
	check_state_unchanged
	check_eq "the hook made an NMI land during the update" \
		$((_fo_n + 1)) "$(nmi forced)"
	refused_by_nmi "$@"
	check_eq "the update was rolled back: its undo hooks ran" \
		$((_fo_rb + 1)) "$(nmi rollbacks)"
	check_eq "the data is byte-identical" "$_fo_data" "$(nmi data)"
	check_eq "the data version and the stack of patches are unchanged" \
		"$_fo_ver" "$(nmi data_version)"
	if [ "$point" = updating ]; then
		check_eq "the NMI landed before the data was converted" \
			"$_fo_old" "$(nmi old_converted)"
	else
		check "the NMI's old f saw the data converted (or partly)" \
			test "$(nmi old_converted)" -gt "$_fo_old"
	fi
}

for point in updating stop published; do
	start_test "an NMI at $point"
	log_mark
	point_mark=$KP_MARK
	nmi_set force_every 1
	nmi_set force "$point"
	forced patch "$A"
	check_eq "f and g still unpatched" 0 "$(nmi generation)"
	check_eq "the data still in version 0" "0 []" "$(nmi data_version)"

	nmi_set force off
	log_mark
	upd_ok patch "$A"
	check_eq "without the NMI the patch applies: generation 1" 1 "$(nmi generation)"
	check_eq "the data converted to version 1" "1 [1]" "$(nmi data_version)"

	nmi_set force "$point"
	forced patch "$B"
	check_eq "stacking refused: generation still 1" 1 "$(nmi generation)"
	forced replace "$C"
	check_eq "replace refused: generation still 1" 1 "$(nmi generation)"
	forced unpatch "$A"
	check_eq "unpatch refused, rolled back: generation still 1" 1 "$(nmi generation)"
	check_eq "the data still in version 1" "1 [1]" "$(nmi data_version)"

	nmi_set force off
	upd_ok unpatch "$A"
	check_eq "unpatched: generation 0" 0 "$(nmi generation)"
	check_eq "the data back in version 0" "0 []" "$(nmi data_version)"
	check_patches "no patch left"
	check_eq "no forced NMI failed to land" 0 "$(nmi force_timeouts)"
	check_eq "no caller saw two generations" 0 "$(nmi inconsistent)"
	data_violations
	check_no_splat "$point_mark"
done

# ------------------------------------------------- an NMI across the update --

# straddled GEN VERB NAME: run the update while an NMI spans it; it may be
# accepted or refused, but the NMI must see one generation.  Then make
# sure it took effect (without the NMI), so f and g are at GEN.
straddled() {
	_sd_gen=$1
	shift
	_sd_n=$(nmi inconsistent)
	_sd_forced=$(nmi forced)
	upd "$@"
	check_eq "the NMI landed and called f before the update" \
		$((_sd_forced + 1)) "$(nmi forced)"
	case $KP_RESULT in
	OK | EBUSY) ok "$1 $2 -> OK or EBUSY" ;;
	*) not_ok "$1 $2 -> OK or EBUSY" ;;
	esac
	if ! check_eq "the NMI's f and g came from one generation" \
		"$_sd_n" "$(nmi inconsistent)"; then
		diag "$1 $2 -> $KP_RESULT; the NMI got $(nmi last_inconsistent)"
	fi
	if [ "$KP_RESULT" = EBUSY ]; then
		nmi_set force off
		upd "$@"
		nmi_set force straddle
	fi
	check_eq "f and g at generation $_sd_gen" "$_sd_gen" "$(nmi generation)"
	check_eq "the data in version $_sd_gen" "$_sd_gen" \
		"$(nmi data_version | awk '{ print $1 }')"
}

if [ "$STRADDLE" = 1 ]; then
	start_test "an NMI from before UPDATING to after the entries are published"
	log_mark
	point_mark=$KP_MARK
	nmi_set force_every 1
	nmi_set force straddle
	straddled 1 patch "$A"
	straddled 3 replace "$C"
	straddled 0 unpatch "$C"
	nmi_set force off
	check_eq "no straddling NMI failed to land" 0 "$(nmi force_timeouts)"
	data_violations
	check_no_splat "$point_mark"
fi
