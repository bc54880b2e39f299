#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-fold.sh - a rule for patch authors, seen (Documentation.txt,
# "Writing a patch module"): the callers of an old function may rely on
# what the compiler learned about it.  kpatch_test_fold's
# kpatch_test_fold_quick() writes "quick\n" and returns 6; its caller
# kpatch_test_fold_show() copies as many bytes as it says.  Patched alone
# to kpatch_test_fold_slower() ("slower\n", 7), the caller built by GCC 16
# (the 7.x kernel's) still copies 6 bytes: it took the 6 from the callee's
# body, not from the call.  Built by GCC 12 it copies 7.  With the caller
# patched too, every build copies 7.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

setup_modules kpatch kpatch_test_fold
quick=$(sym kpatch_test_fold_quick kpatch_test_fold) || bail "setup: find kpatch_test_fold_quick"
slower=$(sym kpatch_test_fold_slower kpatch_test_fold) || bail "setup: find kpatch_test_fold_slower"
show=$(sym kpatch_test_fold_show kpatch_test_fold) || bail "setup: find kpatch_test_fold_show"
show_new=$(sym kpatch_test_fold_show_new kpatch_test_fold) ||
	bail "setup: find kpatch_test_fold_show_new"
gcc=$(modparam kpatch_test_fold gcc)
diag "kpatch_test_fold was built by GCC $gcc"

start_test "the callee patched alone"
log_mark
check_eq "the caller copies quick's 6 bytes" '6 quick\n' "$(modparam kpatch_test_fold show)"
expect_ok patch fold1 "$quick" "$slower"
if [ "$gcc" -ge 16 ]; then
	check_eq "the caller built by GCC $gcc still copies 6 bytes of the new text" \
		'6 slower' "$(modparam kpatch_test_fold show)"
else
	check_eq "the caller built by GCC $gcc copies what the new callee wrote" \
		'7 slower\n' "$(modparam kpatch_test_fold show)"
fi
expect_ok unpatch fold1
check_eq "unpatched: quick again" '6 quick\n' "$(modparam kpatch_test_fold show)"
check_no_splat

start_test "the caller patched too"
log_mark
expect_ok patch fold2 "$quick" "$slower" "$show" "$show_new"
check_eq "the new caller copies what the new callee wrote" \
	'7 slower\n' "$(modparam kpatch_test_fold show)"
expect_ok unpatch fold2
check_eq "unpatched: quick again" '6 quick\n' "$(modparam kpatch_test_fold show)"
check_no_splat
