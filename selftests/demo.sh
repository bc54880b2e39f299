#!/bin/sh
# Live-patch demo, run in the test guest by `testbed.sh demo`: replace the
# kernel's /proc/cmdline handler with one from a test module and back, then
# a patch that adds per-object data (shadow data, freed by a post-unpatch
# hook) from a patch module, showing each command as a user would type it.

failed=0

# Each line below is printed with a "% " prompt, then run in this shell (so
# variables set by one command are seen by the next ones).
while IFS= read -r cmd; do
	case $cmd in
	'' | '#'*)
		echo "$cmd"
		continue
		;;
	esac
	printf '%% %s\n' "$cmd"
	if ! eval "$cmd" </dev/null 2>&1; then
		echo "(command failed)"
		failed=1
	fi
done <<'EOF'
insmod /kpatch/kpatch.ko
insmod /kpatch/test_modules/kpatch_test_new.ko
cat /proc/cmdline

# Find the function to replace and its replacement by name:
old=$(awk '$3 == "cmdline_proc_show" {print $1}' /proc/kallsyms)
new=$(awk '$3 == "kpatch_test_cmdline_v1" {print $1}' /proc/kallsyms)
echo "old=$old new=$new"
echo "patch demo $old $new" > /sys/kernel/debug/kpatch/control
cat /proc/cmdline
cat /sys/kernel/debug/kpatch/patches
cat /proc/sys/kernel/tainted

# Take the patch out again:
echo "unpatch demo" > /sys/kernel/debug/kpatch/control
cat /proc/cmdline
cat /sys/kernel/debug/kpatch/patches
rmmod kpatch_test_new
rmmod kpatch
dmesg | tail -n 6

# A patch that changes data (README.md): a new function that keeps a
# count per object in shadow data, freed by the patch's post-unpatch hook.
# Hooks come with a patch module (kpatch_register()): kpatch_test_patch_a
# takes the function, its replacement and the hook by address, and the
# patch is named after it.
insmod /kpatch/kpatch.ko
insmod /kpatch/test_modules/kpatch_test_shadow.ko
p=/sys/module/kpatch_test_shadow/parameters
old=$(awk '$3 == "kpatch_test_shadow_touch" {print $1}' /proc/kallsyms)
new=$(awk '$3 == "kpatch_test_shadow_touch_new" {print $1}' /proc/kallsyms)
free=$(awk '$3 == "kpatch_test_shadow_post_unpatch" {print $1}' /proc/kallsyms)
insmod /kpatch/test_modules/kpatch_test_patch_a.ko old=$old new=$new post-unpatch=$free
cat /sys/kernel/debug/kpatch/patches
echo 0 > $p/touch; echo 0 > $p/touch; echo 2 > $p/touch
cat $p/values $p/shadow
echo "unpatch kpatch_test_patch_a" > /sys/kernel/debug/kpatch/control
cat $p/values $p/shadow $p/allocs $p/frees
rmmod kpatch_test_patch_a
rmmod kpatch_test_shadow
rmmod kpatch
dmesg | grep -e kpatch_test_shadow -e "kpatch: .*kpatch_test_patch_a"
EOF

exit "$failed"
