/* SPDX-License-Identifier: MIT */
/* Wait spans and live deadlocks; see ptw_locks.h. Pure: events in, spans out. */
#define _GNU_SOURCE
#include "ptw_locks.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "ptw_spans.h"
#include "ptw_symbols.h"
#include "ptw_util.h"

/* ---- wait spans ---- */

struct wthread {
	pid_t tid;
	uint32_t process; /* -f: its process's id in the session (ptw_event.process) */
	struct ptw_wait **open; /* innermost last (a signal handler may wait inside a wait) */
	size_t n, cap;
};

struct ptw_locks {
	struct ptw_wait **waits;
	size_t n, cap;
	uint32_t next_id;
	struct ptw_map threads; /* tid -> struct wthread* */
	struct ptw_live_deadlock **deadlocks;
	size_t ndeadlocks;
	bool let_go;
	/* streaming (--json-lines): ended waits go into these at the next
	 * collect and are freed; the statistics start from them */
	bool streaming;
	struct ptw_wait_totals acc;
	struct ptw_object_stats *acc_obj;
	size_t nacc_obj;
	struct ptw_map acc_obj_idx; /* object key -> index + 1 */
	struct ptw_thread_waits *acc_thr;
	size_t nacc_thr;
	struct ptw_map acc_thr_idx; /* (span, tid) key -> index + 1 */
	/* `ptwatch report` of a stream: the figures are the ones its last line
	 * states (ptw_locks_set_stated); the waits held are listed only */
	bool stated;
};

struct ptw_locks *ptw_locks_new(void)
{
	return xcalloc(1, sizeof(struct ptw_locks));
}

static void deadlock_free(struct ptw_live_deadlock *d)
{
	if (!d)
		return;
	free(d->tids);
	free(d->thread_spans);
	free(d->waits);
	free(d->objects);
	free(d);
}

void ptw_locks_free(struct ptw_locks *l)
{
	if (!l)
		return;
	for (size_t i = 0; i < l->n; i++) {
		free(l->waits[i]->stack);
		free(l->waits[i]);
	}
	free(l->waits);
	size_t it = 0;
	void *v;
	while (ptw_map_next(&l->threads, &it, NULL, &v)) {
		free(((struct wthread *)v)->open);
		free(v);
	}
	ptw_map_free(&l->threads);
	for (size_t i = 0; i < l->ndeadlocks; i++)
		deadlock_free(l->deadlocks[i]);
	free(l->deadlocks);
	ptw_object_stats_free(l->acc_obj, l->nacc_obj);
	ptw_map_free(&l->acc_obj_idx);
	free(l->acc_thr);
	ptw_map_free(&l->acc_thr_idx);
	free(l);
}

size_t ptw_locks_count(const struct ptw_locks *l)
{
	return l->n;
}

const struct ptw_wait *ptw_locks_get(const struct ptw_locks *l, size_t i)
{
	return i < l->n ? l->waits[i] : NULL;
}

size_t ptw_locks_deadlock_count(const struct ptw_locks *l)
{
	return l->ndeadlocks;
}

const struct ptw_live_deadlock *ptw_locks_deadlock(const struct ptw_locks *l, size_t i)
{
	return i < l->ndeadlocks ? l->deadlocks[i] : NULL;
}

const char *ptw_wait_status_name(enum ptw_wait_status st)
{
	static const char *const names[] = { "open", "completed", "unmatched" };
	return (unsigned)st < PTW_ARRAY_SIZE(names) ? names[st] : "unmatched";
}

const char *ptw_deadlock_proof_name(enum ptw_deadlock_proof p)
{
	return p == PTW_PROOF_REREAD ? "owners_reread" : "threads_stopped";
}

const char *ptw_deadlock_proof_text(enum ptw_deadlock_proof p)
{
	return p == PTW_PROOF_REREAD ? "without a stop: owners read again, threads still waiting"
				     : "with the threads stopped";
}

const char *ptw_wait_object_kind(enum ptw_wait_kind kind)
{
	switch (kind) {
	case PTW_WAIT_MUTEX:
		return "mutex";
	case PTW_WAIT_RWLOCK:
	case PTW_WAIT_RWLOCK_READ:
	case PTW_WAIT_RWLOCK_WRITE:
		return "rwlock";
	case PTW_WAIT_COND:
		return "cond";
	case PTW_WAIT_JOIN:
		return "thread";
	case PTW_WAIT_SEM:
		return "sem";
	case PTW_WAIT_BARRIER:
		return "barrier";
	case PTW_WAIT_LOCK:
		return "lock";
	default:
		return "other";
	}
}

/* The thread of ev (ev->tid, in process ev->process), made if create. */
static struct wthread *wthread(struct ptw_locks *l, const struct ptw_event *ev, bool create)
{
	struct wthread *wt = ptw_map_get(&l->threads, (uint64_t)ev->tid);
	if (!wt && create) {
		wt = xcalloc(1, sizeof(*wt));
		wt->tid = ev->tid;
		ptw_map_put(&l->threads, (uint64_t)ev->tid, wt);
	}
	if (wt && create)
		wt->process = ev->process; /* (a tid of a process gone, used again) */
	return wt;
}

static void unmatched(struct ptw_wait *w, uint64_t ns, bool has_ns, const char *reason)
{
	w->status = PTW_WAIT_UNMATCHED;
	w->reason = reason;
	w->has_left = has_ns;
	w->left_ns = has_ns ? ns : 0;
}

/* Every open wait of the thread is over without its return. */
static void close_thread(struct ptw_locks *l, struct wthread *wt, uint64_t ns, bool has_ns,
			 const char *reason)
{
	(void)l;
	while (wt->n)
		unmatched(wt->open[--wt->n], ns, has_ns, reason);
}

/* The waits of ev's process end (its exit, its exec), or with everyone,
 * those of every process (the tracer died): with -f, one process's end is
 * not its neighbours'. */
static void close_all(struct ptw_locks *l, const struct ptw_event *ev, bool everyone, bool has_ns,
		      const char *reason)
{
	size_t it = 0;
	void *v;
	while (ptw_map_next(&l->threads, &it, NULL, &v)) {
		struct wthread *wt = v;
		if (everyone || wt->process == ev->process)
			close_thread(l, wt, ev->ns, has_ns, reason);
	}
}

static struct ptw_wait *on_begin(struct ptw_locks *l, const struct ptw_event *ev,
				 const struct ptw_span *thread, const struct ptw_span *owner)
{
	struct wthread *wt = wthread(l, ev, true);
	/* A wait whose entry was at or below this one's is over: the thread
	 * left it without returning (a longjmp out of a signal handler; or
	 * the unwinding of pthread_exit or of a cancellation, a cleanup
	 * handler waiting again: a cancelled condvar wait's takes its mutex
	 * back, as frames.c's skip_reason tells them). A wait entered in a
	 * signal handler is below (nested in) the one the handler
	 * interrupted. */
	const char *why = thread && thread->exit_called	       ? "thread_exit"
			  : thread && thread->cancel_requested ? "cancel"
							       : "longjmp";
	while (wt->n && wt->open[wt->n - 1]->sp <= ev->sp && ev->sp)
		unmatched(wt->open[--wt->n], ev->ns, true, why);
	struct ptw_wait *w = xcalloc(1, sizeof(*w));
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 64;
		l->waits = xreallocarray(l->waits, l->cap, sizeof(*l->waits));
	}
	l->waits[l->n++] = w;
	w->id = ++l->next_id;
	w->thread_span = thread ? thread->id : 0;
	w->tid = ev->tid;
	w->kind = ev->wait_kind;
	w->object = ev->wait_object;
	w->object_loc = ev->object;
	w->owner = ev->wait_owner ? ev->wait_owner : owner ? owner->tid : 0;
	w->owner_span = owner ? owner->id : 0;
	w->site = ev->site;
	if (ev->nstack) {
		w->stack = xcalloc(ev->nstack, sizeof(*w->stack));
		memcpy(w->stack, ev->stack, ev->nstack * sizeof(*w->stack));
		w->nstack = ev->nstack;
	}
	w->start_ns = ev->ns;
	w->start_unknown = ev->before_attach;
	w->sp = ev->sp;
	w->status = PTW_WAIT_OPEN;
	if (wt->n == wt->cap) {
		wt->cap = wt->cap ? 2 * wt->cap : 4;
		wt->open = xreallocarray(wt->open, wt->cap, sizeof(*wt->open));
	}
	wt->open[wt->n++] = w;
	return w;
}

static struct ptw_wait *on_end(struct ptw_locks *l, const struct ptw_event *ev)
{
	struct wthread *wt = wthread(l, ev, false);
	if (!wt || !wt->n)
		return NULL;
	struct ptw_wait *w = wt->open[--wt->n];
	w->status = PTW_WAIT_COMPLETED;
	w->has_end = true;
	w->end_ns = ev->ns >= w->start_ns ? ev->ns : w->start_ns;
	return w;
}

static struct ptw_wait *on_deadlock(struct ptw_locks *l, const struct ptw_event *ev,
				    const struct ptw_span *thread)
{
	if (!ev->span_id || !ev->has_value || !ev->value || ev->value > 4096)
		return NULL;
	struct ptw_live_deadlock *d = NULL;
	for (size_t i = 0; i < l->ndeadlocks; i++)
		if (l->deadlocks[i]->id == ev->span_id)
			d = l->deadlocks[i];
	if (!d) {
		d = xcalloc(1, sizeof(*d));
		d->id = ev->span_id;
		d->ns = ev->ns;
		d->expected = (size_t)ev->value;
		d->proof = ev->proof;
		d->tids = xcalloc(d->expected, sizeof(*d->tids));
		d->thread_spans = xcalloc(d->expected, sizeof(*d->thread_spans));
		d->waits = xcalloc(d->expected, sizeof(*d->waits));
		d->objects = xcalloc(d->expected, sizeof(*d->objects));
		l->deadlocks = xreallocarray(l->deadlocks, l->ndeadlocks + 1, sizeof(*l->deadlocks));
		l->deadlocks[l->ndeadlocks++] = d;
	}
	if (d->n >= d->expected)
		return NULL;
	struct wthread *wt = wthread(l, ev, false);
	struct ptw_wait *w = wt && wt->n ? wt->open[wt->n - 1] : NULL;
	d->tids[d->n] = ev->tid;
	d->thread_spans[d->n] = thread ? thread->id : 0;
	d->waits[d->n] = w ? w->id : 0;
	d->objects[d->n] = ev->wait_object;
	d->n++;
	if (w)
		w->deadlock = d->id;
	return w;
}

const struct ptw_wait *ptw_locks_consume(struct ptw_locks *l, const struct ptw_event *ev,
					 const struct ptw_span *thread, const struct ptw_span *owner)
{
	struct wthread *wt;
	switch (ev->kind) {
	case PTW_EV_WAIT_BEGIN:
		return on_begin(l, ev, thread, owner);
	case PTW_EV_WAIT_END:
		return on_end(l, ev);
	case PTW_EV_DEADLOCK:
		return on_deadlock(l, ev, thread);
	case PTW_EV_THREAD_DEATH:
	case PTW_EV_LWP_EXIT:
		/* Left by cancellation or pthread_exit from a handler; a thread
		 * taken down with the process ends at PROCESS_EXIT. */
		if (ev->kind == PTW_EV_LWP_EXIT && ev->exit_how != PTW_EXIT_SELF)
			return NULL;
		wt = wthread(l, ev, false);
		if (wt)
			close_thread(l, wt, ev->ns, true,
				     thread && thread->cancel_requested ? "cancel" : "thread_exit");
		return NULL;
	case PTW_EV_PROCESS_EXIT:
		close_all(l, ev, false, true, ev->sig ? "killed" : "process_exit");
		return NULL;
	case PTW_EV_EXEC:
		close_all(l, ev, false, true, "exec");
		return NULL;
	case PTW_EV_DETACHED:
		l->let_go = true; /* the waits under way go on: they stay open */
		return NULL;
	case PTW_EV_TRACER_DIED:
		if (!l->let_go)
			close_all(l, ev, true, false, "tracer_died");
		return NULL;
	default:
		return NULL;
	}
}

/* ---- statistics ---- */

static int by_total(const void *x, const void *y)
{
	const struct ptw_object_stats *a = x, *b = y;
	if (a->total_ns != b->total_ns)
		return a->total_ns < b->total_ns ? 1 : -1;
	if (a->waits != b->waits)
		return a->waits < b->waits ? 1 : -1;
	return (a->object > b->object) - (a->object < b->object);
}

/* Its duration is known: it ended, and began after the attach. */
static bool timed(const struct ptw_wait *w)
{
	return w->status == PTW_WAIT_COMPLETED && !w->start_unknown;
}

/* One wait into the per-object figures (index: object key -> position + 1). */
static void object_add(struct ptw_object_stats **st, size_t *n, struct ptw_map *index,
		       const struct ptw_wait *w)
{
	/* a join waits for a thread, not an object others contend for */
	uint64_t key = w->object ^ ((uint64_t)(w->kind == PTW_WAIT_JOIN) << 63);
	size_t k = (size_t)(uintptr_t)ptw_map_get(index, key | 1);
	struct ptw_object_stats *o;
	if (!k) {
		*st = xreallocarray(*st, *n + 1, sizeof(**st));
		o = &(*st)[(*n)++];
		memset(o, 0, sizeof(*o));
		o->object = w->object;
		o->object_loc = w->object_loc;
		o->kind = w->kind;
		ptw_map_put(index, key | 1, (void *)(uintptr_t)*n);
	} else {
		o = &(*st)[k - 1];
	}
	o->waits++;
	o->completed += w->status == PTW_WAIT_COMPLETED;
	if (timed(w)) {
		uint64_t d = w->end_ns - w->start_ns;
		o->timed++;
		o->total_ns += d;
		if (d > o->max_ns)
			o->max_ns = d;
	}
	bool seen = false;
	for (size_t t = 0; t < o->ntids && !seen; t++)
		seen = o->tids[t] == w->tid;
	if (!seen) {
		o->tids = xreallocarray(o->tids, o->ntids + 1, sizeof(*o->tids));
		o->tids[o->ntids++] = w->tid;
	}
	seen = !w->site;
	for (size_t i = 0; i < o->nsites && !seen; i++)
		seen = o->sites[i] == w->site || (o->sites[i]->addr == w->site->addr);
	if (!seen) {
		o->sites = xreallocarray(o->sites, o->nsites + 1, sizeof(*o->sites));
		o->sites[o->nsites++] = w->site;
	}
}

/* One wait into the per-thread figures. */
static void thread_add(struct ptw_thread_waits **st, size_t *n, struct ptw_map *index,
		       const struct ptw_wait *w)
{
	uint64_t key = ((uint64_t)w->thread_span << 32) | (uint32_t)w->tid;
	size_t k = (size_t)(uintptr_t)ptw_map_get(index, key | (1ull << 63));
	struct ptw_thread_waits *t;
	if (!k) {
		*st = xreallocarray(*st, *n + 1, sizeof(**st));
		t = &(*st)[(*n)++];
		memset(t, 0, sizeof(*t));
		t->tid = w->tid;
		t->thread_span = w->thread_span;
		ptw_map_put(index, key | (1ull << 63), (void *)(uintptr_t)*n);
	} else {
		t = &(*st)[k - 1];
	}
	t->waits++;
	t->completed += w->status == PTW_WAIT_COMPLETED;
	if (timed(w)) {
		uint64_t d = w->end_ns - w->start_ns;
		t->timed++;
		t->total_ns += d;
		if (d > t->max_ns)
			t->max_ns = d;
	}
}

static void totals_add(struct ptw_wait_totals *tt, const struct ptw_wait *w)
{
	tt->count++;
	tt->completed += w->status == PTW_WAIT_COMPLETED;
	tt->unmatched += w->status == PTW_WAIT_UNMATCHED;
	tt->before_attach += w->start_unknown;
	if (timed(w)) {
		uint64_t d = w->end_ns - w->start_ns;
		tt->timed++;
		tt->total_ns += d;
		if (d > tt->max_ns)
			tt->max_ns = d;
	}
}

void ptw_locks_set_streaming(struct ptw_locks *l)
{
	l->streaming = true;
}

void ptw_locks_collect(struct ptw_locks *l)
{
	if (!l->streaming)
		return;
	size_t k = 0;
	for (size_t i = 0; i < l->n; i++) {
		struct ptw_wait *w = l->waits[i];
		if (w->status == PTW_WAIT_OPEN) {
			l->waits[k++] = w;
			continue;
		}
		if (!l->stated) {
			totals_add(&l->acc, w);
			object_add(&l->acc_obj, &l->nacc_obj, &l->acc_obj_idx, w);
			thread_add(&l->acc_thr, &l->nacc_thr, &l->acc_thr_idx, w);
		}
		free(w->stack);
		free(w);
	}
	l->n = k;
}

void ptw_locks_totals(const struct ptw_locks *l, struct ptw_wait_totals *ret)
{
	*ret = l->acc;
	for (size_t i = 0; i < l->n && !l->stated; i++)
		totals_add(ret, l->waits[i]);
}

size_t ptw_locks_object_stats(const struct ptw_locks *l, struct ptw_object_stats **ret)
{
	struct ptw_object_stats *st = NULL;
	size_t n = 0;
	struct ptw_map index = { 0 }; /* object key -> position + 1 */
	/* what the freed waits left, copied (the caller frees its own) */
	if (l->nacc_obj) {
		st = xcalloc(l->nacc_obj, sizeof(*st));
		for (size_t i = 0; i < l->nacc_obj; i++) {
			st[i] = l->acc_obj[i];
			/* (none yet: NULL, which memcpy may not be given) */
			st[i].tids = xcalloc(st[i].ntids + 1, sizeof(*st[i].tids));
			if (st[i].ntids)
				memcpy(st[i].tids, l->acc_obj[i].tids, st[i].ntids * sizeof(*st[i].tids));
			st[i].sites = xcalloc(st[i].nsites + 1, sizeof(*st[i].sites));
			if (st[i].nsites)
				memcpy(st[i].sites, l->acc_obj[i].sites,
				       st[i].nsites * sizeof(*st[i].sites));
		}
		n = l->nacc_obj;
		size_t it = 0;
		uint64_t key;
		void *v;
		while (ptw_map_next((struct ptw_map *)&l->acc_obj_idx, &it, &key, &v))
			ptw_map_put(&index, key, v);
	}
	for (size_t i = 0; i < l->n && !l->stated; i++)
		object_add(&st, &n, &index, l->waits[i]);
	ptw_map_free(&index);
	if (n)
		qsort(st, n, sizeof(*st), by_total);
	*ret = st;
	return n;
}

void ptw_object_stats_free(struct ptw_object_stats *st, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(st[i].tids);
		free(st[i].sites);
	}
	free(st);
}

static int by_thread_total(const void *x, const void *y)
{
	const struct ptw_thread_waits *a = x, *b = y;
	if (a->total_ns != b->total_ns)
		return a->total_ns < b->total_ns ? 1 : -1;
	if (a->thread_span != b->thread_span)
		return a->thread_span < b->thread_span ? -1 : 1;
	return (a->tid > b->tid) - (a->tid < b->tid);
}

size_t ptw_locks_thread_stats(const struct ptw_locks *l, struct ptw_thread_waits **ret)
{
	return ptw_locks_thread_stats_of(l, NULL, NULL, ret);
}

size_t ptw_locks_thread_stats_of(const struct ptw_locks *l, ptw_wait_pred keep, void *ctx,
				 struct ptw_thread_waits **ret)
{
	struct ptw_thread_waits *st = NULL;
	size_t n = 0;
	struct ptw_map index = { 0 }; /* (span, tid) -> position + 1 */
	if (keep) {
		/* (only the waits kept can be asked: not those folded away) */
		for (size_t i = 0; i < l->n; i++)
			if (keep(l->waits[i], ctx))
				thread_add(&st, &n, &index, l->waits[i]);
	} else if (l->nacc_thr) {
		st = xcalloc(l->nacc_thr, sizeof(*st));
		memcpy(st, l->acc_thr, l->nacc_thr * sizeof(*st));
		n = l->nacc_thr;
		size_t it = 0;
		uint64_t key;
		void *v;
		while (ptw_map_next((struct ptw_map *)&l->acc_thr_idx, &it, &key, &v))
			ptw_map_put(&index, key, v);
	}
	for (size_t i = 0; i < l->n && !l->stated && !keep; i++)
		thread_add(&st, &n, &index, l->waits[i]);
	ptw_map_free(&index);
	if (n)
		qsort(st, n, sizeof(*st), by_thread_total);
	*ret = st;
	return n;
}

/* ---- `ptwatch report`: waits read back ---- */

void ptw_locks_add_final(struct ptw_locks *l, struct ptw_wait *w)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 64;
		l->waits = xreallocarray(l->waits, l->cap, sizeof(*l->waits));
	}
	l->waits[l->n++] = w;
	if (w->id > l->next_id)
		l->next_id = w->id;
}

void ptw_locks_add_deadlock(struct ptw_locks *l, struct ptw_live_deadlock *d)
{
	l->deadlocks = xreallocarray(l->deadlocks, l->ndeadlocks + 1, sizeof(*l->deadlocks));
	l->deadlocks[l->ndeadlocks++] = d;
}

void ptw_locks_set_stated(struct ptw_locks *l, const struct ptw_wait_totals *tt,
			  const struct ptw_object_stats *obj, size_t nobj,
			  const struct ptw_thread_waits *thr, size_t nthr)
{
	ptw_object_stats_free(l->acc_obj, l->nacc_obj);
	free(l->acc_thr);
	ptw_map_free(&l->acc_obj_idx);
	ptw_map_free(&l->acc_thr_idx);
	l->acc = *tt;
	l->acc_obj = xcalloc(nobj + 1, sizeof(*l->acc_obj));
	for (size_t i = 0; i < nobj; i++) {
		l->acc_obj[i] = obj[i];
		l->acc_obj[i].tids = xcalloc(obj[i].ntids + 1, sizeof(*obj[i].tids));
		if (obj[i].ntids)
			memcpy(l->acc_obj[i].tids, obj[i].tids, obj[i].ntids * sizeof(*obj[i].tids));
		l->acc_obj[i].sites = xcalloc(obj[i].nsites + 1, sizeof(*obj[i].sites));
		if (obj[i].nsites)
			memcpy(l->acc_obj[i].sites, obj[i].sites, obj[i].nsites * sizeof(*obj[i].sites));
	}
	l->nacc_obj = nobj;
	l->acc_thr = xcalloc(nthr + 1, sizeof(*l->acc_thr));
	if (nthr)
		memcpy(l->acc_thr, thr, nthr * sizeof(*thr));
	l->nacc_thr = nthr;
	l->stated = true;
}
