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
# kpatch_bench_lp_getpid.ko); then boot two guests, each with
# guest-bench.sh as /init and nokaslr (module addresses, hence kpatch's
# hash chains, stay the same from boot to boot):
#
#   bench  -icount shift=0,sleep=off -smp 1, so that one guest ns is one
#          guest instruction: every measurement but the hot function's,
#          with the plain kpatch.ko;
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
# Then print markdown tables and write $KPATCH_CACHE/bench/<kver>.csv.  At
# the end, gnuplot (gnuplot-nox, installed first if missing) draws
# $KPATCH_CACHE/bench/window.png (stop_machine window vs tasks, and vs the
# tasks that ran between kpatch's pre-walk and its stop_machine()).
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
#   KPATCH_BENCH_TIMEOUT  seconds per guest (default 2400)
#   KPATCH_BENCH_ONLY     "hot": only the hot function's guest, no CPU
#                         model and no plot (the CSV then has only its
#                         figures and kpatch.ko's sizes)
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
TIMEOUT=${KPATCH_BENCH_TIMEOUT:-2400}
ONLY=${KPATCH_BENCH_ONLY:-}
HOT_PROCS=${KPATCH_BENCH_HOT_PROCS:-40}
HOT_RUNS=${KPATCH_BENCH_HOT_RUNS:-5}
HOT_NICE=${KPATCH_BENCH_HOT_NICE:-0}
HOT_SMP=${KPATCH_BENCH_HOT_SMP:-1}
HOT_ICOUNT=${KPATCH_BENCH_HOT_ICOUNT:-1}

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
		"$dir/bench/kpbench-model.c"
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
	has_jmp "$kver" >"$root/kpatch/jmp"
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
			"$dir/bench/kpatch_bench_lp.ko" "$root/kpatch/"
		cp "$dir/kpbench-apply" "$root/bin/"
	fi
	(cd "$root" && find . -print0 | sort -z |
		cpio --null -o -H newc --owner=0:0 --quiet) | gzip -6 >"$dir/$name.gz"
}

# boot KVER DIR NAME SMP ICOUNT: boot KVER with DIR/NAME.gz as its
# initramfs on SMP vCPUs, under icount if ICOUNT is 1, else on the host's
# clock (round-robin TCG, as testbed.sh runs its guests); the guest's
# results in DIR/NAME.log, its console in DIR/NAME-console.log
boot() {
	local kver=$1 dir=$2 name=$3 smp=$4 icount=$5 rc=0 start=$SECONDS
	local log=$dir/$name.log console=$dir/$name-console.log accel
	if ((icount)); then
		accel=(-accel tcg -icount "shift=0,sleep=off")
	else
		accel=(-accel "tcg,thread=single")
	fi
	rm -f "$log" "$console" "$dir/$name-qemu.log"
	log "booting $kver, ${accel[*]}, $smp vCPU(s) (console: $console)"
	timeout -k 10 "$TIMEOUT" qemu-system-x86_64 \
		"${accel[@]}" -cpu max -smp "$smp" -m 1G \
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

# has_jmp KVER: 1 if KVER's ftrace makes direct calls jmps (7.x), where
# kpatch makes jmp sites; else 0
has_jmp() {
	if grep -qx 'CONFIG_DYNAMIC_FTRACE_WITH_JMP=y' "$CACHE/kernels/$1/config"; then
		echo 1
	else
		echo 0
	fi
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

# to_csv KVER DIR GUEST...: the "@@ KEY VALUE" lines of the guests' logs
# (DIR/GUEST.log) -> CSV "kernel,metric,value"; kpatch.ko's sizes added
to_csv() {
	local kver=$1 dir=$2 text data bss resident code rodata kdata kbss module
	shift 2
	read -r text data bss _ < <(size "$dir/kpatch/kpatch.ko" | tail -n 1)
	read -r resident code rodata kdata kbss module < <(ko_resident "$dir/kpatch/kpatch.ko")
	{
		echo "kernel,metric,value"
		echo "$kver,jmp,$(has_jmp "$kver")"
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
			printf "| %s | %s | %s | %s | %s | %s | %s |\n", name,
				api(p, "set_filter_ip"), api(p, "reg_ops"),
				api(p, "unreg_ops"), api(p, "reg_direct"),
				api(p, "unreg_direct"), api(p, "modify_direct")
		}
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
			jmp = v["jmp"] == 1
			printf "### %s\n\n", kver
			if (v["calls_unpatched"] != "")
				main_tables()
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
			if (jmp) {
				row("kpatch, jmp site (direct=Y, the default)", "calls_kpatch")
				row("kpatch, ftrace_ops site (direct=N)", "calls_kpatch_ops")
				row("kpatch, guard (a jmp site while an update changes it, or whose new function is at an odd address)", "calls_kpatch_guard")
			} else {
				row("kpatch, ftrace_ops site (no jmp sites on this kernel)", "calls_kpatch")
			}
			row("bare ftrace_ops (IPMODIFY)", "calls_ftrace_ops")
			row("livepatch", "calls_livepatch")
			row("kpatch, in one patch with 1,000 others (shared ftrace_ops)", "calls_kpatch_1000")
			bare = over("calls_ftrace_ops")
			ops = over(jmp ? "calls_kpatch_ops" : "calls_kpatch")
			print ""
			if (jmp)
				printf "jmp site: %+.1f instructions per call over unpatched; target <= +3: %s\n",
					over("calls_kpatch"), yn(over("calls_kpatch") <= 3)
			if (bare > 0) {
				d = 100 * (ops - bare) / bare
				printf "ftrace_ops site: %+.1f, %.1f %% %s bare ftrace_ops (%+.1f); target within 10 %%: %s\n",
					ops, d < 0 ? -d : d, d < 0 ? "below" : "above",
					bare, yn(d <= 10 && d >= -10)
			}
			print "\nstop_machine window (instructions in the callback) and whole kpatch_register(), vs the seed check:\n"
			print "| tasks | functions | kpatch window | % of seed | kpatch register | seed window |"
			print "|---:|---:|---:|---:|---:|---:|"
			split("100 1000 4000", ts, " ")
			split("1 100 1000", fs, " ")
			for (i = 1; i <= 3; i++)
				for (j = 1; j <= 3; j++) {
					s = "_t" ts[i] "_f" fs[j]
					w = v["window_kpatch" s]
					printf "| %.0f | %.0f | %.0f | %s | %.0f | %.0f |\n", ts[i], fs[j],
						w, pct(w, v["window_seed" s]),
						v["register_kpatch" s], v["window_seed" s]
				}
			print "\n4000 tasks, 100 functions; R tasks woken between the pre-walk and stop_machine() (\"ran\": how many ran before the callback):\n"
			print "| woken | ran | kpatch window | % of seed | kpatch register |"
			print "|---:|---:|---:|---:|---:|"
			split("1 10 100 1000", rs, " ")
			for (i = 1; i <= 4; i++) {
				r = rs[i]; w = v["window_ran_r" r]
				printf "| %.0f | %.0f | %.0f | %s | %.0f |\n", r, v["ran_r" r], w,
					pct(w, v["window_seed_t4000_f100"]), v["register_ran_r" r]
			}
			print "\nApply and unpatch latency through the control file, idle guest (guest ns):\n"
			print "| functions | apply: write() returns | patch seen active | unpatch: write() returns | old function seen again |"
			print "|---:|---:|---:|---:|---:|"
			for (f = 1; f <= 100; f *= 100)
				printf "| %.0f | %.0f | %.0f | %.0f | %.0f |\n", f,
					v["apply_write_f" f], v["apply_active_f" f],
					v["unpatch_write_f" f], v["unpatch_active_f" f]
			print "\nThe ftrace calls that make, move and release sites, timed by kretprobes in a second run (calls / guest ns):\n"
			print "| update | ftrace_set_filter_ip | register_ftrace_function | unregister_ftrace_function | register_ftrace_direct | unregister_ftrace_direct | modify_ftrace_direct |"
			print "|---|---:|---:|---:|---:|---:|---:|"
			apirow("apply, 1 function", "api_apply_f1")
			apirow("unpatch, 1 function", "api_unpatch_f1")
			apirow("apply, 100 functions", "api_apply_f100")
			apirow("unpatch, 100 functions", "api_unpatch_f100")
			apirow("kpatch_register(), 1,000 functions", "api_register_f1000")
			apirow("kpatch_unregister(), 1,000 functions", "api_unregister_f1000")
			c = v["api_apply_f100_modify_direct_calls"]
			if (jmp && c > 0)
				printf "\nSwitch cost (a jmp site onto the guard or back, one modify_ftrace_direct()): %s ns per site; in the apply of 100 functions %s of %s ns (%.0f %%).\n",
					grouped(v["api_apply_f100_modify_direct_ns"] / c),
					grouped(v["api_apply_f100_modify_direct_ns"]),
					grouped(v["apply_write_f100"]),
					100 * v["api_apply_f100_modify_direct_ns"] / v["apply_write_f100"]
			print ""
		}
		function footprint() {
			print "Footprint:\n"
			printf "kpatch.ko resident, no patch: %s\n\n", kib(v["kpatch_ko_resident"])
			printf "That is what the loader keeps of kpatch.ko, its allocated sections but .init*, .modinfo, symbol versions, .note* and struct module: code %s, read-only data %s, data %s, bss %s; target <= 36 KiB: %s. With struct module (%s bytes, its section .gnu.linkonce.this_module): %s.",
				grouped(v["kpatch_ko_code"]),
				grouped(v["kpatch_ko_rodata"]), grouped(v["kpatch_ko_rwdata"]),
				grouped(v["kpatch_ko_rwbss"]),
				yn(v["kpatch_ko_resident"] <= 36864),
				grouped(v["kpatch_ko_module"]),
				kib(v["kpatch_ko_resident"] + v["kpatch_ko_module"])
			if (v["kpatch_modules_size"] != "")
				printf " The guest'"'"'s /proc/modules, just after insmod: %s bytes (the loader'"'"'s count: the same sections, each kind page-aligned, and the symbol table it keeps).",
					grouped(v["kpatch_modules_size"])
			print ""
			if (v["mem_f1000_kib"] != "")
				printf "Memory per patched function (Slab, VmallocUsed and Percpu of /proc/meminfo, while 1,000 are patched): %s bytes%s\n",
					grouped(v["mem_f1000_kib"] * 1024 / 1000),
					jmp ? sprintf(" on jmp sites, %s on ftrace_ops sites (direct=N)",
						      grouped(v["mem_ops_f1000_kib"] * 1024 / 1000)) : ""
			print ""
		}' "$OUT/$1.csv"
}

plot() {
	local kver dat ran plots=() rans=() i=0
	for kver in "$@"; do
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
	gnuplot -e "ndata=$i" -e "files='${plots[*]}'" -e "ranfiles='${rans[*]}'" \
		-e "out='$OUT/window.png'" "$HERE/window.gp"
	log "wrote $OUT/window.png"
}

# guests KVER: the guests to boot for KVER, "bench" and "hot"; on the
# PREEMPT_RT kernel only "hot"
guests() {
	if [[ $ONLY == hot ]] ||
		grep -qx 'CONFIG_PREEMPT_RT=y' "$CACHE/kernels/$1/config" 2>/dev/null; then
		echo hot
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
	"" | hot) ;;
	*) die "KPATCH_BENCH_ONLY=$ONLY: only \"hot\" is known" ;;
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
				boot "$kver" "$dir" hot "$HOT_SMP" "$HOT_ICOUNT"
			else
				boot "$kver" "$dir" bench 1 1
			fi
		done
		to_csv "$kver" "$dir" "${gs[@]}"
		report "$kver"
		log "wrote $OUT/$kver.csv"
	done
	if ((${#benched[@]})); then
		plot "${benched[@]}"
	fi
}

main "$@"
