/* SPDX-License-Identifier: MIT */
/* Distributions: exact (nearest rank) and accumulated in bounded memory;
 * see ptw_dist.h. Pure. */
#define _GNU_SOURCE
#include "ptw_dist.h"

#include <stdlib.h>
#include <string.h>

#include "ptw_util.h"

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

void ptw_distribution(uint64_t *v, size_t n, struct ptw_distribution *d)
{
	memset(d, 0, sizeof(*d));
	d->count = n;
	if (!n)
		return;
	qsort(v, n, sizeof(*v), cmp_u64);
	double sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += (double)v[i];
	/* nearest rank: the smallest value with at least p% at or below it */
#define RANK(p) v[(size_t)(((p) * n + 99) / 100) - 1]
	d->min = v[0];
	d->p50 = RANK(50);
	d->p90 = RANK(90);
	d->p99 = RANK(99);
#undef RANK
	d->max = v[n - 1];
	d->mean = sum / (double)n;
}

/* ---- distributions in bounded memory ---- */

#define SUB_BITS 6
#define PTW_DACC_BUCKETS (128 + 57 * 64)

static size_t bucket_of(uint64_t v)
{
	if (v < 128)
		return (size_t)v;
	unsigned b = 63u - (unsigned)__builtin_clzll(v); /* 7..63 */
	uint64_t mant = (v >> (b - SUB_BITS)) & ((1u << SUB_BITS) - 1);
	return 128 + (size_t)(b - 7) * 64 + (size_t)mant;
}

/* The middle of bucket i. */
static uint64_t bucket_value(size_t i)
{
	if (i < 128)
		return i;
	unsigned b = (unsigned)((i - 128) / 64) + 7;
	uint64_t mant = (i - 128) % 64;
	uint64_t lo = (64 + mant) << (b - SUB_BITS);
	return lo + ((1ull << (b - SUB_BITS)) >> 1);
}

static void to_histogram(struct ptw_dacc *a)
{
	a->hist = xcalloc(PTW_DACC_BUCKETS, sizeof(uint64_t));
	for (size_t i = 0; i < a->n; i++)
		a->hist[bucket_of(a->v[i])]++;
	free(a->v);
	a->v = NULL;
	a->n = a->cap = 0;
}

void ptw_dacc_add(struct ptw_dacc *a, uint64_t v)
{
	if (!a->count || v < a->min)
		a->min = v;
	if (!a->count || v > a->max)
		a->max = v;
	a->count++;
	a->sum += (double)v;
	if (!a->hist && a->exact_max && a->n >= a->exact_max)
		to_histogram(a);
	if (a->hist) {
		a->hist[bucket_of(v)]++;
		return;
	}
	if (a->n == a->cap) {
		a->cap = a->cap ? a->cap * 2 : 16;
		a->v = xreallocarray(a->v, a->cap, sizeof(*a->v));
	}
	a->v[a->n++] = v;
}

void ptw_dacc_merge(struct ptw_dacc *into, const struct ptw_dacc *from)
{
	if (!from->count)
		return;
	if (from->hist) {
		if (!into->hist)
			to_histogram(into);
		for (size_t i = 0; i < PTW_DACC_BUCKETS; i++)
			into->hist[i] += from->hist[i];
		if (!into->count || from->min < into->min)
			into->min = from->min;
		if (!into->count || from->max > into->max)
			into->max = from->max;
		into->count += from->count;
		into->sum += from->sum;
		return;
	}
	/* exact values: one by one, in order (the same result as adding them) */
	for (size_t i = 0; i < from->n; i++)
		ptw_dacc_add(into, from->v[i]);
}

void ptw_dacc_result(const struct ptw_dacc *a, struct ptw_distribution *d)
{
	if (!a->hist) {
		uint64_t *v = xcalloc(a->n + 1, sizeof(uint64_t));
		if (a->n)
			memcpy(v, a->v, a->n * sizeof(uint64_t));
		ptw_distribution(v, a->n, d);
		free(v);
		return;
	}
	memset(d, 0, sizeof(*d));
	d->count = a->count;
	d->min = a->min;
	d->max = a->max;
	d->mean = a->sum / (double)a->count;
	static const unsigned pct[] = { 50, 90, 99 };
	uint64_t *out[] = { &d->p50, &d->p90, &d->p99 };
	for (size_t k = 0; k < 3; k++) {
		uint64_t rank = (pct[k] * a->count + 99) / 100, seen = 0;
		size_t i = 0;
		while (i < PTW_DACC_BUCKETS - 1 && seen + a->hist[i] < rank)
			seen += a->hist[i++];
		uint64_t v = bucket_value(i);
		*out[k] = v < a->min ? a->min : v > a->max ? a->max : v;
	}
}

void ptw_dacc_free(struct ptw_dacc *a)
{
	free(a->v);
	free(a->hist);
	a->v = a->hist = NULL;
	a->n = a->cap = 0;
	a->count = 0;
}
