/* SPDX-License-Identifier: MIT */
/*
 * --format=chrome: the Chrome trace-event format (the JSON object form with
 * "traceEvents"), which Perfetto UI and chrome://tracing open. One process,
 * one track per thread ("name (tid)", thread_name metadata), each thread
 * span a complete slice ("X") from its start routine's entry to its end,
 * frame spans (--trace) nested in it, joins as slices on the joiner's track
 * with a flow from the joined thread's end, spawn latency as a flow from
 * the creator's pthread_create to the start (and an instant there).
 * Timestamps in microseconds since the session began, to the nanosecond.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "ptw_frames.h"
#include "ptw_locks.h"
#include "ptw_output.h"
#include "ptw_symbols.h"

struct chrome {
	struct ptw_json j;
	uint64_t base, end;
	pid_t pid;
	struct ptw_map pid_of; /* -f: tid -> its process's pid */
	uint64_t flow;
};

static void ts(struct chrome *c, const char *k, uint64_t ns)
{
	/* "%.3f" of a double loses nanoseconds past 2^53 ns: print it exactly */
	int64_t rel = (int64_t)(ns - c->base);
	uint64_t a = rel < 0 ? (uint64_t)-rel : (uint64_t)rel;
	ptw_json_double(&c->j, k, 0); /* the key and a placeholder value ... */
	c->j.out->len -= 3;	      /* ... "0.0" replaced by the exact one */
	ptw_buf_printf(c->j.out, "%s%" PRIu64 ".%03" PRIu64, rel < 0 ? "-" : "", a / 1000, a % 1000);
}

/* "dur" in microseconds, exactly (ns with three decimals). */
static void dur(struct chrome *c, uint64_t ns)
{
	ptw_json_double(&c->j, "dur", 0);
	c->j.out->len -= 3;
	ptw_buf_printf(c->j.out, "%" PRIu64 ".%03" PRIu64, ns / 1000, ns % 1000);
}

static void begin_event(struct chrome *c, const char *ph, const char *name, const char *cat,
			pid_t tid)
{
	ptw_json_begin_object(&c->j, NULL);
	ptw_json_string(&c->j, "ph", ph);
	ptw_json_string(&c->j, "name", name);
	if (cat)
		ptw_json_string(&c->j, "cat", cat);
	pid_t pid = (pid_t)(uintptr_t)ptw_map_get(&c->pid_of, (uint64_t)tid);
	ptw_json_int(&c->j, "pid", pid ? pid : c->pid);
	ptw_json_int(&c->j, "tid", tid);
}

static void metadata(struct chrome *c, const char *what, pid_t tid, const char *key,
		     const char *value, int64_t num)
{
	begin_event(c, "M", what, NULL, tid);
	ptw_json_begin_object(&c->j, "args");
	if (value)
		ptw_json_string(&c->j, key, value);
	else
		ptw_json_int(&c->j, key, num);
	ptw_json_end_object(&c->j);
	ptw_json_end_object(&c->j);
}

static char *routine_name(const struct ptw_span *sp)
{
	return ptw_span_group_name(sp);
}

static void loc_arg(struct chrome *c, const char *k, const struct ptw_location *loc,
		    const char *known)
{
	struct ptw_buf b = { 0 };
	ptw_text_location(&b, loc, known);
	ptw_json_string(&c->j, k, b.p ? b.p : "?");
	ptw_buf_free(&b);
}

static void thread_span(struct chrome *c, const struct ptw_span *sp)
{
	bool main_ = sp->origin == PTW_ORIGIN_MAIN;
	/* From the start routine's entry; found running at an attach: from
	 * when it was first seen. */
	uint64_t from = sp->start_ns.set ? sp->start_ns.v : sp->create_ns.set ? sp->create_ns.v : c->base;
	uint64_t to = sp->end_ns.set && sp->status != PTW_STATUS_OPEN ? sp->end_ns.v : c->end;
	if (to < from)
		to = from;
	char *name = routine_name(sp);
	const char *cat = sp->status == PTW_STATUS_OPEN	       ? "thread,open"
			  : sp->status == PTW_STATUS_UNMATCHED ? "thread,unmatched"
							       : "thread";
	begin_event(c, "X", name, cat, sp->tid);
	ts(c, "ts", from);
	dur(c, to - from);
	if (sp->status == PTW_STATUS_UNMATCHED)
		ptw_json_string(&c->j, "cname", "terrible");
	else if (sp->status == PTW_STATUS_OPEN)
		ptw_json_string(&c->j, "cname", "yellow");
	ptw_json_begin_object(&c->j, "args");
	ptw_json_uint(&c->j, "span", sp->id);
	if (sp->pthread)
		ptw_json_hex(&c->j, "pthread", sp->pthread);
	loc_arg(c, "start_routine", sp->start_routine, main_ ? "main" : "pthread_start_routine");
	ptw_json_string(&c->j, "status", ptw_status_name(sp->status));
	if (sp->status != PTW_STATUS_OPEN) {
		ptw_json_string(&c->j, "end_method", ptw_method_name(sp->method));
		if (sp->value.set)
			ptw_json_hex(&c->j, "end_value", sp->value.v);
		if (sp->reason)
			ptw_json_string(&c->j, "end_reason", sp->reason);
	} else {
		ptw_json_string(&c->j, "note", sp->end_ns.set ? "open" : "open when the trace ended");
	}
	if (sp->creator_tid)
		ptw_json_int(&c->j, "creator_tid", sp->creator_tid);
	if (sp->create_ns.set && sp->start_ns.set && !main_ && sp->start_ns.v >= sp->create_ns.v)
		ptw_json_uint(&c->j, "spawn_latency_ns", sp->start_ns.v - sp->create_ns.v);
	if (sp->joined) {
		ptw_json_int(&c->j, "joined_by", sp->joiner_tid);
		if (sp->join_return_ns.set)
			ptw_json_uint(&c->j, "join_wait_ns", sp->join_return_ns.v - sp->join_call_ns);
	}
	if (sp->detached >= 0)
		ptw_json_bool(&c->j, "detached", sp->detached == 1);
	if (sp->cpu.set) {
		ptw_json_uint(&c->j, "on_cpu_ns", sp->cpu.on_cpu_ns);
		ptw_json_uint(&c->j, "runnable_ns", sp->cpu.runnable_ns);
		ptw_json_uint(&c->j, "voluntary_switches", sp->cpu.voluntary);
		ptw_json_uint(&c->j, "involuntary_switches", sp->cpu.involuntary);
	}
	if (sp->uncertain)
		ptw_json_bool(&c->j, "uncertain", true);
	ptw_json_end_object(&c->j);
	ptw_json_end_object(&c->j);

	/* spawn: an instant at pthread_create on the creator's track, a flow
	 * from there to the start */
	if (!main_ && sp->creator_tid && sp->create_ns.set && sp->start_ns.set &&
	    sp->start_ns.v >= sp->create_ns.v) {
		char *what = xasprintf("pthread_create -> %d", sp->tid);
		begin_event(c, "i", what, "spawn", sp->creator_tid);
		ts(c, "ts", sp->create_ns.v);
		ptw_json_string(&c->j, "s", "t");
		ptw_json_begin_object(&c->j, "args");
		ptw_json_uint(&c->j, "span", sp->id);
		ptw_json_uint(&c->j, "spawn_latency_ns", sp->start_ns.v - sp->create_ns.v);
		ptw_json_end_object(&c->j);
		ptw_json_end_object(&c->j);
		uint64_t id = ++c->flow;
		begin_event(c, "s", "spawn", "spawn", sp->creator_tid);
		ts(c, "ts", sp->create_ns.v);
		ptw_json_uint(&c->j, "id", id);
		ptw_json_end_object(&c->j);
		begin_event(c, "f", "spawn", "spawn", sp->tid);
		ts(c, "ts", sp->start_ns.v);
		ptw_json_uint(&c->j, "id", id);
		ptw_json_string(&c->j, "bp", "e");
		ptw_json_end_object(&c->j);
		free(what);
	}
	/* join: the wait as a slice on the joiner's track, a flow from the end */
	if (sp->joined && sp->join_return_ns.set && sp->join_return_ns.v >= sp->join_call_ns) {
		char *what = xasprintf("pthread_join %d", sp->tid);
		begin_event(c, "X", what, "join", sp->joiner_tid);
		ts(c, "ts", sp->join_call_ns);
		uint64_t d = sp->join_return_ns.v - sp->join_call_ns;
		dur(c, d);
		ptw_json_begin_object(&c->j, "args");
		ptw_json_uint(&c->j, "span", sp->id);
		ptw_json_int(&c->j, "tid", sp->tid);
		ptw_json_uint(&c->j, "wait_ns", d);
		ptw_json_end_object(&c->j);
		ptw_json_end_object(&c->j);
		if (sp->end_ns.set && sp->status != PTW_STATUS_OPEN) {
			uint64_t id = ++c->flow;
			begin_event(c, "s", "join", "join", sp->tid);
			/* inside the thread's slice, at its very end */
			ts(c, "ts", to > from ? to - 1 : to);
			ptw_json_uint(&c->j, "id", id);
			ptw_json_end_object(&c->j);
			begin_event(c, "f", "join", "join", sp->joiner_tid);
			ts(c, "ts", sp->join_return_ns.v > sp->join_call_ns ? sp->join_return_ns.v - 1
									   : sp->join_return_ns.v);
			ptw_json_uint(&c->j, "id", id);
			ptw_json_string(&c->j, "bp", "e");
			ptw_json_end_object(&c->j);
		}
		free(what);
	}
	if (sp->open_after_ns.set) {
		struct ptw_buf b = { 0 };
		ptw_buf_puts(&b, "open past ");
		ptw_text_duration(&b, sp->open_for_ns);
		begin_event(c, "i", b.p, "open_timeout", sp->tid);
		ts(c, "ts", sp->open_after_ns.v);
		ptw_json_string(&c->j, "s", "t");
		ptw_json_begin_object(&c->j, "args");
		ptw_json_uint(&c->j, "span", sp->id);
		if (sp->open_state)
			ptw_json_string(&c->j, "state", sp->open_state);
		if (sp->open_wchan)
			ptw_json_string(&c->j, "wchan", sp->open_wchan);
		ptw_json_end_object(&c->j);
		ptw_json_end_object(&c->j);
		ptw_buf_free(&b);
	}
	free(name);
}

static void frame(struct chrome *c, const struct ptw_frame *fr)
{
	uint64_t to = fr->has_return ? fr->return_ns : fr->has_left ? fr->left_ns : c->end;
	if (to < fr->entry_ns)
		to = fr->entry_ns;
	struct ptw_buf name = { 0 };
	const struct ptw_location *loc = fr->function;
	if (loc && loc->symbol)
		ptw_buf_puts(&name, loc->symbol);
	else
		ptw_text_location(&name, loc, NULL);
	const char *cat = fr->status == PTW_FRAME_COMPLETED ? "frame"
			  : fr->status == PTW_FRAME_OPEN    ? "frame,open"
							    : "frame,unmatched";
	begin_event(c, "X", name.p ? name.p : "?", cat, fr->tid);
	ts(c, "ts", fr->entry_ns);
	dur(c, to - fr->entry_ns);
	if (fr->status == PTW_FRAME_UNMATCHED)
		ptw_json_string(&c->j, "cname", "terrible");
	ptw_json_begin_object(&c->j, "args");
	ptw_json_uint(&c->j, "frame", fr->id);
	ptw_json_string(&c->j, "status", ptw_frame_status_name(fr->status));
	if (fr->entry_unknown) /* it begins at the attach: its start is not its entry */
		ptw_json_string(&c->j, "entry", "before_attach");
	if (fr->reason)
		ptw_json_string(&c->j, "reason", fr->reason);
	if (fr->sig)
		ptw_json_string(&c->j, "signal", ptw_signame(fr->sig));
	if (fr->has_value)
		ptw_json_hex(&c->j, "value", fr->value);
	loc_arg(c, "function", loc, NULL);
	ptw_json_end_object(&c->j);
	ptw_json_end_object(&c->j);
	ptw_buf_free(&name);
}

/* --locks: a wait span as a slice on the waiting thread's track. */
static void wait_slice(struct chrome *c, const struct ptw_wait *w)
{
	uint64_t to = w->has_end ? w->end_ns : w->has_left ? w->left_ns : c->end;
	if (to < w->start_ns)
		to = w->start_ns;
	struct ptw_buf name = { 0 };
	ptw_buf_printf(&name, "wait %s ", ptw_wait_kind_name(w->kind));
	if (w->object_loc && w->object_loc->symbol)
		ptw_buf_puts(&name, w->object_loc->symbol);
	else
		ptw_buf_printf(&name, "%#" PRIx64, w->object);
	const char *cat = w->deadlock ? "wait,deadlock"
			  : w->status == PTW_WAIT_COMPLETED ? "wait"
							    : "wait,unmatched";
	begin_event(c, "X", name.p, cat, w->tid);
	ts(c, "ts", w->start_ns);
	dur(c, to - w->start_ns);
	if (w->deadlock)
		ptw_json_string(&c->j, "cname", "terrible");
	ptw_json_begin_object(&c->j, "args");
	ptw_json_uint(&c->j, "wait", w->id);
	ptw_json_hex(&c->j, "object", w->object);
	if (w->owner)
		ptw_json_int(&c->j, "owner_tid", w->owner);
	ptw_json_string(&c->j, "status", ptw_wait_status_name(w->status));
	if (w->start_unknown) /* it begins at the attach: its start is not the wait's */
		ptw_json_string(&c->j, "start", "before_attach");
	if (w->reason)
		ptw_json_string(&c->j, "reason", w->reason);
	if (w->deadlock)
		ptw_json_uint(&c->j, "deadlock", w->deadlock);
	loc_arg(c, "site", w->site, NULL);
	ptw_json_end_object(&c->j);
	ptw_json_end_object(&c->j);
	ptw_buf_free(&name);
}

static void report_chrome(const struct ptw_report *r, struct ptw_buf *out,
			  struct ptw_json_sink *sink)
{
	struct chrome c = { .j = { .out = out, .sink = sink, .pretty = false }, .base = r->start_ns,
			    .end = r->end_ns > r->start_ns ? r->end_ns : r->start_ns, .pid = r->pid };
	size_t n = ptw_spans_count(r->spans);
	/* the first event seen, if it came before the session's start */
	for (size_t i = 0; i < n; i++) {
		const struct ptw_span *sp = ptw_spans_get(r->spans, i);
		if (sp->create_ns.set && sp->create_ns.v < c.base)
			c.base = sp->create_ns.v;
		if (sp->end_ns.set && sp->end_ns.v > c.end)
			c.end = sp->end_ns.v;
	}
	struct ptw_json *j = &c.j;
	ptw_json_begin_object(j, NULL);
	ptw_json_string(j, "displayTimeUnit", "ns");
	ptw_json_begin_object(j, "otherData");
	ptw_json_string(j, "tool", "ptwatch");
	ptw_json_string(j, "version", r->tool_version);
	ptw_json_string(j, "spans_schema", PTW_SPANS_SCHEMA);
	ptw_json_uint(j, "base_ns", c.base);
	ptw_json_string(j, "clock", "monotonic");
	ptw_json_end_object(j);
	ptw_json_begin_array(j, "traceEvents");
	const char *exe = r->exe && *r->exe ? r->exe : "?";
	const char *slash = strrchr(exe, '/');
	char *pname = xasprintf("%s (%d)", slash ? slash + 1 : exe, r->pid);
	metadata(&c, "process_name", r->pid, "name", pname, 0);
	free(pname);
	/* -f: a process per pid, its threads on its tracks */
	for (size_t i = 0; i < n; i++) {
		const struct ptw_span *sp = ptw_spans_get(r->spans, i);
		if (sp->pid && sp->pid != r->pid)
			ptw_map_put(&c.pid_of, (uint64_t)sp->tid, (void *)(uintptr_t)sp->pid);
	}
	for (size_t i = 0; i < r->nprocesses; i++) {
		const struct ptw_process *p = &r->processes[i];
		if (p->pid == r->pid)
			continue;
		const char *pe = p->exe && *p->exe ? p->exe : "?";
		const char *ps = strrchr(pe, '/');
		char *pn = xasprintf("%s (%d)", ps ? ps + 1 : pe, p->pid);
		ptw_json_begin_object(j, NULL);
		ptw_json_string(j, "ph", "M");
		ptw_json_string(j, "name", "process_name");
		ptw_json_int(j, "pid", p->pid);
		ptw_json_int(j, "tid", p->pid);
		ptw_json_begin_object(j, "args");
		ptw_json_string(j, "name", pn);
		ptw_json_end_object(j);
		ptw_json_end_object(j);
		free(pn);
	}
	/* one track per thread: named by its first span, ordered by it */
	struct ptw_map named = { 0 };
	for (size_t i = 0; i < n; i++) {
		const struct ptw_span *sp = ptw_spans_get(r->spans, i);
		if (ptw_map_get(&named, (uint64_t)sp->tid))
			continue;
		ptw_map_put(&named, (uint64_t)sp->tid, (void *)1);
		char *rn = sp->name ? NULL : routine_name(sp);
		char *tname = xasprintf("%s (%d)", sp->name ? sp->name : rn, sp->tid);
		metadata(&c, "thread_name", sp->tid, "name", tname, 0);
		metadata(&c, "thread_sort_index", sp->tid, "sort_index", NULL, sp->id);
		free(tname);
		free(rn);
	}
	ptw_map_free(&named);
	for (size_t i = 0; i < n; i++)
		thread_span(&c, ptw_spans_get(r->spans, i));
	const struct ptw_frames *f = ptw_spans_frames(r->spans);
	for (size_t i = 0; i < ptw_frames_count(f); i++)
		frame(&c, ptw_frames_get(f, i));
	const struct ptw_locks *locks = ptw_spans_locks(r->spans);
	for (size_t i = 0; i < ptw_locks_count(locks); i++)
		wait_slice(&c, ptw_locks_get(locks, i));
	ptw_json_end_array(j);
	ptw_json_end_object(j);
	ptw_buf_putc(out, '\n');
	ptw_json_sink_end(j);
	ptw_map_free(&c.pid_of);
}

void ptw_report_chrome(const struct ptw_report *r, struct ptw_buf *out)
{
	report_chrome(r, out, NULL);
}

int ptw_report_chrome_fd(const struct ptw_report *r, int fd)
{
	struct ptw_buf out = { 0 };
	struct ptw_json_sink sink = { .fd = fd };
	report_chrome(r, &out, &sink);
	ptw_buf_free(&out);
	return sink.err;
}
