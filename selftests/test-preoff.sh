#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-preoff.sh - a site on the shared ftrace_ops (kpatch_fops) is freed
# only after every call that may have found it is over.
#
# kpatch_fops's handler finds a site by ip in kpatch_sites and uses it with
# preemption off; an update that leaves a site without an entry takes it
# out of kpatch_sites and out of kpatch_fops's filter, and must then wait
# until no CPU is in a section with preemption off that began before,
# before it frees the site.  Uses the hooked build of kpatch.ko and
# kpatch_test_preoff.ko (see that module's header): armed, it starts such
# a section on another CPU at KPATCH_TEST_DONE -- after the update's
# stop_machine() and grace period, before the sites are released -- and
# keeps it for hold_ms.  When the unpatch has returned, the section must
# be over: else the site was freed under a call that may still hold it.
#
# 1. kpatch_fops stays registered: patch "keep" (f0 .. f4) and "gone" (f5
#    .. f9), five functions each, so every site is on kpatch_fops; the
#    unpatch of "gone" releases five sites while "keep" keeps kpatch_fops.
# 2. The last sites: the unpatch of "keep" unregisters kpatch_fops.
# 3. A registration ftrace refuses: a kprobe with a post handler (an
#    IPMODIFY ftrace_ops) is on f3, and the section starts before a
#    patch of f3 alone, which is refused with EBUSY.  ftrace may have
#    put the site's ftrace_ops on its list before it refused it, and takes
#    it off without waiting; kpatch must wait before it frees the site.
#
# 4. The filter cannot shrink (fault injection: every try of ftrace to take
#    ips out of kpatch_fops's filter fails, kpatch_test_preoff's
#    fail_filter): the unpatch of "gone" still takes effect, and kpatch
#    keeps its five sites, hooked, counted and pinned, doing nothing; a
#    later patch of f5 alone takes its site off first and applies, and the
#    work item takes the others off: enabled_functions is clean at the end.
# 5. The same when f0 is to leave kpatch_fops again for an ftrace_ops of
#    its own, because another direct call owns it (kpatch_test_direct):
#    the patch is refused with ENOMEM and changes nothing.
#
# In each the functions run the right version before and after, and the
# kernel log is compared whole.

KPATCH_HOOKS=${KPATCH_HOOKS:-/kpatch/hooks}
# (read by functions.sh)
# shellcheck disable=SC2034
KPATCH_KO=$KPATCH_HOOKS/kpatch.ko
# shellcheck disable=SC2034
KPATCH_MODDIR=$KPATCH_HOOKS/test_modules

# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

MOD=kpatch_test_preoff
HOLD_MS=${KPATCH_PREOFF_HOLD_MS:-4000}

setup_modules kpatch "$MOD"
[ "$(grep -c '^processor' /proc/cpuinfo)" -ge 2 ] ||
	bail "setup: needs two CPUs"

# pairs N...: the words "OLD NEW" of kpatch_test_preoff_fN for each N
pairs() {
	for _pa_n in "$@"; do
		sym "${MOD}_f$_pa_n" "$MOD" || return 1
		sym "${MOD}_f${_pa_n}_new" "$MOD" || return 1
	done | tr '\n' ' '
}
keep=$(pairs 0 1 2 3 4) || bail "setup: find f0 .. f4 and their replacements"
gone=$(pairs 5 6 7 8 9) || bail "setup: find f5 .. f9 and their replacements"
# (each is ten words, split on purpose below)
set_param "$MOD" hold_ms "$HOLD_MS" || bail "setup: set hold_ms"

values() {
	modparam "$MOD" values
}

# handler_is FUNC HANDLER: enabled_functions names HANDLER for FUNC
# shellcheck disable=SC2317
handler_is() {
	site "$1" | grep -q "$2"
}

# unpatch_in_section NAME: unpatch NAME with the section armed; then
# assert that the section was begun and is over
unpatch_in_section() {
	_us_before=$(modparam "$MOD" sections)
	set_param "$MOD" armed 1
	expect_ok unpatch "$1"
	_us_in=$(modparam "$MOD" in_section)
	check_eq "$1: the section began during the unpatch" \
		"$((_us_before + 1))" "$(modparam "$MOD" sections)"
	check_eq "$1: the unpatch returned after the section with preemption off ended" \
		N "$_us_in"
	check "the section ends" wait_until modparam_is "$MOD" in_section N
}

start_test "sites leave kpatch_fops while it stays registered"
log_mark
# shellcheck disable=SC2086
expect_ok patch keep $keep
# shellcheck disable=SC2086
expect_ok patch gone $gone
check_eq "keep, gone: all new" "100 101 102 103 104 105 106 107 108 109" \
	"$(values)"
check "f0: kpatch_fops_handler" handler_is "${MOD}_f0" kpatch_fops_handler
check "f9: kpatch_fops_handler" handler_is "${MOD}_f9" kpatch_fops_handler
unpatch_in_section gone
check_eq "gone removed: f5 .. f9 old" "100 101 102 103 104 5 6 7 8 9" \
	"$(values)"
check_transcript "the log has the patches enabled and removed, nothing else" <<EOF
% echo 'patch keep ${keep% }' > control
kpatch: tainting kernel with TAINT_LIVEPATCH
kpatch: patch 'keep' enabled (5 functions)
% echo 'patch gone ${gone% }' > control
kpatch: patch 'gone' enabled (5 functions)
% echo 1 > /sys/module/$MOD/parameters/armed
% echo 'unpatch gone' > control
kpatch: patch 'gone' removed
EOF
check_no_splat

start_test "the last sites leave kpatch_fops, which is unregistered"
log_mark
unpatch_in_section keep
check_eq "keep removed: all old" "0 1 2 3 4 5 6 7 8 9" "$(values)"
check_transcript "the log has the patch removed, nothing else" <<EOF
% echo 1 > /sys/module/$MOD/parameters/armed
% echo 'unpatch keep' > control
kpatch: patch 'keep' removed
EOF
check_no_splat

# refused_in_section: case 3 with kpatch's parameter direct as it is now
refused_in_section() {
	_rs_before=$(modparam "$MOD" sections)
	set_param "$MOD" start 1
	# shellcheck disable=SC2086
	expect_errno EBUSY patch r3 $p3
	_rs_in=$(modparam "$MOD" in_section)
	check_eq "r3: the section began before the patch" \
		"$((_rs_before + 1))" "$(modparam "$MOD" sections)"
	check_eq "r3: the refusal returned after the section with preemption off ended" \
		N "$_rs_in"
	check "the section ends" wait_until modparam_is "$MOD" in_section N
	check_eq "r3 refused: all old" "0 1 2 3 4 5 6 7 8 9" "$(values)"
}

KP_DIRECT_PARAM=/sys/module/kpatch/parameters/direct
p3=$(pairs 3) || bail "setup: find f3 and its replacement"
for direct in Y N; do
	start_test "a registration ftrace refuses (direct=$direct)"
	if [ "$direct" = N ] && [ ! -e "$KP_DIRECT_PARAM" ]; then
		skip "kpatch has no parameter direct"
		continue
	fi
	# (before the mark: the transcript is the same where kpatch has no
	# parameter direct)
	if [ -e "$KP_DIRECT_PARAM" ]; then
		set_param kpatch direct "$direct" || bail "set direct=$direct"
	fi
	log_mark
	# kpatch_test_kprobe of the normal build (not in KPATCH_MODDIR)
	log_command "insmod kpatch_test_kprobe.ko func=${MOD}_f3 post=1"
	if insmod "${KPATCH_NORMAL_MODDIR:-/kpatch/test_modules}/kpatch_test_kprobe.ko" \
		"func=${MOD}_f3" post=1; then
		ok "insmod kpatch_test_kprobe func=${MOD}_f3 post=1"
		refused_in_section
		check "rmmod kpatch_test_kprobe" unload_mod kpatch_test_kprobe
	else
		not_ok "insmod kpatch_test_kprobe func=${MOD}_f3 post=1"
	fi
	check_transcript "the log names f3" <<EOF
% insmod kpatch_test_kprobe.ko func=${MOD}_f3 post=1
% echo 1 > /sys/module/$MOD/parameters/start
% echo 'patch r3 ${p3% }' > control
kpatch: patch 'r3' refused: ftrace cannot redirect ${MOD}_f3+0x0/0x0 [$MOD] (-16); is a kprobe or another live patch on it?
% rmmod kpatch_test_kprobe
EOF
	if [ -e "$KP_DIRECT_PARAM" ]; then
		set_param kpatch direct Y || bail "set direct=Y"
	fi
	check_no_splat
done

# ------------------------------------------------ the filter cannot shrink --

FAILSLAB=/sys/kernel/debug/failslab
failslab_gfp=

# fail_setup: fail-nth may fail allocations that sleep (failslab ignores
# them by default); fail_cleanup: as before (also the cleanup hook)
fail_setup() {
	failslab_gfp=$(cat "$FAILSLAB/ignore-gfp-wait") &&
		echo N >"$FAILSLAB/ignore-gfp-wait"
}
fail_cleanup() {
	set_param "$MOD" fail_filter 0 >/dev/null 2>&1
	[ -z "$failslab_gfp" ] || echo "$failslab_gfp" >"$FAILSLAB/ignore-gfp-wait"
	failslab_gfp=
	! mod_loaded kpatch_test_direct || rmmod kpatch_test_direct
}
KP_CLEANUP_HOOK=fail_cleanup

# hooked: lines of enabled_functions for f0 .. f9
hooked() {
	grep -c "^${MOD}_f[0-9] " "$TRACEFS/enabled_functions"
}

start_test "the filter cannot shrink: kpatch keeps the sites"
if [ ! -e /proc/self/fail-nth ] || [ ! -d "$FAILSLAB" ]; then
	skip "fault injection: this kernel has no CONFIG_FAULT_INJECTION (the debug kernel has)"
elif ! fail_setup; then
	not_ok "fault injection set up ($FAILSLAB)"
else
	p5=$(pairs 5) || bail "setup: find f5 and its replacement"
	log_mark
	# shellcheck disable=SC2086
	expect_ok patch keep $keep
	# shellcheck disable=SC2086
	expect_ok patch gone $gone
	set_param "$MOD" fail_filter 5
	expect_ok unpatch gone
	check_eq "every try to shrink the filter failed" 0 \
		"$(modparam "$MOD" fail_filter)"
	check_eq "gone removed: f5 .. f9 old" "100 101 102 103 104 5 6 7 8 9" \
		"$(values)"
	# shellcheck disable=SC2086
	expect_ok patch f5 $p5
	check_eq "f5 patched alone: 105" "100 101 102 103 104 105 6 7 8 9" \
		"$(values)"
	expect_ok unpatch f5
	kp_settle
	check_eq "the kept sites are off: f0 .. f4 hooked, no other" 5 "$(hooked)"
	expect_ok unpatch keep
	check_eq "keep removed: all old" "0 1 2 3 4 5 6 7 8 9" "$(values)"
	check_eq "no function hooked" 0 "$(hooked)"
	check_transcript "the log says the sites stay kpatch's, once" <<EOF
% echo 'patch keep ${keep% }' > control
kpatch: patch 'keep' enabled (5 functions)
% echo 'patch gone ${gone% }' > control
kpatch: patch 'gone' enabled (5 functions)
% echo 5 > /sys/module/$MOD/parameters/fail_filter
% echo 'unpatch gone' > control
kpatch: 5 functions keep kpatch's ftrace hook for now (-12): they redirect nothing, and kpatch takes them off later
kpatch: patch 'gone' removed
% echo 'patch f5 ${p5% }' > control
kpatch: patch 'f5' enabled (1 function)
% echo 'unpatch f5' > control
kpatch: patch 'f5' removed
% echo 'unpatch keep' > control
kpatch: patch 'keep' removed
EOF
	check_no_splat

	start_test "the filter cannot shrink: f0 cannot leave kpatch_fops"
	f0=$(sym "${MOD}_f0" "$MOD") || bail "setup: find f0"
	p04=$(pairs 0 1 2 3 4) || bail "setup: find f0 .. f4"
	log_mark
	# shellcheck disable=SC2086
	expect_ok patch keep2 $gone
	log_command "insmod kpatch_test_direct.ko addr=0x$f0"
	check "insmod kpatch_test_direct addr=f0 (plain build)" insmod \
		"${KPATCH_NORMAL_MODDIR:-/kpatch/test_modules}/kpatch_test_direct.ko" \
		"addr=0x$f0"
	set_param "$MOD" fail_filter 5
	# shellcheck disable=SC2086
	expect_refused ENOMEM patch r5 $p04
	check_eq "f0 .. f4 old" "0 1 2 3 4 105 106 107 108 109" "$(values)"
	set_param "$MOD" fail_filter 0
	check "rmmod kpatch_test_direct" unload_mod kpatch_test_direct
	expect_ok unpatch keep2
	check_eq "no function hooked" 0 "$(hooked)"
	check_transcript "the log says out of memory" <<EOF
% echo 'patch keep2 ${gone% }' > control
kpatch: patch 'keep2' enabled (5 functions)
% insmod kpatch_test_direct.ko addr=0x$f0
% echo 5 > /sys/module/$MOD/parameters/fail_filter
% echo 'patch r5 ${p04% }' > control
kpatch: patch 'r5' refused: out of memory for the ftrace sites
% echo 0 > /sys/module/$MOD/parameters/fail_filter
% rmmod kpatch_test_direct
% echo 'unpatch keep2' > control
kpatch: patch 'keep2' removed
EOF
	check_no_splat
	fail_cleanup
fi

kp_exit
