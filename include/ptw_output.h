/* SPDX-License-Identifier: MIT */
/*
 * Output: the JSON spans document (spec/spans.schema.json), the readable
 * event log and the summary table. Everything is rendered into a buffer;
 * the caller writes it.
 */
#ifndef PTW_OUTPUT_H
#define PTW_OUTPUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptw_events.h"
#include "ptw_spans.h"
#include "ptw_util.h"
#include "ptw_warnings.h"

struct ptw_location;

/* ---- a streaming JSON writer (strings always come out valid UTF-8) ---- */

/* Where a long document goes as it is made (ptw_report_json_fd): out is
 * written there and emptied at an element's end once it holds SPILL_BYTES,
 * so that a document of millions of frames is not held whole in memory. */
struct ptw_json_sink {
	int fd;
	int err; /* the first write's failure (-errno), then nothing more */
};

struct ptw_json {
	struct ptw_buf *out;
	struct ptw_json_sink *sink; /* NULL: out holds it all */
	int depth;
	bool need_comma[64];
	bool pretty;
	bool processes; /* -f: spans say which entry of "processes" is theirs */
	/* If set: the text of each stack frame written, by location and
	 * depth (10,000 threads' stacks are the same few frames); emptied by
	 * ptw_json_frames_free. */
	struct ptw_map *frames;
};
void ptw_json_frames_free(struct ptw_map *frames);
/* The rest of out to the sink (if any): 0 or the first write's -errno. */
int ptw_json_sink_end(struct ptw_json *j);
void ptw_json_begin_object(struct ptw_json *j, const char *key);
void ptw_json_end_object(struct ptw_json *j);
void ptw_json_begin_array(struct ptw_json *j, const char *key);
void ptw_json_end_array(struct ptw_json *j);
void ptw_json_string(struct ptw_json *j, const char *key, const char *value); /* NULL -> null */
void ptw_json_int(struct ptw_json *j, const char *key, int64_t value);
void ptw_json_uint(struct ptw_json *j, const char *key, uint64_t value);
void ptw_json_double(struct ptw_json *j, const char *key, double value);
void ptw_json_bool(struct ptw_json *j, const char *key, bool value);
void ptw_json_null(struct ptw_json *j, const char *key);
void ptw_json_hex(struct ptw_json *j, const char *key, uint64_t value); /* "0x..." */
/* Appends s as a JSON string literal (quotes included). */
void ptw_json_escape(struct ptw_buf *out, const char *s);

/* ---- the document ---- */

#define PTW_SPANS_SCHEMA "ptwatch.spans/11"
#define PTW_LINES_SCHEMA "ptwatch.lines/9"
/* Older versions still read: the stream before the metrics line had
 * processes (-f), before session.backend (2), before the warnings'
 * count and the code sigtrap_death (3), before the code
 * foreign_breakpoint (4), before a thread span's cpu (5), before a wait
 * span's start (6), before --snapshot's wait kinds were --locks' (7),
 * before a -f child's frames under way at its fork (8); the document
 * before those (4, 5, 6, 7, 8, 9, 10). */
#define PTW_LINES_SCHEMA_1 "ptwatch.lines/1"
#define PTW_LINES_SCHEMA_2 "ptwatch.lines/2"
#define PTW_LINES_SCHEMA_3 "ptwatch.lines/3"
#define PTW_SPANS_SCHEMA_4 "ptwatch.spans/4"
#define PTW_SPANS_SCHEMA_5 "ptwatch.spans/5"
#define PTW_SPANS_SCHEMA_6 "ptwatch.spans/6"
#define PTW_LINES_SCHEMA_4 "ptwatch.lines/4"
#define PTW_SPANS_SCHEMA_7 "ptwatch.spans/7"
#define PTW_LINES_SCHEMA_5 "ptwatch.lines/5"
#define PTW_SPANS_SCHEMA_8 "ptwatch.spans/8"
#define PTW_LINES_SCHEMA_6 "ptwatch.lines/6"
#define PTW_SPANS_SCHEMA_9 "ptwatch.spans/9"
#define PTW_LINES_SCHEMA_7 "ptwatch.lines/7"
#define PTW_SPANS_SCHEMA_10 "ptwatch.spans/10"
#define PTW_LINES_SCHEMA_8  "ptwatch.lines/8"

/* A session signal ptwatch got, and what it did about it. */
struct ptw_interrupt {
	int sig;
	uint64_t ns;
	bool reached_target; /* the command got it too (launch mode; false with -p) */
	enum ptw_interrupt_action action;
	enum ptw_interrupt_why why;
};

/* What became of the target, checked when the report is made. */
enum ptw_fate {
	PTW_FATE_ENDED,	   /* exit_kind says how (after_detach: once let go) */
	PTW_FATE_LIVES_ON, /* alive and untraced */
	PTW_FATE_STOPPED,  /* alive, untraced, stopped (SIGSTOP) */
	PTW_FATE_TRACED,   /* alive, some thread still traced by traced_by */
	PTW_FATE_GONE,	   /* ended after ptwatch let go; how is not ours to know */
	PTW_FATE_ZOMBIE,   /* ended, waiting for its parent to reap it */
};

struct ptw_report {
	const char *tool_version;
	int64_t realtime_offset_ns;
	/* target */
	pid_t pid;
	const char *exe;
	char *const *argv;
	const char *mode; /* "launch" | "attach" */
	const char *glibc; /* NULL when libthread_db could not be used */
	enum { PTW_EXIT_NONE, PTW_EXIT_CODE, PTW_EXIT_SIGNAL } exit_kind;
	int exit_code, exit_signal;
	bool core_dumped;
	enum ptw_fate fate;
	bool after_detach; /* FATE_ENDED: it ended once ptwatch had let go */
	pid_t traced_by;   /* FATE_TRACED */
	/* session */
	uint64_t start_ns, end_ns, frozen_ns;
	const char *end_reason;
	const struct ptw_interrupt *interrupts;
	size_t ninterrupts;
	const char *strategy; /* "debuginfo" | "breakpoints" | "lwp" */
	const char *backend;	 /* "ptrace" | "kernel" (NULL: unknown, an older document) */
	const char *backend_why; /* why that one (--backend, or auto's reason) */
	size_t probes;		 /* the kernel path's uprobes (0 with ptrace) */
	size_t probes_stepped;	 /* --trace, of its functions: those the kernel single-steps */
	bool snapshot;	      /* spans carry state, stack, waits_for */
	uint64_t tracer_user_ns, tracer_sys_ns; /* ptwatch's own CPU time */
	uint64_t stops_total;
	const char *const *stop_names;
	const uint64_t *stop_counts;
	size_t nstop_kinds;
	size_t breakpoints;
	uint64_t open_timeout_ns; /* --open-timeout, 0: disabled */
	bool locks;		  /* --locks: waits and live deadlocks in any case */
	/* --object (the text summary): its lock tables and thread rows only
	 * of the matching objects and their waiters and owners; NULL: all */
	const struct ptw_span_filter *filter;
	/* -f: every process, the target first (NULL without -f) */
	const struct ptw_process *processes;
	size_t nprocesses;
	/* content */
	struct ptw_spans *spans;
	const struct ptw_warning *warnings;
	size_t nwarnings;
};

/* The document's names: "ended", "ended_after_detach", "lives_on", "stopped",
 * "traced"; "traced_on", "detached"; "attached", "terminal",
 * "process_group", "again", "ptwatch_alone". */
const char *ptw_fate_name(enum ptw_fate fate, bool after_detach);
const char *ptw_interrupt_action_name(enum ptw_interrupt_action a);
const char *ptw_interrupt_why_name(enum ptw_interrupt_why w);

/* Renders the whole document into out. */
void ptw_report_json(const struct ptw_report *r, struct ptw_buf *out);
/* The same, written to fd as it is made (at most about 1 MiB held): 0 or
 * the first write's -errno. */
int ptw_report_json_fd(const struct ptw_report *r, int fd);
/* Its parts, for --json-lines: members of the object being written. */
void ptw_json_head(struct ptw_json *j, const struct ptw_report *r, const char *schema);
void ptw_json_target(struct ptw_json *j, const struct ptw_report *r);
void ptw_json_session(struct ptw_json *j, const struct ptw_report *r);
void ptw_json_metrics(struct ptw_json *j, const struct ptw_report *r, bool active_series);
void ptw_json_warnings(struct ptw_json *j, const struct ptw_report *r);
/* -f: "processes", every process of the session (the stream's last line
 * has it too, for `ptwatch report`). */
void ptw_json_processes(struct ptw_json *j, const struct ptw_report *r);
struct ptw_frame;
void ptw_json_span(struct ptw_json *j, const struct ptw_span *sp);
void ptw_json_frame(struct ptw_json *j, const struct ptw_frame *fr);
struct ptw_wait;
struct ptw_live_deadlock;
void ptw_json_wait(struct ptw_json *j, const struct ptw_wait *w);
/* A deadlock found while tracing (--locks), in the form of "deadlocks". */
void ptw_json_live_deadlock(struct ptw_json *j, const struct ptw_live_deadlock *d);
/* known: fallback is the name, known another way ("main"), not a placeholder. */
void ptw_json_location(struct ptw_json *j, const char *k, const struct ptw_location *loc,
		       const char *fallback, bool known);

/*
 * --json-lines (spec/lines.schema.json): one compact JSON object per line,
 * written to fd with one write() as it happens. A failed write (a closed
 * pipe: SIGPIPE, blocked, then ends the session) stops the stream.
 */
struct ptw_lines {
	int fd;
	bool broken;	       /* a write failed: nothing more is written */
	int err;	       /* the errno of that write (EPIPE: the reader closed) */
	size_t warnings_done;  /* warnings written as lines so far */
	uint64_t lines;	       /* lines written */
	struct ptw_buf *hold;  /* non-NULL: lines wait here (no header yet) */
};
/* The first line: schema, tool, clock, target, session start. */
void ptw_lines_header(struct ptw_lines *l, const struct ptw_report *r);
/* type "span_open" (as it begins; active: how many are live now) or
 * "span" (final: nothing will change it). */
void ptw_lines_span(struct ptw_lines *l, const char *type, const struct ptw_span *sp,
		    uint64_t active);
void ptw_lines_frame(struct ptw_lines *l, const struct ptw_frame *fr);
/* A span seen open past the open timeout (PTW_EV_SPAN_OPEN). */
void ptw_lines_open(struct ptw_lines *l, const struct ptw_event *ev);
/* --locks: a wait span that ended, and a deadlock found while tracing. */
void ptw_lines_wait(struct ptw_lines *l, const struct ptw_wait *w);
void ptw_lines_deadlock(struct ptw_lines *l, const struct ptw_live_deadlock *d);
/* The report's warnings from warnings_done on. */
void ptw_lines_warnings(struct ptw_lines *l, const struct ptw_report *r);
/* The last line: target and session as they ended, metrics, every warning. */
void ptw_lines_end(struct ptw_lines *l, const struct ptw_report *r);

/* --format=chrome: the Chrome trace-event JSON (Perfetto, chrome://tracing)
 * of the report, into out. */
void ptw_report_chrome(const struct ptw_report *r, struct ptw_buf *out);
int ptw_report_chrome_fd(const struct ptw_report *r, int fd);

/* How event lines are written; each session's text output has its own. */
struct ptw_text_style {
	uint64_t start_ns; /* times are relative to it */
	bool show_pids;	   /* -f, once a second process is traced: each line
			    * names its event's process before the thread */
};
/* One readable line for an event the span engine consumed (may add nothing). */
void ptw_text_event(struct ptw_buf *out, const struct ptw_text_style *st,
		    const struct ptw_event *ev, const struct ptw_span *sp);
/* One readable line for a frame event (--trace): the call, or the return
 * with its duration. */
void ptw_text_frame_event(struct ptw_buf *out, const struct ptw_text_style *st,
			  const struct ptw_event *ev, const struct ptw_frame *fr);
/* One readable line for a wait event (--locks): its start (object, owner,
 * call site), its end with its duration; a deadlock with every member's
 * stack. */
struct ptw_wait;
/* The same through the log's filters (-e wait, waited; --tid of the waiter
 * or the owner; --routine of the waiter's span sp); a deadlock always. */
struct ptw_text_filter;
void ptw_text_wait_event_filtered(struct ptw_buf *out, const struct ptw_text_style *st,
				  const struct ptw_event *ev, const struct ptw_span *sp,
				  const struct ptw_wait *w, const struct ptw_text_filter *f);
void ptw_text_wait_event(struct ptw_buf *out, const struct ptw_text_style *st,
			 const struct ptw_event *ev, const struct ptw_wait *w);
/* The event log's filters (-e, --tid, --routine) and -v. */
struct ptw_text_filter {
	uint32_t events;	      /* a bit per log word (ptw_text_event_names), 0: all */
	struct ptw_span_filter spans; /* --tid, --routine: the engine's (ptw_spans.h) */
	bool verbose;		      /* -v: every event raw, and the stop counts */
};
/* The words the log prints in its third column, NULL-terminated. */
extern const char *const ptw_text_event_names[];
/* -e LIST: 0, or -EINVAL (an unknown name). */
int ptw_text_filter_events(struct ptw_text_filter *f, const char *list);
/* The log's line(s) for an event, as ptw_text_event / ptw_text_frame_event
 * write them, if f lets them through (f may be NULL); with -v a raw line
 * of the event follows. */
void ptw_text_event_filtered(struct ptw_buf *out, const struct ptw_text_style *st,
			     const struct ptw_event *ev, const struct ptw_span *sp,
			     const struct ptw_frame *fr, const struct ptw_text_filter *f);

/* --snapshot's text: deadlocks, then threads grouped by identical stack. */
void ptw_text_snapshot(struct ptw_buf *out, const struct ptw_report *r);
/* The summary table and metrics for the end of the text output. */
void ptw_text_summary(struct ptw_buf *out, const struct ptw_report *r);

/* ---- the outputs of a session (docs/design.md, "Outputs") ---- */

/*
 * A session writes to a few outputs at once, each an instance of one
 * format behind struct ptw_output_ops: the text (event lines on standard
 * error and the summary) always, the document, stream or trace if asked
 * for, and the live table when it has the terminal. The session (src/
 * session/session.c) hands every event to each of them, in this order:
 * the document's format first, then the text, then the live table.
 */
enum ptw_output_format {
	PTW_OUTPUT_TEXT,   /* event lines and the summary (or --snapshot's report) */
	PTW_OUTPUT_JSON,   /* the spans document (spec/spans.schema.json) */
	PTW_OUTPUT_LINES,  /* the --json-lines stream (spec/lines.schema.json) */
	PTW_OUTPUT_CHROME, /* the Chrome trace-event JSON */
	PTW_OUTPUT_LIVE,   /* the live table (ptw_live.h) */
};

/* What the outputs of one session share; the session's. */
struct ptw_output_host {
	struct ptw_spans *spans; /* the engine: last wait and frame, locks, totals */
	uint64_t start_ns;	 /* event lines' times are relative to it */
	const struct ptw_text_filter *filter; /* -e, --tid, --routine, -v; may be NULL */
	struct ptw_buf *log;	 /* standard error's lines, written before the tracer blocks */
	/* Writes the log now (and what the restorer should know first). */
	void (*flush)(void *ctx);
	/* A stream line is about to say more than the restorer may know: the
	 * record goes to it first (if the tracer died now, it writes the rest). */
	void (*before_line)(void *ctx);
	/* An output could not be written (what: its file, or "standard
	 * output", "standard error"; err: the errno). The session says it
	 * once at its end, and its exit status is then PTW_EXIT_LOST_OUTPUT
	 * (ptw_session.h); EPIPE is not a loss (the reader closed: SIGPIPE,
	 * a session signal, ends the session). */
	void (*lost)(void *ctx, const char *what, int err);
	void *ctx;
	bool lines_taken; /* the live table has the terminal: no event lines */
};

/* How an output is made. */
struct ptw_output_conf {
	enum ptw_output_format format;
	int fd;		/* the document's, stream's or trace's; -1: standard output */
	const char *path; /* fd's file as the user named it (messages), or NULL */
	bool quiet;	/* text: no event lines (deadlocks are still said) */
	bool snapshot;	/* text: --snapshot's report instead of the summary */
	bool stdout_taken; /* text: another output writes to standard output */
	/* The restorer's, when the tracer died: the stream goes on where the
	 * tracer stopped (from begin on), the document starts over. */
	bool resume;
};

struct ptw_output;

/*
 * One format's callbacks; any may be NULL. The report given to begin is
 * what is known once the target runs (launch or attach done); the one
 * given to end is the session's last. Events come before begin too (the
 * attach's), and go on after stop (the detach's).
 */
struct ptw_output_ops {
	enum ptw_output_format format;
	/* The target is known. < 0: the output cannot be had (said on
	 * standard error); the session drops it. */
	int (*begin)(struct ptw_output *o, const struct ptw_report *head);
	/* An event the engine consumed, sp its span (may be NULL): a thread's
	 * life, a process's, a frame's entry or return (ptw_spans_last_frame). */
	void (*event)(struct ptw_output *o, const struct ptw_event *ev, const struct ptw_span *sp);
	/* --locks: PTW_EV_WAIT_BEGIN, PTW_EV_WAIT_END, PTW_EV_DEADLOCK; w is the
	 * engine's last wait (may be NULL). */
	void (*wait)(struct ptw_output *o, const struct ptw_event *ev, const struct ptw_span *sp,
		     const struct ptw_wait *w);
	/* PTW_EV_SPAN_OPEN: a span open past --open-timeout. */
	void (*open)(struct ptw_output *o, const struct ptw_event *ev, const struct ptw_span *sp);
	/* Streaming: a span nothing will change any more, about to be freed.
	 * frame_closed: a frame span got its final status (always, streaming
	 * or not; streaming frees it after). */
	void (*span_retired)(struct ptw_output *o, const struct ptw_span *sp);
	void (*frame_closed)(struct ptw_output *o, const struct ptw_frame *fr);
	/* The tracer is about to block: what it learnt since (now: its report
	 * so far). Called only if o->wants_progress. */
	void (*progress)(struct ptw_output *o, const struct ptw_report *now);
	/* When tick is due (0: never), and the tick: true if the user asked
	 * to stop tracing. */
	uint64_t (*next_tick)(struct ptw_output *o);
	bool (*tick)(struct ptw_output *o, uint64_t now);
	/* Tracing is over (the live table gives the terminal back). */
	void (*stop)(struct ptw_output *o);
	/* The session's end: the report as it ended. */
	void (*end)(struct ptw_output *o, const struct ptw_report *r);
	void (*free)(struct ptw_output *o);
};

/* Every instance starts with this. */
struct ptw_output {
	const struct ptw_output_ops *ops;
	struct ptw_output_host *host;
	bool streams;	     /* it wants spans retired as they end (bounded memory) */
	bool wants_progress; /* call progress before the tracer blocks */
	int wake_fd;	     /* after begin: readable when tick is wanted now, or -1 */
};

/* The instances (ptw_output_live_new: src/output/ops_live.c, with the
 * live table's options in ptw_live.h). */
struct ptw_output *ptw_output_text_new(const struct ptw_output_conf *c, struct ptw_output_host *h);
struct ptw_output *ptw_output_doc_new(const struct ptw_output_conf *c, struct ptw_output_host *h);
struct ptw_output *ptw_output_lines_new(const struct ptw_output_conf *c, struct ptw_output_host *h);

/*
 * "worker (demo.c:12)"; where no symbol names the address, "module+0xOFFSET"
 * as eu-stack and perf print it ("0xADDR" outside any module). known_name:
 * the name when it is known otherwise (a stripped program's "main": then
 * "main (true+0x2310)"), or NULL; also what a NULL loc prints ("?" if NULL).
 */
void ptw_text_location(struct ptw_buf *out, const struct ptw_location *loc, const char *known_name);
/* "1.25 ms" */
void ptw_text_duration(struct ptw_buf *out, uint64_t ns);

#endif
