/* SPDX-License-Identifier: MIT */
/*
 * The live table (--live): a full-screen view of the thread spans while
 * ptwatch traces, drawn with ncurses from the span engine's state.
 *
 * Two halves:
 *  - the row model (src/output/live_model.c): pure. It is told which spans
 *    changed (ptw_live_model_note, from the session's sink) and builds, for
 *    a given time, the rows of the thread view (live spans, and ended ones
 *    for PTW_LIVE_FADE_NS, dim) or of the routine view (one row per start
 *    routine: a thread pool), filtered by text and sorted by a column. It
 *    copies what it shows at each note and keeps the engine's span only
 *    while it lives (the engine may let go of an ended one); it forgets a
 *    span once it has faded, keeping only its routine's counts, so that a
 *    frame costs O(live + recently ended), not O(spans ever).
 *  - the screen (src/output/live.c): ncurses on a terminal fd, keys from an
 *    input fd, never blocking: the session calls ptw_live_tick() from the
 *    tracer loop's timer (ptw_backend_opts next_timer/on_timer) and when the
 *    input fd (ptw_live_wake_fd) is readable.
 */
#ifndef PTW_LIVE_H
#define PTW_LIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptw_spans.h"

/* An ended span stays on screen (dim) this long. */
#define PTW_LIVE_FADE_NS (3ull * 1000000000u)
/* At most one frame in this time for what the engine learnt (5 a second),
 * and in this one for what the user did (a key, a resize). */
#define PTW_LIVE_FRAME_NS (200ull * 1000000u)
#define PTW_LIVE_KEY_FRAME_NS (50ull * 1000000u)
/* The creation rate is over this window. */
#define PTW_LIVE_RATE_NS (5ull * 1000000000u)

/* The views, in the order the tab key goes through them (the function
 * view only with --trace). */
enum ptw_live_view { PTW_LIVE_THREADS, PTW_LIVE_ROUTINES, PTW_LIVE_FUNCTIONS };

/* The sort columns, in the order the 's' key cycles through them. */
enum ptw_live_sort {
	PTW_LIVE_SORT_TID,
	PTW_LIVE_SORT_NAME,
	PTW_LIVE_SORT_ROUTINE,
	PTW_LIVE_SORT_STATE,
	PTW_LIVE_SORT_AGE,
	PTW_LIVE_SORT_SPAWN,
	PTW_LIVE_SORT_CPU, /* (not in the function view) */
	PTW_LIVE_SORT_COUNT,
};
/* What sort s orders by in view v: "tid", "name", "routine", "state",
 * "age", "spawn", "cpu"; in the routine view "total", "live", "routine",
 * "ended", "lifetime" (mean), "spawn" (mean), "cpu" (its live threads'); in
 * the function view "calls", "in flight", "function", "p50", "p99",
 * "slowest". */
const char *ptw_live_sort_name(enum ptw_live_view v, enum ptw_live_sort s);

/* One row of the thread view. Strings are the model's until the next build. */
struct ptw_live_row {
	uint32_t span;
	pid_t pid;	     /* its process (-f: several), 0 unknown */
	pid_t tid;
	const char *name;    /* "" unknown */
	const char *routine; /* start routine, as the text output names it */
	pid_t creator;	     /* 0 unknown */
	const char *state;   /* "starting", "running", "joining 1234", "returned",
			      * "cancelled", ...; a late span: where it was
			      * ("S futex") */
	uint64_t age_ns;     /* since start (or creation); ended: its lifetime */
	bool age_known;	     /* else age_ns is since ptwatch saw it (attach) */
	bool has_spawn;
	uint64_t spawn_ns;   /* creation to start routine */
	/* CPU%: a live thread's over the last PTW_LIVE_CPU_NS or so (100: one
	 * CPU's worth), an ended one's over its lifetime */
	bool has_cpu;
	double cpu_pct;
	bool ended;	     /* shown dim until it fades */
	bool late;	     /* open past --open-timeout: highlighted */
	const char *call;    /* --trace: its innermost open traced call, NULL none */
};

/* One row of the routine view: the threads of one start routine. */
struct ptw_live_group {
	const char *routine;
	uint64_t live, ended, total; /* total = live + ended (since tracing began) */
	uint64_t late;		     /* live ones open past --open-timeout */
	uint64_t lifetime_mean_ns, lifetime_max_ns; /* of the ended ones (0: none) */
	uint64_t spawn_mean_ns;			    /* of those with one (0: none) */
	double cpu_pct;				    /* its live threads' CPU% together */
	bool has_cpu; /* some live thread's CPU% is known (else cpu_pct means nothing) */
};

/* One row of the function view (--trace): the calls of one traced function. */
struct ptw_live_function {
	const char *function; /* as the text output names it */
	uint64_t calls;	      /* seen to begin (or under way at the attach) */
	uint64_t in_flight;   /* open now */
	uint64_t returned;
	bool has_times;	      /* some returned call has a duration (entry seen): */
	uint64_t p50_ns, p99_ns, slowest_ns;
	pid_t slowest_tid;
};

struct ptw_live_counts {
	uint64_t active, created, ended;
	double rate; /* creations per second over PTW_LIVE_RATE_NS (or since the start) */
};

struct ptw_live_model;

struct ptw_live_model *ptw_live_model_new(void);
void ptw_live_model_free(struct ptw_live_model *m);
/* A copy of what m shows now, for a paused screen: it can be built again
 * (another view, sort or filter) but is noted nothing, and holds none of
 * the engine's spans. */
struct ptw_live_model *ptw_live_model_freeze(const struct ptw_live_model *m);

/* Span sp (the engine's; it must stay valid until it has been noted as
 * ended) changed at time now, or is new. Returns true if the model did not
 * know it. */
bool ptw_live_model_note(struct ptw_live_model *m, const struct ptw_span *sp, uint64_t now);
/* --locks: w's thread waits ("mutex queue_lock", "DEADLOCK queue_lock") or
 * no more. False if the table has no row for its span. */
struct ptw_wait;
bool ptw_live_model_wait(struct ptw_live_model *m, const struct ptw_wait *w, bool waiting,
			 bool deadlock);
/* --trace: frame fr began (open: a call entered, or found under way at
 * the attach) or got its final status (completed, unmatched). Each frame
 * is told once open and once closed, in that order. */
struct ptw_frame;
void ptw_live_model_frame(struct ptw_live_model *m, const struct ptw_frame *fr);
/* Every span it shows may have changed (the process exited or exec'd). */
void ptw_live_model_refresh(struct ptw_live_model *m, uint64_t now);
/* Something changed since the last build (a note, or a span to fade). */
bool ptw_live_model_dirty(const struct ptw_live_model *m);

struct ptw_live_query {
	enum ptw_live_view view;
	enum ptw_live_sort sort;
	bool reverse;
	const char *filter; /* substring of tid, name, routine or state; NULL/"": all */
	/* A live thread's name now (pthread_setname_np is not an event the
	 * engine sees while the thread runs): fills buf, true if known. Asked
	 * at most every PTW_LIVE_NAME_NS per thread; NULL: the engine's. */
	bool (*name_of)(void *ctx, pid_t tid, char *buf, size_t size);
	void *name_ctx;
	/* A live thread's time on a CPU so far (its schedstat): true if known.
	 * Asked at most every PTW_LIVE_CPU_NS per thread; NULL: no CPU%. */
	bool (*cpu_of)(void *ctx, pid_t pid, pid_t tid, uint64_t *on_cpu_ns);
	void *cpu_ctx;
};
#define PTW_LIVE_NAME_NS (2ull * 1000000000u)
#define PTW_LIVE_CPU_NS (1000000000ull)

/*
 * The rows at time now (thread view: the live ones first, then the ended
 * ones, each sorted by q->sort, ties by span id): *ret_rows (thread view) or *ret_groups (routine
 * view), owned by the model until the next build; returns their count.
 * Forgets the spans that ended more than PTW_LIVE_FADE_NS ago.
 */
size_t ptw_live_model_build(struct ptw_live_model *m, uint64_t now, const struct ptw_live_query *q,
			    const struct ptw_live_row **ret_rows,
			    const struct ptw_live_group **ret_groups);
/* The function view's rows (q->view PTW_LIVE_FUNCTIONS: filtered by
 * function, sorted by q->sort, ties by name), owned by the model until the
 * next build; returns their count. */
size_t ptw_live_model_functions(struct ptw_live_model *m, const struct ptw_live_query *q,
				const struct ptw_live_function **ret);
/* The counts at time now (after a build). */
void ptw_live_model_counts(const struct ptw_live_model *m, uint64_t now,
			   struct ptw_live_counts *ret);
/* When a shown row next changes by itself (an ended span fades), 0: never. */
uint64_t ptw_live_model_next_fade(const struct ptw_live_model *m);

/* "12.3 s", "450 ms", "1h02m": short, for a column. */
void ptw_live_duration(char *buf, size_t size, uint64_t ns);

/* ---- the screen ---- */

/* What the user asked for with a key. */
enum ptw_live_action { PTW_LIVE_NONE, PTW_LIVE_QUIT };

/* `ptwatch report --live`: a recording browsed in the table. Its moments
 * (sorted, distinct: each span's creation, start and end), and at(ctx, m,
 * t): m (new, empty) given every span as it was at time t (what it points
 * to stays valid until the next call of at, or the end). */
struct ptw_live_replay {
	const uint64_t *times;
	size_t ntimes;
	uint64_t start_ns; /* the recording's start, for the times shown */
	void (*at)(void *ctx, struct ptw_live_model *m, uint64_t t);
	void *ctx;
};

struct ptw_live_opts {
	int tty_fd;	    /* the terminal to draw on (dup'ed; the caller keeps it) */
	int input_fd;	    /* where keys come from (the terminal, or the front's pipe);
			     * the live table owns it from here */
	const char *title;  /* "ptwatch -p 1234 (server)" */
	uint64_t open_timeout_ns;
	bool trace; /* --trace: the function view, and the CALL column */
	/* tty_fd is standard error: what ptwatch writes there meanwhile
	 * (warnings) is held and written after the table (ptw_live_end) */
	bool hold_stderr;
	/* A recording (report --live), or NULL: a live session. Keys then move
	 * through its moments: n next, N previous, b the beginning, e the end,
	 * t a time typed in seconds (and Enter). */
	const struct ptw_live_replay *replay;
};

struct ptw_live;

/* Takes the terminal (alternate screen, no echo, keys one by one). Returns
 * 0, or -errno (no such terminal type, say); *ret is untouched then. */
int ptw_live_start(const struct ptw_live_opts *o, struct ptw_live **ret);
/* Gives the terminal back as it was (NULL accepted), then what standard
 * error held (hold_stderr); frees. */
void ptw_live_end(struct ptw_live *l);
/* The terminal back if the table still has it, for exit paths (atexit). */
void ptw_live_emergency_end(void);

struct ptw_live_model *ptw_live_get_model(struct ptw_live *l);

/* A command launched under the table: its standard input, output and error
 * that are tty_fd's terminal become /dev/null (the originals are kept in
 * keep[], -1 for the others). Call before the launch, then
 * ptw_live_restore_fds(keep) once it runs. */
void ptw_live_command_fds(int tty_fd, int keep[3]);
void ptw_live_restore_fds(int keep[3]);
/* An fd that is readable when the live table has something to do now
 * (a key, a resize): the tracer loop's wait watches it. */
int ptw_live_wake_fd(const struct ptw_live *l);
/* When the table wants ptw_live_tick() next (CLOCK_MONOTONIC ns). */
uint64_t ptw_live_next(const struct ptw_live *l);
/* Reads the keys there are (never blocks) and draws if due; returns what
 * the user asked for. */
enum ptw_live_action ptw_live_tick(struct ptw_live *l, uint64_t now);

/* The live table as a session's output (PTW_OUTPUT_LIVE, ptw_output.h):
 * it takes the terminal at begin, with these options (copied). */
struct ptw_output;
struct ptw_output_host;
struct ptw_output *ptw_output_live_new(const struct ptw_live_opts *lo, struct ptw_output_host *h);

#endif
