#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-bpf.sh - BPF fentry/fexit programs and a plain kprobe on a patched
# function, on both of kpatch's paths.
#
# The function is vmlinux's cmdline_proc_show(), patched to
# kpatch_test_new's kpatch_test_cmdline_v1() ("kpatch-test v1" in
# /proc/cmdline); each read of /proc/cmdline calls it once.  The BPF
# programs (kpbpf: the raw bpf(2) system call, BTF from
# /sys/kernel/btf/vmlinux) count their calls in a map; the kprobe is a
# kprobe_events probe without a post_handler, counted in kprobe_profile.
#
# The ftrace_ops path (6.1 and 6.12; 7.x with kpatch's direct=N): a
# BPF trampoline and kpatch's IPMODIFY ftrace_ops share the function as
# BPF and livepatch do, in either order: both programs count every call
# while the patch gives its result; unpatch with the programs attached,
# and their detach, leave the other working.  A kprobe the same.
#
# The jmp path (7.x, direct=Y): the function's one direct call is
# kpatch's jmp, so a BPF program attached to it is refused and the patch
# stays in effect.  The errno is ftrace's: EINVAL on 7.x, where all BPF
# trampolines share one direct ftrace_ops and update_ftrace_direct_add()
# refuses a function that has a direct call already with -EINVAL (kernels
# that registered each trampoline with register_ftrace_direct() said
# EBUSY, but they have no jmp sites); a program attached first keeps the
# direct call (register_ftrace_direct() refuses kpatch's with -EBUSY) and
# kpatch takes the ftrace_ops path for that function instead, without a
# word in the log; a kprobe works beside the jmp (through ftrace's regs
# caller).
#
# Linux 6.1 breaks ftrace when a fexit program joins fentry programs
# that were attached after an IPMODIFY ftrace_ops, kpatch's or any other
# (see "fentry first" below); the other cases attach fexit first.  A
# kernel without bpf(2) or BTF (the test bed's debug kernel) skips the
# BPF cases.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

KPBPF=${KPBPF:-kpbpf}
KP_DIRECT_PARAM=/sys/module/kpatch/parameters/direct
FUNC=cmdline_proc_show
NEW=kpatch_test_cmdline_v1
KPROBE=kpatch_bpf_cmdline
KPROBE_EVENTS=$TRACEFS/kprobe_events
KPROBE_ENABLE=$TRACEFS/events/kprobes/$KPROBE/enable
BPF_OUT=$KP_TMP/kpbpf.out
BPF_PID=
BPF_MAP=
BPF_CMD=
BPF_PID0=
BPF_MAP0=
BPF_CMD0=
BPF_RESULT=
READS=3

setup_modules kpatch kpatch_test_new
[ -e "$KP_DIRECT_PARAM" ] || bail "setup: kpatch has the parameter direct"
cmd=$(sym "$FUNC" vmlinux) || bail "setup: find $FUNC"
cmd1=$(sym "$NEW" kpatch_test_new) || bail "setup: find $NEW"
cmd2=$(sym kpatch_test_cmdline_v2 kpatch_test_new) ||
	bail "setup: find kpatch_test_cmdline_v2"
orig=$(cat /proc/cmdline)
V1="kpatch-test v1"
V2="kpatch-test v2"

# ------------------------------------------------------------- helpers --

# set_direct Y|N: kpatch's parameter direct, read when a site is made
set_direct() {
	set_param kpatch direct "$1"
}

# show_site: FUNC's lines in enabled_functions, as diagnostics
show_site() {
	diag "enabled_functions:" "$(site "$FUNC")"
}

# on_ops: an IPMODIFY ftrace_ops (kpatch's: no other user here has one)
# is on FUNC; the flags follow the count: " (2) R I"
on_ops() {
	site "$FUNC" | head -n 1 | grep -Eq '\([0-9]+\) [R ] I( |$)'
}

# on_jmp NEWFN: FUNC's direct call is kpatch's jmp to NEWFN
on_jmp() {
	site "$FUNC" | grep -q "direct(jmp)-->$1+"
}

# on_bpf: FUNC's direct call is a BPF trampoline
on_bpf() {
	site "$FUNC" | grep -Eq 'direct(\(jmp\))?-->bpf_trampoline_'
}

gone() {
	! ftrace_enabled "$FUNC"
}

# read_cmdline N: read /proc/cmdline N times (N calls of FUNC); CMDLINE is
# what the reads gave, or "differs: ..." if not all the same
read_cmdline() {
	CMDLINE=$(cat /proc/cmdline)
	_rc_i=1
	_rc_diff=
	while [ "$_rc_i" -lt "$1" ]; do
		_rc_x=$(cat /proc/cmdline)
		[ "$_rc_x" = "$CMDLINE" ] || _rc_diff="$_rc_diff, '$_rc_x'"
		_rc_i=$((_rc_i + 1))
	done
	[ -z "$_rc_diff" ] || CMDLINE="differs: '$CMDLINE'$_rc_diff"
}

# bpf_attach_both: fexit, then fentry.  fexit first: Linux 6.1 breaks
# ftrace when a fexit program joins fentry programs that were attached
# after an IPMODIFY ftrace_ops (see "fentry first" below).
bpf_attach_both() {
	bpf_attach fexit fentry
}

# bpf_done: kpbpf said something, or died
bpf_done() {
	[ -s "$BPF_OUT" ] || ! kill -0 "$BPF_PID" 2>/dev/null
}

# bpf_attach PROG...: start kpbpf, which attaches BPF programs to FUNC
# (fentry, fexit) in this order and holds them; BPF_RESULT is "OK" or
# kpbpf's failure ("link fentry: EINVAL"); BPF_MAP its map's id.  The
# transcript shows it as "kpbpf hold FUNC PROG... &", and the kills of
# bpf_detach and bpf_stop name it by that command, as a job ("%kpbpf
# hold FUNC PROG...").
bpf_attach() {
	: >"$BPF_OUT"
	BPF_CMD="kpbpf hold $FUNC $*"
	log_command "$BPF_CMD &"
	"$KPBPF" hold "$FUNC" "$@" >"$BPF_OUT" 2>"$BPF_OUT.err" &
	BPF_PID=$!
	if ! wait_until bpf_done; then
		BPF_RESULT="no answer"
		return 1
	fi
	BPF_RESULT=$(head -n 1 "$BPF_OUT")
	diag "$BPF_RESULT"
	case $BPF_RESULT in
	"OK "[0-9]*)
		BPF_MAP=${BPF_RESULT#OK }
		BPF_RESULT=OK
		return 0
		;;
	esac
	[ ! -s "$BPF_OUT.err" ] || diag "$(head -n 20 "$BPF_OUT.err")"
	wait "$BPF_PID"
	BPF_PID=
	return 1
}

# bpf_detach: kpbpf closes its links (the programs are detached when that
# returns) and keeps the map for bpf_counts
bpf_detached() {
	grep -qx detached "$BPF_OUT"
}
bpf_detach() {
	log_command "kill -USR1 \"%$BPF_CMD\""
	kill -USR1 "$BPF_PID" && wait_until bpf_detached
}

# bpf_stop: end kpbpf (and what it still holds)
bpf_stop() {
	[ -n "$BPF_PID" ] || return 0
	log_command "kill \"%$BPF_CMD\""
	kill "$BPF_PID" 2>/dev/null
	wait "$BPF_PID" 2>/dev/null
	BPF_PID=
	BPF_MAP=
}

# bpf_keep: keep the kpbpf that bpf_attach started, as BPF_PID0 and
# BPF_MAP0, while bpf_attach starts another
bpf_keep() {
	BPF_PID0=$BPF_PID
	BPF_MAP0=$BPF_MAP
	BPF_CMD0=$BPF_CMD
	BPF_PID=
	BPF_MAP=
}

# bpf_stop0: end the kpbpf that bpf_keep kept
bpf_stop0() {
	[ -n "$BPF_PID0" ] || return 0
	log_command "kill \"%$BPF_CMD0\""
	kill "$BPF_PID0" 2>/dev/null
	wait "$BPF_PID0" 2>/dev/null
	BPF_PID0=
	BPF_MAP0=
}

# bpf_counts: "fentry N fexit M"
bpf_counts() {
	"$KPBPF" count "$BPF_MAP" 2>&1
}

# check_bpf_counts N: N more reads of /proc/cmdline bump the counts of
# both programs by N; CMDLINE: what the reads gave
check_bpf_counts() {
	_cb_before=$(bpf_counts)
	read_cmdline "$1"
	_cb_after=$(bpf_counts)
	_cb_want=$(echo "$_cb_before" | awk -v n="$1" '
		$1 == "fentry" && $3 == "fexit" {
			print "fentry", $2 + n, "fexit", $4 + n
		}')
	check_eq "BPF fentry and fexit counted $1 calls" \
		"${_cb_want:-(counts: $_cb_before)}" "$_cb_after"
}

# check_bpf_still N: N more reads of /proc/cmdline leave the counts as
# they are (the programs are detached); CMDLINE: what the reads gave
check_bpf_still() {
	_cs_before=$(bpf_counts)
	read_cmdline "$1"
	check_eq "detached BPF programs count no more" "$_cs_before" \
		"$(bpf_counts)"
}

# kprobe_attach: a kprobe event on FUNC, enabled; KP_OUT: the errors
kprobe_attach() {
	log_command "echo 'p:$KPROBE $FUNC' >> $KPROBE_EVENTS"
	KP_OUT=$({ echo "p:$KPROBE $FUNC" >>"$KPROBE_EVENTS"; } 2>&1) || {
		diag "$KP_OUT"
		return 1
	}
	log_command "echo 1 > $KPROBE_ENABLE"
	KP_OUT=$({ echo 1 >"$KPROBE_ENABLE"; } 2>&1) && return 0
	diag "$KP_OUT"
	return 1
}

# kprobe_detach: disable the event and remove it
kprobe_detach() {
	log_command "echo 0 > $KPROBE_ENABLE"
	KP_OUT=$({ echo 0 >"$KPROBE_ENABLE"; } 2>&1) || {
		diag "$KP_OUT"
		return 1
	}
	log_command "echo '-:$KPROBE' >> $KPROBE_EVENTS"
	KP_OUT=$({ echo "-:$KPROBE" >>"$KPROBE_EVENTS"; } 2>&1) && return 0
	diag "$KP_OUT"
	return 1
}

# kprobe_hits: the kprobe's hits in kprobe_profile
kprobe_hits() {
	awk -v e="$KPROBE" '$1 == e { print $2 }' "$TRACEFS/kprobe_profile"
}

# kprobe_armed: kprobes lists the probe on FUNC
kprobe_armed() {
	grep -q " $FUNC+0x[0-9a-f]*  *\[FTRACE\]" /sys/kernel/debug/kprobes/list
}

# check_kprobe_hits N: N more reads of /proc/cmdline bump the hits by N;
# CMDLINE: what the reads gave
check_kprobe_hits() {
	_kh_before=$(kprobe_hits)
	read_cmdline "$1"
	_kh_after=$(kprobe_hits)
	case $_kh_before in
	"" | *[!0-9]*) _kh_want="(hits: '$_kh_before')" ;;
	*) _kh_want=$((_kh_before + $1)) ;;
	esac
	check_eq "the kprobe hit $1 times" "$_kh_want" "$_kh_after"
}

bpf_cleanup() {
	bpf_stop
	bpf_stop0
	if grep -q "$KPROBE" "$KPROBE_EVENTS" 2>/dev/null; then
		echo 0 >"$KPROBE_ENABLE" 2>/dev/null
		echo "-:$KPROBE" >>"$KPROBE_EVENTS" 2>/dev/null
	fi
	echo Y >"$KP_DIRECT_PARAM" 2>/dev/null || :
}
KP_CLEANUP_HOOK=bpf_cleanup

# ------------------------------------------------------------ the path --

# Where ftrace makes direct calls jmps (7.x), a lone patch with direct=Y
# is a jmp site; elsewhere the ftrace_ops path.
start_test "which path a lone patch takes with direct=Y"
log_mark
check "set direct=Y" set_direct Y
expect_ok patch probe "$cmd" "$cmd1"
show_site
JMP=0
if site "$FUNC" | grep -q 'direct'; then
	# a jmp site is made a jmp after the command returns
	if wait_until on_jmp "$NEW"; then JMP=1; fi
fi
case $(uname -r) in
[0-6].*)
	check_eq "this kernel has no jmp sites" 0 "$JMP"
	check "the patch is on the ftrace_ops path" on_ops
	;;
*)
	check_eq "a 7.x kernel has jmp sites" 1 "$JMP"
	check_not "no ftrace_ops of kpatch's" on_ops
	;;
esac
expect_ok unpatch probe
check "$FUNC is gone from enabled_functions" wait_until gone
check_transcript "the log: tainted, enabled, removed" <<EOF
% echo Y > /sys/module/kpatch/parameters/direct
% echo 'patch probe $cmd $cmd1' > control
kpatch: tainting kernel with TAINT_LIVEPATCH
kpatch: patch 'probe' enabled (1 function)
% echo 'unpatch probe' > control
kpatch: patch 'probe' removed
EOF
check_no_splat

# NO_BPF: why this kernel cannot run BPF fentry/fexit programs, or empty.
# The test bed's debug kernel is built without BPF (debug-kernel.config);
# every Debian kernel has bpf(2) and BTF.
start_test "BPF fentry/fexit on this kernel"
NO_BPF=
if [ ! -d /sys/fs/bpf ]; then
	NO_BPF="no bpf(2) on this kernel (no /sys/fs/bpf: CONFIG_BPF_SYSCALL), so no BPF fentry/fexit"
elif [ ! -e /sys/kernel/btf/vmlinux ]; then
	NO_BPF="no BTF on this kernel (no /sys/kernel/btf/vmlinux), so no BPF fentry/fexit"
fi
case $(uname -r) in
*-kpatch-debug)
	[ -z "$NO_BPF" ] || diag "$NO_BPF: the cases with BPF skip"
	;;
*)
	check_eq "a Debian kernel has bpf(2) and BTF" "" "$NO_BPF"
	;;
esac

# ------------------------------------------------ the ftrace_ops path --

# OPS: the value of direct with which the next patches make ftrace_ops
# sites; ops_path sets it
if [ "$JMP" = 1 ]; then OPS=N; else OPS=Y; fi
ops_path() {
	set_direct "$OPS"
}

start_test "ftrace_ops path: BPF attached before the patch"
log_mark
if [ -n "$NO_BPF" ]; then
	skip "$NO_BPF"
else
	check "set direct" ops_path
	check "BPF fentry and fexit attach" bpf_attach_both
	check_bpf_counts "$READS"
	check_eq "unpatched, the reads give the kernel's cmdline" "$orig" "$CMDLINE"
	show_site
	check "precondition: the BPF trampoline is $FUNC's direct call" on_bpf
	expect_ok patch b1 "$cmd" "$cmd1"
	show_site
	check "the patch is on the ftrace_ops path" on_ops
	check "the BPF trampoline is still the direct call" on_bpf
	check_bpf_counts "$READS"
	check_eq "the reads give the patch's result" "$V1" "$CMDLINE"
	expect_ok unpatch b1
	check_bpf_counts "$READS"
	check_eq "unpatched with BPF attached: the kernel's cmdline" "$orig" "$CMDLINE"
	check "BPF detaches" bpf_detach
	check_bpf_still "$READS"
	check_eq "the kernel's cmdline" "$orig" "$CMDLINE"
	bpf_stop
	check "$FUNC is gone from enabled_functions" wait_until gone
	check_transcript "the log: BPF attached, enabled, removed, BPF detached" <<-EOF
	% echo $OPS > /sys/module/kpatch/parameters/direct
	% kpbpf hold $FUNC fexit fentry &
	% echo 'patch b1 $cmd $cmd1' > control
	kpatch: patch 'b1' enabled (1 function)
	% echo 'unpatch b1' > control
	kpatch: patch 'b1' removed
	% kill -USR1 "%kpbpf hold $FUNC fexit fentry"
	% kill "%kpbpf hold $FUNC fexit fentry"
	EOF
fi
check_no_splat

# bpf_after_patch PROG PROG: BPF programs attached, in this order, to a
# patched function, detached while it is patched, attached again, the
# patch removed under them
bpf_after_patch() {
	check "set direct" ops_path
	expect_ok patch b2 "$cmd" "$cmd1"
	check "the patch is on the ftrace_ops path" on_ops
	check "BPF $1, then $2 attach" bpf_attach "$@"
	show_site
	check "the BPF trampoline is $FUNC's direct call" on_bpf
	check_bpf_counts "$READS"
	check_eq "the reads give the patch's result" "$V1" "$CMDLINE"
	check "BPF detaches" bpf_detach
	check_bpf_still "$READS"
	check_eq "BPF detached: still the patch's result" "$V1" "$CMDLINE"
	check_not "no BPF trampoline left" on_bpf
	bpf_stop
	check "BPF attaches again" bpf_attach "$@"
	check_bpf_counts "$READS"
	check_eq "the patch's result" "$V1" "$CMDLINE"
	expect_ok unpatch b2
	check_bpf_counts "$READS"
	check_eq "unpatched with BPF attached: the kernel's cmdline" "$orig" "$CMDLINE"
	check "BPF detaches" bpf_detach
	check_bpf_still "$READS"
	bpf_stop
	check "$FUNC is gone from enabled_functions" wait_until gone
	check_transcript "the log: enabled, BPF attached, detached and again, removed" <<-EOF
	% echo $OPS > /sys/module/kpatch/parameters/direct
	% echo 'patch b2 $cmd $cmd1' > control
	kpatch: patch 'b2' enabled (1 function)
	% kpbpf hold $FUNC $1 $2 &
	% kill -USR1 "%kpbpf hold $FUNC $1 $2"
	% kill "%kpbpf hold $FUNC $1 $2"
	% kpbpf hold $FUNC $1 $2 &
	% echo 'unpatch b2' > control
	kpatch: patch 'b2' removed
	% kill -USR1 "%kpbpf hold $FUNC $1 $2"
	% kill "%kpbpf hold $FUNC $1 $2"
	EOF
}

start_test "ftrace_ops path: BPF attached after the patch"
log_mark
if [ -n "$NO_BPF" ]; then
	skip "$NO_BPF"
else
	bpf_after_patch fexit fentry
fi
check_no_splat

# A trampoline attached after an IPMODIFY ftrace_ops (kpatch's,
# livepatch's, a kprobe's with a post_handler) with fentry programs only
# does not call the function, so it does not need to share it.  When a
# fexit program joins, Linux 6.1 changes the registered trampoline; ftrace
# asks BPF whether it can share the function, BPF answers EAGAIN to build
# the trampoline again, and clears the function of its ftrace_ops, which
# ftrace still calls: ftrace disables itself (a WARNING in
# arch_ftrace_ops_list_func), every ftrace user stops (the patch too:
# the reads give the kernel's cmdline), and unregistering the IPMODIFY
# ftrace_ops later oopses in bpf_trampoline_update() (a NULL pointer
# dereference; on the test bed, oops=panic).  The fexit link is made
# without an error, so nothing tells the user.  A kprobe with a
# post_handler in kpatch's place does the same.  6.12 and 7.x are fixed.
start_test "ftrace_ops path: fentry first, then fexit, after the patch"
log_mark
if [ -n "$NO_BPF" ]; then
	skip "$NO_BPF"
else
	case $(uname -r) in
	6.1.*)
		skip "Linux 6.1 breaks ftrace when a fexit program joins fentry programs attached after an IPMODIFY ftrace_ops"
		;;
	*)
		bpf_after_patch fentry fexit
		;;
	esac
fi
check_no_splat

# check_split_counts N: N more reads of /proc/cmdline bump the fentry
# counter of the kept kpbpf (fentry alone) and the fexit counter of the
# other (fexit alone) by N; CMDLINE: what the reads gave
check_split_counts() {
	_sc_before="$("$KPBPF" count "$BPF_MAP0" 2>&1) / $(bpf_counts)"
	read_cmdline "$1"
	_sc_after="$("$KPBPF" count "$BPF_MAP0" 2>&1) / $(bpf_counts)"
	_sc_want=$(echo "$_sc_before" | awk -v n="$1" '
		$1 == "fentry" && $6 == "fentry" && NF == 9 {
			print "fentry", $2 + n, "fexit", $4, "/",
			      "fentry", $7, "fexit", $9 + n
		}')
	check_eq "BPF fentry and fexit (two links) counted $1 calls" \
		"${_sc_want:-(counts: $_sc_before)}" "$_sc_after"
}

# The trampoline of a fentry program attached before the patch shares the
# function with the patch's IPMODIFY ftrace_ops from the start, so a fexit
# program that joins it after the patch is safe on 6.1 too (compare
# "fentry first, then fexit, after the patch").
start_test "ftrace_ops path: fentry before the patch, fexit after"
log_mark
if [ -n "$NO_BPF" ]; then
	skip "$NO_BPF"
else
	check "set direct" ops_path
	check "BPF fentry attaches" bpf_attach fentry
	bpf_keep
	expect_ok patch b3 "$cmd" "$cmd1"
	check "the patch is on the ftrace_ops path" on_ops
	check "BPF fexit attaches" bpf_attach fexit
	show_site
	check "the BPF trampoline is $FUNC's direct call" on_bpf
	check "still on the ftrace_ops path" on_ops
	check_split_counts "$READS"
	check_eq "the reads give the patch's result" "$V1" "$CMDLINE"
	expect_ok unpatch b3
	check_split_counts "$READS"
	check_eq "unpatched with BPF attached: the kernel's cmdline" "$orig" "$CMDLINE"
	bpf_stop
	bpf_stop0
	check "$FUNC is gone from enabled_functions" wait_until gone
	check_transcript "the log: fentry attached, enabled, fexit attached, removed" <<-EOF
	% echo $OPS > /sys/module/kpatch/parameters/direct
	% kpbpf hold $FUNC fentry &
	% echo 'patch b3 $cmd $cmd1' > control
	kpatch: patch 'b3' enabled (1 function)
	% kpbpf hold $FUNC fexit &
	% echo 'unpatch b3' > control
	kpatch: patch 'b3' removed
	% kill "%kpbpf hold $FUNC fexit"
	% kill "%kpbpf hold $FUNC fentry"
	EOF
fi
check_no_splat

start_test "ftrace_ops path: a kprobe attached before the patch"
log_mark
check "set direct" ops_path
check "the kprobe attaches" kprobe_attach
check "kprobes lists it on ftrace" kprobe_armed
check_kprobe_hits "$READS"
expect_ok patch k1 "$cmd" "$cmd1"
show_site
check "the patch is on the ftrace_ops path" on_ops
check_kprobe_hits "$READS"
check_eq "the reads give the patch's result" "$V1" "$CMDLINE"
expect_ok unpatch k1
check_kprobe_hits "$READS"
check_eq "unpatched with the kprobe: the kernel's cmdline" "$orig" "$CMDLINE"
check "the kprobe detaches" kprobe_detach
check "$FUNC is gone from enabled_functions" wait_until gone
check_transcript "the log: the kprobe set, enabled, removed, the kprobe gone" <<EOF
% echo $OPS > /sys/module/kpatch/parameters/direct
% echo 'p:$KPROBE $FUNC' >> $KPROBE_EVENTS
% echo 1 > $KPROBE_ENABLE
% echo 'patch k1 $cmd $cmd1' > control
kpatch: patch 'k1' enabled (1 function)
% echo 'unpatch k1' > control
kpatch: patch 'k1' removed
% echo 0 > $KPROBE_ENABLE
% echo '-:$KPROBE' >> $KPROBE_EVENTS
EOF
check_no_splat

start_test "ftrace_ops path: a kprobe attached after the patch"
log_mark
check "set direct" ops_path
expect_ok patch k2 "$cmd" "$cmd1"
check "the kprobe attaches" kprobe_attach
check "kprobes lists it on ftrace" kprobe_armed
show_site
check "the patch is on the ftrace_ops path" on_ops
check_kprobe_hits "$READS"
check_eq "the reads give the patch's result" "$V1" "$CMDLINE"
check "the kprobe detaches" kprobe_detach
read_cmdline "$READS"
check_eq "kprobe detached: still the patch's result" "$V1" "$CMDLINE"
check "the kprobe attaches again" kprobe_attach
expect_ok unpatch k2
check_kprobe_hits "$READS"
check_eq "unpatched with the kprobe: the kernel's cmdline" "$orig" "$CMDLINE"
check "the kprobe detaches" kprobe_detach
check "$FUNC is gone from enabled_functions" wait_until gone
check_transcript "the log: enabled, the kprobe set, gone and set again, removed" <<EOF
% echo $OPS > /sys/module/kpatch/parameters/direct
% echo 'patch k2 $cmd $cmd1' > control
kpatch: patch 'k2' enabled (1 function)
% echo 'p:$KPROBE $FUNC' >> $KPROBE_EVENTS
% echo 1 > $KPROBE_ENABLE
% echo 0 > $KPROBE_ENABLE
% echo '-:$KPROBE' >> $KPROBE_EVENTS
% echo 'p:$KPROBE $FUNC' >> $KPROBE_EVENTS
% echo 1 > $KPROBE_ENABLE
% echo 'unpatch k2' > control
kpatch: patch 'k2' removed
% echo 0 > $KPROBE_ENABLE
% echo '-:$KPROBE' >> $KPROBE_EVENTS
EOF
check_no_splat

start_test "ftrace_ops path: BPF, a kprobe and a patch together"
log_mark
if [ -n "$NO_BPF" ]; then
	skip "$NO_BPF"
else
	check "set direct" ops_path
	check "BPF fentry and fexit attach" bpf_attach_both
	expect_ok patch t1 "$cmd" "$cmd1"
	check "the kprobe attaches" kprobe_attach
	show_site
	_kt=$(kprobe_hits)
	check_bpf_counts "$READS"
	check_eq "the reads give the patch's result" "$V1" "$CMDLINE"
	check_eq "the kprobe hit as often" "$((_kt + READS))" "$(kprobe_hits)"
	expect_ok patch t2 "$cmd" "$cmd2"
	_kt=$(kprobe_hits)
	check_bpf_counts "$READS"
	check_eq "a second patch on top: its result" "$V2" "$CMDLINE"
	check_eq "the kprobe hit as often" "$((_kt + READS))" "$(kprobe_hits)"
	expect_ok unpatch t2
	check_bpf_counts "$READS"
	check_eq "the second patch removed: the first one's result" "$V1" "$CMDLINE"
	expect_ok unpatch t1
	_kt=$(kprobe_hits)
	check_bpf_counts "$READS"
	check_eq "unpatched: the kernel's cmdline" "$orig" "$CMDLINE"
	check_eq "the kprobe hit as often" "$((_kt + READS))" "$(kprobe_hits)"
	check "the kprobe detaches" kprobe_detach
	bpf_stop
	check "$FUNC is gone from enabled_functions" wait_until gone
	check_transcript "the log: BPF, t1, the kprobe, t2, then all gone" <<-EOF
	% echo $OPS > /sys/module/kpatch/parameters/direct
	% kpbpf hold $FUNC fexit fentry &
	% echo 'patch t1 $cmd $cmd1' > control
	kpatch: patch 't1' enabled (1 function)
	% echo 'p:$KPROBE $FUNC' >> $KPROBE_EVENTS
	% echo 1 > $KPROBE_ENABLE
	% echo 'patch t2 $cmd $cmd2' > control
	kpatch: patch 't2' enabled (1 function)
	% echo 'unpatch t2' > control
	kpatch: patch 't2' removed
	% echo 'unpatch t1' > control
	kpatch: patch 't1' removed
	% echo 0 > $KPROBE_ENABLE
	% echo '-:$KPROBE' >> $KPROBE_EVENTS
	% kill "%kpbpf hold $FUNC fexit fentry"
	EOF
fi
check_no_splat

# ----------------------------------------------------------- jmp path --

start_test "jmp path: BPF attached to a jmp site"
log_mark
if [ "$JMP" = 0 ]; then
	skip "no jmp sites on this kernel"
elif [ -n "$NO_BPF" ]; then
	skip "$NO_BPF"
else
	check "set direct=Y" set_direct Y
	expect_ok patch j1 "$cmd" "$cmd1"
	check "precondition: a jmp site" wait_until on_jmp "$NEW"
	_js=$(site "$FUNC")
	for _jp in fentry fexit; do
		bpf_attach "$_jp"
		check_eq "BPF $_jp is refused" "link $_jp: EINVAL" "$BPF_RESULT"
		bpf_stop
	done
	check_eq "the site is as it was" "$_js" "$(site "$FUNC")"
	read_cmdline "$READS"
	check_eq "the patch still gives its result" "$V1" "$CMDLINE"
	expect_ok unpatch j1
	read_cmdline 1
	check_eq "unpatched: the kernel's cmdline" "$orig" "$CMDLINE"
	check "$FUNC is gone from enabled_functions" wait_until gone
	check "BPF attaches once the patch is gone" bpf_attach_both
	check_bpf_counts "$READS"
	bpf_stop
	check "$FUNC is gone from enabled_functions" wait_until gone
	check_transcript "the log: enabled, nothing on the refusals, removed" <<-EOF
	% echo Y > /sys/module/kpatch/parameters/direct
	% echo 'patch j1 $cmd $cmd1' > control
	kpatch: patch 'j1' enabled (1 function)
	% kpbpf hold $FUNC fentry &
	% kpbpf hold $FUNC fexit &
	% echo 'unpatch j1' > control
	kpatch: patch 'j1' removed
	% kpbpf hold $FUNC fexit fentry &
	% kill "%kpbpf hold $FUNC fexit fentry"
	EOF
fi
check_no_splat

start_test "jmp path: BPF attached first, then the patch"
log_mark
if [ "$JMP" = 0 ]; then
	skip "no jmp sites on this kernel"
elif [ -n "$NO_BPF" ]; then
	skip "$NO_BPF"
else
	check "set direct=Y" set_direct Y
	check "BPF fentry and fexit attach" bpf_attach_both
	check_bpf_counts "$READS"
	expect_ok patch j2 "$cmd" "$cmd1"
	kp_settle
	show_site
	check "kpatch took the ftrace_ops path" on_ops
	check_not "no jmp of kpatch's" on_jmp "$NEW"
	check "the BPF trampoline is still the direct call" on_bpf
	check_bpf_counts "$READS"
	check_eq "the reads give the patch's result" "$V1" "$CMDLINE"
	check "BPF detaches" bpf_detach
	check_bpf_still "$READS"
	check_eq "BPF detached: still the patch's result" "$V1" "$CMDLINE"
	check "the site keeps the ftrace_ops path while patched" on_ops
	bpf_stop
	check "BPF attaches again" bpf_attach_both
	check_bpf_counts "$READS"
	check_eq "the patch's result" "$V1" "$CMDLINE"
	expect_ok unpatch j2
	check_bpf_counts "$READS"
	check_eq "unpatched with BPF attached: the kernel's cmdline" "$orig" "$CMDLINE"
	bpf_stop
	check "$FUNC is gone from enabled_functions" wait_until gone
	expect_ok patch j3 "$cmd" "$cmd1"
	check "without BPF the next patch is a jmp site again" wait_until on_jmp "$NEW"
	read_cmdline 1
	check_eq "the patch's result" "$V1" "$CMDLINE"
	expect_ok unpatch j3
	check "$FUNC is gone from enabled_functions" wait_until gone
	check_transcript "the log: BPF, j2 enabled, BPF again, j2 removed, j3" <<-EOF
	% echo Y > /sys/module/kpatch/parameters/direct
	% kpbpf hold $FUNC fexit fentry &
	% echo 'patch j2 $cmd $cmd1' > control
	kpatch: patch 'j2' enabled (1 function)
	% kill -USR1 "%kpbpf hold $FUNC fexit fentry"
	% kill "%kpbpf hold $FUNC fexit fentry"
	% kpbpf hold $FUNC fexit fentry &
	% echo 'unpatch j2' > control
	kpatch: patch 'j2' removed
	% kill "%kpbpf hold $FUNC fexit fentry"
	% echo 'patch j3 $cmd $cmd1' > control
	kpatch: patch 'j3' enabled (1 function)
	% echo 'unpatch j3' > control
	kpatch: patch 'j3' removed
	EOF
fi
check_no_splat

start_test "jmp path: a kprobe on a jmp site"
log_mark
if [ "$JMP" = 0 ]; then
	skip "no jmp sites on this kernel"
else
	check "set direct=Y" set_direct Y
	expect_ok patch j4 "$cmd" "$cmd1"
	check "precondition: a jmp site" wait_until on_jmp "$NEW"
	check "the kprobe attaches" kprobe_attach
	check "kprobes lists it on ftrace" kprobe_armed
	show_site
	check "still a jmp site" wait_until on_jmp "$NEW"
	check_kprobe_hits "$READS"
	check_eq "the reads give the patch's result" "$V1" "$CMDLINE"
	expect_ok unpatch j4
	check_kprobe_hits "$READS"
	check_eq "unpatched with the kprobe: the kernel's cmdline" "$orig" "$CMDLINE"
	expect_ok patch j5 "$cmd" "$cmd1"
	show_site
	check "a patch beside the kprobe: a jmp site" wait_until on_jmp "$NEW"
	check_kprobe_hits "$READS"
	check_eq "the reads give the patch's result" "$V1" "$CMDLINE"
	expect_ok patch j6 "$cmd" "$cmd2"
	show_site
	check "a second patch on top: a jmp to its function" wait_until on_jmp \
		kpatch_test_cmdline_v2
	check_kprobe_hits "$READS"
	check_eq "the second patch's result" "$V2" "$CMDLINE"
	expect_ok unpatch j6
	check "the second patch removed: a jmp to the first one's" \
		wait_until on_jmp "$NEW"
	check_kprobe_hits "$READS"
	check_eq "the first patch's result" "$V1" "$CMDLINE"
	check "the kprobe detaches" kprobe_detach
	read_cmdline "$READS"
	check_eq "kprobe detached: still the patch's result" "$V1" "$CMDLINE"
	check "still a jmp site" wait_until on_jmp "$NEW"
	expect_ok unpatch j5
	read_cmdline 1
	check_eq "the kernel's cmdline" "$orig" "$CMDLINE"
	check "$FUNC is gone from enabled_functions" wait_until gone
	check_transcript "the log: the kprobe beside j4, then j5 and j6" <<-EOF
	% echo Y > /sys/module/kpatch/parameters/direct
	% echo 'patch j4 $cmd $cmd1' > control
	kpatch: patch 'j4' enabled (1 function)
	% echo 'p:$KPROBE $FUNC' >> $KPROBE_EVENTS
	% echo 1 > $KPROBE_ENABLE
	% echo 'unpatch j4' > control
	kpatch: patch 'j4' removed
	% echo 'patch j5 $cmd $cmd1' > control
	kpatch: patch 'j5' enabled (1 function)
	% echo 'patch j6 $cmd $cmd2' > control
	kpatch: patch 'j6' enabled (1 function)
	% echo 'unpatch j6' > control
	kpatch: patch 'j6' removed
	% echo 0 > $KPROBE_ENABLE
	% echo '-:$KPROBE' >> $KPROBE_EVENTS
	% echo 'unpatch j5' > control
	kpatch: patch 'j5' removed
	EOF
fi
check_no_splat
