#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-fuzz.sh - hostile input on the control file.  kpfuzz (kpfuzz.c)
# writes thousands of commands from a fixed seed (how many: below):
# random bytes, token soups, over-long writes, truncated and mutated
# valid commands, boundary addresses, names at and past the length limit
# and with bad bytes, many pairs, the words that once gave a patch hooks
# (HOOK=ADDR with kpatch_test_shadow's hooks, and words like them: now no
# address, wherever they stand), and "check", the verb of the dry run that
# is gone.  Every result must be OK or a documented errno, and the one
# Documentation.txt's grammar gives; a refusal must change nothing
# (patches file, sysfs, ftrace's enabled functions, module reference
# counts); an accepted command must be in effect as the grammar says, and
# is undone; no command may call a hook.  Commands written without
# CAP_SYS_MODULE must fail with EPERM, writes from unreadable buffers with
# EFAULT (write(2)'s errno for them, which Documentation.txt does not
# list).
#
# Then kpatch_test_going is unloaded; its exit function sleeps, and while
# the module is going, and after it is gone, commands naming its functions
# as old or new functions must be refused with EINVAL and change nothing.
#
# The kernel log overflows its ring buffer during the run (kpatch logs
# every refusal); kpfuzz reads /dev/kmsg as it goes and checks for splats
# itself.  KPFUZZ_SEED and KPFUZZ_CASES override the seed and the number
# of cases; a failing case is printed with the kpfuzz command that
# replays it.
#
# The cases are 10,000 on a kernel with KASAN (the test bed's debug
# kernel), which catches a bad access the moment it happens, and the
# first 2,500 of the same seed on the others: the parser is the same code
# on every kernel, and what differs between kernels (the updates of the
# accepted commands) every other script runs on each.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

KPFUZZ=${KPFUZZ:-kpfuzz}
seed=${KPFUZZ_SEED:-20261203}
if grep -q ' kasan_report$' /proc/kallsyms; then
	cases=${KPFUZZ_CASES:-10000}
else
	cases=${KPFUZZ_CASES:-2500}
fi
going=kpatch_test_going

command -v "$KPFUZZ" >/dev/null 2>&1 || bail "setup: kpfuzz helper exists"
setup_modules kpatch kpatch_test_target kpatch_test_new kpatch_test_shadow
load_mod "$going" exit_delay_ms=3000 || bail "setup: load $going.ko"

# kpatch logs every refusal at KERN_ERR; printed on the emulated serial
# console, that is most of the run's time.  Only KERN_EMERG and KERN_ALERT
# (panics, oopses) reach the console meanwhile; kpfuzz scans the whole
# log for splats itself.
console_level=$(cut -f1 /proc/sys/kernel/printk)
restore_console_level() {
	echo "$console_level" >/proc/sys/kernel/printk
}
KP_CLEANUP_HOOK=restore_console_level

start_test "kpfuzz"
log_mark
diag "% $KPFUZZ --seed $seed --cases $cases --min-cases $cases --going $going"
echo 2 >/proc/sys/kernel/printk
"$KPFUZZ" --seed "$seed" --cases "$cases" --min-cases "$cases" \
	--going "$going" --verdicts "$KP_TMP/verdicts"
rc=$?
restore_console_level
kallsyms_changed
nverdicts=0
while IFS= read -r line; do
	case $line in
	"ok "*) ok "${line#ok }" ;;
	"not ok "*) not_ok "${line#not ok }" ;;
	*) continue ;;
	esac
	nverdicts=$((nverdicts + 1))
done <"$KP_TMP/verdicts"
check "kpfuzz gave its verdicts" test "$nverdicts" -ge 20
check_eq "kpfuzz exit status" 0 "$rc"

start_test "after kpfuzz"
log_mark
check_not "$going is unloaded" mod_loaded "$going"
check_patches "no patch left"
check_sysfs_patches "no patch in sysfs"
check_eq "original values" "a=1 b=2" "$(target_values)"
check_no_splat
