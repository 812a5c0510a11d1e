/* SPDX-License-Identifier: MIT */
/* Saved documents and streams read back; see ptw_load.h. */
#define _GNU_SOURCE
#include "ptw_load.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptw_frames.h"
#include "ptw_jsonread.h"
#include "ptw_spans.h"
#include "ptw_symbols.h"
#include "ptw_warnings.h"

/* Everything the report and the spans point to. */
struct store {
	char **strings;
	size_t nstrings;
	struct ptw_location **locs;
	size_t nlocs;
	char **argv;
	struct ptw_warning *warnings;
	size_t nwarnings;
	struct ptw_interrupt *interrupts;
	size_t ninterrupts;
	char **stop_names;
	uint64_t *stop_counts;
	size_t nstops;
	struct ptw_map held; /* stream: span id -> struct ptw_span* begun, not ended */
	/* a filtered report counts what it shows: [ns, +1 | -1] of each span */
	int64_t (*edges)[2];
	size_t nedges;
	struct ptw_map seen; /* stream: span id -> 1 once it ended (a later line is a duplicate) */
};

static const char *keep(struct store *st, const char *s)
{
	if (!s)
		return NULL;
	st->strings = xreallocarray(st->strings, st->nstrings + 1, sizeof(char *));
	return st->strings[st->nstrings++] = xstrdup(s);
}

static const char *str(const struct ptw_jv *o, const char *k)
{
	return ptw_jv_str(ptw_jv_get(o, k));
}

static uint64_t u64(const struct ptw_jv *o, const char *k)
{
	uint64_t v = 0;
	ptw_jv_u64(ptw_jv_get(o, k), &v);
	return v;
}

static int64_t i64(const struct ptw_jv *o, const char *k)
{
	int64_t v = 0;
	ptw_jv_i64(ptw_jv_get(o, k), &v);
	return v;
}

static struct ptw_opt opt(const struct ptw_jv *o, const char *k)
{
	struct ptw_opt r = { 0 };
	r.set = ptw_jv_u64(ptw_jv_get(o, k), &r.v);
	return r;
}

static struct ptw_opt hexopt(const struct ptw_jv *o, const char *k)
{
	struct ptw_opt r = { 0 };
	r.set = ptw_jv_hex(ptw_jv_get(o, k), &r.v);
	return r;
}

static int signum(const char *name)
{
	for (int i = 1; name && i < 65; i++)
		if (!strcmp(ptw_signame(i), name))
			return i;
	return 0;
}

static const struct ptw_location *location(struct store *st, const struct ptw_jv *v)
{
	if (!v || v->type != PTW_J_OBJ)
		return NULL;
	struct ptw_location *loc = xcalloc(1, sizeof(*loc));
	ptw_jv_hex(ptw_jv_get(v, "addr"), &loc->addr);
	const struct ptw_jv *ph = ptw_jv_get(v, "placeholder");
	bool placeholder = ph && ph->type == PTW_J_BOOL && ph->b;
	/* a placeholder ("pthread_start_routine", "??") is no symbol. (A
	 * stripped program's "main", known otherwise, reads back as a symbol.) */
	if (!placeholder)
		loc->symbol = keep(st, str(v, "symbol"));
	loc->linkage_name = keep(st, str(v, "linkage_name"));
	if (loc->symbol)
		ptw_jv_hex(ptw_jv_get(v, "symbol_offset"), &loc->symbol_offset);
	loc->module = keep(st, str(v, "module"));
	loc->has_offset = ptw_jv_hex(ptw_jv_get(v, "offset"), &loc->offset);
	loc->file = keep(st, str(v, "file"));
	loc->line = (int)i64(v, "line");
	st->locs = xreallocarray(st->locs, st->nlocs + 1, sizeof(*st->locs));
	st->locs[st->nlocs++] = loc;
	return loc;
}

static int name_index(const char *s, const char *const *names, size_t n, int fallback)
{
	for (size_t i = 0; s && i < n; i++)
		if (names[i] && !strcmp(names[i], s))
			return (int)i;
	return fallback;
}

static struct ptw_span *span_of(struct store *st, const struct ptw_jv *v)
{
	static const char *const origins[] = { "main", "created", "preexisting", "clone" };
	static const char *const methods[] = { NULL, "return", "pthread_exit", "cancel",
					       "process_exit", "exec", "killed", "detach", "unknown" };
	struct ptw_span *sp = xcalloc(1, sizeof(*sp));
	sp->id = (uint32_t)u64(v, "id");
	sp->tid = (pid_t)i64(v, "tid");
	ptw_jv_hex(ptw_jv_get(v, "pthread"), &sp->pthread);
	sp->name = str(v, "name") ? xstrdup(str(v, "name")) : NULL;
	sp->origin = (enum ptw_origin)name_index(str(v, "origin"), origins, 4, PTW_ORIGIN_CREATED);
	sp->start_routine = location(st, ptw_jv_get(v, "start_routine"));
	sp->arg = hexopt(v, "arg");
	sp->creator_tid = (pid_t)i64(v, "creator_tid");
	sp->creator_span = (uint32_t)u64(v, "creator_span");
	sp->create_site = location(st, ptw_jv_get(v, "create_site"));
	sp->depth = (unsigned)u64(v, "depth");
	const struct ptw_jv *det = ptw_jv_get(v, "detached");
	sp->detached = det && det->type == PTW_J_BOOL ? det->b : -1;
	sp->create_ns = opt(v, "create_ns");
	sp->start_ns = opt(v, "start_ns");
	sp->end_ns = opt(v, "end_ns");
	sp->status = PTW_STATUS_UNMATCHED;
	for (int i = 0; i < PTW_STATUS_N; i++) /* the names the writer uses */
		if (str(v, "status") && !strcmp(str(v, "status"), ptw_status_name((enum ptw_status)i)))
			sp->status = (enum ptw_status)i;
	const struct ptw_jv *end = ptw_jv_get(v, "end");
	if (end && end->type == PTW_J_OBJ) {
		sp->method = (enum ptw_method)name_index(str(end, "method"), methods, 9,
							 PTW_METHOD_UNKNOWN);
		sp->reason = keep(st, str(end, "reason"));
		sp->value = hexopt(end, "value");
		sp->signal = signum(str(end, "signal"));
		sp->cancel_by = (pid_t)i64(end, "cancelled_by");
	}
	const struct ptw_jv *join = ptw_jv_get(v, "join");
	if (join && join->type == PTW_J_OBJ) {
		sp->joined = true;
		sp->joiner_tid = (pid_t)i64(join, "joiner_tid");
		sp->join_call_ns = u64(join, "call_ns");
		sp->join_return_ns = opt(join, "return_ns");
	}
	const struct ptw_jv *unc = ptw_jv_get(v, "uncertain");
	sp->uncertain = unc && unc->type == PTW_J_BOOL && unc->b;
	sp->open_after_ns = opt(v, "open_after_ns");
	/* a snapshot's: where the thread was */
	if (str(v, "state")) {
		static const char *const waits[] = { "none", "mutex", "join", "rwlock", "cond", "other" };
		sp->state = xstrdup(str(v, "state"));
		sp->wchan = str(v, "wchan") ? xstrdup(str(v, "wchan")) : NULL;
		const struct ptw_jv *stack = ptw_jv_get(v, "stack");
		size_t n = stack && stack->type == PTW_J_ARR ? stack->len : 0;
		sp->stack = xcalloc(n + 1, sizeof(*sp->stack));
		for (size_t i = 0; i < n; i++)
			if ((sp->stack[sp->nstack] = location(st, &stack->items[i])))
				sp->nstack++;
		const struct ptw_jv *w = ptw_jv_get(v, "waits_for");
		if (w && w->type == PTW_J_OBJ) {
			sp->wait_kind = (enum ptw_wait_kind)name_index(str(w, "kind"), waits, 6,
								       PTW_WAIT_OTHER);
			ptw_jv_hex(ptw_jv_get(w, "object"), &sp->wait_object);
			sp->wait_owner = (pid_t)i64(w, "owner_tid");
		}
	}
	const struct ptw_jv *ow = ptw_jv_get(v, "open_where");
	if (ow && ow->type == PTW_J_OBJ) {
		sp->open_for_ns = u64(ow, "open_for_ns");
		sp->open_state = str(ow, "state") ? xstrdup(str(ow, "state")) : NULL;
		sp->open_wchan = str(ow, "wchan") ? xstrdup(str(ow, "wchan")) : NULL;
		sp->open_at = location(st, ptw_jv_get(ow, "pc"));
	}
	return sp;
}

static void frame_of(struct store *st, const struct ptw_jv *v, struct ptw_frame *fr)
{
	static const char *const statuses[] = { "open", "completed", "unmatched" };
	memset(fr, 0, sizeof(*fr));
	fr->id = (uint32_t)u64(v, "id");
	fr->thread_span = (uint32_t)u64(v, "thread_span");
	fr->tid = (pid_t)i64(v, "tid");
	fr->function = location(st, ptw_jv_get(v, "function"));
	fr->entry_ns = u64(v, "entry_ns");
	struct ptw_opt o = opt(v, "return_ns");
	fr->has_return = o.set;
	fr->return_ns = o.v;
	o = opt(v, "left_ns");
	fr->has_left = o.set;
	fr->left_ns = o.v;
	fr->depth = (unsigned)u64(v, "depth");
	fr->parent = (uint32_t)u64(v, "parent");
	fr->status = (enum ptw_frame_status)name_index(str(v, "status"), statuses, 3,
							PTW_FRAME_UNMATCHED);
	fr->reason = keep(st, str(v, "reason"));
	o = hexopt(v, "value");
	fr->has_value = o.set;
	fr->value = o.v;
}

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (err && errlen)
		vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* The target and session parts (of a document or of a stream's last line). */
static void header_of(struct store *st, struct ptw_report *r, const struct ptw_jv *doc)
{
	const struct ptw_jv *t = ptw_jv_get(doc, "target"), *se = ptw_jv_get(doc, "session");
	const struct ptw_jv *tool = ptw_jv_get(doc, "tool"), *clock = ptw_jv_get(doc, "clock");
	if (tool)
		r->tool_version = keep(st, str(tool, "version"));
	if (clock)
		r->realtime_offset_ns = i64(clock, "realtime_offset_ns");
	if (t) {
		r->pid = (pid_t)i64(t, "pid");
		r->exe = keep(st, str(t, "exe"));
		const struct ptw_jv *argv = ptw_jv_get(t, "argv");
		if (argv && argv->type == PTW_J_ARR) {
			for (size_t i = 0; st->argv && st->argv[i]; i++)
				free(st->argv[i]);
			free(st->argv);
			st->argv = xcalloc(argv->len + 1, sizeof(char *));
			for (size_t i = 0; i < argv->len; i++)
				st->argv[i] = xstrdup(ptw_jv_str(&argv->items[i]) ? ptw_jv_str(&argv->items[i]) : "");
			r->argv = st->argv;
		}
		r->mode = keep(st, str(t, "mode"));
		r->glibc = keep(st, str(t, "glibc"));
		const struct ptw_jv *ex = ptw_jv_get(t, "exit");
		if (ex && ex->type == PTW_J_OBJ) {
			if (ptw_jv_get(ex, "code")) {
				r->exit_kind = PTW_EXIT_CODE;
				r->exit_code = (int)i64(ex, "code");
			} else {
				r->exit_kind = PTW_EXIT_SIGNAL;
				r->exit_signal = signum(str(ex, "signal"));
				const struct ptw_jv *cd = ptw_jv_get(ex, "core_dumped");
				r->core_dumped = cd && cd->type == PTW_J_BOOL && cd->b;
			}
		}
		const char *fate = str(t, "fate");
		r->fate = PTW_FATE_ENDED;
		if (fate && !strcmp(fate, "ended_after_detach")) {
			r->after_detach = true;
			if (r->exit_kind == PTW_EXIT_NONE)
				r->fate = PTW_FATE_GONE;
		} else if (fate && !strcmp(fate, "lives_on")) {
			r->fate = PTW_FATE_LIVES_ON;
		} else if (fate && !strcmp(fate, "stopped")) {
			r->fate = PTW_FATE_STOPPED;
		} else if (fate && !strcmp(fate, "traced")) {
			r->fate = PTW_FATE_TRACED;
			/* the document does not say by whom: ptwatch's own tracer, which
			 * is what the live summary says in the usual case */
			r->traced_by = getpid();
		}
	}
	if (se) {
		r->start_ns = u64(se, "start_ns");
		r->end_ns = u64(se, "end_ns");
		r->end_reason = keep(st, str(se, "end_reason"));
		r->frozen_ns = u64(se, "frozen_ns");
		r->strategy = keep(st, str(se, "strategy"));
		const struct ptw_jv *cpu = ptw_jv_get(se, "tracer_cpu_ns");
		r->tracer_user_ns = u64(cpu, "user");
		r->tracer_sys_ns = u64(cpu, "sys");
		r->breakpoints = (size_t)u64(se, "breakpoints");
		r->open_timeout_ns = u64(se, "open_timeout_ns");
		const struct ptw_jv *stops = ptw_jv_get(se, "stops");
		if (stops && stops->type == PTW_J_OBJ) {
			r->stops_total = u64(stops, "total");
			st->stop_names = xcalloc(stops->len + 1, sizeof(char *));
			st->stop_counts = xcalloc(stops->len + 1, sizeof(uint64_t));
			for (size_t i = 0; i < stops->len; i++) {
				if (!strcmp(stops->keys[i], "total"))
					continue;
				st->stop_names[st->nstops] = xstrdup(stops->keys[i]);
				ptw_jv_u64(&stops->items[i], &st->stop_counts[st->nstops]);
				st->nstops++;
			}
			r->stop_names = (const char *const *)st->stop_names;
			r->stop_counts = st->stop_counts;
			r->nstop_kinds = st->nstops;
		}
		const struct ptw_jv *in = ptw_jv_get(se, "interrupts");
		for (size_t i = 0; in && in->type == PTW_J_ARR && i < in->len; i++) {
			const struct ptw_jv *x = &in->items[i];
			st->interrupts = xreallocarray(st->interrupts, st->ninterrupts + 1,
						       sizeof(*st->interrupts));
			struct ptw_interrupt *pi = &st->interrupts[st->ninterrupts++];
			memset(pi, 0, sizeof(*pi));
			pi->sig = signum(str(x, "signal"));
			pi->ns = u64(x, "ns");
			const struct ptw_jv *rt = ptw_jv_get(x, "reached_target");
			pi->reached_target = rt && rt->type == PTW_J_BOOL && rt->b;
			const char *a = str(x, "action");
			pi->action = a && !strcmp(a, "traced_on") ? PTW_INTR_TRACED_ON : PTW_INTR_DETACHED;
			static const char *const whys[] = { "attached", "terminal", "process_group",
							     "again", "ptwatch_alone" };
			pi->why = (enum ptw_interrupt_why)name_index(str(x, "why"), whys, 5,
								    PTW_INTR_PTWATCH_ALONE);
		}
		r->interrupts = st->interrupts;
		r->ninterrupts = st->ninterrupts;
	}
}

static void warnings_of(struct store *st, struct ptw_report *r, const struct ptw_jv *arr)
{
	for (size_t i = 0; arr && arr->type == PTW_J_ARR && i < arr->len; i++) {
		st->warnings = xreallocarray(st->warnings, st->nwarnings + 1, sizeof(*st->warnings));
		st->warnings[st->nwarnings].code = xstrdup(str(&arr->items[i], "code") ?: "?");
		st->warnings[st->nwarnings].message = xstrdup(str(&arr->items[i], "message") ?: "");
		st->nwarnings++;
	}
	r->warnings = st->warnings;
	r->nwarnings = st->nwarnings;
}

static void counters_of(struct ptw_spans *spans, const struct ptw_jv *m,
			const struct ptw_text_filter *filter)
{
	if (!m || (filter && (filter->ntids || filter->routine)))
		return; /* a filtered report counts what it shows */
	ptw_spans_set_counters(spans, u64(m, "threads_created"), u64(m, "max_active"),
			       u64(m, "max_depth"));
}

static void add_span(struct ptw_loaded *l, struct store *st, const struct ptw_jv *v,
		     const struct ptw_text_filter *filter)
{
	struct ptw_span *sp = span_of(st, v);
	if (filter && !ptw_text_filter_span(filter, sp)) {
		free(sp->name);
		free(sp->open_state);
		free(sp->open_wchan);
		free(sp->state);
		free(sp->wchan);
		free(sp->stack);
		free(sp);
		return;
	}
	if (filter && (filter->ntids || filter->routine)) {
		/* alive from its creation (or start) to its end, as the engine counts */
		struct ptw_opt from = sp->create_ns.set ? sp->create_ns : sp->start_ns;
		if (from.set) {
			st->edges = xreallocarray(st->edges, st->nedges + 2, sizeof(*st->edges));
			st->edges[st->nedges][0] = (int64_t)from.v;
			st->edges[st->nedges++][1] = 1;
			st->edges[st->nedges][0] = sp->end_ns.set ? (int64_t)sp->end_ns.v : INT64_MAX;
			st->edges[st->nedges++][1] = -1;
		}
	}
	ptw_spans_add_final(l->report.spans, sp);
	ptw_spans_collect(l->report.spans);
}

/* Every frame's self time: its completed children's time off its own. */
static void frames_of(struct store *st, struct ptw_spans *spans, const struct ptw_jv *arr,
		      const struct ptw_text_filter *filter)
{
	struct ptw_map idx = { 0 };
	struct ptw_frame *all = NULL;
	size_t n = 0;
	for (size_t i = 0; arr && i < arr->len; i++) {
		const struct ptw_jv *v = &arr->items[i];
		const char *kind = str(v, "kind");
		if (!kind || strcmp(kind, "frame"))
			continue;
		all = xreallocarray(all, n + 1, sizeof(*all));
		frame_of(st, v, &all[n]);
		if (filter && filter->ntids) {
			bool want = false;
			for (size_t k = 0; k < filter->ntids; k++)
				want |= filter->tids[k] == all[n].tid;
			if (!want)
				continue;
		}
		ptw_map_put(&idx, all[n].id, (void *)(uintptr_t)(n + 1));
		n++;
	}
	for (size_t i = 0; i < n; i++) {
		uintptr_t p = all[i].parent ? (uintptr_t)ptw_map_get(&idx, all[i].parent) : 0;
		if (p && all[i].status == PTW_FRAME_COMPLETED && all[i].return_ns >= all[i].entry_ns)
			all[p - 1].child_ns += all[i].return_ns - all[i].entry_ns;
	}
	struct ptw_frames *f = ptw_spans_frames_mut(spans);
	for (size_t i = 0; i < n; i++)
		ptw_frames_add(f, &all[i]);
	free(all);
	ptw_map_free(&idx);
}

static int load_document(struct ptw_loaded *l, struct store *st, const struct ptw_jv *doc,
			 const struct ptw_text_filter *filter, char *err, size_t errlen)
{
	const struct ptw_jv *spans = ptw_jv_get(doc, "spans");
	if (!spans || spans->type != PTW_J_ARR || !ptw_jv_get(doc, "metrics"))
		return fail(err, errlen, "not a spans document (no spans or metrics)");
	header_of(st, &l->report, doc);
	warnings_of(st, &l->report, ptw_jv_get(doc, "warnings"));
	counters_of(l->report.spans, ptw_jv_get(doc, "metrics"), filter);
	const struct ptw_jv *dl = ptw_jv_get(doc, "deadlocks");
	l->report.snapshot = dl && dl->type == PTW_J_ARR;
	for (size_t i = 0; i < spans->len; i++) {
		const char *kind = str(&spans->items[i], "kind");
		if (kind && !strcmp(kind, "thread"))
			add_span(l, st, &spans->items[i], filter);
	}
	frames_of(st, l->report.spans, spans, filter);
	return 0;
}

static void drop_held(struct ptw_loaded *l, struct store *st, uint32_t id, bool add,
		      const struct ptw_text_filter *filter)
{
	struct ptw_jv *v = ptw_map_del(&st->held, id);
	if (v && add)
		add_span(l, st, v, filter);
	ptw_jv_free(v);
}

static int load_stream(struct ptw_loaded *l, struct store *st, const char *text, size_t len,
		       const struct ptw_text_filter *filter, char *err, size_t errlen)
{
	struct ptw_jv frames = { .type = PTW_J_ARR };
	size_t frames_cap = 0;
	bool header = false, end = false;
	size_t lineno = 0;
	int ret = 0;
	for (size_t at = 0; at < len && !ret;) {
		const char *nl = memchr(text + at, '\n', len - at);
		size_t n = nl ? (size_t)(nl - (text + at)) : len - at;
		const char *line = text + at;
		at += n + (nl != NULL);
		lineno++;
		if (!n)
			continue;
		struct ptw_jv *v;
		char why[160];
		if (ptw_json_parse(line, n, &v, why, sizeof(why)) < 0) {
			if (!nl && header) { /* a last line cut short: the run was */
				l->truncated = true;
				break;
			}
			ret = fail(err, errlen, "line %zu: %s", lineno, why);
			break;
		}
		const char *type = str(v, "type");
		if (!header) {
			if (!type || strcmp(type, "header"))
				ret = fail(err, errlen, "line %zu: a stream begins with its header", lineno);
			header = true;
			header_of(st, &l->report, v);
			l->report.start_ns = u64(ptw_jv_get(v, "session"), "start_ns");
			l->report.open_timeout_ns = u64(ptw_jv_get(v, "session"), "open_timeout_ns");
		} else if (!type) {
			ret = fail(err, errlen, "line %zu: no type", lineno);
		} else if (!strcmp(type, "span_open") || !strcmp(type, "span")) {
			const struct ptw_jv *sv = ptw_jv_get(v, "span");
			uint64_t id = u64(sv, "id");
			if (!sv || sv->type != PTW_J_OBJ || !id || id > UINT32_MAX) {
				ret = fail(err, errlen, "line %zu: a span without an id", lineno);
			} else if (!strcmp(type, "span_open")) {
				if (!ptw_map_get(&st->seen, id) && !ptw_map_get(&st->held, id)) {
					/* kept until it ends (or the stream does) */
					struct ptw_jv *copy = xcalloc(1, sizeof(*copy));
					*copy = *sv;
					memset((struct ptw_jv *)sv, 0, sizeof(*sv));
					ptw_map_put(&st->held, id, copy);
				}
			} else if (!ptw_map_get(&st->seen, id)) {
				drop_held(l, st, (uint32_t)id, false, filter);
				ptw_map_put(&st->seen, id, (void *)1);
				add_span(l, st, sv, filter);
			}
			/* (a span twice: the tracer's line is the one that counts;
			 * the restorer may repeat one it had not heard the end of) */
		} else if (!strcmp(type, "frame")) {
			const struct ptw_jv *fv = ptw_jv_get(v, "frame");
			if (fv && fv->type == PTW_J_OBJ) {
				if (frames.len == frames_cap) {
					frames_cap = frames_cap ? frames_cap * 2 : 64;
					frames.items = xreallocarray(frames.items, frames_cap,
								     sizeof(*frames.items));
				}
				frames.items[frames.len++] = *fv;
				memset((struct ptw_jv *)fv, 0, sizeof(*fv));
			}
		} else if (!strcmp(type, "metrics")) {
			end = true;
			header_of(st, &l->report, v);
			warnings_of(st, &l->report, ptw_jv_get(v, "warnings"));
			counters_of(l->report.spans, ptw_jv_get(v, "metrics"), filter);
		}
		/* warning and open lines: the last line has them all */
		ptw_jv_free(v);
	}
	/* spans that began and never ended in the stream */
	size_t it = 0;
	uint64_t id;
	void *val;
	uint32_t *ids = NULL;
	size_t nids = 0;
	while (ptw_map_next(&st->held, &it, &id, &val)) {
		ids = xreallocarray(ids, nids + 1, sizeof(*ids));
		ids[nids++] = (uint32_t)id;
	}
	for (size_t i = 0; i < nids; i++)
		drop_held(l, st, ids[i], !ret, filter);
	free(ids);
	if (!ret) {
		frames_of(st, l->report.spans, &frames, filter);
		if (!header)
			ret = fail(err, errlen, "empty stream");
		if (!end)
			l->truncated = true;
	}
	for (size_t i = 0; i < frames.len; i++) {
		struct ptw_jv *fv = xmalloc(sizeof(*fv));
		*fv = frames.items[i];
		ptw_jv_free(fv);
	}
	free(frames.items);
	if (l->truncated && !ret && !l->report.end_reason) {
		l->report.end_reason = "cut";
		st->warnings = xreallocarray(st->warnings, st->nwarnings + 1, sizeof(*st->warnings));
		st->warnings[st->nwarnings].code = xstrdup(ptw_warning_code(PTW_W_STREAM_CUT));
		st->warnings[st->nwarnings].message =
			xstrdup("the stream ends before its last line (the run was cut short): "
				"spans without an end are shown open");
		st->nwarnings++;
		l->report.warnings = st->warnings;
		l->report.nwarnings = st->nwarnings;
	}
	return ret;
}

static int by_edge(const void *x, const void *y)
{
	const int64_t *a = x, *b = y;
	if (a[0] != b[0])
		return a[0] < b[0] ? -1 : 1;
	return a[1] < b[1] ? -1 : a[1] > b[1]; /* ends first at the same time */
}

/* The counters of the spans shown: created ones, most alive at once,
 * deepest. */
static void filtered_counters(struct ptw_loaded *l, struct store *st)
{
	qsort(st->edges, st->nedges, sizeof(*st->edges), by_edge);
	int64_t live = 0, most = 0;
	for (size_t i = 0; i < st->nedges; i++) {
		live += st->edges[i][1];
		if (live > most)
			most = live;
	}
	struct ptw_metrics m;
	ptw_spans_metrics(l->report.spans, &m); /* what add_final counted */
	ptw_spans_set_counters(l->report.spans, m.threads_created, (uint64_t)most, m.max_depth);
}

/* "ptwatch.spans/4" -> is it ours, another version of ours, or not ours? */
static int check_schema(const char *schema, const char *want, char *err, size_t errlen)
{
	if (schema && !strcmp(schema, want))
		return 0;
	if (schema && (!strncmp(schema, "ptwatch.spans/", 14) || !strncmp(schema, "ptwatch.lines/", 14)))
		return fail(err, errlen,
			    "schema %s is not supported (this ptwatch reads %s and %s)", schema,
			    PTW_SPANS_SCHEMA, PTW_LINES_SCHEMA);
	return fail(err, errlen, "not a ptwatch spans document or --json-lines stream");
}

int ptw_load(const char *text, size_t len, bool streaming, const struct ptw_text_filter *filter,
	     struct ptw_loaded **ret, char *err, size_t errlen)
{
	struct ptw_loaded *l = xcalloc(1, sizeof(*l));
	struct store *st = xcalloc(1, sizeof(*st));
	l->priv = st;
	l->report.spans = ptw_spans_new();
	l->report.strategy = "?";
	int r;
	struct ptw_jv *doc = NULL;
	char why[160];
	if (ptw_json_parse(text, len, &doc, why, sizeof(why)) == 0) {
		r = check_schema(str(doc, "schema"), PTW_SPANS_SCHEMA, err, errlen);
		if (!r)
			r = load_document(l, st, doc, filter, err, errlen);
		ptw_jv_free(doc);
	} else {
		/* a stream: its first line alone is a JSON object */
		const char *nl = memchr(text, '\n', len);
		struct ptw_jv *first = NULL;
		if (!nl || ptw_json_parse(text, (size_t)(nl - text), &first, NULL, 0) < 0) {
			r = fail(err, errlen, "%s", why);
		} else {
			r = check_schema(str(first, "schema"), PTW_LINES_SCHEMA, err, errlen);
			if (!r) {
				l->stream = true;
				if (streaming)
					ptw_spans_set_streaming(l->report.spans, NULL, NULL);
				r = load_stream(l, st, text, len, filter, err, errlen);
			}
		}
		ptw_jv_free(first);
	}
	if (r < 0) {
		ptw_loaded_free(l);
		return r;
	}
	if (filter && (filter->ntids || filter->routine))
		filtered_counters(l, st);
	ptw_spans_finish(l->report.spans);
	ptw_spans_retire_all(l->report.spans);
	if (!l->report.mode)
		l->report.mode = "launch";
	*ret = l;
	return 0;
}

void ptw_loaded_free(struct ptw_loaded *l)
{
	if (!l)
		return;
	struct store *st = l->priv;
	ptw_spans_free(l->report.spans);
	size_t it = 0;
	void *v;
	while (ptw_map_next(&st->held, &it, NULL, &v))
		ptw_jv_free(v);
	ptw_map_free(&st->held);
	ptw_map_free(&st->seen);
	for (size_t i = 0; i < st->nstrings; i++)
		free(st->strings[i]);
	free(st->strings);
	for (size_t i = 0; i < st->nlocs; i++)
		free(st->locs[i]);
	free(st->locs);
	for (size_t i = 0; st->argv && st->argv[i]; i++)
		free(st->argv[i]);
	free(st->argv);
	for (size_t i = 0; i < st->nwarnings; i++) {
		free(st->warnings[i].code);
		free(st->warnings[i].message);
	}
	free(st->warnings);
	free(st->interrupts);
	free(st->edges);
	for (size_t i = 0; i < st->nstops; i++)
		free(st->stop_names[i]);
	free(st->stop_names);
	free(st->stop_counts);
	free(st);
	free(l);
}
