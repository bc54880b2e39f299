// SPDX-License-Identifier: GPL-2.0
/*
 * kpatch_test_nmi_c - kpatch_test_nmi_a under another name, for test-nmi.sh,
 * which has more than one patch module's patch at a time (a patch is named
 * after its module).  See kpatch_test_nmi_a.c.
 */
#include "kpatch_test_nmi_a.c"
