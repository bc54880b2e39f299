#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-00-taint.sh - the first patch taints the kernel with
# TAINT_LIVEPATCH (bit 15, 32768, 'K').
#
# Taint flags stay set until reboot, so "K is clear before the first
# patch" can only be seen before any other script has patched anything:
# the name makes this script sort first.  If K is already set (the script
# ran later, or something else patched), that check is skipped and only
# the "set after a patch" checks remain.  Loading kpatch.ko or the
# (unsigned, out-of-tree) test modules sets other bits (4096, 8192) but
# must not set K; neither may a refused command.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

setup_modules kpatch kpatch_test_new
cmd=$(sym cmdline_proc_show vmlinux) || bail "setup: find cmdline_proc_show"
cmd1=$(sym kpatch_test_cmdline_v1 kpatch_test_new) || bail "setup: find kpatch_test_cmdline_v1"

start_test "before the first patch"
diag "tainted: $(taint_value)"
if taint_livepatch_set; then
	skip "K clear after loading kpatch.ko (K already set in this boot)"
	skip "K clear after a refused command (K already set in this boot)"
else
	ok "K clear after loading kpatch.ko"
	expect_errno EINVAL patch t0 "$cmd"
	check_not "K clear after a refused command" taint_livepatch_set
fi

start_test "after a patch"
log_mark
expect_ok patch t1 "$cmd" "$cmd1"
diag "tainted: $(taint_value)"
check_eq "tainted >= 16384" tainted \
	"$([ "$(cat /proc/sys/kernel/tainted)" -ge 16384 ] && echo tainted)"
check "bit 32768 (K) set" taint_livepatch_set
expect_ok unpatch t1
check "K still set after unpatch" taint_livepatch_set
check_transcript "the log says the kernel is tainted, once, at the first patch" <<EOF
% echo 'patch t1 $cmd $cmd1' > control
kpatch: tainting kernel with TAINT_LIVEPATCH
kpatch: patch 't1' enabled (1 function)
% echo 'unpatch t1' > control
kpatch: patch 't1' removed
EOF
check_no_splat
