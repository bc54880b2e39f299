#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-shadow.sh - a patch that adds a field to a structure as livepatch
# shadow data (Documentation.txt, "Shadow data").  kpatch_test_shadow's
# new function counts its calls per object in a variable from
# klp_shadow_get_or_alloc(); the patch's post-unpatch hook frees them all
# with klp_shadow_free_all().  The patch comes from a patch module,
# kpatch_test_patch_a, given kpatch_test_shadow's functions and hooks by
# address (it takes no symbol of kpatch_test_shadow, so only kpatch pins
# that); it is named after its module.  Checked: the shadow counts are
# there while the patch is enabled and only for the objects the new
# function saw; the hooks show in the patches file and pin the module;
# after unpatch every object's klp_shadow_get() is NULL and the destructor
# ran once per allocation; five more cycles start from fresh variables;
# without the hook the variables stay (so the assertions above can fail);
# the module unloads.  On the debug kernel KASAN (and kmemleak where
# built) watch the frees.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

mod=kpatch_test_shadow
pm=kpatch_test_patch_a
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

# load_pm PARAM...: insmod the patch module with PARAM...: its patch is
# enabled
load_pm() {
	check "insmod $pm: its patch enabled" load_mod "$pm" "$@"
}

start_test "unpatched"
log_mark
touch_objs 0 1 2
check_eq "the old function counts in the objects, no shadow data" \
	"values=1 1 1 shadow=- - - allocs=0 frees=0" "$(counts)"
check_eq "no hook ran" "pre-patch=0 post-unpatch=0 nop=0 veto=0" "$(hooks)"
check_no_splat

start_test "patched: shadow data per object"
log_mark
load_pm old="$old" new="$new" post-unpatch="$post" pre-patch="$pre"
check_eq "pre-patch hook ran once" "pre-patch=1 post-unpatch=0 nop=0 veto=0" \
	"$(hooks)"
check_transcript "pre-patch hook logged" "$mod" "$pm" <<EOF
% insmod $pm.ko old=$old new=$new post-unpatch=$post pre-patch=$pre
kpatch_test_shadow: pre-patch hook of '$pm'
kpatch: tainting kernel with TAINT_LIVEPATCH
kpatch: patch '$pm' enabled (1 function)
EOF
check_patches "patches file: the function, then its hooks in enum order" \
	"$(fline "$pm")" "$(hline "$pm" pre-patch kpatch_test_shadow_pre_patch "$pre")" \
	"$(hline "$pm" post-unpatch kpatch_test_shadow_post_unpatch "$post")"
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
expect_ok unpatch "$pm"
check_eq "post-unpatch hook ran once, pre-patch not again" \
	"pre-patch=1 post-unpatch=1 nop=0 veto=0" "$(hooks)"
check_eq "klp_shadow_get() NULL for every object, 2 freed" \
	"values=4 1 2 shadow=- - - allocs=2 frees=2" "$(counts)"
check "rmmod $pm" unload_mod "$pm"
check_transcript "hook logged what it freed" "$mod" "$pm" <<EOF
% echo 'unpatch $pm' > control
kpatch: patch '$pm' removed
kpatch_test_shadow: post-unpatch hook of '$pm': 2 shadow variable(s) freed
% rmmod $pm
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
	load_mod "$pm" old="$old" new="$new" post-unpatch="$post" ||
		{ cycle_bad=1; diag "cycle $i: insmod $pm failed"; }
	touch_objs 0 1 2 1
	got=$(modparam "$mod" shadow)
	[ "$got" = "1 2 1" ] ||
		{ cycle_bad=1; diag "cycle $i: shadow '$got', expected '1 2 1'"; }
	kp unpatch "$pm" ||
		{ cycle_bad=1; diag "cycle $i: unpatch: $KP_RESULT"; }
	unload_mod "$pm" || { cycle_bad=1; diag "cycle $i: rmmod $pm failed"; }
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
load_pm old="$old" new="$new"
touch_objs 1
expect_ok unpatch "$pm"
check "rmmod $pm" unload_mod "$pm"
check_eq "object 1 keeps its shadow variable" \
	"values=10 13 7 shadow=- 1 - allocs=18 frees=17" "$(counts)"
check_transcript "the log says enabled, then removed, and no hook logged" "$mod" "$pm" <<EOF
% insmod $pm.ko old=$old new=$new
kpatch: patch '$pm' enabled (1 function)
% echo 1 > /sys/module/$mod/parameters/touch
% echo 'unpatch $pm' > control
kpatch: patch '$pm' removed
% rmmod $pm
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
