/* SPDX-License-Identifier: MIT */
/* --json-lines: the stream; see ptw_output.h and spec/lines.schema.json. */
#define _GNU_SOURCE
#include <unistd.h>

#include "ptw_frames.h"
#include "ptw_output.h"
#include "ptw_symbols.h"

static void begin(struct ptw_json *j, struct ptw_buf *b, const char *type)
{
	*j = (struct ptw_json){ .out = b, .pretty = false };
	ptw_json_begin_object(j, NULL);
	ptw_json_string(j, "type", type);
}

/* One line, one write: a reader never sees half of one (pipes: below
 * PIPE_BUF; files: one write). */
static void finish(struct ptw_lines *l, struct ptw_json *j)
{
	ptw_json_end_object(j);
	ptw_buf_putc(j->out, '\n');
	if (l->hold) {
		ptw_buf_add(l->hold, j->out->p, j->out->len);
		ptw_buf_free(j->out);
		return;
	}
	int r = l->broken ? 0 : ptw_write_all(l->fd >= 0 ? l->fd : STDOUT_FILENO, j->out->p, j->out->len);
	if (r < 0) {
		l->broken = true;
		l->err = -r;
	}
	if (!l->broken)
		l->lines++;
	ptw_buf_free(j->out);
}

void ptw_lines_header(struct ptw_lines *l, const struct ptw_report *r)
{
	struct ptw_buf b = { 0 };
	struct ptw_json j;
	begin(&j, &b, "header");
	ptw_json_head(&j, r, PTW_LINES_SCHEMA);
	ptw_json_string(&j, "spans_schema", PTW_SPANS_SCHEMA);
	ptw_json_begin_object(&j, "target");
	ptw_json_int(&j, "pid", r->pid);
	ptw_json_string(&j, "exe", r->exe ? r->exe : "");
	ptw_json_begin_array(&j, "argv");
	for (char *const *a = r->argv; a && *a; a++)
		ptw_json_string(&j, NULL, *a);
	ptw_json_end_array(&j);
	ptw_json_string(&j, "mode", r->mode);
	ptw_json_end_object(&j);
	/* (glibc and the strategy are known once tracing runs: last line) */
	ptw_json_begin_object(&j, "session");
	ptw_json_uint(&j, "start_ns", r->start_ns);
	ptw_json_uint(&j, "open_timeout_ns", r->open_timeout_ns);
	ptw_json_string(&j, "backend", r->backend);
	ptw_json_string(&j, "backend_why", r->backend_why);
	ptw_json_end_object(&j);
	finish(l, &j);
}

void ptw_lines_span(struct ptw_lines *l, const char *type, const struct ptw_span *sp,
		    uint64_t active)
{
	struct ptw_buf b = { 0 };
	struct ptw_json j;
	begin(&j, &b, type);
	if (active)
		ptw_json_uint(&j, "active", active);
	ptw_buf_puts(&b, ",\"span\":");
	j.need_comma[1] = false; /* the key is written: the value follows */
	ptw_json_span(&j, sp);
	finish(l, &j);
}

void ptw_lines_frame(struct ptw_lines *l, const struct ptw_frame *fr)
{
	struct ptw_buf b = { 0 };
	struct ptw_json j;
	begin(&j, &b, "frame");
	ptw_buf_puts(&b, ",\"frame\":");
	j.need_comma[1] = false;
	ptw_json_frame(&j, fr);
	finish(l, &j);
}

void ptw_lines_wait(struct ptw_lines *l, const struct ptw_wait *w)
{
	struct ptw_buf b = { 0 };
	struct ptw_json j;
	begin(&j, &b, "wait");
	ptw_buf_puts(&b, ",\"wait\":");
	j.need_comma[1] = false;
	ptw_json_wait(&j, w);
	finish(l, &j);
}

void ptw_lines_deadlock(struct ptw_lines *l, const struct ptw_live_deadlock *d)
{
	struct ptw_buf b = { 0 };
	struct ptw_json j;
	begin(&j, &b, "deadlock");
	ptw_buf_puts(&b, ",\"deadlock\":");
	j.need_comma[1] = false;
	ptw_json_live_deadlock(&j, d);
	finish(l, &j);
}

void ptw_lines_open(struct ptw_lines *l, const struct ptw_event *ev)
{
	struct ptw_buf b = { 0 };
	struct ptw_json j;
	begin(&j, &b, "open");
	ptw_json_uint(&j, "ns", ev->ns);
	ptw_json_int(&j, "tid", ev->tid);
	ptw_json_string(&j, "span_kind", ev->span_kind == PTW_SPAN_FRAME ? "frame" : "thread");
	ptw_json_uint(&j, "span_id", ev->span_id);
	ptw_json_uint(&j, "open_for_ns", ev->has_value ? ev->value : 0);
	ptw_json_string(&j, "name", ev->name);
	ptw_json_string(&j, "state", ev->state);
	ptw_json_string(&j, "wchan", ev->wchan);
	ptw_json_location(&j, "pc", ev->routine, "??", false);
	finish(l, &j);
}

void ptw_lines_warnings(struct ptw_lines *l, const struct ptw_report *r)
{
	for (; l->warnings_done < r->nwarnings; l->warnings_done++) {
		struct ptw_buf b = { 0 };
		struct ptw_json j;
		begin(&j, &b, "warning");
		ptw_json_string(&j, "code", r->warnings[l->warnings_done].code);
		ptw_json_string(&j, "message", r->warnings[l->warnings_done].message);
		finish(l, &j);
	}
}

void ptw_lines_end(struct ptw_lines *l, const struct ptw_report *r)
{
	ptw_lines_warnings(l, r);
	struct ptw_buf b = { 0 };
	struct ptw_json j;
	begin(&j, &b, "metrics");
	ptw_json_target(&j, r);
	ptw_json_session(&j, r);
	if (r->processes) /* -f: each process, how it ended (report's sections) */
		ptw_json_processes(&j, r);
	ptw_json_metrics(&j, r, false);
	ptw_json_warnings(&j, r);
	finish(l, &j);
}
