/* SPDX-License-Identifier: MIT */
/* JSON writer and the spans document; see ptw_output.h. */
#define _GNU_SOURCE
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ptw_output.h"
#include "ptw_frames.h"
#include "ptw_locks.h"
#include "ptw_symbols.h"

/* ---- writer ---- */

void ptw_json_escape(struct ptw_buf *out, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	ptw_buf_putc(out, '"');
	while (*s) {
		/* a run of plain ASCII at once: names and paths are mostly that */
		const unsigned char *run = s;
		while (*s >= 0x20 && *s < 0x7f && *s != '"' && *s != '\\')
			s++;
		if (s > run) {
			ptw_buf_add(out, run, (size_t)(s - run));
			continue;
		}
		unsigned c = *s;
		if (c == '"' || c == '\\') {
			ptw_buf_putc(out, '\\');
			ptw_buf_putc(out, (char)c);
			s++;
		} else if (c == '\n') {
			ptw_buf_puts(out, "\\n");
			s++;
		} else if (c == '\t') {
			ptw_buf_puts(out, "\\t");
			s++;
		} else if (c == '\r') {
			ptw_buf_puts(out, "\\r");
			s++;
		} else if (c < 0x20 || c == 0x7f) {
			ptw_buf_printf(out, "\\u%04x", c);
			s++;
		} else {
			size_t n = ptw_utf8_sequence(s, 4); /* a NUL stops it first */
			if (n) {
				ptw_buf_add(out, s, n);
				s += n;
			} else {
				/* Not UTF-8 (a raw byte in a path or comm): keep the
				 * byte's value as a code point so nothing is lost. */
				ptw_buf_printf(out, "\\u%04x", c);
				s++;
			}
		}
	}
	ptw_buf_putc(out, '"');
}

static void newline(struct ptw_json *j)
{
	if (!j->pretty)
		return;
	static const char spaces[] = "                                ";
	ptw_buf_putc(j->out, '\n');
	for (size_t n = 2 * (size_t)j->depth; n;) {
		size_t k = n < sizeof(spaces) - 1 ? n : sizeof(spaces) - 1;
		ptw_buf_add(j->out, spaces, k);
		n -= k;
	}
}

static void key(struct ptw_json *j, const char *k)
{
	if (j->need_comma[j->depth])
		ptw_buf_putc(j->out, ',');
	j->need_comma[j->depth] = true;
	if (j->depth > 0)
		newline(j);
	if (k) {
		ptw_json_escape(j->out, k);
		ptw_buf_puts(j->out, j->pretty ? ": " : ":");
	}
}

static void open_(struct ptw_json *j, const char *k, char c)
{
	key(j, k);
	ptw_buf_putc(j->out, c);
	j->depth++;
	j->need_comma[j->depth] = false;
}

#define SPILL_BYTES (1u << 20)

/* out to the sink, if any, once it holds enough (at an element's end). */
static void spill(struct ptw_json *j, size_t at_least)
{
	struct ptw_json_sink *k = j->sink;
	if (!k || j->out->len < at_least)
		return;
	if (!k->err)
		k->err = ptw_write_all(k->fd, j->out->p, j->out->len);
	j->out->len = 0;
}

static void close_(struct ptw_json *j, char c)
{
	bool had = j->need_comma[j->depth];
	j->depth--;
	if (had)
		newline(j);
	ptw_buf_putc(j->out, c);
	if (j->depth <= 2)
		spill(j, SPILL_BYTES);
}

int ptw_json_sink_end(struct ptw_json *j)
{
	spill(j, 0);
	return j->sink ? j->sink->err : 0;
}

void ptw_json_begin_object(struct ptw_json *j, const char *k)
{
	open_(j, k, '{');
}

void ptw_json_end_object(struct ptw_json *j)
{
	close_(j, '}');
}

void ptw_json_begin_array(struct ptw_json *j, const char *k)
{
	open_(j, k, '[');
}

void ptw_json_end_array(struct ptw_json *j)
{
	close_(j, ']');
}

void ptw_json_string(struct ptw_json *j, const char *k, const char *v)
{
	key(j, k);
	if (v)
		ptw_json_escape(j->out, v);
	else
		ptw_buf_puts(j->out, "null");
}

/* Digits by hand: printf's cost shows with millions of numbers (and a
 * base known when compiled: a division by a variable costs tens of cycles
 * a digit, one by 10 a multiplication). */
static void put_dec(struct ptw_buf *out, uint64_t v)
{
	char d[24];
	size_t n = sizeof(d);
	do {
		d[--n] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	ptw_buf_add(out, d + n, sizeof(d) - n);
}

static void put_hex(struct ptw_buf *out, uint64_t v)
{
	char d[24];
	size_t n = sizeof(d);
	do {
		d[--n] = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v);
	ptw_buf_add(out, d + n, sizeof(d) - n);
}

void ptw_json_int(struct ptw_json *j, const char *k, int64_t v)
{
	key(j, k);
	if (v < 0)
		ptw_buf_putc(j->out, '-');
	put_dec(j->out, v < 0 ? -(uint64_t)v : (uint64_t)v);
}

void ptw_json_uint(struct ptw_json *j, const char *k, uint64_t v)
{
	key(j, k);
	put_dec(j->out, v);
}

void ptw_json_double(struct ptw_json *j, const char *k, double v)
{
	key(j, k);
	if (isfinite(v))
		ptw_buf_printf(j->out, "%.1f", v);
	else
		ptw_buf_puts(j->out, "null");
}

void ptw_json_bool(struct ptw_json *j, const char *k, bool v)
{
	key(j, k);
	ptw_buf_puts(j->out, v ? "true" : "false");
}

void ptw_json_null(struct ptw_json *j, const char *k)
{
	key(j, k);
	ptw_buf_puts(j->out, "null");
}

void ptw_json_hex(struct ptw_json *j, const char *k, uint64_t v)
{
	key(j, k);
	ptw_buf_add(j->out, "\"0x", 3);
	put_hex(j->out, v);
	ptw_buf_putc(j->out, '"');
}

/* ---- the document ---- */

/* key: value when set, null when not (0 ids and tids, unknown lines). */
static void json_uint_or_null(struct ptw_json *j, const char *k, bool set, uint64_t v)
{
	if (set)
		ptw_json_uint(j, k, v);
	else
		ptw_json_null(j, k);
}

static void json_int_or_null(struct ptw_json *j, const char *k, bool set, int64_t v)
{
	if (set)
		ptw_json_int(j, k, v);
	else
		ptw_json_null(j, k);
}

static void json_opt(struct ptw_json *j, const char *k, struct ptw_opt o)
{
	if (o.set)
		ptw_json_uint(j, k, o.v);
	else
		ptw_json_null(j, k);
}

/* known: fallback is the name, known another way ("main"), not a placeholder. */
void ptw_json_location(struct ptw_json *j, const char *k, const struct ptw_location *loc,
			  const char *fallback, bool known)
{
	if (!loc) {
		ptw_json_null(j, k);
		return;
	}
	/* A frame of a stack (no key, "??" if unnamed) written before at this
	 * depth: the same text again. */
	struct ptw_map *memo = !k && j->frames && j->pretty && !known && !strcmp(fallback, "??") &&
					       (uintptr_t)loc >> 56 == 0
				       ? j->frames
				       : NULL;
	uint64_t mk = (uint64_t)(uintptr_t)loc | (uint64_t)j->depth << 56;
	struct ptw_buf *text = memo ? ptw_map_get(memo, mk) : NULL;
	if (text) {
		key(j, NULL);
		ptw_buf_add(j->out, text->p, text->len);
		return;
	}
	key(j, k);
	size_t at = j->out->len;
	ptw_buf_putc(j->out, '{');
	j->depth++;
	j->need_comma[j->depth] = false;
	ptw_json_hex(j, "addr", loc->addr);
	ptw_json_string(j, "symbol", loc->symbol ? loc->symbol : fallback);
	ptw_json_bool(j, "placeholder", !loc->symbol && !known);
	ptw_json_string(j, "linkage_name", loc->linkage_name);
	/* where in the function (a stack frame's return address): only when
	 * not at its start */
	if (loc->symbol && loc->symbol_offset)
		ptw_json_hex(j, "symbol_offset", loc->symbol_offset);
	ptw_json_string(j, "module", loc->module);
	if (loc->has_offset)
		ptw_json_hex(j, "offset", loc->offset);
	else
		ptw_json_null(j, "offset");
	ptw_json_string(j, "file", loc->file);
	json_int_or_null(j, "line", loc->line, loc->line);
	struct ptw_json_sink *sink = j->sink;
	j->sink = NULL; /* (its text is copied from out below) */
	ptw_json_end_object(j);
	j->sink = sink;
	if (memo) {
		text = xcalloc(1, sizeof(*text));
		ptw_buf_add(text, j->out->p + at, j->out->len - at);
		ptw_map_put(memo, mk, text);
	}
}

void ptw_json_frames_free(struct ptw_map *frames)
{
	size_t it = 0;
	void *v;
	while (ptw_map_next(frames, &it, NULL, &v)) {
		ptw_buf_free(v);
		free(v);
	}
	ptw_map_free(frames);
}

static void json_tristate(struct ptw_json *j, const char *k, int v)
{
	if (v < 0)
		ptw_json_null(j, k);
	else
		ptw_json_bool(j, k, v);
}


/* open_after_ns and open_where of a span seen open past --open-timeout. */
static void json_open_mark(struct ptw_json *j, const struct ptw_open_mark *m)
{
	if (!m->set) {
		ptw_json_null(j, "open_after_ns");
		ptw_json_null(j, "open_where");
		return;
	}
	ptw_json_uint(j, "open_after_ns", m->after_ns);
	ptw_json_begin_object(j, "open_where");
	ptw_json_uint(j, "open_for_ns", m->for_ns);
	ptw_json_string(j, "state", m->state);
	ptw_json_string(j, "wchan", m->wchan);
	ptw_json_location(j, "pc", m->at, "??", false);
	ptw_json_end_object(j);
}

void ptw_json_span(struct ptw_json *j, const struct ptw_span *sp)
{
	ptw_json_begin_object(j, NULL);
	ptw_json_uint(j, "id", sp->id);
	ptw_json_string(j, "kind", "thread");
	if (sp->pid)
		ptw_json_int(j, "pid", sp->pid);
	if (j->processes) /* -f: its entry in processes (a pid may come back) */
		ptw_json_uint(j, "process", sp->process);
	ptw_json_int(j, "tid", sp->tid);
	if (sp->pthread)
		ptw_json_hex(j, "pthread", sp->pthread);
	else
		ptw_json_null(j, "pthread");
	ptw_json_string(j, "name", sp->name);
	ptw_json_string(j, "origin", ptw_origin_name(sp->origin));
	ptw_json_location(j, "start_routine", sp->start_routine,
		      sp->origin == PTW_ORIGIN_MAIN ? "main" : "pthread_start_routine",
		      sp->origin == PTW_ORIGIN_MAIN);
	if (sp->arg.set)
		ptw_json_hex(j, "arg", sp->arg.v);
	else
		ptw_json_null(j, "arg");
	json_int_or_null(j, "creator_tid", sp->creator_tid, sp->creator_tid);
	json_uint_or_null(j, "creator_span", sp->creator_span, sp->creator_span);
	ptw_json_location(j, "create_site", sp->create_site, "??", false);
	ptw_json_uint(j, "depth", sp->depth);
	json_tristate(j, "detached", sp->detached);
	json_opt(j, "create_ns", sp->create_ns);
	json_opt(j, "start_ns", sp->start_ns);
	json_opt(j, "end_ns", sp->end_ns);
	ptw_json_string(j, "status", ptw_status_name(sp->status));
	if (sp->status == PTW_STATUS_OPEN) {
		ptw_json_null(j, "end");
	} else {
		ptw_json_begin_object(j, "end");
		ptw_json_string(j, "method", ptw_method_name(sp->method));
		ptw_json_string(j, "reason", sp->reason);
		if (sp->value.set)
			ptw_json_hex(j, "value", sp->value.v);
		else
			ptw_json_null(j, "value");
		if (sp->signal)
			ptw_json_string(j, "signal", ptw_signame(sp->signal));
		if (sp->exit_code.set)
			ptw_json_uint(j, "exit_code", sp->exit_code.v);
		if (sp->method == PTW_METHOD_CANCEL && sp->cancel_by)
			ptw_json_int(j, "cancelled_by", sp->cancel_by);
		ptw_json_end_object(j);
	}
	if (sp->joined) {
		ptw_json_begin_object(j, "join");
		ptw_json_int(j, "joiner_tid", sp->joiner_tid);
		ptw_json_uint(j, "call_ns", sp->join_call_ns);
		json_opt(j, "return_ns", sp->join_return_ns);
		json_uint_or_null(j, "wait_ns", sp->join_return_ns.set,
				  sp->join_return_ns.v - sp->join_call_ns);
		ptw_json_end_object(j);
	} else {
		ptw_json_null(j, "join");
	}
	if (sp->cpu.set) {
		ptw_json_begin_object(j, "cpu");
		ptw_json_uint(j, "on_cpu_ns", sp->cpu.on_cpu_ns);
		ptw_json_uint(j, "runnable_ns", sp->cpu.runnable_ns);
		ptw_json_uint(j, "voluntary_switches", sp->cpu.voluntary);
		ptw_json_uint(j, "involuntary_switches", sp->cpu.involuntary);
		ptw_json_end_object(j);
	} else {
		ptw_json_null(j, "cpu");
	}
	if (sp->origin != PTW_ORIGIN_MAIN && sp->create_ns.set && sp->start_ns.set &&
	    sp->start_ns.v >= sp->create_ns.v)
		ptw_json_uint(j, "spawn_latency_ns", sp->start_ns.v - sp->create_ns.v);
	else
		ptw_json_null(j, "spawn_latency_ns");
	uint64_t lifetime;
	if (ptw_span_lifetime(sp, &lifetime))
		ptw_json_uint(j, "lifetime_ns", lifetime);
	else
		ptw_json_null(j, "lifetime_ns");
	ptw_json_bool(j, "uncertain", sp->uncertain);
	json_open_mark(j, &(const struct ptw_open_mark){ .set = sp->open_after_ns.set,
							.after_ns = sp->open_after_ns.v,
							.for_ns = sp->open_for_ns,
							.state = sp->open_state,
							.wchan = sp->open_wchan,
							.at = sp->open_at });
	if (sp->state) {
		ptw_json_string(j, "state", sp->state);
		ptw_json_string(j, "wchan", sp->wchan);
		ptw_json_begin_array(j, "stack");
		for (size_t i = 0; i < sp->nstack; i++)
			ptw_json_location(j, NULL, sp->stack[i], "??", false);
		ptw_json_end_array(j);
		if (sp->wait_kind == PTW_WAIT_NONE) {
			ptw_json_null(j, "waits_for");
		} else {
			ptw_json_begin_object(j, "waits_for");
			ptw_json_string(j, "kind", ptw_wait_kind_name(sp->wait_kind));
			ptw_json_hex(j, "object", sp->wait_object);
			json_int_or_null(j, "owner_tid", sp->wait_owner, sp->wait_owner);
			ptw_json_end_object(j);
		}
	}
	ptw_json_end_object(j);
}

void ptw_json_frame(struct ptw_json *j, const struct ptw_frame *fr)
{
	ptw_json_begin_object(j, NULL);
	ptw_json_uint(j, "id", fr->id);
	ptw_json_string(j, "kind", "frame");
	/* its thread's process */
	if (fr->pid)
		ptw_json_int(j, "pid", fr->pid);
	if (j->processes)
		ptw_json_uint(j, "process", fr->process);
	json_uint_or_null(j, "thread_span", fr->thread_span, fr->thread_span);
	ptw_json_int(j, "tid", fr->tid);
	ptw_json_location(j, "function", fr->function, "??", false);
	/* A call under way at the attach: when it began is not known. */
	json_uint_or_null(j, "entry_ns", !fr->entry_unknown, fr->entry_ns);
	ptw_json_string(j, "entry", fr->entry_unknown ? "before_attach" : "seen");
	json_uint_or_null(j, "return_ns", fr->has_return, fr->return_ns);
	json_uint_or_null(j, "duration_ns", fr->has_return && !fr->entry_unknown,
			  fr->return_ns - fr->entry_ns);
	json_uint_or_null(j, "left_ns", fr->has_left, fr->left_ns);
	ptw_json_uint(j, "depth", fr->depth);
	json_uint_or_null(j, "parent", fr->parent, fr->parent);
	ptw_json_string(j, "status", ptw_frame_status_name(fr->status));
	ptw_json_string(j, "reason", fr->reason);
	/* a signal handler the kernel entered (since ptwatch.spans/5) */
	ptw_json_string(j, "signal", fr->sig ? ptw_signame(fr->sig) : NULL);
	if (fr->has_value)
		ptw_json_hex(j, "value", fr->value);
	else
		ptw_json_null(j, "value");
	json_open_mark(j, fr->open ? fr->open : &(const struct ptw_open_mark){ 0 });
	ptw_json_end_object(j);
}

static void json_object(struct ptw_json *j, const char *k, enum ptw_wait_kind kind, uint64_t object,
			const struct ptw_location *loc)
{
	ptw_json_begin_object(j, k);
	ptw_json_hex(j, "addr", object);
	ptw_json_string(j, "kind", ptw_wait_object_kind(kind));
	ptw_json_string(j, "symbol", loc ? loc->symbol : NULL);
	if (loc && loc->symbol_offset)
		ptw_json_hex(j, "symbol_offset", loc->symbol_offset);
	ptw_json_string(j, "module", loc ? loc->module : NULL);
	ptw_json_end_object(j);
}

void ptw_json_wait(struct ptw_json *j, const struct ptw_wait *w)
{
	ptw_json_begin_object(j, NULL);
	ptw_json_uint(j, "id", w->id);
	ptw_json_string(j, "kind", "wait");
	json_uint_or_null(j, "thread_span", w->thread_span, w->thread_span);
	ptw_json_int(j, "tid", w->tid);
	ptw_json_string(j, "wait", ptw_wait_kind_name(w->kind));
	json_object(j, "object", w->kind, w->object, w->object_loc);
	json_int_or_null(j, "owner_tid", w->owner, w->owner);
	json_uint_or_null(j, "owner_span", w->owner_span, w->owner_span);
	ptw_json_location(j, "site", w->site, "??", false);
	ptw_json_begin_array(j, "stack");
	for (size_t i = 0; i < w->nstack; i++)
		ptw_json_location(j, NULL, w->stack[i], "??", false);
	ptw_json_end_array(j);
	/* A wait under way at the attach: when it began is not known. */
	json_uint_or_null(j, "start_ns", !w->start_unknown, w->start_ns);
	ptw_json_string(j, "start", w->start_unknown ? "before_attach" : "seen");
	json_uint_or_null(j, "end_ns", w->has_end, w->end_ns);
	json_uint_or_null(j, "duration_ns", w->has_end && !w->start_unknown,
			  w->end_ns - w->start_ns);
	json_uint_or_null(j, "left_ns", w->has_left, w->left_ns);
	ptw_json_string(j, "status", ptw_wait_status_name(w->status));
	ptw_json_string(j, "reason", w->reason);
	json_uint_or_null(j, "deadlock", w->deadlock, w->deadlock);
	ptw_json_end_object(j);
}

/* --locks: the waits in all, the most contended objects, each thread's. */
static void json_wait_metrics(struct ptw_json *j, const struct ptw_locks *l)
{
	struct ptw_wait_totals tt;
	ptw_locks_totals(l, &tt);
	ptw_json_begin_object(j, "waits");
	ptw_json_uint(j, "count", tt.count);
	ptw_json_uint(j, "completed", tt.completed);
	ptw_json_uint(j, "unmatched", tt.unmatched);
	ptw_json_uint(j, "open", tt.count - tt.completed - tt.unmatched);
	ptw_json_uint(j, "before_attach", tt.before_attach);
	ptw_json_uint(j, "timed", tt.timed);
	ptw_json_uint(j, "total_ns", tt.total_ns);
	ptw_json_uint(j, "max_ns", tt.max_ns);
	ptw_json_uint(j, "deadlocks", ptw_locks_deadlock_count(l));
	ptw_json_end_object(j);
	struct ptw_object_stats *st;
	size_t nst = ptw_locks_object_stats(l, &st);
	ptw_json_begin_array(j, "contended_objects");
	for (size_t i = 0; i < nst; i++) {
		ptw_json_begin_object(j, NULL);
		json_object(j, "object", st[i].kind, st[i].object, st[i].object_loc);
		ptw_json_uint(j, "waits", st[i].waits);
		ptw_json_uint(j, "completed", st[i].completed);
		ptw_json_uint(j, "timed", st[i].timed);
		ptw_json_uint(j, "total_ns", st[i].total_ns);
		ptw_json_uint(j, "max_ns", st[i].max_ns);
		ptw_json_begin_array(j, "tids");
		for (size_t k = 0; k < st[i].ntids; k++)
			ptw_json_int(j, NULL, st[i].tids[k]);
		ptw_json_end_array(j);
		ptw_json_begin_array(j, "sites");
		for (size_t k = 0; k < st[i].nsites; k++)
			ptw_json_location(j, NULL, st[i].sites[k], "??", false);
		ptw_json_end_array(j);
		ptw_json_end_object(j);
	}
	ptw_json_end_array(j);
	ptw_object_stats_free(st, nst);
	struct ptw_thread_waits *tw;
	size_t ntw = ptw_locks_thread_stats(l, &tw);
	ptw_json_begin_array(j, "thread_waits");
	for (size_t i = 0; i < ntw; i++) {
		ptw_json_begin_object(j, NULL);
		ptw_json_int(j, "tid", tw[i].tid);
		json_uint_or_null(j, "thread_span", tw[i].thread_span, tw[i].thread_span);
		ptw_json_uint(j, "waits", tw[i].waits);
		ptw_json_uint(j, "completed", tw[i].completed);
		ptw_json_uint(j, "timed", tw[i].timed);
		ptw_json_uint(j, "total_ns", tw[i].total_ns);
		ptw_json_uint(j, "max_ns", tw[i].max_ns);
		ptw_json_end_object(j);
	}
	ptw_json_end_array(j);
	free(tw);
}

static void json_distribution(struct ptw_json *j, const char *k, const struct ptw_distribution *d)
{
	ptw_json_begin_object(j, k);
	ptw_json_uint(j, "count", d->count);
	if (d->count) {
		ptw_json_uint(j, "min", d->min);
		ptw_json_uint(j, "p50", d->p50);
		ptw_json_uint(j, "p90", d->p90);
		ptw_json_uint(j, "p99", d->p99);
		ptw_json_uint(j, "max", d->max);
		ptw_json_double(j, "mean", d->mean);
	} else {
		const char *names[] = { "min", "p50", "p90", "p99", "max", "mean" };
		for (size_t i = 0; i < PTW_ARRAY_SIZE(names); i++)
			ptw_json_null(j, names[i]);
	}
	ptw_json_end_object(j);
}

const char *ptw_fate_name(enum ptw_fate fate, bool after_detach)
{
	switch (fate) {
	case PTW_FATE_ENDED:
		return after_detach ? "ended_after_detach" : "ended";
	case PTW_FATE_LIVES_ON:
		return "lives_on";
	case PTW_FATE_STOPPED:
		return "stopped";
	case PTW_FATE_TRACED:
		return "traced";
	default: /* gone or a zombie: it ended once let go, how is not known */
		return "ended_after_detach";
	}
}

const char *ptw_interrupt_action_name(enum ptw_interrupt_action a)
{
	return a == PTW_INTR_TRACED_ON ? "traced_on" : "detached";
}

const char *ptw_interrupt_why_name(enum ptw_interrupt_why w)
{
	switch (w) {
	case PTW_INTR_ATTACHED:
		return "attached";
	case PTW_INTR_TERMINAL:
		return "terminal";
	case PTW_INTR_GROUP:
		return "process_group";
	case PTW_INTR_AGAIN:
		return "again";
	default:
		return "ptwatch_alone";
	}
}

/* The span metrics, of a process or of all (ptw_spans_metrics*). */
static void json_metric_fields(struct ptw_json *j, const struct ptw_metrics *m)
{
	ptw_json_uint(j, "threads_seen", m->threads_seen);
	ptw_json_uint(j, "threads_created", m->threads_created);
	ptw_json_uint(j, "max_active", m->max_active);
	ptw_json_uint(j, "max_depth", m->max_depth);
	json_distribution(j, "spawn_latency_ns", &m->spawn_latency);
	json_distribution(j, "lifetime_ns", &m->lifetime);
	json_distribution(j, "join_wait_ns", &m->join_wait);
	ptw_json_uint(j, "unjoined", m->unjoined);
	ptw_json_uint(j, "open_spans", m->open_spans);
	ptw_json_uint(j, "unmatched_spans", m->unmatched_spans);
	ptw_json_uint(j, "open_timeouts", m->open_timeouts);
}

/* Each process's span of the thread that forked it: the latest span of
 * (its parent process, parent_tid) that began before the fork; 0 if none.
 * One pass over the spans for all processes (a walk per process made a
 * document of thousands of processes quadratic). */
static uint32_t *fork_spans(const struct ptw_report *r)
{
	uint32_t *ids = xcalloc(r->nprocesses + 1, sizeof(*ids));
	/* (parent process, parent tid) -> the first process forked there + 1,
	 * the others chained through next */
	struct ptw_map first = { 0 };
	size_t *next = xcalloc(r->nprocesses + 1, sizeof(*next));
	for (size_t i = 0; i < r->nprocesses; i++) {
		const struct ptw_process *p = &r->processes[i];
		if (!p->id)
			continue;
		uint64_t key = (uint64_t)p->parent_id << 32 | (uint32_t)p->parent_tid;
		next[i] = (size_t)(uintptr_t)ptw_map_get(&first, key);
		ptw_map_put(&first, key, (void *)(uintptr_t)(i + 1));
	}
	size_t n = ptw_spans_count(r->spans);
	for (size_t i = 0; i < n && r->nprocesses; i++) {
		const struct ptw_span *sp = ptw_spans_get(r->spans, i);
		uint64_t key = (uint64_t)sp->process << 32 | (uint32_t)sp->tid;
		uint64_t began = sp->create_ns.set ? sp->create_ns.v
				 : sp->start_ns.set ? sp->start_ns.v
						    : 0;
		for (size_t k = (size_t)(uintptr_t)ptw_map_get(&first, key); k; k = next[k - 1])
			if (began <= r->processes[k - 1].start_ns)
				ids[k - 1] = sp->id;
	}
	free(next);
	ptw_map_free(&first);
	return ids;
}

void ptw_json_processes(struct ptw_json *j, const struct ptw_report *r)
{
	uint32_t *forks = fork_spans(r);
	/* their shares of the metrics (the document's are the total) */
	uint32_t *ids = xcalloc(r->nprocesses + 1, sizeof(*ids));
	for (size_t i = 0; i < r->nprocesses; i++)
		ids[i] = r->processes[i].id;
	struct ptw_metrics *shares = xcalloc(r->nprocesses + 1, sizeof(*shares));
	ptw_spans_metrics_each(r->spans, ids, r->nprocesses, shares);
	ptw_json_begin_array(j, "processes");
	for (size_t i = 0; i < r->nprocesses; i++) {
		const struct ptw_process *p = &r->processes[i];
		ptw_json_begin_object(j, NULL);
		ptw_json_uint(j, "id", p->id);
		ptw_json_int(j, "pid", p->pid);
		if (p->id) {
			ptw_json_uint(j, "parent_process", p->parent_id);
			ptw_json_int(j, "ppid", p->ppid);
			ptw_json_int(j, "parent_tid", p->parent_tid);
			json_uint_or_null(j, "parent_span", forks[i], forks[i]);
		} else {
			ptw_json_null(j, "parent_process");
			ptw_json_null(j, "ppid");
			ptw_json_null(j, "parent_tid");
			ptw_json_null(j, "parent_span");
		}
		ptw_json_string(j, "exe", p->exe);
		ptw_json_begin_array(j, "argv");
		for (char *const *a = p->argv; a && *a; a++)
			ptw_json_string(j, NULL, *a);
		ptw_json_end_array(j);
		ptw_json_uint(j, "start_ns", p->start_ns);
		json_uint_or_null(j, "end_ns", p->end_ns, p->end_ns);
		if (p->exit_kind == PTW_EXIT_CODE) {
			ptw_json_begin_object(j, "exit");
			ptw_json_int(j, "code", p->exit_code);
			ptw_json_end_object(j);
		} else if (p->exit_kind == PTW_EXIT_SIGNAL) {
			ptw_json_begin_object(j, "exit");
			ptw_json_string(j, "signal", ptw_signame(p->exit_signal));
			ptw_json_bool(j, "core_dumped", p->core_dumped);
			ptw_json_end_object(j);
		} else {
			ptw_json_null(j, "exit");
		}
		ptw_json_bool(j, "followed", p->followed);
		if (p->not_followed_why)
			ptw_json_string(j, "not_followed_why", p->not_followed_why);
		ptw_json_bool(j, "detached", p->detached);
		ptw_json_begin_object(j, "metrics");
		json_metric_fields(j, &shares[i]);
		ptw_json_end_object(j);
		ptw_json_end_object(j);
	}
	ptw_json_end_array(j);
	free(shares);
	free(ids);
	free(forks);
}

void ptw_json_head(struct ptw_json *j, const struct ptw_report *r, const char *schema)
{
	ptw_json_string(j, "schema", schema);
	ptw_json_begin_object(j, "tool");
	ptw_json_string(j, "name", "ptwatch");
	ptw_json_string(j, "version", r->tool_version);
	ptw_json_end_object(j);

	ptw_json_begin_object(j, "clock");
	ptw_json_string(j, "id", "monotonic");
	ptw_json_string(j, "unit", "ns");
	ptw_json_int(j, "realtime_offset_ns", r->realtime_offset_ns);
	ptw_json_end_object(j);
}

void ptw_json_target(struct ptw_json *j, const struct ptw_report *r)
{
	ptw_json_begin_object(j, "target");
	ptw_json_int(j, "pid", r->pid);
	ptw_json_string(j, "exe", r->exe ? r->exe : "");
	ptw_json_begin_array(j, "argv");
	for (char *const *a = r->argv; a && *a; a++)
		ptw_json_string(j, NULL, *a);
	ptw_json_end_array(j);
	ptw_json_string(j, "mode", r->mode);
	ptw_json_string(j, "glibc", r->glibc);
	if (r->exit_kind == PTW_EXIT_CODE) {
		ptw_json_begin_object(j, "exit");
		ptw_json_int(j, "code", r->exit_code);
		ptw_json_end_object(j);
	} else if (r->exit_kind == PTW_EXIT_SIGNAL) {
		ptw_json_begin_object(j, "exit");
		ptw_json_string(j, "signal", ptw_signame(r->exit_signal));
		ptw_json_bool(j, "core_dumped", r->core_dumped);
		ptw_json_end_object(j);
	} else {
		ptw_json_null(j, "exit");
	}
	ptw_json_string(j, "fate", ptw_fate_name(r->fate, r->after_detach));
	ptw_json_end_object(j);
}

void ptw_json_session(struct ptw_json *j, const struct ptw_report *r)
{
	ptw_json_begin_object(j, "session");
	ptw_json_uint(j, "start_ns", r->start_ns);
	ptw_json_uint(j, "end_ns", r->end_ns);
	ptw_json_string(j, "end_reason", r->end_reason);
	ptw_json_begin_array(j, "interrupts");
	for (size_t i = 0; i < r->ninterrupts; i++) {
		const struct ptw_interrupt *in = &r->interrupts[i];
		ptw_json_begin_object(j, NULL);
		ptw_json_string(j, "signal", ptw_signame(in->sig));
		ptw_json_uint(j, "ns", in->ns);
		ptw_json_bool(j, "reached_target", in->reached_target);
		ptw_json_string(j, "action", ptw_interrupt_action_name(in->action));
		ptw_json_string(j, "why", ptw_interrupt_why_name(in->why));
		ptw_json_end_object(j);
	}
	ptw_json_end_array(j);
	ptw_json_uint(j, "frozen_ns", r->frozen_ns);
	ptw_json_string(j, "strategy", r->strategy);
	ptw_json_string(j, "backend", r->backend);
	ptw_json_string(j, "backend_why", r->backend_why);
	ptw_json_uint(j, "probes", r->probes);
	ptw_json_uint(j, "probes_stepped", r->probes_stepped);
	ptw_json_begin_object(j, "tracer_cpu_ns");
	ptw_json_uint(j, "user", r->tracer_user_ns);
	ptw_json_uint(j, "sys", r->tracer_sys_ns);
	ptw_json_end_object(j);
	ptw_json_uint(j, "breakpoints", r->breakpoints);
	ptw_json_uint(j, "open_timeout_ns", r->open_timeout_ns);
	ptw_json_begin_object(j, "stops");
	ptw_json_uint(j, "total", r->stops_total);
	for (size_t i = 0; i < r->nstop_kinds; i++)
		if (r->stop_counts[i])
			ptw_json_uint(j, r->stop_names[i], r->stop_counts[i]);
	ptw_json_end_object(j);
	ptw_json_end_object(j);
}

void ptw_json_metrics(struct ptw_json *j, const struct ptw_report *r, bool series)
{
	const struct ptw_frames *frames = ptw_spans_frames(r->spans);
	size_t nframes = ptw_frames_count(frames);
	const struct ptw_locks *locks = ptw_spans_locks(r->spans);
	struct ptw_metrics m;
	ptw_spans_metrics(r->spans, &m);
	ptw_json_begin_object(j, "metrics");
	json_metric_fields(j, &m);
	/* Compact: one [ns, count] pair per line would double the document. */
	bool pretty = j->pretty;
	if (series)
		ptw_json_begin_array(j, "active_series");
	j->pretty = false;
	for (size_t i = 0; series && i < m.active_series_len; i++) {
		ptw_json_begin_array(j, NULL);
		ptw_json_uint(j, NULL, m.active_series[i][0]);
		ptw_json_uint(j, NULL, m.active_series[i][1]);
		ptw_json_end_array(j);
	}
	if (series)
		ptw_json_end_array(j);
	j->pretty = pretty;
	uint64_t calls, completed, unmatched;
	ptw_frames_totals(frames, &calls, &completed, &unmatched);
	(void)nframes;
	if (calls) {
		ptw_json_begin_object(j, "frames");
		ptw_json_uint(j, "count", calls);
		ptw_json_uint(j, "completed", completed);
		ptw_json_uint(j, "unmatched", unmatched);
		ptw_json_uint(j, "open", calls - completed - unmatched);
		ptw_json_end_object(j);
		struct ptw_function_stats *st;
		size_t nst = ptw_frames_stats(frames, &st);
		ptw_json_begin_array(j, "functions");
		for (size_t i = 0; i < nst; i++) {
			ptw_json_begin_object(j, NULL);
			ptw_json_location(j, "function", st[i].function, "??", false);
			ptw_json_uint(j, "calls", st[i].calls);
			ptw_json_uint(j, "completed", st[i].completed);
			ptw_json_uint(j, "total_ns", st[i].total_ns);
			ptw_json_uint(j, "self_ns", st[i].self_ns);
			if (st[i].timed) {
				ptw_json_uint(j, "min_ns", st[i].min_ns);
				ptw_json_uint(j, "p50_ns", st[i].p50_ns);
				ptw_json_uint(j, "p99_ns", st[i].p99_ns);
				ptw_json_uint(j, "max_ns", st[i].max_ns);
			}
			ptw_json_end_object(j);
		}
		ptw_json_end_array(j);
		free(st);
	}
	struct ptw_wait_totals tt;
	ptw_locks_totals(locks, &tt);
	if (tt.count || r->locks)
		json_wait_metrics(j, locks);
	ptw_json_end_object(j);
}

void ptw_json_warnings(struct ptw_json *j, const struct ptw_report *r)
{
	ptw_json_begin_array(j, "warnings");
	for (size_t i = 0; i < r->nwarnings; i++) {
		ptw_json_begin_object(j, NULL);
		ptw_json_string(j, "code", r->warnings[i].code);
		ptw_json_string(j, "message", r->warnings[i].message);
		if (r->warnings[i].count > 1) /* (since ptwatch.spans/6) */
			ptw_json_uint(j, "count", r->warnings[i].count);
		ptw_json_end_object(j);
	}
	ptw_json_end_array(j);
}

void ptw_json_live_deadlock(struct ptw_json *j, const struct ptw_live_deadlock *d)
{
	ptw_json_begin_object(j, NULL);
	ptw_json_begin_array(j, "spans");
	for (size_t k = 0; k < d->n; k++)
		ptw_json_uint(j, NULL, d->thread_spans[k]);
	ptw_json_end_array(j);
	ptw_json_begin_array(j, "tids");
	for (size_t k = 0; k < d->n; k++)
		ptw_json_int(j, NULL, d->tids[k]);
	ptw_json_end_array(j);
	ptw_json_begin_array(j, "waits");
	for (size_t k = 0; k < d->n; k++)
		ptw_json_uint(j, NULL, d->waits[k]);
	ptw_json_end_array(j);
	ptw_json_begin_array(j, "objects");
	for (size_t k = 0; k < d->n; k++)
		ptw_json_hex(j, NULL, d->objects[k]);
	ptw_json_end_array(j);
	ptw_json_uint(j, "ns", d->ns);
	ptw_json_string(j, "confirmed_by", ptw_deadlock_proof_name(d->proof));
	ptw_json_end_object(j);
}

static void report_json(const struct ptw_report *r, struct ptw_buf *out,
			struct ptw_json_sink *sink)
{
	struct ptw_map frame_texts = { 0 };
	struct ptw_json jw = { .out = out, .sink = sink, .pretty = true, .frames = &frame_texts },
			*j = &jw;
	ptw_json_begin_object(j, NULL);
	ptw_json_head(j, r, PTW_SPANS_SCHEMA);
	ptw_json_target(j, r);
	ptw_json_session(j, r);

	if (r->processes)
		ptw_json_processes(j, r);

	j->processes = r->processes != NULL;
	ptw_json_begin_array(j, "spans");
	size_t n = ptw_spans_count(r->spans);
	for (size_t i = 0; i < n; i++)
		ptw_json_span(j, ptw_spans_get(r->spans, i));
	/* --trace: the frame spans follow the thread spans (ids of their own). */
	const struct ptw_frames *frames = ptw_spans_frames(r->spans);
	size_t nframes = ptw_frames_count(frames);
	for (size_t i = 0; i < nframes; i++)
		ptw_json_frame(j, ptw_frames_get(frames, i));
	/* --locks: the wait spans (ids of their own). */
	const struct ptw_locks *locks = ptw_spans_locks(r->spans);
	size_t nwaits = ptw_locks_count(locks);
	for (size_t i = 0; i < nwaits; i++)
		ptw_json_wait(j, ptw_locks_get(locks, i));
	ptw_json_end_array(j);

	ptw_json_metrics(j, r, true);

	size_t nlive = ptw_locks_deadlock_count(locks);
	if (!r->snapshot && (nlive || nwaits || r->locks)) {
		/* found while tracing (--locks), as --snapshot writes them, with
		 * the wait spans and objects of the cycle and when it was found */
		ptw_json_begin_array(j, "deadlocks");
		for (size_t i = 0; i < nlive; i++)
			ptw_json_live_deadlock(j, ptw_locks_deadlock(locks, i));
		ptw_json_end_array(j);
	}
	if (r->snapshot) {
		struct ptw_deadlock *dl;
		size_t ndl = ptw_spans_deadlocks(r->spans, &dl);
		ptw_json_begin_array(j, "deadlocks");
		for (size_t i = 0; i < ndl; i++) {
			ptw_json_begin_object(j, NULL);
			ptw_json_begin_array(j, "spans");
			for (size_t k = 0; k < dl[i].n; k++)
				ptw_json_uint(j, NULL, dl[i].spans[k]->id);
			ptw_json_end_array(j);
			ptw_json_begin_array(j, "tids");
			for (size_t k = 0; k < dl[i].n; k++)
				ptw_json_int(j, NULL, dl[i].spans[k]->tid);
			ptw_json_end_array(j);
			ptw_json_end_object(j);
		}
		ptw_json_end_array(j);
		ptw_deadlocks_free(dl, ndl);
	}

	ptw_json_warnings(j, r);
	ptw_json_end_object(j);
	ptw_buf_putc(out, '\n');
	ptw_json_sink_end(j);
	ptw_json_frames_free(&frame_texts);
}

void ptw_report_json(const struct ptw_report *r, struct ptw_buf *out)
{
	report_json(r, out, NULL);
}

int ptw_report_json_fd(const struct ptw_report *r, int fd)
{
	struct ptw_buf out = { 0 };
	struct ptw_json_sink sink = { .fd = fd };
	report_json(r, &out, &sink);
	ptw_buf_free(&out);
	return sink.err;
}
