#!/bin/bash
# Host side of `make bench`: measure kpatch in QEMU guests under icount.
#
#   bench.sh [KVER...]    every kernel of the test bed by default but the
#                         debug kernel; on the PREEMPT_RT one only the hot
#                         function (below)
#
# For each kernel: build kpatch.ko, plain and hooked, its test modules and
# kpmove (testbed.sh build), and the bench modules (kpatch_bench.ko with
# gen-funcs.sh's generated functions, kpatch_bench_lp.ko,
# kpatch_bench_lp_getpid.ko, kpatch_bench_lp_move.ko) and tools
# (kpbench-apply, kpbench-hot, kpbench-tasks); then boot two guests, each
# with guest-bench.sh as /init and nokaslr (module addresses, hence
# kpatch's hash chains, stay the same from boot to boot):
#
#   bench  -icount shift=0,sleep=off -smp 1, so that one guest ns is one
#          guest instruction, with the plain kpatch.ko, and 8 GiB of
#          memory (KPATCH_BENCH_MEM): 100,000 threads (the many tasks)
#          take about 3 GiB of kernel memory, a kernel stack and a
#          task_struct each; QEMU gives the guest only the pages it
#          touches.  Every measurement but the hot function's:
#          1. per call of a patched function: kpatch (an IPMODIFY
#             ftrace_ops of its own), a bare IPMODIFY ftrace_ops,
#             livepatch;
#          2. apply and unpatch of 1, 10 and 100 functions through the
#             control file, and the ftrace calls they make;
#          3. the stop_machine() window against tasks and functions, and
#             with R tasks running between the pre-walk and the callback;
#          6. busy tasks: N readers (kpbench-tasks read) asleep in
#             kpatch_test_move_read_old(), N = 1,000 and 10,000: one
#             patch write with retries=0 (moving them), the unpatch, and
#             livepatch's enable and disable of the same function;
#          7. many tasks: N threads asleep in user space (kpbench-tasks
#             sleep), N = 1,000 to 100,000: the same function patched and
#             unpatched 5 times, and livepatch's enable and disable;
#   hot    the hot function: getpid(2) patched and unpatched with kpatch
#          and with livepatch in turn while 40 processes call it, 5 runs,
#          with the hooked kpatch.ko, which counts its stop_machine() runs.
#          Under icount too, and with one vCPU by default: with two,
#          QEMU's round-robin TCG makes every cross-CPU call and
#          stop_machine() wait for a turn of the other vCPU, which a real
#          CPU does not; it costs livepatch most (on 6.12-rt, enabling a
#          patch rewrites every cond_resched() call site, a text_poke_bp()
#          and its IPIs each: minutes of guest time).
#
# Then print markdown tables and write $KPATCH_CACHE/bench/<kver>.csv, and
# where kpatch.ko's resident size is above its target (40 KiB), what
# fills it.  At the end, gnuplot (gnuplot-nox, installed first if missing)
# draws $KPATCH_CACHE/bench/window.png (stop_machine window vs tasks, and
# vs the tasks that ran between kpatch's pre-walk and its stop_machine())
# and many.png (the many tasks: times and window against the threads).
#
# First, on the host: kpbench-model.c, a model of the CPU rather than a
# measurement of the kernel (icount knows nothing of branch prediction):
# user-space replicas of each redirect, timed with the TSC, pinned to one
# CPU; its table is printed before the guests' and its medians go to
# $KPATCH_CACHE/bench/cpu-model.csv.
#
# Environment:
#   KPATCH_CACHE          cache dir (default /var/cache/kpatch-testbed)
#   KPATCH_BENCH_FUNCS    generated functions (default 1000)
#   KPATCH_BENCH_TIMEOUT  seconds per guest (default 7200)
#   KPATCH_BENCH_MEM      the bench guest's memory (default 8G)
#   KPATCH_BENCH_PARTS    the bench guest's measurements, of "calls apply
#                         window busy many" (default all)
#   KPATCH_BENCH_BUSY, _MANY
#                         the busy tasks' N (default "1000 10000") and the
#                         many tasks' ("1000 10000 50000 100000")
#   KPATCH_BENCH_MANY_RUNS
#                         the many tasks' runs per N (default 5)
#   KPATCH_BENCH_ONLY     "hot": only the hot function's guest, no CPU
#                         model and no plot (the CSV then has only its
#                         figures and kpatch.ko's sizes); "bench": only
#                         the bench guest
#   KPATCH_BENCH_HOT_PROCS, _RUNS, _NICE
#                         the hot function's callers (default 40), runs
#                         (5) and the callers' nice (0)
#   KPATCH_BENCH_HOT_SMP  the hot guest's vCPUs (default 1)
#   KPATCH_BENCH_HOT_ICOUNT
#                         0: the hot guest without icount, its times then
#                         the host's wall clock (default 1)

set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd -P)
TESTBED=$SRC/selftests/harness/testbed.sh
CACHE=${KPATCH_CACHE:-/var/cache/kpatch-testbed}
OUT=$CACHE/bench
NFUNCS=${KPATCH_BENCH_FUNCS:-1000}
TIMEOUT=${KPATCH_BENCH_TIMEOUT:-7200}
ONLY=${KPATCH_BENCH_ONLY:-}
HOT_PROCS=${KPATCH_BENCH_HOT_PROCS:-40}
HOT_RUNS=${KPATCH_BENCH_HOT_RUNS:-5}
HOT_NICE=${KPATCH_BENCH_HOT_NICE:-0}
HOT_SMP=${KPATCH_BENCH_HOT_SMP:-1}
HOT_ICOUNT=${KPATCH_BENCH_HOT_ICOUNT:-1}
BENCH_MEM=${KPATCH_BENCH_MEM:-8G}
PARTS=${KPATCH_BENCH_PARTS:-calls apply window busy many}
BUSY_NS=${KPATCH_BENCH_BUSY:-1000 10000}
MANY_NS=${KPATCH_BENCH_MANY:-1000 10000 50000 100000}
MANY_RUNS=${KPATCH_BENCH_MANY_RUNS:-5}

export LC_ALL=C DEBIAN_FRONTEND=noninteractive

log() { echo "bench: $*" >&2; }
die() { log "error: $*"; exit 1; }

QEMU_PID=
kill_guest() {
	if [[ -n $QEMU_PID ]] && kill -0 "$QEMU_PID" 2>/dev/null; then
		kill "$QEMU_PID" 2>/dev/null || true
		wait "$QEMU_PID" 2>/dev/null || true
	fi
	QEMU_PID=
}
trap kill_guest EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# build KVER DIR: kpatch.ko in DIR/kpatch, bench modules in DIR/bench
build() {
	local kver=$1 dir=$2
	KPATCH_CACHE=$CACHE "$TESTBED" build "$kver" "$dir/kpatch" >"$dir/build.log" 2>&1 ||
		{ tail -n 30 "$dir/build.log" >&2; die "kpatch build for $kver failed"; }
	rm -rf "$dir/bench"
	mkdir -p "$dir/bench"
	cp "$HERE"/Kbuild "$HERE"/*.c "$HERE"/*.h "$dir/bench/"
	rm "$dir/bench/kpbench-apply.c" "$dir/bench/kpbench-hot.c" \
		"$dir/bench/kpbench-model.c" "$dir/bench/kpbench-tasks.c"
	cp "$SRC/kpatch.h" "$dir/"
	"$HERE/gen-funcs.sh" "$NFUNCS" "$dir/bench/kpatch_bench_funcs.c"
	log "building bench modules for $kver"
	KPATCH_CACHE=$CACHE "$TESTBED" kmake "$kver" "$dir" M="$dir/bench" W=1 \
		-j"$(nproc)" KBUILD_EXTRA_SYMBOLS="$dir/kpatch/Module.symvers" modules \
		>"$dir/build-bench.log" 2>&1 ||
		{ tail -n 30 "$dir/build-bench.log" >&2; die "bench build for $kver failed"; }
	if grep -i 'warning:' "$dir/build-bench.log" >&2; then
		die "bench modules for $kver printed warnings (W=1)"
	fi
	gcc -static -O2 -Wall -Werror -o "$dir/kpbench-apply" "$HERE/kpbench-apply.c"
	gcc -static -O2 -Wall -Werror -o "$dir/kpbench-hot" "$HERE/kpbench-hot.c"
	gcc -static -O2 -Wall -Werror -o "$dir/kpbench-tasks" "$HERE/kpbench-tasks.c"
}

# make_initramfs DIR KVER NAME: DIR/NAME.gz, the initramfs of the guest
# NAME, with guest-bench.sh as /init: "bench" (the plain kpatch.ko) or
# "hot" (the hooked kpatch.ko, and hot.conf, which selects the hot
# function's measurement)
make_initramfs() {
	local dir=$1 kver=$2 name=$3 root=$1/initramfs
	rm -rf "$root"
	mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,dev,proc,sys,tmp,root,kpatch}
	if ldd /bin/busybox >/dev/null 2>&1; then die "/bin/busybox is not static"; fi
	cp /bin/busybox "$root/bin/busybox"
	ln -s busybox "$root/bin/sh"
	mknod -m 600 "$root/dev/console" c 5 1
	install -m 755 "$HERE/guest-bench.sh" "$root/init"
	if [[ $name == hot ]]; then
		cp "$dir/kpatch/hooks/kpatch.ko" \
			"$dir/kpatch/hooks/test_modules/kpatch_test_nmi.ko" \
			"$dir/kpatch/test_modules/kpatch_test_move.ko" \
			"$dir/bench/kpatch_bench_lp_getpid.ko" "$root/kpatch/"
		cp "$dir/kpbench-hot" "$dir/kpatch/bin/kpmove" "$root/bin/"
		printf 'PROCS=%d\nRUNS=%d\nNICE=%d\nICOUNT=%d\n' "$HOT_PROCS" "$HOT_RUNS" \
			"$HOT_NICE" "$HOT_ICOUNT" >"$root/kpatch/hot.conf"
	else
		cp "$dir/kpatch/kpatch.ko" "$dir/bench/kpatch_bench.ko" \
			"$dir/bench/kpatch_bench_lp.ko" \
			"$dir/kpatch/test_modules/kpatch_test_move.ko" \
			"$dir/bench/kpatch_bench_lp_move.ko" "$root/kpatch/"
		cp "$dir/kpbench-apply" "$dir/kpbench-hot" "$dir/kpbench-tasks" "$root/bin/"
		printf 'PARTS="%s"\nBUSY_NS="%s"\nMANY_NS="%s"\nMANY_RUNS=%d\n' "$PARTS" \
			"$BUSY_NS" "$MANY_NS" "$MANY_RUNS" >"$root/kpatch/bench.conf"
	fi
	(cd "$root" && find . -print0 | sort -z |
		cpio --null -o -H newc --owner=0:0 --quiet) | gzip -6 >"$dir/$name.gz"
}

# boot KVER DIR NAME SMP ICOUNT MEM: boot KVER with DIR/NAME.gz as its
# initramfs on SMP vCPUs with MEM of memory, under icount if ICOUNT is 1,
# else on the host's clock (round-robin TCG, as testbed.sh runs its
# guests); the guest's results in DIR/NAME.log, its console in
# DIR/NAME-console.log
boot() {
	local kver=$1 dir=$2 name=$3 smp=$4 icount=$5 mem=$6 rc=0 start=$SECONDS
	local log=$dir/$name.log console=$dir/$name-console.log accel
	if ((icount)); then
		accel=(-accel tcg -icount "shift=0,sleep=off")
	else
		accel=(-accel "tcg,thread=single")
	fi
	rm -f "$log" "$console" "$dir/$name-qemu.log"
	log "booting $kver, ${accel[*]}, $smp vCPU(s), $mem (console: $console)"
	timeout -k 10 "$TIMEOUT" qemu-system-x86_64 \
		"${accel[@]}" -cpu max -smp "$smp" -m "$mem" \
		-nographic -monitor none -nic none -no-reboot \
		-serial "file:$console" -serial "file:$log" \
		-kernel "$CACHE/kernels/$kver/vmlinuz" -initrd "$dir/$name.gz" \
		-append "console=ttyS0 panic=-1 oops=panic quiet loglevel=5 nokaslr" \
		</dev/null >"$dir/$name-qemu.log" 2>&1 &
	QEMU_PID=$!
	wait "$QEMU_PID" || rc=$?
	QEMU_PID=
	touch "$log" "$console"
	sed -i 's/\r$//' "$log" "$console"
	log "$kver: guest $name ran $((SECONDS - start))s (qemu rc $rc)"
	if ! grep -qx '@@ done' "$log"; then
		tail -n 40 "$console" >&2
		die "$kver: the guest $name did not finish (qemu rc $rc)"
	fi
	if grep -a '^@@ error' "$log" >&2; then
		die "$kver: a measurement of the guest $name failed"
	fi
}

# need_gnuplot: gnuplot for window.png; installs gnuplot-nox (without X)
# through the test bed, before the guests run, so that it is recorded with
# the packages setup added and `testbed.sh purge` removes it with them
need_gnuplot() {
	command -v gnuplot >/dev/null && return 0
	"$TESTBED" install gnuplot-nox || die "cannot install gnuplot-nox"
	command -v gnuplot >/dev/null || die "gnuplot-nox installed no gnuplot"
}

# model: build kpbench-model with the host's gcc and run it on the last
# CPU, before any guest, so that no guest of this run competes with it
model() {
	local cpu
	if [[ $(uname -m) != x86_64 ]]; then
		log "the host is not x86_64: no CPU model"
		return 0
	fi
	gcc -O2 -no-pie -Wall -Werror -o "$OUT/kpbench-model" "$HERE/kpbench-model.c" ||
		die "kpbench-model.c does not build"
	cpu=$(($(nproc) - 1))
	log "CPU model on CPU $cpu, load average $(cut -d' ' -f1-3 /proc/loadavg)"
	printf '### CPU model (host, user space: a model of the CPU, not a measurement of the kernel)\n\n'
	taskset -c "$cpu" "$OUT/kpbench-model" "$OUT/cpu-model.csv" ||
		die "kpbench-model failed"
	echo
	log "wrote $OUT/cpu-model.csv"
}

# ko_resident KO: "resident code rodata data bss module", bytes of KO's
# allocated sections by what the module loader keeps while the module is
# loaded: all of them but .init* (freed when init returns), .modinfo and
# the symbol versions (__versions, or __version_ext_crcs and _names: the
# loader clears their SHF_ALLOC) and .note*.  "module" is struct module,
# the section .gnu.linkonce.this_module, which the loader keeps too: it is
# in none of the others, nor in "resident".
ko_resident() {
	local name type _a _o size _e flags code=0 rodata=0 data=0 bss=0 module=0
	while read -r name type _a _o size _e flags _; do
		[[ $flags == *A* ]] || continue
		size=$((16#$size))
		case $name in
		.init* | .modinfo | __versions | __version_ext_* | .note*) ;;
		.gnu.linkonce.this_module) module=$((module + size)) ;;
		*)
			if [[ $type == NOBITS ]]; then
				bss=$((bss + size))
			elif [[ $flags == *X* ]]; then
				code=$((code + size))
			elif [[ $flags == *W* ]]; then
				data=$((data + size))
			else
				rodata=$((rodata + size))
			fi
			;;
		esac
	done < <(readelf -SW "$1" | sed -n 's/^ *\[ *[0-9]*\] //p')
	echo "$((code + rodata + data + bss)) $code $rodata $data $bss $module"
}

# ko_detail KO: if KO's resident size (ko_resident) is above the target of
# 40 KiB, what fills it: its kept sections by size, and its 10 biggest
# functions (nm -S --size-sort)
ko_detail() {
	local resident name type _a _o size _e flags _
	read -r resident _ < <(ko_resident "$1")
	((resident > 40960)) || return 0
	printf 'kpatch.ko is %d bytes above the target of 40,960. Its resident sections:\n\n' \
		$((resident - 40960))
	echo "| section | bytes |"
	echo "|---|---:|"
	while read -r name type _a _o size _e flags _; do
		[[ $flags == *A* ]] || continue
		case $name in
		.init* | .modinfo | __versions | __version_ext_* | .note* | .gnu.linkonce.this_module) continue ;;
		esac
		echo "$((16#$size)) $name"
	done < <(readelf -SW "$1" | sed -n 's/^ *\[ *[0-9]*\] //p') |
		sort -rn | awk '$1 > 0 { printf "| %s | %d |\n", $2, $1 }'
	printf '\nIts 10 biggest functions:\n\n| function | bytes |\n|---|---:|\n'
	nm -S --size-sort "$1" | awk '$3 ~ /^[tT]$/' | tail -n 10 | tac |
		while read -r _ size _ name; do
			echo "| $name | $((16#$size)) |"
		done
	echo
}

# to_csv KVER DIR GUEST...: the "@@ KEY VALUE" lines of the guests' logs
# (DIR/GUEST.log) -> CSV "kernel,metric,value"; kpatch.ko's sizes added
to_csv() {
	local kver=$1 dir=$2 text data bss resident code rodata kdata kbss module
	shift 2
	read -r text data bss _ < <(size "$dir/kpatch/kpatch.ko" | tail -n 1)
	read -r resident code rodata kdata kbss module < <(ko_resident "$dir/kpatch/kpatch.ko")
	{
		echo "kernel,metric,value"
		echo "$kver,kpatch_ko_text,$text"
		echo "$kver,kpatch_ko_data,$data"
		echo "$kver,kpatch_ko_bss,$bss"
		echo "$kver,kpatch_ko_resident,$resident"
		echo "$kver,kpatch_ko_code,$code"
		echo "$kver,kpatch_ko_rodata,$rodata"
		echo "$kver,kpatch_ko_rwdata,$kdata"
		echo "$kver,kpatch_ko_rwbss,$kbss"
		echo "$kver,kpatch_ko_module,$module"
		for guest; do
			awk -v k="$kver" '$1 == "@@" && NF == 3 { print k "," $2 "," $3 }' \
				"$dir/$guest.log"
		done
	} >"$OUT/$kver.csv"
}

# report KVER: markdown tables from the CSV
report() {
	awk -F, -v kver="$1" '
		NR > 1 { v[$2] = $3 }
		function ipc(x) { return sprintf("%.1f", x / 1000) }
		function grouped(x,	s) {
			s = sprintf("%.0f", x)
			while (s ~ /[0-9][0-9][0-9][0-9]/)
				sub(/[0-9][0-9][0-9]($|,)/, ",&", s)
			return s
		}
		function pct(x, of) { return of > 0 ? sprintf("%.2f %%", 100 * x / of) : "-" }
		function over(key) { return (v[key] - v["calls_unpatched"]) / 1000 }
		function row(name, key) {
			printf "| %s | %s | %s |\n", name, ipc(v[key]),
				key == "calls_unpatched" ? "-" : sprintf("%+.1f", over(key))
		}
		function yn(c) { return c ? "yes" : "no" }
		function kib(x) { return sprintf("%.1f KiB", x / 1024) }
		# api(PREFIX, NAME): "calls / ns" of the ftrace call NAME
		function api(p, n,	c) {
			c = v[p "_" n "_calls"]
			if (c == "" || c < 0)
				return "-"
			return c ? grouped(c) " / " grouped(v[p "_" n "_ns"]) : "0"
		}
		function apirow(name, p) {
			printf "| %s | %s | %s | %s |\n", name,
				api(p, "set_filter_ip"), api(p, "reg_ops"),
				api(p, "unreg_ops")
		}
		# med(KEY, N): the median of KEY_rR over the runs R = 1..N
		# whose OK_rR (KEY with its last "_ns" or "_window" made
		# "_ok") is 1, values below 0 left out; "" if none
		function med(key, n, ok,	r, m, a, i, x) {
			m = 0
			for (r = 1; r <= n; r++) {
				if (ok != "" && v[ok "_r" r] != 1)
					continue
				x = v[key "_r" r]
				if (x == "" || x < 0)
					continue
				x += 0
				for (i = m; i > 0 && a[i] > x; i--)
					a[i + 1] = a[i]
				a[i + 1] = x
				m++
			}
			if (!m)
				return ""
			return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
		}
		function ms(x) { return x == "" || x < 0 ? "-" : sprintf("%.1f", x / 1e6) }
		function num(x) { return x == "" || x < 0 ? "-" : grouped(x) }
		function okword(x) { return x == "" ? "-" : x == 1 ? "yes" : "no" }
		# stats(KEY, OK, FN): "median [min-max]" of KEY_rR over the
		# runs R whose OK_ok_rR is 1 (any run if OK is ""), but for the
		# values below 0 (not known), each shown by FN ("ms": ns as ms);
		# "-" if none.  Sets stat_med and stat_max.
		function stats(key, ok, fn,	r, n, a, i, x) {
			n = 0
			for (r = 1; r <= v["hot_runs"]; r++) {
				if (ok != "" && v[ok "_ok_r" r] != 1)
					continue
				x = v[key "_r" r]
				if (x == "" || x < 0)
					continue
				x += 0
				for (i = n; i > 0 && a[i] > x; i--)
					a[i + 1] = a[i]
				a[i + 1] = x
				n++
			}
			stat_med = stat_max = ""
			if (!n)
				return "-"
			stat_med = n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
			stat_max = a[n]
			return fmt(fn, stat_med) " [" fmt(fn, a[1]) "-" fmt(fn, a[n]) "]"
		}
		function fmt(fn, x) {
			return fn == "ms" ? sprintf("%.1f", x / 1e6) : sprintf("%g", x)
		}
		function failed(p,	r, n) {
			for (r = 1; r <= v["hot_runs"]; r++)
				n += v[p "_ok_r" r] != 1
			return n + 0
		}
		# hotrow(NAME, P, NS): P_tries and P_NS over the runs, all for
		# kpatch, the successful ones for livepatch
		function hotrow(name, p, ns,	ok) {
			ok = p ~ /_lp_/ ? p : ""
			printf "| %s | %s | %s | %d |\n", name, stats(p "_tries", ok),
				stats(p "_" ns, ok, "ms"), failed(p)
		}
		END {
			printf "### %s\n\n", kver
			if (v["calls_unpatched"] != "")
				main_tables()
			if (v["window_kpatch_t100_f1"] != "")
				window_tables()
			if (v["apply_write_f1"] != "")
				apply_tables()
			busy_table()
			many_table()
			if (v["hot_runs"] != "")
				hot_table()
			footprint()
		}
		function hot_table(	clock, tp, tu, mp, mu, kp, ku, le, lk, ld) {
			if (v["hot_icount"] == 1)
				clock = sprintf("under icount with %d vCPU%s: guest ms, one ns per instruction%s",
					v["hot_cpus"], v["hot_cpus"] == 1 ? "" : "s",
					v["hot_cpus"] == 1 ? "" : " of any vCPU (each runs at a fraction of that rate)")
			else
				clock = sprintf("without icount, %d vCPUs in turn (round-robin TCG): WALL-CLOCK ms of an emulated guest on a shared host",
					v["hot_cpus"])
			printf "A hot function: getpid(2) patched and unpatched while %d processes (nice %d) call it, %d runs, kpatch and livepatch in turn, %s.\n\n",
				v["hot_procs"], v["hot_nice"], v["hot_runs"], clock
			print "| switch | tries: median [min-max] | ms: median [min-max] | failed |"
			print "|---|---:|---:|---:|"
			hotrow("kpatch, patch: the write(2)", "hot_kpatch_patch", "ns")
			hotrow("kpatch, unpatch: the write(2)", "hot_kpatch_unpatch", "ns")
			hotrow("livepatch, enable: insmod until transition reads 0", "hot_lp_enable", "ns")
			hotrow("livepatch, enable: the same from klp_enable_patch()", "hot_lp_enable", "klp_ns")
			hotrow("livepatch, disable: enabled=0 until transition reads 0", "hot_lp_disable", "ns")
			print "\nTries: kpatch'"'"'s stop_machine() runs (KPATCH_TEST_DONE of the hooked kpatch.ko), livepatch'"'"'s calls of klp_try_complete_transition(); kpatch'"'"'s failed writes count in its figures, livepatch'"'"'s failed switches not.\n"
			printf "every getpid answer right: %s (%s calls, %s wrong); the new function answered %s calls under kpatch, %s under livepatch\n",
				yn(v["hot_wrong"] == 0 && v["hot_calls"] > 0),
				grouped(v["hot_calls"]), grouped(v["hot_wrong"]),
				grouped(v["hot_kpatch_new_calls"]), grouped(v["hot_lp_new_calls"])
			stats("hot_kpatch_patch_tries"); tp = stat_med
			stats("hot_kpatch_unpatch_tries"); tu = stat_med
			stats("hot_kpatch_patch_ns"); kp = stat_med; mp = stat_max
			stats("hot_kpatch_unpatch_ns"); ku = stat_med; mu = stat_max
			stats("hot_lp_enable_ns", "hot_lp_enable"); le = stat_med
			stats("hot_lp_enable_klp_ns", "hot_lp_enable"); lk = stat_med
			stats("hot_lp_disable_ns", "hot_lp_disable"); ld = stat_med
			printf "goal (7.x and the rt kernel): at most 3 tries (median): %s; every write done, under 1 s: %s; faster than livepatch (medians): patch %s (%s from klp_enable_patch()), unpatch %s\n\n",
				yn(tp <= 3 && tu <= 3),
				yn(mp < 1e9 && mu < 1e9 && !failed("hot_kpatch_patch") && !failed("hot_kpatch_unpatch")),
				le == "" ? "-" : yn(kp < le), lk == "" ? "-" : yn(kp < lk),
				ld == "" ? "-" : yn(ku < ld)
		}
		function main_tables() {
			print "Per call of a tiny noinline function, 10^6 calls (instructions = ns under icount):\n"
			print "| call | instructions/call | overhead |"
			print "|---|---:|---:|"
			row("unpatched", "calls_unpatched")
			row("direct call of the new function", "calls_direct_new")
			row("kpatch (an IPMODIFY ftrace_ops of its own)", "calls_kpatch")
			row("bare ftrace_ops (IPMODIFY)", "calls_ftrace_ops")
			row("livepatch", "calls_livepatch")
			bare = over("calls_ftrace_ops")
			ops = over("calls_kpatch")
			print ""
			if (bare > 0) {
				d = 100 * (ops - bare) / bare
				printf "kpatch %+.1f over unpatched, bare ftrace_ops %+.1f: ratio %.3f, %.1f %% %s; target within 10 %% of the bare ftrace_ops: %s\n",
					ops, bare, ops / bare, d < 0 ? -d : d,
					d < 0 ? "below" : "above", yn(d <= 10 && d >= -10)
			}
			print ""
		}
		function window_tables() {
			print "stop_machine window (instructions in the callback) and whole kpatch_register(), vs the seed check:\n"
			print "| tasks | functions | kpatch window | % of seed | kpatch register | seed window |"
			print "|---:|---:|---:|---:|---:|---:|"
			split("100 1000 4000", ts, " ")
			split("1 100 1000", fs, " ")
			for (i = 1; i <= 3; i++)
				for (j = 1; j <= 3; j++) {
					s = "_t" ts[i] "_f" fs[j]
					w = v["window_kpatch" s]
					printf "| %.0f | %.0f | %s | %s | %s | %s |\n", ts[i], fs[j],
						num(w), pct(w, v["window_seed" s]),
						num(v["register_kpatch" s]), num(v["window_seed" s])
				}
			print "\n4000 tasks, 100 functions; R tasks woken between the pre-walk and stop_machine() (\"ran\": how many ran before the callback):\n"
			print "| woken | ran | kpatch window | % of seed | kpatch register |"
			print "|---:|---:|---:|---:|---:|"
			split("1 10 100 1000", rs, " ")
			for (i = 1; i <= 4; i++) {
				r = rs[i]; w = v["window_ran_r" r]
				printf "| %.0f | %.0f | %s | %s | %s |\n", r, v["ran_r" r], num(w),
					pct(w, v["window_seed_t4000_f100"]), num(v["register_ran_r" r])
			}
			print ""
		}
		function apply_tables() {
			print "Apply and unpatch latency through the control file, idle guest (guest ns):\n"
			print "| functions | apply: write() returns | patch seen active | unpatch: write() returns | old function seen again |"
			print "|---:|---:|---:|---:|---:|"
			split("1 10 100", fl, " ")
			for (i = 1; i <= 3; i++) {
				f = fl[i]
				printf "| %.0f | %s | %s | %s | %s |\n", f,
					num(v["apply_write_f" f]), num(v["apply_active_f" f]),
					num(v["unpatch_write_f" f]), num(v["unpatch_active_f" f])
			}
			print "\nThe ftrace calls that make and release sites, timed by kretprobes in a second run (calls / guest ns):\n"
			print "| update | ftrace_set_filter_ip | register_ftrace_function | unregister_ftrace_function |"
			print "|---|---:|---:|---:|"
			apirow("apply, 1 function", "api_apply_f1")
			apirow("unpatch, 1 function", "api_unpatch_f1")
			apirow("apply, 100 functions", "api_apply_f100")
			apirow("unpatch, 100 functions", "api_unpatch_f100")
			apirow("kpatch_register(), 1,000 functions", "api_register_f1000")
			apirow("kpatch_unregister(), 1,000 functions", "api_unregister_f1000")
			print ""
		}
		# busy_table: N readers asleep in the patched function
		function busy_table(	k, ns, n, i, c) {
			n = 0
			for (k in v)
				if (k ~ /^busy_n[0-9]+$/)
					ns[++n] = substr(k, 7) + 0
			if (!n)
				return
			for (i = 2; i <= n; i++)
				for (c = i; c > 1 && ns[c - 1] > ns[c]; c--) {
					k = ns[c]; ns[c] = ns[c - 1]; ns[c - 1] = k
				}
			print "Busy tasks: N threads (kpbench-tasks read) asleep in kpatch_test_move_read_old(), each reading once; kpatch: one write(2) to the control file with retries=0, which moves them (fake signal) and runs again; then the unpatch, the readers asleep in the new function; livepatch (kpatch_bench_lp_move.ko, the same new function): insmod, or enabled=0, until its transition file reads 0 (its fake signal comes after ~15 s). Guest ms; windows guest ns (sum of the runs; the largest).\n"
			printf "| |"
			for (i = 1; i <= n; i++)
				printf " N=%s |", grouped(ns[i])
			printf "\n|---|"
			for (i = 1; i <= n; i++)
				printf "---:|"
			print ""
			busyrow("kpatch patch: write(2) ms", n, ns, "busy_kpatch_patch_ns", "ms")
			busyrow("applied in that write", n, ns, "busy_kpatch_patch_ok", "ok")
			busyrow("stop_machine() runs", n, ns, "busy_kpatch_patch_runs", "num")
			busyrow("their windows, ns", n, ns, "busy_kpatch_patch_window", "win")
			busyrow("tasks moved (kernel log)", n, ns, "busy_kpatch_patch_moved", "num")
			busyrow("readers that read new", n, ns, "busy_kpatch_patch_new", "num")
			busyrow("kpatch unpatch: write(2) ms", n, ns, "busy_kpatch_unpatch_ns", "ms")
			busyrow("applied in that write", n, ns, "busy_kpatch_unpatch_ok", "ok")
			busyrow("stop_machine() runs", n, ns, "busy_kpatch_unpatch_runs", "num")
			busyrow("their windows, ns", n, ns, "busy_kpatch_unpatch_window", "win")
			busyrow("tasks moved (kernel log)", n, ns, "busy_kpatch_unpatch_moved", "num")
			busyrow("readers that read old", n, ns, "busy_kpatch_unpatch_old", "num")
			busyrow("livepatch enable: ms", n, ns, "busy_lp_enable_ns", "ms")
			busyrow("readers that read new", n, ns, "busy_lp_enable_new", "num")
			busyrow("livepatch disable: ms", n, ns, "busy_lp_disable_ns", "ms")
			busyrow("readers that read old", n, ns, "busy_lp_disable_old", "num")
			print ""
			for (i = 1; i <= n; i++)
				printf "N=%s: kpatch applied the patch in its one write: %s; every reader read new: %s; patch faster than livepatch'"'"'s enable: %s; unpatch faster than its disable: %s\n",
					grouped(ns[i]), okword(v["busy_kpatch_patch_ok_n" ns[i]]),
					yn(v["busy_kpatch_patch_new_n" ns[i]] == ns[i]),
					lt(v["busy_kpatch_patch_ns_n" ns[i]], v["busy_lp_enable_ns_n" ns[i]]),
					lt(v["busy_kpatch_unpatch_ns_n" ns[i]], v["busy_lp_disable_ns_n" ns[i]])
			print ""
		}
		# walked(P, K): "stacks (tasks, most of one)" checked in the probed run
		function walked(p, k) {
			if (v[p "_walked" k] == "")
				return "-"
			return grouped(v[p "_walked" k]) " (" num(v[p "_walked_tasks" k]) ", " num(v[p "_walked_most" k]) ")"
		}
		function lt(a, b) { return a == "" || b == "" || a < 0 || b < 0 ? "-" : yn(a + 0 <= b + 0) }
		function busyrow(name, n, ns, key, how,	i, x) {
			printf "| %s |", name
			for (i = 1; i <= n; i++) {
				x = v[key "_n" ns[i]]
				if (how == "ms")
					x = ms(x)
				else if (how == "ok")
					x = okword(x)
				else if (how == "win")
					x = x == "" || x < 0 ? "-" : grouped(x) "; " grouped(v[key "_max_n" ns[i]])
				else
					x = num(x)
				printf " %s |", x
			}
			print ""
		}
		# many_table: N threads asleep in user space
		function many_table(	k, ns, n, i, c, r, p, u, w, wu, e, d, last, fails) {
			n = 0
			for (k in v)
				if (k ~ /^many_n[0-9]+$/)
					ns[++n] = substr(k, 7) + 0
			if (!n)
				return
			for (i = 2; i <= n; i++)
				for (c = i; c > 1 && ns[c - 1] > ns[c]; c--) {
					k = ns[c]; ns[c] = ns[c - 1]; ns[c - 1] = k
				}
			r = v["many_runs"]
			printf "Many tasks: N threads (kpbench-tasks sleep) asleep in user space (futex), kpatch_test_move_read_old() patched and unpatched %d time%s through the control file, then enabled and disabled by livepatch; medians, guest ms (the window: guest ns, summed over the write'"'"'s stop_machine() runs).\n\n", r, r == 1 ? "" : "s"
			print "| threads | tasks | kpatch patch | kpatch unpatch | window: patch / unpatch (ns) | stop_machine() runs: patch / unpatch | stacks the callback checked: patch / unpatch | livepatch enable | livepatch disable |"
			print "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
			for (i = 1; i <= n; i++) {
				k = "_n" ns[i]
				p = med("many_kpatch_patch_ns" k, r, "many_kpatch_patch_ok" k)
				u = med("many_kpatch_unpatch_ns" k, r, "many_kpatch_unpatch_ok" k)
				w = med("many_kpatch_patch_window" k, r, "many_kpatch_patch_ok" k)
				wu = med("many_kpatch_unpatch_window" k, r, "many_kpatch_unpatch_ok" k)
				e = med("many_lp_enable_ns" k, r, "many_lp_enable_ok" k)
				d = med("many_lp_disable_ns" k, r, "many_lp_disable_ok" k)
				printf "| %s | %s | %s | %s | %s / %s | %s / %s | %s / %s | %s | %s |\n",
					grouped(ns[i]), num(v["many_tasks" k]), ms(p), ms(u),
					num(w), num(wu),
					num(med("many_kpatch_patch_runs" k, r, "many_kpatch_patch_ok" k)),
					num(med("many_kpatch_unpatch_runs" k, r, "many_kpatch_unpatch_ok" k)),
					walked("many_probed_patch", k),
					walked("many_probed_unpatch", k),
					ms(e), ms(d)
				if (ns[i] == 100000)
					last = k
				for (c = 1; c <= r; c++)
					fails += (v["many_kpatch_patch_ok" k "_r" c] != 1) + \
						 (v["many_kpatch_unpatch_ok" k "_r" c] != 1)
			}
			print "\nStacks the callback checked: in one more patch and unpatch, untimed, counted by a kprobe on kpatch_check_task() (current, init_task, the tasks the pre-walk recorded, each time one was recorded): stacks (distinct tasks, the most stacks of one task).\n"
			printf "kpatch writes that failed: %d\n", fails
			if (last == "") {
				print "no figures at 100,000 threads: no targets\n"
				return
			}
			w = med("many_kpatch_patch_window" last, r, "many_kpatch_patch_ok" last)
			wu = med("many_kpatch_unpatch_window" last, r, "many_kpatch_unpatch_ok" last)
			if (wu > w)
				w = wu
			printf "targets at 100,000 threads: window at most 200 us (%s ns): %s; patch at most livepatch'"'"'s enable (%s / %s ms): %s; unpatch at most livepatch'"'"'s disable (%s / %s ms): %s\n\n",
				num(w), w == "" ? "-" : yn(w <= 200000),
				ms(med("many_kpatch_patch_ns" last, r, "many_kpatch_patch_ok" last)),
				ms(med("many_lp_enable_ns" last, r, "many_lp_enable_ok" last)),
				lt(med("many_kpatch_patch_ns" last, r, "many_kpatch_patch_ok" last),
				   med("many_lp_enable_ns" last, r, "many_lp_enable_ok" last)),
				ms(med("many_kpatch_unpatch_ns" last, r, "many_kpatch_unpatch_ok" last)),
				ms(med("many_lp_disable_ns" last, r, "many_lp_disable_ok" last)),
				lt(med("many_kpatch_unpatch_ns" last, r, "many_kpatch_unpatch_ok" last),
				   med("many_lp_disable_ns" last, r, "many_lp_disable_ok" last))
		}
		function footprint() {
			print "Footprint:\n"
			printf "kpatch.ko resident, no patch: %s\n\n", kib(v["kpatch_ko_resident"])
			printf "That is what the loader keeps of kpatch.ko, its allocated sections but .init*, .modinfo, symbol versions, .note* and struct module: code %s, read-only data %s, data %s, bss %s; target <= 40 KiB (40,960 bytes): %s. With struct module (%s bytes, its section .gnu.linkonce.this_module): %s.",
				grouped(v["kpatch_ko_code"]),
				grouped(v["kpatch_ko_rodata"]), grouped(v["kpatch_ko_rwdata"]),
				grouped(v["kpatch_ko_rwbss"]),
				yn(v["kpatch_ko_resident"] <= 40960),
				grouped(v["kpatch_ko_module"]),
				kib(v["kpatch_ko_resident"] + v["kpatch_ko_module"])
			if (v["kpatch_modules_size"] != "")
				printf " The guest'"'"'s /proc/modules, just after insmod: %s bytes (the loader'"'"'s count: the same sections, each kind page-aligned, and the symbol table it keeps).",
					grouped(v["kpatch_modules_size"])
			print ""
			if (v["mem_f1000_kib"] != "")
				printf "Memory per patched function (Slab, VmallocUsed and Percpu of /proc/meminfo, while 1,000 are patched): %s bytes\n",
					grouped(v["mem_f1000_kib"] * 1024 / 1000)
			print ""
		}' "$OUT/$1.csv"
}

# plot KVER...: window.png (the kernels with its figures), then many.png
plot() {
	local kver dat ran plots=() rans=() i=0
	for kver in "$@"; do
		grep -q ',window_kpatch_t100_f1,' "$OUT/$kver.csv" || continue
		ran=$OUT/$kver.ran.dat
		awk -F, '
			NR > 1 { v[$2] = $3 }
			END {
				print "# tasks_that_ran kpatch_window seed_window (4000 tasks, 100 functions)"
				n = split("1 10 100 1000", rs, " ")
				for (i = 1; i <= n; i++)
					print v["ran_r" rs[i]], v["window_ran_r" rs[i]],
						v["window_seed_t4000_f100"]
			}' "$OUT/$kver.csv" >"$ran"
		rans+=("$ran" "$kver")
		dat=$OUT/$kver.window.dat
		awk -F, '
			NR > 1 && $2 ~ /^window_/ {
				split($2, p, "_"); t = substr(p[3], 2); f = substr(p[4], 2)
				v[p[2] "," t "," f] = $3; ts[t] = 1
			}
			END {
				print "# tasks kpatch_f1 kpatch_f100 kpatch_f1000 seed_f1 seed_f100 seed_f1000"
				n = split("100 1000 4000", tl, " ")
				for (i = 1; i <= n; i++) {
					t = tl[i]; line = t
					split("kpatch seed", ws, " ")
					for (w = 1; w <= 2; w++)
						for (f = 1; f <= 1000; f *= 10) {
							if (f == 10) f = 100
							line = line " " v[ws[w] "," t "," f]
						}
					print line
				}
			}' "$OUT/$kver.csv" >"$dat"
		plots+=("$dat" "$kver")
		i=$((i + 1))
	done
	if ((i)); then
		gnuplot -e "ndata=$i" -e "files='${plots[*]}'" -e "ranfiles='${rans[*]}'" \
			-e "out='$OUT/window.png'" "$HERE/window.gp"
		log "wrote $OUT/window.png"
	fi
	plot_many "$@"
}

# plot_many KVER...: many.png, an update at many tasks (the kernels with
# its figures)
plot_many() {
	local kver dat plots=() i=0
	for kver in "$@"; do
		grep -q ',many_n[0-9]*,' "$OUT/$kver.csv" || continue
		dat=$OUT/$kver.many.dat
		awk -F, '
			NR > 1 { v[$2] = $3 }
			function med(key, ok,	r, m, a, i, x) {
				m = 0
				for (r = 1; r <= v["many_runs"]; r++) {
					x = v[key "_r" r]
					if (v[ok "_r" r] != 1 || x == "" || x < 0)
						continue
					x += 0
					for (i = m; i > 0 && a[i] > x; i--)
						a[i + 1] = a[i]
					a[i + 1] = x
					m++
				}
				if (!m)
					return "NaN"
				return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
			}
			function div(x, d) { return x == "NaN" ? x : x / d }
			END {
				print "# threads kpatch_patch_ms kpatch_unpatch_ms lp_enable_ms lp_disable_ms window_patch_us window_unpatch_us"
				n = split("1000 10000 50000 100000", ns, " ")
				for (i = 1; i <= n; i++) {
					k = "_n" ns[i]
					if (v["many" k] == "")
						continue
					print ns[i], div(med("many_kpatch_patch_ns" k, "many_kpatch_patch_ok" k), 1e6),
						div(med("many_kpatch_unpatch_ns" k, "many_kpatch_unpatch_ok" k), 1e6),
						div(med("many_lp_enable_ns" k, "many_lp_enable_ok" k), 1e6),
						div(med("many_lp_disable_ns" k, "many_lp_disable_ok" k), 1e6),
						div(med("many_kpatch_patch_window" k, "many_kpatch_patch_ok" k), 1e3),
						div(med("many_kpatch_unpatch_window" k, "many_kpatch_unpatch_ok" k), 1e3)
				}
			}' "$OUT/$kver.csv" >"$dat"
		plots+=("$dat" "$kver")
		i=$((i + 1))
	done
	((i)) || return 0
	gnuplot -e "ndata=$i" -e "files='${plots[*]}'" -e "out='$OUT/many.png'" \
		"$HERE/many.gp"
	log "wrote $OUT/many.png"
}

# guests KVER: the guests to boot for KVER, "bench" and "hot"; on the
# PREEMPT_RT kernel only "hot"
guests() {
	if [[ $ONLY == hot ]] ||
		grep -qx 'CONFIG_PREEMPT_RT=y' "$CACHE/kernels/$1/config" 2>/dev/null; then
		echo hot
	elif [[ $ONLY == bench ]]; then
		echo bench
	else
		echo bench hot
	fi
}

main() {
	local kernels=("$@") kver dir guest benched=() gs
	if ((${#kernels[@]} == 0)); then
		[[ -s $CACHE/kernels.list ]] || die "$CACHE/kernels.list missing (run: $TESTBED setup)"
		mapfile -t kernels <"$CACHE/kernels.list"
	fi
	case $ONLY in
	"" | hot | bench) ;;
	*) die "KPATCH_BENCH_ONLY=$ONLY: only \"hot\" and \"bench\" are known" ;;
	esac
	# Not the debug kernel (testbed.sh's is_debug_kernel): its checkers
	# would be all the figures measure.
	for kver in "${!kernels[@]}"; do
		if [[ -e $CACHE/kernels/${kernels[kver]}/debug-kernel.key ]]; then
			log "skipping the debug kernel ${kernels[kver]}"
			unset 'kernels[kver]'
		fi
	done
	kernels=("${kernels[@]}")
	((${#kernels[@]})) || die "no kernel to benchmark"
	for kver in "${kernels[@]}"; do
		if [[ $(guests "$kver") == *bench* ]]; then
			benched+=("$kver")
		fi
	done
	mkdir -p "$OUT"
	exec 9>"$OUT/.lock"
	flock -n 9 || die "another bench run holds $OUT/.lock"
	if ((${#benched[@]})); then
		need_gnuplot
		model
	fi
	for kver in "${kernels[@]}"; do
		dir=$OUT/$kver
		mkdir -p "$dir"
		build "$kver" "$dir"
		read -ra gs < <(guests "$kver")
		for guest in "${gs[@]}"; do
			make_initramfs "$dir" "$kver" "$guest"
			if [[ $guest == hot ]]; then
				boot "$kver" "$dir" hot "$HOT_SMP" "$HOT_ICOUNT" 1G
			else
				boot "$kver" "$dir" bench 1 1 "$BENCH_MEM"
			fi
		done
		to_csv "$kver" "$dir" "${gs[@]}"
		report "$kver"
		ko_detail "$dir/kpatch/kpatch.ko"
		log "wrote $OUT/$kver.csv"
	done
	if ((${#benched[@]})); then
		plot "${benched[@]}"
	fi
}

main "$@"
