#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# splat.sh - KP_SPLAT_RE, the extended regex of the kernel log lines that
# mean something went badly wrong.  The one definition for both sides: the
# host's test bed (harness/testbed.sh) fails a kernel's run on a console
# line matching it, and the guest's functions.sh fails a test script on a
# dmesg line matching it.  Sourced, POSIX sh (busybox ash in the guest).
#
# "WARNING:" only at the start of a message: boot-time mitigation notices
# contain "... : WARNING: ..." too.
KP_SPLAT_RE='(^|\] )WARNING:|BUG:|kernel BUG|Oops|Kernel panic|general protection fault'
KP_SPLAT_RE="$KP_SPLAT_RE|Unable to handle|RCU stall|detected stall|soft lockup"
KP_SPLAT_RE="$KP_SPLAT_RE|hard LOCKUP|UBSAN:|KASAN:|blocked for more than"
# The debug kernel's checkers (lockdep, PROVE_RCU, DEBUG_ATOMIC_SLEEP,
# DEBUG_LIST).  Most reports also start with "WARNING:" or "BUG:"; lockdep
# may switch itself off after its first report, and that must fail too.
KP_SPLAT_RE="$KP_SPLAT_RE|possible circular locking|possible recursive locking"
KP_SPLAT_RE="$KP_SPLAT_RE|inconsistent lock state|lock order detected|lock inversion"
KP_SPLAT_RE="$KP_SPLAT_RE|bad unlock balance|held lock freed|Invalid wait context"
KP_SPLAT_RE="$KP_SPLAT_RE|suspicious RCU usage|sleeping function called"
KP_SPLAT_RE="$KP_SPLAT_RE|scheduling while atomic|DEBUG_LOCKS_WARN_ON|non-static key"
KP_SPLAT_RE="$KP_SPLAT_RE|lockdep[ :]|turning off the locking correctness validator"
KP_SPLAT_RE="$KP_SPLAT_RE|Disabling lock debugging|list_(add|del) corruption"
# Exported: kpfuzz (test-fuzz.sh), which scans the kernel log itself,
# takes the pattern from its environment.
export KP_SPLAT_RE
