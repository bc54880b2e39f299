#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-sibling.sh - the stack check covers the whole text of a module
# when an update drops kpatch's last pin on it.  kpatch_test_sib_fn()
# (kpatch_test_sib) is patched with kpatch_test_sib_fn_new()
# (kpatch_test_sib_new), whose only instruction is a sibling call, "jmp
# kpatch_test_sib_helper": the kthread "kpatch_sib" sleeps in the helper
# with no frame of any patched function on its stack.  Unpatching, and a
# replace that would remove the patch, must then fail with EBUSY, naming
# the helper and the thread, since they would let kpatch_test_sib_new be
# unloaded under the thread; rmmod kpatch_test_sib_new is refused.  Once
# the thread has left the helper (having run the new code), unpatch and
# rmmod work.  A patch whose removal leaves the module pinned by another
# patch is not held up by the helper: the rule is about the module's
# code staying loaded, not about the helper being part of a patch.
#
# Functions: kpatch_test_sib_fn() returns 1, the helper 2;
# kpatch_test_sib_other() (kpatch_test_sib_new) returns 41 and replaces
# kpatch_test_target's kpatch_test_value_b() (2) in the second case.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

SIB=kpatch_test_sib
SIB_NEW=kpatch_test_sib_new

# param MOD NAME VALUE: write a module parameter
param() {
	diag "% echo $3 > /sys/module/$1/parameters/$2"
	echo "$3" >"/sys/module/$1/parameters/$2"
}

# release: let the thread out of the helper and wait until it is back in
# its main loop (also the cleanup hook: kpatch_test_sib_new must not be
# unloaded under the thread)
release() {
	if mod_loaded "$SIB_NEW"; then
		echo 0 >"/sys/module/$SIB_NEW/parameters/hold" 2>/dev/null || :
	fi
	if mod_loaded "$SIB"; then
		wait_until modparam_is "$SIB" call N
	fi
}
KP_CLEANUP_HOOK=release

# enter_helper: hold=1, make the thread call kpatch_test_sib_fn() and wait
# until it sleeps in kpatch_test_sib_helper()
enter_helper() {
	calls_before=$(modparam "$SIB" calls)
	param "$SIB_NEW" hold 1
	param "$SIB" call 1
	check "the thread sleeps in kpatch_test_sib_helper" \
		wait_until modparam_is "$SIB_NEW" state 1
}

# leave_helper: hold=0 and wait until the thread completed the call
# enter_helper made
leave_helper() {
	param "$SIB_NEW" hold 0
	check "the thread left kpatch_test_sib_helper" \
		wait_until modparam_is "$SIB" call N
	check_eq "the thread completed the call" "$((calls_before + 1))" \
		"$(modparam "$SIB" calls)"
	check_eq "helper state: left" 2 "$(modparam "$SIB_NEW" state)"
}

# kpatch_param NAME VALUE: write a kpatch parameter
kpatch_param() {
	param kpatch "$1" "$2"
}

# is_patched NAME: is patch NAME in the patches file?
is_patched() {
	grep -q "^$1 " "$KP_PATCHES"
}

# check_refused_culprit VERB NAME: the kernel log since the mark says
# that VERB 'NAME' was refused for the thread in the helper
check_refused_culprit() {
	check_grep "log: $1 '$2' refused, naming kpatch_test_sib_helper, pid $pid and kpatch_sib" \
		"$1 '$2' refused.*kpatch_test_sib_helper[+]0x[0-9a-f]+/0x[0-9a-f]+ \\[$SIB_NEW\\].*pid $pid \\(kpatch_sib\\)" \
		"$(log_since_mark)"
}

# try_rmmod_sib_new: rmmod kpatch_test_sib_new must be refused.  Only
# tried while a patch still pins it (patch NAME): an rmmod that went
# through would free the code the thread sleeps in.
try_rmmod_sib_new() {
	if ! is_patched "$1"; then
		not_ok "rmmod $SIB_NEW refused"
		diag "not tried: patch $1 is gone, nothing would stop the rmmod" \
			"and the thread would wake up in freed memory"
		return 1
	fi
	check_not "rmmod $SIB_NEW refused" unload_mod "$SIB_NEW"
}

setup_modules kpatch kpatch_test_target kpatch_test_new "$SIB" "$SIB_NEW"
fn=$(sym kpatch_test_sib_fn "$SIB") || bail "setup: find kpatch_test_sib_fn"
fn_new=$(sym kpatch_test_sib_fn_new "$SIB_NEW") || bail "setup: find kpatch_test_sib_fn_new"
other=$(sym kpatch_test_sib_other "$SIB_NEW") || bail "setup: find kpatch_test_sib_other"
a=$(sym kpatch_test_value_a kpatch_test_target) || bail "setup: find kpatch_test_value_a"
a1=$(sym kpatch_test_value_a_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v1"
b=$(sym kpatch_test_value_b kpatch_test_target) || bail "setup: find kpatch_test_value_b"
pid=$(modparam "$SIB" pid)
retries=$(modparam kpatch retries)

start_test "the old function unpatched"
log_mark
check_eq "precondition: the thread is kpatch_sib" kpatch_sib \
	"$(cat "/proc/$pid/comm" 2>&1)"
param "$SIB" call 1
check "the thread called kpatch_test_sib_fn" wait_until modparam_is "$SIB" call N
check_eq "kpatch_test_sib_fn returned 1" 1 "$(modparam "$SIB" result)"
check_eq "the helper never ran" 0 "$(modparam "$SIB_NEW" state)"
check_no_splat

start_test "a task in a helper reached by a sibling call"
log_mark
expect_ok patch s1 "$fn" "$fn_new"
check_patches "s1 active" \
	"$(pline s1 "$SIB:kpatch_test_sib_fn" "$fn" \
		"$SIB_NEW:kpatch_test_sib_fn_new" "$fn_new" active)"
enter_helper
# The helper sleeps in schedule_timeout(): every try would fail the same.
kpatch_param retries 0
log_mark
expect_refused EBUSY unpatch s1
check_refused_culprit unpatch s1
log_mark
expect_refused EBUSY replace s2 "$a" "$a1"
check_refused_culprit replace s2
check_eq "kpatch_test_value_a not replaced" "a=1 b=2" "$(target_values)"
kpatch_param retries "$retries"
# On a kpatch without the check both went through: put s1 back, so that
# kpatch_test_sib_new stays pinned until the thread is out.
if ! is_patched s1; then
	diag "s1 was removed; patching it again"
	kp unpatch s2 || :
	kp patch s1 "$fn" "$fn_new" || :
fi
try_rmmod_sib_new s1
check "$SIB_NEW still loaded" mod_loaded "$SIB_NEW"
check_eq "the thread is still in the helper" 1 "$(modparam "$SIB_NEW" state)"
leave_helper
check_eq "the call ran the new code (the helper's 2)" 2 "$(modparam "$SIB" result)"
expect_ok unpatch s1
check_patches "nothing patched"
param "$SIB" call 1
check "the thread calls kpatch_test_sib_fn again" \
	wait_until modparam_is "$SIB" call N
check_eq "after unpatch kpatch_test_sib_fn returns 1 again" 1 \
	"$(modparam "$SIB" result)"
check "rmmod $SIB_NEW succeeds" unload_mod "$SIB_NEW"
check_no_splat

start_test "another patch still pins the module"
log_mark
load_mod "$SIB_NEW" || bail "setup: load $SIB_NEW.ko again"
fn_new=$(sym kpatch_test_sib_fn_new "$SIB_NEW") || bail "setup: find kpatch_test_sib_fn_new"
other=$(sym kpatch_test_sib_other "$SIB_NEW") || bail "setup: find kpatch_test_sib_other"
expect_ok patch s1 "$fn" "$fn_new"
expect_ok patch s3 "$b" "$other"
check_eq "s3: b runs kpatch_test_sib_other" "a=1 b=41" "$(target_values)"
enter_helper
kpatch_param retries 0
log_mark
# kpatch_test_sib_new stays pinned by s3, so its code stays where the
# thread sleeps; no frame of s1's functions is on a stack.
expect_ok unpatch s1
check_eq "the thread is still in the helper" 1 "$(modparam "$SIB_NEW" state)"
log_mark
expect_refused EBUSY unpatch s3
check_refused_culprit unpatch s3
check_eq "s3 still in effect" "a=1 b=41" "$(target_values)"
kpatch_param retries "$retries"
if ! is_patched s3; then
	diag "s3 was removed; patching it again"
	kp patch s3 "$b" "$other" || :
fi
try_rmmod_sib_new s3
leave_helper
check_eq "the call ran the new code (the helper's 2)" 2 "$(modparam "$SIB" result)"
expect_ok unpatch s3
check_eq "b restored" "a=1 b=2" "$(target_values)"
check "rmmod $SIB_NEW succeeds" unload_mod "$SIB_NEW"
check "rmmod $SIB succeeds" unload_mod "$SIB"
check_no_splat
