/* SPDX-License-Identifier: MIT */
/* Frame spans (--trace) on synthetic entry/return streams (the pairing rules of docs/design.md, "Behaviour"). */
#include <stdlib.h>

#include "check.h"
#include "ptw_frames.h"
#include "ptw_spans.h"
#include "ptw_symbols.h"
#include "ptw_timeouts.h"

#define MAIN 100
#define T1 101
#define T2 102
#define PT1 0x7f0000001000ull
#define PT2 0x7f0000002000ull

static const struct ptw_location fa = { .addr = 0x401000, .symbol = "a" };
static const struct ptw_location fb = { .addr = 0x401100, .symbol = "b" };
static const struct ptw_location fc = { .addr = 0x401200, .symbol = "c" };
static const struct ptw_location worker = { .addr = 0x401300, .symbol = "worker" };

static struct ptw_spans *s;
static uint64_t now;

static struct ptw_event ev(enum ptw_event_kind kind, pid_t tid)
{
	return ptw_event_init(kind, now += 1000, tid);
}

static const struct ptw_frame *feed(struct ptw_event e)
{
	ptw_spans_consume(s, &e);
	return ptw_spans_last_frame(s);
}

/* A call of fn at stack pointer sp (its return address ret at [sp]). */
static const struct ptw_frame *call(pid_t tid, const struct ptw_location *fn, uint64_t sp,
				    uint64_t ret)
{
	struct ptw_event e = ev(PTW_EV_FRAME_ENTRY, tid);
	e.routine = fn;
	e.sp = sp;
	e.ret_addr = ret;
	return feed(e);
}

/* A return to ret: the stack pointer after the ret is sp. */
static const struct ptw_frame *ret_to(pid_t tid, uint64_t ret, uint64_t sp)
{
	struct ptw_event e = ev(PTW_EV_FRAME_RETURN, tid);
	e.ret_addr = ret;
	e.sp = sp;
	e.has_value = true;
	e.value = 7;
	return feed(e);
}

static const struct ptw_frame *frame(uint32_t id)
{
	return ptw_frames_get(ptw_spans_frames(s), id - 1);
}

static void setup(void)
{
	ptw_spans_free(s);
	s = ptw_spans_new();
	now = 0;
	struct ptw_event e = ev(PTW_EV_IMAGE, MAIN);
	feed(e);
	e = ev(PTW_EV_MAIN_START, MAIN);
	feed(e);
	for (pid_t tid = T1; tid <= T2; tid++) {
		e = ev(PTW_EV_THREAD_CREATE, MAIN);
		e.other_tid = tid;
		e.pthread = tid == T1 ? PT1 : PT2;
		e.routine = &worker;
		feed(e);
		e = ev(PTW_EV_THREAD_START, tid);
		e.routine = &worker;
		feed(e);
	}
}

/* Recursion in two threads at once, interleaved: every call its own span,
 * exact depths and parents. */
static void test_recursion(void)
{
	setup();
	uint64_t base[2] = { 0x7000000, 0x8000000 };
	pid_t tids[2] = { T1, T2 };
	/* a(3) -> a(2) -> a(1), both threads interleaved event by event */
	for (int level = 0; level < 3; level++)
		for (int t = 0; t < 2; t++)
			call(tids[t], &fa, base[t] - 0x40 * (uint64_t)level, level ? 0x401050 : 0x401f00);
	for (int level = 2; level >= 0; level--)
		for (int t = 0; t < 2; t++) {
			const struct ptw_frame *fr = ret_to(tids[t], level ? 0x401050 : 0x401f00,
							    base[t] - 0x40 * (uint64_t)level + 8);
			CHECK(fr != NULL);
			if (fr) {
				CHECK_EQ(fr->depth, (unsigned)level + 1);
				CHECK_EQ(fr->tid, tids[t]);
				CHECK_EQ(fr->status, PTW_FRAME_COMPLETED);
				CHECK_EQ(fr->value, 7);
			}
		}
	const struct ptw_frames *f = ptw_spans_frames(s);
	CHECK_EQ(ptw_frames_count(f), 6);
	for (size_t i = 0; i < 6; i++) {
		const struct ptw_frame *fr = ptw_frames_get(f, i);
		CHECK_EQ(fr->status, PTW_FRAME_COMPLETED);
		CHECK_EQ(fr->thread_span, fr->tid == T1 ? 2 : 3);
		/* the parent is the previous call of the same thread */
		CHECK_EQ(fr->parent, fr->depth == 1 ? 0 : fr->id - 2);
	}
	struct ptw_function_stats *st;
	size_t n = ptw_frames_stats(f, &st);
	CHECK_EQ(n, 1);
	CHECK_EQ(st[0].calls, 6);
	CHECK_EQ(st[0].completed, 6);
	CHECK(st[0].self_ns < st[0].total_ns);
	CHECK(st[0].min_ns <= st[0].p50_ns && st[0].p50_ns <= st[0].max_ns);
	free(st);
}

/* -p: a(2) -> b under way at the attach (entries not seen), then a call of
 * c from b seen: all three nest, the two under way return with no
 * duration and are out of the times; c's time is not b's child time
 * either way, since b has none. */
static void test_before_attach(void)
{
	setup();
	uint64_t at = now;
	struct ptw_event e = ev(PTW_EV_FRAME_ENTRY, T1);
	e.routine = &fa;
	e.sp = 0x7000000;
	e.ret_addr = 0x401f00;
	e.before_attach = true;
	e.ns = at;
	const struct ptw_frame *a = feed(e);
	e.routine = &fb;
	e.sp = 0x7000000 - 0x40;
	e.ret_addr = 0x401050;
	const struct ptw_frame *b = feed(e);
	CHECK(a && b && a->entry_unknown && b->entry_unknown);
	CHECK(a && a->entry_ns == at && a->depth == 1);
	CHECK(b && b->parent == 1 && b->depth == 2);
	const struct ptw_frame *c = call(T1, &fc, 0x7000000 - 0x80, 0x401150);
	CHECK(c && !c->entry_unknown && c->parent == 2 && c->depth == 3);
	CHECK(ret_to(T1, 0x401150, 0x7000000 - 0x80 + 8) == c);
	CHECK(ret_to(T1, 0x401050, 0x7000000 - 0x40 + 8) == b);
	CHECK(ret_to(T1, 0x401f00, 0x7000000 + 8) == a);
	CHECK(a && b && a->status == PTW_FRAME_COMPLETED && b->status == PTW_FRAME_COMPLETED);
	CHECK_EQ(a ? a->child_ns : 1, 0);
	struct ptw_function_stats *st;
	size_t n = ptw_frames_stats(ptw_spans_frames(s), &st);
	CHECK_EQ(n, 3);
	for (size_t i = 0; i < n; i++) {
		bool is_c = st[i].function == &fc;
		CHECK_EQ(st[i].calls, 1);
		CHECK_EQ(st[i].completed, 1);
		CHECK_EQ(st[i].timed, is_c ? 1 : 0);
		CHECK_EQ(st[i].total_ns, is_c ? 1000 : 0);
	}
	free(st);
}

/* longjmp out of b and c, back into a, which returns. */
static void test_longjmp(void)
{
	setup();
	call(T1, &fa, 0x7000, 0x401f00);
	call(T1, &fb, 0x6f00, 0x401010);
	call(T1, &fc, 0x6e00, 0x401110);
	feed(ev(PTW_EV_LONGJMP, T1));
	const struct ptw_frame *fr = ret_to(T1, 0x401f00, 0x7008); /* a returns */
	CHECK(fr && fr->id == 1 && fr->status == PTW_FRAME_COMPLETED);
	CHECK_EQ(frame(2)->status, PTW_FRAME_UNMATCHED);
	CHECK_STR(frame(2)->reason, "longjmp");
	CHECK_STR(frame(3)->reason, "longjmp");
	CHECK(frame(3)->has_left && !frame(3)->has_return);

	/* Without seeing longjmp: a later entry at a shallower sp. */
	setup();
	call(T1, &fa, 0x7000, 0x401f00);
	call(T1, &fb, 0x6f00, 0x401010);
	call(T1, &fc, 0x6e00, 0x401110);
	call(T1, &fb, 0x6f80, 0x401020); /* back in a, a new call */
	CHECK_STR(frame(2)->reason, "longjmp");
	CHECK_STR(frame(3)->reason, "longjmp");
	CHECK_EQ(frame(1)->status, PTW_FRAME_OPEN);
	CHECK_EQ(frame(4)->parent, 1);
	CHECK_EQ(frame(4)->depth, 2);

	/* longjmp with its landing point known: the code after b's call,
	 * reached again by the jump, is no return of b. */
	setup();
	call(T1, &fa, 0x7000, 0x401f00);
	call(T1, &fb, 0x6f00, 0x401010);
	call(T1, &fc, 0x6e00, 0x401110);
	struct ptw_event e = ev(PTW_EV_LONGJMP, T1);
	e.sp = 0x6f08 + 0x40; /* in a's frame, above b's slot */
	feed(e);
	CHECK_STR(frame(2)->reason, "longjmp");
	CHECK_STR(frame(3)->reason, "longjmp");
	CHECK(ret_to(T1, 0x401010, 0x6f08) == NULL);
	CHECK_EQ(frame(1)->status, PTW_FRAME_OPEN);
	ret_to(T1, 0x401f00, 0x7008);
	CHECK_EQ(frame(1)->status, PTW_FRAME_COMPLETED);
}

/* A catch that lands where a call of a frame open at the throw would
 * have returned (gcc's landing pad of a call that only throws is its
 * return address): the tracer's return breakpoint there fires, and it is
 * no return. A frame entered after the throw (a destructor's) returns. */
static void test_exception_lands_at_return(void)
{
	setup();
	call(T1, &fa, 0x7000, 0x401f00);
	call(T1, &fb, 0x6f00, 0x401010);
	feed(ev(PTW_EV_THROW, T1));
	call(T1, &fc, 0x6e00, 0x401110); /* a destructor, while unwinding */
	ret_to(T1, 0x401110, 0x6e08);
	CHECK_EQ(frame(3)->status, PTW_FRAME_COMPLETED);
	CHECK(ret_to(T1, 0x401010, 0x6f08) == NULL); /* the landing */
	CHECK_EQ(frame(2)->status, PTW_FRAME_UNMATCHED);
	CHECK_STR(frame(2)->reason, "exception");
	CHECK(!frame(2)->has_value);
	struct ptw_event e = ev(PTW_EV_CATCH, T1);
	e.sp = 0x6f08; /* __cxa_begin_catch called by a */
	feed(e);
	ret_to(T1, 0x401f00, 0x7008);
	CHECK_EQ(frame(1)->status, PTW_FRAME_COMPLETED);
}

/* A C++ exception raised in c, caught in a. */
static void test_exception(void)
{
	setup();
	call(T1, &fa, 0x7000, 0x401f00);
	call(T1, &fb, 0x6f00, 0x401010);
	call(T1, &fc, 0x6e00, 0x401110);
	feed(ev(PTW_EV_THROW, T1));
	/* a destructor traced, run by a cleanup in b's frame while unwinding */
	call(T1, &fa, 0x6ec0, 0x401120);
	CHECK_STR(frame(3)->reason, "exception");
	ret_to(T1, 0x401120, 0x6ec8);
	CHECK_EQ(frame(4)->status, PTW_FRAME_COMPLETED);
	struct ptw_event e = ev(PTW_EV_CATCH, T1);
	e.sp = 0x6fc0; /* in a's frame */
	feed(e);
	CHECK_STR(frame(2)->reason, "exception");
	CHECK_EQ(frame(1)->status, PTW_FRAME_OPEN);
	ret_to(T1, 0x401f00, 0x7008);
	CHECK_EQ(frame(1)->status, PTW_FRAME_COMPLETED);
	/* The catch ended the unwinding: a later skip is no exception. */
	call(T1, &fb, 0x6f00, 0x401010);
	call(T1, &fc, 0x6e00, 0x401110);
	call(T1, &fa, 0x7000, 0x401f00);
	CHECK_STR(frame(6)->reason, "longjmp");
}

/* b tail-calls c (jmp): c reuses b's slot and return address. */
static void test_tail_call(void)
{
	setup();
	call(T1, &fa, 0x7000, 0x401f00);
	call(T1, &fb, 0x6f00, 0x401010);
	const struct ptw_frame *c = call(T1, &fc, 0x6f00, 0x401010);
	CHECK_EQ(frame(2)->status, PTW_FRAME_UNMATCHED);
	CHECK_STR(frame(2)->reason, "tail_call");
	CHECK(c && c->depth == 2 && c->parent == 1);
	ret_to(T1, 0x401010, 0x6f08);
	CHECK_EQ(frame(3)->status, PTW_FRAME_COMPLETED);
	CHECK_EQ(frame(1)->status, PTW_FRAME_OPEN);
	/* a return that is not ours (a jump to the return site): nothing */
	CHECK(ret_to(T1, 0x401010, 0x6f08) == NULL);
	CHECK_EQ(frame(1)->status, PTW_FRAME_OPEN);
}

static void test_thread_ends(void)
{
	/* pthread_exit inside b: b and a end with the thread */
	setup();
	call(T1, &fa, 0x7000, 0x401f00);
	call(T1, &fb, 0x6f00, 0x401010);
	struct ptw_event e = ev(PTW_EV_EXIT_CALL, T1);
	e.has_value = true;
	feed(e);
	e = ev(PTW_EV_THREAD_DEATH, T1);
	e.unwinding = 1;
	feed(e);
	CHECK_STR(frame(1)->reason, "thread_exit");
	CHECK_STR(frame(2)->reason, "thread_exit");

	/* cancelled inside a */
	setup();
	call(T2, &fa, 0x8000, 0x401f00);
	e = ev(PTW_EV_CANCEL_REQUEST, MAIN);
	e.pthread = PT2;
	feed(e);
	e = ev(PTW_EV_THREAD_DEATH, T2);
	e.unwinding = 1;
	feed(e);
	CHECK_STR(frame(1)->reason, "cancel");

	/* the process exits inside a (and b of the other thread) */
	setup();
	call(T1, &fa, 0x7000, 0x401f00);
	call(MAIN, &fb, 0x9000, 0x401010);
	e = ev(PTW_EV_LWP_EXIT, T1);
	e.exit_how = PTW_EXIT_KILLED;
	feed(e);
	e = ev(PTW_EV_PROCESS_EXIT, MAIN);
	feed(e);
	CHECK_STR(frame(1)->reason, "process_exit");
	CHECK_STR(frame(2)->reason, "process_exit");
	CHECK_EQ(frame(2)->thread_span, 1);

	/* detach with a frame open; exec; tracer died */
	static const struct {
		enum ptw_event_kind kind;
		const char *reason;
	} ends[] = { { PTW_EV_DETACHED, "detach" },
		     { PTW_EV_EXEC, "exec" },
		     { PTW_EV_TRACER_DIED, "tracer_died" } };
	for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++) {
		setup();
		call(T1, &fa, 0x7000, 0x401f00);
		e = ev(ends[i].kind, MAIN);
		e.other_tid = MAIN;
		feed(e);
		CHECK_EQ(frame(1)->status, PTW_FRAME_UNMATCHED);
		CHECK_STR(frame(1)->reason, ends[i].reason);
	}
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

/* The child found (preexisting), with routine's call under way at 0x7000. */
static void child_in_call(const struct ptw_location *routine)
{
	struct ptw_event e = child_ev(PTW_EV_PREEXISTING);
	e.other_tid = CHILD;
	feed(e);
	e = child_ev(PTW_EV_FRAME_ENTRY);
	e.routine = routine;
	e.sp = 0x7000;
	e.ret_addr = 0x401f00;
	feed(e);
}

/* -f: a fork child (process 1) with a call under way; its parent (process
 * 0) execs and exits: the child's frame is its own, it returns (issue 27:
 * any process's exit closed every process's frames). */
static void test_processes(void)
{
	setup();
	child_in_call(&fa);
	call(T1, &fb, 0x6f00, 0x401010); /* the parent's */
	struct ptw_event e = ev(PTW_EV_EXEC, MAIN);
	e.other_tid = MAIN;
	feed(e);
	CHECK_STR(frame(2)->reason, "exec");
	CHECK_EQ(frame(1)->status, PTW_FRAME_OPEN);
	e = ev(PTW_EV_PROCESS_EXIT, MAIN);
	feed(e);
	CHECK_EQ(frame(1)->status, PTW_FRAME_OPEN);
	e = child_ev(PTW_EV_FRAME_RETURN);
	e.ret_addr = 0x401f00;
	e.sp = 0x7008;
	e.has_value = true;
	feed(e);
	CHECK_EQ(frame(1)->status, PTW_FRAME_COMPLETED);
	/* the child's own exit closes what it left open */
	e = child_ev(PTW_EV_FRAME_ENTRY);
	e.routine = &fc;
	e.sp = 0x7000;
	e.ret_addr = 0x401f00;
	feed(e);
	feed(child_ev(PTW_EV_PROCESS_EXIT));
	CHECK_STR(frame(3)->reason, "process_exit");
	/* the root's detach lets go of every process */
	setup();
	child_in_call(&fa);
	feed(ev(PTW_EV_DETACHED, MAIN));
	CHECK_STR(frame(1)->reason, "detach");
}

/* Unreturned frames are kept, never dropped; none left open at the end. */
static void test_nothing_discarded(void)
{
	setup();
	for (int i = 0; i < 100; i++)
		call(T1, &fa, 0x7000 - 0x10 * (uint64_t)i, 0x401f00);
	ret_to(T1, 0x401f00, 0x7008); /* the outermost returns: 99 skipped */
	const struct ptw_frames *f = ptw_spans_frames(s);
	CHECK_EQ(ptw_frames_count(f), 100);
	size_t completed = 0, unmatched = 0;
	for (size_t i = 0; i < 100; i++) {
		const struct ptw_frame *fr = ptw_frames_get(f, i);
		completed += fr->status == PTW_FRAME_COMPLETED;
		unmatched += fr->status == PTW_FRAME_UNMATCHED;
	}
	CHECK_EQ(completed, 1);
	CHECK_EQ(unmatched, 99);
}

/* --open-timeout: an open frame is watched from its entry; one that crossed
 * the limit is marked and keeps the mark when it returns; frames that end
 * in time are watched no more. */
static void test_open_timeout(void)
{
	setup();
	struct ptw_timeouts *to = ptw_timeouts_new(5000);
	ptw_spans_set_timeouts(s, to);
	size_t threads = ptw_timeouts_count(to); /* the thread spans */
	call(T1, &fa, 0x7000000, 0x401f00);		/* {1}: slow */
	call(T2, &fb, 0x8000000, 0x401f00);		/* {2}: returns in time */
	call(T2, &fc, 0x8000000 - 0x40, 0x401150);	/* {3}: called by it, returns first */
	CHECK_EQ(ptw_timeouts_count(to), threads + 3);
	ret_to(T2, 0x401150, 0x8000000 - 0x40 + 8);	/* {3} returns */
	ret_to(T2, 0x401f00, 0x8000000 + 8);		/* {2} returns */
	CHECK_EQ(ptw_timeouts_count(to), threads + 1);
	struct ptw_timeout due;
	bool frame_due = false;
	while (ptw_timeouts_pop(to, now + 10000, &due)) {
		if (due.kind != PTW_SPAN_FRAME)
			continue;
		CHECK_EQ(due.id, 1);
		CHECK_EQ(due.tid, T1);
		frame_due = true;
		struct ptw_event e = ev(PTW_EV_SPAN_OPEN, T1);
		e.span_kind = PTW_SPAN_FRAME;
		e.span_id = due.id;
		e.has_value = true;
		e.value = 6000;
		e.state = "S read";
		const struct ptw_frame *fr = feed(e);
		CHECK(fr != NULL && fr->id == 1);
	}
	CHECK(frame_due);
	CHECK(frame(1)->open && frame(1)->open->set);
	CHECK_EQ(frame(1)->open->for_ns, 6000);
	CHECK_STR(frame(1)->open->state, "S read");
	CHECK(!frame(2)->open && !frame(3)->open);
	/* a second report of the same frame is ignored */
	struct ptw_event again = ev(PTW_EV_SPAN_OPEN, T1);
	again.span_kind = PTW_SPAN_FRAME;
	again.span_id = 1;
	CHECK(feed(again) == NULL);
	ret_to(T1, 0x401f00, 0x7000000 + 8);
	CHECK_EQ(frame(1)->status, PTW_FRAME_COMPLETED);
	CHECK(frame(1)->open != NULL);
	CHECK_EQ(frame(1)->open->after_ns > frame(1)->entry_ns, true);
	ptw_spans_free(s);
	s = NULL;
	ptw_timeouts_free(to);
}

int main(void)
{
	test_open_timeout();
	test_recursion();
	test_before_attach();
	test_longjmp();
	test_exception();
	test_exception_lands_at_return();
	test_tail_call();
	test_thread_ends();
	test_nothing_discarded();
	test_processes();
	ptw_spans_free(s);
	CHECK_DONE();
}
