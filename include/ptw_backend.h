/* SPDX-License-Identifier: MIT */
/*
 * What observes the target for a session (docs/design.md, "Backends"):
 * the ptrace tracer (include/ptw_tracer.h) or the kernel-assisted path
 * (include/ptw_kernel.h: uprobes and BPF, no thread ever stopped). Both
 * emit the same typed events (ptw_events.h) to the session's sink, the
 * session's facts among them (warnings, processes, interrupts), and are
 * driven by the session through these operations only.
 *
 * A backend is made by one of the constructors below, with the session's
 * callbacks in struct ptw_backend_opts (sink, before_block, timers); the
 * session runs it to the end and frees it (ptw_session_run).
 */
#ifndef PTW_BACKEND_H
#define PTW_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptw_attach.h"
#include "ptw_events.h"
#include "ptw_output.h"

typedef void (*ptw_event_sink_fn)(void *ctx, const struct ptw_event *ev);

/* What the session asks of a backend, and its callbacks. */
struct ptw_backend_opts {
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

enum ptw_backend_kind {
	PTW_BACKEND_AUTO,   /* the kernel path where it can run, else ptrace */
	PTW_BACKEND_PTRACE, /* ptrace stops, int3 breakpoints */
	PTW_BACKEND_KERNEL, /* uprobes and BPF: no stop, nothing written */
};
/* "auto", "ptrace", "kernel" to the kind (-EINVAL for anything else). */
int ptw_backend_kind_parse(const char *s, enum ptw_backend_kind *ret);

struct ptw_backend;

struct ptw_backend_ops {
	/* Observes until the target ended, a session signal, stop or
	 * duration_ms (-1: none); as ptw_tracer_run. */
	int (*run)(struct ptw_backend *b, int duration_ms, enum ptw_end_reason *ret_reason,
		   int *ret_signal);
	void (*set_wake_fd)(struct ptw_backend *b, int fd);
	void (*stop)(struct ptw_backend *b);
	/* Lets go of a live target. */
	int (*detach)(struct ptw_backend *b);
	/* Where thread tid is now, read from /proc (no stop). */
	int (*where)(struct ptw_backend *b, pid_t tid, struct ptw_where *ret);
	void (*check_fate)(struct ptw_backend *b, struct ptw_report *r);
	/* The session is over (after check_fate): says its last facts as
	 * events (what it could not do, every process as it is now). */
	void (*finish)(struct ptw_backend *b);
	/* The target and session part of the report (not backend and
	 * backend_why, nor the warnings, interrupts and processes it said
	 * as events: the session's). */
	void (*report)(struct ptw_backend *b, struct ptw_report *r);
	bool (*target_exit)(struct ptw_backend *b, int *ret_code, int *ret_signal, bool *ret_core);
	/* Optional: whether what free() still does concerns nobody (the
	 * kernel path's links on a process that has ended), so that the user
	 * need not wait for it (ptw_guardian_exit_early); what a session
	 * started next would see (the symbol caches) is done first. */
	bool (*leaves_early)(struct ptw_backend *b);
	void (*free)(struct ptw_backend *b);
};

struct ptw_backend {
	const struct ptw_backend_ops *ops;
	const char *name; /* "ptrace" | "kernel" */
	char why[256];	  /* why this one ran (the document's session.backend_why) */
};

struct ptw_tracer;

/* The ptrace tracer t as a backend (it owns t from now on). */
struct ptw_backend *ptw_tracer_backend(struct ptw_tracer *t);

/*
 * The kernel-assisted path, launching argv held until its probes are in,
 * or attached to pid without any stop. Returns 0, or -errno with a
 * one-line reason in why (-ENOSYS: not built; -ENOTSUP, -EPERM: this
 * kernel or these privileges; -ENOENT: no glibc to probe in the target;
 * -EOPNOTSUPP: an option the kernel path does not do).
 */
int ptw_kernel_backend_launch(const struct ptw_backend_opts *o, char *const argv[],
			      int child_stdout, struct ptw_backend **ret, char *why,
			      size_t why_size);
int ptw_kernel_backend_attach(const struct ptw_backend_opts *o, pid_t pid, struct ptw_backend **ret,
			      char *why, size_t why_size);

/*
 * The session's choice (src/session/backend.c): want's backend, or for
 * PTW_BACKEND_AUTO the kernel path when it can run here for this target
 * and these options, else ptrace; b->why says which and why. A snapshot
 * is the tracer's, with the kernel's register reader (ptw_regs.h) where
 * it can run (by name, or auto): then no thread is stopped.
 *
 * Errors: the ptrace path's -errno as ptw_tracer_launch / _attach return
 * them (why empty: the caller explains), or the kernel path's with why
 * set (only when it was asked for by name).
 */
int ptw_backend_launch(enum ptw_backend_kind want, const struct ptw_backend_opts *o,
		       char *const argv[], int child_stdout, struct ptw_backend **ret, char *why,
		       size_t why_size);
int ptw_backend_attach(enum ptw_backend_kind want, const struct ptw_backend_opts *o, pid_t pid,
		       bool snapshot, struct ptw_backend **ret, char *why, size_t why_size);

#endif
