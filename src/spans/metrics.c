/* SPDX-License-Identifier: MIT */
/*
 * The span engine's figures: lifetimes, spawn latencies, waits, the
 * counts and distributions of the summary.
 */
#define _GNU_SOURCE
#include "spans_int.h"

/* ---- metrics ---- */

static int cmp_edge(const void *a, const void *b)
{
	const int64_t *x = a, *y = b;
	if (x[0] != y[0])
		return x[0] < y[0] ? -1 : 1;
	return x[1] < y[1] ? -1 : x[1] > y[1]; /* an end before a start at the same ns */
}

/*
 * The metrics of every span (only NULL: with what the spans freed while
 * streaming left in the accumulators), or of the spans held here at the
 * nonly indices of only (-f: one process's share, its own peaks). The
 * spans are compacted (their indices as ptw_spans_get's).
 */
static void metrics(struct ptw_spans *s, const size_t *only, size_t nonly, struct ptw_metrics *m)
{
	bool one = only != NULL;
	memset(m, 0, sizeof(*m));
	sp_compact(s);
	struct ptw_dacc spawn = { .exact_max = s->spawn.exact_max },
			life = { .exact_max = s->life.exact_max },
			wait = { .exact_max = s->wait.exact_max };
	if (!one) {
		ptw_dacc_merge(&spawn, &s->spawn);
		ptw_dacc_merge(&life, &s->life);
		ptw_dacc_merge(&wait, &s->wait);
		m->unjoined = s->unjoined;
		m->open_spans = s->open_spans;
		m->unmatched_spans = s->unmatched;
		m->open_timeouts = s->open_timeouts;
	}
	int64_t(*edges)[2] = one ? xcalloc(2 * nonly + 1, sizeof(*edges)) : NULL;
	size_t nedges = 0;
	for (size_t k = 0; k < (one ? nonly : s->n); k++) {
		const struct ptw_span *sp = s->spans[one ? only[k] : k];
		if (!sp)
			continue;
		if (one) {
			m->threads_seen++;
			m->threads_created +=
				sp->origin == PTW_ORIGIN_CREATED || sp->origin == PTW_ORIGIN_CLONE;
			if (sp->depth > m->max_depth)
				m->max_depth = sp->depth;
			const struct ptw_opt *from =
				sp->create_ns.set ? &sp->create_ns : &sp->start_ns;
			edges[nedges][0] = from->set ? (int64_t)from->v : 0;
			edges[nedges++][1] = 1;
			if (sp->end_ns.set) {
				edges[nedges][0] = (int64_t)sp->end_ns.v;
				edges[nedges++][1] = -1;
			}
		}
		uint64_t v;
		if (sp_spawn_of(sp, &v))
			ptw_dacc_add(&spawn, v);
		if (sp_life_of(sp, &v))
			ptw_dacc_add(&life, v);
		if (sp->joined && sp->join_return_ns.set)
			ptw_dacc_add(&wait, sp->join_return_ns.v - sp->join_call_ns);
		if (sp->status == PTW_STATUS_OPEN)
			m->open_spans++;
		if (sp->status == PTW_STATUS_UNMATCHED)
			m->unmatched_spans++;
		if (sp->open_after_ns.set)
			m->open_timeouts++;
		if (sp_is_unjoined(sp))
			m->unjoined++;
	}
	ptw_dacc_result(&spawn, &m->spawn_latency);
	ptw_dacc_result(&life, &m->lifetime);
	ptw_dacc_result(&wait, &m->join_wait);
	ptw_dacc_free(&spawn);
	ptw_dacc_free(&life);
	ptw_dacc_free(&wait);
	if (one) {
		qsort(edges, nedges, sizeof(*edges), cmp_edge);
		int64_t active = 0;
		for (size_t i = 0; i < nedges; i++) {
			active += edges[i][1];
			if (active > (int64_t)m->max_active)
				m->max_active = (uint64_t)active;
		}
		free(edges);
		return;
	}
	m->threads_seen = s->next_id > s->freed + s->n ? s->next_id : s->freed + s->n;
	if (s->added)
		m->threads_seen = s->added; /* read back, maybe filtered: ids have gaps */
	m->threads_created = s->threads_created;
	m->max_active = s->max_active;
	m->max_depth = s->max_depth;
	m->active_series = (const uint64_t(*)[2])s->series;
	m->active_series_len = s->nseries;
}

void ptw_spans_metrics(struct ptw_spans *s, struct ptw_metrics *m)
{
	metrics(s, NULL, 0, m);
}

void ptw_spans_metrics_of(struct ptw_spans *s, uint32_t process, struct ptw_metrics *m)
{
	ptw_spans_metrics_each(s, &process, 1, m);
}

void ptw_spans_metrics_each(struct ptw_spans *s, const uint32_t *processes, size_t n,
			    struct ptw_metrics *out)
{
	/* the spans' indices by process, in one pass (a pass per process made
	 * a document of thousands of processes quadratic) */
	sp_compact(s);
	struct ptw_map at = { 0 }; /* process id + 1 -> its index in processes + 1 */
	for (size_t i = 0; i < n; i++)
		ptw_map_put(&at, (uint64_t)processes[i] + 1, (void *)(uintptr_t)(i + 1));
	size_t *count = xcalloc(n + 1, sizeof(*count));
	for (size_t i = 0; i < s->n; i++) {
		uintptr_t k = (uintptr_t)ptw_map_get(&at, (uint64_t)s->spans[i]->process + 1);
		if (k)
			count[k - 1]++;
	}
	size_t *from = xcalloc(n + 1, sizeof(*from));
	for (size_t i = 0; i < n; i++)
		from[i + 1] = from[i] + count[i];
	size_t *idx = xcalloc(from[n] + 1, sizeof(*idx)), *fill = count;
	memset(fill, 0, (n + 1) * sizeof(*fill));
	for (size_t i = 0; i < s->n; i++) {
		uintptr_t k = (uintptr_t)ptw_map_get(&at, (uint64_t)s->spans[i]->process + 1);
		if (k)
			idx[from[k - 1] + fill[k - 1]++] = i;
	}
	for (size_t i = 0; i < n; i++)
		metrics(s, idx + from[i], from[i + 1] - from[i], &out[i]);
	free(idx);
	free(from);
	free(count);
	ptw_map_free(&at);
}

const char *ptw_status_name(enum ptw_status st)
{
	static const char *const names[] = { "open",	  "completed", "exited",
					     "cancelled", "unmatched", "lwp_exited" };
	return (unsigned)st < PTW_ARRAY_SIZE(names) ? names[st] : "unmatched";
}

const char *ptw_method_name(enum ptw_method m)
{
	static const char *const names[] = { "unknown", "return",	"pthread_exit",
					     "cancel",	"process_exit", "exec",
					     "killed",	"detach",	"unknown" };
	return (unsigned)m < PTW_ARRAY_SIZE(names) ? names[m] : "unknown";
}

const char *ptw_origin_name(enum ptw_origin o)
{
	static const char *const names[] = { "main", "created", "preexisting", "clone" };
	return (unsigned)o < PTW_ARRAY_SIZE(names) ? names[o] : "created";
}
