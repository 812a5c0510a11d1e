/* SPDX-License-Identifier: MIT */
/* Span timeouts; see ptw_timeouts.h. A binary min-heap on the deadline with
 * a map from (kind, id) to the heap slot, so that a span that ends (most do,
 * long before their deadline) leaves at once: the heap holds open spans only. */
#define _GNU_SOURCE
#include "ptw_timeouts.h"

#include <stdlib.h>

#include "ptw_util.h"

struct ptw_timeouts {
	uint64_t limit_ns;
	struct ptw_timeout *heap;
	size_t n, cap;
	struct ptw_map slot; /* key(kind, id) -> heap index + 1 */
};

/* Never 0 (the map's empty key): kinds count from 1 here. */
static uint64_t key(enum ptw_span_kind kind, uint32_t id)
{
	return ((uint64_t)kind + 1) << 32 | id;
}

struct ptw_timeouts *ptw_timeouts_new(uint64_t limit_ns)
{
	struct ptw_timeouts *to = xcalloc(1, sizeof(*to));
	to->limit_ns = limit_ns;
	return to;
}

void ptw_timeouts_free(struct ptw_timeouts *to)
{
	if (!to)
		return;
	free(to->heap);
	ptw_map_free(&to->slot);
	free(to);
}

uint64_t ptw_timeouts_limit(const struct ptw_timeouts *to)
{
	return to ? to->limit_ns : 0;
}

size_t ptw_timeouts_count(const struct ptw_timeouts *to)
{
	return to ? to->n : 0;
}

static void place(struct ptw_timeouts *to, size_t i, struct ptw_timeout t)
{
	to->heap[i] = t;
	ptw_map_put(&to->slot, key(t.kind, t.id), (void *)(uintptr_t)(i + 1));
}

static void sift_up(struct ptw_timeouts *to, size_t i)
{
	struct ptw_timeout t = to->heap[i];
	while (i > 0) {
		size_t parent = (i - 1) / 2;
		if (to->heap[parent].deadline_ns <= t.deadline_ns)
			break;
		place(to, i, to->heap[parent]);
		i = parent;
	}
	place(to, i, t);
}

static void sift_down(struct ptw_timeouts *to, size_t i)
{
	struct ptw_timeout t = to->heap[i];
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= to->n)
			break;
		if (c + 1 < to->n && to->heap[c + 1].deadline_ns < to->heap[c].deadline_ns)
			c++;
		if (t.deadline_ns <= to->heap[c].deadline_ns)
			break;
		place(to, i, to->heap[c]);
		i = c;
	}
	place(to, i, t);
}

/* Takes slot i out of the heap. */
static void remove_at(struct ptw_timeouts *to, size_t i)
{
	ptw_map_del(&to->slot, key(to->heap[i].kind, to->heap[i].id));
	to->n--;
	if (i == to->n)
		return;
	to->heap[i] = to->heap[to->n];
	if (i > 0 && to->heap[(i - 1) / 2].deadline_ns > to->heap[i].deadline_ns)
		sift_up(to, i);
	else
		sift_down(to, i);
}

void ptw_timeouts_watch(struct ptw_timeouts *to, enum ptw_span_kind kind, uint32_t id, pid_t tid,
			uint64_t start_ns)
{
	if (!to || !to->limit_ns)
		return;
	ptw_timeouts_unwatch(to, kind, id);
	if (to->n == to->cap) {
		to->cap = to->cap ? to->cap * 2 : 64;
		to->heap = xreallocarray(to->heap, to->cap, sizeof(*to->heap));
	}
	uint64_t deadline = start_ns + to->limit_ns;
	if (deadline < start_ns)
		deadline = UINT64_MAX; /* never, in practice */
	to->heap[to->n++] = (struct ptw_timeout){
		.kind = kind, .id = id, .tid = tid, .start_ns = start_ns, .deadline_ns = deadline
	};
	sift_up(to, to->n - 1);
}

void ptw_timeouts_unwatch(struct ptw_timeouts *to, enum ptw_span_kind kind, uint32_t id)
{
	if (!to)
		return;
	uintptr_t i = (uintptr_t)ptw_map_get(&to->slot, key(kind, id));
	if (i)
		remove_at(to, i - 1);
}

uint64_t ptw_timeouts_next(const struct ptw_timeouts *to)
{
	return to && to->n ? to->heap[0].deadline_ns : 0;
}

bool ptw_timeouts_pop(struct ptw_timeouts *to, uint64_t now, struct ptw_timeout *ret)
{
	if (!to || !to->n || to->heap[0].deadline_ns > now)
		return false;
	*ret = to->heap[0];
	remove_at(to, 0);
	return true;
}
