/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Functions shared by kpatch_bench.c, the generated kpatch_bench_funcs.c
 * (see gen-funcs.sh) and the livepatch module kpatch_bench_lp.c.
 */

#ifndef _KPATCH_BENCH_H_
#define _KPATCH_BENCH_H_

/* The measured function (returns x + 1) and its replacement (x + 2). */
int kpatch_bench_old(int x);
int kpatch_bench_new(int x);

/* Generated: KPATCH_BENCH_NFUNCS old/new pairs of tiny functions. */
struct kpatch_bench_pair {
	int (*old)(int x);
	int (*new)(int x);
};

extern const struct kpatch_bench_pair kpatch_bench_pairs[];
extern const unsigned int kpatch_bench_nr_pairs;

#endif /* _KPATCH_BENCH_H_ */
