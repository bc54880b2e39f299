#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# debug-kernel.sh - build the test bed's debug kernel, unless it is cached,
# and print its kernel release (e.g. 6.1.192-kpatch-debug).
#
#   debug-kernel.sh                  build it (unless cached) and print it
#   debug-kernel.sh --check VERSION  print it and succeed if the kernel of
#                                    linux-source-6.1 VERSION is cached
#
# Linux 6.1 from Debian's linux-source-6.1, whose tarball testbed.sh setup
# downloads into $KPATCH_CACHE/src/ (linux-source-6.1.tar.xz, with the
# package's version in linux-source-6.1.version), configured as
# tinyconfig plus selftests/harness/debug-kernel.config: lockdep,
# PROVE_RCU, KASAN, atomic-sleep and preempt checks, DEBUG_LIST, fault
# injection, and module signing for the lockdown boot.  testbed.sh setup
# runs it and adds the kernel to kernels.list.
#
# The result, in $KPATCH_CACHE/kernels/<release>/:
#   vmlinuz, config      the kernel and its .config
#   linux/               the extracted source (lint.sh runs its
#                        scripts/checkpatch.pl)
#   linux/obj/           the O= tree (build: a link to it), against which
#                        external modules are built; certs/signing_key.*
#                        sign them
#   debug-kernel.key     the cache key, written last
#
# The key is the linux-source-6.1 package version, the sha256 of the config
# fragment and of this script, and the compiler version: changing any of
# them rebuilds.  The build runs in a temporary directory next to the
# result and is renamed into place when complete, so a failed or
# interrupted build never leaves a directory that looks complete.  The
# build tools (BUILD_PACKAGES) are the host's, which setup installs.
#
# Environment:
#   KPATCH_CACHE   cache dir (default /var/cache/kpatch-testbed)

set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SELF=$HERE/$(basename "${BASH_SOURCE[0]}")
CACHE=${KPATCH_CACHE:-/var/cache/kpatch-testbed}
KERNELS=$CACHE/kernels
FRAGMENT=$HERE/debug-kernel.config
SOURCE_PKG=linux-source-6.1
TARBALL=$CACHE/src/$SOURCE_PKG.tar.xz
VERSION_FILE=$CACHE/src/$SOURCE_PKG.version
BUILD_PACKAGES=(bc bison flex libssl-dev libelf-dev openssl xz-utils gcc make)
KEY_FILE=debug-kernel.key

export LC_ALL=C DEBIAN_FRONTEND=noninteractive
# Run from `make check` (testbed.sh setup): not the outer make's flags.
unset MAKEFLAGS MFLAGS MAKELEVEL GNUMAKEFLAGS

log() { echo "debug-kernel: $*" >&2; }
die() { log "error: $*"; exit 1; }

need_packages() {
	local missing=() p
	for p in "${BUILD_PACKAGES[@]}"; do
		# shellcheck disable=SC2016 # a dpkg-query format
		[[ $(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2>/dev/null) == ii* ]] ||
			missing+=("$p")
	done
	((${#missing[@]} == 0)) ||
		die "the host lacks ${missing[*]} (selftests/harness/testbed.sh setup installs them)"
}

# complete DIR: DIR holds a finished build with key $KEY
complete() {
	[[ $(cat "$1/$KEY_FILE" 2>/dev/null) == "$KEY" && -s $1/vmlinuz &&
	   -e $1/build/Makefile && -e $1/build/Module.symvers ]]
}

# check_config CONFIG: every line of the fragment is in CONFIG
check_config() {
	local line sym val bad=0
	while IFS= read -r line; do
		[[ $line =~ ^(CONFIG_[A-Za-z0-9_]+)=(.*)$ ]] || continue
		sym=${BASH_REMATCH[1]} val=${BASH_REMATCH[2]}
		if [[ $val == n ]]; then
			grep -q "^$sym=" "$1" || continue
		else
			grep -qxF "$sym=$val" "$1" && continue
		fi
		log "$sym=$val is not in the final .config (unmet dependency?):" \
			"$(grep -E "^(# )?${sym}[= ]" "$1" || echo "(absent)")"
		bad=1
	done <"$FRAGMENT"
	return "$bad"
}

CHECK=0
case $# in
0) PKG_VERSION=$(cat "$VERSION_FILE" 2>/dev/null) ||
	die "no $VERSION_FILE (selftests/harness/testbed.sh setup downloads the source)" ;;
2) [[ $1 == --check ]] || die "usage: $0 [--check VERSION]"
   CHECK=1 PKG_VERSION=$2 ;;
*) die "usage: $0 [--check VERSION]" ;;
esac
LOCALVERSION=$(sed -n 's/^CONFIG_LOCALVERSION="\(.*\)"$/\1/p' "$FRAGMENT")
[[ -n $LOCALVERSION ]] || die "no CONFIG_LOCALVERSION in $FRAGMENT"
# 6.1.192-3 -> 6.1.192; checked against the built kernel's release below.
KVER=${PKG_VERSION%%-*}$LOCALVERSION
KEY=$({
	echo "$SOURCE_PKG $PKG_VERSION"
	sha256sum <"$FRAGMENT"
	sha256sum <"$SELF"
	gcc --version | sed -n 1p
} | sha256sum | cut -d' ' -f1)
DIR=$KERNELS/$KVER

if complete "$DIR"; then
	echo "$KVER"
	exit 0
fi
((!CHECK)) || exit 1
need_packages
[[ -r $TARBALL ]] || die "$TARBALL not found (selftests/harness/testbed.sh setup downloads it)"

mkdir -p "$KERNELS"
exec 8>"$KERNELS/.debug-kernel.lock"
if ! flock -n 8; then
	log "waiting for another build of the debug kernel"
	flock 8
fi
if complete "$DIR"; then # built while we waited
	echo "$KVER"
	exit 0
fi

# Leftovers of interrupted builds (we hold the lock: nobody else builds).
rm -rf "$KERNELS"/.debug-kernel.tmp.* "$KERNELS"/.debug-kernel.old.*
TMP=$(mktemp -d "$KERNELS/.debug-kernel.tmp.XXXXXX")
chmod 755 "$TMP"
trap 'rm -rf "$TMP"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

START=$SECONDS
BLOG=$CACHE/debug-kernel.build.log
log "building $KVER ($SOURCE_PKG $PKG_VERSION) in $TMP, log: $BLOG"
mkdir "$TMP/linux"
tar -xJf "$TARBALL" -C "$TMP/linux" --strip-components=1
# The O= tree is a subdirectory of the source, so kbuild refers to the
# source as ".." and the pair can be renamed into place.
OBJ=$TMP/linux/obj
kmk() {
	make -C "$TMP/linux" O="$OBJ" "$@"
}
JOBS=$(nproc)
if ! {
	kmk tinyconfig &&
	"$TMP/linux/scripts/kconfig/merge_config.sh" -m -O "$OBJ" \
		"$OBJ/.config" "$FRAGMENT" &&
	kmk olddefconfig
} >"$BLOG" 2>&1; then
	tail -n 30 "$BLOG" >&2
	die "configuring the kernel failed (see $BLOG)"
fi
check_config "$OBJ/.config" || die "the config fragment did not apply: $FRAGMENT"
log "configured in $((SECONDS - START))s; make -j$JOBS"
if ! kmk -j"$JOBS" all >>"$BLOG" 2>&1; then
	tail -n 30 "$BLOG" >&2
	die "building the kernel failed (see $BLOG)"
fi
RELEASE=$(kmk -s kernelrelease 2>>"$BLOG")
[[ $RELEASE == "$KVER" ]] ||
	die "the kernel release is $RELEASE, not $KVER (from $SOURCE_PKG $PKG_VERSION)"
for f in arch/x86/boot/bzImage Module.symvers scripts/sign-file \
	 certs/signing_key.pem certs/signing_key.x509; do
	[[ -s $OBJ/$f ]] || die "$f was not built"
done

cp "$OBJ/arch/x86/boot/bzImage" "$TMP/vmlinuz"
cp "$OBJ/.config" "$TMP/config"
cp "$BLOG" "$TMP/build.log"
ln -s linux/obj "$TMP/build"
echo "$KEY" >"$TMP/$KEY_FILE"

# Into place; then drop what it replaces and superseded releases.
OLD=
if [[ -e $DIR ]]; then
	OLD=$(mktemp -u "$KERNELS/.debug-kernel.old.XXXXXX")
	mv "$DIR" "$OLD"
fi
mv "$TMP" "$DIR"
[[ -z $OLD ]] || rm -rf "$OLD"
for d in "$KERNELS"/*"$LOCALVERSION"; do
	[[ $d != "$DIR" && -e $d/$KEY_FILE ]] || continue
	log "removing the superseded ${d##*/}"
	rm -rf "$d"
done
log "built $KVER in $((SECONDS - START))s"
echo "$KVER"
