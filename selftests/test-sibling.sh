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
# rmmod work.  A patch whose removal leaves another patch sending calls
# into the module is not held up by the helper: that patch's removal
# checks the module later, and the module stays loaded until then.
#
# The check belongs to the update that removes the last patch sending
# calls into the module, whatever else pins it.  A patch that pins
# kpatch_test_sib_new but sends no call into it -- it patches a function
# of the module itself (kpatch_test_sib_other()), or has a hook there
# (kpatch_test_sib_hook(), the hook of the patch of a patch module,
# kpatch_test_patch_a, given its function and hook by address) -- takes
# its pin away with it, and its removal does not look for tasks that s1
# sent in: so unpatching s1 must fail with EBUSY while the thread is in
# the helper, although that patch still pins the module, and the module
# must stay pinned.  The same holds for one patch that has both pairs:
# s1's, and one whose old function is in kpatch_test_sib_new.
#
# Functions: kpatch_test_sib_fn() returns 1, the helper 2;
# kpatch_test_sib_other() (kpatch_test_sib_new) returns 41 and replaces
# kpatch_test_target's kpatch_test_value_b() (2) in the second case;
# the last cases' other new functions are kpatch_test_new's
# kpatch_test_value_a_v1() and kpatch_test_value_b_v1().
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

SIB=kpatch_test_sib
SIB_NEW=kpatch_test_sib_new
PM=kpatch_test_patch_a

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
	set_param "$SIB_NEW" hold 1
	set_param "$SIB" call 1
	check "the thread sleeps in kpatch_test_sib_helper" \
		wait_until modparam_is "$SIB_NEW" state 1
}

# leave_helper: hold=0 and wait until the thread completed the call
# enter_helper made
leave_helper() {
	set_param "$SIB_NEW" hold 0
	check "the thread left kpatch_test_sib_helper" \
		wait_until modparam_is "$SIB" call N
	check_eq "the thread completed the call" "$((calls_before + 1))" \
		"$(modparam "$SIB" calls)"
	check_eq "helper state: left" 2 "$(modparam "$SIB_NEW" state)"
}

# kpatch_param NAME VALUE: write a kpatch parameter
kpatch_param() {
	set_param kpatch "$1" "$2"
}

# refcount MOD: MOD's reference count in /proc/modules
refcount() {
	awk -v m="$1" '$1 == m { print $3 }' /proc/modules
}

# pinned MOD: MOD's reference count is above 0
pinned() {
	_pn=$(refcount "$1")
	diag "refcount of $1: $_pn"
	[ -n "$_pn" ] && [ "$_pn" -gt 0 ]
}

# is_patched NAME: is patch NAME in the patches file?
is_patched() {
	grep -q "^$1 " "$KP_PATCHES"
}

# check_refused_culprit VERB NAME [WORDS...]: the kernel log since the
# mark is the command and the one line saying that VERB 'NAME' was
# refused for the thread in the helper (retries 0: one try)
check_refused_culprit() {
	check_transcript "log: $1 '$2' refused, naming kpatch_test_sib_helper, pid $pid and kpatch_sib" <<EOF
% echo '$*' > control
kpatch: $1 '$2' refused: kpatch_test_sib_helper+0x_/0x_ [$SIB_NEW] is on the stack of pid $pid (kpatch_sib)
EOF
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

# last_pin NAME CMD...: with s1 and patch NAME (enabled by CMD, which
# pins kpatch_test_sib_new without a new function there) enabled and the
# thread in the helper, unpatch s1 must be refused; if it is not, unpatch
# NAME, which then drops the last pin, must be
last_pin() {
	_lp_name=$1
	shift
	expect_ok patch s1 "$fn" "$fn_new"
	check "$_lp_name enabled" "$@"
	enter_helper
	kpatch_param retries 0
	log_mark
	expect_refused EBUSY unpatch s1
	check_refused_culprit unpatch s1
	check_eq "the thread is still in the helper" 1 \
		"$(modparam "$SIB_NEW" state)"
	if ! is_patched s1; then
		log_mark
		kp unpatch "$_lp_name" || :
		diag "unpatch $_lp_name: $KP_RESULT"
		# Without the check the patch went: pin the module again,
		# so that nothing can unload it before the thread is out.
		if ! is_patched "$_lp_name"; then
			diag "nothing pins $SIB_NEW any more" \
				"(refcount $(refcount "$SIB_NEW")); an rmmod now" \
				"would free the code the thread sleeps in." \
				"Patching it again."
			"$@" || :
		fi
	fi
	check "$SIB_NEW stays pinned while the thread sleeps in its code" \
		pinned "$SIB_NEW"
	kpatch_param retries "$retries"
	leave_helper
	check_eq "the call ran the new code (the helper's 2)" 2 \
		"$(modparam "$SIB" result)"
	if is_patched s1; then
		expect_ok unpatch s1
	fi
	expect_ok unpatch "$_lp_name"
	check_patches "nothing patched"
	if mod_loaded "$PM"; then
		check "rmmod $PM" unload_mod "$PM"
	fi
	check_no_splat
}

# patch_s3: patch s3, whose old function is in kpatch_test_sib_new
patch_s3() {
	kp patch s3 "$other" "$a1"
}

# patch_pm: the patch module's patch, with a hook in kpatch_test_sib_new
# (b -> b1); a second call loads it anew
patch_pm() {
	if mod_loaded "$PM"; then
		unload_mod "$PM" || return 1
	fi
	load_mod "$PM" old="$b" new="$b1" pre-patch="$hook"
}

setup_modules kpatch kpatch_test_target kpatch_test_new "$SIB" "$SIB_NEW"
fn=$(sym kpatch_test_sib_fn "$SIB") || bail "setup: find kpatch_test_sib_fn"
fn_new=$(sym kpatch_test_sib_fn_new "$SIB_NEW") || bail "setup: find kpatch_test_sib_fn_new"
other=$(sym kpatch_test_sib_other "$SIB_NEW") || bail "setup: find kpatch_test_sib_other"
a=$(sym kpatch_test_value_a kpatch_test_target) || bail "setup: find kpatch_test_value_a"
a1=$(sym kpatch_test_value_a_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v1"
b=$(sym kpatch_test_value_b kpatch_test_target) || bail "setup: find kpatch_test_value_b"
b1=$(sym kpatch_test_value_b_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_b_v1"
pid=$(modparam "$SIB" pid)
retries=$(modparam kpatch retries)

start_test "the old function unpatched"
log_mark
check_eq "precondition: the thread is kpatch_sib" kpatch_sib \
	"$(cat "/proc/$pid/comm" 2>&1)"
set_param "$SIB" call 1
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
check_refused_culprit replace s2 "$a" "$a1"
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
set_param "$SIB" call 1
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
check_no_splat

hook=$(sym kpatch_test_sib_hook "$SIB_NEW") || bail "setup: find kpatch_test_sib_hook"

start_test "the last pin is an old function's"
log_mark
last_pin s3 patch_s3

start_test "the last pin is a hook's"
log_mark
last_pin "$PM" patch_pm

# One patch, two pairs: s1's, and one whose old function is in
# kpatch_test_sib_new.  The thread entered the module through the first
# pair, from kpatch_test_sib; that the module also holds an old function
# of the patch does not make its own code responsible for the thread.
start_test "one patch, which also patches the module"
log_mark
expect_ok patch s5 "$fn" "$fn_new" "$other" "$a1"
enter_helper
kpatch_param retries 0
log_mark
expect_refused EBUSY unpatch s5
check_refused_culprit unpatch s5
check "$SIB_NEW stays pinned while the thread sleeps in its code" \
	pinned "$SIB_NEW"
kpatch_param retries "$retries"
if ! is_patched s5; then
	diag "s5 was removed and nothing pins $SIB_NEW any more" \
		"(refcount $(refcount "$SIB_NEW")); patching it again."
	kp patch s5 "$fn" "$fn_new" "$other" "$a1" || :
fi
leave_helper
check_eq "the call ran the new code (the helper's 2)" 2 "$(modparam "$SIB" result)"
expect_ok unpatch s5
check_patches "nothing patched"
check_no_splat

start_test "the module unloads once nothing is in it"
check_eq "refcount of $SIB_NEW" 0 "$(refcount "$SIB_NEW")"
check "rmmod $SIB_NEW succeeds" unload_mod "$SIB_NEW"
check "rmmod $SIB succeeds" unload_mod "$SIB"
check_no_splat
