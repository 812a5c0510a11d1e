/* SPDX-License-Identifier: MIT */
/* Wait spans and live deadlocks (--locks) on synthetic event streams; the
 * wait-for cycle search on synthetic graphs. */
#include <stdlib.h>

#include "check.h"
#include "ptw_locks.h"
#include "ptw_output.h"
#include "ptw_spans.h"
#include "ptw_symbols.h"

#define MAIN 100
#define T1 101
#define T2 102
#define T3 103
#define PT1 0x7f0000001000ull
#define PT2 0x7f0000002000ull
#define PT3 0x7f0000003000ull
#define MUTEX_A 0x404040ull
#define MUTEX_B 0x404080ull
#define COND 0x4040c0ull

static const struct ptw_location lock_a = { .addr = MUTEX_A, .symbol = "lock_a" };
static const struct ptw_location site1 = { .addr = 0x401010, .symbol = "worker" };
static const struct ptw_location site2 = { .addr = 0x401110, .symbol = "other" };

static struct ptw_spans *s;
static uint64_t now;

static struct ptw_event ev(enum ptw_event_kind kind, pid_t tid)
{
	return ptw_event_init(kind, now += 1000, tid);
}

static const struct ptw_wait *feed(struct ptw_event e)
{
	ptw_spans_consume(s, &e);
	return ptw_spans_last_wait(s);
}

static const struct ptw_wait *begin(pid_t tid, enum ptw_wait_kind kind, uint64_t object,
				    pid_t owner, const struct ptw_location *site, uint64_t sp)
{
	struct ptw_event e = ev(PTW_EV_WAIT_BEGIN, tid);
	e.wait_kind = kind;
	e.wait_object = object;
	e.wait_owner = owner;
	e.object = object == MUTEX_A ? &lock_a : NULL;
	e.site = site;
	e.stack = &site;
	e.nstack = 1;
	e.sp = sp;
	return feed(e);
}

static const struct ptw_wait *end(pid_t tid)
{
	struct ptw_event e = ev(PTW_EV_WAIT_END, tid);
	e.has_value = true;
	return feed(e);
}

static void setup(void)
{
	ptw_spans_free(s);
	s = ptw_spans_new();
	now = 0;
	struct ptw_event e = ev(PTW_EV_IMAGE, MAIN);
	ptw_spans_consume(s, &e);
	pid_t tids[] = { T1, T2, T3 };
	uint64_t pts[] = { PT1, PT2, PT3 };
	for (int i = 0; i < 3; i++) {
		e = ev(PTW_EV_THREAD_CREATE, MAIN);
		e.other_tid = tids[i];
		e.pthread = pts[i];
		ptw_spans_consume(s, &e);
	}
}

static const struct ptw_locks *L(void)
{
	return ptw_spans_locks(s);
}

/* Waits begin and end in pairs, per thread; the owner's span is found. */
static void test_pairs(void)
{
	setup();
	const struct ptw_wait *w1 = begin(T1, PTW_WAIT_MUTEX, MUTEX_A, T2, &site1, 0x7000);
	const struct ptw_wait *w2 = begin(T2, PTW_WAIT_COND, COND, 0, &site2, 0x8000);
	CHECK(w1 && w2);
	CHECK_EQ(w1->id, 1);
	CHECK_EQ(w2->id, 2);
	CHECK_EQ(w1->thread_span, 2);
	CHECK_EQ(w1->owner, T2);
	CHECK_EQ(w1->owner_span, 3);
	CHECK(w1->object_loc == &lock_a);
	CHECK_EQ(w1->status, PTW_WAIT_OPEN);
	CHECK(end(T1) == w1);
	CHECK_EQ(w1->status, PTW_WAIT_COMPLETED);
	CHECK_EQ(w1->end_ns - w1->start_ns, 2000);
	CHECK(end(T1) == NULL); /* nothing open: a stray return */
	CHECK_EQ(w2->status, PTW_WAIT_OPEN);
	CHECK(end(T2) == w2);
	CHECK_EQ(ptw_locks_count(L()), 2);
}

/* A join of a thread that had ended before it began: no owner tid came
 * (the joined thread's tid word was cleared by then; json-lines-locks@kernel
 * got owner_tid null once), its pthread_t names it. */
static void test_join_of_ended(void)
{
	setup();
	struct ptw_event e = ev(PTW_EV_THREAD_START, T2);
	feed(e);
	e = ev(PTW_EV_THREAD_DEATH, T2);
	e.has_value = true;
	feed(e);
	e = ev(PTW_EV_LWP_EXIT, T2);
	e.exit_how = PTW_EXIT_SELF;
	feed(e);
	const struct ptw_wait *w = begin(MAIN, PTW_WAIT_JOIN, PT2, 0, &site1, 0x6000);
	CHECK(w != NULL);
	CHECK_EQ(w->owner, T2);
	CHECK_EQ(w->owner_span, 3);
	CHECK(end(MAIN) == w);
	/* another kind without an owner stays without one */
	w = begin(MAIN, PTW_WAIT_COND, PT2, 0, &site1, 0x6000);
	CHECK_EQ(w->owner, 0);
	CHECK_EQ(w->owner_span, 0);
	/* an owner tid that came is kept */
	w = begin(T1, PTW_WAIT_JOIN, PT3, T3, &site1, 0x6100);
	CHECK_EQ(w->owner, T3);
	CHECK_EQ(w->owner_span, 4);
}

/* A wait left without its return: by a later entry at or above its stack
 * pointer (longjmp), by the thread's end (cancel in a condvar wait), by
 * the process's end; a detach leaves it open; the tracer's death makes it
 * unmatched without a time. */
static void test_ends(void)
{
	setup();
	const struct ptw_wait *w = begin(T1, PTW_WAIT_MUTEX, MUTEX_A, T2, &site1, 0x7000);
	/* a wait in a signal handler, below it: nested */
	const struct ptw_wait *inner = begin(T1, PTW_WAIT_LOCK, 0x5000, 0, &site1, 0x6000);
	CHECK_EQ(w->status, PTW_WAIT_OPEN);
	CHECK(end(T1) == inner);
	/* a new wait at the same stack pointer: the first one was left */
	const struct ptw_wait *again = begin(T1, PTW_WAIT_MUTEX, MUTEX_A, T2, &site1, 0x7000);
	CHECK_EQ(w->status, PTW_WAIT_UNMATCHED);
	CHECK_STR(w->reason, "longjmp");
	CHECK(w->has_left);

	/* cancelled while waiting on a condvar */
	const struct ptw_wait *c = begin(T2, PTW_WAIT_COND, COND, 0, &site2, 0x8000);
	struct ptw_event e = ev(PTW_EV_CANCEL_REQUEST, MAIN);
	e.pthread = PT2;
	ptw_spans_consume(s, &e);
	e = ev(PTW_EV_THREAD_DEATH, T2);
	e.unwinding = 1;
	ptw_spans_consume(s, &e);
	CHECK_EQ(c->status, PTW_WAIT_UNMATCHED);
	CHECK_STR(c->reason, "cancel");

	/* cancelled while waiting on a condvar, whose cleanup takes its mutex
	 * back, a wait of its own above the first (pthread_cond_wait/2-3 of
	 * the Open POSIX suite): the first was left by the cancellation */
	const struct ptw_wait *c3 = begin(T3, PTW_WAIT_COND, COND, 0, &site2, 0x8000);
	e = ev(PTW_EV_CANCEL_REQUEST, MAIN);
	e.pthread = PT3;
	ptw_spans_consume(s, &e);
	const struct ptw_wait *relock = begin(T3, PTW_WAIT_MUTEX, MUTEX_A, T2, &site2, 0x8100);
	CHECK_EQ(c3->status, PTW_WAIT_UNMATCHED);
	CHECK_STR(c3->reason, "cancel");
	CHECK(end(T3) == relock);

	e = ev(PTW_EV_PROCESS_EXIT, MAIN);
	e.sig = 9;
	ptw_spans_consume(s, &e);
	CHECK_EQ(again->status, PTW_WAIT_UNMATCHED);
	CHECK_STR(again->reason, "killed");

	setup();
	w = begin(T1, PTW_WAIT_MUTEX, MUTEX_A, T2, &site1, 0x7000);
	e = ev(PTW_EV_DETACHED, MAIN);
	ptw_spans_consume(s, &e);
	e = ev(PTW_EV_TRACER_DIED, MAIN);
	ptw_spans_consume(s, &e);
	CHECK_EQ(w->status, PTW_WAIT_OPEN);

	setup();
	w = begin(T1, PTW_WAIT_MUTEX, MUTEX_A, T2, &site1, 0x7000);
	e = ev(PTW_EV_TRACER_DIED, MAIN);
	ptw_spans_consume(s, &e);
	CHECK_EQ(w->status, PTW_WAIT_UNMATCHED);
	CHECK_STR(w->reason, "tracer_died");
	CHECK(!w->has_left);
}

/* An event of the fork child CHILD, process 1 of the session. */
#define CHILD 2000
static struct ptw_event child_ev(enum ptw_event_kind kind)
{
	struct ptw_event e = ev(kind, CHILD);
	e.pid = CHILD;
	e.process = 1;
	return e;
}

/* The child's wait on MUTEX_A begins. */
static const struct ptw_wait *child_waits(void)
{
	struct ptw_event e = child_ev(PTW_EV_WAIT_BEGIN);
	e.wait_kind = PTW_WAIT_MUTEX;
	e.wait_object = MUTEX_A;
	e.sp = 0x7000;
	return feed(e);
}

/* -f: a wait in a fork child (process 1) is its own: its parent's exec and
 * exit leave it open, its own end ends it (issue 27: any process's exit
 * ended every process's waits). */
static void test_processes(void)
{
	setup();
	struct ptw_event e = child_ev(PTW_EV_PREEXISTING);
	e.other_tid = CHILD;
	ptw_spans_consume(s, &e);
	const struct ptw_wait *child = child_waits();
	const struct ptw_wait *parent = begin(T1, PTW_WAIT_COND, COND, 0, &site1, 0x6000);
	e = ev(PTW_EV_EXEC, MAIN);
	e.other_tid = MAIN;
	ptw_spans_consume(s, &e);
	CHECK_STR(parent->reason, "exec");
	e = ev(PTW_EV_PROCESS_EXIT, MAIN);
	ptw_spans_consume(s, &e);
	CHECK_EQ(child->status, PTW_WAIT_OPEN);
	e = child_ev(PTW_EV_WAIT_END);
	e.has_value = true;
	CHECK(feed(e) == child);
	CHECK_EQ(child->status, PTW_WAIT_COMPLETED);
	const struct ptw_wait *again = child_waits();
	e = child_ev(PTW_EV_PROCESS_EXIT);
	e.sig = 9;
	ptw_spans_consume(s, &e);
	CHECK_EQ(again->status, PTW_WAIT_UNMATCHED);
	CHECK_STR(again->reason, "killed");
}

/* The deadlock events: one record with every member, its wait marked, the
 * thread spans' stacks and waits set as a snapshot would. */
static void test_deadlock(void)
{
	setup();
	const struct ptw_wait *wa = begin(T1, PTW_WAIT_MUTEX, MUTEX_B, T2, &site1, 0x7000);
	const struct ptw_wait *wb = begin(T2, PTW_WAIT_MUTEX, MUTEX_A, T1, &site2, 0x8000);
	const struct ptw_location *stack[] = { &site1, &site2 };
	pid_t members[] = { T2, T1 };
	uint64_t objects[] = { MUTEX_A, MUTEX_B };
	for (int i = 0; i < 2; i++) {
		struct ptw_event e = ev(PTW_EV_DEADLOCK, members[i]);
		e.span_id = 1;
		e.has_value = true;
		e.value = 2;
		e.has_arg = true;
		e.arg = (uint64_t)i;
		e.wait_kind = PTW_WAIT_MUTEX;
		e.wait_object = objects[i];
		e.wait_owner = members[1 - i];
		e.stack = stack;
		e.nstack = 2;
		e.state = "S futex";
		ptw_spans_consume(s, &e);
	}
	CHECK_EQ(ptw_locks_deadlock_count(L()), 1);
	const struct ptw_live_deadlock *d = ptw_locks_deadlock(L(), 0);
	CHECK_EQ(d->n, 2);
	CHECK_EQ(d->tids[0], T2);
	CHECK_EQ(d->tids[1], T1);
	CHECK_EQ(d->thread_spans[0], 3);
	CHECK_EQ(d->waits[0], wb->id);
	CHECK_EQ(d->waits[1], wa->id);
	CHECK_EQ(wa->deadlock, 1);
	CHECK_EQ(wb->deadlock, 1);
	const struct ptw_span *t1 = ptw_spans_by_tid(s, T1);
	CHECK_EQ(t1->nstack, 2);
	CHECK_EQ(t1->wait_owner, T2);
	CHECK_STR(t1->state, "S futex");
	/* a member beyond the count is ignored */
	struct ptw_event e = ev(PTW_EV_DEADLOCK, T3);
	e.span_id = 1;
	e.has_value = true;
	e.value = 2;
	ptw_spans_consume(s, &e);
	CHECK_EQ(d->n, 2);

	/* the document: both waits, the deadlock in the same form as --snapshot */
	struct ptw_report r = { 0 };
	r.mode = "launch";
	r.locks = true;
	r.spans = s;
	struct ptw_buf out = { 0 };
	ptw_report_json(&r, &out);
	CHECK(strstr(out.p, "\"kind\": \"wait\""));
	CHECK(strstr(out.p, "\"deadlocks\": ["));
	CHECK(strstr(out.p, "\"symbol\": \"lock_a\""));
	ptw_buf_free(&out);
}

/* Statistics: per object (waits, total, max, threads, sites) and per
 * thread, most time first. */
static void test_stats(void)
{
	setup();
	begin(T1, PTW_WAIT_MUTEX, MUTEX_A, T2, &site1, 0x7000);
	now += 10000;
	end(T1); /* 11 us */
	begin(T2, PTW_WAIT_MUTEX, MUTEX_A, T1, &site2, 0x8000);
	end(T2); /* 1 us */
	begin(T3, PTW_WAIT_MUTEX, MUTEX_B, T1, &site1, 0x9000);
	end(T3); /* 1 us */
	begin(T3, PTW_WAIT_MUTEX, MUTEX_A, 0, &site1, 0x9000); /* open */
	struct ptw_object_stats *st;
	size_t n = ptw_locks_object_stats(L(), &st);
	CHECK_EQ(n, 2);
	CHECK_EQ(st[0].object, MUTEX_A);
	CHECK_EQ(st[0].waits, 3);
	CHECK_EQ(st[0].completed, 2);
	CHECK_EQ(st[0].total_ns, 12000);
	CHECK_EQ(st[0].max_ns, 11000);
	CHECK_EQ(st[0].ntids, 3);
	CHECK_EQ(st[0].nsites, 2);
	CHECK(st[0].object_loc == &lock_a);
	CHECK_EQ(st[1].object, MUTEX_B);
	ptw_object_stats_free(st, n);
	struct ptw_thread_waits *tw;
	n = ptw_locks_thread_stats(L(), &tw);
	CHECK_EQ(n, 3);
	CHECK_EQ(tw[0].tid, T1);
	CHECK_EQ(tw[0].total_ns, 11000);
	CHECK_EQ(tw[1].tid, T2); /* a tie: by span */
	CHECK_EQ(tw[1].waits, 1);
	bool t3 = false;
	for (size_t i = 0; i < n; i++)
		if (tw[i].tid == T3) {
			t3 = true;
			CHECK_EQ(tw[i].waits, 2);
			CHECK_EQ(tw[i].completed, 1);
		}
	CHECK(t3);
	free(tw);
}

/* ---- the cycle search ---- */

static pid_t graph[16]; /* graph[tid]: whom tid waits for */

static pid_t owner_of(void *ctx, pid_t tid)
{
	(void)ctx;
	return tid > 0 && tid < 16 ? graph[tid] : 0;
}

static void test_cycle(void)
{
	pid_t c[8];
	memset(graph, 0, sizeof(graph));
	graph[1] = 2;
	graph[2] = 1;
	CHECK_EQ(ptw_wait_cycle(1, owner_of, NULL, c, 8), 2);
	CHECK_EQ(c[0], 1);
	CHECK_EQ(c[1], 2);
	/* three: 3 -> 4 -> 5 -> 3 */
	graph[3] = 4;
	graph[4] = 5;
	graph[5] = 3;
	CHECK_EQ(ptw_wait_cycle(4, owner_of, NULL, c, 8), 3);
	CHECK_EQ(c[0], 4);
	CHECK_EQ(c[2], 3);
	/* a chain into a cycle that does not hold the start: none of its */
	graph[6] = 3;
	CHECK_EQ(ptw_wait_cycle(6, owner_of, NULL, c, 8), 0);
	/* a chain that ends: no cycle */
	graph[7] = 8;
	graph[8] = 0;
	CHECK_EQ(ptw_wait_cycle(7, owner_of, NULL, c, 8), 0);
	/* waiting for oneself (a recursive lock taken twice) is no cycle here */
	graph[9] = 9;
	CHECK_EQ(ptw_wait_cycle(9, owner_of, NULL, c, 8), 0);
	/* longer than max: not found */
	CHECK_EQ(ptw_wait_cycle(3, owner_of, NULL, c, 2), 0);
	CHECK_EQ(ptw_wait_cycle(0, owner_of, NULL, c, 8), 0);
}

/* Streaming (--json-lines): ended waits leave the engine at each collect,
 * and the totals and statistics are those of an engine that keeps them. */
static void stats_stream(bool streaming, struct ptw_wait_totals *tt, struct ptw_object_stats **st,
			 size_t *nst, struct ptw_thread_waits **tw, size_t *ntw, size_t *held)
{
	setup();
	if (streaming)
		ptw_spans_set_streaming(s, NULL, NULL);
	for (int round = 0; round < 200; round++) {
		pid_t tid = round % 2 ? T1 : T2;
		begin(tid, PTW_WAIT_MUTEX, round % 3 ? MUTEX_A : MUTEX_B, tid == T1 ? T2 : T1,
		      round % 5 ? &site1 : &site2, 0x7000);
		now += 1000 * (uint64_t)(round % 7);
		end(tid);
	}
	begin(T3, PTW_WAIT_MUTEX, MUTEX_A, T1, &site1, 0x9000); /* open at the end */
	ptw_spans_collect(s);
	*held = ptw_locks_count(L());
	ptw_locks_totals(L(), tt);
	*nst = ptw_locks_object_stats(L(), st);
	*ntw = ptw_locks_thread_stats(L(), tw);
}

static void test_streaming(void)
{
	struct ptw_wait_totals a, b;
	struct ptw_object_stats *sa, *sb;
	struct ptw_thread_waits *ta, *tb;
	size_t nsa, nsb, nta, ntb, ha, hb;
	stats_stream(false, &a, &sa, &nsa, &ta, &nta, &ha);
	stats_stream(true, &b, &sb, &nsb, &tb, &ntb, &hb);
	CHECK_EQ(ha, 201);
	CHECK_EQ(hb, 1); /* the open one */
	CHECK_EQ(a.count, 201);
	CHECK_EQ(b.count, a.count);
	CHECK_EQ(b.completed, a.completed);
	CHECK_EQ(b.unmatched, a.unmatched);
	CHECK_EQ(b.total_ns, a.total_ns);
	CHECK_EQ(b.max_ns, a.max_ns);
	CHECK_EQ(nsb, nsa);
	for (size_t i = 0; i < nsa && i < nsb; i++) {
		CHECK_EQ(sb[i].object, sa[i].object);
		CHECK_EQ(sb[i].waits, sa[i].waits);
		CHECK_EQ(sb[i].total_ns, sa[i].total_ns);
		CHECK_EQ(sb[i].ntids, sa[i].ntids);
		CHECK_EQ(sb[i].nsites, sa[i].nsites);
	}
	CHECK_EQ(ntb, nta);
	for (size_t i = 0; i < nta && i < ntb; i++) {
		CHECK_EQ(tb[i].tid, ta[i].tid);
		CHECK_EQ(tb[i].waits, ta[i].waits);
		CHECK_EQ(tb[i].total_ns, ta[i].total_ns);
	}
	ptw_object_stats_free(sa, nsa);
	ptw_object_stats_free(sb, nsb);
	free(ta);
	free(tb);
}

int main(void)
{
	test_pairs();
	test_join_of_ended();
	test_ends();
	test_deadlock();
	test_stats();
	test_streaming();
	test_cycle();
	test_processes();
	ptw_spans_free(s);
	CHECK_DONE();
}
