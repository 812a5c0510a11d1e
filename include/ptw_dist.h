/* SPDX-License-Identifier: MIT */
/*
 * Distributions of durations (spawn latency, lifetime, join wait, a traced
 * function's times): count, min, percentiles, max, mean. Used by the span
 * engine (spans.c) and the frame spans (frames.c) alike. Pure.
 */
#ifndef PTW_DIST_H
#define PTW_DIST_H

#include <stddef.h>
#include <stdint.h>

struct ptw_distribution {
	uint64_t count;
	uint64_t min, p50, p90, p99, max;
	double mean;
};

/*
 * A distribution accumulated value by value in bounded memory: exact (the
 * values kept) up to `exact_max` values, then a log-linear histogram of
 * 64 sub-buckets per power of two (percentiles within 1/64 of the value;
 * count, min, max and mean stay exact). exact_max 0 means never switch.
 */
struct ptw_dacc {
	size_t exact_max;
	uint64_t *v;
	size_t n, cap;
	uint64_t *hist; /* PTW_DACC_BUCKETS, once switched */
	uint64_t count, min, max;
	double sum;
};
#define PTW_DACC_EXACT 4096
void ptw_dacc_add(struct ptw_dacc *a, uint64_t v);
void ptw_dacc_merge(struct ptw_dacc *into, const struct ptw_dacc *from);
void ptw_dacc_result(const struct ptw_dacc *a, struct ptw_distribution *ret);
void ptw_dacc_free(struct ptw_dacc *a);

/* Nearest-rank distribution of n values (sorted in place). */
void ptw_distribution(uint64_t *values, size_t n, struct ptw_distribution *ret);

#endif
