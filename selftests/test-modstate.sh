#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-modstate.sh - modules that are not live yet.  While the init of
# kpatch_test_coming waits (MODULE_STATE_COMING), a patch command naming
# its kpatch_test_coming_fn() as new or as old function fails with EBUSY,
# changes nothing, and the log names the module and says it is coming; the
# init may still fail, and then the module is gone without a trace.  Once
# its init has finished, the same patches work.
#
# A patch module whose init fails after kpatch_register() succeeded
# (kpatch_test_api fail_init=1) is freed at once: kpatch must take its
# patch out as it goes, so kpatch_test_value_a() (1) returns its old value
# again, not kpatch_test_api_value_a() (31) from freed memory.  (Busybox
# insmod runs a failed init twice, see coming_finish; with the bug the
# second try finds the stale patch and fails with EEXIST.)  Should the
# patch stay (the bug), nothing may read the patches file or call
# kpatch_test_value_a() any more, so that case comes last and the cleanup
# leaves the patch alone.
#
# kpatch's GOING notifier runs before every other one: it takes the patch
# of such a module out before any other notifier (srcu, jump labels,
# tracepoints, ...) tears the module down.  kpatch_test_notify's
# notifier, of the default priority 0, calls kpatch_test_value_a() in
# each GOING notification of kpatch_test_api, and must see it return 1,
# whether it was registered after kpatch's or before it (kpatch.ko loaded
# after kpatch_test_notify: among notifiers of one priority the first
# registered runs first).
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

COMING_PARAMS=/sys/module/kpatch_test_coming/parameters
insmod_pid=
insmod_rc=

setup_modules kpatch kpatch_test_target kpatch_test_new
a=$(sym kpatch_test_value_a kpatch_test_target) || bail "setup: find kpatch_test_value_a"
a1=$(sym kpatch_test_value_a_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v1"

# coming_start: insmod kpatch_test_coming.ko in the background; its init
# waits for coming_finish
coming_start() {
	kallsyms_changed
	rm -f "$KP_TMP/insmod.out" "$KP_TMP/insmod.rc"
	log_command "insmod kpatch_test_coming.ko &"
	{
		insmod "$KPATCH_MODDIR/kpatch_test_coming.ko" >"$KP_TMP/insmod.out" 2>&1
		echo $? >"$KP_TMP/insmod.rc"
	} &
	insmod_pid=$!
}

# coming_finish GO: write GO to kpatch_test_coming's go (1: the init
# succeeds, 2: it fails) and wait for insmod; its exit status is then in
# insmod_rc, its output in KP_OUT.  Busybox insmod tries init_module()
# after a failed finit_module(), so a failed init runs twice: the second
# try waits for a go of its own.
coming_finish() {
	set_param kpatch_test_coming go "$1"
	_cf_i=0
	while [ ! -e "$KP_TMP/insmod.rc" ] && [ "$_cf_i" -lt "$KP_WAIT_TRIES" ]; do
		if modparam_is kpatch_test_coming loading 1 &&
		   modparam_is kpatch_test_coming go 0; then
			log_command "echo $1 > $COMING_PARAMS/go (insmod's second try)"
			echo "$1" >"$COMING_PARAMS/go" 2>/dev/null
		fi
		_cf_i=$((_cf_i + 1))
		nap
	done
	wait "$insmod_pid"
	insmod_pid=
	insmod_rc=$(cat "$KP_TMP/insmod.rc" 2>/dev/null || echo "?")
	KP_OUT=$(cat "$KP_TMP/insmod.out" 2>/dev/null)
	diag "insmod exited $insmod_rc${KP_OUT:+: $KP_OUT}"
	kallsyms_changed
}

# modstate_cleanup: let a waiting init fail before the cleanup runs
modstate_cleanup() {
	[ -z "$insmod_pid" ] || coming_finish 2
}
KP_CLEANUP_HOOK=modstate_cleanup

# coming: how kpatch says that an address lies in kpatch_test_coming
coming="is in module kpatch_test_coming, which is coming (its init has not finished)"

# init_fails [taint]: what kpatch logs when kpatch_test_api's init fails
# after kpatch_register(): the patch enabled and taken out as the module
# goes, twice (busybox's insmod tries init_module() after finit_module()
# failed); with "taint", the first enable of this kpatch.ko taints
init_fails() {
	[ "${1:-}" != taint ] ||
		echo "kpatch: tainting kernel with TAINT_LIVEPATCH"
	for _if in 1 2; do
		echo "kpatch: patch 'kpatch_test_api' enabled (1 function)"
		echo "kpatch: module kpatch_test_api is going away with its patch enabled (its init failed): taking the patch out"
		echo "kpatch: patch 'kpatch_test_api' removed"
	done
}

start_test "a module in its init"
coming_start
wait_until modparam_is kpatch_test_coming loading 1 ||
	bail "setup: kpatch_test_coming's init waits"
check_eq "precondition: kpatch_test_coming is coming" coming \
	"$(cat /sys/module/kpatch_test_coming/initstate 2>&1)"
cfn=$(sym kpatch_test_coming_fn kpatch_test_coming) ||
	bail "setup: find kpatch_test_coming_fn"

log_mark
expect_refused EBUSY patch cnew "$a" "$cfn"
check_transcript "kernel log: the new function is in kpatch_test_coming, which is coming" <<EOF
% echo 'patch cnew $a $cfn' > control
kpatch: cnew: new function $cfn (kpatch_test_coming_fn) $coming
EOF
check_eq "kpatch_test_value_a unchanged" "a=1 b=2" "$(target_values)"

log_mark
expect_refused EBUSY patch cold "$cfn" "$a1"
check_transcript "kernel log: the old function is in kpatch_test_coming, which is coming" <<EOF
% echo 'patch cold $cfn $a1' > control
kpatch: cold: old function $cfn (kpatch_test_coming_fn) $coming
EOF
check_eq "the init still waits" 1 "$(modparam kpatch_test_coming loading)"
check_no_splat

start_test "its init fails"
log_mark
coming_finish 2
check "insmod kpatch_test_coming fails" test "$insmod_rc" != 0
check_grep "insmod reports EINVAL" '[Ii]nvalid' "$KP_OUT"
check_not "kpatch_test_coming is gone" mod_loaded kpatch_test_coming
check_patches "nothing patched"
check_eq "kpatch_test_value_a unchanged" "a=1 b=2" "$(target_values)"
check_no_splat

start_test "after its init"
log_mark
coming_start
wait_until modparam_is kpatch_test_coming loading 1 ||
	bail "setup: kpatch_test_coming's init waits"
coming_finish 1
check_eq "insmod kpatch_test_coming succeeds" 0 "$insmod_rc"
check_eq "kpatch_test_coming is live" live \
	"$(cat /sys/module/kpatch_test_coming/initstate 2>&1)"
cfn=$(sym kpatch_test_coming_fn kpatch_test_coming) ||
	bail "setup: find kpatch_test_coming_fn"
expect_ok patch cnew "$a" "$cfn"
check_eq "kpatch_test_value_a runs kpatch_test_coming_fn" "a=41 b=2" "$(target_values)"
expect_ok unpatch cnew
check_eq "kpatch_test_value_a restored" "a=1 b=2" "$(target_values)"
expect_ok patch cold "$cfn" "$a1"
check_eq "kpatch_test_coming_fn runs kpatch_test_value_a_v1" 11 \
	"$(modparam kpatch_test_coming value)"
expect_ok unpatch cold
check_eq "kpatch_test_coming_fn restored" 41 "$(modparam kpatch_test_coming value)"
check "rmmod kpatch_test_coming succeeds" unload_mod kpatch_test_coming
check_no_splat

start_test "a patch module whose init fails after kpatch_register()"
log_mark
check_eq "precondition: original values" "a=1 b=2" "$(target_values)"
save_state
check_not "insmod kpatch_test_api fail_init=1 fails" \
	load_mod kpatch_test_api fail_init=1
check_grep "insmod reports EINVAL" '[Ii]nvalid' "$KP_OUT"
check_not "kpatch_test_api is not loaded" mod_loaded kpatch_test_api
msgs=$(log_since_mark)
check_transcript "kpatch_register() had enabled the patch, twice: busybox's insmod runs a failed init twice" <<EOF
% insmod kpatch_test_api.ko fail_init=1
$(init_fails)
EOF
check_grep "kpatch logs that the patch is removed" \
	"patch 'kpatch_test_api' removed" "$msgs"
if [ -e "$KP_SYSFS_PATCHES/kpatch_test_api" ]; then
	not_ok "the patch is gone from $KP_SYSFS_PATCHES"
	diag "kpatch kept the patch of the freed module: reading the patches" \
		"file or calling kpatch_test_value_a() would touch freed memory," \
		"so this script leaves the patch (and the modules it pins) alone"
	# unpatch_all, in the cleanup, reads nothing if this does not exist
	KP_PATCHES=$KP_TMP/no-patches-file
	check_no_splat
	exit 1
fi
ok "the patch is gone from $KP_SYSFS_PATCHES"
check_patches "the patches file is empty"
check_state_unchanged
check_eq "kpatch_test_value_a returns its old value" "a=1 b=2" "$(target_values)"
check_no_splat

start_test "the patch module loads again"
log_mark
check "insmod kpatch_test_api succeeds" load_mod kpatch_test_api
check_eq "kpatch_test_api_value_a runs" "a=31 b=2" "$(target_values)"
expect_ok unpatch kpatch_test_api
check_eq "original values" "a=1 b=2" "$(target_values)"
check "rmmod kpatch_test_api succeeds" unload_mod kpatch_test_api
check_no_splat

# going_first [taint]: insmod kpatch_test_api fail_init=1 while
# kpatch_test_notify watches it: in every GOING notification of the
# module, its notifier must see kpatch_test_value_a() return 1, the patch
# out already ("taint": kpatch.ko has patched nothing yet)
going_first() {
	log_mark
	check_eq "precondition: original values" "a=1 b=2" "$(target_values)"
	check_not "insmod kpatch_test_api fail_init=1 fails" \
		load_mod kpatch_test_api fail_init=1
	check_not "kpatch_test_api is not loaded" mod_loaded kpatch_test_api
	check_transcript "kpatch_register() had enabled the patch" <<EOF
% insmod kpatch_test_api.ko fail_init=1
$(init_fails "$@")
EOF
	seen=$(modparam kpatch_test_notify seen)
	check "the notifier ran in kpatch_test_api's GOING notification" \
		test -n "$seen"
	# one 1 for each notification it saw
	want=$(printf '%s\n' "$seen" |
		awk '{ for (i = 1; i <= NF; i++) printf "%s1", (i > 1 ? " " : ""); print "" }')
	check_eq "the notifier saw kpatch_test_value_a() return 1 (the patch out), not 31" \
		"$want" "$seen"
	check_patches "nothing patched"
	check_eq "kpatch_test_value_a returns its old value" "a=1 b=2" "$(target_values)"
	check_no_splat
}

start_test "kpatch's GOING notifier runs before one registered after it"
load_mod kpatch_test_notify watch=kpatch_test_api ||
	bail "setup: load kpatch_test_notify watch=kpatch_test_api"
going_first

start_test "kpatch's GOING notifier runs before one registered before it"
unload_mod kpatch_test_notify || bail "setup: rmmod kpatch_test_notify"
unload_kpatch || bail "setup: rmmod kpatch"
load_mod kpatch_test_notify watch=kpatch_test_api ||
	bail "setup: load kpatch_test_notify watch=kpatch_test_api"
load_kpatch || bail "setup: load kpatch.ko after kpatch_test_notify"
going_first taint
