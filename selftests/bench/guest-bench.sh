#!/bin/sh
# /init of the kpatch benchmark guests (busybox ash), packed by bench.sh.
#
# The bench guest runs every measurement once; the hot guest, whose
# initramfs has /kpatch/hot.conf, measures a hot function instead (see
# hot_guest below).  Each writes "@@ KEY VALUE" lines to /dev/ttyS1 (the
# host's bench.log or hot.log); "@@ done" ends the run.  Times are guest
# ns, which under -icount shift=0 are guest instructions.  Kernel messages
# stay on the console (ttyS0).

/bin/busybox --install -s
export PATH=/sbin:/bin:/usr/sbin:/usr/bin HOME=/root TERM=dumb
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t debugfs debugfs /sys/kernel/debug
mount -t tmpfs tmpfs /tmp

if [ -c /dev/ttyS1 ]; then
	stty -F /dev/ttyS1 raw -echo 2>/dev/null
	exec 3>/dev/ttyS1
else
	exec 3>/dev/console
fi
exec >&3 2>&3 </dev/null

K=/kpatch
P=/sys/module/kpatch_bench/parameters
CTL=/sys/kernel/debug/kpatch/control
PATCHES=/sys/kernel/debug/kpatch/patches
LP=/sys/kernel/livepatch/kpatch_bench_lp
DIRECT=/sys/module/kpatch/parameters/direct
T=/sys/kernel/debug/tracing
EF=$T/enabled_functions
# 1 where the kernel has ftrace's JMP direct calls (bench.sh reads its
# config): kpatch makes jmp sites there
JMP=$(cat $K/jmp)
# what "bench api" prints, in kpatch_bench_api_names[]'s order
API="set_filter_ip reg_ops unreg_ops reg_direct unreg_direct modify_direct"

say() { echo "@@ $*"; }
fail() { echo "@@ error $*"; }

sym() { awk -v s="$1" '$3 == s { print $1; exit }' /proc/kallsyms; }

# finish: "@@ done", then power off
finish() {
	echo "@@ done"
	exec 3>&- >/dev/console 2>&1
	sync
	sleep 1
	poweroff -f
}

# ---- the hot guest ----
#
# A hot function: patch and unpatch getpid(2) while PROCS processes call
# it (kpmove hot, at NICE), RUNS times, with kpatch and with livepatch in
# turn, under the same load, which runs throughout (PROCS, RUNS and NICE in
# /kpatch/hot.conf).  kpatch's patch is kpatch_test_move_getpid()
# (selftests/test_modules/kpatch_test_move.c), livepatch's the same body
# in kpatch_bench_lp_getpid.ko; both replace __do_sys_getpid, or
# __x64_sys_getpid where the kernel has no __do_sys_getpid.
#
# Per kpatch write: its tries, the stop_machine() runs it made, counted by
# kpatch_test_nmi's "updates" (the hooked kpatch.ko calls its hook at
# KPATCH_TEST_DONE once after each stop_machine() of an update); and the
# write(2)'s duration.  Per livepatch switch: the time from finit_module(2)
# (enable) or the write of 0 to "enabled" (disable) until "transition"
# reads 0; for an enable, also from the call of klp_enable_patch() (the
# module loaded), which kpatch's write has no counterpart of; and its
# tries, the calls of klp_try_complete_transition(): both from kprobe
# events, whose trace clock is then CLOCK_MONOTONIC.  At the end, every
# caller's count of getpid answers that were not its pid.

UPDATES=/sys/module/kpatch_test_nmi/parameters/updates
MOVE=/sys/module/kpatch_test_move/parameters
HLPNAME=kpatch_bench_lp_getpid
HLP=/sys/kernel/livepatch/$HLPNAME

# released FUNC: no ftrace_ops or direct call is on FUNC any more (kpatch
# releases a site of 7.x's from a work item, which a read of its patches
# file runs first); livepatch cannot take a function that kpatch holds
released() {
	n=0
	while [ $n -lt 100 ]; do
		cat "$PATCHES" >/dev/null || fail "cat $PATCHES"
		grep -q "^$1 " "$EF" || return 0
		sleep 0.1
		n=$((n + 1))
	done
	fail "$1 still in $EF: $(grep -A1 "^$1 " "$EF" | tr '\n\t' '  ')"
}

# kpatch_write NAME CMD: write CMD to the control file; NAME_tries_rRUN,
# NAME_ns_rRUN, NAME_ok_rRUN
kpatch_write() {
	u=$(cat $UPDATES)
	# shellcheck disable=SC2046
	set -- "$1" $(kpbench-hot write $CTL "$2")
	say "$1_tries_r$run" $(($(cat $UPDATES) - u))
	say "$1_ns_r$run" "$3"
	if [ "$2" = OK ]; then
		say "$1_ok_r$run" 1
	else
		say "$1_ok_r$run" 0
		echo "# run $run: $1: $2"
	fi
}

# klp_probes: kprobe events on klp_enable_patch() and
# klp_try_complete_transition(), in the group kpbench
klp_probes() {
	echo mono >$T/trace_clock &&
		echo 'p:kpbench/klp_enable klp_enable_patch' >>$T/kprobe_events &&
		echo 'p:kpbench/klp_try klp_try_complete_transition' >>$T/kprobe_events &&
		echo 1 >$T/events/kpbench/enable &&
		echo 1 >$T/tracing_on
}

# klp_events EVENT: the times of the events EVENT in the trace, seconds
klp_events() {
	awk -v e="$1:" '{ for (i = 2; i <= NF; i++) if ($i == e) print $(i - 1) }' $T/trace |
		tr -d :
}

# lp NAME ARG...: kpbench-hot ARG...; NAME_ns_rRUN, NAME_ok_rRUN,
# NAME_tries_rRUN and for an enable NAME_klp_ns_rRUN (from
# klp_enable_patch()); -1 for what is not known
lp() {
	what=$1
	shift
	[ -z "$probes" ] || : >$T/trace
	# shellcheck disable=SC2046
	set -- $(kpbench-hot "$@")
	if [ "$1" = OK ]; then
		say "${what}_ns_r$run" "$2"
		say "${what}_ok_r$run" 1
	else
		say "${what}_ns_r$run" -1
		say "${what}_ok_r$run" 0
		echo "# run $run: $what: $*"
	fi
	if [ -z "$probes" ] || [ "$1" != OK ]; then
		say "${what}_tries_r$run" -1
		say "${what}_klp_ns_r$run" -1
		return
	fi
	say "${what}_tries_r$run" "$(klp_events klp_try | wc -l)"
	t=$(klp_events klp_enable | head -n 1)
	if [ -n "$t" ]; then
		say "${what}_klp_ns_r$run" "$(awk -v e="$3" -v t="$t" 'BEGIN { printf "%.0f", e - t * 1e9 }')"
	else
		say "${what}_klp_ns_r$run" -1
	fi
}

hot_guest() {
	PROCS=40
	RUNS=5
	NICE=0
	ICOUNT=1
	# shellcheck source=/dev/null
	. $K/hot.conf
	echo "# guest kernel $(uname -r), $(nproc) cpu(s), $PROCS processes, $RUNS runs"
	dmesg -c >/dev/null
	insmod $K/kpatch.ko || fail "insmod kpatch.ko (hooked)"
	insmod $K/kpatch_test_nmi.ko || fail "insmod kpatch_test_nmi.ko"
	insmod $K/kpatch_test_move.ko || fail "insmod kpatch_test_move.ko"

	func=__do_sys_getpid
	old=$(sym $func)
	if [ -z "$old" ]; then
		func=__x64_sys_getpid
		old=$(sym $func)
	fi
	new=$(sym kpatch_test_move_getpid)
	if [ -z "$old" ] || [ -z "$new" ]; then
		fail "no getpid ($old) or kpatch_test_move_getpid ($new)"
	fi
	echo "# replaced: $func"
	say hot_procs "$PROCS"
	say hot_runs "$RUNS"
	say hot_cpus "$(nproc)"
	say hot_nice "$NICE"
	say hot_icount "$ICOUNT"
	probes=
	if klp_probes; then
		probes=1
	else
		echo "# no kprobe events on livepatch: its tries are not counted"
	fi

	kpmove hot "$PROCS" /tmp/hot.stop "$NICE" >/tmp/hot.out 2>&1 &
	hot=$!
	sleep 1

	lpcalls=0
	run=1
	while [ $run -le "$RUNS" ]; do
		kpatch_write hot_kpatch_patch "patch hot$run $old $new"
		kpatch_write hot_kpatch_unpatch "unpatch hot$run"
		released $func
		lp hot_lp_enable enable $K/$HLPNAME.ko $HLP "func=$func"
		if [ -d $HLP ]; then
			lp hot_lp_disable disable $HLP
		else
			say "hot_lp_disable_ok_r$run" 0
		fi
		# the kernel log of the run, kept for the record
		dmesg -c | grep -E 'kpatch|livepatch' | sed 's/^/# /'
		if [ -d $HLP ]; then
			echo "# run $run: livepatch's patch is still there: no more runs"
			break
		fi
		if [ -d /sys/module/$HLPNAME ]; then
			lpcalls=$((lpcalls + $(cat /sys/module/$HLPNAME/parameters/calls)))
			n=0
			until rmmod $HLPNAME 2>/dev/null; do
				[ $n -lt 100 ] || { fail "rmmod $HLPNAME"; break; }
				sleep 0.1
				n=$((n + 1))
			done
		fi
		run=$((run + 1))
	done

	: >/tmp/hot.stop
	wait $hot
	echo "# kpmove hot: $(cat /tmp/hot.out)"
	# shellcheck disable=SC2046
	set -- $(sed -n 's/^calls=\([0-9]*\) wrong=\([0-9]*\)$/\1 \2/p' /tmp/hot.out)
	if [ $# -eq 2 ]; then
		say hot_calls "$1"
		say hot_wrong "$2"
	else
		fail "kpmove hot: $(cat /tmp/hot.out)"
	fi
	say hot_kpatch_new_calls "$(cat $MOVE/getpid_calls)"
	say hot_lp_new_calls "$lpcalls"
}

if [ -e $K/hot.conf ]; then
	hot_guest
	finish
fi

# ---- the bench guest ----

# bench CMD...: run a kpatch_bench command, print its result
bench() {
	if echo "$*" >"$P/cmd"; then
		cat "$P/result"
	else
		fail "'$*' failed: $(cat "$P/result")"
		echo -1
	fi
}

# settled: wait for what the last command decided to be in
# enabled_functions: a jmp site becomes a jmp from a work item after the
# command returns, and a read of kpatch's patches file runs it first
settled() {
	cat "$PATCHES" >/dev/null || fail "cat $PATCHES"
}

# path_is TEXT WHAT: kpatch_bench_old's enabled_functions entry (its line
# and the next, where ftrace prints "direct-->...") contains TEXT
path_is() {
	settled
	grep -A1 '^kpatch_bench_old[ 	]' "$EF" | grep -qF -- "$1" ||
		fail "$2: no '$1' for kpatch_bench_old in $EF: $(grep -A1 '^kpatch_bench_old[ 	]' "$EF")"
}

# ef_line WHAT: kpatch_bench_old's enabled_functions entry, to results.log
ef_line() {
	settled
	echo "# $1: $(grep -A1 '^kpatch_bench_old[ 	]' "$EF" | tr '\n\t' '  ')"
}

# say_api PREFIX: the ftrace calls that changed sites since the last one,
# PREFIX_NAME_calls and PREFIX_NAME_ns for each NAME of $API
say_api() {
	p=$1
	# shellcheck disable=SC2046
	set -- $(bench api)
	for n in $API; do
		[ $# -ge 2 ] || { fail "bench api: '$*'"; return; }
		say "${p}_${n}_calls" "$1"
		say "${p}_${n}_ns" "$2"
		shift 2
	done
}

# mem_held: KiB of kernel memory in slabs, vmalloc and per-CPU areas (MemFree
# misses what the page allocator's per-CPU lists hand out)
mem_held() {
	awk '$1 ~ /^(Slab|VmallocUsed|Percpu):$/ { k += $2 } END { print k }' /proc/meminfo
}

value_is() { [ "$(cat "$P/value")" = "$1" ] || fail "value is $(cat "$P/value"), not $1 ($2)"; }

lp_wait() {
	n=0
	while [ "$(cat "$LP/transition" 2>/dev/null)" != 0 ] && [ $n -lt 600 ]; do
		sleep 0.1
		n=$((n + 1))
	done
}


# cmdline NAME NR: "patch NAME" kpatch_bench_old and NR-1 generated pairs
cmdline() {
	printf 'patch %s %s %s' "$1" "$(sym kpatch_bench_old)" "$(sym kpatch_bench_new)"
	awk -v n="$(($2 - 1))" '
		$3 ~ /^kpatch_bench_[fg][0-9][0-9][0-9][0-9]$/ { a[$3] = $1 }
		END {
			for (i = 0; i < n; i++)
				printf " %s %s", a[sprintf("kpatch_bench_f%04d", i)],
					a[sprintf("kpatch_bench_g%04d", i)]
		}' /proc/kallsyms
}

echo "# guest kernel $(uname -r), $(nproc) cpu(s)"
insmod $K/kpatch.ko || fail "insmod kpatch.ko"
# the loader's count of kpatch.ko, no patch loaded
say kpatch_modules_size "$(awk '$1 == "kpatch" { print $2 }' /proc/modules)"
insmod $K/kpatch_bench.ko || fail "insmod kpatch_bench.ko"

# Word splitting of a command's output into $1 $2 is wanted below.
# shellcheck disable=SC2046
set -- $(bench info)
say sizeof_kpatch_func "$1"
say generated_funcs "$2"

# 1. per-call cost, in thousandths of an instruction
value_is 2 unpatched
say calls_unpatched "$(bench calls old)"
say calls_direct_new "$(bench calls new)"

# kpatch's two kinds of site: with direct=Y (the default), a jmp site
# where the kernel has JMP direct calls, else an ftrace_ops site; with
# direct=N an ftrace_ops site everywhere
bench kpatch 1 >/dev/null
value_is 3 kpatch
ef_line "kpatch, direct=Y"
if [ "$JMP" = 1 ]; then
	path_is 'direct(jmp)-->kpatch_bench_new' "kpatch, direct=Y"
else
	path_is kpatch_ftrace_handler "kpatch, direct=Y"
fi
say calls_kpatch "$(bench calls old)"
bench kpatch 0 >/dev/null

echo N >"$DIRECT" || fail "echo N > $DIRECT"
bench kpatch 1 >/dev/null
echo Y >"$DIRECT" || fail "echo Y > $DIRECT"
value_is 3 "kpatch, direct=N"
ef_line "kpatch, direct=N"
path_is kpatch_ftrace_handler "kpatch, direct=N"
say calls_kpatch_ops "$(bench calls old)"
bench kpatch 0 >/dev/null

# a new function at an odd address: a jmp site stays on kpatch's guard,
# the path of every jmp site while an update changes it
bench odd 1 >/dev/null
value_is 3 "kpatch, odd new function"
ef_line "kpatch, odd new function"
if [ "$JMP" = 1 ]; then
	path_is 'direct-->kpatch_guard' "kpatch, odd new function"
else
	path_is kpatch_ftrace_handler "kpatch, odd new function"
fi
say calls_kpatch_guard "$(bench calls old)"
bench odd 0 >/dev/null

bench ftrace 1 >/dev/null
value_is 3 ftrace_ops
say calls_ftrace_ops "$(bench calls old)"
bench ftrace 0 >/dev/null

if insmod $K/kpatch_bench_lp.ko; then
	lp_wait
	value_is 3 livepatch
	say calls_livepatch "$(bench calls old)"
	echo 0 >"$LP/enabled"
	lp_wait
	sleep 1
	rmmod kpatch_bench_lp || fail "rmmod kpatch_bench_lp"
else
	fail "insmod kpatch_bench_lp.ko"
fi
value_is 2 "after livepatch"

# in one patch with 1,000 other functions: all on the shared ftrace_ops
bench pressure 1 >/dev/null
value_is 3 pressure
path_is kpatch_fops_handler pressure
say calls_kpatch_1000 "$(bench calls old)"
bench pressure 0 >/dev/null

# 4. apply and unpatch latency through the control file
for f in 1 100; do
	cmdline "apply$f" "$f" >/tmp/cmd
	echo "unpatch apply$f" >/tmp/uncmd
	# shellcheck disable=SC2046
	set -- $(kpbench-apply "$CTL" /tmp/cmd "$P/value" 3 || echo -1 -1)
	say apply_write_f$f "$1"
	say apply_active_f$f "$2"
	# shellcheck disable=SC2046
	set -- $(kpbench-apply "$CTL" /tmp/uncmd "$P/value" 2 || echo -1 -1)
	say unpatch_write_f$f "$1"
	say unpatch_active_f$f "$2"
done

# the same again, with kretprobes timing the ftrace calls that make,
# move and release the sites (these latencies include the probes' cost)
bench probes 1 >/dev/null
sleep 1
bench api >/dev/null
for f in 1 100; do
	cmdline "apply$f" "$f" >/tmp/cmd
	echo "unpatch apply$f" >/tmp/uncmd
	kpbench-apply "$CTL" /tmp/cmd "$P/value" 3 >/dev/null || fail "apply$f"
	say_api api_apply_f$f
	kpbench-apply "$CTL" /tmp/uncmd "$P/value" 2 >/dev/null || fail "unpatch apply$f"
	say_api api_unpatch_f$f
done
bench hold 1000 >/dev/null
say_api api_register_f1000
bench hold 0 >/dev/null
say_api api_unregister_f1000
bench probes 0 >/dev/null

# memory per patched function: mem_held before and while 1,000 are patched
# (with direct=Y, and where that makes jmp sites, with direct=N too)
sleep 1
m=$(mem_held)
bench hold 1000 >/dev/null
sleep 1
say mem_f1000_kib $(($(mem_held) - m))
bench hold 0 >/dev/null
if [ "$JMP" = 1 ]; then
	echo N >"$DIRECT" || fail "echo N > $DIRECT"
	sleep 1
	m=$(mem_held)
	bench hold 1000 >/dev/null
	sleep 1
	say mem_ops_f1000_kib $(($(mem_held) - m))
	bench hold 0 >/dev/null
	echo Y >"$DIRECT" || fail "echo Y > $DIRECT"
fi

# 2. stop_machine window, kpatch and the seed's check
for t in 100 1000 4000; do
	bench tasks $t >/dev/null
	for f in 1 100 1000; do
		# shellcheck disable=SC2046
		set -- $(bench window $f)
		say window_kpatch_t${t}_f$f "$1"
		say register_kpatch_t${t}_f$f "$2"
		say window_seed_t${t}_f$f "$(bench seed $f)"
	done
done

# 3. the same with 4000 tasks and 100 functions, when R of the tasks run
# between kpatch's pre-walk and its stop_machine(); "ran" is how many did
for r in 1 10 100 1000; do
	bench ran $r >/dev/null
	# shellcheck disable=SC2046
	set -- $(bench window 100)
	say window_ran_r$r "$1"
	say register_ran_r$r "$2"
	say ran_r$r "$3"
done
bench ran 0 >/dev/null
bench tasks 0 >/dev/null

rmmod kpatch_bench || fail "rmmod kpatch_bench"
finish
