/* SPDX-License-Identifier: MIT */
/*
 * What observes the target for a session (docs/design.md, "Backends"):
 * the ptrace tracer (include/ptw_tracer.h) or the kernel-assisted path
 * (include/ptw_kernel.h: uprobes and BPF, no thread ever stopped). Both
 * emit the same typed events (ptw_events.h) to the session's sink and are
 * driven by the session through these operations only.
 *
 * A backend is made by one of the constructors below, with the session's
 * callbacks in struct ptw_tracer_opts (sink, before_block, timers); the
 * session runs it to the end and frees it (ptw_session_run).
 */
#ifndef PTW_BACKEND_H
#define PTW_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ptw_output.h"
#include "ptw_tracer.h"

enum ptw_backend_kind {
	PTW_BACKEND_AUTO,   /* the kernel path where it can run, else ptrace */
	PTW_BACKEND_PTRACE, /* ptrace stops, int3 breakpoints */
	PTW_BACKEND_KERNEL, /* uprobes and BPF: no stop, nothing written */
};
/* "auto", "ptrace", "kernel"; and back (-EINVAL for anything else). */
const char *ptw_backend_kind_name(enum ptw_backend_kind k);
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
	/* The target and session part of the report (not backend and
	 * backend_why: the session's). */
	void (*report)(struct ptw_backend *b, struct ptw_report *r);
	bool (*process)(struct ptw_backend *b, uint32_t id, struct ptw_process *ret);
	bool (*target_exit)(struct ptw_backend *b, int *ret_code, int *ret_signal, bool *ret_core);
	void (*free)(struct ptw_backend *b);
};

struct ptw_backend {
	const struct ptw_backend_ops *ops;
	const char *name; /* "ptrace" | "kernel" */
	char why[256];	  /* why this one ran (the document's session.backend_why) */
};

/* The ptrace tracer t as a backend (it owns t from now on). */
struct ptw_backend *ptw_tracer_backend(struct ptw_tracer *t);

/*
 * The kernel-assisted path, launching argv held until its probes are in,
 * or attached to pid without any stop. Returns 0, or -errno with a
 * one-line reason in why (-ENOSYS: not built; -ENOTSUP, -EPERM: this
 * kernel or these privileges; -ENOENT: no glibc to probe in the target;
 * -EOPNOTSUPP: an option the kernel path does not do).
 */
int ptw_kernel_backend_launch(const struct ptw_tracer_opts *o, char *const argv[],
			      int child_stdout, struct ptw_backend **ret, char *why,
			      size_t why_size);
int ptw_kernel_backend_attach(const struct ptw_tracer_opts *o, pid_t pid, struct ptw_backend **ret,
			      char *why, size_t why_size);

/*
 * The session's choice (src/session/backend.c): want's backend, or for
 * PTW_BACKEND_AUTO the kernel path when it can run here for this target
 * and these options, else ptrace; b->why says which and why. A snapshot
 * is always ptrace's (it reads stopped threads' registers).
 *
 * Errors: the ptrace path's -errno as ptw_tracer_launch / _attach return
 * them (why empty: the caller explains), or the kernel path's with why
 * set (only when it was asked for by name).
 */
int ptw_backend_launch(enum ptw_backend_kind want, const struct ptw_tracer_opts *o,
		       char *const argv[], int child_stdout, struct ptw_backend **ret, char *why,
		       size_t why_size);
int ptw_backend_attach(enum ptw_backend_kind want, const struct ptw_tracer_opts *o, pid_t pid,
		       bool snapshot, struct ptw_backend **ret, char *why, size_t why_size);

#endif
