// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_test_patch_b - kpatch_test_patch_a under another name, for a
 * test that needs more than one patch module's patch at a time (a patch
 * is named after its module).  See kpatch_test_patch_a.c.
 */
#include "kpatch_test_patch_a.c"
