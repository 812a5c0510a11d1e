/* SPDX-License-Identifier: MIT */
/*
 * The reader's records: thread, frame and wait spans, deadlocks, the
 * target, the session, the processes; a document's and a stream's alike.
 */
#define _GNU_SOURCE
#include "read_int.h"

/* ---- thread spans ---- */

void ld_span_free(struct ptw_span *sp)
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

/* A wait's kind as ptw_wait_kind_name writes it. */
static enum ptw_wait_kind wait_kind_of(const char *s)
{
	for (int k = PTW_WAIT_MUTEX; s && k <= PTW_WAIT_LOCK; k++)
		if (!strcmp(ptw_wait_kind_name((enum ptw_wait_kind)k), s))
			return (enum ptw_wait_kind)k;
	return PTW_WAIT_OTHER;
}

struct ptw_span *ld_span_of(struct ld *ld, json_object *v)
{
	static const char *const origins[] = { "main", "created", "preexisting", "clone" };
	static const char *const methods[] = { NULL,	 "return",	 "pthread_exit",
					       "cancel", "process_exit", "exec",
					       "killed", "detach",	 "unknown" };
	struct store *st = ld->st;
	uint64_t id;
	if (!ld_u64_of(ld, ld_get(v, "id"), "id", UINT32_MAX, &id) || !id) {
		ld_bad(ld, "a span without an id");
		return NULL;
	}
	struct ptw_span *sp = xcalloc(1, sizeof(*sp));
	sp->id = (uint32_t)id;
	snprintf(ld->ctx, sizeof(ld->ctx), "span %u: ", sp->id);
	sp->pid = ld_pid_of(ld, v, "pid");
	sp->process = (uint32_t)ld_u64m(ld, v, "process", PTW_LOAD_MAX_PROCESSES);
	sp->tid = ld_pid_of(ld, v, "tid");
	ld_hex_of(ld_get(v, "pthread"), &sp->pthread);
	sp->name = dup_or_null(ld_str(ld, v, "name"));
	sp->origin = (enum ptw_origin)ld_name_index(ld_str(ld, v, "origin"), origins, 4,
						    PTW_ORIGIN_CREATED);
	sp->start_routine = ld_location(ld, ld_get(v, "start_routine"));
	sp->arg = ld_hexopt(v, "arg");
	sp->creator_tid = ld_pid_of(ld, v, "creator_tid");
	sp->creator_span = (uint32_t)ld_u64m(ld, v, "creator_span", UINT32_MAX);
	sp->create_site = ld_location(ld, ld_get(v, "create_site"));
	sp->depth = (unsigned)ld_u64m(ld, v, "depth", UINT32_MAX);
	json_object *det = ld_get(v, "detached");
	sp->detached = ld_is(det, json_type_boolean) ? json_object_get_boolean(det) : -1;
	sp->create_ns = ld_opt(ld, v, "create_ns");
	sp->start_ns = ld_opt(ld, v, "start_ns");
	sp->end_ns = ld_opt(ld, v, "end_ns");
	sp->status = PTW_STATUS_UNMATCHED;
	const char *status = ld_str(ld, v, "status");
	for (int i = 0; status && i < PTW_STATUS_N; i++) /* the names the writer uses */
		if (!strcmp(status, ptw_status_name((enum ptw_status)i)))
			sp->status = (enum ptw_status)i;
	json_object *end = ld_get(v, "end");
	if (ld_is(end, json_type_object)) {
		sp->method = (enum ptw_method)ld_name_index(ld_str(ld, end, "method"), methods, 9,
							    PTW_METHOD_UNKNOWN);
		sp->reason = ld_keep(st, ld_str(ld, end, "reason"));
		sp->value = ld_hexopt(end, "value");
		sp->signal = ld_signum(ld_str(ld, end, "signal"));
		sp->exit_code = ld_opt(ld, end, "exit_code");
		sp->cancel_by = ld_pid_of(ld, end, "cancelled_by");
	}
	json_object *join = ld_get(v, "join");
	if (ld_is(join, json_type_object)) {
		sp->joined = true;
		sp->joiner_tid = ld_pid_of(ld, join, "joiner_tid");
		sp->join_call_ns = ld_num(ld, join, "call_ns");
		sp->join_return_ns = ld_opt(ld, join, "return_ns");
		/* a wait cannot end before it began */
		if (sp->join_return_ns.set && sp->join_return_ns.v < sp->join_call_ns)
			sp->join_return_ns.set = false;
	}
	json_object *cpu = ld_get(v, "cpu"); /* (since spans/8) */
	if (ld_is(cpu, json_type_object)) {
		sp->cpu.set = true;
		sp->cpu.on_cpu_ns = ld_num(ld, cpu, "on_cpu_ns");
		sp->cpu.runnable_ns = ld_num(ld, cpu, "runnable_ns");
		sp->cpu.voluntary = ld_num(ld, cpu, "voluntary_switches");
		sp->cpu.involuntary = ld_num(ld, cpu, "involuntary_switches");
	}
	sp->uncertain = ld_boolean(v, "uncertain");
	sp->open_after_ns = ld_opt(ld, v, "open_after_ns");
	json_object *ow = ld_get(v, "open_where");
	if (ld_is(ow, json_type_object)) {
		sp->open_for_ns = ld_num(ld, ow, "open_for_ns");
		sp->open_state = dup_or_null(ld_str(ld, ow, "state"));
		sp->open_wchan = dup_or_null(ld_str(ld, ow, "wchan"));
		sp->open_at = ld_location(ld, ld_get(ow, "pc"));
	}
	/* a snapshot's: where the thread was */
	const char *state = ld_str(ld, v, "state");
	if (state) {
		sp->state = xstrdup(state);
		sp->wchan = dup_or_null(ld_str(ld, v, "wchan"));
		sp->stack = ld_stack_of(ld, ld_get(v, "stack"), &sp->nstack);
		json_object *w = ld_get(v, "waits_for");
		if (ld_is(w, json_type_object)) {
			/* (before spans/10 a snapshot said "rwlock") */
			sp->wait_kind = wait_kind_of(ld_str(ld, w, "kind"));
			ld_hex_of(ld_get(w, "object"), &sp->wait_object);
			sp->wait_owner = ld_pid_of(ld, w, "owner_tid");
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
	return ptw_span_filter_tid(ld->filter, tid);
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
bool ld_add_span(struct ld *ld, struct ptw_span *sp)
{
	if (ld->filtered) {
		bool want = ptw_span_filter_passes(ld->filter, sp);
		ptw_map_put(&ld->kept, sp->id, (void *)(uintptr_t)(want ? 1 : 2));
		if (!want) {
			ld_span_free(sp);
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
			ld->pending =
				xreallocarray(ld->pending, ld->cappending, sizeof(*ld->pending));
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
void ld_add_pending(struct ld *ld)
{
	if (ld->npending)
		qsort(ld->pending, ld->npending, sizeof(*ld->pending), by_span_id);
	uint32_t prev = 0;
	for (size_t i = 0; i < ld->npending; i++) {
		uint32_t id = ld->pending[i]->id;
		if (id == prev && !ld->failed) {
			size_t line = ld->lineno;
			ld->lineno = 0;
			ld_bad(ld, "span %u is there twice", id);
			ld->lineno = line;
		}
		prev = id;
		if (ld->failed)
			ld_span_free(ld->pending[i]);
		else
			ptw_spans_add_final(ld->l->report.spans, ld->pending[i]);
	}
	ld->npending = 0;
}

/* ---- frame spans ---- */

static void open_mark(struct ld *ld, json_object *v, struct ptw_open_mark *m)
{
	struct ptw_opt after = ld_opt(ld, v, "open_after_ns");
	json_object *ow = ld_get(v, "open_where");
	if (!after.set)
		return;
	m->set = true;
	m->after_ns = after.v;
	m->for_ns = ld_num(ld, ow, "open_for_ns");
	m->state = (char *)ld_keep(ld->st, ld_str(ld, ow, "state"));
	m->wchan = (char *)ld_keep(ld->st, ld_str(ld, ow, "wchan"));
	m->at = ld_location(ld, ld_get(ow, "pc"));
}

static bool frame_of(struct ld *ld, json_object *v, struct ptw_frame *fr)
{
	static const char *const statuses[] = { "open", "completed", "unmatched" };
	memset(fr, 0, sizeof(*fr));
	uint64_t id;
	if (!ld_u64_of(ld, ld_get(v, "id"), "id", UINT32_MAX, &id) || !id)
		return ld_bad(ld, "a frame without an id");
	fr->id = (uint32_t)id;
	snprintf(ld->ctx, sizeof(ld->ctx), "frame %u: ", fr->id);
	fr->thread_span = (uint32_t)ld_u64m(ld, v, "thread_span", UINT32_MAX);
	fr->pid = ld_pid_of(ld, v, "pid");
	fr->process = (uint32_t)ld_u64m(ld, v, "process", PTW_LOAD_MAX_PROCESSES);
	fr->tid = ld_pid_of(ld, v, "tid");
	fr->function = ld_location(ld, ld_get(v, "function"));
	/* Under way at the attach (since spans/5): no entry time; it begins
	 * with the session, as it did in the session that wrote it. */
	fr->entry_unknown = ld_str_is(ld, v, "entry", "before_attach");
	fr->entry_ns = fr->entry_unknown ? ld->l->report.start_ns : ld_num(ld, v, "entry_ns");
	struct ptw_opt o = ld_opt(ld, v, "return_ns");
	fr->has_return = o.set && o.v >= fr->entry_ns;
	fr->return_ns = fr->has_return ? o.v : 0;
	o = ld_opt(ld, v, "left_ns");
	fr->has_left = o.set;
	fr->left_ns = o.v;
	fr->depth = (unsigned)ld_u64m(ld, v, "depth", PTW_LOAD_MAX_FRAME_DEPTH);
	fr->parent = (uint32_t)ld_u64m(ld, v, "parent", UINT32_MAX);
	fr->status = (enum ptw_frame_status)ld_name_index(ld_str(ld, v, "status"), statuses, 3,
							  PTW_FRAME_UNMATCHED);
	if (fr->status == PTW_FRAME_COMPLETED && !fr->has_return)
		fr->status = PTW_FRAME_UNMATCHED; /* a return it does not have */
	fr->reason = ld_keep(ld->st, ld_str(ld, v, "reason"));
	fr->sig = ld_signum(ld_str(ld, v, "signal")); /* absent before ptwatch.spans/5 */
	o = ld_hexopt(v, "value");
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

int ld_by_frame_id(const void *x, const void *y)
{
	const struct ptw_frame *a = x, *b = y;
	return a->id < b->id ? -1 : a->id > b->id;
}

/* A document's frames: every frame's self time ld_is its completed children's
 * time off its own (two passes: parents come before their children). */
void ld_frames_of(struct ld *ld, json_object *arr)
{
	size_t n = ld_arr_len(arr), k = 0;
	struct ptw_frame *all = NULL;
	for (size_t i = 0; i < n && !ld->failed; i++) {
		json_object *v = json_object_array_get_idx(arr, i);
		if (!ld_str_is(ld, v, "kind", "frame"))
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

/* A stream's frame: children come before their parents (a frame's line ld_is
 * written when it ends). */
void ld_stream_frame(struct ld *ld, json_object *v)
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
	ld_hex_of(ld_get(o, "addr"), &addr);
	const char *sym = ld_str(ld, o, "symbol"), *mod = ld_str(ld, o, "module");
	*loc = NULL;
	if (sym || mod) {
		struct ptw_location *l = ld_new_location(ld->st);
		l->addr = addr;
		l->symbol = ld_keep(ld->st, sym);
		l->module = ld_keep(ld->st, mod);
		if (sym)
			ld_hex_of(ld_get(o, "symbol_offset"), &l->symbol_offset);
		*loc = l;
	}
	return addr;
}

void ld_wait_of(struct ld *ld, json_object *v)
{
	static const char *const statuses[] = { "open", "completed", "unmatched" };
	uint64_t id;
	if (!ld_u64_of(ld, ld_get(v, "id"), "id", UINT32_MAX, &id) || !id) {
		ld_bad(ld, "a wait without an id");
		return;
	}
	if (ptw_map_get(&ld->waits_seen, id)) {
		if (!ld->lineno)
			ld_bad(ld, "wait %" PRIu64 " is there twice", id);
		return;
	}
	ptw_map_put(&ld->waits_seen, id, (void *)1);
	struct ptw_wait *w = xcalloc(1, sizeof(*w));
	w->id = (uint32_t)id;
	snprintf(ld->ctx, sizeof(ld->ctx), "wait %u: ", w->id);
	w->thread_span = (uint32_t)ld_u64m(ld, v, "thread_span", UINT32_MAX);
	w->tid = ld_pid_of(ld, v, "tid");
	w->kind = wait_kind_of(ld_str(ld, v, "wait"));
	w->object = object_of(ld, ld_get(v, "object"), &w->object_loc);
	w->owner = ld_pid_of(ld, v, "owner_tid");
	w->owner_span = (uint32_t)ld_u64m(ld, v, "owner_span", UINT32_MAX);
	w->site = ld_location(ld, ld_get(v, "site"));
	w->stack = ld_stack_of(ld, ld_get(v, "stack"), &w->nstack);
	/* A wait under way at the attach (since spans/9) begins, for report,
	 * at the session's start. */
	w->start_unknown = ld_str_is(ld, v, "start", "before_attach");
	struct ptw_opt o = ld_opt(ld, v, "start_ns");
	if (!o.set && !w->start_unknown) {
		/* (every other wait begins at a time: the schema's integer) */
		ld_bad(ld, "a wait without its start_ns");
		free(w->stack);
		free(w);
		return;
	}
	w->start_ns = w->start_unknown ? ld->l->report.start_ns : o.v;
	o = ld_opt(ld, v, "end_ns");
	w->has_end = o.set && o.v >= w->start_ns;
	w->end_ns = w->has_end ? o.v : 0;
	o = ld_opt(ld, v, "left_ns");
	w->has_left = o.set;
	w->left_ns = o.v;
	w->status = (enum ptw_wait_status)ld_name_index(ld_str(ld, v, "status"), statuses, 3,
							PTW_WAIT_UNMATCHED);
	if (w->status == PTW_WAIT_COMPLETED && !w->has_end)
		w->status = PTW_WAIT_UNMATCHED;
	w->reason = ld_keep(ld->st, ld_str(ld, v, "reason"));
	w->deadlock = (uint32_t)ld_u64m(ld, v, "deadlock", UINT32_MAX);
	ld->ctx[0] = 0;
	/* (--object: the waits on its objects alone, in every output) */
	if (ld->failed || !thread_kept(ld, w->thread_span, w->tid) ||
	    !ptw_span_filter_object(ld->filter, w->object, w->object_loc)) {
		free(w->stack);
		free(w);
		return;
	}
	ptw_locks_add_final(ptw_spans_locks_mut(ld->l->report.spans), w);
}

void ld_deadlock_of(struct ld *ld, json_object *v, uint32_t id)
{
	json_object *tids = ld_get(v, "tids"), *spans = ld_get(v, "spans"),
		    *waits = ld_get(v, "waits"), *objects = ld_get(v, "objects");
	size_t n = ld_arr_len(tids);
	if (n > PTW_LOAD_MAX_DEADLOCK) {
		ld_bad(ld, "a deadlock of %zu threads (report reads at most %d)", n,
		       PTW_LOAD_MAX_DEADLOCK);
		return;
	}
	struct ptw_live_deadlock *d = xcalloc(1, sizeof(*d));
	d->id = id;
	d->ns = ld_num(ld, v, "ns");
	/* (since spans/5; absent: the tracer's, the only one before) */
	const char *proof = ld_str(ld, v, "confirmed_by");
	d->proof = proof && !strcmp(proof, "owners_reread") ? PTW_PROOF_REREAD : PTW_PROOF_STOPPED;
	d->n = d->expected = n;
	d->tids = xcalloc(n + 1, sizeof(*d->tids));
	d->thread_spans = xcalloc(n + 1, sizeof(*d->thread_spans));
	d->waits = xcalloc(n + 1, sizeof(*d->waits));
	d->objects = xcalloc(n + 1, sizeof(*d->objects));
	for (size_t k = 0; k < n; k++) {
		uint64_t x;
		if (ld_u64_of(ld, json_object_array_get_idx(tids, k), "tids", PTW_LOAD_MAX_PID, &x))
			d->tids[k] = (pid_t)x;
		if (k < ld_arr_len(spans) &&
		    ld_u64_of(ld, json_object_array_get_idx(spans, k), "spans", UINT32_MAX, &x))
			d->thread_spans[k] = (uint32_t)x;
		if (k < ld_arr_len(waits) &&
		    ld_u64_of(ld, json_object_array_get_idx(waits, k), "waits", UINT32_MAX, &x))
			d->waits[k] = (uint32_t)x;
		if (k < ld_arr_len(objects))
			ld_hex_of(json_object_array_get_idx(objects, k), &d->objects[k]);
	}
	ptw_locks_add_deadlock(ptw_spans_locks_mut(ld->l->report.spans), d);
}

/* Of v's completed waits, those with a duration (since spans/9, lines/7:
 * before, every completed one). */
static uint64_t ld_timed(struct ld *ld, json_object *v)
{
	struct ptw_opt o = ld_opt(ld, v, "timed");
	return o.set ? o.v : ld_num(ld, v, "completed");
}

/* A stream's last line: the figures of every wait, of which it has lines
 * for the completed ones only. */
void ld_stated_waits(struct ld *ld, json_object *m)
{
	json_object *w = ld_get(m, "waits");
	if (!ld_is(w, json_type_object) || ld->filtered)
		return; /* (a filtered report counts what it shows) */
	struct ptw_wait_totals tt = { .count = ld_num(ld, w, "count"),
				      .completed = ld_num(ld, w, "completed"),
				      .unmatched = ld_num(ld, w, "unmatched"),
				      .total_ns = ld_num(ld, w, "total_ns"),
				      .max_ns = ld_num(ld, w, "max_ns"),
				      .timed = ld_timed(ld, w),
				      .before_attach = ld_opt(ld, w, "before_attach").v };
	json_object *objs = ld_get(m, "contended_objects"), *thr = ld_get(m, "thread_waits");
	size_t no = ld_arr_len(objs), nt = ld_arr_len(thr);
	struct ptw_object_stats *os = xcalloc(no + 1, sizeof(*os));
	for (size_t i = 0; i < no && !ld->failed; i++) {
		json_object *v = json_object_array_get_idx(objs, i), *ob = ld_get(v, "object");
		os[i].object = object_of(ld, ob, &os[i].object_loc);
		os[i].kind = object_kind_of(ld_str(ld, ob, "kind"));
		os[i].waits = ld_num(ld, v, "waits");
		os[i].completed = ld_num(ld, v, "completed");
		os[i].timed = ld_timed(ld, v);
		os[i].total_ns = ld_num(ld, v, "total_ns");
		os[i].max_ns = ld_num(ld, v, "max_ns");
		json_object *tids = ld_get(v, "tids"), *sites = ld_get(v, "sites");
		os[i].tids = xcalloc(ld_arr_len(tids) + 1, sizeof(*os[i].tids));
		for (size_t k = 0; k < ld_arr_len(tids); k++) {
			uint64_t x;
			if (ld_u64_of(ld, json_object_array_get_idx(tids, k), "tids",
				      PTW_LOAD_MAX_PID, &x))
				os[i].tids[os[i].ntids++] = (pid_t)x;
		}
		os[i].sites = xcalloc(ld_arr_len(sites) + 1, sizeof(*os[i].sites));
		for (size_t k = 0; k < ld_arr_len(sites); k++)
			if ((os[i].sites[os[i].nsites] =
				     ld_location(ld, json_object_array_get_idx(sites, k))))
				os[i].nsites++;
	}
	struct ptw_thread_waits *ts = xcalloc(nt + 1, sizeof(*ts));
	for (size_t i = 0; i < nt && !ld->failed; i++) {
		json_object *v = json_object_array_get_idx(thr, i);
		ts[i].tid = ld_pid_of(ld, v, "tid");
		ts[i].thread_span = (uint32_t)ld_u64m(ld, v, "thread_span", UINT32_MAX);
		ts[i].waits = ld_num(ld, v, "waits");
		ts[i].completed = ld_num(ld, v, "completed");
		ts[i].timed = ld_timed(ld, v);
		ts[i].total_ns = ld_num(ld, v, "total_ns");
		ts[i].max_ns = ld_num(ld, v, "max_ns");
	}
	if (!ld->failed)
		ptw_locks_set_stated(ptw_spans_locks_mut(ld->l->report.spans), &tt, os, no, ts, nt);
	ptw_object_stats_free(os, no);
	free(ts);
}

/* ---- the target, the session, the processes ---- */

static char **argv_of(struct ld *ld, json_object *arr)
{
	size_t n = ld_arr_len(arr);
	char **argv = xcalloc(n + 1, sizeof(char *));
	for (size_t i = 0; i < n; i++) {
		json_object *a = json_object_array_get_idx(arr, i);
		size_t len = ld_is(a, json_type_string) ? (size_t)json_object_get_string_len(a) : 0;
		if (len > PTW_LOAD_MAX_STRING) {
			ld_bad(ld, "an argument of %zu bytes (report reads at most %zu)", len,
			       PTW_LOAD_MAX_STRING);
			len = 0;
		}
		argv[i] = xstrdup(len ? json_object_get_string(a) : "");
	}
	return argv;
}

static int exit_of(struct ld *ld, json_object *ex, int *code, int *sig, bool *core)
{
	if (!ld_is(ex, json_type_object))
		return PTW_EXIT_NONE;
	if (ld_get(ex, "code")) {
		*code = (int)ld_i64m(ld, ex, "code", INT_MIN + 1, INT_MAX);
		return PTW_EXIT_CODE;
	}
	*sig = ld_signum(ld_str(ld, ex, "signal"));
	*core = ld_boolean(ex, "core_dumped");
	return PTW_EXIT_SIGNAL;
}

static void target_of(struct ld *ld, json_object *t)
{
	struct ptw_report *r = &ld->l->report;
	struct store *st = ld->st;
	r->pid = ld_pid_of(ld, t, "pid");
	r->exe = ld_keep(st, ld_str(ld, t, "exe"));
	json_object *argv = ld_get(t, "argv");
	if (ld_is(argv, json_type_array)) {
		ld_free_argv(st->argv);
		st->argv = argv_of(ld, argv);
		r->argv = st->argv;
	}
	if (ld_str(ld, t, "mode"))
		r->mode = ld_keep(st, ld_str(ld, t, "mode"));
	r->glibc = ld_keep(st, ld_str(ld, t, "glibc"));
	int code = 0, sig = 0;
	bool core = false;
	r->exit_kind = exit_of(ld, ld_get(t, "exit"), &code, &sig, &core);
	r->exit_code = code;
	r->exit_signal = sig;
	r->core_dumped = core;
	const char *fate = ld_str(ld, t, "fate");
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
		 * ld_is what the live summary says in the usual case */
		r->traced_by = getpid();
	}
}

static void session_of(struct ld *ld, json_object *se)
{
	struct ptw_report *r = &ld->l->report;
	struct store *st = ld->st;
	r->start_ns = ld_num(ld, se, "start_ns");
	r->end_ns = ld_num(ld, se, "end_ns");
	r->end_reason = ld_keep(st, ld_str(ld, se, "end_reason"));
	r->frozen_ns = ld_num(ld, se, "frozen_ns");
	if (ld_str(ld, se, "strategy"))
		r->strategy = ld_keep(st, ld_str(ld, se, "strategy"));
	/* (since spans/5: absent before, every session was ptrace's; null:
	 * not known, as written) */
	r->backend = ld_keep(st, ld_is(se, json_type_object) &&
						 json_object_object_get_ex(se, "backend", NULL)
					 ? ld_str(ld, se, "backend")
					 : "ptrace");
	if (ld_str(ld, se, "backend_why"))
		r->backend_why = ld_keep(st, ld_str(ld, se, "backend_why"));
	r->probes = (size_t)ld_num(ld, se, "probes");
	r->probes_stepped = (size_t)ld_u64m(ld, se, "probes_stepped", UINT32_MAX); /* spans/6 */
	json_object *cpu = ld_get(se, "tracer_cpu_ns");
	r->tracer_user_ns = ld_num(ld, cpu, "user");
	r->tracer_sys_ns = ld_num(ld, cpu, "sys");
	r->breakpoints = (size_t)ld_num(ld, se, "breakpoints");
	r->open_timeout_ns = ld_num(ld, se, "open_timeout_ns");
	json_object *stops = ld_get(se, "stops");
	if (ld_is(stops, json_type_object)) {
		size_t n = (size_t)json_object_object_length(stops);
		size_t kinds = n - (ld_get(stops, "total") != NULL);
		if (kinds > PTW_LOAD_MAX_STOP_KINDS) {
			ld_bad(ld, "%zu kinds of ptrace stops (report reads at most %d)", kinds,
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
		r->stops_total = ld_num(ld, stops, "total");
		json_object_object_foreach(stops, k, v)
		{
			if (!strcmp(k, "total") || strlen(k) > PTW_LOAD_MAX_STRING)
				continue;
			st->stop_names[st->nstops] = xstrdup(k);
			ld_u64_of(ld, v, k, UINT64_MAX - 1, &st->stop_counts[st->nstops]);
			st->nstops++;
		}
		r->stop_names = (const char *const *)st->stop_names;
		r->stop_counts = st->stop_counts;
		r->nstop_kinds = st->nstops;
	}
	json_object *in = ld_get(se, "interrupts");
	free(st->interrupts);
	st->interrupts = xcalloc(ld_arr_len(in) + 1, sizeof(*st->interrupts));
	st->ninterrupts = 0;
	for (size_t i = 0; i < ld_arr_len(in); i++) {
		static const char *const whys[] = { "attached", "terminal", "process_group",
						    "again", "ptwatch_alone" };
		json_object *x = json_object_array_get_idx(in, i);
		struct ptw_interrupt *pi = &st->interrupts[st->ninterrupts++];
		pi->sig = ld_signum(ld_str(ld, x, "signal"));
		pi->ns = ld_num(ld, x, "ns");
		pi->reached_target = ld_boolean(x, "reached_target");
		pi->action = ld_str_is(ld, x, "action", "traced_on") ? PTW_INTR_TRACED_ON
								     : PTW_INTR_DETACHED;
		pi->why = (enum ptw_interrupt_why)ld_name_index(ld_str(ld, x, "why"), whys, 5,
								PTW_INTR_PTWATCH_ALONE);
	}
	r->interrupts = st->interrupts;
	r->ninterrupts = st->ninterrupts;
}

void ld_header_of(struct ld *ld, json_object *doc)
{
	struct ptw_report *r = &ld->l->report;
	json_object *tool = ld_get(doc, "tool"), *clock = ld_get(doc, "clock");
	if (ld_str(ld, tool, "version"))
		r->tool_version = ld_keep(ld->st, ld_str(ld, tool, "version"));
	if (clock)
		r->realtime_offset_ns =
			ld_i64m(ld, clock, "realtime_offset_ns", INT64_MIN + 1, INT64_MAX);
	if (ld_is(ld_get(doc, "target"), json_type_object))
		target_of(ld, ld_get(doc, "target"));
	if (ld_is(ld_get(doc, "session"), json_type_object))
		session_of(ld, ld_get(doc, "session"));
}

void ld_warnings_of(struct ld *ld, json_object *arr)
{
	struct store *st = ld->st;
	ld_free_warnings(st);
	for (size_t i = 0; i < ld_arr_len(arr); i++) {
		json_object *w = json_object_array_get_idx(arr, i);
		const char *code = ld_str(ld, w, "code"),
			   *msg = ld_str_max(ld, w, "message", PTW_LOAD_MAX_MESSAGE);
		/* (how many times it was said: since spans/6, absent once) */
		unsigned count = (unsigned)ld_u64m(ld, w, "count", UINT32_MAX);
		ld_add_warning(st, code ? code : "?", msg ? msg : "", count > 1 ? count : 1);
	}
	ld->l->report.warnings = st->warnings;
	ld->l->report.nwarnings = st->nwarnings;
}

void ld_processes_of(struct ld *ld, json_object *arr)
{
	struct store *st = ld->st;
	size_t n = ld_arr_len(arr);
	if (!ld_is(arr, json_type_array))
		return;
	if (n > PTW_LOAD_MAX_PROCESSES) {
		ld_bad(ld, "%zu processes (report reads at most %u)", n, PTW_LOAD_MAX_PROCESSES);
		return;
	}
	st->procs = xcalloc(n + 1, sizeof(*st->procs));
	st->proc_argv = xcalloc(n + 1, sizeof(*st->proc_argv));
	for (size_t i = 0; i < n && !ld->failed; i++) {
		json_object *v = json_object_array_get_idx(arr, i);
		struct ptw_process *p = &st->procs[st->nprocs++];
		p->id = (uint32_t)ld_u64m(ld, v, "id", PTW_LOAD_MAX_PROCESSES);
		p->parent_id = (uint32_t)ld_u64m(ld, v, "parent_process", PTW_LOAD_MAX_PROCESSES);
		p->pid = ld_pid_of(ld, v, "pid");
		p->ppid = ld_pid_of(ld, v, "ppid");
		p->parent_tid = ld_pid_of(ld, v, "parent_tid");
		p->exe = ld_keep(st, ld_str(ld, v, "exe"));
		st->proc_argv[i] = argv_of(ld, ld_get(v, "argv"));
		p->argv = st->proc_argv[i];
		p->start_ns = ld_num(ld, v, "start_ns");
		p->end_ns = ld_num(ld, v, "end_ns");
		p->exit_kind = exit_of(ld, ld_get(v, "exit"), &p->exit_code, &p->exit_signal,
				       &p->core_dumped);
		p->followed = ld_boolean(v, "followed");
		p->not_followed_why = ld_keep(st, ld_str(ld, v, "not_followed_why"));
		p->detached = ld_boolean(v, "detached");
	}
	ld->l->report.processes = st->procs;
	ld->l->report.nprocesses = st->nprocs;
}

/* A stream's spans do not say which entry of processes ld_is theirs (-f):
 * the one of their pid that was alive when they began. */
void ld_spans_processes(struct ld *ld)
{
	struct ptw_report *r = &ld->l->report;
	for (size_t i = 0; r->nprocesses && i < ptw_spans_count(r->spans); i++) {
		/* (the loader's own spans, given to the engine) */
		struct ptw_span *sp = (struct ptw_span *)ptw_spans_get(r->spans, i);
		struct ptw_opt began = sp->create_ns.set ? sp->create_ns : sp->start_ns;
		for (size_t k = 0; k < r->nprocesses; k++) {
			const struct ptw_process *p = &r->processes[k];
			if (p->pid == sp->pid &&
			    (!began.set ||
			     (p->start_ns <= began.v && (!p->end_ns || began.v <= p->end_ns))))
				sp->process = p->id;
		}
	}
}

void ld_counters_of(struct ld *ld, json_object *m)
{
	if (!ld_is(m, json_type_object) || ld->filtered)
		return; /* a filtered report counts what it shows */
	ptw_spans_set_counters(ld->l->report.spans, ld_num(ld, m, "threads_created"),
			       ld_num(ld, m, "max_active"), ld_num(ld, m, "max_depth"));
}
