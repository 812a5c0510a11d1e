/* SPDX-License-Identifier: MIT */
/*
 * The live table's row model (ptw_live.h), fed synthetic spans: rows and
 * counts, fading, filter, sort, the routine view (thread pools), late
 * spans, the creation rate, names read while a thread runs.
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "ptw_frames.h"
#include "ptw_live.h"
#include "ptw_locks.h"
#include "ptw_symbols.h"

#define MS 1000000ull
#define S 1000000000ull
#define T0 (100 * S)

static const struct ptw_location pool = { .addr = 0x401000, .symbol = "pool_worker" };
static const struct ptw_location odd = { .addr = 0x402000, .symbol = "odd_worker" };
static const struct ptw_location mainfn = { .addr = 0x403000, .symbol = "main" };

static struct ptw_span spans[16];

static struct ptw_span *span(uint32_t id, pid_t tid, const char *name,
			     const struct ptw_location *routine, enum ptw_origin origin)
{
	struct ptw_span *sp = &spans[id];
	memset(sp, 0, sizeof(*sp));
	sp->id = id;
	sp->tid = tid;
	sp->name = (char *)name;
	sp->start_routine = routine;
	sp->origin = origin;
	sp->detached = -1;
	return sp;
}

static void created(struct ptw_span *sp, pid_t creator, uint64_t create, uint64_t start)
{
	sp->creator_tid = creator;
	sp->create_ns = (struct ptw_opt){ true, create };
	if (start)
		sp->start_ns = (struct ptw_opt){ true, start };
}

static void end(struct ptw_span *sp, uint64_t ns, enum ptw_status st)
{
	sp->end_ns = (struct ptw_opt){ true, ns };
	sp->ended = true;
	sp->status = st;
}

static size_t build(struct ptw_live_model *m, uint64_t now, struct ptw_live_query *q,
		    const struct ptw_live_row **rows, const struct ptw_live_group **groups)
{
	return ptw_live_model_build(m, now, q, rows, groups);
}

static const struct ptw_live_row *row_of(const struct ptw_live_row *rows, size_t n, pid_t tid)
{
	for (size_t i = 0; i < n; i++)
		if (rows[i].tid == tid)
			return &rows[i];
	return NULL;
}

/* Rows appear, end (dim), fade after PTW_LIVE_FADE_NS; counts follow. */
static void test_rows_and_fading(void)
{
	struct ptw_live_model *m = ptw_live_model_new();
	struct ptw_live_query q = { .view = PTW_LIVE_THREADS, .sort = PTW_LIVE_SORT_TID };
	const struct ptw_live_row *rows;
	const struct ptw_live_group *groups;

	struct ptw_span *mn = span(1, 100, "app", &mainfn, PTW_ORIGIN_MAIN);
	mn->start_ns = (struct ptw_opt){ true, T0 };
	CHECK(ptw_live_model_note(m, mn, T0));
	CHECK(!ptw_live_model_note(m, mn, T0)); /* known already */
	struct ptw_span *a = span(2, 102, "pool-0", &pool, PTW_ORIGIN_CREATED);
	created(a, 100, T0 + 10 * MS, 0);
	ptw_live_model_note(m, a, T0 + 10 * MS);
	struct ptw_span *b = span(3, 101, "pool-1", &pool, PTW_ORIGIN_CREATED);
	created(b, 100, T0 + 20 * MS, T0 + 21 * MS);
	ptw_live_model_note(m, b, T0 + 21 * MS);
	CHECK(ptw_live_model_dirty(m));

	size_t n = build(m, T0 + S, &q, &rows, &groups);
	CHECK(!ptw_live_model_dirty(m));
	CHECK_EQ(n, 3);
	CHECK(groups == NULL);
	CHECK_EQ(rows[0].tid, 100); /* by tid */
	CHECK_EQ(rows[1].tid, 101);
	CHECK_EQ(rows[2].tid, 102);
	CHECK_STR(rows[0].state, "running");
	CHECK_EQ(rows[0].age_ns, S);
	CHECK(rows[0].age_known);
	CHECK(!rows[0].has_spawn);
	CHECK_STR(rows[1].name, "pool-1");
	CHECK_STR(rows[1].routine, "pool_worker");
	CHECK_EQ(rows[1].creator, 100);
	CHECK(rows[1].has_spawn);
	CHECK_EQ(rows[1].spawn_ns, 1 * MS);
	CHECK_EQ(rows[1].age_ns, S - 21 * MS);
	CHECK_STR(rows[2].state, "starting"); /* created, not in its routine yet */
	CHECK_EQ(rows[2].age_ns, S - 10 * MS); /* since its creation */
	struct ptw_live_counts c;
	ptw_live_model_counts(m, T0 + S, &c);
	CHECK_EQ(c.active, 3);
	CHECK_EQ(c.created, 2);
	CHECK_EQ(c.ended, 0);

	/* b returns: dim, its lifetime as age, then it fades */
	end(b, T0 + 2 * S, PTW_STATUS_COMPLETED);
	ptw_live_model_note(m, b, T0 + 2 * S);
	CHECK(ptw_live_model_dirty(m));
	n = build(m, T0 + 2 * S + 1, &q, &rows, &groups);
	CHECK_EQ(n, 3);
	CHECK_EQ(rows[2].tid, 101); /* ended: below the live ones */
	CHECK(rows[2].ended);
	CHECK_STR(rows[2].state, "returned");
	CHECK_EQ(rows[2].age_ns, 2 * S - 21 * MS);
	CHECK_EQ(ptw_live_model_next_fade(m), T0 + 2 * S + PTW_LIVE_FADE_NS);
	ptw_live_model_counts(m, T0 + 2 * S, &c);
	CHECK_EQ(c.active, 2);
	CHECK_EQ(c.ended, 1);
	n = build(m, T0 + 2 * S + PTW_LIVE_FADE_NS - 1, &q, &rows, &groups);
	CHECK_EQ(n, 3);
	n = build(m, T0 + 2 * S + PTW_LIVE_FADE_NS, &q, &rows, &groups);
	CHECK_EQ(n, 2);
	CHECK(row_of(rows, n, 101) == NULL);
	CHECK_EQ(ptw_live_model_next_fade(m), 0);
	/* its group keeps it */
	q.view = PTW_LIVE_ROUTINES;
	n = build(m, T0 + 6 * S, &q, &rows, &groups);
	CHECK(rows == NULL);
	CHECK_EQ(n, 2);
	CHECK_STR(groups[1].routine, "pool_worker");
	CHECK_EQ(groups[1].total, 2);
	CHECK_EQ(groups[1].live, 1);
	CHECK_EQ(groups[1].ended, 1);
	CHECK_EQ(groups[1].lifetime_mean_ns, 2 * S - 21 * MS);
	CHECK_EQ(groups[1].lifetime_max_ns, 2 * S - 21 * MS);
	CHECK_EQ(groups[1].spawn_mean_ns, 1 * MS);
	/* a's start comes later: its spawn latency joins the mean */
	a->start_ns = (struct ptw_opt){ true, T0 + 13 * MS };
	ptw_live_model_note(m, a, T0 + 13 * MS);
	n = build(m, T0 + 6 * S, &q, &rows, &groups);
	CHECK_EQ(groups[1].spawn_mean_ns, 2 * MS);
	ptw_live_model_free(m);
}

/* Filter (tid, name, routine, state; any case), sort by every column,
 * reversed; the routine view sorted and filtered too. */
static void test_filter_sort(void)
{
	struct ptw_live_model *m = ptw_live_model_new();
	struct ptw_live_query q = { .view = PTW_LIVE_THREADS, .sort = PTW_LIVE_SORT_TID };
	const struct ptw_live_row *rows;
	const struct ptw_live_group *groups;
	struct ptw_span *a = span(1, 300, "pool-b", &pool, PTW_ORIGIN_CREATED);
	created(a, 1, T0, T0 + 5 * MS);
	struct ptw_span *b = span(2, 200, "pool-a", &pool, PTW_ORIGIN_CREATED);
	created(b, 1, T0 + 1 * S, T0 + 1 * S + 1 * MS);
	struct ptw_span *c = span(3, 100, "odd-c", &odd, PTW_ORIGIN_CREATED);
	created(c, 1, T0 + 2 * S, T0 + 2 * S + 3 * MS);
	ptw_live_model_note(m, a, T0);
	ptw_live_model_note(m, b, T0 + S);
	ptw_live_model_note(m, c, T0 + 2 * S);
	uint64_t now = T0 + 3 * S;

	size_t n = build(m, now, &q, &rows, &groups);
	CHECK_EQ(n, 3);
	CHECK_EQ(rows[0].tid, 100);
	q.reverse = true;
	n = build(m, now, &q, &rows, &groups);
	CHECK_EQ(rows[0].tid, 300);
	q.reverse = false;
	q.sort = PTW_LIVE_SORT_NAME;
	n = build(m, now, &q, &rows, &groups);
	CHECK_STR(rows[0].name, "odd-c");
	CHECK_STR(rows[1].name, "pool-a");
	CHECK_STR(rows[2].name, "pool-b");
	q.sort = PTW_LIVE_SORT_ROUTINE;
	n = build(m, now, &q, &rows, &groups);
	CHECK_STR(rows[0].routine, "odd_worker");
	CHECK_EQ(rows[1].tid, 300); /* same routine: by span id */
	q.sort = PTW_LIVE_SORT_AGE;
	n = build(m, now, &q, &rows, &groups);
	CHECK_EQ(rows[0].tid, 100); /* youngest first */
	CHECK_EQ(rows[2].tid, 300);
	q.sort = PTW_LIVE_SORT_SPAWN;
	n = build(m, now, &q, &rows, &groups);
	CHECK_EQ(rows[0].tid, 200);
	CHECK_EQ(rows[1].tid, 100);
	CHECK_EQ(rows[2].tid, 300);
	CHECK_STR(ptw_live_sort_name(PTW_LIVE_THREADS, PTW_LIVE_SORT_SPAWN), "spawn");
	CHECK_STR(ptw_live_sort_name(PTW_LIVE_ROUTINES, PTW_LIVE_SORT_AGE), "lifetime");
	CHECK_STR(ptw_live_sort_name(PTW_LIVE_ROUTINES, PTW_LIVE_SORT_TID), "total");

	q.sort = PTW_LIVE_SORT_TID;
	q.filter = "POOL";
	n = build(m, now, &q, &rows, &groups);
	CHECK_EQ(n, 2);
	q.filter = "odd_w";
	n = build(m, now, &q, &rows, &groups);
	CHECK_EQ(n, 1);
	CHECK_EQ(rows[0].tid, 100);
	q.filter = "20";
	n = build(m, now, &q, &rows, &groups);
	CHECK_EQ(n, 1);
	CHECK_EQ(rows[0].tid, 200);
	q.filter = "running";
	n = build(m, now, &q, &rows, &groups);
	CHECK_EQ(n, 3);
	q.filter = "nothing like it";
	n = build(m, now, &q, &rows, &groups);
	CHECK_EQ(n, 0);
	q.filter = "";
	n = build(m, now, &q, &rows, &groups);
	CHECK_EQ(n, 3);

	q.view = PTW_LIVE_ROUTINES;
	q.sort = PTW_LIVE_SORT_NAME; /* by live count */
	q.reverse = true;
	n = build(m, now, &q, &rows, &groups);
	CHECK_EQ(n, 2);
	CHECK_STR(groups[0].routine, "pool_worker");
	CHECK_EQ(groups[0].live, 2);
	q.filter = "odd";
	n = build(m, now, &q, &rows, &groups);
	CHECK_EQ(n, 1);
	CHECK_STR(groups[0].routine, "odd_worker");
	ptw_live_model_free(m);
}

/* A span open past --open-timeout is late (highlighted), with where its
 * thread was; an ended one is not. The routine view counts them. */
static void test_late(void)
{
	struct ptw_live_model *m = ptw_live_model_new();
	struct ptw_live_query q = { .view = PTW_LIVE_THREADS };
	const struct ptw_live_row *rows;
	const struct ptw_live_group *groups;
	struct ptw_span *a = span(1, 300, "slow", &pool, PTW_ORIGIN_CREATED);
	created(a, 1, T0, T0 + MS);
	ptw_live_model_note(m, a, T0);
	a->open_after_ns = (struct ptw_opt){ true, T0 + 5 * S };
	a->open_state = (char *)"S futex";
	ptw_live_model_note(m, a, T0 + 5 * S);
	size_t n = build(m, T0 + 6 * S, &q, &rows, &groups);
	CHECK_EQ(n, 1);
	CHECK(rows[0].late);
	CHECK_STR(rows[0].state, "late S futex");
	q.view = PTW_LIVE_ROUTINES;
	build(m, T0 + 6 * S, &q, &rows, &groups);
	CHECK_EQ(groups[0].late, 1);
	end(a, T0 + 7 * S, PTW_STATUS_CANCELLED);
	ptw_live_model_note(m, a, T0 + 7 * S);
	q.view = PTW_LIVE_THREADS;
	build(m, T0 + 7 * S, &q, &rows, &groups);
	CHECK(!rows[0].late);
	CHECK_STR(rows[0].state, "cancelled");
	q.view = PTW_LIVE_ROUTINES;
	build(m, T0 + 7 * S, &q, &rows, &groups);
	CHECK_EQ(groups[0].late, 0);
	ptw_live_model_free(m);
}

/* Creations per second over the last PTW_LIVE_RATE_NS; only created ones
 * count (not the main thread, not those found at attach). */
static void test_rate(void)
{
	struct ptw_live_model *m = ptw_live_model_new();
	struct ptw_live_counts c;
	struct ptw_span *mn = span(1, 100, "app", &mainfn, PTW_ORIGIN_PREEXISTING);
	ptw_live_model_note(m, mn, T0);
	for (uint32_t i = 0; i < 10; i++) {
		struct ptw_span *sp = span(2 + i, (pid_t)(200 + i), "w", &pool, PTW_ORIGIN_CREATED);
		created(sp, 100, T0 + i * 200 * MS, 0);
		ptw_live_model_note(m, sp, T0 + i * 200 * MS);
	}
	ptw_live_model_counts(m, T0 + 2 * S, &c);
	CHECK_EQ(c.created, 10);
	CHECK_EQ(c.active, 11);
	CHECK(c.rate > 4.9 && c.rate < 5.1); /* 10 in the 2 s since the start */
	ptw_live_model_counts(m, T0 + 20 * S, &c);
	CHECK(c.rate == 0); /* nothing lately */
	ptw_live_model_free(m);
}

static unsigned names_asked;

static bool fake_name(void *ctx, pid_t tid, char *buf, size_t size)
{
	(void)ctx;
	names_asked++;
	snprintf(buf, size, "now-%d", (int)tid);
	return true;
}

/* A live thread's name comes from name_of (not more often than every
 * PTW_LIVE_NAME_NS), an ended one's from the engine; the filter sees it. */
static void test_names(void)
{
	struct ptw_live_model *m = ptw_live_model_new();
	struct ptw_live_query q = { .view = PTW_LIVE_THREADS, .name_of = fake_name };
	const struct ptw_live_row *rows;
	const struct ptw_live_group *groups;
	struct ptw_span *a = span(1, 300, NULL, &pool, PTW_ORIGIN_CREATED);
	created(a, 1, T0, T0 + MS);
	ptw_live_model_note(m, a, T0);
	build(m, T0 + S, &q, &rows, &groups);
	CHECK_STR(rows[0].name, "now-300");
	CHECK_EQ(names_asked, 1);
	build(m, T0 + S + 100 * MS, &q, &rows, &groups);
	CHECK_EQ(names_asked, 1);
	q.filter = "now-3";
	CHECK_EQ(build(m, T0 + S + PTW_LIVE_NAME_NS, &q, &rows, &groups), 1);
	CHECK_EQ(names_asked, 2);
	q.filter = NULL;
	a->name = (char *)"final";
	end(a, T0 + 5 * S, PTW_STATUS_EXITED);
	ptw_live_model_note(m, a, T0 + 5 * S);
	build(m, T0 + 5 * S, &q, &rows, &groups);
	CHECK_STR(rows[0].name, "final");
	CHECK_STR(rows[0].state, "pthread_exit");
	ptw_live_model_free(m);
}

/* cpu_of for test_cpu: thread 400 burns half a CPU, 401 a whole one (by
 * the time asked for: its "now"). */
static uint64_t cpu_now;
static int cpu_asked;
static bool fake_cpu(void *ctx, pid_t pid, pid_t tid, uint64_t *on_cpu_ns)
{
	(void)ctx, (void)pid;
	cpu_asked++;
	*on_cpu_ns = tid == 400 ? cpu_now / 2 : cpu_now;
	return true;
}

/* CPU%: a live thread's from two readings of cpu_of a second apart (not
 * more often), an ended one's over its lifetime from its span's cpu; the
 * routine view adds its live threads'; sort by CPU. */
static void test_cpu(void)
{
	struct ptw_live_model *m = ptw_live_model_new();
	struct ptw_live_query q = { .view = PTW_LIVE_THREADS, .cpu_of = fake_cpu,
				    .sort = PTW_LIVE_SORT_CPU, .reverse = true };
	const struct ptw_live_row *rows;
	const struct ptw_live_group *groups;
	struct ptw_span *a = span(1, 400, "a", &pool, PTW_ORIGIN_CREATED);
	struct ptw_span *b = span(2, 401, "b", &pool, PTW_ORIGIN_CREATED);
	created(a, 1, T0, T0 + MS);
	created(b, 1, T0, T0 + MS);
	ptw_live_model_note(m, a, T0);
	ptw_live_model_note(m, b, T0);
	cpu_now = 10 * S;
	CHECK_EQ(build(m, T0 + S, &q, &rows, &groups), 2);
	CHECK(!rows[0].has_cpu && !rows[1].has_cpu); /* one reading: no rate yet */
	CHECK_EQ(cpu_asked, 2);
	q.view = PTW_LIVE_ROUTINES; /* ... nor for their routine (not 0.0) */
	CHECK_EQ(build(m, T0 + S, &q, &rows, &groups), 1);
	CHECK(!groups[0].has_cpu);
	q.view = PTW_LIVE_THREADS;
	cpu_now += S / 2; /* (asked again too soon: not read) */
	build(m, T0 + S + 500 * MS, &q, &rows, &groups);
	CHECK_EQ(cpu_asked, 2);
	cpu_now = 10 * S + 2 * S;
	CHECK_EQ(build(m, T0 + 3 * S, &q, &rows, &groups), 2);
	CHECK_EQ(cpu_asked, 4);
	CHECK(rows[0].has_cpu && rows[1].has_cpu);
	CHECK_EQ(rows[0].tid, 401); /* reversed: the busiest first */
	CHECK(rows[0].cpu_pct > 99.9 && rows[0].cpu_pct < 100.1);
	CHECK(rows[1].cpu_pct > 49.9 && rows[1].cpu_pct < 50.1);
	q.view = PTW_LIVE_ROUTINES;
	CHECK_EQ(build(m, T0 + 3 * S, &q, &rows, &groups), 1);
	CHECK(groups[0].has_cpu && groups[0].cpu_pct > 149.9 && groups[0].cpu_pct < 150.1);
	/* ended: its span's cpu over its lifetime */
	q.view = PTW_LIVE_THREADS;
	end(a, T0 + 5 * S + MS, PTW_STATUS_COMPLETED);
	a->cpu = (struct ptw_cpu){ .set = true, .on_cpu_ns = S };
	ptw_live_model_note(m, a, T0 + 5 * S + MS);
	build(m, T0 + 5 * S + MS, &q, &rows, &groups);
	const struct ptw_live_row *r = row_of(rows, 2, 400);
	CHECK(r && r->ended && r->has_cpu && r->cpu_pct > 19.9 && r->cpu_pct < 20.1);
	CHECK_STR(ptw_live_sort_name(PTW_LIVE_THREADS, PTW_LIVE_SORT_CPU), "cpu");
	ptw_live_model_free(m);
}

/* The routine learnt after the span began (attach): its counts move. */
static void test_routine_learnt(void)
{
	struct ptw_live_model *m = ptw_live_model_new();
	struct ptw_live_query q = { .view = PTW_LIVE_ROUTINES };
	const struct ptw_live_row *rows;
	const struct ptw_live_group *groups;
	struct ptw_span *a = span(1, 300, "x", NULL, PTW_ORIGIN_PREEXISTING);
	ptw_live_model_note(m, a, T0);
	size_t n = build(m, T0, &q, &rows, &groups);
	CHECK_EQ(n, 1);
	CHECK_STR(groups[0].routine, "?");
	a->start_routine = &odd;
	ptw_live_model_note(m, a, T0 + S);
	n = build(m, T0 + S, &q, &rows, &groups);
	CHECK_EQ(n, 1); /* the empty "?" group is not shown */
	CHECK_STR(groups[0].routine, "odd_worker");
	CHECK_EQ(groups[0].total, 1);
	/* no start seen: its age is since ptwatch saw it */
	q.view = PTW_LIVE_THREADS;
	build(m, T0 + 2 * S, &q, &rows, &groups);
	CHECK(!rows[0].age_known);
	CHECK_EQ(rows[0].age_ns, 2 * S);
	ptw_live_model_free(m);
}

/* What the rows show is the model's copy: an ended span may be let go of
 * by the engine (its memory reused) while it fades; names survive the
 * track array's growth. */
static void test_copies(void)
{
	struct ptw_live_model *m = ptw_live_model_new();
	struct ptw_live_query q = { .view = PTW_LIVE_THREADS, .sort = PTW_LIVE_SORT_TID };
	const struct ptw_live_row *rows;
	const struct ptw_live_group *groups;
	struct ptw_span *many = calloc(200, sizeof(*many));
	char names[200][16];
	for (uint32_t i = 0; i < 200; i++) {
		snprintf(names[i], sizeof(names[i]), "t-%u", i);
		struct ptw_span *sp = &many[i];
		sp->id = i + 1;
		sp->tid = (pid_t)(1000 + i);
		sp->name = names[i];
		sp->start_routine = &pool;
		sp->origin = PTW_ORIGIN_CREATED;
		created(sp, 1, T0, T0 + MS);
		ptw_live_model_note(m, sp, T0 + MS);
		if (i % 2) {
			sp->open_state = (char *)"S futex";
			end(sp, T0 + 2 * MS, PTW_STATUS_COMPLETED);
			ptw_live_model_note(m, sp, T0 + 2 * MS);
		}
	}
	/* the engine lets go of the ended ones */
	for (uint32_t i = 1; i < 200; i += 2) {
		memset(&many[i], 0xa5, sizeof(many[i]));
		memset(names[i], 'x', sizeof(names[i]));
	}
	size_t n = build(m, T0 + S, &q, &rows, &groups);
	CHECK_EQ(n, 200);
	const struct ptw_live_row *r = row_of(rows, n, 1001);
	CHECK(r && r->ended);
	CHECK_STR(r ? r->name : NULL, "t-1");
	CHECK_STR(r ? r->state : NULL, "returned");
	CHECK_EQ(r ? r->age_ns : 0, MS);
	r = row_of(rows, n, 1198);
	CHECK_STR(r ? r->name : NULL, "t-198");
	/* a refresh (the process exited) only asks the live ones */
	ptw_live_model_refresh(m, T0 + S);
	n = build(m, T0 + S + PTW_LIVE_FADE_NS, &q, &rows, &groups);
	CHECK_EQ(n, 100);
	CHECK_STR(row_of(rows, n, 1000)->name, "t-0");
	ptw_live_model_free(m);
	free(many);
}

static void test_duration(void)
{
	char b[32];
	ptw_live_duration(b, sizeof(b), 442 * 1000);
	CHECK_STR(b, "442us");
	ptw_live_duration(b, sizeof(b), 12300 * 1000);
	CHECK_STR(b, "12.3ms");
	ptw_live_duration(b, sizeof(b), 12 * S + 340 * MS);
	CHECK_STR(b, "12.3s");
	ptw_live_duration(b, sizeof(b), 302 * S);
	CHECK_STR(b, "5m02s");
	ptw_live_duration(b, sizeof(b), 3720 * S);
	CHECK_STR(b, "1h02m");
}

/* --locks: a row says what its thread waits for, and no more once done. */
static void test_waits(void)
{
	static const struct ptw_location qlock = { .addr = 0x404040, .symbol = "queue_lock" };
	struct ptw_live_model *m = ptw_live_model_new();
	struct ptw_live_query q = { .view = PTW_LIVE_THREADS };
	const struct ptw_live_row *rows;
	const struct ptw_live_group *groups;
	struct ptw_span *a = span(1, 300, "w", &pool, PTW_ORIGIN_CREATED);
	created(a, 1, T0, T0 + MS);
	a->pid = 42; /* -f: the table shows it when processes differ */
	ptw_live_model_note(m, a, T0);
	struct ptw_wait w = { .id = 1, .thread_span = 1, .tid = 300, .kind = PTW_WAIT_MUTEX,
			      .object = 0x404040, .object_loc = &qlock };
	CHECK(ptw_live_model_wait(m, &w, true, false));
	size_t n = build(m, T0 + S, &q, &rows, &groups);
	CHECK_EQ(n, 1);
	CHECK_EQ(rows[0].pid, 42);
	CHECK_STR(rows[0].state, "mutex queue_lock");
	CHECK(ptw_live_model_wait(m, &w, true, true));
	build(m, T0 + S, &q, &rows, &groups);
	CHECK_STR(rows[0].state, "DEADLOCK queue_lock");
	CHECK(ptw_live_model_wait(m, &w, false, false));
	build(m, T0 + S, &q, &rows, &groups);
	CHECK_STR(rows[0].state, "running");
	w.thread_span = 9; /* no such row */
	CHECK(!ptw_live_model_wait(m, &w, true, false));
	ptw_live_model_free(m);
}

/* name_of for test_freeze: the thread's name now. */
static const char *name_now = "renamed";
static bool name_of_now(void *ctx, pid_t tid, char *buf, size_t size)
{
	(void)ctx;
	(void)tid;
	snprintf(buf, size, "%s", name_now);
	return true;
}

/* Paused (ptw_live_model_freeze): the copy shows what the model showed,
 * in any view, sort and filter, and nothing noted since (issue 18). */
static void test_freeze(void)
{
	struct ptw_live_model *m = ptw_live_model_new();
	struct ptw_live_query q = { .view = PTW_LIVE_THREADS, .sort = PTW_LIVE_SORT_TID,
				    .name_of = name_of_now };
	const struct ptw_live_row *rows;
	const struct ptw_live_group *groups;
	struct ptw_span *mn = span(1, 100, "app", &mainfn, PTW_ORIGIN_MAIN);
	ptw_live_model_note(m, mn, T0);
	struct ptw_span *a = span(2, 101, "pool-0", &pool, PTW_ORIGIN_CREATED);
	created(a, 100, T0 + MS, T0 + 2 * MS);
	ptw_live_model_note(m, a, T0 + 2 * MS);
	CHECK_EQ(build(m, T0 + 3 * MS, &q, &rows, &groups), 2);
	struct ptw_live_model *f = ptw_live_model_freeze(m);
	/* after the pause: a new thread, a's end, a new name */
	struct ptw_span *b = span(3, 102, "odd-1", &odd, PTW_ORIGIN_CREATED);
	created(b, 100, T0 + 4 * MS, T0 + 5 * MS);
	ptw_live_model_note(m, b, T0 + 5 * MS);
	end(a, T0 + 6 * MS, PTW_STATUS_COMPLETED);
	ptw_live_model_note(m, a, T0 + 6 * MS);
	name_now = "later";
	struct ptw_live_query fq = q;
	fq.name_of = NULL;
	size_t n = build(f, T0 + 3 * MS, &fq, &rows, &groups);
	CHECK_EQ(n, 2);
	CHECK(row_of(rows, n, 102) == NULL);
	const struct ptw_live_row *r = row_of(rows, n, 101);
	CHECK(r && !r->ended && !strcmp(r->state, "running"));
	CHECK(r && !strcmp(r->name, "renamed")); /* the name it had, not asked again */
	fq.reverse = true; /* another sort: the same rows */
	n = build(f, T0 + 3 * MS, &fq, &rows, &groups);
	CHECK_EQ(n, 2);
	CHECK(n == 2 && rows[0].tid == 101 && rows[1].tid == 100);
	fq.filter = "odd";
	CHECK_EQ(build(f, T0 + 3 * MS, &fq, &rows, &groups), 0);
	fq.filter = NULL;
	fq.view = PTW_LIVE_ROUTINES;
	n = build(f, T0 + 3 * MS, &fq, &rows, &groups);
	CHECK_EQ(n, 2); /* main and pool_worker, not odd_worker */
	for (size_t i = 0; i < n; i++)
		CHECK(strcmp(groups[i].routine, "odd_worker"));
	struct ptw_live_counts c;
	ptw_live_model_counts(f, T0 + 3 * MS, &c);
	CHECK_EQ(c.active, 2);
	CHECK_EQ(c.created, 1);
	CHECK_EQ(c.ended, 0);
	/* the model itself goes on */
	n = build(m, T0 + 7 * MS, &q, &rows, &groups);
	CHECK_EQ(n, 3);
	ptw_live_model_free(f);
	ptw_live_model_free(m);
}

/* --trace: the function view (calls, in flight, percentiles of the
 * returned ones with a known duration, the slowest) and each row's
 * innermost open call, fed frames as the engine gives them. */
static const struct ptw_location fa = { .addr = 0x404000, .symbol = "fa" };
static const struct ptw_location fb = { .addr = 0x405000, .symbol = "fb" };

static struct ptw_frame frames[16];

static const struct ptw_frame *frame_open(uint32_t id, uint32_t span, pid_t tid,
					  const struct ptw_location *fn, uint64_t entry,
					  bool before_attach)
{
	struct ptw_frame *fr = &frames[id];
	memset(fr, 0, sizeof(*fr));
	fr->id = id;
	fr->thread_span = span;
	fr->tid = tid;
	fr->function = fn;
	fr->entry_ns = entry;
	fr->entry_unknown = before_attach;
	fr->status = PTW_FRAME_OPEN;
	return fr;
}

static const struct ptw_frame *frame_returned(uint32_t id, uint64_t ns)
{
	frames[id].status = PTW_FRAME_COMPLETED;
	frames[id].has_return = true;
	frames[id].return_ns = ns;
	return &frames[id];
}

static const struct ptw_live_function *function_row(const struct ptw_live_function *f, size_t n,
						    const char *name)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(f[i].function, name))
			return &f[i];
	return NULL;
}

static void test_functions(void)
{
	struct ptw_live_model *m = ptw_live_model_new();
	struct ptw_live_query q = { .view = PTW_LIVE_THREADS, .sort = PTW_LIVE_SORT_TID };
	const struct ptw_live_row *rows;
	const struct ptw_live_group *groups;
	const struct ptw_live_function *fns;
	struct ptw_span *mn = span(1, 100, "app", &mainfn, PTW_ORIGIN_MAIN);
	ptw_live_model_note(m, mn, T0);
	struct ptw_span *a = span(2, 101, "pool-0", &pool, PTW_ORIGIN_PREEXISTING);
	ptw_live_model_note(m, a, T0);
	/* 101: fa under way at the attach, then fb called from it, 100 times
	 * (1 ms to 100 ms); main: fb open */
	ptw_live_model_frame(m, frame_open(1, 2, 101, &fa, T0, true));
	ptw_live_model_frame(m, frame_open(2, 1, 100, &fb, T0 + MS, false));
	size_t n = build(m, T0 + 2 * MS, &q, &rows, &groups);
	const struct ptw_live_row *r = row_of(rows, n, 101);
	CHECK(r && r->call && !strcmp(r->call, "fa"));
	r = row_of(rows, n, 100);
	CHECK(r && r->call && !strcmp(r->call, "fb"));
	for (uint32_t k = 0; k < 100; k++) {
		uint64_t at = T0 + 10 * S + k * S;
		ptw_live_model_frame(m, frame_open(3, 2, 101, &fb, at, false));
		if (k == 50) {
			n = build(m, at, &q, &rows, &groups);
			r = row_of(rows, n, 101);
			CHECK(r && r->call && !strcmp(r->call, "fb")); /* the innermost */
		}
		ptw_live_model_frame(m, frame_returned(3, at + (k + 1) * MS));
	}
	n = build(m, T0 + 200 * S, &q, &rows, &groups);
	r = row_of(rows, n, 101);
	CHECK(r && r->call && !strcmp(r->call, "fa")); /* back in fa */
	q.view = PTW_LIVE_FUNCTIONS;
	build(m, T0 + 200 * S, &q, &rows, &groups);
	n = ptw_live_model_functions(m, &q, &fns);
	CHECK_EQ(n, 2);
	const struct ptw_live_function *f = function_row(fns, n, "fb");
	CHECK(f && f->calls == 101 && f->in_flight == 1 && f->returned == 100 && f->has_times);
	CHECK(f && f->p50_ns == 50 * MS && f->p99_ns == 99 * MS && f->slowest_ns == 100 * MS &&
	      f->slowest_tid == 101);
	f = function_row(fns, n, "fa");
	CHECK(f && f->calls == 1 && f->in_flight == 1 && f->returned == 0 && !f->has_times);
	/* sorted by calls (ties by name), reversed, filtered */
	CHECK(n == 2 && !strcmp(fns[0].function, "fa"));
	q.reverse = true;
	n = ptw_live_model_functions(m, &q, &fns);
	CHECK(n == 2 && !strcmp(fns[0].function, "fb"));
	q.filter = "fa";
	CHECK_EQ(ptw_live_model_functions(m, &q, &fns), 1);
	q.filter = NULL;
	q.reverse = false;
	/* fa returns: no duration (entered before the attach), not in flight;
	 * a close never seen open is not counted */
	ptw_live_model_frame(m, frame_returned(1, T0 + 300 * S));
	frame_open(9, 2, 101, &fa, T0, false);
	ptw_live_model_frame(m, frame_returned(9, T0 + 301 * S));
	struct ptw_live_model *fz = ptw_live_model_freeze(m);
	n = ptw_live_model_functions(m, &q, &fns);
	f = function_row(fns, n, "fa");
	CHECK(f && f->calls == 1 && f->in_flight == 0 && f->returned == 1 && !f->has_times);
	q.view = PTW_LIVE_THREADS;
	n = build(m, T0 + 302 * S, &q, &rows, &groups);
	r = row_of(rows, n, 101);
	CHECK(r && r->call == NULL);
	/* a paused copy keeps the figures */
	q.view = PTW_LIVE_FUNCTIONS;
	n = ptw_live_model_functions(fz, &q, &fns);
	f = function_row(fns, n, "fb");
	CHECK(n == 2 && f && f->calls == 101 && f->p99_ns == 99 * MS);
	ptw_live_model_free(fz);
	/* the sort names of the view */
	CHECK(!strcmp(ptw_live_sort_name(PTW_LIVE_FUNCTIONS, PTW_LIVE_SORT_NAME), "in flight"));
	ptw_live_model_free(m);
}

int main(void)
{
	test_functions();
	test_freeze();
	test_waits();
	test_rows_and_fading();
	test_filter_sort();
	test_late();
	test_rate();
	test_names();
	test_cpu();
	test_routine_learnt();
	test_copies();
	test_duration();
	CHECK_DONE();
}
