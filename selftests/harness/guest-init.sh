#!/bin/sh
# /init of the kpatch test guest (busybox ash), packed by testbed.sh.
#
# Kernel cmdline kpatch.mode=test runs /kpatch/selftests/test-*.sh in sorted
# order; kpatch.mode=demo runs /kpatch/selftests/demo.sh; kpatch.mode=lockdown
# (a boot with lockdown=integrity) runs /kpatch/selftests/lockdown.sh.
# Output goes to /dev/ttyS1 (the host's results.log); kernel messages stay
# on the console (ttyS0).  "@@ done" tells the host everything ran; then
# power off.

/bin/busybox --install -s
export PATH=/sbin:/bin:/usr/sbin:/usr/bin HOME=/root TERM=dumb

mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t debugfs debugfs /sys/kernel/debug
mount -t tracefs tracefs /sys/kernel/tracing
mount -t tmpfs tmpfs /tmp

export KPATCH_KO=/kpatch/kpatch.ko
export KPATCH_MODDIR=/kpatch/test_modules
export KPATCH_SELFTESTS=/kpatch/selftests

mode=
read -r cmdline </proc/cmdline
for arg in $cmdline; do
	case $arg in
	kpatch.mode=*) mode=${arg#kpatch.mode=} ;;
	esac
done

# Results channel; fall back to the console if there is no second UART.
if [ -c /dev/ttyS1 ]; then
	stty -F /dev/ttyS1 raw -echo 2>/dev/null
	exec 3>/dev/ttyS1
else
	exec 3>/dev/console
fi
exec >&3 2>&3 </dev/null

# A marker in the console log, so kernel messages can be tied to a script.
mark() {
	echo "kpatch-testbed: $*" >/dev/console
}

# run_script NAME PATH: run one script, stdout+stderr to the results channel.
run_script() {
	mark "running $1"
	echo "# running $1"
	rm -f /tmp/rc /tmp/out
	{
		sh "$2" </dev/null
		echo $? >/tmp/rc
	} 2>&1 | tee /tmp/out
	rc=$(cat /tmp/rc 2>/dev/null || echo 255)
	if [ "$rc" -ne 0 ] && ! grep -qE '^@@ (ok|not ok|skip)( |$)' /tmp/out; then
		echo "@@ not ok $1 exited $rc"
	fi
	mark "finished $1 (exit $rc)"
}

echo "# guest kernel $(uname -r), $(nproc) cpus, mode '$mode'"
case $mode in
test)
	found=0
	for t in /kpatch/selftests/test-*.sh; do
		[ -e "$t" ] || continue
		found=1
		run_script "${t##*/}" "$t"
	done
	[ "$found" = 1 ] || echo "# no test scripts in /kpatch/selftests"
	;;
demo)
	run_script demo.sh /kpatch/selftests/demo.sh
	;;
lockdown)
	run_script lockdown.sh /kpatch/selftests/lockdown.sh
	;;
*)
	echo "@@ not ok kpatch.mode='$mode' is not test, demo or lockdown"
	;;
esac

echo "@@ done"
# Closing the last reference to the UART waits for its output to drain.
exec 3>&- >/dev/console 2>&1
sync
sleep 1
poweroff -f
