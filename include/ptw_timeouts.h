/* SPDX-License-Identifier: MIT */
/*
 * Span timeouts (docs/design.md, "Behaviour"): which spans have been open longer than
 * a limit, earliest deadline first. Any span engine plugs in by naming its
 * spans by (kind, id): it watches a span when the span opens and unwatches
 * it when the span ends; the session asks when the next deadline is, waits
 * for it (or for anything else), and pops the spans that crossed it. Each
 * span is reported once. Pure: no clock, no I/O; the caller says what time
 * it is. Every function accepts a NULL handle and then does nothing (an
 * engine without timeouts, the restorer's copy of the engine).
 */
#ifndef PTW_TIMEOUTS_H
#define PTW_TIMEOUTS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptw_events.h"

/* The default limit: 5 seconds (docs/design.md, "Behaviour"). */
#define PTW_OPEN_TIMEOUT_DEFAULT_NS (5ull * 1000000000u)

/* A span that crossed the limit. */
struct ptw_timeout {
	enum ptw_span_kind kind;
	uint32_t id;	      /* unique within kind */
	pid_t tid;	      /* its thread */
	uint64_t start_ns;    /* since when it has been open */
	uint64_t deadline_ns; /* start_ns + limit */
};

struct ptw_timeouts;

/* limit_ns 0: disabled (nothing is watched, nothing is ever due). Returns
 * the handle (allocation failure is fatal); free it with ptw_timeouts_free
 * after every engine that watches through it. */
struct ptw_timeouts *ptw_timeouts_new(uint64_t limit_ns);
void ptw_timeouts_free(struct ptw_timeouts *to);
uint64_t ptw_timeouts_limit(const struct ptw_timeouts *to);

/* Span (kind, id) of thread tid is open since start_ns. Watching a span
 * already watched moves it to the new start. */
void ptw_timeouts_watch(struct ptw_timeouts *to, enum ptw_span_kind kind, uint32_t id, pid_t tid,
			uint64_t start_ns);
/* It ended (or is no longer of interest); unknown spans are ignored. */
void ptw_timeouts_unwatch(struct ptw_timeouts *to, enum ptw_span_kind kind, uint32_t id);
/* How many spans are watched. */
size_t ptw_timeouts_count(const struct ptw_timeouts *to);

/* The earliest deadline of a watched span (CLOCK_MONOTONIC ns), 0 if none. */
uint64_t ptw_timeouts_next(const struct ptw_timeouts *to);

/* The watched span with the earliest deadline at or before now, taken off
 * the watch: true with *ret filled, false (and *ret untouched) if none. */
bool ptw_timeouts_pop(struct ptw_timeouts *to, uint64_t now, struct ptw_timeout *ret);

#endif
