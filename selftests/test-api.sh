#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-api.sh - patches registered by a patch module through
# kpatch_register(): kpatch_test_api redirects kpatch_test_target's
# kpatch_test_value_a() (1) to its own function (31), and with which=ab
# also kpatch_test_value_b() (2 -> 32).  The patch is named after the
# module, is listed and pinned like any other, is removed with
# "unpatch kpatch_test_api", and with replace=1 removes the other patches.
#
# A kpatch_register() that fails leaves the caller's structures as they
# were: with check_intact=1 kpatch_test_api registers a two-function
# patch whose second function is refused late, compares the struct
# kpatch_module and the funcs array with copies made before the call, and
# logs whether they are intact (see kpatch_test_api.c).  A patch module
# that made /sys/kernel/kpatch/patches/<its name> itself, as the 2014
# patch modules did (own_kobj=1), is refused with EEXIST, and the log says
# that the directory already exists.
#
# kpatch_register() refuses, with EINVAL and a log line, a struct
# kpatch_module that is const, __ro_after_init or on the stack of the
# module's init (kpatch keeps a pointer to it and writes to it while the
# patch is enabled), changes nothing and leaves the structures as they
# were.  It accepts a funcs array there (it copies the functions), and
# both from kmalloc() and vmalloc(): the patch applies and comes out
# like any other (mem=WHERE, see kpatch_test_api.c).
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

setup_modules kpatch kpatch_test_target kpatch_test_new
cmd=$(sym cmdline_proc_show vmlinux) || bail "setup: find cmdline_proc_show"
cmd1=$(sym kpatch_test_cmdline_v1 kpatch_test_new) || bail "setup: find kpatch_test_cmdline_v1"
a=$(sym kpatch_test_value_a kpatch_test_target) || bail "setup: find kpatch_test_value_a"
b=$(sym kpatch_test_value_b kpatch_test_target) || bail "setup: find kpatch_test_value_b"
a1=$(sym kpatch_test_value_a_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v1"
b1=$(sym kpatch_test_value_b_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_b_v1"
orig=$(cat /proc/cmdline)

# api_line FUNC STATE: patches file line of kpatch_test_api for a or b
api_line() {
	if [ "$1" = a ]; then
		_old=$a
	else
		_old=$b
	fi
	pline kpatch_test_api "kpatch_test_target:kpatch_test_value_$1" "$_old" \
		"kpatch_test_api:kpatch_test_api_value_$1" \
		"$(sym "kpatch_test_api_value_$1" kpatch_test_api)" "$2"
}

# load_api [PARAMS]: load kpatch_test_api, an ok/not ok line
load_api() {
	check "insmod kpatch_test_api${*:+ $*} succeeds" load_mod kpatch_test_api "$@"
}

start_test "register without replace"
log_mark
check_eq "precondition: original values" "a=1 b=2" "$(target_values)"
load_api
check_eq "kpatch_test_api_value_a runs" "a=31 b=2" "$(target_values)"
check_patches "listed under the module name" "$(api_line a active)"
check_sysfs_patches "sysfs directory kpatch_test_api" kpatch_test_api
check_not "rmmod kpatch_test_api refused while enabled" unload_mod kpatch_test_api
check_eq "patch still in effect" "a=31 b=2" "$(target_values)"
check_patches "patch still listed" "$(api_line a active)"
expect_ok unpatch kpatch_test_api
check_eq "original values" "a=1 b=2" "$(target_values)"
check_patches "patches file is empty"
check_sysfs_patches "sysfs directory removed"
check "rmmod kpatch_test_api succeeds after unpatch" unload_mod kpatch_test_api
check_transcript "the log says enabled, then removed" kpatch_test_api <<EOF
% insmod kpatch_test_api.ko
kpatch: tainting kernel with TAINT_LIVEPATCH
kpatch: patch 'kpatch_test_api' enabled (1 function)
% rmmod kpatch_test_api
% echo 'unpatch kpatch_test_api' > control
kpatch: patch 'kpatch_test_api' removed
% rmmod kpatch_test_api
EOF
check_no_splat

start_test "register with replace"
log_mark
expect_ok patch dbg1 "$cmd" "$cmd1"
expect_ok patch dbg2 "$b" "$b1"
check_eq "precondition: dbg1 in effect" "kpatch-test v1" "$(cat /proc/cmdline)"
check_eq "precondition: dbg2 in effect" "a=1 b=21" "$(target_values)"
load_api replace=1
check_eq "api patch in effect, dbg2 gone" "a=31 b=2" "$(target_values)"
check_eq "dbg1 gone" "$orig" "$(cat /proc/cmdline)"
check_patches "only the api patch is listed" "$(api_line a active)"
check_sysfs_patches "only kpatch_test_api in sysfs" kpatch_test_api
expect_ok unpatch kpatch_test_api
check "rmmod kpatch_test_api succeeds after unpatch" unload_mod kpatch_test_api
check_eq "original values" "a=1 b=2" "$(target_values)"
check_transcript "the log says the api patch enabled once dbg1 and dbg2 were removed" \
	kpatch_test_api <<EOF
% echo 'patch dbg1 $cmd $cmd1' > control
kpatch: patch 'dbg1' enabled (1 function)
% echo 'patch dbg2 $b $b1' > control
kpatch: patch 'dbg2' enabled (1 function)
% insmod kpatch_test_api.ko replace=1
kpatch: patch 'dbg2' removed
kpatch: patch 'dbg1' removed
kpatch: patch 'kpatch_test_api' enabled (1 function)
% echo 'unpatch kpatch_test_api' > control
kpatch: patch 'kpatch_test_api' removed
% rmmod kpatch_test_api
EOF
check_no_splat

start_test "register on top of a debugfs patch"
log_mark
expect_ok patch dbg3 "$a" "$a1"
check_eq "precondition: dbg3 in effect" "a=11 b=2" "$(target_values)"
load_api
check_eq "api patch wins" "a=31 b=2" "$(target_values)"
check_patches "dbg3 shadowed, api patch active" \
	"$(pline dbg3 kpatch_test_target:kpatch_test_value_a "$a" \
		kpatch_test_new:kpatch_test_value_a_v1 "$a1" shadowed)" \
	"$(api_line a active)"
expect_ok unpatch kpatch_test_api
check_eq "dbg3 uncovered" "a=11 b=2" "$(target_values)"
check "rmmod kpatch_test_api succeeds after unpatch" unload_mod kpatch_test_api
expect_ok unpatch dbg3
check_eq "original values" "a=1 b=2" "$(target_values)"
check_no_splat

start_test "register two functions"
log_mark
load_api which=ab
check_eq "both functions patched" "a=31 b=32" "$(target_values)"
check_patches_any_order "two lines under the module name" \
	"$(api_line a active)" "$(api_line b active)"
expect_ok unpatch kpatch_test_api
check_eq "both functions restored" "a=1 b=2" "$(target_values)"
check "rmmod kpatch_test_api succeeds after unpatch" unload_mod kpatch_test_api
check_no_splat

start_test "registration refused when the name is in use"
log_mark
expect_ok patch kpatch_test_api "$b" "$b1"
save_state
check_not "insmod kpatch_test_api fails" load_mod kpatch_test_api
# kpatch_register() returns EEXIST; the module loader of newer kernels (7.x
# here) hands an init's EEXIST to insmod as EBUSY, 6.1 and 6.12 pass it on.
check_grep "insmod reports EEXIST (or EBUSY)" '[Ee]xists|[Bb]usy' "$KP_OUT"
check_grep "kpatch logs the name in use" 'a patch with that name exists' \
	"$(log_since_mark)"
check_not "kpatch_test_api is not loaded" mod_loaded kpatch_test_api
check_state_unchanged
check_eq "only the debugfs patch in effect" "a=1 b=21" "$(target_values)"
expect_ok unpatch kpatch_test_api
# The refusal twice: when finit_module() fails, busybox's insmod tries
# init_module() with the same file, so a refused init runs twice.
check_transcript "the log says the name is in use" kpatch_test_api <<EOF
% echo 'patch kpatch_test_api $b $b1' > control
kpatch: patch 'kpatch_test_api' enabled (1 function)
% insmod kpatch_test_api.ko
kpatch: patch 'kpatch_test_api' refused: a patch with that name exists
kpatch_test_api: kpatch_register() failed: -17
kpatch: patch 'kpatch_test_api' refused: a patch with that name exists
kpatch_test_api: kpatch_register() failed: -17
% echo 'unpatch kpatch_test_api' > control
kpatch: patch 'kpatch_test_api' removed
EOF
check_no_splat

# intact_line ERR: an ERE for kpatch_test_api's line saying that the
# structures are intact after a kpatch_register() that returned ERR
intact_line() {
	printf 'kpatch_test_api: structures intact after failed register [(]err %s[)]' "$1"
}

# says_exists: does a kpatch line of $msgs say that patches/kpatch_test_api
# already exists?
says_exists() {
	printf '%s\n' "$msgs" | grep -F 'kpatch: ' |
		grep -F 'patches/kpatch_test_api' | grep -qF 'already exists'
}

start_test "a failed register leaves the structures intact: bad second function"
log_mark
save_state
check "insmod kpatch_test_api check_intact=1 succeeds (structures intact)" \
	load_mod kpatch_test_api check_intact=1
msgs=$(log_since_mark)
diag "kernel log:" "$msgs"
check_grep "kpatch refused the second function, after resolving the first" \
	'kpatch: kpatch_test_api: .*kpatch_test_value_b[+]0x1' \
	"$msgs"
check_grep "kpatch_register() returned EINVAL and left the structures intact" \
	"$(intact_line -22)" "$msgs"
check_patches "nothing patched"
check_eq "original values" "a=1 b=2" "$(target_values)"
if mod_loaded kpatch_test_api; then
	check "rmmod kpatch_test_api succeeds" unload_mod kpatch_test_api
fi
check_state_unchanged
check_transcript "the log names the refused function" kpatch_test_api <<EOF
% insmod kpatch_test_api.ko check_intact=1
kpatch_test_api: check_intact=1: second old function kpatch_test_value_b+0x1/0x_ [kpatch_test_target]
kpatch: kpatch_test_api: old function $(addr_add "$b" 1) is not the start of a function (kpatch_test_value_b+0x1)
kpatch_test_api: structures intact after failed register (err -22)
% rmmod kpatch_test_api
EOF
check_no_splat

start_test "a failed register leaves the structures intact: function on a stack"
log_mark
check "insmod kpatch_test_busy succeeds" load_mod kpatch_test_busy
busy=$(sym kpatch_test_busy_fn kpatch_test_busy) || bail "setup: find kpatch_test_busy_fn"
busy_pid=$(modparam kpatch_test_busy pid)
check "the kpatch_busy thread waits in kpatch_test_busy_fn" \
	wait_until modparam_is kpatch_test_busy state 1
save_state
check "insmod kpatch_test_api check_intact=1 intact_old=0x$busy succeeds (structures intact)" \
	load_mod kpatch_test_api check_intact=1 "intact_old=0x$busy"
msgs=$(log_since_mark)
diag "kernel log:" "$msgs"
check_grep "the stack check refused the patch" \
	"kpatch: patch 'kpatch_test_api' refused.*kpatch_test_busy_fn[+].*pid $busy_pid " \
	"$msgs"
check_grep "kpatch_register() returned EBUSY and left the structures intact" \
	"$(intact_line -16)" "$msgs"
check_patches "nothing patched"
check_eq "original values" "a=1 b=2" "$(target_values)"
if mod_loaded kpatch_test_api; then
	check "rmmod kpatch_test_api succeeds" unload_mod kpatch_test_api
fi
check_state_unchanged
check "rmmod kpatch_test_busy succeeds" unload_mod kpatch_test_busy
check_transcript "the log has the refusal, once per try" kpatch_test_api <<EOF
% insmod kpatch_test_busy.ko
% insmod kpatch_test_api.ko check_intact=1 intact_old=0x$busy
kpatch_test_api: check_intact=1: second old function kpatch_test_busy_fn+0x0/0x_ [kpatch_test_busy]
$(refused_lines patch kpatch_test_api "kpatch_test_busy_fn+0x_/0x_ [kpatch_test_busy] is on the stack of pid $busy_pid (kpatch_busy)")
kpatch_test_api: structures intact after failed register (err -16)
% rmmod kpatch_test_api
% rmmod kpatch_test_busy
EOF
check_no_splat

start_test "a 2014-style patch module that made its own sysfs directory"
log_mark
save_state
check_not "insmod kpatch_test_api own_kobj=1 fails" \
	load_mod kpatch_test_api own_kobj=1
# EEXIST, which 7.x's module loader hands to insmod as EBUSY (see above)
check_grep "insmod reports EEXIST (or EBUSY)" '[Ee]xists|[Bb]usy' "$KP_OUT"
msgs=$(log_since_mark)
diag "kernel log:" "$msgs"
check_grep "precondition: the module made patches/kpatch_test_api" \
	'kpatch_test_api: own_kobj=1: made its own directory patches/kpatch_test_api$' \
	"$msgs"
check_grep "kpatch_register() returned EEXIST" \
	'kpatch_test_api: kpatch_register[(][)] failed: -17$' "$msgs"
check "kpatch logs that patches/kpatch_test_api already exists" says_exists
check_not "kpatch_test_api is not loaded" mod_loaded kpatch_test_api
check_sysfs_patches "no directory left in $KP_SYSFS_PATCHES"
check_state_unchanged
check_eq "original values" "a=1 b=2" "$(target_values)"
load_api
check_eq "the module registers its patch without its own directory" \
	"a=31 b=2" "$(target_values)"
expect_ok unpatch kpatch_test_api
check "rmmod kpatch_test_api succeeds after unpatch" unload_mod kpatch_test_api
# The refusal twice, as above: busybox's insmod tries init_module() too.
check_transcript "the log says the directory exists, then enabled and removed" \
	kpatch_test_api <<EOF
% insmod kpatch_test_api.ko own_kobj=1
kpatch_test_api: own_kobj=1: made its own directory patches/kpatch_test_api
kpatch: patch 'kpatch_test_api' refused: /sys/kernel/kpatch/patches/kpatch_test_api already exists; kpatch makes it itself, the patch module must not
kpatch_test_api: kpatch_register() failed: -17
kpatch_test_api: own_kobj=1: made its own directory patches/kpatch_test_api
kpatch: patch 'kpatch_test_api' refused: /sys/kernel/kpatch/patches/kpatch_test_api already exists; kpatch makes it itself, the patch module must not
kpatch_test_api: kpatch_register() failed: -17
% insmod kpatch_test_api.ko
kpatch: patch 'kpatch_test_api' enabled (1 function)
% echo 'unpatch kpatch_test_api' > control
kpatch: patch 'kpatch_test_api' removed
% rmmod kpatch_test_api
EOF
check_no_splat

# ------------------------------------------ structures in other memory --
#
# kpatch keeps a pointer to the struct kpatch_module while the patch is
# enabled and writes to it, so it refuses one in memory that is or
# becomes read-only, or goes away with the init: EINVAL, one log line,
# nothing changed.  kpatch_test_api mem=WHERE passes it from there (see
# kpatch_test_api.c); should kpatch accept it, the module takes the patch
# out again before its init returns, so that no later access faults.
# The const case comes last and only once kpatch has refused the others:
# a kpatch that accepts it writes into the const structure inside
# kpatch_register() and faults there.  The funcs array kpatch only reads,
# while kpatch_register() runs: from any of these places, the patch
# applies, and the module's struct kpatch_module keeps pointing to where
# the array was.

WRITABLE_LINE="kpatch: kpatch_test_api: the kpatch_module is not in writable memory (const, __ro_after_init or on the stack)"
mem_accepted=

# mem_refused MEM WHAT: insmod kpatch_test_api mem=MEM, which passes WHAT
# (as the module logs it), fails with EINVAL and changes nothing
mem_refused() {
	start_test "kpatch_register() refuses $2"
	log_mark
	save_state
	check_not "insmod kpatch_test_api mem=$1 fails" \
		load_mod kpatch_test_api "mem=$1"
	check_grep "insmod reports EINVAL" '[Ii]nvalid argument' "$KP_OUT"
	msgs=$(log_since_mark)
	diag "kernel log:" "$msgs"
	if printf '%s\n' "$msgs" | grep -q "mem=$1: kpatch_register() accepted it"; then
		mem_accepted="$mem_accepted mem=$1"
	fi
	check_grep "kpatch_register() returned EINVAL and left the structures intact" \
		"$(intact_line -22)" "$msgs"
	check_patches "nothing patched"
	check_sysfs_patches "no sysfs directory"
	check_eq "original values" "a=1 b=2" "$(target_values)"
	check_state_unchanged
	# Twice, as above: busybox's insmod tries init_module() too.
	check_transcript "the log says why, once per try of insmod" kpatch_test_api <<EOT
% insmod kpatch_test_api.ko mem=$1
kpatch_test_api: mem=$1: $2
$WRITABLE_LINE
kpatch_test_api: structures intact after failed register (err -22)
kpatch_test_api: mem=$1: $2
$WRITABLE_LINE
kpatch_test_api: structures intact after failed register (err -22)
EOT
	if mod_loaded kpatch_test_api; then
		check "rmmod kpatch_test_api succeeds" unload_mod kpatch_test_api
	fi
	check_no_splat
}

mem_refused stack "a struct kpatch_module on the init's stack"
mem_refused ro_after_init "a struct kpatch_module in __ro_after_init"

# mem_ok MEM WHAT: kpatch_test_api mem=MEM registers its patch from WHAT,
# which works like one in module data
mem_ok() {
	start_test "kpatch_register() accepts $2"
	log_mark
	load_api "mem=$1"
	check_eq "kpatch_test_api_value_a runs" "a=31 b=2" "$(target_values)"
	check_patches "listed under the module name" "$(api_line a active)"
	check_sysfs_patches "sysfs directory kpatch_test_api" kpatch_test_api
	check_not "rmmod kpatch_test_api refused while enabled" \
		unload_mod kpatch_test_api
	expect_ok unpatch kpatch_test_api
	check_eq "original values" "a=1 b=2" "$(target_values)"
	check_sysfs_patches "sysfs directory removed"
	check "rmmod kpatch_test_api succeeds after unpatch" unload_mod kpatch_test_api
	check_transcript "the log says enabled, then removed" kpatch_test_api <<EOT
% insmod kpatch_test_api.ko mem=$1
kpatch_test_api: mem=$1: $2
kpatch: patch 'kpatch_test_api' enabled (1 function)
% rmmod kpatch_test_api
% echo 'unpatch kpatch_test_api' > control
kpatch: patch 'kpatch_test_api' removed
% rmmod kpatch_test_api
EOT
	check_no_splat
}

mem_ok stack_funcs "a funcs array on the init's stack"
mem_ok ro_after_init_funcs "a funcs array in __ro_after_init"
mem_ok const_funcs "a const funcs array"
mem_ok kmalloc "struct kpatch_module and funcs array from kmalloc()"
mem_ok vmalloc "struct kpatch_module and funcs array from vmalloc()"

# mem_const MEM WHAT: mem_refused for a const structure, once kpatch has
# refused the other cases; else a failure, without the insmod
mem_const() {
	if [ -z "$mem_accepted" ]; then
		mem_refused "$1" "$2"
		return
	fi
	start_test "kpatch_register() refuses $2"
	not_ok "insmod kpatch_test_api mem=$1 fails"
	diag "not tried: kpatch accepted$mem_accepted, so it would write into" \
		"the const structure inside kpatch_register() and fault"
}

mem_const const "a const struct kpatch_module"
