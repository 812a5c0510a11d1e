/* SPDX-License-Identifier: MIT */
/* Saved documents and streams read back, with json-c; see ptw_load.h. */
#define _GNU_SOURCE
#include "ptw_load.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <json-c/json.h>

#include "ptw_frames.h"
#include "ptw_locks.h"
#include "ptw_spans.h"
#include "ptw_symbols.h"
#include "ptw_warnings.h"

/* Everything the report and the spans point to. */
struct store {
	char **strings;
	size_t nstrings, capstrings;
	struct ptw_location **locs;
	size_t nlocs, caplocs;
	char **argv;
	struct ptw_warning *warnings;
	size_t nwarnings;
	struct ptw_interrupt *interrupts;
	size_t ninterrupts;
	char **stop_names;
	uint64_t *stop_counts;
	size_t nstops;
	struct ptw_process *procs;
	size_t nprocs;
	char ***proc_argv;
	/* a filtered report counts what it shows: [ns, +1 | -1] of each span */
	int64_t (*edges)[2];
	size_t nedges, capedges;
};

/* What one load needs on the way. */
struct ld {
	struct ptw_loaded *l;
	struct store *st;
	const struct ptw_text_filter *filter;
	bool filtered; /* --tid or --routine */
	bool streaming;
	char *err;
	size_t errlen;
	bool failed;
	size_t lineno; /* a stream's line being read (0: a document) */
	/* a document, or a stream's spans when they are all held: added once
	 * sorted by id (one sort, whatever the order of the file) */
	struct ptw_span **pending;
	size_t npending, cappending;
	/* a stream */
	struct ptw_map held;	  /* span id -> struct ptw_span* begun, not ended */
	size_t nheld;
	struct ptw_map seen;	  /* span id -> 1 once it ended (a later line is a repeat) */
	struct ptw_map waits_seen; /* wait id -> 1: a document's twice is refused, a
				    * stream's repeat dropped (as a span's) */
	struct ptw_map kept;	  /* filtered: thread span id -> 1 shown, 2 not */
	struct ptw_map child_ns;  /* frame id -> time in its completed children so far */
	struct ptw_frame *frames; /* a stream's frames, when they are all held */
	struct ptw_open_mark **marks; /* the frames' marks of being seen open */
	size_t nmarks;
	size_t nframes, capframes;
	uint64_t max_active;	  /* the most "active" a span_open line said */
	int read_errno;
	char ctx[48];		  /* a document's: "span 5: " */
	bool header, metrics;
	bool warning_lines;	  /* warnings so far are the warning lines' */
};

/* ---- errors: one line, the first one ---- */

static bool bad(struct ld *ld, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool bad(struct ld *ld, const char *fmt, ...)
{
	if (ld->failed)
		return false;
	ld->failed = true;
	if (!ld->err || !ld->errlen)
		return false;
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (ld->lineno)
		snprintf(ld->err, ld->errlen, "line %zu: %s", ld->lineno, msg);
	else
		snprintf(ld->err, ld->errlen, "%s%s", ld->ctx, msg);
	return false;
}

/* ---- the store ---- */

static const char *keep(struct store *st, const char *s)
{
	if (!s)
		return NULL;
	if (st->nstrings == st->capstrings) {
		st->capstrings = st->capstrings ? 2 * st->capstrings : 64;
		st->strings = xreallocarray(st->strings, st->capstrings, sizeof(char *));
	}
	return st->strings[st->nstrings++] = xstrdup(s);
}

static void free_argv(char **argv)
{
	for (size_t i = 0; argv && argv[i]; i++)
		free(argv[i]);
	free(argv);
}

static void free_warnings(struct store *st)
{
	for (size_t i = 0; i < st->nwarnings; i++) {
		free(st->warnings[i].code);
		free(st->warnings[i].message);
	}
	free(st->warnings);
	st->warnings = NULL;
	st->nwarnings = 0;
}

static void add_warning(struct store *st, const char *code, const char *message, unsigned count)
{
	st->warnings = xreallocarray(st->warnings, st->nwarnings + 1, sizeof(*st->warnings));
	st->warnings[st->nwarnings].code = xstrdup(code);
	st->warnings[st->nwarnings].message = xstrdup(message);
	st->warnings[st->nwarnings].count = count;
	st->nwarnings++;
}

/* ---- values (absent, null or of another type: unknown) ---- */

static json_object *get(json_object *o, const char *k)
{
	json_object *v = NULL;
	if (!o || !json_object_is_type(o, json_type_object) || !json_object_object_get_ex(o, k, &v))
		return NULL;
	return v;
}

static bool is(json_object *v, json_type t)
{
	return v && json_object_is_type(v, t);
}

static size_t arr_len(json_object *v)
{
	return is(v, json_type_array) ? json_object_array_length(v) : 0;
}

static const char *str_max(struct ld *ld, json_object *o, const char *k, size_t max)
{
	json_object *v = get(o, k);
	if (!is(v, json_type_string))
		return NULL;
	size_t n = (size_t)json_object_get_string_len(v);
	if (n > max) {
		bad(ld, "\"%s\" is a string of %zu bytes (report reads at most %zu)", k, n, max);
		return NULL;
	}
	return json_object_get_string(v);
}

static const char *str(struct ld *ld, json_object *o, const char *k)
{
	return str_max(ld, o, k, PTW_LOAD_MAX_STRING);
}

static bool str_is(struct ld *ld, json_object *o, const char *k, const char *want)
{
	const char *s = str(ld, o, k);
	return s && !strcmp(s, want);
}

static bool boolean(json_object *o, const char *k)
{
	json_object *v = get(o, k);
	return is(v, json_type_boolean) && json_object_get_boolean(v);
}

/*
 * An integer within [0, max]: true and *ret; false (*ret 0) when absent,
 * null or not an integer. Beyond the range the file is refused. json-c
 * saturates what does not fit 64 bits: UINT64_MAX and INT64_MIN, which no
 * field of a session takes, are refused as out of range.
 */
static bool u64_of(struct ld *ld, json_object *v, const char *what, uint64_t max, uint64_t *ret)
{
	*ret = 0;
	if (!is(v, json_type_int))
		return false;
	int64_t i = json_object_get_int64(v);
	uint64_t u = json_object_get_uint64(v);
	if (i < 0)
		return bad(ld, "\"%s\" is %" PRId64 " (it is at least 0)", what, i);
	if (u == UINT64_MAX || u > max)
		return bad(ld, "\"%s\" is %" PRIu64 ", more than a session can reach (at most %" PRIu64 ")",
			   what, u, max);
	*ret = u;
	return true;
}

static uint64_t u64m(struct ld *ld, json_object *o, const char *k, uint64_t max)
{
	uint64_t v;
	u64_of(ld, get(o, k), k, max, &v);
	return v;
}

/* A timestamp, a duration, a count. */
static uint64_t num(struct ld *ld, json_object *o, const char *k)
{
	return u64m(ld, o, k, UINT64_MAX - 1);
}

static struct ptw_opt opt(struct ld *ld, json_object *o, const char *k)
{
	struct ptw_opt r = { 0 };
	r.set = u64_of(ld, get(o, k), k, UINT64_MAX - 1, &r.v);
	return r;
}

static int64_t i64m(struct ld *ld, json_object *o, const char *k, int64_t min, int64_t max)
{
	json_object *v = get(o, k);
	if (!is(v, json_type_int))
		return 0;
	int64_t i = json_object_get_int64(v);
	uint64_t u = json_object_get_uint64(v);
	if (i == INT64_MIN || i < min || (i >= 0 && u > (uint64_t)max)) {
		if (i >= 0)
			bad(ld, "\"%s\" is %" PRIu64 " (at most %" PRId64 ")", k, u, max);
		else
			bad(ld, "\"%s\" is %" PRId64 " (at least %" PRId64 ")", k, i, min);
		return 0;
	}
	return i;
}

/* A pid or tid, 0 when unknown. */
static pid_t pid_of(struct ld *ld, json_object *o, const char *k)
{
	return (pid_t)i64m(ld, o, k, 0, PTW_LOAD_MAX_PID);
}

/* "0x..." as the document writes addresses and values. */
static bool hex_of(json_object *v, uint64_t *ret)
{
	if (!is(v, json_type_string))
		return false;
	const char *s = json_object_get_string(v);
	if (s[0] != '0' || (s[1] != 'x' && s[1] != 'X') || !s[2] || strlen(s) > 18)
		return false;
	uint64_t x = 0;
	for (const char *c = s + 2; *c; c++) {
		int d = *c >= '0' && *c <= '9'	 ? *c - '0'
			: *c >= 'a' && *c <= 'f' ? *c - 'a' + 10
			: *c >= 'A' && *c <= 'F' ? *c - 'A' + 10
						 : -1;
		if (d < 0)
			return false;
		x = x << 4 | (uint64_t)d;
	}
	*ret = x;
	return true;
}

static struct ptw_opt hexopt(json_object *o, const char *k)
{
	struct ptw_opt r = { 0 };
	r.set = hex_of(get(o, k), &r.v);
	return r;
}

static int signum(const char *name)
{
	for (int i = 1; name && i < 65; i++)
		if (!strcmp(ptw_signame(i), name))
			return i;
	return 0;
}

static int name_index(const char *s, const char *const *names, size_t n, int fallback)
{
	for (size_t i = 0; s && i < n; i++)
		if (names[i] && !strcmp(names[i], s))
			return (int)i;
	return fallback;
}

static struct ptw_location *new_location(struct store *st)
{
	struct ptw_location *loc = xcalloc(1, sizeof(*loc));
	if (st->nlocs == st->caplocs) {
		st->caplocs = st->caplocs ? 2 * st->caplocs : 64;
		st->locs = xreallocarray(st->locs, st->caplocs, sizeof(*st->locs));
	}
	st->locs[st->nlocs++] = loc;
	return loc;
}

static const struct ptw_location *location(struct ld *ld, json_object *v)
{
	if (!is(v, json_type_object))
		return NULL;
	struct store *st = ld->st;
	struct ptw_location *loc = new_location(st);
	hex_of(get(v, "addr"), &loc->addr);
	/* a placeholder ("pthread_start_routine", "??") is no symbol. (A
	 * stripped program's "main", known otherwise, reads back as a symbol.) */
	if (!boolean(v, "placeholder"))
		loc->symbol = keep(st, str(ld, v, "symbol"));
	loc->linkage_name = keep(st, str(ld, v, "linkage_name"));
	if (loc->symbol)
		hex_of(get(v, "symbol_offset"), &loc->symbol_offset);
	loc->module = keep(st, str(ld, v, "module"));
	loc->has_offset = hex_of(get(v, "offset"), &loc->offset);
	loc->file = keep(st, str(ld, v, "file"));
	loc->line = (int)i64m(ld, v, "line", 0, INT_MAX);
	return loc;
}

/* A stack: at most PTW_LOAD_MAX_STACK frames. */
static const struct ptw_location **stack_of(struct ld *ld, json_object *arr, size_t *ret_n)
{
	size_t n = arr_len(arr);
	*ret_n = 0;
	if (n > PTW_LOAD_MAX_STACK) {
		bad(ld, "a stack of %zu frames (report reads at most %d)", n, PTW_LOAD_MAX_STACK);
		n = 0;
	}
	const struct ptw_location **stack = xcalloc(n + 1, sizeof(*stack));
	for (size_t i = 0; i < n; i++)
		if ((stack[*ret_n] = location(ld, json_object_array_get_idx(arr, i))))
			(*ret_n)++;
	return stack;
}

/* ---- thread spans ---- */

static void span_free(struct ptw_span *sp)
{
	if (!sp)
		return;
	free(sp->name);
	free(sp->open_state);
	free(sp->open_wchan);
	free(sp->state);
	free(sp->wchan);
	free(sp->stack);
	free(sp);
}

static char *dup_or_null(const char *s)
{
	return s ? xstrdup(s) : NULL;
}

static struct ptw_span *span_of(struct ld *ld, json_object *v)
{
	static const char *const origins[] = { "main", "created", "preexisting", "clone" };
	static const char *const methods[] = { NULL, "return", "pthread_exit", "cancel",
					       "process_exit", "exec", "killed", "detach", "unknown" };
	struct store *st = ld->st;
	uint64_t id;
	if (!u64_of(ld, get(v, "id"), "id", UINT32_MAX, &id) || !id) {
		bad(ld, "a span without an id");
		return NULL;
	}
	struct ptw_span *sp = xcalloc(1, sizeof(*sp));
	sp->id = (uint32_t)id;
	snprintf(ld->ctx, sizeof(ld->ctx), "span %u: ", sp->id);
	sp->pid = pid_of(ld, v, "pid");
	sp->process = (uint32_t)u64m(ld, v, "process", PTW_LOAD_MAX_PROCESSES);
	sp->tid = pid_of(ld, v, "tid");
	hex_of(get(v, "pthread"), &sp->pthread);
	sp->name = dup_or_null(str(ld, v, "name"));
	sp->origin = (enum ptw_origin)name_index(str(ld, v, "origin"), origins, 4, PTW_ORIGIN_CREATED);
	sp->start_routine = location(ld, get(v, "start_routine"));
	sp->arg = hexopt(v, "arg");
	sp->creator_tid = pid_of(ld, v, "creator_tid");
	sp->creator_span = (uint32_t)u64m(ld, v, "creator_span", UINT32_MAX);
	sp->create_site = location(ld, get(v, "create_site"));
	sp->depth = (unsigned)u64m(ld, v, "depth", UINT32_MAX);
	json_object *det = get(v, "detached");
	sp->detached = is(det, json_type_boolean) ? json_object_get_boolean(det) : -1;
	sp->create_ns = opt(ld, v, "create_ns");
	sp->start_ns = opt(ld, v, "start_ns");
	sp->end_ns = opt(ld, v, "end_ns");
	sp->status = PTW_STATUS_UNMATCHED;
	const char *status = str(ld, v, "status");
	for (int i = 0; status && i < PTW_STATUS_N; i++) /* the names the writer uses */
		if (!strcmp(status, ptw_status_name((enum ptw_status)i)))
			sp->status = (enum ptw_status)i;
	json_object *end = get(v, "end");
	if (is(end, json_type_object)) {
		sp->method = (enum ptw_method)name_index(str(ld, end, "method"), methods, 9,
							 PTW_METHOD_UNKNOWN);
		sp->reason = keep(st, str(ld, end, "reason"));
		sp->value = hexopt(end, "value");
		sp->signal = signum(str(ld, end, "signal"));
		sp->exit_code = opt(ld, end, "exit_code");
		sp->cancel_by = pid_of(ld, end, "cancelled_by");
	}
	json_object *join = get(v, "join");
	if (is(join, json_type_object)) {
		sp->joined = true;
		sp->joiner_tid = pid_of(ld, join, "joiner_tid");
		sp->join_call_ns = num(ld, join, "call_ns");
		sp->join_return_ns = opt(ld, join, "return_ns");
		/* a wait cannot end before it began */
		if (sp->join_return_ns.set && sp->join_return_ns.v < sp->join_call_ns)
			sp->join_return_ns.set = false;
	}
	sp->uncertain = boolean(v, "uncertain");
	sp->open_after_ns = opt(ld, v, "open_after_ns");
	json_object *ow = get(v, "open_where");
	if (is(ow, json_type_object)) {
		sp->open_for_ns = num(ld, ow, "open_for_ns");
		sp->open_state = dup_or_null(str(ld, ow, "state"));
		sp->open_wchan = dup_or_null(str(ld, ow, "wchan"));
		sp->open_at = location(ld, get(ow, "pc"));
	}
	/* a snapshot's: where the thread was */
	const char *state = str(ld, v, "state");
	if (state) {
		static const char *const waits[] = { "none", "mutex", "join", "rwlock", "cond", "other" };
		sp->state = xstrdup(state);
		sp->wchan = dup_or_null(str(ld, v, "wchan"));
		sp->stack = stack_of(ld, get(v, "stack"), &sp->nstack);
		json_object *w = get(v, "waits_for");
		if (is(w, json_type_object)) {
			sp->wait_kind = (enum ptw_wait_kind)name_index(str(ld, w, "kind"), waits, 6,
								       PTW_WAIT_OTHER);
			hex_of(get(w, "object"), &sp->wait_object);
			sp->wait_owner = pid_of(ld, w, "owner_tid");
		}
	}
	ld->ctx[0] = 0;
	return sp;
}

/* Does the thread (span id, tid) pass --tid and --routine? Its span's
 * verdict when its span was read; else by tid. */
static bool thread_kept(struct ld *ld, uint32_t span, pid_t tid)
{
	if (!ld->filtered)
		return true;
	uintptr_t k = span ? (uintptr_t)ptw_map_get(&ld->kept, span) : 0;
	if (k)
		return k == 1;
	if (ld->filter->routine)
		return false;
	for (size_t i = 0; i < ld->filter->ntids; i++)
		if (ld->filter->tids[i] == tid)
			return true;
	return false;
}

static void add_edges(struct ld *ld, const struct ptw_span *sp)
{
	struct store *st = ld->st;
	/* alive from its creation (or start) to its end, as the engine counts */
	struct ptw_opt from = sp->create_ns.set ? sp->create_ns : sp->start_ns;
	if (!from.set)
		return;
	if (st->nedges + 2 > st->capedges) {
		st->capedges = st->capedges ? 2 * st->capedges : 64;
		st->edges = xreallocarray(st->edges, st->capedges, sizeof(*st->edges));
	}
	st->edges[st->nedges][0] = (int64_t)(from.v & INT64_MAX);
	st->edges[st->nedges++][1] = 1;
	st->edges[st->nedges][0] = sp->end_ns.set ? (int64_t)(sp->end_ns.v & INT64_MAX) : INT64_MAX;
	st->edges[st->nedges++][1] = -1;
}

/* The span goes to the engine (now, or once sorted); false: filtered out. */
static bool add_span(struct ld *ld, struct ptw_span *sp)
{
	if (ld->filtered) {
		bool want = ptw_text_filter_span(ld->filter, sp);
		ptw_map_put(&ld->kept, sp->id, (void *)(uintptr_t)(want ? 1 : 2));
		if (!want) {
			span_free(sp);
			return false;
		}
	}
	/* (a cut stream too counts the most alive at once from its spans) */
	if (ld->filtered || ld->l->stream)
		add_edges(ld, sp);
	/* a document's spans, and all of a stream's to be held: sorted once */
	if (!ld->streaming || !ld->l->stream) {
		if (ld->npending == ld->cappending) {
			ld->cappending = ld->cappending ? 2 * ld->cappending : 64;
			ld->pending = xreallocarray(ld->pending, ld->cappending, sizeof(*ld->pending));
		}
		ld->pending[ld->npending++] = sp;
		return true;
	}
	ptw_spans_add_final(ld->l->report.spans, sp);
	ptw_spans_collect(ld->l->report.spans);
	return true;
}

static int by_span_id(const void *x, const void *y)
{
	const struct ptw_span *a = *(struct ptw_span *const *)x, *b = *(struct ptw_span *const *)y;
	return a->id < b->id ? -1 : a->id > b->id;
}

/* The spans held back, sorted once, to the engine. */
static void add_pending(struct ld *ld)
{
	if (ld->npending)
		qsort(ld->pending, ld->npending, sizeof(*ld->pending), by_span_id);
	uint32_t prev = 0;
	for (size_t i = 0; i < ld->npending; i++) {
		uint32_t id = ld->pending[i]->id;
		if (id == prev && !ld->failed) {
			size_t line = ld->lineno;
			ld->lineno = 0;
			bad(ld, "span %u is there twice", id);
			ld->lineno = line;
		}
		prev = id;
		if (ld->failed)
			span_free(ld->pending[i]);
		else
			ptw_spans_add_final(ld->l->report.spans, ld->pending[i]);
	}
	ld->npending = 0;
}

/* ---- frame spans ---- */

static void open_mark(struct ld *ld, json_object *v, struct ptw_open_mark *m)
{
	struct ptw_opt after = opt(ld, v, "open_after_ns");
	json_object *ow = get(v, "open_where");
	if (!after.set)
		return;
	m->set = true;
	m->after_ns = after.v;
	m->for_ns = num(ld, ow, "open_for_ns");
	m->state = (char *)keep(ld->st, str(ld, ow, "state"));
	m->wchan = (char *)keep(ld->st, str(ld, ow, "wchan"));
	m->at = location(ld, get(ow, "pc"));
}

static bool frame_of(struct ld *ld, json_object *v, struct ptw_frame *fr)
{
	static const char *const statuses[] = { "open", "completed", "unmatched" };
	memset(fr, 0, sizeof(*fr));
	uint64_t id;
	if (!u64_of(ld, get(v, "id"), "id", UINT32_MAX, &id) || !id)
		return bad(ld, "a frame without an id");
	fr->id = (uint32_t)id;
	snprintf(ld->ctx, sizeof(ld->ctx), "frame %u: ", fr->id);
	fr->thread_span = (uint32_t)u64m(ld, v, "thread_span", UINT32_MAX);
	fr->pid = pid_of(ld, v, "pid");
	fr->process = (uint32_t)u64m(ld, v, "process", PTW_LOAD_MAX_PROCESSES);
	fr->tid = pid_of(ld, v, "tid");
	fr->function = location(ld, get(v, "function"));
	/* Under way at the attach (since spans/5): no entry time; it begins
	 * with the session, as it did in the session that wrote it. */
	fr->entry_unknown = str_is(ld, v, "entry", "before_attach");
	fr->entry_ns = fr->entry_unknown ? ld->l->report.start_ns : num(ld, v, "entry_ns");
	struct ptw_opt o = opt(ld, v, "return_ns");
	fr->has_return = o.set && o.v >= fr->entry_ns;
	fr->return_ns = fr->has_return ? o.v : 0;
	o = opt(ld, v, "left_ns");
	fr->has_left = o.set;
	fr->left_ns = o.v;
	fr->depth = (unsigned)u64m(ld, v, "depth", PTW_LOAD_MAX_FRAME_DEPTH);
	fr->parent = (uint32_t)u64m(ld, v, "parent", UINT32_MAX);
	fr->status = (enum ptw_frame_status)name_index(str(ld, v, "status"), statuses, 3,
							PTW_FRAME_UNMATCHED);
	if (fr->status == PTW_FRAME_COMPLETED && !fr->has_return)
		fr->status = PTW_FRAME_UNMATCHED; /* a return it does not have */
	fr->reason = keep(ld->st, str(ld, v, "reason"));
	fr->sig = signum(str(ld, v, "signal")); /* absent before ptwatch.spans/5 */
	o = hexopt(v, "value");
	fr->has_value = o.set;
	fr->value = o.v;
	struct ptw_open_mark m = { 0 };
	open_mark(ld, v, &m);
	if (m.set) {
		/* (ld's: ptw_frames_add copies it) */
		ld->marks = xreallocarray(ld->marks, ld->nmarks + 1, sizeof(*ld->marks));
		fr->open = ld->marks[ld->nmarks++] = xmalloc(sizeof(m));
		*fr->open = m;
	}
	ld->ctx[0] = 0;
	return !ld->failed;
}

/* Its time goes to its parent's children. */
static void child_time(struct ld *ld, const struct ptw_frame *fr)
{
	if (!fr->parent || fr->status != PTW_FRAME_COMPLETED || fr->entry_unknown)
		return;
	uint64_t sum = (uint64_t)(uintptr_t)ptw_map_get(&ld->child_ns, fr->parent);
	sum += fr->return_ns - fr->entry_ns;
	ptw_map_put(&ld->child_ns, fr->parent, (void *)(uintptr_t)sum);
}

static int by_frame_id(const void *x, const void *y)
{
	const struct ptw_frame *a = x, *b = y;
	return a->id < b->id ? -1 : a->id > b->id;
}

/* A document's frames: every frame's self time is its completed children's
 * time off its own (two passes: parents come before their children). */
static void frames_of(struct ld *ld, json_object *arr)
{
	size_t n = arr_len(arr), k = 0;
	struct ptw_frame *all = NULL;
	for (size_t i = 0; i < n && !ld->failed; i++) {
		json_object *v = json_object_array_get_idx(arr, i);
		if (!str_is(ld, v, "kind", "frame"))
			continue;
		if (!all)
			all = xcalloc(n, sizeof(*all));
		if (frame_of(ld, v, &all[k]) && thread_kept(ld, all[k].thread_span, all[k].tid))
			child_time(ld, &all[k++]);
	}
	struct ptw_frames *f = ptw_spans_frames_mut(ld->l->report.spans);
	for (size_t i = 0; i < k && !ld->failed; i++) {
		all[i].child_ns = (uint64_t)(uintptr_t)ptw_map_del(&ld->child_ns, all[i].id);
		ptw_frames_add(f, &all[i]);
	}
	free(all);
}

/* A stream's frame: children come before their parents (a frame's line is
 * written when it ends). */
static void stream_frame(struct ld *ld, json_object *v)
{
	struct ptw_frame fr;
	if (!frame_of(ld, v, &fr) || !thread_kept(ld, fr.thread_span, fr.tid))
		return;
	fr.child_ns = (uint64_t)(uintptr_t)ptw_map_del(&ld->child_ns, fr.id);
	child_time(ld, &fr);
	if (ld->streaming) {
		ptw_frames_add(ptw_spans_frames_mut(ld->l->report.spans), &fr);
		return;
	}
	if (ld->nframes == ld->capframes) {
		ld->capframes = ld->capframes ? 2 * ld->capframes : 64;
		ld->frames = xreallocarray(ld->frames, ld->capframes, sizeof(*ld->frames));
	}
	ld->frames[ld->nframes++] = fr;
}

/* ---- wait spans and deadlocks (--locks) ---- */

static enum ptw_wait_kind wait_kind_of(const char *s)
{
	for (int k = PTW_WAIT_MUTEX; s && k <= PTW_WAIT_LOCK; k++)
		if (!strcmp(ptw_wait_kind_name((enum ptw_wait_kind)k), s))
			return (enum ptw_wait_kind)k;
	return PTW_WAIT_OTHER;
}

/* An object's kind as json_object writes it ("thread" for a join). */
static enum ptw_wait_kind object_kind_of(const char *s)
{
	for (int k = PTW_WAIT_MUTEX; s && k <= PTW_WAIT_LOCK; k++)
		if (!strcmp(ptw_wait_object_kind((enum ptw_wait_kind)k), s))
			return (enum ptw_wait_kind)k;
	return PTW_WAIT_OTHER;
}

/* The object waited for: its address, and its symbol when one names it. */
static uint64_t object_of(struct ld *ld, json_object *o, const struct ptw_location **loc)
{
	uint64_t addr = 0;
	hex_of(get(o, "addr"), &addr);
	const char *sym = str(ld, o, "symbol"), *mod = str(ld, o, "module");
	*loc = NULL;
	if (sym || mod) {
		struct ptw_location *l = new_location(ld->st);
		l->addr = addr;
		l->symbol = keep(ld->st, sym);
		l->module = keep(ld->st, mod);
		if (sym)
			hex_of(get(o, "symbol_offset"), &l->symbol_offset);
		*loc = l;
	}
	return addr;
}

static void wait_of(struct ld *ld, json_object *v)
{
	static const char *const statuses[] = { "open", "completed", "unmatched" };
	uint64_t id;
	if (!u64_of(ld, get(v, "id"), "id", UINT32_MAX, &id) || !id) {
		bad(ld, "a wait without an id");
		return;
	}
	if (ptw_map_get(&ld->waits_seen, id)) {
		if (!ld->lineno)
			bad(ld, "wait %" PRIu64 " is there twice", id);
		return;
	}
	ptw_map_put(&ld->waits_seen, id, (void *)1);
	struct ptw_wait *w = xcalloc(1, sizeof(*w));
	w->id = (uint32_t)id;
	snprintf(ld->ctx, sizeof(ld->ctx), "wait %u: ", w->id);
	w->thread_span = (uint32_t)u64m(ld, v, "thread_span", UINT32_MAX);
	w->tid = pid_of(ld, v, "tid");
	w->kind = wait_kind_of(str(ld, v, "wait"));
	w->object = object_of(ld, get(v, "object"), &w->object_loc);
	w->owner = pid_of(ld, v, "owner_tid");
	w->owner_span = (uint32_t)u64m(ld, v, "owner_span", UINT32_MAX);
	w->site = location(ld, get(v, "site"));
	w->stack = stack_of(ld, get(v, "stack"), &w->nstack);
	struct ptw_opt o = opt(ld, v, "start_ns");
	if (!o.set) {
		/* (every wait begins at a time: the schema's integer) */
		bad(ld, "a wait without its start_ns");
		free(w->stack);
		free(w);
		return;
	}
	w->start_ns = o.v;
	o = opt(ld, v, "end_ns");
	w->has_end = o.set && o.v >= w->start_ns;
	w->end_ns = w->has_end ? o.v : 0;
	o = opt(ld, v, "left_ns");
	w->has_left = o.set;
	w->left_ns = o.v;
	w->status = (enum ptw_wait_status)name_index(str(ld, v, "status"), statuses, 3,
						     PTW_WAIT_UNMATCHED);
	if (w->status == PTW_WAIT_COMPLETED && !w->has_end)
		w->status = PTW_WAIT_UNMATCHED;
	w->reason = keep(ld->st, str(ld, v, "reason"));
	w->deadlock = (uint32_t)u64m(ld, v, "deadlock", UINT32_MAX);
	ld->ctx[0] = 0;
	if (ld->failed || !thread_kept(ld, w->thread_span, w->tid)) {
		free(w->stack);
		free(w);
		return;
	}
	ptw_locks_add_final(ptw_spans_locks_mut(ld->l->report.spans), w);
}

static void deadlock_of(struct ld *ld, json_object *v, uint32_t id)
{
	json_object *tids = get(v, "tids"), *spans = get(v, "spans"), *waits = get(v, "waits"),
		    *objects = get(v, "objects");
	size_t n = arr_len(tids);
	if (n > PTW_LOAD_MAX_DEADLOCK) {
		bad(ld, "a deadlock of %zu threads (report reads at most %d)", n, PTW_LOAD_MAX_DEADLOCK);
		return;
	}
	struct ptw_live_deadlock *d = xcalloc(1, sizeof(*d));
	d->id = id;
	d->ns = num(ld, v, "ns");
	/* (since spans/5; absent: the tracer's, the only one before) */
	const char *proof = str(ld, v, "confirmed_by");
	d->proof = proof && !strcmp(proof, "owners_reread") ? PTW_PROOF_REREAD : PTW_PROOF_STOPPED;
	d->n = d->expected = n;
	d->tids = xcalloc(n + 1, sizeof(*d->tids));
	d->thread_spans = xcalloc(n + 1, sizeof(*d->thread_spans));
	d->waits = xcalloc(n + 1, sizeof(*d->waits));
	d->objects = xcalloc(n + 1, sizeof(*d->objects));
	for (size_t k = 0; k < n; k++) {
		uint64_t x;
		if (u64_of(ld, json_object_array_get_idx(tids, k), "tids", PTW_LOAD_MAX_PID, &x))
			d->tids[k] = (pid_t)x;
		if (k < arr_len(spans) &&
		    u64_of(ld, json_object_array_get_idx(spans, k), "spans", UINT32_MAX, &x))
			d->thread_spans[k] = (uint32_t)x;
		if (k < arr_len(waits) &&
		    u64_of(ld, json_object_array_get_idx(waits, k), "waits", UINT32_MAX, &x))
			d->waits[k] = (uint32_t)x;
		if (k < arr_len(objects))
			hex_of(json_object_array_get_idx(objects, k), &d->objects[k]);
	}
	ptw_locks_add_deadlock(ptw_spans_locks_mut(ld->l->report.spans), d);
}

/* A stream's last line: the figures of every wait, of which it has lines
 * for the completed ones only. */
static void stated_waits(struct ld *ld, json_object *m)
{
	json_object *w = get(m, "waits");
	if (!is(w, json_type_object) || ld->filtered)
		return; /* (a filtered report counts what it shows) */
	struct ptw_wait_totals tt = { .count = num(ld, w, "count"),
				      .completed = num(ld, w, "completed"),
				      .unmatched = num(ld, w, "unmatched"),
				      .total_ns = num(ld, w, "total_ns"),
				      .max_ns = num(ld, w, "max_ns") };
	json_object *objs = get(m, "contended_objects"), *thr = get(m, "thread_waits");
	size_t no = arr_len(objs), nt = arr_len(thr);
	struct ptw_object_stats *os = xcalloc(no + 1, sizeof(*os));
	for (size_t i = 0; i < no && !ld->failed; i++) {
		json_object *v = json_object_array_get_idx(objs, i), *ob = get(v, "object");
		os[i].object = object_of(ld, ob, &os[i].object_loc);
		os[i].kind = object_kind_of(str(ld, ob, "kind"));
		os[i].waits = num(ld, v, "waits");
		os[i].completed = num(ld, v, "completed");
		os[i].total_ns = num(ld, v, "total_ns");
		os[i].max_ns = num(ld, v, "max_ns");
		json_object *tids = get(v, "tids"), *sites = get(v, "sites");
		os[i].tids = xcalloc(arr_len(tids) + 1, sizeof(*os[i].tids));
		for (size_t k = 0; k < arr_len(tids); k++) {
			uint64_t x;
			if (u64_of(ld, json_object_array_get_idx(tids, k), "tids", PTW_LOAD_MAX_PID, &x))
				os[i].tids[os[i].ntids++] = (pid_t)x;
		}
		os[i].sites = xcalloc(arr_len(sites) + 1, sizeof(*os[i].sites));
		for (size_t k = 0; k < arr_len(sites); k++)
			if ((os[i].sites[os[i].nsites] = location(ld, json_object_array_get_idx(sites, k))))
				os[i].nsites++;
	}
	struct ptw_thread_waits *ts = xcalloc(nt + 1, sizeof(*ts));
	for (size_t i = 0; i < nt && !ld->failed; i++) {
		json_object *v = json_object_array_get_idx(thr, i);
		ts[i].tid = pid_of(ld, v, "tid");
		ts[i].thread_span = (uint32_t)u64m(ld, v, "thread_span", UINT32_MAX);
		ts[i].waits = num(ld, v, "waits");
		ts[i].completed = num(ld, v, "completed");
		ts[i].total_ns = num(ld, v, "total_ns");
		ts[i].max_ns = num(ld, v, "max_ns");
	}
	if (!ld->failed)
		ptw_locks_set_stated(ptw_spans_locks_mut(ld->l->report.spans), &tt, os, no, ts, nt);
	ptw_object_stats_free(os, no);
	free(ts);
}

/* ---- the target, the session, the processes ---- */

static char **argv_of(struct ld *ld, json_object *arr)
{
	size_t n = arr_len(arr);
	char **argv = xcalloc(n + 1, sizeof(char *));
	for (size_t i = 0; i < n; i++) {
		json_object *a = json_object_array_get_idx(arr, i);
		size_t len = is(a, json_type_string) ? (size_t)json_object_get_string_len(a) : 0;
		if (len > PTW_LOAD_MAX_STRING) {
			bad(ld, "an argument of %zu bytes (report reads at most %zu)", len,
			    PTW_LOAD_MAX_STRING);
			len = 0;
		}
		argv[i] = xstrdup(len ? json_object_get_string(a) : "");
	}
	return argv;
}

static int exit_of(struct ld *ld, json_object *ex, int *code, int *sig, bool *core)
{
	if (!is(ex, json_type_object))
		return PTW_EXIT_NONE;
	if (get(ex, "code")) {
		*code = (int)i64m(ld, ex, "code", INT_MIN + 1, INT_MAX);
		return PTW_EXIT_CODE;
	}
	*sig = signum(str(ld, ex, "signal"));
	*core = boolean(ex, "core_dumped");
	return PTW_EXIT_SIGNAL;
}

static void target_of(struct ld *ld, json_object *t)
{
	struct ptw_report *r = &ld->l->report;
	struct store *st = ld->st;
	r->pid = pid_of(ld, t, "pid");
	r->exe = keep(st, str(ld, t, "exe"));
	json_object *argv = get(t, "argv");
	if (is(argv, json_type_array)) {
		free_argv(st->argv);
		st->argv = argv_of(ld, argv);
		r->argv = st->argv;
	}
	if (str(ld, t, "mode"))
		r->mode = keep(st, str(ld, t, "mode"));
	r->glibc = keep(st, str(ld, t, "glibc"));
	int code = 0, sig = 0;
	bool core = false;
	r->exit_kind = exit_of(ld, get(t, "exit"), &code, &sig, &core);
	r->exit_code = code;
	r->exit_signal = sig;
	r->core_dumped = core;
	const char *fate = str(ld, t, "fate");
	r->fate = PTW_FATE_ENDED;
	r->after_detach = false;
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

static void session_of(struct ld *ld, json_object *se)
{
	struct ptw_report *r = &ld->l->report;
	struct store *st = ld->st;
	r->start_ns = num(ld, se, "start_ns");
	r->end_ns = num(ld, se, "end_ns");
	r->end_reason = keep(st, str(ld, se, "end_reason"));
	r->frozen_ns = num(ld, se, "frozen_ns");
	if (str(ld, se, "strategy"))
		r->strategy = keep(st, str(ld, se, "strategy"));
	/* (since spans/5: absent before, every session was ptrace's; null:
	 * not known, as written) */
	r->backend = keep(st, is(se, json_type_object) &&
					  json_object_object_get_ex(se, "backend", NULL)
				      ? str(ld, se, "backend")
				      : "ptrace");
	if (str(ld, se, "backend_why"))
		r->backend_why = keep(st, str(ld, se, "backend_why"));
	r->probes = (size_t)num(ld, se, "probes");
	r->probes_stepped = (size_t)u64m(ld, se, "probes_stepped", UINT32_MAX); /* spans/6 */
	json_object *cpu = get(se, "tracer_cpu_ns");
	r->tracer_user_ns = num(ld, cpu, "user");
	r->tracer_sys_ns = num(ld, cpu, "sys");
	r->breakpoints = (size_t)num(ld, se, "breakpoints");
	r->open_timeout_ns = num(ld, se, "open_timeout_ns");
	json_object *stops = get(se, "stops");
	if (is(stops, json_type_object)) {
		size_t n = (size_t)json_object_object_length(stops);
		size_t kinds = n - (get(stops, "total") != NULL);
		if (kinds > PTW_LOAD_MAX_STOP_KINDS) {
			bad(ld, "%zu kinds of ptrace stops (report reads at most %d)", kinds,
			    PTW_LOAD_MAX_STOP_KINDS);
			return;
		}
		for (size_t i = 0; i < st->nstops; i++)
			free(st->stop_names[i]);
		free(st->stop_names);
		free(st->stop_counts);
		st->nstops = 0;
		st->stop_names = xcalloc(n + 1, sizeof(char *));
		st->stop_counts = xcalloc(n + 1, sizeof(uint64_t));
		r->stops_total = num(ld, stops, "total");
		json_object_object_foreach(stops, k, v)
		{
			if (!strcmp(k, "total") || strlen(k) > PTW_LOAD_MAX_STRING)
				continue;
			st->stop_names[st->nstops] = xstrdup(k);
			u64_of(ld, v, k, UINT64_MAX - 1, &st->stop_counts[st->nstops]);
			st->nstops++;
		}
		r->stop_names = (const char *const *)st->stop_names;
		r->stop_counts = st->stop_counts;
		r->nstop_kinds = st->nstops;
	}
	json_object *in = get(se, "interrupts");
	free(st->interrupts);
	st->interrupts = xcalloc(arr_len(in) + 1, sizeof(*st->interrupts));
	st->ninterrupts = 0;
	for (size_t i = 0; i < arr_len(in); i++) {
		static const char *const whys[] = { "attached", "terminal", "process_group", "again",
						     "ptwatch_alone" };
		json_object *x = json_object_array_get_idx(in, i);
		struct ptw_interrupt *pi = &st->interrupts[st->ninterrupts++];
		pi->sig = signum(str(ld, x, "signal"));
		pi->ns = num(ld, x, "ns");
		pi->reached_target = boolean(x, "reached_target");
		pi->action = str_is(ld, x, "action", "traced_on") ? PTW_INTR_TRACED_ON : PTW_INTR_DETACHED;
		pi->why = (enum ptw_interrupt_why)name_index(str(ld, x, "why"), whys, 5,
							    PTW_INTR_PTWATCH_ALONE);
	}
	r->interrupts = st->interrupts;
	r->ninterrupts = st->ninterrupts;
}

static void header_of(struct ld *ld, json_object *doc)
{
	struct ptw_report *r = &ld->l->report;
	json_object *tool = get(doc, "tool"), *clock = get(doc, "clock");
	if (str(ld, tool, "version"))
		r->tool_version = keep(ld->st, str(ld, tool, "version"));
	if (clock)
		r->realtime_offset_ns = i64m(ld, clock, "realtime_offset_ns", INT64_MIN + 1, INT64_MAX);
	if (is(get(doc, "target"), json_type_object))
		target_of(ld, get(doc, "target"));
	if (is(get(doc, "session"), json_type_object))
		session_of(ld, get(doc, "session"));
}

static void warnings_of(struct ld *ld, json_object *arr)
{
	struct store *st = ld->st;
	free_warnings(st);
	for (size_t i = 0; i < arr_len(arr); i++) {
		json_object *w = json_object_array_get_idx(arr, i);
		const char *code = str(ld, w, "code"), *msg = str_max(ld, w, "message", PTW_LOAD_MAX_MESSAGE);
		/* (how many times it was said: since spans/6, absent once) */
		unsigned count = (unsigned)u64m(ld, w, "count", UINT32_MAX);
		add_warning(st, code ? code : "?", msg ? msg : "", count > 1 ? count : 1);
	}
	ld->l->report.warnings = st->warnings;
	ld->l->report.nwarnings = st->nwarnings;
}

static void processes_of(struct ld *ld, json_object *arr)
{
	struct store *st = ld->st;
	size_t n = arr_len(arr);
	if (!is(arr, json_type_array))
		return;
	if (n > PTW_LOAD_MAX_PROCESSES) {
		bad(ld, "%zu processes (report reads at most %u)", n, PTW_LOAD_MAX_PROCESSES);
		return;
	}
	st->procs = xcalloc(n + 1, sizeof(*st->procs));
	st->proc_argv = xcalloc(n + 1, sizeof(*st->proc_argv));
	for (size_t i = 0; i < n && !ld->failed; i++) {
		json_object *v = json_object_array_get_idx(arr, i);
		struct ptw_process *p = &st->procs[st->nprocs++];
		p->id = (uint32_t)u64m(ld, v, "id", PTW_LOAD_MAX_PROCESSES);
		p->parent_id = (uint32_t)u64m(ld, v, "parent_process", PTW_LOAD_MAX_PROCESSES);
		p->pid = pid_of(ld, v, "pid");
		p->ppid = pid_of(ld, v, "ppid");
		p->parent_tid = pid_of(ld, v, "parent_tid");
		p->exe = keep(st, str(ld, v, "exe"));
		st->proc_argv[i] = argv_of(ld, get(v, "argv"));
		p->argv = st->proc_argv[i];
		p->start_ns = num(ld, v, "start_ns");
		p->end_ns = num(ld, v, "end_ns");
		p->exit_kind = exit_of(ld, get(v, "exit"), &p->exit_code, &p->exit_signal, &p->core_dumped);
		p->followed = boolean(v, "followed");
		p->not_followed_why = keep(st, str(ld, v, "not_followed_why"));
		p->detached = boolean(v, "detached");
	}
	ld->l->report.processes = st->procs;
	ld->l->report.nprocesses = st->nprocs;
}

/* A stream's spans do not say which entry of processes is theirs (-f):
 * the one of their pid that was alive when they began. */
static void spans_processes(struct ld *ld)
{
	struct ptw_report *r = &ld->l->report;
	for (size_t i = 0; r->nprocesses && i < ptw_spans_count(r->spans); i++) {
		/* (the loader's own spans, given to the engine) */
		struct ptw_span *sp = (struct ptw_span *)ptw_spans_get(r->spans, i);
		struct ptw_opt began = sp->create_ns.set ? sp->create_ns : sp->start_ns;
		for (size_t k = 0; k < r->nprocesses; k++) {
			const struct ptw_process *p = &r->processes[k];
			if (p->pid == sp->pid && (!began.set || (p->start_ns <= began.v &&
								 (!p->end_ns || began.v <= p->end_ns))))
				sp->process = p->id;
		}
	}
}

static void counters_of(struct ld *ld, json_object *m)
{
	if (!is(m, json_type_object) || ld->filtered)
		return; /* a filtered report counts what it shows */
	ptw_spans_set_counters(ld->l->report.spans, num(ld, m, "threads_created"),
			       num(ld, m, "max_active"), num(ld, m, "max_depth"));
}

/* ---- a document ---- */

static void load_document(struct ld *ld, json_object *doc)
{
	struct ptw_report *r = &ld->l->report;
	json_object *spans = get(doc, "spans"), *metrics = get(doc, "metrics");
	if (!is(spans, json_type_array) || !is(metrics, json_type_object)) {
		bad(ld, "not a spans document (no spans or metrics)");
		return;
	}
	header_of(ld, doc);
	warnings_of(ld, get(doc, "warnings"));
	processes_of(ld, get(doc, "processes"));
	counters_of(ld, metrics);
	/* --locks: the waits' figures, even with none (as the session wrote) */
	r->locks = is(get(metrics, "waits"), json_type_object);
	json_object *dl = get(doc, "deadlocks");
	r->snapshot = (r->end_reason && !strcmp(r->end_reason, "snapshot")) ||
		      (is(dl, json_type_array) && !r->locks);
	size_t n = arr_len(spans);
	for (size_t i = 0; i < n && !ld->failed; i++) {
		json_object *v = json_object_array_get_idx(spans, i);
		if (!str_is(ld, v, "kind", "thread"))
			continue;
		struct ptw_span *sp = span_of(ld, v);
		if (sp)
			add_span(ld, sp);
	}
	add_pending(ld);
	frames_of(ld, spans);
	for (size_t i = 0; i < n && !ld->failed; i++) {
		json_object *v = json_object_array_get_idx(spans, i);
		if (str_is(ld, v, "kind", "wait"))
			wait_of(ld, v);
	}
	for (size_t i = 0; r->locks && i < arr_len(dl) && !ld->failed; i++)
		deadlock_of(ld, json_object_array_get_idx(dl, i), (uint32_t)i + 1);
}

/* ---- a stream, line by line ---- */

static void drop_held(struct ld *ld, uint32_t id)
{
	struct ptw_span *sp = ptw_map_del(&ld->held, id);
	if (sp) {
		span_free(sp);
		ld->nheld--;
	}
}

static void stream_span(struct ld *ld, json_object *v, bool open)
{
	json_object *sv = get(v, "span");
	if (!is(sv, json_type_object)) {
		bad(ld, "a span line without its span");
		return;
	}
	struct ptw_span *sp = span_of(ld, sv);
	if (!sp)
		return;
	if (open) {
		uint64_t active = u64m(ld, v, "active", PTW_LOAD_MAX_PID);
		if (active > ld->max_active)
			ld->max_active = active;
		if (ld->filtered)
			ptw_map_put(&ld->kept, sp->id,
				    (void *)(uintptr_t)(ptw_text_filter_span(ld->filter, sp) ? 1 : 2));
		/* kept until it ends (or the stream does) */
		if (ld->failed || ptw_map_get(&ld->seen, sp->id) || ptw_map_get(&ld->held, sp->id)) {
			span_free(sp);
			return;
		}
		if (ld->nheld >= PTW_LOAD_MAX_PID) {
			span_free(sp);
			bad(ld, "more than %d threads begun and not ended (more than Linux allows at once)",
			    PTW_LOAD_MAX_PID);
			return;
		}
		ptw_map_put(&ld->held, sp->id, sp);
		ld->nheld++;
		return;
	}
	/* (a span twice: the tracer's line is the one that counts; the
	 * restorer may repeat one it had not heard the end of) */
	if (ld->failed || ptw_map_get(&ld->seen, sp->id)) {
		span_free(sp);
		return;
	}
	drop_held(ld, sp->id);
	ptw_map_put(&ld->seen, sp->id, (void *)1);
	add_span(ld, sp);
}

static void stream_metrics(struct ld *ld, json_object *v)
{
	header_of(ld, v);
	warnings_of(ld, get(v, "warnings"));
	ld->warning_lines = false;
	processes_of(ld, get(v, "processes"));
	json_object *m = get(v, "metrics");
	counters_of(ld, m);
	ld->l->report.locks = is(get(m, "waits"), json_type_object);
	const char *why = ld->l->report.end_reason;
	ld->l->report.snapshot = why && !strcmp(why, "snapshot");
	stated_waits(ld, m);
}

static void stream_line(struct ld *ld, json_object *v)
{
	const char *type = str(ld, v, "type");
	if (ld->failed)
		return;
	if (!type) {
		bad(ld, "no type");
		return;
	}
	if (!strcmp(type, "header")) {
		bad(ld, "a second session begins here: report reads one session per file (split "
			"it before each header line)");
		return;
	}
	if (ld->metrics) {
		bad(ld, "a %s line after the metrics line, the last of a session", type);
		return;
	}
	if (!strcmp(type, "span_open") || !strcmp(type, "span")) {
		stream_span(ld, v, type[4] == '_');
	} else if (!strcmp(type, "frame")) {
		json_object *fv = get(v, "frame");
		if (is(fv, json_type_object))
			stream_frame(ld, fv);
	} else if (!strcmp(type, "wait")) {
		json_object *wv = get(v, "wait");
		if (is(wv, json_type_object))
			wait_of(ld, wv);
	} else if (!strcmp(type, "deadlock")) {
		json_object *dv = get(v, "deadlock");
		size_t n = ptw_locks_deadlock_count(ptw_spans_locks(ld->l->report.spans));
		if (is(dv, json_type_object))
			deadlock_of(ld, dv, (uint32_t)n + 1);
	} else if (!strcmp(type, "warning")) {
		/* the metrics line has them all; a cut stream has these */
		struct store *st = ld->st;
		if (!ld->warning_lines)
			free_warnings(st);
		ld->warning_lines = true;
		const char *code = str(ld, v, "code"),
			   *msg = str_max(ld, v, "message", PTW_LOAD_MAX_MESSAGE);
		add_warning(st, code ? code : "?", msg ? msg : "", 1);
		ld->l->report.warnings = st->warnings;
		ld->l->report.nwarnings = st->nwarnings;
	} else if (!strcmp(type, "metrics")) {
		stream_metrics(ld, v);
		ld->metrics = true;
	}
	/* open lines: the spans' own lines say it; unknown types: later ones */
	if (ld->streaming)
		ptw_spans_collect(ld->l->report.spans);
}

static int by_u32(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
	return a < b ? -1 : a > b;
}

/* The end of a stream: the spans begun and never ended (shown open), the
 * frames held; a cut stream says so. */
static void stream_end(struct ld *ld)
{
	struct ptw_report *r = &ld->l->report;
	size_t it = 0, n = 0;
	uint64_t id;
	uint32_t *ids = xcalloc(ld->nheld + 1, sizeof(*ids));
	while (n < ld->nheld && ptw_map_next(&ld->held, &it, &id, NULL))
		ids[n++] = (uint32_t)id;
	qsort(ids, n, sizeof(*ids), by_u32);
	for (size_t i = 0; i < n; i++) {
		struct ptw_span *sp = ptw_map_del(&ld->held, ids[i]);
		ld->nheld--;
		if (ld->failed)
			span_free(sp);
		else
			add_span(ld, sp);
	}
	free(ids);
	if (ld->streaming)
		ptw_spans_collect(r->spans);
	add_pending(ld);
	if (ld->nframes)
		qsort(ld->frames, ld->nframes, sizeof(*ld->frames), by_frame_id);
	for (size_t i = 0; i < ld->nframes && !ld->failed; i++)
		ptw_frames_add(ptw_spans_frames_mut(r->spans), &ld->frames[i]);
	ld->nframes = 0;
	if (ld->metrics)
		return;
	ld->l->truncated = true;
	r->end_reason = "cut";
	add_warning(ld->st, ptw_warning_code(PTW_W_STREAM_CUT),
		    "the stream ends before its last line (the run was cut short): spans without "
		    "an end are shown open; how the session ended is not in it", 1);
	r->warnings = ld->st->warnings;
	r->nwarnings = ld->st->nwarnings;
}

/* ---- reading: json-c, a document whole, a stream line by line ---- */

struct src {
	int fd;		 /* or -1: mem */
	const char *mem;
	size_t len, off;
	int err;	 /* a read's errno */
	char buf[1 << 16];
};

/* The next piece: its length, 0 at the end, -1 on a read error. */
static ssize_t src_next(struct src *s, const char **p)
{
	if (s->fd >= 0) {
		for (;;) {
			ssize_t n = read(s->fd, s->buf, sizeof(s->buf));
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0)
				s->err = errno;
			*p = s->buf;
			return n;
		}
	}
	size_t n = s->len - s->off < sizeof(s->buf) ? s->len - s->off : sizeof(s->buf);
	*p = s->mem + s->off;
	s->off += n;
	return (ssize_t)n;
}

/* Where the next byte is. */
struct pos {
	size_t line, col;
};

static void advance(struct pos *at, const char *p, size_t n)
{
	for (const char *e = p + n; p < e;) {
		const char *nl = memchr(p, '\n', (size_t)(e - p));
		if (!nl) {
			at->col += (size_t)(e - p);
			return;
		}
		at->line++;
		at->col = 1;
		p = nl + 1;
	}
}

static bool blank(const char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r' && p[i] != '\n')
			return false;
	return true;
}

static size_t first_nonblank(const char *p, size_t n)
{
	size_t i = 0;
	while (i < n && (p[i] == ' ' || p[i] == '\t' || p[i] == '\r' || p[i] == '\n'))
		i++;
	return i;
}

static json_tokener *tokener(void)
{
	json_tokener *tok = json_tokener_new_ex(PTW_LOAD_MAX_NESTING);
	if (!tok) {
		fprintf(stderr, "ptwatch: out of memory\n");
		exit(99);
	}
	/* (what follows a value is checked here: blanks, or the next line) */
	json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_ALLOW_TRAILING_CHARS |
					  JSON_TOKENER_VALIDATE_UTF8);
	return tok;
}

static const char *syntax(enum json_tokener_error e)
{
	return e == json_tokener_error_depth ? "nested deeper than report reads (16 levels)"
					      : json_tokener_error_desc(e);
}

/* "line N, column M: what" (one "line", whatever the context). */
static void bad_at(struct ld *ld, size_t line, size_t col, const char *what)
{
	size_t saved = ld->lineno;
	ld->lineno = 0;
	ld->ctx[0] = 0;
	bad(ld, "line %zu, column %zu: %s", line, col, what);
	ld->lineno = saved;
}

/* One line of a stream (without its newline). last: no newline ended it
 * (a line cut short there is the end of a cut stream). */
static void one_line(struct ld *ld, json_tokener *tok, const char *p, size_t n, bool last)
{
	if (blank(p, n))
		return;
	json_tokener_reset(tok);
	json_object *v = json_tokener_parse_ex(tok, p, (int)n);
	enum json_tokener_error e = json_tokener_get_error(tok);
	size_t end = json_tokener_get_parse_end(tok);
	if (!v || e != json_tokener_success) {
		json_object_put(v);
		if (!last) /* (a last line cut short: the run was) */
			bad_at(ld, ld->lineno, end + 1,
			       e == json_tokener_continue ? "the line ends inside a value" : syntax(e));
		return;
	}
	if (!blank(p + end, n - end))
		bad_at(ld, ld->lineno, end + 1, "more after the object (a stream has one per line)");
	else if (!is(v, json_type_object))
		bad(ld, "not a JSON object");
	else
		stream_line(ld, v);
	json_object_put(v);
}

/* "ptwatch.spans/6" -> is it ours, another version of ours, or not ours? */
static bool check_schema(struct ld *ld, const char *schema, const char *want)
{
	if (schema && !strcmp(schema, want))
		return true;
	if (schema && !strcmp(want, PTW_LINES_SCHEMA) &&
	    (!strcmp(schema, PTW_LINES_SCHEMA_1) || !strcmp(schema, PTW_LINES_SCHEMA_2) ||
	     !strcmp(schema, PTW_LINES_SCHEMA_3)))
		return true; /* the same lines, without processes in metrics (1), backend (2),
			      * the warnings' count (3) */
	if (schema && !strcmp(want, PTW_SPANS_SCHEMA) &&
	    (!strcmp(schema, PTW_SPANS_SCHEMA_4) || !strcmp(schema, PTW_SPANS_SCHEMA_5)))
		return true; /* the same document, without the backend (4), the warnings'
			      * count (5) */
	if (schema && (!strncmp(schema, "ptwatch.spans/", 14) || !strncmp(schema, "ptwatch.lines/", 14))) {
		/* (the file's string, escaped: the refusal stays one line) */
		char *shown = ptw_escape_str(schema);
		bad(ld, "schema %.100s is not supported (this ptwatch reads %s and %s)", shown,
		    PTW_SPANS_SCHEMA, PTW_LINES_SCHEMA);
		free(shown);
		return false;
	}
	return bad(ld, "not a ptwatch spans document or --json-lines stream");
}

static bool too_big(struct ld *ld, size_t total)
{
	if (total <= PTW_LOAD_MAX_BYTES)
		return false;
	return bad(ld, "more than %zu MiB: report reads a document (or converts a stream) of at "
		       "most %zu MiB; a stream's summary, of any size",
		   PTW_LOAD_MAX_BYTES >> 20, PTW_LOAD_MAX_BYTES >> 20) || true;
}

static void read_error(struct ld *ld, struct src *s)
{
	ld->lineno = 0;
	bad(ld, "cannot read: %s", strerror(s->err));
	ld->read_errno = s->err;
}

/* The stream after its header: line by line, each at most
 * PTW_LOAD_MAX_LINE, the whole bounded only when its spans are held. */
static void read_stream(struct ld *ld, json_tokener *tok, struct src *s, const char *p, ssize_t n,
			size_t used, size_t total, bool header_line)
{
	struct ptw_buf line = { 0 };
	for (;;) {
		while ((ssize_t)used < n && !ld->failed) {
			const char *nl = memchr(p + used, '\n', (size_t)n - used);
			size_t k = nl ? (size_t)(nl - (p + used)) : (size_t)n - used;
			if (line.len + k > PTW_LOAD_MAX_LINE) {
				bad(ld, "longer than %zu MiB (the longest line report reads)",
				    PTW_LOAD_MAX_LINE >> 20);
				break;
			}
			if (k)
				ptw_buf_add(&line, p + used, k);
			used += k;
			if (!nl)
				break;
			used++;
			if (header_line && !blank(line.p, line.len))
				bad(ld, "more after the header (a stream has one object per line)");
			else if (!header_line)
				one_line(ld, tok, line.p, line.len, false);
			header_line = false;
			ld->lineno++;
			line.len = 0;
		}
		if (ld->failed)
			break;
		n = src_next(s, &p);
		used = 0;
		if (n < 0) {
			read_error(ld, s);
			break;
		}
		if (n == 0)
			break;
		total += (size_t)n;
		if (!ld->streaming && too_big(ld, total))
			break;
	}
	if (!ld->failed && line.len && !header_line)
		one_line(ld, tok, line.p, line.len, true);
	ptw_buf_free(&line);
	stream_end(ld);
}

static void read_source(struct ld *ld, struct src *s)
{
	json_tokener *tok = tokener();
	struct pos at = { 1, 1 };
	size_t total = 0, used = 0;
	const char *p = NULL;
	ssize_t n;
	json_object *first = NULL;
	/* the first value: a document, or a stream's header line */
	for (;;) {
		n = src_next(s, &p);
		if (n < 0) {
			read_error(ld, s);
			goto out;
		}
		if (n == 0) {
			if (!total)
				bad(ld, "unexpected end of file (it is empty)");
			else
				bad_at(ld, at.line, at.col, "unexpected end of file");
			goto out;
		}
		total += (size_t)n;
		if (too_big(ld, total))
			goto out;
		first = json_tokener_parse_ex(tok, p, (int)n);
		enum json_tokener_error e = json_tokener_get_error(tok);
		if (e == json_tokener_continue) {
			advance(&at, p, (size_t)n);
			continue;
		}
		used = json_tokener_get_parse_end(tok);
		advance(&at, p, used);
		if (e != json_tokener_success) {
			bad_at(ld, at.line, at.col, syntax(e));
			goto out;
		}
		break;
	}
	if (!is(first, json_type_object)) {
		bad(ld, "not a ptwatch spans document or --json-lines stream");
		goto out;
	}
	const char *schema = str(ld, first, "schema");
	if (str_is(ld, first, "type", "header") || (schema && !strncmp(schema, "ptwatch.lines/", 14))) {
		ld->lineno = at.line;
		if (!check_schema(ld, schema, PTW_LINES_SCHEMA))
			goto out;
		ld->l->stream = true;
		if (ld->streaming)
			ptw_spans_set_streaming(ld->l->report.spans, NULL, NULL);
		header_of(ld, first);
		json_object_put(first);
		first = NULL;
		if (!ld->failed)
			/* (json-c takes the blanks after a value: its newline too) */
			read_stream(ld, tok, s, p, n, used, total, at.col != 1);
		goto out;
	}
	if (!check_schema(ld, schema, PTW_SPANS_SCHEMA))
		goto out;
	/* nothing but blanks after the document */
	for (;;) {
		size_t k = first_nonblank(p + used, (size_t)n - used);
		advance(&at, p + used, k);
		if (used + k < (size_t)n) {
			bad_at(ld, at.line, at.col, "more after the document (a file holds one)");
			goto out;
		}
		n = src_next(s, &p);
		used = 0;
		if (n < 0) {
			read_error(ld, s);
			goto out;
		}
		if (n == 0)
			break;
		total += (size_t)n;
		if (too_big(ld, total))
			goto out;
	}
	load_document(ld, first);
out:
	json_object_put(first);
	json_tokener_free(tok);
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
static void filtered_counters(struct ptw_loaded *l, struct store *st, uint64_t at_least)
{
	if (st->nedges)
		qsort(st->edges, st->nedges, sizeof(*st->edges), by_edge);
	int64_t live = 0, most = 0;
	for (size_t i = 0; i < st->nedges; i++) {
		live += st->edges[i][1];
		if (live > most)
			most = live;
	}
	struct ptw_metrics m;
	ptw_spans_metrics(l->report.spans, &m); /* what add_final counted */
	ptw_spans_set_counters(l->report.spans, m.threads_created,
			       (uint64_t)most > at_least ? (uint64_t)most : at_least, m.max_depth);
}

static int load(struct src *s, bool streaming, const struct ptw_text_filter *filter,
		struct ptw_loaded **ret, char *err, size_t errlen)
{
	struct ptw_loaded *l = xcalloc(1, sizeof(*l));
	struct store *st = xcalloc(1, sizeof(*st));
	l->priv = st;
	l->report.spans = ptw_spans_new();
	l->report.strategy = "?";
	l->report.mode = "launch";
	struct ld *ld = xcalloc(1, sizeof(*ld));
	*ld = (struct ld){ .l = l, .st = st, .filter = filter, .streaming = streaming,
			   .err = err, .errlen = errlen };
	ld->filtered = filter && (filter->ntids || filter->routine);
	if (err && errlen)
		err[0] = 0;
	read_source(ld, s);
	if (!ld->failed && l->stream)
		spans_processes(ld);
	/* what is left when it failed */
	size_t it = 0;
	void *v;
	while (ptw_map_next(&ld->held, &it, NULL, &v))
		span_free(v);
	for (size_t i = 0; i < ld->npending; i++)
		span_free(ld->pending[i]);
	free(ld->pending);
	free(ld->frames);
	for (size_t i = 0; i < ld->nmarks; i++)
		free(ld->marks[i]);
	free(ld->marks);
	ptw_map_free(&ld->held);
	ptw_map_free(&ld->seen);
	ptw_map_free(&ld->waits_seen);
	ptw_map_free(&ld->kept);
	ptw_map_free(&ld->child_ns);
	int r = ld->failed ? (ld->read_errno ? -ld->read_errno : -EINVAL) : 0;
	if (!r && ld->filtered) {
		filtered_counters(l, st, 0);
	} else if (!r && l->truncated) {
		/* what the spans say, or the most a span_open line said were live */
		filtered_counters(l, st, ld->max_active);
	}
	free(ld);
	if (r < 0) {
		if (err && errlen && !err[0])
			snprintf(err, errlen, "cannot be read");
		ptw_loaded_free(l);
		return r;
	}
	ptw_spans_finish(l->report.spans);
	ptw_spans_retire_all(l->report.spans);
	*ret = l;
	return 0;
}

int ptw_load(const char *text, size_t len, bool streaming, const struct ptw_text_filter *filter,
	     struct ptw_loaded **ret, char *err, size_t errlen)
{
	struct src *s = xcalloc(1, sizeof(*s));
	s->fd = -1;
	s->mem = text;
	s->len = text ? len : 0;
	int r = load(s, streaming, filter, ret, err, errlen);
	free(s);
	return r;
}

int ptw_load_fd(int fd, bool streaming, const struct ptw_text_filter *filter,
		struct ptw_loaded **ret, char *err, size_t errlen)
{
	struct src *s = xcalloc(1, sizeof(*s));
	s->fd = fd;
	int r = load(s, streaming, filter, ret, err, errlen);
	free(s);
	return r;
}

void ptw_loaded_free(struct ptw_loaded *l)
{
	if (!l)
		return;
	struct store *st = l->priv;
	ptw_spans_free(l->report.spans);
	for (size_t i = 0; i < st->nstrings; i++)
		free(st->strings[i]);
	free(st->strings);
	for (size_t i = 0; i < st->nlocs; i++)
		free(st->locs[i]);
	free(st->locs);
	free_argv(st->argv);
	free_warnings(st);
	free(st->interrupts);
	free(st->edges);
	for (size_t i = 0; i < st->nstops; i++)
		free(st->stop_names[i]);
	free(st->stop_names);
	free(st->stop_counts);
	for (size_t i = 0; i < st->nprocs; i++)
		free_argv(st->proc_argv[i]);
	free(st->proc_argv);
	free(st->procs);
	free(st);
	free(l);
}
