/* SPDX-License-Identifier: MIT */
/*
 * A tracing session (docs/design.md, "Session"): the span engine, the
 * timers of --open-timeout, the record for the restorer, and the outputs
 * (ptw_output.h) every event is handed to; then the end: the tracer lets
 * go, the report is made and each output writes its end (the stream's
 * last line, the document, the summary).
 *
 * The tracer's session is made by main.c and runs ptw_session_run. The
 * restorer (src/guardian/restorer.c) makes one too, with .resume: it
 * replays the record into it and, if the tracer died, ends it with
 * ptw_session_begin and ptw_session_end, the same code as the tracer's.
 */
#ifndef PTW_SESSION_H
#define PTW_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptw_events.h"
#include "ptw_output.h"

struct ptw_backend;
struct ptw_live_opts;
struct ptw_backend_opts;

/* ptwatch's exit status when an output could not be written (a full
 * disk, an I/O error): said on standard error with the command's own
 * status; man page, EXIT STATUS. */
#define PTW_EXIT_LOST_OUTPUT 3

struct ptw_session_opts {
	/* The document, stream or trace besides the text (PTW_OUTPUT_TEXT:
	 * none), to fd (-1: standard output; the session closes it), the
	 * file path names (for messages; NULL: standard output). */
	enum ptw_output_format format;
	int fd;
	const char *path;
	bool quiet;    /* no event lines (-q) */
	bool snapshot; /* --snapshot: no event lines, its report, no timers */
	bool locks;    /* --locks */
	bool follow_forks;
	bool attach; /* -p: an observer, whose exit status is its own */
	const struct ptw_text_filter *filter; /* may be NULL; kept */
	uint64_t open_timeout_ns;	      /* 0: never */
	bool record; /* keep the record for the restorer (ptw_guardian_keeps_record) */
	/* The restorer's: its outputs write only what the tracer could not
	 * (from ptw_session_begin on); no record, no timers. */
	bool resume;
};

struct ptw_session;

struct ptw_session *ptw_session_new(const struct ptw_session_opts *o);
/* Frees what ptw_session_run did not (a launch or attach that failed). */
void ptw_session_free(struct ptw_session *s);

/* The backend's callbacks into the session (sink, before_block, timers). */
void ptw_session_tracer_opts(struct ptw_session *s, struct ptw_backend_opts *to);
/* --live: the live table takes the terminal once the target is known
 * (if it cannot, event lines instead). Before ptw_session_run. */
void ptw_session_add_live(struct ptw_session *s, const struct ptw_live_opts *lo);

/*
 * Observes with b until the end (duration_ms: --duration, -1 none), lets
 * go, writes every output's end; frees b and s. Returns ptwatch's exit
 * status, or dies of the target's signal.
 */
int ptw_session_run(struct ptw_session *s, struct ptw_backend *b, int duration_ms);

/* ---- the restorer's ---- */

/* An event of the record, into the engine only (the tracer said it). */
void ptw_session_replay(struct ptw_session *s, const struct ptw_event *ev);
/* The outputs begin (head: what the target is; resumed, the stream goes on). */
void ptw_session_begin(struct ptw_session *s, const struct ptw_report *head);
/* The end: the engine finishes, then each output's end with r (r->spans
 * is set to the session's). */
void ptw_session_end(struct ptw_session *s, struct ptw_report *r);
/* The first output the session could not write (a full disk, an I/O
 * error; not a closed pipe), by name ("spans.jsonl", "standard output")
 * and errno: true, or false if none was lost. */
bool ptw_session_lost(const struct ptw_session *s, const char **what, int *err);

/* ---- the other command: ptwatch report FILE ---- */

struct ptw_report_cmd {
	const char *path;		/* a spans document or a stream; "-": standard input */
	enum ptw_output_format format;	/* TEXT (the summary), JSON or CHROME */
	const char *output;		/* -o FILE, or NULL: standard output */
	const struct ptw_text_filter *filter; /* --tid, --routine */
	bool live; /* --live: the live table over it, moving through its moments */
};
/* Reads, renders and writes; the exit status (errors said on standard error). */
int ptw_report_cmd(const struct ptw_report_cmd *c);

#endif
