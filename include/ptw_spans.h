/* SPDX-License-Identifier: MIT */
/*
 * The span engine: pure logic over ptw_events (no ptrace, no clock, no I/O).
 * One logical span per thread lifetime, identified by (tid, generation)
 * internally so that TID reuse never merges two spans; nothing is ever
 * discarded: spans without an observed end are kept as unmatched with a
 * reason, or open.
 */
#ifndef PTW_SPANS_H
#define PTW_SPANS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptw_events.h"

enum ptw_origin { PTW_ORIGIN_MAIN, PTW_ORIGIN_CREATED, PTW_ORIGIN_PREEXISTING, PTW_ORIGIN_CLONE };

enum ptw_status {
	PTW_STATUS_OPEN,
	PTW_STATUS_COMPLETED,
	PTW_STATUS_EXITED,
	PTW_STATUS_CANCELLED,
	PTW_STATUS_UNMATCHED,
};

enum ptw_method {
	PTW_METHOD_NONE,
	PTW_METHOD_RETURN,
	PTW_METHOD_PTHREAD_EXIT,
	PTW_METHOD_CANCEL,
	PTW_METHOD_PROCESS_EXIT,
	PTW_METHOD_EXEC,
	PTW_METHOD_KILLED,
	PTW_METHOD_DETACH,
	PTW_METHOD_UNKNOWN,
};

/* An optional timestamp or value. */
struct ptw_opt {
	bool set;
	uint64_t v;
};

struct ptw_span {
	uint32_t id; /* 1, 2, ... in order of creation, unique across processes */
	pid_t pid;   /* its process (0: the events did not say) */
	uint32_t process; /* which process of the session (ptw_process.id; 0 without -f) */
	pid_t tid;
	uint64_t pthread; /* 0 = none / unknown */
	char *name;
	enum ptw_origin origin;
	const struct ptw_location *start_routine;
	struct ptw_opt arg;
	pid_t creator_tid;     /* 0 = unknown */
	uint32_t creator_span; /* 0 = unknown */
	const struct ptw_location *create_site;
	unsigned depth;
	int detached; /* -1 unknown, 0 joinable, 1 detached */
	struct ptw_opt create_ns, start_ns, end_ns;
	enum ptw_status status;
	enum ptw_method method;
	const char *reason; /* static string, NULL if none */
	struct ptw_opt value;
	int signal;	    /* killed: the signal */
	pid_t cancel_by;    /* cancel: who called pthread_cancel (0 unknown) */
	/* join */
	bool joined;
	pid_t joiner_tid;
	uint64_t join_call_ns;
	struct ptw_opt join_return_ns;
	bool uncertain;
	/* Seen open past the open timeout (PTW_EV_SPAN_OPEN): when, and how
	 * long it had been open then. It keeps its final status. */
	struct ptw_opt open_after_ns;
	uint64_t open_for_ns;
	char *open_state, *open_wchan;	     /* where its thread was then */
	const struct ptw_location *open_at; /* its PC's symbol, NULL unknown */

	/* What the engine learnt on the way to the end. */
	bool ended;	      /* status is final */
	bool returned;
	uint64_t return_value;
	bool exit_called;
	uint64_t exit_value;
	bool cancel_requested;
	int fatal_sig;	      /* last default-fatal signal delivered to it */
	bool active;	      /* counted in the active series */

	/* snapshot */
	char *state, *wchan;
	const struct ptw_location **stack;
	size_t nstack;
	enum ptw_wait_kind wait_kind;
	uint64_t wait_object;
	pid_t wait_owner;
};

/* A cycle in the wait-for graph: each span waits for the next (and the last
 * for the first). */
struct ptw_deadlock {
	const struct ptw_span **spans;
	size_t n;
};

struct ptw_distribution {
	uint64_t count;
	uint64_t min, p50, p90, p99, max;
	double mean;
};

struct ptw_metrics {
	uint64_t threads_seen, threads_created, max_active, max_depth;
	struct ptw_distribution spawn_latency, lifetime, join_wait;
	uint64_t unjoined, open_spans, unmatched_spans;
	uint64_t open_timeouts; /* spans seen open past the open timeout */
	const uint64_t (*active_series)[2]; /* [ns, active], owned by the engine */
	size_t active_series_len;
};

struct ptw_spans;
struct ptw_timeouts;

struct ptw_spans *ptw_spans_new(void);
void ptw_spans_free(struct ptw_spans *s);

/*
 * Open timeouts (ptw_timeouts.h, borrowed: the caller frees it after the
 * engine): every thread span is watched from its first event until it ends
 * or its thread leaves. The session pops the spans that crossed the limit
 * and feeds PTW_EV_SPAN_OPEN for each; the engine marks them (open_after_ns).
 * Without timeouts (NULL, the default) SPAN_OPEN events are still consumed.
 */
void ptw_spans_set_timeouts(struct ptw_spans *s, struct ptw_timeouts *to);

/* Consumes one event; returns the span it concerned most (for the event log),
 * or NULL. */
const struct ptw_span *ptw_spans_consume(struct ptw_spans *s, const struct ptw_event *ev);

/* The document is about to be written: nothing more will come. Spans with
 * no end stay open (those of a process ptwatch let go of, PTW_EV_DETACHED,
 * stay open even if PTW_EV_TRACER_DIED follows). */
void ptw_spans_finish(struct ptw_spans *s);

size_t ptw_spans_count(const struct ptw_spans *s);
const struct ptw_span *ptw_spans_get(const struct ptw_spans *s, size_t i);
/* The live span of tid, or NULL. */
const struct ptw_span *ptw_spans_by_tid(const struct ptw_spans *s, pid_t tid);

void ptw_spans_metrics(struct ptw_spans *s, struct ptw_metrics *ret);
/* The same for the spans of one process only (-f: ptw_process.id): its own
 * max_active and max_depth, no active series (NULL). */
void ptw_spans_metrics_of(struct ptw_spans *s, uint32_t process, struct ptw_metrics *m);

/* --trace: the frame spans (ptw_frames.h), owned by s. */
struct ptw_frames;
struct ptw_frame;
const struct ptw_frames *ptw_spans_frames(const struct ptw_spans *s);
/* The frame the last consumed event concerned, or NULL. */
const struct ptw_frame *ptw_spans_last_frame(const struct ptw_spans *s);

/*
 * Deadlocks among the live spans: cycles of "waits for a mutex / rwlock
 * held by, or joins, that thread". Returns how many; *ret is an array the
 * caller frees with ptw_deadlocks_free.
 */
size_t ptw_spans_deadlocks(const struct ptw_spans *s, struct ptw_deadlock **ret);
void ptw_deadlocks_free(struct ptw_deadlock *d, size_t n);

const char *ptw_status_name(enum ptw_status st);
const char *ptw_method_name(enum ptw_method m);
const char *ptw_origin_name(enum ptw_origin o);

/* Nearest-rank distribution of n values (sorted in place). */
void ptw_distribution(uint64_t *values, size_t n, struct ptw_distribution *ret);

#endif
