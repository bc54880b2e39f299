#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-errors.sh - the control file's parser and checks.  Every malformed
# or invalid command fails with the documented errno (EINVAL, EEXIST,
# ENOENT) and changes nothing: not the patches file, not sysfs, not
# ftrace's enabled functions, not the module reference counts.  The edge
# cases that must be accepted are accepted: a 63-character name, every
# allowed name character, tabs, a trailing newline, "0x" prefixes, a
# command of exactly 4096 bytes.
#
# kpatch's own functions are refused as OLD and as NEW (as a hook:
# test-hooks.sh, hooks come from kpatch_register()).  The words that once
# gave a patch hooks (HOOK=ADDR, as "pre-patch=ADDR") and the dry run
# ("check patch ...") are gone: such a word is now one more bad address
# (not a pair of hexadecimal addresses, or an odd number of them), and
# "check" an unknown command; no hook runs.
#
# A patch "base" stays enabled throughout, so "unchanged" covers a
# non-empty state, and a refused command must not disturb it.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

setup_modules kpatch kpatch_test_target kpatch_test_new kpatch_test_shadow
cmd=$(sym cmdline_proc_show vmlinux) || bail "setup: find cmdline_proc_show"
a=$(sym kpatch_test_value_a kpatch_test_target) || bail "setup: find kpatch_test_value_a"
b=$(sym kpatch_test_value_b kpatch_test_target) || bail "setup: find kpatch_test_value_b"
a1=$(sym kpatch_test_value_a_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v1"
b1=$(sym kpatch_test_value_b_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_b_v1"
b2=$(sym kpatch_test_value_b_v2 kpatch_test_new) || bail "setup: find kpatch_test_value_b_v2"
notrace=$(sym kpatch_test_value_notrace kpatch_test_target) ||
	bail "setup: find kpatch_test_value_notrace"
kdata=$(sym init_task vmlinux) || bail "setup: find init_task"
# The kernel's data and read-only data are told by address, not by the
# kallsyms type letter: 6.1 and 6.12 give vmlinux data its section's letter,
# 7.x does not (init_task shows as T there).
sdata=$(sym _sdata vmlinux) || bail "setup: find _sdata"
edata=$(sym _edata vmlinux) || bail "setup: find _edata"
srodata=$(sym __start_rodata vmlinux) || bail "setup: find __start_rodata"
erodata=$(sym __end_rodata vmlinux) || bail "setup: find __end_rodata"
# in_range ADDR LO HI: LO <= ADDR < HI (all 16 hex digits)
in_range() {
	[ "$(printf '%s\n' "$2" "$1" | sort | head -n 1)" = "$2" ] &&
		[ "$(printf '%s\n' "$1" "$3" | sort | head -n 1)" = "$1" ] &&
		[ "$1" != "$3" ]
}
# Some read-only data object of the kernel with a unique name, preferably
# not a linker-made marker (__start_..., __stop_...).
rodata_name=$(awk -v lo="$srodata" -v hi="$erodata" '
	NF == 3 && ($1 "") >= (lo "") && ($1 "") < (hi "") { n[$3]++ }
	END {
		for (s in n) if (n[s] == 1 && s !~ /^__/) { print s; exit }
		for (s in n) if (n[s] == 1) { print s; exit }
	}' "$(kallsyms)")
krodata=$(sym "$rodata_name" vmlinux) || bail "setup: find kernel read-only data"
tdata=$(sym kpatch_test_target_data kpatch_test_target) ||
	bail "setup: find kpatch_test_target_data"
ndata=$(sym kpatch_test_new_data kpatch_test_new) || bail "setup: find kpatch_test_new_data"
# a function that once was a hook, in a HOOK=ADDR word
hnop=$(sym kpatch_test_shadow_hook_nop kpatch_test_shadow) ||
	bail "setup: find kpatch_test_shadow_hook_nop"

# blanks N: N spaces
blanks() {
	head -c "$1" /dev/zero | tr '\0' ' '
}

# refused DESC ERRNO WHY CMD...: a test case: CMD fails with ERRNO and
# changes nothing, and the log after it is kpatch's one line, WHY
refused() {
	refused_raw "$1" "$2" "$3" "$(shift 3; printf '%s' "$*")"
}

# refused_raw DESC ERRNO WHY STRING: the same for an exact STRING
refused_raw() {
	start_test "$1"
	log_mark
	expect_refused_raw "$2" "$4"
	check_transcript "the log says why" <<EOF
% echo '$(kp_logged "$4")' > control
kpatch: $3
EOF
}

base_line=$(pline base kpatch_test_target:kpatch_test_value_a "$a" \
	kpatch_test_new:kpatch_test_value_a_v1 "$a1" active)
b1_line() {
	pline "$1" kpatch_test_target:kpatch_test_value_b "$b" \
		kpatch_test_new:kpatch_test_value_b_v1 "$b1" active
}

start_test "setup"
log_mark
expect_ok patch base "$a" "$a1" || bail "setup: patch base"
check_eq "base in effect" "a=11 b=2" "$(target_values)"

start_test "preconditions"
check "init_task is kernel data" in_range "$kdata" "$sdata" "$edata"
check "$rodata_name is kernel read-only data" \
	in_range "$krodata" "$srodata" "$erodata"
check_grep "kpatch_test_target_data is module data" '^[dDbB]$' \
	"$(sym_type kpatch_test_target_data kpatch_test_target)"
check_grep "kpatch_test_new_data is module data" '^[dDbB]$' \
	"$(sym_type kpatch_test_new_data kpatch_test_new)"
filters=$(cat "$TRACEFS/available_filter_functions" 2>&1)
check_grep "kpatch_test_value_b is traceable" '^kpatch_test_value_b ' "$filters"
check_no_grep "kpatch_test_value_notrace is not traceable" \
	'^kpatch_test_value_notrace ' "$filters"
unset filters

# ---------------------------------------------------------------- EINVAL
tab=$(printf '\t')
nl='
'
name63=$(printf '%063d' 0 | tr 0 n)
name64=${name63}n

# What kpatch says about a refused command, the same for many cases
unknown_cmd="(expected patch, replace or unpatch)"
bad_name="the name must be 1 to 63 characters of A-Z a-z 0-9 _ -"
pairs="patch: expected NAME and OLD NEW address pairs"
not_hex="is not a pair of hexadecimal addresses"

refused_raw "empty command" EINVAL "empty command" ""
refused_raw "newline only" EINVAL "empty command" "$nl"
refused_raw "blanks only" EINVAL "empty command" "  $tab $nl"
refused "unknown verb" EINVAL "unknown command 'frobnicate' $unknown_cmd" frobnicate e1 "$b" "$b1"
refused "verb in capitals" EINVAL "unknown command 'PATCH' $unknown_cmd" PATCH e1 "$b" "$b1"
refused "check, the dry run that is gone" EINVAL "unknown command 'check' $unknown_cmd" \
	check patch e1 "$b" "$b1"
refused "check alone" EINVAL "unknown command 'check' $unknown_cmd" check
refused "patch without a name" EINVAL "patch: $bad_name" patch
refused "replace without a name" EINVAL "replace: $bad_name" replace
refused "unpatch without a name" EINVAL "unpatch: $bad_name" unpatch
refused "name of 64 characters" EINVAL "patch: $bad_name" patch "$name64" "$b" "$b1"
refused "name with a dot" EINVAL "patch: $bad_name" patch bad.name "$b" "$b1"
refused "name with a slash" EINVAL "patch: $bad_name" patch bad/name "$b" "$b1"
refused "name with a colon" EINVAL "patch: $bad_name" patch bad:name "$b" "$b1"
refused "name with a non-ASCII byte" EINVAL "patch: $bad_name" patch "bad$(printf '\351')name" "$b" "$b1"
refused "unpatch with a bad name" EINVAL "unpatch: $bad_name" unpatch bad.name
refused "no addresses" EINVAL "$pairs" patch e1
refused "one address" EINVAL "$pairs" patch e1 "$b"
refused "three addresses" EINVAL "$pairs" patch e1 "$b" "$b1" "$cmd"
refused "OLD not hex" EINVAL "patch e1: 'xyz $b1' $not_hex" patch e1 xyz "$b1"
refused "OLD is 0x alone" EINVAL "patch e1: '0x $b1' $not_hex" patch e1 0x "$b1"
refused "OLD with trailing garbage" EINVAL "patch e1: '${b}g $b1' $not_hex" patch e1 "${b}g" "$b1"
refused "OLD with 0x twice" EINVAL "patch e1: '0x0x$b $b1' $not_hex" patch e1 "0x0x$b" "$b1"
refused "OLD negative" EINVAL "patch e1: '-1 $b1' $not_hex" patch e1 -1 "$b1"
refused "OLD with a plus sign" EINVAL "patch e1: '+$b $b1' $not_hex" patch e1 "+$b" "$b1"
refused "OLD of 17 digits (overflow)" EINVAL "patch e1: '1$b $b1' $not_hex" patch e1 "1$b" "$b1"
refused "NEW not hex" EINVAL "patch e1: '$b zz' $not_hex" patch e1 "$b" zz

# HOOK=ADDR words: no hook any more, only words that are no address
refused "a hook word after the pairs (odd count)" EINVAL "$pairs" \
	patch e1 "$b" "$b1" "pre-patch=$hnop"
refused "a hook word before the pairs (odd count)" EINVAL "$pairs" \
	patch e1 "post-unpatch=$hnop" "$b" "$b1"
refused "a hook word as NEW" EINVAL "patch e1: '$b pre-patch=$hnop' $not_hex" \
	patch e1 "$b" "pre-patch=$hnop"
refused "two hook words and no pair" EINVAL \
	"patch e1: 'pre-patch=$hnop post-unpatch=$hnop' $not_hex" \
	patch e1 "pre-patch=$hnop" "post-unpatch=$hnop"
refused "two hook words after a pair, in replace" EINVAL \
	"replace e1: 'stop-patch=$hnop undo-patch=$hnop' $not_hex" \
	replace e1 "$b" "$b1" "stop-patch=$hnop" "undo-patch=$hnop"
refused "a hook word on unpatch" EINVAL "unpatch: expected exactly one NAME" \
	unpatch base "pre-unpatch=$hnop"
start_test "hook words: no hook ran"
check_eq "kpatch_test_shadow_hook_nop never called" \
	"pre-patch=0 post-unpatch=0 nop=0 veto=0" "$(modparam kpatch_test_shadow hooks)"
refused "OLD zero" EINVAL "e1: old function 0 is not a kernel function" patch e1 0 "$b1"
refused "OLD not a function start (+1)" EINVAL \
	"e1: old function $(addr_add "$b" 1) is not the start of a function (kpatch_test_value_b+0x1)" \
	patch e1 "$(addr_add "$b" 1)" "$b1"
refused "OLD at the ftrace call site (+4)" EINVAL \
	"e1: old function $(addr_add "$b" 4) is not the start of a function (kpatch_test_value_b+0x4)" \
	patch e1 "$(addr_add "$b" 4)" "$b1"
refused "OLD in kernel data" EINVAL "e1: old function $kdata (init_task) is not in kernel or module text" \
	patch e1 "$kdata" "$b1"
refused "OLD in kernel read-only data" EINVAL \
	"e1: old function $krodata ($rodata_name) is not in kernel or module text" \
	patch e1 "$krodata" "$b1"
refused "OLD in module data" EINVAL \
	"e1: old function $tdata (kpatch_test_target_data) is not in kernel or module text" \
	patch e1 "$tdata" "$b1"
refused "OLD not traceable (notrace)" EINVAL \
	"e1: old function kpatch_test_value_notrace+0x0/0x0 [kpatch_test_target] cannot be traced by ftrace" \
	patch e1 "$notrace" "$b1"
refused "NEW zero" EINVAL "e1: new function 0 is not a kernel function" patch e1 "$b" 0
refused "NEW not a function start (+1)" EINVAL \
	"e1: new function $(addr_add "$b1" 1) is not the start of a function (kpatch_test_value_b_v1+0x1)" \
	patch e1 "$b" "$(addr_add "$b1" 1)"
refused "NEW in module data" EINVAL \
	"e1: new function $ndata (kpatch_test_new_data) is not in kernel or module text" \
	patch e1 "$b" "$ndata"
refused "NEW in kernel read-only data" EINVAL \
	"e1: new function $krodata ($rodata_name) is not in kernel or module text" \
	patch e1 "$b" "$krodata"
refused "the same OLD twice" EINVAL "e1: an old function appears twice" \
	patch e1 "$b" "$b1" "$b" "$b2"
refused "the same OLD twice, once with 0x" EINVAL "e1: an old function appears twice" \
	patch e1 "$b" "$b1" "0x$b" "$b2"
refused "the same OLD twice in replace" EINVAL "e1: an old function appears twice" \
	replace e1 "$b" "$b1" "$b" "$b2"
long="patch long $b $b1"
long="patch long$(blanks $((4097 - ${#long} + 1)))$b $b1"
refused_raw "command of 4097 bytes (${#long})" EINVAL "command longer than 4096 bytes" "$long"

# ------------------------------------------------------- EEXIST, ENOENT
refused "patch with a name in use" EEXIST "patch 'base' refused: a patch with that name exists" \
	patch base "$b" "$b1"
refused "replace with a name in use" EEXIST "replace 'base' refused: a patch with that name exists" \
	replace base "$b" "$b1"
refused "unpatch of an unknown name" ENOENT "unpatch nosuch: no such patch" unpatch nosuch
start_test "unpatch twice"
log_mark
expect_ok patch e2 "$b" "$b1"
expect_ok unpatch e2
expect_refused ENOENT unpatch e2
check_transcript "the log says enabled, removed, then no such patch" <<EOF
% echo 'patch e2 $b $b1' > control
kpatch: patch 'e2' enabled (1 function)
% echo 'unpatch e2' > control
kpatch: patch 'e2' removed
% echo 'unpatch e2' > control
kpatch: unpatch e2: no such patch
EOF

# ------------------------------------------------ kpatch's own code
# kpatch does not patch itself or redirect to itself: one of its
# functions (kpatch_register) given as OLD or as NEW is refused, and the
# log says so (as a hook: test-hooks.sh).  kpatch prints the address
# without leading zeros, as in its other lines about an address.
kreg=$(sym kpatch_register kpatch) || bail "setup: find kpatch_register"
kreg_log=$(echo "$kreg" | sed 's/^0*//')

# self_real LINE CMD...: CMD fails with EINVAL and changes nothing;
# kpatch logs LINE
self_real() {
	_sr_line=$1
	shift
	log_mark
	expect_refused EINVAL "$@"
	check_transcript "the log says why" <<EOF
% echo '$*' > control
kpatch: $_sr_line
EOF
}

start_test "OLD is a function of kpatch"
self_real "e1: old function $kreg_log (kpatch_register) is in kpatch itself" \
	patch e1 "$kreg" "$b1"

# Tried for real, there being no dry run: a kpatch that accepted one of
# its own functions as NEW might never take that patch out again (an
# update runs kpatch's own code on the stacks it checks, and the one that
# removes the last redirect into a module checks all of it), and a call
# of OLD would go into kpatch_register() without its argument; OLD is
# kpatch_test_value_b, which only this script calls.
start_test "NEW is a function of kpatch"
self_real "e1: new function $kreg_log (kpatch_register) is in kpatch itself" \
	patch e1 "$b" "$kreg"

# ------------------------------------------------------------ accepted
start_test "name of 63 characters"
log_mark
expect_ok patch "$name63" "$b" "$b1"
check_patches "listed under its name" "$base_line" "$(b1_line "$name63")"
check_sysfs_patches "sysfs directory under its name" base "$name63"
expect_ok unpatch "$name63"

start_test "every allowed name character"
expect_ok patch AZaz09_- "$b" "$b1"
check_patches "listed under its name" "$base_line" "$(b1_line AZaz09_-)"
expect_ok unpatch AZaz09_-

start_test "tabs between words"
kp_raw "patch${tab}tabs$tab$b$tab$b1"
check_eq "patch with tabs -> OK" OK "$KP_RESULT"
check_patches "listed" "$base_line" "$(b1_line tabs)"
kp_raw "unpatch${tab}tabs"
check_eq "unpatch with a tab -> OK" OK "$KP_RESULT"

start_test "trailing newline"
kp_raw "patch nl $b $b1$nl"
check_eq "patch with a newline -> OK" OK "$KP_RESULT"
check_eq "in effect" "a=11 b=21" "$(target_values)"
check_patches "listed" "$base_line" "$(b1_line nl)"
kp_raw "unpatch nl$nl"
check_eq "unpatch with a newline -> OK" OK "$KP_RESULT"

start_test "0x prefixes"
expect_ok patch hex "0x$b" "0x$b1"
check_patches "listed with plain addresses" "$base_line" "$(b1_line hex)"
expect_ok unpatch hex
expect_ok patch hex1 "0x$b" "$b1"
check_patches "one prefixed address: listed" "$base_line" "$(b1_line hex1)"
expect_ok unpatch hex1

start_test "command of exactly 4096 bytes"
long="patch long $b $b1"
long="patch long$(blanks $((4096 - ${#long} + 1)))$b $b1"
diag "length: ${#long}"
kp_raw "$long"
check_eq "4096-byte patch -> OK" OK "$KP_RESULT"
check_patches "listed" "$base_line" "$(b1_line long)"
expect_ok unpatch long

start_test "after all"
# The transcript of the accepted cases: the log shows a tab as \t and a
# newline as \n in a command, and cuts a long command short.
check_transcript "the log says enabled and removed for each accepted case" <<EOF
% echo 'patch $name63 $b $b1' > control
kpatch: patch '$name63' enabled (1 function)
% echo 'unpatch $name63' > control
kpatch: patch '$name63' removed
% echo 'patch AZaz09_- $b $b1' > control
kpatch: patch 'AZaz09_-' enabled (1 function)
% echo 'unpatch AZaz09_-' > control
kpatch: patch 'AZaz09_-' removed
% echo 'patch\ttabs\t$b\t$b1' > control
kpatch: patch 'tabs' enabled (1 function)
% echo 'unpatch\ttabs' > control
kpatch: patch 'tabs' removed
% echo 'patch nl $b $b1\n' > control
kpatch: patch 'nl' enabled (1 function)
% echo 'unpatch nl\n' > control
kpatch: patch 'nl' removed
% echo 'patch hex 0x$b 0x$b1' > control
kpatch: patch 'hex' enabled (1 function)
% echo 'unpatch hex' > control
kpatch: patch 'hex' removed
% echo 'patch hex1 0x$b $b1' > control
kpatch: patch 'hex1' enabled (1 function)
% echo 'unpatch hex1' > control
kpatch: patch 'hex1' removed
% echo '$(printf '%s' "$long" | cut -c 1-400)...(4096 bytes)' > control
kpatch: patch 'long' enabled (1 function)
% echo 'unpatch long' > control
kpatch: patch 'long' removed
EOF
check_eq "base still in effect" "a=11 b=2" "$(target_values)"
check_patches "only base listed" "$base_line"
check_sysfs_patches "only base in sysfs" base
expect_ok unpatch base
check_eq "original values" "a=1 b=2" "$(target_values)"
check_no_splat
