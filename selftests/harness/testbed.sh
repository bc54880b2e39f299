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
# The versions come from Debian's meta packages at setup, read by an apt
# of the test bed's own, whose sources are derived from the machine's
# (see "setup"): what it downloads is unpacked into the cache and nothing
# of it is installed into the host.  From 7.x the vmlinuz is in
# linux-binary-KVER.  7.x's headers need a newer compiler and libc than
# bookworm's, so its modules are built in a Debian unstable chroot
# (debootstrap --variant=minbase, kept in the cache).  The PREEMPT_RT
# kernel runs only RT_TESTS unless KPATCH_TESTS names scripts.  The debug
# kernel's modules are signed with its build key.
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
#   testbed.sh setup [--demo]     install the host's packages, and into the
#                                 cache the guest kernels, their headers,
#                                 every Debian 12 and unstable kernel
#                                 header package (for lint.sh) and the
#                                 debug kernel; first says what it will
#                                 download; --demo: only the demo's kernel
#                                 (Debian 12's 6.1)
#   testbed.sh purge              remove the cache, and the packages setup
#                                 installed into the host (listed in
#                                 $KPATCH_CACHE/host-packages) unless
#                                 packages installed since need them
#   testbed.sh install PKG...     install Debian packages into the host as
#                                 setup does (listed for purge); lint.sh
#                                 uses it
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
#   KPATCH_CACHE         cache dir (default /var/cache/kpatch-testbed):
#                        apt/ (the test bed's apt), kernels/ (vmlinuz,
#                        config; the debug kernel's tree), headers/ (the
#                        Debian 12 header trees), src/ (linux-source-6.1),
#                        chroot/unstable (Debian unstable, for its kernel),
#                        build/ (the runs), bench/
#   KPATCH_TEST_TIMEOUT  seconds per kernel for `run` (default 1200; 2400
#                        for the debug kernel and the PREEMPT_RT one)
#   KPATCH_LOCKDOWN_TIMEOUT  seconds for the lockdown boot (default 300;
#                        600 for the debug kernel and the PREEMPT_RT one)
#   KPATCH_TESTS         words, each a NAME or glob: only the scripts
#                        selftests/test-NAME.sh, and no lockdown boot unless
#                        a word is "lockdown" (which alone: only the
#                        lockdown boot); e.g. KPATCH_TESTS='api sites'.
#                        `make check-quick` (the edit-test loop) runs a set
#                        of the fastest core tests this way, on the demo's
#                        kernel (see the Makefile)
#   KPATCH_DEMO_TIMEOUT  seconds for `demo` (default 180)
#   KPATCH_JOBS          kernels `run` tests at the same time (default: the
#                        host's cores; each guest runs on one)
#
# A setup or purge refuses to start while another command uses the cache,
# and the others refuse to start during a setup (see "locks" below).
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
# The machine's apt sources, read to find its Debian mirror (debian_uri).
# Overridable only to test the source-file logic against a scratch dir.
APT_SOURCES_DIR=${KPATCH_APT_SOURCES_DIR:-/etc/apt/sources.list.d}
# What test beds before this one added to the host's apt sources; purge
# removes it.
OLD_BACKPORTS_SOURCES=$APT_SOURCES_DIR/kpatch-testbed-backports.sources
DEBIAN_KEYRING=/usr/share/keyrings/debian-archive-keyring.gpg

# In the cache: the test bed's own apt (see setup), the .debs while they
# are unpacked, the root of the Debian 12 header trees, linux-source-6.1's
# tarball, and the list of the packages setup added to the host.
APT_DIR=$CACHE/apt
DEBS=$CACHE/debs
HDR_ROOT=$CACHE/headers
SRC_DIR=$CACHE/src
HOST_RECORD=$CACHE/host-packages
HOST_REMOVED=$CACHE/host-packages-removed
SOURCE_PKG=linux-source-6.1

# The host's packages (README.md, "Run the tests", names them): what `run`
# and `demo` run (PACKAGES), and for a full setup (PACKAGES_FULL)
# debootstrap for the unstable chroot, the debug kernel's build tools
# (debug-kernel.sh) and lint.sh's sparse and shellcheck.  Besides, what
# Debian's header packages depend on but other kernel packages (pahole,
# gcc-12, ...: header_debs).
# perl: the W=1 builds run the kernel's scripts/kernel-doc, which needs more
# of perl than perl-base (Pod::Usage), and a minimal Debian has no more.
PACKAGES=(qemu-system-x86 busybox-static cpio gzip gcc make libc6-dev libelf-dev
	perl coreutils util-linux)
PACKAGES_FULL=(debootstrap bc bison flex libssl-dev openssl xz-utils sparse
	shellcheck)
META=linux-image-amd64
# The PREEMPT_RT kernel that is booted too: backports' (see cmd_setup).
META_RT=linux-image-rt-amd64
# Suites that make up the "6.1" (default) and the "6.12" (backports) kernel.
SUITES_STABLE='bookworm|bookworm-security|bookworm-updates'
SUITES_BPO='bookworm-backports'
# The header meta packages a user installs, one per flavour and line of
# kernels: linux-headers-[X.Y-][FLAVOUR-]amd64 (generic, cloud, rt, and
# a newer line offered beside the suite's own).  Each suite's are resolved
# at setup, and lint.sh builds kpatch.ko against every header package they
# depend on (headers.list).
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
# one stops with a message.  $CACHE/.lock: `setup` unpacks headers and
# replaces kernels and lists, and `purge` removes them, so each holds it
# alone; `run`, `demo`, `bench`, `build` and `kmake` (so lint.sh too)
# share it.  $BUILDROOT/.lock: `run`
# and `demo` build and boot in $BUILDROOT, one at a time (lock_cache).
# Both are held on fds that the guests inherit, until the last one exits.
CACHE_LOCK=$CACHE/.lock

# lock_setup WHAT: $CACHE/.lock, alone, for WHAT (setup or purge); the
# lock file says who holds it.
lock_setup() {
	exec 7>>"$CACHE_LOCK"
	if ! flock -n -x 7; then
		if flock -n -s 7; then
			die "$CACHE is in use by a testbed run, demo, bench or lint (e.g. another make check or make demo); $1 would change what it uses: run it again when that has finished, or set KPATCH_CACHE to another cache"
		fi
		die "a setup or purge is running on $CACHE ($(cat "$CACHE_LOCK" 2>/dev/null)): run it again when that has finished"
	fi
	echo "$1, pid $$, started $(date '+%F %T')" >"$CACHE_LOCK"
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
#
# Everything setup downloads comes through an apt of the test bed's own
# (papt): its sources ($APT_DIR/sources.list, derived from the machine's
# Debian sources: see apt_sources), lists and an empty package status, all
# in $APT_DIR, so that the host's apt sources, lists and package database
# are neither read nor changed (the host's apt.conf still applies: a
# proxy, Check-Valid-Until on a snapshot mirror).  Packages are only
# downloaded (apt-get download) and unpacked into the cache with dpkg-deb:
# each kernel's vmlinuz and config into kernels/KVER/, the Debian 12 header
# packages into the root headers/ (extract_headers), linux-source-6.1's
# tarball into src/ (debug-kernel.sh builds from it).  Unstable's headers
# are installed in the unstable chroot, by its own apt.  The host gets only
# PACKAGES (PACKAGES_FULL) and what Debian's header packages depend on but
# other kernel packages (host_install); setup lists the packages it added
# in $HOST_RECORD, so that `purge` can remove them with the cache.

# URI of the machine's own Debian source for SUITE: a deb822 stanza of
# debian.sources whose Suites name it, else a "deb" line of sources.list
# or a *.list.  Fails when there is none.
debian_uri() {
	local out='' f=$APT_SOURCES_DIR/debian.sources
	if [[ -r $f ]]; then
		out=$(awk -v s="$1" '
			function flush() {
				if (hit && deb && uri != "" && out == "")
					out = uri
				hit = 0; deb = 0; uri = ""
			}
			/^[ \t]*$/ { flush(); next }
			/^[ \t]*#/ { next }
			tolower($1) == "types:" {
				for (i = 2; i <= NF; i++)
					if ($i == "deb")
						deb = 1
			}
			tolower($1) == "uris:" { uri = $2 }
			tolower($1) == "suites:" {
				for (i = 2; i <= NF; i++)
					if ($i == s)
						hit = 1
			}
			END { flush(); if (out != "") print out }
		' "$f")
	fi
	if [[ -z $out ]]; then
		out=$(cat "${APT_SOURCES_DIR%/*}/sources.list" "$APT_SOURCES_DIR"/*.list 2>/dev/null |
			awk -v s="$1" '
				$1 == "deb" {
					i = 2
					if ($i ~ /^\[/) {
						while (i < NF && $i !~ /\]$/)
							i++
						i++
					}
					if ($(i + 1) == s) { print $i; exit }
				}')
	fi
	[[ -n $out ]] && echo "$out"
}

# suite_uri SUITE: debian_uri SUITE, else the URI of the machine's bookworm
# source (its mirror: backports and unstable are on every Debian mirror).
# Not for bookworm-security, which is on a mirror of its own.
suite_uri() {
	debian_uri "$1" || debian_uri bookworm ||
		die "no Debian source for bookworm in $APT_SOURCES_DIR/debian.sources or ${APT_SOURCES_DIR%/*}/sources.list"
}

# apt_sources: the test bed's sources.list: Debian 12's suites, backports and
# unstable, main only, each on the machine's source for it (suite_uri).
# Without a bookworm-security source on the machine, its kernels are left
# out.
apt_sources() {
	local suite uri
	for suite in ${SUITES_STABLE//|/ } $SUITES_BPO $SID_SUITE; do
		if [[ $suite == *-security ]]; then
			uri=$(debian_uri "$suite") || {
				log "no Debian source for $suite on this machine: its kernels and headers are left out"
				continue
			}
		else
			uri=$(suite_uri "$suite") || return 1
		fi
		echo "deb [signed-by=$DEBIAN_KEYRING] $uri $suite main"
	done
}

# papt apt-get|apt-cache ARG...: the test bed's apt (see above).  papt_init
# first.  Of the index targets it takes only Packages: not the Contents or
# DEP-11 ones that the host's apt.conf.d may add (apt-file, AppStream).
PAPT_OPTS=()
papt_init() {
	local t
	PAPT_OPTS=(
		-o Dir::Etc::SourceList="$APT_DIR/sources.list"
		-o Dir::Etc::SourceParts="$APT_DIR/sources.list.d"
		-o Dir::Etc::Preferences="$APT_DIR/preferences"
		-o Dir::Etc::PreferencesParts="$APT_DIR/preferences.d"
		-o Dir::State::Lists="$APT_DIR/lists"
		-o Dir::State::Status="$APT_DIR/status"
		-o Dir::State::extended_states="$APT_DIR/extended_states"
		-o Dir::Cache="$APT_DIR/cache"
		-o Dir::Cache::pkgcache=pkgcache.bin
		-o Dir::Cache::srcpkgcache=
		-o APT::Sandbox::User=root
		-o Acquire::Languages=none)
	while read -r t; do
		PAPT_OPTS+=(-o "Acquire::IndexTargets::deb::$t::DefaultEnabled=false")
	done < <(apt-config dump |
		sed -n 's/^Acquire::IndexTargets::deb::\([^:]*\)::MetaKey .*/\1/p' |
		grep -vx Packages | sort -u)
}
papt() {
	local cmd=$1
	shift
	"$cmd" "${PAPT_OPTS[@]}" "$@"
}

# papt_setup: $APT_DIR, its sources written and its lists updated (without
# a network, lists there from before do).
papt_setup() {
	local src start=$SECONDS
	src=$(apt_sources) || exit 1
	[[ -r $DEBIAN_KEYRING ]] || die "$DEBIAN_KEYRING not found (package debian-archive-keyring)"
	mkdir -p "$APT_DIR"/{lists/partial,cache/archives/partial,sources.list.d,preferences.d}
	[[ -e $APT_DIR/status ]] || : >"$APT_DIR/status"
	if [[ $(cat "$APT_DIR/sources.list" 2>/dev/null) != "$src" ]]; then
		echo "$src" >"$APT_DIR/sources.list"
		rm -f "$APT_DIR/updated"
	fi
	papt_init
	log "apt-get update of the test bed's own sources ($APT_DIR/sources.list)"
	if papt apt-get update -q >&2; then
		touch "$APT_DIR/updated"
	elif [[ -e $APT_DIR/updated ]]; then
		log "apt-get update failed: going on with the lists of $(date -r "$APT_DIR/updated" '+%F %T')"
	else
		die "apt-get update of $APT_DIR/sources.list failed"
	fi
	log "apt lists: $((SECONDS - start))s"
}

APT_UPDATED=0
apt_update() {
	((APT_UPDATED)) && return 0
	log "apt-get update (the host's)"
	apt-get update -q >&2
	APT_UPDATED=1
}

apt_install() {
	log "apt-get install --no-install-recommends $*"
	apt-get install -y -q --no-install-recommends "$@" >&2
}

pkg_installed() {
	[[ $(dpkg-query -W -f='${db:Status-Abbrev}' "$1" 2>/dev/null) == ii* ]]
}

# host_packages: the packages installed on the host, sorted
host_packages() {
	# shellcheck disable=SC2016 # a dpkg-query format
	dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' |
		awk '$1 ~ /^ii/ { print $2 }' | sort -u
}

# host_install PKG...: the PKGs that the host lacks, named on stderr, then
# installed with the host's apt (no recommends); every package this adds
# to the host (theirs and what they depend on) is appended to HOST_RECORD,
# and one it removes (busybox-static replaces busybox) to HOST_REMOVED.
host_install() {
	local p missing=() before added removed
	for p; do
		pkg_installed "$p" || missing+=("$p")
	done
	((${#missing[@]})) || return 0
	((EUID == 0)) || die "the host lacks ${missing[*]}: run this as root to install them"
	log "installing into the host: ${missing[*]} (and what they depend on; listed in $HOST_RECORD, removed by: $SELF purge)"
	mkdir -p "$CACHE"
	# one install at a time: each one's additions are the packages new after it
	exec 6>>"$CACHE/.host-install.lock"
	flock 6
	before=$(host_packages)
	apt_update
	apt_install "${missing[@]}" || die "apt-get install ${missing[*]} failed"
	added=$(comm -13 <(echo "$before") <(host_packages))
	removed=$(comm -23 <(echo "$before") <(host_packages))
	if [[ -n $added ]]; then
		echo "$added" >>"$HOST_RECORD"
		log "added $(wc -l <<<"$added") packages to the host: $(tr '\n' ' ' <<<"$added")"
	fi
	if [[ -n $removed ]]; then
		echo "$removed" >>"$HOST_REMOVED"
		log "removed from the host, as they conflict with those (purge installs them again): $(tr '\n' ' ' <<<"$removed")"
	fi
	exec 6>&-
}

# meta_versions META SUITES: "VERSION SUITE" for each version of package
# META offered by the suites matching regex SUITES (apt-cache madison).
meta_versions() {
	local ver rest suite
	while IFS='|' read -r _ ver rest; do
		ver=${ver//[[:space:]]/}
		[[ $rest == *Packages* ]] || continue
		read -r _ suite _ <<<"$rest"
		suite=${suite%%/*}
		[[ $suite =~ ^($2)$ ]] || continue
		echo "$ver $suite"
	done < <(papt apt-cache madison "$1" 2>/dev/null)
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

# depends_kver: apt-cache show output of a meta package on stdin -> the
# <kver> of the linux-image-<kver> it depends on
depends_kver() {
	awk -v p=linux-image- '
		/^Depends:/ {
			for (i = 2; i <= NF; i++)
				if (index($i, p) == 1) {
					sub(/,$/, "", $i)
					print substr($i, length(p) + 1)
					exit
				}
		}'
}

# meta_kver META VERSION: the <kver> of the linux-image-<kver> that
# META=VERSION depends on
meta_kver() {
	papt apt-cache show "$1=$2" 2>/dev/null | depends_kver
}

valid_kver() {
	[[ $1 =~ ^[0-9][0-9A-Za-z.+~_-]*$ ]]
}

# resolve_kernels "META SUITES"...: "KVER SUITE VER META" for each: the kernel
# that the highest version of META in the suites matching regex SUITES
# depends on (the 6.1 kernel: $META $SUITES_STABLE, the 6.12 kernel:
# $META $SUITES_BPO, its PREEMPT_RT flavour: $META_RT $SUITES_BPO,
# unstable's: $META $SID_SUITE).  Debian's kernel packages have the
# version of their meta package.
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

# resolve_headers SUITES: "KVER SUITE VER" for every header package
# linux-headers-KVER that a header meta package (HEADERS_META_RE) of the
# suites matching regex SUITES depends on, VER being the meta package's
# version (and the header package's); each KVER once, sorted.  Fails when
# there is none.  (Three apt-cache calls in all: each reads the whole
# package cache.)
resolve_headers() {
	local suites=$1 pkg ver rest suite out lines=''
	local -a metas=() pairs=()
	local -A from=()
	mapfile -t metas < <(papt apt-cache pkgnames linux-headers- |
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
	done < <(papt apt-cache madison "${metas[@]}" 2>/dev/null)
	((${#pairs[@]})) || return 1
	out=$(papt apt-cache show "${pairs[@]}" 2>/dev/null | awk '
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

# deb_info [OPTION] NAME[=VERSION]...: "NAME VERSION SIZE DEPENDS" (tab
# separated) of each package, from the test bed's apt (apt-cache show)
deb_info() {
	papt apt-cache show "$@" 2>/dev/null | awk '
		function out() {
			if (p != "")
				print p "\t" v "\t" s "\t" d
			p = ""; d = ""
		}
		/^Package:/ { p = $2 }
		/^Version:/ { v = $2 }
		/^Size:/ { s = $2 }
		/^Depends:/ { d = substr($0, 10) }
		/^$/ { out() }
		END { out() }'
}

# header_debs "KVER VER"...: sets HDR_DEBS, the NAME=VERSION of each
# linux-headers-KVER=VER and of the -common and linux-kbuild packages it
# needs (at the version the dependency names, else the newest), each once;
# HDR_BYTES, their size; and HOST_DEPS, every other package they depend
# on (the first of alternatives) but the kernel packages (linux-*): the
# host must have those (pahole, gcc-12, ...).
HDR_DEBS=() HDR_BYTES=0 HOST_DEPS=()
header_debs() {
	local kv k v name ver size deps dep op want
	local -a pairs=() newest=()
	local -A seen=() host=()
	HDR_DEBS=() HDR_BYTES=0 HOST_DEPS=()
	for kv; do
		read -r k v <<<"$kv"
		pairs+=("linux-headers-$k=$v")
	done
	((${#pairs[@]})) || return 0
	# round by round: the packages named, then what they depend on
	while ((${#pairs[@]} || ${#newest[@]})); do
		local -a next=() nextnew=()
		while IFS=$'\t' read -r name ver size deps; do
			[[ -z ${seen[$name]:-} ]] || continue
			seen[$name]=1
			HDR_DEBS+=("$name=$ver")
			HDR_BYTES=$((HDR_BYTES + size))
			while read -r dep; do
				dep=${dep%%|*}
				read -r dep op want <<<"${dep//[()]/ }"
				[[ -n $dep && -z ${seen[$dep]:-} ]] || continue
				case $dep in
				linux-headers-* | linux-kbuild-*)
					if [[ $op == = ]]; then
						next+=("$dep=${want}")
					else
						nextnew+=("$dep")
					fi
					;;
				linux-*) ;;
				*) host[$dep]=1 ;;
				esac
			done < <(tr ',' '\n' <<<"$deps")
		done < <(if ((${#pairs[@]})); then deb_info "${pairs[@]}"; fi
			 if ((${#newest[@]})); then deb_info --no-all-versions "${newest[@]}"; fi)
		pairs=("${next[@]}") newest=("${nextnew[@]}")
	done
	HOST_DEPS=("${!host[@]}")
}

# deb_file NAME VERSION: the downloaded .deb of NAME=VERSION in DEBS
deb_file() {
	local f
	for f in "$DEBS/${1}_${2//:/%3a}_"*.deb; do
		[[ -e $f ]] && echo "$f" && return 0
	done
	return 1
}

# fetch_debs NAME=VERSION...: those not in DEBS yet downloaded there, with
# the test bed's apt (apt-get download, into DEBS/partial first)
fetch_debs() {
	local p todo=() start=$SECONDS bytes
	for p; do
		deb_file "${p%%=*}" "${p#*=}" >/dev/null || todo+=("$p")
	done
	((${#todo[@]})) || return 0
	rm -rf "$DEBS/partial"
	mkdir -p "$DEBS/partial"
	log "downloading ${#todo[@]} packages into $DEBS"
	(cd "$DEBS/partial" && papt apt-get download -q "${todo[@]}" >&2) ||
		die "apt-get download (with $APT_DIR/sources.list) failed"
	bytes=$(du -sb "$DEBS/partial" | cut -f1)
	mv "$DEBS"/partial/*.deb "$DEBS/"
	rmdir "$DEBS/partial"
	log "downloaded $((bytes / 1000000)) MB in $((SECONDS - start))s"
}

# image_deb KVER VER: NAME=VER of the package with KVER's vmlinuz: from
# 7.x linux-binary-KVER, else linux-image-KVER
image_deb() {
	if papt apt-cache show "linux-binary-$1=$2" >/dev/null 2>&1; then
		echo "linux-binary-$1=$2"
	else
		echo "linux-image-$1=$2"
	fi
}

# extract_kernel KVER DEB [CONFIG]: vmlinuz and config of KVER, from DEB
# (image_deb) into kernels/KVER/, then DEB is deleted.  From 7.x the
# vmlinuz is at usr/lib/modules/KVER/vmlinuz and the config only in the
# headers (CONFIG).
extract_kernel() {
	local kver=$1 deb=$2 config=${3:-} dir=$CACHE/kernels/$1 tmp vmlinuz
	log "extracting vmlinuz from ${deb##*/}"
	tmp=$(mktemp -d "$CACHE/tmp.XXXXXX")
	# Only the kernel: the full tree (modules) is ~0.5 GB and not needed.
	dpkg-deb --fsys-tarfile "$deb" |
		tar -x -C "$tmp" --wildcards --no-wildcards-match-slash \
			'./boot/*' "./usr/lib/modules/$kver/vmlinuz" 2>/dev/null || true
	for vmlinuz in "$tmp/boot/vmlinuz-$kver" "$tmp/usr/lib/modules/$kver/vmlinuz" ''; do
		[[ -s $vmlinuz ]] && break
	done
	[[ -n $vmlinuz ]] || { rm -rf "$tmp"; die "no vmlinuz for $kver in $deb"; }
	[[ -e $tmp/boot/config-$kver ]] && config=$tmp/boot/config-$kver
	[[ -s $config ]] || { rm -rf "$tmp"; die "no config for $kver"; }
	mkdir -p "$dir"
	cp "$config" "$dir/config"
	cp "$vmlinuz" "$dir/vmlinuz.tmp"
	mv "$dir/vmlinuz.tmp" "$dir/vmlinuz"
	rm -rf "$tmp"
	rm -f "$deb"
}

# extract_headers "KVER VER"...: the header trees of the kernels KVER, from
# HDR_DEBS (header_debs, downloaded), unpacked into the root HDR_ROOT:
# usr/src/linux-headers-KVER and its -common tree, and
# usr/lib/linux-kbuild-X.Y with the scripts and tools they link to by
# relative paths.  The one absolute path in them, the -common tree's
# Makefile that KVER's Makefile includes, is made to point into HDR_ROOT.
# A complete tree has .kpatch-testbed; the .debs are deleted.
extract_headers() {
	local p deb kv kver mk start=$SECONDS
	# the -common and kbuild packages first, each KVER's own last
	for p in "${HDR_DEBS[@]}"; do
		deb=$(deb_file "${p%%=*}" "${p#*=}") || die "${p%%=*} was not downloaded"
		for kv; do
			[[ ${p%%=*} == "linux-headers-${kv%% *}" ]] && continue 2
		done
		dpkg-deb -x "$deb" "$HDR_ROOT"
	done
	for kv; do
		kver=${kv%% *}
		p=linux-headers-$kver
		deb=$(deb_file "$p" "${kv#* }") || die "$p was not downloaded"
		dpkg-deb -x "$deb" "$HDR_ROOT"
		mk=$HDR_ROOT/usr/src/$p/Makefile
		sed -i "s|^include /usr/|include $HDR_ROOT/usr/|" "$mk"
		if grep -n '/usr/\(src\|lib\)/' "$mk" | grep -vF "$HDR_ROOT/" >&2; then
			die "$mk: an absolute path out of $HDR_ROOT (above)"
		fi
		touch "$HDR_ROOT/usr/src/$p/.kpatch-testbed"
	done
	# /lib/modules/KVER/{build,source}: absolute links to /usr/src, unused
	rm -rf "${HDR_ROOT:?}/lib"
	for p in "${HDR_DEBS[@]}"; do
		rm -f "$(deb_file "${p%%=*}" "${p#*=}")"
	done
	log "header trees extracted into $HDR_ROOT: $# ($((SECONDS - start))s)"
}

# header_tree_ok KVER: KVER's header tree in HDR_ROOT is complete
header_tree_ok() {
	[[ -e $HDR_ROOT/usr/src/linux-headers-$1/.kpatch-testbed ]]
}

# fetch_source VERSION: linux-source-6.1's tarball, at VERSION, in SRC_DIR
# (with its version in a file beside it), for debug-kernel.sh
fetch_source() {
	local ver=$1 deb
	if [[ $(cat "$SRC_DIR/$SOURCE_PKG.version" 2>/dev/null) == "$ver" &&
	      -s $SRC_DIR/$SOURCE_PKG.tar.xz ]]; then
		return 0
	fi
	fetch_debs "$SOURCE_PKG=$ver"
	deb=$(deb_file "$SOURCE_PKG" "$ver") || die "$SOURCE_PKG was not downloaded"
	mkdir -p "$SRC_DIR"
	rm -f "$SRC_DIR/$SOURCE_PKG.version"
	dpkg-deb --fsys-tarfile "$deb" |
		tar -xO "./usr/src/$SOURCE_PKG.tar.xz" >"$SRC_DIR/$SOURCE_PKG.tar.xz.tmp"
	[[ -s $SRC_DIR/$SOURCE_PKG.tar.xz.tmp ]] || die "no usr/src/$SOURCE_PKG.tar.xz in $deb"
	mv "$SRC_DIR/$SOURCE_PKG.tar.xz.tmp" "$SRC_DIR/$SOURCE_PKG.tar.xz"
	echo "$ver" >"$SRC_DIR/$SOURCE_PKG.version"
	rm -f "$deb"
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

# sid_missing "KVER SUITE VER"...: the SID_PACKAGES and linux-headers-KVER=VER
# that the unstable chroot lacks
sid_missing() {
	local p kver ver
	for p in ${SID_PACKAGES//,/ }; do
		# shellcheck disable=SC2016 # a dpkg-query format
		[[ $(in_root "$SID_ROOT" dpkg-query -W -f='${db:Status-Abbrev}' \
			"$p" 2>/dev/null) == ii* ]] || echo "$p"
	done
	for p; do
		read -r kver _ ver _ <<<"$p"
		# shellcheck disable=SC2016 # a dpkg-query format
		if [[ $(in_root "$SID_ROOT" dpkg-query -W -f='${db:Status-Abbrev}' \
			"linux-headers-$kver" 2>/dev/null) != ii* ]] ||
		   [[ ! -e $SID_ROOT/lib/modules/$kver/build/Makefile ]]; then
			echo "linux-headers-$kver=$ver"
		fi
	done
}

# sid_estimate "KVER SUITE VER"...: bytes that a new unstable chroot with
# those headers downloads: what apt, asked through papt, would fetch for
# unstable's required packages, apt, SID_PACKAGES and the headers.
sid_estimate() {
	local p kver ver
	local -a pkgs=() sp=()
	mapfile -t pkgs < <(papt apt-cache dumpavail 2>/dev/null |
		awk '/^Package:/ { p = $2 } /^Priority: required/ { print p }' | sort -u)
	IFS=, read -ra sp <<<"$SID_PACKAGES"
	pkgs+=(apt "${sp[@]}")
	for p; do
		read -r kver _ ver _ <<<"$p"
		pkgs+=("linux-headers-$kver=$ver")
	done
	papt apt-get --print-uris -qq -t "$SID_SUITE" install --no-install-recommends \
		"${pkgs[@]}" 2>/dev/null | awk '{ s += $3 } END { print s + 0 }'
}

# setup_unstable "KVER SUITE VER"...: the unstable chroot (debootstrap
# --variant=minbase, made once), with the headers linux-headers-KVER=VER
# of unstable's kernel and of every flavour (for lint.sh), installed by
# its apt at the versions of the test bed's lists.
setup_unstable() {
	local uri start conf sources
	local -a missing=()
	uri=$(suite_uri "$SID_SUITE") || exit 1
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
		log "$SID_SUITE chroot created in $((SECONDS - start))s"
	fi
	# The host's mirror and its apt policy on expired Release files (a
	# snapshot mirror's are), so the chroot reaches what the host reaches.
	sources="deb $uri $SID_SUITE main"
	if [[ $(cat "$SID_ROOT/etc/apt/sources.list" 2>/dev/null) != "$sources" ]]; then
		echo "$sources" >"$SID_ROOT/etc/apt/sources.list"
	fi
	conf=$(apt-config dump --format '%v%n' Acquire::Check-Valid-Until)
	if [[ -n $conf ]]; then
		echo "Acquire::Check-Valid-Until \"$conf\";" \
			>"$SID_ROOT/etc/apt/apt.conf.d/99kpatch-testbed"
	fi
	# dpkg without an fsync per file: the chroot is a cache, made again
	# if lost
	echo force-unsafe-io >"$SID_ROOT/etc/dpkg/dpkg.cfg.d/kpatch-testbed"
	mapfile -t missing < <(sid_missing "$@")
	if ((${#missing[@]})); then
		start=$SECONDS
		# its lists as of now, as the test bed's, which named the versions
		log "apt-get update ($SID_SUITE chroot)"
		in_root "$SID_ROOT" apt-get update -q >&2
		log "installing ${missing[*]} in the $SID_SUITE chroot"
		in_root "$SID_ROOT" apt-get install -y -q --no-install-recommends \
			"${missing[@]}" >&2
		in_root "$SID_ROOT" apt-get clean
		log "installed in the chroot in $((SECONDS - start))s"
	fi
	# Debian's 7.x headers lack scripts/checker-valid.sh, without which
	# kbuild skips sparse on C=2 (lint.sh): a stand-in that accepts the
	# checker when it runs cleanly on a trivial file.
	local kv scripts
	for kv; do
		scripts=$(sed -n 's|^include \(/.*\)/Makefile$|\1/scripts|p' \
			"$SID_ROOT/lib/modules/${kv%% *}/build/Makefile")
		scripts=${scripts:+$SID_ROOT$scripts}
		[[ -d $scripts && ! -e $scripts/checker-valid.sh ]] || continue
		cat >"$scripts/checker-valid.sh" <<-'EOS'
			#!/bin/sh
			# Added by kpatch's selftests/harness/testbed.sh (missing from the package).
			f=$(mktemp --suffix=.c) || exit 1
			echo 'int kpatch_checker_valid(void);' >"$f"
			if out=$("$@" "$f" 2>&1) && [ -z "$out" ]; then echo 1; else echo 0; fi
			rm -f "$f"
		EOS
		chmod 755 "$scripts/checker-valid.sh"
	done
}

# mb BYTES: in MB, rounded
mb() {
	echo $((($1 + 500000) / 1000000))
}

# The debug kernel's build (debug-kernel.sh), in the background of the
# rest of setup, in a session of its own so that stop_debug_build stops
# its make too.
DEBUG_PID=
start_debug_build() {
	KPATCH_CACHE=$CACHE setsid "$SRC/selftests/harness/debug-kernel.sh" \
		>"$CACHE/debug-kernel.out" &
	DEBUG_PID=$!
}
stop_debug_build() {
	if [[ -n $DEBUG_PID ]] && kill -0 "$DEBUG_PID" 2>/dev/null; then
		kill -- "-$DEBUG_PID" 2>/dev/null || true
		wait "$DEBUG_PID" 2>/dev/null || true
	fi
	DEBUG_PID=
}

# setup [--demo]: everything `run`, `lint` and `bench` need: the host's
# packages, the vmlinuz and header trees of the 6.1 and 6.12 kernels and of
# the 6.12 rt kernel, the unstable chroot and its kernel, the debug
# kernel; kernels.list (written last, when all of them are there) lists
# them.  It also unpacks every header package that the header meta packages
# of Debian 12's suites depend on (each flavour), and installs unstable's
# in the chroot, and lists them in headers.list, for lint.sh.  It first
# says what it will download, and where to.  --demo: only the demo's
# kernel, Debian 12's own 6.1 (no backports, no chroot, no debug kernel,
# no other headers); it writes demo.kernel and leaves kernels.list as it
# is, so that `run` never takes a demo setup for a full one.  A full setup
# writes demo.kernel too.
cmd_setup() {
	local demo=0
	case $# in
	0) ;;
	1) [[ $1 == --demo ]] || usage; demo=1 ;;
	*) usage ;;
	esac
	((EUID == 0)) || die "setup must run as root"
	mkdir -p "$CACHE"
	lock_setup setup
	trap 'stop_debug_build; kill_guest' EXIT
	local t0=$SECONDS start
	if ((demo)); then log "setting up the demo's kernel only (Debian 12's 6.1)"; fi
	papt_setup

	# What the cache is to hold: the kernels, and for lint.sh every header
	# package of Debian 12's suites (host trees) and of unstable (chroot).
	local kernels sid='' headers='' sid_headers='' src_ver=''
	local kver suite ver meta p bytes=0 n=0
	local -a specs=("$META $SUITES_STABLE") sidh=() alltrees=() trees=() imgs=()
	local -a plan=() miss=() hostdeps=()
	local -A seen=()
	((demo)) || specs+=("$META $SUITES_BPO" "$META_RT $SUITES_BPO")
	kernels=$(resolve_kernels "${specs[@]}") ||
		die "cannot resolve ${specs[*]} with $APT_DIR/sources.list"
	if ((!demo)); then
		headers=$(resolve_headers "$SUITES_STABLE|$SUITES_BPO") ||
			die "cannot resolve the header meta packages in $SUITES_STABLE|$SUITES_BPO"
		sid=$(resolve_kernels "$META $SID_SUITE") ||
			die "cannot resolve $META in $SID_SUITE"
		sid_headers=$(resolve_headers "$SID_SUITE") ||
			die "cannot resolve the header meta packages in $SID_SUITE"
		# with unstable's kernel, which is among them
		read -r kver _ ver _ <<<"$sid"
		sid_headers=$(printf '%s\n' "$sid_headers" "$kver $SID_SUITE $ver" |
			awk '!seen[$1]++')
		mapfile -t sidh <<<"$sid_headers"
		read -r src_ver _ < <(meta_version "$SOURCE_PKG" "$SUITES_STABLE") ||
			die "cannot resolve $SOURCE_PKG in $SUITES_STABLE"
	fi

	# What of it to download: what the cache lacks.
	while read -r kver suite ver _; do
		[[ -n $kver && -z ${seen[$kver]:-} ]] || continue
		seen[$kver]=1
		alltrees+=("$kver $ver")
		header_tree_ok "$kver" || trees+=("$kver $ver")
	done < <(printf '%s\n' "$kernels" "$headers")
	# what the host needs for all of them (HOST_DEPS), and what to
	# download for those the cache lacks (HDR_DEBS)
	if ((${#trees[@]} < ${#alltrees[@]})); then
		header_debs "${alltrees[@]}"
		hostdeps=("${HOST_DEPS[@]}")
	fi
	header_debs "${trees[@]}"
	HOST_DEPS+=("${hostdeps[@]}")
	while read -r kver suite ver meta; do
		[[ -n $kver && ! -s $CACHE/kernels/$kver/vmlinuz ]] || continue
		p=$(image_deb "$kver" "$ver")
		imgs+=("$p")
		read -r _ _ n _ < <(deb_info "$p") || n=0
		bytes=$((bytes + n))
		plan+=("kernel $kver: ${p%%=*} ${p#*=} ($suite), $(mb "$n") MB")
	done < <(printf '%s\n' "$kernels" "$sid")
	if ((${#trees[@]})); then
		bytes=$((bytes + HDR_BYTES))
		plan+=("header packages: ${#trees[@]}, and the $((${#HDR_DEBS[@]} - ${#trees[@]})) -common and linux-kbuild packages they need, $(mb "$HDR_BYTES") MB")
	fi
	if [[ -n $src_ver && $(cat "$SRC_DIR/$SOURCE_PKG.version" 2>/dev/null) != "$src_ver" ]]; then
		read -r _ _ n _ < <(deb_info "$SOURCE_PKG=$src_ver") || n=0
		bytes=$((bytes + n))
		plan+=("$SOURCE_PKG $src_ver, the debug kernel's source, $(mb "$n") MB")
	fi
	if ((!demo)); then
		if [[ ! -e $SID_ROOT/.kpatch-testbed ]]; then
			n=$(sid_estimate "${sidh[@]}")
			bytes=$((bytes + n))
			plan+=("the Debian $SID_SUITE chroot (debootstrap --variant=minbase, ${SID_PACKAGES//,/ }) with ${#sidh[@]} header packages of $SID_SUITE, about $(mb "$n") MB")
		else
			mapfile -t miss < <(sid_missing "${sidh[@]}")
			if ((${#miss[@]})); then plan+=("into the $SID_SUITE chroot: ${miss[*]}"); fi
		fi
		if ! KPATCH_CACHE=$CACHE "$SRC/selftests/harness/debug-kernel.sh" \
			--check "$src_ver" >/dev/null; then
			plan+=("the debug kernel: built from $SOURCE_PKG $src_ver (about 5 minutes on 2 idle cores), while the rest downloads")
		fi
	fi
	if ((${#plan[@]})); then
		log "downloading about $(mb "$bytes") MB into $CACHE (kept there; $SELF purge removes it):"
		for p in "${plan[@]}"; do log "  $p"; done
	else
		log "nothing to download: $CACHE has it all"
	fi
	log "plan: $((SECONDS - t0))s"

	# The host's packages.
	start=$SECONDS
	local pkgs=("${PACKAGES[@]}")
	((demo)) || pkgs+=("${PACKAGES_FULL[@]}")
	host_install "${pkgs[@]}" "${HOST_DEPS[@]}"
	log "host packages: $((SECONDS - start))s"

	# The debug kernel builds (debug-kernel.sh) while the rest downloads.
	if ((!demo)); then
		start=$SECONDS
		fetch_source "$src_ver"
		log "$SOURCE_PKG: $((SECONDS - start))s"
		start_debug_build
	fi

	start=$SECONDS
	fetch_debs "${imgs[@]}" "${HDR_DEBS[@]}"
	if ((${#trees[@]})); then extract_headers "${trees[@]}"; fi
	while read -r kver _ ver _; do
		[[ ! -s $CACHE/kernels/$kver/vmlinuz ]] || continue
		p=$(image_deb "$kver" "$ver")
		extract_kernel "$kver" "$(deb_file "${p%%=*}" "${p#*=}")"
	done <<<"$kernels"
	log "kernels and headers: $((SECONDS - start))s"
	# The demo's kernel: the first, Debian 12's 6.1.
	head -n 1 <<<"$kernels" | awk '{print $1}' >"$CACHE/demo.kernel.tmp"
	mv "$CACHE/demo.kernel.tmp" "$CACHE/demo.kernel"

	if ((!demo)); then
		start=$SECONDS
		setup_unstable "${sidh[@]}"
		read -r kver _ ver _ <<<"$sid"
		if [[ ! -s $CACHE/kernels/$kver/vmlinuz ]]; then
			p=$(image_deb "$kver" "$ver")
			extract_kernel "$kver" "$(deb_file "${p%%=*}" "${p#*=}")" \
				"$SID_ROOT/usr/src/linux-headers-$kver/.config"
		fi
		log "$SID_SUITE chroot and kernel: $((SECONDS - start))s"
		kernels+=$'\n'$sid
		headers+=$'\n'$sid_headers

		# The debug kernel: built (once per source version and config)
		# from linux-source-6.1, see debug-kernel.sh.
		start=$SECONDS
		log "waiting for the debug kernel's build"
		wait "$DEBUG_PID" || die "building the debug kernel failed"
		DEBUG_PID=
		kver=$(cat "$CACHE/debug-kernel.out")
		rm -f "$CACHE/debug-kernel.out"
		valid_kver "$kver" || die "debug-kernel.sh printed no kernel release"
		log "debug kernel: waited $((SECONDS - start))s"
		kernels+=$'\n'"$kver debug $src_ver"

		# headers.list: "KVER SUITE VERSION" of each header package
		# (lint.sh); kernels.list: the kernels `run` boots.
		printf '%s\n' "$headers" >"$CACHE/headers.list.tmp"
		mv "$CACHE/headers.list.tmp" "$CACHE/headers.list"
		awk '{print $1}' <<<"$kernels" >"$CACHE/kernels.list.tmp"
		mv "$CACHE/kernels.list.tmp" "$CACHE/kernels.list"
	fi
	# every .deb is unpacked by now; checkpatch/: older test beds' copy of
	# checkpatch.pl (lint.sh runs the debug kernel's)
	rm -rf "$DEBS" "$CACHE/checkpatch"
	log "setup: $((SECONDS - t0))s; $CACHE holds $(du -sm "$CACHE" | cut -f1) MB"
	while read -r kver suite ver meta; do
		if [[ $suite == debug ]]; then
			echo "kernel: $kver ($SOURCE_PKG $ver, debug build)"
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

# ---------------------------------------------------------------- purge ----

# What purge removes from the cache: everything setup, run, demo, bench and
# lint put there (an entry of another name stays, and is named).
CACHE_ENTRIES=(.lock .host-install.lock apt debs headers src kernels chroot
	build bench checkpatch host-packages host-packages-removed demo.kernel
	kernels.list headers.list debug-kernel.build.log debug-kernel.out 'tmp.*'
	'*.tmp')

# purge_only_ours PKG...: apt-get would purge PKG... and, with them, no
# package outside the caller's OURS (those setup added to the host)
purge_only_ours() {
	local out q
	out=$(apt-get -s purge "$@" 2>/dev/null) || return 1
	while read -r q; do
		[[ -n ${OURS[$q]:-} ]] || return 1
	done < <(awk '$1 == "Purg" { sub(/:.*/, "", $2); print $2 }' <<<"$out")
}

# purge_host_packages: the packages of HOST_RECORD that are still
# installed, purged with apt-get, but those that a package installed since
# (not in the record) depends on: they stay, and are named.  Then those of
# HOST_REMOVED, installed again.
purge_host_packages() {
	local p
	local -a cand=() take=() left=()
	local -A OURS=()
	[[ -s $HOST_RECORD ]] || return 0
	while read -r p; do
		OURS[$p]=1
		if pkg_installed "$p"; then cand+=("$p"); fi
	done < <(sort -u "$HOST_RECORD")
	((${#cand[@]})) || return 0
	if purge_only_ours "${cand[@]}"; then
		take=("${cand[@]}")
	else
		# one at a time: a package stays if its purge would take another
		for p in "${cand[@]}"; do
			if purge_only_ours "${take[@]}" "$p"; then
				take+=("$p")
			else
				left+=("$p")
			fi
		done
	fi
	if ((${#take[@]})); then
		log "removing from the host the ${#take[@]} packages setup installed: ${take[*]}"
		apt-get purge -y -q "${take[@]}" >&2
	fi
	if ((${#left[@]})); then
		log "left on the host, since packages installed after them need them: ${left[*]}"
	fi
	# what setup's installs removed, back (those still missing)
	[[ -s $HOST_REMOVED ]] || return 0
	left=()
	while read -r p; do
		pkg_installed "$p" || left+=("$p")
	done < <(sort -u "$HOST_REMOVED")
	if ((${#left[@]})); then
		log "installing again what setup's installs removed from the host: ${left[*]}"
		apt-get install -y -q --no-install-recommends "${left[@]}" >&2
	fi
}

# purge: what the test bed added: the packages setup installed into the
# host (purge_host_packages, which also puts back what they replaced), the
# apt source that test beds before this one added (OLD_BACKPORTS_SOURCES),
# and the cache.  The host's apt lists stay as setup's apt-get update left
# them.
cmd_purge() {
	(($# == 0)) || usage
	((EUID == 0)) || die "purge must run as root"
	local e f left
	if [[ -d $CACHE ]]; then
		lock_setup purge
		if findmnt -rn -o TARGET | grep -q "^$CACHE/"; then
			die "something is mounted under $CACHE: $(findmnt -rn -o TARGET | grep "^$CACHE/" | head -n 3)"
		fi
		purge_host_packages
	fi
	if [[ -e $OLD_BACKPORTS_SOURCES ]]; then
		log "removing $OLD_BACKPORTS_SOURCES (added by an older test bed)"
		rm -f "$OLD_BACKPORTS_SOURCES"
	fi
	[[ -d $CACHE ]] || { log "no $CACHE"; return 0; }
	log "removing $CACHE ($(du -sm "$CACHE" | cut -f1) MB)"
	for e in "${CACHE_ENTRIES[@]}"; do
		for f in "$CACHE"/$e; do
			if [[ -e $f || -L $f ]]; then rm -rf --one-file-system "$f"; fi
		done
	done
	if ! rmdir "$CACHE" 2>/dev/null; then
		left=$(ls -A "$CACHE")
		log "$CACHE stays, with what the test bed did not put there: $(tr '\n' ' ' <<<"$left")"
	fi
}

# ---------------------------------------------------------------- build ----

# host_kdir KVER: KVER's build dir on the host: the debug kernel's O= tree
# in the cache (see debug-kernel.sh), else its header tree in HDR_ROOT
# (see extract_headers)
host_kdir() {
	if [[ -e $CACHE/kernels/$1/build/Makefile ]]; then
		echo "$CACHE/kernels/$1/build"
	else
		echo "$HDR_ROOT/usr/src/linux-headers-$1"
	fi
}

# kernel_root KVER: "" when the host has KVER's headers (or build tree) in
# the cache, the chroot when it has them, else fails.
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
		die "no headers for $kver in $HDR_ROOT or $SID_ROOT (run: $SELF setup)"
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

PASS=0 FAIL=0 SKIP=0 TAPN=0 FAILED=() TAPKVER=
tap_line() { # tap_line "ok|not ok|skip" DESC
	local desc=${2//#/\\#}
	TAPN=$((TAPN + 1))
	case $1 in
	ok) PASS=$((PASS + 1)); echo "ok $TAPN - $desc" ;;
	skip) SKIP=$((SKIP + 1)); echo "ok $TAPN - $desc # SKIP" ;;
	*)
		FAIL=$((FAIL + 1)) FAILED+=("$TAPKVER: not ok $TAPN - $desc")
		echo "not ok $TAPN - $desc"
		;;
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
# hooks, the stack check and its waits, the redirect and the ftrace users
# beside it), not the long stress scripts, which would add some 20 minutes
# of guest time to CI.
RT_TESTS="00-taint api bpf burst busy bystanders errors exiting holds hooks kprobed moving own ownpath
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
	TAPN=0 TAPKVER=$kver
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
	# The failures again, last, where a log's tail shows them.
	if ((FAIL)); then printf '# failed: %s\n' "${FAILED[@]}"; fi
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
purge) cmd_purge "$@" ;;
install) (($# >= 1)) || usage; host_install "$@" ;;
build) cmd_build "$@" ;;
run) cmd_run "$@" ;;
kmake) (($# >= 2)) || usage; lock_shared; kmake "$@" ;;
demo) cmd_demo "$@" ;;
bench) cmd_bench "$@" ;;
*) usage ;;
esac
