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

struct ptw_location;

/* ---- a streaming JSON writer (strings always come out valid UTF-8) ---- */

struct ptw_json {
	struct ptw_buf *out;
	int depth;
	bool need_comma[64];
	bool pretty;
};
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

struct ptw_warning {
	char *code;
	char *message;
};

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

/* One process of the session (-f: the target and every one it forked). */
struct ptw_process {
	uint32_t id;	     /* 0 the target, then 1, 2, ... in order of fork (spans' process) */
	uint32_t parent_id;  /* the process that forked it (0 for the target: none) */
	pid_t pid;
	pid_t ppid, parent_tid; /* who forked it (0 for the target) */
	const char *exe;
	char *const *argv;
	uint64_t start_ns, end_ns; /* fork (or the session's start); end 0: not ended */
	int exit_kind;		   /* PTW_EXIT_NONE / CODE / SIGNAL as in ptw_report */
	int exit_code, exit_signal;
	bool core_dumped;
	bool followed;		       /* false: let go at once, not_followed_why */
	const char *not_followed_why;
	bool detached;		       /* ptwatch let go of it while it ran */
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
	bool snapshot;	      /* spans carry state, stack, waits_for */
	uint64_t tracer_user_ns, tracer_sys_ns; /* ptwatch's own CPU time */
	uint64_t stops_total;
	const char *const *stop_names;
	const uint64_t *stop_counts;
	size_t nstop_kinds;
	size_t breakpoints;
	uint64_t open_timeout_ns; /* --open-timeout, 0: disabled */
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

/* From now on, event lines carry the process id before the thread id (-f,
 * once a second process is traced). */
void ptw_text_show_pids(bool on);
/* One readable line for an event the span engine consumed (may add nothing). */
void ptw_text_event(struct ptw_buf *out, uint64_t session_start_ns, const struct ptw_event *ev,
		    const struct ptw_span *sp);
/* One readable line for a frame event (--trace): the call, or the return
 * with its duration. */
struct ptw_frame;
void ptw_text_frame_event(struct ptw_buf *out, uint64_t session_start_ns,
			  const struct ptw_event *ev, const struct ptw_frame *fr);
/* --snapshot's text: deadlocks, then threads grouped by identical stack. */
void ptw_text_snapshot(struct ptw_buf *out, const struct ptw_report *r);
/* The summary table and metrics for the end of the text output. */
void ptw_text_summary(struct ptw_buf *out, const struct ptw_report *r);

/* Where and how the report goes out. */
struct ptw_output_opts {
	bool json;	/* the JSON document ... */
	int json_fd;	/* ... to this fd, or standard output if -1 */
	bool snapshot;	/* the text part is --snapshot's report, not the summary */
};
/* Writes the document (if wanted) and the text part: to standard error,
 * or for a snapshot to standard output unless the document goes there.
 * Returns 0, or -errno if the document could not be written (said on
 * standard error). Closes json_fd. */
int ptw_report_write(const struct ptw_report *r, const struct ptw_output_opts *o);

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
