#!/bin/bash
# SPDX-License-Identifier: GPL-2.0-or-later
#
# lint.sh - review gates; any finding fails the run.
#
#   checkpatch.pl --strict (from Debian's linux-source-6.1: the debug
#     kernel's source tree in the cache) on kpatch.c, kpatch.h, the test
#     modules, the example patch module and the guest helpers
#     (selftests/*.c)
#   builds of kpatch.ko, the test modules and the example patch module,
#     plain and hooked, with W=1 and sparse at once (make W=1 C=2: one
#     compile that gives both the compiler's and sparse's diagnostics), on
#     every kernel of the test bed
#     (selftests/harness/testbed.sh setup lists them; the newest is built
#     in its Debian unstable chroot, which has sparse)
#   W=1 builds of kpatch.ko, plain and hooked, against every other kernel
#     header package setup installed (headers.list): each one that the
#     header meta packages of Debian 12's suites depend on, and every
#     flavour of unstable's
#   ShellCheck on every shell script
#   one version string in kpatch.c, dkms.conf, README.md, Documentation.txt
#     and the example's Makefile
#
# Needs the test bed's cache (`make lint` sets it up first); what else it
# needs (sparse, shellcheck) it installs into the host as setup does
# (testbed.sh install).  Run from anywhere.

set -euo pipefail

SRC=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
CACHE=${KPATCH_CACHE:-/var/cache/kpatch-testbed}
failures=0

log() { echo "lint: $*" >&2; }
fail() {
	log "FAIL: $*"
	failures=$((failures + 1))
}

# need PACKAGE...: the Debian packages the host lacks installed, as
# testbed.sh setup installs them (and listed for its purge)
need() {
	"$SRC/selftests/harness/testbed.sh" install "$@"
}

# checkpatch: checkpatch.pl, with the data files it reads beside it: that
# of the debug kernel's source (linux-source-6.1, see debug-kernel.sh)
checkpatch() {
	local kver
	while read -r kver; do
		if [[ -e $CACHE/kernels/$kver/debug-kernel.key &&
		      -x $CACHE/kernels/$kver/linux/scripts/checkpatch.pl ]]; then
			echo "$CACHE/kernels/$kver/linux/scripts/checkpatch.pl"
			return 0
		fi
	done <"$CACHE/kernels.list"
	return 1
}

gate_checkpatch() {
	local cp f out
	[[ -s $CACHE/kernels.list ]] || { fail "no kernels: run testbed.sh setup"; return; }
	cp=$(checkpatch) || { fail "checkpatch: no debug kernel source in $CACHE/kernels"; return; }
	for f in "$SRC"/kpatch.c "$SRC"/kpatch.h "$SRC"/selftests/*.c \
		 "$SRC"/selftests/test_modules/*.[ch] \
		 "$SRC"/selftests/example/*.c \
		 "$SRC"/selftests/bench/*.[ch]; do
		out=$(perl "$cp" --no-tree --strict --quiet -f "$f" 2>&1) ||
			{ echo "$out"; fail "checkpatch: ${f#"$SRC"/}"; }
	done
}

# build_gate KVER FLAGS [HOOKS [KO_ONLY]]: build kpatch.ko, the test modules
# and the example with FLAGS in a scratch copy (HOOKS=1: the selftests'
# hooked build and its test modules; KO_ONLY=1: kpatch.ko alone); any
# compiler or sparse diagnostic is a finding.  (The example is built here
# with its Kbuild only, against the scratch kpatch.ko; testbed.sh builds it
# against an installed one.)  testbed.sh kmake builds on the host, or in
# the chroot that has KVER's headers (unstable's kernels).
build_gate() {
	local kver=$1 flags=$2 hooks=${3:-0} ko_only=${4:-0} dir out
	local kmake=("$SRC/selftests/harness/testbed.sh" kmake "$1")
	local -a fl
	read -ra fl <<<"$flags"
	dir=$(mktemp -d)
	cp "$SRC"/{kpatch.c,kpatch.h,Kbuild} "$dir/"
	cp -r "$SRC"/selftests/test_modules "$SRC"/selftests/example "$dir/"
	out=$( { "${kmake[@]}" "$dir" M="$dir" "${fl[@]}" \
			KPATCH_TEST_HOOKS="$hooks" modules &&
		 if [[ $ko_only == 0 ]]; then
			"${kmake[@]}" "$dir" M="$dir/test_modules" "${fl[@]}" \
				KPATCH_TEST_HOOKS="$hooks" \
				KBUILD_EXTRA_SYMBOLS="$dir/Module.symvers" modules
		 fi &&
		 if [[ $ko_only == 0 && $hooks == 0 ]]; then
			"${kmake[@]}" "$dir" M="$dir/example" "${fl[@]}" \
				KPATCH_DIR="$dir" \
				KBUILD_EXTRA_SYMBOLS="$dir/Module.symvers" modules
		 fi; } 2>&1 </dev/null) ||
		{ echo "$out" | tail -20; fail "build $kver $flags hooks=$hooks"; }
	# (kbuild only warns, without "warning:", when it cannot run sparse)
	if grep -E '(warning|error):|is not available' <<<"$out"; then
		fail "$kver $flags hooks=$hooks: diagnostics above"
	fi
	if [[ ! -e $dir/kpatch.ko ]]; then
		fail "$kver $flags hooks=$hooks: no kpatch.ko"
	fi
	rm -rf "$dir"
}

gate_builds() {
	local kver start before
	need sparse
	[[ -s $CACHE/kernels.list ]] || { fail "no kernels: run testbed.sh setup"; return; }
	while read -r kver; do
		start=$SECONDS before=$failures
		build_gate "$kver" "W=1 C=2"
		build_gate "$kver" "W=1 C=2" 1
		((failures > before)) ||
			log "$kver: W=1 and C=2, plain and hooked: clean ($((SECONDS - start))s)"
	done <"$CACHE/kernels.list"
}

# gate_headers: kpatch.ko, plain and hooked, with W=1 against every other
# kernel header package that a Debian 12 user can install, and the other
# flavours of unstable's (headers.list, from testbed.sh setup; the
# kernels of kernels.list had the full gates above).
gate_headers() {
	local kver suite ver start=$SECONDS n=0 before
	[[ -s $CACHE/headers.list ]] || { fail "no headers.list: run testbed.sh setup"; return; }
	while read -r kver suite ver; do
		grep -qxF "$kver" "$CACHE/kernels.list" && continue
		before=$failures
		build_gate "$kver" W=1 0 1
		build_gate "$kver" W=1 1 1
		((failures > before)) ||
			log "$kver ($suite, $ver): kpatch.ko W=1, plain and hooked: clean"
		n=$((n + 1))
	done <"$CACHE/headers.list"
	log "$n more header packages built against ($((SECONDS - start))s)"
}

gate_shellcheck() {
	need shellcheck
	shellcheck -x "$SRC"/selftests/harness/testbed.sh "$SRC"/selftests/harness/lint.sh \
		"$SRC"/selftests/bench/bench.sh "$SRC"/selftests/bench/gen-funcs.sh \
		"$SRC"/selftests/harness/debug-kernel.sh \
		"$SRC"/.ci/run || fail "shellcheck (bash scripts)"
	(cd "$SRC/selftests" && shellcheck -s sh -x functions.sh splat.sh test-*.sh \
		demo.sh harness/guest-init.sh lockdown.sh bench/guest-bench.sh) ||
		fail "shellcheck (guest scripts)"
}

gate_version() {
	local v f
	v=$(sed -n 's/^MODULE_VERSION("\(.*\)");$/\1/p' "$SRC/kpatch.c")
	[[ -n $v ]] || { fail "no MODULE_VERSION in kpatch.c"; return; }
	grep -qx "PACKAGE_VERSION=\"$v\"" "$SRC/dkms.conf" ||
		fail "dkms.conf PACKAGE_VERSION is not $v"
	for f in README.md Documentation.txt selftests/example/Makefile; do
		grep -qF "$v" "$SRC/$f" || fail "$f does not mention version $v"
	done
}

gate_checkpatch
gate_builds
gate_headers
gate_shellcheck
gate_version

if ((failures)); then
	log "$failures gate(s) failed"
	exit 1
fi
log "all gates passed"
