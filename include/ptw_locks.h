/* SPDX-License-Identifier: MIT */
/*
 * Wait spans (--locks): every contended wait of a thread on a mutex, a
 * rwlock, a condition variable, a semaphore, a join, from the moment it
 * enters glibc's slow path to the moment it leaves it; and the deadlocks
 * the tracer confirmed while they formed. Pure code (no ptrace, no clock,
 * no I/O), fed by the span engine (ptw_spans.h) and unit-tested with
 * synthetic streams.
 *
 * The backends keep a wait-for table of their own (who waits for whom,
 * now) and look for cycles in it with ptw_wait_cycle() (ptw_observe.h).
 */
#ifndef PTW_LOCKS_H
#define PTW_LOCKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptw_events.h"
#include "ptw_observe.h"

struct ptw_span;
struct ptw_location;

/* ---- wait spans ---- */

enum ptw_wait_status {
	PTW_WAIT_OPEN,
	PTW_WAIT_COMPLETED,
	PTW_WAIT_UNMATCHED,
};

struct ptw_wait {
	uint32_t id;	      /* 1, 2, ... in order of start (their own numbering) */
	uint32_t thread_span; /* the waiting thread's span, 0 unknown */
	pid_t tid;
	enum ptw_wait_kind kind;
	uint64_t object;		       /* the mutex, rwlock, condvar, semaphore, pthread_t */
	const struct ptw_location *object_loc; /* its symbol, NULL when none names it */
	pid_t owner;			       /* at the start: holder / joined thread, 0 unknown */
	uint32_t owner_span;		       /* its thread span, 0 unknown */
	const struct ptw_location *site;       /* the call that waited (outside libc) */
	const struct ptw_location **stack;     /* a few frames, innermost first */
	size_t nstack;
	uint64_t start_ns;  /* start_unknown: the attach's time */
	bool start_unknown; /* under way when ptwatch attached (-p): no duration */
	bool has_end;
	uint64_t end_ns;
	bool has_left; /* unmatched: when it was found over */
	uint64_t left_ns;
	enum ptw_wait_status status;
	const char *reason; /* unmatched: static string */
	uint32_t deadlock;  /* the live deadlock it is part of, 0 none */
	uint64_t sp;	    /* stack pointer at the slow path's entry */
};

/* A deadlock found while tracing: n threads, each waiting for the next. */
struct ptw_live_deadlock {
	uint32_t id;
	uint64_t ns;
	size_t n, expected;
	pid_t *tids;
	uint32_t *thread_spans; /* 0 unknown */
	uint32_t *waits;	/* wait span ids, 0 unknown */
	uint64_t *objects;
	enum ptw_deadlock_proof proof; /* how it was confirmed */
};

struct ptw_locks;

struct ptw_locks *ptw_locks_new(void);
void ptw_locks_free(struct ptw_locks *l);

/*
 * Consumes one event (the wait kinds, DEADLOCK, and the thread and process
 * ends that end waits). thread: the live thread span of ev->tid before the
 * event, or NULL; owner: that of ev->wait_owner, or NULL. Returns the wait
 * concerned (for the event log), or NULL.
 */
const struct ptw_wait *ptw_locks_consume(struct ptw_locks *l, const struct ptw_event *ev,
					 const struct ptw_span *thread, const struct ptw_span *owner);

size_t ptw_locks_count(const struct ptw_locks *l);
const struct ptw_wait *ptw_locks_get(const struct ptw_locks *l, size_t i);
size_t ptw_locks_deadlock_count(const struct ptw_locks *l);
const struct ptw_live_deadlock *ptw_locks_deadlock(const struct ptw_locks *l, size_t i);

const char *ptw_wait_status_name(enum ptw_wait_status st);
/* How a live deadlock was confirmed, for the outputs: "threads_stopped"
 * (ptrace) or "owners_reread" (the kernel backend: no thread stopped);
 * and in words ("with the threads stopped", "without a stop: owners read
 * again, threads still waiting"). */
const char *ptw_deadlock_proof_name(enum ptw_deadlock_proof p);
const char *ptw_deadlock_proof_text(enum ptw_deadlock_proof p);
/* "mutex", "rwlock", "cond", "thread" (a join), "sem", "barrier", "lock". */
const char *ptw_wait_object_kind(enum ptw_wait_kind kind);

/* The most contended objects: per object, its waits, their total and
 * longest time (completed ones), the threads and call sites. */
struct ptw_object_stats {
	uint64_t object;
	const struct ptw_location *object_loc;
	enum ptw_wait_kind kind; /* of its first wait (rwlock: either side) */
	/* completed: the waits whose end was seen; timed: of those, the ones
	 * whose start was seen too (not under way at the attach): total_ns
	 * and max_ns are theirs */
	uint64_t waits, completed, timed, total_ns, max_ns;
	pid_t *tids;
	size_t ntids;
	const struct ptw_location **sites;
	size_t nsites;
};
/* Every wait so far, in numbers (streaming frees the ended ones). */
struct ptw_wait_totals {
	uint64_t count, completed, unmatched, total_ns, max_ns;
	uint64_t timed;		/* completed, their start seen: the times are theirs */
	uint64_t before_attach; /* under way at the attach (start unknown) */
};
void ptw_locks_totals(const struct ptw_locks *l, struct ptw_wait_totals *ret);
/* Streaming (--json-lines): at each collect the ended waits go into the
 * totals and statistics and are freed; ptw_locks_count/get then give the
 * waits still under way only. */
void ptw_locks_set_streaming(struct ptw_locks *l);
void ptw_locks_collect(struct ptw_locks *l);

/* Most total time first (then most waits); free with ptw_object_stats_free. */
size_t ptw_locks_object_stats(const struct ptw_locks *l, struct ptw_object_stats **ret);
void ptw_object_stats_free(struct ptw_object_stats *st, size_t n);

/* Time each thread spent waiting (completed waits). */
struct ptw_thread_waits {
	pid_t tid;
	uint32_t thread_span;
	uint64_t waits, completed, timed, total_ns, max_ns; /* (as an object's) */
};
/* Most total time first; the caller frees *ret. */
size_t ptw_locks_thread_stats(const struct ptw_locks *l, struct ptw_thread_waits **ret);
/* The same of the waits keep says yes to (of those the engine holds). */
typedef bool (*ptw_wait_pred)(const struct ptw_wait *w, void *ctx);
size_t ptw_locks_thread_stats_of(const struct ptw_locks *l, ptw_wait_pred keep, void *ctx,
				 struct ptw_thread_waits **ret);

/*
 * `ptwatch report`: a wait read back, final (the engine takes w and
 * w->stack; its locations stay the caller's), and a deadlock found while
 * tracing (taken). A stream has lines for the completed waits only: the
 * figures its last line states are set with ptw_locks_set_stated, and
 * from then on totals, objects and threads are those (copied), and the
 * waits added are listed, not counted again.
 */
void ptw_locks_add_final(struct ptw_locks *l, struct ptw_wait *w);
void ptw_locks_add_deadlock(struct ptw_locks *l, struct ptw_live_deadlock *d);
void ptw_locks_set_stated(struct ptw_locks *l, const struct ptw_wait_totals *tt,
			  const struct ptw_object_stats *obj, size_t nobj,
			  const struct ptw_thread_waits *thr, size_t nthr);

#endif
