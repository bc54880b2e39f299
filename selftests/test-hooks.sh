#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-hooks.sh - hooks of a patch (pre, stop, undo, post; for patch and
# unpatch), which a patch module sets in its struct kpatch_module for
# kpatch_register().  The patches here come from kpatch_test_patch_a, _b
# and _c (A, B, C below): the same patch module under three names, given
# its function and its hooks by address on the insmod line; a patch is
# named after its module.  The hooks are kpatch_test_hooks's, which log
# "kpatch_test_hooks: <hook> <patch>", so the order of the calls is read
# from the kernel log line by line; its "fail" parameter makes one hook
# of one patch return an error.  An unpatch is the control file's
# "unpatch NAME", as for any patch.
#
# - A veto from a pre hook (pre-patch, pre-unpatch, either in a replace)
#   fails kpatch_register() (and so the insmod) or the unpatch with that
#   errno, changes nothing, is not retried, and the parts whose pre hook
#   had run get their cancel hook (post-patch for a part being removed,
#   post-unpatch for one being added), in reverse order.
# - A failing stop hook fails it with its errno, changes nothing: the
#   stop hooks that ran before it are undone (undo hooks, reverse order),
#   then the cancel hooks run.
# - A pre or stop hook that returns one of the kernel's internal errnos
#   (512 and up) fails kpatch_register() or the unpatch with EINTR (the
#   restart codes) or EINVAL (the others), never with that value; the
#   log line has the value.
# - A successful patch, stacked patch, replace and unpatch run the hooks
#   in the documented order (replace: the old patches newest first, then
#   the new one; pre, stop, post in turn).
# - Pre and post hooks run in process context (they sleep and allocate),
#   stop and undo hooks with interrupts off: kpatch_test_hooks counts
#   every call in the wrong context ("errors").
# - The patches file lists a patch's hooks after its functions, in enum
#   order, 4 fields.  A module with a hook is pinned while the patch is
#   enabled, by kpatch alone (the patch module takes no symbol of it).
# - A bad hook is refused by kpatch_register() with EINVAL and a log line:
#   one in vmlinux ("not in a module"), in kpatch itself, not at the start
#   of a function, in module data, in a module that is gone or going
#   away; on a kernel with Indirect Branch Tracking one without ENDBR (an
#   indirect call of it would fault), elsewhere such a hook runs.
# - kpatch_register() with hooks: a veto or a stop hook failure returns
#   the errno and leaves the structures byte-identical; a hook in __init
#   text is refused, and so is a struct kpatch_module in __initdata (the
#   log says why, in one line); a funcs array in __initdata is accepted
#   (kpatch copies the functions): the patch applies with its hooks, and
#   comes out like any other.
# - A pre-patch hook that takes its time holds kpatch's mutex, but not
#   the module loader: while it waits (in the insmod of its patch
#   module), the rmmod of a module kpatch does not pin, the insmod of a
#   module whose init fails (kpatch_test_coming go=2) and that of a
#   module whose load fails before its init, on a bad parameter value
#   (kpatch_test_coming go=x: the loader still holds its own reference in
#   that GOING notification) all return; then the hook goes on and the
#   patch applies.
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
A=kpatch_test_patch_a
B=kpatch_test_patch_b
C=kpatch_test_patch_c

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
# to the parameters of a patch module giving all eight hooks
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
kreg=$(sym kpatch_register kpatch) || bail "setup: find kpatch_register"

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

# errno_num NAME: the (negative) number of errno NAME, as a module logs it
errno_num() {
	case $1 in
	EINTR) echo -4 ;;
	EIO) echo -5 ;;
	EACCES) echo -13 ;;
	EINVAL) echo -22 ;;
	ECANCELED) echo -125 ;;
	*) echo "(errno_num: $1?)" ;;
	esac
}

# expect_load MOD PARAM...: assert that insmod MOD PARAM... succeeds: the
# patch module registered its patch
expect_load() {
	_el_mod=$1
	shift
	if load_mod "$_el_mod" "$@"; then
		ok "insmod $_el_mod -> loaded"
	else
		not_ok "insmod $_el_mod -> loaded"
		diag "kernel log:" "$(log_since_mark | tail -n 5)"
		return 1
	fi
}

# expect_unload MOD: assert that rmmod MOD succeeds
expect_unload() {
	check "rmmod $1" unload_mod "$1"
}

# load_refused ERR MOD PARAM...: insmod MOD PARAM... fails, as
# kpatch_register() returned ERR (a negative errno number); the patch
# module found its structures intact, is not loaded, and nothing changed.
# Should it load after all, its patch is removed again.
#
# A refused init runs twice: when finit_module() fails, busybox's insmod
# tries init_module() with the same file.  So every hook call and log
# line of a refused insmod comes twice, the second try as the first.
load_refused() {
	_lr_err=$1
	_lr_mod=$2
	shift 2
	save_state
	check_not "insmod $_lr_mod -> refused" load_mod "$_lr_mod" "$@"
	_lr_log=$(log_since_mark)
	check_grep "kpatch_register() returned $_lr_err" \
		"$_lr_mod: kpatch_register[(][)] failed: $_lr_err\$" "$_lr_log"
	check_grep "the structures are intact" \
		"$_lr_mod: structures intact after failed register [(]err ${_lr_err}[)]\$" \
		"$_lr_log"
	check_state_unchanged
	if mod_loaded "$_lr_mod"; then
		diag "undoing the accepted insmod"
		kp unpatch "$_lr_mod" >/dev/null
		unload_mod "$_lr_mod" >/dev/null
	fi
}

# ------------------------------------------------------------- success --

start_test "patch with all hooks"
log_mark
# shellcheck disable=SC2086 # ALL: several words
expect_load "$A" old="$f" new="$f1" $ALL
check_eq "A in effect" 101 "$(value)"
check_hooks "hooks ran: pre, stop, post" "pre-patch $A" "stop-patch $A" "post-patch $A"
check_patches_nl "patches file: the function, then the hooks in enum order" \
	"$(fline "$A" 1 "$f1" active; all_hlines "$A")"
check_sysfs_patches "sysfs directory $A" "$A"
check_context
check_no_splat

start_test "stacked patch with all hooks"
log_mark
# the hooks given in another order than enum kpatch_hook's: the same patch
expect_load "$B" post-unpatch="$h_post_unpatch" stop-patch="$h_stop_patch" \
	old="$f" pre-unpatch="$h_pre_unpatch" pre-patch="$h_pre_patch" \
	undo-unpatch="$h_undo_unpatch" new="$f2" post-patch="$h_post_patch" \
	stop-unpatch="$h_stop_unpatch" undo-patch="$h_undo_patch"
check_eq "B in effect" 102 "$(value)"
check_hooks "only B's hooks ran: pre, stop, post" \
	"pre-patch $B" "stop-patch $B" "post-patch $B"
check_patches_nl "patches file: A (shadowed) and B with their hooks" \
	"$(fline "$A" 1 "$f1" shadowed; all_hlines "$A"
	   fline "$B" 2 "$f2" active; all_hlines "$B")"
check_context
check_no_splat

# --------------------------------------------------------------- vetoes --

# veto DESC FAIL ERRNO CMD KPLOG LINE...: with "fail" FAIL the command CMD
# fails with ERRNO and changes nothing; kpatch logs KPLOG (ERE); the hook
# calls are LINE...  CMD is "insmod MOD PARAM..." (a patch module's
# kpatch_register() returns the errno) or a control file command.
veto() {
	start_test "$1"
	hooks_fail "$2"
	log_mark
	_v_kplog=$5
	case $4 in
	"insmod "*)
		# shellcheck disable=SC2086 # the words of the command
		load_refused "$(errno_num "$3")" ${4#insmod }
		shift 5
		# twice: see load_refused
		set -- "$@" "$@"
		;;
	*)
		expect_refused "$3" "$4"
		shift 5
		;;
	esac
	check_eq "value unchanged" 102 "$(value)"
	check_hooks "hook calls" "$@"
	check_kplog "kpatch logs the refusal" "$_v_kplog"
	hooks_fail none
	check_context
}

# the patch C: f -> f3 with all hooks; PATCH_C patches, REPLACE_C replaces
PATCH_C="insmod $C old=$f new=$f3 $ALL"
REPLACE_C="insmod $C replace=1 old=$f new=$f3 $ALL"

veto "veto from pre-patch" "pre-patch $C -13" EACCES "$PATCH_C" \
	"patch '$C' refused: pre-patch hook of '$C' returned -13" \
	"pre-patch $C returns -13"

veto "veto from pre-patch with a positive value" "pre-patch $C 1" EINVAL \
	"$PATCH_C" \
	"patch '$C' refused: pre-patch hook of '$C' returned (1|-22)" \
	"pre-patch $C returns 1"

veto "veto from pre-unpatch" "pre-unpatch $B -125" ECANCELED \
	"unpatch $B" \
	"unpatch '$B' refused: pre-unpatch hook of '$B' returned -125" \
	"pre-unpatch $B returns -125"

veto "replace: veto from the newest old patch's pre-unpatch" "pre-unpatch $B -13" EACCES \
	"$REPLACE_C" \
	"replace '$C' refused: pre-unpatch hook of '$B' returned -13" \
	"pre-unpatch $B returns -13"

veto "replace: veto from the older old patch's pre-unpatch" "pre-unpatch $A -125" ECANCELED \
	"$REPLACE_C" \
	"replace '$C' refused: pre-unpatch hook of '$A' returned -125" \
	"pre-unpatch $B" "pre-unpatch $A returns -125" "post-patch $B"

veto "replace: veto from the new patch's pre-patch" "pre-patch $C -13" EACCES \
	"$REPLACE_C" \
	"replace '$C' refused: pre-patch hook of '$C' returned -13" \
	"pre-unpatch $B" "pre-unpatch $A" "pre-patch $C returns -13" \
	"post-patch $A" "post-patch $B"

# ------------------------------------------------- stop hook failures --

veto "stop-patch fails" "stop-patch $C -5" EIO "$PATCH_C" \
	"patch '$C' refused: stop-patch hook of '$C' failed [(]-5[)]; rolled back" \
	"pre-patch $C" "stop-patch $C returns -5" "post-unpatch $C"

veto "stop-unpatch fails" "stop-unpatch $B -5" EIO \
	"unpatch $B" \
	"unpatch '$B' refused: stop-unpatch hook of '$B' failed [(]-5[)]; rolled back" \
	"pre-unpatch $B" "stop-unpatch $B returns -5" "post-patch $B"

veto "replace: the older old patch's stop-unpatch fails" "stop-unpatch $A -5" EIO \
	"$REPLACE_C" \
	"replace '$C' refused: stop-unpatch hook of '$A' failed [(]-5[)]; rolled back" \
	"pre-unpatch $B" "pre-unpatch $A" "pre-patch $C" \
	"stop-unpatch $B" "stop-unpatch $A returns -5" "undo-unpatch $B" \
	"post-unpatch $C" "post-patch $A" "post-patch $B"

veto "replace: the new patch's stop-patch fails" "stop-patch $C -5" EIO \
	"$REPLACE_C" \
	"replace '$C' refused: stop-patch hook of '$C' failed [(]-5[)]; rolled back" \
	"pre-unpatch $B" "pre-unpatch $A" "pre-patch $C" \
	"stop-unpatch $B" "stop-unpatch $A" "stop-patch $C returns -5" \
	"undo-unpatch $A" "undo-unpatch $B" \
	"post-unpatch $C" "post-patch $A" "post-patch $B"

# ------------------------------------------ kernel-internal errnos --

# internal VALUE NAME ERRNO: a pre-patch, a stop-patch and a pre-unpatch
# hook that return VALUE, a kernel-internal errno (NAME), fail
# kpatch_register() (and the insmod) or the unpatch with ERRNO: such
# values must not reach user space (the restart codes become EINTR, the
# others EINVAL).  kpatch's log line has the value the hook returned.
internal() {
	_in_err=$(errno_num "$3")
	veto "pre-patch returns $1 ($2)" "pre-patch $C $1" "$3" "$PATCH_C" \
		"patch '$C' refused: pre-patch hook of '$C' returned $1" \
		"pre-patch $C returns $1"
	check_transcript "kpatch's log line has the hook's value" "$C" <<EOF
% insmod $C.ko old=$f new=$f3 $ALL
kpatch: patch '$C' refused: pre-patch hook of '$C' returned $1
$C: kpatch_register() failed: $_in_err
$C: structures intact after failed register (err $_in_err)
kpatch: patch '$C' refused: pre-patch hook of '$C' returned $1
$C: kpatch_register() failed: $_in_err
$C: structures intact after failed register (err $_in_err)
% echo none > /sys/module/kpatch_test_hooks/parameters/fail
EOF
	veto "stop-patch returns $1 ($2)" "stop-patch $C $1" "$3" "$PATCH_C" \
		"patch '$C' refused: stop-patch hook of '$C' failed [(]$1[)]; rolled back" \
		"pre-patch $C" "stop-patch $C returns $1" "post-unpatch $C"
	check_transcript "kpatch's log line has the hook's value" "$C" <<EOF
% insmod $C.ko old=$f new=$f3 $ALL
kpatch: patch '$C' refused: stop-patch hook of '$C' failed ($1); rolled back
$C: kpatch_register() failed: $_in_err
$C: structures intact after failed register (err $_in_err)
kpatch: patch '$C' refused: stop-patch hook of '$C' failed ($1); rolled back
$C: kpatch_register() failed: $_in_err
$C: structures intact after failed register (err $_in_err)
% echo none > /sys/module/kpatch_test_hooks/parameters/fail
EOF
	veto "pre-unpatch returns $1 ($2)" "pre-unpatch $B $1" "$3" \
		"unpatch $B" \
		"unpatch '$B' refused: pre-unpatch hook of '$B' returned $1" \
		"pre-unpatch $B returns $1"
	check_transcript "kpatch's log line has the hook's value" <<EOF
% echo 'unpatch $B' > control
kpatch: unpatch '$B' refused: pre-unpatch hook of '$B' returned $1
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
# shellcheck disable=SC2086 # ALL: several words
expect_load "$C" replace=1 old="$f" new="$f3" $ALL
check_eq "C in effect" 103 "$(value)"
check_hooks "hooks ran: old patches newest first, then the new one" \
	"pre-unpatch $B" "pre-unpatch $A" "pre-patch $C" \
	"stop-unpatch $B" "stop-unpatch $A" "stop-patch $C" \
	"post-unpatch $B" "post-unpatch $A" "post-patch $C"
check_patches_nl "only C is listed" "$(fline "$C" 3 "$f3" active; all_hlines "$C")"
check_sysfs_patches "only C in sysfs" "$C"
expect_unload "$A"
expect_unload "$B"
check_context
check_no_splat

start_test "unpatch with hooks"
log_mark
expect_ok unpatch "$C"
check_eq "original function back" 100 "$(value)"
check_hooks "hooks ran: pre, stop, post" \
	"pre-unpatch $C" "stop-unpatch $C" "post-unpatch $C"
check_patches "patches file empty"
expect_unload "$C"
check_context
check_no_splat

start_test "the return value of a post hook is ignored"
hooks_fail "post-patch $A -5"
log_mark
expect_load "$A" old="$f" new="$f1" post-patch="$h_post_patch"
check_eq "A in effect" 101 "$(value)"
check_hooks "the post-patch hook ran" "post-patch $A returns -5"
check_patches "one hook line" "$(fline "$A" 1 "$f1" active)" "$(hline "$A" post-patch)"
hooks_fail none
expect_ok unpatch "$A"
expect_unload "$A"
check_no_splat

start_test "a reference on the patch's directory outlives its unpatch"
log_mark
set_param kpatch_test_hooks keep_dir 1
expect_load "$A" old="$f" new="$f1" post-patch="$h_post_patch"
expect_ok unpatch "$A"
check "the directory goes with the patch" test ! -e "$KP_SYSFS_PATCHES/$A"
expect_unload "$A"
expect_load "$A" old="$f" new="$f2" post-patch="$h_post_patch"
check_eq "A in effect again" 102 "$(value)"
expect_ok unpatch "$A"
expect_unload "$A"
set_param kpatch_test_hooks keep_dir 0
check_transcript "the name is free at once: enabled, removed, twice" kpatch_test_hooks "$A" <<EOF
% echo 1 > /sys/module/kpatch_test_hooks/parameters/keep_dir
% insmod $A.ko old=$f new=$f1 post-patch=$h_post_patch
kpatch: patch '$A' enabled (1 function)
kpatch_test_hooks: keep_dir: a reference on patches/$A
kpatch_test_hooks: post-patch $A
% echo 'unpatch $A' > control
kpatch: patch '$A' removed
% rmmod $A
% insmod $A.ko old=$f new=$f2 post-patch=$h_post_patch
kpatch: patch '$A' enabled (1 function)
kpatch_test_hooks: post-patch $A
% echo 'unpatch $A' > control
kpatch: patch '$A' removed
% rmmod $A
% echo 0 > /sys/module/kpatch_test_hooks/parameters/keep_dir
EOF
check_no_splat

# -------------------------------------------------------------- pinning --

# The patch module takes no symbol of kpatch_test_hooks: what keeps
# kpatch_test_hooks loaded is kpatch's pin on the module of a hook.
start_test "a hook module is pinned while the patch is enabled"
log_mark
refs=$(awk '$1 == "kpatch_test_hooks" { print $3 }' /proc/modules)
expect_load "$A" old="$a" new="$a1" pre-patch="$h_pre_patch" post-unpatch="$h_post_unpatch"
check_eq "A in effect" "a=11 b=2" "$(target_values)"
check_not "rmmod kpatch_test_hooks refused" unload_mod kpatch_test_hooks
check "kpatch_test_hooks still loaded" mod_loaded kpatch_test_hooks
check_patches "A still listed, with its hooks" \
	"$(pline "$A" kpatch_test_target:kpatch_test_value_a "$a" \
		kpatch_test_new:kpatch_test_value_a_v1 "$a1" active)" \
	"$(hline "$A" pre-patch)" "$(hline "$A" post-unpatch)"
expect_ok unpatch "$A"
check_hooks "A's hooks ran" "pre-patch $A" "post-unpatch $A"
check_eq "reference count of kpatch_test_hooks as before" "$refs" \
	"$(awk '$1 == "kpatch_test_hooks" { print $3 }' /proc/modules)"
check "rmmod kpatch_test_hooks succeeds after unpatch, $A still loaded" \
	unload_mod kpatch_test_hooks
expect_unload "$A"
check_no_splat

# ------------------------------------------------------------ bad hooks --

start_test "bad hooks: setup"
setup_modules kpatch_test_hooks
load_mod kpatch_test_going exit_delay_ms=8000 || bail "setup: load kpatch_test_going"
hook_syms
gfn=$(sym kpatch_test_going_fn kpatch_test_going) || bail "setup: find kpatch_test_going_fn"
# the patch "base", with a hook, enabled while the bad ones are refused
load_mod "$B" old="$f" new="$f1" pre-unpatch="$h_pre_unpatch" ||
	bail "setup: insmod $B (base)"
# a function of a module that is gone, for a patch module loaded before
# it went (C registers when told to): no module loaded since can take
# the place of that function
gone=$(sym kpatch_test_value_a_v2 kpatch_test_new) || bail "setup: find kpatch_test_value_a_v2"
load_mod "$C" defer=1 old="$f" new="$f2" pre-patch="$gone" ||
	bail "setup: insmod $C defer=1"
unload_mod kpatch_test_new || bail "setup: rmmod kpatch_test_new"

start_test "hook in a module that is gone"
log_mark
save_state
if set_param "$C" enable 1 2>"$KP_TMP/enable.err"; then
	not_ok "kpatch_register() refused: echo 1 > enable fails"
else
	ok "kpatch_register() refused: echo 1 > enable fails"
fi
diag "$(cat "$KP_TMP/enable.err")"
check_state_unchanged
check_hooks "no hook ran"
check_kplog "kpatch logs why" "$C: pre-patch hook $(echo "$gone" | sed 's/^0*//')"
check_grep "kpatch_register() returned -22" \
	"$C: kpatch_register[(][)] failed: -22\$" "$KP_LOG"
check_grep "the structures are intact" \
	"$C: structures intact after failed register [(]err -22[)]\$" "$KP_LOG"
check "rmmod $C" unload_mod "$C"

# bad DESC ERE PARAM...: the patch module A with PARAM... (and f -> f1) is
# refused (EINVAL) and kpatch logs a line matching ERE; no hook runs
bad() {
	start_test "$1"
	_b_re=$2
	shift 2
	log_mark
	load_refused -22 "$A" old="$f" new="$f1" "$@"
	check_hooks "no hook ran"
	check_kplog "kpatch logs why" "$_b_re"
}

bad "hook in vmlinux" "$A: pre-patch hook .*is not in a module" \
	pre-patch="$cmd"
bad "hook in the middle of a function" "$A: stop-patch hook .*is not the start of a function" \
	stop-patch="$(addr_add "$h_stop_patch" 1)"
bad "hook address is module data" "$A: post-patch hook .*is not .*text" \
	post-patch="$tdata"

# kpatch does not call itself as a hook
start_test "a hook is a function of kpatch"
log_mark
load_refused -22 "$A" old="$f" new="$f1" pre-patch="$kreg"
kreg_log=$(echo "$kreg" | sed 's/^0*//')
check_transcript "the log says why (twice: see load_refused)" "$A" <<EOF
% insmod $A.ko old=$f new=$f1 pre-patch=$kreg
kpatch: $A: pre-patch hook $kreg_log (kpatch_register) is in kpatch itself
$A: kpatch_register() failed: -22
$A: structures intact after failed register (err -22)
kpatch: $A: pre-patch hook $kreg_log (kpatch_register) is in kpatch itself
$A: kpatch_register() failed: -22
$A: structures intact after failed register (err -22)
EOF

# kpatch_test_hooks_plain is never called through a pointer: on a kernel
# with Indirect Branch Tracking it has no ENDBR, and an indirect call of
# it would fault; elsewhere it is a hook like any other
plain=$(hsym plain)
[ -n "$plain" ] || bail "setup: find kpatch_test_hooks_plain"
if [ "$(cat "$HP/ibt")" = Y ]; then
	bad "hook without ENDBR (IBT kernel)" \
		"$A: pre-patch hook .*does not start with ENDBR: it cannot be called indirectly" \
		pre-patch="$plain"
else
	start_test "hook without ENDBR where no IBT needs one"
	log_mark
	expect_load "$A" old="$f" new="$f1" pre-patch="$plain"
	check_hooks "it ran as the pre-patch hook" "pre-patch $A"
	check_eq "A in effect" 101 "$(value)"
	expect_ok unpatch "$A"
	expect_unload "$A"
fi

# A module being unloaded cannot be pinned: while kpatch_test_going's exit
# sleeps (initstate "going"), a hook there is refused.
start_test "hook in a module that is going away"
log_mark
rm -f "$KP_TMP/going.rc"
kallsyms_changed
log_command "rmmod kpatch_test_going &"
{
	rmmod kpatch_test_going >/dev/null 2>&1
	echo $? >"$KP_TMP/going.rc"
} &
going_pid=$!
check "kpatch_test_going is going away" \
	wait_until grep -qx going /sys/module/kpatch_test_going/initstate
load_refused -22 "$A" old="$f" new="$f1" pre-patch="$gfn"
check_eq "kpatch_test_going was going away all along" going \
	"$(cat /sys/module/kpatch_test_going/initstate 2>&1)"
check_hooks "no hook ran"
check_kplog "kpatch logs why" \
	"$A: pre-patch hook .*is in module kpatch_test_going, which is going away"
wait "$going_pid"
check_eq "rmmod kpatch_test_going exits 0" 0 "$(cat "$KP_TMP/going.rc")"

start_test "bad hooks: cleanup"
log_mark
expect_ok unpatch "$B"
check_hooks "base's pre-unpatch hook ran" "pre-unpatch $B"
expect_unload "$B"
check_context
check_no_splat

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

# held_start MOD: insmod the patch module MOD (f -> f1, a pre-patch
# hook) in the background, with that pre-patch hook held; fails unless
# the hook then waits (in kpatch_register(), in MOD's init).  What comes
# of the insmod ("OK", or "insmod failed: " and what it printed) goes to
# held.out.
held_start() {
	held_name=$1
	hooks_param hold "pre-patch $held_name"
	rm -f "$KP_TMP/held.out"
	kallsyms_changed
	log_command "insmod $held_name.ko old=$f new=$f1 pre-patch=$h_pre_patch &"
	{
		if insmod "$KPATCH_MODDIR/$held_name.ko" old="$f" new="$f1" 			pre-patch="$h_pre_patch" >"$KP_TMP/held.log" 2>&1; then
			echo OK >"$KP_TMP/held.out"
		else
			echo "insmod failed: $(cat "$KP_TMP/held.log")" >"$KP_TMP/held.out"
		fi
	} &
	held_pid=$!
	wait_until modparam_is kpatch_test_hooks waiting 1
}

# held_alive: does the held hook still wait, its insmod with it?
held_alive() {
	[ -n "$held_pid" ] && [ ! -s "$KP_TMP/held.out" ] &&
		modparam_is kpatch_test_hooks waiting 1
}

# held_finish: let the held hook go and wait for its insmod; the result
# (OK or why not) is then in KP_RESULT
held_finish() {
	[ -n "$held_pid" ] || return 0
	hooks_param proceed 1
	wait "$held_pid"
	held_pid=
	KP_RESULT=$(cat "$KP_TMP/held.out")
	diag "insmod $held_name: $KP_RESULT"
	kallsyms_changed
	hooks_param hold none
}

# loader_done: has the background command of loader_probe returned?
loader_done() {
	[ -s "$KP_TMP/loader.rc" ]
}

# loader_probe DESC CMD...: while the pre-patch hook of A's patch waits,
# run CMD in the background; ok if it returns within HOLD_SECS seconds,
# and if the hook still waits then.  If CMD is still blocked, the hook is
# let go (and A's patch removed again) so that CMD can finish.  CMD's exit
# status is then in loader_rc, its output in KP_OUT.
loader_probe() {
	_lp_desc=$1
	shift
	if ! held_alive; then
		held_start "$A" || bail "setup: A's patch waits in its pre-patch hook"
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
			"A's patch waits; letting the hook go"
		for _lp_p in $(pidof "$1"); do
			diag "$1 (pid $_lp_p) waits in:" \
				"$(cat "/proc/$_lp_p/stack" 2>&1)"
		done
		held_finish
		wait_until loader_done
		if [ "$KP_RESULT" = OK ]; then
			kp unpatch "$A" >/dev/null
			unload_mod "$A" >/dev/null
		fi
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
check "precondition: A's patch waits in its pre-patch hook" held_start "$A"
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
	held_start "$A" || bail "setup: A's patch waits in its pre-patch hook again"
fi
held_finish
check_eq "let go: insmod A -> OK" OK "$KP_RESULT"
check_eq "A in effect" 101 "$(value)"
check_patches "A listed" "$(fline "$A" 1 "$f1" active)" "$(hline "$A" pre-patch)"
expect_ok unpatch "$A"
expect_unload "$A"
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
	check "precondition: B's patch waits in its pre-patch hook" held_start "$B"
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
	check "the insmod of B returns" wait_until test -s "$KP_TMP/held.out"
	KP_WAIT_TRIES=$tries
	wait "$loader_pid"
	loader_pid=
	check_eq "rmmod kpatch_test_coming exits 0" 0 "$(cat "$KP_TMP/loader.rc")"
	wait "$held_pid"
	held_pid=
	kallsyms_changed
	check_eq "insmod B -> OK" OK "$(cat "$KP_TMP/held.out")"
	check_grep "the hook's register_module_notifier() returned 0" \
		"kpatch_test_hooks: hold: pre-patch $B: register_module_notifier[(][)] returned 0" \
		"$(log_since_mark)"
	hooks_param hold none
	hooks_param notify 0
	expect_ok unpatch "$B"
	expect_unload "$B"
	check "rmmod kpatch_test_notify" unload_mod kpatch_test_notify
	check_context
	check_no_splat
fi
