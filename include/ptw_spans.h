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

#include "ptw_dist.h"
#include "ptw_events.h"

enum ptw_origin { PTW_ORIGIN_MAIN, PTW_ORIGIN_CREATED, PTW_ORIGIN_PREEXISTING, PTW_ORIGIN_CLONE };

enum ptw_status {
	PTW_STATUS_OPEN,
	PTW_STATUS_COMPLETED,
	PTW_STATUS_EXITED,
	PTW_STATUS_CANCELLED,
	PTW_STATUS_UNMATCHED,
	/* The LWP left through its own exit syscall and nothing else of its
	 * end could be seen (no pthread: a raw clone, or libthread_db unusable,
	 * strategy "lwp"): whether its code returned or called pthread_exit
	 * is unknown. */
	PTW_STATUS_LWP_EXITED,
};
/* How many statuses there are (arrays by status). */
#define PTW_STATUS_N (PTW_STATUS_LWP_EXITED + 1)

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
	struct ptw_opt exit_code; /* lwp_exited: what its exit syscall was given */
	pid_t cancel_by;    /* cancel: who called pthread_cancel (0 unknown) */
	/* join */
	bool joined;
	pid_t joiner_tid;
	uint64_t join_call_ns;
	struct ptw_opt join_return_ns;
	bool uncertain;
	/* CPU (PTW_EV_THREAD_CPU): at its end, or the session's if it lives on */
	struct ptw_cpu cpu;
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

	/* Streaming (ptw_spans_set_streaming): handed out already (kept only
	 * for a short session's summary table); its slot in the held array. */
	bool retired;
	bool final; /* nothing can change it (its process is gone) */
	size_t slot;

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

struct ptw_metrics {
	uint64_t threads_seen, threads_created, max_active, max_depth;
	struct ptw_distribution spawn_latency, lifetime, join_wait;
	uint64_t unjoined, open_spans, unmatched_spans;
	uint64_t open_timeouts; /* spans seen open past the open timeout */
	const uint64_t (*active_series)[2]; /* [ns, active], owned by the engine */
	size_t active_series_len;
};

/* Spans grouped by start routine (the summary of a long session). */
struct ptw_group {
	char *routine; /* symbol, module+0xoffset, "main" or "-" */
	uint64_t count, by_status[PTW_STATUS_N];
	struct ptw_dacc spawn, life;
	uint64_t cpu_ns, cpu_spans; /* time on a CPU, of the spans whose is known */
	uint32_t first_id; /* groups come in order of their first span */
};
/* The name a span is grouped by (malloc'ed). */
char *ptw_span_group_name(const struct ptw_span *sp);

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

/*
 * Streaming (--json-lines, `report` of a stream): a span that nothing can
 * change any more (its thread ended and left, and it was joined or is
 * detached or can no longer be joined, or the process is gone) is handed
 * to retire(ctx, span) and then freed, after its figures went into the
 * metrics and the groups. Memory then grows with the live threads (and
 * the joinable ones nobody joined yet: the process holds those too), not
 * with how many ever existed. The first PTW_SPANS_KEEP spans are kept (not
 * freed) while no more exist, for a short session's summary table; the
 * active series is not kept. Spans are retired when the caller says so
 * (ptw_spans_collect; the next consume does it first otherwise), so that
 * the span a consume returns stays valid until then. Call before the first
 * event. retire may be NULL (the restorer: only the tail is written).
 */
#define PTW_SPANS_KEEP 40
typedef void (*ptw_span_retire_fn)(void *ctx, const struct ptw_span *sp);
void ptw_spans_set_streaming(struct ptw_spans *s, ptw_span_retire_fn retire, void *ctx);
void ptw_spans_collect(struct ptw_spans *s);
/* The end (after ptw_spans_finish): every span not handed out yet is, in
 * order of id. */
void ptw_spans_retire_all(struct ptw_spans *s);

/*
 * `ptwatch report`: a span read back from a document, given to the engine
 * (which takes it and its strings: name, open_state, open_wchan; its
 * locations stay the caller's). It is final: nothing consumes events about
 * it. In streaming mode it is retired at the next collect.
 */
void ptw_spans_add_final(struct ptw_spans *s, struct ptw_span *sp);
/* The counters a document states that spans alone do not tell. */
void ptw_spans_set_counters(struct ptw_spans *s, uint64_t threads_created, uint64_t max_active,
			    uint64_t max_depth);

/* The spans held (all of them unless streaming), in order of id. */
size_t ptw_spans_count(const struct ptw_spans *s);
const struct ptw_span *ptw_spans_get(const struct ptw_spans *s, size_t i);
/* How many spans are active (their thread live) now. */
uint64_t ptw_spans_active(const struct ptw_spans *s);
/* How many spans there were, held or not. */
uint64_t ptw_spans_total(const struct ptw_spans *s);
/* A held span by id, or NULL. */
const struct ptw_span *ptw_spans_by_id(const struct ptw_spans *s, uint32_t id);
/* Every span (held and retired) grouped by start routine, in order of
 * first appearance; free with ptw_groups_free. */
size_t ptw_spans_groups(const struct ptw_spans *s, struct ptw_group **ret);
void ptw_groups_free(struct ptw_group *g, size_t n);
/* The live span of tid, or NULL. */
const struct ptw_span *ptw_spans_by_tid(const struct ptw_spans *s, pid_t tid);

void ptw_spans_metrics(struct ptw_spans *s, struct ptw_metrics *ret);
/* The same for the spans of one process only (-f: ptw_process.id): its own
 * max_active and max_depth, no active series (NULL). */
void ptw_spans_metrics_of(struct ptw_spans *s, uint32_t process, struct ptw_metrics *m);
/* The same for each of n processes at once (out[i]: processes[i]'s), in
 * one pass over the spans. */
void ptw_spans_metrics_each(struct ptw_spans *s, const uint32_t *processes, size_t n,
			    struct ptw_metrics *out);

/* --trace: the frame spans (ptw_frames.h), owned by s. */
struct ptw_frames;
struct ptw_frame;
const struct ptw_frames *ptw_spans_frames(const struct ptw_spans *s);
/* The frame engine itself (to set its closed callback). */
struct ptw_frames *ptw_spans_frames_mut(struct ptw_spans *s);
/* The frame the last consumed event concerned, or NULL. */
const struct ptw_frame *ptw_spans_last_frame(const struct ptw_spans *s);

/* --locks: the wait spans and live deadlocks (ptw_locks.h), owned by s. */
struct ptw_locks;
struct ptw_wait;
const struct ptw_locks *ptw_spans_locks(const struct ptw_spans *s);
/* The wait engine itself (`ptwatch report` adds the waits it reads). */
struct ptw_locks *ptw_spans_locks_mut(struct ptw_spans *s);
/* The wait the last consumed event concerned, or NULL. */
const struct ptw_wait *ptw_spans_last_wait(const struct ptw_spans *s);

/*
 * The span's lifetime, for every output: from the start routine's entry to
 * the end, or from the creation when the entry could not be seen (a raw
 * clone, strategy "lwp"). False (and *ret untouched) while it is open or
 * when neither is known.
 */
bool ptw_span_lifetime(const struct ptw_span *sp, uint64_t *ret);

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

/* ---- which spans a report shows (--tid, --routine) ----
 *
 * The engine's selection, the same for every output and for a report
 * read back: the event log, the live table, the summary, the reader. */
struct ptw_span_filter {
	pid_t *tids; /* only these threads (0 of them: all) */
	size_t ntids;
	const char *routine; /* shell glob on the span's start routine, or NULL */
	/* --object: shell glob on a waited-for object's name (its symbol) or
	 * address ("0x7f..."), or NULL: --locks' waits on the others are left
	 * out, and (a report, the summary) the threads that neither waited on
	 * nor held a matching one */
	const char *object;
};
/* --tid LIST (comma-separated TIDs): 0, or -EINVAL (a bad number, none). */
int ptw_span_filter_tids(struct ptw_span_filter *f, const char *list);
/* Is thread tid one of --tid's (or is there no --tid)? */
bool ptw_span_filter_tid(const struct ptw_span_filter *f, pid_t tid);
/* Does the span pass --tid and --routine (f NULL: every span does)? */
bool ptw_span_filter_passes(const struct ptw_span_filter *f, const struct ptw_span *sp);
/* Does f select anything (a --tid or a --routine)? */
static inline bool ptw_span_filter_on(const struct ptw_span_filter *f)
{
	return f && (f->ntids || f->routine);
}
/* Does the object (its address, and its symbol if it has one) pass
 * --object (f NULL, or no --object: every one does)? */
struct ptw_location;
bool ptw_span_filter_object(const struct ptw_span_filter *f, uint64_t object,
			    const struct ptw_location *loc);

#endif
