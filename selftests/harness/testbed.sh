#!/bin/bash
# Host-side QEMU test bed for kpatch.
#
# kpatch.ko can't be loaded into the host kernel, so every runtime test boots
# a throw-away QEMU guest (TCG, no KVM) with a Debian kernel and a busybox
# initramfs holding kpatch.ko, the test modules and the guest test scripts.
# The Debian kernels: Debian 12's 6.1, backports' 6.12 and its PREEMPT_RT
# flavour, unstable's 7.x.  One more, the debug kernel (lockdep, KASAN,
# ...; *-kpatch-debug), is built from Debian's linux-source-6.1 by
# selftests/harness/debug-kernel.sh.
#
# The versions come from Debian's meta packages at setup; a missing
# bookworm-backports source is derived from the machine's debian.sources.
# From 7.x the vmlinuz is in linux-binary-KVER.  7.x's headers need a
# newer compiler and libc than bookworm's, so its modules are built in a
# Debian unstable chroot (debootstrap --variant=minbase, kept in the
# cache).  The PREEMPT_RT kernel runs only RT_TESTS unless KPATCH_TESTS
# names scripts.  The debug kernel's modules are signed with its build key.
#
# Guests: -accel tcg,thread=single -cpu max -smp 2 -m 1G, the kernel and
# a busybox initramfs; round-robin TCG because with one host thread per
# vCPU a vCPU can run stale code of a function the kernel rewrites (see
# boot); the debug kernel boots with no5lvl (see boot).  A kernel's
# scripts are split into guests balanced on their times in the previous
# run, and the lockdown boot is a guest of its own (see "run lanes").
# The lockdown boot expects the signed modules to load and the control
# file not to open (debug kernel), or the unsigned kpatch.ko to be
# refused with the reason in the log (Debian's kernels): see
# selftests/lockdown.sh.
#
#   testbed.sh setup [--demo]     install packages, headers and guest kernels,
#                                 and every Debian 12 and unstable kernel
#                                 header package (for lint.sh);
#                                 --demo: only the demo's (Debian 12's 6.1)
#   testbed.sh build KVER OUTDIR  build kpatch.ko (plain and hooked), test modules
#                                 and the guest helpers (selftests/*.c) for KVER;
#                                 `make install` it into OUTDIR/stage and build
#                                 selftests/example against that
#   testbed.sh run [KVER...]      build + boot + test (default: all kernels;
#                                 KVER "demo": the demo's kernel), then a
#                                 second boot with lockdown=integrity
#                                 that runs selftests/lockdown.sh; TAP on
#                                 stdout, and on stderr a line per test
#                                 script as it finishes, with its counts
#   testbed.sh kmake KVER TREE ARG...  make -C KVER's headers ARG..., in the
#                                 unstable chroot for its kernel (TREE, the
#                                 dir with the sources, is shown there)
#   testbed.sh demo               boot the demo's kernel and run demo.sh
#   testbed.sh bench [KVER...]    benchmarks under icount (selftests/bench/)
#
# Environment:
#   KPATCH_CACHE         cache dir (default /var/cache/kpatch-testbed)
#                        (chroot/unstable: Debian unstable, for its kernel)
#   KPATCH_TEST_TIMEOUT  seconds per kernel for `run` (default 1200; 2400
#                        for the debug kernel and the PREEMPT_RT one)
#   KPATCH_LOCKDOWN_TIMEOUT  seconds for the lockdown boot (default 300;
#                        600 for the debug kernel and the PREEMPT_RT one)
#   KPATCH_TESTS         words, each a NAME or glob: only the scripts
#                        selftests/test-NAME.sh, and no lockdown boot unless
#                        a word is "lockdown" (which alone: only the
#                        lockdown boot); e.g. KPATCH_TESTS='api direct'.
#                        `make check-quick` (the edit-test loop) runs a set
#                        of the fastest core tests this way, on the demo's
#                        kernel (see the Makefile)
#   KPATCH_DEMO_TIMEOUT  seconds for `demo` (default 180)
#   KPATCH_JOBS          kernels `run` tests at the same time (default: the
#                        host's cores; each guest runs on one)
#
# A setup refuses to start while another command uses the cache, and the
# others refuse to start during a setup (see "locks" below).
#
# Guest -> host protocol, one line each, on the guest's second serial port:
#   "@@ ok DESC", "@@ not ok DESC", "@@ skip DESC", "@@ done", "# diagnostic".
# Kernel messages go to the first serial port (console.log) and are scanned
# for splats.

set -euo pipefail

SELF=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
SRC=$(cd "$(dirname "$SELF")/../.." && pwd -P)
CACHE=${KPATCH_CACHE:-/var/cache/kpatch-testbed}
BUILDROOT=$CACHE/build
TEST_TIMEOUT=${KPATCH_TEST_TIMEOUT:-1200}
LOCKDOWN_TIMEOUT=${KPATCH_LOCKDOWN_TIMEOUT:-300}
DEMO_TIMEOUT=${KPATCH_DEMO_TIMEOUT:-180}
JOBS=${KPATCH_JOBS:-$(nproc)}
[[ $JOBS =~ ^[1-9][0-9]*$ ]] || { echo "testbed: KPATCH_JOBS must be a positive number: $JOBS" >&2; exit 2; }
# Run from `make -jN` (.ci/run: make -j2 lint check), the kernel builds
# here must not join that make's jobserver: they choose their own -j.
unset MAKEFLAGS MFLAGS MAKELEVEL GNUMAKEFLAGS
# Overridable only to test the source-file logic against a scratch dir.
APT_SOURCES_DIR=${KPATCH_APT_SOURCES_DIR:-/etc/apt/sources.list.d}
BACKPORTS_SOURCES=$APT_SOURCES_DIR/kpatch-testbed-backports.sources

# perl: the W=1 builds run the kernel's scripts/kernel-doc, which needs more
# of perl than perl-base (Pod::Usage), and a minimal Debian has no more.
PACKAGES=(qemu-system-x86 busybox-static cpio gzip gcc make libc6-dev libelf-dev
	perl coreutils util-linux)
# Only for a full setup (not --demo): the unstable chroot.
PACKAGES_FULL=(debootstrap)
META=linux-image-amd64
# The PREEMPT_RT kernel that is booted too: backports' (see cmd_setup).
META_RT=linux-image-rt-amd64
# Suites that make up the "6.1" (default) and the "6.12" (backports) kernel.
SUITES_STABLE='bookworm|bookworm-security|bookworm-updates'
SUITES_BPO='bookworm-backports'
# The header meta packages a user installs, one per flavour and line of
# kernels: linux-headers-[X.Y-][FLAVOUR-]amd64 (generic, cloud, rt, and
# a newer line offered beside the suite's own).  Each suite's (and the
# unstable chroot's) are resolved at setup, and lint.sh builds kpatch.ko
# against every header package they depend on (headers.list).
HEADERS_META_RE='^linux-headers-([0-9]+\.[0-9]+-)?([a-z]+-)?amd64$'
# The newest kernel is Debian unstable's.  Its headers need a newer compiler
# and libc than bookworm's, so it is built in an unstable chroot (debootstrap,
# minbase) kept in the cache; sparse is there for lint.sh.
SID_SUITE=unstable
SID_ROOT=$CACHE/chroot/$SID_SUITE
# xz-utils: modules_install compresses modules with xz on Debian's 7.x
# (CONFIG_MODULE_COMPRESS_XZ), for the test of make install (build_example).
SID_PACKAGES=gcc,make,sparse,xz-utils

# KP_SPLAT_RE: the console lines that fail a kernel's run; the guest's
# functions.sh checks each script's kernel log with the same file.
# shellcheck source-path=SCRIPTDIR source=../splat.sh
. "$SRC/selftests/splat.sh"

export DEBIAN_FRONTEND=noninteractive LC_ALL=C

log() { echo "testbed: $*" >&2; }
die() { log "error: $*"; exit 1; }

usage() {
	sed -n '2,/^$/s/^# \{0,1\}//p' "$SELF" >&2
	exit 2
}

# ---------------------------------------------------------------- locks ----

# Two flock(1) locks per cache, and no command waits for them: the second
# one stops with a message.  $CACHE/.lock: `setup` installs headers and
# replaces kernels and lists, so it holds it alone; `run`, `demo`, `bench`,
# `build` and `kmake` (so lint.sh too) share it.  $BUILDROOT/.lock: `run`
# and `demo` build and boot in $BUILDROOT, one at a time (lock_cache).
# Both are held on fds that the guests inherit, until the last one exits.
CACHE_LOCK=$CACHE/.lock

# lock_setup: $CACHE/.lock, alone; the lock file says who holds it.
lock_setup() {
	exec 7>>"$CACHE_LOCK"
	if ! flock -n -x 7; then
		if flock -n -s 7; then
			die "$CACHE is in use by a testbed run, demo, bench or lint (e.g. another make check or make demo); setup would change what it uses: run it again when that has finished, or set KPATCH_CACHE to another cache"
		fi
		die "another setup is running on $CACHE ($(cat "$CACHE_LOCK" 2>/dev/null)): run it again when that has finished"
	fi
	echo "setup, pid $$, started $(date '+%F %T')" >"$CACHE_LOCK"
}

# lock_shared: $CACHE/.lock, shared with all but setup.  Nothing to lock
# when the cache has no lock file and this user cannot create one (a
# build against the host's headers by a user who cannot write the cache).
lock_shared() {
	if ! { exec 7>>"$CACHE_LOCK"; } 2>/dev/null; then
		[[ -r $CACHE_LOCK ]] || return 0
		exec 7<"$CACHE_LOCK"
	fi
	flock -n -s 7 ||
		die "a testbed setup is running on $CACHE ($(cat "$CACHE_LOCK" 2>/dev/null)): run this again when it has finished"
}

# ---------------------------------------------------------------- setup ----

# URIs: of the deb822 stanza of debian.sources whose Suites include bookworm.
debian_mirror() {
	local f=$APT_SOURCES_DIR/debian.sources
	[[ -r $f ]] || die "$f not found"
	awk '
		function flush() {
			if (hit && uri != "" && out == "")
				out = uri
			hit = 0; uri = ""
		}
		/^[ \t]*$/ { flush(); next }
		/^[ \t]*#/ { next }
		tolower($1) == "uris:" { uri = $2 }
		tolower($1) == "suites:" {
			for (i = 2; i <= NF; i++)
				if ($i == "bookworm")
					hit = 1
		}
		END { flush(); if (out != "") print out }
	' "$f"
}

backports_configured() {
	[[ -e $BACKPORTS_SOURCES ]] && return 0
	local files=("$APT_SOURCES_DIR"/*.sources "$APT_SOURCES_DIR"/*.list
		"${APT_SOURCES_DIR%/*}/sources.list")
	grep -qsE '^[[:space:]]*(Suites:.*[[:space:]]bookworm-backports([[:space:]]|$)|deb[[:space:]].*[[:space:]]bookworm-backports([[:space:]]|$))' \
		"${files[@]}"
}

# Prints "added" when it created the file.
ensure_backports() {
	backports_configured && return 0
	local uri
	uri=$(debian_mirror)
	[[ -n $uri ]] || die "no URIs: for suite bookworm in $APT_SOURCES_DIR/debian.sources"
	log "adding bookworm-backports ($uri) as $BACKPORTS_SOURCES"
	cat >"$BACKPORTS_SOURCES.tmp" <<-EOF
		Types: deb
		URIs: $uri
		Suites: bookworm-backports
		Components: main
		Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
	EOF
	mv "$BACKPORTS_SOURCES.tmp" "$BACKPORTS_SOURCES"
	echo added
}

APT_UPDATED=0
apt_update() {
	((APT_UPDATED)) && return 0
	log "apt-get update"
	apt-get update -q >&2
	APT_UPDATED=1
}

apt_install() {
	log "apt-get install $*"
	apt-get install -y -q --no-install-recommends "$@" >&2
}

pkg_installed() {
	[[ $(dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null) == ii* ]]
}

# apt_cache [ROOT] ARG...: apt-cache ARG..., in chroot ROOT if not empty
apt_cache() {
	local root=$1
	shift
	if [[ -n $root ]]; then
		in_root "$root" apt-cache "$@"
	else
		apt-cache "$@"
	fi
}

# meta_versions META SUITES [ROOT]: "VERSION SUITE" for each version of
# package META offered by the suites matching regex SUITES (apt-cache
# madison, of chroot ROOT if given).
meta_versions() {
	local ver rest suite
	while IFS='|' read -r _ ver rest; do
		ver=${ver//[[:space:]]/}
		[[ $rest == *Packages* ]] || continue
		read -r _ suite _ <<<"$rest"
		suite=${suite%%/*}
		[[ $suite =~ ^($2)$ ]] || continue
		echo "$ver $suite"
	done < <(apt_cache "${3:-}" madison "$1" 2>/dev/null)
}

# meta_version META SUITES: "VERSION SUITE", the highest of meta_versions
meta_version() {
	local best='' from='' ver suite
	while read -r ver suite; do
		if [[ -z $best ]] || dpkg --compare-versions "$ver" gt "$best"; then
			best=$ver from=$suite
		fi
	done < <(meta_versions "$1" "$2")
	[[ -n $best ]] && echo "$best $from"
}

# depends_kver [PREFIX]: apt-cache show output of a meta package on stdin
# -> the <kver> of the PREFIX<kver> (default linux-image-) it depends on
depends_kver() {
	awk -v p="${1:-linux-image-}" '
		/^Depends:/ {
			for (i = 2; i <= NF; i++)
				if (index($i, p) == 1) {
					sub(/,$/, "", $i)
					print substr($i, length(p) + 1)
					exit
				}
		}'
}

# meta_kver META VERSION [PREFIX [ROOT]]: the <kver> of the PREFIX<kver>
# that META=VERSION depends on
meta_kver() {
	apt_cache "${4:-}" show "$1=$2" 2>/dev/null | depends_kver "${3:-}"
}

valid_kver() {
	[[ $1 =~ ^[0-9][0-9A-Za-z.+~_-]*$ ]]
}

# resolve_kernels "META SUITES"...: "KVER SUITE VER META" for each: the kernel
# that the highest version of META in the suites matching regex SUITES
# depends on (the 6.1 kernel: $META $SUITES_STABLE, the 6.12 kernel:
# $META $SUITES_BPO, its PREEMPT_RT flavour: $META_RT $SUITES_BPO).
resolve_kernels() {
	local spec meta ver suite kver
	for spec in "$@"; do
		meta=${spec%% *}
		read -r ver suite < <(meta_version "$meta" "${spec#* }") || return 1
		kver=$(meta_kver "$meta" "$ver")
		valid_kver "$kver" || return 1
		echo "$kver $suite $ver $meta"
	done
}

# resolve_headers SUITES [ROOT]: "KVER SUITE VER" for every header package
# linux-headers-KVER that a header meta package (HEADERS_META_RE) of the
# suites matching regex SUITES depends on, VER being the meta package's
# version; each KVER once, sorted.  With ROOT: that chroot's apt.  Fails
# when there is none.  (Three apt-cache calls in all: each reads the
# whole package cache.)
resolve_headers() {
	local suites=$1 root=${2:-} pkg ver rest suite out lines=''
	local -a metas=() pairs=()
	local -A from=()
	mapfile -t metas < <(apt_cache "$root" pkgnames linux-headers- |
		grep -E "$HEADERS_META_RE" | sort)
	((${#metas[@]})) || return 1
	while IFS='|' read -r pkg ver rest; do
		pkg=${pkg//[[:space:]]/} ver=${ver//[[:space:]]/}
		[[ $rest == *Packages* ]] || continue
		read -r _ suite _ <<<"$rest"
		suite=${suite%%/*}
		[[ $suite =~ ^($suites)$ && -z ${from[$pkg=$ver]:-} ]] || continue
		from[$pkg=$ver]=$suite
		pairs+=("$pkg=$ver")
	done < <(apt_cache "$root" madison "${metas[@]}" 2>/dev/null)
	((${#pairs[@]})) || return 1
	out=$(apt_cache "$root" show "${pairs[@]}" 2>/dev/null | awk '
		/^Package:/ { pkg = $2 }
		/^Version:/ { ver = $2 }
		/^Depends:/ {
			for (i = 2; i <= NF; i++)
				if (index($i, "linux-headers-") == 1) {
					sub(/,$/, "", $i)
					print substr($i, 15), pkg "=" ver
					break
				}
		}')
	while read -r pkg ver; do
		valid_kver "$pkg" && [[ -n ${from[$ver]:-} ]] || return 1
		lines+="$pkg ${from[$ver]} ${ver#*=}"$'\n'
	done <<<"$out"
	printf '%s' "$lines" | sort -V -k1,1 | awk '!seen[$1]++'
}

# fetch_kernel KVER [ROOT]: vmlinuz (and config) of KVER from its Debian
# package, found with the apt of chroot ROOT if given.  From 7.x the vmlinuz
# is in linux-binary-KVER at usr/lib/modules/KVER/vmlinuz, and the config
# only in the headers.
fetch_kernel() {
	local kver=$1 root=${2:-} dir=$CACHE/kernels/$1 debs tmp pkg vmlinuz config
	[[ -s $dir/vmlinuz ]] && return 0
	pkg=linux-image-$kver
	if [[ -n $root ]] && in_root "$root" apt-cache show "linux-binary-$kver" >/dev/null 2>&1; then
		pkg=linux-binary-$kver
	fi
	shopt -s nullglob
	debs=("$CACHE"/debs/"$pkg"_*.deb "$CACHE"/"$pkg"_*.deb)
	shopt -u nullglob
	if ((${#debs[@]} == 0)); then
		mkdir -p "$CACHE/debs"
		log "apt-get download $pkg"
		if [[ -n $root ]]; then
			# shellcheck disable=SC2016 # expanded in the chroot
			in_root "$root" sh -ec 'cd /var/cache/apt/archives
				apt-get download -q -o APT::Sandbox::User=root "$0"' "$pkg" >&2
			mv "$root"/var/cache/apt/archives/"$pkg"_*.deb "$CACHE/debs/"
		else
			(cd "$CACHE/debs" && apt-get download -q -o APT::Sandbox::User=root "$pkg" >&2)
		fi
		debs=("$CACHE"/debs/"$pkg"_*.deb)
	fi
	log "extracting vmlinuz from ${debs[0]}"
	tmp=$(mktemp -d "$CACHE/tmp.XXXXXX")
	# Only the kernel: the full tree (modules) is ~0.5 GB and not needed.
	dpkg-deb --fsys-tarfile "${debs[0]}" |
		tar -x -C "$tmp" --wildcards --no-wildcards-match-slash \
			'./boot/*' "./usr/lib/modules/$kver/vmlinuz" 2>/dev/null || true
	for vmlinuz in "$tmp/boot/vmlinuz-$kver" "$tmp/usr/lib/modules/$kver/vmlinuz" ''; do
		[[ -s $vmlinuz ]] && break
	done
	[[ -n $vmlinuz ]] || { rm -rf "$tmp"; die "no vmlinuz for $kver in ${debs[0]}"; }
	config=$tmp/boot/config-$kver
	[[ -e $config ]] || config=$root/usr/src/linux-headers-$kver/.config
	mkdir -p "$dir"
	cp "$config" "$dir/config"
	cp "$vmlinuz" "$dir/vmlinuz.tmp"
	mv "$dir/vmlinuz.tmp" "$dir/vmlinuz"
	rm -rf "$tmp"
}

# in_root ROOT CMD...: run CMD in chroot ROOT, with its /proc (objtool reads
# it) mounted in a private mount namespace that ends with CMD.
in_root() {
	local root=$1
	shift
	# shellcheck disable=SC2016 # expanded by that sh
	unshare -m --propagation private sh -ec \
		'mount -t proc proc "$0/proc"; exec chroot "$0" "$@"' "$root" \
		env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C \
		DEBIAN_FRONTEND=noninteractive "$@"
}

# Creates (once) and updates the unstable chroot, installs the headers of
# every flavour of unstable's kernel in it and fetches the generic one.
# Sets SID_KERNEL, "KVER SUITE VER" of that one, and SID_HEADERS, the
# chroot's resolve_headers.
SID_KERNEL='' SID_HEADERS=''
setup_unstable() {
	local uri start conf sources stamp=$SID_ROOT/.kpatch-apt-updated ver kver
	uri=$(debian_mirror)
	[[ -n $uri ]] || die "no URIs: for suite bookworm in $APT_SOURCES_DIR/debian.sources"
	if [[ ! -e $SID_ROOT/.kpatch-testbed ]]; then
		start=$SECONDS
		log "creating the $SID_SUITE chroot $SID_ROOT ($uri)"
		rm -rf "$SID_ROOT.tmp"
		mkdir -p "${SID_ROOT%/*}"
		debootstrap --variant=minbase --include="$SID_PACKAGES" \
			"$SID_SUITE" "$SID_ROOT.tmp" "$uri" >&2 ||
			die "debootstrap $SID_SUITE failed (see $SID_ROOT.tmp/debootstrap/debootstrap.log)"
		touch "$SID_ROOT.tmp/.kpatch-testbed"
		rm -rf "$SID_ROOT"
		mv "$SID_ROOT.tmp" "$SID_ROOT"
		rm -f "$stamp"
		log "$SID_SUITE chroot created in $((SECONDS - start))s"
	fi
	# The host's mirror and its apt policy on expired Release files (a
	# snapshot mirror's are), so the chroot reaches what the host reaches.
	sources="deb $uri $SID_SUITE main"
	if [[ $(cat "$SID_ROOT/etc/apt/sources.list" 2>/dev/null) != "$sources" ]]; then
		echo "$sources" >"$SID_ROOT/etc/apt/sources.list"
		rm -f "$stamp"
	fi
	conf=$(apt-config dump --format '%v%n' Acquire::Check-Valid-Until)
	if [[ -n $conf ]]; then
		echo "Acquire::Check-Valid-Until \"$conf\";" \
			>"$SID_ROOT/etc/apt/apt.conf.d/99kpatch-testbed"
	fi
	# Unstable moves: take its newest kernel, with lists at most a day old.
	if [[ -z $(find "$stamp" -mmin -1440 2>/dev/null) ]]; then
		log "apt-get update ($SID_SUITE chroot)"
		in_root "$SID_ROOT" apt-get update -q >&2
		touch "$stamp"
	fi
	sid_install_missing
	ver=$(in_root "$SID_ROOT" apt-cache show --no-all-versions "$META" 2>/dev/null |
		sed -n 's/^Version: //p')
	kver=$(in_root "$SID_ROOT" apt-cache show --no-all-versions "$META" 2>/dev/null |
		depends_kver)
	valid_kver "$kver" || die "cannot resolve $META in $SID_SUITE"
	# Every flavour's headers: the one booted, and the others for lint.sh.
	SID_HEADERS=$(resolve_headers "$SID_SUITE" "$SID_ROOT") ||
		die "cannot resolve the header meta packages in $SID_SUITE"
	local h missing=()
	while read -r h _; do
		# shellcheck disable=SC2016 # a dpkg-query format
		if [[ $(in_root "$SID_ROOT" dpkg-query -W -f='${db:Status-Abbrev}' \
			"linux-headers-$h" 2>/dev/null) != ii* ]] ||
		   [[ ! -e $SID_ROOT/lib/modules/$h/build/Makefile ]]; then
			missing+=("linux-headers-$h")
		fi
	done < <(printf '%s\n' "$SID_HEADERS" "$kver")
	if ((${#missing[@]})); then
		start=$SECONDS
		log "installing ${missing[*]} in the $SID_SUITE chroot"
		in_root "$SID_ROOT" apt-get install -y -q --no-install-recommends \
			"${missing[@]}" >&2
		in_root "$SID_ROOT" apt-get clean
		log "headers installed in $((SECONDS - start))s"
	fi
	# Debian's 7.x headers lack scripts/checker-valid.sh, without which
	# kbuild skips sparse on C=2 (lint.sh): a stand-in that accepts the
	# checker when it runs cleanly on a trivial file.
	local scripts
	scripts=$(sed -n 's|^include \(/.*\)/Makefile$|\1/scripts|p' \
		"$SID_ROOT/lib/modules/$kver/build/Makefile")
	scripts=${scripts:+$SID_ROOT$scripts}
	if [[ -d $scripts && ! -e $scripts/checker-valid.sh ]]; then
		cat >"$scripts/checker-valid.sh" <<-'EOF'
			#!/bin/sh
			# Added by kpatch's selftests/harness/testbed.sh (missing from the package).
			f=$(mktemp --suffix=.c) || exit 1
			echo 'int kpatch_checker_valid(void);' >"$f"
			if out=$("$@" "$f" 2>&1) && [ -z "$out" ]; then echo 1; else echo 0; fi
			rm -f "$f"
		EOF
		chmod 755 "$scripts/checker-valid.sh"
	fi
	fetch_kernel "$kver" "$SID_ROOT"
	SID_KERNEL="$kver $SID_SUITE $ver"
}

# sid_install_missing: install the SID_PACKAGES that the chroot lacks (it
# was made before they were added there)
sid_install_missing() {
	local p missing=()
	for p in ${SID_PACKAGES//,/ }; do
		# shellcheck disable=SC2016 # a dpkg-query format
		[[ $(in_root "$SID_ROOT" dpkg-query -W -f='${db:Status-Abbrev}' \
			"$p" 2>/dev/null) == ii* ]] || missing+=("$p")
	done
	((${#missing[@]})) || return 0
	log "installing ${missing[*]} in the $SID_SUITE chroot"
	in_root "$SID_ROOT" apt-get install -y -q --no-install-recommends \
		"${missing[@]}" >&2
	in_root "$SID_ROOT" apt-get clean
}

# setup [--demo]: everything `run`, `lint` and `bench` need: packages, the
# headers and vmlinuz of the 6.1 and 6.12 kernels and of the 6.12 rt
# kernel, the unstable chroot and its kernel, the debug kernel;
# kernels.list (written last, when all of them are there) lists them.  It
# also installs every header package that the header meta packages of
# Debian 12's suites and of unstable depend on (each flavour; unstable's
# in the chroot) and lists them in headers.list, for lint.sh.  --demo:
# only the demo's kernel, Debian 12's own 6.1 (no backports, no chroot, no
# debug kernel, no other headers); it writes demo.kernel and leaves
# kernels.list as it is, so that `run` never takes a demo setup for a
# full one.  A full setup writes demo.kernel too.
cmd_setup() {
	local demo=0
	case $# in
	0) ;;
	1) [[ $1 == --demo ]] || usage; demo=1 ;;
	*) usage ;;
	esac
	((EUID == 0)) || die "setup must run as root"
	mkdir -p "$CACHE"
	lock_setup

	local missing=() p added pkgs=("${PACKAGES[@]}")
	if ((demo)); then
		log "setting up the demo's kernel only (Debian 12's 6.1)"
	else
		pkgs+=("${PACKAGES_FULL[@]}")
		added=$(ensure_backports)
		if [[ $added == added ]]; then apt_update; fi
	fi
	for p in "${pkgs[@]}"; do
		pkg_installed "$p" || missing+=("$p")
	done
	if ((${#missing[@]})); then
		apt_update
		apt_install "${missing[@]}"
	fi

	local kernels headers='' specs=("$META $SUITES_STABLE")
	((demo)) || specs+=("$META $SUITES_BPO" "$META_RT $SUITES_BPO")
	if ! kernels=$(resolve_kernels "${specs[@]}"); then
		apt_update
		kernels=$(resolve_kernels "${specs[@]}") ||
			die "cannot resolve ${specs[*]}"
	fi
	# Every kernel header package of Debian 12's suites, for lint.sh.
	if ((!demo)); then
		headers=$(resolve_headers "$SUITES_STABLE|$SUITES_BPO") ||
			die "cannot resolve the header meta packages in $SUITES_STABLE|$SUITES_BPO"
	fi

	local kver suite ver meta hdrs=()
	local -A seen=()
	while read -r kver suite _; do
		[[ -n $kver && -z ${seen[$kver]:-} ]] || continue
		seen[$kver]=1
		pkg_installed "linux-headers-$kver" && [[ -e /lib/modules/$kver/build/Makefile ]] && continue
		if [[ $suite == *-backports ]]; then
			hdrs+=("linux-headers-$kver/$suite")
		else
			hdrs+=("linux-headers-$kver")
		fi
	done < <(printf '%s\n' "$kernels" "$headers")
	if ((${#hdrs[@]})); then
		apt_install "${hdrs[@]}" || { apt_update && apt_install "${hdrs[@]}"; }
	fi

	while read -r kver _; do
		fetch_kernel "$kver"
	done <<<"$kernels"
	# The demo's kernel: the first, Debian 12's 6.1.
	head -n 1 <<<"$kernels" | awk '{print $1}' >"$CACHE/demo.kernel.tmp"
	mv "$CACHE/demo.kernel.tmp" "$CACHE/demo.kernel"

	if ((!demo)); then
		setup_unstable
		kernels+=$'\n'$SID_KERNEL
		headers+=$'\n'$SID_HEADERS
		# The debug kernel: built (once per source version and config)
		# from linux-source-6.1, see debug-kernel.sh.
		kver=$(KPATCH_CACHE=$CACHE "$SRC/selftests/harness/debug-kernel.sh") ||
			die "building the debug kernel failed"
		ver=$(dpkg-query -W -f='${Version}' linux-source-6.1)
		kernels+=$'\n'"$kver debug $ver"

		# headers.list: "KVER SUITE VERSION" of each header package
		# (lint.sh); kernels.list: the kernels `run` boots.
		printf '%s\n' "$headers" >"$CACHE/headers.list.tmp"
		mv "$CACHE/headers.list.tmp" "$CACHE/headers.list"
		awk '{print $1}' <<<"$kernels" >"$CACHE/kernels.list.tmp"
		mv "$CACHE/kernels.list.tmp" "$CACHE/kernels.list"
	fi
	while read -r kver suite ver meta; do
		if [[ $suite == debug ]]; then
			echo "kernel: $kver (linux-source-6.1 $ver, debug build)"
		else
			echo "kernel: $kver (${meta:-$META} $ver, $suite)"
		fi
	done <<<"$kernels"
	if [[ -n $headers ]]; then
		while read -r kver suite ver; do
			echo "headers: linux-headers-$kver ($ver, $suite)"
		done <<<"$headers"
	fi
}

# ---------------------------------------------------------------- build ----

# host_kdir KVER: KVER's build dir on the host: the debug kernel's O= tree
# in the cache (see debug-kernel.sh), else /lib/modules/KVER/build
host_kdir() {
	if [[ -e $CACHE/kernels/$1/build/Makefile ]]; then
		echo "$CACHE/kernels/$1/build"
	else
		echo "/lib/modules/$1/build"
	fi
}

# kernel_root KVER: "" when the host has KVER's headers (or build tree), the
# chroot when it has them, else fails.
kernel_root() {
	if [[ -e $(host_kdir "$1")/Makefile ]]; then
		echo
	elif [[ -e $SID_ROOT/lib/modules/$1/build/Makefile ]]; then
		echo "$SID_ROOT"
	else
		return 1
	fi
}

# kroot_kdir KVER: KVER's build dir as kroot_run's commands see it
kroot_kdir() {
	if [[ -n $(kernel_root "$1") ]]; then
		echo "/lib/modules/$1/build"
	else
		host_kdir "$1"
	fi
}

# kmake KVER TREE ARG...: make -C KVER's build dir ARG... (see kroot_run)
kmake() {
	local kver=$1 tree=$2
	shift 2
	kroot_run "$kver" "$tree" make -C "$(kroot_kdir "$kver")" "$@"
}

# kroot_run KVER TREE CMD...: run CMD where KVER's modules are built: on
# the host, or in the chroot that has its headers, with TREE bind-mounted
# at the same path in it.
kroot_run() {
	local kver=$1 tree=$2 root
	shift 2
	root=$(kernel_root "$kver") ||
		die "no headers for $kver in /lib/modules/$kver/build or $SID_ROOT (run: $SELF setup)"
	if [[ -z $root ]]; then
		"$@"
		return
	fi
	tree=$(realpath "$tree")
	mkdir -p "$root$tree"
	local rc=0
	# shellcheck disable=SC2016 # expanded by that sh
	unshare -m --propagation private sh -ec \
		'mount -t proc proc "$0/proc"; mount --bind "$1" "$0$1"; shift
		 exec chroot "$0" "$@"' "$root" "$tree" \
		env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C \
		"$@" || rc=$?
	rmdir "$root$tree" 2>/dev/null || true
	return "$rc"
}

cmd_build() {
	(($# == 2)) || usage
	local kver=$1 out=$2
	lock_shared
	kernel_root "$kver" >/dev/null || die "no headers for $kver (run: $SELF setup)"
	[[ -e $SRC/kpatch.c ]] || die "$SRC/kpatch.c not found"
	out=$(realpath -m "$out")
	case $out/ in
	/ | "$SRC"/*) die "OUTDIR must be outside the source tree: $out" ;;
	esac
	mkdir -p "$out"
	# Wipe a previous build, but never a directory we did not create.
	if [[ -n $(ls -A "$out") && ! -e $out/.kpatch-testbed ]]; then
		die "$out is not empty and not a testbed build dir"
	fi
	find "$out" -mindepth 1 -delete
	touch "$out/.kpatch-testbed"

	local f
	for f in kpatch.c kpatch.h Kbuild Makefile; do
		if [[ -e $SRC/$f ]]; then cp "$SRC/$f" "$out/"; fi
	done
	local blog=$out/build.log jobs
	jobs=$(nproc)

	log "building kpatch.ko for $kver in $out"
	kmake "$kver" "$out" M="$out" W=1 -j"$jobs" modules 2>&1 | tee "$blog" >&2
	if grep -i 'warning:' "$blog" >&2; then
		die "kpatch.ko build for $kver printed warnings (W=1)"
	fi
	[[ -e $out/kpatch.ko ]] || die "kpatch.ko was not built"
	check_guard "$out/kpatch.ko"

	if [[ -d $SRC/selftests/test_modules ]]; then
		log "building test modules for $kver"
		cp -r "$SRC/selftests/test_modules" "$out/test_modules"
		kmake "$kver" "$out" M="$out/test_modules" W=1 -j"$jobs" \
			KBUILD_EXTRA_SYMBOLS="$out/Module.symvers" modules 2>&1 |
			tee "$out/build-test_modules.log" >&2
		if grep -i 'warning:' "$out/build-test_modules.log" >&2; then
			die "test modules build for $kver printed warnings (W=1)"
		fi
	fi

	build_example "$kver" "$out" "$jobs"

	# The same again with the test hooks compiled in (see Kbuild), in
	# hooks/: kpatch.ko and the test modules that use the hooks.
	log "building the hooked kpatch.ko and its test modules for $kver"
	mkdir -p "$out/hooks"
	for f in kpatch.c kpatch.h Kbuild; do cp "$SRC/$f" "$out/hooks/"; done
	cp -r "$SRC/selftests/test_modules" "$out/hooks/test_modules"
	kmake "$kver" "$out" M="$out/hooks" W=1 -j"$jobs" KPATCH_TEST_HOOKS=1 \
		modules 2>&1 | tee "$out/build-hooks.log" >&2
	kmake "$kver" "$out" M="$out/hooks/test_modules" W=1 -j"$jobs" \
		KPATCH_TEST_HOOKS=1 KBUILD_EXTRA_SYMBOLS="$out/hooks/Module.symvers" \
		modules 2>&1 | tee -a "$out/build-hooks.log" >&2
	if grep -i 'warning:' "$out/build-hooks.log" >&2; then
		die "hooked build for $kver printed warnings (W=1)"
	fi
	[[ -e $out/hooks/kpatch.ko ]] || die "the hooked kpatch.ko was not built"

	# Guest helpers: every selftests/*.c, static, as bin/NAME.
	mkdir -p "$out/bin"
	for f in "$SRC"/selftests/*.c; do
		[[ -e $f ]] || continue
		f=${f##*/}
		log "building ${f%.c}"
		gcc -static -O2 -Wall -Werror -o "$out/bin/${f%.c}" \
			"$SRC/selftests/$f" 2>&1 | tee "$out/build-${f%.c}.log" >&2
		[[ -x $out/bin/${f%.c} ]] || die "${f%.c} was not built"
	done
	sign_modules "$kver" "$out"
}

# build_example KVER OUT JOBS: `make install` of the kpatch.ko just built in
# OUT into the staging root OUT/stage (DESTDIR), then the example patch
# module (selftests/example) in OUT/example with its own Makefile, as
# Documentation.txt tells a patch author, against the kpatch.h and
# Module.symvers under OUT/stage only.  test-example.sh loads it.
build_example() {
	local kver=$1 out=$2 jobs=$3 kdir ver dev blog=$2/build-example.log
	kdir=$(kroot_kdir "$kver")
	ver=$(sed -n 's/^MODULE_VERSION("\(.*\)");$/\1/p' "$out/kpatch.c")
	dev=$out/stage/usr/src/kpatch-$ver
	log "make install of kpatch.ko for $kver into $out/stage"
	# W=1 as for the build above, or kbuild would build kpatch.ko again.
	# (Its log is not checked for warnings: modules_install warns that
	# distribution headers lack System.map.)
	kroot_run "$kver" "$out" make -C "$out" KDIR="$kdir" DESTDIR="$out/stage" \
		W=1 install 2>&1 | tee "$out/build-install.log" >&2
	[[ -e $dev/kpatch.h && -e $dev/$kver/Module.symvers ]] ||
		die "make install left no $dev/kpatch.h and $dev/$kver/Module.symvers"
	[[ -n $(find "$out/stage/lib/modules/$kver/extra" -name 'kpatch.ko*') ]] ||
		die "make install left no kpatch.ko in $out/stage/lib/modules/$kver/extra"

	log "building the example patch module for $kver against $dev"
	cp -r "$SRC/selftests/example" "$out/example"
	kroot_run "$kver" "$out" make -C "$out/example" KDIR="$kdir" \
		KPATCH_DIR="$dev" W=1 -j"$jobs" 2>&1 | tee "$blog" >&2
	if grep -i 'warning:' "$blog" >&2; then
		die "example build for $kver printed warnings (W=1)"
	fi
	[[ -e $out/example/kpatch_example.ko ]] || die "kpatch_example.ko was not built"
	# kbuild's record of the headers it read: the installed kpatch.h, and
	# not the one it was installed from
	grep -qF "$dev/kpatch.h" "$out/example/.kpatch_example.o.cmd" ||
		die "the example was not built with $dev/kpatch.h"
	if grep -qF "$out/kpatch.h" "$out/example/.kpatch_example.o.cmd"; then
		die "the example was built with $out/kpatch.h, not the installed one"
	fi
}

# check_guard KO: kpatch_guard, the direct call of a jmp site while an
# update changes it, starts on a 16-byte boundary.  The low bit of a
# direct call's address is a flag to ftrace on kernels with
# DYNAMIC_FTRACE_WITH_JMP, so the address must be even; kpatch.c aligns
# it like a compiled function.  In a .ko that is the symbol's offset in
# its section and the section's alignment.
check_guard() {
	local ko=$1 val sec align
	read -r val sec < <(readelf -sW "$ko" |
		awk '$8 == "kpatch_guard" { print $2, $7 }') || true
	if [[ -z ${val:-} ]]; then
		log "no kpatch_guard in $ko (no jmp sites on this kernel)"
		return 0
	fi
	align=$(readelf -SW "$ko" | sed 's/^ *\[ *\([0-9]*\)\]/\1/' |
		awk -v s="$sec" '$1 == s { print $NF }')
	[[ $sec =~ ^[0-9]+$ && $align =~ ^[0-9]+$ ]] ||
		die "kpatch_guard in $ko: cannot read its section ($sec)"
	if ((16#$val % 16 || align < 16)); then
		die "kpatch_guard in $ko is at offset 0x$val of a section aligned to $align: not 16-byte aligned"
	fi
	log "kpatch_guard: offset 0x$val, section alignment $align"
}

# sign_modules KVER DIR: when KVER's build tree has its signing key (the
# debug kernel's does, Debian's headers don't), sign every module under DIR
# with it, so that they load under lockdown=integrity.
sign_modules() {
	local kdir ko hash n=0
	kdir=$(host_kdir "$1")
	[[ -e $kdir/certs/signing_key.pem ]] || return 0
	hash=$(sed -n 's/^CONFIG_MODULE_SIG_HASH="\(.*\)"$/\1/p' "$kdir/.config")
	while IFS= read -r -d '' ko; do
		"$kdir/scripts/sign-file" "${hash:-sha256}" "$kdir/certs/signing_key.pem" \
			"$kdir/certs/signing_key.x509" "$ko" || die "sign-file $ko failed"
		[[ $(tail -c 28 "$ko") == '~Module signature appended~' ]] ||
			die "$ko has no signature after sign-file"
		n=$((n + 1))
	done < <(find "$2" -path "$2/stage" -prune -o -name '*.ko' -print0)
	log "signed $n modules with $kdir/certs/signing_key.pem"
}

# ------------------------------------------------------------ initramfs ----

make_initramfs() {
	local out=$1 dest=${2:-$1} list=${3:-} root=${2:-$1}/initramfs f
	rm -rf "$root"
	mkdir -p "$root"/{bin,sbin,usr/bin,usr/sbin,dev,proc,sys,tmp,root}
	mkdir -p "$root"/kpatch/{selftests,test_modules}
	# busybox-static's /bin/busybox; the dynamic busybox package would not run.
	if ldd /bin/busybox >/dev/null 2>&1; then die "/bin/busybox is not static"; fi
	cp /bin/busybox "$root/bin/busybox"
	ln -s busybox "$root/bin/sh"
	if ((EUID == 0)); then
		mknod -m 600 "$root/dev/console" c 5 1
	fi
	install -m 755 "$SRC/selftests/harness/guest-init.sh" "$root/init"
	cp "$out/kpatch.ko" "$root/kpatch/"
	if [[ -d $out/test_modules ]]; then
		find "$out/test_modules" -name '*.ko' -exec cp {} "$root/kpatch/test_modules/" \;
	fi
	# The example patch module (see build_example), with the test modules.
	if [[ -e $out/example/kpatch_example.ko ]]; then
		cp "$out/example/kpatch_example.ko" "$root/kpatch/test_modules/"
	fi
	# The hooked build (see cmd_build), for the tests that need it.
	if [[ -d $out/hooks ]]; then
		mkdir -p "$root/kpatch/hooks/test_modules"
		cp "$out/hooks/kpatch.ko" "$root/kpatch/hooks/"
		find "$out/hooks/test_modules" -name '*.ko' \
			-exec cp {} "$root/kpatch/hooks/test_modules/" \;
	fi
	# The test scripts that KPATCH_TESTS selects (test_scripts); lockdown.sh:
	# the lockdown boot's script (see cmd_run)
	for f in "$SRC"/selftests/{functions,splat,demo,lockdown}.sh; do
		cp "$f" "$root/kpatch/selftests/"
	done
	while IFS= read -r f; do
		cp "$f" "$root/kpatch/selftests/"
	done < <(if [[ -n $list ]]; then cat "$list"; else test_scripts; fi)
	if [[ -d $out/bin ]]; then cp "$out"/bin/* "$root/bin/"; fi
	(cd "$root" && find . -print0 | sort -z |
		cpio --null -o -H newc --owner=0:0 --quiet) | gzip -6 >"$dest/initramfs.gz"
	rm -rf "$root"
}

# ----------------------------------------------------------------- boot ----

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

# Progress while a `run` guest runs: one line on stderr per script as it
# finishes, with its counts, from the guest's results.log as it grows.
# cmd_run sets PROGRESS (the label: the kernel, and "(lockdown)" for the
# second boot) and PROGRESS_TOTAL (scripts in the guest); empty: no lines.
# PROG_TIMES: a file to add "SCRIPT SECONDS" to for each script that
# finished (run_guest: the shards' balance in the next run).
PROGRESS='' PROGRESS_TOTAL=0 PROG_TIMES=''
PROG_LINES=0 PROG_DONE=0 PROG_SCRIPT='' PROG_T0=0 PROG_OK=0 PROG_NOK=0 PROG_SKIP=0

progress_start() {
	PROG_LINES=0 PROG_DONE=0 PROG_SCRIPT=''
}

# progress_report [WHAT]: the line for PROG_SCRIPT; WHAT replaces "done".
progress_report() {
	[[ -n $PROG_SCRIPT ]] || return 0
	PROG_DONE=$((PROG_DONE + 1))
	log "$PROGRESS: $PROG_DONE/$PROGRESS_TOTAL $PROG_SCRIPT ${1:-done}: $PROG_OK ok, $PROG_NOK not ok, $PROG_SKIP skipped ($((SECONDS - PROG_T0))s)"
	if [[ -n $PROG_TIMES && -z ${1:-} ]]; then
		echo "$PROG_SCRIPT $((SECONDS - PROG_T0))" >>"$PROG_TIMES"
	fi
	PROG_SCRIPT=''
}

# progress_poll FILE: the complete lines of FILE not seen yet ("# running
# NAME" from guest-init.sh starts a script, the next one or "@@ done" ends
# it; the counts are the host's, as results_to_tap will count).
progress_poll() {
	local n line
	[[ -e $1 ]] || return 0
	n=$(wc -l <"$1")
	((n > PROG_LINES)) || return 0
	while IFS= read -r line; do
		line=${line%$'\r'}
		case $line in
		'# running '*)
			progress_report
			PROG_SCRIPT=${line#'# running '} PROG_T0=$SECONDS
			PROG_OK=0 PROG_NOK=0 PROG_SKIP=0
			;;
		'@@ ok '*) PROG_OK=$((PROG_OK + 1)) ;;
		'@@ not ok '*) PROG_NOK=$((PROG_NOK + 1)) ;;
		'@@ skip '*) PROG_SKIP=$((PROG_SKIP + 1)) ;;
		'@@ done') progress_report ;;
		esac
	done < <(sed -n "$((PROG_LINES + 1)),${n}p" "$1")
	PROG_LINES=$n
}

# progress_end: after the guest; a script still running did not finish.
progress_end() {
	progress_report "did not finish"
}

# boot KVER DIR MODE TIMEOUT [ARGS]; sets BOOT_RC, BOOT_SECS.  ARGS: more
# kernel command line.
boot() {
	local kver=$1 dir=$2 mode=$3 tmo=$4 args=${5:-} start
	rm -f "$dir"/{console,results,qemu}.log
	# no5lvl on the debug kernel: -cpu max offers LA57, and an interrupt
	# that lands while identify_cpu() has cleared the CPU's feature bits
	# sees pgtable_l5_enabled() false, so KASAN takes the 5-level direct
	# map for a wild address and reports it (early boot, swapper, before
	# any module).  Four-level paging closes that window; the Debian
	# kernels, without KASAN, still boot with five levels.
	if is_debug_kernel "$kver"; then args="no5lvl${args:+ $args}"; fi
	start=$SECONDS
	# console.log: kernel console (ttyS0); results.log: test protocol (ttyS1).
	# thread=single: with one host thread per vCPU (MTTCG), a vCPU calling a
	# function in a tight loop keeps running stale translated code while
	# the kernel rewrites that function's ftrace site (text_poke_bp), and
	# spins on an INT3 that is no longer there.  Plain ftrace does the same
	# (echo function > current_tracer); round-robin TCG keeps the two vCPUs
	# and SMP semantics but executes cross-modified code correctly.
	# no_timer_check: on a busy host the guest's early IO-APIC timer test
	# can miss its ticks and panic ("IO-APIC + timer doesn't work").
	timeout -k 10 "$tmo" qemu-system-x86_64 \
		-accel tcg,thread=single -cpu max -smp 2 -m 1G \
		-nographic -monitor none -nic none -no-reboot \
		-serial "file:$dir/console.log" -serial "file:$dir/results.log" \
		-kernel "$CACHE/kernels/$kver/vmlinuz" -initrd "$dir/initramfs.gz" \
		-append "console=ttyS0 panic=-1 oops=panic no_timer_check quiet loglevel=5 kpatch.mode=$mode${args:+ $args}" \
		</dev/null >"$dir/qemu.log" 2>&1 &
	QEMU_PID=$!
	BOOT_RC=0
	if [[ -n $PROGRESS ]]; then
		progress_start
		while kill -0 "$QEMU_PID" 2>/dev/null; do
			sleep 2
			progress_poll "$dir/results.log"
		done
	fi
	wait "$QEMU_PID" || BOOT_RC=$?
	QEMU_PID=
	BOOT_SECS=$((SECONDS - start))
	touch "$dir"/{console,results}.log
	if [[ -n $PROGRESS ]]; then
		progress_poll "$dir/results.log"
		progress_end
	fi
	# Drop CRs and the firmware's terminal escapes (ESC c, ESC [...x).
	sed -i -e 's/\r$//' -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' -e 's/\x1bc//g' \
		"$dir"/{console,results}.log
}

diag() { # stdin as TAP diagnostics
	sed 's/^/# /'
}

# Fails the run when the console shows a splat or the guest never said done.
# Prints "not ok" lines via tap_line.
check_guest() {
	local kver=$1 dir=$2 what=$3 tmo=$4 bad=0 splats
	# (skip guest-init's own progress marks, they name the scripts)
	splats=$(grep -av '^kpatch-testbed: ' "$dir/console.log" | grep -aE "$KP_SPLAT_RE" || true)
	if [[ -n $splats ]]; then
		tap_line "not ok" "$kver: kernel splat on the console"
		head -n 20 <<<"$splats" | sed 's/^/# splat: /'
		bad=1
	fi
	if ! grep -qx '@@ done' "$dir/results.log"; then
		local why="crash or hang"
		if ((BOOT_RC == 124 || BOOT_RC == 137)); then why="timed out after ${tmo}s"; fi
		tap_line "not ok" "$kver: guest did not finish $what ($why, qemu rc $BOOT_RC)"
		if [[ -s $dir/qemu.log ]]; then
			echo "# --- qemu stderr ---"
			tail -n 20 "$dir/qemu.log" | diag
		fi
		bad=1
	fi
	if ((bad)); then
		echo "# --- last 60 console lines ($dir/console.log) ---"
		tail -n 60 "$dir/console.log" | diag
	fi
	return "$bad"
}

# ------------------------------------------------------------------ run ----

PASS=0 FAIL=0 SKIP=0 TAPN=0
tap_line() { # tap_line "ok|not ok|skip" DESC
	local desc=${2//#/\\#}
	TAPN=$((TAPN + 1))
	case $1 in
	ok) PASS=$((PASS + 1)); echo "ok $TAPN - $desc" ;;
	skip) SKIP=$((SKIP + 1)); echo "ok $TAPN - $desc # SKIP" ;;
	*) FAIL=$((FAIL + 1)); echo "not ok $TAPN - $desc" ;;
	esac
}

results_to_tap() {
	local line
	while IFS= read -r line; do
		case $line in
		'@@ ok '*) tap_line ok "${line#@@ ok }" ;;
		'@@ not ok '*) tap_line "not ok" "${line#@@ not ok }" ;;
		'@@ skip '*) tap_line skip "${line#@@ skip }" ;;
		'@@ done' | '') ;;
		'#'*) echo "$line" ;;
		*) echo "# $line" ;;
		esac
	done <"$1"
}

kernel_list() {
	[[ -s $CACHE/kernels.list ]] || die "$CACHE/kernels.list missing (run: $SELF setup)"
	cat "$CACHE/kernels.list"
}

# lock_cache: $CACHE/.lock shared, $BUILDROOT/.lock alone (run, demo)
lock_cache() {
	lock_shared
	mkdir -p "$BUILDROOT"
	exec 9>"$BUILDROOT/.lock"
	flock -n 9 ||
		die "another testbed run or demo is using $BUILDROOT: run this again when it has finished, or set KPATCH_CACHE to another cache"
}

# build_for KVER: build into $BUILDROOT/KVER, log in $BUILDROOT/KVER.build.log
build_for() {
	local kver=$1 blog=$BUILDROOT/$1.build.log
	if [[ ! -s $CACHE/kernels/$kver/vmlinuz ]]; then
		echo "no $CACHE/kernels/$kver/vmlinuz (run: $SELF setup)" >"$blog"
		return 1
	fi
	"$SELF" build "$kver" "$BUILDROOT/$kver" >"$blog" 2>&1
}

# make_and_boot KVER MODE TIMEOUT (not in an `if`: relies on set -e)
make_and_boot() {
	local kver=$1 mode=$2 tmo=$3 dir=$BUILDROOT/$1
	make_initramfs "$dir"
	log "booting $kver ($mode, timeout ${tmo}s, console: $dir/console.log)"
	boot "$kver" "$dir" "$mode" "$tmo"
	log "$kver: guest ran ${BOOT_SECS}s"
}

# is_debug_kernel KVER: KVER is the debug kernel (see debug-kernel.sh)
is_debug_kernel() {
	[[ -e $CACHE/kernels/$1/debug-kernel.key ]]
}

# lockdown_boot KVER DIR TIMEOUT: the lockdown boot of `run`, with
# lockdown=integrity, runs selftests/lockdown.sh; logs in DIR.
# kpatch.modsig tells the guest whether the modules are signed with the
# kernel's key (sign_modules), so that they must load, or unsigned, so
# that lockdown must refuse them.
lockdown_boot() {
	local kver=$1 dir=$2 tmo=$3 sig=unsigned
	: >"$dir/scripts"
	make_initramfs "$BUILDROOT/$kver" "$dir" "$dir/scripts"
	if [[ -e $(host_kdir "$kver")/certs/signing_key.pem ]]; then sig=signed; fi
	log "booting $kver (lockdown, timeout ${tmo}s, console: $dir/console.log)"
	boot "$kver" "$dir" lockdown "$tmo" "lockdown=integrity kpatch.modsig=$sig"
	log "$kver: lockdown guest ran ${BOOT_SECS}s"
}

# KPATCH_TESTS, split into words: "lockdown" selects the lockdown boot, any
# other word the scripts selftests/test-WORD.sh (a name or a glob).  Unset
# or empty: every script and the lockdown boot.
read -ra TEST_WORDS <<<"${KPATCH_TESTS:-}"
TEST_GLOBS=() WANT_LOCKDOWN=0
if ((${#TEST_WORDS[@]} == 0)); then TEST_GLOBS=('*') WANT_LOCKDOWN=1; fi
for w in "${TEST_WORDS[@]}"; do
	if [[ $w == lockdown ]]; then WANT_LOCKDOWN=1; else TEST_GLOBS+=("$w"); fi
done
unset w

# test_scripts: the selected test scripts, sorted, each once.  A word that
# selects none fails, so that a misspelt name does not pass by testing
# nothing (cmd_run calls this first outside a command substitution).
test_scripts() {
	local g f found
	local -A seen=()
	for g in "${TEST_GLOBS[@]}"; do
		found=0
		for f in "$SRC"/selftests/test-$g.sh; do
			[[ -e $f ]] || continue
			found=1
			seen[$f]=1
		done
		((found)) || die "KPATCH_TESTS: no $SRC/selftests/test-$g.sh"
	done
	if ((${#seen[@]})); then printf '%s\n' "${!seen[@]}" | sort; fi
}

# The scripts a PREEMPT_RT kernel runs when KPATCH_TESTS names none: those
# of the paths that differ there (the exit probes and their free list, the
# hooks, the stack check and its waits, both redirects), not the long
# stress scripts, which would add some 20 minutes of guest time to CI.
RT_TESTS="00-taint api burst busy direct errors exiting hooks kprobed own ownpath
pieces pinning replace retries sibling sites stacking staticcall waiting"

# kernel_scripts KVER: test_scripts, or on a PREEMPT_RT kernel with no
# KPATCH_TESTS those of RT_TESTS.
kernel_scripts() {
	local f w
	if ((${#TEST_WORDS[@]})) || ! is_rt_kernel "$1"; then
		test_scripts
		return
	fi
	for w in $RT_TESTS; do
		f=$SRC/selftests/test-$w.sh
		[[ -e $f ]] || die "RT_TESTS: no $f"
		echo "$f"
	done
}

# ------------------------------------------------------------ run lanes ----
#
# `run` in three steps: build every kernel; boot its guests; print each
# kernel's TAP, in the list's order.  Builds and guests run in up to JOBS
# background lanes: each guest runs on one host core (thread=single, see
# boot), so a 2-core host boots two at a time.  A kernel's test scripts
# are split into JOBS shards, one guest each, so that the lanes finish
# together: balanced on each script's seconds in the previous run
# (BUILDROOT/KVER.times, beside the build dir that each build wipes;
# without it 10 s, 25 on the debug and PREEMPT_RT kernels), and
# the longest guests start first.  The lockdown boot is a guest of its
# own.  A guest's logs are in BUILDROOT/KVER/GUEST/ (GUEST: test-N or
# lockdown), with qemu's exit status in boot.rc.

LANES=()
kill_lanes() {
	local p
	for p in "${LANES[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	LANES=()
}

# lane CMD...: CMD in a background lane, once fewer than JOBS run.  A lane
# stopped by a signal stops its guest (kill_guest).
lane() {
	while (($(jobs -pr | wc -l) >= JOBS)); do wait -n || true; done
	(
		trap kill_guest EXIT
		trap 'exit 143' TERM
		trap 'exit 130' INT
		"$@"
	) &
	LANES+=($!)
}

# build_lane KVER: build_for, its status in BUILDROOT/KVER.built
build_lane() {
	local rc=0
	build_for "$1" || rc=$?
	echo "$rc" >"$BUILDROOT/$1.built"
}

# is_rt_kernel KVER: KVER is a PREEMPT_RT kernel
is_rt_kernel() {
	grep -qx 'CONFIG_PREEMPT_RT=y' "$CACHE/kernels/$1/config" 2>/dev/null
}

# kernel_timeouts KVER: "TEST LOCKDOWN" guest timeouts in seconds.  The
# debug kernel's checkers make it 2-3 times slower, and so does PREEMPT_RT
# under TCG (its stress scripts 3-4 times).
kernel_timeouts() {
	if is_debug_kernel "$1" || is_rt_kernel "$1"; then
		echo "${KPATCH_TEST_TIMEOUT:-2400} ${KPATCH_LOCKDOWN_TIMEOUT:-600}"
	else
		echo "$TEST_TIMEOUT $LOCKDOWN_TIMEOUT"
	fi
}

# shard KVER: the selected scripts into BUILDROOT/KVER/test-N/scripts,
# N = 1..JOBS (greedy, longest script first, to the lightest shard); prints
# "SECONDS KVER test-N" for each shard that has scripts, and for the
# lockdown boot when it is selected.
shard() {
	local kver=$1 dir=$BUILDROOT/$1 def=10 n i best script secs
	local -A last=()
	local -a load=() files=()
	if is_debug_kernel "$kver" || is_rt_kernel "$kver"; then def=25; fi
	if [[ -s $BUILDROOT/$kver.times ]]; then
		while read -r script secs; do
			last[$script]=$secs
		done <"$BUILDROOT/$kver.times"
	fi
	rm -rf "$dir"/test-* "$dir/lockdown"
	n=$(kernel_scripts "$kver" | wc -l)
	((n <= JOBS)) || n=$JOBS
	for ((i = 1; i <= n; i++)); do
		mkdir -p "$dir/test-$i"
		: >"$dir/test-$i/scripts"
		load[i]=0
	done
	mapfile -t files < <(kernel_scripts "$kver")
	while read -r secs script; do
		best=1
		for ((i = 2; i <= n; i++)); do
			if ((load[i] < load[best])); then best=$i; fi
		done
		echo "$script" >>"$dir/test-$best/scripts"
		load[best]=$((load[best] + secs))
	done < <(for script in "${files[@]}"; do
			echo "${last[${script##*/}]:-$def} $script"
		 done | sort -k1,1nr -k2)
	for ((i = 1; i <= n; i++)); do
		sort -o "$dir/test-$i/scripts" "$dir/test-$i/scripts"
		echo "${load[i]} $kver test-$i"
	done
	if ((WANT_LOCKDOWN)); then
		mkdir -p "$dir/lockdown"
		echo "${last[lockdown.sh]:-$def} $kver lockdown"
	fi
}

# run_guest KVER GUEST NSHARDS: boot one guest of `run` (see above).
run_guest() {
	local kver=$1 g=$2 dir=$BUILDROOT/$1/$2 tmo ltmo
	read -r tmo ltmo < <(kernel_timeouts "$kver")
	rm -f "$dir"/{boot.rc,times}
	PROG_TIMES=$dir/times
	if [[ $g == lockdown ]]; then
		PROGRESS="$kver (lockdown)" PROGRESS_TOTAL=1
		lockdown_boot "$kver" "$dir" "$ltmo"
	else
		PROGRESS=$kver PROGRESS_TOTAL=$(wc -l <"$dir/scripts")
		if (($3 > 1)); then PROGRESS+=" ($g/$3)"; fi
		make_initramfs "$BUILDROOT/$kver" "$dir" "$dir/scripts"
		log "booting $kver ($g, timeout ${tmo}s, console: $dir/console.log)"
		boot "$kver" "$dir" test "$tmo"
		log "$kver: guest $g ran ${BOOT_SECS}s"
	fi
	echo "$BOOT_RC" >"$dir/boot.rc"
}

# report_kernel KVER NSHARDS: KVER's TAP, numbered from 1 and ending with
# its plan, from its build status and its guests' logs.
report_kernel() {
	local kver=$1 n=$2 dir=$BUILDROOT/$1 tmo ltmo g gdir label
	read -r tmo ltmo < <(kernel_timeouts "$kver")
	TAPN=0
	echo "# kernel $kver"
	if [[ $(cat "$BUILDROOT/$kver.built" 2>/dev/null) != 0 ]]; then
		tap_line "not ok" "$kver: build"
		echo "# --- last 30 lines of $BUILDROOT/$kver.build.log ---"
		tail -n 30 "$BUILDROOT/$kver.build.log" | diag
		echo "1..$TAPN"
		return 0
	fi
	for gdir in "$dir"/test-* "$dir"/lockdown; do
		[[ -d $gdir ]] || continue
		g=${gdir##*/}
		# A guest that never booted (its lane was stopped) did not finish.
		touch "$gdir"/{console,results}.log
		BOOT_RC=$(cat "$gdir/boot.rc" 2>/dev/null || echo -1)
		results_to_tap "$gdir/results.log"
		if [[ $g == lockdown ]]; then
			check_guest "$kver (lockdown)" "$gdir" "the lockdown tests" \
				"$ltmo" || true
		else
			label=$kver
			if ((n > 1)); then label+=" ($g/$n)"; fi
			check_guest "$label" "$gdir" "the tests" "$tmo" || true
		fi
	done
	echo "1..$TAPN"
}

cmd_run() {
	local kernels=() kver g secs rc=0 n=0
	local -a queue=()
	local -A shards=()
	test_scripts >/dev/null
	lock_cache
	if (($# == 0)); then
		local list
		list=$(kernel_list)
		mapfile -t kernels <<<"$list"
	fi
	for kver; do
		if [[ $kver == demo ]]; then kver=$(demo_kernel); fi
		kernels+=("$kver")
	done
	trap 'kill_lanes; kill_guest' EXIT
	for kver in "${kernels[@]}"; do
		rm -f "$BUILDROOT/$kver.built"
		lane build_lane "$kver"
	done
	wait
	for kver in "${kernels[@]}"; do
		[[ $(cat "$BUILDROOT/$kver.built" 2>/dev/null) == 0 ]] || continue
		mapfile -t -O "${#queue[@]}" queue < <(shard "$kver")
		shards[$kver]=$(kernel_scripts "$kver" | wc -l)
		((shards[$kver] <= JOBS)) || shards[$kver]=$JOBS
	done
	while read -r secs kver g; do
		[[ -n $kver ]] || continue	# no kernel built: nothing queued
		lane run_guest "$kver" "$g" "${shards[$kver]}"
	done < <(printf '%s\n' "${queue[@]}" | sort -k1,1nr)
	wait
	LANES=()
	trap kill_guest EXIT
	for kver in "${kernels[@]}"; do
		report_kernel "$kver" "${shards[$kver]:-0}"
		# The scripts' seconds of this run balance the next one's shards;
		# those it did not run keep their seconds of an earlier one.
		if compgen -G "$BUILDROOT/$kver/*/times" >/dev/null; then
			cat "$BUILDROOT/$kver"/*/times "$BUILDROOT/$kver.times" 2>/dev/null |
				awk '!seen[$1]++' >"$BUILDROOT/$kver.times.new" || true
			mv "$BUILDROOT/$kver.times.new" "$BUILDROOT/$kver.times"
		fi
	done
	local summary="$PASS passed, $FAIL failed"
	if ((SKIP)); then summary+=", $SKIP skipped"; fi
	echo "$summary"
	if ((FAIL)); then rc=1; fi
	return "$rc"
}

# demo_kernel: demo.kernel (setup, with or without --demo), or the first
# of kernels.list in a cache set up before demo.kernel existed.
demo_kernel() {
	local kver
	if [[ -s $CACHE/demo.kernel ]]; then
		read -r kver <"$CACHE/demo.kernel"
	elif [[ -s $CACHE/kernels.list ]]; then
		read -r kver <"$CACHE/kernels.list"
	fi
	[[ -n ${kver:-} ]] || die "$CACHE/demo.kernel missing (run: $SELF setup --demo)"
	echo "$kver"
}

cmd_demo() {
	(($# == 0)) || usage
	local kver dir rc=0
	lock_cache
	kver=$(demo_kernel)
	dir=$BUILDROOT/$kver
	if ! build_for "$kver"; then
		tail -n 30 "$BUILDROOT/$kver.build.log" >&2
		die "build for $kver failed"
	fi
	make_and_boot "$kver" demo "$DEMO_TIMEOUT"
	grep -av -e '^@@ done$' -e '^@@ not ok ' -e '^# running demo.sh$' "$dir/results.log" || true
	if grep -a '^@@ not ok' "$dir/results.log" >&2; then rc=1; fi
	check_guest "$kver" "$dir" "the demo" "$DEMO_TIMEOUT" >&2 || rc=1
	return "$rc"
}

# Benchmarks: their own guests and init, see selftests/bench/bench.sh.
cmd_bench() {
	lock_shared
	exec "$SRC/selftests/bench/bench.sh" "$@"
}

(($# >= 1)) || usage
cmd=$1
shift
case $cmd in
setup) cmd_setup "$@" ;;
build) cmd_build "$@" ;;
run) cmd_run "$@" ;;
kmake) (($# >= 2)) || usage; lock_shared; kmake "$@" ;;
demo) cmd_demo "$@" ;;
bench) cmd_bench "$@" ;;
*) usage ;;
esac
