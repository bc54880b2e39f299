#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# lockdown.sh - kpatch in a kernel booted with lockdown=integrity.
#
# Not a test-*.sh: testbed.sh run boots each kernel a second time, with
# "lockdown=integrity kpatch.modsig=signed|unsigned kpatch.mode=lockdown",
# and the guest init runs only this script.  kpatch.modsig says whether the
# host signed the modules with the kernel's own key (the debug kernel,
# whose build tree has it) or could not (Debian's kernels).
#
# Signed: kpatch.ko and the test modules load; the control file (0200,
# root) cannot be opened for writing, because debugfs refuses writable
# files under lockdown (EPERM), so a valid patch command changes nothing;
# the patches file (0400, root) stays readable and empty; /proc/cmdline is
# not patched; nothing under /sys/kernel/kpatch is writable by others.
# Unsigned: Debian's kernels require signed modules under lockdown, so
# insmod kpatch.ko fails with EPERM and the kernel log says why.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

LOCKDOWN=/sys/kernel/security/lockdown
LD_UNSIGNED_RE='Lockdown: insmod: unsigned module loading is restricted'
LD_UNSIGNED_RE="$LD_UNSIGNED_RE|Loading of unsigned module is rejected"

modsig=
read -r ld_cmdline </proc/cmdline
for ld_arg in $ld_cmdline; do
	case $ld_arg in
	kpatch.modsig=*) modsig=${ld_arg#kpatch.modsig=} ;;
	esac
done

# has_signature FILE: FILE ends with a module signature
has_signature() {
	[ "$(tail -c 28 "$1")" = "~Module signature appended~" ]
}

# readable FILE: FILE can be read
readable() {
	cat "$1" >/dev/null
}

# mode_owner FILE: "MODE UID GID" of FILE ("-r-------- 0 0")
mode_owner() {
	stat -c '%A %u %g' "$1" 2>&1
}

# others_writable DIR: the files and directories under DIR that others
# may write to or that root does not own, one per line
others_writable() {
	find "$1" ! -type l | while IFS= read -r _ow_f; do
		stat -c '%A %u %n' "$_ow_f" 2>&1
	done | awk 'substr($1, 9, 1) != "-" || $2 != 0'
}

start_test "lockdown"
if [ ! -e "$LOCKDOWN" ]; then
	mount -t securityfs securityfs /sys/kernel/security 2>/dev/null
fi
check_grep "$LOCKDOWN shows [integrity]" '\[integrity\]' "$(cat "$LOCKDOWN" 2>&1)"
orig=$(cat /proc/cmdline)

case $modsig in
signed)
	start_test "signed modules"
	log_mark
	check "kpatch.ko carries a signature" has_signature "$KPATCH_KO"
	check "insmod kpatch.ko succeeds" load_kpatch
	check "insmod kpatch_test_target succeeds" load_mod kpatch_test_target
	check "insmod kpatch_test_new succeeds" load_mod kpatch_test_new
	check_eq "no unsigned-module taint (E, 8192)" 0 \
		"$(($(taint_value) & 8192))"
	check_no_splat

	start_test "file modes"
	check_eq "control: mode 0200, owner root" "--w------- 0 0" \
		"$(mode_owner "$KP_CONTROL")"
	check_eq "patches: mode 0400, owner root" "-r-------- 0 0" \
		"$(mode_owner "$KP_PATCHES")"
	check "$KP_SYSFS_PATCHES exists" test -d "$KP_SYSFS_PATCHES"
	check_eq "nothing under $KP_SYSFS writable by others or not root's" "" \
		"$(others_writable "$KP_SYSFS")"

	start_test "control file"
	log_mark
	cmd=$(sym cmdline_proc_show vmlinux) || bail "setup: find cmdline_proc_show"
	cmd1=$(sym kpatch_test_cmdline_v1 kpatch_test_new) ||
		bail "setup: find kpatch_test_cmdline_v1"
	save_state
	kp patch ld1 "$cmd" "$cmd1"
	check_eq "patch ld1: the control file cannot be opened (EPERM)" \
		"open: EPERM" "$KP_RESULT"
	kp unpatch ld1
	check_eq "unpatch ld1: the control file cannot be opened (EPERM)" \
		"open: EPERM" "$KP_RESULT"
	check_state_unchanged
	check "the patches file is readable" readable "$KP_PATCHES"
	check_patches "the patches file is empty"
	check_sysfs_patches "no patch directories in sysfs"
	check_eq "/proc/cmdline is not patched" "$orig" "$(cat /proc/cmdline)"
	check_grep "the kernel log names the lockdown" \
		'Lockdown: kpctl: debugfs access is restricted' "$(log_since_mark)"
	check_no_splat

	start_test "unload"
	check "rmmod kpatch_test_new succeeds" unload_mod kpatch_test_new
	check "rmmod kpatch_test_target succeeds" unload_mod kpatch_test_target
	check "rmmod kpatch succeeds" unload_kpatch
	;;
unsigned)
	start_test "unsigned modules"
	log_mark
	check_not "precondition: kpatch.ko carries no signature" \
		has_signature "$KPATCH_KO"
	check_not "insmod kpatch.ko is refused" load_kpatch
	check_grep "insmod fails with EPERM" 'Operation not permitted' "$KP_OUT"
	check_not "kpatch is not in /proc/modules" mod_loaded kpatch
	check_not "no control file" test -e "$KP_CONTROL"
	check_grep "the kernel log says why (lockdown, unsigned module)" \
		"$LD_UNSIGNED_RE" "$(log_since_mark)"
	check_not "insmod kpatch_test_target is refused too" \
		load_mod kpatch_test_target
	check_eq "/proc/cmdline is unchanged" "$orig" "$(cat /proc/cmdline)"
	check_no_splat
	;;
*)
	not_ok "kpatch.modsig=signed|unsigned on the kernel command line"
	diag "/proc/cmdline: $orig"
	;;
esac
