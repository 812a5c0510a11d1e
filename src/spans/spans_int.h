/* SPDX-License-Identifier: MIT */
/*
 * Inside the span engine: struct ptw_spans and what its files share
 * (metrics.c calls spans.c, not the other way).
 */
#ifndef PTW_SPANS_INT_H
#define PTW_SPANS_INT_H

#include "ptw_spans.h"

#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "ptw_timeouts.h"
#include "ptw_frames.h"
#include "ptw_locks.h"
#include "ptw_symbols.h"
#include "ptw_util.h"

#define PTHREAD_CANCELED_VALUE UINT64_MAX /* (void *)-1 */

struct ptw_spans {
	struct ptw_span **spans; /* held, in order of id; NULL: freed (holes) */
	size_t n, cap, holes;
	uint32_t next_id;
	struct ptw_map by_tid;	   /* tid -> live span */
	struct ptw_map ended_by_tid; /* tid -> its span that left last (a late THREAD_CPU) */
	struct ptw_map by_pthread; /* pthread_t -> most recent span with it */
	struct ptw_map joins;	   /* joiner tid -> span it is joining */
	uint64_t threads_created;
	unsigned max_depth;
	uint64_t active, max_active;
	uint64_t (*series)[2];
	size_t nseries, series_cap;
	struct ptw_timeouts *timeouts; /* borrowed, may be NULL */
	bool let_go;		       /* PTW_EV_DETACHED seen */
	bool multi;		       /* events from more than one process (-f) */
	pid_t pid;		       /* the process of the event being consumed, */
	uint32_t process;	       /* and its id in the session (ptw_event.process) */
	struct ptw_frames *frames;     /* --trace: frame spans (frames.c) */
	const struct ptw_frame *last_frame;
	struct ptw_locks *locks; /* --locks: wait spans (locks.c) */
	const struct ptw_wait *last_wait;
	struct ptw_map by_id; /* id -> held span */
	/* streaming */
	bool streaming;
	ptw_span_retire_fn retire;
	void *retire_ctx;
	struct ptw_span **pending; /* candidates for retirement */
	size_t npending, pending_cap;
	/* what the freed spans leave in the metrics and groups */
	struct ptw_dacc spawn, life, wait;
	uint64_t freed, kept, added, unjoined, open_spans, unmatched, open_timeouts;
	struct ptw_group *groups;
	size_t ngroups;
	struct ptw_map group_idx; /* hash of the name -> index + 1 */
	bool counters_set;
};

/* pthread_t values repeat across processes (a fork child has its parent's
 * layout): the key mixes in the process (a collision only costs a miss, as
 * the span's process is checked). Processes are told apart by their id in
 * the session, not their pid, which the kernel hands out again. */
static inline uint64_t pthread_key(uint32_t process, uint64_t pthread)
{
	return pthread ^ ((uint64_t)process * 0x9e3779b97f4a7c15ull);
}

/* ---- spans.c ---- */

void sp_compact(struct ptw_spans *s);
bool sp_spawn_of(const struct ptw_span *sp, uint64_t *ret);
bool sp_life_of(const struct ptw_span *sp, uint64_t *ret);
bool sp_is_unjoined(const struct ptw_span *sp);

#endif
