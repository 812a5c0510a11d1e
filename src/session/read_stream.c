/* SPDX-License-Identifier: MIT */
/*
 * The reader, a stream (--json-lines): line by line, spans held until
 * their end line, the run's end (or its absence) told.
 */
#define _GNU_SOURCE
#include "read_int.h"

/* ---- a stream, line by line ---- */

static void drop_held(struct ld *ld, uint32_t id)
{
	struct ptw_span *sp = ptw_map_del(&ld->held, id);
	if (sp) {
		ld_span_free(sp);
		ld->nheld--;
	}
}

static void stream_span(struct ld *ld, json_object *v, bool open)
{
	json_object *sv = ld_get(v, "span");
	if (!ld_is(sv, json_type_object)) {
		ld_bad(ld, "a span line without its span");
		return;
	}
	struct ptw_span *sp = ld_span_of(ld, sv);
	if (!sp)
		return;
	if (open) {
		uint64_t active = ld_u64m(ld, v, "active", PTW_LOAD_MAX_PID);
		if (active > ld->max_active)
			ld->max_active = active;
		if (ld->filtered)
			ptw_map_put(
				&ld->kept, sp->id,
				(void *)(uintptr_t)(ptw_span_filter_passes(ld->filter, sp) ? 1 : 2));
		/* kept until it ends (or the stream does) */
		if (ld->failed || ptw_map_get(&ld->seen, sp->id) ||
		    ptw_map_get(&ld->held, sp->id)) {
			ld_span_free(sp);
			return;
		}
		if (ld->nheld >= PTW_LOAD_MAX_PID) {
			ld_span_free(sp);
			ld_bad(ld,
			       "more than %d threads begun and not ended (more than Linux allows at once)",
			       PTW_LOAD_MAX_PID);
			return;
		}
		ptw_map_put(&ld->held, sp->id, sp);
		ld->nheld++;
		return;
	}
	/* (a span twice: the tracer's line ld_is the one that counts; the
	 * restorer may repeat one it had not heard the end of) */
	if (ld->failed || ptw_map_get(&ld->seen, sp->id)) {
		ld_span_free(sp);
		return;
	}
	drop_held(ld, sp->id);
	ptw_map_put(&ld->seen, sp->id, (void *)1);
	ld_add_span(ld, sp);
}

static void stream_metrics(struct ld *ld, json_object *v)
{
	ld_header_of(ld, v);
	ld_warnings_of(ld, ld_get(v, "warnings"));
	ld->warning_lines = false;
	ld_processes_of(ld, ld_get(v, "processes"));
	json_object *m = ld_get(v, "metrics");
	ld_counters_of(ld, m);
	ld->l->report.locks = ld_is(ld_get(m, "waits"), json_type_object);
	const char *why = ld->l->report.end_reason;
	ld->l->report.snapshot = why && !strcmp(why, "snapshot");
	ld_stated_waits(ld, m);
}

void ld_stream_line(struct ld *ld, json_object *v)
{
	const char *type = ld_str(ld, v, "type");
	if (ld->failed)
		return;
	if (!type) {
		ld_bad(ld, "no type");
		return;
	}
	if (!strcmp(type, "header")) {
		ld_bad(ld, "a second session begins here: report reads one session per file (split "
			   "it before each header line)");
		return;
	}
	if (ld->metrics) {
		ld_bad(ld, "a %s line after the metrics line, the last of a session", type);
		return;
	}
	if (!strcmp(type, "span_open") || !strcmp(type, "span")) {
		stream_span(ld, v, type[4] == '_');
	} else if (!strcmp(type, "frame")) {
		json_object *fv = ld_get(v, "frame");
		if (ld_is(fv, json_type_object))
			ld_stream_frame(ld, fv);
	} else if (!strcmp(type, "wait")) {
		json_object *wv = ld_get(v, "wait");
		if (ld_is(wv, json_type_object))
			ld_wait_of(ld, wv);
	} else if (!strcmp(type, "deadlock")) {
		json_object *dv = ld_get(v, "deadlock");
		size_t n = ptw_locks_deadlock_count(ptw_spans_locks(ld->l->report.spans));
		if (ld_is(dv, json_type_object))
			ld_deadlock_of(ld, dv, (uint32_t)n + 1);
	} else if (!strcmp(type, "warning")) {
		/* the metrics line has them all; a cut stream has these */
		struct store *st = ld->st;
		if (!ld->warning_lines)
			ld_free_warnings(st);
		ld->warning_lines = true;
		const char *code = ld_str(ld, v, "code"),
			   *msg = ld_str_max(ld, v, "message", PTW_LOAD_MAX_MESSAGE);
		ld_add_warning(st, code ? code : "?", msg ? msg : "", 1);
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
void ld_stream_end(struct ld *ld)
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
			ld_span_free(sp);
		else
			ld_add_span(ld, sp);
	}
	free(ids);
	if (ld->streaming)
		ptw_spans_collect(r->spans);
	ld_add_pending(ld);
	if (ld->nframes)
		qsort(ld->frames, ld->nframes, sizeof(*ld->frames), ld_by_frame_id);
	for (size_t i = 0; i < ld->nframes && !ld->failed; i++)
		ptw_frames_add(ptw_spans_frames_mut(r->spans), &ld->frames[i]);
	ld->nframes = 0;
	if (ld->metrics)
		return;
	ld->l->truncated = true;
	r->end_reason = "cut";
	ld_add_warning(
		ld->st, ptw_warning_code(PTW_W_STREAM_CUT),
		"the stream ends before its last line (the run was cut short): spans without "
		"an end are shown open; how the session ended is not in it",
		1);
	r->warnings = ld->st->warnings;
	r->nwarnings = ld->st->nwarnings;
}
