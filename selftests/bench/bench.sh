#!/bin/bash
# Host side of `make bench`: measure kpatch in QEMU guests under icount.
#
#   bench.sh [KVER...]    every kernel of the test bed by default, but not
#                         the debug kernel or the PREEMPT_RT one
#
# For each kernel: build kpatch.ko (testbed.sh build) and the bench modules
# (kpatch_bench.ko with gen-funcs.sh's generated functions,
# kpatch_bench_lp.ko), boot the kernel with
# -icount shift=0,sleep=off -smp 1 so that one guest ns is one guest
# instruction (nokaslr: module addresses, hence kpatch's hash chains, stay
# the same from boot to boot), run guest-bench.sh, print markdown tables and write
# $KPATCH_CACHE/bench/<kver>.csv.  At the end, gnuplot (gnuplot-nox,
# installed first if missing) draws
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
#   KPATCH_BENCH_TIMEOUT  seconds per guest (default 900)

set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC=$(cd "$HERE/../.." && pwd -P)
TESTBED=$SRC/selftests/harness/testbed.sh
CACHE=${KPATCH_CACHE:-/var/cache/kpatch-testbed}
OUT=$CACHE/bench
NFUNCS=${KPATCH_BENCH_FUNCS:-1000}
TIMEOUT=${KPATCH_BENCH_TIMEOUT:-900}

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
	rm "$dir/bench/kpbench-apply.c" "$dir/bench/kpbench-model.c"
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
}

make_initramfs() {
	local dir=$1 root=$1/initramfs
	rm -rf "$root"
	mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,dev,proc,sys,tmp,root,kpatch}
	if ldd /bin/busybox >/dev/null 2>&1; then die "/bin/busybox is not static"; fi
	cp /bin/busybox "$root/bin/busybox"
	ln -s busybox "$root/bin/sh"
	mknod -m 600 "$root/dev/console" c 5 1
	install -m 755 "$HERE/guest-bench.sh" "$root/init"
	cp "$dir/kpatch/kpatch.ko" "$dir/bench/kpatch_bench.ko" \
		"$dir/bench/kpatch_bench_lp.ko" "$root/kpatch/"
	cp "$dir/kpbench-apply" "$root/bin/"
	(cd "$root" && find . -print0 | sort -z |
		cpio --null -o -H newc --owner=0:0 --quiet) | gzip -6 >"$dir/initramfs.gz"
}

boot() {
	local kver=$1 dir=$2 rc=0 start=$SECONDS
	rm -f "$dir"/{console,results,qemu}.log
	log "booting $kver under icount (console: $dir/console.log)"
	timeout -k 10 "$TIMEOUT" qemu-system-x86_64 \
		-accel tcg -icount shift=0,sleep=off -cpu max -smp 1 -m 1G \
		-nographic -monitor none -nic none -no-reboot \
		-serial "file:$dir/console.log" -serial "file:$dir/results.log" \
		-kernel "$CACHE/kernels/$kver/vmlinuz" -initrd "$dir/initramfs.gz" \
		-append "console=ttyS0 panic=-1 oops=panic quiet loglevel=5 nokaslr" \
		</dev/null >"$dir/qemu.log" 2>&1 &
	QEMU_PID=$!
	wait "$QEMU_PID" || rc=$?
	QEMU_PID=
	touch "$dir"/{console,results}.log
	sed -i 's/\r$//' "$dir"/{console,results}.log
	log "$kver: guest ran $((SECONDS - start))s (qemu rc $rc)"
	if ! grep -qx '@@ done' "$dir/results.log"; then
		tail -n 40 "$dir/console.log" >&2
		die "$kver: the guest did not finish (qemu rc $rc)"
	fi
	if grep -a '^@@ error' "$dir/results.log" >&2; then
		die "$kver: a measurement failed"
	fi
}

# need_gnuplot: gnuplot for window.png; installs gnuplot-nox (without X)
# the way testbed.sh setup installs packages, before the guests run
need_gnuplot() {
	command -v gnuplot >/dev/null && return 0
	((EUID == 0)) || die "no gnuplot for $OUT/window.png (run as root to install gnuplot-nox)"
	log "apt-get install gnuplot-nox"
	apt-get install -y -q --no-install-recommends gnuplot-nox >&2 ||
		{ apt-get update -q >&2 &&
		  apt-get install -y -q --no-install-recommends gnuplot-nox >&2; } ||
		die "cannot install gnuplot-nox"
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

# ko_parts KO: "code rodata dropped init", KO's allocated read-only
# sections (what size(1) adds up as text) by what the module loader does
# with them: executable code, kept while loaded; read-only data, kept
# (strings, ORC unwind tables, ftrace's and alternatives' site lists);
# the symbol versions (__versions, or __version_ext_crcs and _names) and
# .modinfo, dropped at load (the loader clears their SHF_ALLOC); .init.*, freed when init returns.
ko_parts() {
	local name _t _a _o size _e flags code=0 rodata=0 dropped=0 init=0
	while read -r name _t _a _o size _e flags _; do
		[[ $flags == *A* && $flags != *W* ]] || continue
		size=$((16#$size))
		case $name in
		.init*) init=$((init + size)) ;;
		__versions | __version_ext_* | .modinfo) dropped=$((dropped + size)) ;;
		*)
			if [[ $flags == *X* ]]; then
				code=$((code + size))
			else
				rodata=$((rodata + size))
			fi
			;;
		esac
	done < <(readelf -SW "$1" | sed -n 's/^ *\[ *[0-9]*\] //p')
	echo "$code $rodata $dropped $init"
}

# results.log -> CSV "kernel,metric,value"; size(1) of kpatch.ko added
to_csv() {
	local kver=$1 dir=$2 text data bss code rodata dropped init
	read -r text data bss _ < <(size "$dir/kpatch/kpatch.ko" | tail -n 1)
	read -r code rodata dropped init < <(ko_parts "$dir/kpatch/kpatch.ko")
	((code + rodata + dropped + init == text)) ||
		die "kpatch.ko: sections add up to $((code + rodata + dropped + init)), size(1) says text $text"
	{
		echo "kernel,metric,value"
		echo "$kver,kpatch_ko_text,$text"
		echo "$kver,kpatch_ko_data,$data"
		echo "$kver,kpatch_ko_bss,$bss"
		echo "$kver,kpatch_ko_code,$code"
		echo "$kver,kpatch_ko_rodata,$rodata"
		echo "$kver,kpatch_ko_dropped,$dropped"
		echo "$kver,kpatch_ko_init,$init"
		awk -v k="$kver" '$1 == "@@" && NF == 3 { print k "," $2 "," $3 }' \
			"$dir/results.log"
	} >"$OUT/$kver.csv"
}

# report KVER: markdown tables from the CSV
report() {
	awk -F, -v kver="$1" '
		NR > 1 { v[$2] = $3 }
		function ipc(x) { return sprintf("%.1f", x / 1000) }
		function grouped(x,	s) {
			s = sprintf("%d", x)
			while (s ~ /[0-9][0-9][0-9][0-9]/)
				sub(/[0-9][0-9][0-9]($|,)/, ",&", s)
			return s
		}
		function pct(x, of) { return of > 0 ? sprintf("%.2f %%", 100 * x / of) : "-" }
		function row(name, key) {
			over = sprintf("%+.1f", (v[key] - v["calls_unpatched"]) / 1000)
			if (key == "calls_unpatched")
				over = "-"
			printf "| %s | %s | %s |\n", name, ipc(v[key]), over
		}
		END {
			printf "### %s\n\n", kver
			print "Per call of a tiny noinline function, 10^6 calls (instructions = ns under icount):\n"
			print "| call | instructions/call | overhead |"
			print "|---|---:|---:|"
			row("unpatched", "calls_unpatched")
			row("direct call of the new function", "calls_direct_new")
			row("kpatch, direct call", "calls_kpatch")
			row("kpatch, ftrace_ops fallback (direct=N)", "calls_kpatch_fallback")
			row("bare ftrace_ops (IPMODIFY)", "calls_ftrace_ops")
			row("livepatch", "calls_livepatch")
			row("kpatch, 1,000 other functions patched", "calls_kpatch_1000")
			base = v["calls_unpatched"]
			direct = (v["calls_kpatch"] - base) / 1000
			fallback = (v["calls_kpatch_fallback"] - base) / 1000
			bare = (v["calls_ftrace_ops"] - base) / 1000
			printf "\ndirect call: %+.1f instructions per call over unpatched\n", direct
			if (bare > 0) {
				d = 100 * (fallback - bare) / bare
				printf "fallback: %+.1f, %.1f %% %s bare ftrace_ops (%+.1f)\n",
					fallback, d < 0 ? -d : d, d < 0 ? "below" : "above", bare
			} else {
				printf "fallback: %+.1f, bare ftrace_ops: %+.1f\n", fallback, bare
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
					printf "| %d | %d | %d | %s | %d | %d |\n", ts[i], fs[j],
						w, pct(w, v["window_seed" s]),
						v["register_kpatch" s], v["window_seed" s]
				}
			print "\n4000 tasks, 100 functions; R tasks woken between the pre-walk and stop_machine() (\"ran\": how many ran before the callback):\n"
			print "| woken | ran | kpatch window | % of seed | kpatch register |"
			print "|---:|---:|---:|---:|---:|"
			split("1 10 100 1000", rs, " ")
			for (i = 1; i <= 4; i++) {
				r = rs[i]; w = v["window_ran_r" r]
				printf "| %d | %d | %d | %s | %d |\n", r, v["ran_r" r], w,
					pct(w, v["window_seed_t4000_f100"]), v["register_ran_r" r]
			}
			# Per function patched through a direct call, read off
			# kpatch.c: struct kpatch_func (in the patch module), 2 pins
			# (kpatch_prepare: 16 B), struct kpatch_site (64 B), and two
			# struct ftrace_func_entry (32 B each): one in the filter of
			# its group, one in the table of direct calls of ftrace.
			print "\nFootprint (kpatch.ko: size(1) on the host; per function: see the README):\n"
			print "| text | data | bss | sizeof(struct kpatch_func) | bytes held per patched function |"
			print "|---:|---:|---:|---:|---:|"
			printf "| %d | %d | %d | %d | %d |\n", v["kpatch_ko_text"],
				v["kpatch_ko_data"], v["kpatch_ko_bss"], v["sizeof_kpatch_func"],
				v["sizeof_kpatch_func"] + 16 + 64 + 2 * 32
			text = v["kpatch_ko_text"]
			ram = v["kpatch_ko_data"] + v["kpatch_ko_bss"]
			printf "\nText by what the module loader does with it: code kept %s, read-only data kept %s (strings, ORC unwind tables, site lists), dropped at load %s (symbol versions, .modinfo), freed after init %s.\n",
				grouped(v["kpatch_ko_code"]), grouped(v["kpatch_ko_rodata"]),
				grouped(v["kpatch_ko_dropped"]), grouped(v["kpatch_ko_init"])
			printf "\nTargets: text <= 20 KiB: %s (%s; code kept: %s); bss + data <= 16 KiB: %s (%s)\n",
				text <= 20480 ? "yes" : "no", grouped(text),
				grouped(v["kpatch_ko_code"]),
				ram <= 16384 ? "yes" : "no", grouped(ram)
			print "\nApply latency through the control file, idle guest (instructions = ns):\n"
			print "| functions | write() returns | patch seen active |"
			print "|---:|---:|---:|"
			printf "| 1 | %d | %d |\n", v["apply_write_f1"], v["apply_active_f1"]
			printf "| 100 | %d | %d |\n", v["apply_write_f100"], v["apply_active_f100"]
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

main() {
	local kernels=("$@") kver dir
	if ((${#kernels[@]} == 0)); then
		[[ -s $CACHE/kernels.list ]] || die "$CACHE/kernels.list missing (run: $TESTBED setup)"
		mapfile -t kernels <"$CACHE/kernels.list"
	fi
	# Not the debug kernel (testbed.sh's is_debug_kernel): its checkers
	# would be all the figures measure.  Not the PREEMPT_RT kernel either:
	# the figures are the three generic kernels'.
	for kver in "${!kernels[@]}"; do
		if [[ -e $CACHE/kernels/${kernels[kver]}/debug-kernel.key ]]; then
			log "skipping the debug kernel ${kernels[kver]}"
			unset 'kernels[kver]'
		elif grep -qx 'CONFIG_PREEMPT_RT=y' \
			"$CACHE/kernels/${kernels[kver]}/config" 2>/dev/null; then
			log "skipping the PREEMPT_RT kernel ${kernels[kver]}"
			unset 'kernels[kver]'
		fi
	done
	kernels=("${kernels[@]}")
	((${#kernels[@]})) || die "no kernel to benchmark"
	mkdir -p "$OUT"
	exec 9>"$OUT/.lock"
	flock -n 9 || die "another bench run holds $OUT/.lock"
	need_gnuplot
	model
	for kver in "${kernels[@]}"; do
		dir=$OUT/$kver
		mkdir -p "$dir"
		build "$kver" "$dir"
		make_initramfs "$dir"
		boot "$kver" "$dir"
		to_csv "$kver" "$dir"
		report "$kver"
		log "wrote $OUT/$kver.csv"
	done
	plot "${kernels[@]}"
}

main "$@"
