/* SPDX-License-Identifier: MIT */
/* The live table's row model: pure (see ptw_live.h). */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ptw_dist.h"
#include "ptw_frames.h"
#include "ptw_live.h"
#include "ptw_locks.h"
#include "ptw_output.h"
#include "ptw_symbols.h"
#include "ptw_util.h"

/* A span the model shows (live, or ended less than PTW_LIVE_FADE_NS ago).
 * What it shows is copied at each note (snap), so that the engine may let
 * go of a span once it ended; the engine's own is kept only while the span
 * lives (for ptw_live_model_refresh). */
struct track {
	const struct ptw_span *sp; /* NULL once ended */
	struct ptw_span snap;	   /* strings point into the buffers below, or NULL */
	char snap_name[64], snap_open_state[48];
	const struct ptw_location *loc; /* the routine text below is for this */
	bool loc_known;
	size_t group;	  /* index in groups */
	bool ended;	  /* counted as ended */
	uint64_t end_ns;  /* when it ended (fade from there) */
	bool spawn_seen;  /* its spawn latency is in its group's */
	bool created;	  /* counted in created */
	uint64_t seen_ns; /* first noted */
	char name[64];	  /* from name_of, at name_ns (escaped: up to 4 bytes a byte) */
	uint64_t name_ns;
	/* cpu_of's last two readings (at, its time on a CPU then): CPU% */
	uint64_t cpu_at, cpu_ns, cpu_prev_at, cpu_prev_ns;
	char tid_text[16];
	char state[64];
	char wait[48]; /* --locks: what it waits for now, "" when it does not */
	size_t call;   /* --trace: its innermost open call's function, index + 1; 0 none */
};

struct group_acc {
	char *routine;
	uint64_t total, ended, late;
	double cpu_pct; /* its live threads' now (each build) */
	bool has_cpu;	/* ... some live thread's is known */
	uint64_t life_sum, life_max, life_n;
	uint64_t spawn_sum, spawn_n;
};

/* --trace: the calls of one traced function. */
struct fn_acc {
	char *function;
	uint64_t calls, in_flight, returned, slowest;
	pid_t slowest_tid;
	struct ptw_dacc durations;
};

/* An open traced call: its frame id and function (index in fns). */
struct open_call {
	uint32_t frame;
	size_t fn;
};

/* A thread's open traced calls, innermost last. */
struct open_calls {
	struct open_call *c;
	size_t n, cap;
};

#define RATE_BUCKETS 8 /* one per second; the window is PTW_LIVE_RATE_NS */

struct ptw_live_model {
	struct track *tracks;
	size_t ntracks, tracks_cap;
	struct ptw_map by_id; /* span id -> track index + 1 */
	struct group_acc *groups;
	size_t ngroups;
	struct ptw_map group_by_name; /* hash of routine -> group index + 1 */
	uint64_t created, ended, active;
	uint64_t first_ns;
	struct {
		uint64_t sec, n;
	} rate[RATE_BUCKETS];
	bool dirty;
	uint64_t next_fade;
	/* --trace */
	struct fn_acc *fns;
	size_t nfns;
	struct ptw_map fn_by_name;   /* hash of function text -> index + 1 */
	struct ptw_map open_by_span; /* thread span id -> struct open_calls * */
	/* the last build */
	struct ptw_live_row *rows;
	struct ptw_live_group *grows;
	struct ptw_live_function *frows;
	size_t rows_cap, grows_cap, frows_cap;
	struct ptw_buf text; /* scratch */
};

struct ptw_live_model *ptw_live_model_new(void)
{
	struct ptw_live_model *m = xcalloc(1, sizeof(*m));
	m->dirty = true;
	return m;
}

void ptw_live_model_free(struct ptw_live_model *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->ngroups; i++)
		free(m->groups[i].routine);
	free(m->groups);
	for (size_t i = 0; i < m->nfns; i++) {
		free(m->fns[i].function);
		ptw_dacc_free(&m->fns[i].durations);
	}
	free(m->fns);
	ptw_map_free(&m->fn_by_name);
	size_t it = 0;
	void *v;
	while (ptw_map_next(&m->open_by_span, &it, NULL, &v)) {
		free(((struct open_calls *)v)->c);
		free(v);
	}
	ptw_map_free(&m->open_by_span);
	free(m->tracks);
	free(m->rows);
	free(m->grows);
	free(m->frows);
	ptw_map_free(&m->by_id);
	ptw_map_free(&m->group_by_name);
	ptw_buf_free(&m->text);
	free(m);
}

static void map_copy(struct ptw_map *to, const struct ptw_map *from)
{
	size_t it = 0;
	uint64_t k;
	void *v;
	while (ptw_map_next(from, &it, &k, &v))
		ptw_map_put(to, k, v);
}

struct ptw_live_model *ptw_live_model_freeze(const struct ptw_live_model *m)
{
	struct ptw_live_model *f = xcalloc(1, sizeof(*f));
	f->tracks_cap = m->ntracks ? m->ntracks : 1;
	f->tracks = xcalloc(f->tracks_cap, sizeof(*f->tracks));
	memcpy(f->tracks, m->tracks, m->ntracks * sizeof(*m->tracks));
	f->ntracks = m->ntracks;
	for (size_t i = 0; i < f->ntracks; i++)
		f->tracks[i].sp = NULL; /* the copy is not refreshed from the engine */
	f->groups = xcalloc(m->ngroups ? m->ngroups : 1, sizeof(*f->groups));
	for (size_t g = 0; g < m->ngroups; g++) {
		f->groups[g] = m->groups[g];
		f->groups[g].routine = xstrdup(m->groups[g].routine);
	}
	f->ngroups = m->ngroups;
	/* the functions' figures (not the open calls: nothing is noted to it) */
	f->fns = xcalloc(m->nfns ? m->nfns : 1, sizeof(*f->fns));
	for (size_t i = 0; i < m->nfns; i++) {
		f->fns[i] = m->fns[i];
		f->fns[i].function = xstrdup(m->fns[i].function);
		memset(&f->fns[i].durations, 0, sizeof(f->fns[i].durations));
		f->fns[i].durations.exact_max = m->fns[i].durations.exact_max;
		ptw_dacc_merge(&f->fns[i].durations, &m->fns[i].durations);
	}
	f->nfns = m->nfns;
	map_copy(&f->fn_by_name, &m->fn_by_name);
	map_copy(&f->by_id, &m->by_id);
	map_copy(&f->group_by_name, &m->group_by_name);
	f->created = m->created;
	f->ended = m->ended;
	f->active = m->active;
	f->first_ns = m->first_ns;
	memcpy(f->rate, m->rate, sizeof(f->rate));
	f->dirty = true;
	return f;
}

const char *ptw_live_sort_name(enum ptw_live_view v, enum ptw_live_sort s)
{
	static const char *const threads[] = { "tid", "name",  "routine", "state",
					       "age", "spawn", "cpu" };
	static const char *const routines[] = { "total", "live",     "routine", "ended",
						"lifetime", "spawn", "cpu" };
	static const char *const functions[] = { "calls", "in flight", "function", "p50",
						 "p99",	  "slowest",   "calls" };
	if ((unsigned)s >= PTW_ARRAY_SIZE(threads))
		return "?";
	return v == PTW_LIVE_FUNCTIONS	? functions[s]
	       : v == PTW_LIVE_ROUTINES ? routines[s]
					: threads[s];
}

void ptw_live_duration(char *buf, size_t size, uint64_t ns)
{
	if (ns < 1000000u)
		snprintf(buf, size, "%lluus", (unsigned long long)(ns / 1000u));
	else if (ns < 1000000000u)
		snprintf(buf, size, "%.1fms", (double)ns / 1e6);
	else if (ns < 60ull * 1000000000u)
		snprintf(buf, size, "%.1fs", (double)ns / 1e9);
	else if (ns < 3600ull * 1000000000u)
		snprintf(buf, size, "%llum%02llus", (unsigned long long)(ns / 60000000000ull),
			 (unsigned long long)(ns / 1000000000u % 60));
	else
		snprintf(buf, size, "%lluh%02llum", (unsigned long long)(ns / 3600000000000ull),
			 (unsigned long long)(ns / 60000000000ull % 60));
}

/* The entry called name among those idx indexes (hash of the name ->
 * index + 1; a collision probes on): true and *ret its index, or false and
 * *key where a new one goes. name_at: the name of entry i. */
static bool find_named(const struct ptw_live_model *m, const struct ptw_map *idx,
		       const char *(*name_at)(const struct ptw_live_model *m, size_t i),
		       const char *name, size_t *ret, uint64_t *key)
{
	*key = ptw_str_hash(name);
	for (;;) {
		void *v = ptw_map_get(idx, *key);
		if (!v)
			return false;
		*ret = (size_t)(uintptr_t)v - 1;
		if (!strcmp(name_at(m, *ret), name))
			return true;
		*key = *key + 1 == UINT64_MAX ? 1 : *key + 1;
	}
}

static const char *group_name(const struct ptw_live_model *m, size_t i)
{
	return m->groups[i].routine;
}

static const char *fn_name(const struct ptw_live_model *m, size_t i)
{
	return m->fns[i].function;
}

static size_t group_of(struct ptw_live_model *m, const char *routine)
{
	size_t g;
	uint64_t key;
	if (find_named(m, &m->group_by_name, group_name, routine, &g, &key))
		return g;
	m->groups = xreallocarray(m->groups, m->ngroups + 1, sizeof(*m->groups));
	memset(&m->groups[m->ngroups], 0, sizeof(*m->groups));
	m->groups[m->ngroups].routine = xstrdup(routine);
	ptw_map_put(&m->group_by_name, key, (void *)(uintptr_t)(m->ngroups + 1));
	return m->ngroups++;
}

/* --trace: the function's figures, by its text ("fr_deep (frames.c:12)"). */
static size_t fn_of(struct ptw_live_model *m, const char *function)
{
	size_t i;
	uint64_t key;
	if (find_named(m, &m->fn_by_name, fn_name, function, &i, &key))
		return i;
	m->fns = xreallocarray(m->fns, m->nfns + 1, sizeof(*m->fns));
	memset(&m->fns[m->nfns], 0, sizeof(*m->fns));
	m->fns[m->nfns].function = xstrdup(function);
	m->fns[m->nfns].durations.exact_max = PTW_DACC_EXACT;
	ptw_map_put(&m->fn_by_name, key, (void *)(uintptr_t)(m->nfns + 1));
	return m->nfns++;
}

/* The routine as the text output names it ("worker (demo.c:12)"). */
static const char *routine_text(struct ptw_live_model *m, const struct ptw_span *sp)
{
	ptw_buf_reset(&m->text);
	if (sp->start_routine)
		ptw_text_location(&m->text, sp->start_routine, NULL);
	else
		ptw_buf_puts(&m->text, sp->origin == PTW_ORIGIN_MAIN ? "main" : "?");
	return m->text.p;
}

static bool span_ended(const struct ptw_span *sp)
{
	return sp->ended || sp->end_ns.set;
}

static uint64_t span_begin(const struct ptw_span *sp)
{
	if (sp->start_ns.set)
		return sp->start_ns.v;
	return sp->create_ns.set ? sp->create_ns.v : 0;
}

/* What the target controls goes to the screen escaped (ptw_util.h):
 * nothing in a name can move the cursor, retitle or clear the terminal. */
static void copy_escaped(char *dst, size_t size, const char *src)
{
	struct ptw_buf b = { 0 };
	ptw_buf_put_escaped(&b, src);
	snprintf(dst, size, "%s", b.p ? b.p : "");
	ptw_buf_free(&b);
}

static void snapshot(struct track *t, const struct ptw_span *sp)
{
	t->snap = *sp;
	t->snap.name = t->snap.open_state = t->snap.open_wchan = t->snap.state = t->snap.wchan = NULL;
	t->snap.stack = NULL;
	t->snap.nstack = 0;
	if (sp->name) {
		copy_escaped(t->snap_name, sizeof(t->snap_name), sp->name);
		t->snap.name = t->snap_name;
	}
	if (sp->open_state) {
		copy_escaped(t->snap_open_state, sizeof(t->snap_open_state), sp->open_state);
		t->snap.open_state = t->snap_open_state;
	}
	t->sp = span_ended(sp) ? NULL : sp;
}

/* The copy's strings are the track's buffers: again after the track moved
 * (the array grew, or a faded one's slot was taken). */
static void repoint(struct track *t)
{
	if (t->snap.name)
		t->snap.name = t->snap_name;
	if (t->snap.open_state)
		t->snap.open_state = t->snap_open_state;
}

/* The thread's row shows its innermost open call (if the model has its row). */
static void show_call(struct ptw_live_model *m, uint32_t span, const struct open_calls *oc)
{
	void *v = ptw_map_get(&m->by_id, span);
	if (v)
		m->tracks[(size_t)(uintptr_t)v - 1].call =
			oc && oc->n ? oc->c[oc->n - 1].fn + 1 : 0;
}

bool ptw_live_model_note(struct ptw_live_model *m, const struct ptw_span *sp, uint64_t now)
{
	if (!sp || !sp->id)
		return false;
	m->dirty = true;
	if (!m->first_ns)
		m->first_ns = now;
	void *v = ptw_map_get(&m->by_id, sp->id);
	bool fresh = !v;
	struct track *t;
	if (fresh) {
		if (m->ntracks == m->tracks_cap) {
			m->tracks_cap = m->tracks_cap ? 2 * m->tracks_cap : 64;
			m->tracks = xreallocarray(m->tracks, m->tracks_cap, sizeof(*m->tracks));
		}
		t = &m->tracks[m->ntracks];
		memset(t, 0, sizeof(*t));
		t->sp = sp;
		t->seen_ns = now;
		ptw_map_put(&m->by_id, sp->id, (void *)(uintptr_t)(++m->ntracks));
		show_call(m, sp->id, ptw_map_get(&m->open_by_span, sp->id));
		m->active++;
		if (sp->origin == PTW_ORIGIN_CREATED || sp->origin == PTW_ORIGIN_CLONE) {
			t->created = true;
			m->created++;
			uint64_t sec = now / 1000000000u;
			unsigned b = (unsigned)(sec % RATE_BUCKETS);
			if (m->rate[b].sec != sec) {
				m->rate[b].sec = sec;
				m->rate[b].n = 0;
			}
			m->rate[b].n++;
		}
	} else {
		t = &m->tracks[(size_t)(uintptr_t)v - 1];
	}
	snapshot(t, sp);
	/* Its routine (it may be learnt after the span began). */
	if (!t->loc_known || t->loc != sp->start_routine) {
		size_t g = group_of(m, routine_text(m, sp));
		if (t->loc_known && g != t->group) {
			/* learnt late (rare): move what it counted */
			struct group_acc *o = &m->groups[t->group], *to = &m->groups[g];
			o->total--;
			to->total++;
			if (t->ended) {
				o->ended--;
				to->ended++;
			}
			if (t->spawn_seen) {
				uint64_t d = sp->start_ns.v - sp->create_ns.v;
				o->spawn_n--;
				o->spawn_sum -= d;
				to->spawn_n++;
				to->spawn_sum += d;
			}
		} else if (!t->loc_known) {
			m->groups[g].total++;
		}
		t->group = g;
		t->loc = sp->start_routine;
		t->loc_known = true;
	}
	struct group_acc *g = &m->groups[t->group];
	if (!t->spawn_seen && sp->create_ns.set && sp->start_ns.set &&
	    sp->start_ns.v >= sp->create_ns.v) {
		t->spawn_seen = true;
		g->spawn_n++;
		g->spawn_sum += sp->start_ns.v - sp->create_ns.v;
	}
	if (!t->ended && span_ended(sp)) {
		t->ended = true;
		t->end_ns = sp->end_ns.set ? sp->end_ns.v : now;
		m->ended++;
		m->active--;
		g->ended++;
		uint64_t b = span_begin(sp);
		if (b && t->end_ns >= b) {
			uint64_t life = t->end_ns - b;
			g->life_sum += life;
			g->life_n++;
			if (life > g->life_max)
				g->life_max = life;
		}
	}
	return fresh;
}

void ptw_live_model_frame(struct ptw_live_model *m, const struct ptw_frame *fr)
{
	if (!fr || !fr->id)
		return;
	/* (a frame of no thread span: keyed apart from every span id) */
	uint64_t key = fr->thread_span ? fr->thread_span : (1ull << 32) | (uint32_t)fr->tid;
	struct open_calls *oc = ptw_map_get(&m->open_by_span, key);
	m->dirty = true;
	if (fr->status == PTW_FRAME_OPEN) {
		ptw_buf_reset(&m->text);
		ptw_text_location(&m->text, fr->function, NULL);
		size_t fn = fn_of(m, m->text.p ? m->text.p : "?");
		m->fns[fn].calls++;
		m->fns[fn].in_flight++;
		if (!oc) {
			oc = xcalloc(1, sizeof(*oc));
			ptw_map_put(&m->open_by_span, key, oc);
		}
		if (oc->n == oc->cap) {
			oc->cap = oc->cap ? 2 * oc->cap : 8;
			oc->c = xreallocarray(oc->c, oc->cap, sizeof(*oc->c));
		}
		oc->c[oc->n].frame = fr->id;
		oc->c[oc->n++].fn = fn;
		show_call(m, fr->thread_span, oc);
		return;
	}
	/* Closed: it is on its thread's stack if it was seen open (usually
	 * on top: frames close innermost first). */
	size_t i = oc ? oc->n : 0;
	while (i > 0 && oc->c[i - 1].frame != fr->id)
		i--;
	if (!i)
		return; /* not seen open (before the table began): not counted */
	struct fn_acc *a = &m->fns[oc->c[i - 1].fn];
	memmove(&oc->c[i - 1], &oc->c[i], (oc->n - i) * sizeof(*oc->c));
	oc->n--;
	a->in_flight--;
	if (fr->status == PTW_FRAME_COMPLETED) {
		a->returned++;
		if (!fr->entry_unknown && fr->return_ns >= fr->entry_ns) {
			uint64_t d = fr->return_ns - fr->entry_ns;
			ptw_dacc_add(&a->durations, d);
			if (d >= a->slowest) {
				a->slowest = d;
				a->slowest_tid = fr->tid;
			}
		}
	}
	show_call(m, fr->thread_span, oc);
	if (!oc->n) {
		ptw_map_del(&m->open_by_span, key);
		free(oc->c);
		free(oc);
	}
}

void ptw_live_model_refresh(struct ptw_live_model *m, uint64_t now)
{
	for (size_t i = 0; i < m->ntracks; i++)
		if (m->tracks[i].sp)
			ptw_live_model_note(m, m->tracks[i].sp, now);
}

bool ptw_live_model_dirty(const struct ptw_live_model *m)
{
	return m->dirty;
}

uint64_t ptw_live_model_next_fade(const struct ptw_live_model *m)
{
	return m->next_fade;
}

static void state_text(struct track *t)
{
	const struct ptw_span *sp = &t->snap;
	if (t->ended) {
		const char *s;
		switch (sp->status) {
		case PTW_STATUS_COMPLETED:
			s = "returned";
			break;
		case PTW_STATUS_EXITED:
			s = "pthread_exit";
			break;
		case PTW_STATUS_CANCELLED:
			s = "cancelled";
			break;
		case PTW_STATUS_UNMATCHED:
			s = sp->reason ? sp->reason : "unmatched";
			break;
		default:
			s = "ended";
			break;
		}
		snprintf(t->state, sizeof(t->state), "%s", s);
	} else if (t->wait[0]) {
		snprintf(t->state, sizeof(t->state), "%s%s", sp->open_after_ns.set ? "late " : "",
			 t->wait);
	} else if (sp->open_after_ns.set) {
		snprintf(t->state, sizeof(t->state), "late%s%s", sp->open_state ? " " : "",
			 sp->open_state ? sp->open_state : "");
	} else if (sp->cancel_requested) {
		snprintf(t->state, sizeof(t->state), "cancel requested");
	} else if (sp->origin == PTW_ORIGIN_CREATED && !sp->start_ns.set) {
		snprintf(t->state, sizeof(t->state), "starting");
	} else {
		snprintf(t->state, sizeof(t->state), "running");
	}
}

static bool matches(const char *hay, const char *needle)
{
	return hay && strcasestr(hay, needle) != NULL;
}

static int cmp_u64(uint64_t a, uint64_t b)
{
	return a < b ? -1 : a > b;
}

static int cmp_str(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "");
}

static int cmp_pct(double a, double b)
{
	return (a > b) - (a < b);
}

/* Thread t's CPU% (r): a live one's from cpu_of's readings a second or so
 * apart (the first reading waits for the second), an ended one's over its
 * life (from its creation) from its span's cpu. */
static void row_cpu(struct track *t, const struct ptw_span *sp, const struct ptw_live_query *q,
		    uint64_t now, uint64_t age_ns, struct ptw_live_row *r)
{
	if (t->ended) {
		/* (over its whole life, from its creation: its CPU counts from there) */
		uint64_t life = sp->create_ns.set && sp->end_ns.set && sp->end_ns.v > sp->create_ns.v
					? sp->end_ns.v - sp->create_ns.v
					: age_ns;
		r->has_cpu = sp->cpu.set && life;
		r->cpu_pct = r->has_cpu ? 100.0 * (double)sp->cpu.on_cpu_ns / (double)life : 0;
		return;
	}
	uint64_t cpu;
	if (q->cpu_of && (!t->cpu_at || now - t->cpu_at >= PTW_LIVE_CPU_NS) &&
	    q->cpu_of(q->cpu_ctx, sp->pid, sp->tid, &cpu)) {
		t->cpu_prev_at = t->cpu_at;
		t->cpu_prev_ns = t->cpu_ns;
		t->cpu_at = now;
		t->cpu_ns = cpu;
	}
	r->has_cpu = t->cpu_prev_at && t->cpu_at > t->cpu_prev_at && t->cpu_ns >= t->cpu_prev_ns;
	r->cpu_pct = r->has_cpu ? 100.0 * (double)(t->cpu_ns - t->cpu_prev_ns) /
					  (double)(t->cpu_at - t->cpu_prev_at)
				: 0;
}

static int cmp_rows(const void *pa, const void *pb, void *ctx)
{
	const struct ptw_live_row *a = pa, *b = pb;
	const struct ptw_live_query *q = ctx;
	if (a->ended != b->ended) /* the live ones first, the fading ones below */
		return a->ended ? 1 : -1;
	int c = 0;
	switch (q->sort) {
	case PTW_LIVE_SORT_NAME:
		c = cmp_str(a->name, b->name);
		break;
	case PTW_LIVE_SORT_ROUTINE:
		c = cmp_str(a->routine, b->routine);
		break;
	case PTW_LIVE_SORT_STATE:
		c = cmp_str(a->state, b->state);
		break;
	case PTW_LIVE_SORT_AGE:
		c = cmp_u64(a->age_ns, b->age_ns);
		break;
	case PTW_LIVE_SORT_SPAWN:
		c = cmp_u64(a->has_spawn ? a->spawn_ns : 0, b->has_spawn ? b->spawn_ns : 0);
		break;
	case PTW_LIVE_SORT_CPU:
		c = cmp_pct(a->has_cpu ? a->cpu_pct : -1, b->has_cpu ? b->cpu_pct : -1);
		break;
	default:
		c = cmp_u64((uint64_t)a->tid, (uint64_t)b->tid);
		break;
	}
	if (q->reverse)
		c = -c;
	return c ? c : cmp_u64(a->span, b->span);
}

static int cmp_groups(const void *pa, const void *pb, void *ctx)
{
	const struct ptw_live_group *a = pa, *b = pb;
	const struct ptw_live_query *q = ctx;
	int c = 0;
	switch (q->sort) {
	case PTW_LIVE_SORT_NAME:
		c = cmp_u64(a->live, b->live);
		break;
	case PTW_LIVE_SORT_STATE:
		c = cmp_u64(a->ended, b->ended);
		break;
	case PTW_LIVE_SORT_AGE:
		c = cmp_u64(a->lifetime_mean_ns, b->lifetime_mean_ns);
		break;
	case PTW_LIVE_SORT_SPAWN:
		c = cmp_u64(a->spawn_mean_ns, b->spawn_mean_ns);
		break;
	case PTW_LIVE_SORT_TID:
		c = cmp_u64(a->total, b->total);
		break;
	case PTW_LIVE_SORT_CPU:
		c = cmp_pct(a->has_cpu ? a->cpu_pct : -1, b->has_cpu ? b->cpu_pct : -1);
		break;
	default:
		break;
	}
	if (q->reverse)
		c = -c;
	return c ? c : strcmp(a->routine, b->routine);
}

static void forget(struct ptw_live_model *m, size_t i)
{
	ptw_map_del(&m->by_id, m->tracks[i].snap.id);
	if (i != m->ntracks - 1) {
		m->tracks[i] = m->tracks[m->ntracks - 1];
		struct track *t = &m->tracks[i];
		ptw_map_put(&m->by_id, t->snap.id, (void *)(uintptr_t)(i + 1));
	}
	m->ntracks--;
}

size_t ptw_live_model_build(struct ptw_live_model *m, uint64_t now, const struct ptw_live_query *q,
			    const struct ptw_live_row **ret_rows,
			    const struct ptw_live_group **ret_groups)
{
	const char *filter = q->filter && q->filter[0] ? q->filter : NULL;
	m->dirty = false;
	m->next_fade = 0;
	for (size_t g = 0; g < m->ngroups; g++) {
		m->groups[g].late = 0;
		m->groups[g].cpu_pct = 0;
		m->groups[g].has_cpu = false;
	}
	size_t n = 0;
	for (size_t i = 0; i < m->ntracks;) {
		struct track *t = &m->tracks[i];
		repoint(t);
		const struct ptw_span *sp = &t->snap;
		if (t->ended && now >= t->end_ns + PTW_LIVE_FADE_NS) {
			forget(m, i); /* faded: its group keeps its counts */
			continue;
		}
		i++;
		if (t->ended && (!m->next_fade || t->end_ns + PTW_LIVE_FADE_NS < m->next_fade))
			m->next_fade = t->end_ns + PTW_LIVE_FADE_NS;
		bool late = !t->ended && sp->open_after_ns.set;
		if (late)
			m->groups[t->group].late++;
		uint64_t b = span_begin(sp), from = b ? b : t->seen_ns, end = t->ended ? t->end_ns : now;
		uint64_t age_ns = end >= from ? end - from : 0;
		struct ptw_live_row cpu = { 0 };
		row_cpu(t, sp, q, now, age_ns, &cpu);
		if (!t->ended && cpu.has_cpu) {
			m->groups[t->group].cpu_pct += cpu.cpu_pct;
			m->groups[t->group].has_cpu = true;
		}
		if (q->view != PTW_LIVE_THREADS)
			continue;
		state_text(t);
		snprintf(t->tid_text, sizeof(t->tid_text), "%d", (int)sp->tid);
		const char *routine = m->groups[t->group].routine;
		const char *name = sp->name ? sp->name : "";
		if (!t->ended && q->name_of &&
		    (!t->name_ns || now - t->name_ns >= PTW_LIVE_NAME_NS)) {
			t->name_ns = now;
			if (!q->name_of(q->name_ctx, sp->tid, t->name, sizeof(t->name)))
				t->name[0] = 0;
		}
		if (!t->ended && t->name[0]) /* (a frozen copy: the name it had) */
			name = t->name;
		if (filter && !matches(t->tid_text, filter) && !matches(name, filter) &&
		    !matches(routine, filter) && !matches(t->state, filter) &&
		    !(t->call && matches(m->fns[t->call - 1].function, filter)))
			continue;
		if (n == m->rows_cap) {
			m->rows_cap = m->rows_cap ? 2 * m->rows_cap : 64;
			m->rows = xreallocarray(m->rows, m->rows_cap, sizeof(*m->rows));
		}
		struct ptw_live_row *r = &m->rows[n++];
		memset(r, 0, sizeof(*r));
		r->span = sp->id;
		r->tid = sp->tid;
		r->pid = sp->pid;
		r->name = name;
		r->routine = routine;
		r->creator = sp->creator_tid;
		r->state = t->state;
		r->age_known = b != 0;
		r->age_ns = age_ns;
		if (sp->create_ns.set && sp->start_ns.set && sp->start_ns.v >= sp->create_ns.v) {
			r->has_spawn = true;
			r->spawn_ns = sp->start_ns.v - sp->create_ns.v;
		}
		r->has_cpu = cpu.has_cpu;
		r->cpu_pct = cpu.cpu_pct;
		r->ended = t->ended;
		r->late = late;
		r->call = t->call && !t->ended ? m->fns[t->call - 1].function : NULL;
	}
	if (q->view == PTW_LIVE_THREADS) {
		if (n > 1) /* (none: rows may be NULL) */
			qsort_r(m->rows, n, sizeof(*m->rows), cmp_rows, (void *)q);
		*ret_rows = m->rows;
		*ret_groups = NULL;
		return n;
	}
	n = 0;
	if (m->grows_cap < m->ngroups) {
		m->grows_cap = m->ngroups;
		m->grows = xreallocarray(m->grows, m->grows_cap, sizeof(*m->grows));
	}
	for (size_t i = 0; i < m->ngroups; i++) {
		const struct group_acc *a = &m->groups[i];
		if (!a->total || (filter && !matches(a->routine, filter)))
			continue;
		struct ptw_live_group *g = &m->grows[n++];
		g->routine = a->routine;
		g->total = a->total;
		g->ended = a->ended;
		g->live = a->total - a->ended;
		g->late = a->late;
		g->lifetime_mean_ns = a->life_n ? a->life_sum / a->life_n : 0;
		g->lifetime_max_ns = a->life_max;
		g->spawn_mean_ns = a->spawn_n ? a->spawn_sum / a->spawn_n : 0;
		g->cpu_pct = a->cpu_pct;
		g->has_cpu = a->has_cpu;
	}
	if (n > 1)
		qsort_r(m->grows, n, sizeof(*m->grows), cmp_groups, (void *)q);
	*ret_rows = NULL;
	*ret_groups = m->grows;
	return n;
}

static int cmp_functions(const void *pa, const void *pb, void *ctx)
{
	const struct ptw_live_function *a = pa, *b = pb;
	const struct ptw_live_query *q = ctx;
	int c = 0;
	switch (q->sort) {
	case PTW_LIVE_SORT_TID:
		c = cmp_u64(a->calls, b->calls);
		break;
	case PTW_LIVE_SORT_NAME:
		c = cmp_u64(a->in_flight, b->in_flight);
		break;
	case PTW_LIVE_SORT_STATE:
		c = cmp_u64(a->p50_ns, b->p50_ns);
		break;
	case PTW_LIVE_SORT_AGE:
		c = cmp_u64(a->p99_ns, b->p99_ns);
		break;
	case PTW_LIVE_SORT_SPAWN:
		c = cmp_u64(a->slowest_ns, b->slowest_ns);
		break;
	default:
		break;
	}
	if (q->reverse)
		c = -c;
	return c ? c : strcmp(a->function, b->function);
}

size_t ptw_live_model_functions(struct ptw_live_model *m, const struct ptw_live_query *q,
				const struct ptw_live_function **ret)
{
	const char *filter = q->filter && q->filter[0] ? q->filter : NULL;
	if (m->frows_cap < m->nfns) {
		m->frows_cap = m->nfns;
		m->frows = xreallocarray(m->frows, m->frows_cap, sizeof(*m->frows));
	}
	size_t n = 0;
	for (size_t i = 0; i < m->nfns; i++) {
		const struct fn_acc *a = &m->fns[i];
		if (filter && !matches(a->function, filter))
			continue;
		struct ptw_live_function *r = &m->frows[n++];
		struct ptw_distribution d;
		ptw_dacc_result(&a->durations, &d);
		*r = (struct ptw_live_function){
			.function = a->function,
			.calls = a->calls,
			.in_flight = a->in_flight,
			.returned = a->returned,
			.has_times = d.count > 0,
			.p50_ns = d.p50,
			.p99_ns = d.p99,
			.slowest_ns = a->slowest,
			.slowest_tid = a->slowest_tid,
		};
	}
	if (n > 1)
		qsort_r(m->frows, n, sizeof(*m->frows), cmp_functions, (void *)q);
	*ret = m->frows;
	return n;
}

void ptw_live_model_counts(const struct ptw_live_model *m, uint64_t now,
			   struct ptw_live_counts *ret)
{
	ret->active = m->active;
	ret->created = m->created;
	ret->ended = m->ended;
	/* Whole seconds: the current one (partly gone) and the ones before it
	 * within the window. */
	uint64_t sec = now / 1000000000u, secs = PTW_LIVE_RATE_NS / 1000000000u, n = 0;
	for (unsigned b = 0; b < RATE_BUCKETS; b++)
		if (m->rate[b].n && m->rate[b].sec + secs > sec && m->rate[b].sec <= sec)
			n += m->rate[b].n;
	double window = (double)(now % 1000000000u) / 1e9 + (double)(secs - 1);
	if (m->first_ns && now - m->first_ns < PTW_LIVE_RATE_NS)
		window = (double)(now - m->first_ns) / 1e9;
	ret->rate = window > 0.05 ? (double)n / window : 0;
}

bool ptw_live_model_wait(struct ptw_live_model *m, const struct ptw_wait *w, bool waiting,
			 bool deadlock)
{
	void *v = w->thread_span ? ptw_map_get(&m->by_id, w->thread_span) : NULL;
	if (!v)
		return false;
	struct track *t = &m->tracks[(size_t)(uintptr_t)v - 1];
	const char *obj = w->object_loc && w->object_loc->symbol ? w->object_loc->symbol : NULL;
	/* the state column is narrow: a deadlock names the object alone */
	const char *what = deadlock ? "DEADLOCK" : ptw_wait_object_kind(w->kind);
	struct ptw_buf b = { 0 };
	ptw_buf_printf(&b, "%s ", what);
	if (obj)
		ptw_buf_put_escaped(&b, obj);
	else
		ptw_buf_printf(&b, "%#" PRIx64, w->object);
	if (!waiting)
		t->wait[0] = '\0';
	else
		snprintf(t->wait, sizeof(t->wait), "%s", b.p);
	ptw_buf_free(&b);
	m->dirty = true;
	return true;
}
