/* SPDX-License-Identifier: MIT */
/*
 * The tracer: gives meaning to the attach layer's stops. It drives
 * libthread_db and the breakpoint engine and emits typed thread events
 * (ptw_events.h) to a sink, in the order it observed them.
 */
#ifndef PTW_TRACER_H
#define PTW_TRACER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptw_events.h"
#include "ptw_output.h"

typedef void (*ptw_event_sink_fn)(void *ctx, const struct ptw_event *ev);

struct ptw_tracer_opts {
	bool use_debug_files;	   /* libc's debug file: read struct pthread, fewer stops */
	bool use_cache;		   /* the build-id cache (ptw_cache_default_dir()) */
	bool create_events;	   /* TD_CREATE breakpoint instead of the clone event */
	bool follow_forks;	   /* -f: trace every process the target forks, to any depth */
	char *const *trace;	   /* --trace patterns ([MODULE:]GLOB), ntrace of them */
	size_t ntrace;
	bool locks;		   /* --locks: wait spans, live deadlocks */
	ptw_event_sink_fn sink;
	void *sink_ctx;
	void (*before_block)(void *ctx); /* about to sleep: flush output */
	void *before_block_ctx;
	/* The session's own deadlines (span open timeouts), optional: when
	 * the next is due (CLOCK_MONOTONIC ns, 0: none), and the call once it
	 * is (now: the time), which must deal with every timer due by now.
	 * ptw_tracer_run wakes up for it in the wait it does anyway: no
	 * polling, no extra stop. */
	uint64_t (*next_timer)(void *ctx);
	void (*on_timer)(void *ctx, uint64_t now);
	void *timer_ctx;
};

/* Where a thread is, read from /proc without stopping it (ptw_tracer_where). */
struct ptw_where {
	char state[48];	 /* "S futex", "R", "t": state letter and system call */
	char wchan[64];	 /* kernel function it sleeps in, "" unknown */
	char name[32];	 /* its comm, "" unknown */
	uint64_t pc;	 /* user PC while blocked in a system call, 0 unknown */
	const struct ptw_location *at; /* pc's symbol, NULL unknown; valid for the session */
};

enum ptw_end_reason {
	PTW_END_TARGET_EXITED,
	PTW_END_INTERRUPTED,
	PTW_END_DURATION,
	PTW_END_ERROR,
	PTW_END_SNAPSHOT,
	PTW_END_DETACHED,
};
const char *ptw_end_reason_name(enum ptw_end_reason r);
/* PTW_END_DETACHED: ptw_tracer_stop() was called (the live table's q). */

struct ptw_tracer;

/*
 * Launches argv under ptrace and stops at its exec. child_stdout: fd to use
 * as the command's stdout, or -1 to leave it alone. Returns 0, or -errno of
 * the failed exec (-ENOENT, -EACCES, ...) or of ptrace itself.
 */
int ptw_tracer_launch(const struct ptw_tracer_opts *o, char *const argv[], int child_stdout,
		      struct ptw_tracer **ret);

/*
 * Attaches to the running process pid: seizes and stops every thread,
 * learns them (libthread_db, stacks), sets up tracing, resumes them. Spans of
 * the threads found have origin "preexisting" (or "main"). Returns 0, -ESRCH
 * (no such process / nothing to attach), -EPERM, or -errno.
 */
int ptw_tracer_attach(const struct ptw_tracer_opts *o, pid_t pid, struct ptw_tracer **ret);

/*
 * Attaches to pid only to record every thread: kernel state, backtrace and
 * what it waits for (spans with stack, state, waits_for). Nothing is
 * patched; the threads stay stopped until ptw_tracer_detach(). Returns 0,
 * -ESRCH, -EPERM or -errno.
 */
int ptw_tracer_snapshot(const struct ptw_tracer_opts *o, pid_t pid, struct ptw_tracer **ret);

/*
 * Traces until the target exits, ptwatch gets a session signal, or
 * duration_ms passed (-1: no limit). *ret_signal is the signal ptwatch got.
 */
int ptw_tracer_run(struct ptw_tracer *t, int duration_ms, enum ptw_end_reason *ret_reason,
		   int *ret_signal);

/* Also wake ptw_tracer_run() when fd is readable (-1: no more): it then
 * calls the on_timer callback at once. For input that must not wait. */
void ptw_tracer_set_wake_fd(struct ptw_tracer *t, int fd);
/* Makes ptw_tracer_run() return (PTW_END_DETACHED) before it waits again;
 * may be called from its callbacks. */
void ptw_tracer_stop(struct ptw_tracer *t);

/*
 * Lets go of a live target: stops every thread, restores every patched byte,
 * clears the thread_db event mask, re-injects pending signals, detaches.
 * Returns the number of threads that could not be stopped in time.
 */
int ptw_tracer_detach(struct ptw_tracer *t);

/* Where thread tid of the target is now, without stopping it: its kernel
 * state, wchan, system call and the PC it made it from. Returns 0, or
 * -ESRCH when the thread is gone (*ret then says "?"). */
int ptw_tracer_where(struct ptw_tracer *t, pid_t tid, struct ptw_where *ret);
/* The same for thread tid of process pid, from /proc alone (ret->at is
 * left NULL: the caller's symbols name pc). */
int ptw_where_read(pid_t pid, pid_t tid, struct ptw_where *ret);

/*
 * What became of the target, checked now, into r->fate (and its exit, when
 * it ended once let go): reads /proc (every thread's status if one may
 * still be traced), so call it once, at the end, before ptw_tracer_report.
 */
void ptw_tracer_check_fate(struct ptw_tracer *t, struct ptw_report *r);

/* Fills the target / session part of the report (spans are the caller's);
 * cheap: no /proc reading. */
void ptw_tracer_report(struct ptw_tracer *t, struct ptw_report *r);

void ptw_tracer_free(struct ptw_tracer *t);

/* -f: what the document says of process id (ptw_event.process) now (its
 * strings valid until the tracer changes it); false without -f or for an
 * id not given out. */
bool ptw_tracer_process(struct ptw_tracer *t, uint32_t id, struct ptw_process *ret);

/* Whether text is a valid --trace pattern ([MODULE:]GLOB, GLOB not empty):
 * 0 or -EINVAL. */
int ptw_trace_check_pattern(const char *text);

/* Exit status of the target once it ended: 0 = not ended, else like wait(2). */
bool ptw_tracer_target_exit(struct ptw_tracer *t, int *ret_code, int *ret_signal, bool *ret_core);

#endif
