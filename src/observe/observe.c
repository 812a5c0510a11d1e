/* SPDX-License-Identifier: MIT */
/* The wait-for graph and the wait kinds' names; see ptw_observe.h and
 * ptw_events.h (the shadow stack: shadow.c). Pure. */
#include "ptw_observe.h"

#include "ptw_events.h"
#include "ptw_util.h"

/* ---- the wait-for graph ---- */

size_t ptw_wait_cycle(pid_t from, ptw_owner_fn owner_of, void *ctx, pid_t *ret, size_t max)
{
	if (from <= 0 || max < 2)
		return 0;
	size_t n = 0;
	pid_t cur = from;
	while (n < max) {
		/* A thread met twice that is not `from`: a cycle elsewhere. */
		for (size_t i = 1; i < n; i++)
			if (ret[i] == cur)
				return 0;
		ret[n++] = cur;
		pid_t next = owner_of(ctx, cur);
		if (next <= 0 || next == cur)
			return 0;
		if (next == from)
			return n;
		cur = next;
	}
	return 0;
}

uint64_t ptw_wait_cycle_key(const pid_t *tids, const uint64_t *waits, size_t n)
{
	/* order-independent: a sum of the members' mixed hashes */
	uint64_t h = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t x = ((uint64_t)(uint32_t)tids[i] * 0x9e3779b97f4a7c15ull) ^ waits[i];
		x ^= x >> 29;
		x *= 0xbf58476d1ce4e5b9ull;
		h += x ^ (x >> 32);
	}
	return h | 1;
}

const char *ptw_wait_kind_name(enum ptw_wait_kind kind)
{
	static const char *const names[] = { "none", "mutex",	"join",	       "rwlock",
					     "cond", "other",	"rwlock_read", "rwlock_write",
					     "sem",  "barrier", "lock" };
	return (unsigned)kind < PTW_ARRAY_SIZE(names) ? names[kind] : "other";
}
