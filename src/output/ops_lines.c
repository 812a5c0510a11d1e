/* SPDX-License-Identifier: MIT */
/*
 * The --json-lines output (PTW_OUTPUT_LINES): a header once the target is
 * known (lines before it wait), a span_open line as each span begins, a
 * span line as it is retired, frame, open, wait, deadlock and warning
 * lines as they come, and the metrics last. See ptw_output.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptw_frames.h"
#include "ptw_locks.h"
#include "ptw_output.h"

struct lines_out {
	struct ptw_output base;
	struct ptw_output_conf conf;
	struct ptw_lines out;
	bool header_done;
	uint64_t total;		/* spans seen so far: new ones get a span_open line */
	size_t deadlocks_lined; /* --locks deadlocks written as lines */
};

static struct lines_out *lines_of(struct ptw_output *o)
{
	return (struct lines_out *)o;
}

/* The first line; the lines held back until then follow. A resumed
 * stream (the restorer's) had its start written by the tracer. */
static int lines_begin(struct ptw_output *o, const struct ptw_report *head)
{
	struct lines_out *l = lines_of(o);
	if (l->header_done)
		return 0;
	struct ptw_buf *held = l->out.hold;
	l->out.hold = NULL;
	l->header_done = true;
	if (l->conf.resume) {
		l->out.warnings_done = head->nwarnings;
	} else {
		ptw_lines_header(&l->out, head);
		/* one write per line, as the rest of the stream: a pipe takes
		 * each whole or not at all (a killed tracer cuts none) */
		for (size_t at = 0; held && at < held->len && !l->out.broken;) {
			const char *nl = memchr(held->p + at, '\n', held->len - at);
			size_t len = nl ? (size_t)(nl - (held->p + at)) + 1 : held->len - at;
			int r = ptw_write_all(l->out.fd >= 0 ? l->out.fd : STDOUT_FILENO, held->p + at,
					      len);
			if (r < 0) {
				l->out.broken = true;
				l->out.err = -r;
			}
			at += len;
		}
		ptw_lines_warnings(&l->out, head);
	}
	if (held) {
		ptw_buf_free(held);
		free(held);
	}
	return 0;
}

/* The stream's new lines for the event just consumed. */
static void lines_event(struct ptw_output *o, const struct ptw_event *ev, const struct ptw_span *sp)
{
	(void)sp;
	struct lines_out *l = lines_of(o);
	struct ptw_output_host *h = o->host;
	uint64_t total = ptw_spans_total(h->spans);
	if (total != l->total || ev->kind == PTW_EV_SPAN_OPEN)
		h->before_line(h->ctx);
	for (uint64_t id = l->total + 1; id <= total; id++) {
		const struct ptw_span *nsp = ptw_spans_by_id(h->spans, (uint32_t)id);
		if (nsp)
			ptw_lines_span(&l->out, "span_open", nsp, ptw_spans_active(h->spans));
	}
	l->total = total;
	if (ev->kind == PTW_EV_SPAN_OPEN)
		ptw_lines_open(&l->out, ev);
	/* --locks: a wait as it ends; a deadlock once every member is in */
	const struct ptw_wait *w = ptw_spans_last_wait(h->spans);
	if (ev->kind == PTW_EV_WAIT_END && w && w->has_end)
		ptw_lines_wait(&l->out, w);
	const struct ptw_locks *locks = ptw_spans_locks(h->spans);
	for (size_t n = ptw_locks_deadlock_count(locks); l->deadlocks_lined < n;) {
		const struct ptw_live_deadlock *d = ptw_locks_deadlock(locks, l->deadlocks_lined);
		if (d->n < d->expected)
			break;
		ptw_lines_deadlock(&l->out, d);
		l->deadlocks_lined++;
	}
}

static void lines_wait(struct ptw_output *o, const struct ptw_event *ev, const struct ptw_span *sp,
		       const struct ptw_wait *w)
{
	(void)w;
	lines_event(o, ev, sp);
}

/* A resumed stream: what the engine retires while the restorer replays
 * the record was written by the tracer. */
static bool lines_replaying(const struct lines_out *l)
{
	return l->conf.resume && !l->header_done;
}

static void lines_span_retired(struct ptw_output *o, const struct ptw_span *sp)
{
	struct lines_out *l = lines_of(o);
	if (lines_replaying(l))
		return;
	o->host->before_line(o->host->ctx);
	ptw_lines_span(&l->out, "span", sp, 0);
}

static void lines_frame_closed(struct ptw_output *o, const struct ptw_frame *fr)
{
	struct lines_out *l = lines_of(o);
	if (lines_replaying(l))
		return;
	o->host->before_line(o->host->ctx);
	ptw_lines_frame(&l->out, fr);
}

/* What the tracer learnt since: warnings. */
static void lines_progress(struct ptw_output *o, const struct ptw_report *now)
{
	struct lines_out *l = lines_of(o);
	if (l->header_done)
		ptw_lines_warnings(&l->out, now);
}

/* Every span still held, the frames still open, then the last line. */
static void lines_end(struct ptw_output *o, const struct ptw_report *r)
{
	struct lines_out *l = lines_of(o);
	struct ptw_spans *spans = o->host->spans;
	lines_begin(o, r); /* (an end before the session began) */
	ptw_spans_retire_all(spans);
	/* a snapshot keeps its spans for its report (one moment: bounded) */
	for (size_t i = 0; l->conf.snapshot && !l->conf.resume && i < ptw_spans_count(spans); i++)
		ptw_lines_span(&l->out, "span", ptw_spans_get(spans, i), 0);
	const struct ptw_frames *f = ptw_spans_frames(spans);
	for (size_t i = 0; i < ptw_frames_count(f); i++)
		if (ptw_frames_get(f, i)->status == PTW_FRAME_OPEN)
			ptw_lines_frame(&l->out, ptw_frames_get(f, i));
	ptw_lines_end(&l->out, r);
	/* (a file system may say only now that the data did not fit) */
	if (l->out.fd >= 0 && close(l->out.fd) < 0 && !l->out.broken && errno != EINTR) {
		l->out.broken = true;
		l->out.err = errno;
	}
	l->out.fd = -1;
	if (l->out.broken && o->host->lost)
		o->host->lost(o->host->ctx, l->conf.path ? l->conf.path : "standard output",
			      l->out.err);
}

static void lines_free(struct ptw_output *o)
{
	struct lines_out *l = lines_of(o);
	if (l->out.hold) {
		ptw_buf_free(l->out.hold);
		free(l->out.hold);
	}
	free(l);
}

static const struct ptw_output_ops lines_ops = {
	.format = PTW_OUTPUT_LINES,
	.begin = lines_begin,
	.event = lines_event,
	.wait = lines_wait,
	.open = lines_event,
	.span_retired = lines_span_retired,
	.frame_closed = lines_frame_closed,
	.progress = lines_progress,
	.end = lines_end,
	.free = lines_free,
};

struct ptw_output *ptw_output_lines_new(const struct ptw_output_conf *c, struct ptw_output_host *h)
{
	struct lines_out *l = xcalloc(1, sizeof(*l));
	/* ended spans go out as lines and are freed: bounded memory */
	l->base = (struct ptw_output){ .ops = &lines_ops, .host = h, .streams = true,
				       .wants_progress = true, .wake_fd = -1 };
	l->conf = *c;
	l->out = (struct ptw_lines){ .fd = c->fd };
	if (!c->resume) /* lines wait here for the header */
		l->out.hold = xcalloc(1, sizeof(struct ptw_buf));
	return &l->base;
}
