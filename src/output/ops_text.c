/* SPDX-License-Identifier: MIT */
/*
 * The text output (PTW_OUTPUT_TEXT): event lines into the session's log
 * (standard error), with the filters of -e, --tid, --routine and -v, and
 * at the end the summary, or --snapshot's report. See ptw_output.h.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdlib.h>
#include <unistd.h>

#include "ptw_output.h"

struct text_out {
	struct ptw_output base;
	struct ptw_output_conf conf;
	struct ptw_text_style style; /* this session's event lines */
	pid_t first_pid;       /* -f: the first process an event named */
	bool pids_shown;       /* a second one appeared: lines carry the pid */
	uint64_t stops_logged; /* -v: stops said so far */
};

static struct text_out *text_of(struct ptw_output *o)
{
	return (struct text_out *)o;
}

/* -f: once a second process is traced, every line names its process. */
static void track_pid(struct text_out *t, const struct ptw_event *ev)
{
	if (ev->pid && !t->first_pid)
		t->first_pid = ev->pid;
	else if (ev->pid && ev->pid != t->first_pid && !t->pids_shown) {
		t->pids_shown = true;
		t->style.show_pids = true;
	}
}

static void text_event(struct ptw_output *o, const struct ptw_event *ev, const struct ptw_span *sp)
{
	struct text_out *t = text_of(o);
	struct ptw_output_host *h = o->host;
	track_pid(t, ev);
	if (t->conf.quiet || h->lines_taken)
		return;
	const struct ptw_frame *fr = ptw_spans_last_frame(h->spans);
	ptw_text_event_filtered(h->log, &t->style, ev, sp, fr, h->filter);
	if (h->log->len > 65536)
		h->flush(h->ctx);
}

static void text_wait(struct ptw_output *o, const struct ptw_event *ev, const struct ptw_span *sp,
		      const struct ptw_wait *w)
{
	struct text_out *t = text_of(o);
	struct ptw_output_host *h = o->host;
	track_pid(t, ev);
	/* A deadlock is said even with -q or the live table (after it): it
	 * is what --locks is for. */
	if (ev->kind != PTW_EV_DEADLOCK && (t->conf.quiet || h->lines_taken))
		return;
	ptw_text_wait_event_filtered(h->log, &t->style, ev, sp, w, h->filter);
	if (ev->kind == PTW_EV_DEADLOCK)
		h->flush(h->ctx);
}

/* -v: the ptrace stops so far. */
static void text_progress(struct ptw_output *o, const struct ptw_report *rep)
{
	struct text_out *t = text_of(o);
	struct ptw_output_host *h = o->host;
	if (rep->stops_total == t->stops_logged)
		return;
	uint64_t rel = ptw_now_ns() - h->start_ns;
	ptw_buf_printf(h->log, "%4" PRIu64 ".%06" PRIu64 " %7d %-8s %" PRIu64 " ptrace stops (+%" PRIu64 "), %zu breakpoints:",
		       rel / 1000000000u, (rel / 1000u) % 1000000u, rep->pid, "stops",
		       rep->stops_total, rep->stops_total - t->stops_logged, rep->breakpoints);
	for (size_t i = 0; i < rep->nstop_kinds; i++)
		if (rep->stop_counts[i])
			ptw_buf_printf(h->log, " %s %" PRIu64, rep->stop_names[i], rep->stop_counts[i]);
	ptw_buf_putc(h->log, '\n');
	t->stops_logged = rep->stops_total;
}

/* The summary, on standard error with the event lines; a snapshot's
 * report is what the user asked for: standard output (as eu-stack's and
 * gdb's), unless the document has it. */
static void text_end(struct ptw_output *o, const struct ptw_report *r)
{
	struct text_out *t = text_of(o);
	bool snapshot = t->conf.snapshot || r->snapshot;
	struct ptw_buf out = { 0 };
	if (snapshot) {
		ptw_text_snapshot(&out, r);
	} else {
		struct ptw_report filtered = *r; /* --object */
		filtered.filter = o->host->filter ? &o->host->filter->spans : NULL;
		ptw_text_summary(&out, &filtered);
	}
	bool to_stdout = snapshot && !t->conf.stdout_taken;
	int ret = ptw_write_all(to_stdout ? STDOUT_FILENO : STDERR_FILENO, out.p, out.len);
	ptw_buf_free(&out);
	if (ret < 0 && o->host->lost)
		o->host->lost(o->host->ctx, to_stdout ? "standard output" : "standard error", -ret);
}

static void text_free(struct ptw_output *o)
{
	free(o);
}

static const struct ptw_output_ops text_ops = {
	.format = PTW_OUTPUT_TEXT,
	.event = text_event,
	.wait = text_wait,
	.open = text_event,
	.progress = text_progress,
	.end = text_end,
	.free = text_free,
};

struct ptw_output *ptw_output_text_new(const struct ptw_output_conf *c, struct ptw_output_host *h)
{
	struct text_out *t = xcalloc(1, sizeof(*t));
	t->base = (struct ptw_output){ .ops = &text_ops, .host = h, .wake_fd = -1 };
	t->conf = *c;
	t->style.start_ns = h->start_ns;
	t->base.wants_progress = h->filter && h->filter->verbose && !c->quiet;
	return &t->base;
}
