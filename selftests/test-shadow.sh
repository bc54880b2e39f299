#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-shadow.sh - a patch that adds a field to a structure as livepatch
# shadow data (Documentation.txt, "Shadow data").  kpatch_test_shadow's
# new function counts its calls per object in a variable from
# klp_shadow_get_or_alloc(); the patch's post-unpatch hook frees them all
# with klp_shadow_free_all().  Checked: the shadow counts are there while
# the patch is enabled and only for the objects the new function saw; the
# hooks show in the patches file and pin the module; after unpatch every
# object's klp_shadow_get() is NULL and the destructor ran once per
# allocation; five more cycles start from fresh variables; a dry run
# (check) runs no hook and allocates nothing; without the hook the
# variables stay (so the assertions above can fail); the module unloads.
# On the debug kernel KASAN (and kmemleak where built) watch the frees.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

mod=kpatch_test_shadow
setup_modules kpatch "$mod"
old=$(sym kpatch_test_shadow_touch "$mod") || bail "setup: find kpatch_test_shadow_touch"
new=$(sym kpatch_test_shadow_touch_new "$mod") || bail "setup: find kpatch_test_shadow_touch_new"
pre=$(sym kpatch_test_shadow_pre_patch "$mod") || bail "setup: find kpatch_test_shadow_pre_patch"
post=$(sym kpatch_test_shadow_post_unpatch "$mod") || bail "setup: find kpatch_test_shadow_post_unpatch"

# touch I...: call the module's function on object I, for each I
touch_objs() {
	for _to_i in "$@"; do
		set_param "$mod" touch "$_to_i" || diag "touch $_to_i failed"
	done
}

# counts: "values=V0 V1 V2 shadow=S0 S1 S2 allocs=A frees=F"
counts() {
	printf 'values=%s shadow=%s allocs=%s frees=%s' \
		"$(modparam "$mod" values)" "$(modparam "$mod" shadow)" \
		"$(modparam "$mod" allocs)" "$(modparam "$mod" frees)"
}

hooks() {
	modparam "$mod" hooks
}

# hline NAME HOOK SYMBOL ADDR: an ERE for a hook line of the patches file
hline() {
	printf '^%s %s %s:%s([+]0x[0-9a-f]+)? %s$\n' "$1" "$2" "$mod" "$3" "$4"
}

fline() {
	pline "$1" "$mod:kpatch_test_shadow_touch" "$old" \
		"$mod:kpatch_test_shadow_touch_new" "$new" active
}

start_test "unpatched"
log_mark
touch_objs 0 1
check_eq "the old function counts in the objects, no shadow data" \
	"values=1 1 0 shadow=- - - allocs=0 frees=0" "$(counts)"
check_no_splat

start_test "dry run"
log_mark
save_state
expect_ok check patch s0 "$old" "$new" "pre-patch=$pre" "post-unpatch=$post"
check_state_unchanged
check_eq "check file: would apply" "patch s0 0" \
	"$(head -n 1 "$KP_DEBUGFS/check" 2>&1)"
check_eq "no hook ran" "pre-patch=0 post-unpatch=0 nop=0 veto=0" "$(hooks)"
check_transcript "the log says it would apply, and no hook logged" "$mod" <<EOF
% echo 'check patch s0 $old $new pre-patch=$pre post-unpatch=$post' > control
kpatch: check patch 's0': would apply now
EOF
touch_objs 2
check_eq "the old function still runs" \
	"values=1 1 1 shadow=- - - allocs=0 frees=0" "$(counts)"
check_no_splat

start_test "patched: shadow data per object"
log_mark
expect_ok patch s1 "$old" "$new" "post-unpatch=$post" "pre-patch=$pre"
check_eq "pre-patch hook ran once" "pre-patch=1 post-unpatch=0 nop=0 veto=0" \
	"$(hooks)"
check_transcript "pre-patch hook logged" "$mod" <<EOF
% echo 'patch s1 $old $new post-unpatch=$post pre-patch=$pre' > control
kpatch_test_shadow: pre-patch hook of 's1'
kpatch: tainting kernel with TAINT_LIVEPATCH
kpatch: patch 's1' enabled (1 function)
EOF
check_patches "patches file: the function, then its hooks in enum order" \
	"$(fline s1)" "$(hline s1 pre-patch kpatch_test_shadow_pre_patch "$pre")" \
	"$(hline s1 post-unpatch kpatch_test_shadow_post_unpatch "$post")"
check_eq "nothing allocated before the new function runs" \
	"values=1 1 1 shadow=- - - allocs=0 frees=0" "$(counts)"
touch_objs 0 0 2 0
check_eq "shadow counts for objects 0 and 2 only" \
	"values=4 1 2 shadow=3 - 1 allocs=2 frees=0" "$(counts)"
check_not "$mod cannot be unloaded while the patch needs it" unload_mod "$mod"
check "$mod still loaded" mod_loaded "$mod"
check_no_splat

start_test "unpatch: the post-unpatch hook frees every shadow variable"
log_mark
expect_ok unpatch s1
check_eq "post-unpatch hook ran once, pre-patch not again" \
	"pre-patch=1 post-unpatch=1 nop=0 veto=0" "$(hooks)"
check_eq "klp_shadow_get() NULL for every object, 2 freed" \
	"values=4 1 2 shadow=- - - allocs=2 frees=2" "$(counts)"
check_transcript "hook logged what it freed" "$mod" <<EOF
% echo 'unpatch s1' > control
kpatch: patch 's1' removed
kpatch_test_shadow: post-unpatch hook of 's1': 2 shadow variable(s) freed
EOF
touch_objs 0 1
check_eq "the old function runs again, no new shadow data" \
	"values=5 2 2 shadow=- - - allocs=2 frees=2" "$(counts)"
check_patches "patches file empty"
check_no_splat

start_test "five more patch/unpatch cycles"
log_mark
cycle_bad=0
i=1
while [ "$i" -le 5 ]; do
	kp patch "s$((i + 1))" "$old" "$new" "post-unpatch=$post" ||
		{ cycle_bad=1; diag "cycle $i: patch: $KP_RESULT"; }
	touch_objs 0 1 2 1
	got=$(modparam "$mod" shadow)
	[ "$got" = "1 2 1" ] ||
		{ cycle_bad=1; diag "cycle $i: shadow '$got', expected '1 2 1'"; }
	kp unpatch "s$((i + 1))" ||
		{ cycle_bad=1; diag "cycle $i: unpatch: $KP_RESULT"; }
	got=$(modparam "$mod" shadow)
	[ "$got" = "- - -" ] ||
		{ cycle_bad=1; diag "cycle $i: after unpatch shadow '$got'"; }
	i=$((i + 1))
done
check_eq "every cycle fresh shadow variables, all freed" 0 "$cycle_bad"
check_eq "17 allocated, 17 freed" \
	"values=10 12 7 shadow=- - - allocs=17 frees=17" "$(counts)"
check_eq "post-unpatch hook ran once per cycle" \
	"pre-patch=1 post-unpatch=6 nop=0 veto=0" "$(hooks)"
check_no_splat

start_test "without the post-unpatch hook the shadow data stays"
log_mark
expect_ok patch s9 "$old" "$new"
touch_objs 1
expect_ok unpatch s9
check_eq "object 1 keeps its shadow variable" \
	"values=10 13 7 shadow=- 1 - allocs=18 frees=17" "$(counts)"
check_transcript "the log says enabled, then removed, and no hook logged" "$mod" <<EOF
% echo 'patch s9 $old $new' > control
kpatch: patch 's9' enabled (1 function)
% echo 1 > /sys/module/$mod/parameters/touch
% echo 'unpatch s9' > control
kpatch: patch 's9' removed
EOF
check_no_splat

start_test "unload"
log_mark
if [ -w /sys/kernel/debug/kmemleak ]; then
	echo scan >/sys/kernel/debug/kmemleak
	check_no_grep "kmemleak: nothing from $mod" "$mod|klp_shadow" \
		"$(cat /sys/kernel/debug/kmemleak)"
else
	skip "kmemleak: not built into this kernel"
fi
check "rmmod $mod (its exit frees what is left)" unload_mod "$mod"
check_no_splat
