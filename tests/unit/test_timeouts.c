/* SPDX-License-Identifier: MIT */
/*
 * Open timeouts (docs/design.md, "Behaviour"): the ptw_timeouts heap on its own, and
 * the span engine fed synthetic streams with the session's part played by
 * tick(): pop what is due, feed one PTW_EV_SPAN_OPEN each.
 */
#include <stdlib.h>

#include <string.h>

#include "check.h"
#include "ptw_output.h"
#include "ptw_spans.h"
#include "ptw_symbols.h"
#include "ptw_timeouts.h"

#define MS 1000000ull
#define MAIN 100
#define P1 0x7f0000001000ull
#define P2 0x7f0000002000ull

static const struct ptw_location worker = { .addr = 0x401000, .symbol = "worker" };

/* ---- the heap ---- */

static void test_heap_order(void)
{
	struct ptw_timeouts *to = ptw_timeouts_new(100);
	CHECK_EQ(ptw_timeouts_next(to), 0);
	/* out of order, with a frame span among the thread spans */
	static const uint64_t starts[] = { 50, 10, 40, 20, 30, 60, 5 };
	for (uint32_t i = 0; i < 7; i++)
		ptw_timeouts_watch(to, PTW_SPAN_THREAD, i + 1, (pid_t)(200 + i), starts[i]);
	ptw_timeouts_watch(to, PTW_SPAN_FRAME, 1, 300, 15); /* same id, other kind */
	CHECK_EQ(ptw_timeouts_count(to), 8);
	CHECK_EQ(ptw_timeouts_next(to), 105);
	ptw_timeouts_unwatch(to, PTW_SPAN_THREAD, 7); /* ended before its deadline */
	ptw_timeouts_unwatch(to, PTW_SPAN_THREAD, 99); /* unknown: ignored */
	CHECK_EQ(ptw_timeouts_next(to), 110);

	struct ptw_timeout t = { 0 };
	CHECK(!ptw_timeouts_pop(to, 109, &t));
	CHECK_EQ(t.id, 0); /* untouched */
	static const uint64_t want[] = { 10, 15, 20, 30, 40 };
	for (size_t i = 0; i < 5; i++) {
		CHECK(ptw_timeouts_pop(to, 145, &t));
		CHECK_EQ(t.start_ns, want[i]);
		CHECK_EQ(t.deadline_ns, want[i] + 100);
	}
	CHECK(!ptw_timeouts_pop(to, 145, &t));
	CHECK_EQ(ptw_timeouts_count(to), 2);
	/* watching again moves the deadline */
	ptw_timeouts_watch(to, PTW_SPAN_THREAD, 1, 200, 1000);
	CHECK(ptw_timeouts_pop(to, 10000, &t));
	CHECK_EQ(t.id, 6);
	CHECK(ptw_timeouts_pop(to, 10000, &t));
	CHECK_EQ(t.id, 1);
	CHECK_EQ(t.tid, 200);
	CHECK_EQ(ptw_timeouts_count(to), 0);
	ptw_timeouts_free(to);

	/* NULL and disabled handles do nothing */
	ptw_timeouts_watch(NULL, PTW_SPAN_THREAD, 1, 1, 1);
	ptw_timeouts_unwatch(NULL, PTW_SPAN_THREAD, 1);
	CHECK_EQ(ptw_timeouts_next(NULL), 0);
	CHECK(!ptw_timeouts_pop(NULL, UINT64_MAX, &t));
	to = ptw_timeouts_new(0);
	ptw_timeouts_watch(to, PTW_SPAN_THREAD, 1, 1, 1);
	CHECK_EQ(ptw_timeouts_count(to), 0);
	CHECK(!ptw_timeouts_pop(to, UINT64_MAX, &t));
	ptw_timeouts_free(to);
	ptw_timeouts_free(NULL);
}

/* Many spans, most ending early (the frame-span pattern): the heap keeps
 * only the open ones, and pops them in deadline order. */
static void test_heap_churn(void)
{
	struct ptw_timeouts *to = ptw_timeouts_new(1000);
	uint32_t open = 0;
	for (uint32_t i = 1; i <= 20000; i++) {
		ptw_timeouts_watch(to, PTW_SPAN_FRAME, i, 7, (uint64_t)i * 3 % 5000);
		if (i % 97)
			ptw_timeouts_unwatch(to, PTW_SPAN_FRAME, i);
		else
			open++;
	}
	CHECK_EQ(ptw_timeouts_count(to), open);
	struct ptw_timeout t;
	uint64_t last = 0, n = 0;
	while (ptw_timeouts_pop(to, UINT64_MAX - 1, &t)) {
		CHECK(t.deadline_ns >= last);
		CHECK_EQ(t.id % 97, 0);
		last = t.deadline_ns;
		n++;
	}
	CHECK_EQ(n, open);
	ptw_timeouts_free(to);
}

/* ---- the engine ---- */

static struct ptw_spans *s;
static struct ptw_timeouts *to;
static uint64_t now;

static void reset(uint64_t limit_ns)
{
	ptw_spans_free(s);
	ptw_timeouts_free(to);
	s = ptw_spans_new();
	to = ptw_timeouts_new(limit_ns);
	ptw_spans_set_timeouts(s, to);
	now = 1000 * MS;
}

static const struct ptw_span *feed(struct ptw_event e)
{
	return ptw_spans_consume(s, &e);
}

static struct ptw_event ev(enum ptw_event_kind kind, pid_t tid)
{
	return ptw_event_init(kind, now, tid);
}

/* Time passes to t: the session's timer, as main.c runs it. Returns how
 * many spans it reported. */
static int tick(uint64_t t)
{
	now = t;
	int n = 0;
	struct ptw_timeout due;
	while (ptw_timeouts_pop(to, now, &due)) {
		struct ptw_event e = ev(PTW_EV_SPAN_OPEN, due.tid);
		e.span_kind = due.kind;
		e.span_id = due.id;
		e.has_value = true;
		e.value = now - due.start_ns;
		e.state = "S futex";
		e.name = "holder";
		const struct ptw_span *sp = feed(e);
		CHECK(sp && sp->id == due.id);
		n++;
	}
	return n;
}

static void image(void)
{
	feed(ev(PTW_EV_IMAGE, MAIN));
	struct ptw_event e = ev(PTW_EV_MAIN_START, MAIN);
	e.pthread = 0x7f0000000100ull;
	feed(e);
}

static void create(pid_t tid, uint64_t pthread)
{
	struct ptw_event e = ev(PTW_EV_THREAD_CREATE, MAIN);
	e.other_tid = tid;
	e.pthread = pthread;
	e.routine = &worker;
	e.detached = 0;
	feed(e);
	e = ev(PTW_EV_THREAD_START, tid);
	e.routine = &worker;
	feed(e);
}

static void finish(pid_t tid, uint64_t value)
{
	struct ptw_event e = ev(PTW_EV_THREAD_DEATH, tid);
	e.unwinding = 0;
	e.has_value = true;
	e.value = value;
	feed(e);
	e = ev(PTW_EV_LWP_EXIT, tid);
	e.exit_how = PTW_EXIT_SELF;
	feed(e);
}

static const struct ptw_span *span(size_t id)
{
	return ptw_spans_get(s, id - 1);
}

static uint64_t open_timeouts(void)
{
	struct ptw_metrics m;
	ptw_spans_metrics(s, &m);
	return m.open_timeouts;
}

/* A thread crosses the limit, then returns: completed, with open_after_ns. */
static void test_crossing_then_completion(void)
{
	reset(200 * MS);
	image(); /* span 1 at 1000 ms */
	now += 50 * MS;
	create(101, P1); /* span 2 at 1050 ms */
	CHECK_EQ(ptw_timeouts_next(to), 1200 * MS);
	CHECK_EQ(tick(1199 * MS), 0);
	CHECK_EQ(tick(1201 * MS), 1); /* main */
	CHECK(span(1)->open_after_ns.set);
	CHECK(!span(2)->open_after_ns.set);
	CHECK_EQ(ptw_timeouts_next(to), 1250 * MS);
	CHECK_EQ(tick(1260 * MS), 1);
	const struct ptw_span *w = span(2);
	CHECK_EQ(w->status, PTW_STATUS_OPEN);
	CHECK_EQ(w->open_after_ns.v, 1260 * MS);
	CHECK_EQ(w->open_for_ns, 210 * MS);
	CHECK_STR(w->name, "holder");
	CHECK_EQ(ptw_timeouts_next(to), 0); /* each span once */
	CHECK_EQ(tick(5000 * MS), 0);
	finish(101, 0x2a);
	CHECK_EQ(w->status, PTW_STATUS_COMPLETED);
	CHECK_EQ(w->value.v, 0x2a);
	CHECK_EQ(w->open_after_ns.v, 1260 * MS); /* kept: it was slow */
	CHECK_EQ(open_timeouts(), 2);
}

/* A thread that ends before the limit is never reported. */
static void test_ends_in_time(void)
{
	reset(200 * MS);
	image();
	create(101, P1);
	now += 100 * MS;
	finish(101, 0);
	CHECK_EQ(ptw_timeouts_count(to), 1); /* main only */
	CHECK_EQ(tick(1300 * MS), 1);
	CHECK(!span(2)->open_after_ns.set);
	CHECK_EQ(span(2)->status, PTW_STATUS_COMPLETED);
	CHECK_EQ(open_timeouts(), 1);
}

/* --open-timeout 0: nothing is watched, nothing is ever due. */
static void test_disabled(void)
{
	reset(0);
	image();
	create(101, P1);
	CHECK_EQ(ptw_timeouts_next(to), 0);
	CHECK_EQ(tick(100000 * MS), 0);
	finish(101, 0);
	CHECK(!span(2)->open_after_ns.set);
	CHECK_EQ(open_timeouts(), 0);
}

/* Several threads: each crosses at its own deadline, once; TID reuse and a
 * thread killed with the process are not reported after they are gone. */
static void test_several(void)
{
	reset(100 * MS);
	image();			/* 1: 1000 */
	now += 10 * MS, create(101, P1); /* 2: 1010 */
	now += 10 * MS, create(102, P2); /* 3: 1020 */
	now += 10 * MS;
	create(103, P1 + 0x10000);	/* 4: 1030 */
	now += 10 * MS;
	finish(103, 0);
	create(103, P1 + 0x20000);	/* 5: 1040, tid 103 again */
	CHECK_EQ(tick(1025 * MS + 100 * MS), 3); /* 1, 2, 3 */
	CHECK(span(3)->open_after_ns.set && !span(4)->open_after_ns.set);
	/* 102 goes down with an exit_group: gone, though not ended yet */
	struct ptw_event e = ev(PTW_EV_LWP_EXIT, 101);
	e.exit_how = PTW_EXIT_KILLED;
	feed(e);
	CHECK_EQ(tick(2000 * MS), 1); /* 5 */
	CHECK(span(5)->open_after_ns.set);
	CHECK(!span(4)->open_after_ns.set);
	CHECK_EQ(span(5)->open_for_ns, 960 * MS);
	e = ev(PTW_EV_PROCESS_EXIT, MAIN);
	e.exit_code = 0;
	feed(e);
	ptw_spans_finish(s);
	CHECK_EQ(span(2)->status, PTW_STATUS_UNMATCHED);
	CHECK(span(2)->open_after_ns.set);
	CHECK_EQ(open_timeouts(), 4);
	CHECK_EQ(ptw_timeouts_count(to), 0);
}

/* An event for another engine's span (a frame) is not the thread engine's. */
static void test_other_kind(void)
{
	reset(100 * MS);
	image();
	struct ptw_event e = ev(PTW_EV_SPAN_OPEN, MAIN);
	e.span_kind = PTW_SPAN_FRAME;
	e.span_id = 1;
	e.has_value = true;
	e.value = 5;
	CHECK(feed(e) == NULL);
	CHECK(!span(1)->open_after_ns.set);
	e.span_kind = PTW_SPAN_THREAD;
	e.span_id = 7; /* no such span */
	CHECK(feed(e) == NULL);
}

/* Attach, then let go: the spans still running are open (not unmatched),
 * whether or not they crossed the limit, and stay so if the tracer dies
 * afterwards; nothing more is reported once ptwatch let go. */
static void test_attach_end(void)
{
	reset(100 * MS);
	struct ptw_event e = ev(PTW_EV_PREEXISTING, MAIN);
	e.other_tid = MAIN;
	feed(e);
	e = ev(PTW_EV_PREEXISTING, 101);
	e.other_tid = MAIN;
	e.pthread = P1;
	e.routine = &worker;
	feed(e);
	now += 50 * MS;
	create(102, P2);
	CHECK_EQ(tick(1120 * MS), 2);
	feed(ev(PTW_EV_DETACHED, MAIN));
	CHECK_EQ(ptw_timeouts_count(to), 0);
	CHECK_EQ(tick(5000 * MS), 0);
	feed(ev(PTW_EV_TRACER_DIED, MAIN)); /* the restorer, after the detach */
	ptw_spans_finish(s);
	for (size_t i = 1; i <= 3; i++) {
		CHECK_EQ(span(i)->status, PTW_STATUS_OPEN);
		CHECK(!span(i)->end_ns.set);
	}
	CHECK(span(2)->open_after_ns.set && !span(3)->open_after_ns.set);
	struct ptw_metrics m;
	ptw_spans_metrics(s, &m);
	CHECK_EQ(m.open_spans, 3);
	CHECK_EQ(m.unmatched_spans, 0);
	CHECK_EQ(m.open_timeouts, 2);

	/* the tracer died while still tracing: unmatched, tracer_died, and
	 * the crossing stays recorded */
	reset(100 * MS);
	image();
	create(101, P1);
	CHECK_EQ(tick(1200 * MS), 2);
	feed(ev(PTW_EV_TRACER_DIED, MAIN));
	ptw_spans_finish(s);
	CHECK_EQ(span(2)->status, PTW_STATUS_UNMATCHED);
	CHECK_STR(span(2)->reason, "tracer_died");
	CHECK(span(2)->open_after_ns.set);
	CHECK_EQ(ptw_timeouts_count(to), 0);
}

/* The event lines: the open line names the span and says where its thread
 * is; the end line of a span that crossed says it was slow; a frame's open
 * line (another engine's span) is still told, by kind and id. */
static void test_text(void)
{
	reset(200 * MS);
	uint64_t t0 = now;
	image();
	create(101, P1);
	now = 1300 * MS;
	struct ptw_timeout due;
	struct ptw_buf b = { 0 };
	while (ptw_timeouts_pop(to, now, &due)) {
		struct ptw_event e = ev(PTW_EV_SPAN_OPEN, due.tid);
		e.span_id = due.id;
		e.has_value = true;
		e.value = now - due.start_ns;
		e.state = "S read";
		e.wchan = "anon_pipe_read";
		e.name = due.tid == 101 ? "holder" : NULL;
		e.routine = &worker;
		ptw_text_event(&b, &(struct ptw_text_style){ .start_ns = t0 }, &e, feed(e));
	}
	CHECK(b.p && strstr(b.p, "open     [1] main open for 300.00 ms, now S read in "
				 "anon_pipe_read at worker\n"));
	CHECK(b.p && strstr(b.p, "    101 open     [2] holder worker open for 300.00 ms, now S "
				 "read in anon_pipe_read at worker\n"));
	ptw_buf_reset(&b);
	now = 1500 * MS;
	struct ptw_event e = ev(PTW_EV_THREAD_DEATH, 101);
	e.unwinding = 0;
	e.has_value = true;
	e.value = 0x5107;
	ptw_text_event(&b, &(struct ptw_text_style){ .start_ns = t0 }, &e, feed(e));
	CHECK(b.p && strstr(b.p, " end      [2] returned 0x5107 after 500.00 ms (slow: open past "
				 "300.00 ms)\n"));
	ptw_buf_reset(&b);
	e = ev(PTW_EV_SPAN_OPEN, 101);
	e.span_kind = PTW_SPAN_FRAME;
	e.span_id = 12;
	e.has_value = true;
	e.value = 250 * MS;
	e.state = "R";
	ptw_text_event(&b, &(struct ptw_text_style){ .start_ns = t0 }, &e, feed(e));
	CHECK(b.p && strstr(b.p, " open     frame span 12 open for 250.00 ms, now R\n"));
	/* found running at the attach: it began before ptwatch saw it */
	reset(200 * MS);
	ptw_buf_reset(&b);
	e = ev(PTW_EV_PREEXISTING, 102);
	e.other_tid = MAIN;
	e.routine = &worker;
	feed(e);
	e = ev(PTW_EV_SPAN_OPEN, 102);
	e.span_id = 1;
	e.has_value = true;
	e.value = 200 * MS;
	e.state = "S futex";
	ptw_text_event(&b, &(struct ptw_text_style){ .start_ns = now }, &e, feed(e));
	CHECK(b.p && strstr(b.p, "[1] worker open for at least 200.00 ms, now S futex\n"));
	ptw_buf_free(&b);
}

int main(void)
{
	test_heap_order();
	test_heap_churn();
	test_crossing_then_completion();
	test_ends_in_time();
	test_disabled();
	test_several();
	test_other_kind();
	test_attach_end();
	test_text();
	ptw_spans_free(s);
	ptw_timeouts_free(to);
	CHECK_DONE();
}
