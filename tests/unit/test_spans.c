/* SPDX-License-Identifier: MIT */
/* The span engine on synthetic event streams. */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>

#include "check.h"
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
	feed(e);
	CHECK_EQ(span(5)->status, PTW_STATUS_EXITED);
	CHECK(!span(5)->uncertain);
	struct ptw_metrics mt;
	ptw_spans_metrics(s, &mt);
	CHECK_EQ(mt.max_depth, 4);
	CHECK_EQ(mt.max_active, 5);
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

int main(void)
{
	test_lifecycle();
	test_end_methods();
	test_tid_reuse();
	test_out_of_order_and_missing();
	test_process_exit_and_crash();
	test_main_pthread_exit();
	test_exec();
	test_joins_and_detach();
	test_nesting_and_clone();
	test_processes();
	test_distribution();
	ptw_spans_free(s);
	CHECK_DONE();
}
