#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# test-load.sh - kpatch.ko loads and unloads cleanly and creates its
# interface: the debugfs control (0200) and patches (0400) files and the
# sysfs /sys/kernel/kpatch/patches directory.
#
# shellcheck source-path=SCRIPTDIR source=functions.sh
. "${KPATCH_SELFTESTS:-$(dirname "$0")}/functions.sh"

start_test "load"
check_not "precondition: kpatch is not loaded" mod_loaded kpatch
check "insmod kpatch.ko succeeds" load_kpatch
check "kpatch is in /proc/modules" mod_loaded kpatch
check "debugfs directory $KP_DEBUGFS exists" test -d "$KP_DEBUGFS"
check "control is a regular file" test -f "$KP_CONTROL"
check_eq "control has mode 0200" 200 "$(stat -c %a "$KP_CONTROL" 2>&1)"
check "patches is a regular file" test -f "$KP_PATCHES"
check_eq "patches has mode 0400" 400 "$(stat -c %a "$KP_PATCHES" 2>&1)"
check "$KP_SYSFS_PATCHES exists" test -d "$KP_SYSFS_PATCHES"
check_patches "patches file is empty"
check_sysfs_patches "no patch directories in sysfs"

start_test "unload"
check "rmmod kpatch succeeds" unload_kpatch
check_not "kpatch is gone from /proc/modules" mod_loaded kpatch
check_not "debugfs directory is gone" test -e "$KP_DEBUGFS"
check_not "$KP_SYSFS is gone" test -e "$KP_SYSFS"

start_test "reload"
check "insmod kpatch.ko succeeds again" load_kpatch
check "control exists again" test -e "$KP_CONTROL"
check "$KP_SYSFS_PATCHES exists again" test -d "$KP_SYSFS_PATCHES"
check "rmmod kpatch succeeds again" unload_kpatch
check_no_splat
