/* SPDX-License-Identifier: MIT */
/*
 * The live table as an output (PTW_OUTPUT_LIVE): takes the terminal at
 * begin (the event lines stop), notes every span that changed in the row
 * model, ticks from the tracer loop's timer, gives the terminal back at
 * stop. See ptw_live.h and ptw_output.h.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptw_frames.h"
#include "ptw_live.h"
#include "ptw_output.h"

struct live_out {
	struct ptw_output base;
	struct ptw_live_opts opts;
	char *title;
	struct ptw_live *live; /* while it has the terminal */
	struct ptw_live_model *model;
};

static struct live_out *live_of(struct ptw_output *o)
{
	return (struct live_out *)o;
}

/* Takes the terminal; standard error is held meanwhile. */
static int live_begin(struct ptw_output *o, const struct ptw_report *head)
{
	(void)head;
	struct live_out *l = live_of(o);
	struct ptw_output_host *h = o->host;
	int r = ptw_live_start(&l->opts, &l->live);
	if (r < 0) {
		fprintf(stderr, "ptwatch: no live table (TERM=%s: %s); event lines instead\n",
			getenv("TERM") ? getenv("TERM") : "", strerror(-r));
		return r;
	}
	atexit(ptw_live_emergency_end);
	ptw_buf_reset(h->log); /* the table shows them (the attach's "found" lines) */
	h->lines_taken = true;
	l->model = ptw_live_get_model(l->live);
	o->wake_fd = ptw_live_wake_fd(l->live);
	for (size_t i = 0; i < ptw_spans_count(h->spans); i++)
		if (ptw_span_filter_passes(h->filter ? &h->filter->spans : NULL, ptw_spans_get(h->spans, i)))
			ptw_live_model_note(l->model, ptw_spans_get(h->spans, i), ptw_now_ns());
	/* --trace: the calls so far (-p: those under way at the attach) */
	const struct ptw_frames *f = ptw_spans_frames(h->spans);
	for (size_t i = 0; i < ptw_frames_count(f); i++) {
		const struct ptw_frame *fr = ptw_frames_get(f, i);
		struct ptw_frame open = *fr;
		open.status = PTW_FRAME_OPEN;
		ptw_live_model_frame(l->model, &open);
		if (fr->status != PTW_FRAME_OPEN)
			ptw_live_model_frame(l->model, fr);
	}
	return 0;
}

static void live_event(struct ptw_output *o, const struct ptw_event *ev, const struct ptw_span *sp)
{
	struct live_out *l = live_of(o);
	if (!l->live)
		return;
	if (ev->kind == PTW_EV_PROCESS_EXIT || ev->kind == PTW_EV_EXEC ||
	    ev->kind == PTW_EV_DETACHED)
		ptw_live_model_refresh(l->model, ev->ns); /* many spans ended */
	if (sp && ptw_span_filter_passes(o->host->filter ? &o->host->filter->spans : NULL, sp)) /* --tid, --routine */
		ptw_live_model_note(l->model, sp, ev->ns);
	if (ev->kind == PTW_EV_FRAME_ENTRY) /* (its end comes as frame_closed) */
		ptw_live_model_frame(l->model, ptw_spans_last_frame(o->host->spans));
}

/* --trace: a call returned or was left (every one, streaming or not). */
static void live_frame_closed(struct ptw_output *o, const struct ptw_frame *fr)
{
	struct live_out *l = live_of(o);
	if (l->live)
		ptw_live_model_frame(l->model, fr);
}

/* --locks: a row's state says what its thread waits for. */
static void live_wait(struct ptw_output *o, const struct ptw_event *ev, const struct ptw_span *sp,
		      const struct ptw_wait *w)
{
	struct live_out *l = live_of(o);
	if (!l->live)
		return;
	live_event(o, ev, sp);
	if (w)
		ptw_live_model_wait(l->model, w, ev->kind != PTW_EV_WAIT_END,
				    ev->kind == PTW_EV_DEADLOCK);
}

static uint64_t live_next_tick(struct ptw_output *o)
{
	struct live_out *l = live_of(o);
	return l->live ? ptw_live_next(l->live) : 0;
}

static bool live_tick(struct ptw_output *o, uint64_t now)
{
	struct live_out *l = live_of(o);
	return l->live && ptw_live_tick(l->live, now) == PTW_LIVE_QUIT;
}

/* Standard error is the terminal again, and event lines go there. */
static void live_stop(struct ptw_output *o)
{
	struct live_out *l = live_of(o);
	ptw_live_end(l->live);
	l->live = NULL;
	l->model = NULL;
	o->host->lines_taken = false;
}

static void live_free(struct ptw_output *o)
{
	struct live_out *l = live_of(o);
	if (l->live)
		live_stop(o);
	free(l->title);
	free(l);
}

static const struct ptw_output_ops live_ops = {
	.format = PTW_OUTPUT_LIVE,
	.begin = live_begin,
	.event = live_event,
	.wait = live_wait,
	.open = live_event,
	.frame_closed = live_frame_closed,
	.next_tick = live_next_tick,
	.tick = live_tick,
	.stop = live_stop,
	.free = live_free,
};

struct ptw_output *ptw_output_live_new(const struct ptw_live_opts *lo, struct ptw_output_host *h)
{
	struct live_out *l = xcalloc(1, sizeof(*l));
	l->base = (struct ptw_output){ .ops = &live_ops, .host = h, .wake_fd = -1 };
	l->opts = *lo;
	l->title = xstrdup(lo->title ? lo->title : "ptwatch");
	l->opts.title = l->title;
	return &l->base;
}
