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
T=/sys/kernel/debug/tracing
EF=$T/enabled_functions
# what "bench api" prints, in kpatch_bench_api_names[]'s order
API="set_filter_ip reg_ops unreg_ops"

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

# released FUNC: no ftrace_ops is on FUNC any more (kpatch releases a
# site in the write that leaves it no entry; the read of its patches file
# is a barrier on its mutex); livepatch cannot take a function that
# kpatch holds
released() {
	w=0
	while [ $w -lt 100 ]; do
		cat "$PATCHES" >/dev/null || fail "cat $PATCHES"
		grep -q "^$1 " "$EF" || return 0
		sleep 0.1
		w=$((w + 1))
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

# settled: kpatch's mutex taken and dropped (a read of its patches file),
# so that enabled_functions shows what the last command left
settled() {
	cat "$PATCHES" >/dev/null || fail "cat $PATCHES"
}

# path_is TEXT WHAT: kpatch_bench_old's enabled_functions entry (its line
# and the next, where ftrace prints what follows it) contains TEXT
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

# part NAME: NAME is among the parts to measure (PARTS of bench.conf)
part() {
	case " $PARTS " in
	*" $1 "*) return 0 ;;
	esac
	return 1
}

# cb: the stop_machine() runs since the last "bench cb", the sum and the
# largest of their windows, and (with "bench walks 1") the stacks they
# checked, of how many tasks, how many times the one checked most:
# ${cb_prefix}_runs, _window, _window_max, _walked, _walked_tasks,
# _walked_most, each with $cb_suffix
cb() {
	# shellcheck disable=SC2046
	set -- $(bench cb)
	say "${cb_prefix}_runs$cb_suffix" "$1"
	say "${cb_prefix}_window$cb_suffix" "$2"
	say "${cb_prefix}_window_max$cb_suffix" "$3"
	[ "$4" -lt 0 ] || say "${cb_prefix}_walked$cb_suffix" "$4"
	[ "$5" -lt 0 ] || say "${cb_prefix}_walked_tasks$cb_suffix" "$5"
	[ "$6" -lt 0 ] || say "${cb_prefix}_walked_most$cb_suffix" "$6"
	[ "$6" -lt 0 ] || echo "# ${cb_prefix}$cb_suffix: the task checked most often: $7"
}

# kp_write NAME CMD: CMD written to the control file in one write(2), its
# stop_machine() runs counted (a "bench cb" just before): NAME_ok,
# NAME_ns, NAME_runs, NAME_window, NAME_window_max, each with $suffix
kp_write() {
	bench cb >/dev/null
	# shellcheck disable=SC2046
	set -- "$1" $(kpbench-hot write $CTL "$2")
	if [ "$2" = OK ]; then
		say "$1_ok$suffix" 1
	else
		say "$1_ok$suffix" 0
		echo "# $1$suffix: $2"
	fi
	say "$1_ns$suffix" "$3"
	cb_prefix=$1
	cb_suffix=$suffix
	cb
	[ "$2" = OK ]
}

# lp_switch NAME ARG...: kpbench-hot ARG... (a livepatch enable or
# disable, until its transition file reads 0): NAME_ok, NAME_ns
lp_switch() {
	what=$1
	shift
	# shellcheck disable=SC2046
	set -- $(kpbench-hot "$@")
	if [ "$1" = OK ]; then
		say "${what}_ok$suffix" 1
		say "${what}_ns$suffix" "$2"
	else
		say "${what}_ok$suffix" 0
		say "${what}_ns$suffix" -1
		echo "# $what$suffix: $*"
	fi
}

# lp_gone NAME: rmmod the livepatch module NAME, once its patch is freed
lp_gone() {
	w=0
	while [ -d "/sys/module/$1" ] && ! rmmod "$1" 2>/dev/null; do
		[ $w -lt 300 ] || { fail "rmmod $1"; return; }
		sleep 0.1
		w=$((w + 1))
	done
}

PARTS="calls apply window busy many"
BUSY_NS="1000 10000"
MANY_NS="1000 10000 50000 100000"
MANY_RUNS=5
# shellcheck source=/dev/null
[ ! -e $K/bench.conf ] || . $K/bench.conf

echo "# guest kernel $(uname -r), $(nproc) cpu(s), $(awk '$1 == "MemTotal:" { print $2 }' /proc/meminfo) KiB, parts: $PARTS"
insmod $K/kpatch.ko || fail "insmod kpatch.ko"
# the loader's count of kpatch.ko, no patch loaded
say kpatch_modules_size "$(awk '$1 == "kpatch" { print $2 }' /proc/modules)"
insmod $K/kpatch_bench.ko || fail "insmod kpatch_bench.ko"

# Word splitting of a command's output into $1 $2 is wanted below.
# shellcheck disable=SC2046
set -- $(bench info)
say sizeof_kpatch_func "$1"
say generated_funcs "$2"
suffix=

# 1. per-call cost, in thousandths of an instruction: kpatch (its own
# IPMODIFY ftrace_ops), a bare IPMODIFY ftrace_ops, livepatch
if part calls; then
	value_is 2 unpatched
	say calls_unpatched "$(bench calls old)"
	say calls_direct_new "$(bench calls new)"

	bench kpatch 1 >/dev/null
	value_is 3 kpatch
	ef_line kpatch
	path_is kpatch_ftrace_handler kpatch
	say calls_kpatch "$(bench calls old)"
	bench kpatch 0 >/dev/null

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
fi

# 2. apply and unpatch latency through the control file
if part apply; then
	for f in 1 10 100; do
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

	# the same again, with kretprobes timing the ftrace calls that make
	# and release the sites (these latencies include the probes' cost)
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

	# memory per patched function: mem_held before and while 1,000 are
	# patched
	sleep 1
	m=$(mem_held)
	bench hold 1000 >/dev/null
	sleep 1
	say mem_f1000_kib $(($(mem_held) - m))
	bench hold 0 >/dev/null
fi

# 3. stop_machine window, kpatch and the seed's check; then with 4000
# tasks and 100 functions, when R of the tasks run between kpatch's
# pre-walk and its stop_machine(): "ran" is how many did
if part window; then
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
fi

# 6 and 7: kpatch_test_move's read, kpatch_test_move_read_old() (its
# replacement _new), patched by kpatch through the control file and by
# livepatch (kpatch_bench_lp_move.ko, the same new function)
MV=/sys/module/kpatch_test_move/parameters
MVREAD=/sys/kernel/debug/kpatch_test_move/read
LPM=kpatch_bench_lp_move
LPMDIR=/sys/kernel/livepatch/$LPM
KPRET=/sys/module/kpatch/parameters/retries
if part busy || part many; then
	insmod $K/kpatch_test_move.ko || fail "insmod kpatch_test_move.ko"
	mold=$(sym kpatch_test_move_read_old)
	mnew=$(sym kpatch_test_move_read_new)
	if [ -z "$mold" ] || [ -z "$mnew" ]; then
		fail "no kpatch_test_move_read_old ($mold) or _new ($mnew)"
	fi
	# for 100,000 threads: pids and threads enough
	echo 4194304 >/proc/sys/kernel/pid_max
	echo 1000000 >/proc/sys/kernel/threads-max
fi

# readers_start N: N kpbench-tasks readers asleep in the read ("hold" 1)
readers_start() {
	echo 1 >$MV/hold
	rm -f /tmp/readers.out
	kpbench-tasks read $MVREAD "$1" >/tmp/readers.out 2>&1 &
	readers=$!
	w=0
	until [ "$(cat $MV/sleeping)" -ge "$1" ]; do
		if ! kill -0 $readers 2>/dev/null || [ $w -ge 6000 ]; then
			fail "readers: $(cat $MV/sleeping) of $1 asleep: $(cat /tmp/readers.out)"
			return 1
		fi
		sleep 0.1
		w=$((w + 1))
	done
}

# readers_end NAME: let the readers go ("hold" 0); NAME_new, NAME_old,
# NAME_error: what they read
readers_end() {
	what=$1
	echo 0 >$MV/hold
	wait $readers
	# shellcheck disable=SC2046
	set -- $(sed -n 's/^new=\([0-9]*\) old=\([0-9]*\) error=\([0-9]*\)$/\1 \2 \3/p' /tmp/readers.out)
	if [ $# -ne 3 ]; then
		fail "readers: $(cat /tmp/readers.out)"
		return
	fi
	say "${what}_new$suffix" "$1"
	say "${what}_old$suffix" "$2"
	say "${what}_error$suffix" "$3"
}

# moved: the tasks kpatch says it moved, from the kernel log since the last
moved() {
	dmesg -c | sed -n 's/.* busy: moving \([0-9]*\) tasks\{0,1\} out of the way.*/\1/p' |
		awk '{ n += $1 } END { print n + 0 }'
}

# 6. busy tasks: N readers asleep in the patched function; one patch
# write with retries=0, then one unpatch (the readers asleep in the new
# function); then livepatch's enable and disable, each until its
# transition reads 0 (livepatch sends its fake signal after ~15 s)
if part busy; then
	echo 0 >$KPRET
	for nt in $BUSY_NS; do
		suffix=_n$nt
		say "busy_n$nt" 1
		dmesg -c >/dev/null
		readers_start "$nt" || continue
		if kp_write busy_kpatch_patch "patch busy$nt $mold $mnew"; then
			say "busy_kpatch_patch_moved$suffix" "$(moved)"
			readers_end busy_kpatch_patch
			readers_start "$nt" || continue
			kp_write busy_kpatch_unpatch "unpatch busy$nt"
			say "busy_kpatch_unpatch_moved$suffix" "$(moved)"
			readers_end busy_kpatch_unpatch
			if grep -q "^busy$nt" $PATCHES; then
				echo "unpatch busy$nt" >$CTL ||
					fail "unpatch busy$nt"
			fi
		else
			say "busy_kpatch_patch_moved$suffix" "$(moved)"
			dmesg | tail -n 5 | sed 's/^/# /'
			readers_end busy_kpatch_patch
		fi
		released kpatch_test_move_read_old
		readers_start "$nt" || continue
		lp_switch busy_lp_enable enable $K/$LPM.ko $LPMDIR "new_addr=0x$mnew"
		readers_end busy_lp_enable
		if [ -d $LPMDIR ]; then
			readers_start "$nt" || continue
			lp_switch busy_lp_disable disable $LPMDIR
			readers_end busy_lp_disable
		fi
		lp_gone $LPM
	done
	echo 3 >$KPRET
	suffix=
fi

# 7. many tasks: N threads asleep in user space (futex), the read's
# function patched and unpatched MANY_RUNS times by kpatch, then enabled
# and disabled by livepatch
if part many; then
	say many_runs "$MANY_RUNS"
	for nt in $MANY_NS; do
		# not a stale "ready": the shell of the & truncates it later
		rm -f /tmp/sleepers.out
		kpbench-tasks sleep "$nt" >/tmp/sleepers.out 2>&1 &
		sleepers=$!
		i=0
		until grep -q '^ready' /tmp/sleepers.out; do
			if ! kill -0 $sleepers 2>/dev/null || [ $i -ge 36000 ]; then
				fail "sleepers $nt: $(cat /tmp/sleepers.out)"
				break
			fi
			sleep 0.1
			i=$((i + 1))
		done
		if ! grep -q '^ready' /tmp/sleepers.out; then
			kill -9 $sleepers 2>/dev/null
			wait $sleepers 2>/dev/null
			continue
		fi
		say "many_n$nt" 1
		say "many_tasks_n$nt" "$(awk '{ split($4, a, "/"); print a[2] }' /proc/loadavg)"
		say "many_memfree_kib_n$nt" "$(awk '$1 == "MemAvailable:" { print $2 }' /proc/meminfo)"
		run=1
		while [ $run -le "$MANY_RUNS" ]; do
			suffix=_n${nt}_r$run
			kp_write many_kpatch_patch "patch many$run $mold $mnew" &&
				kp_write many_kpatch_unpatch "unpatch many$run"
			released kpatch_test_move_read_old
			lp_switch many_lp_enable enable $K/$LPM.ko $LPMDIR "new_addr=0x$mnew"
			if [ -d $LPMDIR ]; then
				lp_switch many_lp_disable disable $LPMDIR
			fi
			lp_gone $LPM
			run=$((run + 1))
		done
		# one more patch and unpatch, untimed: the stacks the callback
		# checked, counted by a kprobe (its cost in the windows)
		suffix=_n$nt
		bench walks 1 >/dev/null
		kp_write many_probed_patch "patch manyp $mold $mnew" &&
			kp_write many_probed_unpatch "unpatch manyp"
		bench walks 0 >/dev/null
		suffix=
		kill -9 $sleepers
		wait $sleepers 2>/dev/null
		echo "# $nt sleepers: $(dmesg -c | grep -cE 'kpatch|livepatch') kernel messages"
	done
fi

rmmod kpatch_bench || fail "rmmod kpatch_bench"
finish
