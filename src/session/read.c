/* SPDX-License-Identifier: MIT */
/*
 * Saved documents and streams read back, with json-c; see ptw_load.h.
 * A document is read whole, a stream line by line (read_stream.c); what
 * both hold is read by read_spans.c.
 */
#define _GNU_SOURCE
#include "read_int.h"

/* ---- a document ---- */

static void load_document(struct ld *ld, json_object *doc)
{
	struct ptw_report *r = &ld->l->report;
	json_object *spans = ld_get(doc, "spans"), *metrics = ld_get(doc, "metrics");
	if (!ld_is(spans, json_type_array) || !ld_is(metrics, json_type_object)) {
		ld_bad(ld, "not a spans document (no spans or metrics)");
		return;
	}
	ld_header_of(ld, doc);
	ld_warnings_of(ld, ld_get(doc, "warnings"));
	ld_processes_of(ld, ld_get(doc, "processes"));
	ld_counters_of(ld, metrics);
	/* --locks: the waits' figures, even with none (as the session wrote) */
	r->locks = ld_is(ld_get(metrics, "waits"), json_type_object);
	json_object *dl = ld_get(doc, "deadlocks");
	r->snapshot = (r->end_reason && !strcmp(r->end_reason, "snapshot")) ||
		      (ld_is(dl, json_type_array) && !r->locks);
	size_t n = ld_arr_len(spans);
	for (size_t i = 0; i < n && !ld->failed; i++) {
		json_object *v = json_object_array_get_idx(spans, i);
		if (!ld_str_is(ld, v, "kind", "thread"))
			continue;
		struct ptw_span *sp = ld_span_of(ld, v);
		if (sp)
			ld_add_span(ld, sp);
	}
	ld_add_pending(ld);
	ld_frames_of(ld, spans);
	for (size_t i = 0; i < n && !ld->failed; i++) {
		json_object *v = json_object_array_get_idx(spans, i);
		if (ld_str_is(ld, v, "kind", "wait"))
			ld_wait_of(ld, v);
	}
	for (size_t i = 0; r->locks && i < ld_arr_len(dl) && !ld->failed; i++)
		ld_deadlock_of(ld, json_object_array_get_idx(dl, i), (uint32_t)i + 1);
}

/* ---- reading: json-c, a document whole, a stream line by line ---- */

struct src {
	int fd; /* or -1: mem */
	const char *mem;
	size_t len, off;
	int err; /* a read's errno */
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

/* Where the next byte ld_is. */
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
	/* (what follows a value ld_is checked here: blanks, or the next line) */
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
	ld_bad(ld, "line %zu, column %zu: %s", line, col, what);
	ld->lineno = saved;
}

/* One line of a stream (without its newline). last: no newline ended it
 * (a line cut short there ld_is the end of a cut stream). */
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
			       e == json_tokener_continue ? "the line ends inside a value"
							  : syntax(e));
		return;
	}
	if (!blank(p + end, n - end))
		bad_at(ld, ld->lineno, end + 1,
		       "more after the object (a stream has one per line)");
	else if (!ld_is(v, json_type_object))
		ld_bad(ld, "not a JSON object");
	else
		ld_stream_line(ld, v);
	json_object_put(v);
}

/* "ptwatch.spans/7" -> ld_is it ours, another version of ours, or not ours? */
static bool check_schema(struct ld *ld, const char *schema, const char *want)
{
	if (schema && !strcmp(schema, want))
		return true;
	if (schema && !strcmp(want, PTW_LINES_SCHEMA) &&
	    (!strcmp(schema, PTW_LINES_SCHEMA_1) || !strcmp(schema, PTW_LINES_SCHEMA_2) ||
	     !strcmp(schema, PTW_LINES_SCHEMA_3) || !strcmp(schema, PTW_LINES_SCHEMA_4) ||
	     !strcmp(schema, PTW_LINES_SCHEMA_5) || !strcmp(schema, PTW_LINES_SCHEMA_6) ||
	     !strcmp(schema, PTW_LINES_SCHEMA_7) || !strcmp(schema, PTW_LINES_SCHEMA_8)))
		return true; /* the same lines, without processes in metrics (1), backend (2),
			      * the warnings' count (3), the code foreign_breakpoint (4), a
			      * span's cpu (5), a wait's start (6); a snapshot's "rwlock" (7); no
			      * -f child's frames under way (8) */
	if (schema && !strcmp(want, PTW_SPANS_SCHEMA) &&
	    (!strcmp(schema, PTW_SPANS_SCHEMA_4) || !strcmp(schema, PTW_SPANS_SCHEMA_5) ||
	     !strcmp(schema, PTW_SPANS_SCHEMA_6) || !strcmp(schema, PTW_SPANS_SCHEMA_7) ||
	     !strcmp(schema, PTW_SPANS_SCHEMA_8) || !strcmp(schema, PTW_SPANS_SCHEMA_9) ||
	     !strcmp(schema, PTW_SPANS_SCHEMA_10)))
		return true; /* the same document, without the backend (4), the warnings'
			      * count (5), the code foreign_breakpoint (6), a span's cpu (7), a
			      * wait's start (8); a snapshot's "rwlock" (9); no -f child's frames
			      * under way (10) */
	if (schema &&
	    (!strncmp(schema, "ptwatch.spans/", 14) || !strncmp(schema, "ptwatch.lines/", 14))) {
		/* (the file's string, escaped: the refusal stays one line) */
		char *shown = ptw_escape_str(schema);
		ld_bad(ld, "schema %.100s is not supported (this ptwatch reads %s and %s)", shown,
		       PTW_SPANS_SCHEMA, PTW_LINES_SCHEMA);
		free(shown);
		return false;
	}
	return ld_bad(ld, "not a ptwatch spans document or --json-lines stream");
}

static bool too_big(struct ld *ld, size_t total)
{
	if (total <= PTW_LOAD_MAX_BYTES)
		return false;
	return ld_bad(ld,
		      "more than %zu MiB: report reads a document (or converts a stream) of at "
		      "most %zu MiB; a stream's summary, of any size",
		      PTW_LOAD_MAX_BYTES >> 20, PTW_LOAD_MAX_BYTES >> 20) ||
	       true;
}

static void read_error(struct ld *ld, struct src *s)
{
	ld->lineno = 0;
	ld_bad(ld, "cannot read: %s", strerror(s->err));
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
				ld_bad(ld, "longer than %zu MiB (the longest line report reads)",
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
				ld_bad(ld,
				       "more after the header (a stream has one object per line)");
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
	ld_stream_end(ld);
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
				ld_bad(ld, "unexpected end of file (it is empty)");
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
	if (!ld_is(first, json_type_object)) {
		ld_bad(ld, "not a ptwatch spans document or --json-lines stream");
		goto out;
	}
	const char *schema = ld_str(ld, first, "schema");
	if (ld_str_is(ld, first, "type", "header") ||
	    (schema && !strncmp(schema, "ptwatch.lines/", 14))) {
		ld->lineno = at.line;
		if (!check_schema(ld, schema, PTW_LINES_SCHEMA))
			goto out;
		ld->l->stream = true;
		if (ld->streaming)
			ptw_spans_set_streaming(ld->l->report.spans, NULL, NULL);
		ld_header_of(ld, first);
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

static int load(struct src *s, bool streaming, const struct ptw_span_filter *filter,
		struct ptw_loaded **ret, char *err, size_t errlen)
{
	struct ptw_loaded *l = xcalloc(1, sizeof(*l));
	struct store *st = xcalloc(1, sizeof(*st));
	l->priv = st;
	l->report.spans = ptw_spans_new();
	l->report.strategy = "?";
	l->report.mode = "launch";
	struct ld *ld = xcalloc(1, sizeof(*ld));
	*ld = (struct ld){ .l = l,
			   .st = st,
			   .filter = filter,
			   .streaming = streaming,
			   .err = err,
			   .errlen = errlen };
	ld->filtered = ptw_span_filter_on(filter);
	if (err && errlen)
		err[0] = 0;
	read_source(ld, s);
	if (!ld->failed && l->stream)
		ld_spans_processes(ld);
	/* what ld_is left when it failed */
	size_t it = 0;
	void *v;
	while (ptw_map_next(&ld->held, &it, NULL, &v))
		ld_span_free(v);
	for (size_t i = 0; i < ld->npending; i++)
		ld_span_free(ld->pending[i]);
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

int ptw_load(const char *text, size_t len, bool streaming, const struct ptw_span_filter *filter,
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

int ptw_load_fd(int fd, bool streaming, const struct ptw_span_filter *filter,
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
	ld_free_argv(st->argv);
	ld_free_warnings(st);
	free(st->interrupts);
	free(st->edges);
	for (size_t i = 0; i < st->nstops; i++)
		free(st->stop_names[i]);
	free(st->stop_names);
	free(st->stop_counts);
	for (size_t i = 0; i < st->nprocs; i++)
		ld_free_argv(st->proc_argv[i]);
	free(st->proc_argv);
	free(st->procs);
	free(st);
	free(l);
}
