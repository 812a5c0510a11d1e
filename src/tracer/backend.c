/* SPDX-License-Identifier: MIT */
/* The ptrace tracer behind the session's backend operations (ptw_backend.h). */
#include "ptw_backend.h"
#include "ptw_tracer.h"

#include <stdlib.h>

#include "ptw_util.h"

struct tracer_backend {
	struct ptw_backend b; /* first: the session holds &b */
	struct ptw_tracer *t;
};

static struct ptw_tracer *tracer_of(struct ptw_backend *b)
{
	return ((struct tracer_backend *)(void *)b)->t;
}

static int run(struct ptw_backend *b, int duration_ms, enum ptw_end_reason *reason, int *sig)
{
	return ptw_tracer_run(tracer_of(b), duration_ms, reason, sig);
}

static void set_wake_fd(struct ptw_backend *b, int fd)
{
	ptw_tracer_set_wake_fd(tracer_of(b), fd);
}

static void stop(struct ptw_backend *b)
{
	ptw_tracer_stop(tracer_of(b));
}

static int detach(struct ptw_backend *b)
{
	return ptw_tracer_detach(tracer_of(b));
}

static int where(struct ptw_backend *b, pid_t tid, struct ptw_where *ret)
{
	return ptw_tracer_where(tracer_of(b), tid, ret);
}

static void check_fate(struct ptw_backend *b, struct ptw_report *r)
{
	ptw_tracer_check_fate(tracer_of(b), r);
}

static void report(struct ptw_backend *b, struct ptw_report *r)
{
	ptw_tracer_report(tracer_of(b), r);
}

static void finish(struct ptw_backend *b)
{
	ptw_tracer_finish(tracer_of(b));
}

static bool target_exit(struct ptw_backend *b, int *code, int *sig, bool *core)
{
	return ptw_tracer_target_exit(tracer_of(b), code, sig, core);
}

static void backend_free(struct ptw_backend *b)
{
	if (!b)
		return;
	ptw_tracer_free(tracer_of(b));
	free(b);
}

static const struct ptw_backend_ops tracer_ops = {
	.run = run,
	.set_wake_fd = set_wake_fd,
	.stop = stop,
	.detach = detach,
	.where = where,
	.check_fate = check_fate,
	.finish = finish,
	.report = report,
	.target_exit = target_exit,
	.free = backend_free,
};

struct ptw_backend *ptw_tracer_backend(struct ptw_tracer *t)
{
	struct tracer_backend *tb = xcalloc(1, sizeof(*tb));
	tb->b.ops = &tracer_ops;
	tb->b.name = "ptrace";
	tb->t = t;
	return &tb->b;
}
