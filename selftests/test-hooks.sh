#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-hooks.sh - hooks of a patch (pre, stop, undo, post; for patch and
# unpatch), given in the control file as HOOK=ADDR words or through
# kpatch_register().  kpatch_test_hooks's hooks log
# "kpatch_test_hooks: <hook> <patch>", so the order of the calls is read
# from the kernel log line by line; its "fail" parameter makes one hook
# of one patch return an error.
#
# - A veto from a pre hook (pre-patch, pre-unpatch, either in a replace)
#   fails the write with that errno, changes nothing, is not retried, and
#   the parts whose pre hook had run get their cancel hook (post-patch
#   for a part being removed, post-unpatch for one being added), in
#   reverse order.
# - A failing stop hook fails the write with its errno, changes nothing:
#   the stop hooks that ran before it are undone (undo hooks, reverse
#   order), then the cancel hooks run.
# - A pre or stop hook that returns one of the kernel's internal errnos
#   (512 and up) fails the write with EINTR (the restart codes) or EINVAL
#   (the others), never with that value; the log line has the value.
# - A successful patch, stacked patch, replace and unpatch run the hooks
#   in the documented order (replace: the old patches newest first, then
#   the new one; pre, stop, post in turn).
# - Pre and post hooks run in process context (they sleep and allocate),
#   stop and undo hooks with interrupts off: kpatch_test_hooks counts
#   every call in the wrong context ("errors").
# - The patches file lists a patch's hooks after its functions, in enum
#   order, 4 fields.  A module with a hook is pinned while the patch is
#   enabled.  Bad hook words are refused with EINVAL and a log line.
# - kpatch_register() with hooks: a veto or a stop hook failure returns
#   the errno and leaves the structures byte-identical; a hook in __init
#   text is refused, and so is a struct kpatch_module in __initdata (the
#   log says why, in one line); a funcs array in __initdata is accepted
#   (kpatch copies the functions): the patch applies with its hooks, and
#   comes out like any other.
# - On a kernel with Indirect Branch Tracking, a hook without ENDBR is
#   refused (an indirect call of it would fault).
# - A pre-patch hook that takes its time holds kpatch's mutex, but not
#   the module loader: while it waits, the rmmod of a module kpatch does
#   not pin, the insmod of a module whose init fails (kpatch_test_coming
#   go=2) and that of a module whose load fails before its init, on a bad
#   parameter value (kpatch_test_coming go=x: the loader still holds its
#   own reference in that GOING notification) all return; then the hook
#   goes on and the patch applies.
#   Unless KPATCH_TEST_DEADLOCK=0 (where kpatch's GOING notifier waits
#   for kpatch's mutex the guest hangs and the run fails): such a hook
#   registers a module notifier while an unrelated rmmod is in its GOING
#   notification (kpatch_test_notify lingers there); the rmmod, the hook
#   and the patch all finish.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

HP=/sys/module/kpatch_test_hooks/parameters
NP=/sys/module/kpatch_test_notify/parameters
HOOKS="pre-patch stop-patch undo-patch post-patch pre-unpatch stop-unpatch undo-unpatch post-unpatch"

setup_modules kpatch kpatch_test_target kpatch_test_new kpatch_test_hooks

held_pid=
held_name=
loader_pid=
loader_rc=

# hooks_cleanup: let a held hook go and wait for what waited on it
hooks_cleanup() {
	if [ -n "$held_pid" ]; then
		echo 0 >"$NP/linger" 2>/dev/null
		echo 1 >"$HP/proceed"
		wait "$held_pid"
	fi
	[ -z "$loader_pid" ] || wait "$loader_pid"
	echo none >"$HP/hold" 2>/dev/null
	echo 0 >"$HP/notify" 2>/dev/null
}
KP_CLEANUP_HOOK=hooks_cleanup

# hsym NAME: address of kpatch_test_hooks_NAME, from the list of
# kpatch_test_hooks's symbols hook_syms makes (one pass over kallsyms
# rather than one per symbol)
hsym() {
	awk -v n="kpatch_test_hooks_$1" '$3 == n { print $1; exit }' "$KP_TMP/hsyms"
}

# hook_syms: set h_<hook> (dashes as underscores) to the address of
# kpatch_test_hooks_<hook>, f, f1, f2, f3 to the value functions, and ALL
# to the hook words giving all eight hooks
hook_syms() {
	grep -F '[kpatch_test_hooks]' "$(kallsyms)" >"$KP_TMP/hsyms" ||
		bail "setup: kpatch_test_hooks's symbols"
	h_pre_patch=$(hsym pre_patch)
	h_stop_patch=$(hsym stop_patch)
	h_undo_patch=$(hsym undo_patch)
	h_post_patch=$(hsym post_patch)
	h_pre_unpatch=$(hsym pre_unpatch)
	h_stop_unpatch=$(hsym stop_unpatch)
	h_undo_unpatch=$(hsym undo_unpatch)
	h_post_unpatch=$(hsym post_unpatch)
	f=$(hsym f)
	f1=$(hsym f1)
	f2=$(hsym f2)
	f3=$(hsym f3)
	for _hs in "$h_pre_patch" "$h_stop_patch" "$h_undo_patch" "$h_post_patch" \
		   "$h_pre_unpatch" "$h_stop_unpatch" "$h_undo_unpatch" \
		   "$h_post_unpatch" "$f" "$f1" "$f2" "$f3"; do
		[ -n "$_hs" ] || bail "setup: find the functions of kpatch_test_hooks"
	done
	ALL="pre-patch=$h_pre_patch stop-patch=$h_stop_patch undo-patch=$h_undo_patch"
	ALL="$ALL post-patch=$h_post_patch pre-unpatch=$h_pre_unpatch"
	ALL="$ALL stop-unpatch=$h_stop_unpatch undo-unpatch=$h_undo_unpatch"
	ALL="$ALL post-unpatch=$h_post_unpatch"
}
hook_syms
a=$(sym kpatch_test_value_a kpatch_test_target) || bail "setup: find kpatch_test_value_a"
a1=$(sym kpatch_test_value_a_v1 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v1"
cmd=$(sym cmdline_proc_show vmlinux) || bail "setup: find cmdline_proc_show"
tdata=$(sym kpatch_test_target_data kpatch_test_target) ||
	bail "setup: find kpatch_test_target_data"

# hooks_fail SPEC: write kpatch_test_hooks's "fail" parameter
hooks_fail() {
	set_param kpatch_test_hooks fail "$1" || bail "setup: set fail=$1"
}

# grab_log: KP_LOG is the kernel log since the last mark
grab_log() {
	KP_LOG=$(log_since_mark)
}

# hook_log: the hook calls in KP_LOG, "<hook> <patch>", as
# kpatch_test_hooks logs them (not kpatch's lines about a patch that
# happens to be named kpatch_test_hooks)
hook_log() {
	printf '%s\n' "$KP_LOG" | awk '{
		if (index($0, "kpatch_test_hooks: ") == 1)
			s = substr($0, 20)
		else if ((i = index($0, "] kpatch_test_hooks: ")))
			s = substr($0, i + 21)
		else
			next
		if (s ~ /^(pre|stop|undo|post)-(un)?patch /)
			print s
	}'
}

# check_hooks DESC LINE...: the hook calls since the last mark are LINE...
# (sets KP_LOG)
check_hooks() {
	_ch_desc=$1
	shift
	grab_log
	_ch_want=$(for _ch_l in "$@"; do echo "$_ch_l"; done)
	_ch_have=$(hook_log)
	if [ "$_ch_want" = "$_ch_have" ]; then
		ok "$_ch_desc"
	else
		not_ok "$_ch_desc"
		show_diff "$_ch_want" "$_ch_have"
		return 1
	fi
}

# check_kplog DESC ERE: a kpatch line of KP_LOG matches ERE
check_kplog() {
	check_grep "$1" "kpatch: .*($2)" "$KP_LOG"
}

check_context() {
	check_eq "no hook ran in the wrong context" 0 "$(modparam kpatch_test_hooks errors)"
}

value() {
	modparam kpatch_test_hooks value
}

fline() {
	pline "$1" kpatch_test_hooks:kpatch_test_hooks_f "$f" \
		"kpatch_test_hooks:kpatch_test_hooks_f$2" "$3" "$4"
}

# hline NAME HOOK: an ERE for the patches file line of hook HOOK
hline() {
	_hl_u=$(echo "$2" | tr - _)
	case $2 in
	pre-patch) _hl_a=$h_pre_patch ;;
	stop-patch) _hl_a=$h_stop_patch ;;
	undo-patch) _hl_a=$h_undo_patch ;;
	post-patch) _hl_a=$h_post_patch ;;
	pre-unpatch) _hl_a=$h_pre_unpatch ;;
	stop-unpatch) _hl_a=$h_stop_unpatch ;;
	undo-unpatch) _hl_a=$h_undo_unpatch ;;
	post-unpatch) _hl_a=$h_post_unpatch ;;
	esac
	printf '^%s %s kpatch_test_hooks:kpatch_test_hooks_%s %s$\n' \
		"$1" "$2" "$_hl_u" "$_hl_a"
}

# all_hlines NAME: hline for each of the eight hooks, in enum order
all_hlines() {
	for _ah in $HOOKS; do
		hline "$1" "$_ah"
	done
}

# check_patches_nl DESC LINES: check_patches with one ERE per line of LINES
check_patches_nl() {
	_cpn_ifs=$IFS
	IFS='
'
	set -f
	# shellcheck disable=SC2086 # split on newlines only, no globbing
	check_patches "$1" $2
	set +f
	IFS=$_cpn_ifs
}

# ------------------------------------------------------------- success --

start_test "patch with all hooks"
log_mark
# hook words before, between and after the addresses, not in enum order
expect_ok patch hA post-unpatch="$h_post_unpatch" "$f" stop-patch="$h_stop_patch" \
	"$f1" pre-unpatch="$h_pre_unpatch" pre-patch="$h_pre_patch" \
	undo-unpatch="$h_undo_unpatch" post-patch="$h_post_patch" \
	stop-unpatch="$h_stop_unpatch" undo-patch="$h_undo_patch"
check_eq "hA in effect" 101 "$(value)"
check_hooks "hooks ran: pre, stop, post" "pre-patch hA" "stop-patch hA" "post-patch hA"
check_patches_nl "patches file: the function, then the hooks in enum order" \
	"$(fline hA 1 "$f1" active; all_hlines hA)"
check_sysfs_patches "sysfs directory hA" hA
check_context
check_no_splat

start_test "stacked patch with all hooks"
log_mark
# shellcheck disable=SC2086 # ALL: several words
expect_ok patch hB "$f" "$f2" $ALL
check_eq "hB in effect" 102 "$(value)"
check_hooks "only hB's hooks ran: pre, stop, post" \
	"pre-patch hB" "stop-patch hB" "post-patch hB"
check_patches_nl "patches file: hA (shadowed) and hB with their hooks" \
	"$(fline hA 1 "$f1" shadowed; all_hlines hA; fline hB 2 "$f2" active; all_hlines hB)"
check_context
check_no_splat

# --------------------------------------------------------------- vetoes --

# veto DESC FAIL ERRNO CMD KPLOG LINE...: with "fail" FAIL the command CMD
# fails with ERRNO and changes nothing; kpatch logs KPLOG (ERE); the hook
# calls are LINE...
veto() {
	start_test "$1"
	hooks_fail "$2"
	log_mark
	expect_refused "$3" "$4"
	check_eq "value unchanged" 102 "$(value)"
	_v_kplog=$5
	shift 5
	check_hooks "hook calls" "$@"
	check_kplog "kpatch logs the refusal" "$_v_kplog"
	hooks_fail none
	check_context
}

veto "veto from pre-patch" "pre-patch hX -13" EACCES \
	"patch hX $f $f3 $ALL" \
	"patch 'hX' refused: pre-patch hook of 'hX' returned -13" \
	"pre-patch hX returns -13"

veto "veto from pre-patch with a positive value" "pre-patch hX 1" EINVAL \
	"patch hX $f $f3 $ALL" \
	"patch 'hX' refused: pre-patch hook of 'hX' returned (1|-22)" \
	"pre-patch hX returns 1"

veto "veto from pre-unpatch" "pre-unpatch hB -125" ECANCELED \
	"unpatch hB" \
	"unpatch 'hB' refused: pre-unpatch hook of 'hB' returned -125" \
	"pre-unpatch hB returns -125"

veto "replace: veto from the newest old patch's pre-unpatch" "pre-unpatch hB -13" EACCES \
	"replace hC $f $f3 $ALL" \
	"replace 'hC' refused: pre-unpatch hook of 'hB' returned -13" \
	"pre-unpatch hB returns -13"

veto "replace: veto from the older old patch's pre-unpatch" "pre-unpatch hA -125" ECANCELED \
	"replace hC $f $f3 $ALL" \
	"replace 'hC' refused: pre-unpatch hook of 'hA' returned -125" \
	"pre-unpatch hB" "pre-unpatch hA returns -125" "post-patch hB"

veto "replace: veto from the new patch's pre-patch" "pre-patch hC -13" EACCES \
	"replace hC $f $f3 $ALL" \
	"replace 'hC' refused: pre-patch hook of 'hC' returned -13" \
	"pre-unpatch hB" "pre-unpatch hA" "pre-patch hC returns -13" \
	"post-patch hA" "post-patch hB"

# ------------------------------------------------- stop hook failures --

veto "stop-patch fails" "stop-patch hX -5" EIO \
	"patch hX $f $f3 $ALL" \
	"patch 'hX' refused: stop-patch hook of 'hX' failed [(]-5[)]; rolled back" \
	"pre-patch hX" "stop-patch hX returns -5" "post-unpatch hX"

veto "stop-unpatch fails" "stop-unpatch hB -5" EIO \
	"unpatch hB" \
	"unpatch 'hB' refused: stop-unpatch hook of 'hB' failed [(]-5[)]; rolled back" \
	"pre-unpatch hB" "stop-unpatch hB returns -5" "post-patch hB"

veto "replace: the older old patch's stop-unpatch fails" "stop-unpatch hA -5" EIO \
	"replace hC $f $f3 $ALL" \
	"replace 'hC' refused: stop-unpatch hook of 'hA' failed [(]-5[)]; rolled back" \
	"pre-unpatch hB" "pre-unpatch hA" "pre-patch hC" \
	"stop-unpatch hB" "stop-unpatch hA returns -5" "undo-unpatch hB" \
	"post-unpatch hC" "post-patch hA" "post-patch hB"

veto "replace: the new patch's stop-patch fails" "stop-patch hC -5" EIO \
	"replace hC $f $f3 $ALL" \
	"replace 'hC' refused: stop-patch hook of 'hC' failed [(]-5[)]; rolled back" \
	"pre-unpatch hB" "pre-unpatch hA" "pre-patch hC" \
	"stop-unpatch hB" "stop-unpatch hA" "stop-patch hC returns -5" \
	"undo-unpatch hA" "undo-unpatch hB" \
	"post-unpatch hC" "post-patch hA" "post-patch hB"

# ------------------------------------------ kernel-internal errnos --

# internal VALUE NAME ERRNO: a pre-patch, a stop-patch and a pre-unpatch
# hook that return VALUE, a kernel-internal errno (NAME), fail the write
# with ERRNO: such values must not reach user space (the restart codes
# become EINTR, the others EINVAL).  kpatch's log line has the value the
# hook returned.
internal() {
	veto "pre-patch returns $1 ($2)" "pre-patch hX $1" "$3" \
		"patch hX $f $f3 $ALL" \
		"patch 'hX' refused: pre-patch hook of 'hX' returned $1" \
		"pre-patch hX returns $1"
	check_transcript "kpatch's log line has the hook's value" <<EOF
% echo 'patch hX $f $f3 $ALL' > control
kpatch: patch 'hX' refused: pre-patch hook of 'hX' returned $1
% echo none > /sys/module/kpatch_test_hooks/parameters/fail
EOF
	veto "stop-patch returns $1 ($2)" "stop-patch hX $1" "$3" \
		"patch hX $f $f3 $ALL" \
		"patch 'hX' refused: stop-patch hook of 'hX' failed [(]$1[)]; rolled back" \
		"pre-patch hX" "stop-patch hX returns $1" "post-unpatch hX"
	check_transcript "kpatch's log line has the hook's value" <<EOF
% echo 'patch hX $f $f3 $ALL' > control
kpatch: patch 'hX' refused: stop-patch hook of 'hX' failed ($1); rolled back
% echo none > /sys/module/kpatch_test_hooks/parameters/fail
EOF
	veto "pre-unpatch returns $1 ($2)" "pre-unpatch hB $1" "$3" \
		"unpatch hB" \
		"unpatch 'hB' refused: pre-unpatch hook of 'hB' returned $1" \
		"pre-unpatch hB returns $1"
	check_transcript "kpatch's log line has the hook's value" <<EOF
% echo 'unpatch hB' > control
kpatch: unpatch 'hB' refused: pre-unpatch hook of 'hB' returned $1
% echo none > /sys/module/kpatch_test_hooks/parameters/fail
EOF
}

internal -512 ERESTARTSYS EINTR
internal -514 ERESTARTNOHAND EINTR
internal -517 EPROBE_DEFER EINVAL
internal -524 ENOTSUPP EINVAL

# ------------------------------------------------- replace, unpatch --

start_test "replace with hooks"
log_mark
# shellcheck disable=SC2086
expect_ok replace hC "$f" "$f3" $ALL
check_eq "hC in effect" 103 "$(value)"
check_hooks "hooks ran: old patches newest first, then the new one" \
	"pre-unpatch hB" "pre-unpatch hA" "pre-patch hC" \
	"stop-unpatch hB" "stop-unpatch hA" "stop-patch hC" \
	"post-unpatch hB" "post-unpatch hA" "post-patch hC"
check_patches_nl "only hC is listed" "$(fline hC 3 "$f3" active; all_hlines hC)"
check_sysfs_patches "only hC in sysfs" hC
check_context
check_no_splat

start_test "unpatch with hooks"
log_mark
expect_ok unpatch hC
check_eq "original function back" 100 "$(value)"
check_hooks "hooks ran: pre, stop, post" \
	"pre-unpatch hC" "stop-unpatch hC" "post-unpatch hC"
check_patches "patches file empty"
check_context
check_no_splat

start_test "the return value of a post hook is ignored"
hooks_fail "post-patch hD -5"
log_mark
expect_ok patch hD "$f" "$f1" post-patch="$h_post_patch"
check_eq "hD in effect" 101 "$(value)"
check_hooks "the post-patch hook ran" "post-patch hD returns -5"
check_patches "one hook line" "$(fline hD 1 "$f1" active)" "$(hline hD post-patch)"
hooks_fail none
expect_ok unpatch hD
check_no_splat

start_test "a reference on the patch's directory outlives its unpatch"
log_mark
set_param kpatch_test_hooks keep_dir 1
expect_ok patch hK "$f" "$f1" post-patch="$h_post_patch"
expect_ok unpatch hK
check "the directory goes with the patch" test ! -e "$KP_SYSFS_PATCHES/hK"
expect_ok patch hK "$f" "$f2" post-patch="$h_post_patch"
check_eq "hK in effect again" 102 "$(value)"
expect_ok unpatch hK
set_param kpatch_test_hooks keep_dir 0
check_transcript "the name is free at once: enabled, removed, twice" kpatch_test_hooks <<EOF
% echo 1 > /sys/module/kpatch_test_hooks/parameters/keep_dir
% echo 'patch hK $f $f1 post-patch=$h_post_patch' > control
kpatch: patch 'hK' enabled (1 function)
kpatch_test_hooks: keep_dir: a reference on patches/hK
kpatch_test_hooks: post-patch hK
% echo 'unpatch hK' > control
kpatch: patch 'hK' removed
% echo 'patch hK $f $f2 post-patch=$h_post_patch' > control
kpatch: patch 'hK' enabled (1 function)
kpatch_test_hooks: post-patch hK
% echo 'unpatch hK' > control
kpatch: patch 'hK' removed
% echo 0 > /sys/module/kpatch_test_hooks/parameters/keep_dir
EOF
check_no_splat

# -------------------------------------------------------------- pinning --

start_test "a hook module is pinned while the patch is enabled"
log_mark
refs=$(awk '$1 == "kpatch_test_hooks" { print $3 }' /proc/modules)
expect_ok patch hP "$a" "$a1" pre-patch="$h_pre_patch" post-unpatch="$h_post_unpatch"
check_eq "hP in effect" "a=11 b=2" "$(target_values)"
check_not "rmmod kpatch_test_hooks refused" unload_mod kpatch_test_hooks
check "kpatch_test_hooks still loaded" mod_loaded kpatch_test_hooks
check_patches "hP still listed, with its hooks" \
	"$(pline hP kpatch_test_target:kpatch_test_value_a "$a" \
		kpatch_test_new:kpatch_test_value_a_v1 "$a1" active)" \
	"$(hline hP pre-patch)" "$(hline hP post-unpatch)"
expect_ok unpatch hP
check_hooks "hP's hooks ran" "pre-patch hP" "post-unpatch hP"
check_eq "reference count of kpatch_test_hooks as before" "$refs" \
	"$(awk '$1 == "kpatch_test_hooks" { print $3 }' /proc/modules)"
check "rmmod kpatch_test_hooks succeeds after unpatch" unload_mod kpatch_test_hooks
check_no_splat

# ------------------------------------------------------------ bad input --

start_test "bad hooks: setup"
setup_modules kpatch_test_hooks
hook_syms
# a function of a module that is gone (nothing loaded since takes its place)
gone=$(sym kpatch_test_value_a_v2 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v2"
unload_mod kpatch_test_new || bail "setup: rmmod kpatch_test_new"
expect_ok patch base "$f" "$f1" pre-unpatch="$h_pre_unpatch"

# bad DESC ERE STRING: STRING is refused with EINVAL and kpatch logs a
# line matching ERE; no hook runs.  (That nothing changed is checked once
# for all of them, after the last; the EXIT trap checks the log for
# splats.)
bad() {
	start_test "$1"
	log_mark
	expect_errno_raw EINVAL "$3"
	check_hooks "no hook ran"
	check_kplog "kpatch logs why" "$2"
}

save_state

bad "hook in vmlinux" "e1: pre-patch hook .*is not in a module" \
	"patch e1 $f $f1 pre-patch=$cmd"
bad "hook in the middle of a function" "e1: stop-patch hook .*is not the start of a function" \
	"patch e1 $f $f1 stop-patch=$(addr_add "$h_stop_patch" 1)"
bad "hook address is module data" "e1: post-patch hook .*is not .*text" \
	"patch e1 $f $f1 post-patch=$tdata"
# kpatch_test_hooks_plain is never called through a pointer: on a kernel
# with Indirect Branch Tracking it has no ENDBR, and an indirect call of
# it would fault; elsewhere it is a hook like any other
plain=$(hsym plain)
[ -n "$plain" ] || bail "setup: find kpatch_test_hooks_plain"
if [ "$(cat "$HP/ibt")" = Y ]; then
	bad "hook without ENDBR (IBT kernel)" \
		"e1: pre-patch hook .*does not start with ENDBR: it cannot be called indirectly" \
		"patch e1 $f $f1 pre-patch=$plain"
else
	start_test "hook without ENDBR where no IBT needs one"
	log_mark
	expect_ok check patch e1 "$f" "$f1" pre-patch="$plain"
fi
bad "hook in a module that is gone" "e1: pre-patch hook $(echo "$gone" | sed 's/^0*//')" \
	"patch e1 $f $f1 pre-patch=$gone"
bad "unknown hook keyword" "pre-frob.*hook|hook.*pre-frob" \
	"patch e1 $f $f1 pre-frob=$h_pre_patch"
bad "hook keyword in capitals" "PRE-PATCH.*hook|hook.*PRE-PATCH" \
	"patch e1 $f $f1 PRE-PATCH=$h_pre_patch"
bad "no hook keyword" "'=[0-9a-f]+'.*hook" \
	"patch e1 $f $f1 =$h_pre_patch"
bad "the same hook twice" "pre-patch hook.*twice" \
	"patch e1 $f $f1 pre-patch=$h_pre_patch stop-patch=$h_stop_patch pre-patch=$h_pre_patch"
bad "the same hook twice, different addresses" "post-patch hook.*twice" \
	"replace e1 $f $f1 post-patch=$h_post_patch post-patch=$h_post_unpatch"
bad "hook address not hexadecimal" "'pre-patch=xyz'" \
	"patch e1 $f $f1 pre-patch=xyz"
bad "hook address empty" "'pre-patch='" \
	"patch e1 $f $f1 pre-patch="
bad "hook address with trailing garbage" "'pre-patch=[0-9a-f]+g'" \
	"patch e1 $f $f1 pre-patch=${h_pre_patch}g"
bad "hook word on unpatch" "unpatch" \
	"unpatch base pre-unpatch=$h_pre_unpatch"
bad "hooks but no addresses" "." \
	"patch e1 pre-patch=$h_pre_patch"
start_test "bad hooks: cleanup"
check_state_unchanged
log_mark
expect_ok unpatch base
check_hooks "base's pre-unpatch hook ran" "pre-unpatch base"
check_context

# ------------------------------------------------------------------ API --

# api_load DESC PARAM...: load kpatch_test_hooks api=1 PARAM...
api_load() {
	_al_desc=$1
	shift
	check "insmod kpatch_test_hooks api=1${*:+ $*}: $_al_desc" \
		load_mod kpatch_test_hooks api=1 "$@"
}

# api_refused DESC ERR PARAM...: kpatch_register() fails with ERR and
# leaves the structures intact
api_refused() {
	_ar_desc=$1
	_ar_err=$2
	shift 2
	start_test "kpatch_register(): $_ar_desc"
	log_mark
	save_state
	api_load "structures intact" "$@"
	grab_log
	check_grep "kpatch_register() returned $_ar_err" \
		"kpatch_test_hooks: kpatch_register[(][)] failed: $_ar_err$" "$KP_LOG"
	check_grep "structures intact" \
		"kpatch_test_hooks: structures intact after failed register [(]err ${_ar_err}[)]" \
		"$KP_LOG"
	check_eq "kpatch_test_value_a not patched" "a=1 b=2" "$(target_values)"
	check_patches "nothing patched"
}

unload_mod kpatch_test_hooks || bail "setup: rmmod kpatch_test_hooks"

api_refused "veto from pre-patch" -13 fail=pre-patch,kpatch_test_hooks,-13
check_hooks "hook calls" "pre-patch kpatch_test_hooks returns -13"
check_context
check "rmmod kpatch_test_hooks" unload_mod kpatch_test_hooks
check_state_unchanged
check_no_splat

api_refused "stop-patch fails" -5 fail=stop-patch,kpatch_test_hooks,-5
check_hooks "hook calls" "pre-patch kpatch_test_hooks" \
	"stop-patch kpatch_test_hooks returns -5" "post-unpatch kpatch_test_hooks"
check_context
check "rmmod kpatch_test_hooks" unload_mod kpatch_test_hooks
check_state_unchanged
check_no_splat

api_refused "pre-patch hook in __init text" -22 api_bad=init
check_hooks "no hook ran"
check "rmmod kpatch_test_hooks" unload_mod kpatch_test_hooks
check_state_unchanged
check_no_splat

# kpatch keeps a pointer to the struct kpatch_module while the patch is
# enabled; the kernel frees __initdata after the init
api_refused "struct kpatch_module in init memory" -22 api_bad=initdata
check_hooks "no hook ran"
check "rmmod kpatch_test_hooks" unload_mod kpatch_test_hooks
check_state_unchanged
check_transcript "the log says why, in one line" kpatch_test_hooks <<EOF
% insmod kpatch_test_hooks.ko api=1 api_bad=initdata
kpatch_test_hooks: api_bad=initdata: pre-patch hook kpatch_test_hooks_pre_patch+0x0/0x_ [kpatch_test_hooks]
kpatch: kpatch_test_hooks: the kpatch_module is in init memory (__initdata), which is freed after the module's init
kpatch_test_hooks: kpatch_register() failed: -22
kpatch_test_hooks: structures intact after failed register (err -22)
% rmmod kpatch_test_hooks
EOF
check_no_splat

# kpatch reads the funcs array only while kpatch_register() runs: one in
# __initdata, which the kernel frees after the init, is as good as any
start_test "kpatch_register(): funcs array in init memory"
log_mark
api_load "registers" api_bad=initfuncs
check_eq "kpatch_test_hooks_f1 runs" "a=101 b=2" "$(target_values)"
check_hooks "hook calls" "pre-patch kpatch_test_hooks" \
	"stop-patch kpatch_test_hooks" "post-patch kpatch_test_hooks"
hook_syms
check_patches_nl "patches file: the function and the eight hooks" \
	"$(pline kpatch_test_hooks kpatch_test_target:kpatch_test_value_a "$a" \
		kpatch_test_hooks:kpatch_test_hooks_f1 "$f1" active
	   all_hlines kpatch_test_hooks)"
check_transcript "the log says enabled, nothing else" <<EOF
% insmod kpatch_test_hooks.ko api=1 api_bad=initfuncs
kpatch: patch 'kpatch_test_hooks' enabled (1 function)
EOF
check_not "rmmod kpatch_test_hooks refused" unload_mod kpatch_test_hooks
log_mark
expect_ok unpatch kpatch_test_hooks
check_eq "kpatch_test_value_a restored" "a=1 b=2" "$(target_values)"
check_hooks "hook calls" "pre-unpatch kpatch_test_hooks" \
	"stop-unpatch kpatch_test_hooks" "post-unpatch kpatch_test_hooks"
check_context
check "rmmod kpatch_test_hooks succeeds" unload_mod kpatch_test_hooks
check_transcript "the log says removed, nothing else" <<EOF
% echo 'unpatch kpatch_test_hooks' > control
kpatch: patch 'kpatch_test_hooks' removed
% rmmod kpatch_test_hooks
EOF
check_no_splat

start_test "kpatch_register() with hooks"
log_mark
api_load "registers"
check_eq "kpatch_test_hooks_f1 runs" "a=101 b=2" "$(target_values)"
check_hooks "hook calls" "pre-patch kpatch_test_hooks" \
	"stop-patch kpatch_test_hooks" "post-patch kpatch_test_hooks"
hook_syms
check_patches_nl "patches file: the function and the eight hooks" \
	"$(pline kpatch_test_hooks kpatch_test_target:kpatch_test_value_a "$a" \
		kpatch_test_hooks:kpatch_test_hooks_f1 "$f1" active
	   all_hlines kpatch_test_hooks)"
check_not "rmmod kpatch_test_hooks refused" unload_mod kpatch_test_hooks
log_mark
expect_ok unpatch kpatch_test_hooks
check_hooks "hook calls" "pre-unpatch kpatch_test_hooks" \
	"stop-unpatch kpatch_test_hooks" "post-unpatch kpatch_test_hooks"
check_context
check "rmmod kpatch_test_hooks succeeds" unload_mod kpatch_test_hooks
check_no_splat

# ------------------------------------------- a hook that takes its time --

# hooks_param NAME VALUE: write a kpatch_test_hooks parameter
hooks_param() {
	set_param kpatch_test_hooks "$1" "$2"
}

# HOLD_SECS: how long a command may take while a hook waits
HOLD_SECS=10

# held_start NAME: write "patch NAME f f1 pre-patch=..." in the
# background, with that pre-patch hook held; fails unless the hook then
# waits
held_start() {
	held_name=$1
	hooks_param hold "pre-patch $held_name"
	rm -f "$KP_TMP/held.out"
	kp_bg "$KP_TMP/held.out" "patch $held_name $f $f1 pre-patch=$h_pre_patch"
	held_pid=$KP_BG
	wait_until modparam_is kpatch_test_hooks waiting 1
}

# held_alive: does the held hook still wait, its writer with it?
held_alive() {
	[ -n "$held_pid" ] && [ ! -s "$KP_TMP/held.out" ] &&
		modparam_is kpatch_test_hooks waiting 1
}

# held_finish: let the held hook go and wait for its writer; the result
# (OK or the errno name) is then in KP_RESULT
held_finish() {
	[ -n "$held_pid" ] || return 0
	hooks_param proceed 1
	wait "$held_pid"
	held_pid=
	KP_RESULT=$(cat "$KP_TMP/held.out")
	diag "\"patch $held_name\": $KP_RESULT"
	hooks_param hold none
}

# loader_done: has the background command of loader_probe returned?
loader_done() {
	[ -s "$KP_TMP/loader.rc" ]
}

# loader_probe DESC CMD...: while patch hL's pre-patch hook waits, run
# CMD in the background; ok if it returns within HOLD_SECS seconds, and
# if the hook still waits then.  If CMD is still blocked, the hook is let
# go (and patch hL removed again) so that CMD can finish.  CMD's exit
# status is then in loader_rc, its output in KP_OUT.
loader_probe() {
	_lp_desc=$1
	shift
	if ! held_alive; then
		held_start hL || bail "setup: patch hL waits in its pre-patch hook"
	fi
	kallsyms_changed
	rm -f "$KP_TMP/loader.rc" "$KP_TMP/loader.out"
	diag "% $* &"
	{
		"$@" >"$KP_TMP/loader.out" 2>&1
		echo $? >"$KP_TMP/loader.rc"
	} &
	loader_pid=$!
	_lp_i=0
	while ! loader_done && [ "$_lp_i" -lt $((HOLD_SECS * 10)) ]; do
		_lp_i=$((_lp_i + 1))
		nap
	done
	if loader_done; then
		_lp_waiting=$(modparam kpatch_test_hooks waiting)
		ok "$_lp_desc returns while the hook waits"
		check_eq "the hook still waits when it has returned" 1 "$_lp_waiting"
	else
		not_ok "$_lp_desc returns while the hook waits"
		diag "still blocked after $HOLD_SECS s, while the pre-patch hook of" \
			"hL waits; letting the hook go"
		for _lp_p in $(pidof "$1"); do
			diag "$1 (pid $_lp_p) waits in:" \
				"$(cat "/proc/$_lp_p/stack" 2>&1)"
		done
		held_finish
		wait_until loader_done
		[ "$KP_RESULT" != OK ] || kp unpatch hL >/dev/null
	fi
	wait "$loader_pid"
	loader_pid=
	loader_rc=$(cat "$KP_TMP/loader.rc" 2>/dev/null || echo "?")
	KP_OUT=$(cat "$KP_TMP/loader.out" 2>/dev/null)
	diag "exit $loader_rc${KP_OUT:+: $KP_OUT}"
	kallsyms_changed
}

start_test "while a pre-patch hook waits, the module loader goes on"
load_mod kpatch_test_hooks || bail "setup: load kpatch_test_hooks"
hook_syms
load_mod kpatch_test_coming go=1 || bail "setup: load kpatch_test_coming go=1"
log_mark
check "precondition: patch hL waits in its pre-patch hook" held_start hL
loader_probe "rmmod kpatch_test_coming (a module kpatch does not pin)" \
	rmmod kpatch_test_coming
check_eq "rmmod kpatch_test_coming exits 0" 0 "$loader_rc"
check_not "kpatch_test_coming is gone" mod_loaded kpatch_test_coming
loader_probe "insmod kpatch_test_coming go=2 (its init fails)" \
	insmod "$KPATCH_MODDIR/kpatch_test_coming.ko" go=2
check "insmod kpatch_test_coming go=2 fails" test "$loader_rc" != 0
check_not "kpatch_test_coming is not loaded" mod_loaded kpatch_test_coming
loader_probe "insmod kpatch_test_coming go=x (a bad parameter value)" \
	insmod "$KPATCH_MODDIR/kpatch_test_coming.ko" go=x
check "insmod kpatch_test_coming go=x fails" test "$loader_rc" != 0
check_not "kpatch_test_coming is not loaded" mod_loaded kpatch_test_coming
if ! held_alive; then
	held_start hL || bail "setup: patch hL waits in its pre-patch hook again"
fi
held_finish
check_eq "let go: patch hL -> OK" OK "$KP_RESULT"
check_eq "hL in effect" 101 "$(value)"
check_patches "hL listed" "$(fline hL 1 "$f1" active)" "$(hline hL pre-patch)"
expect_ok unpatch hL
check_context
check_no_splat

start_test "a held hook registers a module notifier during an unrelated rmmod"
if [ "${KPATCH_TEST_DEADLOCK:-1}" = 0 ]; then
	skip "KPATCH_TEST_DEADLOCK=0: where kpatch's GOING notifier waits for kpatch's mutex, the rmmod, the hook and kpatch deadlock, and the guest hangs"
else
	diag "this hangs the guest where kpatch's GOING notifier waits for" \
		"kpatch's mutex"
	load_mod kpatch_test_coming go=1 || bail "setup: load kpatch_test_coming go=1"
	load_mod kpatch_test_notify watch=kpatch_test_coming linger=1 ||
		bail "setup: load kpatch_test_notify"
	hooks_param notify 1
	log_mark
	check "precondition: patch hN waits in its pre-patch hook" held_start hN
	rm -f "$KP_TMP/loader.rc"
	diag "% rmmod kpatch_test_coming &"
	{
		rmmod kpatch_test_coming >"$KP_TMP/loader.out" 2>&1
		echo $? >"$KP_TMP/loader.rc"
	} &
	loader_pid=$!
	tries=$KP_WAIT_TRIES
	KP_WAIT_TRIES=$((HOLD_SECS * 10))
	check "rmmod kpatch_test_coming reaches kpatch_test_notify's GOING notifier" \
		wait_until modparam_is kpatch_test_notify lingering 1
	hooks_param proceed 1
	check "the hook calls register_module_notifier()" \
		wait_until modparam_is kpatch_test_hooks waiting 2
	sleep 1
	check "register_module_notifier() waits for the GOING notification" \
		modparam_is kpatch_test_hooks waiting 2
	set_param kpatch_test_notify linger 0
	check "rmmod kpatch_test_coming returns" wait_until loader_done
	check "the writer of patch hN returns" wait_until test -s "$KP_TMP/held.out"
	KP_WAIT_TRIES=$tries
	wait "$loader_pid"
	loader_pid=
	check_eq "rmmod kpatch_test_coming exits 0" 0 "$(cat "$KP_TMP/loader.rc")"
	wait "$held_pid"
	held_pid=
	check_eq "patch hN -> OK" OK "$(cat "$KP_TMP/held.out")"
	check_grep "the hook's register_module_notifier() returned 0" \
		"kpatch_test_hooks: hold: pre-patch hN: register_module_notifier[(][)] returned 0" \
		"$(log_since_mark)"
	hooks_param hold none
	hooks_param notify 0
	expect_ok unpatch hN
	check "rmmod kpatch_test_notify" unload_mod kpatch_test_notify
	check_context
	check_no_splat
fi
