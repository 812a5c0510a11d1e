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

#include "ptw_backend.h"
#include "ptw_events.h"
#include "ptw_output.h"

struct ptw_tracer;

/*
 * Launches argv under ptrace and stops at its exec. child_stdout: fd to use
 * as the command's stdout, or -1 to leave it alone. Returns 0, or -errno of
 * the failed exec (-ENOENT, -EACCES, ...) or of ptrace itself.
 */
int ptw_tracer_launch(const struct ptw_backend_opts *o, char *const argv[], int child_stdout,
		      struct ptw_tracer **ret);

/*
 * Attaches to the running process pid: seizes and stops every thread,
 * learns them (libthread_db, stacks), sets up tracing, resumes them. Spans of
 * the threads found have origin "preexisting" (or "main"). Returns 0, -ESRCH
 * (no such process / nothing to attach), -EPERM, or -errno.
 */
int ptw_tracer_attach(const struct ptw_backend_opts *o, pid_t pid, struct ptw_tracer **ret);

struct ptw_regs_reader;
/*
 * Attaches to pid only to record every thread: kernel state, backtrace and
 * what it waits for (spans with stack, state, waits_for). Nothing is
 * patched. A thread asleep in the kernel is read without a stop; the
 * others are stopped (until ptw_tracer_detach()), unless reader (the
 * kernel's, ptw_regs.h; owned from now on; NULL: none) gives their
 * registers and stacks without one. Returns 0, -ESRCH, -EPERM or -errno.
 */
int ptw_tracer_snapshot(const struct ptw_backend_opts *o, pid_t pid,
			struct ptw_regs_reader *reader, struct ptw_tracer **ret);

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

/*
 * What became of the target, checked now, into r->fate (and its exit, when
 * it ended once let go): reads /proc (every thread's status if one may
 * still be traced), so call it once, at the end, before ptw_tracer_report.
 */
void ptw_tracer_check_fate(struct ptw_tracer *t, struct ptw_report *r);

/* The session is over (after ptw_tracer_check_fate): its last warnings
 * (what the features could not do) and, -f, every process as it is now,
 * as events. */
void ptw_tracer_finish(struct ptw_tracer *t);

/* Fills the target / session part of the report (spans are the caller's;
 * warnings, interrupts and processes were events); cheap: no /proc
 * reading. */
void ptw_tracer_report(struct ptw_tracer *t, struct ptw_report *r);

void ptw_tracer_free(struct ptw_tracer *t);

/* Whether text is a valid --trace pattern ([MODULE:]GLOB, GLOB not empty):
 * 0 or -EINVAL. */
int ptw_trace_check_pattern(const char *text);

/* Exit status of the target once it ended: 0 = not ended, else like wait(2). */
bool ptw_tracer_target_exit(struct ptw_tracer *t, int *ret_code, int *ret_signal, bool *ret_core);

#endif
