/* SPDX-License-Identifier: MIT */
/* The span engine on synthetic event streams. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>

#include "check.h"
#include "ptw_frames.h"
#include "ptw_spans.h"
#include "ptw_symbols.h"

#define MAIN 100
#define P1 0x7f0000001000ull
#define P2 0x7f0000002000ull
#define P3 0x7f0000003000ull

static const struct ptw_location worker = { .addr = 0x401000, .symbol = "worker" };
static const struct ptw_location site = { .addr = 0x401200, .symbol = "main" };

static struct ptw_spans *s;
static uint64_t now;

static struct ptw_event ev(enum ptw_event_kind kind, pid_t tid)
{
	return ptw_event_init(kind, now += 1000, tid);
}

static const struct ptw_span *feed(struct ptw_event e)
{
	return ptw_spans_consume(s, &e);
}

#define PMAIN 0x7f0000000100ull

static void image(void)
{
	feed(ev(PTW_EV_IMAGE, MAIN));
	struct ptw_event e = ev(PTW_EV_MAIN_START, MAIN);
	e.pthread = PMAIN;
	feed(e);
}

static void create(pid_t creator, pid_t tid, uint64_t pthread, int detached)
{
	struct ptw_event e = ev(PTW_EV_THREAD_CREATE, creator);
	e.other_tid = tid;
	e.pthread = pthread;
	e.routine = &worker;
	e.site = &site;
	e.detached = detached;
	feed(e);
}

static void start(pid_t tid, uint64_t arg)
{
	struct ptw_event e = ev(PTW_EV_THREAD_START, tid);
	e.routine = &worker;
	e.has_arg = true;
	e.arg = arg;
	feed(e);
}

static void death(pid_t tid, int unwinding, bool has_value, uint64_t value)
{
	struct ptw_event e = ev(PTW_EV_THREAD_DEATH, tid);
	e.unwinding = unwinding;
	e.has_value = has_value;
	e.value = value;
	feed(e);
}

static void lwp_exit(pid_t tid, enum ptw_exit_how how)
{
	struct ptw_event e = ev(PTW_EV_LWP_EXIT, tid);
	e.exit_how = how;
	feed(e);
}

static void join(pid_t joiner, uint64_t pthread, int rc, bool returns)
{
	struct ptw_event e = ev(PTW_EV_JOIN_CALL, joiner);
	e.pthread = pthread;
	feed(e);
	if (returns) {
		e = ev(PTW_EV_JOIN_RETURN, joiner);
		e.has_value = true;
		e.value = (uint64_t)rc;
		feed(e);
	}
}

static void process_exit(int code, int sig)
{
	struct ptw_event e = ev(PTW_EV_PROCESS_EXIT, MAIN);
	e.exit_code = code;
	e.sig = sig;
	feed(e);
}

static const struct ptw_span *span(size_t id)
{
	return ptw_spans_get(s, id - 1);
}

static void reset(void)
{
	ptw_spans_free(s);
	s = ptw_spans_new();
	now = 1000000;
}

static void test_lifecycle(void)
{
	reset();
	image();
	create(MAIN, 101, P1, 0);
	start(101, 21);
	join(MAIN, P1, 0, false);
	death(101, 0, true, 0x2a);
	lwp_exit(101, PTW_EXIT_SELF);
	struct ptw_event e = ev(PTW_EV_JOIN_RETURN, MAIN);
	e.has_value = true;
	feed(e);
	e = ev(PTW_EV_THREAD_RETURN, MAIN);
	e.has_value = true;
	e.value = 3;
	feed(e);
	lwp_exit(MAIN, PTW_EXIT_GROUP);
	process_exit(3, 0);
	ptw_spans_finish(s);

	CHECK_EQ(ptw_spans_count(s), 2);
	const struct ptw_span *m = span(1), *w = span(2);
	CHECK_EQ(m->origin, PTW_ORIGIN_MAIN);
	CHECK_EQ(m->pthread, PMAIN);
	CHECK_EQ(m->status, PTW_STATUS_COMPLETED);
	CHECK_EQ(m->value.v, 3);
	CHECK_EQ(m->depth, 0);
	CHECK_EQ(w->origin, PTW_ORIGIN_CREATED);
	CHECK_EQ(w->status, PTW_STATUS_COMPLETED);
	CHECK_EQ(w->method, PTW_METHOD_RETURN);
	CHECK_EQ(w->value.v, 0x2a);
	CHECK_EQ(w->arg.v, 21);
	CHECK_EQ(w->creator_tid, MAIN);
	CHECK_EQ(w->creator_span, 1);
	CHECK_EQ(w->depth, 1);
	CHECK(w->start_routine == &worker && w->create_site == &site);
	CHECK(w->create_ns.v < w->start_ns.v && w->start_ns.v < w->end_ns.v);
	CHECK(w->joined && w->joiner_tid == MAIN && w->join_return_ns.set);
	CHECK(w->join_call_ns < w->end_ns.v && w->end_ns.v < w->join_return_ns.v);
	CHECK_EQ(w->detached, 0);
	CHECK(!w->uncertain);

	struct ptw_metrics mt;
	ptw_spans_metrics(s, &mt);
	CHECK_EQ(mt.threads_seen, 2);
	CHECK_EQ(mt.threads_created, 1);
	CHECK_EQ(mt.max_active, 2);
	CHECK_EQ(mt.max_depth, 1);
	CHECK_EQ(mt.spawn_latency.count, 1);
	CHECK_EQ(mt.spawn_latency.min, w->start_ns.v - w->create_ns.v);
	CHECK_EQ(mt.join_wait.count, 1);
	CHECK_EQ(mt.unjoined, 0);
	CHECK_EQ(mt.open_spans, 0);
	CHECK_EQ(mt.unmatched_spans, 0);
	/* active series: +main, +worker, -worker, -main */
	CHECK_EQ(mt.active_series_len, 4);
	CHECK_EQ(mt.active_series[1][1], 2);
	CHECK_EQ(mt.active_series[3][1], 0);
}

static void test_end_methods(void)
{
	reset();
	image();
	/* pthread_exit */
	create(MAIN, 101, P1, -1);
	start(101, 0);
	struct ptw_event e = ev(PTW_EV_EXIT_CALL, 101);
	e.has_value = true;
	e.value = 0x42;
	feed(e);
	death(101, 1, true, 0x42);
	/* cancel */
	create(MAIN, 102, P2, -1);
	start(102, 0);
	e = ev(PTW_EV_CANCEL_REQUEST, MAIN);
	e.pthread = P2;
	feed(e);
	death(102, 1, false, 0);
	/* return seen by breakpoint (no DWARF value at death) */
	create(MAIN, 103, P3, -1);
	start(103, 0);
	e = ev(PTW_EV_THREAD_RETURN, 103);
	e.has_value = true;
	e.value = 5;
	feed(e);
	death(103, 0, false, 0);
	/* unwound with neither pthread_exit nor a cancel request seen */
	create(MAIN, 104, 0x7f0000004000ull, -1);
	death(104, 1, false, 0);

	CHECK_EQ(span(2)->status, PTW_STATUS_EXITED);
	CHECK_EQ(span(2)->method, PTW_METHOD_PTHREAD_EXIT);
	CHECK_EQ(span(2)->value.v, 0x42);
	CHECK_EQ(span(3)->status, PTW_STATUS_CANCELLED);
	CHECK_EQ(span(3)->value.v, UINT64_MAX);
	CHECK_EQ(span(3)->cancel_by, MAIN);
	CHECK(!span(3)->uncertain);
	CHECK_EQ(span(4)->status, PTW_STATUS_COMPLETED);
	CHECK_EQ(span(4)->value.v, 5);
	CHECK_EQ(span(5)->status, PTW_STATUS_CANCELLED);
	CHECK(span(5)->uncertain);
	CHECK(!span(5)->start_ns.set);
}

static void test_tid_reuse(void)
{
	reset();
	image();
	create(MAIN, 101, P1, -1);
	start(101, 1);
	death(101, 0, true, 1);
	lwp_exit(101, PTW_EXIT_SELF);
	/* the same tid again, even the same pthread_t (reused stack) */
	create(MAIN, 101, P1, -1);
	start(101, 2);
	death(101, 0, true, 2);
	CHECK_EQ(ptw_spans_count(s), 3);
	CHECK_EQ(span(2)->arg.v, 1);
	CHECK_EQ(span(3)->arg.v, 2);
	CHECK_EQ(span(2)->value.v, 1);
	CHECK_EQ(span(3)->value.v, 2);
	CHECK(!span(2)->uncertain && !span(3)->uncertain);

	/* The old thread's exit was never seen: never merge, flag it. */
	create(MAIN, 101, P2, -1);
	CHECK_EQ(ptw_spans_count(s), 4);
	CHECK_EQ(span(3)->status, PTW_STATUS_COMPLETED); /* already ended: untouched */
	create(MAIN, 101, P3, -1);
	CHECK_EQ(span(4)->status, PTW_STATUS_UNMATCHED);
	CHECK_STR(span(4)->reason, "tid_reused");
	CHECK(span(4)->uncertain);
	CHECK(ptw_spans_by_tid(s, 101) == span(5));
}

static void test_out_of_order_and_missing(void)
{
	reset();
	image();
	/* start and death of a thread whose creation we never saw */
	start(105, 7);
	death(105, 0, true, 0);
	CHECK_EQ(ptw_spans_count(s), 2);
	CHECK(span(2)->uncertain);
	CHECK_EQ(span(2)->status, PTW_STATUS_COMPLETED);
	/* a second start of the same tid is a plain call, not a start */
	create(MAIN, 106, P1, -1);
	start(106, 1);
	uint64_t first = span(3)->start_ns.v;
	start(106, 2);
	CHECK_EQ(span(3)->start_ns.v, first);
	CHECK_EQ(span(3)->arg.v, 1);
	/* its LWP exits without TD_DEATH */
	lwp_exit(106, PTW_EXIT_SELF);
	CHECK_EQ(span(3)->status, PTW_STATUS_UNMATCHED);
	CHECK_STR(span(3)->reason, "missed_death");
	CHECK(span(3)->uncertain);
	/* events for tids nobody knows change nothing */
	death(999, 0, false, 0);
	CHECK_EQ(ptw_spans_count(s), 4);
	lwp_exit(998, PTW_EXIT_SELF);
	CHECK_EQ(ptw_spans_count(s), 4);
}

static void test_process_exit_and_crash(void)
{
	reset();
	image();
	create(MAIN, 101, P1, 0);
	start(101, 0);
	create(MAIN, 102, P2, 0);
	start(102, 0);
	struct ptw_event e = ev(PTW_EV_FATAL_SIGNAL, 102);
	e.sig = SIGSEGV;
	feed(e);
	lwp_exit(102, PTW_EXIT_KILLED);
	uint64_t killed_at = now;
	lwp_exit(101, PTW_EXIT_KILLED);
	lwp_exit(MAIN, PTW_EXIT_KILLED);
	process_exit(0, SIGSEGV);
	CHECK_EQ(span(3)->status, PTW_STATUS_UNMATCHED);
	CHECK_EQ(span(3)->method, PTW_METHOD_KILLED);
	CHECK_STR(span(3)->reason, "crash");
	CHECK_EQ(span(3)->signal, SIGSEGV);
	CHECK_EQ(span(3)->end_ns.v, killed_at); /* when it went, not when we noticed */
	CHECK_EQ(span(2)->method, PTW_METHOD_PROCESS_EXIT);
	CHECK_STR(span(2)->reason, "crash");
	CHECK_EQ(span(1)->method, PTW_METHOD_PROCESS_EXIT);

	reset();
	image();
	create(MAIN, 101, P1, 0);
	start(101, 0);
	lwp_exit(101, PTW_EXIT_KILLED);
	lwp_exit(MAIN, PTW_EXIT_GROUP);
	process_exit(0, 0);
	CHECK_EQ(span(2)->status, PTW_STATUS_UNMATCHED);
	CHECK_STR(span(2)->reason, "process_exit");
	CHECK_STR(span(1)->reason, "process_exit"); /* main called exit() */
	struct ptw_metrics mt;
	ptw_spans_metrics(s, &mt);
	CHECK_EQ(mt.unmatched_spans, 2);
	CHECK_EQ(mt.unjoined, 0); /* unmatched threads do not count */
}

static void test_main_pthread_exit(void)
{
	reset();
	image();
	create(MAIN, 101, P1, 0);
	struct ptw_event e = ev(PTW_EV_EXIT_CALL, MAIN);
	e.has_value = true;
	e.value = 9;
	feed(e);
	lwp_exit(MAIN, PTW_EXIT_SELF);
	CHECK_EQ(span(1)->status, PTW_STATUS_EXITED);
	CHECK_EQ(span(1)->value.v, 9);
	start(101, 0);
	death(101, 0, true, 0);
	lwp_exit(101, PTW_EXIT_SELF);
	process_exit(0, 0);
	CHECK_EQ(span(2)->status, PTW_STATUS_COMPLETED);
	struct ptw_metrics mt;
	ptw_spans_metrics(s, &mt);
	CHECK_EQ(mt.unjoined, 1);
}

static void test_exec(void)
{
	reset();
	image();
	create(MAIN, 101, P1, 0);
	start(101, 0);
	create(MAIN, 102, P2, 0);
	start(102, 0);
	struct ptw_event e = ev(PTW_EV_EXEC, MAIN);
	e.other_tid = 102;
	feed(e);
	for (size_t i = 1; i <= 3; i++) {
		CHECK_EQ(span(i)->status, PTW_STATUS_UNMATCHED);
		CHECK_EQ(span(i)->method, PTW_METHOD_EXEC);
	}
	feed(ev(PTW_EV_IMAGE, MAIN));
	CHECK_EQ(ptw_spans_count(s), 4);
	CHECK_EQ(span(4)->origin, PTW_ORIGIN_MAIN);
	CHECK(ptw_spans_by_tid(s, MAIN) == span(4));
	/* the old image's pthread_t values mean nothing any more */
	join(MAIN, P1, 0, true);
	CHECK(!span(2)->joined);
}

static void test_joins_and_detach(void)
{
	reset();
	image();
	create(MAIN, 101, P1, -1);
	join(MAIN, P1, EBUSY, true); /* tryjoin: not joined */
	CHECK(!span(2)->joined);
	join(MAIN, P1, ETIMEDOUT, true);
	CHECK(!span(2)->joined);
	create(MAIN, 102, P2, 0);
	struct ptw_event e = ev(PTW_EV_DETACH_CALL, MAIN);
	e.pthread = P2;
	feed(e);
	CHECK_EQ(span(3)->detached, 1);
	create(MAIN, 103, P3, 1);
	death(101, 0, true, 0);
	death(102, 0, true, 0);
	death(103, 0, true, 0);
	join(MAIN, P1, 0, true);
	CHECK(span(2)->joined && span(2)->join_return_ns.set);
	CHECK_EQ(span(2)->detached, 0);
	struct ptw_metrics mt;
	ptw_spans_metrics(s, &mt);
	CHECK_EQ(mt.unjoined, 0);
	CHECK_EQ(mt.threads_created, 3);
	/* a join still in progress at the end keeps its call time, no return */
	create(MAIN, 104, 0x7f0000004000ull, 0);
	join(MAIN, 0x7f0000004000ull, 0, false);
	ptw_spans_finish(s);
	CHECK(span(5)->joined && !span(5)->join_return_ns.set);
	CHECK_EQ(span(5)->status, PTW_STATUS_OPEN);
	CHECK(!span(5)->end_ns.set);
}

/* A joiner cancelled in its join: that join never happened, and the
 * thread is joined later by another (tests/fixtures/joins.c). */
static void test_join_abandoned(void)
{
	reset();
	image();
	create(MAIN, 101, P1, 0); /* held */
	create(MAIN, 102, P2, 0); /* the joiner */
	start(102, 0);
	join(102, P1, 0, false);
	CHECK(span(2)->joined && span(2)->joiner_tid == 102);
	death(102, 1, true, (uint64_t)-1); /* cancelled, unwinding out of the join */
	lwp_exit(102, PTW_EXIT_SELF);
	CHECK(!span(2)->joined);
	CHECK_EQ(span(2)->joiner_tid, 0);
	join(MAIN, P2, 0, true);
	death(101, 0, true, 0);
	lwp_exit(101, PTW_EXIT_SELF);
	join(MAIN, P1, 0, true);
	CHECK(span(2)->joined && span(2)->join_return_ns.set);
	CHECK_EQ(span(2)->joiner_tid, MAIN);
	struct ptw_metrics mt;
	ptw_spans_metrics(s, &mt);
	CHECK_EQ(mt.unjoined, 0);
}

static void test_nesting_and_clone(void)
{
	reset();
	image();
	create(MAIN, 101, P1, 0);
	create(101, 102, P2, 0);
	create(102, 103, P3, 0);
	struct ptw_event e = ev(PTW_EV_LWP_CREATE, 103);
	e.other_tid = 104;
	feed(e);
	CHECK_EQ(span(4)->depth, 3);
	CHECK_EQ(span(4)->creator_span, 3);
	CHECK_EQ(span(5)->origin, PTW_ORIGIN_CLONE);
	CHECK_EQ(span(5)->depth, 4);
	CHECK_EQ(span(5)->pthread, 0);
	e = ev(PTW_EV_LWP_EXIT, 104);
	e.exit_how = PTW_EXIT_SELF;
	e.exit_code = 7;
	feed(e);
	/* not "exited", which means pthread_exit */
	CHECK_EQ(span(5)->status, PTW_STATUS_LWP_EXITED);
	CHECK_STR(ptw_status_name(span(5)->status), "lwp_exited");
	CHECK_EQ(span(5)->method, PTW_METHOD_UNKNOWN);
	CHECK_STR(span(5)->reason, "lwp_exit");
	CHECK(!span(5)->value.set);
	CHECK(span(5)->exit_code.set && span(5)->exit_code.v == 7);
	CHECK(!span(5)->uncertain);
	struct ptw_metrics mt;
	ptw_spans_metrics(s, &mt);
	CHECK_EQ(mt.max_depth, 4);
	CHECK_EQ(mt.max_active, 5);
}

/* Strategy "lwp" (libthread_db unusable): clone events and exits only. */
static void test_lwp_strategy(void)
{
	reset();
	feed(ev(PTW_EV_IMAGE, MAIN)); /* no main() entry seen, no pthread */
	struct ptw_event e = ev(PTW_EV_LWP_CREATE, MAIN);
	e.other_tid = 101;
	feed(e);
	uint64_t created = now;
	lwp_exit(101, PTW_EXIT_SELF);
	uint64_t ended = now;
	e = ev(PTW_EV_LWP_CREATE, MAIN);
	e.other_tid = 102;
	feed(e);
	const struct ptw_span *w = span(2);
	CHECK_EQ(w->status, PTW_STATUS_LWP_EXITED);
	CHECK(!w->start_ns.set);
	uint64_t life = 0;
	/* no start routine entry: the lifetime runs from the clone */
	CHECK(ptw_span_lifetime(w, &life));
	CHECK_EQ(life, ended - created);
	/* open at the end: no lifetime */
	ptw_spans_finish(s);
	life = 12345;
	CHECK(!ptw_span_lifetime(span(3), &life));
	CHECK_EQ(life, 12345);
	struct ptw_metrics mt;
	ptw_spans_metrics(s, &mt);
	CHECK_EQ(mt.lifetime.count, 1);
	CHECK_EQ(mt.lifetime.min, ended - created);
	CHECK_EQ(mt.unjoined, 0);

	/* attach: threads found without a pthread_t end the same way; the
	 * main thread too (it called pthread_exit, unseen) */
	reset();
	e = ev(PTW_EV_PREEXISTING, MAIN);
	e.other_tid = MAIN;
	feed(e);
	e = ev(PTW_EV_PREEXISTING, 101);
	e.other_tid = MAIN;
	feed(e);
	e = ev(PTW_EV_PREEXISTING, 102);
	e.other_tid = MAIN;
	e.pthread = P2; /* listed by libthread_db: its death was expected */
	feed(e);
	lwp_exit(101, PTW_EXIT_SELF);
	lwp_exit(102, PTW_EXIT_SELF);
	lwp_exit(MAIN, PTW_EXIT_SELF);
	CHECK_EQ(span(2)->status, PTW_STATUS_LWP_EXITED);
	CHECK(!span(2)->uncertain);
	CHECK(!ptw_span_lifetime(span(2), &life)); /* neither creation nor start */
	CHECK_EQ(span(3)->status, PTW_STATUS_UNMATCHED);
	CHECK_STR(span(3)->reason, "missed_death");
	CHECK_EQ(span(1)->status, PTW_STATUS_LWP_EXITED);

	/* a thread created while traced always has a pthread: a missed death */
	reset();
	image();
	create(MAIN, 101, P1, 0);
	start(101, 0);
	lwp_exit(101, PTW_EXIT_SELF);
	CHECK_EQ(span(2)->status, PTW_STATUS_UNMATCHED);
	CHECK(ptw_span_lifetime(span(2), &life));
	CHECK_EQ(life, span(2)->end_ns.v - span(2)->start_ns.v); /* from the start */
}

/* -f: two processes in one stream (a fork child has its parent's pthread_t
 * values); one ends while the other runs on. */
static void test_processes(void)
{
	reset();
	struct ptw_event e = ev(PTW_EV_IMAGE, 1000);
	e.pid = 1000;
	feed(e);
	e = ev(PTW_EV_THREAD_CREATE, 1000);
	e.pid = 1000;
	e.other_tid = 1001;
	e.pthread = P1;
	e.routine = &worker;
	feed(e);
	e = ev(PTW_EV_PREEXISTING, 2000);
	e.pid = 2000;
	e.process = 1;
	e.other_tid = 2000;
	feed(e);
	e = ev(PTW_EV_THREAD_CREATE, 2000);
	e.pid = 2000;
	e.process = 1;
	e.other_tid = 2001;
	e.pthread = P1;
	e.routine = &worker;
	feed(e);
	CHECK_EQ(ptw_spans_count(s), 4);
	CHECK_EQ(span(1)->pid, 1000);
	CHECK_EQ(span(3)->pid, 2000);
	CHECK_EQ(span(3)->origin, PTW_ORIGIN_MAIN);
	CHECK_EQ(span(4)->pid, 2000);
	CHECK_EQ(span(4)->process, 1);
	CHECK_EQ(span(1)->process, 0);
	/* the join in 1000 of P1 is of 1000's thread */
	e = ev(PTW_EV_JOIN_CALL, 1000);
	e.pid = 1000;
	e.pthread = P1;
	feed(e);
	CHECK(span(2)->joined);
	CHECK(!span(4)->joined);
	/* 2000 exits: its spans end, 1000's do not */
	e = ev(PTW_EV_PROCESS_EXIT, 2000);
	e.pid = 2000;
	e.process = 1;
	e.exit_code = 3;
	feed(e);
	CHECK_EQ(span(3)->status, PTW_STATUS_UNMATCHED);
	CHECK_EQ(span(4)->status, PTW_STATUS_UNMATCHED);
	CHECK_EQ(span(1)->status, PTW_STATUS_OPEN);
	CHECK_EQ(span(2)->status, PTW_STATUS_OPEN);
	/* a join of P1 in 2000's namespace finds nothing now */
	e = ev(PTW_EV_JOIN_CALL, 2000);
	e.pid = 2000;
	e.process = 1;
	e.pthread = P1;
	feed(e);
	CHECK(!span(4)->joined);
	struct ptw_metrics m;
	ptw_spans_metrics_of(s, 1, &m);
	CHECK_EQ(m.threads_seen, 2);
	CHECK_EQ(m.threads_created, 1);
	CHECK_EQ(m.unmatched_spans, 2);
	ptw_spans_metrics_of(s, 0, &m);
	CHECK_EQ(m.threads_seen, 2);
	CHECK_EQ(m.max_active, 2);
	CHECK_EQ(m.open_spans, 2);
	ptw_spans_metrics(s, &m);
	CHECK_EQ(m.threads_seen, 4);
	/* the kernel hands pid 2000 out again: another process (id 2) */
	e = ev(PTW_EV_PREEXISTING, 2000);
	e.pid = 2000;
	e.process = 2;
	e.other_tid = 2000;
	feed(e);
	CHECK_EQ(span(5)->process, 2);
	ptw_spans_metrics_of(s, 1, &m);
	CHECK_EQ(m.threads_seen, 2);
	ptw_spans_metrics_of(s, 2, &m);
	CHECK_EQ(m.threads_seen, 1);
	CHECK_EQ(m.open_spans, 1);
	/* all three in one pass, in any order, a process without spans too:
	 * the same shares */
	uint32_t ids[] = { 2, 0, 7, 1 };
	struct ptw_metrics each[4];
	ptw_spans_metrics_each(s, ids, 4, each);
	CHECK_EQ(each[0].threads_seen, 1);
	CHECK_EQ(each[0].open_spans, 1);
	CHECK_EQ(each[1].threads_seen, 2);
	CHECK_EQ(each[1].max_active, 2);
	CHECK_EQ(each[1].open_spans, 2);
	CHECK_EQ(each[2].threads_seen, 0);
	CHECK_EQ(each[3].threads_seen, 2);
	CHECK_EQ(each[3].threads_created, 1);
	CHECK_EQ(each[3].unmatched_spans, 2);
}

static void test_distribution(void)
{
	uint64_t v[10] = { 10, 1, 9, 2, 8, 3, 7, 4, 6, 5 };
	struct ptw_distribution d;
	ptw_distribution(v, 10, &d);
	CHECK_EQ(d.count, 10);
	CHECK_EQ(d.min, 1);
	CHECK_EQ(d.p50, 5);
	CHECK_EQ(d.p90, 9);
	CHECK_EQ(d.p99, 10);
	CHECK_EQ(d.max, 10);
	CHECK(d.mean > 5.49 && d.mean < 5.51);
	uint64_t one = 42;
	ptw_distribution(&one, 1, &d);
	CHECK_EQ(d.p50, 42);
	CHECK_EQ(d.p99, 42);
	ptw_distribution(NULL, 0, &d);
	CHECK_EQ(d.count, 0);
}

/* ---- streaming: ended spans are handed out and freed ---- */

static size_t retired_count, max_held;
static uint32_t last_retired_id;
static bool retired_twice;
static bool *seen_id;

static void on_retire(void *ctx, const struct ptw_span *sp)
{
	(void)ctx;
	if (seen_id[sp->id])
		retired_twice = true;
	seen_id[sp->id] = true;
	retired_count++;
	last_retired_id = sp->id;
}

/* n threads, 4 at a time: joined, detached, or joinable and never joined
 * (then their pthread_t is not reused: the target holds them). */
static void workload(struct ptw_spans *e, size_t n, unsigned seed)
{
	s = e;
	now = 0;
	image();
	for (size_t i = 0; i < n; i += 4) {
		for (size_t k = 0; k < 4 && i + k < n; k++) {
			pid_t tid = (pid_t)(1000 + (i + k) % 50000);
			bool unjoined = (i + k) % 97 == 3;
			uint64_t pthread = unjoined ? 0x100000000ull + (i + k) * 0x1000 : P1 + k * 0x1000;
			int detached = (i + k) % 5 == 0;
			now += (uint64_t)(rand_r(&seed) % 100000);
			create(MAIN, tid, pthread, detached);
			now += (uint64_t)(rand_r(&seed) % 1000000);
			start(tid, i + k);
		}
		for (size_t k = 0; k < 4 && i + k < n; k++) {
			pid_t tid = (pid_t)(1000 + (i + k) % 50000);
			bool unjoined = (i + k) % 97 == 3;
			uint64_t pthread = unjoined ? 0x100000000ull + (i + k) * 0x1000 : P1 + k * 0x1000;
			now += (uint64_t)(rand_r(&seed) % 3000000);
			struct ptw_event r = ev(PTW_EV_THREAD_RETURN, tid);
			r.value = i + k;
			feed(r);
			death(tid, 0, false, 0);
			lwp_exit(tid, PTW_EXIT_SELF);
			if ((i + k) % 5 != 0 && !unjoined)
				join(MAIN, pthread, 0, true);
			ptw_spans_collect(e);
			if (getenv("DBG")) fprintf(stderr, "i=%zu held=%zu retired=%zu\n", i + k, ptw_spans_count(e), retired_count);
			if (ptw_spans_count(e) > max_held)
				max_held = ptw_spans_count(e);
		}
	}
	struct ptw_event r = ev(PTW_EV_THREAD_RETURN, MAIN);
	feed(r);
	lwp_exit(MAIN, PTW_EXIT_GROUP);
	process_exit(0, 0);
	ptw_spans_finish(e);
	ptw_spans_retire_all(e);
}

static void test_streaming_run(size_t n, bool exact)
{
	struct ptw_spans *whole = ptw_spans_new(), *stream = ptw_spans_new();
	seen_id = calloc(n + 2, sizeof(bool));
	retired_count = max_held = 0;
	retired_twice = false;
	workload(whole, n, 7);
	max_held = 0;
	ptw_spans_set_streaming(stream, on_retire, NULL);
	workload(stream, n, 7);
	CHECK_EQ(retired_count, n + 1);
	CHECK(!retired_twice);
	/* 4 live at once, the unjoined ones (1 in 97) and the kept few */
	size_t unjoined = 0;
	for (size_t i = 0; i < n; i++)
		unjoined += i % 97 == 3 && i % 5 != 0;
	size_t bound = 8 + unjoined > PTW_SPANS_KEEP + 5 ? 8 + unjoined : PTW_SPANS_KEEP + 5;
	if (max_held > bound)
		fprintf(stderr, "max_held %zu, unjoined %zu\n", max_held, unjoined);
	CHECK(max_held <= bound);
	struct ptw_metrics a, b;
	ptw_spans_metrics(whole, &a);
	ptw_spans_metrics(stream, &b);
	CHECK_EQ(a.threads_seen, b.threads_seen);
	CHECK_EQ(a.threads_created, b.threads_created);
	CHECK_EQ(a.max_active, b.max_active);
	CHECK_EQ(a.unjoined, b.unjoined);
	CHECK_EQ(a.unjoined, unjoined);
	CHECK_EQ(a.open_spans, b.open_spans);
	CHECK_EQ(a.unmatched_spans, b.unmatched_spans);
	const struct ptw_distribution *da[] = { &a.spawn_latency, &a.lifetime, &a.join_wait };
	const struct ptw_distribution *db[] = { &b.spawn_latency, &b.lifetime, &b.join_wait };
	for (size_t k = 0; k < 3; k++) {
		CHECK_EQ(da[k]->count, db[k]->count);
		CHECK_EQ(da[k]->min, db[k]->min);
		CHECK_EQ(da[k]->max, db[k]->max);
		const uint64_t pa[] = { da[k]->p50, da[k]->p90, da[k]->p99 };
		const uint64_t pb[] = { db[k]->p50, db[k]->p90, db[k]->p99 };
		for (size_t q = 0; q < 3; q++) {
			if (exact)
				CHECK_EQ(pa[q], pb[q]);
			uint64_t diff = pa[q] > pb[q] ? pa[q] - pb[q] : pb[q] - pa[q];
			CHECK(diff * 50 <= pa[q] + 50); /* within 2% */
		}
	}
	struct ptw_group *ga, *gb;
	size_t nga = ptw_spans_groups(whole, &ga), ngb = ptw_spans_groups(stream, &gb);
	CHECK_EQ(nga, 2);
	CHECK_EQ(nga, ngb);
	for (size_t i = 0; i < nga && i < ngb; i++) {
		CHECK_STR(ga[i].routine, gb[i].routine);
		CHECK_EQ(ga[i].count, gb[i].count);
		CHECK_EQ(ga[i].by_status[PTW_STATUS_COMPLETED], gb[i].by_status[PTW_STATUS_COMPLETED]);
	}
	ptw_groups_free(ga, nga);
	ptw_groups_free(gb, ngb);
	ptw_spans_free(whole);
	ptw_spans_free(stream);
	free(seen_id);
	s = NULL;
}

/* A short session keeps its spans for the summary table. */
static void test_streaming_keeps_few(void)
{
	struct ptw_spans *e = ptw_spans_new();
	seen_id = calloc(64, sizeof(bool));
	retired_count = 0;
	ptw_spans_set_streaming(e, on_retire, NULL);
	workload(e, 10, 3);
	CHECK_EQ(retired_count, 11);
	CHECK_EQ(ptw_spans_count(e), 11);
	CHECK_EQ(ptw_spans_get(e, 0)->id, 1);
	CHECK_EQ(ptw_spans_get(e, 10)->id, 11);
	ptw_spans_free(e);
	free(seen_id);
	s = NULL;
}

/* Random streams (several creators, events missing or out of order, tid
 * and pthread_t reuse, timeouts, an exec, the end or the tracer's death):
 * the streaming engine touches no freed span (run it under ASan), hands
 * out every span once, and counts what the whole engine counts. */
static uint64_t touch_sum;

static void touch(void *ctx, const struct ptw_span *sp)
{
	(void)ctx;
	touch_sum += sp->id + (uint64_t)sp->tid + (sp->name ? (uint64_t)sp->name[0] : 0) +
		     (sp->start_routine ? sp->start_routine->addr : 0);
	if (seen_id[sp->id])
		retired_twice = true;
	seen_id[sp->id] = true;
	retired_count++;
}

struct sim {
	pid_t tid;
	uint64_t pthread;
	int step; /* 0 create, 1 start, 2 end call, 3 death, 4 exit, 5 join/detach, 6 done */
	int how;
};

static void random_stream(struct ptw_spans *e, unsigned seed, size_t nthreads)
{
	s = e;
	now = 0;
	image();
	struct sim live_[8];
	size_t nlive = 0, made = 0;
	pid_t next_tid = 1000;
	while (made < nthreads || nlive) {
		if (nlive < 8 && made < nthreads && rand_r(&seed) % 3 == 0) {
			struct sim *t = &live_[nlive++];
			t->tid = rand_r(&seed) % 4 ? next_tid++ : 1000 + rand_r(&seed) % 8; /* reuse */
			t->pthread = P1 + (uint64_t)made * 0x1000; /* reused only once joined or detached: never here */
			t->step = 0;
			t->how = rand_r(&seed) % 6;
			made++;
			continue;
		}
		if (!nlive)
			continue;
		size_t k = (size_t)rand_r(&seed) % nlive;
		struct sim *t = &live_[k];
		bool skip = rand_r(&seed) % 11 == 0; /* a missing event */
		struct ptw_event e2;
		switch (t->step) {
		case 0:
			if (!skip)
				create(MAIN, t->tid, t->pthread, t->how == 4);
			break;
		case 1:
			if (!skip)
				start(t->tid, 0);
			if (rand_r(&seed) % 5 == 0) {
				e2 = ev(PTW_EV_THREAD_NAME, t->tid);
				e2.name = "worker-x";
				feed(e2);
			}
			if (rand_r(&seed) % 7 == 0) {
				e2 = ev(PTW_EV_SPAN_OPEN, t->tid);
				e2.span_kind = PTW_SPAN_THREAD;
				e2.span_id = (uint32_t)(1 + rand_r(&seed) % (ptw_spans_total(e) + 1));
				e2.has_value = true;
				e2.value = 5;
				e2.state = "S futex";
				feed(e2);
			}
			break;
		case 2:
			if (t->how == 1) {
				e2 = ev(PTW_EV_EXIT_CALL, t->tid);
				e2.value = 7;
				feed(e2);
			} else if (t->how == 2) {
				e2 = ev(PTW_EV_CANCEL_REQUEST, MAIN);
				e2.pthread = t->pthread;
				feed(e2);
			} else if (!skip) {
				e2 = ev(PTW_EV_THREAD_RETURN, t->tid);
				e2.value = 1;
				feed(e2);
			}
			break;
		case 3:
			if (!skip)
				death(t->tid, t->how == 1 || t->how == 2, false, 0);
			break;
		case 4:
			lwp_exit(t->tid, PTW_EXIT_SELF);
			break;
		case 5:
			if (t->how == 3) {
				e2 = ev(PTW_EV_DETACH_CALL, MAIN);
				e2.pthread = t->pthread;
				feed(e2);
			} else if (t->how != 5 && t->how != 4) { /* 4: created detached */
				join(MAIN, t->pthread, skip ? 22 : 0, rand_r(&seed) % 9 != 0);
			}
			break;
		}
		if (++t->step == 6)
			live_[k] = live_[--nlive];
		ptw_spans_collect(e);
	}
	int end = rand_r(&seed) % 3;
	if (end == 0) {
		process_exit(0, 0);
	} else if (end == 1) {
		struct ptw_event e2 = ev(PTW_EV_TRACER_DIED, MAIN);
		feed(e2);
	} else {
		struct ptw_event e2 = ev(PTW_EV_EXEC, MAIN);
		e2.other_tid = MAIN;
		feed(e2);
		image();
		create(MAIN, 5000, P2, 0);
		process_exit(0, SIGKILL);
	}
	ptw_spans_finish(e);
	ptw_spans_retire_all(e);
}

static void test_streaming_random(void)
{
	for (unsigned seed = 1; seed <= 300; seed++) {
		size_t n = 10 + seed % 90;
		struct ptw_spans *whole = ptw_spans_new(), *stream = ptw_spans_new();
		seen_id = calloc(4 * n + 16, sizeof(bool));
		retired_count = 0;
		retired_twice = false;
		random_stream(whole, seed, n);
		ptw_spans_set_streaming(stream, touch, NULL);
		random_stream(stream, seed, n);
		struct ptw_metrics a, b;
		ptw_spans_metrics(whole, &a);
		ptw_spans_metrics(stream, &b);
		CHECK_EQ(retired_count, ptw_spans_total(whole));
		CHECK(!retired_twice);
		CHECK_EQ(a.threads_seen, b.threads_seen);
		CHECK_EQ(a.unjoined, b.unjoined);
		CHECK_EQ(a.open_spans, b.open_spans);
		CHECK_EQ(a.unmatched_spans, b.unmatched_spans);
		CHECK_EQ(a.open_timeouts, b.open_timeouts);
		CHECK_EQ(a.spawn_latency.count, b.spawn_latency.count);
		CHECK_EQ(a.lifetime.p50, b.lifetime.p50);
		CHECK_EQ(a.join_wait.p99, b.join_wait.p99);
		ptw_spans_free(whole);
		ptw_spans_free(stream);
		free(seen_id);
		s = NULL;
	}
}

/* Frames in streaming mode: only the open ones are held; the totals and
 * per-function figures are those of the whole engine. */
static const struct ptw_location fn_a = { .addr = 0x402000, .symbol = "fa" };
static const struct ptw_location fn_b = { .addr = 0x403000, .symbol = "fb" };

static void frame_workload(struct ptw_spans *e, size_t calls, size_t *held)
{
	s = e;
	now = 0;
	image();
	create(MAIN, 1000, P1, 0);
	start(1000, 0);
	for (size_t i = 0; i < calls; i++) {
		pid_t tid = i % 2 ? MAIN : 1000;
		/* fa calls fb calls fb: three deep, then all return */
		uint64_t sp = 0x7f0000 + (i % 2) * 0x100000;
		const struct ptw_location *fns[] = { &fn_a, &fn_b, &fn_b };
		for (int d = 0; d < 3; d++) {
			struct ptw_event e2 = ev(PTW_EV_FRAME_ENTRY, tid);
			e2.routine = fns[d];
			e2.sp = sp - 0x40 * (uint64_t)d;
			e2.ret_addr = 0x401000 + (uint64_t)d;
			now += (uint64_t)(i % 7) * 100;
			feed(e2);
		}
		for (int d = 2; d >= 0; d--) {
			if (i % 13 == 5 && d == 2)
				continue; /* a longjmp-like skip: unmatched */
			struct ptw_event e2 = ev(PTW_EV_FRAME_RETURN, tid);
			e2.sp = sp - 0x40 * (uint64_t)d + 8;
			e2.ret_addr = 0x401000 + (uint64_t)d;
			e2.has_value = true;
			e2.value = (uint64_t)d;
			feed(e2);
		}
		ptw_spans_collect(e);
		if (ptw_frames_count(ptw_spans_frames(e)) > *held)
			*held = ptw_frames_count(ptw_spans_frames(e));
	}
	process_exit(0, 0);
	ptw_spans_finish(e);
	ptw_spans_retire_all(e);
}

static void test_streaming_frames(void)
{
	struct ptw_spans *whole = ptw_spans_new(), *stream = ptw_spans_new();
	size_t held_whole = 0, held_stream = 0;
	frame_workload(whole, 3000, &held_whole);
	ptw_spans_set_streaming(stream, NULL, NULL);
	frame_workload(stream, 3000, &held_stream);
	CHECK_EQ(held_whole, 9000);
	CHECK(held_stream <= 3);
	uint64_t a[3], b[3];
	ptw_frames_totals(ptw_spans_frames(whole), &a[0], &a[1], &a[2]);
	ptw_frames_totals(ptw_spans_frames(stream), &b[0], &b[1], &b[2]);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(a[i], b[i]);
	CHECK_EQ(a[0], 9000);
	CHECK(a[2] > 0);
	struct ptw_function_stats *sa, *sb;
	size_t na = ptw_frames_stats(ptw_spans_frames(whole), &sa);
	size_t nb = ptw_frames_stats(ptw_spans_frames(stream), &sb);
	CHECK_EQ(na, 2);
	CHECK_EQ(na, nb);
	for (size_t i = 0; i < na && i < nb; i++) {
		CHECK(sa[i].function == sb[i].function);
		CHECK_EQ(sa[i].calls, sb[i].calls);
		CHECK_EQ(sa[i].completed, sb[i].completed);
		CHECK_EQ(sa[i].total_ns, sb[i].total_ns);
		CHECK_EQ(sa[i].self_ns, sb[i].self_ns);
		CHECK_EQ(sa[i].min_ns, sb[i].min_ns);
		CHECK_EQ(sa[i].max_ns, sb[i].max_ns);
		if (sa[i].completed <= PTW_DACC_EXACT)
			CHECK_EQ(sa[i].p50_ns, sb[i].p50_ns); /* exact up to PTW_DACC_EXACT */
		else
			CHECK(sb[i].p50_ns * 64 >= sa[i].p50_ns * 63 &&
			      sb[i].p50_ns * 63 <= sa[i].p50_ns * 64);
	}
	free(sa);
	free(sb);
	ptw_spans_free(whole);
	ptw_spans_free(stream);
	s = NULL;
}

static void test_dacc(void)
{
	struct ptw_dacc a = { .exact_max = 16 };
	uint64_t *v = calloc(100000, sizeof(uint64_t));
	unsigned seed = 1;
	for (size_t i = 0; i < 100000; i++) {
		v[i] = (uint64_t)rand_r(&seed) * 37;
		ptw_dacc_add(&a, v[i]);
	}
	struct ptw_distribution exact, approx;
	ptw_distribution(v, 100000, &exact);
	ptw_dacc_result(&a, &approx);
	CHECK_EQ(approx.count, 100000);
	CHECK_EQ(approx.min, exact.min);
	CHECK_EQ(approx.max, exact.max);
	CHECK(approx.p50 > exact.p50 - exact.p50 / 64 && approx.p50 < exact.p50 + exact.p50 / 64);
	CHECK(approx.p99 > exact.p99 - exact.p99 / 64 && approx.p99 < exact.p99 + exact.p99 / 64);
	ptw_dacc_free(&a);
	free(v);
}

int main(void)
{
	test_dacc();
	test_streaming_frames();
	test_streaming_random();
	test_streaming_keeps_few();
	test_streaming_run(1000, true);
	test_streaming_run(30000, false);
	test_lifecycle();
	test_end_methods();
	test_tid_reuse();
	test_out_of_order_and_missing();
	test_process_exit_and_crash();
	test_main_pthread_exit();
	test_exec();
	test_joins_and_detach();
	test_join_abandoned();
	test_nesting_and_clone();
	test_lwp_strategy();
	test_processes();
	test_distribution();
	ptw_spans_free(s);
	s = NULL;
	CHECK_DONE();
}
