#!/bin/sh
# Live-patch demo, run in the test guest by `testbed.sh demo`: replace the
# kernel's /proc/cmdline handler with one from a test module and back, showing
# each command as a user would type it.

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
EOF

exit "$failed"
