/* SPDX-License-Identifier: MIT */
/*
 * The kernel backend's record conversion (src/kernel/convert.c) on
 * synthetic records, through the span engine: a created thread's whole
 * life, pthread_exit, cancellation, detach, joins, a raw clone, exit()'s
 * own __call_tls_dtors in the main thread, a thread listed at the attach
 * whose clone arrives afterwards, records of threads never seen, and the
 * process's end by exit_group and by the last thread's exit; -f: a fork
 * child's converter (its one thread begun at the fork, its events in its
 * process), a vfork child that begins at its exec, main's return told by
 * its caller's address; a thread started at its clone's return (no debug
 * file), struct pthread's undescribed members from their neighbours.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "convert.h"
#include "ptw_glibc.h"
#include "ptw_spans.h"
#include "ptw_symbols.h"

#define PID   100
#define PD(n) (0x7f0000001000ull * (n))

static struct ptw_location locs[8];
static size_t nlocs;

static const struct ptw_location *locate(void *ctx, uint64_t addr)
{
	(void)ctx;
	for (size_t i = 0; i < nlocs; i++)
		if (locs[i].addr == addr)
			return &locs[i];
	if (nlocs == PTW_ARRAY_SIZE(locs))
		return NULL;
	locs[nlocs].addr = addr;
	locs[nlocs].symbol = addr == 0x1000   ? "main"
			     : addr == 0x2000 ? "worker"
			     : addr == 0x6000 ? "clone"
					      : "site";
	return &locs[nlocs++];
}

static const struct ptw_location *call_site(void *ctx, uint64_t ret)
{
	return locate(ctx, ret - 5);
}

/* In this synthetic world main returns to 0x5000. */
static bool main_returns_to(void *ctx, uint64_t ret)
{
	(void)ctx;
	return ret == 0x5000;
}

/* How each tid's LWP left (PTW_EV_LWP_EXIT), by tid. */
static int how_of[1024];

static void sink(void *ctx, const struct ptw_event *ev)
{
	if (ev->kind == PTW_EV_LWP_EXIT && ev->tid >= 0 && ev->tid < 1024)
		how_of[ev->tid] = (int)ev->exit_how;
	ptw_spans_consume(ctx, ev);
}

static uint64_t clock_ns = 1000;

static struct ptwk_record rec(enum ptwk_kind kind, pid_t tid)
{
	struct ptwk_record r = { .kind = kind, .tid = (uint32_t)tid, .tgid = PID };
	r.ns = clock_ns += 1000;
	return r;
}

static void create(struct ptwk_conv *c, pid_t creator, pid_t child, uint64_t pd, uint32_t f)
{
	struct ptwk_record r = rec(PTWK_CREATE, creator);
	r.a = (uint64_t)child;
	r.b = pd;
	r.c = 0x2000;
	r.d = 0xa0 + (uint64_t)child;
	r.e = 0x3005;
	r.f = PTWK_F_PTHREAD | PTWK_F_SITE_KNOWN | PTWK_F_JOINID_KNOWN | f;
	ptwk_conv_record(c, &r);
}

static void simple(struct ptwk_conv *c, enum ptwk_kind kind, pid_t tid, uint64_t a)
{
	struct ptwk_record r = rec(kind, tid);
	r.a = a;
	ptwk_conv_record(c, &r);
}

static void death(struct ptwk_conv *c, pid_t tid, uint64_t pd, uint64_t result, bool unwinding)
{
	struct ptwk_record r = rec(PTWK_DEATH, tid);
	r.a = result;
	r.b = unwinding;
	r.c = pd;
	r.f = PTWK_F_RESULT_KNOWN | PTWK_F_UNWIND_KNOWN;
	/* (as glibc has it: PTHREAD_CANCELED's unwinding is a cancellation's) */
	if (unwinding && result == (uint64_t)-1)
		r.f |= PTWK_F_CANCELED;
	ptwk_conv_record(c, &r);
}

static void lwp_exit(struct ptwk_conv *c, pid_t tid, unsigned status, uint32_t f, unsigned group,
		     const char *comm)
{
	struct ptwk_record r = rec(PTWK_EXIT, tid);
	r.a = status;
	r.b = group;
	r.f = f;
	memcpy(r.comm, comm, strnlen(comm, sizeof(r.comm)));
	ptwk_conv_record(c, &r);
}

static const struct ptw_span *span_of(struct ptw_spans *s, pid_t tid)
{
	const struct ptw_span *found = NULL;
	for (size_t i = 0; i < ptw_spans_count(s); i++)
		if (ptw_spans_get(s, i)->tid == tid)
			found = ptw_spans_get(s, i);
	return found;
}

/* The converter's callbacks, into spans s. */
static struct ptwk_conv_ops full_ops(struct ptw_spans *s)
{
	return (struct ptwk_conv_ops){ .sink = sink,
				       .locate = locate,
				       .call_site = call_site,
				       .main_returns_to = main_returns_to,
				       .ctx = s };
}

/* A converter of process PID as at an attach, its main thread found
 * running; the spans it feeds (returned). */
static struct ptw_spans *attached(struct ptwk_conv *c)
{
	struct ptw_spans *s = ptw_spans_new();
	struct ptwk_conv_ops ops = full_ops(s);
	ptwk_conv_init(c, PID, &ops);
	ptwk_conv_preexisting(c, PID, PD(1), 0x1000, 0, "prog", clock_ns);
	return s;
}

static void test_lifecycles(void)
{
	struct ptwk_conv c;
	struct ptw_spans *s = attached(&c);
	ptwk_conv_preexisting(&c, 101, PD(2), 0x2000, 0, "old", clock_ns);
	CHECK(ptwk_conv_knows(&c, PID));

	/* 102: created, started, returned 0x2a, joined. */
	create(&c, PID, 102, PD(3), 0);
	simple(&c, PTWK_START, 102, PD(3));
	death(&c, 102, PD(3), 0x2a, false);
	simple(&c, PTWK_JOIN, PID, PD(3));
	lwp_exit(&c, 102, 0, 0, 0, "worker-2");
	simple(&c, PTWK_JOIN_RET, PID, 0);
	/* 103: pthread_exit(0x33). */
	create(&c, PID, 103, PD(4), 0);
	simple(&c, PTWK_START, 103, PD(4));
	simple(&c, PTWK_EXIT_CALL, 103, 0x33);
	death(&c, 103, PD(4), 0x33, true);
	lwp_exit(&c, 103, 0, 0, 0, "w3");
	/* 104: cancelled by main. */
	create(&c, PID, 104, PD(5), 0);
	simple(&c, PTWK_START, 104, PD(5));
	simple(&c, PTWK_CANCEL, PID, PD(5));
	death(&c, 104, PD(5), (uint64_t)-1, true);
	lwp_exit(&c, 104, 0, 0, 0, "w4");
	/* 105: detached at creation. */
	create(&c, PID, 105, PD(6), PTWK_F_DETACHED);
	simple(&c, PTWK_START, 105, PD(6));
	death(&c, 105, PD(6), 0x44, false);
	lwp_exit(&c, 105, 0, 0, 0, "w5");
	/* 106: detached later; a start with another pd is not its start. */
	create(&c, PID, 106, PD(7), 0);
	simple(&c, PTWK_START, 106, PD(8));
	simple(&c, PTWK_START, 106, PD(7));
	simple(&c, PTWK_DETACH, PID, PD(7));
	death(&c, 106, PD(7), 0x55, false);
	lwp_exit(&c, 106, 0, 0, 0, "w6");
	/* 107: a raw clone, exiting with 9. */
	struct ptwk_record raw = rec(PTWK_CREATE, PID);
	raw.a = 107;
	ptwk_conv_record(&c, &raw);
	lwp_exit(&c, 107, 9 << 8, 0, 0, "raw");
	/* 112: a raw clone by glibc's clone() (its ip in the wrapper): the
	 * function and argument it left on the child's stack; 113: the same
	 * words read, the syscall made elsewhere: nothing is made of them. */
	raw = rec(PTWK_CREATE, PID);
	raw.a = 112;
	raw.c = 0x2000;
	raw.d = 0xcd;
	raw.e = 0x6000;
	raw.f = PTWK_F_CLONE_READ;
	ptwk_conv_record(&c, &raw);
	lwp_exit(&c, 112, 0, 0, 0, "cl");
	raw.a = 113;
	raw.e = 0x7000;
	ptwk_conv_record(&c, &raw);
	lwp_exit(&c, 113, 0, 0, 0, "cl2");
	/* 109: its pthread_create came before the probes (a thread made while
	 * ptwatch attached): a clone's record, then start_thread with what its
	 * struct pthread says; a raw clone's start without them stays a clone. */
	struct ptwk_record late = rec(PTWK_CREATE, PID);
	late.a = 109;
	ptwk_conv_record(&c, &late);
	struct ptwk_record st = rec(PTWK_START, 109);
	st.a = PD(11);
	st.c = 0x2000;
	st.d = 0xab;
	st.f = PTWK_F_ROUTINE_KNOWN | PTWK_F_ARG_KNOWN;
	ptwk_conv_record(&c, &st);
	death(&c, 109, PD(11), 0x77, false);
	lwp_exit(&c, 109, 0, 0, 0, "late");
	simple(&c, PTWK_START, 107, PD(12)); /* (107 exited: nothing) */
	/* 110 and 111, listed at the attach: their pthread_exit and
	 * pthread_cancel calls came before the probes; the death says which
	 * (cancelhandling's CANCELED bit), a pthread_exit(-1) included. */
	ptwk_conv_preexisting(&c, 110, PD(13), 0x2000, 0, NULL, clock_ns);
	death(&c, 110, PD(13), 0x66, true);
	lwp_exit(&c, 110, 0, 0, 0, "w10");
	ptwk_conv_preexisting(&c, 111, PD(14), 0x2000, 0, NULL, clock_ns);
	death(&c, 111, PD(14), (uint64_t)-1, true);
	lwp_exit(&c, 111, 0, 0, 0, "w11");
	/* 108: listed at the attach, its clone arriving after: one span. */
	ptwk_conv_preexisting(&c, 108, PD(9), 0x2000, 0, NULL, clock_ns);
	create(&c, PID, 108, PD(9), 0);
	/* 114: listed at the attach from /proc alone (no pthread_t, no
	 * routine: its clone came after libthread_db's walk); its start,
	 * seen since, says both, and its death then counts. */
	ptwk_conv_preexisting(&c, 114, 0, 0, 0, NULL, clock_ns);
	struct ptwk_record st114 = rec(PTWK_START, 114);
	st114.a = PD(15);
	st114.c = 0x2000;
	st114.d = 0x42;
	st114.f = PTWK_F_ROUTINE_KNOWN | PTWK_F_ARG_KNOWN;
	ptwk_conv_record(&c, &st114);
	death(&c, 114, PD(15), 0x12, false);
	lwp_exit(&c, 114, 0, 0, 0, "w14");
	/* Records of threads never seen make nothing up. */
	simple(&c, PTWK_START, 999, PD(10));
	death(&c, 999, PD(10), 1, false);
	lwp_exit(&c, 999, 0, 0, 0, "ghost");
	/* exit() in main runs __call_tls_dtors too: not the main thread's end;
	 * an exit() called elsewhere is no return of main's, nor one in
	 * another thread; main returning 3 is. */
	death(&c, PID, PD(1), 0, false);
	struct ptwk_record ex = rec(PTWK_EXIT_FN, PID);
	ex.a = 5;
	ex.b = 0x4000;
	ptwk_conv_record(&c, &ex);
	ex = rec(PTWK_EXIT_FN, 101);
	ex.a = 6;
	ex.b = 0x5000;
	ptwk_conv_record(&c, &ex);
	ex = rec(PTWK_EXIT_FN, PID);
	ex.a = 0xffffffff00000003ull;
	ex.b = 0x5000;
	ptwk_conv_record(&c, &ex);
	/* exit_group(3): everyone goes down. */
	lwp_exit(&c, 101, 3 << 8, PTWK_F_GROUP_EXIT | PTWK_F_HOW_KNOWN, 3 << 8, "old");
	lwp_exit(&c, 108, 3 << 8, PTWK_F_GROUP_EXIT, 3 << 8, "w8");
	lwp_exit(&c, PID, 3 << 8,
		 PTWK_F_GROUP_EXIT | PTWK_F_GROUP_DEAD | PTWK_F_HOW_KNOWN | PTWK_F_EXIT_GROUP_CALL,
		 3 << 8, "prog");
	CHECK(c.ended);
	CHECK_EQ(c.exit_code, 3);
	CHECK_EQ(how_of[PID], PTW_EXIT_GROUP);
	CHECK_EQ(how_of[101], PTW_EXIT_KILLED);
	CHECK_EQ(how_of[108], PTW_EXIT_KILLED); /* registers unread: the group exit says */
	CHECK_EQ(how_of[102], PTW_EXIT_SELF);
	ptw_spans_finish(s);

	CHECK_EQ(ptw_spans_count(s), 15);
	const struct ptw_span *m = span_of(s, PID);
	CHECK(m && m->origin == PTW_ORIGIN_MAIN && m->pthread == PD(1));
	CHECK(m && m->status == PTW_STATUS_COMPLETED && m->value.set && m->value.v == 3);
	const struct ptw_span *sp = span_of(s, 102);
	CHECK(sp && sp->status == PTW_STATUS_COMPLETED && sp->value.set && sp->value.v == 0x2a);
	CHECK(sp && sp->joined && sp->joiner_tid == PID && sp->join_return_ns.set);
	CHECK(sp && sp->start_routine && !strcmp(sp->start_routine->symbol, "worker"));
	CHECK(sp && sp->create_site && sp->create_site->addr == 0x3000);
	CHECK(sp && sp->arg.set && sp->arg.v == 0xa0 + 102);
	CHECK(sp && sp->name && !strcmp(sp->name, "worker-2"));
	CHECK(sp && !sp->uncertain && sp->creator_tid == PID && sp->detached == 0);
	sp = span_of(s, 103);
	CHECK(sp && sp->status == PTW_STATUS_EXITED && sp->value.v == 0x33);
	sp = span_of(s, 104);
	CHECK(sp && sp->status == PTW_STATUS_CANCELLED && sp->cancel_by == PID && !sp->uncertain);
	sp = span_of(s, 105);
	CHECK(sp && sp->status == PTW_STATUS_COMPLETED && sp->detached == 1);
	sp = span_of(s, 106);
	CHECK(sp && sp->status == PTW_STATUS_COMPLETED && sp->detached == 1 && sp->value.v == 0x55);
	CHECK(sp && sp->start_ns.set);
	sp = span_of(s, 107);
	CHECK(sp && sp->origin == PTW_ORIGIN_CLONE && sp->status == PTW_STATUS_LWP_EXITED);
	sp = span_of(s, 112);
	CHECK(sp && sp->origin == PTW_ORIGIN_CLONE && sp->status == PTW_STATUS_LWP_EXITED);
	CHECK(sp && sp->start_routine && !strcmp(sp->start_routine->symbol, "worker"));
	CHECK(sp && sp->arg.set && sp->arg.v == 0xcd);
	sp = span_of(s, 113);
	CHECK(sp && sp->origin == PTW_ORIGIN_CLONE && !sp->start_routine && !sp->arg.set);
	sp = span_of(s, 109);
	CHECK(sp && sp->origin == PTW_ORIGIN_CLONE && sp->status == PTW_STATUS_COMPLETED);
	CHECK(sp && sp->start_routine && !strcmp(sp->start_routine->symbol, "worker"));
	CHECK(sp && sp->arg.set && sp->arg.v == 0xab && sp->value.set && sp->value.v == 0x77);
	sp = span_of(s, 110);
	CHECK(sp && sp->status == PTW_STATUS_EXITED && sp->method == PTW_METHOD_PTHREAD_EXIT);
	CHECK(sp && sp->value.set && sp->value.v == 0x66 && !sp->uncertain);
	sp = span_of(s, 111);
	CHECK(sp && sp->status == PTW_STATUS_CANCELLED && !sp->uncertain);
	sp = span_of(s, 108);
	CHECK(sp && sp->origin == PTW_ORIGIN_PREEXISTING && sp->method == PTW_METHOD_PROCESS_EXIT);
	sp = span_of(s, 114);
	CHECK(sp && sp->origin == PTW_ORIGIN_PREEXISTING && sp->pthread == PD(15));
	CHECK(sp && sp->start_routine && !strcmp(sp->start_routine->symbol, "worker"));
	CHECK(sp && sp->arg.set && sp->arg.v == 0x42);
	CHECK(sp && sp->status == PTW_STATUS_COMPLETED && sp->value.set && sp->value.v == 0x12);
	CHECK(span_of(s, 999) == NULL);
	ptwk_conv_free(&c);
	ptw_spans_free(s);
}

/* main called pthread_exit; the last worker's own exit ends the process
 * with its status (0). */
static void test_last_thread_exit(void)
{
	struct ptwk_conv c;
	struct ptw_spans *s = attached(&c);
	create(&c, PID, 102, PD(3), 0);
	simple(&c, PTWK_EXIT_CALL, PID, 0);
	lwp_exit(&c, PID, 0, 0, 0, "prog");
	simple(&c, PTWK_START, 102, PD(3));
	death(&c, 102, PD(3), 7, false);
	lwp_exit(&c, 102, 0, PTWK_F_GROUP_DEAD, 0, "w");
	CHECK(c.ended && c.exit_code == 0 && c.exit_signal == 0);
	ptw_spans_finish(s);
	const struct ptw_span *m = span_of(s, PID);
	CHECK(m && m->status == PTW_STATUS_EXITED);
	const struct ptw_span *sp = span_of(s, 102);
	CHECK(sp && sp->status == PTW_STATUS_COMPLETED && sp->value.v == 7);
	/* Nothing after the end. */
	uint64_t before = c.events;
	simple(&c, PTWK_START, 102, PD(3));
	CHECK_EQ(c.events, before);
	ptwk_conv_free(&c);
	ptw_spans_free(s);
}

/* A fatal signal (SIGSEGV with a core) takes the group down; the thread
 * that took it (101: its signal_deliver record) is the one it killed. */
static void test_killed(void)
{
	struct ptwk_conv c;
	struct ptw_spans *s = attached(&c);
	ptwk_conv_preexisting(&c, 101, PD(2), 0x2000, 0, "w1", clock_ns);
	simple(&c, PTWK_FATAL_SIGNAL, 101, 11);
	simple(&c, PTWK_FATAL_SIGNAL, 999, 11); /* (never seen: nothing) */
	lwp_exit(&c, 101, 11 | 0x80, PTWK_F_GROUP_EXIT, 11 | 0x80, "w1");
	lwp_exit(&c, PID, 11 | 0x80, PTWK_F_GROUP_EXIT | PTWK_F_GROUP_DEAD, 11 | 0x80, "prog");
	CHECK(c.ended && c.exit_signal == 11 && c.core_dumped);
	ptw_spans_finish(s);
	const struct ptw_span *m = span_of(s, PID);
	CHECK(m && m->status == PTW_STATUS_UNMATCHED && m->signal == 11);
	CHECK(m && m->method == PTW_METHOD_PROCESS_EXIT);
	const struct ptw_span *w = span_of(s, 101);
	CHECK(w && w->status == PTW_STATUS_UNMATCHED && w->method == PTW_METHOD_KILLED);
	CHECK(w && w->signal == 11);
	CHECK(!c.trap.seen); /* (no SIGTRAP) */
	ptwk_conv_free(&c);
	ptw_spans_free(s);

	/* SIGTRAP: where and what kind are kept for the warning (an int3:
	 * SI_KERNEL; the user ip is after it) */
	s = attached(&c);
	struct ptwk_record r = rec(PTWK_FATAL_SIGNAL, PID);
	r.a = SIGTRAP;
	r.b = 0x401235;
	r.c = (uint64_t)(int64_t)SI_KERNEL;
	r.f = PTWK_F_READ;
	ptwk_conv_record(&c, &r);
	CHECK(c.trap.seen && c.trap.int3 && c.trap.ip == 0x401235 && c.trap.tid == PID);
	r.c = (uint64_t)(int64_t)SI_TKILL; /* raise() */
	ptwk_conv_record(&c, &r);
	CHECK(c.trap.seen && !c.trap.int3);
	ptwk_conv_free(&c);
	ptw_spans_free(s);
}

/* A group exit whose last thread's exit record comes before another's
 * (each thread's tracepoint runs after it left the group: on another CPU
 * the last one's can come first): the other's exit, its name, are still
 * the process's, and the process ends after them (crash@kernel lost the
 * killed blocker's name one run in fifteen). With that record lost, the
 * process's end comes when it is gone. */
static void test_exits_out_of_order(void)
{
	struct ptw_spans *s = ptw_spans_new();
	struct ptwk_conv c;
	struct ptwk_conv_ops ops = { .sink = sink, .locate = locate, .ctx = s };
	for (int lose = 0; lose < 2; lose++) {
		ptwk_conv_init(&c, PID, &ops);
		ptwk_conv_preexisting(&c, PID, PD(1), 0x1000, 0, "prog", clock_ns);
		ptwk_conv_preexisting(&c, 101, PD(2), 0x2000, 0, NULL, clock_ns);
		lwp_exit(&c, PID, 11, PTWK_F_GROUP_EXIT | PTWK_F_GROUP_DEAD, 11, "prog");
		CHECK(!c.ended); /* (101's exit is still to come) */
		if (!lose) {
			lwp_exit(&c, 101, 11, PTWK_F_GROUP_EXIT, 11, "blocker");
		} else {
			CHECK(ptwk_conv_end_pending(&c)); /* gone: nothing more comes */
			CHECK(!ptwk_conv_end_pending(&c));
		}
		CHECK(c.ended && c.exit_signal == 11);
		ptw_spans_finish(s);
		const struct ptw_span *w = span_of(s, 101);
		/* (taken down by the process's end: not the one the signal hit) */
		CHECK(w && w->status == PTW_STATUS_UNMATCHED && w->method == PTW_METHOD_PROCESS_EXIT);
		if (!lose)
			CHECK(w && w->name && !strcmp(w->name, "blocker"));
		const struct ptw_span *m = span_of(s, PID);
		CHECK(m && m->method == PTW_METHOD_PROCESS_EXIT && m->signal == 11);
		ptwk_conv_free(&c);
		ptw_spans_free(s);
		s = ptw_spans_new();
		ops.ctx = s;
	}
	ptw_spans_free(s);
}

/* A launch: the held fork's exec is the start (an image, no exec event),
 * then main() and its return. */
static void test_launch(void)
{
	struct ptw_spans *s = ptw_spans_new();
	struct ptwk_conv c;
	struct ptwk_conv_ops ops = full_ops(s);
	ptwk_conv_init(&c, PID, &ops);
	c.launched = true;
	simple(&c, PTWK_EXEC, PID, PID);
	struct ptwk_record m = rec(PTWK_MAIN, PID);
	m.a = 0x1000;
	m.b = PD(1);
	ptwk_conv_record(&c, &m);
	ptwk_conv_record(&c, &m); /* once */
	create(&c, PID, 102, PD(3), 0);
	simple(&c, PTWK_START, 102, PD(3));
	death(&c, 102, PD(3), 0x2a, false);
	lwp_exit(&c, 102, 0, 0, 0, "w");
	struct ptwk_record ex = rec(PTWK_EXIT_FN, PID);
	ex.a = 0;
	ex.b = 0x5000;
	ptwk_conv_record(&c, &ex);
	lwp_exit(&c, PID, 0, PTWK_F_GROUP_EXIT | PTWK_F_GROUP_DEAD, 0, "prog");
	ptw_spans_finish(s);
	CHECK_EQ(ptw_spans_count(s), 2);
	const struct ptw_span *sp = span_of(s, PID);
	CHECK(sp && sp->origin == PTW_ORIGIN_MAIN && sp->start_ns.set && sp->pthread == PD(1));
	CHECK(sp && sp->start_routine && !strcmp(sp->start_routine->symbol, "main"));
	CHECK(sp && sp->status == PTW_STATUS_COMPLETED && sp->value.set && sp->value.v == 0);
	sp = span_of(s, 102);
	CHECK(sp && sp->creator_span == 1 && sp->depth == 1);
	CHECK(!c.launched);
	ptwk_conv_free(&c);
	ptw_spans_free(s);
}

/* -f: the target (process 0) forks 200 (process 1) from its main thread,
 * which makes a thread and returns from main; then vforks 300 (process 2),
 * which execs. One span engine, three converters. */
static void test_forked(void)
{
	struct ptw_spans *s = ptw_spans_new();
	struct ptwk_conv_ops ops = full_ops(s);
	struct ptwk_conv root, child, vchild;
	ptwk_conv_init(&root, PID, &ops);
	ptwk_conv_preexisting(&root, PID, PD(1), 0x1000, 0, "prog", clock_ns);
	ptwk_conv_init(&child, 200, &ops);
	child.process = 1;
	child.main_addr = 0x1000;
	child.main_caller = 0x4f00; /* main returns to 0x5000, inside it */
	child.main_caller_size = 0x200;
	uint64_t fork_ns = clock_ns += 1000;
	ptwk_conv_forked(&child, PD(1), 0, "prog", fork_ns);
	struct ptwk_record r = rec(PTWK_CREATE, 200);
	r.tgid = 200;
	r.a = 201;
	r.b = PD(4);
	r.c = 0x2000;
	r.d = 0xa1;
	r.e = 0x3005;
	r.f = PTWK_F_PTHREAD | PTWK_F_SITE_KNOWN | PTWK_F_JOINID_KNOWN;
	ptwk_conv_record(&child, &r);
	simple(&child, PTWK_START, 201, PD(4));
	death(&child, 201, PD(4), 0x33, false);
	lwp_exit(&child, 201, 0, 0, 0, "w");
	struct ptwk_record ex = rec(PTWK_EXIT_FN, 200);
	ex.a = 9;
	ex.b = 0x7000; /* not from main's caller: an exit() call, not a return */
	uint64_t before = child.events;
	ptwk_conv_record(&child, &ex);
	CHECK_EQ(child.events, before);
	ex.b = 0x5000;
	ptwk_conv_record(&child, &ex);
	CHECK_EQ(child.events, before + 1);
	lwp_exit(&child, 200, 9 << 8,
		 PTWK_F_GROUP_EXIT | PTWK_F_GROUP_DEAD | PTWK_F_HOW_KNOWN | PTWK_F_EXIT_GROUP_CALL,
		 9 << 8, "prog");
	CHECK(child.ended && child.exit_code == 9);
	ptwk_conv_init(&vchild, 300, &ops);
	vchild.process = 2;
	vchild.launched = true; /* it runs in our memory until its exec */
	simple(&vchild, PTWK_EXEC, 300, 300);
	lwp_exit(&vchild, 300, 0, PTWK_F_GROUP_EXIT | PTWK_F_GROUP_DEAD, 0, "true");
	lwp_exit(&root, PID, 0, PTWK_F_GROUP_EXIT | PTWK_F_GROUP_DEAD, 0, "prog");
	ptw_spans_finish(s);
	CHECK_EQ(ptw_spans_count(s), 4);
	const struct ptw_span *sp = span_of(s, 200);
	CHECK(sp && sp->origin == PTW_ORIGIN_MAIN && sp->pid == 200 && sp->process == 1);
	CHECK(sp && sp->start_ns.set && sp->start_ns.v == fork_ns && sp->pthread == PD(1));
	CHECK(sp && sp->start_routine && !strcmp(sp->start_routine->symbol, "main"));
	CHECK(sp && sp->status == PTW_STATUS_COMPLETED && sp->value.set && sp->value.v == 9);
	sp = span_of(s, 201);
	CHECK(sp && sp->origin == PTW_ORIGIN_CREATED && sp->pid == 200 && sp->process == 1);
	CHECK(sp && sp->creator_tid == 200 && sp->status == PTW_STATUS_COMPLETED &&
	      sp->value.v == 0x33);
	sp = span_of(s, 300);
	CHECK(sp && sp->origin == PTW_ORIGIN_MAIN && sp->pid == 300 && sp->process == 2);
	sp = span_of(s, PID);
	CHECK(sp && sp->process == 0 && sp->pid == PID);
	ptwk_conv_free(&root);
	ptwk_conv_free(&child);
	ptwk_conv_free(&vchild);
	ptw_spans_free(s);
}

/* No debug file: a thread starts at its clone's return (PTWK_THREAD_BEGIN,
 * the raw sys_exit tracepoint of its clone3, in the new thread), paired with its
 * creation by tid and pthread_t; start_thread as well (both probes on)
 * makes one start; a begin with another pd, or of a thread never created,
 * is nothing; a thread whose pthread_create the probes missed (a clone's
 * record) is a pthread once its begin says what its struct pthread holds. */
static void test_thread_begin(void)
{
	struct ptwk_conv c;
	struct ptw_spans *s = attached(&c);
	create(&c, PID, 120, PD(20), 0);
	struct ptwk_record b = rec(PTWK_THREAD_BEGIN, 120);
	b.a = PD(21); /* not its struct pthread: not its start */
	b.c = 0x2000;
	b.d = 0xa0 + 120;
	b.f = PTWK_F_ROUTINE_KNOWN | PTWK_F_ARG_KNOWN;
	uint64_t before = c.events;
	ptwk_conv_record(&c, &b);
	CHECK_EQ(c.events, before);
	b.a = PD(20);
	b.ns = clock_ns += 1000;
	uint64_t start_ns = b.ns;
	ptwk_conv_record(&c, &b);
	CHECK_EQ(c.events, before + 1);
	simple(&c, PTWK_START, 120, PD(20)); /* start_thread too: no second start */
	CHECK_EQ(c.events, before + 1);
	death(&c, 120, PD(20), 0x2a, false);
	lwp_exit(&c, 120, 0, 0, 0, "w120");
	/* 121: its pthread_create before the probes: a clone, then its begin */
	struct ptwk_record late = rec(PTWK_CREATE, PID);
	late.a = 121;
	ptwk_conv_record(&c, &late);
	b = rec(PTWK_THREAD_BEGIN, 121);
	b.a = PD(22);
	b.c = 0x2000;
	b.d = 0xcd;
	b.f = PTWK_F_ROUTINE_KNOWN | PTWK_F_ARG_KNOWN;
	ptwk_conv_record(&c, &b);
	death(&c, 121, PD(22), 0x66, false);
	lwp_exit(&c, 121, 0, 0, 0, "w121");
	/* never created: nothing */
	b = rec(PTWK_THREAD_BEGIN, 998);
	b.a = PD(23);
	b.f = PTWK_F_ROUTINE_KNOWN;
	before = c.events;
	ptwk_conv_record(&c, &b);
	CHECK_EQ(c.events, before);
	lwp_exit(&c, PID, 0,
		 PTWK_F_GROUP_EXIT | PTWK_F_GROUP_DEAD | PTWK_F_HOW_KNOWN | PTWK_F_EXIT_GROUP_CALL,
		 0, "prog");
	ptw_spans_finish(s);
	const struct ptw_span *sp = span_of(s, 120);
	CHECK(sp && sp->start_ns.set && sp->start_ns.v == start_ns);
	CHECK(sp && sp->start_routine && !strcmp(sp->start_routine->symbol, "worker"));
	CHECK(sp && sp->arg.set && sp->arg.v == 0xa0 + 120);
	CHECK(sp && sp->status == PTW_STATUS_COMPLETED && sp->value.set && sp->value.v == 0x2a);
	sp = span_of(s, 121);
	CHECK(sp && sp->start_ns.set && sp->status == PTW_STATUS_COMPLETED);
	CHECK(sp && sp->start_routine && !strcmp(sp->start_routine->symbol, "worker"));
	CHECK(sp && sp->arg.set && sp->arg.v == 0xcd && sp->value.v == 0x66);
	CHECK(span_of(s, 998) == NULL);
	ptwk_conv_free(&c);
	ptw_spans_free(s);
}

/*
 * -f, a child's first moments before its own links (PTWK_F_GAP): a
 * creation read from the clone and the struct pthread (no call site), its
 * start at the clone's return, its end from the exit tracepoint (value, no
 * unwinding: unmatched, death_unclassified), a cancellation's (the
 * canceled bit); counted, but not for a process whose image the probes
 * cannot see (said apart). An exec before the links, main() never seen.
 */
static void test_gap(void)
{
	struct ptwk_conv c;
	struct ptw_spans *s = attached(&c);
	for (pid_t t = 130; t <= 132; t++) {
		struct ptwk_record r = rec(PTWK_CREATE, PID);
		r.a = (uint64_t)t;
		r.b = PD(30 + t);
		r.c = 0x2000;
		r.d = 0xa0 + (uint64_t)t;
		r.f = PTWK_F_PTHREAD | PTWK_F_GAP;
		ptwk_conv_record(&c, &r);
		struct ptwk_record b = rec(PTWK_THREAD_BEGIN, t);
		b.a = PD(30 + t);
		b.c = 0x2000;
		b.d = 0xa0 + (uint64_t)t;
		b.f = PTWK_F_ROUTINE_KNOWN | PTWK_F_ARG_KNOWN | PTWK_F_GAP;
		ptwk_conv_record(&c, &b);
	}
	struct ptwk_record d = rec(PTWK_DEATH, 130); /* returned or pthread_exit: unknown */
	d.a = 0x77;
	d.c = PD(160);
	d.f = PTWK_F_RESULT_KNOWN | PTWK_F_GAP;
	ptwk_conv_record(&c, &d);
	lwp_exit(&c, 130, 0, PTWK_F_HOW_KNOWN | PTWK_F_EXIT_CALL, 0, "w130");
	d = rec(PTWK_DEATH, 131); /* cancelled */
	d.a = (uint64_t)-1;
	d.b = 1;
	d.c = PD(161);
	d.f = PTWK_F_RESULT_KNOWN | PTWK_F_UNWIND_KNOWN | PTWK_F_CANCELED | PTWK_F_GAP;
	c.probes_in_ns = clock_ns + 500; /* (its links came after its creation) */
	ptwk_conv_record(&c, &d);
	lwp_exit(&c, 131, 0, PTWK_F_HOW_KNOWN | PTWK_F_EXIT_CALL, 0, "w131");
	death(&c, 132, PD(162), 0x99, false); /* after the links: its probe's */
	lwp_exit(&c, 132, 0, PTWK_F_HOW_KNOWN | PTWK_F_EXIT_CALL, 0, "w132");
	CHECK_EQ(c.gap_created, 3u);
	CHECK_EQ(c.gap_ended, 2u);
	/* an exec before the links: main() not seen until its MAIN comes */
	struct ptwk_record x = rec(PTWK_EXEC, PID);
	x.a = PID;
	c.probes_in_ns = clock_ns + 500;
	ptwk_conv_record(&c, &x);
	CHECK(c.exec_gap);
	/* a blind image: its tracepoint records are not the links' gap */
	c.probes_blind = true;
	struct ptwk_record r = rec(PTWK_CREATE, PID);
	r.a = 133;
	r.b = PD(163);
	r.c = 0x2000;
	r.f = PTWK_F_PTHREAD | PTWK_F_GAP;
	ptwk_conv_record(&c, &r);
	CHECK_EQ(c.gap_created, 3u);
	lwp_exit(&c, PID, 0,
		 PTWK_F_GROUP_EXIT | PTWK_F_GROUP_DEAD | PTWK_F_HOW_KNOWN | PTWK_F_EXIT_GROUP_CALL,
		 0, "prog");
	ptw_spans_finish(s);
	const struct ptw_span *sp = span_of(s, 130);
	CHECK(sp && sp->origin == PTW_ORIGIN_CREATED && !sp->create_site && sp->start_ns.set);
	CHECK(sp && sp->start_routine && !strcmp(sp->start_routine->symbol, "worker"));
	CHECK(sp && sp->status == PTW_STATUS_UNMATCHED && sp->reason &&
	      !strcmp(sp->reason, "death_unclassified") && sp->value.set && sp->value.v == 0x77);
	sp = span_of(s, 131);
	CHECK(sp && sp->status == PTW_STATUS_CANCELLED);
	sp = span_of(s, 132);
	CHECK(sp && sp->status == PTW_STATUS_COMPLETED && sp->value.v == 0x99);
	ptwk_conv_free(&c);
	ptw_spans_free(s);
}

/* Debian 12's glibc 2.36 (libc6-dbg's DWARF: joinid 1568, result 1576,
 * arg 1600), as libthread_db's descriptors describe its neighbours. */
static const struct ptw_glibc_tdb_descs GLIBC_236 = {
	.report_events = { true, 8, 1, 1553 },
	.sched_priority = { true, 32, 1, 1584 },
	.schedpolicy = { true, 32, 1, 1588 },
	.start_routine = { true, 64, 1, 1592 },
	.eventbuf = { true, 192, 1, 1608 },
	.sizeof_pthread = 2368,
};

static void test_layout_derive(void)
{
	struct ptw_pthread_layout l = { 0 };
	unsigned derived;
	char why[96];
	CHECK_EQ(ptw_glibc_layout_derive(&GLIBC_236, &l, &derived, why, sizeof(why)), 0);
	CHECK(l.have_arg && l.arg == 1600 && l.have_result && l.result == 1576);
	CHECK(l.have_joinid && l.joinid == 1568 && derived == 7 && !why[0]);
	/* what the debug file gave stays as it is */
	struct ptw_pthread_layout k = {
		.have_result = true, .result = 1576, .have_arg = true, .arg = 1600
	};
	CHECK_EQ(ptw_glibc_layout_derive(&GLIBC_236, &k, &derived, why, sizeof(why)), 0);
	CHECK(derived == 4 && k.joinid == 1568);
	/* refusals: a neighbour not where glibc puts it leaves the member unknown */
	struct ptw_glibc_tdb_descs d = GLIBC_236;
	d.eventbuf.offset = 1616; /* something more between start_routine and eventbuf */
	l = (struct ptw_pthread_layout){ 0 };
	CHECK_EQ(ptw_glibc_layout_derive(&d, &l, &derived, why, sizeof(why)), 1);
	CHECK(!l.have_arg && l.have_result && derived == 6 && why[0]);
	d = GLIBC_236;
	d.schedpolicy.offset = 1592; /* a gap after schedparam */
	d.start_routine.offset = 1596;
	l = (struct ptw_pthread_layout){ 0 };
	CHECK_EQ(ptw_glibc_layout_derive(&d, &l, &derived, why, sizeof(why)), 3);
	CHECK(!l.have_arg && !l.have_result && !l.have_joinid && derived == 0);
	d = GLIBC_236;
	d.sched_priority.offset = 1580; /* not 8-aligned: padding could hide */
	d.schedpolicy.offset = 1584;
	d.start_routine.offset = 1588;
	d.eventbuf.offset = 1604;
	l = (struct ptw_pthread_layout){ 0 };
	CHECK_EQ(ptw_glibc_layout_derive(&d, &l, &derived, why, sizeof(why)), 3);
	CHECK(!l.have_result && !l.have_arg); /* start_routine misaligned too */
	d = GLIBC_236;
	d.report_events.offset = 1570; /* where joinid would be */
	l = (struct ptw_pthread_layout){ 0 };
	CHECK_EQ(ptw_glibc_layout_derive(&d, &l, &derived, why, sizeof(why)), 2);
	CHECK(!l.have_result && !l.have_joinid && l.have_arg);
	d = GLIBC_236;
	d.sched_priority.bits = 64; /* another type */
	l = (struct ptw_pthread_layout){ 0 };
	CHECK_EQ(ptw_glibc_layout_derive(&d, &l, &derived, why, sizeof(why)), 2);
	d = GLIBC_236;
	d.eventbuf.known = false;
	d.report_events.known = false;
	l = (struct ptw_pthread_layout){ 0 };
	CHECK_EQ(ptw_glibc_layout_derive(&d, &l, &derived, why, sizeof(why)), 3);
	d = GLIBC_236;
	d.sizeof_pthread = 1600; /* arg past the end */
	l = (struct ptw_pthread_layout){ 0 };
	CHECK_EQ(ptw_glibc_layout_derive(&d, &l, &derived, why, sizeof(why)), 1);
	CHECK(!l.have_arg && l.have_result);
}

/* No libc symbol table: the MAIN probe is on __libc_start_main and main's
 * caller lies main_caller_delta from it; exit() from inside that function
 * is main's return, from anywhere else an exit() call. */
static void test_main_caller_delta(void)
{
	struct ptw_spans *s = ptw_spans_new();
	struct ptwk_conv c;
	struct ptwk_conv_ops ops = { .sink = sink, .locate = locate, .ctx = s };
	ptwk_conv_init(&c, PID, &ops);
	c.launched = true;
	simple(&c, PTWK_EXEC, PID, PID);
	c.main_caller_delta = -176;
	c.main_caller_size = 176;
	struct ptwk_record m = rec(PTWK_MAIN, PID);
	m.a = 0x1000;
	m.b = PD(1);
	m.c = 0x27280; /* __libc_start_main */
	ptwk_conv_record(&c, &m);
	struct ptwk_record ex = rec(PTWK_EXIT_FN, PID);
	ex.a = 4;
	ex.b = 0x27280 + 0x10; /* in __libc_start_main itself: not main's caller */
	uint64_t before = c.events;
	ptwk_conv_record(&c, &ex);
	CHECK_EQ(c.events, before);
	ex.b = 0x271d0 - 1;
	ptwk_conv_record(&c, &ex);
	CHECK_EQ(c.events, before);
	ex.b = 0x27251; /* after __libc_start_call_main's call of exit */
	ptwk_conv_record(&c, &ex);
	CHECK_EQ(c.events, before + 1);
	lwp_exit(&c, PID, 4 << 8,
		 PTWK_F_GROUP_EXIT | PTWK_F_GROUP_DEAD | PTWK_F_HOW_KNOWN | PTWK_F_EXIT_GROUP_CALL,
		 4 << 8, "prog");
	ptw_spans_finish(s);
	const struct ptw_span *sp = span_of(s, PID);
	CHECK(sp && sp->status == PTW_STATUS_COMPLETED && sp->value.set && sp->value.v == 4);
	ptwk_conv_free(&c);
	ptw_spans_free(s);
}

int main(void)
{
	test_lifecycles();
	test_last_thread_exit();
	test_killed();
	test_exits_out_of_order();
	test_launch();
	test_forked();
	test_thread_begin();
	test_gap();
	test_layout_derive();
	test_main_caller_delta();
	CHECK_DONE();
}
